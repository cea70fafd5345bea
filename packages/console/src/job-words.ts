import type { JobCounts, JobPolicy, JobSummary } from './types.js';

/** A job in words: its counts, its policy, why it ended; and when a retry is offered. Pure (tested in Node). */

/** "3/5 completed, 1 failed, 1 running": the items by how far they are, only what is there. */
export function countsText(c: JobCounts): string {
  const rest = (
    [
      ['failed', c.failed],
      ['cancelled', c.cancelled],
      ['running', c.running],
      ['pending', c.pending],
    ] as const
  )
    .filter(([, n]) => n > 0)
    .map(([word, n]) => `${n} ${word}`);
  return [`${c.completed}/${c.total} completed`, ...rest].join(', ');
}

const ms = (n: number) =>
  n >= 60_000 && n % 60_000 === 0 ? `${n / 60_000} min` : n >= 1000 ? `${n / 1000} s` : `${n} ms`;

/** "2 at once · up to 3 attempts per item · backoff 1 s doubling to 1 min · fail fast". */
export function policyText(p: JobPolicy): string {
  return [
    `${p.concurrency} at once`,
    `up to ${p.maxAttempts} attempt${p.maxAttempts === 1 ? '' : 's'} per item`,
    ...(p.maxAttempts > 1
      ? [p.backoffMs > 0 ? `backoff ${ms(p.backoffMs)} doubling to ${ms(p.maxBackoffMs)}` : 'no backoff']
      : []),
    p.failFast ? 'fail fast: one failed item fails the job' : 'a failed item does not stop the others',
  ].join(' · ');
}

export const REASONS: Record<string, string> = {
  items_failed: 'some items failed every attempt',
  fail_fast: 'an item failed under a fail-fast policy',
};

/** A finished job with failed or cancelled items: `retry` runs those again. */
export function canRetry(job: JobSummary): boolean {
  return job.status !== 'running' && job.counts.failed + job.counts.cancelled > 0;
}

export const jobTitle = (job: JobSummary) => job.name || job.jobId;
