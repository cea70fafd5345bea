import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TrialsSummary } from '../../../scripts/trials.js';
import { POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { outputOf, repoRoot } from './cli-helpers.js';

/**
 * A short run of the fault trials (scripts/trials.ts, `npm run trials`): the real `oar` binary killed with SIGKILL,
 * raced by a second process and (PostgreSQL) cut off from its database at random points of random durable graphs,
 * then resumed; and jobs (scripts/trials-jobs.ts) whose workers are killed mid-job and taken over. The summary must
 * be clean: no lost event, no duplicated side effect, no second ending, no sequence gap, every turn ended, every job
 * item done exactly once with exact counts. The seed is random unless OAR_TRIALS_SEED is set, and printed on failure.
 */

const TSX = join(repoRoot, 'node_modules/.bin/tsx');
const SCRIPT = join(repoRoot, 'scripts/trials.ts');

async function trials(args: string[]): Promise<{ code: number | null; summary?: TrialsSummary; output: string }> {
  const child = spawn(TSX, [SCRIPT, ...args, '--json'], {
    cwd: repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, OAR_TEST_POSTGRES_URL: POSTGRES_URL },
  });
  const { code, stdout, stderr } = await outputOf(child);
  const last = stdout.trim().split('\n').at(-1) ?? '';
  let summary: TrialsSummary | undefined;
  try {
    summary = JSON.parse(last) as TrialsSummary;
  } catch {
    summary = undefined;
  }
  return { code, ...(summary ? { summary } : {}), output: `${stderr}\n${stdout}` };
}

const seed = process.env.OAR_TRIALS_SEED ?? String(Math.floor(Math.random() * 2 ** 31));

function clean(result: Awaited<ReturnType<typeof trials>>, count: number): void {
  const context = `seed ${seed} (repeat: OAR_TRIALS_SEED=${seed}, or npm run trials -- --seed ${seed} …)\n${result.output}`;
  expect(result.summary, context).toBeDefined();
  expect(
    result.summary?.trials.flatMap((t) => t.problems),
    context,
  ).toEqual([]);
  expect(result.summary?.ok, context).toBe(true);
  expect(result.summary?.trials, context).toHaveLength(count);
  expect(result.code, context).toBe(0);
  // The line docs/reliability.md quotes, in CI's log.
  console.log(result.summary?.line);
  expect(result.summary?.line, context).toMatch(
    /: 0 lost events, 0 duplicated or unrecorded side effects, 0 double endings/,
  );
}

const unavailable = await postgresUnavailable();
if (unavailable && !process.env.CI) console.warn(`SKIPPED PostgreSQL fault trials: ${unavailable.message}`);

describe.concurrent('fault trials', () => {
  it('on SQLite: kill -9, racing processes, racing resumes, a full disk (as root)', async () => {
    // The full-disk trial mounts a small tmpfs: root only. Under CI it must run (CI is root); locally it may not.
    const root = process.getuid?.() === 0;
    if (!root && process.env.CI) throw new Error('the full-disk trial needs root in CI');
    if (!root) console.warn('SKIPPED the full-disk trial: it needs root to mount a tmpfs');
    const count = root ? 4 : 3;
    const result = await trials(['--store', 'sqlite', '--count', String(count), '--parallel', '4', '--seed', seed]);
    clean(result, count);
    expect(Object.keys(result.summary?.byKind ?? {}).sort()).toEqual(
      root ? ['full', 'kill', 'race', 'resumes'] : ['kill', 'race', 'resumes'],
    );
  }, 120_000);

  // Under CI a missing PostgreSQL fails here; locally the test is skipped (with the warning above).
  it.skipIf(unavailable !== undefined && !process.env.CI)(
    'on PostgreSQL: kill -9, racing processes, dropped connections',
    async () => {
      if (unavailable) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
      const result = await trials([
        '--store',
        'postgres',
        '--count',
        '3',
        '--parallel',
        '3',
        '--kinds',
        'kill,race,drop',
        '--seed',
        seed,
      ]);
      clean(result, 3);
      expect(result.summary?.byKind.drop?.trials).toBe(1);
    },
    120_000,
  );

  // Issue 30 §1: a job's drivers (`oar jobs start`, `oar worker`s, `oar resume`) killed -9 one to three times; the
  // full size (200 items) is run by hand: npm run trials -- --store postgres --kinds job --count 1 --job-items 200.
  const jobArgs = ['--kinds', 'job', '--count', '2', '--parallel', '2', '--job-items', '20', '--job-concurrency', '4'];
  function jobsClean(result: Awaited<ReturnType<typeof trials>>): void {
    clean(result, 2);
    expect(result.summary?.line).toMatch(
      /0 job items not done exactly once, 0 wrong job endings, 0 job count mismatches/,
    );
    for (const t of result.summary?.trials ?? []) {
      expect(t.job, `seed ${seed}`).toMatchObject({ items: 20, concurrency: 4, completed: 20, status: 'completed' });
    }
  }

  it('on SQLite: a 20-item job whose workers are killed -9, every item done exactly once', async () => {
    jobsClean(await trials(['--store', 'sqlite', ...jobArgs, '--seed', seed]));
  }, 120_000);

  it.skipIf(unavailable !== undefined && !process.env.CI)(
    'on PostgreSQL: a 20-item job whose workers are killed -9, every item done exactly once',
    async () => {
      if (unavailable) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
      jobsClean(await trials(['--store', 'postgres', ...jobArgs, '--seed', seed]));
    },
    120_000,
  );
});
