import type { EventFields, FullOutput, OarError } from '@oar/protocol';
import type { EventDraft } from '../log/draft.js';
import { type ActionScope, endObservation, errorOutput, toolIds } from './action.js';

/**
 * The three facts of a side effect — a tool call, a pipeline's step, a service call, a runner's proxied call — built
 * here and nowhere else: its start (recorded only by the bracket, scheduler/bracket.ts), its result and its failure.
 * What the payloads carry differs by caller (an action's end carries its observation, a step names its pipeline, a
 * runner's call its run); the facts' shape and correlation do not.
 */

/** The correlation ids of a call's facts: its thread and turn, its run and task when it has one, its step and call. */
export interface ToolCallIds {
  threadId: string;
  turnId: string;
  taskId?: string | undefined;
  runId?: string | undefined;
  stepId: string;
  toolCallId: string;
}

type Fields<T extends 'tool.started' | 'tool.result' | 'tool.failed'> = EventFields<T>;

/** How a call ended when it failed: the fact's own status (absent: failed). */
export type ToolFailedStatus = NonNullable<Fields<'tool.failed'>['status']>;

/** A call's start: what runs, which attempt, under which idempotency key. */
export function toolStarted(ids: ToolCallIds, payload: Fields<'tool.started'>['payload']): EventDraft {
  return { type: 'tool.started', ...ids, payload };
}

/**
 * The confinement a file-changing call runs in (`sandbox.applied`), recorded with its start: the runtime's own
 * confined opens (tools/workspace.ts) keep it inside the workspace root — no symlink or hard link out, no special
 * file — which is the file tools' sandbox, as bubblewrap is a command's.
 */
export function workspaceConfinement(
  ids: ToolCallIds,
  call: { toolName: string; root: string; paths: readonly string[] },
): EventDraft {
  const profile = { profile: 'workspace', network: false, writable: [call.root], hidden: [] as string[] };
  return {
    type: 'sandbox.applied',
    ...ids,
    payload: { ...profile, toolName: call.toolName, paths: [...call.paths], sandboxProfile: { ...profile } },
  };
}

/** A call's result: its stored output and, when it ends an action, the observation the model gets. */
export function toolResult(ids: ToolCallIds, payload: Fields<'tool.result'>['payload']): EventDraft {
  return { type: 'tool.result', ...ids, payload };
}

/** A call that ended without a result (`status`: cancelled by an interrupt, lost in a crash; absent: failed). */
export function toolFailed(
  ids: ToolCallIds,
  payload: Fields<'tool.failed'>['payload'],
  status?: ToolFailedStatus,
): EventDraft {
  return { type: 'tool.failed', ...ids, ...(status ? { status } : {}), payload };
}

/**
 * A tool call that ended without a result: `tool.failed`, which ends its action (`status`, default failed) with the
 * error as the observation. A given `status` is also the event's own status.
 */
export function toolFailedEvent(
  ctx: ActionScope,
  failure: {
    toolName: string;
    error: OarError;
    durationMs: number;
    status?: 'failed' | 'cancelled';
    /** What the model sees of the failure besides the error line (a business CLI's JSON projection). */
    text?: string;
    /** Loose extra payload fields (a business CLI's `toolAgentOutput`). */
    extra?: Record<string, unknown>;
  },
): EventDraft {
  const { toolName, error, durationMs, status } = failure;
  const actionStatus = status ?? 'failed';
  const output: FullOutput = { ...errorOutput(error), ...(failure.text !== undefined ? { text: failure.text } : {}) };
  return toolFailed(
    toolIds(ctx),
    {
      toolName,
      error,
      durationMs,
      graphActionId: ctx.action.id,
      actionStatus,
      ...failure.extra,
      observation: endObservation(ctx, actionStatus, output),
    },
    status,
  );
}
