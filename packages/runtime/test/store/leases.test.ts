import { hostname } from 'node:os';
import type { RuntimeEvent } from '@oar/protocol';
import { expect, it } from 'vitest';
import { OarRuntimeError } from '../../src/kernel/errors.js';
import type { EventDraft } from '../../src/log/draft.js';
import { EventLog } from '../../src/log/event-log.js';
import { findContradictions } from '../../src/read-models/contradictions.js';
import {
  claimLease,
  type Fence,
  leaseHolder,
  ownerIsGone,
  ownerName,
  releaseLease,
  renewLease,
  sessionLeases,
} from '../../src/store/leases.js';
import type { Store } from '../../src/store/store.js';
import { errorCode } from '../engine/helpers.js';
import { describeStores } from '../support/stores.js';

/**
 * One writer per thread, on both dialects: a lease is claimed by one worker at a time, its token grows with every
 * tenure, and the store refuses an append fenced by a tenure that is over — in the same transaction, so a writer
 * that lost its lease never gets anything into the log.
 */

const SESSION = 'ses_lease';
const THREAD = 'thr_lease';

async function newLog(store: Store): Promise<EventLog> {
  const log = new EventLog(store, 'rt_lease');
  await log.createSession(SESSION, 'leases', [
    { type: 'session.created', payload: {} },
    { type: 'thread.started', threadId: THREAD, payload: { agent: 'main', depth: 0 } },
  ]);
  return log;
}

const note = (message: string): EventDraft => ({
  type: 'runtime.warning',
  threadId: THREAD,
  payload: { code: 'lease_note', message, retryable: false },
});

async function claim(store: Store, owner: string, ttlMs = 60_000, now?: number): Promise<Fence> {
  const result = await claimLease(store.db, {
    sessionId: SESSION,
    threadId: THREAD,
    owner,
    ttlMs,
    ...(now ? { now } : {}),
  });
  if (!result.ok) throw new Error(`expected ${owner} to get the lease; ${result.holder.owner} holds it`);
  return result.fence;
}

describeStores('thread leases', (factory) => {
  it('one claimer wins; the loser learns who holds the lease and until when', async () => {
    const { store } = await factory.fresh();
    await newLog(store);
    const results = await Promise.all(
      ['wrk_a', 'wrk_b', 'wrk_c', 'wrk_d'].map((owner) =>
        claimLease(store.db, { sessionId: SESSION, threadId: THREAD, owner, ttlMs: 60_000 }),
      ),
    );
    const winners = results.filter((r) => r.ok);
    expect(winners).toHaveLength(1);
    const winner = winners[0] as Extract<(typeof results)[number], { ok: true }>;
    for (const loser of results.filter((r) => !r.ok)) {
      expect(loser).toMatchObject({ ok: false, holder: { owner: winner.fence.owner, token: winner.fence.token } });
      if (!loser.ok) expect(Date.parse(loser.holder.expiresAt)).toBeGreaterThan(Date.now());
    }
  });

  it('tokens grow with every claim, even by the same owner; a released lease is free', async () => {
    const { store } = await factory.fresh();
    const log = await newLog(store);
    const before = await claim(store, 'wrk_a');
    const first = await claim(store, 'wrk_a');
    expect(first.token).toBe(before.token + 1);
    // The owner's earlier tenure is fenced off like anybody else's.
    expect(await errorCode(log.append(SESSION, [note('old tenure')], { fence: before }))).toBe('lease_lost');
    await releaseLease(store.db, first, 7);
    expect(await leaseHolder(store.db, SESSION, THREAD)).toBeUndefined();
    expect((await sessionLeases(store.db, SESSION)).get(THREAD)).toEqual({ idleSequence: 7 });
    const second = await claim(store, 'wrk_b');
    expect(second.token).toBe(first.token + 1);
    const third = await claim(store, 'wrk_c', 60_000, Date.now() + 120_000); // wrk_b's lease has run out by then
    expect(third.token).toBe(second.token + 1);
  });

  it('a live lease is not taken; an expired one is, and its old holder can neither renew nor release it', async () => {
    const { store } = await factory.fresh();
    await newLog(store);
    const old = await claim(store, 'wrk_old', 50);
    const early = await claimLease(store.db, { sessionId: SESSION, threadId: THREAD, owner: 'wrk_new', ttlMs: 60_000 });
    if (early.ok) {
      // Only possible if 50 ms already passed: then it must be a new tenure.
      expect(early.fence.token).toBe(old.token + 1);
    } else expect(early.holder.owner).toBe('wrk_old');
    const thief = await claim(store, 'wrk_new', 60_000, Date.now() + 1000);
    expect(thief.token).toBeGreaterThan(old.token);
    expect(await renewLease(store.db, old, 60_000)).toBe(false);
    await releaseLease(store.db, old);
    expect(await leaseHolder(store.db, SESSION, THREAD)).toMatchObject({ owner: 'wrk_new', token: thief.token });
    expect(await renewLease(store.db, thief, 60_000)).toBe(true);
  });

  it('a fenced append from a tenure that is over is refused whole: nothing of it reaches the log', async () => {
    const { store } = await factory.fresh();
    const log = await newLog(store);
    const old = await claim(store, 'wrk_old', 60_000);
    await log.append(SESSION, [note('while holding')], { fence: old });
    await claim(store, 'wrk_new', 60_000, Date.now() + 120_000);
    const before = await log.read(SESSION);
    expect(await errorCode(log.append(SESSION, [note('stale 1'), note('stale 2')], { fence: old }))).toBe('lease_lost');
    expect(await log.read(SESSION)).toEqual(before);
    // A fence for a thread nobody ever leased is refused too (no row, no tenure).
    const stranger: Fence = { sessionId: SESSION, threadId: 'thr_other', owner: 'wrk_old', token: 1 };
    expect(await errorCode(log.append(SESSION, [note('never leased')], { fence: stranger }))).toBe('lease_lost');
  });

  it('many writers racing a takeover: every append that committed was fenced by the tenure current at commit', async () => {
    const { store } = await factory.fresh();
    const log = await newLog(store);
    const holder = await claim(store, 'wrk_a', 60_000);
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        if (i === 10) {
          await claim(store, 'wrk_b', 60_000, Date.now() + 120_000);
          return 'claimed';
        }
        return log
          .append(SESSION, [note(`write ${i}`)], { fence: holder })
          .then(() => 'written' as const)
          .catch((error: OarRuntimeError) => error.code);
      }),
    );
    const written = outcomes.filter((o) => o === 'written').length;
    expect(outcomes.filter((o) => o !== 'written' && o !== 'claimed').every((o) => o === 'lease_lost')).toBe(true);
    const notes = (await log.read(SESSION)).filter((e) => e.type === 'runtime.warning');
    expect(notes).toHaveLength(written);
    // After the takeover committed, the old tenure writes nothing more.
    expect(await errorCode(log.append(SESSION, [note('late')], { fence: holder }))).toBe('lease_lost');
  });
});

