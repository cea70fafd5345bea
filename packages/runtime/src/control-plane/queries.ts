import {
  createEvent,
  type ExecutionEnvironment,
  type RuntimeEvent,
  type SessionSnapshot,
  type Task,
  type ThreadReadModel,
  type UnreconciledAction,
} from '@oar/protocol';
import type { AgentConfig } from '../config/binding.js';
import type { PermissionsConfig } from '../config/permissions.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import type { EventLog } from '../log/event-log.js';
import { fileCheckpoints } from '../read-models/file-versions.js';
import { threadView, threadViews } from '../read-models/project.js';
import type { SessionState } from '../read-models/session.js';
import { toExecutionEnvironment, toSessionSnapshot, toThreadReadModel } from '../read-models/snapshots.js';
import { isListedTask } from '../read-models/task.js';
import type { PendingDecision, ThreadState } from '../read-models/thread-state.js';
import { TimeTravel } from '../read-models/time-travel.js';
import { sessionWork } from '../read-models/work.js';
import { getArtifact } from '../store/artifacts.js';
import { silentHolders } from '../store/leases.js';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import type { ToolRegistry } from '../tools/registry.js';
import { type ReplayReport, replaySession } from './replay.js';
import { subagentsOf } from './subagents.js';

/** What the tool inventory shows of a session's bound configuration (the worker's `BoundConfig` is one). */
export interface InventoryConfig {
  readonly permissions: Pick<PermissionsConfig, 'mode'>;
  readonly tools: Pick<ToolRegistry, 'inventory'>;
  readonly agents: readonly Pick<AgentConfig, 'name' | 'description' | 'capabilities'>[];
}

export interface QueryDeps {
  log: EventLog;
  configFor(session: SessionState | undefined, hash?: string): Promise<InventoryConfig>;
}

/** The control plane's queries: read models and events only — no model, no worker, nothing written. */
export class Queries {
  /** Checkpoints of replayed read models for `snapshotAt` (a scrubber asks for many positions of one session). */
  private readonly timeTravel = new TimeTravel((sessionId, after, limit) => this.log.read(sessionId, { after, limit }));

  constructor(private readonly deps: QueryDeps) {}

  private get log(): EventLog {
    return this.deps.log;
  }

  /** The sessions, newest first; of one workspace when `workspaceId` is given, only `sessionIds` when given. */
  async listSessions(filter: { workspaceId?: string; sessionIds?: readonly string[] } = {}): Promise<
    {
      sessionId: string;
      workspaceId: string;
      title: string | null;
      createdAt: string;
      updatedAt: string;
      events: number;
    }[]
  > {
    let query = this.log.store.db
      .selectFrom('oar_sessions')
      .select(['id', 'workspace_id', 'title', 'created_at', 'updated_at', 'last_sequence']);
    if (filter.workspaceId === DEFAULT_WORKSPACE) query = query.where('workspace_id', 'is', null);
    else if (filter.workspaceId !== undefined) query = query.where('workspace_id', '=', filter.workspaceId);
    if (filter.sessionIds) {
      if (filter.sessionIds.length === 0) return [];
      query = query.where('id', 'in', [...filter.sessionIds]);
    }
    const rows = await query.orderBy('created_at', 'desc').execute();
    return rows.map((r) => ({
      sessionId: r.id,
      workspaceId: r.workspace_id ?? DEFAULT_WORKSPACE,
      title: r.title,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      events: Number(r.last_sequence),
    }));
  }

  /** The sequence of the session's newest event (a cursor for "only what happens from now on"). */
  async lastSequence(sessionId: string): Promise<number> {
    const row = await this.log.store.db
      .selectFrom('oar_sessions')
      .select('last_sequence')
      .where('id', '=', sessionId)
      .executeTakeFirst();
    if (!row) throw notFound('session', sessionId);
    return Number(row.last_sequence);
  }

