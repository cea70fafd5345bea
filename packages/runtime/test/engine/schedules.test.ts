import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { firingRows } from '../../src/control-plane/schedule-rows.js';
import type { OarRuntimeError, Runtime } from '../../src/index.js';
import type { Store } from '../../src/store/store.js';
import { assertEventsConform } from '../support/schemas.js';
import { describeStores, type TestDatabase } from '../support/stores.js';
import { type Harness, harness } from './harness.js';
import { answer, errorCode, ofType, payload, sleep, waitFor } from './helpers.js';

/**
 * Schedules (issue 30 §2, docs/schedules.md): a worker's ticker claims each cron time by inserting its firing row,
 * starts the work through the control plane with the schedule's facts, and follows the catch-up and overlap
 * policies. Real stores: a SQLite file, and PostgreSQL for two workers firing one schedule.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const SCRIPT = { steps: Array.from({ length: 60 }, () => answer('done')) };
const FAST = { ticker: { tickMs: 100 } };

/** The sessions the schedule's firings created, by the cron time in their `session.created`. */
async function firedSessions(rt: Runtime, scheduleId: string): Promise<Map<string, RuntimeEvent[]>> {
  const byTime = new Map<string, RuntimeEvent[]>();
  for (const { sessionId } of await rt.listSessions()) {
    const created = (await rt.log.read(sessionId))[0];
    const fact = payload(created).schedule as { scheduleId: string; firedAt: string } | undefined;
    if (fact?.scheduleId !== scheduleId || !created) continue;
    byTime.set(fact.firedAt, [...(byTime.get(fact.firedAt) ?? []), created]);
  }
  return byTime;
}

