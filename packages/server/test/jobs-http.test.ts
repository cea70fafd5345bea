import type { RuntimeEvent } from '@oar/protocol';
import type { JobView } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer, until } from './support.js';

/**
 * Jobs over HTTP (issue 30 §1, docs/jobs.md), through a real server on a real socket: `startJob`, `getJob`,
 * `listJobs`, `cancelJob`, `retryJob` — and a key reaches its own workspace's jobs only.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const step = {
  protocol: { kind: 'answer', message: 'done' },
  alternatives: [{ ifPrompt: 'BAD', error: { message: 'cannot', statusCode: 400 } }],
};
const SCRIPT = { steps: [step, step, step] };
const NO_RATE_LIMIT = { rateLimit: { perMinute: 60_000, burst: 1_000 } };

describe('jobs over HTTP', () => {
  it('starts a job in a session of its own, follows it, retries its failed item; other workspaces see nothing', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const server = t;
    const operator = await server.keyOf('operator');
    const started = await server.json<JobView>('POST', '/v1/jobs', {
      key: operator,
      body: {
        name: 'cities',
        items: [{ city: 'Oslo' }, { city: 'BAD' }, { city: 'Lima' }],
        prompt: 'Describe {{city}}',
        policy: { concurrency: 2, maxAttempts: 1 },
      },
    });
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({ name: 'cities', status: 'running', counts: { total: 3 } });
    const { jobId, sessionId } = started.body;
    const job = async () => (await server.json<JobView>('GET', `/v1/jobs/${jobId}`)).body;
    await until(async () => (await job()).status !== 'running');
    const done = await job();
    expect(done).toMatchObject({ status: 'failed', reason: 'items_failed' });
    expect(done.counts).toMatchObject({ completed: 2, failed: 1 });
    // The job's facts are in its session's log, valid envelopes with the job's ids.
    const events = (await server.json<{ events: RuntimeEvent[] }>('GET', `/v1/sessions/${sessionId}/events?limit=1000`))
      .body.events;
    expect(events.filter((e) => e.type.startsWith('job.')).every((e) => e.jobId === jobId)).toBe(true);
    expect(events.some((e) => e.type === 'job.item.failed' && e.jobItemId === `${jobId}/1`)).toBe(true);

    const listed = await server.json<{ jobs: JobView[] }>('GET', '/v1/jobs?status=failed');
    expect(listed.body.jobs.map((j) => [j.jobId, j.counts.failed])).toEqual([[jobId, 1]]);
    expect(listed.body.jobs[0]).not.toHaveProperty('items');

    const running = await server.json<{ error: { code: string } }>('POST', `/v1/jobs/${jobId}/retry`);
    expect(running.status).toBe(200);
    await until(async () => (await server.json<JobView>('GET', `/v1/jobs/${jobId}`)).body.status !== 'running');
    const again = (await server.json<JobView>('GET', `/v1/jobs/${jobId}`)).body;
    expect(again).toMatchObject({ round: 2, status: 'failed' });
    expect(again.items[1]).toMatchObject({ status: 'failed', attempts: 2 });

    // Another workspace's key: the job does not exist for it, and its list is empty.
    await server.json('POST', '/v1/workspaces', { body: { name: 'Other', workspaceId: 'other' } });
    const other = await server.keyOf('operator', 'other');
    const hidden = await server.json<{ error: { code: string } }>('GET', `/v1/jobs/${jobId}`, { key: other });
    expect([hidden.status, hidden.body.error.code]).toEqual([404, 'job_not_found']);
    expect((await server.json<{ jobs: unknown[] }>('GET', '/v1/jobs', { key: other })).body.jobs).toEqual([]);
    const cancel = await server.json<{ error: { code: string } }>('POST', `/v1/jobs/${jobId}/cancel`, { key: other });
    expect(cancel.status).toBe(404);
    // Its own session named in a job of another workspace's key: 404 too.
    const foreign = await server.json<{ error: { code: string } }>('POST', '/v1/jobs', {
      key: other,
      body: { sessionId, items: ['x'], prompt: '{{item}}' },
    });
    expect([foreign.status, foreign.body.error.code]).toEqual([404, 'session_not_found']);
    // A job id of this workspace's, chosen again by another workspace's key: taken, never shared.
    const named = await server.json<JobView>('POST', '/v1/jobs', {
      key: operator,
      body: { jobId: 'job_shared-name', items: ['x'], prompt: '{{item}}' },
    });
    expect(named.status).toBe(201);
    const taken = await server.json<{ error: { code: string } }>('POST', '/v1/jobs', {
      key: other,
      body: { jobId: 'job_shared-name', items: ['x'], prompt: '{{item}}' },
    });
    expect([taken.status, taken.body.error.code]).toEqual([409, 'job_exists']);
  });

  it('refuses a bad job with a structured error and records nothing; a finished job is not retried while running', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const server = t;
    const bad = async (body: unknown, code: string, status = 400) => {
      const response = await server.json<{ error: { code: string; retryable: boolean } }>('POST', '/v1/jobs', {
        body,
      });
      expect([response.status, response.body.error?.code], JSON.stringify(response.body)).toEqual([status, code]);
      expect(response.body.error.retryable).toBe(false);
    };
    await bad({ items: [], prompt: 'x' }, 'invalid_input');
    await bad({ items: [{ a: 1 }], prompt: '{{b}}' }, 'invalid_input');
    await bad({ items: ['x'], prompt: 'x', policy: { concurrency: 0 } }, 'invalid_input');
    await bad({ items: ['x'], prompt: 'x', policy: { unknown: 1 } }, 'invalid_input');
    // Well-formed, but more than a job takes.
    await bad({ items: Array(1001).fill('x'), prompt: '{{item}}' }, 'job_too_large', 422);
    expect((await server.json<{ jobs: unknown[] }>('GET', '/v1/jobs')).body.jobs).toEqual([]);
    const missing = await server.json<{ error: { code: string } }>('POST', '/v1/jobs/job_nope/cancel', { body: {} });
    expect([missing.status, missing.body.error.code]).toEqual([404, 'job_not_found']);

    const { body: job } = await server.json<JobView>('POST', '/v1/jobs', {
      body: { items: ['a', 'b'], prompt: 'Do {{item}}', policy: { concurrency: 1 } },
    });
    const early = await server.json<{ error: { code: string } }>('POST', `/v1/jobs/${job.jobId}/retry`);
    // Either still running (409 job_running) or already done with nothing failed (409 job_nothing_to_retry).
    expect(early.status).toBe(409);
    expect(['job_running', 'job_nothing_to_retry']).toContain(early.body.error.code);
  });

  it("gives a job's new session its own binding for an admin key only, and never a named session's", async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const server = t;
    const body = { items: ['a'], prompt: 'Do {{item}}', binding: { permissions: { mode: 'bypass' } } };
    // As for a new session (createSession): its own binding — a permission policy, budgets — is an admin's call.
    const operator = await server.keyOf('operator');
    const refused = await server.json<{ error: { code: string } }>('POST', '/v1/jobs', { key: operator, body });
    expect([refused.status, refused.body.error.code]).toEqual([403, 'forbidden']);
    expect((await server.json<{ jobs: unknown[] }>('GET', '/v1/jobs')).body.jobs).toEqual([]);
    // A named session has its binding already: a binding with it would be silently ignored, so it is refused.
    const { body: own } = await server.json<JobView>('POST', '/v1/jobs', { body: { items: ['a'], prompt: 'x' } });
    const named = await server.json<{ error: { code: string } }>('POST', '/v1/jobs', {
      body: { ...body, sessionId: own.sessionId },
    });
    expect([named.status, named.body.error.code]).toEqual([400, 'invalid_input']);
    expect((await server.json<{ jobs: unknown[] }>('GET', '/v1/jobs')).body.jobs).toHaveLength(1);
    const admin = await server.keyOf('admin');
    const allowed = await server.json<JobView>('POST', '/v1/jobs', { key: admin, body });
    expect(allowed.status).toBe(201);
  });
});
