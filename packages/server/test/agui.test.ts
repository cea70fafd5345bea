import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type BaseEvent as ClientEvent,
  defaultApplyEvents,
  HttpAgent,
  type Interrupt,
  type Message,
  verifyEvents,
} from '@ag-ui/client';
import { AgentCapabilitiesSchema, EventSchema, RunAgentInputSchema } from '@ag-ui/core/schemas';
import {
  compileUiSchema,
  type RuntimeEvent,
  type ToolAgentOutput,
  toolAgentProjection,
  UiSchemaSchema,
} from '@oar/protocol';
import { defineRunner } from '@oar/runner-sdk';
import { type ModelScript, registerInProcessRunner } from '@oar/runtime';
import { createScriptedModel } from '@oar/runtime/testing';
import { from, lastValueFrom, toArray } from 'rxjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { jsonPatch } from '../src/agui/json-patch.js';
import { AguiProjector } from '../src/agui/projector.js';
import { READ_SCRIPT, readSse, type TestServer, testServer, until } from './support.js';

/**
 * AG-UI 1.0 (issue: `oar serve`, section 3) over a real socket, checked with the official `@ag-ui/client` and
 * `@ag-ui/core` from npm: every stream the server produces — a turn, an error, an interrupt, a cancellation, a
 * resumption — passes the client's event verifier and the core's event schemas unchanged (nothing stripped), and
 * a whole approve-and-continue flow runs through the client's `HttpAgent`.
 */
/** An AG-UI event as it arrives on the wire (the tests narrow its fields by type). */
type BaseEvent = { type: string } & Record<string, unknown>;

let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const WRITE_SCRIPT: ModelScript = {
  description: 'a write that asks first, then an answer',
  steps: [
    {
      protocol: {
        kind: 'act',
        message: 'Writing the notes.',
        calls: [{ id: 'write_notes', type: 'tool', name: 'write', args: { filePath: 'NOTES.md', content: 'hi\n' } }],
      },
    },
    { protocol: { kind: 'answer', message: 'written' } },
  ],
} as ModelScript;

const ASK_SCRIPT: ModelScript = {
  description: 'a question to the user, then an answer',
  steps: [
    {
      protocol: {
        kind: 'act',
        calls: [{ id: 'ask', type: 'human', name: 'ask_user', args: { question: 'Which colour?' } }],
      },
    },
    { protocol: { kind: 'answer', message: 'teal it is' } },
  ],
} as ModelScript;

let runs = 0;
function input(threadId: string, text: string | undefined, extra: Record<string, unknown> = {}) {
  runs += 1;
  return RunAgentInputSchema.parse({
    threadId,
    runId: `run-${runs}-${Math.random().toString(36).slice(2, 8)}`,
    protocolVersion: '1.0',
    messages: text === undefined ? [] : [{ id: `u-${runs}`, role: 'user', content: text }],
    tools: [],
    context: [],
    ...extra,
  });
}

function post(s: TestServer, body: unknown, options: { key?: string | null; path?: string } = {}) {
  return s.call('POST', options.path ?? '/v1/agui', {
    key: options.key,
    body,
    headers: { accept: 'text/event-stream' },
  });
}

const terminal = (events: BaseEvent[]) => events.some((e) => e.type === 'RUN_FINISHED' || e.type === 'RUN_ERROR');

/** The AG-UI events of a response (the SSE `data:` of each message), up to the run's terminal event. */
async function aguiEvents(response: Response): Promise<BaseEvent[]> {
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const messages = await readSse(response, (m) => terminal(m.map((x) => JSON.parse(x.data) as BaseEvent)), 20_000);
  return messages.map((m) => JSON.parse(m.data) as BaseEvent);
}

/**
 * The official checks: the client's verifier accepts the sequence, and each event is exactly an AG-UI 1.0 event
 * (the core schema parses it without stripping anything).
 */
async function verified(events: BaseEvent[]): Promise<BaseEvent[]> {
  for (const event of events) expect(EventSchema.parse(event)).toEqual(event);
  return (await lastValueFrom(from(events as ClientEvent[]).pipe(verifyEvents(), toArray()))) as BaseEvent[];
}

const ofType = <T = BaseEvent>(events: BaseEvent[], type: string) => events.filter((e) => e.type === type) as T[];
const textOf = (events: BaseEvent[]) =>
  ofType<{ delta: string }>(events, 'TEXT_MESSAGE_CONTENT')
    .map((e) => e.delta)
    .join('');

/** The state a client holds after applying the stream's STATE_SNAPSHOT / STATE_DELTA events in order. */
function stateAfter(events: BaseEvent[]): unknown {
  let state: unknown;
  for (const e of events) {
    if (e.type === 'STATE_SNAPSHOT') state = structuredClone((e as unknown as { snapshot: unknown }).snapshot);
    if (e.type === 'STATE_DELTA') state = applyPatch(state, (e as unknown as { delta: Op[] }).delta);
  }
  return state;
}

type Op = { op: string; path: string; value?: unknown };
function applyPatch(doc: unknown, ops: Op[]): unknown {
  let root = structuredClone(doc);
  for (const op of ops) {
    const tokens = op.path
      .split('/')
      .slice(1)
      .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
    if (tokens.length === 0) {
      root = op.value;
      continue;
    }
    let parent = root as Record<string, unknown> | unknown[];
    for (const token of tokens.slice(0, -1)) parent = (parent as Record<string, unknown>)[token] as typeof parent;
    const last = tokens.at(-1) as string;
    if (Array.isArray(parent)) {
      const index = Number(last);
      if (op.op === 'add') parent.splice(index, 0, op.value);
      else if (op.op === 'remove') parent.splice(index, 1);
      else parent[index] = op.value;
    } else if (op.op === 'remove') delete parent[last];
    else parent[last] = op.value;
  }
  return root;
}

