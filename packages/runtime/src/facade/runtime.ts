import type { RuntimeEvent } from '@oar/protocol';
import { type BindingUpdate, bindingHash, type SessionBinding, updatedBinding } from '../config/binding.js';
import { Commands } from '../control-plane/commands.js';
import type { CompactionResult } from '../control-plane/compaction.js';
import type { RespondActionInput } from '../control-plane/decisions.js';
import type { ForkSessionInput } from '../control-plane/fork.js';
import type { ChangeLimitsInput, ChangeLimitsResult } from '../control-plane/limits.js';
import type { EvaluatePermissionInput, ResolvePermissionInput } from '../control-plane/permissions.js';
import type { ProcessRequestInput, WriteProcessStdinInput } from '../control-plane/processes.js';
import { Queries } from '../control-plane/queries.js';
import type { ExportReviewInput } from '../control-plane/review.js';
import type { RollbackInput } from '../control-plane/rollback.js';
import type {
  ResumeSubagentInput,
  SpawnSubagentInput,
  SubagentInput,
  WaitSubagentsInput,
} from '../control-plane/subagents.js';
import type { CreateTaskInput, LinkTasksInput, UpdateTaskInput } from '../control-plane/task-graph.js';
import type {
  CompleteTaskInput,
  FailTaskInput,
  PauseTaskInput,
  StartTaskInput,
  TaskProgressInput,
} from '../control-plane/task-lifecycle.js';
import type { InterruptResult, SubmitTurnInput, SubmitTurnResult } from '../control-plane/turns.js';
import { notFound } from '../kernel/errors.js';
import { setRecent } from '../kernel/lru.js';
import { EventLog } from '../log/event-log.js';
import { LiveChannel } from '../log/live.js';
import { DEFAULT_NOTIFIER_SESSIONS, Notifier } from '../log/notifier.js';
import { Tracing } from '../log/tracing.js';
import { resolveChain } from '../loop/model/model-chain.js';
import { ProviderLimiter } from '../models/provider-limits.js';
import { SharedProviderLimiter } from '../models/shared-limits.js';
import { bindingOf, type SessionState } from '../read-models/session.js';
import { bindingRedactor } from '../redaction/sources.js';
import type { BoundConfig } from '../scheduler/engine.js';
import { storedRuntimeId } from '../store/runtime-id.js';
import type { Store } from '../store/store.js';
import { workspaceTools } from '../tools/builtin/index.js';
import { backgroundProcesses } from '../tools/exec/processes.js';
import { McpPool } from '../tools/mcp/pool.js';
import { ToolRegistry } from '../tools/registry.js';
import { bindConfig, type Host } from '../worker/bound-config.js';
import { recordStopped } from '../worker/process-requests.js';
import { Worker } from '../worker/worker.js';
import { type ControlInput, checkedCall, checkInput } from './inputs.js';
import { RuntimeJobs } from './jobs.js';
import { permissionJudge } from './judge.js';
import type { RuntimeOptions } from './options.js';
import { RuntimeSchedules } from './schedules.js';
import { type AskedWatch, settled } from './settle.js';
import { subscription } from './subscribe.js';
import { templateBinding } from './template.js';
import { workspaceFiles } from './workspace-files.js';

export type { AskedWatch, InterruptResult, RespondActionInput, SubmitTurnInput, SubmitTurnResult };

/** How many runnable configurations (one per binding hash) a runtime keeps by default. */
const DEFAULT_BOUND_CONFIGS = 64;

/**
 * The runtime of one process: the control plane (commands and queries) and, unless turned off, a worker — joined
 * only by the event log and the notifier, so that any number of runtimes, in this process or others, can share
 * one store. Unknown ids and invalid commands throw `OarRuntimeError`.
 */
