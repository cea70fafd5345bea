import type { JobCounts } from '@oar/protocol';
import { z } from 'zod';
import { agentByName } from '../config/agents.js';
import type { BindingUpdate } from '../config/binding.js';
import {
  fillSlots,
  inputFrom,
  JobChangedError,
  jobRaceBackoff,
  jobUnchanged,
  MAX_JOB_RETRIES,
  stopItems,
} from '../facts/job-items.js';
import { fillTemplate, JobPolicyInputSchema, jobStart, MAX_ITEM_INPUT_CHARS } from '../facts/job-start.js';
import { bothGuards, ThreadChangedError } from '../facts/queue.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { keyedModels, loadReadModels } from '../log/read-model-rows.js';
import {
  isFinishedJob,
  isSettledItem,
  JOB_STATUSES,
  type JobItemState,
  type JobState,
  jobCounts,
} from '../read-models/job.js';
import { bindingOf } from '../read-models/session.js';
import type { CommandContext } from './command-context.js';
import { createSession } from './sessions.js';

/**
 * Jobs (docs/jobs.md): a batch of items, one prompt template, a policy. Each item gets a thread of its own in the
 * job's session, holding its filled-in prompt; an attempt is a turn of that thread, so items run, fail over and are
 * taken over like any thread — in parallel across workers (leases are per thread). The facts that move a job along
 * are written with what causes them (facts/job-items.ts); these commands create, list, read, cancel and retry.
 */

const Id = z.string().min(1).max(256);

export const StartJobInputSchema = z.strictObject({
  /** The id to give the job: the same id again returns the job started first (a retried request starts one job). */
  jobId: z
    .string()
    .regex(/^job_[A-Za-z0-9_-]{1,120}$/, 'job_ then 1-120 letters, digits, "_" or "-"')
    .optional(),
  /** The session the job runs in (its binding, budgets and permissions); a new session when absent. */
  sessionId: Id.optional(),
  name: z.string().max(200).optional(),
  /** The items: JSON objects (their fields fill the template) or strings (`{{item}}`). */
  items: z.array(z.unknown()),
  /** The prompt of each item: `{{field}}` is the item's field, `{{item}}` the whole item, `{{index}}` its number. */
  prompt: z.string().max(MAX_ITEM_INPUT_CHARS),
  /** The agent that runs the items (default: the session's main agent). */
  agent: Id.optional(),
  policy: JobPolicyInputSchema.optional(),
  /**
   * For a new session: its binding's changes (the job's own budgets and permission policy). Its shape is checked
   * where inputs enter (facade/inputs.ts, with the binding's own schema, which this floor does not load).
   */
  binding: z.record(z.string(), z.unknown()).optional(),
  requestedBy: Id.optional(),
  /** For a new session: the workspace it belongs to (an API key's). */
  workspaceId: Id.optional(),
});
export type StartJobInput = Omit<z.infer<typeof StartJobInputSchema>, 'binding'> & { binding?: BindingUpdate };
/** `workspaceId`: the job must be one of that workspace's (an API key's); another's is `job_not_found`. */
export const JobIdInputSchema = z.strictObject({ jobId: Id, workspaceId: Id.optional() });
export const CancelJobInputSchema = JobIdInputSchema.extend({ reason: z.string().max(1_000).optional() });
export type JobIdInput = z.infer<typeof JobIdInputSchema>;
export const ListJobsInputSchema = z.strictObject({
  sessionId: Id.optional(),
  workspaceId: Id.optional(),
  status: z.enum(JOB_STATUSES).optional(),
  limit: z.number().int().min(1).max(1_000).optional(),
});
export type ListJobsInput = z.infer<typeof ListJobsInputSchema>;

/** A job as `get_job` and `list_jobs` answer it: the read model with its counts. */
export type JobView = JobState & { counts: JobCounts };

const view = (job: JobState): JobView => ({ ...job, counts: jobCounts(job) });

