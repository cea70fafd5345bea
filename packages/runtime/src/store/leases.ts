import { hostname } from 'node:os';
import { type ExpressionBuilder, sql } from 'kysely';
import { OarRuntimeError } from '../kernel/errors.js';
import type { StoreDialect } from './dialect.js';
import type { Database } from './schema.js';
import type { Db } from './store.js';

/**
 * Thread leases: one writer per thread. A worker claims a thread's lease before it drives the thread, renews it
 * while it works and releases it when the thread has to wait. Every append the worker makes for that thread
 * carries its `Fence`; the store checks it inside the append's transaction, so a worker that lost its lease
 * (paused past its expiry, partitioned, slow) can never write again — correctness rests on the token, not on
 * clocks. Expiry only decides when somebody else may take over.
 */

/** The credentials of one tenure: appends for `threadId` must carry them. */
export interface Fence {
  sessionId: string;
  threadId: string;
  owner: string;
  token: number;
}

export interface LeaseHolder {
  owner: string;
  token: number;
  /** ISO time the holder's lease runs out unless renewed. */
  expiresAt: string;
}

export type ClaimResult = { ok: true; fence: Fence; expiresAt: number } | { ok: false; holder: LeaseHolder };

/**
 * Claim (or re-claim) a thread's lease in ONE statement, so two claimers can never both win: the upsert's
 * update only fires while the lease is free, expired or already ours, and RETURNING tells whether it did.
 */
export async function claimLease(
  db: Db,
  input: { sessionId: string; threadId: string; owner: string; ttlMs: number; now?: number; attempt?: number },
): Promise<ClaimResult> {
  const now = input.now ?? Date.now();
  const expiresAt = now + input.ttlMs;
  const row = await db
    .insertInto('oar_thread_leases')
    .values({
      session_id: input.sessionId,
      thread_id: input.threadId,
      owner: input.owner,
      token: 1,
      expires_at: expiresAt,
      updated_at: new Date(now).toISOString(),
    })
    .onConflict((oc) =>
      oc
        .columns(['session_id', 'thread_id'])
        .doUpdateSet({
          owner: input.owner,
          // Every claim is a new tenure, even by the same owner: whatever an earlier tenure of ours still has in
          // flight (a release that failed, an orphaned tool) is fenced off like anybody else's.
          token: sql<number>`oar_thread_leases.token + 1`,
          expires_at: expiresAt,
          updated_at: new Date(now).toISOString(),
        })
        .where((eb) =>
          eb.or([
            eb('oar_thread_leases.owner', 'is', null),
            eb('oar_thread_leases.owner', '=', input.owner),
            eb('oar_thread_leases.expires_at', '<', now),
          ]),
        ),
    )
    .returning(['token'])
    .executeTakeFirst();
  if (row) {
    const token = Number(row.token);
    return {
      ok: true,
      fence: { sessionId: input.sessionId, threadId: input.threadId, owner: input.owner, token },
      expiresAt,
    };
  }
  const holder = await leaseHolder(db, input.sessionId, input.threadId, now);
  if (!holder) {
    // Released between the two statements: try again, a bounded number of times.
    if ((input.attempt ?? 0) < 3) return claimLease(db, { ...input, attempt: (input.attempt ?? 0) + 1 });
    return { ok: false, holder: { owner: 'unknown', token: 0, expiresAt: new Date(now).toISOString() } };
  }
  if (ownerIsGone(holder.owner)) {
    // The holder was a process on this machine that no longer exists (kill -9, a crash): its lease can only run
    // out, so it is taken over now instead of after its expiry — conditionally on that very tenure.
    const taken = await db
      .updateTable('oar_thread_leases')
      .set({
        owner: input.owner,
        token: sql<number>`token + 1`,
        expires_at: expiresAt,
        updated_at: new Date(now).toISOString(),
      })
      .where('session_id', '=', input.sessionId)
      .where('thread_id', '=', input.threadId)
      .where('owner', '=', holder.owner)
      .where('token', '=', holder.token)
      .returning(['token'])
      .executeTakeFirst();
    if (taken) {
      const fence = {
        sessionId: input.sessionId,
        threadId: input.threadId,
        owner: input.owner,
        token: Number(taken.token),
      };
      return { ok: true, fence, expiresAt };
    }
  }
  return { ok: false, holder };
}

