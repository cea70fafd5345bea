import { queueChanged, ThreadChangedError, turnStillNext } from '../facts/queue.js';
import { subagentStatus } from '../facts/subagent-status.js';
import { taskAttemptStarted } from '../facts/task-end.js';
import type { EventDraft } from '../log/draft.js';
import { nextTurn, type ThreadView } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';
import { AGAIN, type NextStep, waitFor } from './next-step.js';

/** Turn start: the thread has no active turn, so the first accepted or queued one starts (or the thread is idle). */
export async function startNextTurn(engine: Engine, thread: ThreadView): Promise<NextStep> {
  const { sessionId, threadId } = thread;
  const next = nextTurn(thread);
  if (!next) return waitFor('idle');
  const task = thread.turns.find((t) => t.turnId === next.turnId)?.task;
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
    // A task's turn (start_task) is its attempt: the task runs from here.
    ...(task ? taskAttemptStarted({ threadId, turnId: next.turnId }, task) : []),
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
    // The dequeue writes a queue computed from this read: a concurrent submit/remove/promote must not be lost, and a
    // turn paused or withdrawn meanwhile (its task's) must not start.
    await engine.append(sessionId, drafts, { guard: turnStillNext(thread, next.turnId) });
  } catch (error) {
    if (error instanceof ThreadChangedError) return AGAIN; // re-read and decide again
    throw error;
  }
  return AGAIN;
}
