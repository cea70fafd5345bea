/**
 * The `job` fault trials (scripts/trials.ts, `--kinds job`): one job of many items (docs/jobs.md) run by the real
 * `oar` binary — by `oar jobs start` itself, by one to three `oar worker` processes, or by `oar resume SESSION` —
 * whose drivers are killed with SIGKILL one to three times at seeded points (after k items completed, + a few ms),
 * each killed one's threads taken over by the survivors or a fresh `oar worker` / `oar resume SESSION`, until the
 * job is over (at most JOB_DEADLINE, then `hang`). The scripted model answers every item (after a seeded delay, so
 * items overlap and kills land mid-call) and never fails, so the job must complete with every item done once:
 *
 *   job_items     every item has exactly one `job.item.completed`;
 *   job_end       `job.completed` exactly once (no `job.failed`/`job.cancelled`), the last of the job's events;
 *   job_counts    the job read model (`oar jobs get`) is completed and its counts equal the events (completed = item
 *                 count, nothing pending, running, failed or cancelled; every item completed; its attempts = its
 *                 `job.item.started`), and so do the counts `job.completed` and the last `job.progress` carry;
 *   job_attempts  no item has more `job.item.started` than the policy's attempts, and no attempt failed (the model
 *                 never fails: a failed attempt is work done and thrown away, or an item redone).
 *
 * The general checks (sequence, lost_events, terminal, replay, finished, hang…) hold for the job's session too.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { type JobView, Runtime, Store } from '@oar/runtime';
import type { Check, Proc } from './trials.js';

/** Items of a job trial unless `--job-items` says otherwise (the issue's full size: `--job-items 200`). */
export const DEFAULT_JOB_ITEMS = 40;
/** How long a job may take, kills included, before the trial gives up on it (`hang`): a minute and 300 ms an item. */
export const jobDeadlineMs = (items: number) => 60_000 + items * 300;
/** How long the model takes over an item: one of these, drawn per item (mostly short, some long). */
const ITEM_MS = [0, 20, 50, 100, 150, 250, 400, 700] as const;
const PROMPT = 'Item {{n}}: work for {{ms}} ms';
/** The job's concurrency unless `--job-concurrency` fixes it: mostly a few, sometimes many items at once. */
const JOB_CONCURRENCY = [2, 3, 4, 6, 8, 16, 32] as const;
/** How often the trial reads the job's progress while it waits for a kill point or the end. */
const POLL_MS = 20;

export type JobMode = 'start' | 'workers' | 'resume';
export interface JobTrialOptions {
  items: number;
  /** The job's concurrency; drawn from JOB_CONCURRENCY per trial when absent. */
  concurrency?: number;
}

export interface JobPlan {
  mode: JobMode;
  items: { n: number; ms: number }[];
  concurrency: number;
  maxAttempts: number;
  /** Kills of the job's drivers: 1-3, each after `after` items completed, `extraMs` later. */
  kills: { after: number; extraMs: number }[];
  /** `oar worker --concurrency` of each worker the trial starts. */
  workerConcurrency: number;
}

/** What a job trial reports beyond the general counts. */
export interface JobTrialSummary {
  mode: JobMode;
  jobId?: string;
  items: number;
  concurrency: number;
  maxAttempts: number;
  /** `job.item.completed` events. */
  completed: number;
  /** `job.item.started` events (attempts started): the item count when no attempt failed. */
  itemStarts: number;
  /** Model calls requested again in an item's turn: a killed driver's call, redone by the one that took it over. */
  redoneCalls: number;
  /** `oar worker` processes started. */
  workers: number;
  /** The job's status in its read model at the end. */
  status?: string;
  /** From the job's record to its end as this trial saw it. */
  jobMs?: number;
}

