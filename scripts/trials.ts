/**
 * Fault trials: the real `oar` binary, killed and raced at random points of durable action graphs, then resumed;
 * afterwards the log and the counted side effects must tell one consistent story.
 *
 *   npm run trials -- --store sqlite|postgres --count N [--seed S] [--parallel P] [--kinds kill,race,…] [--json]
 *                     [--job-items N] [--job-concurrency C]
 *
 * Each trial gets its own temp directory (and, on PostgreSQL, its own schema and application_name), a seeded
 * random action graph of counting tools (scripts/trials-tools.mjs: non-idempotent, idempotent, and read-only
 * concurrency-safe ones, with dependencies and delays) answered by the scripted model, and one of these faults:
 *
 *   kill     `oar run` is killed with SIGKILL at a random point; then `oar resume SESSION` until the turn ends.
 *   race     `oar run` and, after a random delay, `oar resume SESSION` drive one session at once; in half of the
 *            trials the first process is also killed with SIGKILL at a random point.
 *   resumes  `oar run` is killed with SIGKILL, then two `oar resume SESSION` start at the same moment.
 *   drop     (PostgreSQL) every connection of the trial's processes is terminated by the server
 *            (pg_terminate_backend, scoped by application_name) one to three times mid-turn.
 *   full     (SQLite, root) the store's disk fills at a random point, then has room again.
 *   job      a job of `--job-items` items (default 40) run by `oar jobs start`, `oar worker`s or `oar resume`, its
 *            drivers killed with SIGKILL one to three times; the job checks below (scripts/trials-jobs.ts).
 *
 * After every fault, `oar resume SESSION` runs until every submitted turn has ended (at most 5 times). Then the
 * checks, each of which fails the run:
 *
 *   sequence      per session, sequences 1..N without a gap, and the session row's last_sequence is N;
 *   lost_events   every event any process printed (`--json`, only durable events are printed) is in the log, unchanged;
 *   terminal      at most one ending per turn, per tool call and per task (a retry reopens a task);
 *   dangling      once a turn has ended, every tool call it started has ended too (result, failure or `lost`);
 *   replay        the read models equal a replay of the log, with no contradiction;
 *   side_effects  per action: a non-idempotent action has no effect without a `tool.started` (its start is written
 *                 ahead), no more effects than starts, and starts at most once; an idempotent one may have more
 *                 effects than starts (its start is committed with the step, so a crash before that commit loses
 *                 the attempt's facts and the work is redone) but is recorded once it had an effect; nothing started
 *                 again after its result; a result has its effect;
 *   finished      every submitted turn has ended once the resumes are done;
 *   hang          no `oar` process outlived its time limit (60 s; it is then killed), and a job ended in time;
 *   job_items, job_end, job_counts, job_attempts   (job trials) every item completed exactly once, the job
 *                 completed once and last, its read model's counts equal to the events, no item over its attempts
 *                 and no attempt failed (the job's model never fails).
 *
 * Exit 0 when every check of every trial passed, 1 otherwise, 2 on a usage error or an unreachable store.
 * Timings are random but the graphs, the fault kinds and the kill points (event counts and delays) follow the seed,
 * so `--seed S` repeats a run's decisions (not the machine's scheduling).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { RuntimeEvent } from '@oar/protocol';
import { Runtime, Store } from '@oar/runtime';
import pg from 'pg';
import {
  checkJob,
  DEFAULT_JOB_ITEMS,
  type JobRun,
  type JobTrialOptions,
  type JobTrialSummary,
  planJob,
  runJob,
  writeJobProject,
} from './trials-jobs.js';

const ROOT = resolve(import.meta.dirname, '..');
const OAR = join(ROOT, 'packages/cli/bin/oar.js');
const TOOLS = join(ROOT, 'scripts/trials-tools.mjs');
const DEFAULT_POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
/** A process that has not exited after this long is killed and the trial fails its `hang` check. */
const PROCESS_LIMIT_MS = 60_000;
const MAX_RESUMES = 5;

export const CHECKS = [
  'sequence',
  'lost_events',
  'terminal',
  'dangling',
  'replay',
  'side_effects',
  'finished',
  'hang',
  'job_items',
  'job_end',
  'job_counts',
  'job_attempts',
] as const;
export type Check = (typeof CHECKS)[number];
export const KINDS = ['kill', 'race', 'resumes', 'drop', 'full', 'job'] as const;
export type Kind = (typeof KINDS)[number];
type StoreKind = 'sqlite' | 'postgres';

export interface TrialResult {
  trial: number;
  kind: Kind;
  /** How the fault was placed: after event #k (+ms), or ms after the spawn. */
  faultAt: string;
  sessions: number;
  actions: number;
  /** Processes killed with SIGKILL by the trial (a process that had already exited is not counted). */
  killed: number;
  /** PostgreSQL connections terminated by the server at the trial's request. */
  dropped: number;
  resumes: number;
  /** Exit codes of every `oar` process (`SIGKILL` for the ones the trial killed, `crash` for an uncaught exception). */
  exits: string[];
  /** `oar` processes that died of an uncaught exception (Node.js printed the stack). */
  crashes: number;
  /** The fault came before any turn was submitted (start-up, session creation): nothing to resume. */
  beforeTurn: boolean;
  /** Actions recorded as `lost` (interrupted non-idempotent ones). */
  lost: number;
  /** Actions started again (attempt > 1): interrupted idempotent ones, and those idempotent by key. */
  reruns: number;
  /** Of those, the ones retried under the key of an earlier attempt (idempotent by key). */
  keyRetries: number;
  turnsCompleted: number;
  turnsFailed: number;
  /** Codes of failed turns (e.g. a store error after dropped connections). */
  failures: string[];
  /** Side effects counted in counts.txt. */
  effects: number;
  problems: { check: Check; message: string }[];
  /** What processes that exited with a code other than 0 said: their result line's error, or stderr (bounded). */
  notes: string[];
  /** Failed trials: what the processes said on stderr (bounded). */
  stderr?: string;
  /** With --keep, a failed trial's directory (and schema) are left for inspection. */
  kept?: string;
  /** A job trial: the job, how it was driven, what its log holds. */
  job?: JobTrialSummary;
  durationMs: number;
}

