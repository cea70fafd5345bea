import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { type AgentConfig, type JobView, OarRuntimeError } from '../../src/index.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { describeStores } from '../support/stores.js';
import { type Harness, harness } from './harness.js';
import {
  act,
  allEvents,
  answer,
  cancellableTool,
  errorCode,
  ofType,
  payload,
  registryWith,
  waitFor,
} from './helpers.js';

/**
 * Jobs (issue 30 §1, docs/jobs.md): a batch of items, one template, a policy — each item a thread of the job's
 * session, each attempt a turn of it; the facts that move the job along are written with the turn ends that cause
 * them, so the counts are exact whatever order the items end in.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

/** Every item answers; an item whose prompt says BAD fails every attempt, FLAKY fails its first. */
const step = (fails: string[]) => ({
  ...answer('handled'),
  alternatives: fails.map((word) => ({ ifPrompt: word, error: { message: `cannot handle ${word}`, statusCode: 400 } })),
});
const SCRIPT = { steps: [step(['BAD', 'FLAKY']), step(['BAD']), step(['BAD']), step(['BAD'])] };

const finished = (rt: Harness['runtime'], jobId: string, timeoutMs = 15_000) =>
  waitFor(async () => {
    const job = await rt.jobs.get({ jobId });
    return job.status !== 'running' && job;
  }, timeoutMs) as Promise<JobView>;

/** The most items running at once, from the job's facts. */
function mostRunning(events: RuntimeEvent[]): number {
  const running = new Set<number>();
  let most = 0;
  for (const e of events) {
    const index = payload(e).index as number;
    if (e.type === 'job.item.started') running.add(index);
    if (e.type === 'job.item.completed' || (e.type === 'job.item.failed' && payload(e).willRetry !== true)) {
      running.delete(index);
    }
    most = Math.max(most, running.size);
  }
  return most;
}

