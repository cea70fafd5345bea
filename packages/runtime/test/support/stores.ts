import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterEach, describe, it } from 'vitest';
import { maskConnectionUrl } from '../../src/redaction/connection-url.js';
import { Store, type StoreOptions } from '../../src/store/store.js';

/**
 * Store factories for contract tests that must hold on BOTH dialects: a SQLite file (a fresh temp file per test)
 * and PostgreSQL (a fresh `oar_t_<random>` schema per test, dropped afterwards).
 *
 * PostgreSQL comes from `OAR_TEST_POSTGRES_URL` (default postgres://postgres@127.0.0.1:5432/test). When it is
 * unreachable: under CI (`CI=true`) the PostgreSQL suite FAILS with the connection error; locally it is skipped
 * with a visible console message, so a green local run never pretends PostgreSQL was tested.
 */

export type StoreDialect = 'sqlite' | 'postgres';

export const POSTGRES_URL = process.env.OAR_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test';
const IN_CI = process.env.CI === 'true' || process.env.CI === '1';

/** One isolated database (a SQLite file, or a PostgreSQL schema) and every Store opened on it. */
export interface TestDatabase {
  dialect: StoreDialect;
  /** The URL Store.open takes (a file path for SQLite). */
  url: string;
  /** PostgreSQL: the schema (`oar_t_<random>`) this database lives in. */
  schema?: string;
  /** The first store on this database (opened by `fresh()`). */
  store: Store;
  /** Another, independent Store on the same database (SQLite: a second connection; PostgreSQL: a second pool). */
  open(options?: Omit<StoreOptions, 'schema'>): Promise<Store>;
}

export interface StoreFactory {
  dialect: StoreDialect;
  /** A new isolated database with one open, migrated store; closed and removed after the current test. */
  fresh(): Promise<TestDatabase>;
  /** A new isolated database nobody has opened yet (no tables): `open()` is the first Store.open on it. */
  blank(): Omit<TestDatabase, 'store'>;
  /** Run `fn` after the current test, before the databases are closed (e.g. closing a runtime on them). */
  defer(fn: () => Promise<void> | void): void;
}

/** Drop a test's PostgreSQL schema and everything in it (a fresh connection, closed after). */
export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query(`drop schema if exists "${schema}" cascade`);
  } finally {
    await client.end();
  }
}

let probe: Promise<Error | undefined> | undefined;

/** Can we reach PostgreSQL? Resolves to the connection error, or undefined when reachable. Probed once per file. */
export function postgresUnavailable(): Promise<Error | undefined> {
  probe ??= (async () => {
    const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
      await client.query('select 1');
      return undefined;
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error));
    } finally {
      await client.end().catch(() => {});
    }
  })();
  return probe;
}

// Resolved at import (top-level await) because describe blocks are registered synchronously.
const postgresError = await postgresUnavailable();

function sqliteFactory(cleanups: (() => Promise<void>)[]): StoreFactory {
  return {
    dialect: 'sqlite',
    defer: (fn) => cleanups.push(async () => fn()),
    async fresh() {
      const database = this.blank();
      return { ...database, store: await database.open() };
    },
    blank() {
      const dir = mkdtempSync(join(tmpdir(), 'oar-store-'));
      const url = join(dir, 'oar.db');
      const stores: Store[] = [];
      cleanups.push(async () => {
        await Promise.allSettled(stores.map((s) => s.close()));
        rmSync(dir, { recursive: true, force: true });
      });
      const open = async (options: Omit<StoreOptions, 'schema'> = {}) => {
        const store = await Store.open(url, options);
        stores.push(store);
        return store;
      };
      return { dialect: 'sqlite', url, open };
    },
  };
}

function postgresFactory(cleanups: (() => Promise<void>)[]): StoreFactory {
  return {
    dialect: 'postgres',
    defer: (fn) => cleanups.push(async () => fn()),
    async fresh() {
      const database = this.blank();
      return { ...database, store: await database.open() };
    },
    blank() {
      const schema = `oar_t_${randomBytes(6).toString('hex')}`;
      const stores: Store[] = [];
      cleanups.push(async () => {
        await Promise.allSettled(stores.map((s) => s.close()));
        await dropSchema(schema);
      });
      const open = async (options: Omit<StoreOptions, 'schema'> = {}) => {
        const store = await Store.open(POSTGRES_URL, { ...options, schema });
        stores.push(store);
        return store;
      };
      return { dialect: 'postgres', url: POSTGRES_URL, schema, open };
    },
  };
}

/**
 * Runs `suite` once per dialect, as `<name> [sqlite]` and `<name> [postgres]`. Inside, call `factory.fresh()` in a
 * test (or a beforeEach) for an isolated database; everything it opened is closed and removed after each test.
 */
export function describeStores(name: string, suite: (factory: StoreFactory) => void): void {
  for (const dialect of ['sqlite', 'postgres'] as const) {
    const title = `${name} [${dialect}]`;
    if (dialect === 'postgres' && postgresError) {
      const reason = `PostgreSQL at ${maskConnectionUrl(POSTGRES_URL)} is unreachable (${postgresError.message})`;
      if (IN_CI) {
        describe(title, () => {
          it('needs a reachable PostgreSQL server (CI=true)', () => {
            throw new Error(`${reason}; CI requires it. Start it or set OAR_TEST_POSTGRES_URL.`);
          });
        });
      } else {
        console.warn(`\n[oar tests] SKIPPING "${title}": ${reason}. Set CI=true to make this a failure.\n`);
        describe.skip(title, () => suite(postgresFactory([])));
      }
      continue;
    }
    describe(title, () => {
      const cleanups: (() => Promise<void>)[] = [];
      afterEach(async () => {
        // Last registered first (a runtime closes before its store); every cleanup runs even if one fails.
        const errors: unknown[] = [];
        for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch((error) => errors.push(error));
        if (errors.length > 0) throw errors[0];
      });
      suite(dialect === 'sqlite' ? sqliteFactory(cleanups) : postgresFactory(cleanups));
    });
  }
}
