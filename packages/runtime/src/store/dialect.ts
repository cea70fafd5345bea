import { type Kysely, sql, type Transaction } from 'kysely';
import type { Database } from './schema.js';

/** The store's SQL dialects: an embedded SQLite file, or a PostgreSQL server for many processes. */
export type Dialect = 'sqlite' | 'postgres';

/**
 * What differs between the dialects, as capabilities and operations (the StoreDialect port). Code outside store/
 * asks the port and never which dialect it is: a third dialect is one more implementation here, not a hunt for
 * `if (dialect === …)` across the runtime.
 */
export interface StoreDialect {
  readonly name: Dialect;
  /**
   * Several processes write the store at once (PostgreSQL): limits and pauses are kept in the store so every worker
   * honours them, and committed events are announced to the others. SQLite: one writing process, told in memory.
   */
  readonly sharedByProcesses: boolean;
  /**
   * Writers lock rows they are about to change (`SELECT … FOR UPDATE`, `FOR SHARE`); SQLite's single writer holds the
   * whole file, so it needs (and has) none.
   */
  readonly rowLocks: boolean;
  /** How often a notifier looks for changes it was not told about (a lost notification, another process). */
  readonly pollMs: number;
  /** Serialize on `key` until the transaction ends (an advisory lock); nothing on SQLite, which is serial already. */
  lockKey(tx: Transaction<Database>, key: string): Promise<void>;
  /** Announce `note` on `channel` when the transaction commits (`pg_notify`); nothing where no other process listens. */
  notifyOnCommit(tx: Transaction<Database>, channel: string, note: string): Promise<void>;
  /**
   * Run `fn` in one transaction whose commit returns before the disk has it (log/durability.ts): a crash of this
   * process loses nothing committed, a power loss may lose it. Every other commit waits for the flush.
   */
  relaxedTransaction<T>(db: Kysely<Database>, fn: (tx: Transaction<Database>) => Promise<T>): Promise<T>;
}

const sqlite: StoreDialect = {
  name: 'sqlite',
  sharedByProcesses: false,
  rowLocks: false,
  pollMs: 200,
  lockKey: async () => undefined,
  notifyOnCommit: async () => undefined,
  // The connection runs `synchronous = FULL` (each commit syncs the write-ahead log); NORMAL for one transaction
  // leaves the sync to the next FULL commit or checkpoint. SQLite refuses to change it inside a transaction, so it
  // is set around one, on the single connection held for the whole of it (no other statement runs in between).
  relaxedTransaction: (db, fn) =>
    db.connection().execute(async (connection) => {
      await sql`pragma synchronous = NORMAL`.execute(connection);
      let failed = false;
      try {
        return await connection.transaction().execute(fn);
      } catch (error) {
        failed = true;
        throw error;
      } finally {
        // After a failed transaction its own error is the one to report, not a second one from here.
        await sql`pragma synchronous = FULL`.execute(connection).catch((error: unknown) => {
          if (!failed) throw error;
        });
      }
    }),
};

const postgres: StoreDialect = {
  name: 'postgres',
  sharedByProcesses: true,
  rowLocks: true,
  pollMs: 1000,
  async lockKey(tx, key) {
    await sql`select pg_advisory_xact_lock(hashtext(${key}))`.execute(tx);
  },
  async notifyOnCommit(tx, channel, note) {
    await sql`select pg_notify(${channel}, ${note})`.execute(tx);
  },
  // For this transaction only: the server acknowledges the commit before its WAL is flushed (at most three
  // `wal_writer_delay`s later, 600 ms by default). A later flushed commit flushes it too.
  relaxedTransaction: (db, fn) =>
    db.transaction().execute(async (tx) => {
      await sql`set local synchronous_commit = off`.execute(tx);
      return fn(tx);
    }),
};

export const STORE_DIALECTS: Readonly<Record<Dialect, StoreDialect>> = { sqlite, postgres };
