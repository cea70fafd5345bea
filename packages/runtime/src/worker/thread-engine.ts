import type { ActionDecision } from '@oar/protocol';
import { resolutionOf } from '../log/decision-log.js';
import type { EventDraft, WriteTiming } from '../log/draft.js';
import type { AppendOptions } from '../log/event-log.js';
import type { LiveDelta } from '../log/live.js';
import type { Tracing } from '../log/tracing.js';
import type { Limiter } from '../models/provider-limits.js';
import { RevealedObservations } from '../policy/revealed.js';
import { bindingOf } from '../read-models/session.js';
import { nextTurn, type ThreadView } from '../read-models/thread-state.js';
import type { Redactor } from '../redaction/redactor.js';
import type { BoundConfig, Engine } from '../scheduler/engine.js';
import {
  getArtifact,
  getArtifactText,
  type PendingArtifact,
  type prepareArtifact,
  prepareRedactedArtifact,
} from '../store/artifacts.js';
import type { Fence } from '../store/leases.js';
import { RunnerStorage } from '../store/runner-storage.js';
import type { Driver, WorkerDeps } from './deps.js';
import { ThreadDeltas } from './thread-deltas.js';
import { withStaged } from './working-state.js';

/** What a thread's engine needs of the worker that drives it. */
export interface DriverHost {
  /** Drive the thread again soon (another thread of the session has something to do). */
  kick(sessionId: string, threadId: string): void;
  /** Stop a driven thread's running work when an interrupt request for its turn is committed. */
  actOnInterrupt(sessionId: string, threadId: string): Promise<void>;
  readonly limiter: Limiter;
  readonly lingerMs: number;
  readonly tracing: Tracing;
}

/**
 * The engine one driver hands the runner and the executors: the bound configuration of the turn it runs, and a
 * writer fenced by the driver's lease.
 */
export class ThreadEngine implements Engine {
  private config: BoundConfig | undefined;
  /** Facts recorded since the last commit point (see `append`); replaced, never emptied in place, at a commit. */
  private staged: EventDraft[] = [];
  /** The redactor that cleaned every staged fact; null when they were cleaned by different ones (see `write`). */
  private stagedRedactor: Redactor | null | undefined;
  /** The last working view: built from `committed` and the first `applied` facts of `staged` (see `workingView`). */
  private working: { committed: ThreadView; staged: EventDraft[]; applied: number; view: ThreadView } | undefined;
  /** The last commit asked for (commits run in order; reads wait for them). */
  private commits: Promise<void> = Promise.resolve();
  private linger: NodeJS.Timeout | undefined;
  private lingerFailure: unknown;
  private stopped = false;
  readonly runtimeId: string;
  readonly sessionId: string;
  readonly threadId: string;
  /** The delta sink of this thread's model calls. */
  readonly deltas: ThreadDeltas;
  /** Unredacted observations for this thread's model context (policy/revealed.ts): gone with this tenure. */
  readonly revealed = new RevealedObservations();

  constructor(
    private readonly worker: DriverHost,
    private readonly deps: WorkerDeps,
    private readonly driver: Driver,
    private readonly fence: Fence,
  ) {
    this.runtimeId = deps.runtimeId;
    this.sessionId = driver.sessionId;
    this.threadId = driver.threadId;
    this.deltas = new ThreadDeltas(
      deps.live,
      driver.sessionId,
      driver.threadId,
      () => this.config?.redactor ?? deps.log.redactor,
    );
  }

  /** Load the thread and bind the configuration of its running turn (or the session's current one). */
  async prepare(threadId: string): Promise<ThreadView> {
    const thread = await this.loadThread(this.sessionId, threadId);
    // The running turn, or the one about to start (a delegated turn already names its parent turn's binding).
    const next = thread.activeTurnId === undefined ? nextTurn(thread)?.turnId : thread.activeTurnId;
    const turn = thread.turns.find((t) => t.turnId === next);
    // A running turn keeps its binding: once bound, a step needs no second read of the session.
    if (turn?.bindingHash !== undefined && turn.bindingHash === this.config?.bindingHash) return thread;
    const session = (await this.deps.log.readModels(this.sessionId, [])).session;
    this.config = await this.deps.configFor(session, turn?.bindingHash);
    return thread;
  }

