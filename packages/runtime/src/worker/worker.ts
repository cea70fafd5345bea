import { type OarError, oarError } from '@oar/protocol';
import { runnerTurn } from '../agent-runners/host.js';
import type { ArtifactRetention } from '../config/retention.js';
import { JobChangedError, jobItemEnd, jobRaceBackoff, MAX_JOB_RETRIES } from '../facts/job-items.js';
import { bothGuards, queueChanged, threadUnchanged } from '../facts/queue.js';
import { MAX_TASK_RETRIES, TaskChangedError, taskTurnEnd } from '../facts/task-end.js';
import { OarRuntimeError, runtimeClosing, toOarError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { AppendGuard } from '../log/draft.js';
import type { SessionChange } from '../log/notifier.js';
import { Tracing } from '../log/tracing.js';
import { advance } from '../loop/thread-runner.js';
import { failTurn } from '../loop/turn-end.js';
import { type Limiter, ProviderLimiter } from '../models/provider-limits.js';
import { nextTurn, nextTurnNotBefore, type ThreadState, type ThreadView } from '../read-models/thread-state.js';
import { sessionWork } from '../read-models/work.js';
import { isStoreFault, isTransientStoreFault } from '../store/faults.js';
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
import { ArtifactSweeper } from './artifact-sweeper.js';
import type { Driver, WorkerDeps } from './deps.js';
import { actOnProcessRequests } from './process-requests.js';
import { reconcileLost } from './reconcile.js';
import { recoveryDrafts } from './recovery.js';
import { stepTurn } from './step-scheduler.js';
import { ThreadEngine } from './thread-engine.js';

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
  /**
   * How long a thread is retried while the store is unavailable before the fault is final for its turn (default
   * 30 s: an embedded `oar run`). A long-lived worker (`oar worker`, `oar serve`) rides out as long as it waits for
   * the store at start (`--store-wait-seconds`, 300 s).
   */
  storeGiveUpMs?: number;
  /**
   * Sweep the store's artifacts by this retention policy every `sweepEveryMinutes` (docs/reliability.md "Artifact
   * retention"); absent: this worker expires nothing. Given to long-lived workers (`oar serve`, `oar worker`).
   */
  artifactRetention?: ArtifactRetention;
}

export const DEFAULT_LEASE_TTL_MS = 30_000;

export const DEFAULT_LINGER_MS = 100;