describeStores('contradictory facts', (factory) => {
  it('a second ending of one turn is refused, and nothing of that append is written', async () => {
    const { store } = await factory.fresh();
    const log = await newLog(store);
    await log.append(SESSION, [
      {
        type: 'turn.submitted',
        threadId: THREAD,
        turnId: 'turn_1',
        status: 'accepted',
        payload: { status: 'accepted' },
      },
      { type: 'turn.started', threadId: THREAD, turnId: 'turn_1', status: 'running', payload: {} },
      {
        type: 'turn.completed',
        threadId: THREAD,
        turnId: 'turn_1',
        status: 'completed',
        payload: { outcome: 'answered' },
      },
    ]);
    const before = await log.read(SESSION);
    const error = await log
      .append(SESSION, [
        note('goes with the contradiction'),
        {
          type: 'turn.failed',
          threadId: THREAD,
          turnId: 'turn_1',
          status: 'failed',
          payload: { error: { code: 'lost', message: 'x', retryable: false } },
        },
      ])
      .catch((caught: OarRuntimeError) => caught);
    expect(error).toBeInstanceOf(OarRuntimeError);
    expect((error as OarRuntimeError).code).toBe('contradictory_fact');
    expect(await log.read(SESSION)).toEqual(before);
  });

  it('a task ends once; a retry reopens it', async () => {
    const { store } = await factory.fresh();
    const log = await newLog(store);
    const ids = { threadId: THREAD, turnId: 'turn_1', taskId: 'task_1', runId: 'run_1' };
    await log.append(SESSION, [
      { type: 'task.created', ...ids, payload: { title: 't' } },
      { type: 'task.failed', ...ids, payload: { error: { code: 'x', message: 'x', retryable: true } } },
    ]);
    expect(await errorCode(log.append(SESSION, [{ type: 'task.completed', ...ids, payload: {} }]))).toBe(
      'contradictory_fact',
    );
    await log.append(SESSION, [
      { type: 'task.retrying', ...ids, payload: { nextAttempt: 2 } },
      { type: 'task.completed', ...ids, payload: {} },
    ]);
  });
});

it('replay names every contradiction in a log written without the guard (an imported or tampered log)', () => {
  const base = { sessionId: SESSION, runtimeId: 'rt', schemaVersion: '1', timestamp: new Date().toISOString() };
  let sequence = 0;
  const event = (fields: Record<string, unknown>) =>
    ({ ...base, eventId: `ev_${++sequence}`, sequence, payload: {}, ...fields }) as unknown as RuntimeEvent;
  const events = [
    event({ type: 'session.created' }),
    event({ type: 'thread.started', threadId: THREAD, payload: { agent: 'main', depth: 0 } }),
    event({ type: 'turn.submitted', threadId: THREAD, turnId: 't1', payload: { status: 'accepted' } }),
    event({ type: 'turn.started', threadId: THREAD, turnId: 't1' }),
    event({ type: 'turn.completed', threadId: THREAD, turnId: 't1', payload: { outcome: 'answered' } }),
    event({
      type: 'turn.failed',
      threadId: THREAD,
      turnId: 't1',
      payload: { error: { code: 'lost', message: 'x', retryable: false } },
    }),
  ];
  expect(findContradictions(events)).toEqual([{ sequence: 6, reason: 'turn "t1" already ended (completed)' }]);
});

it('a lease held by a process of this machine that has exited is recognised as gone; a live or remote one is not', () => {
  expect(ownerIsGone(ownerName('wrk_me'))).toBe(false);
  expect(ownerIsGone(`wrk_x@${hostname()}:${process.ppid}`)).toBe(false);
  expect(ownerIsGone(`wrk_x@${hostname()}:2147483646`)).toBe(true);
  expect(ownerIsGone('wrk_x@another-host.example:1')).toBe(false);
  expect(ownerIsGone('wrk_without_process')).toBe(false);
});