  private get bound(): BoundConfig {
    if (!this.config) throw new Error('the thread engine is used before prepare()');
    return this.config;
  }
  get binding() {
    return this.bound.binding;
  }
  get bindingHash() {
    return this.bound.bindingHash;
  }
  get workspaceRoot() {
    return this.bound.workspaceRoot;
  }
  get tools() {
    return this.bound.tools;
  }
  get agents() {
    return this.bound.agents;
  }
  get mainAgent() {
    return this.bound.mainAgent;
  }
  get permissions() {
    return this.bound.permissions;
  }
  get limits() {
    return this.bound.limits;
  }
  get onProtocolFailure() {
    return this.bound.onProtocolFailure;
  }
  get redactor() {
    return this.bound.redactor;
  }
  model(agent: Parameters<BoundConfig['model']>[0]) {
    return this.bound.model(agent);
  }

  signal(): AbortSignal {
    return this.driver.controller.signal;
  }

  /** A live-only event of this thread (a command's output), redacted with the binding's secrets. */
  publishLive(delta: LiveDelta): void {
    const live = this.deps.live;
    if (!live?.listening(this.sessionId)) return;
    const redactor = this.config?.redactor ?? this.deps.log.redactor;
    const piece = delta.payload.delta;
    live.publish(this.sessionId, {
      ...delta,
      payload: { ...delta.payload, ...(piece !== undefined ? { delta: redactor.redactText(piece) } : {}) },
    });
  }

  wake(sessionId: string, threadId: string): void {
    this.worker.kick(sessionId, threadId);
    // What woke it may be an interrupt request this driver wrote (a job's fail-fast stopping its other items): the
    // worker does not hear of its own drivers' writes, so the thread's driver is told here.
    void this.worker.actOnInterrupt(sessionId, threadId).catch(() => undefined);
  }

  /** A thread as committed; this driver's own thread with its staged facts applied (the working truth). */
  async loadThread(sessionId: string, threadId: string): Promise<ThreadView> {
    this.takeLingerFailure();
    const own = sessionId === this.sessionId && threadId === this.threadId;
    for (;;) {
      // A commit in flight lands first; one that starts while the store is read means reading again.
      const commits = this.commits;
      await commits;
      const committed = await this.deps.log.thread(sessionId, threadId);
      if (commits !== this.commits) continue;
      return own && this.staged.length > 0 ? this.workingView(committed) : committed;
    }
  }

  /**
   * The committed view with the staged facts applied. A step reads its thread several times while it stages more
   * facts: the last working view is extended by the facts staged since, not rebuilt from all of them.
   */
  private workingView(committed: ThreadView): ThreadView {
    const last = this.working;
    const staged = this.staged;
    const view =
      last !== undefined && last.committed === committed && last.staged === staged
        ? last.applied === staged.length
          ? last.view
          : withStaged(last.view, staged.slice(last.applied), this)
        : withStaged(committed, staged, this);
    this.working = { committed, staged, applied: staged.length, view };
    return view;
  }

  async loadTasks(sessionId: string, taskIds: readonly string[]) {
    // Tasks change through commands and through this thread's facts: what is staged is committed first (a task's
    // turn ends rarely; its end is then computed from, and guarded by, the same committed state).
    await this.commit();
    const keys = taskIds.map((key) => ({ kind: 'task' as const, key }));
    return (await this.deps.log.readModels(sessionId, keys)).tasks;
  }

  async loadJob(sessionId: string, jobId: string) {
    // A job changes through commands and other threads' turn ends: read as committed, like tasks.
    await this.commit();
    return (await this.deps.log.readModels(sessionId, [{ kind: 'job', key: jobId }])).jobs.get(jobId);
  }

  async grants(sessionId: string) {
    return (await this.deps.log.readModels(sessionId, [])).session?.grants ?? [];
  }

  readEvents(sessionId: string, options: { after?: number; limit?: number; threadId?: string }) {
    return this.deps.log.read(sessionId, options);
  }

  async resolvedDecision(sessionId: string, actionId: string) {
    const event = await resolutionOf(this.deps.log.store.db, sessionId, actionId);
    if (!event) return undefined;
    const payload = event.payload as { decision: ActionDecision; reason?: string; resolvedBy?: string };
    return {
      decision: payload.decision,
      ...(payload.reason !== undefined ? { reason: payload.reason } : {}),
      ...(payload.resolvedBy !== undefined ? { resolvedBy: payload.resolvedBy } : {}),
    };
  }

  async session(sessionId: string) {
    return (await this.deps.log.readModels(sessionId, [])).session;
  }

  get limiter() {
    return this.worker.limiter;
  }

  async updatedPermissions(sessionId: string) {
    const session = (await this.deps.log.readModels(sessionId, [])).session;
    if (!session?.bindingHash || session.bindingHash === this.bindingHash) return undefined;
    return bindingOf(session)?.permissions;
  }