export class Runtime {
  readonly log: EventLog;
  readonly notifier: Notifier;
  /** Live-only events of this process's model calls and commands (log/live.ts): `subscribe(…, { deltas: true })`. */
  readonly live: LiveChannel;
  readonly commands: Commands;
  readonly queries: Queries;
  /** This process's worker, if it runs one. */
  readonly worker: Worker | undefined;
  /** Jobs: batches of items run as turns of their own threads (docs/jobs.md). */
  readonly jobs: RuntimeJobs;
  /** Schedules: agents on a timetable, fired by the worker's ticker (docs/schedules.md). */
  readonly schedules: RuntimeSchedules;
  private readonly template: SessionBinding;
  /** Runnable configurations by binding hash: a bounded LRU (most recently used last). */
  private readonly configs = new Map<string, Promise<BoundConfig>>();
  private readonly maxConfigs: number;
  private readonly host: Host;
  private readonly templateHash: string;
  private closed = false;

  private constructor(
    readonly store: Store,
    readonly runtimeId: string,
    options: RuntimeOptions,
  ) {
    this.log = new EventLog(store, runtimeId);
    this.notifier = new Notifier(this.log, { maxSessions: options.caches?.sessions ?? DEFAULT_NOTIFIER_SESSIONS });
    this.live = new LiveChannel(this.log, this.notifier, runtimeId);
    this.maxConfigs = Math.max(1, options.caches?.bindings ?? DEFAULT_BOUND_CONFIGS);
    const tools = options.tools ?? new ToolRegistry(workspaceTools());
    this.template = templateBinding(options, tools);
    this.templateHash = bindingHash(this.template);
    this.host = {
      tools,
      model: options.model,
      // The MCP servers this process reaches (docs/mcp.md), shared by the bindings that name them.
      mcp: new McpPool(),
      // `exec` hides the store from commands: its SQLite file (a PostgreSQL store is out of a sandbox's reach).
      ...(store.file ? { storeFile: store.file } : {}),
    };
    const configFor = (session: SessionState | undefined, hash?: string) => this.configFor(session, hash);
    this.commands = new Commands({
      log: this.log,
      notifier: this.notifier,
      bindings: {
        template: () => this.template,
        apply: updatedBinding,
        verify: (binding, hash) => this.verify(binding, hash),
        redactor: bindingRedactor,
      },
      judge: permissionJudge((session) => this.configFor(session)),
      files: workspaceFiles,
    });
    this.queries = new Queries({ log: this.log, configFor });
    this.jobs = new RuntimeJobs(this.commands, (sessionId) => this.worker?.look(sessionId));
    const workerOptions = options.worker === false ? undefined : options.worker === true ? {} : (options.worker ?? {});
    this.worker = workerOptions
      ? new Worker(
          {
            log: this.log,
            notifier: this.notifier,
            live: this.live,
            runtimeId,
            configFor,
            tracing: new Tracing(options.tracing),
            // One process on SQLite: limits in memory. On PostgreSQL, where several workers share the store, the
            // store keeps them, so every worker honours the same limits and pauses (docs/deployment.md).
            limiter:
              options.providerLimits instanceof ProviderLimiter
                ? options.providerLimits
                : store.sql.sharedByProcesses
                  ? new SharedProviderLimiter(store, options.providerLimits ?? {}, {
                      owner: workerOptions.owner ?? `runtime:${runtimeId}`,
                      ...(workerOptions.leaseTtlMs ? { slotTtlMs: workerOptions.leaseTtlMs } : {}),
                    })
                  : new ProviderLimiter(options.providerLimits ?? {}),
          },
          workerOptions,
        )
      : undefined;
    this.schedules = new RuntimeSchedules(this, options.schedules, workerOptions?.sessions);
  }

  static async create(options: RuntimeOptions): Promise<Runtime> {
    const runtimeId = options.runtimeId ?? (await storedRuntimeId(options.store));
    const runtime = new Runtime(options.store, runtimeId, options);
    if (options.resumeOnStart !== false) {
      // A runtime that cannot start leaves nothing running: its worker would otherwise go on claiming threads.
      await runtime.recover().catch(async (error: unknown) => {
        await runtime.close().catch(() => undefined);
        throw error;
      });
    }
    return runtime;
  }

