import { accessSync, constants, existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql, type Transaction } from 'kysely';
import type pg from 'pg';
import { DEFAULT_STORE_PATH } from '../kernel/constants.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { maskConnectionUrl } from '../redaction/connection-url.js';
import { type Dialect, STORE_DIALECTS, type StoreDialect } from './dialect.js';
import { faultNamingDialect, storeFault } from './faults.js';
import { migrateStore, storeUpToDate } from './migrate.js';
import type { Database } from './schema.js';
import { statementCache } from './statement-cache.js';
export type Db = Kysely<Database> | Transaction<Database>;

/** How a lost LISTEN connection is made again: the pause doubles from the first to the maximum, with no end. */
export const LISTEN_RETRY = { firstDelayMs: 100, maxDelayMs: 5_000 } as const;

export { DEFAULT_STORE_PATH };

export interface StoreOptions {
  /** Working directory for relative SQLite paths (default: process.cwd()). */
  cwd?: string;
  /** PostgreSQL only: a schema to create and use (tests isolate themselves this way). */
  schema?: string;
  /** PostgreSQL pool size. */
  poolSize?: number;
  /**
   * Whether a store that does not exist yet is made (default true). `false` for what only reads or continues
   * existing sessions: a missing SQLite file (or a PostgreSQL database or schema without OAR's tables) is then
   * `store_not_found`, naming where it looked, and nothing is created — not the file, not its directory.
   */
  create?: boolean;
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
  ) {
    this.sql = STORE_DIALECTS[dialect];
  }

  /** What this store's dialect can do and how (store/dialect.ts): asked instead of checking `dialect`. */
  readonly sql: StoreDialect;

  /** The SQLite file this store is, when it is one (not `:memory:`, not PostgreSQL). */
  get file(): string | undefined {
    return this.dialect === 'sqlite' && this.location !== ':memory:' ? this.location : undefined;
  }

  static async open(url: string | undefined, options: StoreOptions = {}): Promise<Store> {
    const store = await Store.connect(url, options);
    try {
      if (options.create === false && store.dialect === 'postgres' && !(await store.hasTables())) {
        throw storeNotFound(store.location);
      }
      await store.migrate();
    } catch (error) {
      // A store that cannot be opened leaves no pool or file handle behind.
      await store.close().catch(() => undefined);
      throw error;
    }
    return store;
  }

  private static async connect(input: string | undefined, options: StoreOptions): Promise<Store> {
    const url = input?.trim();
    if (url !== undefined && /^postgres(ql)?:\/\//i.test(url)) {
      // The PostgreSQL driver is loaded only for a PostgreSQL store: an embedded (SQLite) process never pays for it.
      return Store.connectPostgres(url, options, (await import('pg')).default);
    }
    // Anything else with a scheme (mysql://, redis://, http://) is not a file name: SQLite would happily create a
    // directory called `mysql:` and run there.
    const scheme = url === undefined ? undefined : /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1];
    if (scheme !== undefined && !/^(sqlite|file)$/i.test(scheme)) {
      throw new OarRuntimeError('unsupported_store', `unsupported store URL scheme "${scheme}://"`, {
        details: { scheme, supported: ['postgres://', 'postgresql://', 'sqlite:', 'file:', 'a file path'] },
      });
    }
    const path = sqlitePath(url, options.cwd ?? process.cwd());
    const create = options.create !== false || path === ':memory:';
    if (!create && !existsSync(path)) throw storeNotFound(path);
    if (create && path !== ':memory:') makeDirectory(dirname(path));
    let database: SQLite.Database;
    try {
      // Not created here either when it must exist: a file removed since the check above is not made again.
      database = new SQLite(path, { fileMustExist: !create });
      // WAL lets readers (oar events --follow, inspect) work while a runner writes; busy_timeout waits out writers.
      database.pragma('journal_mode = WAL');
      database.pragma('busy_timeout = 5000');
      database.pragma('foreign_keys = ON');
      // Every commit syncs the write-ahead log, unless its writer may lose it to a power cut (log/durability.ts).
      database.pragma('synchronous = FULL');
    } catch (error) {
      throw (
        readOnlyStore(path, error) ??
        storeFault(error) ??
        new OarRuntimeError('store_unavailable', `cannot open SQLite store ${path}: ${(error as Error).message}`)
      );
    }
    const db = new Kysely<Database>({
      dialect: faultNamingDialect(new SqliteDialect({ database: statementCache(database) })),
    });
    return new Store(db, 'sqlite', path);
  }

  private static connectPostgres(url: string, options: StoreOptions, driver: typeof pg): Store {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new OarRuntimeError('invalid_store', `invalid PostgreSQL URL ${maskConnectionUrl(url)}`, {
        details: { store: maskConnectionUrl(url) },
      });
    }
    // `?schema=NAME` in the URL selects (and creates) a schema, like the `schema` option.
    const schema = options.schema ?? parsed.searchParams.get('schema') ?? undefined;
    parsed.searchParams.delete('schema');
    if (schema !== undefined && !/^[a-z_][a-z0-9_]*$/.test(schema)) {
      throw new OarRuntimeError('invalid_store', `invalid PostgreSQL schema name "${schema}"`, {
        details: { schema },
      });
    }
    const connection: pg.ClientConfig = {
      connectionString: parsed.toString(),
      // An unreachable server (a black-holed address) fails the open in bounded time instead of hanging it.
      connectionTimeoutMillis: 10_000,
      ...(schema ? { options: `-c search_path=${schema}` } : {}),
    };
    const pool = new driver.Pool({ ...connection, max: options.poolSize ?? 10 });
    // A connection the server drops must not crash the process: idle clients report to the pool, checked-out ones
    // (between two statements of a transaction) to themselves. The query in flight fails with a named fault; the
    // pool discards the broken client and the next query gets a fresh connection.
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    const db = new Kysely<Database>({ dialect: faultNamingDialect(new PostgresDialect({ pool })) });
    // The location names the schema too (it is part of where the data is); the password never appears.
    const store = new Store(db, 'postgres', maskConnectionUrl(url));
    store.pgSchema = schema;
    store.pgConnection = { driver, config: connection };
    return store;
  }

  private pgSchema: string | undefined;
  private pgConnection: { driver: typeof pg; config: pg.ClientConfig } | undefined;

  /**
   * PostgreSQL only: LISTEN on `channel` over a dedicated connection; `onMessage` gets each payload. Resolves to
   * a function that stops listening. On SQLite there is nothing to listen to (undefined): callers poll.
   *
   * The connection is kept: when it is lost (the server ends it, a failover, a network error — TCP keepalive finds
   * a silent drop), a new one is made with backoff (`LISTEN_RETRY`: 100 ms doubling to 5 s, for as long as it takes)
   * and LISTEN is issued again. Notifications sent while nobody listened are gone: `onReconnect` is called once
   * LISTEN is back, so the caller can catch up from the log (the notifier polls). The first connection's failure
   * is thrown, as before.
   */
  async listen(
    channel: string,
    onMessage: (payload: string) => void,
    options: { onReconnect?: () => void } = {},
  ): Promise<(() => Promise<void>) | undefined> {
    if (!this.pgConnection) return undefined;
    const { driver, config } = this.pgConnection;
    let current: pg.Client | undefined;
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    let delay: number = LISTEN_RETRY.firstDelayMs;
    const connect = async (): Promise<pg.Client> => {
      const client = new driver.Client({ ...config, keepAlive: true });
      const lost = () => {
        // Only the live connection's loss counts (an error and an end both arrive for one loss).
        if (current !== client) return;
        current = undefined;
        client.end().catch(() => undefined);
        if (!stopped) retry();
      };
      client.on('error', lost);
      client.on('end', lost);
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
      return client;
    };
    const retry = () => {
      timer = setTimeout(async () => {
        timer = undefined;
        if (stopped) return;
        try {
          const client = await connect();
          if (stopped) {
            await client.end().catch(() => undefined);
            return;
          }
          current = client;
          delay = LISTEN_RETRY.firstDelayMs;
          options.onReconnect?.();
        } catch {
          retry();
        }
      }, delay);
      timer.unref();
      delay = Math.min(delay * 2, LISTEN_RETRY.maxDelayMs);
    };
    current = await connect();
    return async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      const client = current;
      current = undefined;
      await client?.end().catch(() => undefined);
    };
  }

  /** PostgreSQL: whether OAR's migration table is in the database (or schema); an unreachable server throws. */
  private async hasTables(): Promise<boolean> {
    const table = this.pgSchema ? `${this.pgSchema}.oar_migrations` : 'oar_migrations';
    const { rows } = await sql<{ found: string | null }>`select to_regclass(${table})::text as found`.execute(this.db);
    return typeof rows[0]?.found === 'string';
  }

  async migrate(): Promise<void> {
    // The common case, an up-to-date store, reads the migration table and takes no lock.
    if (await storeUpToDate(this.db, this.dialect, this.pgSchema)) return;
    try {
      await migrateStore(this.db, this.dialect, this.pgSchema);
    } catch (error) {
      if (error instanceof OarRuntimeError) throw error; // a named store fault (unreachable, read-only, full)
      throw new OarRuntimeError('store_migration_failed', `store migration failed: ${(error as Error).message}`, {
        retryable: true,
      });
    }
  }

  /**
   * Run `fn` in one transaction: every state change and its events commit together or not at all. The commit waits
   * for the disk unless `flush` is false (log/durability.ts says when a writer may ask for that).
   */
  transaction<T>(fn: (tx: Transaction<Database>) => Promise<T>, options: { flush?: boolean } = {}): Promise<T> {
    return options.flush === false ? this.sql.relaxedTransaction(this.db, fn) : this.db.transaction().execute(fn);
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }
}

