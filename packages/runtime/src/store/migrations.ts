import { type Kysely, type Migration, sql } from 'kysely';
import type { Dialect } from './dialect.js';

/**
 * Versioned migrations, in code so a bundled binary needs no migration folder. Names sort in apply order.
 * A migration never changes once released; a change is a new migration.
 */
export function migrations(dialect: Dialect): Record<string, Migration> {
  const blob = dialect === 'postgres' ? 'bytea' : 'blob';
  return {
    '0001_event_log': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('oar_sessions')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('runtime_id', 'text', (c) => c.notNull())
          .addColumn('title', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addColumn('last_sequence', 'integer', (c) => c.notNull().defaultTo(0))
          .execute();
        await db.schema
          .createTable('oar_events')
          .addColumn('session_id', 'text', (c) => c.notNull().references('oar_sessions.id'))
          .addColumn('sequence', 'integer', (c) => c.notNull())
          .addColumn('event_id', 'text', (c) => c.notNull().unique())
          .addColumn('type', 'text', (c) => c.notNull())
          .addColumn('thread_id', 'text')
          .addColumn('turn_id', 'text')
          .addColumn('timestamp', 'text', (c) => c.notNull())
          .addColumn('body', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('oar_events_pk', ['session_id', 'sequence'])
          .execute();
        await db.schema.createIndex('oar_events_thread').on('oar_events').columns(['thread_id', 'sequence']).execute();
        await db.schema
          .createTable('oar_read_models')
          .addColumn('session_id', 'text', (c) => c.notNull())
          .addColumn('kind', 'text', (c) => c.notNull())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('status', 'text')
          .addColumn('sequence', 'integer', (c) => c.notNull())
          .addColumn('body', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('oar_read_models_pk', ['session_id', 'kind', 'key'])
          .execute();
        await db.schema
          .createIndex('oar_read_models_status')
          .on('oar_read_models')
          .columns(['kind', 'status'])
          .execute();
        await db.schema
          .createTable('oar_artifacts')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('session_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text')
          .addColumn('mime', 'text', (c) => c.notNull())
          .addColumn('size', 'integer', (c) => c.notNull())
          .addColumn('sha256', 'text', (c) => c.notNull())
          .addColumn('preview', 'text', (c) => c.notNull())
          .addColumn('bytes', sql.raw(blob), (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('oar_artifacts_session').on('oar_artifacts').columns(['session_id']).execute();
        await db.schema
          .createTable('oar_state')
          .addColumn('scope', 'text', (c) => c.notNull())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('value', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('oar_state_pk', ['scope', 'key'])
          .execute();
      },
    },
    '0002_thread_leases': {
      async up(db: Kysely<unknown>) {
        // One row per thread ever driven. The token only grows: a released or expired lease keeps its row, and the
        // next claim increments it, so a token names one tenure forever (fencing compares tokens, not times).
        await db.schema
          .createTable('oar_thread_leases')
          .addColumn('session_id', 'text', (c) => c.notNull())
          .addColumn('thread_id', 'text', (c) => c.notNull())
          .addColumn('owner', 'text')
          .addColumn('token', 'integer', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .addColumn('idle_sequence', 'bigint', (c) => c.notNull().defaultTo(0))
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('oar_thread_leases_pk', ['session_id', 'thread_id'])
          .execute();
        await db.schema
          .createIndex('oar_thread_leases_expiry')
          .on('oar_thread_leases')
          .columns(['owner', 'expires_at'])
          .execute();
      },
    },
    '0003_thread_action_lists': {
      async up(db: Kysely<unknown>) {
        // A thread's action history is derived from its runs now (read-models/run.ts `actionHistory`): the two lists
        // the thread read model used to keep leave the stored rows, which otherwise keep them frozen forever (every
        // reducer copies the stored object forward) and differ from a rebuild (`oar replay`).
        const stripped =
          dialect === 'postgres'
            ? sql`(body::jsonb - 'usedActionIds' - 'completedActionIds')::text`
            : sql`json_remove(body, '$.usedActionIds', '$.completedActionIds')`;
        await sql`update oar_read_models set body = ${stripped} where kind = 'thread'`.execute(db);
      },
    },
    '0004_session_changes': {
      async up(db: Kysely<unknown>) {
        // PostgreSQL: the notifier's poll (store/changes.ts) asks which sessions changed since its last snapshot. A
        // row's `xmin` answers that but cannot be indexed, so the poll read the whole table every second. Every
        // write of a session row now stamps `change_xid` with the writing (top-level) transaction's id — a trigger,
        // so no writer can forget it — and an index on it lets a poll read only the rows written since the oldest
        // transaction its last snapshot saw running. Rows written before this migration keep no id: they are
        // older than any cursor. SQLite polls the events' rowid, which is already the primary key.
        if (dialect !== 'postgres') return;
        await sql`alter table oar_sessions add column change_xid xid8`.execute(db);
        await sql`create or replace function oar_sessions_changed() returns trigger language plpgsql as $$
          begin
            new.change_xid := pg_current_xact_id();
            return new;
          end
        $$`.execute(db);
        await sql`create trigger oar_sessions_changed before insert or update on oar_sessions
          for each row execute function oar_sessions_changed()`.execute(db);
        await sql`create index oar_sessions_change on oar_sessions (change_xid)`.execute(db);
      },
    },
    '0005_workspaces': {
      async up(db: Kysely<unknown>) {
        // A workspace owns sessions (and through them artifacts) and API keys (store/workspaces.ts). Sessions
        // created before it have no workspace column value: they belong to the default workspace.
        await db.schema
          .createTable('oar_workspaces')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .execute();
        await db.schema
          .createTable('oar_api_keys')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('workspace_id', 'text', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('scope', 'text', (c) => c.notNull())
          // SHA-256 of the whole key: keys are 190 random bits, so a fast hash is enough and the key is never kept.
          .addColumn('key_hash', 'text', (c) => c.notNull().unique())
          .addColumn('prefix', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'text')
          .addColumn('revoked_at', 'text')
          .addColumn('last_used_at', 'text')
          .execute();
        await db.schema.createIndex('oar_api_keys_workspace').on('oar_api_keys').column('workspace_id').execute();
        await db.schema.alterTable('oar_sessions').addColumn('workspace_id', 'text').execute();
        await db.schema
          .createIndex('oar_sessions_workspace')
          .on('oar_sessions')
          .columns(['workspace_id', 'created_at'])
          .execute();
      },
    },
    '0006_provider_limits': {
      async up(db: Kysely<unknown>) {
        // Provider limits shared by every worker of one store (models/shared-limits.ts): the calls running now (a
        // slot per call and limited key, renewed while the call runs, so a dead worker's slots run out), the
        // starts of the last minute, and the pauses providers asked for (429 retry-after). Times in epoch ms.
        await db.schema
          .createTable('oar_provider_slots')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('owner', 'text', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('oar_provider_slots_key')
          .on('oar_provider_slots')
          .columns(['key', 'expires_at'])
          .execute();
        await db.schema
          .createTable('oar_provider_starts')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('started_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex('oar_provider_starts_key')
          .on('oar_provider_starts')
          .columns(['key', 'started_at'])
          .execute();
        await db.schema
          .createTable('oar_provider_pauses')
          .addColumn('key', 'text', (c) => c.primaryKey())
          .addColumn('paused_until', 'bigint', (c) => c.notNull())
          .execute();
      },
    },
    '0007_runner_storage': {
      async up(db: Kysely<unknown>) {
        // A runner's storage.* (agent-runners/storage.ts): values by area and owner (the plugin, workspace or binding the
        // area belongs to), JSON text or base64 of bytes, with the decoded size kept so a quota is one sum.
        await db.schema
          .createTable('oar_runner_storage')
          .addColumn('area', 'text', (c) => c.notNull())
          .addColumn('owner', 'text', (c) => c.notNull())
          .addColumn('key', 'text', (c) => c.notNull())
          .addColumn('encoding', 'text', (c) => c.notNull())
          .addColumn('value', 'text', (c) => c.notNull())
          .addColumn('size', 'integer', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('oar_runner_storage_pk', ['area', 'owner', 'key'])
          .execute();
      },
    },
    '0008_artifact_retention': {
      async up(db: Kysely<unknown>) {
        // Artifact retention (control-plane/retention.ts): an expired artifact loses its bytes and keeps its row as a
        // tombstone, stamped here. The sweep asks for the artifacts still holding bytes created before a cutoff; a
        // partial index (both dialects have them) holds exactly those rows, so a sweep with nothing to do reads an
        // empty range, however many tombstones the table has.
        await db.schema.alterTable('oar_artifacts').addColumn('expired_at', 'text').execute();
        await sql`create index oar_artifacts_unexpired on oar_artifacts (created_at, id) where expired_at is null`.execute(
          db,
        );
      },
    },
    '0009_schedules': {
      async up(db: Kysely<unknown>) {
        // Schedules (docs/schedules.md): the definition as JSON text, with the columns the ticker queries — paused,
        // and `next_fire_at`, the first cron time not yet handled (ISO text, so it compares as it sorts). A firing is
        // claimed by inserting its row: the primary key (schedule, cron time) lets exactly one worker's insert take
        // effect, on both dialects, however many tickers find the time due at once.
        await db.schema
          .createTable('oar_schedules')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('workspace_id', 'text')
          .addColumn('definition', 'text', (c) => c.notNull())
          .addColumn('paused', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('source', 'text', (c) => c.notNull())
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addColumn('last_fire_at', 'text')
          .addColumn('next_fire_at', 'text')
          .execute();
        await db.schema
          .createIndex('oar_schedules_due')
          .on('oar_schedules')
          .columns(['paused', 'next_fire_at'])
          .execute();
        await db.schema
          .createTable('oar_schedule_firings')
          .addColumn('schedule_id', 'text', (c) => c.notNull())
          .addColumn('fire_at', 'text', (c) => c.notNull())
          .addColumn('status', 'text', (c) => c.notNull())
          .addColumn('started', 'text')
          .addColumn('reason', 'text')
          .addColumn('details', 'text')
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('updated_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint('oar_schedule_firings_pk', ['schedule_id', 'fire_at'])
          .execute();
        await db.schema
          .createIndex('oar_schedule_firings_status')
          .on('oar_schedule_firings')
          .columns(['status', 'updated_at'])
          .execute();
      },
    },
  };
}
