import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Store } from '@oar/runtime';
import SQLite from 'better-sqlite3';
import {
  type BenchOutput,
  CONTEXT_1M,
  log,
  percentile,
  RUNS,
  STEPS,
  type StepResult,
  summarizeSteps,
  tempDir,
} from './common.js';
import { openSqlite, readLoopScript, runTurn, scriptedRuntime, wrapModel } from './oar.js';

/**
 * The floor of one OAR step on SQLite: what the step's own SQL costs when nothing but better-sqlite3 runs it.
 *
 * What is replayed, exactly:
 * 1. Recording. One real OAR turn of STEPS read steps and an answer (context budget 1M, the peers' read tool: the
 *    "peers' read tool" row of oar-sqlite) on a store made by `Store.open`. Every statement the process executes is
 *    recorded at better-sqlite3's Statement methods (`run`, `all`, `get`, `iterate`, patched on the prototype for
 *    the recording only; the runtime is not changed): its SQL text, its parameters, the method Kysely called and the
 *    rows it returned or changed. A step is everything between the start of model call k and that of call k + 1:
 *    the tool call and its one commit. Nothing is stored while the (scripted) model runs, so this is exactly what
 *    runs in the agent-loop benchmark's step gap, from the end of call k to the start of call k + 1.
 * 2. The step. The read step nearest the middle of the turn whose statements, and those of the step after it, have
 *    the SQL texts most steps have (a notifier's poll now and then lands in a step; such steps are not taken). As
 *    recorded today: reads of the session's last sequence, `pragma synchronous = NORMAL`, `begin`, the sequence
 *    update under the thread lease, the inserts of the tool's artifact, of the step's events and of its read models
 *    (an upsert), `commit`, `pragma synchronous = FULL`.
 * 3. Replay. A fresh store (`Store.open`, so OAR's own migrations make the schema; then closed) is opened with
 *    better-sqlite3 alone and OAR's pragmas (WAL, busy_timeout, foreign_keys, synchronous = FULL; the step itself
 *    switches to NORMAL for its transaction and back, as recorded). Everything recorded before the step runs once,
 *    untimed, with its recorded parameters — the session, the thread's lease, the earlier steps — so the step's
 *    update finds its row and its inserts their foreign keys, in a database the size the recorded one had. Then the
 *    step runs STEPS times, timed one by one, on statements prepared once (OAR keeps its statements prepared too).
 *    What changes from step k to step k + 1 in the recording changes again in every replay: numbers by the same
 *    amount (event and read-model sequence numbers), identifiers (event, artifact, run and task ids) to fresh ones of
 *    the same length; other strings (timestamps, event and read-model bodies) stay step k's, byte for byte. Each
 *    replay must return and change as many rows as the recorded step did, or the benchmark fails.
 */

type Method = 'run' | 'all' | 'get' | 'iterate';
const METHODS: readonly Method[] = ['run', 'all', 'get', 'iterate'];

interface Recorded {
  sql: string;
  method: Method;
  params: unknown[];
  /** Rows returned (`all`, `get`) or changed (`run`); undefined for `iterate`, which runs as it is read. */
  rows?: number;
}

const WARMUP_STEPS = 20;

function rowsOf(method: Method, result: unknown): number | undefined {
  if (method === 'all') return (result as unknown[]).length;
  if (method === 'get') return result === undefined ? 0 : 1;
  if (method === 'run') return (result as SQLite.RunResult).changes;
  return undefined;
}

/** Records every statement any better-sqlite3 database of this process executes, until `stop()`. */
function recordStatements(): { statements: Recorded[]; stop: () => void } {
  const probe = new SQLite(':memory:');
  const prototype = Object.getPrototypeOf(probe.prepare('select 1')) as Record<Method, (...args: unknown[]) => unknown>;
  probe.close();
  const statements: Recorded[] = [];
  const originals = METHODS.map((method) => [method, prototype[method]] as const);
  for (const [method, original] of originals) {
    prototype[method] = function (this: SQLite.Statement, ...args: unknown[]) {
      const result = original.apply(this, args);
      // Kysely binds one array of positional parameters.
      const params = args.length === 1 && Array.isArray(args[0]) ? [...args[0]] : [...args];
      statements.push({ sql: this.source, method, params, rows: rowsOf(method, result) });
      return result;
    };
  }
  return {
    statements,
    stop: () => {
      for (const [method, original] of originals) prototype[method] = original;
    },
  };
}

