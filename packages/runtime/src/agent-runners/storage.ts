import { createHash } from 'node:crypto';
import { STORAGE_AREAS, StorageKeySchema, StorageListArgsSchema, StorageSetArgsSchema } from '@oar/runner-sdk';
import { MAX_STORAGE_VALUE_BYTES, STORAGE_AREA_QUOTA_BYTES, type StorageArea } from '../store/runner-storage.js';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import type { AuditTarget } from './run-session.js';
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
