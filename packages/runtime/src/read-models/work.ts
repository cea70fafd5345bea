import { type LeaseHolder, ownerIsGone, sessionLeases } from '../store/leases.js';
import type { Db } from '../store/store.js';
import { nextTurn, nextTurnNotBefore, type ThreadState } from './thread-state.js';

/**
 * The threads of a session that are in progress: held by a worker (`holder`), or with something to do that no
 * worker holds (nobody is on them yet). `waiting`: also those whose next turn waits out a backoff (work later, for
 * whoever waits for the session to settle; a worker has nothing to do with them before then).
 */
export async function sessionWork(
  db: Db,
  sessionId: string,
  options: { waiting?: boolean } = {},
): Promise<{ threadId: string; thread: ThreadState; holder?: LeaseHolder }[]> {
  const threads = await storedThreads(db, sessionId);
  const leases = await sessionLeases(db, sessionId);
  const work: { threadId: string; thread: ThreadState; holder?: LeaseHolder }[] = [];
  for (const thread of threads) {
    const lease = leases.get(thread.threadId);
    // A holder that was a process of this machine and has exited holds nothing: its lease is taken over on claim.
    if (lease?.holder && !ownerIsGone(lease.holder.owner))
      work.push({ threadId: thread.threadId, thread, holder: lease.holder });
    else if (needsDrive(thread, lease?.idleSequence) || (options.waiting && waitsOutBackoff(thread))) {
      work.push({ threadId: thread.threadId, thread });
    }
  }
  return work;
}

const waitsOutBackoff = (thread: ThreadState) => thread.status !== 'closed' && nextTurnNotBefore(thread) !== undefined;

/**
 * Whether a thread nobody holds has something for a worker to do. A thread left idle by its last driver needs
 * nothing until one of its events moves its sequence on (a decision, a child's result, a submit, an interrupt).
 */
export function needsDrive(thread: ThreadState, idleSequence: number | undefined, now = Date.now()): boolean {
  if (thread.status === 'closed') return false;
  // A turn waiting out a backoff was left idle by its driver until then (a timer, and the wake time on its lease for
  // any worker's poll): no work before that time, work from it on — also for a worker restarted since.
  const notBefore = nextTurnNotBefore(thread);
  const due = notBefore !== undefined && Date.parse(notBefore) <= now;
  if (idleSequence !== undefined && idleSequence === thread.lastSequence && !due) return false;
  if (thread.activeTurnId !== undefined || thread.compactionRequest !== undefined) return true;
  // A turn held by its task's dependencies is no work until the last of them completed (which moves the sequence).
  return nextTurn(thread) !== undefined;
}

/**
 * The session's threads as stored (committed state), read from their rows; `worth` picks the rows worth parsing by
 * their text (a caller that looks for one field need not parse every thread).
 */
export async function storedThreads(
  db: Db,
  sessionId: string,
  worth: (body: string) => boolean = () => true,
): Promise<ThreadState[]> {
  const rows = await db
    .selectFrom('oar_read_models')
    .select('body')
    .where('session_id', '=', sessionId)
    .where('kind', '=', 'thread')
    .execute();
  return rows.filter((row) => worth(row.body)).map((row) => JSON.parse(row.body) as ThreadState);
}
