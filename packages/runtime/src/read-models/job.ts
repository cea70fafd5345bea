import {
  type JobCounts,
  JobCreatedPayloadSchema,
  JobPolicySchema,
  OarErrorSchema,
  type RuntimeEvent,
} from '@oar/protocol';
import { z } from 'zod';

/**
 * The job read model (the standard's `subagent_job_summary` of one job; docs/jobs.md): the job's policy, and per
 * item its status, the thread it runs in and its attempts. Every item has a thread of its own in the job's session
 * from the start (its input is that thread's); an attempt is a turn of it.
 */

export const JOB_STATUSES = ['running', 'completed', 'failed', 'cancelled'] as const;
export const JOB_ITEM_STATUSES = ['pending', 'running', 'retrying', 'completed', 'failed', 'cancelled'] as const;

export const JobItemStateSchema = z.object({
  index: z.number().int(),
  /** `retrying`: an attempt failed and the next one waits for its backoff (its turn is submitted, not started). */
  status: z.enum(JOB_ITEM_STATUSES),
  threadId: z.string(),
  /** The start of its filled-in prompt. */
  label: z.string().optional(),
  /** Attempts started so far (of this job's rounds together). */
  attempts: z.number().int(),
  /** The turn of the latest attempt. */
  turnId: z.string().optional(),
  /** Attempts this round may still start: `retry_job` gives a failed item a new round. */
  attemptsLeft: z.number().int(),
  error: OarErrorSchema.optional(),
  summary: z.string().optional(),
});
export type JobItemState = z.infer<typeof JobItemStateSchema>;

export const JobStateSchema = z.object({
  jobId: z.string(),
  sessionId: z.string(),
  name: z.string().optional(),
  template: z.string(),
  agent: z.string(),
  policy: JobPolicySchema,
  status: z.enum(JOB_STATUSES),
  /** Why it failed (`items_failed`, `fail_fast`) or was cancelled. */
  reason: z.string().optional(),
  /** 1, and one more for each `retry_job`. */
  round: z.number().int(),
  items: z.array(JobItemStateSchema),
  createdAt: z.string(),
  updatedAt: z.string(),
  endedAt: z.string().optional(),
  lastSequence: z.number().int(),
});
export type JobState = z.infer<typeof JobStateSchema>;

export const isFinishedJob = (job: JobState) => job.status !== 'running';
/** An item whose work is over for this round. */
export const isSettledItem = (item: JobItemState) =>
  item.status === 'completed' || item.status === 'failed' || item.status === 'cancelled';

export function jobCounts(job: Pick<JobState, 'items'>): JobCounts {
  const counts = { total: job.items.length, pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0 };
  for (const item of job.items) counts[item.status === 'retrying' ? 'running' : item.status] += 1;
  return counts;
}

type Payload = Record<string, unknown>;
const num = (value: unknown) => (typeof value === 'number' ? value : undefined);

export function reduceJob(state: JobState | undefined, event: RuntimeEvent): JobState | undefined {
  const payload = (event.payload ?? {}) as Payload;
  if (event.type === 'job.created' && event.jobId) {
    const created = JobCreatedPayloadSchema.parse(payload);
    return {
      jobId: event.jobId,
      sessionId: event.sessionId,
      ...(created.name ? { name: created.name } : {}),
      template: created.template,
      agent: created.agent,
      policy: created.policy,
      status: 'running',
      round: 1,
      items: created.itemThreads.map((threadId, index) => ({
        index,
        status: 'pending',
        threadId,
        ...(created.itemLabels?.[index] !== undefined ? { label: created.itemLabels[index] } : {}),
        attempts: 0,
        attemptsLeft: created.policy.maxAttempts,
      })),
      createdAt: event.timestamp,
      updatedAt: event.timestamp,
      lastSequence: event.sequence,
    };
  }
  if (!state) return state;
  const next = jobChange(state, event, payload);
  return { ...next, updatedAt: event.timestamp, lastSequence: event.sequence };
}

function jobChange(state: JobState, event: RuntimeEvent, payload: Payload): JobState {
  const index = num(payload.index);
  switch (event.type) {
    case 'job.started': {
      // A retry round: its items start over with a fresh set of attempts.
      const again = new Set((payload.items as number[] | undefined) ?? []);
      const round = num(payload.round);
      if (!round || again.size === 0) return state;
      const items = state.items.map((item) =>
        again.has(item.index)
          ? withoutEnd({ ...item, status: 'pending' as const, attemptsLeft: state.policy.maxAttempts })
          : item,
      );
      const { endedAt: _ended, reason: _reason, ...rest } = state;
      return { ...rest, status: 'running', round, items };
    }
    case 'job.item.started':
      return withItem(state, index, (item) => ({
        ...withoutEnd(item),
        status: payload.notBefore ? 'retrying' : 'running',
        attempts: item.attempts + 1,
        attemptsLeft: item.attemptsLeft - 1,
        turnId: String(payload.turnId),
      }));
    case 'job.item.completed':
      return withItem(state, index, (item) => ({
        ...withoutEnd(item),
        status: 'completed',
        ...(typeof payload.summary === 'string' ? { summary: payload.summary } : {}),
      }));
    case 'job.item.failed': {
      const error = OarErrorSchema.safeParse(payload.error);
      // A failed attempt followed by another keeps the item going (its next job.item.started says how).
      return withItem(state, index, (item) => ({
        ...withoutEnd(item),
        status: payload.willRetry === true ? 'retrying' : 'failed',
        ...(error.success ? { error: error.data } : {}),
      }));
    }
    case 'job.completed':
      return { ...state, status: 'completed', endedAt: event.timestamp };
    case 'job.failed':
    case 'job.cancelled': {
      // What had not settled is cancelled with the job (a running turn is interrupted by the same command).
      const items = state.items.map((item) => (isSettledItem(item) ? item : { ...item, status: 'cancelled' as const }));
      const status = event.type === 'job.failed' ? ('failed' as const) : ('cancelled' as const);
      const reason = typeof payload.reason === 'string' ? { reason: payload.reason } : {};
      return { ...state, status, ...reason, items, endedAt: event.timestamp };
    }
    default:
      return state;
  }
}

function withItem(state: JobState, index: number | undefined, change: (item: JobItemState) => JobItemState): JobState {
  const item = index === undefined ? undefined : state.items[index];
  if (!item) return state;
  const items = state.items.slice();
  items[item.index] = change(item);
  return { ...state, items };
}

function withoutEnd(item: JobItemState): JobItemState {
  const { error: _error, summary: _summary, ...rest } = item;
  return rest;
}
