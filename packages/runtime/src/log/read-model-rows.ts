import { DEFAULT_WORKSPACE } from '../kernel/constants.js';
import type { ReadModelKind, ReadModels } from '../read-models/project.js';
import { emptyReadModels } from '../read-models/project.js';
import type { SessionState } from '../read-models/session.js';
import type { Db } from '../store/store.js';

/**
 * The read models as the store keeps them (`oar_read_models`, one row per model, the session's keyed by kind and
 * key): loading them into a `ReadModels` value, and addressing one model of such a value by its kind and key.
 */

/** One read model's address: its kind and its key (the session id, for the session model). */
export type ModelKey = { kind: ReadModelKind; key: string };

/** A model's address as one string, for maps and sets of addresses. */
export function keyOf(k: ModelKey): string {
  return `${k.kind}\u0000${k.key}`;
}

export type KeyedKind = Exclude<ReadModelKind, 'session'>;

export const KEYED_KINDS: readonly KeyedKind[] = ['thread', 'run', 'task', 'tool_inventory', 'job'];

/** The map holding the models of one keyed kind (every kind but the session model itself). */
export function mapOf(models: ReadModels, kind: KeyedKind): Map<string, unknown> {
  const maps = {
    thread: models.threads,
    run: models.runs,
    task: models.tasks,
    tool_inventory: models.toolInventory,
    job: models.jobs,
  };
  return maps[kind] as Map<string, unknown>;
}

export function modelOf(models: ReadModels, k: ModelKey): unknown {
  return k.kind === 'session' ? models.session : mapOf(models, k.kind).get(k.key);
}

export function setModel(models: ReadModels, k: ModelKey, value: unknown): void {
  if (k.kind === 'session') {
    models.session = value as SessionState | undefined;
    return;
  }
  const map = mapOf(models, k.kind);
  if (value === undefined) map.delete(k.key);
  else map.set(k.key, value);
}

/** Load read models by kind/key (the session model is always loaded). */
export async function loadReadModels(db: Db, sessionId: string, keys: ModelKey[]): Promise<ReadModels> {
  const rows = await db
    .selectFrom('oar_read_models')
    .select(['kind', 'key', 'body'])
    .where('session_id', '=', sessionId)
    .where((eb) =>
      eb.or([
        eb('kind', '=', 'session'),
        ...keys
          .filter((k) => k.kind !== 'session')
          .map((k) => eb.and([eb('kind', '=', k.kind), eb('key', '=', k.key)])),
      ]),
    )
    .execute();
  return decodeReadModels(rows);
}

/** All persisted read models of a session (for replay comparison and snapshots). */
export async function loadAllReadModels(db: Db, sessionId: string): Promise<ReadModels> {
  const rows = await db
    .selectFrom('oar_read_models')
    .select(['kind', 'key', 'body'])
    .where('session_id', '=', sessionId)
    .execute();
  return decodeReadModels(rows);
}

/**
 * The models of one kind across sessions (a job, found by its id alone; the jobs of a store), optionally of one
 * session or one key: the `(kind, status)` index narrows the read to that kind's rows.
 */
export async function keyedModels(
  db: Db,
  kind: KeyedKind,
  filter: { sessionId?: string; key?: string; workspaceId?: string } = {},
): Promise<{ sessionId: string; body: unknown }[]> {
  let query = db
    .selectFrom('oar_read_models as m')
    .innerJoin('oar_sessions as s', 's.id', 'm.session_id')
    .select(['m.session_id', 'm.body'])
    .where('m.kind', '=', kind);
  if (filter.sessionId) query = query.where('m.session_id', '=', filter.sessionId);
  if (filter.key) query = query.where('m.key', '=', filter.key);
  // The default workspace's sessions have no workspace id (named workspaces' have theirs).
  if (filter.workspaceId === DEFAULT_WORKSPACE) query = query.where('s.workspace_id', 'is', null);
  else if (filter.workspaceId !== undefined) query = query.where('s.workspace_id', '=', filter.workspaceId);
  const rows = await query.execute();
  return rows.map((row) => ({ sessionId: row.session_id, body: JSON.parse(row.body) }));
}

function decodeReadModels(rows: { kind: string; key: string; body: string }[]): ReadModels {
  const models = emptyReadModels();
  for (const row of rows) {
    const body = JSON.parse(row.body);
    if (row.kind === 'session') models.session = body as SessionState;
    else if ((KEYED_KINDS as readonly string[]).includes(row.kind))
      mapOf(models, row.kind as KeyedKind).set(row.key, body);
  }
  return models;
}

/** An `oar_read_models` row: the model's body, the status column queries filter on, the sequence it reflects. */
export type ReadModelRow = {
  session_id: string;
  kind: ReadModelKind;
  key: string;
  status: string | null;
  sequence: number;
  body: string;
  updated_at: string;
};

/** The row of one read model of a session, as of `sequence`. */
export function readModelRow(
  sessionId: string,
  k: ModelKey,
  body: object,
  sequence: number,
  updatedAt: string,
): ReadModelRow {
  return {
    session_id: sessionId,
    kind: k.kind,
    key: k.key,
    status: 'status' in body ? String((body as { status: unknown }).status) : null,
    sequence,
    body: JSON.stringify(body),
    updated_at: updatedAt,
  };
}

/** Insert or replace read model rows in one statement (the caller executes it, or hands it to a template). */
export function upsertReadModels(db: Db, rows: ReadModelRow[]) {
  return db
    .insertInto('oar_read_models')
    .values(rows)
    .onConflict((oc) =>
      oc.columns(['session_id', 'kind', 'key']).doUpdateSet((eb) => ({
        status: eb.ref('excluded.status'),
        sequence: eb.ref('excluded.sequence'),
        body: eb.ref('excluded.body'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    );
}
