import { createHash } from 'node:crypto';
import { STORAGE_AREAS, StorageKeySchema, StorageListArgsSchema, StorageSetArgsSchema } from '@oar/runner-sdk';
import { sql } from 'kysely';
import type { Store } from '../store/store.js';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import type { AuditTarget } from './proxy.js';
import { apiError, type RunSession } from './run-session.js';

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
  constructor(private readonly store: Pick<Store, 'db' | 'dialect'>) {}

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
      if (this.store.dialect === 'postgres') {
        await sql`select pg_advisory_xact_lock(hashtext(${`oar_runner_storage:${area}:${owner}`}))`.execute(tx);
      }
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

/** `plugin:author/name/runner` → `author/name`. */
export function pluginOf(runnerId: string): string {
  return runnerId.slice('plugin:'.length).split('/').slice(0, 2).join('/');
}

const workspaces = new WeakMap<RunSession, Promise<string>>();

/** Whose area this run reaches: the owner string of the area, always under the session's workspace. */
async function ownerOf(session: RunSession, area: StorageArea): Promise<string> {
  let workspace = workspaces.get(session);
  if (!workspace) {
    workspace = session.engine.session(session.sessionId).then((state) => state?.workspaceId ?? DEFAULT_WORKSPACE);
    workspaces.set(session, workspace);
  }
  const ws = await workspace;
  if (area === 'workspace') return `ws:${ws}`;
  if (area === 'plugin') return `ws:${ws}/plugin:${pluginOf(session.runnerId)}`;
  return `ws:${ws}/session:${session.sessionId}/agent:${session.agent.name}/runner:${session.runnerId}`;
}

/** Opaque list cursors: bound to the area and its owner, so a cursor of another area is refused. */
function listCursor(area: string, owner: string, key: string): string {
  const bound = createHash('sha256').update(`${area}\n${owner}`).digest('hex').slice(0, 16);
  return Buffer.from(JSON.stringify({ v: 1, b: bound, k: key })).toString('base64url');
}

function afterKey(area: string, owner: string, cursor: string): string {
  const bound = createHash('sha256').update(`${area}\n${owner}`).digest('hex').slice(0, 16);
  let parsed: { v?: unknown; b?: unknown; k?: unknown } | undefined;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as typeof parsed;
  } catch {
    parsed = undefined;
  }
  if (parsed?.v !== 1 || parsed.b !== bound || typeof parsed.k !== 'string') {
    throw apiError('invalid_argument', 'the cursor is not a storage cursor of this area');
  }
  return parsed.k;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** storage.get / set / delete / list of one run. */
export async function storageCall(
  session: RunSession,
  payload: Record<string, unknown>,
  audit: AuditTarget,
  op: 'get' | 'set' | 'delete' | 'list',
): Promise<unknown> {
  const area = payload.area;
  audit.scope = typeof area === 'string' ? `storage:${area.slice(0, 32)}` : 'storage';
  if (typeof payload.key === 'string') audit.resource = payload.key.slice(0, 256);
  if (typeof area !== 'string' || !(STORAGE_AREAS as readonly string[]).includes(area)) {
    throw apiError('invalid_argument', `area is one of ${STORAGE_AREAS.join(', ')}`);
  }
  const granted = area as StorageArea;
  if (!session.access.storage.includes(granted)) {
    throw apiError('unauthorized', `storage area ${granted} is not granted to this run`, { area: granted });
  }
  const backend = session.engine.runnerStorage;
  if (!backend) throw apiError('not_found', 'this host keeps no runner storage');
  const owner = await ownerOf(session, granted);
  if (op === 'list') {
    const parsed = StorageListArgsSchema.safeParse(payload);
    if (!parsed.success) {
      throw apiError('invalid_argument', 'storage.list takes {area, prefix?, cursor?, limit (1-200)?}', {
        issues: parsed.error.issues.slice(0, 3).map((i) => ({ path: i.path.join('.'), message: i.message })),
      });
    }
    const args = parsed.data;
    audit.resource = args.prefix ?? '';
    const after = args.cursor ? afterKey(granted, owner, args.cursor) : undefined;
    const rows = await backend.list(granted, owner, {
      ...(args.prefix ? { prefix: args.prefix } : {}),
      ...(after !== undefined ? { after } : {}),
      limit: args.limit,
    });
    const items = rows.slice(0, args.limit);
    const hasMore = rows.length > args.limit;
    const last = items.at(-1);
    return {
      items: items.map((r) => ({ key: r.key, encoding: r.encoding, size: r.size, updated_at: r.updatedAt })),
      next_cursor: hasMore && last ? listCursor(granted, owner, last.key) : null,
      has_more: hasMore,
    };
  }
  const key = StorageKeySchema.safeParse(payload.key);
  if (!key.success) {
    throw apiError('invalid_argument', 'storage keys are 1-256 letters, digits, "_", ".", ":", "/" or "-"');
  }
  if (op === 'get') {
    const found = await backend.get(granted, owner, key.data);
    if (!found) throw apiError('not_found', `no key ${key.data} in the ${granted} area`, { area: granted });
    return {
      area: granted,
      key: found.key,
      value: found.encoding === 'json' ? (JSON.parse(found.value) as unknown) : found.value,
      encoding: found.encoding,
      size: found.size,
      updated_at: found.updatedAt,
    };
  }
  if (op === 'delete') return { deleted: await backend.delete(granted, owner, key.data) };
  // A key is stored and listed as it is (values are redacted, a key cannot be): one that holds a secret is refused.
  if (session.engine.redactor.redactText(key.data) !== key.data) {
    throw apiError('invalid_argument', 'a storage key may not hold a secret (keys are stored as they are)');
  }
  const parsed = StorageSetArgsSchema.safeParse(payload);
  if (!parsed.success || parsed.data.value === undefined) {
    throw apiError('invalid_argument', 'storage.set takes {area, key, value, encoding?: "json" | "base64"}');
  }
  const encoding = parsed.data.encoding;
  let text: string;
  let size: number;
  if (encoding === 'base64') {
    const value = parsed.data.value;
    if (typeof value !== 'string' || value.length % 4 !== 0 || !BASE64.test(value)) {
      throw apiError('invalid_argument', 'a base64 value is a padded base64 string');
    }
    // Redacted like every stored output: storage never holds a secret the record may not (docs/security.md).
    const bytes = session.engine.redactor.redactBytes(new Uint8Array(Buffer.from(value, 'base64')));
    text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
    size = bytes.byteLength;
  } else {
    text = JSON.stringify(session.engine.redactor.redactJson(parsed.data.value));
    size = Buffer.byteLength(text);
  }
  if (size > MAX_STORAGE_VALUE_BYTES) {
    throw apiError('payload_too_large', `a storage value is at most ${MAX_STORAGE_VALUE_BYTES} bytes`, {
      limit: MAX_STORAGE_VALUE_BYTES,
      size,
    });
  }
  const written = await backend.set(granted, owner, { key: key.data, encoding, value: text, size });
  if (!written.ok) {
    throw apiError(
      'payload_too_large',
      `the ${granted} area would hold more than its quota of ${STORAGE_AREA_QUOTA_BYTES} bytes`,
      { area: granted, quota: STORAGE_AREA_QUOTA_BYTES, used: written.used, reason: 'quota_exceeded' },
    );
  }
  return { area: granted, key: key.data, size, encoding };
}