export interface TrialsSummary {
  store: StoreKind;
  seed: number;
  count: number;
  ok: boolean;
  byKind: Record<string, Omit<KindTotals, 'kind'>>;
  failedChecks: Record<Check, number>;
  /** The run in one line, as docs/reliability.md quotes it: what went wrong (trials per check), then what happened. */
  line: string;
  trials: TrialResult[];
}

interface KindTotals {
  kind: Kind;
  trials: number;
  /** Trials whose fault came before any turn was submitted. */
  beforeTurn: number;
  killed: number;
  dropped: number;
  resumes: number;
  lost: number;
  reruns: number;
  keyRetries: number;
  turnsCompleted: number;
  turnsFailed: number;
  crashes: number;
  /** Exits other than 0 (answered), 1 (turn failed), 3 (waiting) and the trial's own SIGKILLs. */
  abnormalExits: number;
  effects: number;
  failed: number;
}

// ----- seeded randomness ------------------------------------------------------------------------------------

/** mulberry32: a small seeded PRNG, so a seed repeats the trials' decisions. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const between = (random: () => number, min: number, max: number) => min + Math.floor(random() * (max - min + 1));
const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

// ----- the action graph -------------------------------------------------------------------------------------

type ToolName = 'count' | 'count_idem' | 'count_shared' | 'count_by_key';
const IDEMPOTENT: Record<ToolName, boolean> = {
  count: false,
  count_idem: true,
  count_shared: true,
  count_by_key: false,
};
/** Deduplicated by its idempotency key: retried after a crash under the same key, counted at most once. */
const BY_KEY: Record<ToolName, boolean> = { count: false, count_idem: false, count_shared: false, count_by_key: true };

interface PlannedAction {
  id: string;
  tool: ToolName;
}

/** 1-3 model steps of 1-4 calls each (labels = action ids, unique in the session), then an answer. */
function plan(random: () => number): { steps: unknown[]; actions: PlannedAction[]; expectedEvents: number } {
  const steps: unknown[] = [];
  const actions: PlannedAction[] = [];
  const stepCount = between(random, 1, 3);
  for (let s = 1; s <= stepCount; s++) {
    const calls: Record<string, unknown>[] = [];
    const n = between(random, 1, 4);
    for (let j = 0; j < n; j++) {
      const id = `s${s}${'abcd'[j]}`;
      const tool = pick(random, [
        'count',
        'count',
        'count_idem',
        'count_shared',
        'count_shared',
        'count_by_key',
      ] as const);
      const delayMs = random() < 0.2 ? 0 : between(random, 20, 400);
      const earlier = calls.map((c) => c.id as string);
      const depends = earlier.length > 0 && random() < 0.5 ? pick(random, earlier) : undefined;
      calls.push({ id, type: 'tool', name: tool, args: { label: id, delayMs }, ...(depends ? { depends } : {}) });
      actions.push({ id, tool });
    }
    steps.push({ protocol: { kind: 'act', message: `step ${s}`, calls } });
  }
  steps.push({ protocol: { kind: 'answer', message: 'all counted' } });
  // Roughly: session and turn start, per step a model call and a task, per action a permission and a start/result.
  return { steps, actions, expectedEvents: 8 + stepCount * 9 + actions.length * 4 };
}

// ----- processes ----------------------------------------------------------------------------------------------