  /**
   * Artifacts put but not yet written: each lands in the transaction of the first append whose events reference
   * it, so a crash between storing an output and recording it leaves no orphan row. One nobody references (the
   * step failed before recording it) is never written.
   */
  private readonly pendingArtifacts = new Map<string, PendingArtifact & { redaction?: EventDraft }>();

  readonly artifacts = {
    // An output is redacted before it is stored (and hashed): the artifact never holds what the log may not.
    put: async (sessionId: string, content: Parameters<typeof prepareArtifact>[1], maxBytes?: number) => {
      const { pending, redaction: fact } = prepareRedactedArtifact(sessionId, content, this.redactor, maxBytes);
      this.pendingArtifacts.set(pending.stored.artifactId, {
        ...pending,
        ...(fact
          ? { redaction: { type: 'output.redacted', threadId: this.threadId, payload: fact } as EventDraft }
          : {}),
      });
      return pending.stored;
    },
    text: async (sessionId: string, artifactId: string) => {
      const pending = this.pendingArtifacts.get(artifactId);
      if (pending && pending.row.session_id === sessionId) return new TextDecoder().decode(pending.row.bytes);
      return getArtifactText(this.deps.log.store.db, sessionId, artifactId);
    },
    read: async (sessionId: string, artifactId: string) => {
      const pending = this.pendingArtifacts.get(artifactId);
      if (pending && pending.row.session_id === sessionId) {
        return { ...pending.stored, bytes: new Uint8Array(pending.row.bytes), createdAt: pending.row.created_at };
      }
      return getArtifact(this.deps.log.store.db, sessionId, artifactId);
    },
  };

  /** A runner's storage.* values, straight to the store (not facts of the session: see agent-runners/storage.ts). */
  get runnerStorage(): RunnerStorage {
    return new RunnerStorage(this.deps.log.store);
  }

  /** The pending artifacts these events reference (by id, anywhere in their payloads). */
  private referencedArtifacts(
    sessionId: string,
    drafts: EventDraft[],
  ): (PendingArtifact & { redaction?: EventDraft })[] {
    if (this.pendingArtifacts.size === 0) return [];
    const pending = [...this.pendingArtifacts.values()].filter((p) => p.row.session_id === sessionId);
    if (pending.length === 0) return [];
    // A walk of the strings, not a search of JSON.stringify(drafts): the same answer (an id has no character JSON
    // escapes, so it is found in the text only inside one key or string), without building a step's facts as text
    // once more (that copy cost as much as the log's own serialization of them).
    const found = new Set<string>();
    const ids = pending.map((p) => p.stored.artifactId);
    mentions(drafts, ids, found);
    return pending.filter((p) => found.has(p.stored.artifactId));
  }

  /**
   * Record facts. Facts about this thread are staged — part of the working truth at once (`loadThread` shows
   * them), written at the next commit point in one transaction with everything else staged — unless the caller
   * needs them in the store now:
   * - `durable`: the write-ahead rule (a non-idempotent tool's start before its side effect, its end right after),
   *   flushed to disk;
   * - `commit`: the step boundary (the facts before a model call: one commit per step), which waits for the disk only
   *   when a fact in it needs to (log/durability.ts) — what was staged is what a crash could have lost anyway;
   * - a `guard`: it checks committed state, so what is staged is committed first;
   * - facts about another thread or session: whoever drives that one reads the store, not this working state.
   * Staged facts are also committed after the worker's `lingerMs`, so observers never wait long for a slow step.
   */
  async append(sessionId: string, facts: EventDraft[], options: WriteTiming = {}): Promise<void> {
    this.takeLingerFailure();
    // Each fact with the trace and span ids of the work it is about (tracing.ts).
    // A model call's end keeps what it streamed when it did not complete (thread-deltas.ts).
    const drafts = this.deltas.observe(this.worker.tracing.record(facts, this));
    const foreign =
      sessionId !== this.sessionId || drafts.some((d) => d.threadId !== undefined && d.threadId !== this.threadId);
    if (options.guard || foreign) {
      await this.inOrder(async () => {
        await this.writeStaged();
        await this.write(sessionId, drafts, { ...(options.guard ? { guard: options.guard } : {}) });
      });
      return;
    }
    // Cleaned now, not only when written: the working truth feeds the next model call, which must see what the
    // log will hold. The log skips its own pass when they are written with the same redactor (`cleanedBy`).
    const redactor = this.config?.redactor ?? this.deps.log.redactor;
    if (this.staged.length === 0) this.stagedRedactor = redactor;
    else if (this.stagedRedactor !== redactor) this.stagedRedactor = null;
    this.staged.push(...this.deps.log.clean(drafts, redactor));
    if (options.durable) await this.commit({ flush: true });
    else if (options.commit) await this.commit();
    else this.lingerSoon();
  }

