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
  /** Whether `relaxedTransaction` relaxes anything: commits that skip the disk are safe only where a loss kills us. */
  readonly relaxedCommits: boolean;
  /**
   * Run `fn` in one transaction whose commit may return before the disk has it (log/durability.ts), where that is
   * safe: a crash of this process loses nothing committed, and only what also ends this process (a power loss) may
   * lose it. Every other commit waits for the flush.
   */
  relaxedTransaction<T>(db: Kysely<Database>, fn: (tx: Transaction<Database>) => Promise<T>): Promise<T>;
}

const sqlite: StoreDialect = {
  name: 'sqlite',
  sharedByProcesses: false,
  rowLocks: false,
  pollMs: 200,
  relaxedCommits: true,
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
  relaxedCommits: false,
  async lockKey(tx, key) {
    await sql`select pg_advisory_xact_lock(hashtext(${key}))`.execute(tx);
  },
  async notifyOnCommit(tx, channel, note) {
    await sql`select pg_notify(${channel}, ${note})`.execute(tx);
  },
  // Not relaxed on PostgreSQL: the server is another process, so it can crash (or fail over) and lose the last
  // unflushed commits while this process lives on, holding the lease and a working state built on facts the store
  // no longer has — the next flushed commit would then follow a hole in meaning, not in numbers. On SQLite a loss
  // means this process died with the machine, and whoever drives the thread next reads the store.
  relaxedTransaction: (db, fn) => db.transaction().execute(fn),
};

export const STORE_DIALECTS: Readonly<Record<Dialect, StoreDialect>> = { sqlite, postgres };