export interface Proc {
  role: string;
  child: ChildProcess;
  out: string;
  err: string;
  exited: boolean;
  killedByTrial: boolean;
  hung: boolean;
  /** Killed (and `hung`) when it runs longer than this. */
  limitMs: number;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const live = new Set<Proc>();
/** The directories and schemas of trials under way, removed on Ctrl-C too. */
const cleanups = new Set<() => Promise<void>>();

function start(cwd: string, role: string, args: string[], limitMs = PROCESS_LIMIT_MS): Proc {
  const child = spawn(process.execPath, [OAR, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const proc: Proc = {
    role,
    child,
    out: '',
    err: '',
    exited: false,
    killedByTrial: false,
    hung: false,
    limitMs,
    exit: Promise.resolve({ code: null, signal: null }),
  };
  child.stdout?.on('data', (chunk: Buffer) => {
    proc.out += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    proc.err += chunk.toString();
  });
  live.add(proc);
  const limit = setTimeout(() => {
    proc.hung = true;
    child.kill('SIGKILL');
  }, limitMs);
  proc.exit = new Promise((done) =>
    child.on('close', (code, signal) => {
      clearTimeout(limit);
      proc.exited = true;
      live.delete(proc);
      done({ code, signal });
    }),
  );
  return proc;
}

function kill(proc: Proc): boolean {
  if (proc.exited) return false;
  proc.killedByTrial = true;
  return proc.child.kill('SIGKILL');
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Complete NDJSON lines printed so far (a line cut by a kill is left out). */
function printed(proc: Proc): Record<string, unknown>[] {
  const lines = proc.out.split('\n').slice(0, -1);
  const parsed: Record<string, unknown>[] = [];
  for (const line of lines) {
    if (!line.startsWith('{')) continue;
    try {
      parsed.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // not JSON: progress text
    }
  }
  return parsed;
}
const printedEvents = (proc: Proc) =>
  printed(proc).filter(
    (l) => typeof l.type === 'string' && typeof l.sequence === 'number',
  ) as unknown as RuntimeEvent[];

/** Resolve once `proc` has printed `n` events, or exited. */
async function afterEvents(proc: Proc, n: number): Promise<void> {
  while (!proc.exited && (proc.out.match(/\n/g)?.length ?? 0) < n) await sleep(5);
}

async function sessionIdOf(proc: Proc): Promise<string | undefined> {
  await afterEvents(proc, 1);
  return printedEvents(proc)[0]?.sessionId;
}

/**
 * A fault point chosen by the seed: mostly "after event k (+ a few ms)"; sometimes "t ms after the first event";
 * sometimes (only from event 1) "t ms after the spawn", which lands in start-up: opening the store, migrations.
 */
function faultPoint(
  random: () => number,
  expectedEvents: number,
  firstEvent = 1,
): { label: string; wait: (p: Proc) => Promise<void> } {
  const draw = random();
  if (firstEvent === 1 && draw < 0.1) {
    const ms = between(random, 0, 2500);
    return { label: `${ms}ms after spawn`, wait: () => sleep(ms) };
  }
  if (draw < 0.25) {
    const ms = between(random, 0, 3000);
    return {
      label: `#${firstEvent}+${ms}ms`,
      wait: async (p) => {
        await afterEvents(p, firstEvent);
        await sleep(ms);
      },
    };
  }
  const k = between(random, firstEvent, expectedEvents);
  const extra = between(random, 0, 150);
  return {
    label: `#${k}+${extra}ms`,
    wait: async (p) => {
      await afterEvents(p, k);
      await sleep(extra);
    },
  };
}

// ----- stores -------------------------------------------------------------------------------------------------

interface TrialStore {
  /** The URL the trial's `oar` processes use (undefined: SQLite at .oar/oar.db in the trial directory). */
  url: string | undefined;
  /** The URL the checks read with (PostgreSQL: another application_name, so a drop never hits it). */
  readUrl: string;
  applicationName?: string;
  dispose(): Promise<void>;
}

function withParams(url: string, params: Record<string, string>): string {
  const parsed = new URL(url);
  for (const [key, value] of Object.entries(params)) parsed.searchParams.set(key, value);
  return parsed.toString();
}

class Postgres {
  readonly admin: pg.Pool;
  constructor(readonly url: string) {
    this.admin = new pg.Pool({
      connectionString: withParams(url, { application_name: 'oar_trials_admin' }),
      max: 2,
      connectionTimeoutMillis: 5000,
    });
    this.admin.on('error', () => undefined);
  }

  store(name: string): TrialStore {
    const applicationName = name;
    return {
      url: withParams(this.url, { schema: name, application_name: applicationName }),
      readUrl: withParams(this.url, { schema: name, application_name: `${name}_reader` }),
      applicationName,
      dispose: async () => {
        await this.admin.query(`drop schema if exists "${name}" cascade`);
      },
    };
  }

  /** Terminate every server connection of one trial's processes (and nobody else's). */
  async drop(applicationName: string): Promise<number> {
    const result = await this.admin.query(
      `select pg_terminate_backend(pid) as terminated from pg_stat_activity
        where datname = current_database() and application_name = $1 and pid <> pg_backend_pid()`,
      [applicationName],
    );
    return result.rows.filter((r) => r.terminated === true).length;
  }
}

// ----- reading the log ----------------------------------------------------------------------------------------

interface SessionLog {
  sessionId: string;
  events: RuntimeEvent[];
  lastSequence: number;
  replay: { equal: boolean; differences: string[]; contradictions: { sequence: number; reason: string }[] };
}

/** Every session of the trial's store, read as `oar events` / `oar replay` do (no worker; writes nothing). */
async function readLogs(dir: string, url: string): Promise<SessionLog[]> {
  const store = await Store.open(url, { cwd: dir });
  try {
    const runtime = await Runtime.create({
      store,
      workspaceRoot: dir,
      worker: false,
      resumeOnStart: false,
      runtimeId: 'rt_trials_reader',
      model: () => {
        throw new Error('the trials only read');
      },
    });
    try {
      const logs: SessionLog[] = [];
      for (const { sessionId } of await runtime.listSessions()) {
        const row = await store.db
          .selectFrom('oar_sessions')
          .select('last_sequence')
          .where('id', '=', sessionId)
          .executeTakeFirst();
        logs.push({
          sessionId,
          events: await runtime.log.read(sessionId),
          lastSequence: Number(row?.last_sequence ?? -1),
          replay: await runtime.replaySession(sessionId),
        });
      }
      return logs;
    } finally {
      await runtime.close();
    }
  } finally {
    await store.close();
  }
}

const ENDINGS = new Set(['turn.completed', 'turn.failed']);
const TASK_ENDINGS = new Set(['task.completed', 'task.failed', 'task.cancelled', 'task.lost', 'task.timed_out']);
const actionOf = (e: RuntimeEvent) => (e.payload as { graphActionId?: string }).graphActionId;

/** Turns submitted but not ended. */
function unfinished(log: SessionLog): string[] {
  const ended = new Set(log.events.filter((e) => ENDINGS.has(e.type)).map((e) => e.turnId));
  return log.events.filter((e) => e.type === 'turn.submitted' && !ended.has(e.turnId)).map((e) => e.turnId ?? '?');
}

function counts(dir: string): string[] {
  const file = join(dir, 'counts.txt');
  // A count_by_key line also names the key it was done under (`label\tkey`): the effect is the label.
  return existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => line.split('\t')[0] as string)
    : [];
}

/** The checks of one trial, on its final logs, its processes' output and its side effects. */
function check(
  logs: SessionLog[],
  procs: Proc[],
  effects: string[],
  actions: PlannedAction[],
): TrialResult['problems'] {
  const problems: TrialResult['problems'] = [];
  const fail = (c: Check, message: string) => problems.push({ check: c, message });
  const bySession = new Map(logs.map((l) => [l.sessionId, l]));

  for (const log of logs) {
    const { sessionId, events } = log;
    const sequences = events.map((e) => e.sequence);
    const gap = sequences.findIndex((s, i) => s !== i + 1);
    if (gap >= 0) fail('sequence', `${sessionId}: sequence ${sequences[gap]} at position ${gap + 1}`);
    if (log.lastSequence !== events.length) {
      fail('sequence', `${sessionId}: last_sequence ${log.lastSequence} but ${events.length} events`);
    }
    if (!log.replay.equal || log.replay.contradictions.length > 0) {
      fail(
        'replay',
        `${sessionId}: ${[...log.replay.differences, ...log.replay.contradictions.map((c) => `#${c.sequence} ${c.reason}`)].join('; ')}`,
      );
    }
    const tally = (keys: string[]) => {
      const seen = new Map<string, number>();
      for (const key of keys) seen.set(key, (seen.get(key) ?? 0) + 1);
      return [...seen].filter(([, n]) => n > 1);
    };
    for (const [turn, n] of tally(events.filter((e) => ENDINGS.has(e.type)).map((e) => e.turnId ?? '?'))) {
      fail('terminal', `${sessionId}: turn ${turn} ended ${n} times`);
    }
    const toolEndings = events.filter((e) => e.type === 'tool.result' || e.type === 'tool.failed');
    for (const [call, n] of tally(toolEndings.map((e) => `${e.runId}/${actionOf(e)}`))) {
      fail('terminal', `${sessionId}: tool call ${call} ended ${n} times`);
    }
    const tasks = new Map<string, number>();
    for (const e of events) {
      if (!e.taskId) continue;
      if (TASK_ENDINGS.has(e.type)) tasks.set(e.taskId, (tasks.get(e.taskId) ?? 0) + 1);
      if (e.type === 'task.retrying') tasks.set(e.taskId, (tasks.get(e.taskId) ?? 0) - 1);
    }
    for (const [task, n] of tasks) if (n > 1) fail('terminal', `${sessionId}: task ${task} ended ${n} times`);
    const open = unfinished(log);
    if (open.length > 0) fail('finished', `${sessionId}: turn(s) ${open.join(', ')} never ended`);
    // Once its turn has ended, every tool call that started has ended too (a result, a failure, `lost`).
    const endedTurns = new Set(events.filter((e) => ENDINGS.has(e.type)).map((e) => e.turnId));
    const endedCalls = new Set(toolEndings.map((e) => `${e.runId}/${actionOf(e)}`));
    for (const started of events.filter((e) => e.type === 'tool.started' && endedTurns.has(e.turnId))) {
      const call = `${started.runId}/${actionOf(started)}`;
      if (!endedCalls.has(call))
        fail('dangling', `${sessionId}: tool call ${call} started, its turn ended, it never did`);
      endedCalls.add(call); // one report per call
    }
  }

  // Every event a process printed is durable: it must be in the log, unchanged.
  for (const proc of procs) {
    for (const event of printedEvents(proc)) {
      const stored = bySession.get(event.sessionId ?? '')?.events[event.sequence - 1];
      if (!stored) fail('lost_events', `${proc.role} printed ${event.type} #${event.sequence}, not in the log`);
      else if (JSON.stringify(stored) !== JSON.stringify(event)) {
        fail('lost_events', `${proc.role} printed ${event.type} #${event.sequence}; the log holds ${stored.type}`);
      }
    }
  }

  const all = logs.flatMap((l) => l.events);
  const planned = new Map(actions.map((a) => [a.id, a]));
  for (const label of new Set([...effects, ...all.filter((e) => e.type === 'tool.started').map(actionOf)])) {
    if (!label) continue;
    const action = planned.get(label);
    const times = effects.filter((l) => l === label).length;
    const ofLabel = all.filter((e) => actionOf(e) === label);
    const started = ofLabel.filter((e) => e.type === 'tool.started');
    const results = ofLabel.filter((e) => e.type === 'tool.result');
    if (!action) {
      fail('side_effects', `${label}: not an action of the script`);
      continue;
    }
    if (IDEMPOTENT[action.tool]) {
      if (times > 0 && started.length === 0) fail('side_effects', `${label}: ${times} effect(s) but never recorded`);
    } else if (times > started.length) {
      fail('side_effects', `${label}: ${times} effect(s) but ${started.length} start(s)`);
    }
    if (BY_KEY[action.tool]) {
      // Retried under one key as often as crashes demand: the world saw it once at most, and once if it completed.
      if (times > 1) fail('side_effects', `${label} (idempotent by key) counted ${times} times`);
      const keys = new Set(started.map((e) => (e.payload as { idempotencyKey?: string }).idempotencyKey));
      if (keys.size > 1) fail('side_effects', `${label} (idempotent by key) started under ${keys.size} keys`);
      if (results.length > 0 && times !== 1) fail('side_effects', `${label} completed but counted ${times} times`);
    } else if (!IDEMPOTENT[action.tool] && started.length > 1) {
      fail('side_effects', `${label} (not idempotent) started ${started.length} times`);
    }
    const firstResult = results[0] ? all.indexOf(results[0]) : -1;
    if (firstResult >= 0 && started.some((e) => all.indexOf(e) > firstResult)) {
      fail('side_effects', `${label} started again after its result`);
    }
    if (results.length > times) fail('side_effects', `${label}: ${results.length} result(s) but ${times} effect(s)`);
  }

  for (const proc of procs) if (proc.hung) fail('hang', `${proc.role} ran longer than ${proc.limitMs} ms`);
  return problems;
}

/** One line on how a process ended: the error of its `{"result"}` line, else the end of its stderr. */
function note(proc: Proc): string {
  const result = printed(proc).find((l) => l.result !== undefined)?.result as
    | { status?: string; error?: { code?: string; message?: string; retryable?: boolean } }
    | undefined;
  const said = result?.error
    ? `${result.status}: ${result.error.code}${result.error.retryable ? ' (retryable)' : ''}: ${result.error.message}`
    : result
      ? `status ${result.status}`
      : (crashOf(proc) ?? proc.err.trim().split('\n').slice(-3).join(' | '));
  return `${proc.role} exit ${proc.child.exitCode ?? proc.child.signalCode}: ${said.slice(0, 400)}`;
}

/** A Node.js process that died of an uncaught exception prints the stack and its version: the error's line. */
function crashOf(proc: Proc): string | undefined {
  if (!/\nNode\.js v\d+/.test(proc.err)) return undefined;
  const lines = proc.err.split('\n').filter((l) => l.trim());
  const error = lines.find((l) => /^\w*(Error|Exception)\b|^error:/i.test(l.trim())) ?? lines[0] ?? '';
  return `crashed (uncaught): ${error.trim()}`;
}

// ----- a small disk -------------------------------------------------------------------------------------------

/** A tmpfs mounted at `at` (root only), and a way to fill it to the last byte and to empty it again. */
function mountSmallDisk(at: string): { fill(): void; free(): void; unmount(): void } {
  mkdirSync(at, { recursive: true });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${SMALL_DISK_BYTES}`, 'tmpfs', at]);
  const filler = join(at, 'filler');
  return {
    fill() {
      const fd = openSync(filler, 'w');
      const chunk = Buffer.alloc(16 * 1024);
      try {
        for (;;) writeSync(fd, chunk);
      } catch {
        // ENOSPC: full.
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
    unmount() {
      try {
        execFileSync('umount', ['-l', at]);
      } catch {
        // Already gone.
      }
    },
  };
}

/** Room for a trial's store (a few hundred KiB of log) and its write-ahead log, not much more. */
const SMALL_DISK_BYTES = 16 * 1024 * 1024;

/** Whether this process may mount a tmpfs (the `full` trials need it). */
function canMount(): boolean {
  return process.platform === 'linux' && process.getuid?.() === 0;
}

// ----- one trial ----------------------------------------------------------------------------------------------

interface Context {
  store: StoreKind;
  seed: number;
  kinds: Kind[];
  postgres?: Postgres;
  keep: boolean;
  job: JobTrialOptions;
}

async function trial(i: number, ctx: Context): Promise<TrialResult> {
  const began = Date.now();
  const random = rng((ctx.seed * 1_000_003 + i * 7919) >>> 0);
  const kind = ctx.kinds[i % ctx.kinds.length] as Kind;
  const { steps, actions, expectedEvents } = plan(random);
  const dir = mkdtempSync(join(tmpdir(), 'oar-trial-'));
  const name = `oar_trial_${ctx.seed}_${i}_${Math.random().toString(36).slice(2, 8)}`;
  const store: TrialStore = ctx.postgres
    ? ctx.postgres.store(name)
    : { url: undefined, readUrl: join(dir, '.oar/oar.db'), dispose: async () => undefined };
  // A full disk: the SQLite store lives on a small tmpfs of its own, which the fault fills.
  const disk = kind === 'full' ? mountSmallDisk(join(dir, '.oar')) : undefined;
  const cleanup = async () => {
    cleanups.delete(cleanup);
    disk?.unmount();
    rmSync(dir, { recursive: true, force: true });
    await store.dispose().catch(() => undefined);
  };
  cleanups.add(cleanup);
  const procs: Proc[] = [];
  const run = (role: string, args: string[], limitMs?: number) => {
    const proc = start(dir, role, args, limitMs);
    procs.push(proc);
    return proc;
  };
  const jobPlan = kind === 'job' ? planJob(random, ctx.job) : undefined;
  let jobRun: JobRun | undefined;
  let jobSummary: JobTrialSummary | undefined;
  let killed = 0;
  let dropped = 0;
  let resumes = 0;
  let faultAt = '';
  let problems: TrialResult['problems'] = [];
  let logs: SessionLog[] = [];
  try {
    if (jobPlan) {
      writeJobProject(dir, jobPlan);
      writeFileSync(
        join(dir, 'oar.config.json'),
        JSON.stringify({ model: 'script:script.json', ...(store.url ? { store: store.url } : {}) }),
      );
      jobRun = await runJob({ dir, readUrl: store.readUrl, plan: jobPlan, random, run, kill });
      ({ faultAt, killed, resumes } = jobRun);
    } else {
      writeFileSync(join(dir, 'script.json'), JSON.stringify({ steps }, null, 2));
      writeFileSync(
        join(dir, 'oar.config.json'),
        JSON.stringify({
          model: 'script:script.json',
          tools: { modules: [TOOLS] },
          permissions: { mode: 'bypass' },
          ...(store.url ? { store: store.url } : {}),
        }),
      );
      const first = run('run', ['run', '--json', `trial ${i}`]);
      // Two resumes racing need a turn to resume: that fault comes after turn.submitted (event 3).
      const point = faultPoint(random, expectedEvents, kind === 'resumes' ? 4 : 1);
      faultAt = point.label;
      if (kind === 'kill' || kind === 'resumes') {
        await point.wait(first);
        if (kill(first)) killed++;
        await first.exit;
        if (kind === 'resumes') {
          const sessionId = (await readLogs(dir, store.readUrl)).find((l) => unfinished(l).length > 0)?.sessionId;
          if (sessionId) {
            const both = [run('resume#1', ['resume', '--json', sessionId]), run('resume#2', ['resume', sessionId])];
            resumes += 2;
            await Promise.all(both.map((p) => p.exit));
          }
        }
      } else if (kind === 'full') {
        // The disk fills at a random point, stays full for a while, then has room again: `oar run` either rides it out
        // or stops with store_full (exit 74), and the resumes below finish the turn.
        await point.wait(first);
        const holdMs = between(random, 200, 1500);
        faultAt = `${point.label}, full for ${holdMs}ms`;
        disk?.fill();
        await sleep(holdMs);
        disk?.free();
        await first.exit;
      } else if (kind === 'race') {
        const alsoKill = random() < 0.5;
        const delay = between(random, 0, 1500);
        const sessionId = await sessionIdOf(first);
        if (sessionId) {
          await sleep(delay);
          const second = run('resume (racing)', ['resume', '--json', sessionId]);
          resumes++;
          if (alsoKill) {
            await point.wait(first);
            if (kill(first)) killed++;
          }
          await Promise.all([first.exit, second.exit]);
        }
        faultAt = `resume after ${delay}ms${alsoKill ? `, kill ${point.label}` : ''}`;
        await first.exit;
      } else {
        const times = between(random, 1, 3);
        const points = [point, ...Array.from({ length: times - 1 }, () => faultPoint(random, expectedEvents))];
        faultAt = points.map((p) => p.label).join(', ');
        for (const p of points) {
          await p.wait(first);
          if (first.exited) break;
          dropped += await (ctx.postgres as Postgres).drop(store.applicationName ?? '');
        }
        await first.exit;
      }
    }

    // Resume until every submitted turn has ended (a failed turn has ended too: resume does not re-open it).
    for (let attempt = 0; attempt < MAX_RESUMES; attempt++) {
      logs = await readLogs(dir, store.readUrl);
      const open = logs.filter((l) => unfinished(l).length > 0);
      if (open.length === 0) break;
      for (const log of open) {
        const proc = run(`resume#${resumes + 1}`, ['resume', '--json', log.sessionId]);
        resumes++;
        await proc.exit;
      }
    }
    logs = await readLogs(dir, store.readUrl);
    problems = check(logs, procs, counts(dir), actions);
    if (jobPlan && jobRun) {
      const events = logs.find((l) => l.sessionId === jobRun?.sessionId)?.events ?? [];
      const checked = await checkJob(dir, store.readUrl, events, jobPlan, jobRun);
      jobSummary = checked.summary;
      problems.push(...jobRun.problems, ...checked.problems);
    }
  } catch (error) {
    problems.push({ check: 'finished', message: `the trial itself failed: ${(error as Error).stack ?? error}` });
  } finally {
    for (const proc of procs) if (!proc.exited) kill(proc);
    await Promise.all(procs.map((p) => p.exit));
  }
  const all = logs.flatMap((l) => l.events);
  const exits = await Promise.all(
    procs.map(async (p) => {
      const { code, signal } = await p.exit;
      if (p.killedByTrial && signal === 'SIGKILL') return 'SIGKILL';
      return crashOf(p) ? 'crash' : String(code ?? signal);
    }),
  );
  const result: TrialResult = {
    trial: i,
    kind,
    faultAt,
    sessions: logs.length,
    actions: jobPlan ? 0 : actions.length,
    killed,
    dropped,
    resumes,
    exits,
    crashes: procs.filter((p) => !p.killedByTrial && crashOf(p) !== undefined).length,
    beforeTurn: !all.some((e) => e.type === 'turn.submitted'),
    lost: all.filter((e) => e.type === 'tool.failed' && e.status === 'lost').length,
    reruns: all.filter((e) => e.type === 'tool.started' && ((e.payload as { attempt?: number }).attempt ?? 1) > 1)
      .length,
    keyRetries: all.filter((e) => e.type === 'tool.started' && (e.payload as { keyAttempt?: number }).keyAttempt)
      .length,
    turnsCompleted: all.filter((e) => e.type === 'turn.completed').length,
    turnsFailed: all.filter((e) => e.type === 'turn.failed').length,
    failures: all
      .filter((e) => e.type === 'turn.failed')
      .map((e) => {
        const error = (e.payload as { error?: { code?: string; retryable?: boolean } }).error;
        return `${error?.code ?? e.status}${error?.retryable ? ' (retryable)' : ''}`;
      }),
    effects: counts(dir).length,
    notes: procs.filter((p) => p.exited && !p.killedByTrial && p.child.exitCode !== 0).map(note),
    problems,
    ...(jobSummary ? { job: jobSummary } : {}),
    durationMs: Date.now() - began,
  };
  if (problems.length > 0) {
    const stderr = procs
      .filter((p) => p.err.trim())
      .map((p) => `        ${p.role} stderr: ${p.err.trim().slice(0, 2000)}`)
      .join('\n');
    if (stderr) result.stderr = stderr;
  }
  if (ctx.keep && problems.length > 0) result.kept = ctx.postgres ? `${dir} (schema ${name})` : dir;
  else await cleanup();
  return result;
}

