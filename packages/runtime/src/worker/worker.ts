import { type ActionDecision, type OarError, oarError } from '@oar/protocol';
import { runnerTurn } from '../agent-runners/host.js';
import { queueChanged, threadUnchanged } from '../facts/queue.js';
import { OarRuntimeError, runtimeClosing, toOarError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { resolutionOf } from '../log/decision-log.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import type { EventLog } from '../log/event-log.js';
import type { LiveChannel, LiveDelta } from '../log/live.js';
import type { Notifier, SessionChange } from '../log/notifier.js';
import { Tracing } from '../log/tracing.js';
import { advance } from '../loop/thread-runner.js';
import { failTurn } from '../loop/turn-end.js';
import { type Limiter, ProviderLimiter } from '../models/provider-limits.js';
import { RevealedObservations } from '../policy/revealed.js';
import { bindingOf, type SessionState } from '../read-models/session.js';
import type { ThreadState, ThreadView } from '../read-models/thread-state.js';
import { sessionWork } from '../read-models/work.js';
import type { Redactor } from '../redaction/redactor.js';
import { RedactionTally, redactionFact } from '../redaction/tally.js';
import type { BoundConfig, Engine } from '../scheduler/engine.js';
import { getArtifact, getArtifactText, type PendingArtifact, prepareArtifact } from '../store/artifacts.js';
import { isStoreFault } from '../store/faults.js';
import {
  claimLease,
  type Fence,
  type LeaseHolder,
  LeaseLostError,
  leasesToTakeOver,
  ownerName,
  releaseLease,
  renewLease,
} from '../store/leases.js';
import { RunnerStorage } from '../store/runner-storage.js';
import { recoveryDrafts } from './recovery.js';
import { stepTurn } from './step-scheduler.js';
import { ThreadDeltas } from './thread-deltas.js';
import { withStaged } from './working-state.js';

export interface WorkerOptions {
  /** This worker's name in lease rows (default: a fresh `wrk_…` id). */
  owner?: string;
  /** The sessions this worker drives: all of them, or only these (more can be added with `adopt`). */
  sessions?: 'all' | readonly string[];
  /** How long a lease lasts without renewal (default 30 s); renewed every third of it. */
  leaseTtlMs?: number;
  /** How often to look for leases that ran out (default 1 s). */
  pollMs?: number;
  /**
   * The most threads this worker drives at once (default: no bound). Work found beyond it waits here, oldest
   * first, until a driver is free — unless another worker claims it first.
   */
  concurrency?: number;
  /**
   * How long a thread's staged facts may wait for a commit point before they are committed anyway (default
   * 100 ms): the most a slow step's progress is hidden from observers.
   */
  lingerMs?: number;
}

export interface WorkerDeps {
  log: EventLog;
  notifier: Notifier;
  runtimeId: string;
  /** The runnable configuration of a session's binding (`hash` picks a turn's binding; default the current). */
  configFor(session: SessionState | undefined, hash: string | undefined): Promise<BoundConfig>;
  /** Spans for what this worker does (default: the global tracer provider's, a no-op without an SDK). */
  tracing?: Tracing;
  /** Where the streamed output of the model calls it makes goes (`model.delta`, live-only); none: nowhere. */
  live?: LiveChannel;
  /** Limits per provider and model shared by every thread this worker drives (default: none but 429 pauses). */
  limiter?: Limiter;
}

/** The state of one thread this worker drives: its lease, its abort controller, whether it was kicked again. */
interface Driver {
  sessionId: string;
  threadId: string;
  again: boolean;
  lost: boolean;
  controller: AbortController;
  done: Promise<void>;
  renewal?: NodeJS.Timeout;
  /** The driver's engine, once the lease is claimed (its staged facts die with an abandoned worker). */
  engine?: { stop(): void };
  /** Handed back between two turns because other threads waited for a driver (fair share): it queues again. */
  yielded?: boolean;
}

export const DEFAULT_LEASE_TTL_MS = 30_000;

export const DEFAULT_LINGER_MS = 100;

/**
 * How a worker rides out a store that is briefly unavailable (dropped connections, a failover): the thread is
 * driven again after a pause that doubles from 100 ms up to 2 s, and recovery on the new claim settles the
 * interrupted step under the usual durability rules. After 30 s of nothing but failures the fault is final.
 */
const STORE_RETRY = { firstMs: 100, maxMs: 2000, giveUpMs: 30_000 };

/**
 * A worker owns execution. It claims a thread's lease before driving it, renews the lease while it works, appends
 * only through a writer fenced by that lease, acts on durable interrupt requests, and releases the lease when the
 * thread has to wait. It finds work from change notifications and from leases that ran out; it never drives a
 * thread somebody else holds, and recovers only threads it has just claimed.
 */
export class Worker {
  readonly owner: string;
  /** See `WorkerOptions.lingerMs`. */
  readonly lingerMs: number;
  readonly tracing: Tracing;
  readonly limiter: Limiter;
  private readonly drivers = new Map<string, Driver>();
  /** Threads found held by another worker when this one wanted to drive them. */
  private readonly held = new Map<string, LeaseHolder>();
  /** Store faults that could not be recorded in the log, per session, until `takeFault` hands them over. */
  private readonly faults = new Map<string, OarRuntimeError>();
  /** Threads whose drives keep ending on an unavailable store: since when, and how many times. */
  private readonly storeRetries = new Map<string, { since: number; attempts: number }>();
  private readonly scope: 'all' | Set<string>;
  private readonly ttl: number;
  private readonly concurrency: number;
  /** Threads with work found while every driver was busy, oldest first: thread id → session id. */
  private readonly waiting = new Map<string, string>();
  private closed = false;
  /** Draining: no new thread is claimed, and each driven thread stops after its current step. */
  private draining = false;
  private readonly unlisten: () => void;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly deps: WorkerDeps,
    options: WorkerOptions = {},
  ) {
    this.owner = options.owner ?? ownerName(newId('wrk'));
    this.scope = options.sessions === 'all' || options.sessions === undefined ? 'all' : new Set(options.sessions);
    this.ttl = options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
    this.concurrency = options.concurrency ?? Number.POSITIVE_INFINITY;
    this.lingerMs = options.lingerMs ?? DEFAULT_LINGER_MS;
    this.tracing = deps.tracing ?? new Tracing();
    this.limiter = deps.limiter ?? new ProviderLimiter();
    this.unlisten = deps.notifier.listen((change) => this.onChange(change));
    this.timer = setInterval(() => void this.reclaimExpired(), options.pollMs ?? 1000);
    this.timer.unref();
  }

  /** Drive this session too (a CLI process adopts the session it created or was asked to continue). */
  adopt(sessionId: string): void {
    if (this.scope !== 'all') this.scope.add(sessionId);
  }

  drives(sessionId: string): boolean {
    return this.scope === 'all' || this.scope.has(sessionId);
  }

  /** Who else holds a thread this worker wanted to drive (the CLI names them). */
  holderOf(threadId: string): LeaseHolder | undefined {
    return this.held.get(threadId);
  }

  /**
   * The store fault that stopped this session's work and could not be written to its log (the store was full,
   * read-only or gone), once: whoever waits for the session must hear it, since the log cannot say it.
   */
  takeFault(sessionId?: string): OarRuntimeError | undefined {
    const key = sessionId ?? this.faults.keys().next().value;
    if (key === undefined) return undefined;
    const fault = this.faults.get(key);
    this.faults.delete(key);
    return fault;
  }

  /** Whether this worker is driving the thread right now. */
  isDriving(threadId: string): boolean {
    return this.drivers.has(threadId);
  }

  /** Threads of the session this worker is driving right now. */
  driving(sessionId?: string): Promise<void>[] {
    return [...this.drivers.values()].filter((d) => !sessionId || d.sessionId === sessionId).map((d) => d.done);
  }

  private onChange(change: SessionChange): void {
    // What this process's own drivers wrote needs no attention: they wake the threads they affect themselves.
    if (change.fenced || this.closed || !this.drives(change.sessionId)) return;
    void this.look(change.sessionId).catch(() => undefined);
  }

  /**
   * Look at a session's threads: stop the work of a driven thread whose turn has an interrupt request, and drive
   * every thread that has something to do and nobody holding it.
   */
  async look(sessionId: string): Promise<void> {
    if (this.closed || !this.drives(sessionId)) return;
    for (const { thread, holder } of await sessionWork(this.deps.log.store.db, sessionId)) {
      const driver = this.drivers.get(thread.threadId);
      if (driver) {
        if (interruptPending(thread) && !driver.controller.signal.aborted) {
          driver.controller.abort(new Error(thread.interrupt?.reason ?? 'interrupted'));
        }
        driver.again = true;
      } else if (holder && holder.owner !== this.owner) {
        this.held.set(thread.threadId, holder);
      } else {
        // Nobody holds it, or we do without driving it (a release the store refused): drive it.
        this.kick(sessionId, thread.threadId);
      }
    }
  }

  /**
   * Take over threads whose lease ran out (their worker crashed or stalled) or was given up before the work was
   * done (a closing worker): the backstop for every notification that never came.
   */
  private async reclaimExpired(): Promise<void> {
    if (this.closed) return;
    // What was held elsewhere and has run out since is no longer worth naming (and must not pile up).
    const now = Date.now();
    for (const [threadId, holder] of this.held) if (Date.parse(holder.expiresAt) < now) this.held.delete(threadId);
    try {
      for (const { sessionId, threadId } of await leasesToTakeOver(this.deps.log.store.db)) {
        if (this.drives(sessionId) && !this.drivers.has(threadId)) this.kick(sessionId, threadId);
      }
    } catch {
      // The store is briefly unavailable: the next poll looks again.
    }
  }

  /** Make sure the thread is driven by this worker (unless another one holds it, or this one is full). */
  kick(sessionId: string, threadId: string): void {
    if (this.closed || this.draining) return;
    const existing = this.drivers.get(threadId);
    if (existing) {
      existing.again = true;
      return;
    }
    if (this.drivers.size >= this.concurrency) {
      // Remembered in arrival order: the oldest waiting thread gets the next free driver.
      if (!this.waiting.has(threadId)) this.waiting.set(threadId, sessionId);
      return;
    }
    this.waiting.delete(threadId);
    const driver: Driver = {
      sessionId,
      threadId,
      again: true,
      lost: false,
      controller: new AbortController(),
      done: Promise.resolve(),
    };
    this.drivers.set(threadId, driver);
    driver.done = this.drive(driver);
  }

  private async drive(driver: Driver): Promise<void> {
    const { sessionId, threadId } = driver;
    const db = this.deps.log.store.db;
    let fence: Fence | undefined;
    let idleSequence = 0;
    let failed = false;
    let engine: ThreadEngine | undefined;
    try {
      const claim = await claimLease(db, { sessionId, threadId, owner: this.owner, ttlMs: this.ttl });
      if (!claim.ok) {
        this.held.set(threadId, claim.holder);
        return;
      }
      this.held.delete(threadId);
      fence = claim.fence;
      const lease = fence;
      driver.renewal = setInterval(
        () => {
          renewLease(db, lease, this.ttl)
            .then((ok) => {
              if (ok) return;
              driver.lost = true;
              driver.controller.abort(new LeaseLostError(lease));
            })
            .catch(() => undefined); // a store hiccup: the next renewal tries again before the lease runs out
        },
        Math.max(50, Math.floor(this.ttl / 3)),
      );
      driver.renewal.unref();
      engine = new ThreadEngine(this, this.deps, driver, lease);
      driver.engine = engine;
      // Whatever the previous tenure left running has no writer any more: settle it before anything else.
      const recovered = recoveryDrafts(await engine.loadThread(sessionId, threadId));
      if (recovered.drafts.length > 0) await engine.append(sessionId, recovered.drafts, { durable: true });
      idleSequence = await this.loop(driver, engine);
      this.storeRetries.delete(threadId);
    } catch (error) {
      failed = true;
      if (error instanceof OarRuntimeError && error.code === 'lease_lost') driver.lost = true;
      // A lost lease means someone else carries on: there is nothing this worker may record any more.
      if (!driver.lost && !this.closed) idleSequence = await this.afterFailure(driver, engine, error);
    } finally {
      engine?.stop();
      clearInterval(driver.renewal);
      // Release before forgetting the driver: a kick in between finds the driver and sets `again` instead of
      // starting a second driver that would re-claim the lease this one is about to release.
      if (fence && !driver.lost) await releaseLease(db, fence, idleSequence).catch(() => undefined);
      this.drivers.delete(threadId);
      // A kick that came while this driver was leaving: drive again (not after a failure, which would only repeat).
      if (driver.yielded && !this.closed && !this.draining) this.waiting.set(threadId, sessionId);
      else if (driver.again && fence && !failed && !driver.lost && !this.closed) this.kick(sessionId, threadId);
      this.nextWaiting();
    }
  }

  /** A driver is free: drive the oldest thread that waited for one (another worker may have taken it meanwhile). */
  private nextWaiting(): void {
    while (!this.closed && !this.draining && this.drivers.size < this.concurrency && this.waiting.size > 0) {
      const [threadId, sessionId] = this.waiting.entries().next().value as [string, string];
      this.waiting.delete(threadId);
      this.kick(sessionId, threadId);
    }
  }

  /**
   * What a failed drive leaves behind. A store that is briefly unavailable: the thread is driven again shortly.
   * Anything else: the failure is recorded on the turn; when even that cannot be written, the fault is handed to
   * whoever waits for the session. Returns the sequence the thread was left idle at (0: not idle).
   */
  private async afterFailure(driver: Driver, engine: ThreadEngine | undefined, error: unknown): Promise<number> {
    const { sessionId, threadId } = driver;
    const fault = isStoreFault(error) ? error : undefined;
    const retry = this.storeRetries.get(threadId) ?? { since: Date.now(), attempts: 0 };
    if (
      fault?.code === 'store_unavailable' &&
      fault.error.retryable &&
      Date.now() - retry.since < STORE_RETRY.giveUpMs
    ) {
      this.storeRetries.set(threadId, { since: retry.since, attempts: retry.attempts + 1 });
      const delay = Math.min(STORE_RETRY.firstMs * 2 ** retry.attempts, STORE_RETRY.maxMs);
      setTimeout(() => this.kick(sessionId, threadId), delay).unref();
      return 0;
    }
    this.storeRetries.delete(threadId);
    const recorded = engine ? await this.recordFailure(engine, toOarError(error)) : false;
    if (!recorded || !engine) {
      // The log cannot tell anyone: hand the fault over (`Runtime.settled` throws it).
      this.faults.set(sessionId, fault ?? new OarRuntimeError('internal_error', String(error)));
      return 0;
    }
    // Left idle where the failure was recorded: the same failure is not retried until something changes.
    return engine
      .loadThread(sessionId, threadId)
      .then((thread) => thread.lastSequence)
      .catch(() => 0);
  }

  /** Step the thread until it has to wait. Returns the thread's last sequence when it was left idle. */
  private async loop(driver: Driver, engine: ThreadEngine): Promise<number> {
    const { sessionId, threadId } = driver;
    /** Whether a turn ran in this tenure (the fair share below counts from the end of one). */
    let ranTurn = false;
    for (let step = 0; ; step++) {
      // Between two steps of one thread, the event loop serves everyone else (timers, sockets, the other threads).
      if (step > 0) await stepTurn();
      if (this.closed || driver.lost) return 0;
      // Draining: the step before this one is over; commit what it staged and hand the thread back (released, not
      // idle, so another worker continues it at once).
      if (this.draining && step > 0) {
        await engine.commit();
        return 0;
      }
      driver.again = false;
      // A fresh signal BEFORE the thread is read: an abort landing after the read stays in effect for this step,
      // and a request committed before it is seen by the read below.
      if (driver.controller.signal.aborted) driver.controller = new AbortController();
      const thread = await engine.prepare(threadId);
      if (interruptPending(thread)) {
        await this.cancelTurn(engine, driver, thread);
        continue;
      }
      // Fair share: between two turns of one thread, threads that waited for a free driver go first. This one is
      // handed back (released, not idle, so any worker may claim it) and queues behind them here.
      if (thread.activeTurnId !== undefined) ranTurn = true;
      else if (ranTurn && this.waiting.size > 0) {
        await engine.commit();
        driver.yielded = true;
        return 0;
      }
      // The thread as just read: the step starts from it (read once per step, not twice).
      const scope = { runtimeId: this.deps.runtimeId, sessionId, threadId, thread, engine };
      if (await this.tracing.drive(scope, () => advance(engine, thread, runnerTurn))) continue;
      // Stopped rather than done (closing, lease lost): the thread is not idle, the next worker must look at it.
      if (this.closed || driver.lost) return 0;
      // A commit point: the thread is about to wait, and idleness is judged on what the store holds.
      await engine.commit();
      const after = await engine.loadThread(sessionId, threadId);
      if (interruptPending(after) || driver.again) continue;
      return after.lastSequence;
    }
  }

  /** Act on an interrupt request: the running work has stopped; record the cancellation of the turn. */
  private async cancelTurn(engine: ThreadEngine, driver: Driver, thread: ThreadView): Promise<void> {
    const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
    const reason = thread.interrupt?.reason ?? 'interrupted';
    if (!driver.controller.signal.aborted) driver.controller.abort(new Error(reason));
    if (turn) await failTurn(engine, thread, turn, oarError('interrupted', reason), 'cancelled');
    driver.controller = new AbortController();
  }

  /**
   * A bug or a broken store must not leave a turn running forever: fail it with the cause. Returns false when the
   * store refused even that (the fault then reaches the caller through `takeFault`).
   */
  private async recordFailure(engine: ThreadEngine, error: OarError): Promise<boolean> {
    try {
      const thread = await engine.loadThread(engine.sessionId, engine.threadId);
      await engine.append(
        engine.sessionId,
        [
          {
            type: 'runtime.error',
            threadId: thread.threadId,
            ...(thread.activeTurnId ? { turnId: thread.activeTurnId } : {}),
            payload: { ...error, fatal: false },
          },
        ],
        { durable: true },
      );
      const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
      if (turn) await failTurn(engine, thread, turn, error);
      // A turn that cannot even start (its binding cannot run here) fails as well, or it would be retried forever.
      const next = turn ? undefined : (thread.turns.find((t) => t.status === 'accepted') ?? thread.queue[0]);
      if (next) {
        const rest = thread.queue.filter((q) => q.turnId !== next.turnId);
        const dequeued = rest.length < thread.queue.length;
        await engine.append(
          engine.sessionId,
          [
            ...(dequeued ? [queueChanged(thread, rest, 'dequeued', next.turnId)] : []),
            {
              type: 'turn.failed',
              threadId: thread.threadId,
              turnId: next.turnId,
              status: 'failed',
              payload: { error },
            },
          ],
          { guard: threadUnchanged(thread) },
        );
      }
      return true;
    } catch {
      // The store itself failed; the next worker to claim the thread finds the unfinished turn.
      return false;
    }
  }

  /**
   * Behave like a process that died (tests and fault trials): stop renewing, polling and listening at once, abort
   * nothing and release nothing. The leases run out and another worker takes the threads over; whatever this
   * worker's stuck drivers try to write afterwards is refused by fencing.
   */
  abandon(): void {
    this.closed = true;
    this.limiter.abandon?.();
    this.unlisten();
    clearInterval(this.timer);
    for (const driver of this.drivers.values()) {
      clearInterval(driver.renewal);
      driver.engine?.stop();
    }
  }

  /**
   * Drain (a worker's SIGTERM): claim nothing new, let every driven thread finish the step it is in — its facts
   * committed, the thread handed back with its lease released for another worker to continue at once — and wait up
   * to `deadlineMs` for that. Whatever still runs then is stopped by `close`, which aborts it. Resolves true when
   * every thread was handed back in time.
   */
  async drain(deadlineMs: number): Promise<boolean> {
    this.draining = true;
    this.waiting.clear();
    clearInterval(this.timer);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), deadlineMs);
    });
    const drained = Promise.allSettled(this.driving()).then(() => true as const);
    try {
      return await Promise.race([drained, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stop: abort running work (it resumes wherever the threads are claimed next), release every lease. */
  async close(): Promise<void> {
    this.closed = true;
    this.unlisten();
    clearInterval(this.timer);
    const closing = runtimeClosing();
    for (const driver of this.drivers.values()) driver.controller.abort(closing);
    await Promise.allSettled([...this.drivers.values()].map((d) => d.done));
    // What this process's spans did not see end goes on elsewhere: they end here, before the exporter flushes.
    this.tracing.endAll();
  }
}

/** An interrupt was requested for the turn that is running. */
function interruptPending(thread: ThreadState): boolean {
  return thread.interrupt !== undefined && thread.interrupt.turnId === thread.activeTurnId;
}

/**
 * The engine one driver hands the runner and the executors: the bound configuration of the turn it runs, and a
 * writer fenced by the driver's lease.
 */
class ThreadEngine implements Engine {
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
    private readonly worker: Worker,
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
    const turn =
      thread.turns.find((t) => t.turnId === thread.activeTurnId) ??
      (thread.activeTurnId === undefined ? thread.turns.find((t) => t.status === 'accepted') : undefined);
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
    live.publish(this.sessionId, {
      ...delta,
      payload: { ...delta.payload, delta: redactor.redactText(delta.payload.delta) },
    });
  }

  wake(sessionId: string, threadId: string): void {
    this.worker.kick(sessionId, threadId);
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
      const tally = new RedactionTally();
      const clean = {
        ...content,
        ...(content.text !== undefined ? { text: this.redactor.redactText(content.text, tally) } : {}),
        ...(content.bytes !== undefined ? { bytes: this.redactor.redactBytes(content.bytes, tally) } : {}),
      };
      const pending = prepareArtifact(sessionId, clean, maxBytes);
      const fact = redactionFact(tally, { sink: 'artifact', artifactId: pending.stored.artifactId });
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
   * needs them durable now:
   * - `durable`: the write-ahead rule (a non-idempotent tool's start before its side effect, its end right after)
   *   and the step boundary (the facts before a model call: one commit per step);
   * - a `guard`: it checks committed state, so what is staged is committed first;
   * - facts about another thread or session: whoever drives that one reads the store, not this working state.
   * Staged facts are also committed after the worker's `lingerMs`, so observers never wait long for a slow step.
   */
  async append(
    sessionId: string,
    facts: EventDraft[],
    options: { durable?: boolean; guard?: AppendGuard } = {},
  ): Promise<void> {
    this.takeLingerFailure();
    // Each fact with the trace and span ids of the work it is about (tracing.ts).
    // A model call's end keeps what it streamed when it did not complete (thread-deltas.ts).
    const drafts = this.deltas.observe(this.worker.tracing.record(facts, this));
    const foreign =
      sessionId !== this.sessionId || drafts.some((d) => d.threadId !== undefined && d.threadId !== this.threadId);
    if (options.guard || foreign) {
      await this.inOrder(async () => {
        await this.writeStaged();
        await this.write(sessionId, drafts, options.guard);
      });
      return;
    }
    // Cleaned now, not only when written: the working truth feeds the next model call, which must see what the
    // log will hold. The log skips its own pass when they are written with the same redactor (`cleanedBy`).
    const redactor = this.config?.redactor ?? this.deps.log.redactor;
    if (this.staged.length === 0) this.stagedRedactor = redactor;
    else if (this.stagedRedactor !== redactor) this.stagedRedactor = null;
    this.staged.push(...this.deps.log.clean(drafts, redactor));
    if (options.durable) await this.commit();
    else this.lingerSoon();
  }

  /** Write what is staged (a commit point). */
  commit(): Promise<void> {
    return this.inOrder(() => this.writeStaged());
  }

  /** Writes run one after another, in the order they were asked for (and reads wait for them: `loadThread`). */
  private inOrder(work: () => Promise<void>): Promise<void> {
    const done = this.commits.then(work);
    this.commits = done.catch(() => undefined);
    return done;
  }

  private async writeStaged(): Promise<void> {
    clearTimeout(this.linger);
    this.linger = undefined;
    const staged = this.staged;
    if (staged.length === 0) return;
    const cleanedBy = this.stagedRedactor ?? undefined;
    this.staged = [];
    this.stagedRedactor = undefined;
    // If the write fails the staged facts go with it rather than being re-staged behind later facts: what was
    // lost is redone by whoever drives the thread next (read-only and idempotent work only; the rest is durable).
    await this.write(this.sessionId, staged, undefined, cleanedBy);
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
    guard?: AppendGuard,
    cleanedBy?: Redactor,
  ): Promise<void> {
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
