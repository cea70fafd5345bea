import { oarError } from '@oar/protocol';
import type { EventDraft } from '../log/event-log.js';
import { isTerminalRunStatus, type ThreadView } from '../read-models/thread-state.js';
import { actionStatusChange } from '../runner/action-context.js';

/**
 * What a worker records when it takes over a thread whose previous tenure ended without finishing its tool calls
 * (a crash, a kill, a lease that ran out). Only the new lease holder calls this, after its claim — so nobody else
 * can still be recording results for these actions. A completed action is never re-run; an action that started
 * without a durable result is re-run only when its tool is idempotent, otherwise it becomes `lost` and the model
 * is told. Pending decisions stay pending.
 */
export function recoveryDrafts(thread: ThreadView): { drafts: EventDraft[]; rerun: number; lost: number } {
  const drafts: EventDraft[] = [];
  let rerun = 0;
  let lost = 0;
  for (const run of thread.runs.values()) {
    if (isTerminalRunStatus(run.status)) continue;
    for (const id of run.order) {
      const state = run.actions[id];
      const action = run.declaration.actions.find((a) => a.id === id);
      if (!state || !action || state.status !== 'running' || action.executor.type !== 'tool') continue;
      const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
      if (state.idempotent) {
        rerun++;
        drafts.push(actionStatusChange(ids, action, 'pending', { reason: 'restart: idempotent tool is re-run' }));
        continue;
      }
      lost++;
      const error = oarError(
        'lost',
        `the runtime stopped while "${action.executor.target}" was running; it may or may not have taken effect and was not re-run because it is not idempotent`,
      );
      drafts.push({
        type: 'tool.failed',
        ...ids,
        stepId: state.toolCallId,
        toolCallId: state.toolCallId,
        status: 'lost',
        payload: {
          toolName: action.executor.target,
          error,
          graphActionId: id,
          actionStatus: 'lost',
          observation: { id, status: 'lost', artifacts: [], error, ...(action.title ? { title: action.title } : {}) },
        },
      });
    }
  }
  return { drafts, rerun, lost };
}