const between = (random: () => number, min: number, max: number) => min + Math.floor(random() * (max - min + 1));
const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function planJob(random: () => number, options: JobTrialOptions): JobPlan {
  const count = options.items;
  const items = Array.from({ length: count }, (_, n) => ({ n, ms: pick(random, ITEM_MS) }));
  const kills = Array.from({ length: between(random, 1, 3) }, () => ({
    // Before the last tenth: a kill after the job is over kills nothing of it.
    after: between(random, 0, Math.floor((count - 1) * 0.9)),
    extraMs: between(random, 0, 300),
  })).sort((a, b) => a.after - b.after);
  return {
    mode: pick(random, ['start', 'workers', 'resume'] as const),
    items,
    concurrency: options.concurrency ?? pick(random, JOB_CONCURRENCY),
    maxAttempts: between(random, 1, 3),
    kills,
    workerConcurrency: pick(random, [2, 4, 16]),
  };
}

/**
 * The project: items as JSON lines, a script whose one step answers an item after the delay its prompt names (the
 * step repeated, so a retried attempt — the thread's next model call — is answered too).
 */
export function writeJobProject(dir: string, plan: JobPlan): void {
  const answer = { protocol: { kind: 'answer', message: 'item done' } };
  const step = {
    ...answer,
    alternatives: ITEM_MS.filter((ms) => ms > 0).map((ms) => ({
      ifPrompt: `work for ${ms} ms\\b`,
      ...answer,
      delayMs: ms,
    })),
  };
  writeFileSync(join(dir, 'script.json'), JSON.stringify({ steps: Array.from({ length: 12 }, () => step) }, null, 2));
  writeFileSync(join(dir, 'items.jsonl'), `${plan.items.map((item) => JSON.stringify(item)).join('\n')}\n`);
}

/** The store as the trial reads it while the job runs: how many items completed, whether the job is over. */
class JobWatch {
  private constructor(private readonly store: Store) {}

  static async open(dir: string, url: string): Promise<JobWatch> {
    return new JobWatch(await Store.open(url, { cwd: dir }));
  }

