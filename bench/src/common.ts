import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

/** Steps of the agent-loop workload: this many tool calls (one per model step), then a final answer. */
export const STEPS = 200;
/** Measured repetitions of the workload per system in a report (each a fresh session / thread). */
export const REPORT_RUNS = 3;
/**
 * Measured repetitions per system in this process, after one warm-up run. main.ts runs the compared step benchmarks
 * in rounds and sets `BENCH_RUNS` so that the rounds share REPORT_RUNS between them: a report pools as many runs as
 * before without taking rounds times as long.
 */
export const RUNS = Number(process.env.BENCH_RUNS) || REPORT_RUNS;
/** Small files the trivial `read` tool reads, round robin. */
export const FILE_COUNT = 10;

/** Context budget large enough that a transcript is never shortened (the peers always send the full history). */
export const CONTEXT_1M = 1_000_000;

export const POSTGRES_URL = process.env.OAR_BENCH_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/test';

const created: string[] = [];
process.on('exit', () => {
  for (const dir of created) rmSync(dir, { recursive: true, force: true });
});

/** A temp directory, removed when the process exits. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `oar-bench-${prefix}-`));
  created.push(dir);
  return dir;
}

/**
 * A temp directory holding a workspace of `files` small (8-line) text files under notes/ (FILE_COUNT by default;
 * the growth benchmark gives every one of its 1,000 steps its own file).
 */
export function makeWorkspace(prefix: string, files = FILE_COUNT): string {
  const dir = tempDir(prefix);
  mkdirSync(join(dir, 'notes'));
  for (let i = 0; i < files; i++) {
    const lines = Array.from({ length: 8 }, (_, n) => `note ${i} line ${n + 1}: the quick brown fox`);
    writeFileSync(join(dir, 'notes', fileName(i, files)), `${lines.join('\n')}\n`);
  }
  return dir;
}

/** The name of the file step `i` reads, round robin over a workspace of `files` files. */
export function fileName(i: number, files = FILE_COUNT): string {
  return `f${String(i % files).padStart(Math.max(3, String(files - 1).length), '0')}.txt`;
}

/** The workspace-relative path step `i` reads (in a workspace made with the same `files`). */
export function stepPath(i: number, files = FILE_COUNT): string {
  return `notes/${fileName(i, files)}`;
}

/**
 * Records when each model call starts and ends. The per-step runtime overhead is the gap between the end of one
 * model call and the start of the next: everything the framework does for a step (tool execution, persistence,
 * context assembly, bookkeeping) with the (zero-latency) model itself excluded. N model calls give N-1 gaps.
 */
export class StepClock {
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  /** Model time spent after a call returned (reading its stream), by the index of the call it belongs to. */
  private readonly streamed: number[] = [];

  start(): void {
    this.starts.push(performance.now());
  }

  end(): void {
    this.ends.push(performance.now());
  }

  /**
   * Time the model spent producing a part of a stream its call already returned. Why: a streaming call returns
   * at once and the model works while the runtime reads, so the gap after the call would charge the model's own
   * work to the runtime; the runtime's handling of each part stays counted.
   */
  model(ms: number): void {
    const call = this.ends.length - 1;
    this.streamed[call] = (this.streamed[call] ?? 0) + ms;
  }

  get calls(): number {
    return this.starts.length;
  }

  gaps(): number[] {
    const out: number[] = [];
    for (let i = 0; i + 1 < this.starts.length; i++) {
      out.push(this.starts[i + 1]! - this.ends[i]! - (this.streamed[i] ?? 0));
    }
    return out;
  }
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/**
 * The median with an even count's two middle values averaged. For a few rounds' ratios: `median` (nearest rank)
 * would call the lower of two rounds the median.
 */
export function midMedian(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const half = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[half]! : (sorted[half - 1]! + sorted[half]!) / 2;
}

export async function timed<T>(fn: () => Promise<T> | T): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - started };
}

export function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect) {
    collect();
    collect();
  }
}

export function log(message: string): void {
  process.stderr.write(`  ${message}\n`);
}

// ----- results ---------------------------------------------------------------------------------------------------

