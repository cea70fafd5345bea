import { type Kysely, sql } from 'kysely';
import type { Dialect } from './dialect.js';
import { migrations } from './migrations.js';
import type { Database } from './schema.js';

/**
 * Apply every migration this version knows and the store lacks, in name order, in one transaction.
 *
 * Why not Kysely's Migrator: its table-existence check introspects every table of every schema of the database,
 * so a schema somebody else drops at that moment fails `Store.open` with `schema "…" does not exist`. This runner
 * reads OAR's own migration table and nothing else. The table keeps the Migrator's layout (`name`, `timestamp`),
 * so stores created by earlier versions open unchanged.
 *
 * Concurrency: PostgreSQL serializes openers with a transaction-scoped advisory lock (DDL is transactional, so a
 * loser sees the winner's tables and finds nothing to do); SQLite takes the write lock up front (BEGIN IMMEDIATE),
 * which waits out another process's opener through busy_timeout.
 */
export async function migrateStore(db: Kysely<Database>, dialect: Dialect, schema: string | undefined): Promise<void> {
  const table = migrationTable(schema);
  await db.connection().execute(async (conn) => {
    await sql.raw(dialect === 'sqlite' ? 'begin immediate' : 'begin').execute(conn);
    try {
      if (dialect === 'postgres') {
        await sql`select pg_advisory_xact_lock(hashtext(${`${schema ?? 'public'}.oar_migrations`}))`.execute(conn);
        // Under the lock: concurrent `create schema if not exists` race on the catalog's unique index.
        if (schema) await sql`create schema if not exists ${sql.id(schema)}`.execute(conn);
      }
      await sql`create table if not exists ${table} (name varchar(255) not null primary key, timestamp varchar(255) not null)`.execute(
        conn,
      );
      const { rows } = await sql<{ name: string }>`select name from ${table}`.execute(conn);
      const applied = new Set(rows.map((row) => row.name));
      const all = migrations(dialect);
      const ordered = Object.entries(all).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      for (const [name, migration] of ordered) {
        if (applied.has(name)) continue;
        await migration.up(conn as Kysely<unknown>);
        await sql`insert into ${table} (name, timestamp) values (${name}, ${new Date().toISOString()})`.execute(conn);
      }
      await sql.raw('commit').execute(conn);
    } catch (error) {
      await sql
        .raw('rollback')
        .execute(conn)
        .catch(() => undefined);
      throw error;
    }
  });
}

/** Every migration this version knows is recorded as applied (false when the table does not exist yet). */
export async function storeUpToDate(
  db: Kysely<Database>,
  dialect: Dialect,
  schema: string | undefined,
): Promise<boolean> {
  const table = migrationTable(schema);
  try {
    const { rows } = await sql<{ name: string }>`select name from ${table}`.execute(db);
    const applied = new Set(rows.map((row) => row.name));
    return Object.keys(migrations(dialect)).every((name) => applied.has(name));
  } catch {
    return false;
  }
}

/** OAR's migration table, in the store's schema when it has one. */
function migrationTable(schema: string | undefined) {
  return schema ? sql`${sql.id(schema)}.oar_migrations` : sql`oar_migrations`;
}
