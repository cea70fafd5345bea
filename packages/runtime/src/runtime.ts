import { realpathSync } from 'node:fs';
import {
  ACTION_DECISIONS,
  type ActionDecision,
  type OarError,
  oarError,
  type RuntimeEvent,
  type SessionSnapshot,
  type ThreadReadModel,
} from '@oar/protocol';
import { type AgentConfig, DEFAULT_LIMITS, type Engine, type RuntimeLimits } from './engine.js';
import { notFound, OarRuntimeError, toOarError } from './errors.js';
import { toolPermissionRequest } from './executors/tool.js';
import { exportEvidence, exportReplay } from './exports.js';
import { newId } from './ids.js';
import { type AppendGuard, type EventDraft, EventLog, loadAllReadModels, loadReadModels } from './log/event-log.js';
import { type PermissionsConfig, PermissionsConfigSchema } from './policy/permission-schema.js';
import { grantFor } from './policy/permissions.js';
import { replay, threadRuns, threadView, threadViews } from './read-models/project.js';
import { toSessionSnapshot, toThreadReadModel } from './read-models/snapshots.js';
import type { ThreadView } from './read-models/thread-state.js';
import type { ModelHandle } from './runner/model-call.js';
import { queueChanged, retryOnThreadChange, threadUnchanged } from './runner/queue.js';
import { advance, failTurn } from './runner/thread-runner.js';
import type { Store } from './store/store.js';
import { workspaceTools } from './tools/builtin/index.js';
import { ToolRegistry } from './tools/registry.js';

export interface RuntimeOptions {
  store: Store;
  /** Stable id of this installation (events carry it); generated and kept in the store when omitted. */
  runtimeId?: string;
  /** Root every workspace tool is confined to. */
  workspaceRoot: string;
  /** Tools offered to agents (default: the built-in workspace tools). */
  tools?: ToolRegistry;
  /** The main agent (name "main" unless given) and the sub-agents it may delegate to. */
  mainAgent?: Partial<AgentConfig>;
  agents?: AgentConfig[];
  /** The model of an agent. */
  model: (agent: AgentConfig) => ModelHandle;
  permissions?: Partial<PermissionsConfig>;
  limits?: Partial<RuntimeLimits>;
  /** A turn submitted while the thread is busy waits in the queue (default) or is rejected. */
  queuePolicy?: 'queue' | 'reject';
  /** After a failed corrective retry: fail the turn (default) or show the model's text as the answer. */
  onProtocolFailure?: 'fail' | 'plain_text';
  /** Resume interrupted work found in the store when the runtime starts (default true). */
  resumeOnStart?: boolean;
}

export interface SubmitTurnInput {
  sessionId: string;
  /** Defaults to the session's main thread. */
  threadId?: string;
  /** Give one to make submission idempotent: a repeated id returns the first result. */
  turnId?: string;
  input: string;
  source?: string;
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
  actionId: string;
  decision: ActionDecision;
  reason?: string;
  payload?: Record<string, unknown>;
  resolvedBy?: string;
}

interface Driver {
  again: boolean;
  done: Promise<void>;
}

/**
 * The control plane: the Agent Runtime commands (the spec's names) over one store. Every command validates its
 * input, writes its facts through the event log in one transaction, and wakes the thread's driver — the loop
 * that advances a thread until it has to wait. Unknown ids and invalid commands throw `OarRuntimeError`.
 */
export class Runtime implements Engine {
  readonly log: EventLog;
  readonly tools: ToolRegistry;
  readonly agents: readonly AgentConfig[];
  readonly mainAgent: AgentConfig;
  readonly permissions: PermissionsConfig;
  readonly limits: RuntimeLimits;
  readonly onProtocolFailure: 'fail' | 'plain_text';
  readonly workspaceRoot: string;
  private readonly queuePolicy: 'queue' | 'reject';
  private readonly controllers = new Map<string, AbortController>();
  private readonly drivers = new Map<string, Driver>();
  /** Events held back by `append(…, {defer: true})`, per session. */
  private readonly deferred = new Map<string, EventDraft[]>();
  private readonly threadSessions = new Map<string, string>();
  private closed = false;

