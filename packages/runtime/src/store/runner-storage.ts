import type { STORAGE_AREAS } from '@oar/runner-sdk';
import { sql } from 'kysely';
import type { Store } from './store.js';

/**
 * A runner's `storage.*` (spec 7.7): blobs and larger data kept across runs, apart from the event log (storage is the
 * runner's private data, not a fact of the session; every call is still audited by the proxy). Three areas, each
 * owned by what it is shared with, always inside the session's workspace (the tenancy boundary: nothing crosses it):
 * - `plugin`: every run of every runner of the same plugin (`plugin:author/name/…`) in the workspace;
 * - `workspace`: every run in the workspace whose runner was granted the area;
 * - `binding`: this agent binding — runs of this runner for this agent of this session.
 * An area is reachable only when the manifest asks for it and the binding policy leaves it (`RunAccess.storage`).
 */

/** The largest value: its JSON text, or its bytes (base64 on the wire). */
export const MAX_STORAGE_VALUE_BYTES = 1024 * 1024;
/** What one area (of one owner) may hold: the sizes of its keys and values summed. */
export const STORAGE_AREA_QUOTA_BYTES = 8 * 1024 * 1024;
/** The largest storage.set payload the proxy reads: a base64 value of the largest size, and room for the rest. */
export const MAX_STORAGE_SET_PAYLOAD_BYTES = Math.ceil((MAX_STORAGE_VALUE_BYTES * 4) / 3) + 16 * 1024;

export type StorageArea = (typeof STORAGE_AREAS)[number];

export interface StoredValue {
  key: string;
  encoding: 'json' | 'base64';
  /** JSON text, or base64 of the bytes. */
  value: string;
  size: number;
  updatedAt: string;
}

/**
 * The store side (SQLite and PostgreSQL): values by (area, owner, key). A write checks the owner's quota in the same
 * transaction; on PostgreSQL that transaction first takes an advisory lock on the owner, so two workers writing to
 * one area at once cannot both pass the check.
 */
export class RunnerStorage {
  constructor(private readonly store: Pick<Store, 'db' | 'sql'>) {}

  async get(area: StorageArea, owner: string, key: string): Promise<StoredValue | undefined> {
    const row = await this.store.db
      .selectFrom('oar_runner_storage')
      .selectAll()
      .where('area', '=', area)
      .where('owner', '=', owner)
      .where('key', '=', key)
      .executeTakeFirst();
    return row
      ? {
          key: row.key,
          encoding: row.encoding as StoredValue['encoding'],
          value: row.value,
          size: Number(row.size),
          updatedAt: row.updated_at,
        }
      : undefined;
  }

  /** Set a value; `quota` exceeded (with what the area holds besides this key) when it would not fit. */
  async set(
    area: StorageArea,
    owner: string,
    entry: { key: string; encoding: StoredValue['encoding']; value: string; size: number },
    quota = STORAGE_AREA_QUOTA_BYTES,
  ): Promise<{ ok: true; used: number } | { ok: false; used: number }> {
    return this.store.db.transaction().execute(async (tx) => {
      await this.store.sql.lockKey(tx, `oar_runner_storage:${area}:${owner}`);
      const others = await tx
        .selectFrom('oar_runner_storage')
        .select(sql<number | string | null>`sum(size + length(key))`.as('used'))
        .where('area', '=', area)
        .where('owner', '=', owner)
        .where('key', '<>', entry.key)
        .executeTakeFirst();
      const used = Number(others?.used ?? 0) + entry.size + entry.key.length;
      if (used > quota) return { ok: false, used: used - entry.size - entry.key.length };
      const now = new Date().toISOString();
      await tx
        .insertInto('oar_runner_storage')
        .values({
          area,
          owner,
          key: entry.key,
          encoding: entry.encoding,
          value: entry.value,
          size: entry.size,
          updated_at: now,
        })
        .onConflict((oc) =>
          oc
            .columns(['area', 'owner', 'key'])
            .doUpdateSet({ encoding: entry.encoding, value: entry.value, size: entry.size, updated_at: now }),
        )
        .execute();
      return { ok: true, used };
    });
  }

  async delete(area: StorageArea, owner: string, key: string): Promise<boolean> {
    const result = await this.store.db
      .deleteFrom('oar_runner_storage')
      .where('area', '=', area)
      .where('owner', '=', owner)
      .where('key', '=', key)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Keys after `after` (in key order) starting with `prefix`, at most `limit` + 1 (the extra says there is more). */
  async list(
    area: StorageArea,
    owner: string,
    options: { prefix?: string; after?: string; limit: number },
  ): Promise<Omit<StoredValue, 'value'>[]> {
    let query = this.store.db
      .selectFrom('oar_runner_storage')
      .select(['key', 'encoding', 'size', 'updated_at'])
      .where('area', '=', area)
      .where('owner', '=', owner);
    // substr, not LIKE: "_" is a LIKE wildcard and a key may hold it.
    if (options.prefix) {
      query = query.where(sql<string>`substr(key, 1, ${options.prefix.length})`, '=', options.prefix);
    }
    if (options.after !== undefined) query = query.where('key', '>', options.after);
    const rows = await query
      .orderBy('key')
      .limit(options.limit + 1)
      .execute();
    return rows.map((row) => ({
      key: row.key,
      encoding: row.encoding as StoredValue['encoding'],
      size: Number(row.size),
      updatedAt: row.updated_at,
    }));
  }
}