/** A real OAR turn's statements, split at the start of each model call. */
async function recordTurn(): Promise<{ statements: Recorded[]; calls: number[] }> {
  const opened = await openSqlite('floor-record');
  const recording = recordStatements();
  const calls: number[] = [];
  try {
    const { runtime } = await scriptedRuntime(opened.store, readLoopScript(STEPS), {
      contextBudgetTokens: CONTEXT_1M,
      readTool: 'peers',
      wrapModel: (model) =>
        wrapModel(model, async (call) => {
          calls.push(recording.statements.length);
          return await call();
        }),
    });
    const { sessionId } = await runtime.createSession({ title: 'floor' });
    await runTurn(runtime, sessionId, `Read the ${STEPS} notes one by one, then answer.`);
    await runtime.close();
  } finally {
    recording.stop();
    await opened.dispose();
  }
  return { statements: recording.statements, calls };
}

/** The steady-state step (see the top of this file): its statements, the next step's, and what came before. */
function steadyStep(statements: Recorded[], calls: number[]) {
  // Read steps are calls 0 … STEPS - 1; call STEPS is the answer.
  const steps = calls.slice(0, STEPS).map((start, k) => statements.slice(start, calls[k + 1]));
  const shape = (step: Recorded[]) => step.map((s) => s.sql).join('\n');
  const counts = new Map<string, number>();
  for (const step of steps) counts.set(shape(step), (counts.get(shape(step)) ?? 0) + 1);
  const usual = [...counts].sort((a, b) => b[1] - a[1])[0]![0];
  const middle = STEPS / 2 - 1;
  const candidates = steps
    .map((_, k) => k)
    .filter((k) => k > 0 && k + 1 < STEPS && shape(steps[k]!) === usual && shape(steps[k + 1]!) === usual)
    .sort((a, b) => Math.abs(a - middle) - Math.abs(b - middle));
  const k = candidates[0];
  if (k === undefined) throw new Error('no two consecutive read steps ran the same statements');
  return { index: k, step: steps[k]!, next: steps[k + 1]!, before: statements.slice(0, calls[k]) };
}

const ID = /^([a-z]+_[0-9a-f]{12,}|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12})$/;

/** `id` made fresh for replay `n`: its last 8 hex digits replaced by `n` (replay 0 keeps the recorded id). */
const freshId = (id: string, n: number) => (n === 0 ? id : `${id.slice(0, -8)}${n.toString(16).padStart(8, '0')}`);

/**
 * Each statement's parameters for replay `n` of `step` (n = 0: as recorded): what differs from step k to step k + 1
 * moves on again — a number by the same difference per replay, an identifier to a fresh one; anything else is step
 * k's value.
 */
function paramsFor(step: Recorded[], next: Recorded[], n: number): unknown[][] {
  return step.map((statement, i) =>
    statement.params.map((value, j) => {
      const following = next[i]!.params[j];
      if (following === value) return value;
      if (typeof value === 'number' && typeof following === 'number') return value + (following - value) * n;
      if (typeof value === 'string' && typeof following === 'string' && ID.test(value)) return freshId(value, n);
      return value;
    }),
  );
}

type Execute = (params: unknown[]) => unknown;

/** Statements prepared once per database, like OAR's statement cache; each runs with the method Kysely used. */
function preparer(db: SQLite.Database): (statement: Recorded) => Execute {
  const prepared = new Map<string, SQLite.Statement>();
  return ({ sql, method }) => {
    let statement = prepared.get(sql);
    if (!statement) {
      statement = db.prepare(sql);
      prepared.set(sql, statement);
    }
    const s = statement;
    if (method === 'run') return (params) => s.run(params);
    if (method === 'all') return (params) => s.all(params);
    if (method === 'get') return (params) => s.get(params);
    return (params) => [...s.iterate(params)];
  };
}

function check(statement: Recorded, result: unknown, where: string): void {
  const rows = rowsOf(statement.method, result);
  if (rows !== statement.rows) {
    throw new Error(`${where}: ${rows} rows where OAR had ${statement.rows}: ${statement.sql.slice(0, 120)}`);
  }
}