  /**
   * The runnable configuration of a session's binding — `hash` picks a turn's binding, default the current one; a
   * session without a binding (created before bindings) runs with the binding new sessions get. Built once per
   * binding hash and kept while it is among the `caches.bindings` most recently used: a configuration is a pure
   * function of its binding (recorded in the log), so a forgotten one is simply built again — a thread already
   * running keeps the one it holds.
   */
  private configFor(session: SessionState | undefined, hash?: string): Promise<BoundConfig> {
    const binding = session ? bindingOf(session, hash) : undefined;
    const key = binding ? (hash ?? session?.bindingHash ?? '') : this.templateHash;
    let config = this.configs.get(key);
    if (!config) {
      const built = bindConfig(binding ?? this.template, key, this.host);
      config = built;
      // A failed build (a module that cannot load) is tried again next time, not remembered.
      built.catch(() => {
        if (this.configs.get(key) === built) this.configs.delete(key);
      });
    }
    setRecent(this.configs, key, config, this.maxConfigs);
    return config;
  }

  /** The binding new sessions get from this runtime's options. */
  get defaultBinding(): SessionBinding {
    return this.template;
  }

  // ----- commands ----------------------------------------------------------------------------------------------

  createSession(input: Parameters<Commands['createSession']>[0] = {}) {
    return this.checked('createSession', 'createSession', input, (i) => this.commands.createSession(i));
  }

  updateBinding(input: { sessionId: string; update: BindingUpdate }) {
    return this.checked('updateBinding', 'updateBinding', input, (i) => this.commands.updateBinding(i));
  }

  /**
   * A new session whose history is this one's up to event `at` (docs/engine.md "Forking a session"); what was in
   * progress there goes on in the fork, under its own id and binding.
   */
  forkSession(input: ForkSessionInput) {
    return this.checked('forkSession', 'forkSession', input, async (i) => {
      const fork = await this.commands.forkSession(i);
      // The source is untouched: what this worker looks at is the fork (a turn in progress at the fork point).
      return this.afterCommand(fork.sessionId, Promise.resolve(fork));
    });
  }

  /** Return a thread to the boundary before one of its turns, its files too (docs/engine.md "Rolling back"). */
  rollbackThread(input: RollbackInput) {
    return this.checked('rollbackThread', 'rollbackThread', input, (i) =>
      this.afterCommand(i.sessionId, this.commands.rollbackThread(i)),
    );
  }

  submitTurn(input: SubmitTurnInput): Promise<SubmitTurnResult> {
    return this.checked('submitTurn', 'submitTurn', input, (i) =>
      this.afterCommand(i.sessionId, this.commands.submitTurn(i)),
    );
  }

  removeQueuedTurn(input: { sessionId: string; threadId: string; turnId: string }) {
    return this.checked('removeQueuedTurn', 'queuedTurn', input, (i) =>
      this.afterCommand(i.sessionId, this.commands.removeQueuedTurn(i)),
    );
  }

  promoteQueuedTurn(input: { sessionId: string; threadId: string; turnId: string }) {
    return this.checked('promoteQueuedTurn', 'queuedTurn', input, (i) =>
      this.afterCommand(i.sessionId, this.commands.promoteQueuedTurn(i)),
    );
  }

  interruptTurn(input: { sessionId: string; threadId?: string; reason?: string; waitMs?: number }) {
    return this.checked('interruptTurn', 'interruptTurn', input, (i) =>
      this.afterCommand(i.sessionId, this.commands.interruptTurn(i)),
    );
  }