  /**
   * Where a thread stands for a client resuming it (`resume_thread`): its status, its running turn, who drives it
   * now, and a resume token to give next time. With the token of an earlier call: how many of the thread's events
   * came since (at most 1,000 counted; read them with `read({after: since, threadId})`).
   */
  async threadResumePoint(input: {
    sessionId: string;
    threadId: string;
    resumeToken?: string;
  }): Promise<ThreadResumePoint> {
    const thread = await this.log.thread(input.sessionId, input.threadId);
    const since = input.resumeToken === undefined ? undefined : resumeTokenSequence(input.resumeToken);
    if (since !== undefined && since > thread.lastSequence) {
      throw new OarRuntimeError('invalid_input', 'the resume token is not one this thread gave', {
        details: { resumeToken: input.resumeToken },
      });
    }
    const missed =
      since === undefined
        ? undefined
        : await this.log.read(input.sessionId, { after: since, threadId: thread.threadId, limit: 1000 });
    const holder = (await sessionWork(this.log.store.db, input.sessionId)).find(
      (w) => w.threadId === thread.threadId,
    )?.holder;
    return {
      sessionId: input.sessionId,
      threadId: thread.threadId,
      status: thread.status,
      ...(thread.activeTurnId ? { activeTurnId: thread.activeTurnId } : {}),
      ...(holder ? { heldBy: { owner: holder.owner, expiresAt: holder.expiresAt } } : {}),
      resumeToken: `${RESUME_TOKEN_PREFIX}${thread.lastSequence}`,
      ...(since !== undefined ? { since, missedEvents: missed?.length ?? 0 } : {}),
    };
  }

  /**
   * Sessions with unfinished work: a thread a worker should pick up (or that one holds), or a decision waiting
   * for an answer.
   */
  async resumableSessions(): Promise<{ sessionId: string; reason: string }[]> {
    const found: { sessionId: string; reason: string }[] = [];
    for (const { sessionId } of await this.listSessions()) {
      const work = await sessionWork(this.log.store.db, sessionId);
      const held = work.find((w) => w.holder);
      if (held?.holder) {
        found.push({ sessionId, reason: `being driven by ${held.holder.owner} until ${held.holder.expiresAt}` });
        continue;
      }
      if (work.length > 0) {
        found.push({ sessionId, reason: `${work.length} thread(s) with unfinished work` });
        continue;
      }
      const waiting = await this.log.store.db
        .selectFrom('oar_read_models')
        .select('key')
        .where('session_id', '=', sessionId)
        .where('kind', '=', 'thread')
        .where('status', 'in', ['waiting_permission', 'waiting_input'])
        .execute();
      if (waiting.length > 0) found.push({ sessionId, reason: `${waiting.length} thread(s) waiting for a decision` });
      const budget = await this.log.store.db
        .selectFrom('oar_read_models')
        .select('key')
        .where('session_id', '=', sessionId)
        .where('kind', '=', 'thread')
        .where('status', '=', 'waiting_resource')
        .execute();
      if (budget.length > 0) {
        found.push({ sessionId, reason: `${budget.length} thread(s) waiting for a budget (oar limit raises it)` });
      }
    }
    return found;
  }

  /** Events of a session after a cursor (at most `limit`). */
  readEvents(sessionId: string, options: { after?: number; limit?: number; threadId?: string } = {}) {
    return this.log.read(sessionId, options);
  }

  async getThreadRead(input: { sessionId: string; threadId: string }): Promise<ThreadReadModel> {
    const models = await this.log.allReadModels(input.sessionId);
    const thread = threadView(models, input.threadId);
    if (!thread) throw notFound('thread', input.threadId);
    const read = toThreadReadModel(thread, [...models.tasks.values()], models.session);
    return withStaleness([read], await silentHolders(this.log.store.db, input.sessionId))[0] as ThreadReadModel;
  }

  /**
   * The session's tasks (the standard's list_tasks; get_task is one of them), in the snapshot's order: its list —
   * archived ones filed away — or, with `archived`, every task.
   */
  async listTasks(input: { sessionId: string; archived?: boolean }): Promise<Task[]> {
    const models = await this.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const tasks = [...models.tasks.values()];
    return input.archived ? tasks : tasks.filter(isListedTask);
  }