async function logOf(s: TestServer, sessionId: string): Promise<RuntimeEvent[]> {
  const { body } = await s.json<{ events: RuntimeEvent[] }>('GET', `/v1/sessions/${sessionId}/events?limit=1000`);
  return body.events;
}

function agent(s: TestServer, threadId: string, key?: string) {
  return new HttpAgent({
    url: `${s.url}/v1/agui`,
    headers: { authorization: `Bearer ${key ?? s.adminKey}` },
    threadId,
  });
}

describe('AG-UI 1.0', () => {
  it('streams a turn as AG-UI events: text, steps, tool calls and results, state, success', async () => {
    t = await testServer({ script: { ...READ_SCRIPT, steps: READ_SCRIPT.steps.map((s) => ({ ...s, chunks: 4 })) } });
    const body = input('thread-read', 'What does the README say?');
    const events = await verified(await aguiEvents(await post(t, body)));
    const types = events.map((e) => e.type);
    expect(types[0]).toBe('RUN_STARTED');
    expect(types[1]).toBe('STATE_SNAPSHOT');
    expect(types.at(-1)).toBe('RUN_FINISHED');
    for (const type of [
      'STEP_STARTED',
      'TOOL_CALL_START',
      'TOOL_CALL_ARGS',
      'TOOL_CALL_END',
      'TOOL_CALL_RESULT',
      'STEP_FINISHED',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_END',
      'STATE_DELTA',
    ]) {
      expect(types).toContain(type);
    }
    const runStarted = events[0] as unknown as { threadId: string; runId: string; protocolVersion: string };
    expect(runStarted).toMatchObject({ threadId: 'thread-read', runId: body.runId, protocolVersion: '1.0' });
    // The session is the AG-UI thread, created in the key's workspace; the run id is the turn id.
    const session = await t.json<{ snapshot: { workspaceId: string; threads: { threadId: string }[] } }>(
      'GET',
      '/v1/sessions/thread-read',
    );
    expect(session.body.snapshot.workspaceId).toBe('default');
    const threadId = session.body.snapshot.threads[0]?.threadId as string;
    const log = await logOf(t, 'thread-read');
    const runId = log.find((e) => e.type === 'task.created')?.runId;
    const start = ofType<{ toolCallId: string; toolCallName: string }>(events, 'TOOL_CALL_START')[0];
    expect(start).toMatchObject({ toolCallId: `${runId}.read_readme`, toolCallName: 'read' });
    expect(JSON.parse(ofType<{ delta: string }>(events, 'TOOL_CALL_ARGS')[0]?.delta ?? '')).toEqual({
      filePath: 'README.md',
    });
    const result = ofType<{ toolCallId: string; content: string }>(events, 'TOOL_CALL_RESULT')[0];
    expect(result?.toolCallId).toBe(`${runId}.read_readme`);
    expect(result?.content).toContain('Hello from the sample workspace.');
    expect(ofType<{ stepName: string }>(events, 'STEP_STARTED').map((e) => e.stepName)).toEqual([runId]);
    // The model's messages: the act's progress line and the answer, streamed from the protocol call's deltas.
    expect(textOf(events)).toBe('The README says hello.');
    const finished = events.at(-1) as unknown as {
      outcome: { type: string };
      result: { answer: string; turnId: string };
    };
    expect(finished.outcome).toEqual({ type: 'success' });
    expect(finished.result).toEqual({ turnId: body.runId, answer: 'The README says hello.' });
    expect((events.at(-1) as { usage?: { inputTokens?: number }[] }).usage?.[0]?.inputTokens).toBeGreaterThan(0);
    // STATE_SNAPSHOT + STATE_DELTA rebuild the thread read model exactly.
    const read = await t.json('GET', `/v1/sessions/thread-read/threads/${threadId}`);
    expect(stateAfter(events)).toEqual(read.body);
    expect((await t.json<{ equal: boolean }>('POST', '/v1/sessions/thread-read/replay-check')).body.equal).toBe(true);
  });

  it('drives approve-and-continue through the client HttpAgent: interrupt, resume, the write runs once', async () => {
    t = await testServer({ script: WRITE_SCRIPT });
    const operator = await t.keyOf('operator');
    const client = agent(t, 'thread-approve', operator);
    const warnings: unknown[] = [];
    const warn = vi.spyOn(console, 'warn').mockImplementation((...args) => void warnings.push(args));
    const seen: BaseEvent[] = [];
    const subscriber = { onEvent: ({ event }: { event: ClientEvent }) => void seen.push(event as BaseEvent) };
    client.addMessage({ id: 'u1', role: 'user', content: 'write notes' } as Message);
    let interrupts: Interrupt[] = [];
    await client.runAgent(
      { runId: 'ag-run-1' },
      {
        ...subscriber,
        onRunFinishedEvent: (params) => {
          if (params.outcome === 'interrupt') interrupts = params.interrupts;
        },
      },
    );
    const first = await verified(seen.splice(0));
    expect(first.at(-1)?.type).toBe('RUN_FINISHED');
    expect(client.pendingInterrupts).toHaveLength(1);
    expect(interrupts).toHaveLength(1);
    const interrupt = interrupts[0] as Interrupt & { metadata: { oar: Record<string, unknown> } };
    const log = await logOf(t, 'thread-approve');
    const required = log.find((e) => e.type === 'action.required') as RuntimeEvent & { actionId: string };
    expect(interrupt).toMatchObject({
      id: required.actionId,
      reason: 'tool_call',
      toolCallId: `${required.runId}.write_notes`,
      message: expect.stringContaining('Allow write on NOTES.md'),
    });
    expect(interrupt.responseSchema).toMatchObject({
      type: 'object',
      properties: { decision: { enum: ['approve', 'deny', 'approve_for_session'] } },
      required: ['decision'],
    });
    // The tool call the interrupt names was announced in the run; its result was not (it has not run).
    expect(ofType<{ toolCallId: string }>(first, 'TOOL_CALL_START').map((e) => e.toolCallId)).toContain(
      interrupt.toolCallId,
    );
    expect(ofType(first, 'TOOL_CALL_RESULT')).toEqual([]);
    // State at the interrupt boundary: a snapshot right before RUN_FINISHED shows the pending request.
    const boundary = first.at(-2) as { type: string; snapshot: { pendingRequests: { actionId: string }[] } };
    expect(boundary.type).toBe('STATE_SNAPSHOT');
    expect(boundary.snapshot.pendingRequests.map((p) => p.actionId)).toEqual([required.actionId]);
    expect(() => readFileSync(join(t?.workspace as string, 'NOTES.md'))).toThrow();

    await client.runAgent(
      {
        runId: 'ag-run-2',
        resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { decision: 'approve', reason: 'ok' } }],
      },
      subscriber,
    );
    const second = await verified(seen.splice(0));
    expect(second[0]).toMatchObject({ type: 'RUN_STARTED', runId: 'ag-run-2' });
    expect(second.at(-1)).toMatchObject({
      type: 'RUN_FINISHED',
      outcome: { type: 'success' },
      result: { answer: 'written' },
    });
    // The continuation answers the original tool call without announcing it again.
    expect(ofType(second, 'TOOL_CALL_START')).toEqual([]);
    expect(ofType<{ toolCallId: string; content: string }>(second, 'TOOL_CALL_RESULT')).toMatchObject([
      { toolCallId: interrupt.toolCallId, content: expect.stringContaining('NOTES.md') },
    ]);
    expect(client.pendingInterrupts).toEqual([]);
    expect(readFileSync(join(t.workspace, 'NOTES.md'), 'utf8')).toBe('hi\n');
    // The client's messages and state, built by its own reducer from our events.
    const assistantTexts = client.messages.filter((m) => m.role === 'assistant').map((m) => m.content);
    expect(assistantTexts).toEqual(['Writing the notes.', 'written']);
    expect(client.messages.filter((m) => m.role === 'tool')).toHaveLength(1);
    expect((client.state as { status: string; pendingRequests: unknown[] }).status).toBe('idle');
    expect((client.state as { pendingRequests: unknown[] }).pendingRequests).toEqual([]);
    const after = await logOf(t, 'thread-approve');
    expect(after.filter((e) => e.type === 'tool.started')).toHaveLength(1);
    expect(JSON.stringify(after.find((e) => e.type === 'action.resolved'))).toMatch(/api_key:key_/);
    expect(after.filter((e) => e.type === 'turn.submitted').map((e) => e.turnId)).toEqual(['ag-run-1']);
    // The client's enforcement stage stripped and translated nothing.
    warn.mockRestore();
    expect(warnings).toEqual([]);
  });

  it('turns a runner question into an interrupt while the runner waits, alive; the resume continues it', async () => {
    // An agent bound to an in-process runner whose tools.call of write the default mode asks about.
    const name = `agui${Math.random().toString(36).slice(2, 8)}`;
    registerInProcessRunner(
      name,
      defineRunner({
        runners: [
          {
            manifest: {
              id: 'plugin:test/agui/writer',
              name: 'writer',
              label: { en_US: 'Writer' },
              capabilities: { tool_calling: true },
              permissions: { tools: ['call'] },
              context: {},
            },
            run: async (_ctx, { api, emit }) => {
              const result = await api.tools.call('write', { filePath: 'NOTES.md', content: 'from the runner\n' });
              await emit('message.completed', { message: { role: 'assistant', content: `write ok: ${result.ok}` } });
            },
          },
        ],
      }),
    );
    t = await testServer({
      runtime: {
        mainAgent: {
          name: 'main',
          runner: { id: 'plugin:test/agui/writer', package: `inprocess:${name}`, config: {} },
        },
      },
    });
    const first = await verified(await aguiEvents(await post(t, input('thread-runner', 'write notes'))));
    const finished = first.at(-1) as { type: string; outcome: { type: string; interrupts: Interrupt[] } };
    expect(finished).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'interrupt' } });
    const [interrupt] = finished.outcome.interrupts;
    expect(interrupt).toMatchObject({ reason: 'tool_call', message: expect.stringContaining('writer') });
    expect(() => readFileSync(join(t?.workspace as string, 'NOTES.md'))).toThrow();

    const resume = { interruptId: interrupt?.id, status: 'resolved', payload: { decision: 'approve' } };
    const second = await verified(
      await aguiEvents(await post(t, input('thread-runner', undefined, { resume: [resume] }))),
    );
    expect(second.at(-1)).toMatchObject({
      type: 'RUN_FINISHED',
      outcome: { type: 'success' },
      result: { answer: 'write ok: true' },
    });
    expect(readFileSync(join(t.workspace, 'NOTES.md'), 'utf8')).toBe('from the runner\n');
  });

  it('answers an ask-user question with resume text, and denies a cancelled interrupt', async () => {
    t = await testServer({ script: ASK_SCRIPT });
    const body = input('thread-ask', 'ask me');
    const first = await verified(await aguiEvents(await post(t, body)));
    const finished = first.at(-1) as unknown as { outcome: { type: string; interrupts: Interrupt[] } };
    expect(finished.outcome.type).toBe('interrupt');
    const question = finished.outcome.interrupts[0] as Interrupt;
    expect(question).toMatchObject({ reason: 'input_required', message: 'Which colour?' });
    expect(question.responseSchema).toMatchObject({ properties: { text: { type: 'string' } }, required: ['text'] });
    const resumed = await verified(
      await aguiEvents(
        await post(
          t,
          input('thread-ask', undefined, {
            resume: [{ interruptId: question.id, status: 'resolved', payload: { text: 'teal' } }],
          }),
        ),
      ),
    );
    expect(ofType<{ content: string }>(resumed, 'TOOL_CALL_RESULT')[0]?.content).toBe('teal');
    expect(resumed.at(-1)).toMatchObject({ outcome: { type: 'success' }, result: { answer: 'teal it is' } });

    // A second write approval, abandoned: `cancelled` is recorded as a deny.
    await t.close();
    t = await testServer({ script: WRITE_SCRIPT });
    const asked = await verified(await aguiEvents(await post(t, input('thread-deny', 'write notes'))));
    const id = (asked.at(-1) as unknown as { outcome: { interrupts: Interrupt[] } }).outcome.interrupts[0]
      ?.id as string;
    const denied = await verified(
      await aguiEvents(
        await post(t, input('thread-deny', undefined, { resume: [{ interruptId: id, status: 'cancelled' }] })),
      ),
    );
    expect(ofType<{ content: string }>(denied, 'TOOL_CALL_RESULT')[0]?.content).toMatch(/^\[denied\]/);
    expect(denied.at(-1)).toMatchObject({ outcome: { type: 'success' } });
    const resolved = (await logOf(t, 'thread-deny')).find((e) => e.type === 'action.resolved');
    expect(resolved?.payload).toMatchObject({ decision: 'deny' });
    expect(() => readFileSync(join(t?.workspace as string, 'NOTES.md'))).toThrow();
  });

  it('ends with the cancelled outcome when the turn is interrupted', async () => {
    t = await testServer({
      script: { steps: [{ delayMs: 10_000, protocol: { kind: 'answer', message: 'too late' } }] } as ModelScript,
    });
    const response = await post(t, input('thread-cancel', 'take your time'));
    await until(async () => {
      const thread = await t?.runtime.getSession({ sessionId: 'thread-cancel', limit: 0 });
      return thread?.snapshot.threads[0]?.status === 'running';
    });
    const interrupted = await t.json('POST', '/v1/sessions/thread-cancel/interrupt', { body: { reason: 'stop' } });
    expect(interrupted.status).toBe(200);
    const events = await verified(await aguiEvents(response));
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'cancelled' } });
  });

  it('ends an open run with a retryable RUN_ERROR server_closing when the server shuts down', async () => {
    t = await testServer({
      script: { steps: [{ delayMs: 10_000, protocol: { kind: 'answer', message: 'too late' } }] } as ModelScript,
    });
    const response = await post(t, input('thread-closing', 'take your time'));
    await until(async () => {
      const thread = await t?.runtime.getSession({ sessionId: 'thread-closing', limit: 0 });
      return thread?.snapshot.threads[0]?.status === 'running';
    });
    const reading = aguiEvents(response);
    const closing = t.server.close();
    const events = await verified(await reading);
    await closing;
    expect(events.at(-1)).toMatchObject({
      type: 'RUN_ERROR',
      code: 'server_closing',
      rawEvent: { error: { code: 'server_closing', retryable: true } },
    });
  });

  it('reports a failed turn as RUN_ERROR with the OAR error code and the structured error', async () => {
    t = await testServer({
      script: { steps: [{ error: { message: 'Bad request', statusCode: 400, retryable: false } }] } as ModelScript,
    });
    const events = await verified(await aguiEvents(await post(t, input('thread-fail', 'fail please'))));
    const error = events.at(-1) as {
      type: string;
      code: string;
      message: string;
      rawEvent: { error: { code: string; message: string; retryable: boolean } };
    };
    expect(error.type).toBe('RUN_ERROR');
    const failed = (await logOf(t, 'thread-fail')).find((e) => e.type === 'turn.failed');
    const code = (failed?.payload as { error: { code: string } } | undefined)?.error.code;
    expect(error.code).toBe(code);
    expect(error.rawEvent.error).toMatchObject({ code, retryable: expect.any(Boolean), message: error.message });
  });

  it('refuses unknown, already answered and missing interrupt answers with RUN_ERROR; nothing runs twice', async () => {
    t = await testServer({ script: WRITE_SCRIPT });
    const first = await verified(await aguiEvents(await post(t, input('thread-errs', 'write notes'))));
    const id = (first.at(-1) as unknown as { outcome: { interrupts: Interrupt[] } }).outcome.interrupts[0]
      ?.id as string;
    const runError = async (body: unknown) => {
      const events = await verified(await aguiEvents(await post(t as TestServer, body)));
      expect(events.map((e) => e.type)).toEqual(['RUN_STARTED', 'RUN_ERROR']);
      return events[1] as unknown as {
        code: string;
        message: string;
        rawEvent: { error: { details: Record<string, unknown> } };
      };
    };
    const unknown = await runError(
      input('thread-errs', undefined, {
        resume: [{ interruptId: 'act_nope', status: 'resolved', payload: { decision: 'approve' } }],
      }),
    );
    expect(unknown.code).toBe('action_not_found');
    expect(unknown.rawEvent.error.details).toMatchObject({ interruptId: 'act_nope', pending: [id] });
    // New input while an interrupt is open.
    const pending = await runError(input('thread-errs', 'something else'));
    expect(pending.code).toBe('interrupts_pending');
    expect(pending.rawEvent.error.details).toEqual({ interruptIds: [id] });
    const badPayload = await runError(
      input('thread-errs', undefined, {
        resume: [{ interruptId: id, status: 'resolved', payload: { decision: 'maybe' } }],
      }),
    );
    expect(badPayload.code).toBe('invalid_decision');
    // Answered once (the turn completes) ...
    const approved = await verified(
      await aguiEvents(
        await post(
          t,
          input('thread-errs', undefined, {
            resume: [{ interruptId: id, status: 'resolved', payload: { decision: 'approve' } }],
          }),
        ),
      ),
    );
    expect(approved.at(-1)).toMatchObject({ outcome: { type: 'success' } });
    // ... and never twice.
    const twice = await runError(
      input('thread-errs', undefined, {
        resume: [{ interruptId: id, status: 'resolved', payload: { decision: 'deny' } }],
      }),
    );
    expect(twice.code).toBe('decision_already_resolved');
    const log = await logOf(t, 'thread-errs');
    expect(log.filter((e) => e.type === 'action.resolved')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'tool.started')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'turn.submitted')).toHaveLength(1);
  });

  it('is idempotent by runId: a retried POST streams the same turn again and submits nothing new', async () => {
    t = await testServer();
    const body = input('thread-retry', 'What does the README say?');
    const first = await verified(await aguiEvents(await post(t, body)));
    const again = await verified(await aguiEvents(await post(t, body)));
    const essence = (events: BaseEvent[]) =>
      events
        .filter((e) => !['STATE_SNAPSHOT', 'STATE_DELTA', 'TEXT_MESSAGE_CONTENT'].includes(e.type))
        .map((e) => ({ ...e }));
    expect(essence(again)).toEqual(essence(first));
    expect(textOf(again)).toBe(textOf(first));
    const log = await logOf(t, 'thread-retry');
    expect(log.filter((e) => e.type === 'turn.submitted')).toHaveLength(1);
    expect(log.filter((e) => e.type === 'tool.started')).toHaveLength(1);
  });

  it('projects a delegation: SUBAGENT_STARTED / FINISHED around the child’s attributed events', async () => {
    const script = {
      steps: [
        {
          protocol: {
            kind: 'act',
            message: 'Delegating.',
            calls: [{ id: 'd1', type: 'agent', name: 'helper', args: { task: 'read the readme' } }],
          },
        },
        { protocol: { kind: 'answer', message: 'MAIN done' } },
      ],
      agents: {
        helper: {
          steps: [
            {
              protocol: {
                kind: 'act',
                message: 'Helper reading.',
                calls: [{ id: 'c1', type: 'tool', name: 'read', args: { filePath: 'README.md' } }],
              },
            },
            { protocol: { kind: 'answer', message: 'HELPER read it' } },
          ],
        },
      },
    } as ModelScript;
    const main = createScriptedModel(script);
    const helper = createScriptedModel(script, { agent: 'helper' });
    t = await testServer({
      script,
      runtime: {
        agents: [{ name: 'helper', description: 'reads files', capabilities: [] }] as never,
        model: (agent) => {
          const model = agent.name === 'helper' ? helper : main;
          return { model, provider: 'oar-script', modelId: model.modelId, supportsForcedToolChoice: true };
        },
      },
    });
    const events = await verified(await aguiEvents(await post(t, input('thread-sub', 'delegate'))));
    const started = ofType<{ subagentRunId: string; name: string; parentToolCallId: string }>(
      events,
      'SUBAGENT_STARTED',
    );
    expect(started).toHaveLength(1);
    const sub = started[0] as { subagentRunId: string; name: string; parentToolCallId: string };
    expect(sub.name).toBe('helper');
    const log = await logOf(t, 'thread-sub');
    const spawned = log.find((e) => e.type === 'subagent.spawned');
    expect(sub.subagentRunId).toBe(spawned?.subagentId);
    expect(sub.parentToolCallId).toBe(`${spawned?.runId}.d1`);
    const attributed = events.filter((e) => (e as { subagentRunId?: string }).subagentRunId === sub.subagentRunId);
    expect(attributed.map((e) => e.type)).toEqual(
      expect.arrayContaining(['TEXT_MESSAGE_START', 'TOOL_CALL_START', 'TOOL_CALL_RESULT', 'STEP_STARTED']),
    );
    expect(ofType(events, 'SUBAGENT_FINISHED')).toMatchObject([
      { subagentRunId: sub.subagentRunId, outcome: { type: 'success' }, result: 'HELPER read it' },
    ]);
    expect(events.at(-1)).toMatchObject({ outcome: { type: 'success' }, result: { answer: 'MAIN done' } });
    // A client that does not speak 1.0 gets attribution without the lifecycle events.
    const legacy = input('thread-sub-2', 'delegate');
    delete (legacy as { protocolVersion?: string }).protocolVersion;
    const plain = await verified(await aguiEvents(await post(t, legacy)));
    expect(plain.filter((e) => e.type.startsWith('SUBAGENT_'))).toEqual([]);
    expect(plain.some((e) => (e as { subagentRunId?: string }).subagentRunId !== undefined)).toBe(true);
    expect(plain.at(-1)).toMatchObject({ outcome: { type: 'success' } });
  });

  it('suspends a sub-agent whose write waits for approval, and continues it under the same id on resume', async () => {
    const script = {
      steps: [
        { protocol: { kind: 'act', calls: [{ id: 'd1', type: 'agent', name: 'writer', args: { task: 'write' } }] } },
        { protocol: { kind: 'answer', message: 'MAIN done' } },
      ],
      agents: {
        writer: {
          steps: [
            {
              protocol: {
                kind: 'act',
                calls: [{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'SUB.md', content: 'sub\n' } }],
              },
            },
            { protocol: { kind: 'answer', message: 'WRITER wrote' } },
          ],
        },
      },
    } as ModelScript;
    const main = createScriptedModel(script);
    const writer = createScriptedModel(script, { agent: 'writer' });
    t = await testServer({
      script,
      runtime: {
        agents: [{ name: 'writer', description: 'writes files', capabilities: [] }] as never,
        model: (agent) => {
          const model = agent.name === 'writer' ? writer : main;
          return { model, provider: 'oar-script', modelId: model.modelId, supportsForcedToolChoice: true };
        },
      },
    });
    const first = await verified(await aguiEvents(await post(t, input('thread-sub-ask', 'delegate a write'))));
    const sub = ofType<{ subagentRunId: string }>(first, 'SUBAGENT_STARTED')[0]?.subagentRunId as string;
    const finished = first.at(-1) as unknown as {
      outcome: { type: string; interrupts: (Interrupt & { subagentRunId?: string })[] };
    };
    expect(finished.outcome.type).toBe('interrupt');
    const interrupt = finished.outcome.interrupts[0] as Interrupt & { subagentRunId?: string };
    expect(interrupt).toMatchObject({ reason: 'tool_call', subagentRunId: sub });
    expect(ofType(first, 'SUBAGENT_FINISHED')).toEqual([
      { type: 'SUBAGENT_FINISHED', subagentRunId: sub, outcome: { type: 'suspended', interruptIds: [interrupt.id] } },
    ]);
    const resumed = await verified(
      await aguiEvents(
        await post(
          t,
          input('thread-sub-ask', undefined, {
            resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { decision: 'approve' } }],
          }),
        ),
      ),
    );
    expect(ofType(resumed, 'SUBAGENT_STARTED')).toMatchObject([{ subagentRunId: sub, name: 'writer' }]);
    expect(ofType(resumed, 'SUBAGENT_FINISHED')).toMatchObject([
      { subagentRunId: sub, outcome: { type: 'success' }, result: 'WRITER wrote' },
    ]);
    expect(ofType<{ toolCallId: string; subagentRunId?: string }>(resumed, 'TOOL_CALL_RESULT')).toEqual(
      expect.arrayContaining([expect.objectContaining({ toolCallId: interrupt.toolCallId, subagentRunId: sub })]),
    );
    expect(resumed.at(-1)).toMatchObject({ outcome: { type: 'success' }, result: { answer: 'MAIN done' } });
    expect(readFileSync(join(t.workspace, 'SUB.md'), 'utf8')).toBe('sub\n');
  });

  it('checks keys: 401 without one, 403 for a viewer, 404 for another workspace; bad input is a JSON error', async () => {
    t = await testServer();
    await verified(await aguiEvents(await post(t, input('thread-auth', 'What does the README say?'))));
    const body = input('thread-auth', 'again');
    const noKey = await post(t, body, { key: null });
    expect([noKey.status, ((await noKey.json()) as { error: { code: string } }).error.code]).toEqual([
      401,
      'unauthorized',
    ]);
    const viewer = await post(t, body, { key: await t.keyOf('viewer') });
    expect([viewer.status, ((await viewer.json()) as { error: { code: string } }).error.code]).toEqual([
      403,
      'forbidden',
    ]);
    await t.json('POST', '/v1/workspaces', { body: { name: 'Team B', workspaceId: 'team-b' } });
    const other = await t.keyOf('operator', 'team-b');
    const before = (await t.json<{ lastSequence: number }>('GET', '/v1/sessions/thread-auth/events')).body.lastSequence;
    // By path, another workspace's session is 404, exactly like an id nobody uses.
    for (const path of ['/v1/sessions/thread-auth/agui', '/v1/sessions/thread-nobody-uses/agui']) {
      const response = await post(t, body, { key: other, path });
      expect([path, response.status, ((await response.json()) as { error: { code: string } }).error.code]).toEqual([
        path,
        404,
        'session_not_found',
      ]);
    }
    // By thread id, another workspace's session id is a thread of the caller's own workspace, exactly like an id
    // nobody uses: the run creates team-b's session `team-b:thread-auth` (the client's thread id is echoed), and
    // the default workspace's session is untouched.
    for (const threadId of ['thread-auth', 'thread-nobody-uses']) {
      const events = await verified(await aguiEvents(await post(t, input(threadId, 'hello'), { key: other })));
      expect(events[0]).toMatchObject({ type: 'RUN_STARTED', threadId });
      expect(events.at(-1)?.type).toBe('RUN_FINISHED');
      const mine = await t.json<{ workspaceId: string }>('GET', `/v1/sessions/team-b:${threadId}/binding`, {
        key: other,
      });
      expect(mine.status).toBe(200);
    }
    const after = (await t.json<{ lastSequence: number }>('GET', '/v1/sessions/thread-auth/events')).body.lastSequence;
    expect(after).toBe(before);
    // The other workspace's own thread is its own session, under its workspace's prefix.
    const own = await verified(await aguiEvents(await post(t, input('thread-b', 'hello'), { key: other })));
    expect(own.at(-1)?.type).toBe('RUN_FINISHED');
    expect((await t.json<{ workspaceId: string }>('GET', '/v1/sessions/team-b:thread-b/binding')).status).toBe(404);
    expect(
      (await t.json<{ workspaceId: string }>('GET', '/v1/sessions/team-b:thread-b/binding', { key: other })).status,
    ).toBe(200);
    const bad: [unknown, number, string][] = [
      ['{nope', 400, 'invalid_json'],
      [{ threadId: 'x' }, 400, 'invalid_input'],
      [input('thread-auth', undefined), 400, 'invalid_input'],
    ];
    for (const [payload, status, code] of bad) {
      const response = await post(t, payload);
      expect([status, code]).toEqual([
        response.status,
        ((await response.json()) as { error: { code: string } }).error.code,
      ]);
    }
  });

  it('runs on a session by path, and declares its capabilities the AG-UI 1.0 way', async () => {
    t = await testServer();
    const { body: created } = await t.json<{ sessionId: string }>('POST', '/v1/sessions', { body: {} });
    const events = await verified(
      await aguiEvents(
        await post(t, input('any-client-thread', 'What does the README say?'), {
          path: `/v1/sessions/${created.sessionId}/agui`,
        }),
      ),
    );
    expect(events[0]).toMatchObject({ threadId: 'any-client-thread' });
    expect(events.at(-1)).toMatchObject({ outcome: { type: 'success' } });
    expect((await t.json('GET', '/v1/sessions/any-client-thread')).status).toBe(404);

    const caps = await t.json<Record<string, unknown>>('GET', '/v1/agui/capabilities', {
      key: await t.keyOf('viewer'),
    });
    expect(caps.status).toBe(200);
    expect(AgentCapabilitiesSchema.parse(caps.body)).toEqual(caps.body);
    expect(caps.body).toMatchObject({
      transport: { streaming: true },
      humanInTheLoop: { supported: true, approvals: true, interrupts: true },
      state: { snapshots: true, deltas: true },
      reasoning: { supported: false },
    });
    const sessionCaps = await t.json<{ tools: { items: { name: string }[] } }>(
      'GET',
      `/v1/sessions/${created.sessionId}/agui/capabilities`,
    );
    expect(sessionCaps.body.tools.items.map((x) => x.name)).toContain('read');
    const openapi = await t.json<{ paths: Record<string, unknown> }>('GET', '/v1/openapi.json');
    expect(Object.keys(openapi.body.paths)).toEqual(
      expect.arrayContaining([
        '/v1/agui',
        '/v1/sessions/{sessionId}/agui',
        '/v1/agui/capabilities',
        '/v1/sessions/{sessionId}/agui/capabilities',
      ]),
    );
  });
});