function storeNotFound(location: string): OarRuntimeError {
  return new OarRuntimeError('store_not_found', `no OAR store at ${location} (nothing was created there)`, {
    details: { store: location },
  });
}

/**
 * A SQLite store that cannot be opened because it cannot be written: its file, or the directory SQLite keeps its
 * write-ahead log and shared memory in (a read-only mount, a directory without write permission). SQLite says only
 * "unable to open database file"; the file system says why.
 */
function readOnlyStore(path: string, error: unknown): OarRuntimeError | undefined {
  const code = String((error as { code?: unknown }).code ?? '');
  if (path === ':memory:' || !(code === 'SQLITE_CANTOPEN' || code.startsWith('SQLITE_READONLY'))) return undefined;
  for (const target of [dirname(path), ...(existsSync(path) ? [path] : [])]) {
    try {
      accessSync(target, constants.W_OK);
    } catch (denied) {
      const cause = (denied as NodeJS.ErrnoException).code;
      if (cause !== 'EROFS' && cause !== 'EACCES' && cause !== 'EPERM') continue;
      return new OarRuntimeError('store_read_only', `the store is read-only: ${target} cannot be written (${cause})`, {
        details: { path: target, cause },
      });
    }
  }
  return undefined;
}

function sqlitePath(url: string | undefined, cwd: string): string {
  if (url === undefined || url === '') return resolve(cwd, DEFAULT_STORE_PATH);
  const path = url.replace(/^(sqlite|file):(\/\/)?/, '');
  return path === ':memory:' ? path : resolve(cwd, path);
}

/**
 * `mkdir -p` that always ends. Node's recursive mkdir retries forever where a parent exists but refuses children
 * (`/proc/nope` looped `oar` indefinitely); here each missing level is created once, top down, and any failure is
 * a `store_unavailable` that names the directory.
 */
function makeDirectory(path: string): void {
  const missing: string[] = [];
  let current = resolve(path);
  while (!existsSync(current)) {
    missing.unshift(current);
    const parent = dirname(current);
    if (parent === current) break;
    current = parent;
  }
  if (existsSync(current) && !statSync(current).isDirectory()) {
    throw new OarRuntimeError(
      'store_unavailable',
      `cannot create the store's directory: ${current} is not a directory`,
      {
        details: { path: current },
      },
    );
  }
  for (const dir of missing) {
    try {
      mkdirSync(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw new OarRuntimeError(
        'store_unavailable',
        `cannot create the store's directory ${dir}: ${(error as Error).message}`,
        {
          details: { path: dir, cause: (error as NodeJS.ErrnoException).code },
        },
      );
    }
  }
}
