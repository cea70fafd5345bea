import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { describeStores } from '../support/stores.js';

/**
 * What a machine losing power may cost depends on how each store commits (docs/reliability.md, "The contract", row
 * "power loss"). This pins the settings the contract states, so a change to them cannot pass unnoticed.
 */
describeStores('the durability a commit has', (factory) => {
  it('SQLite: write-ahead log with synchronous NORMAL; PostgreSQL: commits wait for the server to flush', async () => {
    const { store } = await factory.fresh();
    if (factory.dialect === 'sqlite') {
      const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(store.db);
      expect(mode.rows[0]?.journal_mode).toBe('wal');
      // 1 = NORMAL: a process crash loses nothing committed; an operating-system crash may lose the last commits.
      const synchronous = await sql<{ synchronous: number }>`pragma synchronous`.execute(store.db);
      expect(synchronous.rows[0]?.synchronous).toBe(1);
    } else {
      // OAR never turns it off for its own connections: a commit returns once the server has made it durable.
      const commit = await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(store.db);
      expect(commit.rows[0]?.synchronous_commit).toBe('on');
    }
  });
});
