import { realpathSync, statSync } from 'node:fs';
import { ACTION_DECISIONS, type ActionDecision, oarError, type RuntimeEvent } from '@oar/protocol';
import {
  agentByName,
  applyBindingUpdate,
  type BindingUpdate,
  BindingUpdateSchema,
  bindingHash,
  type SessionBinding,
} from '../config/binding.js';
import { actionStatusChange } from '../facts/action.js';
import { queueChanged, retryOnThreadChange, ThreadChangedError, threadBusy, threadUnchanged } from '../facts/queue.js';
import { endFailedTurn } from '../facts/turn-end.js';
import type { FactWriter } from '../facts/writer.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { setRecent } from '../kernel/lru.js';
import { resolutionOf } from '../log/decision-log.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { type AppendOptions, type EventLog, loadReadModels } from '../log/event-log.js';
import type { Notifier } from '../log/notifier.js';
import { hooksChanged } from '../policy/hooks/changes.js';
import { grantFor, type PermissionRequest, PermissionRequestSchema } from '../policy/permissions.js';
import { threadView, threadViews } from '../read-models/project.js';
import { bindingOf, isTerminalTaskStatus, type SessionState } from '../read-models/session.js';
import type { ThreadView } from '../read-models/thread-state.js';
import { compactionRange } from '../read-models/thread-state.js';
import type { Redactor } from '../redaction/redactor.js';
import { bindingRedactor } from '../redaction/sources.js';
import { fenceOutUnheld } from '../store/leases.js';
import { DEFAULT_WORKSPACE, Workspaces } from '../store/workspaces.js';
import { prepareAttachments, type TurnAttachmentInput } from './attachments.js';
import { type ChangeLimitsInput, type ChangeLimitsResult, limitChangeFacts, validateLimitChange } from './limits.js';

export interface SubmitTurnInput {
  sessionId: string;
  /** Defaults to the session's main thread. */
  threadId?: string;
  /** Give one to make submission idempotent: a repeated id returns the first result. */
  turnId?: string;
  input: string;
  source?: string;
  /**
   * What to do when the thread is running another turn: `enqueue` (wait in the queue), `reject` (`thread_busy`,
   * naming the running turn) or `interrupt` (go first in the queue and interrupt the running turn). Default: the
   * binding's `queuePolicy` (`queue` = enqueue).
   */
  ifBusy?: 'enqueue' | 'reject' | 'interrupt';
  /** Files for the turn (control-plane/attachments.ts): stored as artifacts, recorded on the turn. */
  attachments?: TurnAttachmentInput[];
}

export interface SubmitTurnResult {
  sessionId: string;
  threadId: string;
  turnId: string;
  status: 'accepted' | 'queued';
  duplicate: boolean;
}

export interface RespondActionInput {
  sessionId: string;
  /** The decision's id: the `actionId` of its `action.required` event. */
  actionId: string;
  decision: ActionDecision;
  reason?: string;
  payload?: Record<string, unknown>;
  resolvedBy?: string;
}

/** How a compaction request ended (`compact`): see `Commands.awaitCompaction`. */
export interface CompactionResult {
  status: 'completed' | 'failed' | 'requested';
  threadId: string;
  requestId: string;
  compactionId?: string;
  sequence?: number;
  affectedTurns?: string[];
  tokensBefore?: number;
  tokensAfter?: number;
  summaryRef?: string;
  summarySource?: string;
  error?: { code: string; message: string; retryable: boolean; details?: Record<string, unknown> };
}

export interface InterruptResult {
  interrupted: boolean;
  turnId?: string;
  /**
   * `cancelled`: the cancellation is recorded; `requested`: the lease holder has not acted on it yet; `ended`: the
   * turn ended on its own (completed or failed) before the request was acted on.
   */
  status?: 'cancelled' | 'requested' | 'ended';
}

/** How many session bindings' redactors commands keep (each scanned its workspace's `.env` files once). */
const MAX_REDACTORS = 64;

export interface CommandDeps {
  log: EventLog;
  notifier: Notifier;
  /** The binding a new session gets (the runtime's configuration). */
  template(): SessionBinding;
  /** Throws when a binding cannot run here (a tool module that does not load, a model that does not resolve). */
  verify(binding: SessionBinding, hash: string): Promise<void>;
}

const SESSION_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * The control plane's commands (the spec's names): each reads, validates, and appends its facts in one
 * transaction under a guard. None runs a model or a tool or touches a worker: whichever worker holds a thread's
 * lease hears of the change (the notifier) and acts on it.
 */
export class Commands {
  constructor(private readonly deps: CommandDeps) {}

  private get log(): EventLog {
    return this.deps.log;
  }