describe('jobs', () => {
  it('runs every item within its concurrency, retries a failed one after its backoff, and counts exactly', async () => {
    h = await harness(SCRIPT);
    const rt = h.runtime;
    const items = [{ name: 'alpha' }, { name: 'FLAKY' }, { name: 'BAD' }, { name: 'delta' }, { name: 'echo' }];
    const started = await rt.jobs.start({
      name: 'greetings',
      items,
      prompt: 'Handle {{name}} (item {{index}})',
      policy: { concurrency: 2, maxAttempts: 2, backoffMs: 30 },
    });
    expect(started).toMatchObject({ status: 'running', counts: { total: 5, running: 2, pending: 3 } });
    const job = await finished(rt, started.jobId);
    expect(job).toMatchObject({ status: 'failed', reason: 'items_failed' });
    expect(job.counts).toEqual({ total: 5, pending: 0, running: 0, completed: 4, failed: 1, cancelled: 0 });
    expect(job.items.map((i) => [i.status, i.attempts])).toEqual([
      ['completed', 1],
      ['completed', 2],
      ['failed', 2],
      ['completed', 1],
      ['completed', 1],
    ]);
    expect(job.items[2]?.error).toMatchObject({ message: expect.stringContaining('cannot handle BAD') });

    // Each item is a thread of the job's session, holding its filled-in prompt; its attempts are turns of it.
    const flaky = await rt.getThreadRead({ sessionId: job.sessionId, threadId: job.items[1]?.threadId as string });
    expect(flaky.lastOutcome).toMatchObject({ answer: 'handled' });
    expect(flaky.jobs).toEqual([{ jobId: job.jobId, itemIndex: 1 }]);
    expect(job.items[1]?.label).toBe('Handle FLAKY (item 1)');
    const events = await allEvents(h, job.sessionId);
    const inputs = ofType(events, 'turn.submitted')
      .filter((e) => payload(e).source === 'job')
      .map((e) => payload(e).input);
    expect(inputs).toContain('Handle FLAKY (item 1)');
    expect(mostRunning(events)).toBe(2);
    // A failed attempt with attempts left: its retry is in the same append, held until its backoff passed.
    const failed = ofType(events, 'job.item.failed');
    expect(failed.map((e) => [payload(e).index, payload(e).attempt, payload(e).willRetry])).toEqual(
      expect.arrayContaining([
        [1, 1, true],
        [2, 1, true],
        [2, 2, false],
      ]),
    );
    const retry = ofType(events, 'job.item.started').find((e) => payload(e).index === 1 && payload(e).attempt === 2);
    const firstFail = failed.find((e) => payload(e).index === 1);
    expect(retry?.sequence).toBe((firstFail?.sequence as number) + 1);
    const retryTurn = ofType(events, 'turn.started').find((e) => e.turnId === payload(retry).turnId);
    expect(Date.parse(retryTurn?.timestamp as string)).toBeGreaterThanOrEqual(
      Date.parse(payload(retry).notBefore as string),
    );
    expect(ofType(events, 'job.progress').length).toBeGreaterThanOrEqual(5);
    expect(ofType(events, 'job.failed')).toHaveLength(1);
    assertEventsConform(events);
    // The session snapshot's subagent_job_summary: progress, assigned threads, recoverability.
    const { snapshot } = await rt.getSession({ sessionId: job.sessionId });
    assertSnapshotConforms(snapshot);
    expect(snapshot.subagentJobSummary).toEqual({
      jobs: [
        expect.objectContaining({
          jobId: job.jobId,
          status: 'failed',
          assignedThreads: 5,
          recoverable: false,
          counts: expect.objectContaining({ completed: 4, failed: 1 }),
        }),
      ],
    });

    // retry_job runs only the failed item again, with a fresh round of attempts.
    expect(await errorCode(rt.jobs.retry({ jobId: 'job_nope' }))).toBe('job_not_found');
    const again = await rt.jobs.retry({ jobId: job.jobId });
    expect(again).toMatchObject({ status: 'running', round: 2, counts: { running: 1, completed: 4 } });
    const second = await finished(rt, job.jobId);
    expect(second.items[2]).toMatchObject({ status: 'failed', attempts: 4 });
    expect(second.items[0]).toMatchObject({ status: 'completed', attempts: 1 });
    expect((await rt.jobs.list({ sessionId: job.sessionId })).jobs).toEqual([
      expect.objectContaining({ jobId: job.jobId, status: 'failed', round: 2 }),
    ]);
  });

  it('a retry waiting out its backoff is started by another worker when the one that left it waiting is gone', async () => {
    h = await harness(SCRIPT);
    const first = h.runtime;
    const job = await first.jobs.start({
      items: [{ name: 'FLAKY' }],
      prompt: 'Handle {{name}}',
      policy: { maxAttempts: 2, backoffMs: 1_500 },
    });
    const threadId = job.items[0]?.threadId as string;
    // The first attempt failed; its worker left the thread idle until the retry may start (its lease released).
    await waitFor(async () => (await first.jobs.get({ jobId: job.jobId })).items[0]?.status === 'retrying');
    await waitFor(async () => {
      const lease = await h?.store.db
        .selectFrom('oar_thread_leases')
        .select('owner')
        .where('thread_id', '=', threadId)
        .executeTakeFirst();
      return lease !== undefined && lease.owner === null;
    });
    // That worker is gone before its timer fired; another one, already running (it does not look at every session
    // as it starts), finds the retry by its lease once the backoff has passed.
    await first.close();
    const second = await harness(
      { steps: [answer('handled'), answer('handled')] },
      { store: h.store, resumeOnStart: false },
    );
    try {
      const done = await finished(second.runtime, job.jobId, 10_000);
      expect(done, JSON.stringify(done.items)).toMatchObject({ status: 'completed', counts: { completed: 1 } });
      expect(done.items[0]).toMatchObject({ attempts: 2 });
    } finally {
      await second.runtime.close();
    }
  });

  it('refuses bad input: no items, a missing field, too many items, an unknown agent, a running job retried', async () => {
    h = await harness(SCRIPT);
    const rt = h.runtime;
    expect(await errorCode(rt.jobs.start({ items: [], prompt: 'x' }))).toBe('invalid_input');
    expect(await errorCode(rt.jobs.start({ items: [{ a: 1 }], prompt: 'Use {{b}}' }))).toBe('invalid_input');
    expect(await errorCode(rt.jobs.start({ items: Array(1001).fill('x'), prompt: '{{item}}' }))).toBe('job_too_large');
    expect(await errorCode(rt.jobs.start({ items: ['x'], prompt: '{{item}}', agent: 'nobody' }))).toBe('unknown_agent');
    expect(await errorCode(rt.jobs.start({ items: ['x'], prompt: 'p', policy: { concurrency: 0 } }))).toBe(
      'invalid_input',
    );
    expect(await errorCode(rt.jobs.get({ jobId: 'job_nope' }))).toBe('job_not_found');
    // Nothing was recorded for any of them: no job, and no session made for one.
    expect((await rt.jobs.list()).jobs).toEqual([]);
    expect(await rt.listSessions()).toEqual([]);
  });

  it('cancel stops the running item as an interrupt does and leaves the rest unstarted', async () => {
    const timeline: string[] = [];
    const slow = act([{ id: 's', type: 'tool', name: 'slow_cancel', args: { label: 'x' } }]);
    h = await harness({ steps: [slow, answer('late')] }, { tools: registryWith(cancellableTool(timeline)) });
    const rt = h.runtime;
    const job = await rt.jobs.start({
      items: ['one', 'two', 'three'],
      prompt: 'Do {{item}}',
      policy: { concurrency: 1 },
    });
    await waitFor(async () => timeline.includes('start:x'));
    const cancelled = await rt.jobs.cancel({ jobId: job.jobId, reason: 'not needed' });
    expect(cancelled).toMatchObject({ status: 'cancelled', reason: 'not needed' });
    expect(cancelled.counts).toMatchObject({ cancelled: 3, completed: 0 });
    await rt.settled(job.sessionId);
    const events = await allEvents(h, job.sessionId);
    // The running item's turn ended cancelled; the others never got a turn.
    const firstTurn = payload(ofType(events, 'job.item.started')[0]).turnId;
    expect(ofType(events, 'turn.failed').find((e) => e.turnId === firstTurn)).toMatchObject({ status: 'cancelled' });
    expect(ofType(events, 'job.item.started')).toHaveLength(1);
    expect(ofType(events, 'job.cancelled')).toHaveLength(1);
    // A cancelled job is answered as it is; its items can run again.
    expect((await rt.jobs.cancel({ jobId: job.jobId })).status).toBe('cancelled');
    assertEventsConform(events);
  });
});

