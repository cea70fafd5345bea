import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import type { Runtime } from '@oar/runtime';
import type { ModelScript } from '@oar/runtime/testing';
import {
  type BenchOutput,
  type ConcurrencyMemory,
  type ConcurrencyResult,
  gc,
  log,
  makeWorkspace,
  stepPath,
} from './common.js';
import { type LanguageModel, type OpenedStore, openSqlite, scriptedRuntime, wrapModel } from './oar.js';

/** Sessions running at once, and the delay added to every model call (ms). */
export const SESSION_COUNTS = [100, 500, 1_000];
const LATENCIES_MS = [0, 50];
/** A turn: this many `read` steps, then an answer (four model calls). */
const READS_PER_TURN = 3;
/**
 * Measured turns per session (one after the other in each session, all sessions at once): one for 500 and 1,000
 * sessions (the least that has every session run a turn), two for 100 sessions so that those rows last a few
 * seconds. With these the benchmark took 2–2.5 minutes on 2 cores at its introduction (a 1,000-session round of
 * one turn each 30–45 s); raise them when the runtime gets faster.
 */
const TURNS_PER_SESSION: Record<number, number> = { 100: 2, 500: 1, 1000: 1 };
/** monitorEventLoopDelay's timer interval (ms); every sample includes it, so it is subtracted from the figures. */
export const LAG_RESOLUTION_MS = 10;
const INPUT = 'Read three notes, then answer.';

const mb = (bytes: number) => bytes / (1024 * 1024);

/** Each session's turns: turn t reads `reads` of the workspace's files, then answers. */
export function turnScript(turns: number, reads = READS_PER_TURN): ModelScript {
  const steps: unknown[] = [];
  for (let t = 0; t < turns; t++) {
    for (let k = 0; k < reads; k++) {
      const i = t * reads + k;
      steps.push({
        protocol: {
          kind: 'act',
          calls: [{ id: `read_${i}`, type: 'tool', name: 'read', args: { filePath: stepPath(i) } }],
        },
      });
    }
    steps.push({ protocol: { kind: 'answer', message: `Turn ${t + 1}: read ${reads} note(s).` } });
  }
  return { description: `bench: ${turns} turn(s) of ${reads} read(s) and an answer`, steps } as ModelScript;
}

/**
 * Wraps the scripted model (one instance serves every thread: it replays the step named by the thread's durable
 * model-call count, `providerOptions.oar.modelCall`) with a fixed latency, and can hold model calls until
 * released, so that many sessions are in the middle of a turn at the same time.
 */
class ModelGate {
  holding = false;
  latencyMs = 0;
  private held: (() => void)[] = [];

  wrap(model: LanguageModel): LanguageModel {
    return wrapModel(model, async (call) => {
      await this.before();
      return call();
    });
  }

  private async before(): Promise<void> {
    if (this.holding) await new Promise<void>((resolve) => this.held.push(resolve));
    if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
  }