/**
 * How a worker rides out a store that is briefly unavailable (dropped connections, a failover): the thread is
 * driven again after a pause that doubles from 100 ms up to 2 s, and recovery on the new claim settles the
 * interrupted step under the usual durability rules. After `storeGiveUpMs` (30 s by default) of nothing but failures
 * the fault is final.
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
  private readonly storeGiveUpMs: number;
  /** The lost calls whose tool or service this process asked already (worker/reconcile.ts): asked once each. */
  private readonly reconcileAsked = new Set<string>();
  /** Threads with work found while every driver was busy, oldest first: thread id → session id. */
  private readonly waiting = new Map<string, string>();
  /** Threads whose next turn waits until a time (`kickLater`). */
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private closed = false;
  /** Draining: no new thread is claimed, and each driven thread stops after its current step. */
  private draining = false;
  private readonly unlisten: () => void;
  private readonly timer: NodeJS.Timeout;
  /** The artifact retention sweep, when the worker was given a policy. */
  readonly sweeper: ArtifactSweeper | undefined;

  constructor(
    private readonly deps: WorkerDeps,
    options: WorkerOptions = {},
  ) {
    this.owner = options.owner ?? ownerName(newId('wrk'));
    this.scope = options.sessions === 'all' || options.sessions === undefined ? 'all' : new Set(options.sessions);
    this.ttl = options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
    this.concurrency = options.concurrency ?? Number.POSITIVE_INFINITY;
    this.lingerMs = options.lingerMs ?? DEFAULT_LINGER_MS;
    this.storeGiveUpMs = options.storeGiveUpMs ?? STORE_RETRY.giveUpMs;
    this.tracing = deps.tracing ?? new Tracing();
    this.limiter = deps.limiter ?? new ProviderLimiter();
    this.unlisten = deps.notifier.listen((change) => this.onChange(change));
    this.timer = setInterval(() => void this.reclaimExpired(), options.pollMs ?? 1000);
    this.timer.unref();
    this.sweeper = options.artifactRetention ? new ArtifactSweeper(deps.log, options.artifactRetention) : undefined;
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
   * Look at a session's threads: carry out the requests for processes this OS process runs, stop the work of a
   * driven thread whose turn has an interrupt request, and drive every thread that has something to do and nobody
   * holding it.
   */
  async look(sessionId: string): Promise<void> {
    if (this.closed || !this.drives(sessionId)) return;
    // Requests for the processes this OS process runs, whoever holds their thread (worker/process-requests.ts): not
    // waited for — a terminate waits out its grace period, which must not hold up driving the threads.
    void actOnProcessRequests(this.deps, sessionId).catch(() => undefined);
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

  /**
   * Stop the driven thread's running work if an interrupt request for its turn is committed — as `look` does for a
   * request another process wrote, for one this worker's own drivers wrote. One thread read, only when driven.
   */
  async actOnInterrupt(sessionId: string, threadId: string): Promise<void> {
    const driver = this.drivers.get(threadId);
    if (!driver || driver.controller.signal.aborted) return;
    const thread = await this.deps.log.thread(sessionId, threadId);
    if (interruptPending(thread) && !driver.controller.signal.aborted) {
      driver.controller.abort(new Error(thread.interrupt?.reason ?? 'interrupted'));
    }
  }

  /** Kick the thread once `ms` have passed (one timer per thread: a later call replaces it). */
  private kickLater(sessionId: string, threadId: string, ms: number): void {
    clearTimeout(this.timers.get(threadId));
    const timer = setTimeout(() => {
      this.timers.delete(threadId);
      this.kick(sessionId, threadId);
    }, ms);
    timer.unref();
    this.timers.set(threadId, timer);
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
      const taken = await engine.loadThread(sessionId, threadId);
      const recovered = recoveryDrafts(taken);
      if (recovered.drafts.length > 0) await engine.append(sessionId, recovered.drafts, { durable: true });
      // What was lost, in this takeover or an earlier one, and a tool can look up by key: ask it before going on.
      const settled = recovered.drafts.length > 0 ? await engine.loadThread(sessionId, threadId) : taken;
      if (settled.unreconciled?.length) await this.reconcile(engine, threadId, driver.controller.signal);
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
      if (fence && !driver.lost) {
        const wakeAt = idleSequence > 0 ? driver.wakeAt : undefined;
        await releaseLease(db, fence, idleSequence, wakeAt).catch(() => undefined);
      }
      this.drivers.delete(threadId);
      // A kick that came while this driver was leaving: drive again (not after a failure, which would only repeat).
      if (driver.yielded && !this.closed && !this.draining) this.waiting.set(threadId, sessionId);
      else if (driver.again && fence && !failed && !driver.lost && !this.closed) this.kick(sessionId, threadId);
      this.nextWaiting();
    }
  }

  /**
   * Ask the tools of lost calls whether they took effect, under the session's binding (the tools as bound now). A
   * binding that cannot be bound skips this: the thread's next step meets the same failure and records it.
   */
  private async reconcile(engine: ThreadEngine, threadId: string, signal: AbortSignal): Promise<void> {
    const thread = await engine.prepare(threadId).catch(() => undefined);
    if (thread) await reconcileLost(engine, thread, signal, this.reconcileAsked);
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
    if (isTransientStoreFault(fault) && Date.now() - retry.since < this.storeGiveUpMs) {
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
      // The next turn waits (a job item's retry backoff): the thread is left idle and driven again when it may start.
      const notBefore = thread.activeTurnId === undefined ? nextTurnNotBefore(thread) : undefined;
      const waitMs = notBefore ? Date.parse(notBefore) - Date.now() : 0;
      if (waitMs > 0) {
        await engine.commit();
        this.kickLater(sessionId, threadId, waitMs);
        // On the released lease too: if this worker is gone by then, any other one's poll takes the thread up.
        driver.wakeAt = Date.parse(notBefore as string);
        return thread.lastSequence;
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
      if ((await this.tracing.drive(scope, () => advance(engine, thread, runnerTurn))).type === 'again') continue;
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
      if (!turn) await failUnstartable(engine, thread, error);
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
    for (const timer of this.timers.values()) clearTimeout(timer);
    await this.sweeper?.stop();
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
 * Fail the turn a thread would start next, which cannot start; a task's turn (start_task) takes its task with it,
 * failed, never started — computed again while that task changes under it.
 */
async function failUnstartable(engine: ThreadEngine, thread: ThreadView, error: OarError): Promise<void> {
  const next = nextTurn(thread);
  if (!next) return;
  const rest = thread.queue.filter((q) => q.turnId !== next.turnId);
  const dequeued = rest.length < thread.queue.length;
  const pending = thread.turns.find((t) => t.turnId === next.turnId);
  for (let attempt = 1; ; attempt++) {
    const task = pending?.task ? await taskTurnEnd(engine, thread, pending, { status: 'failed', error }) : undefined;
    // A job item's attempt that cannot start ends as any failed attempt does (facts/job-items.ts).
    const job = pending ? await jobItemEnd(engine, thread, pending, { error }) : undefined;
    try {
      await engine.append(
        engine.sessionId,
        [
          ...(dequeued ? [queueChanged(thread, rest, 'dequeued', next.turnId)] : []),
          { type: 'turn.failed', threadId: thread.threadId, turnId: next.turnId, status: 'failed', payload: { error } },
          ...(task?.drafts ?? []),
          ...(job?.drafts ?? []),
        ],
        { guard: bothGuards(bothGuards(threadUnchanged(thread), task?.guard), job?.guard) as AppendGuard },
      );
      for (const draft of job?.drafts ?? []) {
        if (draft.type === 'turn.submitted' && draft.threadId) engine.wake(engine.sessionId, draft.threadId);
      }
      return;
    } catch (failure) {
      const raced =
        (failure instanceof TaskChangedError && attempt < MAX_TASK_RETRIES) ||
        (failure instanceof JobChangedError && attempt < MAX_JOB_RETRIES);
      if (!raced) throw failure;
      if (failure instanceof JobChangedError) await jobRaceBackoff(attempt);
    }
  }
}
