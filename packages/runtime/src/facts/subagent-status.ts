import type { EventDraft } from '../log/draft.js';
import type { ThreadState } from '../read-models/thread-state.js';

/**
 * `subagent.status` on the parent thread, for the progress of a child thread's delegated turn (its first). Nothing
 * for a main thread, or for later turns someone submits to the child after the delegation ended.
 */
export function subagentStatus(
  thread: ThreadState,
  turnId: string,
  status: 'running' | 'blocked',
  detail: string,
): EventDraft[] {
  const parent = thread.parent;
  if (!parent || thread.turns[0]?.turnId !== turnId) return [];
  return [
    {
      type: 'subagent.status',
      threadId: parent.threadId,
      turnId: parent.turnId,
      runId: parent.runId,
      subagentId: parent.subagentId,
      payload: { status, detail, childThreadId: thread.threadId },
    },
  ];
}