// ----- the run ------------------------------------------------------------------------------------------------

export interface TrialsOptions {
  store: StoreKind;
  count: number;
  seed: number;
  parallel: number;
  kinds?: Kind[];
  postgresUrl?: string;
  keep?: boolean;
  /** Job trials: how many items (default DEFAULT_JOB_ITEMS) and the job's concurrency (default: drawn, 2-32). */
  jobItems?: number;
  jobConcurrency?: number;
  onTrial?: (result: TrialResult) => void;
}

export async function runTrials(options: TrialsOptions): Promise<TrialsSummary> {
  // drop needs PostgreSQL; full needs SQLite and root (to mount a small disk); each runs by default where it can.
  const kinds =
    options.kinds ??
    KINDS.filter((k) => (options.store === 'postgres' ? k !== 'full' : k !== 'drop' && (k !== 'full' || canMount())));
  if (options.store === 'sqlite' && kinds.includes('drop')) {
    throw new UsageError('the drop trials need PostgreSQL (--store postgres)');
  }
  if (kinds.includes('full') && (options.store !== 'sqlite' || !canMount())) {
    throw new UsageError('the full trials need the SQLite store and root on Linux (they mount a small tmpfs)');
  }
  let postgres: Postgres | undefined;
  if (options.store === 'postgres') {
    postgres = new Postgres(options.postgresUrl ?? DEFAULT_POSTGRES_URL);
    try {
      await postgres.admin.query('select 1');
    } catch (error) {
      await postgres.admin.end().catch(() => undefined);
      throw new UsageError(`PostgreSQL at ${redact(postgres.url)} is unreachable: ${(error as Error).message}`);
    }
  }
  const ctx: Context = {
    store: options.store,
    seed: options.seed,
    kinds,
    keep: options.keep ?? false,
    job: {
      items: options.jobItems ?? DEFAULT_JOB_ITEMS,
      ...(options.jobConcurrency ? { concurrency: options.jobConcurrency } : {}),
    },
    ...(postgres ? { postgres } : {}),
  };
  const results: TrialResult[] = [];
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < options.count; i = next++) {
      const result = await trial(i, ctx);
      results.push(result);
      options.onTrial?.(result);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, options.parallel) }, lane));
  } finally {
    await postgres?.admin.end().catch(() => undefined);
  }
  results.sort((a, b) => a.trial - b.trial);
  return summarize(options, results);
}

