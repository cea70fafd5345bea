import { z } from 'zod';
import { type Data, type LangbotHostApi, parse } from './action-support.js';

/**
 * LangBot's per-area storage actions (`{set,get,delete}_{plugin,workspace}_storage`, `get_*_storage_keys`) → OAR's
 * `storage.*` in the area of the same name. LangBot's values are bytes (`value_base64`), stored as OAR's base64
 * encoding; a JSON value another runner of the plugin stored on OAR's wire comes back as the base64 of its JSON
 * text. OAR's `binding` area has no LangBot action. Keys are OAR's (1–256 of `A-Za-z0-9_.:/-`): another key is the
 * host's `invalid_argument`.
 */

export const STORAGE_ACTIONS = [
  'set_plugin_storage',
  'get_plugin_storage',
  'delete_plugin_storage',
  'get_plugin_storage_keys',
  'set_workspace_storage',
  'get_workspace_storage',
  'delete_workspace_storage',
  'get_workspace_storage_keys',
] as const;
export type StorageAction = (typeof STORAGE_ACTIONS)[number];

/** The most keys one `get_*_storage_keys` collects (pages of 200 storage.list calls; each call counts). */
export const MAX_LISTED_KEYS = 5_000;

const KeySchema = z.looseObject({ key: z.string() });
const SetSchema = z.looseObject({ key: z.string(), value_base64: z.string() });

export async function storageAction(action: StorageAction, { data, host }: { data: Data; host: LangbotHostApi }) {
  const [op, area] = action.split('_') as [string, 'plugin' | 'workspace'];
  if (action.endsWith('_keys')) return { keys: await allKeys(host, area) };
  if (op === 'set') {
    const args = parse(SetSchema, data, action);
    await host.call('storage.set', { area, key: args.key, value: args.value_base64, encoding: 'base64' });
    return {};
  }
  const { key } = parse(KeySchema, data, action);
  if (op === 'delete') {
    const deleted = (await host.call('storage.delete', { area, key })) as { deleted?: boolean };
    return { deleted: deleted.deleted === true };
  }
  const got = (await host.call('storage.get', { area, key })) as { value?: unknown; encoding?: string };
  const value =
    got.encoding === 'base64' && typeof got.value === 'string'
      ? got.value
      : Buffer.from(JSON.stringify(got.value ?? null)).toString('base64');
  return { value_base64: value };
}

/** Every key of the area (LangBot answers them all at once), paged through storage.list up to MAX_LISTED_KEYS. */
async function allKeys(host: LangbotHostApi, area: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | null = null;
  do {
    const page = (await host.call('storage.list', { area, limit: 200, ...(cursor ? { cursor } : {}) })) as {
      items?: { key: string }[];
      next_cursor?: string | null;
      has_more?: boolean;
    };
    for (const item of page.items ?? []) keys.push(item.key);
    cursor = page.has_more ? (page.next_cursor ?? null) : null;
  } while (cursor && keys.length < MAX_LISTED_KEYS);
  return keys.slice(0, MAX_LISTED_KEYS);
}
