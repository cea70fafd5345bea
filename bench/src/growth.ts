import { performance } from 'node:perf_hooks';
import {
  type BenchOutput,
  CONTEXT_1M,
  type GrowthResult,
  log,
  makeWorkspace,
  percentile,
  StepClock,
} from './common.js';
import { openSqlite, readLoopScript, runTurn, scriptedRuntime } from './oar.js';

/** Steps of the long turn; every step reads its own file, so no two tool outputs are alike. */
const GROWTH_STEPS = 1_000;
const WARMUP_STEPS = 20;

/** p50 of steps `from`..`to` (1-based, inclusive); step n is the gap after model call n. */
const windowP50 = (gaps: number[], from: number, to: number) => percentile(gaps.slice(from - 1, to), 50);

/**
 * Growth of the per-step cost within one turn: one OAR turn of 1,000 `read` steps on SQLite with a 1M-token context
 * budget (the transcript is never shortened), the same scripted model and timing as the agent-loop benchmark. A
 * runtime whose step does work proportional to what the turn already holds shows it here as a rising p50.
 */
export async function run(): Promise<BenchOutput> {
  const opened = await openSqlite('growth');
  const { store } = opened;
  try {
    const workspace = makeWorkspace('growth', GROWTH_STEPS);
    {
      const { runtime } = await scriptedRuntime(store, readLoopScript(WARMUP_STEPS, GROWTH_STEPS), {
        workspace,
        contextBudgetTokens: CONTEXT_1M,
      });
      const { sessionId } = await runtime.createSession({ title: 'warm-up' });
      await runTurn(runtime, sessionId, 'warm up');
      await runtime.close();
    }
    const clock = new StepClock();
    const { runtime } = await scriptedRuntime(store, readLoopScript(GROWTH_STEPS, GROWTH_STEPS), {
      clock,
      workspace,
      contextBudgetTokens: CONTEXT_1M,
    });
    const { sessionId } = await runtime.createSession({ title: 'growth' });
    const started = performance.now();
    await runTurn(runtime, sessionId, `Read the ${GROWTH_STEPS} notes one by one, then answer.`);
    const runMs = performance.now() - started;
    await runtime.close();
    const gaps = clock.gaps();
    if (gaps.length !== GROWTH_STEPS) throw new Error(`expected ${GROWTH_STEPS} step gaps, got ${gaps.length}`);
    const events = await runtime.log.read(sessionId);
    const context = events.findLast((e) => e.type === 'context.resolved')?.payload as
      | { tokenEstimate?: number; omissions?: unknown[] }
      | undefined;
    const result: GrowthResult = {
      store: opened.label,
      steps: GROWTH_STEPS,
      contextBudgetTokens: CONTEXT_1M,
      firstP50: windowP50(gaps, 1, 20),
      midP50: windowP50(gaps, 181, 200),
      lastP50: windowP50(gaps, 951, 1000),
      p50: percentile(gaps, 50),
      p99: percentile(gaps, 99),
      runMs,
      events: events.length,
      ...(context?.tokenEstimate !== undefined ? { lastContextTokens: context.tokenEstimate } : {}),
      ...(context?.omissions !== undefined ? { lastContextOmissions: context.omissions.length } : {}),
    };
    log(
      `growth: p50 steps 1-20 ${result.firstP50.toFixed(2)} ms, 181-200 ${result.midP50.toFixed(2)} ms, ` +
        `951-1000 ${result.lastP50.toFixed(2)} ms; ${events.length} events in ${(runMs / 1000).toFixed(1)} s`,
    );
    return { growth: [result] };
  } finally {
    await opened.dispose();
  }
}
