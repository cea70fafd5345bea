import { oarError } from '@oar/protocol';
import { z } from 'zod';
import { actionStatusEvent } from '../facts/action.js';
import { JobChangedError, jobRaceBackoff, jobUnchanged, MAX_JOB_RETRIES, stopItems } from '../facts/job-items.js';
import { actionJobId, fillTemplate, JobPolicyInputSchema, jobStart, MAX_ITEM_INPUT_CHARS } from '../facts/job-start.js';
import { bothGuards, ThreadChangedError } from '../facts/queue.js';
import { isClosing, OarRuntimeError, toOarError } from '../kernel/errors.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { isFinishedJob, isSettledItem, type JobState, jobCounts } from '../read-models/job.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import { readFileBytes } from '../tools/builtin/files.js';
import { openWorkspaceFile } from '../tools/workspace.js';
import { resolveReference } from './references.js';

/**
 * The runtime `start_job` action (docs/jobs.md "From the model"): the model fans a batch out without holding it in
 * its context — its items given inline, or read from a workspace file or a stored output (JSON lines or a JSON
 * array) — and the action waits for the job, answering with its counts and each item's outcome. The job runs in the
 * action's session (its items are threads of it), under the session's budgets and permissions.
 *
 * Its id is the action's own (a hash of session, run and action): a worker that takes the thread over after a crash
 * runs the action again and finds the job already started, and waits for it instead of starting a second one.
 */

const StartJobOperationSchema = z
  .strictObject({
    items: z.array(z.unknown()).optional(),
    /** A workspace file of JSON lines (or one JSON array). */
    items_file: z.string().min(1).optional(),
    /** A stored output: `action:<id>.output` or `artifact://…`. */
    items_ref: z.string().min(1).optional(),
    prompt: z.string().min(1).max(MAX_ITEM_INPUT_CHARS),
    agent: z.string().min(1).optional(),
    name: z.string().max(200).optional(),
    policy: JobPolicyInputSchema.optional(),
  })
  .refine((input) => [input.items, input.items_file, input.items_ref].filter((x) => x !== undefined).length === 1, {
    message: 'give exactly one of items, items_file or items_ref',
  });

/** How often the action reads its job while it waits (one small row read). */
const POLL_MS = 250;
/** The most bytes read for items from a file or a stored output. */
const MAX_ITEMS_BYTES = 16 * 1024 * 1024;

export async function startJobOperation(ctx: ExecutorContext): Promise<RunActionStatus> {
  const parsed = StartJobOperationSchema.safeParse(ctx.action.input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return failed(
      ctx,
      oarError('invalid_input', `start_job: ${issue?.path.join('.') || 'input'}: ${issue?.message}`, {
        details: {
          issues: parsed.error.issues.slice(0, 5).map((i) => ({ path: i.path.join('.'), message: i.message })),
        },
      }),
    );
  }
  const input = parsed.data;
  const sessionId = ctx.thread.sessionId;
  const jobId = actionJobId(sessionId, ctx.run.runId, ctx.action.id);
  try {
    if (!(await ctx.loadJob(jobId))) {
      const agent = input.agent ?? ctx.config.mainAgent.name;
      if (agent !== ctx.config.mainAgent.name && !ctx.config.agents.some((a) => a.name === agent)) {
        throw new OarRuntimeError('unknown_agent', `agent "${agent}" is not configured`, { details: { agent } });
      }
      const inputs = fillTemplate(input.prompt, await itemsOf(ctx, input));
      const drafts = await jobStart({
        jobId,
        sessionId,
        agent,
        inputs,
        template: input.prompt,
        ...(input.name ? { name: input.name } : {}),
        ...(input.policy ? { policy: input.policy } : {}),
        startedBy: { threadId: ctx.thread.threadId, runId: ctx.run.runId, actionId: ctx.action.id },
      });
      // Durable before any item runs: the job is the action's side effect, recorded once.
      await ctx.record(drafts, { durable: true });
      for (const threadId of threadsWithTurns(drafts)) ctx.wake(threadId);
    }
    return await awaitJob(ctx, jobId);
  } catch (thrown) {
    if (isClosing(ctx.signal)) return 'pending';
    return failed(ctx, toOarError(thrown));
  }
}

/** The items: inline, or parsed from a workspace file or a stored output (JSON lines, or one JSON array). */
async function itemsOf(ctx: ExecutorContext, input: z.infer<typeof StartJobOperationSchema>): Promise<unknown[]> {
  if (input.items) return input.items;
  let text: string;
  if (input.items_file) {
    const file = await openWorkspaceFile(ctx.config.workspaceRoot, input.items_file, 'read');
    try {
      if (file.stats.size > MAX_ITEMS_BYTES) throw tooLarge(input.items_file, file.stats.size);
      text = (await readFileBytes(file)).toString('utf8');
    } finally {
      await file.handle.close();
    }
  } else {
    const ref = input.items_ref as string;
    const resolved = await resolveReference(
      { reader: ctx, thread: await ctx.loadThread(ctx.thread.threadId), run: ctx.run },
      ref,
    );
    if (!resolved.ok) {
      throw new OarRuntimeError('unknown_reference', `start_job: cannot read items from ${ref}: ${resolved.reason}`, {
        details: { ref },
      });
    }
    if (resolved.text.length > MAX_ITEMS_BYTES) throw tooLarge(ref, resolved.text.length);
    text = resolved.text;
  }
  return parseItems(text);
}