  /**
   * The session's shell and a window of its history (the standard's get_session; scenario 10, old session recovery):
   * the snapshot as of `sequence`, and — recent first — the last `limit` events, or the `limit` events before
   * `before` (older pages: pass `previousCursor` back as `before`), or those after `cursor` (forward, as a stream).
   */
  async getSession(input: { sessionId: string; cursor?: number; before?: number; limit?: number }): Promise<{
    snapshot: SessionSnapshot;
    /** The sequence of the last event the snapshot reflects: a stream resumed after it misses nothing. */
    sequence: number;
    events: RuntimeEvent[];
    nextCursor: number;
    /** `before` for the page of older events; null when the window starts at the first event. */
    previousCursor: number | null;
    /** With `before`: that page as a `history.window.loaded` event, live-only (never in the log). */
    window?: RuntimeEvent;
  }> {
    const models = await this.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const last = models.session.lastSequence;
    const limit = input.limit ?? 200;
    let events: RuntimeEvent[];
    if (input.cursor !== undefined) {
      events = await this.log.read(input.sessionId, { after: input.cursor, limit });
    } else {
      // Sequences are 1…last without gaps: the window before `end` starts `limit` events earlier.
      const end = Math.min(input.before ?? last + 1, last + 1);
      const after = Math.max(0, end - 1 - limit);
      events = await this.log.read(input.sessionId, { after, limit: Math.max(0, end - 1 - after) });
    }
    const first = events[0]?.sequence;
    const nextCursor = events.at(-1)?.sequence ?? input.cursor ?? 0;
    const previousCursor = first !== undefined ? (first > 1 ? first : null) : null;
    const snapshot = toSessionSnapshot(
      models.session,
      threadViews(models),
      [...models.tasks.values()],
      [...models.jobs.values()],
    );
    const silent = await silentHolders(this.log.store.db, input.sessionId);
    return {
      snapshot: silent.size > 0 ? { ...snapshot, threads: withStaleness(snapshot.threads, silent) } : snapshot,
      sequence: last,
      events,
      nextCursor,
      previousCursor,
      ...(input.cursor === undefined && input.before !== undefined
        ? { window: windowEvent(this.log.runtimeId, input.sessionId, last, events, { before: input.before, limit }) }
        : {}),
    };
  }

  /** The session's binding as recorded (and its hash), or undefined for a session created before bindings. */
  async getBinding(sessionId: string) {
    const models = await this.log.allReadModels(sessionId);
    if (!models.session) throw notFound('session', sessionId);
    const hash = models.session.bindingHash;
    const binding = hash ? models.session.bindings?.[hash] : undefined;
    return binding && hash ? { binding, bindingHash: hash } : undefined;
  }

  async getToolInventory(input: { sessionId: string; threadId?: string }) {
    const models = await this.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const config = await this.deps.configFor(models.session);
    const resolved = input.threadId ? models.toolInventory.get(input.threadId) : undefined;
    return {
      mode: config.permissions.mode,
      tools: config.tools.inventory(),
      agents: config.agents.map((a) => ({ name: a.name, description: a.description, capabilities: a.capabilities })),
      ...(resolved ? { lastResolved: resolved } : {}),
    };
  }

  /** Where the session's work runs: workspace, environment variables by name, process limits, live processes. */
  async getExecutionEnvironment(input: { sessionId: string; threadId?: string }): Promise<ExecutionEnvironment> {
    const models = await this.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const thread = input.threadId !== undefined ? models.threads.get(input.threadId) : undefined;
    if (input.threadId !== undefined && !thread) throw notFound('thread', input.threadId);
    const threads = thread ? [thread] : [...models.threads.values()];
    return toExecutionEnvironment(models.session, threads, input.threadId);
  }

  /**
   * The artifact checkpoint summary (the standard's `artifact_checkpoint_summary`): the workspace files OAR's
   * `write` and `edit` changed, each with its versions — the call that made it, the ref of the content before it,
   * the digests before and after — of the session, or of one thread.
   */
  async getArtifactCheckpoints(input: { sessionId: string; threadId?: string }) {
    const last = await this.lastSequence(input.sessionId);
    // The whole session's: versions are numbered over it, and a rollback recorded on another thread undoes them.
    const events = await this.log.read(input.sessionId);
    return {
      sessionId: input.sessionId,
      ...(input.threadId ? { threadId: input.threadId } : {}),
      sequence: last,
      ...fileCheckpoints(events, input.threadId),
    };
  }

