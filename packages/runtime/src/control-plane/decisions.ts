import {
  ACTION_DECISIONS,
  type ActionDecision,
  isReconcileDecision,
  oarError,
  RECONCILE_ACTION_TYPE,
  type RuntimeEvent,
} from '@oar/protocol';
import { type PermissionRequest, PermissionRequestSchema } from '../config/permission-request.js';
import { actionStatusChange } from '../facts/action.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { resolutionOf } from '../log/decision-log.js';
import type { EventDraft } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { grantFor } from '../policy/request.js';
import { threadViews } from '../read-models/project.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { CommandContext } from './command-context.js';
import { type RespondActionInput, reconcileAction } from './reconcile.js';

/** The `respond_action` command: a human's (or a client's) answer to a pending decision. */

export type { RespondActionInput } from './reconcile.js';

/** Resolve a pending human or policy decision: the only way a paused action continues. */
export async function respondAction(
  ctx: CommandContext,
  input: RespondActionInput,
): Promise<{ threadId: string; decision: ActionDecision; turnId?: string; runId?: string }> {
  if (!ACTION_DECISIONS.includes(input.decision)) {
    throw new OarRuntimeError('invalid_decision', `decision must be one of ${ACTION_DECISIONS.join(', ')}`, {
      details: { decision: input.decision },
    });
  }
  const models = await ctx.log.allReadModels(input.sessionId);
  if (!models.session) throw notFound('session', input.sessionId);
  const views = threadViews(models);
  const thread = views.find((t) => t.pending.some((p) => p.actionId === input.actionId));
  const pending = thread?.pending.find((p) => p.actionId === input.actionId);
  if (!thread || !pending) {
    // A lost action's question: answered without holding the thread (control-plane/reconcile.ts).
    const lost = views.find((t) => t.unreconciled?.some((u) => u.actionId === input.actionId));
    const request = lost?.unreconciled?.find((u) => u.actionId === input.actionId);
    if (lost && request) return reconcileAction(ctx, models, lost, request, input);
    throw await notPending(ctx, input.sessionId, input.actionId, views);
  }
  if (isReconcileDecision(input.decision)) {
    throw new OarRuntimeError(
      'invalid_decision',
      `"${input.decision}" answers whether a lost action took effect; this request is a ${pending.actionType}`,
      { details: { decision: input.decision } },
    );
  }
  // A runner run's question has no graph action: the live run waiting for it reads the answer (agent-runners/decisions.ts).
  const run = pending.runnerId ? undefined : thread.runs.get(pending.runId);
  const action = run?.declaration.actions.find((a) => a.id === pending.graphActionId);
  if (!pending.runnerId && (!run || !action)) throw notFound('action', input.actionId);
  if (pending.actionType !== 'tool_approval' && input.decision === 'approve_for_session') {
    throw new OarRuntimeError('invalid_decision', 'approve_for_session applies to tool approvals, not to questions');
  }
  if (pending.actionType !== 'user_input' && pending.decisions && !pending.decisions.includes(input.decision)) {
    // An ask rule asks every time: it offers approve|deny, and a session grant would never be consulted.
    throw new OarRuntimeError(
      'invalid_decision',
      `this request offers ${pending.decisions.join(', ')}; "${input.decision}" is not one of them`,
      { details: { decision: input.decision, offered: pending.decisions } },
    );
  }
  const taskId = run?.taskId ?? pending.taskId;
  const ids = {
    threadId: thread.threadId,
    turnId: pending.turnId,
    runId: pending.runId,
    ...(taskId ? { taskId } : {}),
  };
  const drafts: EventDraft[] = [
    {
      type: 'action.resolved',
      ...ids,
      actionId: input.actionId,
      payload: {
        decision: input.decision,
        ...(input.reason ? { reason: input.reason } : {}),
        ...(input.payload ? { payload: input.payload } : {}),
        resolvedBy: input.resolvedBy ?? 'user',
        graphActionId: pending.graphActionId,
      },
    },
  ];
  if (pending.actionType === 'tool_approval') {
    // A session grant is exactly the request the human was shown, as recorded when it was asked — not the
    // call's paths worked out again now (a symlink created since would widen it), nor another executor's.
    const asked =
      input.decision === 'approve_for_session'
        ? await askedRequest(ctx, input.sessionId, thread.threadId, pending.turnId, input.actionId)
        : undefined;
    drafts.push({
      type: 'permission.resolved',
      ...ids,
      stepId: pending.toolCallId ?? `${pending.runId}.${pending.graphActionId}`,
      toolCallId: pending.toolCallId ?? `${pending.runId}.${pending.graphActionId}`,
      actionId: input.actionId,
      payload: {
        decision: input.decision === 'deny' ? 'deny' : 'allow',
        toolName: pending.toolName,
        source: 'human',
        grantScope: input.decision === 'approve_for_session' ? 'session' : 'once',
        ...(asked ? { grant: grantFor(asked.request, asked.workspaceRoot) } : {}),
        ...(input.reason ? { reason: input.reason } : {}),
      },
    });
  }
  if (input.decision === 'deny' && run && action) {
    const what = pending.actionType === 'user_input' ? 'the user declined' : 'permission denied by the user';
    const error = oarError(
      pending.actionType === 'user_input' ? 'declined' : 'permission_denied',
      `${what}${input.reason ? `: ${input.reason}` : ''}`,
    );
    const observation = { id: action.id, status: 'denied' as const, artifacts: [], error };
    drafts.push(
      actionStatusChange(
        { ...ids, taskId: run.taskId },
        action,
        'denied',
        { observation: { ...observation, ...(action.title ? { title: action.title } : {}) } },
        'failed',
      ),
    );
  }
  if (taskId) drafts.push({ type: 'task.resumed', ...ids, taskId, payload: { reason: `decision ${input.decision}` } });
  // Resolve at most once: a concurrent respond_action for the same decision may have committed since we read it.
  await ctx.append(input.sessionId, drafts, {
    guard: async (tx) => {
      const current = await loadReadModels(tx, input.sessionId, [{ kind: 'thread', key: thread.threadId }]);
      if (!current.threads.get(thread.threadId)?.pending.some((p) => p.actionId === input.actionId)) {
        throw notFound('action', input.actionId);
      }
    },
  });
  return { threadId: thread.threadId, decision: input.decision };
}

