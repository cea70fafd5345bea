import { randomUUID } from 'node:crypto';
import { createEvent, type EventFields, type EventType, type RuntimeEvent, type Task } from '@oar/protocol';
import { sql } from 'kysely';
import { OarRuntimeError } from '../errors.js';
import {
  applyEvent,
  emptyReadModels,
  type ReadModelKind,
  type ReadModels,
  touchedKeys,
} from '../read-models/project.js';
import type { SessionState } from '../read-models/session.js';
import type { ThreadState } from '../read-models/thread-state.js';
import type { Db, Store } from '../store/store.js';

/** What the engine writes: an event without the fields the log assigns (ids, sequence, time, profile fields). */
export type EventDraft = {
  [T in EventType]: { type: T } & Omit<
    EventFields<T>,
    'sessionId' | 'sequence' | 'runtimeId' | 'eventId' | 'timestamp' | 'schemaVersion'
  >;
}[EventType];

export type EventListener = (events: RuntimeEvent[]) => void;

/** A precondition re-checked under the session row lock, inside the append's transaction (see `EventLog.append`). */
export type AppendGuard = (tx: Db) => Promise<void>;

/**
 * The append-only event log and its projections. `append` assigns gap-free per-session sequences under the
 * session row's lock, validates every event against OAR's profile, and updates the read models the events
 * touch — all in one transaction. Subscribers hear about events only after they are durable.
 */
export class EventLog {
  private readonly listeners = new Set<EventListener>();