function summarize(options: TrialsOptions, trials: TrialResult[]): TrialsSummary {
  const byKind: TrialsSummary['byKind'] = {};
  const failedChecks = Object.fromEntries(CHECKS.map((c) => [c, 0])) as Record<Check, number>;
  for (const t of trials) {
    const k = byKind[t.kind] ?? {
      trials: 0,
      beforeTurn: 0,
      killed: 0,
      dropped: 0,
      resumes: 0,
      lost: 0,
      reruns: 0,
      keyRetries: 0,
      turnsCompleted: 0,
      turnsFailed: 0,
      crashes: 0,
      abnormalExits: 0,
      effects: 0,
      failed: 0,
    };
    byKind[t.kind] = k;
    k.trials++;
    if (t.beforeTurn) k.beforeTurn++;
    k.killed += t.killed;
    k.dropped += t.dropped;
    k.resumes += t.resumes;
    k.lost += t.lost;
    k.reruns += t.reruns;
    k.keyRetries += t.keyRetries;
    k.turnsCompleted += t.turnsCompleted;
    k.turnsFailed += t.turnsFailed;
    k.crashes += t.crashes;
    k.abnormalExits += t.exits.filter((e) => !['0', '1', '3', 'SIGKILL', 'crash'].includes(e)).length;
    k.effects += t.effects;
    if (t.problems.length > 0) k.failed++;
    for (const c of new Set(t.problems.map((p) => p.check))) failedChecks[c]++;
  }
  const total = (field: 'effects' | 'lost' | 'reruns' | 'keyRetries') => trials.reduce((n, t) => n + t[field], 0);
  const failing = (check: Check, what: string) => `${failedChecks[check]} ${what}`;
  const line =
    `trials: ${trials.length} runs on ${options.store} (seed ${options.seed}): ` +
    [
      failing('lost_events', 'lost events'),
      failing('side_effects', 'duplicated or unrecorded side effects'),
      failing('terminal', 'double endings'),
      failing('finished', 'unfinished turns'),
      failing('sequence', 'sequence gaps'),
      failing('replay', 'replay differences'),
      failing('dangling', 'dangling calls'),
      failing('hang', 'hung processes'),
      // Only when jobs ran: the line of a run without them reads as it always did.
      ...(trials.some((t) => t.kind === 'job')
        ? [
            failing('job_items', 'job items not done exactly once'),
            failing('job_end', 'wrong job endings'),
            failing('job_counts', 'job count mismatches'),
            failing('job_attempts', 'failed or excess job attempts'),
          ]
        : []),
    ].join(', ') +
    ` — ${total('effects')} side effects, ${total('lost')} actions lost, ${total('reruns')} re-run (${total('keyRetries')} under an earlier attempt's key)`;
  return {
    store: options.store,
    seed: options.seed,
    count: options.count,
    ok: trials.every((t) => t.problems.length === 0),
    byKind,
    failedChecks,
    line,
    trials,
  };
}

