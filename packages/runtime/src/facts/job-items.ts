import type { JobCounts, OarError } from '@oar/protocol';
import { oarError } from '@oar/protocol';
import { OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { isFinishedJob, isSettledItem, type JobItemState, type JobState, jobCounts } from '../read-models/job.js';
import type { ThreadState, TurnState } from '../read-models/thread-state.js';
import { bothGuards, threadUnchanged, withdrawTurns } from './queue.js';
import type { FactWriter } from './writer.js';

/**
 * The facts that move a job along (docs/jobs.md), written in the same append as what caused them — the job's
 * creation, an item's turn end, a cancel — so a crash never leaves a slot unfilled or an item's end unrecorded:
 * each item runs as turns of its own thread, its turn's end records the item's outcome (a retry's turn with it),
 * and whatever slot that frees starts the next pending item. Every such append is guarded by the job being as read.
 */

/** A job the facts were computed from changed before they were written; the writer reads again and retries. */
export class JobChangedError extends OarRuntimeError {
  constructor(jobId: string) {
    super('job_changed', `job "${jobId}" changed while its facts were being recorded`, { retryable: true });
  }
}

/**
 * How many times a writer recomputes a job's facts that raced another writer before it gives up. Every item's end
 * changes the job, so with many items ending at once (a concurrency of 32 on PostgreSQL, seen in the fault trials)
 * writers keep invalidating each other's reads: each retry first waits a random moment (`jobRaceBackoff`), so the
 * writers spread out instead of colliding again, and the cap is far above what that leaves.
 */
export const MAX_JOB_RETRIES = 200;

/** The wait before a job write's `attempt`-th retry: random, up to 2^attempt ms, at most 50 ms. */
export function jobRaceBackoff(attempt: number): Promise<void> {
  const ms = Math.random() * Math.min(50, 2 ** attempt);
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Under the session lock, the job is as it was read (no other item's end or command came in between). */
export function jobUnchanged(job: JobState): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, job.sessionId, [{ kind: 'job', key: job.jobId }]);
    if (models.jobs.get(job.jobId)?.lastSequence !== job.lastSequence) throw new JobChangedError(job.jobId);
  };
}

const itemIds = (job: JobState, item: JobItemState) => ({
  jobId: job.jobId,
  jobItemId: `${job.jobId}/${item.index}`,
  threadId: item.threadId,
});

/** The wait before attempt `attempt` (2 or more): the policy's backoff, doubled for each attempt after the second. */
export function backoffMs(job: JobState, attempt: number): number {
  return Math.min(job.policy.maxBackoffMs, job.policy.backoffMs * 2 ** Math.max(0, attempt - 2));
}

/** An attempt of `item`: `job.item.started` and the turn on its thread (its input the thread's), held until `notBefore`. */
export function itemAttempt(job: JobState, item: JobItemState, input: string, notBefore?: Date): EventDraft[] {
  const turnId = newId('turn');
  const at = notBefore ? { notBefore: notBefore.toISOString() } : {};
  return [
    {
      type: 'job.item.started',
      ...itemIds(job, item),
      turnId,
      payload: { index: item.index, attempt: item.attempts + 1, threadId: item.threadId, turnId, ...at },
    },
    {
      type: 'turn.submitted',
      threadId: item.threadId,
      turnId,
      status: 'accepted',
      payload: { status: 'accepted', input, source: 'job', ...at },
    },
  ];
}

type ThreadLoader = Pick<FactWriter, 'loadThread'>;

/** An item's input, as its thread holds it. */
export const inputFrom =
  (engine: ThreadLoader, job: JobState) =>
  async (item: JobItemState): Promise<string> =>
    (await engine.loadThread(job.sessionId, item.threadId)).job?.input ?? '';

/**
 * Start pending items while fewer than the job's concurrency run (`items` as the facts before these leave them),
 * then end the job when nothing is left to run. Returns the drafts and the items as these drafts leave them.
 */
export async function fillSlots(
  job: JobState,
  items: JobItemState[],
  inputOf: (item: JobItemState) => Promise<string> | string,
): Promise<{ drafts: EventDraft[]; items: JobItemState[] }> {
  const drafts: EventDraft[] = [];
  const next = items.slice();
  let running = next.filter((i) => i.status === 'running' || i.status === 'retrying').length;
  for (const item of next) {
    if (running >= job.policy.concurrency) break;
    if (item.status !== 'pending') continue;
    drafts.push(...itemAttempt(job, item, await inputOf(item)));
    next[item.index] = { ...item, status: 'running', attempts: item.attempts + 1 };
    running += 1;
  }
  const counts = jobCounts({ items: next });
  drafts.push({ type: 'job.progress', jobId: job.jobId, payload: { counts } });
  if (counts.running === 0 && counts.pending === 0) drafts.push(jobEnd(job, counts));
  return { drafts, items: next };
}

