import { z } from 'zod';
import { OarErrorSchema } from '../errors.js';

/**
 * Typed payloads of the Jobs family (docs/jobs.md): a batch of items, one template, a policy. Each item runs as a
 * turn of a thread of its own in the job's session; the job's facts say which item runs where, how each attempt
 * ended and how far the job is. Loose like every payload: a relayed event keeps fields another producer adds.
 */

const Id = z.string().min(1);
const Count = z.number().int().min(0);
const Index = z.number().int().min(0);
const Attempt = z.number().int().min(1);

/** How a job runs its items. */
export const JobPolicySchema = z.looseObject({
  /** Items running at once. */
  concurrency: z.number().int().min(1),
  /** Attempts per item in all (the first included). */
  maxAttempts: Attempt,
  /** The wait before an item's second attempt; it doubles for each later one, up to `maxBackoffMs`. */
  backoffMs: Count,
  maxBackoffMs: Count,
  /** A finally failed item fails the job at once: nothing more starts and the running items are interrupted. */
  failFast: z.boolean(),
});
export type JobPolicy = z.infer<typeof JobPolicySchema>;

/** Items by how far they are. */
export const JobCountsSchema = z.looseObject({
  total: Count,
  pending: Count,
  running: Count,
  completed: Count,
  failed: Count,
  cancelled: Count,
});
export type JobCounts = z.infer<typeof JobCountsSchema>;

export const JobCreatedPayloadSchema = z.looseObject({
  name: z.string().optional(),
  /** The prompt template each item fills (`{{field}}`). */
  template: z.string(),
  agent: Id,
  itemCount: Count,
  /** The thread of each item, in item order (each started with the job, holding its filled-in prompt). */
  itemThreads: z.array(Id),
  /** A short label of each item (the start of its filled-in prompt), in item order: what lists show of it. */
  itemLabels: z.array(z.string()).optional(),
  policy: JobPolicySchema,
  requestedBy: z.string().optional(),
});
export const JobStartedPayloadSchema = z.looseObject({
  /** A retry of a finished job: the round, and the items it runs again. */
  round: Attempt.optional(),
  items: z.array(Index).optional(),
});
const ItemRef = { index: Index, attempt: Attempt, threadId: Id, turnId: Id };
export const JobItemStartedPayloadSchema = z.looseObject({
  ...ItemRef,
  /** A retry waits until then before its turn starts. */
  notBefore: z.string().optional(),
});
export const JobItemCompletedPayloadSchema = z.looseObject({ ...ItemRef, summary: z.string().optional() });
export const JobItemFailedPayloadSchema = z.looseObject({
  ...ItemRef,
  error: OarErrorSchema,
  /** Another attempt follows (its `job.item.started` is in the same append). */
  willRetry: z.boolean(),
});
export const JobProgressPayloadSchema = z.looseObject({ counts: JobCountsSchema });
export const JobCompletedPayloadSchema = z.looseObject({ counts: JobCountsSchema });
export const JobFailedPayloadSchema = z.looseObject({
  counts: JobCountsSchema,
  /** `items_failed`: some items failed every attempt; `fail_fast`: one did under a fail-fast policy. */
  reason: z.enum(['items_failed', 'fail_fast']),
});
export const JobCancelledPayloadSchema = z.looseObject({ counts: JobCountsSchema, reason: z.string().optional() });
