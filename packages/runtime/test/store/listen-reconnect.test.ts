import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { type EventDraft, EventLog, Notifier, type SessionChange, Store } from '../../src/index.js';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../support/stores.js';

/**
 * The PostgreSQL notifier hears other processes through LISTEN on a dedicated connection. Seen: once that
 * connection dropped (a server restart, a failover, `pg_terminate_backend`), it was never re-established, and the
 * process heard other writers only through the fallback poll. Now the loss is detected, the connection is made
 * again with backoff, LISTEN re-issued, and a poll catches up with whatever was written while nobody listened.
 * Here on the real server, with the fallback poll set to an hour so that only LISTEN (and the catch-up) can deliver.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(25);
  }
  return check();
}

const note = (key: string): EventDraft => ({
  type: 'session.updated',
  payload: { changed: [`state.${key}`], state: { key, value: 1 } },
});

describe('the notifier re-establishes LISTEN after its connection drops', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL LISTEN reconnect test: ${unavailable.message}`);
    return;
  }

  it('pg_terminate_backend on the listener: it reconnects, catches up, and hears later writes', {
    timeout: 60_000,
  }, async () => {
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    const observerStore = await Store.open(POSTGRES_URL, { schema });
    const writerStore = await Store.open(POSTGRES_URL, { schema });
    const notifier = new Notifier(new EventLog(observerStore, 'rt_observer'), { pollMs: 3_600_000 });
    const writer = new EventLog(writerStore, 'rt_writer');
    const sessionId = `ses_${schema}`;
    const listeners = async () =>
      new Set(
        (
          await admin.query<{ pid: number }>(
            `select pid from pg_stat_activity where datname = current_database() and query = 'listen oar_events'`,
          )
        ).rows.map((row) => row.pid),
      );
    try {
      const before = await listeners();
      const heard: SessionChange[] = [];
      notifier.listen((change) => heard.push(change));
      const heardSequence = (sequence: number) =>
        heard.some((c) => c.sessionId === sessionId && c.sequence >= sequence);
      // The notifier's own listening backend: the one that was not there before it started.
      let ours: number[] = [];
      expect(
        await until(async () => {
          ours = [...(await listeners())].filter((pid) => !before.has(pid));
          return ours.length > 0;
        }, 10_000),
      ).toBe(true);

      await writer.createSession(sessionId, undefined, [note('a')]);
      expect(await until(() => heardSequence(1), 5_000)).toBe(true);

      // The server ends the listening connection; a write lands while nobody listens.
      for (const pid of ours) await admin.query('select pg_terminate_backend($1)', [pid]);
      await writer.append(sessionId, [note('b')]);
      // Caught up by the poll that follows the reconnection (the fallback poll is an hour away).
      expect(await until(() => heardSequence(2), 15_000), JSON.stringify(heard)).toBe(true);

      // LISTEN is back on a new connection: a later write is heard as a notification again.
      const replaced = await listeners();
      expect([...replaced].some((pid) => !before.has(pid) && !ours.includes(pid))).toBe(true);
      await writer.append(sessionId, [note('c')]);
      expect(await until(() => heardSequence(3), 5_000), JSON.stringify(heard)).toBe(true);
    } finally {
      await notifier.close();
      await observerStore.close();
      await writerStore.close();
      await admin.end();
      await dropSchema(schema);
    }
  });
});
