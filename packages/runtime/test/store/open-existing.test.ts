import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import pg from 'pg';
import { expect, it } from 'vitest';
import { maskConnectionUrl } from '../../src/redaction/connection-url.js';
import { describeStores } from '../support/stores.js';

/**
 * `Store.open(url, {create: false})`, for what only reads or continues existing sessions: a store that does not exist
 * is `store_not_found` naming where it was looked for, and nothing is created — no SQLite file or directory, no
 * PostgreSQL schema or table. An existing store opens as usual.
 */
describeStores('opening only an existing store', (factory) => {
  it('a missing store is store_not_found, and stays missing', async () => {
    const database = factory.blank();
    const failure = await database.open({ create: false }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ error: { code: 'store_not_found', retryable: false } });
    // Where it looked: the file, or the server's URL (the password masked), as Store.location names it.
    const store = (failure as { error: { details: { store: string } } }).error.details.store;
    expect(store).toBe(database.schema ? maskConnectionUrl(database.url) : database.url);
    if (database.schema) {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      const { rows } = await client.query('select count(*)::int as n from pg_namespace where nspname = $1', [
        database.schema,
      ]);
      await client.end();
      expect(rows[0].n).toBe(0);
    } else {
      expect(existsSync(database.url)).toBe(false);
      expect(existsSync(dirname(database.url))).toBe(true); // the temp dir itself, made by the factory
    }
  });

  it('an existing store opens as usual', async () => {
    const database = await factory.fresh();
    const again = await database.open({ create: false });
    expect(again.dialect).toBe(factory.dialect);
  });
});
