import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer, until } from './support.js';

/**
 * The sub-agent routes over a real socket (issue 29 §1): spawnSubagent, sendSubagentInput, waitSubagents,
 * closeSubagent, resumeSubagent and listSubagents, with their errors — and resumeThread, a thread's resume point.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
const researcher = { name: 'researcher', description: 'Looks things up', capabilities: ['research'], carrier: 'tool' };

describe('the sub-agent routes', () => {
  it('spawn, wait, input, close and resume a sub-agent; bad input gets structured errors', async () => {
    // Every thread's first call: the child's first turn, then (second call of the child thread) its later turns.
    t = await testServer({
      script: { steps: [answer('First answer.'), answer('Second answer.'), answer('Third answer.')] },
      runtime: { agents: [researcher as never] },
    });
    const { body: session } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      body: {},
    });
    const base = `/v1/sessions/${session.sessionId}/subagents`;
    const spawned = await t.json<{ subagentId: string; childThreadId: string; duplicate: boolean }>('POST', base, {
      body: { agent: 'researcher', input: 'Find sources', subagentId: 'sub_1' },
    });
    expect(spawned.status).toBe(201);
    expect(spawned.body).toMatchObject({ subagentId: 'sub_1', duplicate: false });

    const waited = await t.json<{ subagents: { subagentId: string; status: string }[]; timedOut: boolean }>(
      'GET',
      `${base}/wait?subagentIds=sub_1&timeoutMs=10000`,
    );
    expect(waited.status).toBe(200);
    expect(waited.body).toMatchObject({ timedOut: false, subagents: [{ subagentId: 'sub_1', status: 'completed' }] });

    const input = await t.json<{ turnId: string; threadId: string }>('POST', `${base}/sub_1/input`, {
      body: { input: 'And then?' },
    });
    expect(input.status).toBe(202);
    expect(input.body.threadId).toBe(spawned.body.childThreadId);
    expect((await t.json('GET', `${base}/wait?timeoutMs=10000`)).body).toMatchObject({ timedOut: false });

    expect((await t.json('POST', `${base}/sub_1/close`, { body: { reason: 'enough' } })).status).toBe(200);
    const listed = await t.json<{ subagents: { subagentId: string; status: string; parentThreadId: string }[] }>(
      'GET',
      base,
    );
    expect(listed.body.subagents).toEqual([
      expect.objectContaining({ subagentId: 'sub_1', status: 'closed', parentThreadId: session.threadId }),
    ]);
    const closedInput = await t.json<{ error: { code: string } }>('POST', `${base}/sub_1/input`, {
      body: { input: 'x' },
    });
    expect([closedInput.status, closedInput.body.error.code]).toEqual([409, 'thread_closed']);
    const resumed = await t.json<{ turnId?: string }>('POST', `${base}/sub_1/resume`, {
      body: { input: 'Once more.' },
    });
    expect(resumed.status).toBe(200);
    expect(resumed.body.turnId).toEqual(expect.any(String));
    expect((await t.json('GET', `${base}/wait?subagentIds=sub_1&timeoutMs=10000`)).body).toMatchObject({
      subagents: [{ subagentId: 'sub_1', status: 'completed' }],
    });
    const again = await t.json<{ error: { code: string } }>('POST', `${base}/sub_1/resume`, { body: {} });
    expect([again.status, again.body.error.code]).toEqual([409, 'subagent_not_closed']);

    // Bad input: an unknown agent, a missing input, an unknown sub-agent, a malformed wait.
    const ghost = await t.json<{ error: { code: string } }>('POST', base, { body: { agent: 'ghost', input: 'x' } });
    expect([ghost.status, ghost.body.error.code]).toEqual([422, 'unknown_agent']);
    const empty = await t.json<{ error: { code: string } }>('POST', base, { body: { agent: 'researcher' } });
    expect([empty.status, empty.body.error.code]).toEqual([400, 'invalid_input']);
    const unknown = await t.json<{ error: { code: string } }>('POST', `${base}/sub_nope/input`, {
      body: { input: 'x' },
    });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, 'subagent_not_found']);
    const badWait = await t.json<{ error: { code: string } }>('GET', `${base}/wait?timeoutMs=-1`);
    expect([badWait.status, badWait.body.error.code]).toEqual([400, 'invalid_input']);
  });
});

describe('resume_thread over HTTP', () => {
  it('says where a thread stands, and how much happened since the token it gave', async () => {
    t = await testServer({ script: { steps: [answer('One.'), answer('Two.')] } });
    const { body: session } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      body: {},
    });
    const path = `/v1/sessions/${session.sessionId}/threads/${session.threadId}/resume`;
    const first = await t.json<{ resumeToken: string; status: string; driven: boolean; since?: number }>('POST', path, {
      body: {},
    });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ status: 'idle', driven: true });
    expect(first.body.since).toBeUndefined();
    await t.json('POST', `/v1/sessions/${session.sessionId}/turns`, { body: { input: 'hello' } });
    await until(async () => {
      const read = await (t as TestServer).json<{ lastOutcome?: { status: string } }>(
        'GET',
        `/v1/sessions/${session.sessionId}/threads/${session.threadId}`,
      );
      return read.body.lastOutcome?.status === 'completed';
    });
    const second = await t.json<{ resumeToken: string; since: number; missedEvents: number }>('POST', path, {
      body: { resumeToken: first.body.resumeToken },
    });
    expect(second.body.missedEvents).toBeGreaterThan(3);
    expect(second.body.resumeToken).not.toBe(first.body.resumeToken);
    const events = await t.json<{ events: { type: string }[] }>(
      'GET',
      `/v1/sessions/${session.sessionId}/events?after=${second.body.since}&threadId=${session.threadId}`,
    );
    expect(events.body.events.length).toBe(second.body.missedEvents);
    const third = await t.json<{ missedEvents: number }>('POST', path, {
      body: { resumeToken: second.body.resumeToken },
    });
    expect(third.body.missedEvents).toBe(0);

    const bad = await t.json<{ error: { code: string } }>('POST', path, { body: { resumeToken: 'nonsense' } });
    expect([bad.status, bad.body.error.code]).toEqual([400, 'invalid_input']);
    const future = await t.json<{ error: { code: string } }>('POST', path, { body: { resumeToken: 'rt1.999999' } });
    expect([future.status, future.body.error.code]).toEqual([400, 'invalid_input']);
    const unknown = await t.json<{ error: { code: string } }>(
      'POST',
      `/v1/sessions/${session.sessionId}/threads/thr_nope/resume`,
      { body: {} },
    );
    expect([unknown.status, unknown.body.error.code]).toEqual([404, 'thread_not_found']);
  });
});