  /** Session- or thread-scoped state: one key, or all keys. */
  async getState(input: { sessionId: string; threadId?: string; key?: string }): Promise<Record<string, unknown>> {
    const models = await this.log.readModels(
      input.sessionId,
      input.threadId ? [{ kind: 'thread', key: input.threadId }] : [],
    );
    if (!models.session) throw notFound('session', input.sessionId);
    const scope = input.threadId ? models.threads.get(input.threadId)?.state : models.session.state;
    if (!scope) throw notFound('thread', input.threadId ?? '');
    if (input.key === undefined) return { ...scope };
    return Object.hasOwn(scope, input.key) ? { [input.key]: scope[input.key] } : {};
  }

  /**
   * One artifact of the session: its metadata and bytes (as stored: redacted like every record). An artifact of
   * another session is `artifact_not_found`, as if it did not exist.
   */
  async getArtifact(input: { sessionId: string; artifactId: string }) {
    const artifact = await getArtifact(this.log.store.db, input.sessionId, input.artifactId);
    if (!artifact) throw notFound('artifact', input.artifactId);
    return artifact;
  }

  /**
   * The session snapshot as it was right after event `at` (time travel): the read models rebuilt from the log's
   * first `at` events, the same reducers that built the stored ones. `at` past the session's last event is
   * `invalid_input`.
   */
  async snapshotAt(input: { sessionId: string; at: number }): Promise<{ snapshot: SessionSnapshot; sequence: number }> {
    const last = await this.lastSequence(input.sessionId);
    if (input.at < 1 || input.at > last) {
      throw new OarRuntimeError('invalid_input', `at must be an event sequence of the session: 1-${last}`, {
        details: { at: input.at, lastSequence: last },
      });
    }
    const models = await this.timeTravel.at(input.sessionId, input.at);
    if (!models.session) throw notFound('session', input.sessionId);
    return {
      snapshot: toSessionSnapshot(
        models.session,
        threadViews(models),
        [...models.tasks.values()],
        [...models.jobs.values()],
      ),
      sequence: input.at,
    };
  }

  /**
   * The decisions waiting for someone, across the sessions of a workspace (all sessions when none is named): one
   * indexed read of the threads whose status says they wait, oldest request first.
   */
  async pendingDecisions(
    filter: { workspaceId?: string } = {},
  ): Promise<(PendingDecision & { sessionId: string; threadId: string })[]> {
    const threads = await this.workspaceThreads(filter, 'waiting');
    return threads
      .flatMap(({ body, ...where }) => (body.pending ?? []).map((p) => ({ ...p, ...where })))
      .sort((a, b) => a.requestedAt.localeCompare(b.requestedAt));
  }

  /**
   * The lost actions nobody has reconciled yet, across the sessions of a workspace (all when none is named), oldest
   * first. Their threads are idle, so no status column finds them: the body holds a non-empty list, which the
   * store matches as text before anything is parsed.
   */
  async unreconciledActions(
    filter: { workspaceId?: string } = {},
  ): Promise<(UnreconciledAction & { sessionId: string; threadId: string })[]> {
    const threads = await this.workspaceThreads(filter, 'unreconciled');
    return threads
      .flatMap(({ body, ...where }) => (body.unreconciled ?? []).map((u) => ({ ...u, ...where })))
      .sort((a, b) => a.lostAt.localeCompare(b.lostAt));
  }