  private constructor(
    readonly store: Store,
    readonly runtimeId: string,
    private readonly options: RuntimeOptions,
  ) {
    this.log = new EventLog(store, runtimeId);
    this.tools = options.tools ?? new ToolRegistry(workspaceTools());
    this.mainAgent = {
      name: 'main',
      description: 'The main agent',
      capabilities: [],
      carrier: 'tool',
      ...options.mainAgent,
    };
    this.agents = options.agents ?? [];
    this.permissions = PermissionsConfigSchema.parse(options.permissions ?? {});
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.onProtocolFailure = options.onProtocolFailure ?? 'fail';
    this.queuePolicy = options.queuePolicy ?? 'queue';
    try {
      this.workspaceRoot = realpathSync(options.workspaceRoot);
    } catch {
      throw new OarRuntimeError('workspace_unavailable', `workspace ${options.workspaceRoot} does not exist`, {
        details: { workspace: options.workspaceRoot },
      });
    }
  }

  static async create(options: RuntimeOptions): Promise<Runtime> {
    const runtimeId = options.runtimeId ?? (await storedRuntimeId(options.store));
    const runtime = new Runtime(options.store, runtimeId, options);
    if (options.resumeOnStart !== false) await runtime.recover();
    return runtime;
  }

  // ----- Engine ----------------------------------------------------------------------------------------------

  model(agent: AgentConfig): ModelHandle {
    return this.options.model(agent);
  }

  signal(threadId: string): AbortSignal {
    let controller = this.controllers.get(threadId);
    if (!controller) {
      controller = new AbortController();
      this.controllers.set(threadId, controller);
    }
    return controller.signal;
  }

  async loadThread(sessionId: string, threadId: string): Promise<ThreadView> {
    const models = await this.log.readModels(sessionId, [{ kind: 'thread', key: threadId }]);
    const thread = models.threads.get(threadId);
    if (!thread) throw notFound('thread', threadId);
    const runKeys = thread.turns.flatMap((turn) => turn.runIds.map((key) => ({ kind: 'run' as const, key })));
    const runs = runKeys.length > 0 ? (await this.log.readModels(sessionId, runKeys)).runs : new Map();
    return { ...thread, runs: threadRuns(thread, runs) };
  }

  async append(
    sessionId: string,
    drafts: EventDraft[],
    options: { defer?: boolean; guard?: AppendGuard } = {},
  ): Promise<void> {
    const held = this.deferred.get(sessionId) ?? [];
    if (options.defer) {
      this.deferred.set(sessionId, [...held, ...drafts]);
      return;
    }
    this.deferred.delete(sessionId);
    // If this append fails, the held facts go with it rather than being re-queued behind later facts: a lost
    // model-call completion only means the call is made again after a restart (that is why it may be deferred).
    await this.log.append(sessionId, [...held, ...drafts], options.guard ? { guard: options.guard } : {});
  }

  kick(sessionId: string, threadId: string): void {
    if (this.closed) return;
    this.threadSessions.set(threadId, sessionId);
    const existing = this.drivers.get(threadId);
    if (existing) {
      existing.again = true;
      return;
    }
    const driver: Driver = { again: true, done: Promise.resolve() };
    driver.done = (async () => {
      try {
        while (driver.again && !this.closed) {
          driver.again = false;
          while (!this.closed && (await advance(this, sessionId, threadId))) {
            // each advance is one durable step; loop until the thread has to wait
          }
        }
      } catch (error) {
        await this.recordDriverFailure(sessionId, threadId, toOarError(error));
      } finally {
        // Nothing per thread outlives its driver: a long-running process must not grow with every thread it drove.
        this.drivers.delete(threadId);
        if (!this.controllers.get(threadId)?.signal.aborted) this.controllers.delete(threadId);
        this.threadSessions.delete(threadId);
      }
    })();
    this.drivers.set(threadId, driver);
  }

