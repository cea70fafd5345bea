import { replay } from '@oar/runtime';
import { median } from './common.js';
import { recordTemplate, synthesize } from './replay.js';

/**
 * replay() of a synthesized session alone, for a CPU profile (the `replay` benchmark's 100k row):
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/src/profile-replay.ts [events] [repeats]
 * then `node bench/src/profile-summary.mjs /tmp/prof/<file>.cpuprofile`. Prints each replay's time and the median.
 */
const events = Number(process.argv[2] ?? 100_000);
const repeats = Number(process.argv[3] ?? 5);
const session = synthesize(await recordTemplate(), events);
const times: number[] = [];
for (let r = 0; r < repeats; r++) {
  const started = performance.now();
  replay(session);
  times.push(performance.now() - started);
}
process.stdout.write(
  `replay() of ${events} events: ${times.map((t) => t.toFixed(0)).join(' / ')} ms, median ${median(times).toFixed(0)} ms\n`,
);
