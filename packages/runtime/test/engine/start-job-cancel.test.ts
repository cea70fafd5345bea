import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config/binding.js';
import { startJobOperation } from '../../src/executors/start-job.js';
import { ThreadChangedError } from '../../src/facts/queue.js';
import type { EventDraft } from '../../src/log/draft.js';
import type { JobState } from '../../src/read-models/job.js';
import type { ExecutorContext } from '../../src/scheduler/executor-context.js';

/**
 * The runtime `start_job` action interrupted (docs/jobs.md "From the model"): the job is cancelled with it. Its
 * cancel interrupts the running items under the guard that their threads are as read — and a running item's thread
 * moves on at every step of its own driver, so a race with it is read again, not the action's failure.
 */
describe('start_job interrupted while an item thread moves on', () => {
  it('computes the cancel again and cancels the job, as it does after another item ended meanwhile', async () => {
    const itemThread = {
      sessionId: 'ses_1',
      threadId: 'thr_item',
      activeTurnId: 'turn_item',
      turns: [{ turnId: 'turn_item', status: 'running' }],
      queue: [],
      runs: new Map(),
    };
    let job: JobState = {
      jobId: 'job_x',
      sessionId: 'ses_1',
      template: 'Do {{item}}',
      agent: 'main',
      policy: { concurrency: 1, maxAttempts: 1, backoffMs: 0, maxBackoffMs: 0, failFast: false },
      status: 'running',
      round: 1,
      items: [{ index: 0, status: 'running', threadId: 'thr_item', attempts: 1, attemptsLeft: 0, turnId: 'turn_item' }],
      createdAt: '2026-01-01T00:00:00.000Z',
      updatedAt: '2026-01-01T00:00:00.000Z',
      lastSequence: 7,
    };
    const recorded: EventDraft[][] = [];
    let races = 1;
    const controller = new AbortController();
    controller.abort(new Error('interrupted'));
    const ctx = {
      config: { limits: DEFAULT_LIMITS, mainAgent: { name: 'main' }, agents: [] },
      thread: { sessionId: 'ses_1', threadId: 'thr_main' },
      run: { runId: 'run_1', turnId: 'turn_main', order: ['fan'] },
      action: {
        id: 'fan',
        input: { items: ['a'], prompt: 'Do {{item}}' },
        executor: { kind: 'runtime', target: 'start_job' },
      },
      state: { status: 'running', toolCallId: 'call_1' },
      signal: controller.signal,
      loadJob: async () => job,
      loadThread: async () => itemThread,
      wake: () => undefined,
      record: async (drafts: EventDraft[], options?: { guard?: unknown }) => {
        // The item's thread took a step between the read and the write: the guard refuses, once.
        if (options?.guard && races-- > 0) throw new ThreadChangedError('thr_item');
        recorded.push(drafts);
        if (drafts.some((d) => d.type === 'job.cancelled')) job = { ...job, status: 'cancelled' };
      },
    } as unknown as ExecutorContext;
    expect(await startJobOperation(ctx)).toBe('cancelled');
    const types = recorded.flat().map((d) => d.type);
    expect(types).toContain('job.cancelled');
    expect(recorded.flat().find((d) => d.type === 'thread.updated')?.threadId).toBe('thr_item');
  });
});