describeStores('a job on two workers', (factory) => {
  it('every item is done exactly once, whichever worker drives its thread', async () => {
    const db = await factory.fresh();
    const script = { steps: [{ ...answer('handled'), delayMs: 20 }] };
    const first = await harness(script, { store: db.store });
    const second = await harness(script, { store: db.dialect === 'sqlite' ? db.store : await db.open() });
    factory.defer(async () => {
      await second.runtime.close();
      await first.runtime.close();
    });
    const items = Array.from({ length: 12 }, (_, n) => ({ n }));
    const job = await first.runtime.jobs.start({ items, prompt: 'Item {{n}}', policy: { concurrency: 4 } });
    const done = await finished(second.runtime, job.jobId, 30_000);
    expect(done).toMatchObject({ status: 'completed', counts: { completed: 12, failed: 0 } });
    const events = await first.runtime.log.read(job.sessionId);
    const completed = ofType(events, 'job.item.completed').map((e) => payload(e).index as number);
    expect(completed.sort((a, b) => a - b)).toEqual(items.map((_, n) => n));
    expect(ofType(events, 'turn.completed')).toHaveLength(12);
    expect(ofType(events, 'job.completed')).toHaveLength(1);
    expect(mostRunning(events)).toBeLessThanOrEqual(4);
    expect((await first.runtime.replaySession(job.sessionId)).differences).toEqual([]);
  });
});