  async createSession(
    input: {
      title?: string;
      sessionId?: string;
      agent?: string;
      binding?: BindingUpdate;
      workspaceId?: string;
      /** Who creates it (`api_key:<id>`); the local user when absent. Business tools act for it (credential `sub`). */
      actor?: string;
    } = {},
  ): Promise<{ sessionId: string; threadId: string; bindingHash: string; workspaceId: string }> {
    const sessionId = input.sessionId ?? newId('ses');
    const workspaceId = input.workspaceId ?? DEFAULT_WORKSPACE;
    if (workspaceId !== DEFAULT_WORKSPACE) await new Workspaces(this.log.store).require(workspaceId);
    if (!SESSION_ID.test(sessionId)) {
      throw new OarRuntimeError('invalid_input', 'session ids are 1-128 letters, digits, "_", ".", ":" or "-"');
    }
    const binding = bindingWith(this.deps.template(), input.binding);
    const existing = await this.log.store.db
      .selectFrom('oar_sessions')
      .select('id')
      .where('id', '=', sessionId)
      .executeTakeFirst();
    if (existing) throw new OarRuntimeError('session_exists', `session "${sessionId}" already exists`);
    const threadId = newId('thr');
    const agent = input.agent ?? binding.mainAgent.name;
    if (!agentByName(binding, agent)) {
      throw new OarRuntimeError('unknown_agent', `agent "${agent}" is not configured`, { details: { agent } });
    }
    const hash = bindingHash(binding);
    // Recorded with the new binding's own redactor, as every later command about the session is: a `.env` value of
    // its workspace or a secret variable it names, pasted into the title, never reaches the record.
    const redactor = await this.redactorOf(hash, binding);
    await this.log.createSession(
      sessionId,
      input.title,
      [
        {
          type: 'session.created',
          payload: {
            ...(input.title ? { title: input.title } : {}),
            ...(workspaceId !== DEFAULT_WORKSPACE ? { workspaceId } : {}),
            ...(input.actor ? { actor: input.actor } : {}),
            binding,
            bindingHash: hash,
          },
        },
        {
          type: 'thread.started',
          threadId,
          payload: { agent, depth: 0, ...(input.title ? { title: input.title } : {}) },
        },
      ],
      { redactor, workspaceId },
    );
    return { sessionId, threadId, bindingHash: hash, workspaceId };
  }

