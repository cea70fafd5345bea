import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { DEFAULT_WORKSPACE } from '../kernel/constants.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { ApiKeysTable } from './schema.js';
import type { Store } from './store.js';

/**
 * Workspaces and their API keys. A workspace owns sessions (and through them their artifacts) and keys; the
 * `default` workspace always exists (a store from before workspaces keeps all its sessions there). A key is shown
 * once, when it is made, and only its SHA-256 is stored: keys are 240 random bits, so a slow password hash would
 * add nothing, and a lookup is one indexed read. docs/http-api.md "Workspaces and API keys".
 */

export { DEFAULT_WORKSPACE };

export const WorkspaceIdSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'workspace ids are 1-63 lowercase letters, digits, "_" or "-"');

/**
 * The id of a session created in a workspace. A session id names its workspace, so one workspace can neither take
 * an id another will use nor find out that another's id exists (an id taken elsewhere must look exactly like an unused
 * one, creation included): the default workspace's ids have no `:`; a named workspace's start with `WORKSPACE:` — a
 * chosen id gets that prefix unless it has it already, a generated one is `WORKSPACE:ses_…`. Sessions a named
 * workspace created before ids were qualified keep their ids.
 */
export function sessionIdIn(workspaceId: string, chosen: string | undefined): string {
  if (workspaceId === DEFAULT_WORKSPACE) {
    if (chosen?.includes(':')) {
      throw new OarRuntimeError(
        'invalid_input',
        'a session id of the default workspace has no ":" (ids with a "WORKSPACE:" prefix are named workspaces\')',
        { details: { sessionId: chosen } },
      );
    }
    return chosen ?? newId('ses');
  }
  const prefix = `${workspaceId}:`;
  if (chosen === undefined) return `${prefix}${newId('ses')}`;
  return chosen.startsWith(prefix) ? chosen : `${prefix}${chosen}`;
}

/**
 * What a key may do: `admin` manages keys (and, in the default workspace, workspaces) besides everything else;
 * `operator` submits, responds and interrupts; `viewer` only reads.
 */
export const ApiKeyScopeSchema = z.enum(['admin', 'operator', 'viewer']);
export type ApiKeyScope = z.infer<typeof ApiKeyScopeSchema>;

export const WorkspaceSchema = z.object({ workspaceId: z.string(), name: z.string(), createdAt: z.string() });
export type Workspace = z.infer<typeof WorkspaceSchema>;

export const ApiKeyRecordSchema = z.object({
  keyId: z.string(),
  workspaceId: z.string(),
  name: z.string(),
  scope: ApiKeyScopeSchema,
  /** The key's first characters, to tell keys apart; never enough to use it. */
  prefix: z.string(),
  createdAt: z.string(),
  expiresAt: z.string().optional(),
  revokedAt: z.string().optional(),
  lastUsedAt: z.string().optional(),
});
export type ApiKeyRecord = z.infer<typeof ApiKeyRecordSchema>;

