import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyTool, defineTool, OarRuntimeError, Store } from '../../src/index.js';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../support/stores.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, registryWith, sideEffectTool, waitFor } from './helpers.js';

/**
 * Store faults are honest. Seen: with a read-only or full database, `oar run` printed `{"status":"failed"}` with no
 * error while the log still said the turn was running (the worker's failure recorder swallowed the store error).
 * A store that cannot take the turn's writes must surface a named error to whoever waits for the turn, leave no
 * half-written step, and let a later run on a healthy store recover the thread under the usual durability rules.
 */

const open: Harness[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

type Fault = 'full' | 'read_only';

async function breakStore(store: Store, fault: Fault): Promise<void> {
  if (fault === 'read_only') await sql`pragma query_only = 1`.execute(store.db);
  else {
    // Fill the file to the brim: no page may be added, so the next append fails with SQLITE_FULL.
    await sql`create table if not exists oar_t_filler (x blob)`.execute(store.db);
    const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(store.db);
    await sql.raw(`pragma max_page_count = ${rows[0]!.page_count}`).execute(store.db);
    for (;;) {
      const filled = await sql`insert into oar_t_filler values (randomblob(2000))`.execute(store.db).then(
        () => false,
        () => true,
      );
      if (filled) break;
    }
  }
}

async function healStore(store: Store, fault: Fault): Promise<void> {
  if (fault === 'read_only') await sql`pragma query_only = 0`.execute(store.db);
  else await sql`pragma max_page_count = 1073741823`.execute(store.db);
}

/** A tool that breaks the store while it runs: its result is the first write that cannot be made. */
function breakingTool(store: () => Store, fault: Fault, calls: { n: number }): AnyTool {
  return sideEffectTool('break_store', 'Breaks the store.', async (input) => {
    calls.n++;
    if (calls.n === 1) await breakStore(store(), fault);
    return `done ${input.label}`;
  });
}

describe.each(['full', 'read_only'] as const)('a store that becomes %s mid-turn', (fault) => {
  it('surfaces a named error, writes nothing half, and the thread recovers once the store is healthy', async () => {
    const calls = { n: 0 };
    let h: Harness | undefined;
    h = await harness(
      { steps: [act([{ id: 'b', type: 'tool', name: 'break_store', args: { label: 'x' } }]), answer('recovered')] },
      {
        tools: registryWith(breakingTool(() => h!.store, fault, calls)),
        permissions: { mode: 'bypass' },
      },
    );
    open.push(h);
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    const failure = await h.runtime.settled(sessionId).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(OarRuntimeError);
    const code = fault === 'full' ? 'store_full' : 'store_read_only';
    expect((failure as OarRuntimeError).error).toMatchObject({ code });

    await healStore(h.store, fault);
    // Nothing half-written: the log is gap-free, its projections agree with it, the turn is not marked ended, and
    // whatever the failure recorder could still write names the fault. (A full file may still take a small write
    // after refusing a big one, so the tool's result may or may not have landed.)
    const before = await allEvents(h, sessionId);
    expect(before.map((e) => e.sequence)).toEqual(before.map((_, i) => i + 1));
    expect(ofType(before, 'tool.started')).toHaveLength(1);
    expect(ofType(before, 'turn.completed')).toHaveLength(0);
    for (const e of ofType(before, 'runtime.error')) expect(e.payload).toMatchObject({ code });
    const resultLanded = ofType(before, 'tool.result').length === 1;
    if (fault === 'read_only') expect(resultLanded).toBe(false);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);

    // A later run on the healthy store recovers the thread: the tool never runs twice; a started non-idempotent
    // call without a recorded result is lost (and the model told), one with a result stays completed.
    await h.runtime.recover();
    await h.runtime.settled(sessionId);
    expect(calls.n).toBe(1);
    const events = await allEvents(h, sessionId);
    if (!resultLanded) expect(ofType(events, 'tool.failed')[0]?.status).toBe('lost');
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'recovered' });
  });
});

describe('PostgreSQL connections terminated mid-turn', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL fault tests: ${unavailable.message}`);
    return;
  }

  /** Terminate every server connection of the store under test (they carry its application_name). */
  async function terminate(applicationName: string): Promise<number> {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      const { rows } = await client.query(
        'select pg_terminate_backend(pid) as ok from pg_stat_activity where application_name = $1',
        [applicationName],
      );
      return rows.length;
    } finally {
      await client.end();
    }
  }

  it('a query cut off by the server is a retryable store_unavailable, and the pool carries on', async () => {
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const store = await Store.open(`${POSTGRES_URL}?schema=${schema}&application_name=${schema}`);
    try {
      const sleeping = sql`select pg_sleep(10)`.execute(store.db).then(
        () => undefined,
        (error: unknown) => error,
      );
      await waitFor(async () => (await terminate(schema)) > 0 || undefined);
      const error = await sleeping;
      expect(error).toBeInstanceOf(OarRuntimeError);
      expect((error as OarRuntimeError).error).toMatchObject({ code: 'store_unavailable', retryable: true });
      // Retryable means a retry works: idle connections cut at the same moment fail once each, then are replaced.
      let rows: unknown[] = [];
      for (let attempt = 0; attempt < 12 && rows.length === 0; attempt++) {
        rows = await sql<{ one: number }>`select 1 as one`
          .execute(store.db)
          .then((result) => result.rows)
          .catch((retry: unknown) => {
            expect((retry as OarRuntimeError).error).toMatchObject({ code: 'store_unavailable', retryable: true });
            return [];
          });
      }
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });

  it.each([false, true])('the step is retried, never a crash (idempotent tool: %s)', async (idempotent) => {
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const calls = { n: 0, terminated: 0, storm: Promise.resolve() };
    const tool = defineTool<{ label: string }>({
      name: 'cut',
      description: 'Cuts the store connections while it runs.',
      input: z.strictObject({ label: z.string() }),
      isReadOnly: false,
      isConcurrencySafe: false,
      isDestructive: false,
      isIdempotent: idempotent,
      interruptBehavior: 'block',
      capabilities: ['write'],
      async execute(input) {
        calls.n++;
        if (calls.n === 1) {
          // A storm: the store's connections are cut again and again while the step records its facts.
          calls.storm = (async () => {
            for (let i = 0; i < 15; i++) {
              calls.terminated += await terminate(schema);
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
          })();
        }
        return { text: `done ${input.label}` };
      },
    });
    const h = await harness(
      { steps: [act([{ id: 'c', type: 'tool', name: 'cut', args: { label: 'x' } }]), answer('carried on')] },
      {
        storeUrl: `${POSTGRES_URL}?schema=${schema}&application_name=${schema}`,
        tools: registryWith(tool),
        permissions: { mode: 'bypass' },
      },
    );
    open.push(h);
    try {
      const { sessionId, threadId } = await h.runtime.createSession();
      await h.runtime.submitTurn({ sessionId, input: 'go' });
      await h.runtime.settled(sessionId);
      // The storm is over before the record is read back (the reads here are the test's, not the runtime's).
      await calls.storm;
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(calls.terminated).toBeGreaterThan(0);
      const read = await h.runtime.getThreadRead({ sessionId, threadId });
      expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'carried on' });
      const events = await allEvents(h, sessionId);
      expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
      // Durability rules, as after a crash: a non-idempotent call never runs twice (lost if its result was cut off).
      if (!idempotent) expect(calls.n).toBe(1);
      const failed = ofType(events, 'tool.failed');
      if (failed.length > 0) expect(failed[0]?.status).toBe(idempotent ? 'failed' : 'lost');
      expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
    } finally {
      await dropSchema(schema);
    }
  });
});
