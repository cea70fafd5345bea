import type { RuntimeEvent } from '@oar/protocol';
import { sessionWork } from '../read-models/work.js';
import type { LeaseHolder } from '../store/leases.js';
import { sessionLeases } from '../store/leases.js';
import type { Db } from '../store/store.js';

/** A thread of a session that is not settled: held by a worker, or with work nobody holds yet. */
export interface UnsettledThread {
  threadId: string;
  holder?: LeaseHolder;
}

/**
 * The threads of a session still in progress, for whoever waits for the session to settle. `sessionWork` is the
 * worker's view and errs on the side of looking: an unheld thread whose sequence moved since its last driver left
 * it idle "needs a drive". Here a thread that has only had inert facts since then (see `isInertFact`) is settled:
 * nothing that happened can give a worker anything to do, so nobody needs to claim it to find that out.
 */
export async function unsettledThreads(db: Db, sessionId: string): Promise<UnsettledThread[]> {
  // A turn waiting out a backoff (a job item's retry) is work to come: the session is not settled.
  const work = await sessionWork(db, sessionId, { waiting: true });
  if (work.every((item) => item.holder)) return work.map(({ threadId, holder }) => ({ threadId, holder }));
  const leases = await sessionLeases(db, sessionId);
  const unsettled: UnsettledThread[] = [];
  for (const { threadId, holder } of work) {
    const idle = leases.get(threadId)?.idleSequence ?? 0;
    if (!holder && idle > 0 && (await onlyInertSince(db, sessionId, threadId, idle))) continue;
    unsettled.push(holder ? { threadId, holder } : { threadId });
  }
  return unsettled;
}

/** Whether every event of the thread after `sequence` is inert (and there is at least one). */
async function onlyInertSince(db: Db, sessionId: string, threadId: string, sequence: number): Promise<boolean> {
  const rows = await db
    .selectFrom('oar_events')
    .select('body')
    .where('session_id', '=', sessionId)
    .where('thread_id', '=', threadId)
    .where('sequence', '>', sequence)
    .orderBy('sequence')
    .limit(INERT_SCAN_LIMIT + 1)
    .execute();
  if (rows.length === 0 || rows.length > INERT_SCAN_LIMIT) return false;
  return rows.every((row) => isInertFact(JSON.parse(row.body) as RuntimeEvent));
}

/** Beyond this many events since the thread went idle, it is not worth proving that none of them matters. */
const INERT_SCAN_LIMIT = 64;

/**
 * A fact that can never give a worker something to do on its thread: thread-scoped state set through the control
 * plane (`setState`: a `thread.updated` that changes only `state.*`), and the redaction fact that may accompany
 * it. Everything else — a decision, a child's result, a submit, an interrupt, a close — may.
 */
export function isInertFact(event: RuntimeEvent): boolean {
  if (event.type === 'output.redacted') return true;
  if (event.type !== 'thread.updated') return false;
  const payload = (event.payload ?? {}) as Record<string, unknown>;
  const changed = payload.changed;
  return (
    Object.keys(payload).every((key) => key === 'changed' || key === 'state') &&
    payload.state !== undefined &&
    Array.isArray(changed) &&
    changed.length > 0 &&
    changed.every((name) => typeof name === 'string' && name.startsWith('state.'))
  );
}
