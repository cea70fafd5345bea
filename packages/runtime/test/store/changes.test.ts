import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { changeCursor, changesSince } from '../../src/store/changes.js';
import type { Database } from '../../src/store/schema.js';
import { Store } from '../../src/store/store.js';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../support/stores.js';

/**
 * The notifier's fallback poll runs every second in every process: on PostgreSQL it used to read every row of
 * `oar_sessions` (a sequential scan testing each row's `xmin` against the last snapshot), so its cost grew with
 * the number of sessions ever created. A poll reads only the sessions changed since the last one: the rows whose
 * `change_xid` (the writing transaction's id, kept by a trigger, indexed) is not older than the last snapshot's
 * oldest running transaction. Measured here on the real server: the statement the poll runs, under EXPLAIN ANALYZE.
 */

type Plan = Record<string, unknown> & { Plans?: Plan[] };

/** Rows the plan read from `oar_sessions`: returned by its scans plus those their filters threw away. */
function sessionRowsRead(plan: Plan): number {
  let rows = 0;
  if (plan['Relation Name'] === 'oar_sessions') {
    const loops = Number(plan['Actual Loops'] ?? 1);
    rows +=
      (Number(plan['Actual Rows'] ?? 0) +
        Number(plan['Rows Removed by Filter'] ?? 0) +
        Number(plan['Rows Removed by Index Recheck'] ?? 0)) *
      loops;
  }
  for (const child of plan.Plans ?? []) rows += sessionRowsRead(child);
  return rows;
}

describe('the PostgreSQL change poll', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL change-poll test: ${unavailable.message}`);
    return;
  }

  it('reads only the sessions that changed since the last poll, not the whole table', { timeout: 60_000 }, async () => {
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const store = await Store.open(POSTGRES_URL, { schema });
    // The same database seen through a Kysely that records each statement it runs (the poll's own SQL).
    const statements: { sql: string; parameters: readonly unknown[] }[] = [];
    const pool = new pg.Pool({ connectionString: POSTGRES_URL, options: `-c search_path=${schema}`, max: 2 });
    const db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => {
        if (event.level === 'query') statements.push({ sql: event.query.sql, parameters: event.query.parameters });
      },
    });
    const observed = { dialect: 'postgres', db } as unknown as Store;
    try {
      const SESSIONS = 3000;
      await sql`insert into oar_sessions (id, runtime_id, created_at, updated_at, last_sequence)
        select 'ses_' || g, 'rt', 'now', 'now', 1 from generate_series(1, ${SESSIONS}) g`.execute(store.db);
      await sql`analyze oar_sessions`.execute(store.db);
      // Wait until no transaction that was running during the insert is still running (other tests share the
      // server): from then on the inserted rows are history for every snapshot.
      const { rows } = await sql<{ xid: string }>`select pg_current_xact_id()::text as xid`.execute(store.db);
      const after = BigInt(rows[0]?.xid ?? '0');
      for (let i = 0; i < 200; i++) {
        const now = await sql<{ xmin: string }>`select pg_snapshot_xmin(pg_current_snapshot())::text as xmin`.execute(
          store.db,
        );
        if (BigInt(now.rows[0]?.xmin ?? '0') > after) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }

      const cursor = await changeCursor(observed);
      await sql`update oar_sessions set last_sequence = last_sequence + 1 where id in ('ses_7', 'ses_1500', 'ses_2999')`.execute(
        store.db,
      );
      statements.length = 0;
      const polled = await changesSince(observed, cursor);
      expect(polled.changes.map((c) => c.sessionId).sort()).toEqual(['ses_1500', 'ses_2999', 'ses_7']);
      expect(polled.changes.every((c) => c.sequence === 2)).toBe(true);

      // The poll's statement, again, under EXPLAIN ANALYZE: how many session rows did it touch?
      const poll = statements.at(-1);
      expect(poll).toBeDefined();
      const client = await pool.connect();
      try {
        const explained = await client.query(`explain (analyze, format json) ${poll?.sql}`, [
          ...(poll?.parameters ?? []),
        ]);
        const plan = (explained.rows[0]['QUERY PLAN'] as { Plan: Plan }[])[0]?.Plan as Plan;
        const read = sessionRowsRead(plan);
        expect(read, JSON.stringify(plan)).toBeLessThanOrEqual(10);
      } finally {
        client.release();
      }

      // Nothing changed since: the next poll reads nothing and reports nothing.
      const next = await changesSince(observed, polled.cursor);
      expect(next.changes).toEqual([]);
    } finally {
      await db.destroy();
      await store.close();
      await dropSchema(schema);
    }
  });
});
