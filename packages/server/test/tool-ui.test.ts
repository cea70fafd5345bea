import type { RuntimeEvent, ToolAgentOutput, UiSchema } from '@oar/protocol';
import * as protocol from '@oar/protocol';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type TestServer, testServer } from './support.js';

/**
 * Tool UI in history (Agent Tool Protocol §9): `GET /v1/sessions/{id}/history` returns tool messages whose
 * `ui_schema` is compiled from the stored `toolAgentOutput.ui_hints` when the history is read. The codec is wrapped
 * so a test can swap in an "upgraded" one: the same stored event then renders with the new codec.
 */
const codec = vi.hoisted(() => ({ upgrade: undefined as undefined | ((schema: UiSchema) => UiSchema) }));
vi.mock('@oar/protocol', async (importOriginal) => {
  const original = await importOriginal<typeof import('@oar/protocol')>();
  return {
    ...original,
    uiSchemaOfToolAgentOutput: (record: unknown) => {
      const schema = original.uiSchemaOfToolAgentOutput(record);
      return schema && codec.upgrade ? codec.upgrade(schema) : schema;
    },
  };
});

let t: TestServer | undefined;
afterEach(async () => {
  codec.upgrade = undefined;
  await t?.close();
  t = undefined;
});

const READ: ToolAgentOutput = {
  tool_name: 'project_cli',
  tool_call_id: 'run_ui.cal',
  tool_call_args: { module: 'calendar', method: 'read', input: { mode: 'event', id: 'evt_123' } },
  status: 'success',
  result: { module: 'calendar', method: 'read', data: { id: 'evt_123', title: 'Project sync' } },
  error: null,
  ui_hints: [
    {
      type: 'calendar_event',
      event: {
        id: 'evt_123',
        title: 'Project sync',
        start_at: '2026-04-21T10:00:00+08:00',
        end_at: '2026-04-21T11:00:00+08:00',
      },
    },
  ],
};

const FAILED: ToolAgentOutput = {
  tool_name: 'project_cli',
  tool_call_id: 'run_ui.share',
  tool_call_args: { module: 'calendar', method: 'share', input: { id: 'evt_123' } },
  status: 'failure',
  result: null,
  error: { code: 'INVALID_ACTION_INPUT', message: 'calendar.share needs with', module: 'calendar', method: 'share' },
  ui_hints: [],
};

interface ToolMessage {
  role: string;
  messageId: string;
  toolCallId: string;
  toolName: string;
  status: string;
  content: unknown;
  ui_schema?: UiSchema;
  sequence: number;
  graphActionId?: string;
}

/** A session whose log holds two business-tool calls, appended through the runtime's event log. */
async function seeded(s: TestServer): Promise<{ sessionId: string; last: number }> {
  // Created through the runtime (the HTTP route is covered elsewhere); the key's workspace is `default`.
  const { sessionId, threadId } = await s.runtime.createSession({ title: 'tool ui' });
  const ids = (action: string) => ({
    threadId,
    turnId: 'turn_ui',
    runId: 'run_ui',
    stepId: `run_ui.${action}`,
    toolCallId: `run_ui.${action}`,
  });
  const written = await s.runtime.log.append(sessionId, [
    {
      type: 'tool.result',
      ...ids('cal'),
      payload: {
        toolName: 'project_cli',
        graphActionId: 'cal',
        observation: { id: 'cal', status: 'completed', content: protocol.toolAgentProjection(READ), artifacts: [] },
        toolAgentOutput: READ,
      },
    },
    {
      type: 'tool.failed',
      ...ids('share'),
      payload: {
        toolName: 'project_cli',
        graphActionId: 'share',
        error: { code: 'tool_failed', message: 'calendar.share needs with', retryable: false },
        observation: { id: 'share', status: 'failed', content: protocol.toolAgentProjection(FAILED), artifacts: [] },
        toolAgentOutput: FAILED,
      },
    },
  ] as never);
  return { sessionId, last: (written.at(-1) as RuntimeEvent).sequence };
}

