import { sql, type Transaction } from 'kysely';
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
}

const sqlite: StoreDialect = {
  name: 'sqlite',
  sharedByProcesses: false,
  rowLocks: false,
  pollMs: 200,
  lockKey: async () => undefined,
  notifyOnCommit: async () => undefined,
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
};

export const STORE_DIALECTS: Readonly<Record<Dialect, StoreDialect>> = { sqlite, postgres };
