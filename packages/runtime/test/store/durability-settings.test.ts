import { sql } from 'kysely';
import { expect, it } from 'vitest';
import type { Store } from '../../src/index.js';
import { describeStores } from '../support/stores.js';

/**
 * What a machine losing power may cost depends on how each store commits (docs/reliability.md, "The contract", row
 * "power loss"; log/durability.ts): every commit waits for the disk, except on SQLite the relaxed ones a driven
 * thread may ask for. This pins both settings, so a change to them cannot pass unnoticed.
 */
describeStores('the durability a commit has', (factory) => {
  /** The setting the current connection commits with: SQLite's `synchronous` (2 FULL, 1 NORMAL), or PostgreSQL's. */
  const setting = async (db: Store['db']) =>
    factory.dialect === 'sqlite'
      ? String((await sql<{ synchronous: number }>`pragma synchronous`.execute(db)).rows[0]?.synchronous)
      : String(
          (await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(db)).rows[0]?.synchronous_commit,
        );
  const flushed = factory.dialect === 'sqlite' ? '2' : 'on';
  // PostgreSQL never relaxes: its server can lose unflushed commits while OAR lives on (store/dialect.ts).
  const relaxed = factory.dialect === 'sqlite' ? '1' : 'on';

  it('a commit waits for the disk; a relaxed one does not on SQLite (only that transaction), and always does on PostgreSQL', async () => {
    expect((await factory.fresh()).store.sql.relaxedCommits).toBe(factory.dialect === 'sqlite');
    const { store } = await factory.fresh();
    if (factory.dialect === 'sqlite') {
      const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(store.db);
      expect(mode.rows[0]?.journal_mode).toBe('wal');
    }
    expect(await setting(store.db)).toBe(flushed);
    expect(await store.transaction((tx) => setting(tx))).toBe(flushed);
    expect(await store.transaction((tx) => setting(tx), { flush: false })).toBe(relaxed);
    // A relaxed transaction that fails leaves the connection as it was, and reports its own error.
    await expect(
      store.transaction(
        async (tx) => {
          await sql`select no_such_column from oar_sessions`.execute(tx);
        },
        { flush: false },
      ),
    ).rejects.toThrow(/no_such_column/);
    expect(await setting(store.db)).toBe(flushed);
    expect(await store.transaction((tx) => setting(tx))).toBe(flushed);
  });

  it('what a relaxed transaction writes is committed and read back like any other', async () => {
    const { store } = await factory.fresh();
    await store.transaction(
      async (tx) => {
        await tx
          .insertInto('oar_sessions')
          .values({
            id: 'ses_relaxed',
            runtime_id: 'rt',
            title: null,
            created_at: '2026-01-01T00:00:00.000Z',
            updated_at: '2026-01-01T00:00:00.000Z',
            last_sequence: 0,
            workspace_id: null,
          })
          .execute();
      },
      { flush: false },
    );
    const row = await store.db
      .selectFrom('oar_sessions')
      .select('id')
      .where('id', '=', 'ses_relaxed')
      .executeTakeFirst();
    expect(row?.id).toBe('ses_relaxed');
  });
});