  /** Resolves once `count` calls are held; rejects after `timeoutMs` (a turn that failed never gets there). */
  async waitHeld(count: number, timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (this.held.length < count) {
      if (performance.now() > deadline) throw new Error(`only ${this.held.length} of ${count} turns reached the gate`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  release(): void {
    this.holding = false;
    for (const resolve of this.held.splice(0)) resolve();
  }
}

function heapUsed(): number {
  gc();
  return process.memoryUsage().heapUsed;
}

/** A fresh SQLite file and a runtime on it, warmed up with one session's turns (statements, JIT). */
async function open(prefix: string, script: ModelScript, gate: ModelGate, warmTurns: number) {
  const opened = await openSqlite(prefix);
  const { runtime } = await scriptedRuntime(opened.store, script, {
    workspace: makeWorkspace(prefix),
    wrapModel: (model) => gate.wrap(model),
  });
  const warm = await runtime.createSession({ title: 'warm-up' });
  for (let t = 0; t < warmTurns; t++) {
    await runtime.submitTurn({ sessionId: warm.sessionId, input: INPUT });
    await runtime.settled(warm.sessionId);
  }
  return { opened, runtime };
}

async function createSessions(runtime: Runtime, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push((await runtime.createSession({ title: `session ${i}` })).sessionId);
  return ids;
}

/** A benchmark of failing turns measures nothing: every turn on the store must have completed. */
async function checkCompleted(opened: OpenedStore, expected: number): Promise<void> {
  const counts = await opened.store.db
    .selectFrom('oar_events')
    .select(['type', (eb) => eb.fn.countAll<number>().as('n')])
    .where('type', 'in', ['turn.completed', 'turn.failed'])
    .groupBy('type')
    .execute();
  const completed = Number(counts.find((c) => c.type === 'turn.completed')?.n ?? 0);
  if (completed !== expected) {
    throw new Error(`expected ${expected} completed turns, found ${completed} (${JSON.stringify(counts)})`);
  }
}

/**
 * Heap per session on one runtime: 1,000 sessions created (idle), then 100, 500 and 1,000 of them in a turn at
 * once — each turn held at its model call, so every one has started (turn and step recorded, context assembled)
 * and none has finished — with the heap taken after a full GC at each level. Measured once (it does not depend on
 * the model's latency) on its own runtime, so the throughput runs below start with fresh sessions.
 */
async function measureMemory(): Promise<ConcurrencyMemory[]> {
  const gate = new ModelGate();
  const total = Math.max(...SESSION_COUNTS);
  // Every turn here is a single answer step (each session's first model call, held).
  const { opened, runtime } = await open('concurrency-memory', turnScript(1, 0), gate, 1);
  try {
    const started = performance.now();
    const heapBase = heapUsed();
    const ids = await createSessions(runtime, total);
    const heapIdle = heapUsed();
    const bytesPerIdleSession = (heapIdle - heapBase) / total;
    const memory: ConcurrencyMemory[] = [];
    gate.holding = true;
    let active = 0;
    for (const sessions of SESSION_COUNTS) {
      await Promise.all(
        ids.slice(active, sessions).map((sessionId) => runtime.submitTurn({ sessionId, input: INPUT })),
      );
      active = sessions;
      await gate.waitHeld(sessions, 300_000);
      const heapActive = heapUsed();
      memory.push({
        sessions,
        idleSessions: total,
        bytesPerIdleSession,
        bytesPerActiveSession: bytesPerIdleSession + (heapActive - heapIdle) / sessions,
        heapMb: mb(heapActive),
        rssMb: mb(process.memoryUsage.rss()),
      });
    }
    gate.release();
    await Promise.all(ids.map((sessionId) => runtime.settled(sessionId)));
    await checkCompleted(opened, 1 + total);
    for (const m of memory) {
      log(
        `concurrency memory: ${m.sessions} of ${total} sessions in a turn: ${Math.round(m.bytesPerActiveSession)} ` +
          `B/active session (idle ${Math.round(m.bytesPerIdleSession)} B), heap ${m.heapMb.toFixed(1)} MB, RSS ${m.rssMb.toFixed(0)} MB`,
      );
    }
    log(`concurrency memory phase: ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return memory;
  } finally {
    await runtime.close();
    await opened.dispose();
  }
}

/** `sessions` fresh sessions on a fresh runtime, each running its turns one after the other, all at once. */
async function measure(sessions: number, latencyMs: number): Promise<ConcurrencyResult> {
  const turnsPerSession = TURNS_PER_SESSION[sessions] ?? 1;
  const gate = new ModelGate();
  const { opened, runtime } = await open(`concurrency-${sessions}`, turnScript(turnsPerSession), gate, 1);
  try {
    const ids = await createSessions(runtime, sessions);
    gate.latencyMs = latencyMs;
    gc();
    const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
    lag.enable();
    let rssPeak = process.memoryUsage.rss();
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage.rss());
    }, 100);
    lag.reset();
    const started = performance.now();
    await Promise.all(
      ids.map(async (sessionId) => {
        for (let t = 0; t < turnsPerSession; t++) {
          await runtime.submitTurn({ sessionId, input: INPUT });
          await runtime.settled(sessionId);
        }
      }),
    );
    const ms = performance.now() - started;
    lag.disable();
    clearInterval(sampler);
    await checkCompleted(opened, 1 + sessions * turnsPerSession);

    const lagMs = (ns: number) => Math.max(0, ns / 1e6 - LAG_RESOLUTION_MS);
    const result: ConcurrencyResult = {
      store: opened.label,
      sessions,
      latencyMs,
      turnsPerSession,
      stepsPerTurn: READS_PER_TURN + 1,
      turns: sessions * turnsPerSession,
      ms,
      lagP50Ms: lagMs(lag.percentile(50)),
      lagP99Ms: lagMs(lag.percentile(99)),
      lagMaxMs: lagMs(lag.max),
      lagSamples: lag.count,
      rssPeakMb: mb(rssPeak),
    };
    log(
      `concurrency ${sessions} sessions, model ${latencyMs} ms: ${result.turns} turns in ${(ms / 1000).toFixed(1)} s ` +
        `(${((result.turns / ms) * 1000).toFixed(1)} turns/s), event-loop lag p50 ${result.lagP50Ms.toFixed(0)} ` +
        `p99 ${result.lagP99Ms.toFixed(0)} max ${result.lagMaxMs.toFixed(0)} ms (${result.lagSamples} samples), ` +
        `RSS peak ${result.rssPeakMb.toFixed(0)} MB`,
    );
    return result;
  } finally {
    await runtime.close();
    await opened.dispose();
  }
}

/**
 * Many sessions on one runtime in one process, on one SQLite file: N sessions each running short turns (three
 * `read` steps and an answer) at once, with a scripted model that answers at once or after 50 ms. Reports turns/s,
 * event-loop delay over the measured phase, peak RSS, and heap per idle and per active session.
 */
export async function run(): Promise<BenchOutput> {
  const notes: string[] = [];
  if (!(globalThis as { gc?: unknown }).gc)
    notes.push('concurrency: run without --expose-gc, heap figures include garbage');
  const concurrencyMemory = await measureMemory();
  const concurrency: ConcurrencyResult[] = [];
  for (const latencyMs of LATENCIES_MS) {
    for (const sessions of SESSION_COUNTS) concurrency.push(await measure(sessions, latencyMs));
  }
  return { concurrency, concurrencyMemory, notes };
}