/** One system's result on the agent-loop workload. */
export interface StepResult {
  system: string;
  store: string;
  durable: string;
  steps: number;
  runs: number;
  /** Per-step overhead samples, pooled over the measured runs (ms). */
  p50: number;
  p99: number;
  mean: number;
  /** p50 of the first and of the last 20 steps: shows whether a step's cost grows with the step index. */
  firstP50: number;
  lastP50: number;
  /** Wall time of one whole run (median over runs, ms). */
  runMs: number;
  /** Records written per run (OAR: events; LangGraph: checkpoints + writes rows), when known. */
  records?: number;
  recordsLabel?: string;
  note?: string;
  /** What the statistics are computed from (each run's step gaps, each run's wall time): main.ts pools rounds. */
  samples?: { gaps: number[][]; runMs: number[] };
}

export interface ReplayResult {
  store: string;
  events: number;
  /** Time to read the session's events from the store (EventLog.read), median. */
  loadMs: number;
  /** Turns in the rebuilt thread and the replay() time over the loaded events, median (measured on SQLite only). */
  turns?: number;
  replayMs?: number;
}

export interface MemoryResult {
  phase: string;
  sessions: number;
  heapBeforeMb: number;
  heapAfterMb: number;
  bytesPerSession: number;
  rssAfterMb: number;
  ms: number;
}

export interface AppendResult {
  store: string;
  batch: number;
  events: number;
  ms: number;
  /**
   * How each commit was made: `flushed` waits for the disk (a command's append), `relaxed` does not (a worker's step
   * boundary of read-only work; packages/runtime/src/log/durability.ts).
   */
  commit: 'flushed' | 'relaxed';
}

/** One long OAR turn: whether a step's cost grows with the step index. */
export interface GrowthResult {
  store: string;
  steps: number;
  contextBudgetTokens: number;
  /** p50 per-step overhead (ms) of steps 1–20, 181–200 and 951–1000 (step n = the gap after model call n). */
  firstP50: number;
  midP50: number;
  lastP50: number;
  p50: number;
  p99: number;
  /** Wall time of the turn (ms) and events it wrote. */
  runMs: number;
  events: number;
  /** The last context.resolved event of the turn: its token estimate and how many omissions it listed. */
  lastContextTokens?: number;
  lastContextOmissions?: number;
}

/** Many sessions running turns at once on one runtime (a fresh runtime, SQLite file and sessions per row). */
export interface ConcurrencyResult {
  store: string;
  sessions: number;
  /** Delay added to every model call (ms). */
  latencyMs: number;
  turnsPerSession: number;
  /** Model calls per turn (reads + the answer). */
  stepsPerTurn: number;
  turns: number;
  /** Measured phase: from the first submitTurn until every session settled (ms). */
  ms: number;
  /** Event-loop delay over the measured phase (monitorEventLoopDelay), its timer resolution subtracted (ms). */
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  lagSamples: number;
  /** Highest RSS seen during the measured phase (sampled every 100 ms). */
  rssPeakMb: number;
}

/** Heap per session with `sessions` of `idleSessions` sessions in the middle of a turn (after a full GC). */
export interface ConcurrencyMemory {
  sessions: number;
  idleSessions: number;
  bytesPerIdleSession: number;
  /** Idle bytes per session plus the extra heap of the active sessions divided by their number. */
  bytesPerActiveSession: number;
  heapMb: number;
  rssMb: number;
}

/** `oar serve` under load (serve-load.ts): SSE clients following sessions that run turns, across a server kill. */
export interface ServeLoadResult {
  sessions: number;
  clients: number;
  seconds: number;
  turnsPerSecond: number;
  /** Durable events delivered to all clients together. */
  events: number;
  /** Sequences a client never got, and sequences it got twice (both must be 0). */
  gaps: number;
  duplicates: number;
  /** Client reconnections (after the server kill, mostly). */
  reconnects: number;
  /** From an event's commit timestamp to its arrival at a client, outside the restart window. */
  latencyP50Ms: number;
  latencyP99Ms: number;
  /** The server process's largest RSS and event-loop lag p99 (either run). */
  rssMb: number;
  lagP99Ms: number;
}