  async progress(sessionId: string): Promise<{ completed: number; over: boolean }> {
    const rows = await this.store.db
      .selectFrom('oar_events')
      .select((eb) => ['type', eb.fn.countAll().as('n')])
      .where('session_id', '=', sessionId)
      .where('type', 'in', ['job.item.completed', 'job.completed', 'job.failed', 'job.cancelled'])
      .groupBy('type')
      .execute();
    const n = (type: string) => Number(rows.find((r) => r.type === type)?.n ?? 0);
    return { completed: n('job.item.completed'), over: n('job.completed') + n('job.failed') + n('job.cancelled') > 0 };
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

export interface JobRun {
  jobId?: string;
  sessionId?: string;
  faultAt: string;
  killed: number;
  resumes: number;
  workers: number;
  /** The job ended (completed, failed or cancelled) before the deadline. */
  over: boolean;
  jobMs?: number;
  /** What went wrong driving it (a job never recorded, one not over in time). */
  problems: { check: Check; message: string }[];
}

export interface JobEnv {
  dir: string;
  /** The URL the trial reads the store with. */
  readUrl: string;
  plan: JobPlan;
  random: () => number;
  /** Start an `oar` process of the trial (tracked, killed at its time limit). */
  run: (role: string, args: string[], limitMs: number) => Proc;
  kill: (proc: Proc) => boolean;
}

/** Record the job, drive it, kill its drivers at the plan's points, take it over until it is over. */
export async function runJob(env: JobEnv): Promise<JobRun> {
  const { plan, random } = env;
  const deadline = jobDeadlineMs(plan.items.length);
  const limit = deadline + 30_000;
  const result: JobRun = { faultAt: '', killed: 0, resumes: 0, workers: 0, over: false, problems: [] };
  const drivers: Proc[] = [];
  const labels: string[] = [];
  const start = ['jobs', 'start', '--items', 'items.jsonl', '--prompt', PROMPT, '--name', 'trial'];
  const policy = ['--concurrency', String(plan.concurrency), '--max-attempts', String(plan.maxAttempts)];
  const args = [...start, ...policy, '--backoff-ms', '50'];
  const worker = () => {
    result.workers++;
    const proc = env.run(`worker#${result.workers}`, workerArgs(plan), limit);
    drivers.push(proc);
    return proc;
  };
  const resume = (sessionId: string) => {
    result.resumes++;
    const proc = env.run(`resume#${result.resumes}`, ['resume', '--json', sessionId], limit);
    drivers.push(proc);
    return proc;
  };

  let began = Date.now();
  if (plan.mode === 'start') {
    const first = env.run('jobs start', args, limit);
    drivers.push(first);
    const started = () => /job (job_\w+) started in session (\S+):/.exec(first.out);
    while (!first.exited && !started()) await sleep(5);
    const found = started();
    if (found) [, result.jobId, result.sessionId] = found;
  } else {
    const recorder = env.run('jobs start --detach', [...args, '--detach', '--json'], limit);
    await recorder.exit;
    try {
      const job = JSON.parse(recorder.out) as JobView;
      result.jobId = job.jobId;
      result.sessionId = job.sessionId;
    } catch {
      // reported below
    }
  }
  const sessionId = result.sessionId;
  if (!result.jobId || !sessionId) {
    result.problems.push({ check: 'finished', message: `the job was not recorded (${plan.mode})` });
    return result;
  }
  began = Date.now();
  if (plan.mode === 'workers') for (let w = between(random, 1, 3); w > 0; w--) worker();
  if (plan.mode === 'resume') for (let r = between(random, 1, 2); r > 0; r--) resume(sessionId);

  const watch = await JobWatch.open(env.dir, env.readUrl);
  try {
    let state = await watch.progress(sessionId);
    const late = () => Date.now() - began > deadline;
    for (const point of plan.kills) {
      while (!state.over && state.completed < point.after && !late()) {
        await sleep(POLL_MS);
        state = await watch.progress(sessionId);
      }
      await sleep(point.extraMs);
      state = await watch.progress(sessionId);
      if (state.over || late()) break;
      // Drawn whatever happened, so the seed's later decisions do not depend on the machine's timing.
      const [which, replace, kind] = [random(), random() < 0.5, random() < 0.5 ? 'worker' : 'resume'];
      const alive = drivers.filter((p) => !p.exited);
      const victim = alive[Math.floor(which * alive.length)];
      if (!victim) continue;
      if (env.kill(victim)) result.killed++;
      labels.push(`${victim.role} at ${state.completed} done (#${point.after}+${point.extraMs}ms)`);
      await victim.exit;
      // The survivors take the killed one's threads over; with none (or by the seed's choice) a fresh process does.
      const survivors = drivers.filter((p) => !p.exited).length;
      if (survivors === 0 || replace) {
        const fresh = plan.mode === 'workers' ? 'worker' : plan.mode === 'resume' ? 'resume' : kind;
        if (fresh === 'worker') worker();
        else resume(sessionId);
      }
    }
    // Until the job is over: a driver that ends with the job not over (none should) is followed by `oar resume`.
    while (!state.over && !late()) {
      if (drivers.every((p) => p.exited)) {
        if (result.resumes >= 10) break;
        resume(sessionId);
      }
      await sleep(POLL_MS * 5);
      state = await watch.progress(sessionId);
    }
    result.over = state.over;
    result.jobMs = Date.now() - began;
    if (!state.over) {
      result.problems.push({
        check: 'hang',
        message: `job ${result.jobId} not over ${Math.round((Date.now() - began) / 1000)} s after it was recorded (${state.completed} of ${plan.items.length} items completed)`,
      });
    }
  } finally {
    await watch.close();
  }
  // Workers stop as they are asked to (SIGTERM: drain); the others end with the job (or are killed at their limit).
  for (const proc of drivers) if (!proc.exited && proc.role.startsWith('worker')) proc.child.kill('SIGTERM');
  if (!result.over) for (const proc of drivers) if (!proc.exited) env.kill(proc);
  await Promise.all(drivers.map((p) => p.exit));
  result.faultAt = `${plan.mode}: ${labels.length ? labels.join(', ') : 'no kill (the job was over first)'}`;
  return result;
}

function workerArgs(plan: JobPlan): string[] {
  return ['worker', '--concurrency', String(plan.workerConcurrency), '--drain-seconds', '5'];
}

/** The job read model as `oar jobs get` answers it (read only: no worker, no model). */
async function readJob(dir: string, url: string, jobId: string): Promise<JobView | undefined> {
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
      return await runtime.jobs.get({ jobId });
    } catch {
      return undefined;
    } finally {
      await runtime.close();
    }
  } finally {
    await store.close();
  }
}