/**
 * Why a decision cannot be taken: it was resolved already (how, by whom, when), or no pending request has this
 * id (the pending ones are listed, so a typo is one look away from the right id).
 */
async function notPending(
  ctx: CommandContext,
  sessionId: string,
  actionId: string,
  views: ThreadView[],
): Promise<OarRuntimeError> {
  const event = await resolutionOf(ctx.log.store.db, sessionId, actionId);
  if (event) {
    const payload = event.payload as { decision?: string; resolvedBy?: string };
    return new OarRuntimeError(
      'decision_already_resolved',
      `decision "${actionId}" was already resolved: ${payload.decision} by ${payload.resolvedBy ?? 'user'} at ${event.timestamp}`,
      {
        details: {
          actionId,
          decision: payload.decision,
          resolvedBy: payload.resolvedBy,
          resolvedAt: event.timestamp,
          sequence: event.sequence,
        },
      },
    );
  }
  const open = views.flatMap((t) => [
    ...t.pending.map((p) => ({
      actionId: p.actionId,
      threadId: t.threadId,
      actionType: p.actionType,
      prompt: p.prompt,
    })),
    ...(t.unreconciled ?? []).map((u) => ({
      actionId: u.actionId,
      threadId: t.threadId,
      actionType: RECONCILE_ACTION_TYPE,
      prompt: u.prompt,
    })),
  ]);
  const list = open.length > 0 ? `pending: ${open.map((p) => p.actionId).join(', ')}` : 'nothing is pending';
  return new OarRuntimeError('action_not_found', `no pending decision has id "${actionId}" (${list})`, {
    details: { actionId, pending: open },
  });
}

/**
 * The permission request a pending tool approval asked about: the executor and the touched paths recorded in its
 * `action.required` (`payload.scope`). A log without them (hand-edited, imported) cannot be granted for the
 * session: nobody can say what the human saw.
 */
async function askedRequest(
  ctx: CommandContext,
  sessionId: string,
  threadId: string,
  turnId: string,
  actionId: string,
): Promise<{ request: PermissionRequest; workspaceRoot?: string }> {
  const rows = await ctx.log.store.db
    .selectFrom('oar_events')
    .select('body')
    .where('session_id', '=', sessionId)
    .where('thread_id', '=', threadId)
    .where('turn_id', '=', turnId)
    .where('type', '=', 'action.required')
    .execute();
  for (const row of rows) {
    const event = JSON.parse(row.body) as RuntimeEvent & { actionId?: string };
    if (event.actionId !== actionId) continue;
    const scope = (
      event.payload as {
        scope?: { executor?: unknown; paths?: unknown; workspaceRoot?: unknown; operation?: unknown };
      }
    ).scope;
    const request = PermissionRequestSchema.safeParse({
      executor: scope?.executor,
      paths: scope?.paths,
      ...(typeof scope?.operation === 'string' ? { operation: scope.operation } : {}),
    });
    // The workspace it was asked in (a question recorded before grants were scoped names none).
    const root = typeof scope?.workspaceRoot === 'string' && scope.workspaceRoot ? scope.workspaceRoot : undefined;
    if (request.success) return { request: request.data, ...(root ? { workspaceRoot: root } : {}) };
  }
  throw new OarRuntimeError(
    'invalid_decision',
    `decision "${actionId}" does not record what it asked about, so it cannot be approved for the session; approve it once`,
    { details: { actionId } },
  );
}