function table(summary: TrialsSummary): string {
  const columns = [
    'kind',
    'trials',
    'before turn',
    'killed',
    'dropped',
    'resumes',
    'lost',
    're-run',
    'by key',
    'turns ok',
    'turns failed',
    'crashes',
    'other exits',
    'effects',
    'failed',
  ];
  const rows = Object.entries(summary.byKind).map(([kind, k]) => [
    kind,
    k.trials,
    k.beforeTurn,
    k.killed,
    k.dropped,
    k.resumes,
    k.lost,
    k.reruns,
    k.keyRetries,
    k.turnsCompleted,
    k.turnsFailed,
    k.crashes,
    k.abnormalExits,
    k.effects,
    k.failed,
  ]);
  const text = [columns, ...rows].map((r) => r.map(String));
  const widths = columns.map((_, c) => Math.max(...text.map((r) => (r[c] ?? '').length)));
  const line = (r: string[]) =>
    r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  ');
  const checks = CHECKS.map(
    (c) => `${c} ${summary.failedChecks[c] === 0 ? 'ok' : `FAILED in ${summary.failedChecks[c]}`}`,
  );
  return [line(text[0] ?? []), ...text.slice(1).map(line), '', `checks: ${checks.join(' · ')}`].join('\n');
}

class UsageError extends Error {}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

