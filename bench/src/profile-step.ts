import { CONTEXT_1M, median, percentile, STEPS, StepClock } from './common.js';
import { openSqlite, readLoopScript, runTurn, scriptedRuntime } from './oar.js';

/**
 * The agent-loop step of `oar-sqlite` ("context budget 1M, peers' read tool") alone, for a CPU profile:
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx src/profile-step.ts [runs]
 * then `node src/profile-summary.mjs /tmp/prof/<file>.cpuprofile`. One warm-up turn, then `runs` turns of STEPS
 * steps (default 10, so the profile is mostly steady-state steps); prints the p50/p99 of the step gaps.
 */
const runs = Number(process.argv[2] ?? 10);
const opened = await openSqlite('profile');
// `OAR_READ=1`: OAR's own confined `read` instead of the peers' plain one.
const variant = {
  contextBudgetTokens: CONTEXT_1M,
  readTool: process.env.OAR_READ === '1' ? ('oar' as const) : ('peers' as const),
};
try {
  {
    const { runtime } = await scriptedRuntime(opened.store, readLoopScript(20), variant);
    const { sessionId } = await runtime.createSession({ title: 'warm-up' });
    await runTurn(runtime, sessionId, 'warm up');
    await runtime.close();
  }
  const gaps: number[] = [];
  const started = performance.now();
  const cpu = process.cpuUsage();
  for (let r = 0; r < runs; r++) {
    const clock = new StepClock();
    const { runtime } = await scriptedRuntime(opened.store, readLoopScript(STEPS), { ...variant, clock });
    const { sessionId } = await runtime.createSession({ title: 'profile' });
    await runTurn(runtime, sessionId, `Read the ${STEPS} notes one by one, then answer.`);
    await runtime.close();
    gaps.push(...clock.gaps());
  }
  const total = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const cpuPerStep = (used.user + used.system) / 1000 / (runs * STEPS);
  process.stdout.write(
    `${runs} runs × ${STEPS} steps: p10 ${percentile(gaps, 10).toFixed(2)} ms, p25 ${percentile(gaps, 25).toFixed(2)} ms, p50 ${median(gaps).toFixed(2)} ms, p99 ${percentile(gaps, 99).toFixed(2)} ms, ` +
      `mean ${(gaps.reduce((a, b) => a + b, 0) / gaps.length).toFixed(2)} ms; process CPU ${cpuPerStep.toFixed(2)} ms/step ` +
      `(model and runs' set-up included); ${(total / 1000).toFixed(1)} s\n`,
  );
} finally {
  await opened.dispose();
}