  /**
   * Compact a thread's context now (docs/models.md "Context budget and compaction"): a durable request the thread's
   * worker acts on under its lease; resolves when the compaction completed or failed, or after `waitMs` (default
   * 120 s) with status `requested`. `nothing_to_compact` when the thread has no finished turn to summarise.
   */
  compact(input: {
    sessionId: string;
    threadId?: string;
    reason?: string;
    waitMs?: number;
  }): Promise<CompactionResult> {
    return this.checked('compact', 'compact', input, async (i) => {
      const request = await this.afterCommand(i.sessionId, this.commands.requestCompaction(i));
      return this.commands.awaitCompaction(request, i.waitMs);
    });
  }

  respondAction(input: RespondActionInput) {
    return this.checked('respondAction', 'respondAction', input, (i) =>
      this.afterCommand(i.sessionId, this.commands.respondAction(i)),
    );
  }

  closeSubagent(input: { sessionId: string; subagentId: string; reason?: string }) {
    return this.checked('closeSubagent', 'closeSubagent', input, (i) =>
      this.afterCommand(i.sessionId, this.commands.closeSubagent(i)),
    );
  }

  cancelTask(input: { sessionId: string; taskId: string; reason?: string; propagate?: 'none' | 'children' }) {
    return this.command('cancelTask', input, (i) => this.commands.cancelTask(i));
  }

  retryTask(input: { sessionId: string; taskId: string }) {
    return this.command('retryTask', input, (i) => this.commands.retryTask(i));
  }

  /** Start a sub-agent under a thread (docs/engine.md "Sub-agents"): a child thread of `agent` with a first turn. */
  spawnSubagent(input: SpawnSubagentInput) {
    return this.command('spawnSubagent', input, (i) => this.commands.spawnSubagent(i));
  }

  /** Give a sub-agent another turn (`subagent.input` on its parent). */
  sendSubagentInput(input: SubagentInput) {
    return this.command('sendSubagentInput', input, (i) => this.commands.sendSubagentInput(i));
  }

  /** Wait until the sub-agents stopped working, or the timeout (default 30 s) passed. */
  waitSubagents(input: WaitSubagentsInput, options: { signal?: AbortSignal } = {}) {
    return this.command('waitSubagents', input, (i) => this.commands.waitSubagents(i, options.signal));
  }

  /** Reopen a closed sub-agent, optionally with a turn to work on. */
  resumeSubagent(input: ResumeSubagentInput) {
    return this.command('resumeSubagent', input, (i) => this.commands.resumeSubagent(i));
  }

  /** Create a task (docs/tasks.md): its definition, parent and dependencies; it starts with `startTask`. */
  createTask(input: CreateTaskInput) {
    return this.command('createTask', input, (i) => this.commands.createTask(i));
  }

  updateTask(input: UpdateTaskInput) {
    return this.command('updateTask', input, (i) => this.commands.updateTask(i));
  }

  /** Start a task: an agent's runs as a turn of its thread (held until its dependencies completed). */
  startTask(input: StartTaskInput) {
    return this.command('startTask', input, (i) => this.commands.startTask(i));
  }

  appendTaskProgress(input: TaskProgressInput) {
    return this.command('appendTaskProgress', input, (i) => this.commands.appendTaskProgress(i));
  }

  pauseTask(input: PauseTaskInput) {
    return this.command('pauseTask', input, (i) => this.commands.pauseTask(i));
  }

  resumeTask(input: PauseTaskInput) {
    return this.command('pauseTask', input, (i) => this.commands.resumeTask(i), 'resumeTask');
  }

  completeTask(input: CompleteTaskInput) {
    return this.command('completeTask', input, (i) => this.commands.completeTask(i));
  }

  failTask(input: FailTaskInput) {
    return this.command('failTask', input, (i) => this.commands.failTask(i));
  }

  /** Add an edge to the task graph: parent, child, dependency, dependent, source, derived, artifact, evidence… */
  linkTasks(input: LinkTasksInput) {
    return this.command('linkTasks', input, (i) => this.commands.linkTasks(i));
  }

