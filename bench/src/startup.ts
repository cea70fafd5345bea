import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type BenchOutput, percentile, type StartupResult } from './common.js';

/**
 * Start-up of the `oar` binary against a bare Node start on the same machine, in the same run: `node -e 0`,
 * `oar --version`, `oar --help` and `oar inspect --help`, each spawned `STARTUP_RUNS` times (after one warm-up
 * round, so every file is in the page cache), round-robin so that a change of load falls on all of them alike. The
 * figure is the p50 wall time from spawn to exit, and its ratio to `node -e 0`'s (target ≤ 5×).
 */
const RUNS = Number(process.env.STARTUP_RUNS ?? 20);

/** The binary measured: this repository's, or another build's (`STARTUP_OAR=path/to/bin/oar.js`, to compare). */
const OAR = process.env.STARTUP_OAR ?? fileURLToPath(new URL('../../packages/cli/bin/oar.js', import.meta.url));

const COMMANDS: { label: string; args: string[] }[] = [
  { label: 'node -e 0', args: ['-e', '0'] },
  { label: 'oar --version', args: [OAR, '--version'] },
  { label: 'oar --help', args: [OAR, '--help'] },
  { label: 'oar inspect --help', args: [OAR, 'inspect', '--help'] },
];

function once(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, args, { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) => {
      const ms = performance.now() - started;
      if (code === 0) resolve(ms);
      else reject(new Error(`node ${args.join(' ')} exited ${code}`));
    });
  });
}

export async function run(): Promise<BenchOutput> {
  const samples = COMMANDS.map(() => [] as number[]);
  for (const command of COMMANDS) await once(command.args);
  for (let round = 0; round < RUNS; round++) {
    for (const [i, command] of COMMANDS.entries()) samples[i]?.push(await once(command.args));
  }
  const base = percentile(samples[0] ?? [], 50);
  const startup: StartupResult[] = COMMANDS.map((command, i) => {
    const p50 = percentile(samples[i] ?? [], 50);
    return {
      command: command.label,
      runs: RUNS,
      p50Ms: p50,
      p90Ms: percentile(samples[i] ?? [], 90),
      ratio: p50 / base,
    };
  });
  return { startup };
}