async function history(s: TestServer, sessionId: string, at: number) {
  const r = await s.json<{ sequence: number; snapshot: unknown; messages: ToolMessage[] }>(
    'GET',
    `/v1/sessions/${sessionId}/history?at=${at}`,
  );
  expect(r.status).toBe(200);
  return r.body;
}

describe('tool messages in history', () => {
  it('returns tool messages with string content and ui_schema compiled from the stored hints', async () => {
    t = await testServer();
    const { sessionId, last } = await seeded(t);
    const body = await history(t, sessionId, last);
    expect(body.sequence).toBe(last);
    expect(body.messages).toHaveLength(2);
    const [read, failed] = body.messages;
    expect(read).toMatchObject({
      role: 'tool',
      messageId: 'run_ui.cal.result',
      toolCallId: 'run_ui.cal',
      toolName: 'project_cli',
      status: 'success',
      graphActionId: 'cal',
      sequence: last - 1,
    });
    // content is the string projection of `result`; ui_schema is the codec's output for the stored hints
    expect(read?.content).toBe(protocol.toolAgentProjection(READ));
    expect(JSON.parse(read?.content as string)).toEqual({ status: 'success', ...READ.result });
    expect(read?.ui_schema).toEqual(
      protocol.compileUiSchema(READ.ui_hints, { toolCallId: 'run_ui.cal', status: 'success' }),
    );
    expect(protocol.UiSchemaSchema.parse(read?.ui_schema)).toEqual(read?.ui_schema);
    expect(failed).toMatchObject({ toolCallId: 'run_ui.share', status: 'failure' });
    expect(JSON.parse(failed?.content as string)).toEqual({ status: 'failure', error: FAILED.error });
    expect(failed).not.toHaveProperty('ui_schema');
    // the hints are internal: history never returns them
    expect(JSON.stringify(body.messages)).not.toContain('ui_hints');
    // up to `at` only
    expect((await history(t, sessionId, last - 1)).messages.map((m) => m.toolCallId)).toEqual(['run_ui.cal']);
    expect((await history(t, sessionId, 1)).messages).toEqual([]);
  });

  it('a codec upgrade re-renders old messages: ui_schema is compiled at read time, never stored', async () => {
    t = await testServer();
    const { sessionId, last } = await seeded(t);
    // What the log holds: the ToolAgentOutput with its hints, and no compiled UI.
    const stored = await t.runtime.log.read(sessionId);
    expect(JSON.stringify(stored)).not.toContain('ui_schema');
    expect(JSON.stringify(stored)).not.toContain('oar.ui/');
    const before = (await history(t, sessionId, last)).messages[0]?.ui_schema;
    expect(before?.components[0]).toMatchObject({ type: 'calendar_event', title: 'Project sync' });

    // A newer codec (here: one that words titles differently) — the same stored event renders with it.
    codec.upgrade = (schema) => ({
      ...schema,
      components: schema.components.map((c) =>
        c.type === 'calendar_event' ? { ...c, title: `${c.title} (${c.event.start_at.slice(0, 10)})` } : c,
      ),
    });
    const after = (await history(t, sessionId, last)).messages[0]?.ui_schema;
    expect(after?.components[0]).toMatchObject({ type: 'calendar_event', title: 'Project sync (2026-04-21)' });
    expect(await t.runtime.log.read(sessionId)).toEqual(stored);

    codec.upgrade = undefined;
    expect((await history(t, sessionId, last)).messages[0]?.ui_schema).toEqual(before);
  });

  it('documents the messages in the OpenAPI document', async () => {
    t = await testServer();
    const doc = await t.json<{ paths: Record<string, { get?: { description?: string } }> }>('GET', '/v1/openapi.json');
    expect(doc.status).toBe(200);
    const history = doc.body.paths['/v1/sessions/{sessionId}/history']?.get;
    expect(history?.description).toContain('ui_schema');
    expect(JSON.stringify(history)).toContain('oar.ui/1');
  });
});