/** A fresh store with OAR's schema, opened the way store.ts opens one, without Kysely or anything of OAR's above. */
async function freshStore(): Promise<SQLite.Database> {
  const file = join(tempDir('floor'), 'oar.db');
  await (await Store.open(file)).close();
  const db = new SQLite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  db.pragma('synchronous = FULL');
  return db;
}

/** One run: a fresh store, the turn up to the step replayed untimed, then the step `replays` times, each timed. */
async function replay(
  recorded: ReturnType<typeof steadyStep>,
  replays: number,
): Promise<{ gaps: number[]; ms: number }> {
  const db = await freshStore();
  try {
    const prepare = preparer(db);
    for (const [i, statement] of recorded.before.entries()) {
      check(statement, prepare(statement)(statement.params), `statement ${i} before the step`);
    }
    const execute = recorded.step.map(prepare);
    // Every replay's parameters are made before the clock starts: the timed loop only calls better-sqlite3.
    const params = Array.from({ length: replays }, (_, n) => paramsFor(recorded.step, recorded.next, n));
    const results: unknown[] = new Array(execute.length);
    const gaps: number[] = [];
    const started = performance.now();
    for (let n = 0; n < replays; n++) {
      const values = params[n]!;
      const t = performance.now();
      for (let i = 0; i < execute.length; i++) results[i] = execute[i]!(values[i]!);
      gaps.push(performance.now() - t);
      for (const [i, statement] of recorded.step.entries()) check(statement, results[i], `replay ${n}`);
    }
    return { gaps, ms: performance.now() - started };
  } finally {
    db.close();
  }
}

/** "5 select, 2 pragma, 1 begin, …": the step's statements by their first word, in order of appearance. */
function describe(step: Recorded[]): string {
  const counts = new Map<string, number>();
  for (const { sql } of step) {
    const verb = sql.trim().split(/\s+/)[0]!.toLowerCase();
    counts.set(verb, (counts.get(verb) ?? 0) + 1);
  }
  return [...counts].map(([verb, count]) => `${count} ${verb}`).join(', ');
}

export async function run(): Promise<BenchOutput> {
  const { statements, calls } = await recordTurn();
  const recorded = steadyStep(statements, calls);
  const { step } = recorded;
  const commits = step.filter((s) => /^commit\b/i.test(s.sql.trim())).length;
  const events = step
    .filter((s) => /^insert into "oar_events"/.test(s.sql.trim()))
    .reduce((n, s) => n + (s.rows ?? 0), 0);
  for (const s of step)
    log(`step ${recorded.index + 1}: ${s.method} ${s.sql.slice(0, 90)} (${s.params.length} parameters)`);

  await replay(recorded, WARMUP_STEPS);
  const gaps: number[][] = [];
  const times: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const out = await replay(recorded, STEPS);
    gaps.push(out.gaps);
    times.push(out.ms);
  }
  const probe = new SQLite(':memory:');
  const sqliteVersion = (probe.prepare('select sqlite_version() as v').get() as { v: string }).v;
  probe.close();
  const statementsAndCommits = `${step.length - commits} statements and ${commits} commit${commits === 1 ? '' : 's'}`;
  const result: StepResult = summarizeSteps(
    {
      system: `floor: one step's ${statementsAndCommits}, replayed without JavaScript above SQLite`,
      store: 'SQLite (file, WAL)',
      durable: 'the step’s commit, synchronous = NORMAL as recorded',
      steps: STEPS,
      records: events * STEPS,
      recordsLabel: 'events',
      note:
        `step ${recorded.index + 1} of a ${STEPS}-step OAR turn (context budget 1M, peers' read tool), recorded at ` +
        `better-sqlite3: ${describe(step)}; ${events} events per step; replayed ${STEPS} times per run on a fresh ` +
        `store after the turn's earlier statements, with fresh ids and sequence numbers (bench/src/floor.ts)`,
    },
    gaps,
    times,
  );
  log(
    `floor: p50 ${result.p50.toFixed(3)} ms, p99 ${result.p99.toFixed(3)} ms per step ` +
      `(p10 ${percentile(gaps.flat(), 10).toFixed(3)} ms)`,
  );
  return { steps: [result], versions: { SQLite: sqliteVersion } };
}
