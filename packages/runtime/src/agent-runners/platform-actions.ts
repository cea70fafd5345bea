import { ResultDataSchemas } from '@oar/runner-sdk';
import { awaitDecision } from './decisions.js';
import type { AuditTarget } from './run-session.js';
import { apiError, type RunSession, runnerStatus } from './run-session.js';

/**
 * Platform actions (spec §6.6 and §7.8): a runner asks the platform to do something outside the run — edit a
 * message, post to a channel. OAR is the runtime, not the platform: it decides and records, and the product
 * built on OAR carries an approved action out from the event stream (docs/runners.md "Platform actions").
 *
 * Off by default. A request needs all three: the manifest's capability `platform_api` with the action in its
 * `permissions.platform_api`, the binding's `policy.platformActions` naming it, and a person's approval — every
 * request is a durable decision (`oar respond`), never executed silently and never approved for the session.
 * The approved action is recorded as `run.status` (phase `runner_platform_action`, status `approved`) with its
 * action, target and payload (redacted like every fact).
 */

/** The most a request's target and payload may hold (their JSON): it is shown to a person and recorded. */
export const MAX_PLATFORM_ACTION_BYTES = 16 * 1024;

export interface PlatformActionAnswer {
  status: 'approved';
  action_id: string;
}

/** `platform.request_action`: waits for the decision; a denial, or an action not granted, is `unauthorized`. */
export async function requestPlatformAction(
  session: RunSession,
  payload: Record<string, unknown>,
  audit: AuditTarget,
  options: { outlivesRun?: boolean; signal?: AbortSignal } = {},
): Promise<PlatformActionAnswer> {
  const parsed = ResultDataSchemas['action.requested'].safeParse(payload);
  if (!parsed.success) throw apiError('invalid_argument', 'platform.request_action takes {action, target, payload}');
  const { action } = parsed.data;
  const target = parsed.data.target ?? {};
  const data = parsed.data.payload ?? {};
  audit.resource = action.slice(0, 128);
  audit.scope = 'platform';
  if (!session.access.platformActions.includes(action)) {
    throw apiError('unauthorized', `platform action ${action.slice(0, 128)} is not granted to this run`);
  }
  const size = Buffer.byteLength(JSON.stringify({ target, payload: data }));
  if (size > MAX_PLATFORM_ACTION_BYTES) {
    throw apiError(
      'payload_too_large',
      `a platform action of ${size} bytes; the limit is ${MAX_PLATFORM_ACTION_BYTES}`,
      {
        limit: MAX_PLATFORM_ACTION_BYTES,
      },
    );
  }
  const answer = await awaitDecision(
    session,
    {
      actionType: 'platform_action',
      toolName: `platform:${action}`,
      prompt: `Runner ${session.runnerId} asks the platform to ${action} on ${JSON.stringify(target).slice(0, 200)}`,
      decisions: ['approve', 'deny'],
      input: { action, target, payload: data },
      extra: { platformAction: { action, target } },
    },
    options,
  );
  if (answer.decision === 'deny') {
    throw apiError(
      'unauthorized',
      `platform action ${action} denied by ${answer.resolvedBy ?? 'user'}${answer.reason ? `: ${answer.reason}` : ''}`,
      { decision: 'deny', action_id: answer.actionId },
    );
  }
  await session.record(
    [
      runnerStatus(session, `runner platform action ${action}: approved`, {
        phase: 'runner_platform_action',
        status: 'approved',
        actionId: answer.actionId,
        action,
        target,
        payload: data,
      }),
    ],
    true,
  );
  return { status: 'approved', action_id: answer.actionId };
}

/**
 * An `action.requested` result: the same request, but the runner does not wait for it. The host does: the run's
 * end is recorded only once every such decision is answered or the deadline closes it (host.ts), and once what it
 * led to is recorded — the approved action, or `refused` (a warning) when it could not be asked or was denied.
 */
export function requestedAction(
  session: RunSession,
  data: Record<string, unknown>,
  refused: (message: string) => Promise<void>,
): void {
  const request = requestPlatformAction(session, data, {}, { outlivesRun: true }).then(
    () => undefined,
    (error: unknown) => {
      if ((error as { code?: string }).code === 'deadline_exceeded') session.requestedActionTimedOut = true;
      return refused((error as Error).message).catch(() => undefined);
    },
  );
  session.requestedActions.add(request);
  void request.finally(() => session.requestedActions.delete(request));
}
