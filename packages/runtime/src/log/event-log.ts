import { randomUUID } from 'node:crypto';
import { createEvent, type RuntimeEvent } from '@oar/protocol';
import { sql } from 'kysely';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { setRecent } from '../kernel/lru.js';
import { contradiction, isEnding } from '../read-models/contradictions.js';
import {
  applyEvent,
  copyReadModels,
  createdKey,
  emptyReadModels,
  type ReadModels,
  threadRuns,
  touchedKeys,
  updatedView,
} from '../read-models/project.js';
import type { RunState, ThreadView } from '../read-models/thread-state.js';
import type { Redactor } from '../redaction/redactor.js';
import { processRedactor } from '../redaction/sources.js';
import { RedactionTally, redactionFact } from '../redaction/tally.js';
import type { PendingArtifact } from '../store/artifacts.js';
import { type Fence, fenceHolds, LeaseLostError } from '../store/leases.js';
import { QueryTemplates } from '../store/query-templates.js';
import type { Db, Store } from '../store/store.js';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import type { AppendGuard, EventDraft } from './draft.js';
import { needsFlush } from './durability.js';
import { timeOrderedId } from './event-ids.js';
import {
  KEYED_KINDS,
  keyOf,
  loadAllReadModels,
  loadReadModels,
  type ModelKey,
  mapOf,
  modelOf,
  type ReadModelRow,
  readModelRow,
  setModel,
  upsertReadModels,
} from './read-model-rows.js';
import { withActiveSpan } from './tracing.js';

/**
 * `fenced`: written by a worker driving a thread (so it needs no worker's attention); else by a command. `flushed`:
 * the commit waited for the disk (log/durability.ts).
 */
export type EventListener = (events: RuntimeEvent[], origin: { fenced: boolean; flushed: boolean }) => void;

export interface AppendOptions {
  guard?: AppendGuard;
  /**
   * Who redacts these events (the writer's binding knows its secrets). Default: the log's own, which knows the
   * credential shapes and the provider key variables of this process.
   */
  redactor?: Redactor;
  /**
   * The redactor that already cleaned these drafts (a worker cleans the facts it stages, for its working view):
   * when it is the one this append redacts with, the second pass is skipped — it would find nothing, a clean text
   * has nothing left to find — which was half of a step's redaction work.
   */
  cleanedBy?: Redactor;
  /** Artifact rows the events reference, written in the same transaction (no orphan row, no dangling ref). */
  artifacts?: readonly PendingArtifact[];
  /**
   * The drafts are events recorded before, elsewhere (a fork copies another session's history): each keeps what it
   * was recorded with — its `timestamp` and its span. Default: every event is stamped with the time of the append,
   * and a command's facts with the caller's span.
   */
  copiedHistory?: boolean;
  /** The writer's thread lease: the append fails with `lease_lost` unless it is still the current tenure. */
  fence?: Fence;
  /**
   * The writer accepts a commit that returns before the disk has it (a step boundary of read-only and idempotent
   * work): granted unless a fact in it must reach the disk (`needsFlush`). Default: every commit is flushed.
   */
  relaxed?: boolean;
  /**
   * Read the models these events touch from the store, inside the transaction, never from this process's cache, and
   * keep only what this append wrote: the guard rewrote them (a repair: control-plane/replay.ts), so a copy cached
   * before is older than the store even at the same sequence.
   */
  fromStore?: boolean;
}

/**
 * Whether appends check every event against the OAR profile. The drafts are typed from the profile's own schemas,
 * so the check only catches what a cast let through: the test suite runs with it on (`OAR_VALIDATE_EVENTS=1`, set
 * in vitest.config.ts, inherited by the `oar` processes tests start), and so can anyone debugging a writer.
 */
const VALIDATE_EVENTS = process.env.OAR_VALIDATE_EVENTS === '1';

/** The PostgreSQL channel every append notifies (payload `writerId:lastSequence:sessionId`), delivered on commit. */
export const NOTIFY_CHANNEL = 'oar_events';

/**
 * The append-only event log and its projections. `append` assigns gap-free per-session sequences under the
 * session row's lock, validates every event against OAR's profile, and updates the read models the events
 * touch — all in one transaction. Subscribers hear about events only after they are durable.
 */
