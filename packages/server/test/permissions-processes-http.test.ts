import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer } from './support.js';

/**
 * The permission and process commands over a real socket (issue 29 §1): evaluatePermission, resolvePermission,
 * writeProcessStdin and terminateProcess — who asked is the key, by id; errors are structured with their status.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
const act = (calls: Record<string, unknown>[]) => ({ protocol: { kind: 'act', message: 'Working.', calls } });
/** The first value `check` gives within 10 s. */
async function poll<T>(check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

type Events = { events: { type: string; eventId: string; payload: Record<string, unknown> }[] };

describe('the permission routes', () => {
  it('evaluate a call, then resolve the pending approval for the session; errors are structured', async () => {
    t = await testServer({
      script: {
        steps: [
          act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'hello' } }]),
          answer('done'),
        ],
      },
      runtime: { permissions: { mode: 'default', rules: [] } },
    });
    const { body: session } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      body: {},
    });
    const base = `/v1/sessions/${session.sessionId}`;
    await t.json('POST', `${base}/turns`, { body: { input: 'write it' } });
    const pending = await poll(async () => {
      const read = await t?.json<{ pendingRequests: { actionId: string }[] }>(
        'GET',
        `${base}/threads/${session.threadId}`,
      );
      return read?.body.pendingRequests[0];
    });

    const operator = await t.keyOf('operator');
    const evaluated = await t.json<{
      decision: string;
      evaluation: Record<string, unknown>;
      recorded: { eventId: string };
    }>('POST', `${base}/permissions/evaluate`, {
      key: operator,
      body: { toolName: 'write', input: { filePath: 'out.txt', content: 'x' } },
    });
    expect(evaluated.status).toBe(200);
    expect(evaluated.body).toMatchObject({ decision: 'ask', evaluation: { toolName: 'write', mode: 'default' } });
    const viewer = await t.keyOf('viewer');
    expect(
      (await t.json('POST', `${base}/permissions/evaluate`, { key: viewer, body: { toolName: 'read' } })).status,
    ).toBe(403);
    const unknown = await t.json<{ error: { code: string; retryable: boolean } }>(
      'POST',
      `${base}/permissions/evaluate`,
      {
        body: { toolName: 'launch_rockets' },
      },
    );
    expect([unknown.status, unknown.body.error.code]).toEqual([422, 'unknown_tool']);

    const resolved = await t.json<{ decision: string; scope: string; threadId: string }>(
      'POST',
      `${base}/permissions/${pending.actionId}/resolve`,
      { key: operator, body: { decision: 'allow', scope: 'session', reason: 'ok' } },
    );
    expect(resolved.status).toBe(200);
    expect(resolved.body).toMatchObject({ decision: 'allow', scope: 'session', threadId: session.threadId });
    await poll(async () => {
      try {
        return readFileSync(join(t?.workspace ?? '', 'out.txt'), 'utf8') === 'hello' ? true : undefined;
      } catch {
        return undefined;
      }
    });
    const { body } = await t.json<Events>('GET', `${base}/events`);
    const evaluatedEvent = body.events.find((e) => e.eventId === evaluated.body.recorded.eventId);
    expect(evaluatedEvent?.payload).toMatchObject({
      evaluatedFor: 'client',
      requestedBy: expect.stringMatching(/^api_key:/),
    });
    const resolution = body.events.find((e) => e.type === 'action.resolved');
    expect(resolution?.payload.resolvedBy).toMatch(/^api_key:/);
    expect(body.events.find((e) => e.type === 'permission.resolved')?.payload).toMatchObject({ grantScope: 'session' });

    const again = await t.json<{ error: { code: string } }>('POST', `${base}/permissions/${pending.actionId}/resolve`, {
      body: { decision: 'deny' },
    });
    expect([again.status, again.body.error.code]).toEqual([404, 'action_not_found']);
    const bad = await t.json<{ error: { code: string } }>('POST', `${base}/permissions/${pending.actionId}/resolve`, {
      body: { decision: 'approve' },
    });
    expect([bad.status, bad.body.error.code]).toEqual([400, 'invalid_input']);
  });
});

describe('the process routes', () => {
  it('feed and stop a background process by hand; a finished one is 404', async () => {
    const echo =
      "process.stdin.on('data', d => process.stdout.write(String(d).toUpperCase())); setInterval(() => {}, 1000)";
    t = await testServer({
      script: {
        steps: [
          act([{ id: 's', type: 'tool', name: 'exec', args: { command: ['node', '-e', echo], background: true } }]),
          answer('started'),
        ],
      },
      runtime: {
        exec: { sandbox: { profile: 'none', unsandboxed: 'allow' } },
        permissions: { mode: 'accept-edits', rules: [{ decision: 'allow', tool: 'exec', command: 'node' }] },
      },
    });
    const { body: session } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      body: {},
    });
    const base = `/v1/sessions/${session.sessionId}`;
    await t.json('POST', `${base}/turns`, { body: { input: 'start it' } });
    const processId = await poll(async () => {
      const env = await t?.json<{ activeProcesses: { processId: string }[] }>('GET', `${base}/environment`);
      return env?.body.activeProcesses[0]?.processId;
    });
    const written = await t.json<{ status: string; bytes: number; requestId: string }>(
      'POST',
      `${base}/processes/${processId}/stdin`,
      { body: { input: 'abc\n' } },
    );
    expect(written.status).toBe(200);
    expect(written.body).toMatchObject({ status: 'written', bytes: 4 });
    const stopped = await t.json<{ status: string; eventId: string }>(
      'POST',
      `${base}/processes/${processId}/terminate`,
      {
        body: { reason: 'enough' },
      },
    );
    expect(stopped.body).toMatchObject({ status: 'terminated' });
    const { body } = await t.json<Events>('GET', `${base}/events`);
    const end = body.events.find((e) => e.eventId === stopped.body.eventId);
    expect(end).toMatchObject({ type: 'process.terminated', payload: { reason: 'terminated' } });
    expect(end?.payload.requestedBy).toMatch(/^api_key:/);

    const gone = await t.json<{ error: { code: string; message: string } }>(
      'POST',
      `${base}/processes/${processId}/terminate`,
      { body: {} },
    );
    expect([gone.status, gone.body.error.code]).toEqual([404, 'process_not_found']);
    const empty = await t.json<{ error: { code: string } }>('POST', `${base}/processes/${processId}/stdin`, {
      body: {},
    });
    // Nothing to write: the request is refused before the process is looked for.
    expect([empty.status, empty.body.error.code]).toEqual([400, 'invalid_input']);
    const tooLong = await t.json<{ error: { code: string } }>('POST', `${base}/processes/${processId}/stdin`, {
      body: { input: 'x', waitMs: 10_000_000 },
    });
    expect([tooLong.status, tooLong.body.error.code]).toEqual([400, 'invalid_input']);
  });
});
