import type { OarError } from '@oar/protocol';
import { OarRuntimeError } from '../kernel/errors.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { isTerminalActionStatus, nextTurn, type ThreadState } from '../read-models/thread-state.js';

export type QueueChange = 'enqueued' | 'removed' | 'promoted' | 'dequeued';

/**
 * A thread is busy while a turn runs, waits in its queue, or was accepted and is about to start — a task's turn held
 * by its dependencies or a pause is none of these: it does not hold the thread (read-models/thread-state.ts `isHeld`).
 */
export function threadBusy(thread: ThreadState): boolean {
  return thread.activeTurnId !== undefined || nextTurn(thread) !== undefined;
}

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

/** The thread changed between reading it and writing events computed from it; the command re-reads and retries. */
export class ThreadChangedError extends OarRuntimeError {
  constructor(threadId: string) {
    super('thread_changed', `thread "${threadId}" changed while the command was being prepared`, { retryable: true });
  }
}

/** What queue-dependent writes are computed from: the active turn, the queue order and the known turns. */
function queueBasis(thread: ThreadState): string {
  return JSON.stringify([
    thread.activeTurnId ?? null,
    thread.status === 'closed',
    thread.queue.map((q) => q.turnId),
    thread.turns.map((t) => t.turnId),
    // A rollback under way holds the thread: one started meanwhile changes what may start or be rolled back.
    thread.rollback?.rollbackId ?? null,
  ]);
}

/**
 * A guard for an append computed from `thread` (a new queue order, accepted vs queued, a dequeue): under the session
 * row lock, the thread's queue basis must be what the writer read. Otherwise two concurrent writers would each write
 * a queue computed from the same stale order and one of them would silently drop the other's turn.
 */
export function threadUnchanged(thread: ThreadState): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, thread.sessionId, [{ kind: 'thread', key: thread.threadId }]);
    const current = models.threads.get(thread.threadId);
    if (!current || queueBasis(current) !== queueBasis(thread)) throw new ThreadChangedError(thread.threadId);
  };
}

/**
 * A guard for starting `turnId`: under the session row lock, the thread is as read and the turn is still the one to
 * start next — not withdrawn, held by a pause or a dependency, or ended since (its task cancelled in between).
 */
export function turnStillNext(thread: ThreadState, turnId: string): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, thread.sessionId, [{ kind: 'thread', key: thread.threadId }]);
    const current = models.threads.get(thread.threadId);
    if (!current || queueBasis(current) !== queueBasis(thread) || nextTurn(current)?.turnId !== turnId) {
      throw new ThreadChangedError(thread.threadId);
    }
  };
}

/** Run a read-compute-append command again while a concurrent write changed its thread first (bounded). */
export async function retryOnThreadChange<T>(command: () => Promise<T>, attempts = 25): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await command();
    } catch (error) {
      if (!(error instanceof ThreadChangedError) || attempt >= attempts) throw error;
    }
  }
}

/** A guard for ending a turn: it must still be the thread's active turn (two enders cannot both end it). */
export function turnStillActive(thread: ThreadState, turnId: string): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, thread.sessionId, [{ kind: 'thread', key: thread.threadId }]);
    if (models.threads.get(thread.threadId)?.activeTurnId !== turnId) throw new ThreadChangedError(thread.threadId);
  };
}

/** The parent's delegating action ended (an interrupt) between reading it and writing the child's result to it. */
export class DelegationEndedError extends ThreadChangedError {}

/**
 * A guard for writing a child's result to its parent: the parent's delegating action must still be open, or the
 * result would be a second ending of that action (the projection refuses it as a contradiction).
 */
export function delegationStillOpen(
  sessionId: string,
  parent: { threadId: string; runId: string; actionId: string },
): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, sessionId, [{ kind: 'run', key: parent.runId }]);
    const status = models.runs.get(parent.runId)?.actions[parent.actionId]?.status;
    if (status === undefined || isTerminalActionStatus(status)) throw new DelegationEndedError(parent.threadId);
  };
}

/** Both guards, in order (either may refuse the append). */
export function bothGuards(first: AppendGuard | undefined, second: AppendGuard | undefined): AppendGuard | undefined {
  if (!first || !second) return first ?? second;
  return async (tx) => {
    await first(tx);
    await second(tx);
  };
}

/**
 * Withdraw turns of `thread` that have not started: one in the queue leaves the queue (which ends it, cancelled),
 * an accepted one ends cancelled with `error`. The running turn and ended ones are left alone. Written under
 * `threadUnchanged(thread)`: the queue is computed from this read.
 */
export function withdrawTurns(
  thread: ThreadState,
  turns: readonly ThreadState['turns'][number][],
  error: OarError,
): EventDraft[] {
  const drafts: EventDraft[] = [];
  let queue = thread.queue;
  for (const turn of turns) {
    if (turn.turnId === thread.activeTurnId) continue;
    if (turn.status === 'queued' && queue.some((q) => q.turnId === turn.turnId)) {
      queue = queue.filter((q) => q.turnId !== turn.turnId);
      drafts.push(queueChanged(thread, queue, 'removed', turn.turnId));
    } else if (turn.status === 'accepted') {
      drafts.push({
        type: 'turn.failed',
        threadId: thread.threadId,
        turnId: turn.turnId,
        status: 'cancelled',
        payload: { error },
      });
    }
  }
  return drafts;
}
