import type { JobPolicy } from '@oar/protocol';
import { z } from 'zod';
import { sha256Hex } from '../kernel/digest.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import type { JobState } from '../read-models/job.js';
import { fillSlots } from './job-items.js';

/**
 * A job's start (docs/jobs.md), for whoever starts one — the control plane's `start_job` and a model's runtime
 * `start_job` action alike: its items' prompts filled from the template, then, in one append, `job.created`, a
 * thread for each item (holding its prompt), `job.started` and the first items' turns.
 */

/** The most items one job takes (each is a thread of the session, listed with it). */
export const MAX_JOB_ITEMS = 1_000;
/** The longest filled-in prompt of one item. */
export const MAX_ITEM_INPUT_CHARS = 64 * 1024;

export const JOB_POLICY_DEFAULTS: JobPolicy = {
  concurrency: 4,
  maxAttempts: 3,
  backoffMs: 1_000,
  maxBackoffMs: 60_000,
  failFast: false,
};

/** A job's policy as a caller gives it: every field optional (JOB_POLICY_DEFAULTS fills the rest). */
export const JobPolicyInputSchema = z.strictObject({
  concurrency: z.number().int().min(1).max(64).optional(),
  maxAttempts: z.number().int().min(1).max(10).optional(),
  backoffMs: z.number().int().min(0).max(3_600_000).optional(),
  maxBackoffMs: z.number().int().min(0).max(86_400_000).optional(),
  failFast: z.boolean().optional(),
});

/** Fill the template with each item; a field the template names and an item lacks is refused, naming both. */
export function fillTemplate(template: string, items: unknown[]): string[] {
  if (template.trim() === '') throw new OarRuntimeError('invalid_input', 'a job needs a non-empty prompt template');
  if (items.length === 0) throw new OarRuntimeError('invalid_input', 'a job needs at least one item');
  if (items.length > MAX_JOB_ITEMS) {
    throw new OarRuntimeError('job_too_large', `a job takes at most ${MAX_JOB_ITEMS} items (${items.length} given)`, {
      details: { items: items.length, max: MAX_JOB_ITEMS },
    });
  }
  return items.map((item, index) => {
    const filled = template.replace(/\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g, (_, name: string) => {
      if (name === 'index') return String(index);
      if (name === 'item') return typeof item === 'string' ? item : JSON.stringify(item);
      const value =
        item !== null && typeof item === 'object' && !Array.isArray(item)
          ? (item as Record<string, unknown>)[name]
          : undefined;
      if (value === undefined) {
        throw new OarRuntimeError('invalid_input', `item ${index} has no field "${name}" that the prompt names`, {
          details: { index, field: name },
        });
      }
      return typeof value === 'string' ? value : JSON.stringify(value);
    });
    if (filled.length > MAX_ITEM_INPUT_CHARS) {
      throw new OarRuntimeError('invalid_input', `item ${index}'s prompt is over ${MAX_ITEM_INPUT_CHARS} characters`, {
        details: { index, chars: filled.length },
      });
    }
    return filled;
  });
}

/**
 * The id of the job a model's `start_job` action starts: derived from the action (session, run, action), so a worker
 * that runs the action again after a crash finds the job instead of starting a second — and a fork, which copies
 * the job, names its copy so (control-plane/fork.ts): the action run again there finds the copy.
 */
export function actionJobId(sessionId: string, runId: string, actionId: string): string {
  return `job_${sha256Hex(`${sessionId}\u0000${runId}\u0000${actionId}`).slice(0, 20)}`;
}

/** What a job is started with: its id (chosen by the caller: a model's action derives it, so a re-run finds it). */
export interface JobStartInput {
  jobId: string;
  sessionId: string;
  agent: string;
  template: string;
  /** The items' prompts, filled (`fillTemplate`). */
  inputs: string[];
  name?: string;
  policy?: Partial<JobPolicy>;
  requestedBy?: string;
  /** The model's action that started it, when one did. */
  startedBy?: { threadId: string; runId: string; actionId: string };
}

/** The start of an item's prompt, on one line: what lists show of the item. */
const labelOf = (input: string) => {
  const line = input.replace(/\s+/g, ' ').trim();
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
};

/** The facts of a job's start, in the order they are appended. */
export async function jobStart(input: JobStartInput): Promise<EventDraft[]> {
  const { jobId, sessionId, agent, inputs } = input;
  const policy = { ...JOB_POLICY_DEFAULTS, ...input.policy };
  const itemThreads = inputs.map(() => newId('thr'));
  const now = new Date().toISOString();
  // The job as its creation leaves it: what the first items' starts are computed from.
  const job: JobState = {
    jobId,
    sessionId,
    template: input.template,
    agent,
    policy,
    status: 'running',
    round: 1,
    items: itemThreads.map((threadId, index) => ({
      index,
      status: 'pending',
      threadId,
      attempts: 0,
      attemptsLeft: policy.maxAttempts,
    })),
    createdAt: now,
    updatedAt: now,
    lastSequence: 0,
  };
  const title = input.name ?? jobId;
  return [
    {
      type: 'job.created',
      jobId,
      payload: {
        ...(input.name ? { name: input.name } : {}),
        template: input.template,
        agent,
        itemCount: inputs.length,
        itemThreads,
        itemLabels: inputs.map(labelOf),
        policy,
        ...(input.requestedBy ? { requestedBy: input.requestedBy } : {}),
        ...(input.startedBy ? { startedBy: input.startedBy } : {}),
      },
    },
    ...itemThreads.map(
      (threadId, index): EventDraft => ({
        type: 'thread.started',
        threadId,
        payload: { agent, depth: 0, title: `${title} #${index}`, job: { jobId, index, input: inputs[index] } },
      }),
    ),
    { type: 'job.started', jobId, payload: {} },
    ...(await fillSlots(job, job.items, (item) => inputs[item.index] as string)).drafts,
  ];
}