export class EventLog {
  /** Credential shapes and this process's provider keys: what every append is cleaned of, whoever writes it. */
  readonly redactor = processRedactor();
  private readonly listeners = new Set<EventListener>();
  /** Per session: read models as of `sequence` (see `cached`). Only models in `loaded` are known. */
  private readonly cache = new Map<
    string,
    {
      sequence: number;
      models: ReadModels;
      loaded: Set<string>;
      /** Thread views (a thread joined with its runs) as of `sequence`: carried forward by each write. */
      views?: Map<string, ThreadView>;
      /** Every model of the session is in `models` (loaded whole, then kept by this process's own writes). */
      complete?: boolean;
    }
  >();

  /** Names this writer in PostgreSQL notifications, so a process can skip the echo of its own appends. */
  readonly writerId = randomUUID();
  /** The SQL of the statements every step runs, compiled once per shape (store/query-templates.ts). */
  private readonly templates = new QueryTemplates();

  constructor(
    readonly store: Store,
    readonly runtimeId: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async createSession(
    sessionId: string,
    title: string | undefined,
    drafts: EventDraft[],
    options: Pick<AppendOptions, 'redactor' | 'cleanedBy' | 'artifacts' | 'copiedHistory'> & {
      workspaceId?: string;
    } = {},
  ): Promise<RuntimeEvent[]> {
    const { workspaceId, ...append } = options;
    return this.write(sessionId, drafts, { ...append, create: { title, workspaceId } });
  }

  /**
   * Append events. `guard` runs inside the transaction after the session row is locked: it re-checks a command's
   * precondition against committed state (throw to abort and write nothing), so two concurrent commands that both
   * read the same state before writing cannot both act on it (e.g. one decision resolved twice).
   */
  append(sessionId: string, drafts: EventDraft[], options: AppendOptions = {}): Promise<RuntimeEvent[]> {
    return this.write(sessionId, drafts, options);
  }

  private async write(
    sessionId: string,
    drafts: EventDraft[],
    options: AppendOptions & { create?: { title: string | undefined; workspaceId: string | undefined } },
  ): Promise<RuntimeEvent[]> {
    if (drafts.length === 0) return [];
    // A command's facts carry the caller's span (a worker's carry its own: tracing.ts).
    // Recorded history (a fork's copy) keeps the spans it was recorded under.
    if (!options.fence && !options.copiedHistory) drafts = withActiveSpan(drafts);
    const redactor = options.redactor ?? this.redactor;
    if (options.cleanedBy !== redactor) drafts = this.clean(drafts, redactor);
    const flushed = options.relaxed !== true || !this.store.sql.relaxedCommits || needsFlush(drafts);
    const written = await this.store.transaction(
      async (tx) => {
        const timestamp = this.now().toISOString();
        if (options.create) {
          await tx
            .insertInto('oar_sessions')
            .values({
              id: sessionId,
              runtime_id: this.runtimeId,
              // The title column is listed as is (`oar sessions`): cleaned like the facts.
              title:
                options.create.title === undefined
                  ? null
                  : (options.redactor ?? this.redactor).redactText(options.create.title),
              created_at: timestamp,
              updated_at: timestamp,
              last_sequence: 0,
              // The default workspace is stored as null, as for sessions created before workspaces.
              workspace_id:
                options.create.workspaceId === undefined || options.create.workspaceId === DEFAULT_WORKSPACE
                  ? null
                  : options.create.workspaceId,
            })
            .execute();
        }
        // The UPDATE takes the session row's lock until commit, so concurrent writers cannot interleave sequences. A
        // fenced append checks its tenure in the same statement (one round trip): the lease row must still name it.
        const fence = options.fence;
        if (fence && this.store.sql.rowLocks) {
          // Lock order session → lease, as a command's guard takes them (it fences a lease after the session row
          // is locked). The fence check below share-locks the lease row while it looks for the session row, so
          // without this the two could each hold one and wait for the other (seen: `deadlock detected`).
          await this.templates.execute(
            tx,
            'lock session',
            () => tx.selectFrom('oar_sessions').select('id').where('id', '=', sessionId).forUpdate(),
            [sessionId],
          );
        }
        const advanced = await this.templates.execute(
          tx,
          fence ? 'advance sequence, fenced' : 'advance sequence',
          () =>
            tx
              .updateTable('oar_sessions')
              .set({ last_sequence: sql`last_sequence + ${drafts.length}`, updated_at: timestamp })
              .where('id', '=', sessionId)
              .$if(fence !== undefined, (qb) => qb.where(fenceHolds(this.store.sql, fence as Fence)))
              .returning('last_sequence'),
          fence
            ? [drafts.length, timestamp, sessionId, fence.sessionId, fence.threadId, fence.owner, fence.token]
            : [drafts.length, timestamp, sessionId],
        );
        const row = advanced.rows[0];
        if (!row) {
          if (fence && (await sessionExists(tx, sessionId))) throw new LeaseLostError(fence);
          throw new OarRuntimeError('session_not_found', `unknown session id "${sessionId}"`);
        }
        if (options.guard) await options.guard(tx);
        if (options.artifacts?.length) {
          await tx
            .insertInto('oar_artifacts')
            .values(options.artifacts.map((artifact) => artifact.row))
            .execute();
        }
        const first = Number(row.last_sequence) - drafts.length + 1;
        const built = drafts.map((draft, index) =>
          createEvent(
            draft.type,
            {
              ...draft,
              sessionId,
              runtimeId: this.runtimeId,
              sequence: first + index,
              timestamp: (options.copiedHistory && (draft as { timestamp?: string }).timestamp) || timestamp,
            } as never,
            { newId: timeOrderedId, validate: VALIDATE_EVENTS },
          ),
        ) as RuntimeEvent[];
        const rows = built.map((event) => eventRow(sessionId, event));
        await this.templates.execute(
          tx,
          `insert events ×${rows.length}`,
          () => tx.insertInto('oar_events').values(rows),
          rows.flatMap(eventRowParameters),
        );
        // Dropped with no await before `project` reads the cache: nothing cached from the old rows can serve it.
        if (options.fromStore) this.cache.delete(sessionId);
        const models = await this.project(tx, sessionId, built, timestamp);
        // Other processes are told on commit (PostgreSQL's NOTIFY); this one tells its listeners below.
        await this.store.sql.notifyOnCommit(
          tx,
          NOTIFY_CHANNEL,
          `${this.writerId}:${first + built.length - 1}:${sessionId}`,
        );
        return { built, models, first };
      },
      { flush: flushed },
    );
    const { built: events, models, first } = written;
    if (options.fromStore) this.cache.delete(sessionId);
    const keys = new Map<string, ModelKey>();
    for (const event of events) for (const k of touchedKeys(event)) keys.set(keyOf(k), k);
    this.remember(sessionId, first - 1, first + events.length - 1, models, [...keys.values()]);
    const origin = { fenced: options.fence !== undefined, flushed };
    for (const listener of this.listeners) {
      try {
        listener(events, origin);
      } catch {
        // A failing subscriber must not affect the writer; the events are already durable.
      }
    }
    return events;
  }

  /**
   * The drafts with every secret replaced by `[REDACTED:<kind>]`, plus one `output.redacted` fact (counts and
   * kinds, never values) when anything was: the single point where data enters the log, so no writer can forget.
   */
  clean(drafts: EventDraft[], redactor: Redactor): EventDraft[] {
    const tally = new RedactionTally();
    const clean = redactor.redactJson(drafts, tally);
    const fact = redactionFact(tally, { sink: 'event' });
    if (!fact) return clean;
    const first = clean.find((draft, index) => draft !== drafts[index]) ?? clean[0];
    return [
      ...clean,
      {
        type: 'output.redacted',
        ...(first?.threadId ? { threadId: first.threadId } : {}),
        ...(first?.turnId ? { turnId: first.turnId } : {}),
        payload: fact,
      } as EventDraft,
    ];
  }

  /**
   * Incremental projection: take the read models these events touch (from the cache when it is provably current,
   * else from the store inside this transaction), apply the events, write back only those models.
   */
  private async project(tx: Db, sessionId: string, events: RuntimeEvent[], timestamp: string): Promise<ReadModels> {
    const wanted = new Map<string, ModelKey>();
    // Models these events create (a new run, task or thread) need nothing from the store: the creating event
    // replaces whatever was there, and nothing before it in the batch looked at it (an ending would, to refuse a
    // contradiction; the events that only name a model before it exists leave nothing to read).
    const created = new Set<string>();
    const looked = new Set<string>();
    for (const event of events) {
      const made = createdKey(event);
      const madeId = made && keyOf(made);
      const ending = isEnding(event);
      for (const k of touchedKeys(event)) {
        const id = keyOf(k);
        if (id === madeId && !looked.has(id)) created.add(id);
        if (ending) looked.add(id);
        wanted.set(id, k);
      }
    }
    const first = events[0]?.sequence ?? 1;
    const last = events.at(-1)?.sequence ?? first;
    const toLoad = [...wanted].filter(([id]) => !created.has(id)).map(([, k]) => k);
    const models = await this.cached(tx, sessionId, first - 1, toLoad);
    for (const event of events) {
      // The log never holds two endings of one turn, task or tool call: the second writer is refused, whole.
      const conflict = contradiction(models, event);
      if (conflict) throw new OarRuntimeError('contradictory_fact', conflict, { details: { type: event.type } });
      applyEvent(models, event);
    }
    const rows: ReadModelRow[] = [];
    for (const k of wanted.values()) {
      const body = modelOf(models, k);
      if (body === undefined) continue;
      rows.push(readModelRow(sessionId, k, body as object, last, timestamp));
    }
    // One statement for every model the batch changed (a round trip each cost PostgreSQL a third of a commit).
    if (rows.length > 0) {
      await this.templates.execute(
        tx,
        `upsert read models ×${rows.length}`,
        () => upsertReadModels(tx, rows),
        rows.flatMap((r) => [r.session_id, r.kind, r.key, r.status, r.sequence, r.body, r.updated_at]),
      );
    }
    return models;
  }

  /**
   * The read models for `keys` as of `sequence`. The cache answers for a session only when it holds exactly that
   * sequence — then no other writer can have changed anything in between; otherwise the store does.
   */
  private async cached(db: Db, sessionId: string, sequence: number, keys: ModelKey[]): Promise<ReadModels> {
    const entry = this.cache.get(sessionId);
    const fresh = entry !== undefined && entry.sequence === sequence;
    const models = emptyReadModels();
    const missing: ModelKey[] = [];
    for (const k of [{ kind: 'session' as const, key: sessionId }, ...keys]) {
      if (fresh && entry.loaded.has(keyOf(k))) setModel(models, k, modelOf(entry.models, k));
      else missing.push(k);
    }
    if (missing.length > 0) {
      const loaded = await loadReadModels(db, sessionId, missing);
      for (const k of missing) setModel(models, k, modelOf(loaded, k));
    }
    return models;
  }

  /** Remember what a committed write left behind (called only after commit; a rollback leaves the cache alone). */
  private remember(sessionId: string, before: number, after: number, models: ReadModels, keys: ModelKey[]): void {
    const entry = this.cache.get(sessionId);
    const target =
      entry !== undefined && entry.sequence === before
        ? entry
        : { sequence: after, models: emptyReadModels(), loaded: new Set<string>() };
    for (const k of [{ kind: 'session' as const, key: sessionId }, ...keys]) {
      setModel(target.models, k, modelOf(models, k));
      target.loaded.add(keyOf(k));
    }
    target.sequence = after;
    target.views = target === entry ? updatedViews(entry.views, models, keys) : undefined;
    // Every model a write creates or changes is among `keys`, so a complete entry stays complete.
    target.complete = target === entry && entry.complete === true;
    // A bounded number of sessions stays cached (least recently written or loaded first out).
    setRecent(this.cache, sessionId, target, MAX_CACHED_SESSIONS);
  }

  /**
   * Read models of one session for the runner: served from the cache when the session's last sequence in the
   * store equals the cached one, loaded (and cached) otherwise.
   */
  async readModels(sessionId: string, keys: ModelKey[]): Promise<ReadModels> {
    const sequence = await this.lastSequence(sessionId);
    return sequence === undefined ? emptyReadModels() : this.modelsAt(sessionId, sequence, keys);
  }

  private async lastSequence(sessionId: string): Promise<number | undefined> {
    // Five times a step (every read of the thread or the session asks first): compiled once.
    const db = this.store.db;
    const result = await this.templates.execute(
      db,
      'last sequence',
      () => db.selectFrom('oar_sessions').select('last_sequence').where('id', '=', sessionId),
      [sessionId],
    );
    const row = result.rows[0];
    return row ? Number(row.last_sequence) : undefined;
  }

  /** The read models for `keys` as of `sequence` (the session's last in the store), remembered in the cache. */
  private async modelsAt(sessionId: string, sequence: number, keys: ModelKey[]): Promise<ReadModels> {
    const models = await this.cached(this.store.db, sessionId, sequence, keys);
    const entry = this.cache.get(sessionId);
    if (entry === undefined || entry.sequence !== sequence) {
      const fresh = { sequence, models: emptyReadModels(), loaded: new Set<string>() };
      setRecent(this.cache, sessionId, fresh, MAX_CACHED_SESSIONS);
    }
    const target = this.cache.get(sessionId);
    if (target) {
      for (const k of [{ kind: 'session' as const, key: sessionId }, ...keys]) {
        setModel(target.models, k, modelOf(models, k));
        target.loaded.add(keyOf(k));
      }
    }
    return models;
  }

  /**
   * Every read model of a session, for commands and queries: from the cache when it holds all of them as of the
   * store's last sequence (one `SELECT last_sequence`), else loaded whole and remembered. The maps are the caller's
   * own copies; the models in them are immutable values.
   */
  async allReadModels(sessionId: string): Promise<ReadModels> {
    const sequence = await this.lastSequence(sessionId);
    if (sequence === undefined) return emptyReadModels();
    let entry = this.cache.get(sessionId);
    if (entry?.sequence !== sequence || !entry.complete) {
      // Loaded after the sequence was read: a write in between makes the entry newer than its label, and so never
      // served again (the store's sequence has moved past it), never older.
      const models = await loadAllReadModels(this.store.db, sessionId);
      const loaded = new Set<string>([keyOf({ kind: 'session', key: sessionId })]);
      for (const kind of KEYED_KINDS) for (const key of mapOf(models, kind).keys()) loaded.add(keyOf({ kind, key }));
      entry = { sequence, models, loaded, complete: true };
      setRecent(this.cache, sessionId, entry, MAX_CACHED_SESSIONS);
    }
    return copyReadModels(entry.models);
  }

  /**
   * One thread joined with its runs (the runner's and the commands' view of it): the thread and its runs as of one
   * sequence (one look at the store decides whether the cache serves both).
   */
  async thread(sessionId: string, threadId: string): Promise<ThreadView> {
    const sequence = await this.lastSequence(sessionId);
    const thread =
      sequence === undefined
        ? undefined
        : (await this.modelsAt(sessionId, sequence, [{ kind: 'thread', key: threadId }])).threads.get(threadId);
    if (!thread || sequence === undefined) throw notFound('thread', threadId);
    // Nothing changed since this view was built: the same (immutable) view, without joining every run again.
    const known = this.cache.get(sessionId);
    const built = known?.sequence === sequence ? known.views?.get(threadId) : undefined;
    if (built) return built;
    const runKeys = thread.turns.flatMap((turn) => turn.runIds.map((key) => ({ kind: 'run' as const, key })));
    const runs = runKeys.length > 0 ? (await this.modelsAt(sessionId, sequence, runKeys)).runs : new Map();
    const view = { ...thread, runs: threadRuns(thread, runs) };
    const entry = this.cache.get(sessionId);
    if (entry?.sequence === sequence) {
      entry.views ??= new Map();
      entry.views.set(threadId, view);
    }
    return view;
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

/**
 * The cached thread views after a write that changed `keys`: a view the write did not touch is still current; a
 * touched one is brought forward from the written models (see `updatedView`), so a long thread's runs are not
 * joined again after every step.
 */
function updatedViews(
  views: Map<string, ThreadView> | undefined,
  models: ReadModels,
  keys: readonly ModelKey[],
): Map<string, ThreadView> | undefined {
  if (views === undefined) return undefined;
  const next = new Map<string, ThreadView>();
  for (const [threadId, view] of views) {
    const touched = keys.some((k) => k.kind === 'thread' && k.key === threadId);
    const changed: RunState[] = [];
    for (const k of keys) {
      const run = k.kind === 'run' ? models.runs.get(k.key) : undefined;
      if (run?.threadId === threadId) changed.push(run);
    }
    if (!touched && changed.length === 0) {
      next.set(threadId, view);
      continue;
    }
    const thread = touched ? models.threads.get(threadId) : view;
    if (thread) next.set(threadId, updatedView(view, thread, changed));
  }
  return next;
}

async function sessionExists(db: Db, sessionId: string): Promise<boolean> {
  return (
    (await db.selectFrom('oar_sessions').select('id').where('id', '=', sessionId).executeTakeFirst()) !== undefined
  );
}

/** The `oar_events` row of an event: the columns queried directly, and the whole event as JSON. */
export function eventRow(sessionId: string, event: RuntimeEvent) {
  return {
    session_id: sessionId,
    sequence: event.sequence,
    event_id: event.eventId,
    type: event.type,
    thread_id: event.threadId ?? null,
    turn_id: event.turnId ?? null,
    timestamp: event.timestamp,
    body: JSON.stringify(event),
  };
}

/** An `eventRow`'s values in its column order (the order its insert binds them). */
function eventRowParameters(row: ReturnType<typeof eventRow>): unknown[] {
  return [row.session_id, row.sequence, row.event_id, row.type, row.thread_id, row.turn_id, row.timestamp, row.body];
}

const MAX_CACHED_SESSIONS = 256;