const tooLarge = (source: string, size: number) =>
  new OarRuntimeError('payload_too_large', `start_job: the items of ${source} are over ${MAX_ITEMS_BYTES} bytes`, {
    details: { source, size, limit: MAX_ITEMS_BYTES },
  });

/** One JSON array, or JSON lines (blank lines skipped); a line that is not JSON is named. */
export function parseItems(text: string): unknown[] {
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) {
    try {
      const value = JSON.parse(trimmed);
      if (Array.isArray(value)) return value;
    } catch {
      // Not one array: read as JSON lines (a first line may be an array item of its own).
    }
  }
  const items: unknown[] = [];
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '') continue;
    try {
      items.push(JSON.parse(line));
    } catch {
      throw new OarRuntimeError('invalid_input', `start_job: items line ${index + 1} is not JSON`, {
        details: { line: index + 1 },
      });
    }
  }
  return items;
}

function threadsWithTurns(drafts: readonly EventDraft[]): string[] {
  return drafts.flatMap((d) => (d.type === 'turn.submitted' && d.threadId ? [d.threadId] : []));
}

/** Wait for the job to end; an interrupt of the action cancels it (its running items stop, the rest never start). */
async function awaitJob(ctx: ExecutorContext, jobId: string): Promise<RunActionStatus> {
  for (;;) {
    const job = await ctx.loadJob(jobId);
    if (!job) throw new OarRuntimeError('job_not_found', `job "${jobId}" of this action is gone`);
    if (isFinishedJob(job)) return answered(ctx, job);
    if (ctx.signal.aborted) {
      if (isClosing(ctx.signal)) return 'pending';
      await cancelled(ctx, jobId);
      const error = oarError('interrupted', `start_job was cancelled by an interrupt: job ${jobId} cancelled`);
      await ctx.record([actionStatusEvent(ctx, 'cancelled', { error })]);
      return 'cancelled';
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, POLL_MS);
      ctx.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          resolve();
        },
        { once: true },
      );
    });
  }
}

/** The job cancelled with its action, recomputed while another item's end races it. */
async function cancelled(ctx: ExecutorContext, jobId: string): Promise<void> {
  const loader = { loadThread: (_sessionId: string, threadId: string) => ctx.loadThread(threadId) };
  for (let attempt = 1; ; attempt++) {
    const job = await ctx.loadJob(jobId);
    if (!job || isFinishedJob(job)) return;
    const reason = 'its start_job action was interrupted';
    const stopped = await stopItems(loader, job, `job ${jobId} cancelled: ${reason}`);
    const counts = jobCounts({ items: job.items.map((i) => (isSettledItem(i) ? i : { ...i, status: 'cancelled' })) });
    try {
      await ctx.record([...stopped.drafts, { type: 'job.cancelled', jobId, payload: { counts, reason } }], {
        guard: bothGuards(jobUnchanged(job), stopped.guard) as AppendGuard,
      });
      return;
    } catch (error) {
      // Another item ended, or a running item's thread took a step (its driver writes at every one): read again.
      const raced = error instanceof JobChangedError || error instanceof ThreadChangedError;
      if (!raced || attempt >= MAX_JOB_RETRIES) throw error;
      await jobRaceBackoff(attempt);
    }
  }
}

/** The job's outcome as the action's: each item's line, the counts; failed when an item failed every attempt. */
async function answered(ctx: ExecutorContext, job: JobState): Promise<RunActionStatus> {
  const counts = jobCounts(job);
  const lines = job.items.map(
    (item) =>
      `#${item.index} ${item.status} (${item.attempts} attempt${item.attempts === 1 ? '' : 's'}): ${item.error?.message ?? item.summary ?? ''}`,
  );
  const summary = `job ${job.jobId} ${job.status}: ${counts.completed} completed, ${counts.failed} failed, ${counts.cancelled} cancelled of ${counts.total}`;
  const structured = { jobId: job.jobId, status: job.status, counts };
  if (job.status === 'completed') {
    await ctx.record([actionStatusEvent(ctx, 'completed', { text: lines.join('\n'), summary, structured })]);
    return 'completed';
  }
  const error = oarError('job_failed', `${summary}${job.reason ? ` (${job.reason})` : ''}\n${lines.join('\n')}`, {
    details: structured,
  });
  return failed(ctx, error);
}

async function failed(ctx: ExecutorContext, error: ReturnType<typeof oarError>): Promise<RunActionStatus> {
  await ctx.record([actionStatusEvent(ctx, 'failed', { error })]);
  return 'failed';
}
