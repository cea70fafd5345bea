import { questionsAfter } from '../log/decision-log.js';
import type { EventLog } from '../log/event-log.js';
import type { Notifier } from '../log/notifier.js';
import type { ThreadState } from '../read-models/thread-state.js';
import { isStoreFault } from '../store/faults.js';
import type { Store } from '../store/store.js';
import { type UnsettledThread, unsettledThreads } from '../worker/unsettled.js';
import type { Worker } from '../worker/worker.js';

/** What waiting for a session to settle (`Runtime.settled`) looks at. */
export interface SettleDeps {
  worker: Worker | undefined;
  store: Store;
  log: EventLog;
  notifier: Notifier;
  closed(): boolean;
}

/**
 * What `settled(…, {orAsked})` watches: the runner questions already seen (`known`), and how far the log was looked
 * at. Kept by the caller across calls, so each look reads only what is new.
 */
export interface AskedWatch {
  known: Set<string>;
  cursor: number;
}

/** How many consecutive failed looks (200 ms apart) `settled` rides out before it reports the store fault. */
const SETTLE_OUTAGES = 25;

/**
 * Resolves when nothing of the session is in progress anywhere: no thread held by a worker (of this process or
 * another) and none with work that a worker should pick up — everything finished or waits for a decision.
 * Without a session id: when this process's worker drives nothing.
 *
 * Waiting claims nothing, with two exceptions, both threads this process's worker answers for and that would
 * otherwise wait for a lease to run out, or forever:
 * - a thread whose lease this worker still holds without driving it (the release failed on a store fault):
 *   nobody else may drive it before the lease runs out, and only this worker can end its own tenure sooner;
 * - a thread with work nobody holds, in a session this worker drives, that the worker has not taken up on its
 *   own: work committed before it started listening (`resumeOnStart: false`), or whose notification was spent
 *   on a look the store failed. Waiting for such a session is asking for it to be seen through.
 * A thread with nothing to do is never claimed — one that waits for a decision and has had only inert facts
 * since its last driver left it (state set with `setState`) counts as settled (`worker/unsettled.ts`).
 */
export async function settled(
  rt: SettleDeps,
  sessionId?: string,
  options: { orAsked?: AskedWatch } = {},
): Promise<void> {
  const outages = { count: 0 };
  const stop = new AbortController();
  // A runner run asks its questions while it runs (docs/runners.md "Decisions"): whoever answers them must hear
  // of one before the session settles, or the run would wait for an answer nobody is asked for.
  const asked =
    sessionId !== undefined && options.orAsked ? askedBy(rt, sessionId, options.orAsked, stop.signal) : undefined;
  try {
    for (;;) {
      const driving = Promise.allSettled(rt.worker?.driving(sessionId) ?? []);
      if ((await Promise.race(asked ? [driving, asked] : [driving])) === 'asked') return;
      if (await settleLook(rt, sessionId, outages)) return;
    }
  } finally {
    stop.abort();
  }
}

/** Resolves with 'asked' once the session has a pending decision of a live runner run that is not known. */
async function askedBy(
  rt: SettleDeps,
  sessionId: string,
  watch: AskedWatch,
  signal: AbortSignal,
): Promise<'asked' | 'stopped'> {
  // Cheap while nothing is asked: only the questions after the watch's last look are read (by the log's primary
  // key), across calls — a question it passed is known or answered already.
  const { known } = watch;
  while (!signal.aborted && !rt.closed()) {
    const found = await questionsAfter(rt.store.db, sessionId, watch.cursor).catch(() => undefined);
    const fresh = (found?.questions ?? []).filter(
      (q) => (q.payload as { runner?: unknown }).runner !== undefined && !known.has(q.actionId ?? ''),
    );
    // Still pending? (one answered or closed since is nothing to stop for). A failed read looks again later.
    const threads =
      fresh.length > 0
        ? (await rt.log.allReadModels(sessionId).catch(() => undefined))?.threads
        : new Map<string, ThreadState>();
    if (found && threads) {
      watch.cursor = found.sequence;
      for (const thread of threads.values()) {
        if (thread.pending.some((p) => p.runnerId !== undefined && !known.has(p.actionId))) return 'asked';
      }
    }
    await rt.notifier.waitFor(sessionId, async () => signal.aborted, 250);
  }
  return 'stopped';
}

/** One look of `settled` after the drives it waited for: true when settled; otherwise it waits before the next. */
async function settleLook(rt: SettleDeps, sessionId: string | undefined, outages: { count: number }): Promise<boolean> {
  // A store fault the log could not record ends the wait: nothing will move until the store is healthy.
  const fault = rt.worker?.takeFault(sessionId);
  if (fault) throw fault;
  if (sessionId === undefined) return (rt.worker?.driving().length ?? 0) === 0;
  let work: UnsettledThread[];
  try {
    work = await unsettledThreads(rt.store.db, sessionId);
    outages.count = 0;
  } catch (error) {
    // A store that is briefly unreachable (a dropped connection) is waited out like the work itself, for a while.
    if (!isStoreFault(error) || !error.error.retryable || ++outages.count > SETTLE_OUTAGES) throw error;
    await new Promise((resolve) => setTimeout(resolve, 200));
    return false;
  }
  if (work.length === 0 && (rt.worker?.driving(sessionId).length ?? 0) === 0) return true;
  const worker = rt.worker;
  if (worker?.drives(sessionId)) {
    for (const item of work) {
      // A thread it drives right now needs no kick (one would only make its driver look again for nothing).
      const held = item.holder?.owner === worker.owner && !worker.isDriving(item.threadId);
      if (!item.holder || held) worker.kick(sessionId, item.threadId);
    }
  }
  await rt.notifier.waitFor(sessionId, async () => false, 100);
  return false;
}