describe('schedules on one worker', () => {
  it('fires every second: a new session per firing, with the schedule facts and its own binding and budget', async () => {
    h = await harness(SCRIPT, { schedules: FAST });
    const rt = h.runtime;
    const added = await rt.schedules.add({
      scheduleId: 'nightly',
      cron: '* * * * * *',
      start: { kind: 'session', input: 'Write the report', title: 'nightly report' },
      binding: {
        permissions: {
          mode: 'default',
          rules: [
            { decision: 'allow', tool: 'write', paths: ['reports/**'] },
            { decision: 'deny', readOnly: false },
          ],
        },
      },
      budget: { session: { tokens: 5_000 } },
    });
    expect(added).toMatchObject({ scheduleId: 'nightly', source: 'api', paused: false, catchUp: 'skip' });
    expect(added.nextFirings).toHaveLength(3);
    const firing = await waitFor(async () => {
      const rows = await firingRows(rt.store.db, 'nightly');
      return rows.find((r) => r.status === 'started');
    }, 5_000);
    const sessionId = firing.started?.sessionId as string;
    expect(sessionId).toMatch(/^ses_sch_/);
    await rt.schedules.pause({ scheduleId: 'nightly' });
    await rt.settled(sessionId);
    const events = await rt.log.read(sessionId);
    assertEventsConform(events);
    expect(payload(events[0]).schedule).toMatchObject({
      scheduleId: 'nightly',
      firedAt: firing.fireAt,
      kind: 'session',
    });
    expect(payload(events[0]).actor).toBe('schedule:nightly');
    const submitted = ofType(events, 'turn.submitted')[0];
    expect(payload(submitted)).toMatchObject({ source: 'schedule', schedule: { scheduleId: 'nightly' } });
    expect(ofType(events, 'turn.completed')).toHaveLength(1);
    const binding = (await rt.getBinding(sessionId))?.binding;
    if (!binding) throw new Error('the session has no binding');
    expect(binding.budgets?.session?.tokens).toBe(5_000);
    expect(binding.permissions.rules).toEqual([
      expect.objectContaining({ decision: 'allow', tool: 'write', paths: ['reports/**'] }),
      expect.objectContaining({ decision: 'deny', readOnly: false }),
    ]);
    // get answers the last firings and, once paused, no next ones.
    const got = await rt.schedules.get({ scheduleId: 'nightly' });
    expect(got.paused).toBe(true);
    expect(got.nextFirings).toEqual([]);
    expect(got.lastFirings[0]).toMatchObject({ status: 'started' });
    // The evidence export lists the firing that started the session.
    const evidence = (await rt.exportEvidence(sessionId)) as unknown as { scheduleFirings?: unknown[] };
    expect(evidence.scheduleFirings).toEqual([
      expect.objectContaining({ scheduleId: 'nightly', fireAt: firing.fireAt }),
    ]);
  });

  it('a turn schedule submits a turn in its session; a paused schedule never fires, a resumed one does', async () => {
    h = await harness(SCRIPT, { schedules: FAST });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.schedules.add({
      scheduleId: 'ping',
      cron: '* * * * * *',
      paused: true,
      start: { kind: 'turn', sessionId, input: 'ping' },
    });
    await sleep(2_200);
    expect(await firingRows(rt.store.db, 'ping')).toEqual([]);
    await rt.schedules.resume({ scheduleId: 'ping' });
    const firing = await waitFor(
      async () => (await firingRows(rt.store.db, 'ping')).find((r) => r.status === 'started'),
      5_000,
    );
    await rt.schedules.pause({ scheduleId: 'ping' });
    expect(firing.started).toMatchObject({ sessionId, turnId: expect.stringMatching(/^turn_sch_/) });
    await rt.settled(sessionId);
    const turns = ofType(await rt.log.read(sessionId), 'turn.submitted');
    expect(turns.length).toBeGreaterThanOrEqual(1);
    expect(payload(turns[0])).toMatchObject({
      input: 'ping',
      schedule: { scheduleId: 'ping', firedAt: firing.fireAt },
    });
  });

  it('overlap skip: a firing while the previous turn still runs is skipped with reason overlap', async () => {
    const slow = { steps: [{ ...answer('slow'), delayMs: 2_500 }, ...SCRIPT.steps] };
    h = await harness(slow, { schedules: FAST });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.schedules.add({
      scheduleId: 'busy',
      cron: '* * * * * *',
      overlap: 'skip',
      start: { kind: 'turn', sessionId, input: 'work' },
    });
    const skipped = await waitFor(async () => {
      const rows = await firingRows(rt.store.db, 'busy');
      return rows.find((r) => r.status === 'skipped') && rows;
    }, 6_000);
    await rt.schedules.pause({ scheduleId: 'busy' });
    const started = skipped.filter((r) => r.status === 'started');
    expect(started.length).toBeGreaterThanOrEqual(1);
    expect(skipped.find((r) => r.status === 'skipped')).toMatchObject({
      reason: 'overlap',
      details: { previous: started.at(-1)?.fireAt },
    });
  });

  it('a job schedule starts a job per firing, in a session of its own with the schedule facts and budget', async () => {
    h = await harness(SCRIPT, { schedules: FAST });
    const rt = h.runtime;
    await rt.schedules.add({
      scheduleId: 'batch',
      cron: '* * * * * *',
      start: { kind: 'job', items: ['alpha', 'beta'], prompt: 'Handle {{item}}', name: 'nightly batch' },
      budget: { session: { tokens: 7_000 } },
    });
    const firing = await waitFor(
      async () => (await firingRows(rt.store.db, 'batch')).find((r) => r.status === 'started'),
      5_000,
    );
    await rt.schedules.pause({ scheduleId: 'batch' });
    const jobId = firing.started?.jobId as string;
    expect(jobId).toMatch(/^job_/);
    const job = await waitFor(async () => {
      const view = await rt.jobs.get({ jobId });
      return view.status !== 'running' && view;
    }, 10_000);
    expect(job).toMatchObject({ status: 'completed', name: 'nightly batch', sessionId: firing.started?.sessionId });
    const events = await rt.log.read(job.sessionId);
    assertEventsConform(events);
    expect(payload(events[0])).toMatchObject({
      schedule: { scheduleId: 'batch', firedAt: firing.fireAt, kind: 'job' },
      binding: { budgets: { session: { tokens: 7_000 } } },
    });
    expect(payload(ofType(events, 'job.created')[0])).toMatchObject({ requestedBy: 'schedule:batch' });
  });

  it('a claim whose worker died before recording the start is taken over, and finds the work already made', async () => {
    h = await harness(SCRIPT, { schedules: { ticker: { tickMs: 100, claimGraceMs: 300 } } });
    const rt = h.runtime;
    await rt.schedules.add({ scheduleId: 'nightly', cron: '0 3 * * *', start: { kind: 'session', input: 'report' } });
    const fireAt = '2026-01-01T02:00:00.000Z';
    const stale = new Date(Date.now() - 60_000).toISOString();
    const db = rt.store.db;
    // A worker claimed the firing and died: the row is `claimed`, nothing started.
    await db
      .insertInto('oar_schedule_firings')
      .values({
        schedule_id: 'nightly',
        fire_at: fireAt,
        status: 'claimed',
        started: null,
        reason: null,
        details: null,
        created_at: stale,
        updated_at: stale,
      })
      .execute();
    const first = await waitFor(
      async () => (await firingRows(db, 'nightly')).find((r) => r.status === 'started'),
      5_000,
    );
    const sessionId = first.started?.sessionId as string;
    await rt.settled(sessionId);
    // Another worker died after starting the work but before recording it: taken over again, nothing made twice.
    await db
      .updateTable('oar_schedule_firings')
      .set({ status: 'claimed', started: null, updated_at: stale })
      .where('schedule_id', '=', 'nightly')
      .execute();
    const again = await waitFor(
      async () => (await firingRows(db, 'nightly')).find((r) => r.status === 'started'),
      5_000,
    );
    expect(again.started).toEqual(first.started);
    const events = await rt.log.read(sessionId);
    expect(ofType(events, 'session.created')).toHaveLength(1);
    expect(ofType(events, 'turn.submitted')).toHaveLength(1);
    expect((await firedSessions(rt, 'nightly')).get(fireAt)).toHaveLength(1);
  });

  it('overlap cancel: the previous firing`s turn is interrupted, then the firing starts', async () => {
    const slow = { steps: Array.from({ length: 20 }, () => ({ ...answer('slow'), delayMs: 5_000 })) };
    h = await harness(slow, { schedules: FAST });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.schedules.add({
      scheduleId: 'latest-only',
      cron: '* * * * * *',
      overlap: 'cancel',
      start: { kind: 'turn', sessionId, input: 'work' },
    });
    await waitFor(async () => {
      const rows = await firingRows(rt.store.db, 'latest-only');
      return rows.filter((r) => r.status === 'started').length >= 2;
    }, 6_000);
    await rt.schedules.pause({ scheduleId: 'latest-only' });
    const cancelled = await waitFor(async () => {
      const failed = ofType(await rt.log.read(sessionId), 'turn.failed');
      return failed.find((e) => e.status === 'cancelled');
    }, 5_000);
    expect(cancelled.turnId).toMatch(/^turn_sch_/);
    await rt.interruptTurn({ sessionId });
  });

  it('overlap queue: a session firing waits as queued until the previous firing`s work ended, then starts', async () => {
    const slow = { steps: [{ ...answer('slow'), delayMs: 1_800 }, ...SCRIPT.steps] };
    h = await harness(slow, { schedules: FAST });
    const rt = h.runtime;
    await rt.schedules.add({
      scheduleId: 'one-at-a-time',
      cron: '* * * * * *',
      overlap: 'queue',
      start: { kind: 'session', input: 'work' },
    });
    const queued = await waitFor(
      async () => (await firingRows(rt.store.db, 'one-at-a-time')).find((r) => r.status === 'queued'),
      5_000,
    );
    const started = await waitFor(async () => {
      const rows = await firingRows(rt.store.db, 'one-at-a-time', { limit: 100 });
      return rows.find((r) => r.fireAt === queued.fireAt && r.status === 'started');
    }, 8_000);
    await rt.schedules.pause({ scheduleId: 'one-at-a-time' });
    const rows = await firingRows(rt.store.db, 'one-at-a-time', { limit: 100 });
    const previous = rows.filter((r) => r.status === 'started' && r.fireAt < queued.fireAt).at(0);
    const ended = ofType(await rt.log.read(previous?.started?.sessionId as string), 'turn.completed')[0];
    const created = (await rt.log.read(started.started?.sessionId as string))[0];
    // Started after the previous firing's turn ended, not at its own cron time.
    expect((created?.timestamp ?? '') >= (ended?.timestamp ?? 'z')).toBe(true);
  });

  it('overlap queue: a queued firing waits behind an earlier one not started yet (claimed by another worker)', async () => {
    h = await harness(SCRIPT, { schedules: FAST });
    const rt = h.runtime;
    await rt.schedules.add({
      scheduleId: 'in-order',
      cron: '0 3 * * *',
      overlap: 'queue',
      start: { kind: 'session', input: 'work' },
    });
    const db = rt.store.db;
    const row = (fireAt: string, status: 'claimed' | 'queued', at: string) => ({
      schedule_id: 'in-order',
      fire_at: fireAt,
      status,
      started: null,
      reason: null,
      details: null,
      created_at: at,
      updated_at: at,
    });
    // The earlier firing is being started by another worker right now (a fresh claim); the later one is queued.
    const [earlier, later] = ['2026-01-01T02:00:00.000Z', '2026-01-02T02:00:00.000Z'];
    await db
      .insertInto('oar_schedule_firings')
      .values([
        row(earlier, 'claimed', new Date(Date.now() + 60_000).toISOString()),
        row(later, 'queued', new Date(Date.now() - 60_000).toISOString()),
      ])
      .execute();
    // The later one is looked at every tick, and waits: started now, it would run beside the earlier one's work.
    await waitFor(
      async () => (await firingRows(db, 'in-order')).find((r) => r.fireAt === later)?.updatedAt !== undefined,
    );
    await sleep(600);
    expect((await firingRows(db, 'in-order')).find((r) => r.fireAt === later)?.status).toBe('queued');
    expect((await firedSessions(rt, 'in-order')).size).toBe(0);
    // Once the earlier one is settled (here: skipped), the later one starts.
    await db.updateTable('oar_schedule_firings').set({ status: 'skipped' }).where('fire_at', '=', earlier).execute();
    await waitFor(
      async () => (await firingRows(db, 'in-order')).find((r) => r.fireAt === later && r.status === 'started'),
      5_000,
    );
  });

  it('catch-up: missed firings are one skipped record (skip), or one firing for the latest (run_once)', async () => {
    h = await harness(SCRIPT, { schedules: FAST });
    const rt = h.runtime;
    for (const catchUp of ['skip', 'run_once'] as const) {
      await rt.schedules.add({
        scheduleId: `hourly-${catchUp}`,
        // Every minute at second 7: an hour down misses about 60 of them.
        cron: '7 * * * * *',
        catchUp,
        paused: true,
        start: { kind: 'session', input: 'catch up' },
      });
    }
    // The worker "was down" for an hour: the pointer is an hour old when the schedules become active.
    const hourAgo = new Date(Date.now() - 3_600_000);
    hourAgo.setUTCSeconds(7, 0);
    await rt.store.db.updateTable('oar_schedules').set({ paused: 0, next_fire_at: hourAgo.toISOString() }).execute();
    const skip = await waitFor(async () =>
      (await firingRows(rt.store.db, 'hourly-skip')).find((r) => r.reason === 'missed'),
    );
    expect(skip).toMatchObject({ status: 'skipped', details: { count: expect.any(Number) } });
    expect(skip.details?.count as number).toBeGreaterThanOrEqual(58);
    const once = await waitFor(async () =>
      (await firingRows(rt.store.db, 'hourly-run_once')).find((r) => r.status === 'started' && r.details?.missed),
    );
    const missedCount = once.details?.missed as number;
    expect(missedCount).toBeGreaterThanOrEqual(58);
    const created = (await rt.log.read(once.started?.sessionId as string))[0];
    expect(payload(created).schedule).toMatchObject({ firedAt: once.fireAt, catchUp: { missed: missedCount } });
    // Exactly one firing for the missed hour: the rest were folded into it.
    const missedRows = (await firingRows(rt.store.db, 'hourly-run_once', { limit: 100 })).filter(
      (r) => r.fireAt < new Date(Date.now() - 60_000).toISOString(),
    );
    expect(missedRows).toHaveLength(1);
  });

  it('bad input: invalid cron and time zone name the field; unknown ids are schedule_not_found', async () => {
    h = await harness(SCRIPT, { schedules: { ticker: false } });
    const rt = h.runtime;
    const start = { kind: 'session' as const, input: 'x' };
    const bad = await rt.schedules
      .add({ cron: 'every day', start })
      .catch((e: unknown) => (e as OarRuntimeError).error);
    expect(bad).toMatchObject({ code: 'invalid_input', details: { field: 'cron' } });
    const tz = await rt.schedules
      .add({ cron: '0 3 * * *', timezone: 'Mars/Olympus', start })
      .catch((e: unknown) => (e as OarRuntimeError).error);
    expect(tz).toMatchObject({ code: 'invalid_input', details: { field: 'timezone' } });
    expect(await errorCode(rt.schedules.get({ scheduleId: 'nope' }))).toBe('schedule_not_found');
    expect(
      await errorCode(
        rt.schedules.add({ cron: '0 3 * * *', start: { kind: 'turn', sessionId: 'ses_nope', input: 'x' } }),
      ),
    ).toBe('session_not_found');
    await rt.schedules.add({ scheduleId: 'twice', cron: '0 3 * * *', start });
    expect(await errorCode(rt.schedules.add({ scheduleId: 'twice', cron: '0 3 * * *', start }))).toBe(
      'schedule_exists',
    );
    expect(await rt.schedules.remove({ scheduleId: 'twice' })).toEqual({ scheduleId: 'twice', removed: true });
    expect(await rt.schedules.list()).toEqual([]);
  });
});

