/*
 * The work of `oar jobs …` (job-commands.ts), imported when one runs. `start` and `retry` drive the job's session
 * here until the job is over unless `--detach`; the rest read or record and return.
 */
import { jsonTextTooDeep, MAX_JSON_DEPTH, oarError } from '@oar/protocol';
import { EXIT, type JobView, type Runtime } from '@oar/runtime';
import { storeFlag } from './demo.js';
import { positiveOption, printJson, readInput, UsageError } from './io.js';
import type { GlobalOptions } from './options.js';
import { openForSessions, openRuntime, withRuntime } from './runtime-actions.js';

export interface JobOptions extends GlobalOptions {
  items?: string;
  prompt?: string;
  name?: string;
  session?: string;
  agent?: string;
  concurrency?: string;
  maxAttempts?: string;
  backoffMs?: string;
  failFast?: boolean;
  status?: string;
  reason?: string;
  detach?: boolean;
  json?: boolean;
}

/** The largest items file read (1,000 items of up to 16 KiB each fit in it). */
const ITEMS_FILE_LIMIT = 16 * 1024 * 1024;
/** How often a followed job is read again. */
const FOLLOW_EVERY_MS = 200;

const out = (line: string) => process.stdout.write(`${line}\n`);

/** The items of a JSON-lines file: one JSON value a line (blank lines skipped); a bad line is named. */
export function parseItems(text: string): unknown[] {
  const items: unknown[] = [];
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '') continue;
    // What renders an item recurses: bound its depth first (as every JSON input of the CLI is).
    if (jsonTextTooDeep(line)) {
      throw new UsageError(
        oarError('input_too_deep', `--items line ${index + 1} nests deeper than ${MAX_JSON_DEPTH} levels`, {
          details: { line: index + 1, limit: MAX_JSON_DEPTH },
        }),
      );
    }
    try {
      items.push(JSON.parse(line));
    } catch (error) {
      throw new UsageError(
        oarError('invalid_json', `--items line ${index + 1} is not JSON: ${(error as Error).message}`, {
          details: { line: index + 1 },
        }),
      );
    }
  }
  return items;
}

function backoff(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) {
    throw new UsageError(
      oarError('invalid_option', `--backoff-ms must be a whole number of milliseconds, not "${text}"`),
    );
  }
  return value;
}

export async function startJob(options: JobOptions): Promise<number> {
  const items = parseItems(await readInput(options.items, ITEMS_FILE_LIMIT, '--items'));
  const concurrency = positiveOption('--concurrency', options.concurrency, undefined);
  const maxAttempts = positiveOption('--max-attempts', options.maxAttempts, undefined);
  const backoffMs = backoff(options.backoffMs);
  const policy = {
    ...(concurrency !== undefined ? { concurrency } : {}),
    ...(maxAttempts !== undefined ? { maxAttempts } : {}),
    ...(backoffMs !== undefined ? { backoffMs } : {}),
    ...(options.failFast ? { failFast: true } : {}),
  };
  const opened = await openRuntime(options, []);
  return withRuntime(opened, async (runtime) => {
    const job = await runtime.jobs.start({
      items,
      prompt: options.prompt ?? '',
      ...(options.name ? { name: options.name } : {}),
      ...(options.session ? { sessionId: options.session } : {}),
      ...(options.agent ? { agent: options.agent } : {}),
      ...(Object.keys(policy).length ? { policy } : {}),
    });
    if (options.detach) return detached(job, options, opened.store.location);
    if (!options.json) out(`job ${job.jobId} started in session ${job.sessionId}: ${job.counts.total} items`);
    return follow(runtime, job, options);
  });
}

export async function retryJob(jobId: string, options: JobOptions): Promise<number> {
  const opened = await openForSessions(options, []);
  return withRuntime(opened, async (runtime) => {
    const job = await runtime.jobs.retry({ jobId });
    if (options.detach) return detached(job, options, opened.store.location);
    if (!options.json)
      out(`job ${job.jobId} round ${job.round}: ${job.counts.pending + job.counts.running} items again`);
    return follow(runtime, job, options);
  });
}

function detached(job: JobView, options: JobOptions, location: string): number {
  if (options.json) printJson(job);
  else {
    out(`job ${job.jobId} recorded in session ${job.sessionId}; a worker runs it`);
    out(`  → oar jobs get ${job.jobId}${storeFlag(options.store, location)}`);
  }
  return EXIT.ok;
}

/** Drive the job's session here until the job is over, printing each change of its counts; exit 0 if it completed. */
async function follow(runtime: Runtime, started: JobView, options: JobOptions): Promise<number> {
  runtime.worker?.adopt(started.sessionId);
  await runtime.worker?.look(started.sessionId);
  let job = started;
  let shown = '';
  for (;;) {
    const line = progress(job);
    if (!options.json && line !== shown) out(line);
    shown = line;
    if (job.status !== 'running') break;
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_EVERY_MS));
    job = await runtime.jobs.get({ jobId: job.jobId });
  }
  if (options.json) printJson(job);
  else for (const item of job.items) if (item.status !== 'completed') out(itemLine(item));
  return job.status === 'completed' ? EXIT.ok : EXIT.failed;
}

const progress = (job: JobView) => {
  const c = job.counts;
  return `${job.jobId} ${job.status}: ${c.completed} completed, ${c.failed} failed, ${c.running} running, ${c.pending} pending${c.cancelled ? `, ${c.cancelled} cancelled` : ''} of ${c.total}${job.reason ? ` (${job.reason})` : ''}`;
};

const itemLine = (item: JobView['items'][number]) =>
  `  #${item.index} ${item.status} after ${item.attempts} attempt(s), thread ${item.threadId}${item.error ? `: ${item.error.message}` : ''}`;

export async function listJobs(options: JobOptions): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const status = options.status as 'running' | 'completed' | 'failed' | 'cancelled' | undefined;
    const { jobs } = await runtime.jobs.list({
      ...(options.session ? { sessionId: options.session } : {}),
      ...(status ? { status } : {}),
    });
    if (options.json) printJson({ jobs });
    else if (jobs.length === 0) out('no jobs');
    else for (const job of jobs) out(`${progress(job as JobView)}  ${job.name ?? ''}  session ${job.sessionId}`);
    return EXIT.ok;
  });
}

export async function getJob(jobId: string, options: JobOptions): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const job = await runtime.jobs.get({ jobId });
    if (options.json) printJson(job);
    else {
      out(progress(job));
      for (const item of job.items) out(itemLine(item));
    }
    return EXIT.ok;
  });
}

export async function cancelJob(jobId: string, options: JobOptions): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const job = await runtime.jobs.cancel({ jobId, ...(options.reason ? { reason: options.reason } : {}) });
    if (options.json) printJson(job);
    else out(progress(job));
    return EXIT.ok;
  });
}