  /**
   * Write what is staged (a commit point). The disk is waited for when `flush` says so or a fact needs it
   * (log/durability.ts): staged facts are what a crash before this commit would have lost, and are redone.
   */
  commit(options: { flush?: boolean } = {}): Promise<void> {
    return this.inOrder(() => this.writeStaged(options.flush === true));
  }

  /** Writes run one after another, in the order they were asked for (and reads wait for them: `loadThread`). */
  private inOrder(work: () => Promise<void>): Promise<void> {
    const done = this.commits.then(work);
    this.commits = done.catch(() => undefined);
    return done;
  }

  private async writeStaged(flush = false): Promise<void> {
    clearTimeout(this.linger);
    this.linger = undefined;
    const staged = this.staged;
    if (staged.length === 0) return;
    const cleanedBy = this.stagedRedactor ?? undefined;
    this.staged = [];
    this.stagedRedactor = undefined;
    // If the write fails the staged facts go with it rather than being re-staged behind later facts: what was
    // lost is redone by whoever drives the thread next (read-only and idempotent work only; the rest is durable).
    await this.write(this.sessionId, staged, { relaxed: !flush, ...(cleanedBy ? { cleanedBy } : {}) });
  }

  private lingerSoon(): void {
    if (this.linger !== undefined || this.stopped) return;
    this.linger = setTimeout(() => {
      this.linger = undefined;
      if (this.stopped) return;
      this.commit().catch((error: unknown) => {
        // Nobody awaits this commit: the driver hears of the failure at its next append or read.
        this.lingerFailure ??= error;
      });
    }, this.worker.lingerMs);
    this.linger.unref();
  }

  private takeLingerFailure(): void {
    const failure = this.lingerFailure;
    if (failure === undefined) return;
    this.lingerFailure = undefined;
    throw failure;
  }

  /** The driver is done (or its process is to behave as if it died): nothing staged is written any more. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.linger);
  }

  /** `cleanedBy`: the redactor that already cleaned `drafts` (staged facts), so the log need not again. */
  private async write(
    sessionId: string,
    drafts: EventDraft[],
    options: Pick<AppendOptions, 'guard' | 'cleanedBy' | 'relaxed'>,
  ): Promise<void> {
    const { guard, cleanedBy, relaxed } = options;
    const artifacts = this.referencedArtifacts(sessionId, drafts);
    const redactions = artifacts.flatMap((artifact) => (artifact.redaction ? [artifact.redaction] : []));
    // Before the first step is prepared (recovery, a failure to bind) the log's own redactor applies.
    const redactor = this.config?.redactor ?? this.deps.log.redactor;
    const clean = cleanedBy === redactor;
    await this.deps.log.append(
      sessionId,
      // The artifacts' redaction facts were not staged, so not cleaned yet: cleaned here when the rest is not.
      clean ? [...drafts, ...this.deps.log.clean(redactions, redactor)] : [...drafts, ...redactions],
      {
        fence: this.fence,
        ...(this.config ? { redactor: this.config.redactor } : {}),
        ...(clean ? { cleanedBy: redactor } : {}),
        ...(guard ? { guard } : {}),
        ...(relaxed ? { relaxed } : {}),
        ...(artifacts.length > 0 ? { artifacts } : {}),
      },
    );
    for (const artifact of artifacts) this.pendingArtifacts.delete(artifact.stored.artifactId);
  }
}

/**
 * Adds to `found` each of `ids` that occurs in a key or a string of `value` (JSON-shaped facts); a value that is no
 * plain object, array or primitive is searched as its JSON text, as `JSON.stringify` would write it.
 */
function mentions(value: unknown, ids: readonly string[], found: Set<string>): void {
  if (found.size === ids.length) return;
  if (typeof value === 'string') {
    for (const id of ids) if (value.includes(id)) found.add(id);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) mentions(item, ids, found);
    return;
  }
  const proto = Object.getPrototypeOf(value);
  if ((proto !== Object.prototype && proto !== null) || typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    const text = JSON.stringify(value);
    if (text !== undefined) mentions(text, ids, found);
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    // JSON leaves these keys out.
    if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
    mentions(key, ids, found);
    mentions(item, ids, found);
  }
}