const JOB_ENDS = new Set(['job.completed', 'job.failed', 'job.cancelled']);
const indexOf = (e: RuntimeEvent) => (e.payload as { index?: number }).index;

/** The job checks on the job's session log and read model (the header's job_items, job_end, job_counts, job_attempts). */
export async function checkJob(
  dir: string,
  readUrl: string,
  events: RuntimeEvent[],
  plan: JobPlan,
  run: JobRun,
): Promise<{ problems: { check: Check; message: string }[]; summary: JobTrialSummary }> {
  const problems: { check: Check; message: string }[] = [];
  const fail = (check: Check, message: string) => problems.push({ check, message });
  const jobId = run.jobId ?? '';
  const ofJob = events.filter((e) => e.jobId === jobId && e.type.startsWith('job.'));
  const completedEvents = ofJob.filter((e) => e.type === 'job.item.completed');
  const startedEvents = ofJob.filter((e) => e.type === 'job.item.started');
  const view = jobId ? await readJob(dir, readUrl, jobId) : undefined;
  const itemTurns = new Set(startedEvents.map((e) => e.turnId));
  let redoneCalls = 0;
  const calls = new Set<string>();
  for (const e of events) {
    if (!e.turnId || !itemTurns.has(e.turnId)) continue;
    if (e.type === 'model.requested') {
      if (calls.has(e.turnId)) redoneCalls++;
      calls.add(e.turnId);
    }
  }
  const summary: JobTrialSummary = {
    mode: plan.mode,
    ...(run.jobId ? { jobId: run.jobId } : {}),
    items: plan.items.length,
    concurrency: plan.concurrency,
    maxAttempts: plan.maxAttempts,
    completed: completedEvents.length,
    itemStarts: startedEvents.length,
    redoneCalls,
    workers: run.workers,
    ...(view ? { status: view.status } : {}),
    ...(run.jobMs !== undefined ? { jobMs: run.jobMs } : {}),
  };
  if (!run.jobId) return { problems, summary };
  const n = plan.items.length;

  // job_items: each item completed once, and only the job's items.
  const completions = new Map<number, number>();
  for (const e of completedEvents) completions.set(indexOf(e) ?? -1, (completions.get(indexOf(e) ?? -1) ?? 0) + 1);
  const wrong: string[] = [];
  for (let index = 0; index < n; index++) {
    const times = completions.get(index) ?? 0;
    if (times !== 1) wrong.push(`#${index} ${times}×`);
  }
  for (const index of completions.keys()) if (index < 0 || index >= n) wrong.push(`#${index} (not an item)`);
  if (wrong.length > 0) {
    fail('job_items', `${wrong.length} item(s) not completed exactly once: ${wrong.slice(0, 20).join(', ')}`);
  }

  // job_attempts: no item started more often than its attempts allow.
  const starts = new Map<number, number>();
  for (const e of startedEvents) starts.set(indexOf(e) ?? -1, (starts.get(indexOf(e) ?? -1) ?? 0) + 1);
  const over = [...starts].filter(([, times]) => times > plan.maxAttempts);
  if (over.length > 0) {
    fail(
      'job_attempts',
      `${over.length} item(s) started more than ${plan.maxAttempts} time(s): ${over
        .slice(0, 20)
        .map(([index, times]) => `#${index} ${times}×`)
        .join(', ')}`,
    );
  }

  const failed = ofJob.filter((e) => e.type === 'job.item.failed');
  if (failed.length > 0) {
    const codes = new Map<string, number>();
    for (const e of failed) {
      const code = (e.payload as { error?: { code?: string } }).error?.code ?? '?';
      codes.set(code, (codes.get(code) ?? 0) + 1);
    }
    fail(
      'job_attempts',
      `${failed.length} attempt(s) failed though the model never fails (${[...codes].map(([c, k]) => `${k}× ${c}`).join(', ')}): ${failed
        .slice(0, 10)
        .map((e) => `#${indexOf(e)} attempt ${(e.payload as { attempt?: number }).attempt} (event #${e.sequence})`)
        .join(', ')}`,
    );
  }

  // job_end: completed once, nothing else ended it, and nothing of the job after that.
  const ends = ofJob.filter((e) => JOB_ENDS.has(e.type));
  const completedEnds = ends.filter((e) => e.type === 'job.completed');
  if (completedEnds.length !== 1 || ends.length !== 1) {
    fail(
      'job_end',
      `the job ended ${ends.length} time(s): ${ends.map((e) => `${e.type} #${e.sequence}`).join(', ') || 'never'}`,
    );
  }
  const last = ofJob.at(-1);
  if (completedEnds.length > 0 && last?.type !== 'job.completed') {
    fail('job_end', `${last?.type} #${last?.sequence} came after job.completed #${completedEnds[0]?.sequence}`);
  }

  // job_counts: the read model and the counts the events carry agree with the events.
  const expected = { total: n, pending: 0, running: 0, completed: n, failed: 0, cancelled: 0 };
  const same = (a: unknown, b: Record<string, number>) =>
    typeof a === 'object' && a !== null && Object.entries(b).every(([k, v]) => (a as Record<string, unknown>)[k] === v);
  if (!view) fail('job_counts', `job ${jobId} has no read model`);
  else {
    if (view.status !== 'completed')
      fail('job_counts', `the read model says ${view.status}${view.reason ? ` (${view.reason})` : ''}`);
    if (view.counts.completed !== completedEvents.length || !same(view.counts, expected)) {
      fail(
        'job_counts',
        `read model counts ${JSON.stringify(view.counts)}; ${completedEvents.length} job.item.completed of ${n} items`,
      );
    }
    const notDone = view.items.filter((i) => i.status !== 'completed');
    if (notDone.length > 0) {
      fail(
        'job_counts',
        `read model items not completed: ${notDone
          .slice(0, 20)
          .map((i) => `#${i.index} ${i.status}`)
          .join(', ')}`,
      );
    }
    const miscounted = view.items.filter((i) => i.attempts !== (starts.get(i.index) ?? 0));
    if (miscounted.length > 0) {
      fail(
        'job_counts',
        `read model attempts differ from job.item.started: ${miscounted
          .slice(0, 20)
          .map((i) => `#${i.index} ${i.attempts} vs ${starts.get(i.index) ?? 0}`)
          .join(', ')}`,
      );
    }
  }
  const carried = (e: RuntimeEvent | undefined) => (e?.payload as { counts?: unknown } | undefined)?.counts;
  if (completedEnds[0] && !same(carried(completedEnds[0]), expected)) {
    fail('job_counts', `job.completed carries ${JSON.stringify(carried(completedEnds[0]))}`);
  }
  const progress = ofJob.filter((e) => e.type === 'job.progress').at(-1);
  if (completedEnds[0] && !same(carried(progress), expected)) {
    fail('job_counts', `the last job.progress #${progress?.sequence} carries ${JSON.stringify(carried(progress))}`);
  }
  return { problems, summary };
}