  /** A bug or an unavailable store must not leave a turn running forever: fail it with the cause. */
  private async recordDriverFailure(sessionId: string, threadId: string, error: OarError): Promise<void> {
    try {
      const thread = await this.loadThread(sessionId, threadId);
      await this.append(sessionId, [
        {
          type: 'runtime.error',
          threadId,
          ...(thread.activeTurnId ? { turnId: thread.activeTurnId } : {}),
          payload: { ...error, fatal: false },
        },
      ]);
      const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
      if (turn) await failTurn(this, thread, turn, error);
    } catch {
      // The store itself failed; the next start's recovery sees the unfinished turn.
    }
  }

  // ----- sessions and turns ------------------------------------------------------------------------------------

  async createSession(
    input: { title?: string; sessionId?: string; agent?: string } = {},
  ): Promise<{ sessionId: string; threadId: string }> {
    const sessionId = input.sessionId ?? newId('ses');
    if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(sessionId)) {
      throw new OarRuntimeError('invalid_input', 'session ids are 1-128 letters, digits, "_", ".", ":" or "-"');
    }
    const existing = await this.store.db
      .selectFrom('oar_sessions')
      .select('id')
      .where('id', '=', sessionId)
      .executeTakeFirst();
    if (existing) throw new OarRuntimeError('session_exists', `session "${sessionId}" already exists`);
    const threadId = newId('thr');
    const agent = input.agent ?? this.mainAgent.name;
    if (agent !== this.mainAgent.name && !this.agents.some((a) => a.name === agent)) {
      throw new OarRuntimeError('unknown_agent', `agent "${agent}" is not configured`, { details: { agent } });
    }
    await this.log.createSession(sessionId, input.title, [
      { type: 'session.created', payload: { ...(input.title ? { title: input.title } : {}) } },
      {
        type: 'thread.started',
        threadId,
        payload: { agent, depth: 0, ...(input.title ? { title: input.title } : {}) },
      },
    ]);
    return { sessionId, threadId };
  }

  async listSessions(): Promise<
    { sessionId: string; title: string | null; createdAt: string; updatedAt: string; events: number }[]
  > {
    const rows = await this.store.db
      .selectFrom('oar_sessions')
      .select(['id', 'title', 'created_at', 'updated_at', 'last_sequence'])
      .orderBy('created_at', 'desc')
      .execute();
    return rows.map((r) => ({
      sessionId: r.id,
      title: r.title,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      events: Number(r.last_sequence),
    }));
  }

  private async mainThreadId(sessionId: string): Promise<string> {
    const models = await loadReadModels(this.store.db, sessionId, []);
    const threadId = models.session?.threadIds[0];
    if (!models.session || !threadId) throw notFound('session', sessionId);
    return threadId;
  }

  async submitTurn(input: SubmitTurnInput): Promise<SubmitTurnResult> {
    if (typeof input.input !== 'string' || input.input.trim() === '') {
      throw new OarRuntimeError('invalid_input', 'a turn needs non-empty input text');
    }
    const threadId = input.threadId ?? (await this.mainThreadId(input.sessionId));
    return retryOnThreadChange<SubmitTurnResult>(async () => {
      const thread = await this.loadThread(input.sessionId, threadId);
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
      // Busy: a turn runs, waits in the queue, or was accepted and is about to start.
      const busy =
        thread.activeTurnId !== undefined ||
        thread.queue.length > 0 ||
        thread.turns.some((t) => t.status === 'accepted');
      if (busy && this.queuePolicy === 'reject') {
        throw new OarRuntimeError('thread_busy', `thread "${threadId}" is running turn ${thread.activeTurnId}`, {
          retryable: true,
          details: { activeTurnId: thread.activeTurnId },
        });
      }
      const status = busy ? 'queued' : 'accepted';
      const source = input.source ?? 'user';
      const drafts: EventDraft[] = [
        { type: 'turn.submitted', threadId, turnId, status, payload: { status, input: input.input, source } },
      ];
      if (busy) {
        const queue = [...thread.queue, { turnId, input: input.input, enqueuedAt: new Date().toISOString(), source }];
        drafts.push(queueChanged(thread, queue, 'enqueued', turnId));
      }
      // Under the session lock the thread must still be as read: concurrent submits cannot drop each other's turn.
      await this.log.append(input.sessionId, drafts, { guard: threadUnchanged(thread) });
      this.kick(input.sessionId, threadId);
      return { sessionId: input.sessionId, threadId, turnId, status, duplicate: false };
    });
  }

  async removeQueuedTurn(input: { sessionId: string; threadId: string; turnId: string }): Promise<void> {
    await retryOnThreadChange(async () => {
      const thread = await this.loadThread(input.sessionId, input.threadId);
      if (!thread.queue.some((q) => q.turnId === input.turnId)) throw notFound('queued_turn', input.turnId);
      const queue = thread.queue.filter((q) => q.turnId !== input.turnId);
      await this.log.append(input.sessionId, [queueChanged(thread, queue, 'removed', input.turnId)], {
        guard: threadUnchanged(thread),
      });
    });
  }

  async promoteQueuedTurn(input: { sessionId: string; threadId: string; turnId: string }): Promise<void> {
    await retryOnThreadChange(async () => {
      const thread = await this.loadThread(input.sessionId, input.threadId);
      const entry = thread.queue.find((q) => q.turnId === input.turnId);
      if (!entry) throw notFound('queued_turn', input.turnId);
      const queue = [entry, ...thread.queue.filter((q) => q.turnId !== input.turnId)];
      await this.log.append(input.sessionId, [queueChanged(thread, queue, 'promoted', input.turnId)], {
        guard: threadUnchanged(thread),
      });
    });
  }

  /**
   * Interrupt the running turn: abort the model call and the running actions (`cancel` tools through their
   * signal; `block` tools finish first), record the cancellation, and leave the thread usable. Child threads
   * delegated from it are interrupted too.
   */
  async interruptTurn(input: {
    sessionId: string;
    threadId?: string;
    reason?: string;
  }): Promise<{ interrupted: boolean; turnId?: string }> {
    const threadId = input.threadId ?? (await this.mainThreadId(input.sessionId));
    const thread = await this.loadThread(input.sessionId, threadId);
    const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
    if (!turn) return { interrupted: false };
    // Abort this thread first (creating the controller if no driver runs): a child ending below wakes this
    // thread's driver, which must see the interrupt instead of continuing the turn.
    this.signal(threadId);
    this.controllers.get(threadId)?.abort(new Error(input.reason ?? 'interrupted'));
    for (const sub of thread.subagents) {
      if (sub.status === 'running')
        await this.interruptTurn({
          sessionId: input.sessionId,
          threadId: sub.childThreadId,
          reason: 'parent interrupted',
        });
    }
    await this.drivers.get(threadId)?.done;
    const after = await this.loadThread(input.sessionId, threadId);
    const active = after.turns.find((t) => t.turnId === turn.turnId);
    if (active && after.activeTurnId === turn.turnId) {
      await failTurn(
        this,
        after,
        active,
        oarError('interrupted', input.reason ?? 'the turn was interrupted'),
        'cancelled',
      );
    }
    // Only now may a new driver get a fresh signal: before the cancellation is recorded, any kick (a queued
    // submit, a resume) would otherwise continue the interrupted turn.
    this.controllers.delete(threadId);
    const latest = await this.loadThread(input.sessionId, threadId);
    if (latest.queue.length > 0 || latest.turns.some((t) => t.status === 'accepted'))
      this.kick(input.sessionId, threadId);
    return { interrupted: true, turnId: turn.turnId };
  }

  /** Continue a thread's work (after a restart, or to retry a driver that stopped on an error). */
  async resumeThread(input: { sessionId: string; threadId?: string }): Promise<ThreadReadModel> {
    const threadId = input.threadId ?? (await this.mainThreadId(input.sessionId));
    await this.loadThread(input.sessionId, threadId);
    this.kick(input.sessionId, threadId);
    return this.getThreadRead({ sessionId: input.sessionId, threadId });
  }

  /** Resolve a pending human or policy decision: the only way a paused action continues. */
  async respondAction(input: RespondActionInput): Promise<{ threadId: string; decision: ActionDecision }> {
    if (!ACTION_DECISIONS.includes(input.decision)) {
      throw new OarRuntimeError('invalid_decision', `decision must be one of ${ACTION_DECISIONS.join(', ')}`, {
        details: { decision: input.decision },
      });
    }
    const models = await loadAllReadModels(this.store.db, input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const thread = threadViews(models).find((t) => t.pending.some((p) => p.actionId === input.actionId));
    const pending = thread?.pending.find((p) => p.actionId === input.actionId);
    if (!thread || !pending) throw notFound('action', input.actionId);
    const run = thread.runs[pending.runId];
    const action = run?.declaration.actions.find((a) => a.id === pending.graphActionId);
    if (!run || !action) throw notFound('action', input.actionId);
    if (pending.actionType === 'user_input' && input.decision === 'approve_for_session') {
      throw new OarRuntimeError('invalid_decision', 'approve_for_session applies to tool approvals, not to questions');
    }
    if (pending.actionType === 'tool_approval' && pending.decisions && !pending.decisions.includes(input.decision)) {
      // An ask rule asks every time: it offers approve|deny, and a session grant would never be consulted.
      throw new OarRuntimeError(
        'invalid_decision',
        `this request offers ${pending.decisions.join(', ')}; "${input.decision}" is not one of them`,
        { details: { decision: input.decision, offered: pending.decisions } },
      );
    }
    const ids = { threadId: thread.threadId, turnId: pending.turnId, taskId: run.taskId, runId: run.runId };
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
      const tool = this.tools.get(action.executor.target);
      const parsed = tool ? this.tools.parseInput(tool.name, action.input) : undefined;
      const request =
        tool && parsed?.ok
          ? await toolPermissionRequest(tool, parsed.input, this.workspaceRoot)
          : { executor: action.executor, paths: [] };
      drafts.push({
        type: 'permission.resolved',
        ...ids,
        stepId: pending.toolCallId ?? `${run.runId}.${action.id}`,
        toolCallId: pending.toolCallId ?? `${run.runId}.${action.id}`,
        actionId: input.actionId,
        payload: {
          decision: input.decision === 'deny' ? 'deny' : 'allow',
          toolName: pending.toolName,
          source: 'human',
          grantScope: input.decision === 'approve_for_session' ? 'session' : 'once',
          ...(input.decision === 'approve_for_session' ? { grant: grantFor(request) } : {}),
          ...(input.reason ? { reason: input.reason } : {}),
        },
      });
    }
    if (input.decision === 'deny') {
      const what = pending.actionType === 'user_input' ? 'the user declined' : 'permission denied by the user';
      const error = oarError(
        pending.actionType === 'user_input' ? 'declined' : 'permission_denied',
        `${what}${input.reason ? `: ${input.reason}` : ''}`,
      );
      drafts.push({
        type: 'run.status',
        ...ids,
        status: 'failed',
        payload: {
          phase: 'action',
          title: action.title ?? action.id,
          graphActionId: action.id,
          status: 'denied',
          observation: {
            id: action.id,
            status: 'denied',
            artifacts: [],
            error,
            ...(action.title ? { title: action.title } : {}),
          },
        },
      });
    }
    drafts.push({ type: 'task.resumed', ...ids, payload: { reason: `decision ${input.decision}` } });
    // Resolve at most once: a concurrent respond_action for the same decision may have committed since we read it.
    await this.log.append(input.sessionId, drafts, {
      guard: async (tx) => {
        const current = await loadReadModels(tx, input.sessionId, [{ kind: 'thread', key: thread.threadId }]);
        if (!current.threads.get(thread.threadId)?.pending.some((p) => p.actionId === input.actionId)) {
          throw notFound('action', input.actionId);
        }
      },
    });
    this.kick(input.sessionId, thread.threadId);
    return { threadId: thread.threadId, decision: input.decision };
  }

  // ----- tasks and sub-agents ----------------------------------------------------------------------------------

  async listSubagents(input: { sessionId: string; threadId?: string }) {
    const models = await loadAllReadModels(this.store.db, input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    return [...models.threads.values()]
      .filter((t) => !input.threadId || t.threadId === input.threadId)
      .flatMap((t) => t.subagents.map((s) => ({ ...s, parentThreadId: t.threadId })));
  }

  async closeSubagent(input: { sessionId: string; subagentId: string; reason?: string }): Promise<void> {
    const subagents = await this.listSubagents({ sessionId: input.sessionId });
    const sub = subagents.find((s) => s.subagentId === input.subagentId);
    if (!sub) throw notFound('subagent', input.subagentId);
    if (sub.status === 'closed') return;
    await this.interruptTurn({
      sessionId: input.sessionId,
      threadId: sub.childThreadId,
      reason: input.reason ?? 'sub-agent closed',
    });
    const parent = await this.loadThread(input.sessionId, sub.parentThreadId);
    await this.append(input.sessionId, [
      {
        type: 'subagent.closed',
        threadId: parent.threadId,
        turnId: parent.activeTurnId ?? parent.turns.at(-1)?.turnId ?? 'none',
        subagentId: sub.subagentId,
        payload: { reason: input.reason ?? 'closed' },
      },
      { type: 'thread.updated', threadId: sub.childThreadId, payload: { closed: true, status: 'completed' } },
    ]);
  }

  /** Cancel a task: its run is the active graph of a turn (interrupt it) or a delegation (interrupt the child). */
  async cancelTask(input: { sessionId: string; taskId: string; reason?: string }): Promise<void> {
    const models = await loadAllReadModels(this.store.db, input.sessionId);
    const task = models.tasks.get(input.taskId);
    if (!task) throw notFound('task', input.taskId);
    if (['completed', 'failed', 'cancelled', 'lost', 'archived'].includes(task.status)) {
      throw new OarRuntimeError('task_not_active', `task "${input.taskId}" already ended (${task.status})`);
    }
    if (!task.threadId) throw notFound('task', input.taskId);
    await this.interruptTurn({
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
    const models = await loadAllReadModels(this.store.db, input.sessionId);
    const task = models.tasks.get(input.taskId);
    if (!task?.threadId) throw notFound('task', input.taskId);
    const thread = threadView(models, task.threadId);
    const lastRun = thread
      ? Object.values(thread.runs)
          .filter((r) => r.taskId === input.taskId)
          .at(-1)
      : undefined;
    if (!thread || !lastRun)
      throw new OarRuntimeError('task_not_retryable', `task "${input.taskId}" has no action graph to retry`);
    if (!['failed', 'cancelled', 'lost'].includes(task.status)) {
      throw new OarRuntimeError(
        'task_not_retryable',
        `only failed, cancelled or lost tasks are retried (this one is ${task.status})`,
      );
    }
    // The same busy rule as submitTurn: a running, queued or just-accepted turn all mean "not now".
    if (thread.activeTurnId || thread.queue.length > 0 || thread.turns.some((t) => t.status === 'accepted')) {
      throw new OarRuntimeError('thread_busy', 'the thread has a turn running or waiting', { retryable: true });
    }
    const retry = lastRun.order.filter((id) => lastRun.actions[id]?.status !== 'completed');
    const declaration = {
      ...lastRun.declaration,
      actions: lastRun.declaration.actions
        .filter((a) => retry.includes(a.id))
        .map((a) => ({ ...a, dependsOn: a.dependsOn })),
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
        { type: 'turn.started', threadId: thread.threadId, turnId, status: 'running', payload: {} },
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
    this.kick(input.sessionId, thread.threadId);
    return { runId, turnId };
  }

  // ----- scoped state -----------------------------------------------------------------------------------------

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
    if (input.threadId) {
      await this.loadThread(input.sessionId, input.threadId);
      await this.append(input.sessionId, [
        { type: 'thread.updated', threadId: input.threadId, payload: { changed: [`state.${input.key}`], state } },
      ]);
    } else {
      await this.mainThreadId(input.sessionId);
      await this.append(input.sessionId, [
        { type: 'session.updated', payload: { changed: [`state.${input.key}`], state } },
      ]);
    }
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

  // ----- reads -------------------------------------------------------------------------------------------------

  async getThreadRead(input: { sessionId: string; threadId: string }): Promise<ThreadReadModel> {
    const models = await loadAllReadModels(this.store.db, input.sessionId);
    const thread = threadView(models, input.threadId);
    if (!thread) throw notFound('thread', input.threadId);
    return toThreadReadModel(thread, [...models.tasks.values()]);
  }

  /** The durable session snapshot plus a window of its history (events after `cursor`, at most `limit`). */
  async getSession(input: { sessionId: string; cursor?: number; limit?: number }): Promise<{
    snapshot: SessionSnapshot;
    events: RuntimeEvent[];
    nextCursor: number;
  }> {
    const models = await loadAllReadModels(this.store.db, input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const events = await this.log.read(input.sessionId, { after: input.cursor ?? 0, limit: input.limit ?? 200 });
    return {
      snapshot: toSessionSnapshot(models.session, threadViews(models), [...models.tasks.values()]),
      events,
      nextCursor: events.at(-1)?.sequence ?? input.cursor ?? 0,
    };
  }

  async getToolInventory(input: { sessionId: string; threadId?: string }) {
    const models = await loadAllReadModels(this.store.db, input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const resolved = input.threadId ? models.toolInventory.get(input.threadId) : undefined;
    return {
      mode: this.permissions.mode,
      tools: this.tools.inventory(),
      agents: this.agents.map((a) => ({ name: a.name, description: a.description, capabilities: a.capabilities })),
      ...(resolved ? { lastResolved: resolved } : {}),
    };
  }

  /** Rebuild every read model from the log and compare with the stored ones (`oar replay`). */
  async replaySession(sessionId: string): Promise<{ equal: boolean; differences: string[]; events: number }> {
    const events = await this.log.read(sessionId);
    if (events.length === 0) throw notFound('session', sessionId);
    const rebuilt = replay(events);
    const stored = await loadAllReadModels(this.store.db, sessionId);
    const differences: string[] = [];
    const compare = (name: string, a: unknown, b: unknown) => {
      if (JSON.stringify(a) !== JSON.stringify(b)) differences.push(name);
    };
    compare('session', rebuilt.session, stored.session);
    for (const [id, t] of rebuilt.threads) compare(`thread ${id}`, t, stored.threads.get(id));
    for (const [id, t] of rebuilt.runs) compare(`run ${id}`, t, stored.runs.get(id));
    for (const [id, t] of rebuilt.tasks) compare(`task ${id}`, t, stored.tasks.get(id));
    for (const [id, t] of rebuilt.toolInventory) compare(`tool_inventory ${id}`, t, stored.toolInventory.get(id));
    if (stored.threads.size !== rebuilt.threads.size) differences.push('thread count');
    if (stored.runs.size !== rebuilt.runs.size) differences.push('run count');
    if (stored.tasks.size !== rebuilt.tasks.size) differences.push('task count');
    return { equal: differences.length === 0, differences, events: events.length };
  }

  exportReplay(sessionId: string) {
    return exportReplay(this, sessionId);
  }

  exportEvidence(sessionId: string) {
    return exportEvidence(this, sessionId);
  }

  // ----- lifecycle ---------------------------------------------------------------------------------------------

  /**
   * Recovery after a crash: completed actions are never re-run; an action that started without a durable result
   * is re-run only when its tool is idempotent, otherwise it becomes `lost` and the model is told; pending
   * decisions stay pending. Then every thread with unfinished work is driven again.
   */
  async recover(): Promise<{ threads: number; rerun: number; lost: number }> {
    const rows = await this.store.db
      .selectFrom('oar_read_models')
      .select(['session_id', 'key', 'body'])
      .where('kind', '=', 'thread')
      .where('status', 'in', ['running', 'waiting_permission', 'waiting_input'])
      .execute();
    let rerun = 0;
    let lost = 0;
    for (const row of rows) {
      if (this.drivers.has(row.key)) continue;
      const thread = await this.loadThread(row.session_id, row.key);
      const drafts: EventDraft[] = [];
      for (const run of Object.values(thread.runs)) {
        if (run.status !== 'running' && run.status !== 'waiting') continue;
        for (const id of run.order) {
          const state = run.actions[id];
          const action = run.declaration.actions.find((a) => a.id === id);
          if (!state || !action || state.status !== 'running' || action.executor.type !== 'tool') continue;
          const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
          if (state.idempotent) {
            rerun++;
            drafts.push({
              type: 'run.status',
              ...ids,
              payload: {
                phase: 'action',
                title: action.title ?? id,
                graphActionId: id,
                status: 'pending',
                reason: 'restart: idempotent tool is re-run',
              },
            });
          } else {
            lost++;
            const error = oarError(
              'lost',
              `the runtime stopped while "${action.executor.target}" was running; it may or may not have taken effect and was not re-run because it is not idempotent`,
            );
            drafts.push({
              type: 'tool.failed',
              ...ids,
              stepId: state.toolCallId,
              toolCallId: state.toolCallId,
              status: 'lost',
              payload: {
                toolName: action.executor.target,
                error,
                graphActionId: id,
                actionStatus: 'lost',
                observation: {
                  id,
                  status: 'lost',
                  artifacts: [],
                  error,
                  ...(action.title ? { title: action.title } : {}),
                },
              },
            });
          }
        }
      }
      if (drafts.length > 0) await this.append(row.session_id, drafts);
      this.kick(row.session_id, row.key);
    }
    const idle = await this.store.db
      .selectFrom('oar_read_models')
      .select(['session_id', 'key', 'body'])
      .where('kind', '=', 'thread')
      .where('status', '=', 'idle')
      .execute();
    for (const row of idle) {
      const thread = await this.loadThread(row.session_id, row.key);
      if (thread.queue.length > 0 || thread.turns.some((t) => t.status === 'accepted'))
        this.kick(row.session_id, row.key);
    }
    return { threads: rows.length, rerun, lost };
  }

  /** Resolves when no thread of the session is being driven (everything finished or waits for a decision). */
  async settled(sessionId?: string): Promise<void> {
    for (;;) {
      const running = [...this.drivers.entries()].filter(
        ([threadId]) => !sessionId || this.threadSessions.get(threadId) === sessionId,
      );
      if (running.length === 0) return;
      await Promise.all(running.map(([, d]) => d.done));
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const closing = new OarRuntimeError('runtime_closing', 'the runtime is closing');
    for (const controller of this.controllers.values()) controller.abort(closing);
    await Promise.allSettled([...this.drivers.values()].map((d) => d.done));
  }
}

/** The installation's runtime id: created once per store; concurrent first starts agree on whichever was written. */
async function storedRuntimeId(store: Store): Promise<string> {
  await store.db
    .insertInto('oar_state')
    .values({
      scope: 'runtime',
      key: 'runtime_id',
      value: JSON.stringify(newId('rt')),
      updated_at: new Date().toISOString(),
    })
    .onConflict((oc) => oc.columns(['scope', 'key']).doNothing())
    .execute();
  const stored = await store.db
    .selectFrom('oar_state')
    .select('value')
    .where('scope', '=', 'runtime')
    .where('key', '=', 'runtime_id')
    .executeTakeFirstOrThrow();
  return JSON.parse(stored.value) as string;
}