  unlinkTasks(input: LinkTasksInput) {
    return this.command('linkTasks', input, (i) => this.commands.unlinkTasks(i), 'unlinkTasks');
  }

  /** How the policy would judge a call of a bound tool now (`permission.evaluated`); nothing runs. */
  evaluatePermission(input: EvaluatePermissionInput) {
    return this.checked('evaluatePermission', 'evaluatePermission', input, (i) => this.commands.evaluatePermission(i));
  }

  /** Answer a pending tool approval: allow (once or for the session) or deny (`permission.resolved`). */
  resolvePermission(input: ResolvePermissionInput) {
    return this.command('resolvePermission', input, (i) => this.commands.resolvePermission(i));
  }

  /** Feed a running process's standard input; the runtime running it acts and answers (docs/commands.md). */
  writeProcessStdin(input: WriteProcessStdinInput, options: { signal?: AbortSignal } = {}) {
    return this.command('writeProcessStdin', input, (i) => this.commands.writeProcessStdin(i, options.signal));
  }

  /** Stop a running process (its group: SIGTERM, grace, SIGKILL); `process.terminated` answers. */
  terminateProcess(input: ProcessRequestInput, options: { signal?: AbortSignal } = {}) {
    return this.command('terminateProcess', input, (i) => this.commands.terminateProcess(i, options.signal));
  }

  /** A command on one session: its input checked, then this process's worker looks at once. */
  private command<I extends { sessionId: string }, T>(
    kind: ControlInput,
    input: I,
    run: (input: I) => Promise<T>,
    method: string = kind,
  ): Promise<T> {
    return this.checked(method, kind, input, (i) => this.afterCommand(i.sessionId, run(i)));
  }

  /**
   * Check an input's shape before anything reads it (a JSON caller can send what TypeScript would refuse): a bad
   * one rejects with `invalid_input` — always as a rejected promise, never a synchronous throw.
   */
  private checked<I, T>(method: string, kind: ControlInput, input: I, run: (input: I) => Promise<T>): Promise<T> {
    return checkedCall(method, kind, input, run);
  }

  /**
   * After a command: this process's worker (if it drives the session) looks at once, so a caller that awaits the
   * command finds the work already claimed. Other processes' workers hear of it through the notifier.
   */
  private async afterCommand<T>(sessionId: string, command: Promise<T>): Promise<T> {
    const result = await command;
    // The command has committed: a failed look (a store hiccup) must not report it as failed — a retry would
    // repeat it. The notifier and the worker's backstop poll find the work anyway.
    await this.worker?.look(sessionId).catch(() => undefined);
    return result;
  }

  /**
   * Change a session's budget limits (`limit.changed`): in force at once, the running turn included; a thread
   * waiting for a budget continues when the new limits allow its next call. Bad values: `invalid_limit`.
   */
  changeLimits(input: ChangeLimitsInput): Promise<ChangeLimitsResult> {
    return this.checked('changeLimits', 'changeLimits', input, (i) =>
      this.afterCommand(i.sessionId, this.commands.changeLimits(i)),
    );
  }

  setState(input: { sessionId: string; threadId?: string; key: string; value: unknown }) {
    return this.checked('setState', 'setState', input, (i) => this.commands.setState(i));
  }

  // ----- queries -----------------------------------------------------------------------------------------------

  listSessions(filter: { workspaceId?: string; sessionIds?: readonly string[] } = {}) {
    return this.queries.listSessions(filter);
  }

  /** list_tasks; get_task is one of them: `archived` lists the archived (filed away from the snapshot) too. */
  listTasks(input: { sessionId: string; archived?: boolean }) {
    return this.checked('listTasks', 'listTasks', input, (i) => this.queries.listTasks(i));
  }

  getSession(input: { sessionId: string; cursor?: number; before?: number; limit?: number }) {
    return this.checked('getSession', 'getSession', input, (i) => this.queries.getSession(i));
  }