function jobEnd(job: JobState, counts: JobCounts): EventDraft {
  return counts.failed > 0
    ? { type: 'job.failed', jobId: job.jobId, payload: { counts, reason: 'items_failed' } }
    : { type: 'job.completed', jobId: job.jobId, payload: { counts } };
}

/**
 * Stop the items still at work (a cancel, or a fail-fast failure): a running turn gets an interrupt request (its
 * worker ends it, cancelled; the job, over by then, records nothing of it), a retry's turn not started yet is
 * withdrawn. `except` is the thread whose turn is ending right now.
 */
export async function stopItems(
  engine: ThreadLoader,
  job: JobState,
  reason: string,
  except?: string,
): Promise<{ drafts: EventDraft[]; guard?: AppendGuard }> {
  const drafts: EventDraft[] = [];
  let guard: AppendGuard | undefined;
  for (const item of job.items) {
    if (isSettledItem(item) || !item.turnId || item.threadId === except) continue;
    const thread = await engine.loadThread(job.sessionId, item.threadId);
    const turn = thread.turns.find((t) => t.turnId === item.turnId);
    if (!turn) continue;
    if (thread.activeTurnId === turn.turnId) {
      drafts.push({
        type: 'thread.updated',
        threadId: thread.threadId,
        payload: { interrupt: { turnId: turn.turnId, reason } },
      });
    } else {
      drafts.push(...withdrawTurns(thread, [turn], oarError('interrupted', reason)));
    }
    guard = bothGuards(guard, threadUnchanged(thread));
  }
  return { drafts, ...(guard ? { guard } : {}) };
}

/** How an item's turn ended. */
export interface ItemTurnEnd {
  answer?: string;
  error?: OarError;
  cancelled?: boolean;
}

/**
 * The job's facts for the end of a job item's turn: the item's outcome (a retry after its backoff while attempts
 * are left and the failure is not an interrupt), the slots it frees filled, and the job's end when it was the last —
 * or, under a fail-fast policy, the job failed and its other items stopped. Undefined when the thread is no job's
 * item, the job is over, or the turn is not the item's current attempt (a turn someone submitted to it by hand).
 */
export async function jobItemEnd(
  engine: Pick<FactWriter, 'loadJob' | 'loadThread'>,
  thread: ThreadState,
  turn: TurnState,
  end: ItemTurnEnd,
  now = new Date(),
): Promise<{ drafts: EventDraft[]; guard: AppendGuard } | undefined> {
  if (!thread.job) return undefined;
  const job = await engine.loadJob(thread.sessionId, thread.job.jobId);
  const item = job?.items[thread.job.index];
  if (!job || !item || isFinishedJob(job) || item.turnId !== turn.turnId || isSettledItem(item)) return undefined;
  const ref = { index: item.index, attempt: item.attempts, threadId: item.threadId, turnId: turn.turnId };
  const items = job.items.slice();
  const drafts: EventDraft[] = [];
  const guard = jobUnchanged(job);
  if (!end.error) {
    const summary = (end.answer ?? '').slice(0, 500);
    drafts.push({
      type: 'job.item.completed',
      ...itemIds(job, item),
      turnId: turn.turnId,
      payload: { ...ref, summary },
    });
    items[item.index] = { ...item, status: 'completed' };
  } else {
    // An interrupt is a person's (or the job's own) decision, and a spent budget stays spent: neither is a fault
    // another attempt could get past.
    const retry = item.attemptsLeft > 0 && !end.cancelled && end.error.code !== 'budget_exceeded';
    drafts.push({
      type: 'job.item.failed',
      ...itemIds(job, item),
      turnId: turn.turnId,
      payload: { ...ref, error: end.error, willRetry: retry },
    });
    if (retry) {
      const notBefore = new Date(now.getTime() + backoffMs(job, item.attempts + 1));
      drafts.push(...itemAttempt(job, item, thread.job.input, notBefore));
      items[item.index] = { ...item, status: 'retrying', attempts: item.attempts + 1 };
    } else {
      items[item.index] = { ...item, status: 'failed' };
      if (job.policy.failFast) {
        const stopped = await stopItems(
          engine,
          job,
          `job ${job.jobId} failed: item ${item.index} failed`,
          item.threadId,
        );
        const counts = jobCounts({ items: items.map((i) => (isSettledItem(i) ? i : { ...i, status: 'cancelled' })) });
        drafts.push(...stopped.drafts, {
          type: 'job.failed',
          jobId: job.jobId,
          payload: { counts, reason: 'fail_fast' },
        });
        return { drafts, guard: bothGuards(guard, stopped.guard) as AppendGuard };
      }
    }
  }
  drafts.push(...(await fillSlots(job, items, inputFrom(engine, job))).drafts);
  return { drafts, guard };
}