  /**
   * The threads of a workspace's sessions (all sessions when none is named) that wait for a decision (their status
   * column says so), or that hold a lost action nobody has answered (their idle status cannot: the row's text is
   * matched before it is parsed).
   */
  private async workspaceThreads(
    filter: { workspaceId?: string },
    which: 'waiting' | 'unreconciled',
  ): Promise<{ sessionId: string; threadId: string; body: Pick<ThreadState, 'pending' | 'unreconciled'> }[]> {
    let query = this.log.store.db
      .selectFrom('oar_read_models as m')
      .innerJoin('oar_sessions as s', 's.id', 'm.session_id')
      .select(['m.session_id', 'm.key', 'm.body'])
      .where('m.kind', '=', 'thread');
    query =
      which === 'waiting'
        ? query.where('m.status', 'in', ['waiting_permission', 'waiting_input'])
        : query.where('m.body', 'like', '%"unreconciled":[{%');
    if (filter.workspaceId === DEFAULT_WORKSPACE) query = query.where('s.workspace_id', 'is', null);
    else if (filter.workspaceId !== undefined) query = query.where('s.workspace_id', '=', filter.workspaceId);
    const rows = await query.execute();
    return rows.map((row) => ({ sessionId: row.session_id, threadId: row.key, body: JSON.parse(row.body) }));
  }

  async listSubagents(input: { sessionId: string; threadId?: string }) {
    const models = await this.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    return subagentsOf(models, input.threadId);
  }

  /**
   * Rebuild every read model from the log and compare with the stored ones (`oar replay`). A log that holds a
   * contradiction (two endings of one turn, task or tool call) is reported as such, never as "equal".
   */
  replaySession(sessionId: string): Promise<ReplayReport> {
    return replaySession(this.log, sessionId);
  }
}

/**
 * An older page of history served from the log (get_session with `before`), said in the standard's words:
 * `history.window.loaded`, a whole envelope at the sequence the snapshot reflects (as the SSE stream's
 * `snapshot.repaired`). Live-only, never appended: a read must not grow the log, and must work on a read-only
 * replica — the answer carries it to the client that asked, and nobody else is concerned.
 */
function windowEvent(
  runtimeId: string,
  sessionId: string,
  last: number,
  events: readonly RuntimeEvent[],
  asked: { before: number; limit: number },
): RuntimeEvent {
  const first = events[0]?.sequence;
  return createEvent('history.window.loaded', {
    sessionId,
    runtimeId,
    sequence: last,
    payload: {
      eventCount: events.length,
      ...asked,
      ...(first !== undefined ? { fromSequence: first, toSequence: events.at(-1)?.sequence ?? first } : {}),
      previousCursor: first !== undefined && first > 1 ? first : null,
      lastSequence: last,
    },
  });
}

/** Where a thread stands for a client resuming it (`resume_thread`). */
export interface ThreadResumePoint {
  sessionId: string;
  threadId: string;
  status: ThreadState['status'];
  activeTurnId?: string;
  /** The worker that holds the thread's lease now, and until when (absent: nobody drives it). */
  heldBy?: { owner: string; expiresAt: string };
  /** Give it back next time: the answer then says how much happened since. */
  resumeToken: string;
  /** The sequence the given token stands for, and how many of the thread's events came after it (at most 1,000). */
  since?: number;
  missedEvents?: number;
}

/** A resume token is the thread's last sequence when it was given, versioned so it can change shape later. */
const RESUME_TOKEN_PREFIX = 'rt1.';

function resumeTokenSequence(token: string): number {
  const digits = token.startsWith(RESUME_TOKEN_PREFIX) ? token.slice(RESUME_TOKEN_PREFIX.length) : '';
  const sequence = /^\d{1,15}$/.test(digits) ? Number(digits) : Number.NaN;
  if (!Number.isSafeInteger(sequence)) {
    throw new OarRuntimeError('invalid_input', 'the resume token is not one this runtime gave', {
      details: { resumeToken: token },
    });
  }
  return sequence;
}

/**
 * Threads with work whose worker went silent past its lease are `stale` (the standard's status for a snapshot that
 * may not be the current execution state), saying whose lease ran out and when — never guessed to be running.
 */
function withStaleness(
  threads: ThreadReadModel[],
  silent: ReadonlyMap<string, { owner: string; since: string }>,
): ThreadReadModel[] {
  return threads.map((thread) => {
    const holder = silent.get(thread.threadId);
    if (!holder || (thread.activeTurnId === undefined && thread.queuedTurns.length === 0)) return thread;
    return {
      ...thread,
      status: 'stale',
      stale: { reason: 'its worker went silent past its lease; nobody has taken it over yet', ...holder },
    };
  });
}