  getThreadRead(input: { sessionId: string; threadId: string }) {
    return this.checked('getThreadRead', 'getThreadRead', input, (i) => this.queries.getThreadRead(i));
  }

  /** The session snapshot as it was right after event `at` (time travel). */
  snapshotAt(input: { sessionId: string; at: number }) {
    return this.checked('snapshotAt', 'snapshotAt', input, (i) => this.queries.snapshotAt(i));
  }

  /** Pending decisions across a workspace's sessions (every session when none is named), oldest first. */
  pendingDecisions(filter: { workspaceId?: string } = {}) {
    return this.queries.pendingDecisions(filter);
  }
  /** Lost actions nobody has reconciled yet, across a workspace's sessions (docs/reliability.md). */
  unreconciledActions(filter: { workspaceId?: string } = {}) {
    return this.queries.unreconciledActions(filter);
  }

  /** An artifact's metadata and bytes (`artifact_not_found` for an id of another session). */
  getArtifact(input: { sessionId: string; artifactId: string }) {
    return this.checked('getArtifact', 'artifact', input, (i) => this.queries.getArtifact(i));
  }

  getBinding(sessionId: string) {
    return this.checked('getBinding', 'sessionId', sessionId, (i) => this.queries.getBinding(i));
  }

  getToolInventory(input: { sessionId: string; threadId?: string }) {
    return this.checked('getToolInventory', 'onThread', input, (i) => this.queries.getToolInventory(i));
  }

  /** The files OAR's write and edit changed, each with its versions (the artifact checkpoint summary). */
  getArtifactCheckpoints(input: { sessionId: string; threadId?: string }) {
    return this.checked('getArtifactCheckpoints', 'onThread', input, (i) => this.queries.getArtifactCheckpoints(i));
  }

  getExecutionEnvironment(input: { sessionId: string; threadId?: string }) {
    return this.checked('getExecutionEnvironment', 'onThread', input, (i) => this.queries.getExecutionEnvironment(i));
  }

  getState(input: { sessionId: string; threadId?: string; key?: string }) {
    return this.checked('getState', 'getState', input, (i) => this.queries.getState(i));
  }

  listSubagents(input: { sessionId: string; threadId?: string }) {
    return this.checked('listSubagents', 'onThread', input, (i) => this.queries.listSubagents(i));
  }

  resumableSessions() {
    return this.queries.resumableSessions();
  }

  /**
   * Have this process's worker look at the session now (unfinished work after a restart, a thread whose worker
   * died): it claims what it may and drives it. Completed actions never run again. `driven: false` when this
   * runtime runs no worker (a control plane only): a worker elsewhere finds the work by itself.
   */
  async resume(sessionId: string): Promise<{ sessionId: string; driven: boolean }> {
    await this.checked('resume', 'sessionId', sessionId, (i) => this.queries.lastSequence(i));
    if (!this.worker) return { sessionId, driven: false };
    await this.worker.look(sessionId);
    return { sessionId, driven: true };
  }

  /** `resume_thread`: this worker looks at it now (as `resume`); where it stands, and what came since `resumeToken`. */
  async resumeThread(input: { sessionId: string; threadId: string; resumeToken?: string }) {
    const point = await this.checked('resumeThread', 'resumeThread', input, (i) => this.queries.threadResumePoint(i));
    if (this.worker) await this.worker.look(input.sessionId);
    return { ...point, driven: this.worker !== undefined };
  }

  /**
   * Make sure a session's binding (or, without an id, the binding new sessions get) can run here: its tools load
   * and every agent's model resolves — so a missing key or module fails now, not in the middle of a turn.
   */
  async checkBinding(sessionId?: string): Promise<void> {
    checkInput('checkBinding', 'optionalSessionId', sessionId);
    const session = sessionId ? (await this.log.readModels(sessionId, [])).session : undefined;
    if (sessionId && !session) throw notFound('session', sessionId);
    const config = await this.configFor(session);
    await this.verify(config.binding, config.bindingHash);
  }

