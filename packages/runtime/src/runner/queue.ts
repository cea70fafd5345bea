import type { EventDraft } from '../log/event-log.js';
import type { ThreadState } from '../read-models/thread-state.js';

export type QueueChange = 'enqueued' | 'removed' | 'promoted' | 'dequeued' | 'reordered';

/** `queue.changed` carrying the whole new order, so the projection never has to infer it. */
export function queueChanged(
  thread: ThreadState,
  queue: ThreadState['queue'],
  change: QueueChange,
  turnId: string,
): EventDraft {
  return {
    type: 'queue.changed',
    threadId: thread.threadId,
    payload: {
      change,
      queuedTurnId: turnId,
      queuedTurns: queue.map((q, position) => ({
        queuedTurnId: q.turnId,
        turnId: q.turnId,
        position,
        source: q.source,
        enqueuedAt: q.enqueuedAt,
      })),
    },
  };
}
