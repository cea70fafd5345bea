import { describe, expect, it } from 'vitest';
import { canRetry, countsText, policyText } from '../src/job-words.js';
import type { JobSummary } from '../src/types.js';

/** How the console words a job's counts and policy, and when it offers a retry (the rest: jobs.e2e.test.ts). */

const counts = (c: Partial<JobSummary['counts']>) => ({
  total: 0,
  pending: 0,
  running: 0,
  completed: 0,
  failed: 0,
  cancelled: 0,
  ...c,
});

describe('job words', () => {
  it('says how far the items are, only what is there', () => {
    expect(countsText(counts({ total: 5, completed: 3, failed: 1, running: 1 }))).toBe(
      '3/5 completed, 1 failed, 1 running',
    );
    expect(countsText(counts({ total: 2, pending: 2 }))).toBe('0/2 completed, 2 pending');
    expect(countsText(counts({ total: 1, completed: 1 }))).toBe('1/1 completed');
  });

  it('words the policy', () => {
    const policy = { concurrency: 4, maxAttempts: 3, backoffMs: 1000, maxBackoffMs: 60_000, failFast: false };
    expect(policyText(policy)).toBe(
      '4 at once · up to 3 attempts per item · backoff 1 s doubling to 1 min · a failed item does not stop the others',
    );
    expect(policyText({ ...policy, concurrency: 1, maxAttempts: 1, failFast: true })).toBe(
      '1 at once · up to 1 attempt per item · fail fast: one failed item fails the job',
    );
    expect(policyText({ ...policy, backoffMs: 0 })).toContain('no backoff');
  });

  it('offers a retry for a finished job with failed or cancelled items only', () => {
    const job = (status: JobSummary['status'], c: Partial<JobSummary['counts']>) =>
      ({ status, counts: counts({ total: 2, ...c }) }) as JobSummary;
    expect(canRetry(job('failed', { completed: 1, failed: 1 }))).toBe(true);
    expect(canRetry(job('cancelled', { cancelled: 2 }))).toBe(true);
    expect(canRetry(job('completed', { completed: 2 }))).toBe(false);
    expect(canRetry(job('running', { running: 1, failed: 1 }))).toBe(false);
  });
});
