import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EventSchema } from '@ag-ui/core/schemas';
import { UiSchemaSchema } from '@oar/protocol';
import type { ModelScript } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { readSse, type TestServer, testServer, until } from './support.js';

/**
 * project_cli behind the HTTP server, end to end: a real business CLI (the runtime's test fixture, on the SDK) run
 * as a subprocess by the server's worker; its UI reaches history and AG-UI as ui_schema, and the credential it was
 * given reaches no HTTP sink — not the SSE event stream, history, the evidence export, AG-UI, nor the server's logs.
 */
const FIXTURES = fileURLToPath(new URL('../../runtime/test/fixtures/business/', import.meta.url));
const KEY = 'http-fixture-secret-5f1c0a9e7d3b2a4c6e8f';
/** Every HS256 JWT jose makes starts with this header (`{"alg":"HS256"}`): its presence anywhere is a leak. */
const JWT_HEADER = 'eyJhbGciOiJIUzI1NiJ9';

let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
  delete process.env.FIXTURE_CLI_KEY;
});

const cliCall = (id: string, method: string, input: Record<string, unknown>) => ({
  id,
  type: 'tool',
  name: 'project_cli',
  args: { module: 'calendar', method, input },
});

const SCRIPT = {
  steps: [
    {
      protocol: {
        kind: 'act',
        calls: [cliCall('day', 'read', { mode: 'day', date: '2026-12-01' }), cliCall('env', 'env', {})],
      },
    },
    { protocol: { kind: 'answer', message: 'Your day has one event.' } },
  ],
} as ModelScript;

async function start(script: ModelScript = SCRIPT): Promise<TestServer> {
  process.env.FIXTURE_CLI_KEY = KEY;
  return testServer({
    script,
    runtime: {
      bindTools: [],
      cli: {
        command: [process.execPath, join(FIXTURES, 'cli.mjs')],
        allow: ['calendar.read', 'calendar.env'],
        cwd: FIXTURES,
        credential: { algorithm: 'HS256', keyEnv: 'FIXTURE_CLI_KEY' },
        postProcessors: join(FIXTURES, 'post-processors.mjs'),
      },
    },
  });
}

describe('project_cli over HTTP', () => {
  it('history carries ui_schema and string content; the credential reaches no HTTP sink', async () => {
    t = await start();
    const s = t;
    const created = await s.json<{ sessionId: string }>('POST', '/v1/sessions', { body: { title: 'business' } });
    expect(created.status).toBe(201);
    const { sessionId } = created.body;
    expect((await s.call('POST', `/v1/sessions/${sessionId}/turns`, { body: { input: 'my day?' } })).status).toBe(202);
    await until(async () => {
      const r = await s.json<{ snapshot: { threads: { turns: { status: string }[] }[] } }>(
        'GET',
        `/v1/sessions/${sessionId}`,
      );
      return r.body.snapshot.threads[0]?.turns.every((turn) => turn.status === 'completed') === true;
    }, 20_000);

    const last = (await s.json<{ sequence: number }>('GET', `/v1/sessions/${sessionId}`)).body.sequence;
    const history = await s.json<{
      messages: { toolCallId: string; content: string; ui_schema?: unknown; status: string }[];
    }>('GET', `/v1/sessions/${sessionId}/history?at=${last}`);
    expect(history.status).toBe(200);
    const day = history.body.messages.find((m) => m.toolCallId.endsWith('.day'));
    expect(typeof day?.content).toBe('string');
    expect(JSON.parse(day?.content ?? '')).toMatchObject({ status: 'success', module: 'calendar', method: 'read' });
    const ui = UiSchemaSchema.parse(day?.ui_schema);
    expect(ui.components[0]).toMatchObject({ type: 'list' });
    // The env-printing call ran with the credential in its environment; the record holds only its redacted form.
    const env = history.body.messages.find((m) => m.toolCallId.endsWith('.env'));
    expect(env?.status).toBe('success');
    expect(env?.content).toContain('OAR_TOOL_CREDENTIAL');
    expect(env?.content).toContain('[REDACTED');

    // Every HTTP sink: the SSE event stream, history, the exports, the server's logs.
    const stream = await s.call('GET', `/v1/sessions/${sessionId}/events?after=0`, {
      headers: { accept: 'text/event-stream' },
    });
    const frames = await readSse(stream, (m) => m.some((x) => x.data.includes('turn.completed')), 10_000);
    const sinks = [
      frames.map((f) => f.data).join('\n'),
      JSON.stringify(history.body),
      await (await s.call('GET', `/v1/sessions/${sessionId}/exports/evidence`)).text(),
      await (await s.call('GET', `/v1/sessions/${sessionId}/exports/replay`)).text(),
      s.logs.join('\n'),
    ];
    expect(frames.length).toBeGreaterThan(5);
    for (const sink of sinks) {
      expect(sink).not.toContain(JWT_HEADER);
      expect(sink).not.toContain(KEY);
    }
  });

  it('AG-UI: TOOL_CALL_RESULT carries metadata.oar.ui_schema for a business call, and no JWT', async () => {
    t = await start({
      steps: [
        { protocol: { kind: 'act', calls: [cliCall('day', 'read', { mode: 'day', date: '2026-12-01' })] } },
        { protocol: { kind: 'answer', message: 'One event.' } },
      ],
    } as ModelScript);
    const response = await t.call('POST', '/v1/agui', {
      headers: { accept: 'text/event-stream' },
      body: {
        threadId: 'agui-business',
        runId: 'run-business-1',
        messages: [{ id: 'u1', role: 'user', content: 'my day?' }],
        tools: [],
        context: [],
        state: {},
        forwardedProps: {},
      },
    });
    expect(response.status).toBe(200);
    const frames = await readSse(response, (m) => m.some((x) => /RUN_FINISHED|RUN_ERROR/.test(x.data)), 20_000);
    const events = frames.map((f) => JSON.parse(f.data) as Record<string, unknown>);
    for (const event of events) EventSchema.parse(event);
    const result = events.find((e) => e.type === 'TOOL_CALL_RESULT') as {
      content: string;
      metadata?: { oar?: { ui_schema?: unknown } };
    };
    expect(typeof result.content).toBe('string');
    expect(UiSchemaSchema.parse(result.metadata?.oar?.ui_schema).components[0]).toMatchObject({ type: 'list' });
    const text = JSON.stringify(events);
    expect(text).not.toContain(JWT_HEADER);
    expect(
      events.filter((e) => e.type === 'TEXT_MESSAGE_END').every((e) => !JSON.stringify(e).includes('ui_schema')),
    ).toBe(true);
  });
});