/** Start a job: its items' threads, its first items' turns, in one append. */
export async function startJob(ctx: CommandContext, input: StartJobInput): Promise<JobView> {
  const inputs = fillTemplate(input.prompt, input.items);
  // A chosen id makes the start idempotent: the same id again is the job started first.
  const known = input.jobId ? await sameJob(ctx, input.jobId, input.workspaceId) : undefined;
  if (known) return known;
  // A named session runs under its own binding: one given with it would be silently ignored.
  if (input.sessionId && input.binding) {
    throw new OarRuntimeError('invalid_input', 'binding is for a job in a new session: the named session has its own', {
      details: { field: 'binding', sessionId: input.sessionId },
    });
  }
  // Everything is checked before anything is recorded: a refused job leaves no session behind.
  const binding = input.sessionId
    ? (bindingOf(await ctx.session(input.sessionId)) ?? ctx.deps.bindings.template())
    : ctx.deps.bindings.apply(ctx.deps.bindings.template(), input.binding).binding;
  const agent = input.agent ?? binding.mainAgent.name;
  if (!agentByName(binding, agent)) {
    throw new OarRuntimeError('unknown_agent', `agent "${agent}" is not configured`, { details: { agent } });
  }
  const sessionId =
    input.sessionId ??
    (
      await createSession(ctx, {
        title: `job: ${input.name ?? input.prompt.slice(0, 80)}`,
        ...(input.binding ? { binding: input.binding } : {}),
        ...(input.requestedBy ? { actor: input.requestedBy } : {}),
        ...(input.workspaceId ? { workspaceId: input.workspaceId } : {}),
      })
    ).sessionId;
  const jobId = input.jobId ?? newId('job');
  const drafts = await jobStart({
    jobId,
    sessionId,
    agent,
    inputs,
    template: input.prompt,
    ...(input.name ? { name: input.name } : {}),
    ...(input.policy ? { policy: input.policy } : {}),
    ...(input.requestedBy ? { requestedBy: input.requestedBy } : {}),
  });
  try {
    await ctx.append(sessionId, drafts, input.jobId ? { guard: jobAbsent(sessionId, jobId) } : {});
  } catch (error) {
    // Started at the same moment by another caller with the same id: that start is the job.
    if (error instanceof JobExists) return getJob(ctx, { jobId });
    throw error;
  }
  return getJob(ctx, { jobId });
}

/** The job a chosen id names already, when it does; another workspace's job with that id is `job_exists`. */
async function sameJob(ctx: CommandContext, jobId: string, workspaceId: string | undefined) {
  const [row] = await keyedModels(ctx.log.store.db, 'job', { key: jobId });
  if (!row) return undefined;
  if (workspaceId && !(await keyedModels(ctx.log.store.db, 'job', { key: jobId, workspaceId })).length) {
    throw new OarRuntimeError('job_exists', `job id "${jobId}" is taken`, { details: { jobId } });
  }
  return view(row.body as JobState);
}

class JobExists extends Error {}

/** A guard: no job of the session has this id yet (two starts with one id cannot both land). */
function jobAbsent(sessionId: string, jobId: string): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, sessionId, [{ kind: 'job', key: jobId }]);
    if (models.jobs.has(jobId)) throw new JobExists();
  };
}

export async function getJob(ctx: CommandContext, input: JobIdInput): Promise<JobView> {
  return view(await storedJob(ctx, input));
}

async function storedJob(ctx: CommandContext, input: JobIdInput): Promise<JobState> {
  const scope = input.workspaceId ? { workspaceId: input.workspaceId } : {};
  const [row] = await keyedModels(ctx.log.store.db, 'job', { key: input.jobId, ...scope });
  if (!row) throw notFound('job', input.jobId);
  return row.body as JobState;
}