describe('start_job, the runtime action', () => {
  const worker: AgentConfig = { name: 'worker', description: 'Handles one item', capabilities: [], carrier: 'tool' };
  const itemStep = {
    ...answer('item handled'),
    alternatives: [{ ifPrompt: 'BAD', error: { message: 'cannot handle BAD', statusCode: 400 } }],
  };

  it('fans a batch from a workspace file out as a job of the session and answers with each item', async () => {
    const fan = {
      id: 'fan',
      type: 'runtime',
      name: 'start_job',
      args: { items_file: 'items.jsonl', prompt: 'Handle {{name}}', agent: 'worker', policy: { concurrency: 2 } },
      result: 'full',
    };
    h = await harness(
      { steps: [act([fan]), answer('all done')], agents: { worker: { steps: [itemStep, itemStep] } } },
      { agents: [worker], files: { 'items.jsonl': '{"name":"a"}\n{"name":"b"}\n\n{"name":"c"}\n' } },
    );
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'handle the batch' });
    await rt.settled(sessionId);
    const main = await rt.getThreadRead({ sessionId, threadId });
    expect(main.lastOutcome).toMatchObject({ answer: 'all done' });
    const events = await allEvents(h, sessionId);
    const [created] = ofType(events, 'job.created');
    expect(payload(created)).toMatchObject({ itemCount: 3, agent: 'worker', startedBy: { actionId: 'fan' } });
    const job = await rt.jobs.get({ jobId: created?.jobId as string });
    expect(job).toMatchObject({ status: 'completed', counts: { completed: 3 } });
    // The action's observation holds each item's outcome; its output is stored in full.
    const ended = events.find(
      (e) => e.type === 'run.status' && payload(e).graphActionId === 'fan' && payload(e).status === 'completed',
    );
    expect((payload(ended).observation as { content: string }).content).toContain(
      '#2 completed (1 attempt): item handled',
    );
    // Its items came from a workspace file: the permission was judged on that path.
    const judged = ofType(events, 'permission.evaluated').find((e) => payload(e).graphActionId === 'fan');
    expect(payload(judged).paths).toEqual(['items.jsonl']);
    assertEventsConform(events);
  });

  it('fails the action with each item when one failed every attempt', async () => {
    const fan = (id: string, items: unknown[]) => ({
      id,
      type: 'runtime',
      name: 'start_job',
      args: { items, prompt: 'Do {{item}}', agent: 'worker', policy: { maxAttempts: 1 } },
    });
    h = await harness(
      {
        steps: [act([fan('one', ['fine', 'BAD'])]), answer('saw the failure')],
        agents: { worker: { steps: [itemStep, itemStep] } },
      },
      { agents: [worker] },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'go' });
    await rt.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const failure = JSON.stringify(events.filter((e) => JSON.stringify(e).includes('job_failed')));
    expect(failure).toContain('1 completed, 1 failed');
    expect(failure).toContain('cannot handle BAD');
    expect((await rt.jobs.list({ sessionId })).jobs).toHaveLength(1);
  });

  it('an interrupt of the turn cancels the job: its running items stop, the rest never start', async () => {
    const slow = { ...answer('slow'), delayMs: 5_000 };
    const fan = {
      id: 'fan',
      type: 'runtime',
      name: 'start_job',
      args: { items: ['a', 'b', 'c'], prompt: 'Do {{item}}', agent: 'worker', policy: { concurrency: 1 } },
    };
    const bad = { id: 'bad', type: 'runtime', name: 'start_job', args: { prompt: 'x' } };
    h = await harness(
      { steps: [act([bad]), act([fan]), answer('after')], agents: { worker: { steps: [slow] } } },
      { agents: [worker] },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'go' });
    const started = await waitFor(async () => (await rt.jobs.list({ sessionId })).jobs[0]);
    await waitFor(async () => (await rt.jobs.get({ jobId: started.jobId })).counts.running === 1);
    await rt.interruptTurn({ sessionId, reason: 'enough' });
    await rt.settled(sessionId);
    const job = await rt.jobs.get({ jobId: started.jobId });
    expect(job).toMatchObject({ status: 'cancelled', counts: { cancelled: 3 } });
    const events = await allEvents(h, sessionId);
    // The action without items, or with two sources, is refused with the rule it broke.
    const refused = events.find((e) => e.type === 'run.status' && payload(e).graphActionId === 'bad');
    expect(JSON.stringify(refused)).toContain('give exactly one of items, items_file or items_ref');
    expect(ofType(events, 'job.item.started')).toHaveLength(1);
    const interrupted = events.find(
      (e) => e.type === 'run.status' && payload(e).graphActionId === 'fan' && payload(e).status === 'cancelled',
    );
    expect(interrupted).toBeDefined();
  });
});

