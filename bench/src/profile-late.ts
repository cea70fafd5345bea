import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { CONTEXT_1M, makeWorkspace, percentile, StepClock } from './common.js';
import { openSqlite, readLoopScript, runTurn, scriptedRuntime } from './oar.js';

/**
 * A CPU profile of the late steps of a long turn only (where a whole-run profile hides them):
 *   node --import tsx src/profile-late.ts [steps=1000] [from=900] [out=/tmp/late.cpuprofile]
 * then `node src/profile-summary.mjs /tmp/late.cpuprofile`. The profiler starts at model call `from` and stops
 * with the turn; prints the p50 of the first 20 and the last 50 step gaps.
 */
const steps = Number(process.argv[2] ?? 1000);
const from = Number(process.argv[3] ?? 900);
const out = process.argv[4] ?? '/tmp/late.cpuprofile';
const session = new Session();
session.connect();

class ProfilingClock extends StepClock {
  override start(): void {
    if (this.calls === from) void session.post('Profiler.enable').then(() => session.post('Profiler.start'));
    super.start();
  }
}

const opened = await openSqlite('profile-late');
try {
  const workspace = makeWorkspace('profile-late', steps);
  const clock = new ProfilingClock();
  const { runtime } = await scriptedRuntime(opened.store, readLoopScript(steps, steps), {
    clock,
    workspace,
    contextBudgetTokens: CONTEXT_1M,
  });
  const { sessionId } = await runtime.createSession({ title: 'profile-late' });
  await runTurn(runtime, sessionId, `Read the ${steps} notes one by one, then answer.`);
  const { profile } = await session.post('Profiler.stop');
  writeFileSync(out, JSON.stringify(profile));
  await runtime.close();
  const gaps = clock.gaps();
  process.stdout.write(
    `steps 1-20 p50 ${percentile(gaps.slice(0, 20), 50).toFixed(2)} ms, last 50 p50 ${percentile(gaps.slice(-50), 50).toFixed(2)} ms; profile of calls ${from}+ in ${out}\n`,
  );
} finally {
  await opened.dispose();
}
