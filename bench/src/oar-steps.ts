import { performance } from 'node:perf_hooks';
import {
  type BenchOutput,
  CONTEXT_1M,
  log,
  RUNS,
  STEPS,
  StepClock,
  type StepResult,
  summarizeSteps,
} from './common.js';
import { type OpenedStore, openPostgres, openSqlite, readLoopScript, runTurn, scriptedRuntime } from './oar.js';

const WARMUP_STEPS = 20;

interface Variant {
  system: string;
  label: string;
  runs: number;
  contextBudgetTokens?: number;
  readTool?: 'oar' | 'peers';
}

/**
 * With the default 32k-token context budget the 200-step transcript outgrows the budget around step 100 and the
 * runtime shortens older turns on every step; the peers always send the full history, so the 1M-token variant is
 * the like-for-like comparison. The default variant runs once (it takes ~25 s), the other RUNS times.
 */
const VARIANTS: Variant[] = [
  { system: 'OAR, default limits', label: 'default limits (32k-token context budget)', runs: 1 },
  {
    system: 'OAR, context budget 1M',
    label: 'context budget 1M tokens (transcript never shortened, like the peers)',
    runs: RUNS,
    contextBudgetTokens: CONTEXT_1M,
  },
  {
    system: "OAR, context budget 1M, peers' read tool",
    label: "context budget 1M tokens, the peers' plain readFile tool instead of OAR's confined read",
    runs: RUNS,
    contextBudgetTokens: CONTEXT_1M,
    readTool: 'peers',
  },
];

/**
 * OAR per-step overhead: one turn of STEPS `act` steps (one `read` of a small file each) and an answer, through the
 * real runtime (context assembly, protocol parsing and graph validation, permission evaluation, tool execution,
 * artifact storage, every event validated and committed with its read models), durable on `opened.store`.
 */
async function measure(opened: OpenedStore, variant: Variant): Promise<StepResult> {
  const { store } = opened;
  {
    // Warm-up: JIT, prepared statements, module loading.
    const { runtime } = await scriptedRuntime(store, readLoopScript(WARMUP_STEPS), variant);
    const { sessionId } = await runtime.createSession({ title: 'warm-up' });
    await runTurn(runtime, sessionId, 'warm up');
    await runtime.close();
  }
  const gaps: number[][] = [];
  const times: number[] = [];
  let events = 0;
  let appends = 0;
  let threadBytes = 0;
  for (let r = 0; r < variant.runs; r++) {
    const clock = new StepClock();
    const { runtime } = await scriptedRuntime(store, readLoopScript(STEPS), { ...variant, clock });
    const { sessionId } = await runtime.createSession({ title: 'bench' });
    let transactions = 0;
    const unsubscribe = runtime.log.subscribe(() => {
      transactions++;
    });
    const started = performance.now();
    await runTurn(runtime, sessionId, `Read the ${STEPS} notes one by one, then answer.`);
    times.push(performance.now() - started);
    unsubscribe();
    await runtime.close();
    const gapsOfRun = clock.gaps();
    if (gapsOfRun.length !== STEPS) throw new Error(`expected ${STEPS} step gaps, got ${gapsOfRun.length}`);
    gaps.push(gapsOfRun);
    events = (await runtime.log.read(sessionId)).length;
    appends = transactions;
    const thread = await store.db
      .selectFrom('oar_read_models')
      .select('body')
      .where('session_id', '=', sessionId)
      .where('kind', '=', 'thread')
      .executeTakeFirstOrThrow();
    threadBytes = thread.body.length;
  }
  const result = summarizeSteps(
    {
      system: variant.system,
      store: opened.label,
      durable: 'every event committed with its read models',
      steps: STEPS,
      records: events,
      recordsLabel: 'events',
      note:
        `${variant.label}; ${appends} append transactions per run (${(appends / STEPS).toFixed(1)} per step); ` +
        `thread read model ${(threadBytes / 1024).toFixed(0)} KiB after the turn, rewritten by every append`,
    },
    gaps,
    times,
  );
  log(
    `${variant.system}, ${opened.label}: p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms, ` +
      `${events} events in ${(result.runMs / 1000).toFixed(1)} s`,
  );
  return result;
}

export async function run(dialect: 'sqlite' | 'postgres'): Promise<BenchOutput> {
  const opened = dialect === 'sqlite' ? await openSqlite('steps') : await openPostgres('steps');
  if ('unavailable' in opened) {
    return { notes: [`PostgreSQL step benchmark skipped: ${opened.unavailable}`] };
  }
  try {
    const steps: StepResult[] = [];
    for (const variant of VARIANTS) steps.push(await measure(opened, variant));
    return { steps };
  } finally {
    await opened.dispose();
  }
}