  /** Change a session's binding: recorded, and effective from the next turn (a running turn keeps its own). */
  async updateBinding(input: {
    sessionId: string;
    update: BindingUpdate;
  }): Promise<{ bindingHash: string; changed: string[] }> {
    const parsed = BindingUpdateSchema.safeParse(input.update);
    if (!parsed.success) {
      throw new OarRuntimeError('invalid_binding', 'the binding update is invalid', {
        details: { issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
      });
    }
    const session = await this.session(input.sessionId);
    const current = bindingOf(session) ?? this.deps.template();
    const next = bindingWith(current, parsed.data);
    const hash = bindingHash(next);
    const changed = Object.keys(next).filter(
      (key) =>
        JSON.stringify(next[key as keyof SessionBinding]) !== JSON.stringify(current[key as keyof SessionBinding]),
    );
    if (hash === session.bindingHash) return { bindingHash: hash, changed: [] };
    // Nothing is recorded that could not run: the session would be stuck on it from its next turn.
    await this.deps.verify(next, hash);
    await this.append(
      input.sessionId,
      [
        {
          type: 'session.updated',
          payload: { changed: changed.map((key) => `binding.${key}`), binding: next, bindingHash: hash },
        },
        // Hooks are policy: adding or removing one is also a `policy.changed` fact (docs/hooks.md).
        ...hooksChanged(current.hooks, next.hooks, hash),
      ],
      {
        // Two updates computed from the same binding must not silently drop one another's change.
        guard: async (tx) => {
          const now = (await loadReadModels(tx, input.sessionId, [])).session?.bindingHash;
          if (now !== session.bindingHash) {
            throw new OarRuntimeError('binding_changed', 'the binding changed while the update was prepared; retry', {
              retryable: true,
            });
          }
        },
      },
    );
    return { bindingHash: hash, changed };
  }

  private async session(sessionId: string): Promise<SessionState> {
    const session = (await this.log.readModels(sessionId, [])).session;
    if (!session) throw notFound('session', sessionId);
    return session;
  }

  async mainThreadId(sessionId: string): Promise<string> {
    const threadId = (await this.session(sessionId)).threadIds[0];
    if (!threadId) throw notFound('session', sessionId);
    return threadId;
  }

  async submitTurn(input: SubmitTurnInput): Promise<SubmitTurnResult> {
    if (typeof input.input !== 'string' || input.input.trim() === '') {
      throw new OarRuntimeError('invalid_input', 'a turn needs non-empty input text');
    }
    const threadId = input.threadId ?? (await this.mainThreadId(input.sessionId));
    const session = await this.session(input.sessionId);
    const binding = bindingOf(session) ?? this.deps.template();
    const ifBusy = input.ifBusy ?? (binding.queuePolicy === 'reject' ? 'reject' : 'enqueue');
    const attached = input.attachments?.length
      ? prepareAttachments(
          input.sessionId,
          input.attachments,
          await this.redactorFor(input.sessionId),
          binding.limits.maxArtifactBytes,
        )
      : undefined;
    const submitted = await retryOnThreadChange<SubmitTurnResult>(async () => {
      const thread = await this.log.thread(input.sessionId, threadId);
      if (thread.status === 'closed') throw new OarRuntimeError('thread_closed', `thread "${threadId}" is closed`);
      if (input.turnId) {
        const existing = thread.turns.find((t) => t.turnId === input.turnId);
        if (existing) {
          return {
            sessionId: input.sessionId,
            threadId,
            turnId: existing.turnId,
            status: existing.status === 'queued' ? 'queued' : 'accepted',
            duplicate: true,
          };
        }
      }
      const turnId = input.turnId ?? newId('turn');
      const busy = threadBusy(thread);
      if (busy && ifBusy === 'reject') {
        throw new OarRuntimeError('thread_busy', `thread "${threadId}" is running turn ${thread.activeTurnId}`, {
          retryable: true,
          details: { activeTurnId: thread.activeTurnId },
        });
      }
      const status = busy ? 'queued' : 'accepted';
      const source = input.source ?? 'user';
      const attachments = attached ? { attachments: attached.recorded } : {};
      const drafts: EventDraft[] = [
        {
          type: 'turn.submitted',
          threadId,
          turnId,
          status,
          payload: { status, input: input.input, source, ...attachments },
        },
        ...(attached?.facts({ threadId, turnId }) ?? []),
      ];
      if (busy) {
        const entry = { turnId, input: input.input, enqueuedAt: new Date().toISOString(), source };
        // An interrupting turn goes first: it is the next to run once the running one is cancelled.
        const queue = ifBusy === 'interrupt' ? [entry, ...thread.queue] : [...thread.queue, entry];
        drafts.push(queueChanged(thread, queue, 'enqueued', turnId));
      }
      // Under the session lock the thread must still be as read: concurrent submits cannot drop each other's turn.
      await this.append(input.sessionId, drafts, {
        guard: threadUnchanged(thread),
        ...(attached ? { artifacts: attached.artifacts } : {}),
      });
      return { sessionId: input.sessionId, threadId, turnId, status, duplicate: false };
    });
    if (ifBusy === 'interrupt' && submitted.status === 'queued' && !submitted.duplicate) {
      // Recorded after the turn, so the turn is never lost to a failed interrupt; `waitMs: 0`: the caller does not
      // wait for the cancellation (it is a durable request the thread's worker acts on within a step).
      await this.interruptTurn({
        sessionId: input.sessionId,
        threadId,
        reason: `interrupted by turn ${submitted.turnId}`,
        waitMs: 0,
      });
    }
    return submitted;
  }

  async removeQueuedTurn(input: { sessionId: string; threadId: string; turnId: string }): Promise<void> {
    await this.reorderQueue(input, 'removed', (queue, entry) => queue.filter((q) => q !== entry));
  }

  async promoteQueuedTurn(input: { sessionId: string; threadId: string; turnId: string }): Promise<void> {
    await this.reorderQueue(input, 'promoted', (queue, entry) => [entry, ...queue.filter((q) => q !== entry)]);
  }

  private async reorderQueue(
    input: { sessionId: string; threadId: string; turnId: string },
    change: 'removed' | 'promoted',
    reorder: (queue: ThreadView['queue'], entry: ThreadView['queue'][number]) => ThreadView['queue'],
  ): Promise<void> {
    await retryOnThreadChange(async () => {
      const thread = await this.log.thread(input.sessionId, input.threadId);
      const entry = thread.queue.find((q) => q.turnId === input.turnId);
      if (!entry) throw notFound('queued_turn', input.turnId);
      await this.append(input.sessionId, [queueChanged(thread, reorder(thread.queue, entry), change, input.turnId)], {
        guard: threadUnchanged(thread),
      });
    });
  }

  /**
   * Interrupt the running turn: a durable request on the thread and on every running descendant, which the lease
   * holder acts on within one step (`cancel` tools stop through their signal, `block` tools finish first) and then
   * records the cancellation. A thread nobody is driving (waiting for a decision, or its worker gone) is cancelled
   * here and now. Waits up to `waitMs` (default 10 s) for the cancellation to be recorded.
   */
  async interruptTurn(input: {
    sessionId: string;
    threadId?: string;
    reason?: string;
    waitMs?: number;
  }): Promise<InterruptResult> {
    const threadId = input.threadId ?? (await this.mainThreadId(input.sessionId));
    const models = await this.log.allReadModels(input.sessionId);
    const root = threadView(models, threadId);
    if (!root) throw notFound('thread', threadId);
    const turnId = root.activeTurnId;
    if (!turnId) return { interrupted: false };
    const reason = input.reason ?? 'the turn was interrupted';
    // The thread and its running descendants, deepest last (children are cancelled first below).
    const targets: ThreadView[] = [];
    const visit = (thread: ThreadView) => {
      if (!thread.activeTurnId) return;
      targets.push(thread);
      for (const sub of thread.subagents) {
        const child = sub.status === 'running' ? threadView(models, sub.childThreadId) : undefined;
        if (child) visit(child);
      }
    };
    visit(root);
    await this.append(
      input.sessionId,
      targets.map((thread) => ({
        type: 'thread.updated' as const,
        threadId: thread.threadId,
        payload: {
          changed: ['interrupt'],
          interrupt: { turnId: thread.activeTurnId, reason: thread === root ? reason : 'parent interrupted' },
        },
      })),
    );
    for (const thread of targets.reverse()) await this.cancelUnheld(input.sessionId, thread.threadId);
    let ended: string | undefined;
    await this.deps.notifier.waitFor(
      input.sessionId,
      async () => {
        const thread = await this.log.thread(input.sessionId, threadId);
        ended = thread.activeTurnId === turnId ? undefined : thread.turns.find((t) => t.turnId === turnId)?.status;
        return ended !== undefined;
      },
      input.waitMs ?? 10_000,
    );
    // The turn may also have ended on its own just before the request was acted on: say what really happened.
    if (ended === undefined) return { interrupted: true, turnId, status: 'requested' };
    return { interrupted: true, turnId, status: ended === 'cancelled' ? 'cancelled' : 'ended' };
  }

  /**
   * Ask for the thread's context to be compacted now (`oar compact`). Stateless like every command: it records a
   * durable request on the thread (`thread.updated` with `compactionRequest`), and whichever worker holds or claims
   * the thread compacts under its lease — the summary is a model call, which a command never makes. A request
   * already pending is returned, not repeated. Refused with `nothing_to_compact` when the thread has no finished
   * turn after its current boundary.
   */
  async requestCompaction(input: {
    sessionId: string;
    threadId?: string;
    reason?: string;
  }): Promise<{ sessionId: string; threadId: string; requestId: string; duplicate: boolean }> {
    await this.session(input.sessionId);
    const threadId = input.threadId ?? (await this.mainThreadId(input.sessionId));
    return retryOnThreadChange(async () => {
      const thread = await this.log.thread(input.sessionId, threadId);
      const base = { sessionId: input.sessionId, threadId };
      if (thread.compactionRequest) return { ...base, requestId: thread.compactionRequest.requestId, duplicate: true };
      if (thread.status === 'closed') throw new OarRuntimeError('thread_closed', `thread "${threadId}" is closed`);
      if (compactionRange(thread, 0).length === 0) {
        throw new OarRuntimeError(
          'nothing_to_compact',
          thread.compaction
            ? `thread "${threadId}" has no finished turn after its last compaction (${thread.compaction.compactionId})`
            : `thread "${threadId}" has no finished turn to compact`,
          {
            details: {
              threadId,
              turns: thread.turns.length,
              ...(thread.activeTurnId ? { activeTurnId: thread.activeTurnId } : {}),
              ...(thread.compaction ? { compactedThrough: thread.compaction.throughTurnId } : {}),
            },
          },
        );
      }
      const requestId = `${newId('cmp')}_req`;
      await this.append(
        input.sessionId,
        [
          {
            type: 'thread.updated',
            threadId,
            payload: {
              changed: ['compaction'],
              compactionRequest: { requestId, ...(input.reason ? { reason: input.reason } : {}) },
            },
          },
        ],
        { guard: threadUnchanged(thread) },
      );
      return { ...base, requestId, duplicate: false };
    });
  }

  /**
   * Wait up to `waitMs` (default 120 s) for a compaction request to be acted on, and say how it ended: `completed`
   * (with the new boundary's figures), `failed` (with the error), or still `requested`.
   */
  async awaitCompaction(
    request: { sessionId: string; threadId: string; requestId: string },
    waitMs = 120_000,
  ): Promise<CompactionResult> {
    const { sessionId, threadId, requestId } = request;
    await this.deps.notifier.waitFor(
      sessionId,
      async () => (await this.log.thread(sessionId, threadId)).compactionRequest?.requestId !== requestId,
      waitMs,
    );
    const rows = await this.log.store.db
      .selectFrom('oar_events')
      .select(['body'])
      .where('session_id', '=', sessionId)
      .where('type', 'in', ['context.compaction.completed', 'context.compaction.failed'])
      .orderBy('sequence', 'desc')
      .limit(200)
      .execute();
    for (const row of rows) {
      const event = JSON.parse(row.body) as RuntimeEvent;
      const payload = (event.payload ?? {}) as Record<string, unknown>;
      if (payload.requestId !== requestId) continue;
      const base = { threadId, requestId, compactionId: String(payload.compactionId ?? ''), sequence: event.sequence };
      if (event.type === 'context.compaction.failed') {
        return { ...base, status: 'failed', error: payload.error as CompactionResult['error'] };
      }
      return {
        ...base,
        status: 'completed',
        affectedTurns: (payload.affectedTurns as string[] | undefined) ?? [],
        tokensBefore: Number(payload.tokensBefore ?? 0),
        tokensAfter: Number(payload.tokensAfter ?? 0),
        summaryRef: String(payload.summaryRef ?? ''),
        summarySource: String(payload.summarySource ?? ''),
      };
    }
    return { threadId, requestId, status: 'requested' };
  }

  /** Record the cancellation of a thread's interrupted turn when no worker holds the thread. */
  private async cancelUnheld(sessionId: string, threadId: string): Promise<void> {
    const thread = await this.log.thread(sessionId, threadId);
    const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
    if (!turn || thread.interrupt?.turnId !== turn.turnId) return;
    const dialect = this.log.store.dialect;
    const unheld: AppendGuard = async (tx) => {
      if (await fenceOutUnheld(tx, dialect, sessionId, threadId)) throw new ThreadChangedError(threadId);
    };
    await endFailedTurn(
      this.writer(unheld),
      thread,
      turn,
      oarError('interrupted', thread.interrupt.reason),
      'cancelled',
    );
  }

  /** The runner's turn-ending code, writing as a command: each append also re-checks `guard`. */
  /** Redactors of the session bindings commands recently wrote for, by binding hash. */
  private readonly redactors = new Map<string, Promise<Redactor>>();

  /**
   * Append for a command, cleaned by the session's own redactor: a prompt that pastes a value from the workspace's
   * `.env` or a variable the binding names as secret is recorded redacted, as a worker's facts are. A session
   * without a binding (created before bindings) gets the log's process redactor.
   */
  private async append(sessionId: string, drafts: EventDraft[], options: AppendOptions = {}) {
    return this.log.append(sessionId, drafts, { ...options, redactor: await this.redactorFor(sessionId) });
  }

  private async redactorFor(sessionId: string): Promise<Redactor> {
    const session = (await this.log.readModels(sessionId, [])).session;
    const binding = session && bindingOf(session);
    if (!session?.bindingHash || !binding) return this.log.redactor;
    return this.redactorOf(session.bindingHash, binding);
  }

  /** The redactor of one binding, kept among the most recently used (`MAX_REDACTORS`). */
  private redactorOf(hash: string, binding: SessionBinding): Promise<Redactor> {
    let redactor = this.redactors.get(hash);
    if (!redactor) {
      redactor = bindingRedactor(binding);
      // A workspace that cannot be read now is tried again next time, not remembered.
      redactor.catch(() => this.redactors.delete(hash));
      setRecent(this.redactors, hash, redactor, MAX_REDACTORS);
    }
    return redactor;
  }

  private writer(guard: AppendGuard): FactWriter {
    return {
      loadThread: (sessionId, threadId) => this.log.thread(sessionId, threadId),
      append: (sessionId, drafts, options = {}) =>
        this.append(sessionId, drafts, {
          guard: async (tx) => {
            await guard(tx);
            await options.guard?.(tx);
          },
        }).then(() => undefined),
      // The notifier tells the workers; a command never drives anything itself.
      wake: () => undefined,
    };
  }

  /** Resolve a pending human or policy decision: the only way a paused action continues. */
  /**
   * Why a decision cannot be taken: it was resolved already (how, by whom, when), or no pending request has this
   * id (the pending ones are listed, so a typo is one look away from the right id).
   */
  private async notPending(sessionId: string, actionId: string, views: ThreadView[]): Promise<OarRuntimeError> {
    const event = await resolutionOf(this.log.store.db, sessionId, actionId);
    if (event) {
      const payload = event.payload as { decision?: string; resolvedBy?: string };
      return new OarRuntimeError(
        'decision_already_resolved',
        `decision "${actionId}" was already resolved: ${payload.decision} by ${payload.resolvedBy ?? 'user'} at ${event.timestamp}`,
        {
          details: {
            actionId,
            decision: payload.decision,
            resolvedBy: payload.resolvedBy,
            resolvedAt: event.timestamp,
            sequence: event.sequence,
          },
        },
      );
    }
    const open = views.flatMap((t) =>
      t.pending.map((p) => ({
        actionId: p.actionId,
        threadId: t.threadId,
        actionType: p.actionType,
        prompt: p.prompt,
      })),
    );
    const list = open.length > 0 ? `pending: ${open.map((p) => p.actionId).join(', ')}` : 'nothing is pending';
    return new OarRuntimeError('action_not_found', `no pending decision has id "${actionId}" (${list})`, {
      details: { actionId, pending: open },
    });
  }

  /**
   * The permission request a pending tool approval asked about: the executor and the touched paths recorded in its
   * `action.required` (`payload.scope`). A log without them (hand-edited, imported) cannot be granted for the
   * session: nobody can say what the human saw.
   */
  private async askedRequest(
    sessionId: string,
    threadId: string,
    turnId: string,
    actionId: string,
  ): Promise<{ request: PermissionRequest; workspaceRoot?: string }> {
    const rows = await this.log.store.db
      .selectFrom('oar_events')
      .select('body')
      .where('session_id', '=', sessionId)
      .where('thread_id', '=', threadId)
      .where('turn_id', '=', turnId)
      .where('type', '=', 'action.required')
      .execute();
    for (const row of rows) {
      const event = JSON.parse(row.body) as RuntimeEvent & { actionId?: string };
      if (event.actionId !== actionId) continue;
      const scope = (
        event.payload as {
          scope?: { executor?: unknown; paths?: unknown; workspaceRoot?: unknown; operation?: unknown };
        }
      ).scope;
      const request = PermissionRequestSchema.safeParse({
        executor: scope?.executor,
        paths: scope?.paths,
        ...(typeof scope?.operation === 'string' ? { operation: scope.operation } : {}),
      });
      // The workspace it was asked in (a question recorded before grants were scoped names none).
      const root = typeof scope?.workspaceRoot === 'string' && scope.workspaceRoot ? scope.workspaceRoot : undefined;
      if (request.success) return { request: request.data, ...(root ? { workspaceRoot: root } : {}) };
    }
    throw new OarRuntimeError(
      'invalid_decision',
      `decision "${actionId}" does not record what it asked about, so it cannot be approved for the session; approve it once`,
      { details: { actionId } },
    );
  }

  async respondAction(input: RespondActionInput): Promise<{ threadId: string; decision: ActionDecision }> {
    if (!ACTION_DECISIONS.includes(input.decision)) {
      throw new OarRuntimeError('invalid_decision', `decision must be one of ${ACTION_DECISIONS.join(', ')}`, {
        details: { decision: input.decision },
      });
    }
    const models = await this.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const views = threadViews(models);
    const thread = views.find((t) => t.pending.some((p) => p.actionId === input.actionId));
    const pending = thread?.pending.find((p) => p.actionId === input.actionId);
    if (!thread || !pending) throw await this.notPending(input.sessionId, input.actionId, views);
    // A runner run's question has no graph action: the live run waiting for it reads the answer (agent-runners/decisions.ts).
    const run = pending.runnerId ? undefined : thread.runs.get(pending.runId);
    const action = run?.declaration.actions.find((a) => a.id === pending.graphActionId);
    if (!pending.runnerId && (!run || !action)) throw notFound('action', input.actionId);
    if (pending.actionType !== 'tool_approval' && input.decision === 'approve_for_session') {
      throw new OarRuntimeError('invalid_decision', 'approve_for_session applies to tool approvals, not to questions');
    }
    if (pending.actionType !== 'user_input' && pending.decisions && !pending.decisions.includes(input.decision)) {
      // An ask rule asks every time: it offers approve|deny, and a session grant would never be consulted.
      throw new OarRuntimeError(
        'invalid_decision',
        `this request offers ${pending.decisions.join(', ')}; "${input.decision}" is not one of them`,
        { details: { decision: input.decision, offered: pending.decisions } },
      );
    }
    const taskId = run?.taskId ?? pending.taskId;
    const ids = {
      threadId: thread.threadId,
      turnId: pending.turnId,
      runId: pending.runId,
      ...(taskId ? { taskId } : {}),
    };
    const drafts: EventDraft[] = [
      {
        type: 'action.resolved',
        ...ids,
        actionId: input.actionId,
        payload: {
          decision: input.decision,
          ...(input.reason ? { reason: input.reason } : {}),
          ...(input.payload ? { payload: input.payload } : {}),
          resolvedBy: input.resolvedBy ?? 'user',
          graphActionId: pending.graphActionId,
        },
      },
    ];
    if (pending.actionType === 'tool_approval') {
      // A session grant is exactly the request the human was shown, as recorded when it was asked — not the
      // call's paths worked out again now (a symlink created since would widen it), nor another executor's.
      const asked =
        input.decision === 'approve_for_session'
          ? await this.askedRequest(input.sessionId, thread.threadId, pending.turnId, input.actionId)
          : undefined;
      drafts.push({
        type: 'permission.resolved',
        ...ids,
        stepId: pending.toolCallId ?? `${pending.runId}.${pending.graphActionId}`,
        toolCallId: pending.toolCallId ?? `${pending.runId}.${pending.graphActionId}`,
        actionId: input.actionId,
        payload: {
          decision: input.decision === 'deny' ? 'deny' : 'allow',
          toolName: pending.toolName,
          source: 'human',
          grantScope: input.decision === 'approve_for_session' ? 'session' : 'once',
          ...(asked ? { grant: grantFor(asked.request, asked.workspaceRoot) } : {}),
          ...(input.reason ? { reason: input.reason } : {}),
        },
      });
    }
    if (input.decision === 'deny' && run && action) {
      const what = pending.actionType === 'user_input' ? 'the user declined' : 'permission denied by the user';
      const error = oarError(
        pending.actionType === 'user_input' ? 'declined' : 'permission_denied',
        `${what}${input.reason ? `: ${input.reason}` : ''}`,
      );
      const observation = { id: action.id, status: 'denied' as const, artifacts: [], error };
      drafts.push(
        actionStatusChange(
          { ...ids, taskId: run.taskId },
          action,
          'denied',
          { observation: { ...observation, ...(action.title ? { title: action.title } : {}) } },
          'failed',
        ),
      );
    }
    if (taskId)
      drafts.push({ type: 'task.resumed', ...ids, taskId, payload: { reason: `decision ${input.decision}` } });
    // Resolve at most once: a concurrent respond_action for the same decision may have committed since we read it.
    await this.append(input.sessionId, drafts, {
      guard: async (tx) => {
        const current = await loadReadModels(tx, input.sessionId, [{ kind: 'thread', key: thread.threadId }]);
        if (!current.threads.get(thread.threadId)?.pending.some((p) => p.actionId === input.actionId)) {
          throw notFound('action', input.actionId);
        }
      },
    });
    return { threadId: thread.threadId, decision: input.decision };
  }

  async closeSubagent(input: { sessionId: string; subagentId: string; reason?: string }): Promise<void> {
    const models = await this.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const parent = [...models.threads.values()].find((t) => t.subagents.some((s) => s.subagentId === input.subagentId));
    const sub = parent?.subagents.find((s) => s.subagentId === input.subagentId);
    if (!parent || !sub) throw notFound('subagent', input.subagentId);
    if (sub.status === 'closed') return;
    await this.interruptTurn({
      sessionId: input.sessionId,
      threadId: sub.childThreadId,
      reason: input.reason ?? 'sub-agent closed',
    });
    const current = await this.log.thread(input.sessionId, parent.threadId);
    await this.append(input.sessionId, [
      {
        type: 'subagent.closed',
        threadId: current.threadId,
        turnId: current.activeTurnId ?? current.turns.at(-1)?.turnId ?? 'none',
        subagentId: sub.subagentId,
        payload: { reason: input.reason ?? 'closed' },
      },
      { type: 'thread.updated', threadId: sub.childThreadId, payload: { closed: true, status: 'completed' } },
    ]);
  }

  /** Cancel a task: its run is the active graph of a turn (interrupt it) or a delegation (interrupt the child). */
  async cancelTask(input: { sessionId: string; taskId: string; reason?: string }): Promise<InterruptResult> {
    const models = await this.log.allReadModels(input.sessionId);
    const task = models.tasks.get(input.taskId);
    if (!task) throw notFound('task', input.taskId);
    if (isTerminalTaskStatus(task.status)) {
      throw new OarRuntimeError('task_not_active', `task "${input.taskId}" already ended (${task.status})`);
    }
    if (!task.threadId) throw notFound('task', input.taskId);
    return this.interruptTurn({
      sessionId: input.sessionId,
      threadId: task.threadId,
      reason: input.reason ?? 'task cancelled',
    });
  }

  /**
   * Retry a failed action-graph task: a new attempt (new run id) re-runs the actions that did not complete,
   * keeps the failed attempt on record, and starts a turn so the model sees the new results.
   */
  async retryTask(input: { sessionId: string; taskId: string }): Promise<{ runId: string; turnId: string }> {
    const models = await this.log.allReadModels(input.sessionId);
    const task = models.tasks.get(input.taskId);
    if (!task?.threadId) throw notFound('task', input.taskId);
    const thread = threadView(models, task.threadId);
    const lastRun = thread ? [...thread.runs.values()].filter((r) => r.taskId === input.taskId).at(-1) : undefined;
    if (!thread || !lastRun)
      throw new OarRuntimeError('task_not_retryable', `task "${input.taskId}" has no action graph to retry`);
    if (!['failed', 'cancelled', 'lost'].includes(task.status)) {
      throw new OarRuntimeError(
        'task_not_retryable',
        `only failed, cancelled or lost tasks are retried (this one is ${task.status})`,
      );
    }
    if (threadBusy(thread)) {
      throw new OarRuntimeError('thread_busy', 'the thread has a turn running or waiting', { retryable: true });
    }
    const retry = lastRun.order.filter((id) => lastRun.actions[id]?.status !== 'completed');
    const declaration = {
      ...lastRun.declaration,
      actions: lastRun.declaration.actions.filter((a) => retry.includes(a.id)),
    };
    const runId = newId('run');
    const turnId = newId('turn');
    const attempt = (task.attempts?.length ?? 1) + 1;
    const ids = { threadId: thread.threadId, turnId, taskId: input.taskId, runId };
    const title = lastRun.declaration.title ?? task.title ?? 'retry';
    await this.append(
      input.sessionId,
      [
        {
          type: 'turn.submitted',
          threadId: thread.threadId,
          turnId,
          status: 'accepted',
          payload: { status: 'accepted', input: `Retry of task "${title}" (attempt ${attempt}).`, source: 'retry' },
        },
        {
          type: 'turn.started',
          threadId: thread.threadId,
          turnId,
          status: 'running',
          payload: models.session?.bindingHash ? { bindingHash: models.session.bindingHash } : {},
        },
        { type: 'task.retrying', ...ids, payload: { nextAttempt: attempt, reason: 'retry_task' } },
        { type: 'task.attempt.started', ...ids, payload: { attempt, status: 'running' } },
        {
          type: 'run.status',
          ...ids,
          status: 'running',
          payload: { phase: 'declared', title, declaration, retryOf: lastRun.runId },
        },
      ],
      { guard: threadUnchanged(thread) },
    );
    return { runId, turnId };
  }

  /**
   * Change a session's budget limits (`limit.changed`, docs/models.md "Budgets"): in force at once, for the running
   * turn too. A thread waiting for a budget is woken (its worker checks again and continues the same turn). Two
   * changes computed from the same limits must not drop one another's: the second is refused and retried.
   */
  async changeLimits(input: ChangeLimitsInput): Promise<ChangeLimitsResult> {
    validateLimitChange(input);
    for (let attempt = 1; ; attempt++) {
      const models = await this.log.allReadModels(input.sessionId);
      if (!models.session) throw notFound('session', input.sessionId);
      const { drafts, result } = limitChangeFacts(models, input);
      const seen = JSON.stringify(models.session.limits ?? null);
      try {
        await this.append(input.sessionId, drafts, {
          guard: async (tx) => {
            const now = (await loadReadModels(tx, input.sessionId, [])).session?.limits;
            if (JSON.stringify(now ?? null) !== seen) {
              throw new OarRuntimeError('limits_changed', 'the limits changed while the change was prepared; retry', {
                retryable: true,
              });
            }
          },
        });
        return result;
      } catch (error) {
        if (error instanceof OarRuntimeError && error.code === 'limits_changed' && attempt < 3) continue;
        throw error;
      }
    }
  }

  /**
   * Set (or, with `value: null`, delete) a key of session- or thread-scoped state. State changes are events
   * (`session.updated` / `thread.updated` with `payload.state`), so they replay and export like everything else.
   */
  async setState(input: { sessionId: string; threadId?: string; key: string; value: unknown }): Promise<void> {
    if (typeof input.key !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(input.key)) {
      throw new OarRuntimeError('invalid_state_key', 'state keys are 1-128 letters, digits, "_", ".", ":" or "-"');
    }
    let json: string | undefined;
    try {
      json = JSON.stringify(input.value);
    } catch {
      json = undefined;
    }
    if (json === undefined || json.length > 256 * 1024) {
      throw new OarRuntimeError('invalid_state_value', 'state values are JSON values of at most 256 KiB');
    }
    const state = { key: input.key, value: JSON.parse(json) as unknown };
    const changed = [`state.${input.key}`];
    if (input.threadId) {
      await this.log.thread(input.sessionId, input.threadId);
      await this.append(input.sessionId, [
        { type: 'thread.updated', threadId: input.threadId, payload: { changed, state } },
      ]);
    } else {
      await this.session(input.sessionId);
      await this.append(input.sessionId, [{ type: 'session.updated', payload: { changed, state } }]);
    }
  }
}

/** A binding with an update applied; the workspace becomes an absolute real path that must exist. */
export function bindingWith(base: SessionBinding, update: BindingUpdate | undefined): SessionBinding {
  const merged = update ? applyBindingUpdate(base, update) : base;
  let workspaceRoot: string;
  try {
    workspaceRoot = realpathSync(merged.workspaceRoot);
  } catch {
    throw new OarRuntimeError('workspace_unavailable', `workspace ${merged.workspaceRoot} does not exist`, {
      details: { workspace: merged.workspaceRoot },
    });
  }
  if (!statSync(workspaceRoot).isDirectory()) {
    throw new OarRuntimeError('workspace_unavailable', `workspace ${merged.workspaceRoot} is not a directory`, {
      details: { workspace: merged.workspaceRoot },
    });
  }
  return { ...merged, workspaceRoot };
}