/** A worker's owner name: unique, and saying which process on which machine holds a lease. */
export function ownerName(id: string): string {
  return `${id}@${hostname()}:${process.pid}`;
}

/**
 * Whether an owner is a process of this machine that has exited. Only a definite "no such process" counts: a
 * remote owner, an unparseable name or a process we may not signal are all treated as alive (wait for expiry).
 */
export function ownerIsGone(owner: string): boolean {
  const match = /@(.+):(\d+)$/.exec(owner);
  if (!match || match[1] !== hostname()) return false;
  const pid = Number(match[2]);
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Extend the lease; false when it is no longer ours (taken over after expiry): stop working on the thread. */
export async function renewLease(db: Db, fence: Fence, ttlMs: number, now = Date.now()): Promise<boolean> {
  const result = await db
    .updateTable('oar_thread_leases')
    .set({ expires_at: now + ttlMs, updated_at: new Date(now).toISOString() })
    .where('session_id', '=', fence.sessionId)
    .where('thread_id', '=', fence.threadId)
    .where('owner', '=', fence.owner)
    .where('token', '=', fence.token)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Give the lease up; a stale fence releases nothing. `idleSequence`: the thread's last sequence when the driver
 * found nothing more to do (0 when it stopped for another reason, so the next worker looks again). `wakeAt`: when
 * an idle thread has work again without any event (a job item's retry backoff, ms since the epoch), kept in the
 * free lease's `expires_at`: whichever worker polls after it takes the thread up (`leasesToTakeOver`), not only
 * the one whose timer died with it.
 */
export async function releaseLease(db: Db, fence: Fence, idleSequence = 0, wakeAt?: number): Promise<void> {
  const now = new Date().toISOString();
  await db
    .updateTable('oar_thread_leases')
    .set({ owner: null, expires_at: wakeAt ?? 0, idle_sequence: idleSequence, updated_at: now })
    .where('session_id', '=', fence.sessionId)
    .where('thread_id', '=', fence.threadId)
    .where('owner', '=', fence.owner)
    .where('token', '=', fence.token)
    .execute();
  // Work left unfinished (a closing worker): other workers' notifiers watch the sessions table, so touch it.
  if (idleSequence === 0)
    await db.updateTable('oar_sessions').set({ updated_at: now }).where('id', '=', fence.sessionId).execute();
}

/**
 * Inside a command's append, for a thread the command is about to act on itself: nobody may hold a live lease,
 * and whatever tenure existed is ended (token + 1), so a holder that merely stalled past its expiry — or a process
 * of this machine that died — is fenced off before the command's facts commit. Returns the live holder, if any.
 */
export async function fenceOutUnheld(
  tx: Db,
  dialect: StoreDialect,
  sessionId: string,
  threadId: string,
  now = Date.now(),
): Promise<LeaseHolder | undefined> {
  let query = tx
    .selectFrom('oar_thread_leases')
    .select(['owner', 'token', 'expires_at'])
    .where('session_id', '=', sessionId)
    .where('thread_id', '=', threadId);
  if (dialect.rowLocks) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) return undefined;
  const live = row.owner !== null && Number(row.expires_at) >= now && !ownerIsGone(row.owner);
  if (live && row.owner) {
    return { owner: row.owner, token: Number(row.token), expiresAt: new Date(Number(row.expires_at)).toISOString() };
  }
  await tx
    .updateTable('oar_thread_leases')
    .set({ owner: null, expires_at: 0, token: sql<number>`token + 1`, updated_at: new Date(now).toISOString() })
    .where('session_id', '=', sessionId)
    .where('thread_id', '=', threadId)
    .execute();
  return undefined;
}

/** The live holder of a thread's lease, if any (an expired or released lease has none). */
export async function leaseHolder(
  db: Db,
  sessionId: string,
  threadId: string,
  now = Date.now(),
): Promise<LeaseHolder | undefined> {
  const row = await db
    .selectFrom('oar_thread_leases')
    .select(['owner', 'token', 'expires_at'])
    .where('session_id', '=', sessionId)
    .where('thread_id', '=', threadId)
    .executeTakeFirst();
  if (!row || row.owner === null || Number(row.expires_at) < now) return undefined;
  return { owner: row.owner, token: Number(row.token), expiresAt: new Date(Number(row.expires_at)).toISOString() };
}

/** The lease rows of a session's threads: who holds each live one, and where each was last left idle. */
export async function sessionLeases(
  db: Db,
  sessionId: string,
  now = Date.now(),
): Promise<Map<string, { holder?: LeaseHolder; idleSequence: number }>> {
  const rows = await db
    .selectFrom('oar_thread_leases')
    .select(['thread_id', 'owner', 'token', 'expires_at', 'idle_sequence'])
    .where('session_id', '=', sessionId)
    .execute();
  return new Map(
    rows.map((r) => [
      r.thread_id,
      {
        ...(r.owner !== null && Number(r.expires_at) >= now
          ? {
              holder: {
                owner: r.owner,
                token: Number(r.token),
                expiresAt: new Date(Number(r.expires_at)).toISOString(),
              },
            }
          : {}),
        idleSequence: Number(r.idle_sequence),
      },
    ]),
  );
}

/**
 * The threads of a session whose lease ran out while held: their worker stopped renewing (crashed, stalled, cut off)
 * and nobody has taken them over yet — what the log says of them may not be what is happening (`stale`).
 */
export async function silentHolders(
  db: Db,
  sessionId: string,
  now = Date.now(),
): Promise<Map<string, { owner: string; since: string }>> {
  const rows = await db
    .selectFrom('oar_thread_leases')
    .select(['thread_id', 'owner', 'expires_at'])
    .where('session_id', '=', sessionId)
    .where('owner', 'is not', null)
    .execute();
  return new Map(
    rows
      .filter((r) => r.owner !== null && Number(r.expires_at) < now)
      .map((r) => [r.thread_id, { owner: r.owner as string, since: new Date(Number(r.expires_at)).toISOString() }]),
  );
}

/**
 * Threads a worker should take over: a lease that ran out while held (its worker stopped renewing: crashed,
 * paused, cut off), one given up before the work was done (released with no idle sequence: a closing worker), one
 * left idle until a time that has come (a retry's backoff), or one held by a process of this machine that no
 * longer exists.
 */
export async function leasesToTakeOver(db: Db, now = Date.now()): Promise<{ sessionId: string; threadId: string }[]> {
  const rows = await db
    .selectFrom('oar_thread_leases')
    .select(['session_id', 'thread_id', 'owner', 'expires_at'])
    .where((eb) =>
      eb.or([
        eb.and([eb('owner', 'is not', null), eb('expires_at', '<', now)]),
        eb.and([eb('owner', 'is', null), eb('idle_sequence', '=', 0)]),
        // Idle until a time that has come (releaseLease's `wakeAt`).
        eb.and([eb('owner', 'is', null), eb('expires_at', '>', 0), eb('expires_at', '<', now)]),
        // Live leases of processes of this machine: one that died (kill -9) is taken over now, not at its expiry.
        eb('owner', 'like', `%@${hostname()}:%`),
      ]),
    )
    .execute();
  return rows
    .filter((r) => r.owner === null || Number(r.expires_at) < now || ownerIsGone(r.owner))
    .map((r) => ({ sessionId: r.session_id, threadId: r.thread_id }));
}

/** The append was made with a fence whose tenure is over: the writer must stop touching the thread. */
export class LeaseLostError extends OarRuntimeError {
  constructor(fence: Fence) {
    super('lease_lost', `this worker no longer holds the lease of thread "${fence.threadId}"; nothing was written`, {
      details: { threadId: fence.threadId, token: fence.token },
    });
  }
}

/**
 * The condition an append's session-row UPDATE carries when it is fenced: the lease row still names this tenure.
 * On PostgreSQL the lease row is read FOR SHARE, so a concurrent claim either commits first (and the append finds
 * the new token) or waits until the append has committed; SQLite serializes writers anyway.
 */
export function fenceHolds(dialect: StoreDialect, fence: Fence) {
  return (eb: ExpressionBuilder<Database, 'oar_sessions'>) => {
    let lease = eb
      .selectFrom('oar_thread_leases')
      .select(sql<number>`1`.as('held'))
      .where('oar_thread_leases.session_id', '=', fence.sessionId)
      .where('oar_thread_leases.thread_id', '=', fence.threadId)
      .where('oar_thread_leases.owner', '=', fence.owner)
      .where('oar_thread_leases.token', '=', fence.token);
    if (dialect.rowLocks) lease = lease.forShare();
    return eb.exists(lease);
  };
}