describe('a fork of a session whose start_job action waits', () => {
  it("goes on with the fork's copy of the job: the action run again there finds it and starts nothing", async () => {
    const worker: AgentConfig = { name: 'worker', description: 'Handles one item', capabilities: [], carrier: 'tool' };
    const slow = { ...answer('item handled'), delayMs: 1_500 };
    const fan = {
      id: 'fan',
      type: 'runtime',
      name: 'start_job',
      args: { items: ['a', 'b'], prompt: 'Do {{item}}', agent: 'worker', policy: { concurrency: 1 } },
    };
    h = await harness(
      { steps: [act([fan]), answer('all done'), answer('all done')], agents: { worker: { steps: [slow] } } },
      { agents: [worker] },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'handle the batch' });
    const started = await waitFor(async () => (await rt.jobs.list({ sessionId })).jobs[0]);
    await waitFor(async () => (await rt.jobs.get({ jobId: started.jobId })).counts.running === 1);
    const fork = await rt.forkSession({ sessionId });
    await rt.settled(fork.sessionId);
    await rt.settled(sessionId);
    const events = await allEvents(h, fork.sessionId);
    // One job in the fork — the copied one, under the fork's id for it — done once, and the action answered by it.
    expect(ofType(events, 'job.created')).toHaveLength(1);
    const { jobs } = await rt.jobs.list({ sessionId: fork.sessionId });
    expect(jobs.map((j) => [j.status, j.counts.completed])).toEqual([['completed', 2]]);
    expect(jobs[0]?.jobId).not.toBe(started.jobId);
    const answered = events.find(
      (e) => e.type === 'run.status' && payload(e).graphActionId === 'fan' && payload(e).status === 'completed',
    );
    expect(JSON.stringify(payload(answered))).toContain(jobs[0]?.jobId as string);
    expect((await rt.jobs.get({ jobId: started.jobId })).status).toBe('completed');
  });
});

describe("a job's own budget", () => {
  it('a job in a session of its own spends that session budget: past it, items fail without burning their attempts', async () => {
    h = await harness({ steps: [answer('handled')] });
    const rt = h.runtime;
    const job = await rt.jobs.start({
      items: ['a', 'b', 'c', 'd'],
      prompt: 'Do {{item}}',
      policy: { concurrency: 1, maxAttempts: 3, backoffMs: 0 },
      binding: { budgets: { session: { modelCalls: 2 }, onExceeded: 'fail' } },
    });
    expect((await rt.getBinding(job.sessionId))?.binding.budgets).toMatchObject({ session: { modelCalls: 2 } });
    const done = await finished(rt, job.jobId);
    expect(done.items.map((i) => [i.status, i.attempts])).toEqual([
      ['completed', 1],
      ['completed', 1],
      ['failed', 1],
      ['failed', 1],
    ]);
    expect(done.items[2]?.error?.code).toBe('budget_exceeded');
  });
});