/** One row of the scale-out benchmark's throughput: `workers` `oar worker` processes on one workload. */
export interface ScaleOutThroughput {
  workload: string;
  /** Latency of every model call and of every tool call (ms). */
  modelMs: number;
  toolMs: number;
  workers: number;
  /** Threads per worker (`--concurrency`). */
  concurrency: number;
  /** Turns submitted (one per session). */
  turns: number;
  /** Turns completed in the steady-state window, its length, and the rate over it. */
  windowTurns: number;
  windowSeconds: number;
  turnsPerMinute: number;
  /** The whole machine's CPU busy share over the window (all cores). */
  cpuBusyPercent: number;
  /** The whole machine's CPU time over the window divided by the turns completed in it (ms). */
  cpuMsPerTurn: number;
  /** The `oar worker` processes' own CPU time over the window divided by the turns completed in it (ms). */
  workerCpuMsPerTurn: number;
}

/** From a signal to a worker to the first event another worker commits in the thread it drove. */
export interface ScaleOutTakeover {
  path: 'SIGKILL' | 'SIGSTOP' | 'SIGKILL, worker started after';
  leaseTtlMs: number;
  /** Per sample: ms from the signal to the first event of the new worker, and ms the lease had left at the signal. */
  ms: number[];
  leaseLeftMs: number[];
}

/** Start-up of one command line (startup.ts): wall time from spawn to exit, and its p50 ÷ `node -e 0`'s. */
export interface StartupResult {
  command: string;
  /** The command opens a store (the start-up target is about the commands that do not). */
  opensStore: boolean;
  runs: number;
  p50Ms: number;
  p90Ms: number;
  ratio: number;
}

/** Scale-out on PostgreSQL (scale-out.ts): real `oar worker` processes and an API node. */
export interface ScaleOutResult {
  concurrency: number;
  /** Tool steps per turn (then an answer). */
  toolSteps: number;
  cores: number;
  throughput: ScaleOutThroughput[];
  takeover: ScaleOutTakeover[];
  /** Event delivery to SSE clients of an API node while workers in other processes append (unless left out). */
  delivery?: {
    sessions: number;
    turns: number;
    workers: number;
    seconds: number;
    events: number;
    /** Latency samples (events committed after the client connected). */
    samples: number;
    gaps: number;
    duplicates: number;
    p50Ms: number;
    p99Ms: number;
    maxMs: number;
  };
  /** Run with SCALE_OUT_QUICK=1: small counts, not figures. */
  quick?: boolean;
}

export interface BenchOutput {
  steps?: StepResult[];
  replay?: ReplayResult[];
  memory?: MemoryResult[];
  append?: AppendResult[];
  growth?: GrowthResult[];
  concurrency?: ConcurrencyResult[];
  concurrencyMemory?: ConcurrencyMemory[];
  serveLoad?: ServeLoadResult[];
  scaleOut?: ScaleOutResult[];
  startup?: StartupResult[];
  /** Versions of what the benchmark talked to (database servers, SQLite library), by name. */
  versions?: Record<string, string>;
  notes?: string[];
}

/** Children print their result on one line with this prefix; everything else they print is progress. */
export const RESULT_PREFIX = '@@bench-result ';

export function emit(output: BenchOutput): void {
  process.stdout.write(`${RESULT_PREFIX}${JSON.stringify(output)}\n`);
}

/** Per-step statistics over the measured runs; `runs` holds each run's step gaps in step order. */
export function summarizeSteps(
  base: Omit<StepResult, 'p50' | 'p99' | 'mean' | 'runMs' | 'firstP50' | 'lastP50' | 'runs' | 'samples'>,
  runs: number[][],
  runMs: number[],
): StepResult {
  const all = runs.flat();
  return {
    ...base,
    runs: runs.length,
    p50: percentile(all, 50),
    p99: percentile(all, 99),
    mean: mean(all),
    firstP50: percentile(
      runs.flatMap((r) => r.slice(0, 20)),
      50,
    ),
    lastP50: percentile(
      runs.flatMap((r) => r.slice(-20)),
      50,
    ),
    runMs: median(runMs),
    samples: { gaps: runs, runMs },
  };
}

/**
 * One system's results of several rounds as one: the statistics over the runs of all of them; what describes the
 * system (records, note) is the first round's.
 */
export function poolSteps(rounds: readonly StepResult[]): StepResult {
  const { p50, p99, mean, runMs, firstP50, lastP50, runs, samples, ...base } = rounds[0]!;
  if (rounds.length === 1) return rounds[0]!;
  return summarizeSteps(
    base,
    rounds.flatMap((r) => r.samples?.gaps ?? []),
    rounds.flatMap((r) => r.samples?.runMs ?? []),
  );
}
