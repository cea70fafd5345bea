import type { EventDraft } from '../log/draft.js';
import type { ThreadState } from '../read-models/thread-state.js';
import { reportsTo } from './turn-end.js';

/**
 * What a sub-agent's turns tell its parent thread. A sub-agent is a child thread of a model's delegation (`parent`:
 * its first turn answers the delegating action, facts/turn-end.ts) or of `spawn_subagent` (`spawnedBy`); either
 * way each of its turns shows in the parent's list of sub-agents as it starts, waits and ends.
 */

/** `subagent.status` on the parent thread, for a sub-agent's turn that starts (`running`) or waits (`blocked`). */
export function subagentStatus(
  thread: ThreadState,
  turnId: string,
  status: 'running' | 'blocked',
  detail: string,
): EventDraft[] {
  const parent = reportsTo(thread);
  if (!parent) return [];
  const delegation = thread.parent && thread.turns[0]?.turnId === turnId ? thread.parent : undefined;
  return [
    {
      type: 'subagent.status',
      threadId: parent.threadId,
      ...(delegation ? { turnId: delegation.turnId, runId: delegation.runId } : {}),
      subagentId: parent.subagentId,
      payload: { status, detail, childThreadId: thread.threadId, ...(delegation ? {} : { childTurnId: turnId }) },
    },
  ];
}