  private async verify(binding: SessionBinding, hash: string): Promise<void> {
    const config = await bindConfig(binding, hash, this.host);
    // Runnable when every agent has a usable model: for a chain, one usable candidate is enough (the rest are
    // recorded as excluded when a turn resolves the chain).
    for (const agent of [config.mainAgent, ...config.agents]) {
      const chain = await resolveChain(config, agent);
      if (chain.candidates.length === 0) await config.model(agent);
    }
  }

  replaySession(sessionId: string) {
    return this.checked('replaySession', 'sessionId', sessionId, (i) => this.queries.replaySession(i));
  }

  /** Exports are recorded facts: each appends one `evidence.changed` after its body was made (docs/review.md). */
  exportReplay(sessionId: string) {
    return this.checked('exportReplay', 'sessionId', sessionId, (i) => this.commands.exportReplay(i));
  }

  exportEvidence(sessionId: string) {
    return this.checked('exportEvidence', 'sessionId', sessionId, (i) => this.commands.exportEvidence(i));
  }

  /** The review pack of a session, thread, turn or task: changes with diffs, approvals, commands, costs. */
  exportReview(input: ExportReviewInput) {
    return this.checked('exportReview', 'exportReview', input, (i) => this.commands.exportReview(i));
  }

  /**
   * The session's events after `after`, as they become durable — from this process or any other on the store —
   * until `signal` aborts. Catch-up comes from the log; notifications only say when to read again.
   *
   * `deltas: true` adds the live-only events (`isLiveEvent`) of this process's work for the session: `model.delta`,
   * `tool.args`, `reasoning.delta` of its model calls and `process.output` of its commands — never stored,
   * so never replayed (one published while nobody listened is
   * gone, and a subscriber more than `LIVE_BUFFER` deltas behind loses the newest). Each comes in its position: after
   * the durable event whose `sequence` it carries, ordered among the others by its `payload.index`.
   */
  async *subscribe(
    sessionId: string,
    options: { after?: number; signal?: AbortSignal; deltas?: boolean } = {},
  ): AsyncGenerator<RuntimeEvent> {
    yield* subscription(
      { log: this.log, notifier: this.notifier, live: this.live, closed: () => this.closed },
      sessionId,
      options,
    );
  }

  // ----- work --------------------------------------------------------------------------------------------------

  /** Look for unfinished work in the worker's sessions and drive it (threads somebody else holds are left alone). */
  async recover(): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    // Oldest change first: the work that has waited longest is claimed first (a worker with a concurrency bound
    // queues the rest in this order).
    const sessions = (await this.queries.listSessions()).sort((a, b) => a.updatedAt.localeCompare(b.updatedAt));
    for (const { sessionId } of sessions) {
      if (worker.drives(sessionId)) await worker.look(sessionId);
    }
  }

  /**
   * Resolves when nothing of the session is in progress anywhere: everything finished or waits for a decision
   * (without a session id: when this process's worker drives nothing). What it claims while waiting: facade/settle.ts.
   */
  settled(sessionId?: string, options: { orAsked?: AskedWatch } = {}): Promise<void> {
    return settled(
      { worker: this.worker, store: this.store, log: this.log, notifier: this.notifier, closed: () => this.closed },
      sessionId,
      options,
    );
  }

  /** Stop the worker (its leases are released; unfinished work resumes wherever it is claimed next). */
  async close(): Promise<void> {
    this.closed = true;
    await this.schedules.close();
    await this.worker?.close();
    // Background processes outlive their turn, not their runtime (docs/commands.md).
    const stopped = await backgroundProcesses.stopAll(this.runtimeId, 'runtime_closing');
    // …and their end is on record (the store is still open): no session lists them as running.
    await recordStopped({ log: this.log, configFor: (session) => this.configFor(session) }, stopped).catch(
      () => undefined,
    );
    this.live.close();
    await this.notifier.close();
    await this.host.mcp?.close();
  }
}