async function cli(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      store: { type: 'string', default: 'sqlite' },
      count: { type: 'string', default: '10' },
      seed: { type: 'string' },
      parallel: { type: 'string', default: '4' },
      kinds: { type: 'string' },
      'postgres-url': { type: 'string' },
      keep: { type: 'boolean', default: false },
      'job-items': { type: 'string' },
      'job-concurrency': { type: 'string' },
      json: { type: 'boolean', default: false },
      verbose: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(
      'npm run trials -- --store sqlite|postgres --count N [--seed S] [--parallel P] [--kinds kill,race,resumes,drop,full,job] [--job-items N] [--job-concurrency C] [--postgres-url URL] [--keep] [--verbose] [--json]\n',
    );
    return 0;
  }
  const store = values.store;
  if (store !== 'sqlite' && store !== 'postgres') throw new UsageError('--store must be sqlite or postgres');
  const count = Number(values.count);
  const parallel = Number(values.parallel);
  if (!Number.isInteger(count) || count < 1) throw new UsageError('--count must be a positive integer');
  if (!Number.isInteger(parallel) || parallel < 1) throw new UsageError('--parallel must be a positive integer');
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  if (!Number.isInteger(seed) || seed < 0) throw new UsageError('--seed must be a non-negative integer');
  const jobItems = values['job-items'] === undefined ? undefined : Number(values['job-items']);
  if (jobItems !== undefined && (!Number.isInteger(jobItems) || jobItems < 1 || jobItems > 1000)) {
    throw new UsageError('--job-items must be an integer from 1 to 1000 (a job takes at most 1,000 items)');
  }
  const jobConcurrency = values['job-concurrency'] === undefined ? undefined : Number(values['job-concurrency']);
  if (
    jobConcurrency !== undefined &&
    (!Number.isInteger(jobConcurrency) || jobConcurrency < 1 || jobConcurrency > 64)
  ) {
    throw new UsageError('--job-concurrency must be an integer from 1 to 64');
  }
  const kinds = values.kinds?.split(',').map((k) => k.trim());
  for (const k of kinds ?? []) if (!KINDS.includes(k as Kind)) throw new UsageError(`unknown trial kind "${k}"`);
  if (!existsSync(join(ROOT, 'packages/cli/dist/main.js'))) {
    throw new UsageError('packages/cli is not built: run `npx tsc -b packages/cli` (npm run trials does)');
  }
  const postgresUrl = values['postgres-url'] ?? process.env.OAR_TEST_POSTGRES_URL ?? DEFAULT_POSTGRES_URL;
  const log = (text: string) => process.stderr.write(`${text}\n`);
  log(
    `trials: ${count} on ${store}${store === 'postgres' ? ` (${redact(postgresUrl)})` : ''}, seed ${seed}, ${parallel} at a time`,
  );
  const summary = await runTrials({
    store,
    count,
    seed,
    parallel,
    postgresUrl,
    keep: values.keep,
    ...(jobItems ? { jobItems } : {}),
    ...(jobConcurrency ? { jobConcurrency } : {}),
    ...(kinds ? { kinds: kinds as Kind[] } : {}),
    onTrial: (t) => {
      const status = t.problems.length === 0 ? 'ok' : 'FAILED';
      const j = t.job;
      const what = j
        ? `${j.items} items (concurrency ${j.concurrency}, attempts ${j.maxAttempts}), ${j.completed} completed, ${j.itemStarts} attempts, ${j.redoneCalls} calls redone, ${j.workers} workers, ${t.resumes} resumes, job ${j.status ?? '?'} in ${((j.jobMs ?? 0) / 1000).toFixed(1)} s`
        : `${t.actions} actions, ${t.effects} effects, ${t.lost} lost, ${t.reruns} re-run (${t.keyRetries} by key)`;
      log(
        `  #${String(t.trial).padStart(3)} ${t.kind.padEnd(7)} ${status.padEnd(6)} fault ${t.faultAt}; ${what}; exits ${t.exits.join(' ')}${t.failures.length ? `; failed turns: ${tallied(t.failures)}` : ''} (${(t.durationMs / 1000).toFixed(1)} s)`,
      );
      if (values.verbose) for (const n of t.notes) log(`        note: ${n}`);
      for (const p of t.problems) log(`        ${p.check}: ${p.message}`);
      if (t.stderr) log(t.stderr);
      if (t.kept) log(`        kept: ${t.kept}`);
    },
  });
  if (values.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    process.stdout.write(`\n${store}, seed ${seed}, ${count} trials\n${table(summary)}\n${summary.line}\n`);
    process.stdout.write(summary.ok ? 'all checks passed\n' : `FAILED (repeat with --seed ${seed})\n`);
  }
  return summary.ok ? 0 : 1;
}

/** `a, a, b` as `2× a, b`. */
function tallied(items: string[]): string {
  const seen = new Map<string, number>();
  for (const item of items) seen.set(item, (seen.get(item) ?? 0) + 1);
  return [...seen].map(([item, n]) => (n > 1 ? `${n}× ${item}` : item)).join(', ');
}

function stopAll(): void {
  for (const proc of live) kill(proc);
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  process.once('SIGINT', () => {
    stopAll();
    void Promise.allSettled([...cleanups].map((c) => c())).then(() => process.exit(130));
  });
  cli(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      stopAll();
      if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
        process.stderr.write(`trials: ${(error as Error).message}\n`);
        process.exitCode = 2;
      } else {
        process.stderr.write(`trials: ${(error as Error).stack ?? error}\n`);
        process.exitCode = 1;
      }
    },
  );
}