describe('an item that cannot even start', () => {
  it("fails its attempt like any other (its agent's model cannot be resolved): the job ends, it does not hang", async () => {
    const broken: AgentConfig = { name: 'broken', description: 'no model', capabilities: [], carrier: 'tool' };
    const scripted = createScriptedModel({ steps: [answer('fine')] });
    h = await harness(
      { steps: [] },
      {
        agents: [broken],
        model: (agent: AgentConfig) => {
          if (agent.name === 'broken') {
            throw new OarRuntimeError('model_credentials_missing', 'no key for the broken agent');
          }
          return { model: scripted, provider: 'oar-script', modelId: scripted.modelId, supportsForcedToolChoice: true };
        },
      },
    );
    const rt = h.runtime;
    const job = await rt.jobs.start({
      items: ['a', 'b'],
      prompt: 'Do {{item}}',
      agent: 'broken',
      policy: { maxAttempts: 2, backoffMs: 0 },
    });
    const done = await finished(rt, job.jobId);
    expect(done).toMatchObject({ status: 'failed', counts: { failed: 2 } });
    expect(done.items.map((i) => i.attempts)).toEqual([2, 2]);
    expect(done.items[0]?.error?.code).toBe('no_model');
  });
});

describe('failFast', () => {
  it('the first item to fail every attempt fails the job: the running ones are interrupted, nothing more starts', async () => {
    const step = {
      ...answer('slow but fine'),
      delayMs: 3_000,
      alternatives: [{ ifPrompt: 'BAD', error: { message: 'cannot handle BAD', statusCode: 400 } }],
    };
    h = await harness({ steps: [step] });
    const rt = h.runtime;
    const job = await rt.jobs.start({
      items: ['slow', 'BAD', 'later', 'later too'],
      prompt: 'Do {{item}}',
      policy: { concurrency: 2, maxAttempts: 1, failFast: true },
    });
    const done = await finished(rt, job.jobId);
    expect(done).toMatchObject({ status: 'failed', reason: 'fail_fast' });
    expect(done.items.map((i) => [i.status, i.attempts])).toEqual([
      ['cancelled', 1],
      ['failed', 1],
      ['cancelled', 0],
      ['cancelled', 0],
    ]);
    await rt.settled(job.sessionId);
    const events = await allEvents(h, job.sessionId);
    // The slow item's turn got the job's interrupt and ended cancelled; the job recorded nothing more of it.
    const slowTurn = done.items[0]?.turnId;
    expect(ofType(events, 'turn.failed').find((e) => e.turnId === slowTurn)).toMatchObject({ status: 'cancelled' });
    expect(ofType(events, 'job.item.started')).toHaveLength(2);
    expect(events.filter((e) => e.type.startsWith('job.') && e.type !== 'job.progress').at(-1)?.type).toBe(
      'job.failed',
    );
  });
});

describe('a job id chosen by the caller', () => {
  it('makes the start idempotent: the same id again, even at the same moment, is the job started first', async () => {
    h = await harness({ steps: [answer('done')] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    const start = () => rt.jobs.start({ jobId: 'job_nightly-1', sessionId, items: ['a', 'b'], prompt: 'Do {{item}}' });
    const [first, second] = await Promise.all([start(), start()]);
    expect(second.jobId).toBe(first.jobId);
    expect((await start()).jobId).toBe('job_nightly-1');
    await finished(rt, 'job_nightly-1');
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'job.created')).toHaveLength(1);
    expect(ofType(events, 'job.item.completed')).toHaveLength(2);
    expect(await errorCode(rt.jobs.start({ jobId: 'not a job id', items: ['a'], prompt: 'x' }))).toBe('invalid_input');
  });
});
