import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { OarRuntimeError } from '../errors.js';
import { migrateStore, storeUpToDate } from './migrate.js';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';
export type Db = Kysely<Database> | Transaction<Database>;

/** The default embedded store: a SQLite file in the working directory. */
export const DEFAULT_STORE_PATH = '.oar/oar.db';

export interface StoreOptions {
  /** Working directory for relative SQLite paths (default: process.cwd()). */
  cwd?: string;
  /** PostgreSQL only: a schema to create and use (tests isolate themselves this way). */
  schema?: string;
  /** PostgreSQL pool size. */
  poolSize?: number;
}

/**
 * A connection to one store. `url`: undefined → `.oar/oar.db`; `postgres://…`/`postgresql://…` → PostgreSQL;
 * `sqlite:PATH`, `file:PATH` or a plain path → a SQLite file (`:memory:` for an in-memory database).
 */
export class Store {
  private constructor(
    readonly db: Kysely<Database>,
    readonly dialect: Dialect,
    readonly location: string,
  ) {}

  static async open(url: string | undefined, options: StoreOptions = {}): Promise<Store> {
    const store = Store.connect(url, options);
    await store.migrate();
    return store;
  }

  private static connect(input: string | undefined, options: StoreOptions): Store {
    let url = input;
    if (url !== undefined && /^postgres(ql)?:\/\//.test(url)) {
      // `?schema=NAME` in the URL selects (and creates) a schema, like the `schema` option.
      const parsed = new URL(url);
      const schema = options.schema ?? parsed.searchParams.get('schema') ?? undefined;
      parsed.searchParams.delete('schema');
      url = parsed.toString();
      if (schema !== undefined && !/^[a-z_][a-z0-9_]*$/.test(schema)) {
        throw new OarRuntimeError('invalid_store', `invalid PostgreSQL schema name "${schema}"`);
      }
      const connection = { connectionString: url, ...(schema ? { options: `-c search_path=${schema}` } : {}) };
      const pool = new pg.Pool({ ...connection, max: options.poolSize ?? 10 });
      // An idle client the server dropped must not crash the process; the next query gets a fresh connection.
      pool.on('error', () => undefined);
      const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
      // The location names the schema too (it is part of where the data is); the password never appears.
      const store = new Store(db, 'postgres', redact(input ?? url));
      store.pgSchema = schema;
      store.pgConnection = connection;
      return store;
    }
    const path = sqlitePath(url, options.cwd ?? process.cwd());
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    let database: SQLite.Database;
    try {
      database = new SQLite(path);
    } catch (error) {
      throw new OarRuntimeError('store_unavailable', `cannot open SQLite store ${path}: ${(error as Error).message}`);
    }
    // WAL lets readers (oar events --follow, inspect) work while a runner writes; busy_timeout waits out writers.
    database.pragma('journal_mode = WAL');
    database.pragma('busy_timeout = 5000');
    database.pragma('foreign_keys = ON');
    database.pragma('synchronous = NORMAL');
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
    return new Store(db, 'sqlite', path);
  }

  private pgSchema: string | undefined;
  private pgConnection: pg.ClientConfig | undefined;

  /**
   * PostgreSQL only: LISTEN on `channel` over a dedicated connection; `onMessage` gets each payload. Resolves to
   * a function that stops listening. On SQLite there is nothing to listen to (undefined): callers poll.
   */
  async listen(channel: string, onMessage: (payload: string) => void): Promise<(() => Promise<void>) | undefined> {
    if (!this.pgConnection) return undefined;
    const client = new pg.Client(this.pgConnection);
    client.on('error', () => undefined);
    client.on('notification', (message) => {
      if (message.channel === channel && message.payload !== undefined) onMessage(message.payload);
    });
    try {
      await client.connect();
      await client.query(`listen ${channel}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    return async () => {
      await client.end().catch(() => undefined);
    };
  }

  async migrate(): Promise<void> {
    // The common case, an up-to-date store, reads the migration table and takes no lock.
    if (await storeUpToDate(this.db, this.dialect, this.pgSchema)) return;
    try {
      await migrateStore(this.db, this.dialect, this.pgSchema);
    } catch (error) {
      throw new OarRuntimeError('store_migration_failed', `store migration failed: ${(error as Error).message}`, {
        retryable: true,
      });
    }
  }

  /** Run `fn` in one transaction: every state change and its events commit together or not at all. */
  transaction<T>(fn: (tx: Transaction<Database>) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(fn);
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }
}

function sqlitePath(url: string | undefined, cwd: string): string {
  if (url === undefined || url === '') return resolve(cwd, DEFAULT_STORE_PATH);
  const path = url.replace(/^(sqlite|file):(\/\/)?/, '');
  return path === ':memory:' ? path : resolve(cwd, path);
}

/** Store URLs may carry passwords; they never reach logs or events. */
function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}
