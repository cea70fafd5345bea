import { queueChanged, ThreadChangedError, threadUnchanged } from '../facts/queue.js';
import { subagentStatus } from '../facts/subagent-status.js';
import type { EventDraft } from '../log/draft.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';
import { AGAIN, type NextStep, waitFor } from './next-step.js';

/** Turn start: the thread has no active turn, so the first accepted or queued one starts (or the thread is idle). */
export async function startNextTurn(engine: Engine, thread: ThreadView): Promise<NextStep> {
  const { sessionId, threadId } = thread;
  // An accepted turn was accepted before anything was queued behind it, so it starts first.
  const next = thread.turns.find((t) => t.status === 'accepted') ?? thread.queue[0];
  if (!next) return waitFor('idle');
  const drafts: EventDraft[] = [
    // The turn runs with the binding current now: a later binding update applies to later turns only.
    {
      type: 'turn.started',
      threadId,
      turnId: next.turnId,
      status: 'running',
      payload: { bindingHash: engine.bindingHash },
    },
    ...subagentStatus(thread, next.turnId, 'running', 'the sub-agent started its turn'),
    {
      type: 'thread.updated',
      threadId,
      status: 'running',
      payload: { status: 'running', activeTurnId: next.turnId },
    },
    ...(thread.queue.some((q) => q.turnId === next.turnId)
      ? [
          queueChanged(
            thread,
            thread.queue.filter((q) => q.turnId !== next.turnId),
            'dequeued',
            next.turnId,
          ),
        ]
      : []),
  ];
  try {
    // The dequeue writes a queue computed from this read: a concurrent submit/remove/promote must not be lost.
    await engine.append(sessionId, drafts, { guard: threadUnchanged(thread) });
  } catch (error) {
    if (error instanceof ThreadChangedError) return AGAIN; // re-read and decide again
    throw error;
  }
  return AGAIN;
}
