import type { DatabaseConnection, Dialect, Driver, QueryResult } from 'kysely';
import { OarRuntimeError } from '../kernel/errors.js';

/**
 * Store faults, named. A driver error that says the store cannot take writes or cannot be reached becomes a
 * structured error the caller can act on — `store_full`, `store_read_only` or `store_unavailable` — instead of an
 * opaque `internal_error` (or, worse, a failure nobody sees). Everything else (a constraint, a guard, a bug) passes
 * through unchanged: only faults of the store itself are named here.
 */
export function storeFault(error: unknown): OarRuntimeError | undefined {
  if (error instanceof OarRuntimeError || !(error instanceof Error)) return undefined;
  const code = String((error as { code?: unknown }).code ?? '');
  const message = error.message;
  const fault = (name: string, retryable: boolean, what: string) =>
    new OarRuntimeError(name, `${what}: ${message}`, { retryable, details: { cause: code || error.name } });
  // SQLite (better-sqlite3 puts the extended result code in `code`).
  if (code === 'SQLITE_FULL') return fault('store_full', true, 'the store is full');
  if (code.startsWith('SQLITE_READONLY')) return fault('store_read_only', false, 'the store is read-only');
  if (code === 'SQLITE_CANTOPEN' || code.startsWith('SQLITE_IOERR') || code === 'SQLITE_BUSY') {
    return fault('store_unavailable', true, 'the store is unavailable');
  }
  if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB') {
    return fault('store_unavailable', false, 'the store file is damaged or not a database');
  }
  // PostgreSQL (SQLSTATE in `code`).
  if (code === '53100') return fault('store_full', true, 'the store is full');
  if (code === '25006') return fault('store_read_only', false, 'the store is read-only');
  if (/^(08|57P|53)/.test(code)) return fault('store_unavailable', true, 'the store is unavailable');
  if (code === '28P01' || code === '28000' || code === '3D000') {
    return fault('store_unavailable', false, 'the store refused the connection');
  }
  // The network between us and the server.
  if (/^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|EPIPE|EHOSTUNREACH|ENETUNREACH)$/.test(code)) {
    return fault('store_unavailable', true, 'the store is unreachable');
  }
  if (
    /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(
      message,
    )
  ) {
    return fault('store_unavailable', true, 'the store connection was lost');
  }
  return undefined;
}

/** Whether an error is a named store fault: no more facts can be written until the store is healthy again. */
export function isStoreFault(error: unknown): error is OarRuntimeError {
  return error instanceof OarRuntimeError && STORE_FAULT_CODES.has(error.code);
}

const STORE_FAULT_CODES = new Set(['store_full', 'store_read_only', 'store_unavailable']);

/**
 * Whether an error is a store that is briefly away (a dropped connection, a failover, a locked file): the same
 * request may succeed in a moment, so a caller waits and asks again. A full disk or a read-only store is not.
 */
export function isTransientStoreFault(error: unknown): error is OarRuntimeError {
  return error instanceof OarRuntimeError && error.code === 'store_unavailable' && error.error.retryable;
}

/** SQLite's answer to a rollback when the transaction is already gone. */
function noTransaction(error: unknown): boolean {
  return error instanceof Error && /no transaction is active/.test(error.message);
}

async function named<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw storeFault(error) ?? error;
  }
}

/**
 * A dialect whose every query, connection and transaction names store faults (see `storeFault`). One wrapper at
 * the driver, so no caller of the store has to remember to translate errors.
 */
export function faultNamingDialect(inner: Dialect): Dialect {
  return {
    createAdapter: () => inner.createAdapter(),
    createQueryCompiler: () => inner.createQueryCompiler(),
    createIntrospector: (db) => inner.createIntrospector(db),
    createDriver: () => new FaultNamingDriver(inner.createDriver()),
  };
}

class FaultNamingConnection implements DatabaseConnection {
  constructor(readonly inner: DatabaseConnection) {}
  executeQuery<R>(query: Parameters<DatabaseConnection['executeQuery']>[0]): Promise<QueryResult<R>> {
    return named(() => this.inner.executeQuery<R>(query));
  }
  async *streamQuery<R>(...args: Parameters<DatabaseConnection['streamQuery']>): AsyncIterableIterator<QueryResult<R>> {
    try {
      yield* this.inner.streamQuery<R>(...args);
    } catch (error) {
      throw storeFault(error) ?? error;
    }
  }
}

// The inner driver gets its own connection objects back: drivers keep private state on them.
const unwrap = (connection: DatabaseConnection) =>
  connection instanceof FaultNamingConnection ? connection.inner : connection;

class FaultNamingDriver implements Driver {
  constructor(private readonly inner: Driver) {}
  init() {
    return named(() => this.inner.init());
  }
  async acquireConnection() {
    return new FaultNamingConnection(await named(() => this.inner.acquireConnection()));
  }
  beginTransaction(connection: DatabaseConnection, settings: Parameters<Driver['beginTransaction']>[1]) {
    return named(() => this.inner.beginTransaction(unwrap(connection), settings));
  }
  commitTransaction(connection: DatabaseConnection) {
    return named(() => this.inner.commitTransaction(unwrap(connection)));
  }
  async rollbackTransaction(connection: DatabaseConnection) {
    try {
      await this.inner.rollbackTransaction(unwrap(connection));
    } catch (error) {
      // SQLite rolls a transaction back by itself on some errors (a full disk, an I/O error, out of memory): the
      // explicit rollback then finds none, and its error would replace the one that says what happened.
      if (noTransaction(error)) return;
      throw storeFault(error) ?? error;
    }
  }
  releaseConnection(connection: DatabaseConnection) {
    return this.inner.releaseConnection(unwrap(connection));
  }
  destroy() {
    return this.inner.destroy();
  }
}
