import { type ActionDecision, isReconcileDecision, RECONCILE_DECISIONS, type UnreconciledAction } from '@oar/protocol';
import { threadUnchanged } from '../facts/queue.js';
import { reconcileAnswer, stillUnreconciled } from '../facts/reconcile.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import type { ReadModels } from '../read-models/project.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { CommandContext } from './command-context.js';
import { graphTurn } from './graph-turn.js';

/**
 * The input of `respond_action`: an answer to a pending decision, or to a lost action's question (then `payload` is
 * recorded as the evidence). Defined beside the lower of the two commands that take it, so that decisions.ts
 * imports it without a cycle.
 */
export interface RespondActionInput {
  sessionId: string;
  /** The decision's id: the `actionId` of its `action.required` event. */
  actionId: string;
  decision: ActionDecision;
  reason?: string;
  payload?: Record<string, unknown>;
  resolvedBy?: string;
}

/**
 * `respond_action` on a lost action (docs/reliability.md "Reconciling a lost action"): a person says whether it took
 * effect. `happened` ends it completed, `not_happened` failed (`not_happened`), each with who said so and why;
 * `retry` runs it again, as a new call with a new idempotency key, in a turn of its own whose results the model sees.
 * The original stays `lost` on record either way: what the runtime knew then does not change.
 */
export async function reconcileAction(
  ctx: CommandContext,
  models: ReadModels,
  thread: ThreadView,
  request: UnreconciledAction,
  input: RespondActionInput,
): Promise<{ threadId: string; decision: ActionDecision; turnId?: string; runId?: string }> {
  const { decision } = input;
  if (!isReconcileDecision(decision)) {
    throw new OarRuntimeError(
      'invalid_decision',
      `"${input.actionId}" asks whether a lost action took effect: answer ${RECONCILE_DECISIONS.join(', ')} (not "${decision}")`,
      { details: { decision, offered: [...RECONCILE_DECISIONS] } },
    );
  }
  const run = thread.runs.get(request.runId);
  const action = run?.declaration.actions.find((a) => a.id === request.graphActionId);
  if (!run || !action) throw notFound('action', input.actionId);
  const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
  const drafts: EventDraft[] = reconcileAnswer(request, ids, action, {
    decision,
    resolvedBy: input.resolvedBy ?? 'user',
    ...(input.reason ? { reason: input.reason } : {}),
    ...(input.payload ? { evidence: input.payload } : {}),
  });
  const guards: AppendGuard[] = [stillUnreconciled(input.sessionId, thread.threadId, input.actionId)];
  let rerun: { turnId: string; runId: string } | undefined;
  if (decision === 'retry' && (thread.parent || thread.toolWorker)) {
    // A sub-agent's (or tool worker's) thread runs only as its parent's delegation: a turn of its own would run
    // unattached. The parent's model can declare the work again.
    throw new OarRuntimeError(
      'invalid_decision',
      `"${input.actionId}" was lost in a sub-agent's thread: answer happened or not_happened (retry runs only on a session's main thread)`,
      { details: { decision, offered: ['happened', 'not_happened'] } },
    );
  }
  if (decision === 'retry') {
    // Alone and with nothing to wait for: what it depended on ran in its own graph, and its input is literal.
    const title = `Retry of ${action.title ?? action.id} (lost after a crash)`;
    const taskId = newId('task');
    const turn = graphTurn(models, thread, { input: `${title}.`, source: 'reconcile', taskId });
    const taskIds = { threadId: thread.threadId, turnId: turn.turnId, taskId, runId: turn.runId };
    const declaration = { ...run.declaration, title, actions: [{ ...action, dependsOn: [] }] };
    drafts.push(
      ...turn.started,
      { type: 'task.created', ...taskIds, payload: { title, objective: title, taskKind: 'action_graph' } },
      { type: 'task.attempt.started', ...taskIds, payload: { attempt: 1, status: 'running' } },
      turn.declared({ title, declaration, retryOf: run.runId, reconciles: input.actionId }),
    );
    guards.push(threadUnchanged(thread));
    rerun = { turnId: turn.turnId, runId: turn.runId };
  }
  await ctx.append(input.sessionId, drafts, {
    guard: async (tx) => {
      for (const guard of guards) await guard(tx);
    },
  });
  return { threadId: thread.threadId, decision, ...rerun };
}
