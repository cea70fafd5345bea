import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchOutput, percentile, type StartupResult } from './common.js';

/**
 * Start-up of the `oar` binary against a bare Node start on the same machine, in the same run: `node -e 0`,
 * `oar --version`, `oar --help` and `oar inspect --help`, and two commands that open an existing SQLite store (the
 * one a demo left: `oar sessions`, `oar inspect`, which load the runtime), each spawned `STARTUP_RUNS` times (after one warm-up
 * round, so every file is in the page cache), round-robin so that a change of load falls on all of them alike. The
 * figure is the p50 wall time from spawn to exit, and its ratio to `node -e 0`'s (target ≤ 5×).
 */
const RUNS = Number(process.env.STARTUP_RUNS ?? 20);

/** The binary measured: this repository's, or another build's (`STARTUP_OAR=path/to/bin/oar.js`, to compare). */
const OAR = process.env.STARTUP_OAR ?? fileURLToPath(new URL('../../packages/cli/bin/oar.js', import.meta.url));

interface Command {
  label: string;
  args: string[];
  opensStore?: true;
}

/** The commands, with a store in `dir` holding one demo session. */
function commands(dir: string, sessionId: string): Command[] {
  const store = `sqlite:${join(dir, '.oar/oar.db')}`;
  return [
    { label: 'node -e 0', args: ['-e', '0'] },
    { label: 'oar --version', args: [OAR, '--version'] },
    { label: 'oar --help', args: [OAR, '--help'] },
    { label: 'oar inspect --help', args: [OAR, 'inspect', '--help'] },
    { label: 'oar sessions (SQLite store)', args: [OAR, 'sessions', '--store', store], opensStore: true },
    { label: 'oar inspect (SQLite store)', args: [OAR, 'inspect', sessionId, '--store', store], opensStore: true },
  ];
}

/** A store with one session in it: `oar demo` in a fresh folder. */
function demoStore(dir: string): string {
  const demo = spawnSync(process.execPath, [OAR, 'demo', '--json'], { cwd: dir, encoding: 'utf8' });
  if (demo.status !== 0) throw new Error(`oar demo exited ${demo.status}: ${demo.stderr}`);
  const sessionId = /ses_[0-9a-f]+/.exec(demo.stdout)?.[0];
  if (!sessionId) throw new Error(`oar demo printed no session id: ${demo.stdout.slice(0, 500)}`);
  return sessionId;
}

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
  const dir = mkdtempSync(join(tmpdir(), 'oar-bench-startup-'));
  try {
    return { startup: await measure(commands(dir, demoStore(dir))) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function measure(commandLines: Command[]): Promise<StartupResult[]> {
  const samples = commandLines.map(() => [] as number[]);
  for (const command of commandLines) await once(command.args);
  for (let round = 0; round < RUNS; round++) {
    for (const [i, command] of commandLines.entries()) samples[i]?.push(await once(command.args));
  }
  const base = percentile(samples[0] ?? [], 50);
  const startup: StartupResult[] = commandLines.map((command, i) => {
    const p50 = percentile(samples[i] ?? [], 50);
    return {
      command: command.label,
      opensStore: command.opensStore === true,
      runs: RUNS,
      p50Ms: p50,
      p90Ms: percentile(samples[i] ?? [], 90),
      ratio: p50 / base,
    };
  });
  return startup;
}
