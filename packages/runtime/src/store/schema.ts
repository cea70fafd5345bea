import type { Generated } from 'kysely';

/**
 * The tables. The event log is the source of truth; read models are projections of it kept in the same
 * transaction; artifacts hold full outputs. JSON documents are stored as text on both dialects so one code path
 * serves SQLite and PostgreSQL (the columns queried directly are real columns).
 */
export interface Database {
  oar_sessions: SessionsTable;
  oar_events: EventsTable;
  oar_read_models: ReadModelsTable;
  oar_artifacts: ArtifactsTable;
  oar_state: StateTable;
  oar_thread_leases: ThreadLeasesTable;
  oar_workspaces: WorkspacesTable;
  oar_api_keys: ApiKeysTable;
  oar_provider_slots: ProviderSlotsTable;
  oar_provider_starts: ProviderStartsTable;
  oar_provider_pauses: ProviderPausesTable;
  oar_runner_storage: RunnerStorageTable;
  oar_schedules: SchedulesTable;
  oar_schedule_firings: ScheduleFiringsTable;
}

/** Migration 0009: schedules (control-plane/schedule-rows.ts), one row each. */
export interface SchedulesTable {
  id: string;
  /** The workspace that owns it; null: the default workspace. */
  workspace_id: string | null;
  /** The definition (config/schedules.ts ScheduleDefinition, defaults applied) as JSON text. */
  definition: string;
  /** 1 while paused (an integer on both dialects). */
  paused: number;
  /** config | api */
  source: string;
  created_at: string;
  updated_at: string;
  /** The cron time of the last firing handled (started, skipped or failed). */
  last_fire_at: string | null;
  /** The first cron time not handled yet: what the ticker compares with now; null when it never fires again. */
  next_fire_at: string | null;
}

/** Migration 0009: one row per cron time of a schedule handled, inserted to claim it (the key makes it once). */
export interface ScheduleFiringsTable {
  schedule_id: string;
  /** The cron time (ISO). */
  fire_at: string;
  /** claimed | started | queued | skipped | failed */
  status: string;
  /** JSON `{sessionId, threadId?, turnId?, jobId?}` once started. */
  started: string | null;
  /** Why skipped or failed: missed, overlap, or an error code. */
  reason: string | null;
  /** JSON: a skip's count of missed times, a failure's error. */
  details: string | null;
  created_at: string;
  updated_at: string;
}

/** Migration 0007: a runner's storage.* values (agent-runners/storage.ts), by area, owner and key. */
export interface RunnerStorageTable {
  /** plugin | workspace | binding */
  area: string;
  /** Whose area: the workspace and plugin, the workspace, or the workspace, session, agent and runner. */
  owner: string;
  key: string;
  /** json: `value` is JSON text; base64: `value` is base64 of the bytes. */
  encoding: string;
  value: string;
  /** The value's size in bytes (the JSON text's, or the decoded bytes'): what the area's quota sums. */
  size: number;
  updated_at: string;
}

/** A model call running under a limited key (shared provider limits): held until released or expired. */
export interface ProviderSlotsTable {
  id: string;
  key: string;
  owner: string;
  /** Epoch ms; renewed while the call runs. A bigint column: PostgreSQL returns it as a string. */
  expires_at: number | string;
}

/** A call started under a key with a per-minute limit (rows older than a minute are deleted as they are met). */
export interface ProviderStartsTable {
  id: string;
  key: string;
  started_at: number | string;
}

/** A provider's pause of a model (429 retry-after), for every worker. */
export interface ProviderPausesTable {
  key: string;
  paused_until: number | string;
}

export interface SessionsTable {
  id: string;
  runtime_id: string;
  title: string | null;
  created_at: string;
  updated_at: string;
  /** The last assigned event sequence: incremented under the row lock, so sequences are gap-free per session. */
  last_sequence: number;
  /**
   * PostgreSQL only (migration 0004): the id of the transaction that last wrote the row, set by a trigger and
   * indexed, so the notifier's poll reads only what changed (store/changes.ts). Never written by OAR's code.
   */
  change_xid?: Generated<string | null>;
  /** The workspace that owns the session (migration 0005); null: the default workspace. */
  workspace_id?: string | null;
}

/** Migration 0005: who owns sessions and keys. The default workspace exists without a row. */
export interface WorkspacesTable {
  id: string;
  name: string;
  created_at: string;
}

/** Migration 0005: API keys, stored as a hash (store/workspaces.ts); the key itself is shown once and never kept. */
export interface ApiKeysTable {
  id: string;
  workspace_id: string;
  name: string;
  /** admin | operator | viewer */
  scope: string;
  key_hash: string;
  /** The key's first characters (`oar_k1a2b3c4`), to tell keys apart in a list. */
  prefix: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  last_used_at: string | null;
}

export interface EventsTable {
  session_id: string;
  sequence: number;
  event_id: string;
  type: string;
  thread_id: string | null;
  turn_id: string | null;
  timestamp: string;
  /** The whole event as JSON (envelope + payload). */
  body: string;
}

export interface ReadModelsTable {
  session_id: string;
  /** thread | session | task | tool_inventory */
  kind: string;
  key: string;
  /** Denormalized status for queries such as "threads waiting for a decision". */
  status: string | null;
  /** Sequence of the last event applied. */
  sequence: number;
  body: string;
  updated_at: string;
}

export interface ArtifactsTable {
  id: string;
  session_id: string;
  name: string | null;
  mime: string;
  size: number;
  sha256: string;
  preview: string;
  /** Empty once the artifact expired (`expired_at`): the row stays as its tombstone. */
  bytes: Uint8Array;
  created_at: string;
  /**
   * Migration 0008: when the retention policy expired it (control-plane/retention.ts); null while its bytes are
   * kept. A tombstone keeps name, MIME type, size and SHA-256, so a ref to it says `artifact_expired`, not "unknown".
   */
  expired_at?: string | null;
}

export interface StateTable {
  /** e.g. "session:<id>", "thread:<id>", "runtime" */
  scope: string;
  key: string;
  value: string;
  updated_at: string;
}

export interface ThreadLeasesTable {
  session_id: string;
  thread_id: string;
  /** The worker holding the lease; null once released. */
  owner: string | null;
  /** Fencing token: incremented by every claim that starts a new tenure; appends carry it and stale ones fail. */
  token: number;
  /** Epoch milliseconds; past it, any worker may take the lease over. */
  expires_at: number;
  /**
   * The thread's last sequence when its last driver released the lease finding nothing to do: while the thread's
   * last sequence is still this, no worker needs to look at it (a decision, a child's result, a submit moves it).
   */
  idle_sequence: Generated<number>;
  updated_at: string;
}
