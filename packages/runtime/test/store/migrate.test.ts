import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import { expect, it } from 'vitest';
import { OarRuntimeError } from '../../src/kernel/errors.js';
import type { Store } from '../../src/store/store.js';
import { describeStores } from '../support/stores.js';

const fixture = fileURLToPath(new URL('./fixtures/open-store.ts', import.meta.url));

function openInProcess(url: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fixture, url], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

const ALL_MIGRATIONS = [
  '0001_event_log',
  '0002_thread_leases',
  '0003_thread_action_lists',
  '0004_session_changes',
  '0005_workspaces',
  '0006_provider_limits',
  '0007_runner_storage',
  '0008_artifact_retention',
  '0009_schedules',
];

async function appliedMigrations(store: Store): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select name from oar_migrations order by name`.execute(store.db);
  return rows.map((row) => row.name);
}

describeStores('store migrations', (factory) => {
  it('several processes opening a new database at once all succeed and apply each migration once', async () => {
    const database = factory.blank();
    if (factory.dialect === 'sqlite') {
      // better-sqlite3 is synchronous: two connections of one process waiting on each other's lock would stall the
      // event loop, so the race is run the way it happens, between processes.
      const results = await Promise.all(Array.from({ length: 4 }, () => openInProcess(database.url)));
      expect(results.filter((result) => result.code !== 0)).toEqual([]);
    }
    // Eight independent Stores (PostgreSQL: eight pools) race to create the schema; on SQLite they open after.
    const stores = await Promise.all(Array.from({ length: 8 }, () => database.open()));
    expect(await appliedMigrations(stores[0]!)).toEqual(ALL_MIGRATIONS);
    const { rows } = await sql<{ n: number }>`select count(*) as n from oar_thread_leases`.execute(stores[3]!.db);
    expect(Number(rows[0]!.n)).toBe(0);
  }, 120_000);

  it('a store that lacks a later migration gets it on open, and keeps what it had', async () => {
    const database = factory.blank();
    const first = await database.open();
    // As a store written before 0002 existed: the table and its migration record are gone.
    await sql`drop table oar_thread_leases`.execute(first.db);
    await sql`delete from oar_migrations where name = '0002_thread_leases'`.execute(first.db);
    await sql`insert into oar_state (scope, key, value, updated_at) values ('s', 'k', '"v"', 'now')`.execute(first.db);

    const reopened = await database.open();
    expect(await appliedMigrations(reopened)).toEqual(ALL_MIGRATIONS);
    const { rows } = await sql<{ value: string }>`select value from oar_state where key = 'k'`.execute(reopened.db);
    expect(rows.map((row) => row.value)).toEqual(['"v"']);
    await sql`select count(*) from oar_thread_leases`.execute(reopened.db);
  });

  it('thread rows written before 0003 lose the action lists a thread now derives from its runs', async () => {
    const database = factory.blank();
    const first = await database.open();
    // As a store written before 0003: a thread row with both lists, and no record of the migration.
    const body = JSON.stringify({ threadId: 'thr_1', usedActionIds: ['a'], completedActionIds: ['a'], turns: [] });
    const run = JSON.stringify({ runId: 'run_1', usedActionIds: ['kept: not a thread'] });
    await sql`insert into oar_read_models (session_id, kind, key, status, sequence, body, updated_at)
      values ('ses_1', 'thread', 'thr_1', 'idle', 3, ${body}, 'now'), ('ses_1', 'run', 'run_1', null, 3, ${run}, 'now')`.execute(
      first.db,
    );
    await sql`delete from oar_migrations where name = '0003_thread_action_lists'`.execute(first.db);

    const reopened = await database.open();
    expect(await appliedMigrations(reopened)).toEqual(ALL_MIGRATIONS);
    const { rows } = await sql<{
      kind: string;
      body: string;
    }>`select kind, body from oar_read_models order by kind`.execute(reopened.db);
    expect(rows.map((row) => [row.kind, JSON.parse(row.body)])).toEqual([
      ['run', { runId: 'run_1', usedActionIds: ['kept: not a thread'] }],
      ['thread', { threadId: 'thr_1', turns: [] }],
    ]);
  });

  it('a migration that fails says store_migration_failed and applies nothing of itself', async () => {
    const database = factory.blank();
    // Something else already owns a table the first migration creates (0001 creates oar_sessions, then more).
    if (database.schema) {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      await client.query(`create schema ${database.schema}; create table ${database.schema}.oar_artifacts (x int)`);
      await client.end();
    } else {
      const raw = new SQLite(database.url);
      raw.exec('create table oar_artifacts (x int)');
      raw.close();
    }
    const failure = await database.open().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(OarRuntimeError);
    expect(failure).toMatchObject({ error: { code: 'store_migration_failed', retryable: true } });
    // One transaction: oar_sessions, created before the failing statement, was rolled back with it.
    const probe = database.schema
      ? `select count(*)::int as n from information_schema.tables where table_schema = '${database.schema}' and table_name in ('oar_sessions', 'oar_events')`
      : "select count(*) as n from sqlite_master where name in ('oar_sessions', 'oar_events')";
    if (database.schema) {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      const { rows } = await client.query(probe);
      await client.end();
      expect(rows[0].n).toBe(0);
    } else {
      const raw = new SQLite(database.url);
      expect((raw.prepare(probe).get() as { n: number }).n).toBe(0);
      raw.close();
    }
  });
});