/** The jobs, newest first: of one session, or all; of one status. Without their items (`get_job` has those). */
export async function listJobs(
  ctx: CommandContext,
  input: ListJobsInput = {},
): Promise<{ jobs: Omit<JobView, 'items'>[] }> {
  const rows = await keyedModels(ctx.log.store.db, 'job', {
    ...(input.sessionId ? { sessionId: input.sessionId } : {}),
    ...(input.workspaceId ? { workspaceId: input.workspaceId } : {}),
  });
  const jobs = rows
    .map((row) => view(row.body as JobState))
    .filter((job) => !input.status || job.status === input.status)
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.jobId.localeCompare(a.jobId))
    .slice(0, input.limit ?? 100)
    .map(({ items: _items, ...job }) => job);
  return { jobs };
}

/**
 * Cancel a job: items at work stop as an interrupt stops them (a retry waiting out its backoff is withdrawn), the
 * rest never start. A job already over is answered as it is.
 */
export async function cancelJob(ctx: CommandContext, input: JobIdInput & { reason?: string }): Promise<JobView> {
  await changeJob(ctx, input, async (job) => {
    if (isFinishedJob(job)) return undefined;
    const reason = input.reason ?? 'cancelled';
    const stopped = await stopItems(threadLoader(ctx), job, `job ${job.jobId} cancelled: ${reason}`);
    const counts = jobCounts({ items: job.items.map((i) => (isSettledItem(i) ? i : { ...i, status: 'cancelled' })) });
    return {
      drafts: [...stopped.drafts, { type: 'job.cancelled', jobId: job.jobId, payload: { counts, reason } }],
      ...(stopped.guard ? { guard: stopped.guard } : {}),
    };
  });
  return getJob(ctx, input);
}

/** Run a finished job's failed and cancelled items again, with a fresh round of attempts each. */
export async function retryJob(ctx: CommandContext, input: JobIdInput): Promise<JobView> {
  await changeJob(ctx, input, async (job) => {
    if (!isFinishedJob(job)) {
      throw new OarRuntimeError('job_running', `job "${job.jobId}" is still running: cancel it or wait for it`, {
        details: { jobId: job.jobId },
      });
    }
    const again = job.items.filter((i) => i.status === 'failed' || i.status === 'cancelled');
    if (again.length === 0) {
      throw new OarRuntimeError('job_nothing_to_retry', `job "${job.jobId}" has no failed or cancelled item`, {
        details: { jobId: job.jobId, status: job.status },
      });
    }
    const round = job.round + 1;
    const items = job.items.map(
      (item): JobItemState =>
        again.includes(item) ? { ...item, status: 'pending', attemptsLeft: job.policy.maxAttempts } : item,
    );
    const next = { ...job, status: 'running' as const, round, items };
    return {
      drafts: [
        { type: 'job.started', jobId: job.jobId, payload: { round, items: again.map((i) => i.index) } },
        ...(await fillSlots(next, items, inputFrom(threadLoader(ctx), job))).drafts,
      ],
    };
  });
  return getJob(ctx, input);
}

const threadLoader = (ctx: CommandContext) => ({
  loadThread: (sessionId: string, threadId: string) => ctx.log.thread(sessionId, threadId),
});

/** Write what `change` makes of the job as read, under the guard that it is still so; computed again if not. */
async function changeJob(
  ctx: CommandContext,
  input: JobIdInput,
  change: (job: JobState) => Promise<{ drafts: EventDraft[]; guard?: AppendGuard } | undefined>,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const job = await storedJob(ctx, input);
    const changed = await change(job);
    if (!changed) return;
    try {
      await ctx.append(job.sessionId, changed.drafts, {
        guard: bothGuards(jobUnchanged(job), changed.guard) as AppendGuard,
      });
      return;
    } catch (error) {
      const raced = error instanceof JobChangedError || error instanceof ThreadChangedError;
      if (!raced || attempt >= MAX_JOB_RETRIES) throw error;
      await jobRaceBackoff(attempt);
    }
  }
}