/** `oar_` and 40 base64url characters (240 random bits). The redactor knows the shape (`oar_api_key`). */
const KEY_SHAPE = /^oar_[A-Za-z0-9_-]{40}$/;
const PREFIX_LENGTH = 12;
/** How stale `last_used_at` may get: a key in steady use is not written back at every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

const hashOf = (key: string) => createHash('sha256').update(key).digest('hex');

function keyRecord(row: ApiKeysTable): ApiKeyRecord {
  return {
    keyId: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    scope: ApiKeyScopeSchema.parse(row.scope),
    prefix: row.prefix,
    createdAt: row.created_at,
    ...(row.expires_at ? { expiresAt: row.expires_at } : {}),
    ...(row.revoked_at ? { revokedAt: row.revoked_at } : {}),
    ...(row.last_used_at ? { lastUsedAt: row.last_used_at } : {}),
  };
}

export class Workspaces {
  constructor(private readonly store: Store) {}

  /** Every workspace, the default one first. */
  async list(): Promise<Workspace[]> {
    const rows = await this.store.db.selectFrom('oar_workspaces').selectAll().orderBy('created_at').execute();
    const created = rows.map((r) => ({ workspaceId: r.id, name: r.name, createdAt: r.created_at }));
    return created.some((w) => w.workspaceId === DEFAULT_WORKSPACE)
      ? created
      : [{ workspaceId: DEFAULT_WORKSPACE, name: 'Default workspace', createdAt: '' }, ...created];
  }

  async get(workspaceId: string): Promise<Workspace | undefined> {
    return (await this.list()).find((w) => w.workspaceId === workspaceId);
  }

  /** The workspace, or `workspace_not_found`. */
  async require(workspaceId: string): Promise<Workspace> {
    const workspace = await this.get(workspaceId);
    if (!workspace) throw notFound('workspace', workspaceId);
    return workspace;
  }

  async create(input: { workspaceId?: string; name: string }): Promise<Workspace> {
    const id = WorkspaceIdSchema.safeParse(input.workspaceId ?? newId('ws'));
    if (!id.success) {
      throw new OarRuntimeError('invalid_input', id.error.issues[0]?.message ?? 'invalid workspace id', {
        details: { workspaceId: input.workspaceId },
      });
    }
    if (await this.get(id.data)) {
      throw new OarRuntimeError('workspace_exists', `workspace "${id.data}" already exists`, {
        details: { workspaceId: id.data },
      });
    }
    const workspace = { workspaceId: id.data, name: input.name, createdAt: new Date().toISOString() };
    await this.store.db
      .insertInto('oar_workspaces')
      .values({ id: workspace.workspaceId, name: workspace.name, created_at: workspace.createdAt })
      .execute();
    return workspace;
  }

  /**
   * A new key for `workspaceId`: the key itself is in the result and nowhere else. `key` sets it instead of
   * generating one (`OAR_ADMIN_KEY`); it must have the generated shape, so a weak key cannot be chosen.
   */
  async createKey(input: {
    workspaceId: string;
    scope: ApiKeyScope;
    name: string;
    expiresAt?: string;
    key?: string;
  }): Promise<{ key: string; record: ApiKeyRecord }> {
    await this.require(input.workspaceId);
    const key = input.key ?? `oar_${randomBytes(30).toString('base64url')}`;
    if (!KEY_SHAPE.test(key)) {
      throw new OarRuntimeError(
        'invalid_api_key',
        'an API key is "oar_" followed by 40 letters, digits, "_" or "-" (generate one with `oar keys create`)',
      );
    }
    if (input.expiresAt !== undefined && Number.isNaN(Date.parse(input.expiresAt))) {
      throw new OarRuntimeError('invalid_input', 'expiresAt is not a date-time', {
        details: { expiresAt: input.expiresAt },
      });
    }
    const hash = hashOf(key);
    const existing = await this.store.db
      .selectFrom('oar_api_keys')
      .selectAll()
      .where('key_hash', '=', hash)
      .executeTakeFirst();
    // The same OAR_ADMIN_KEY at every start: already stored, nothing new.
    if (existing) return { key, record: keyRecord(existing) };
    const row: ApiKeysTable = {
      id: newId('key'),
      workspace_id: input.workspaceId,
      name: input.name,
      scope: input.scope,
      key_hash: hash,
      prefix: key.slice(0, PREFIX_LENGTH),
      created_at: new Date().toISOString(),
      expires_at: input.expiresAt ? new Date(input.expiresAt).toISOString() : null,
      revoked_at: null,
      last_used_at: null,
    };
    await this.store.db.insertInto('oar_api_keys').values(row).execute();
    return { key, record: keyRecord(row) };
  }

  /** The keys of a workspace (all workspaces when none is named), newest first; never the keys themselves. */
  async listKeys(workspaceId?: string): Promise<ApiKeyRecord[]> {
    let query = this.store.db.selectFrom('oar_api_keys').selectAll();
    if (workspaceId !== undefined) query = query.where('workspace_id', '=', workspaceId);
    return (await query.orderBy('created_at', 'desc').execute()).map(keyRecord);
  }

  /** Whether any key that still works exists (`oar serve` creates the first admin key when none does). */
  async hasUsableAdminKey(now = new Date()): Promise<boolean> {
    const keys = await this.listKeys(DEFAULT_WORKSPACE);
    return keys.some((k) => k.scope === 'admin' && !k.revokedAt && (!k.expiresAt || Date.parse(k.expiresAt) > +now));
  }

  /**
   * Revoke a key: it stops working at once. `workspaceId` limits it to that workspace's keys (another's is
   * `api_key_not_found`, as if it did not exist). Revoking twice keeps the first time.
   */
  async revokeKey(keyId: string, workspaceId?: string): Promise<ApiKeyRecord> {
    const row = await this.store.db.selectFrom('oar_api_keys').selectAll().where('id', '=', keyId).executeTakeFirst();
    if (!row || (workspaceId !== undefined && row.workspace_id !== workspaceId)) throw notFound('api_key', keyId);
    if (!row.revoked_at) {
      row.revoked_at = new Date().toISOString();
      await this.store.db
        .updateTable('oar_api_keys')
        .set({ revoked_at: row.revoked_at })
        .where('id', '=', keyId)
        .execute();
    }
    return keyRecord(row);
  }

  /** The record of a key that works now (known, not revoked, not expired), or undefined. */
  async authenticate(key: string, now = new Date()): Promise<ApiKeyRecord | undefined> {
    if (!KEY_SHAPE.test(key)) return undefined;
    const row = await this.store.db
      .selectFrom('oar_api_keys')
      .selectAll()
      .where('key_hash', '=', hashOf(key))
      .executeTakeFirst();
    if (!row || row.revoked_at || (row.expires_at && Date.parse(row.expires_at) <= +now)) return undefined;
    if (!row.last_used_at || +now - Date.parse(row.last_used_at) > LAST_USED_RESOLUTION_MS) {
      row.last_used_at = now.toISOString();
      await this.store.db
        .updateTable('oar_api_keys')
        .set({ last_used_at: row.last_used_at })
        .where('id', '=', row.id)
        .execute();
    }
    return keyRecord(row);
  }

  /** The workspace that owns a session, or undefined for an unknown session. */
  async ofSession(sessionId: string): Promise<string | undefined> {
    const row = await this.store.db
      .selectFrom('oar_sessions')
      .select('workspace_id')
      .where('id', '=', sessionId)
      .executeTakeFirst();
    return row ? (row.workspace_id ?? DEFAULT_WORKSPACE) : undefined;
  }
}