/** Two runtimes with workers on one database: SQLite shares one Store in a process, PostgreSQL gets a pool each. */
async function secondStore(db: TestDatabase): Promise<Store> {
  return db.dialect === 'sqlite' ? db.store : db.open();
}

describeStores('schedules on two workers', (factory) => {
  it('each cron time fires exactly once: one firing row and one started session per second', async () => {
    const db = await factory.fresh();
    const a = await harness(SCRIPT, { store: db.store, schedules: { ticker: { tickMs: 50 } } });
    const b = await harness(SCRIPT, { store: await secondStore(db), schedules: { ticker: { tickMs: 50 } } });
    factory.defer(async () => {
      await a.runtime.close();
      await b.runtime.close();
    });
    await a.runtime.schedules.add({
      scheduleId: 'tick',
      cron: '* * * * * *',
      start: { kind: 'session', input: 'tick' },
    });
    await sleep(4_300);
    await b.runtime.schedules.pause({ scheduleId: 'tick' });
    // A firing in flight as the pause landed finishes its start.
    const rows = await waitFor(async () => {
      const all = await firingRows(a.store.db, 'tick', { limit: 100 });
      return all.every((r) => r.status !== 'claimed') && all;
    });
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(rows.every((r) => r.status === 'started')).toBe(true);
    const times = rows.map((r) => Date.parse(r.fireAt)).sort();
    // Consecutive seconds: none lost, none twice.
    expect(times.map((t, i) => t - (times[0] as number) - i * 1_000)).toEqual(times.map(() => 0));
    const sessions = await firedSessions(a.runtime, 'tick');
    expect([...sessions.keys()].sort()).toEqual(rows.map((r) => r.fireAt).sort());
    expect([...sessions.values()].every((created) => created.length === 1)).toBe(true);
    for (const row of rows) {
      const events = await a.runtime.log.read(row.started?.sessionId as string);
      expect(ofType(events, 'turn.submitted')).toHaveLength(1);
    }
  });
});