  constructor(
    readonly store: Store,
    readonly runtimeId: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async createSession(sessionId: string, title: string | undefined, drafts: EventDraft[]): Promise<RuntimeEvent[]> {
    return this.write(sessionId, drafts, { create: { title } });
  }

  /**
   * Append events. `guard` runs inside the transaction after the session row is locked: it re-checks a command's
   * precondition against committed state (throw to abort and write nothing), so two concurrent commands that both
   * read the same state before writing cannot both act on it (e.g. one decision resolved twice).
   */
  append(sessionId: string, drafts: EventDraft[], options: { guard?: AppendGuard } = {}): Promise<RuntimeEvent[]> {
    return this.write(sessionId, drafts, options);
  }

  private async write(
    sessionId: string,
    drafts: EventDraft[],
    options: { create?: { title: string | undefined }; guard?: AppendGuard },
  ): Promise<RuntimeEvent[]> {
    if (drafts.length === 0) return [];
    const events = await this.store.transaction(async (tx) => {
      const timestamp = this.now().toISOString();
      if (options.create) {
        await tx
          .insertInto('oar_sessions')
          .values({
            id: sessionId,
            runtime_id: this.runtimeId,
            title: options.create.title ?? null,
            created_at: timestamp,
            updated_at: timestamp,
            last_sequence: 0,
          })
          .execute();
      }
      // The UPDATE takes the session row's lock until commit, so concurrent writers cannot interleave sequences.
      const row = await tx
        .updateTable('oar_sessions')
        .set({ last_sequence: sql`last_sequence + ${drafts.length}`, updated_at: timestamp })
        .where('id', '=', sessionId)
        .returning('last_sequence')
        .executeTakeFirst();
      if (!row) throw new OarRuntimeError('session_not_found', `unknown session id "${sessionId}"`);
      if (options.guard) await options.guard(tx);
      const first = Number(row.last_sequence) - drafts.length + 1;
      const built = drafts.map((draft, index) =>
        createEvent(
          draft.type,
          {
            ...draft,
            sessionId,
            runtimeId: this.runtimeId,
            sequence: first + index,
            timestamp,
          } as never,
          { newId: randomUUID },
        ),
      ) as RuntimeEvent[];
      await tx
        .insertInto('oar_events')
        .values(
          built.map((event) => ({
            session_id: sessionId,
            sequence: event.sequence,
            event_id: event.eventId,
            type: event.type,
            thread_id: event.threadId ?? null,
            turn_id: event.turnId ?? null,
            timestamp: event.timestamp,
            body: JSON.stringify(event),
          })),
        )
        .execute();
      await this.project(tx, sessionId, built, timestamp);
      return built;
    });
    for (const listener of this.listeners) {
      try {
        listener(events);
      } catch {
        // A failing subscriber must not affect the writer; the events are already durable.
      }
    }
    return events;
  }

  /** Incremental projection: load only the read models these events touch, apply, write back. */
  private async project(tx: Db, sessionId: string, events: RuntimeEvent[], timestamp: string): Promise<void> {
    const wanted = new Map<string, { kind: ReadModelKind; key: string }>();
    for (const event of events) for (const k of touchedKeys(event)) wanted.set(`${k.kind}\u0000${k.key}`, k);
    const models = await loadReadModels(tx, sessionId, [...wanted.values()]);
    for (const event of events) applyEvent(models, event);
    const rows: { kind: ReadModelKind; key: string; status: string | null; body: unknown; sequence: number }[] = [];
    if (models.session) {
      rows.push({
        kind: 'session',
        key: sessionId,
        status: null,
        body: models.session,
        sequence: models.session.lastSequence,
      });
    }
    const last = events.at(-1)?.sequence ?? 0;
    for (const { kind, key } of wanted.values()) {
      if (kind === 'thread') {
        const thread = models.threads.get(key);
        if (thread) rows.push({ kind, key, status: thread.status, body: thread, sequence: last });
      } else if (kind === 'task') {
        const task = models.tasks.get(key);
        if (task) rows.push({ kind, key, status: task.status, body: task, sequence: last });
      } else if (kind === 'tool_inventory') {
        const inventory = models.toolInventory.get(key);
        if (inventory) rows.push({ kind, key, status: null, body: inventory, sequence: last });
      }
    }
    for (const row of rows) {
      const values = {
        session_id: sessionId,
        kind: row.kind,
        key: row.key,
        status: row.status,
        sequence: row.sequence,
        body: JSON.stringify(row.body),
        updated_at: timestamp,
      };
      await tx
        .insertInto('oar_read_models')
        .values(values)
        .onConflict((oc) =>
          oc.columns(['session_id', 'kind', 'key']).doUpdateSet({
            status: values.status,
            sequence: values.sequence,
            body: values.body,
            updated_at: values.updated_at,
          }),
        )
        .execute();
    }
  }

  /** Events of a session in sequence order, optionally after a cursor. */
  async read(
    sessionId: string,
    options: { after?: number; limit?: number; threadId?: string } = {},
  ): Promise<RuntimeEvent[]> {
    let query = this.store.db
      .selectFrom('oar_events')
      .select('body')
      .where('session_id', '=', sessionId)
      .where('sequence', '>', options.after ?? 0)
      .orderBy('sequence');
    if (options.threadId) query = query.where('thread_id', '=', options.threadId);
    if (options.limit !== undefined) query = query.limit(options.limit);
    const rows = await query.execute();
    return rows.map((row) => JSON.parse(row.body) as RuntimeEvent);
  }

  subscribe(listener: EventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** Load read models by kind/key (the session model is always loaded). */
export async function loadReadModels(
  db: Db,
  sessionId: string,
  keys: { kind: ReadModelKind; key: string }[],
): Promise<ReadModels> {
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

function decodeReadModels(rows: { kind: string; key: string; body: string }[]): ReadModels {
  const models = emptyReadModels();
  for (const row of rows) {
    const body = JSON.parse(row.body);
    if (row.kind === 'session') models.session = body as SessionState;
    else if (row.kind === 'thread') models.threads.set(row.key, body as ThreadState);
    else if (row.kind === 'task') models.tasks.set(row.key, body as Task);
    else if (row.kind === 'tool_inventory') models.toolInventory.set(row.key, body);
  }
  return models;
}