describe('the JSON Patch of STATE_DELTA', () => {
  it('turns one value into the other, for objects, arrays, scalars and escaped keys', () => {
    const cases: [unknown, unknown][] = [
      [
        { a: 1, b: [1, 2, 3], c: { d: 'x' } },
        { a: 2, b: [1, 5], c: { e: null }, 'f/g~': true },
      ],
      [[{ id: 1 }], [{ id: 1 }, { id: 2 }, { id: 3 }]],
      [{ a: [1, 2, 3, 4] }, { a: [] }],
      [1, 'one'],
      [{ a: 1 }, { a: 1 }],
    ];
    for (const [from, to] of cases) expect(applyPatch(from, jsonPatch(from, to) as Op[])).toEqual(to);
    expect(jsonPatch({ a: 1 }, { a: 1 })).toEqual([]);
  });
});

describe('the projector', () => {
  it('projects streamed reasoning as REASONING_* events, closed with the model call', async () => {
    const projector = new AguiProjector({
      threadId: 'ag-thread',
      runId: 'ag-run',
      mainThreadId: 'thr_main',
      turnId: 'turn_1',
      subagentEvents: true,
    });
    const ids = { threadId: 'thr_main', turnId: 'turn_1' };
    const event = (type: string, sequence: number, payload: Record<string, unknown>, extra = {}) =>
      ({ type, sequence, ...ids, ...extra, payload }) as unknown as RuntimeEvent;
    const events = [
      ...projector.runStarted(),
      ...projector.push(event('turn.started', 1, {})),
      ...projector.push(event('model.requested', 2, { modelId: 'm', provider: 'p' })),
      ...projector.push(event('model.delta', 2, { delta: 'Let me ', channel: 'reasoning', index: 1 })),
      ...projector.push(event('reasoning.delta', 2, { delta: 'think.', index: 2 })),
      ...projector.push(event('model.delta', 2, { delta: 'Plain ', channel: 'text', index: 3 })),
      ...projector.push(event('model.delta', 2, { delta: 'answer.', channel: 'text', index: 4 })),
      ...projector.push(
        event('model.completed', 3, {
          modelId: 'm',
          provider: 'p',
          finishReason: 'stop',
          usage: { inputTokens: 10, outputTokens: 4, totalTokens: 14, reasoningTokens: 2 },
          output: { text: 'Plain answer.', toolCalls: [] },
        }),
      ),
      ...projector.push(event('turn.completed', 4, { outcome: 'answered', answer: 'Plain answer.' })),
    ];
    expect(projector.end).toEqual({ kind: 'success', answer: 'Plain answer.' });
    events.push(...projector.finish(projector.end as never));
    const checked = await verified(events as BaseEvent[]);
    expect(checked.map((e) => e.type)).toEqual([
      'RUN_STARTED',
      'REASONING_START',
      'REASONING_MESSAGE_START',
      'REASONING_MESSAGE_CONTENT',
      'REASONING_MESSAGE_CONTENT',
      'TEXT_MESSAGE_START',
      'TEXT_MESSAGE_CONTENT',
      'TEXT_MESSAGE_CONTENT',
      'REASONING_MESSAGE_END',
      'REASONING_END',
      'TEXT_MESSAGE_END',
      'RUN_FINISHED',
    ]);
    expect(checked.at(-1)).toMatchObject({
      usage: [{ provider: 'p', model: 'm', inputTokens: 10, outputTokens: 4, totalTokens: 14, reasoningTokens: 2 }],
    });
  });

  it('carries the compiled ui_schema on TOOL_CALL_RESULT (metadata.oar.ui_schema), never on any other event', async () => {
    const projector = new AguiProjector({
      threadId: 'ag-thread',
      runId: 'ag-run',
      mainThreadId: 'thr_main',
      turnId: 'turn_1',
      subagentEvents: true,
    });
    const ids = { threadId: 'thr_main', turnId: 'turn_1' };
    const event = (type: string, sequence: number, payload: Record<string, unknown>, extra = {}) =>
      ({ type, sequence, ...ids, ...extra, payload }) as unknown as RuntimeEvent;
    const read: ToolAgentOutput = {
      tool_name: 'project_cli',
      tool_call_id: 'run_1.cal',
      tool_call_args: { module: 'calendar', method: 'read', input: { mode: 'day' } },
      status: 'success',
      result: { module: 'calendar', method: 'read', data: { items: [{ id: 'evt_123', title: 'Project sync' }] } },
      error: null,
      ui_hints: [
        {
          type: 'calendar_event',
          event: { id: 'evt_123', title: 'Project sync', start_at: '2026-04-21T10:00:00+08:00' },
          actions: [
            { type: 'call', label: 'Decline', module: 'calendar', method: 'reject_invite', input: { id: 'evt_123' } },
          ],
        },
      ],
    };
    const share: ToolAgentOutput = {
      tool_name: 'project_cli',
      tool_call_id: 'run_1.share',
      tool_call_args: { module: 'calendar', method: 'share', input: { id: 'evt_123' } },
      status: 'failure',
      result: null,
      error: { code: 'PERMISSION_DENIED', message: 'not the organizer' },
      ui_hints: [{ type: 'confirmation', title: 'Not shared', message: 'not the organizer', outcome: 'failed' }],
    };
    const action = (id: string, method: string) => ({
      id,
      executor: { type: 'tool', target: 'project_cli' },
      input: { module: 'calendar', method, input: {} },
    });
    const run = { runId: 'run_1' };
    const events = [
      ...projector.runStarted(),
      ...projector.push(event('turn.started', 1, {})),
      ...projector.push(event('model.requested', 2, { modelId: 'm', provider: 'p' })),
      ...projector.push(
        event('model.completed', 3, { modelId: 'm', provider: 'p', output: { text: 'Checking.', toolCalls: [] } }),
      ),
      ...projector.push(
        event(
          'run.status',
          4,
          {
            phase: 'declared',
            declaration: { actions: [action('cal', 'read'), action('share', 'share'), action('notes', 'read')] },
          },
          run,
        ),
      ),
      ...projector.push(
        event(
          'tool.result',
          5,
          {
            toolName: 'project_cli',
            graphActionId: 'cal',
            observation: { id: 'cal', status: 'completed', content: toolAgentProjection(read), artifacts: [] },
            toolAgentOutput: read,
          },
          { ...run, stepId: 'run_1.cal', toolCallId: 'run_1.cal' },
        ),
      ),
      ...projector.push(
        event(
          'tool.failed',
          6,
          {
            toolName: 'project_cli',
            graphActionId: 'share',
            error: { code: 'tool_failed', message: 'not the organizer', retryable: false },
            observation: {
              id: 'share',
              status: 'failed',
              content: toolAgentProjection(share),
              error: { code: 'tool_failed', message: 'not the organizer', retryable: false },
            },
            toolAgentOutput: share,
          },
          { ...run, stepId: 'run_1.share', toolCallId: 'run_1.share' },
        ),
      ),
      ...projector.push(
        event(
          'tool.result',
          7,
          {
            toolName: 'read',
            graphActionId: 'notes',
            observation: { id: 'notes', status: 'completed', content: 'hi' },
          },
          { ...run, stepId: 'run_1.notes', toolCallId: 'run_1.notes' },
        ),
      ),
      ...projector.push(event('run.status', 8, { phase: 'observed' }, run)),
      ...projector.push(event('turn.completed', 9, { outcome: 'answered', answer: 'One meeting: Project sync.' })),
    ];
    events.push(...projector.finish(projector.end as never));
    // The official checks: every event parses with @ag-ui/core's schema unchanged, and the verifier accepts the run.
    const checked = await verified(events as BaseEvent[]);
    const results = ofType<{ toolCallId: string; content: unknown; metadata: { oar: Record<string, unknown> } }>(
      checked,
      'TOOL_CALL_RESULT',
    );
    expect(results.map((r) => r.toolCallId)).toEqual(['run_1.cal', 'run_1.share', 'run_1.notes']);
    const [cal, shared, notes] = results;
    // content stays the string observation; the UI is compiled from the hints, which never go on the wire
    expect(cal?.content).toBe(toolAgentProjection(read));
    expect(UiSchemaSchema.parse(cal?.metadata.oar.ui_schema)).toEqual(
      compileUiSchema(read.ui_hints, { toolCallId: 'run_1.cal', status: 'success' }),
    );
    expect(cal?.metadata.oar.ui_schema).toMatchObject({
      version: 'oar.ui/1',
      components: [{ type: 'calendar_event', actions: [{ type: 'call', method: 'reject_invite' }] }],
    });
    expect(shared?.content).toMatch(/^\[failed\] /);
    expect(shared?.metadata.oar.ui_schema).toMatchObject({
      status: 'failure',
      components: [{ type: 'confirmation', outcome: 'failed', outcome_label: 'Failed' }],
    });
    expect(notes?.metadata.oar).not.toHaveProperty('ui_schema');
    for (const e of checked) {
      if (e.type !== 'TOOL_CALL_RESULT') expect(JSON.stringify(e)).not.toContain('ui_schema');
      expect(JSON.stringify(e)).not.toContain('ui_hints');
    }
    expect(ofType(checked, 'TEXT_MESSAGE_END').length).toBeGreaterThan(0);
    // @ag-ui/client's own reducer keeps the event's metadata on the tool message it builds.
    const applied = await lastValueFrom(
      defaultApplyEvents(
        input('ag-thread', undefined),
        from(checked as ClientEvent[]),
        { messages: [] } as never,
        [],
      ).pipe(toArray()),
    );
    const messages = applied.flatMap((m) => m.messages ?? []).reverse();
    const tool = messages.find((m) => m.role === 'tool' && m.toolCallId === 'run_1.cal') as
      | (Message & { metadata?: { oar?: { ui_schema?: unknown } } })
      | undefined;
    expect(tool?.metadata?.oar?.ui_schema).toEqual(cal?.metadata.oar.ui_schema);
  });
});
