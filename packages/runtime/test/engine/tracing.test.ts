import { AsyncLocalStorage } from 'node:async_hooks';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import {
  type Context,
  type ContextManager,
  context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { type AgentConfig, type ModelScript, type RuntimeOptions, Store } from '../../src/index.js';
import type { ModelScriptStep } from '../../src/models/testing.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload } from './helpers.js';

/**
 * OpenTelemetry (issue: models as a governed resource, section 7): GenAI spans for turns, model call attempts and
 * tool runs, recorded into an in-memory exporter; the events carry the ids of the span they belong to.
 */
const opened: Harness[] = [];
afterEach(async () => {
  for (const x of opened.splice(0)) {
    await x.runtime.close();
    await x.store.close();
  }
});

function tracer() {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { exporter, provider };
}

async function traced(
  script: ModelScript,
  options: Partial<RuntimeOptions> & { captureContent?: boolean; exporter?: InMemorySpanExporter } = {},
) {
  const { exporter, provider } = options.exporter
    ? {
        exporter: options.exporter,
        provider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(options.exporter)] }),
      }
    : tracer();
  const { captureContent, exporter: _given, ...rest } = options;
  const h = await harness(script, {
    limits: { modelRetryInitialDelayMs: 5 },
    ...rest,
    tracing: { tracerProvider: provider, captureContent: captureContent === true },
  });
  opened.push(h);
  return { h, exporter };
}

async function runTurn(h: Harness, input = 'go') {
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input });
  await h.runtime.settled(sessionId);
  return { sessionId, threadId, events: await allEvents(h, sessionId) };
}

const named = (spans: ReadableSpan[], name: string) => spans.filter((s) => s.name === name);
const parentOf = (span: ReadableSpan | undefined) => span?.parentSpanContext?.spanId;
const idOf = (span: ReadableSpan | undefined) => span?.spanContext().spanId;
/** The span an event was written in. */
function spanOfEvent(spans: ReadableSpan[], event: RuntimeEvent | undefined): ReadableSpan | undefined {
  expect(event?.spanId, `${event?.type} carries a span id`).toMatch(/^[0-9a-f]{16}$/);
  expect(event?.traceId, `${event?.type} carries a trace id`).toMatch(/^[0-9a-f]{32}$/);
  return spans.find((s) => s.spanContext().spanId === event?.spanId && s.spanContext().traceId === event?.traceId);
}

/** A context manager on AsyncLocalStorage (what `@opentelemetry/context-async-hooks` provides to an SDK). */
function asyncContextManager(): ContextManager {
  const storage = new AsyncLocalStorage<Context>();
  return {
    active: () => storage.getStore() ?? ROOT_CONTEXT,
    with: (ctx, fn, thisArg, ...args) => storage.run(ctx, () => fn.call(thisArg, ...args)),
    bind: (_ctx, target) => target,
    enable() {
      return this;
    },
    disable() {
      storage.disable();
      return this;
    },
  };
}

const failing = (statusCode: number): ModelScriptStep =>
  ({ error: { message: `provider said ${statusCode}`, statusCode } }) as ModelScriptStep;

describe('tracing', () => {
  it('a model retry: one invoke_agent span, a chat span per attempt, the failed one with its error', async () => {
    const { h, exporter } = await traced({ steps: [failing(500), answer('Recovered.')] });
    const { sessionId, threadId, events } = await runTurn(h);
    const spans = exporter.getFinishedSpans();

    const [turn] = named(spans, 'invoke_agent main');
    expect(turn).toBeDefined();
    expect(turn?.kind).toBe(SpanKind.INTERNAL);
    expect(turn?.parentSpanContext).toBeUndefined();
    const turnId = ofType(events, 'turn.started')[0]?.turnId;
    expect(turn?.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'main',
      'gen_ai.provider.name': 'oar-script',
      'gen_ai.conversation.id': sessionId,
      'oar.session.id': sessionId,
      'oar.thread.id': threadId,
      'oar.turn.id': turnId,
      'oar.turn.resumed': false,
      'oar.turn.outcome': 'answered',
    });
    expect(turn?.attributes['gen_ai.system']).toBeUndefined();
    expect(turn?.status.code).toBe(SpanStatusCode.UNSET);

    const chats = spans.filter((s) => s.name.startsWith('chat '));
    expect(chats).toHaveLength(2);
    for (const chat of chats) {
      expect(chat.kind).toBe(SpanKind.CLIENT);
      expect(parentOf(chat)).toBe(idOf(turn));
      expect(chat.spanContext().traceId).toBe(turn?.spanContext().traceId);
      expect(chat.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'oar-script',
        'gen_ai.conversation.id': sessionId,
        'oar.turn.id': turnId,
      });
    }
    const [first, retry] = [...chats].sort(
      (a, b) => Number(a.attributes['oar.model.attempt']) - Number(b.attributes['oar.model.attempt']),
    );
    expect(first?.name).toBe(`chat ${first?.attributes['gen_ai.request.model']}`);
    expect(first?.attributes).toMatchObject({
      'oar.model.attempt': 1,
      'error.type': 'model_transient',
      'oar.model.failure_class': 'transient',
      'http.response.status_code': 500,
    });
    expect(first?.status.code).toBe(SpanStatusCode.ERROR);
    expect(retry?.attributes).toMatchObject({
      'oar.model.attempt': 2,
      'oar.model.retry_of': 'transient',
      'gen_ai.response.finish_reasons': ['tool-calls'],
    });
    expect(retry?.attributes['gen_ai.response.model']).toBe(retry?.attributes['gen_ai.request.model']);
    expect(retry?.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
    expect(retry?.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0);
    expect(retry?.attributes['error.type']).toBeUndefined();
    expect(turn?.attributes['gen_ai.usage.output_tokens']).toBe(retry?.attributes['gen_ai.usage.output_tokens']);

    // The events carry the ids of the span they belong to.
    expect(spanOfEvent(spans, ofType(events, 'turn.started')[0])).toBe(turn);
    expect(spanOfEvent(spans, ofType(events, 'turn.completed')[0])).toBe(turn);
    expect(spanOfEvent(spans, ofType(events, 'model.failed')[0])).toBe(first);
    expect(ofType(events, 'model.requested').map((e) => spanOfEvent(spans, e))).toEqual([first, retry]);
    expect(spanOfEvent(spans, ofType(events, 'model.completed')[0])).toBe(retry);
    // Prompts and outputs only on opt-in.
    for (const span of spans) {
      expect(span.attributes['gen_ai.input.messages']).toBeUndefined();
      expect(span.attributes['gen_ai.output.messages']).toBeUndefined();
    }
    // Trace ids are envelope fields: the log replays the same with them.
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a tool action: an execute_tool span under the turn, with its name and call id; content on opt-in', async () => {
    const { h, exporter } = await traced(
      {
        steps: [
          act([{ id: 'read_readme', type: 'tool', name: 'read', args: { filePath: 'README.md' } }]),
          answer('Read it.'),
        ],
      },
      { captureContent: true },
    );
    const { events } = await runTurn(h, 'read the readme');
    const spans = exporter.getFinishedSpans();
    const [turn] = named(spans, 'invoke_agent main');
    const [tool] = named(spans, 'execute_tool read');
    expect(turn && tool).toBeDefined();
    expect(tool?.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(tool)).toBe(idOf(turn));
    const started = ofType(events, 'tool.started')[0];
    expect(tool?.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'read',
      'gen_ai.tool.call.id': started?.toolCallId,
      'gen_ai.tool.type': 'function',
      'oar.action.id': 'read_readme',
      'oar.run.id': started?.runId,
    });
    expect(String(tool?.attributes['gen_ai.tool.description'])).not.toBe('');
    expect(JSON.parse(String(tool?.attributes['gen_ai.tool.call.arguments']))).toEqual({ filePath: 'README.md' });
    expect(String(tool?.attributes['gen_ai.tool.call.result'])).toContain('Hello from the sample workspace');
    expect(tool?.status.code).toBe(SpanStatusCode.UNSET);
    expect(spanOfEvent(spans, started)).toBe(tool);
    expect(spanOfEvent(spans, ofType(events, 'tool.result')[0])).toBe(tool);
    // The tool's artifact is written with its result, in its span.
    expect(spanOfEvent(spans, ofType(events, 'artifact.changed')[0])).toBe(tool);
    // The permission check happened before the tool ran: the turn's.
    expect(spanOfEvent(spans, ofType(events, 'permission.evaluated')[0])).toBe(turn);

    const chats = spans.filter((s) => s.name.startsWith('chat '));
    expect(chats).toHaveLength(2);
    const input = JSON.parse(String(chats[1]?.attributes['gen_ai.input.messages'])) as {
      parts: { content: string }[];
    }[];
    expect(input[0]?.parts[0]?.content).toContain('Hello from the sample workspace');
    expect(String(chats[1]?.attributes['gen_ai.system_instructions'])).not.toBe('');
    const output = JSON.parse(String(chats[1]?.attributes['gen_ai.output.messages'])) as {
      role: string;
      parts: { type: string; name?: string }[];
    }[];
    expect(output[0]).toMatchObject({ role: 'assistant', parts: [{ type: 'tool_call', name: 'AgentProtocolOutput' }] });
  });

  it('a failed tool run: error.type is its error code', async () => {
    const { h, exporter } = await traced({
      steps: [
        act([{ id: 'missing', type: 'tool', name: 'read', args: { filePath: 'nope.md' } }]),
        answer('It is not there.'),
      ],
    });
    await runTurn(h);
    const [tool] = named(exporter.getFinishedSpans(), 'execute_tool read');
    expect(tool?.status.code).toBe(SpanStatusCode.ERROR);
    expect(typeof tool?.attributes['error.type']).toBe('string');
  });

  it('a sub-agent: its turn is an invoke_agent span under the parent turn, in the same trace', async () => {
    const reviewer: AgentConfig = {
      name: 'reviewer',
      description: 'Reviews code',
      capabilities: ['code_review'],
      carrier: 'tool',
    };
    const { h, exporter } = await traced(
      {
        steps: [
          act([{ id: 'review', type: 'agent', name: 'reviewer', args: { prompt: 'Review README.md' } }]),
          answer('Reviewed.'),
        ],
        agents: { reviewer: { steps: [answer('The README is fine.')] } },
      },
      { agents: [reviewer] },
    );
    const { sessionId, threadId, events } = await runTurn(h, 'review it');
    const spans = exporter.getFinishedSpans();
    const [parent] = named(spans, 'invoke_agent main');
    const [child] = named(spans, 'invoke_agent reviewer');
    const spawned = ofType(events, 'subagent.spawned')[0];
    expect(parent && child).toBeDefined();
    expect(parentOf(child)).toBe(idOf(parent));
    expect(child?.spanContext().traceId).toBe(parent?.spanContext().traceId);
    expect(child?.attributes).toMatchObject({
      'gen_ai.agent.name': 'reviewer',
      'gen_ai.conversation.id': sessionId,
      'oar.thread.id': payload(spawned).childThreadId,
      'oar.parent.thread.id': threadId,
      'oar.parent.turn.id': spawned?.turnId,
      'oar.subagent.id': spawned?.subagentId,
    });
    // The child's model call is under the child's turn; the delegation facts are the parent's.
    const childChats = spans.filter((s) => s.name.startsWith('chat ') && parentOf(s) === idOf(child));
    expect(childChats).toHaveLength(1);
    expect(childChats[0]?.attributes['gen_ai.agent.name']).toBe('reviewer');
    expect(spans.filter((s) => s.name.startsWith('chat ') && parentOf(s) === idOf(parent))).toHaveLength(2);
    expect(spanOfEvent(spans, spawned)).toBe(parent);
    expect(spanOfEvent(spans, ofType(events, 'subagent.completed')[0])).toBe(parent);
    const childTurn = ofType(events, 'turn.started').find((e) => e.threadId !== threadId);
    expect(spanOfEvent(spans, childTurn)).toBe(child);
  });

  it('a turn continued by another process: a second segment, child of the first, in the same trace', async () => {
    const writeCall = { id: 'w1', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'hi\n' } };
    const script: ModelScript = { steps: [act([writeCall]), answer('Written after restart.')] };
    const exporter = new InMemorySpanExporter();
    const { h } = await traced(script, { exporter });
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write' });
    await h.runtime.settled(sessionId);
    const actionId = ofType(await allEvents(h, sessionId), 'action.required')[0]?.actionId as string;
    // The first process stops while the turn waits for a decision: its segment ends, suspended.
    opened.splice(opened.indexOf(h), 1);
    await h.runtime.close();
    await h.store.close();
    const [first] = named(exporter.getFinishedSpans(), 'invoke_agent main');
    expect(first).toBeDefined();
    expect(first?.attributes).toMatchObject({ 'oar.turn.suspended': true, 'oar.turn.resumed': false });

    const store = await Store.open(join(h.dir, 'oar.db'));
    const { h: second } = await traced(script, { exporter, store, workspaceRoot: h.workspace });
    await second.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await second.runtime.settled(sessionId);
    const segments = named(exporter.getFinishedSpans(), 'invoke_agent main');
    expect(segments).toHaveLength(2);
    const resumed = segments[1];
    expect(resumed?.attributes).toMatchObject({ 'oar.turn.resumed': true, 'oar.turn.outcome': 'answered' });
    expect(resumed?.attributes['oar.turn.suspended']).toBeUndefined();
    expect(parentOf(resumed)).toBe(idOf(first));
    expect(resumed?.spanContext().traceId).toBe(first?.spanContext().traceId);
    const [tool] = named(exporter.getFinishedSpans(), 'execute_tool write');
    expect(parentOf(tool)).toBe(idOf(resumed));
    const events = await allEvents(second, sessionId);
    expect(spanOfEvent(exporter.getFinishedSpans(), ofType(events, 'turn.completed')[0])).toBe(resumed);
  });

  it('a command called under an application span records it; the turn it submits runs under that span', async () => {
    const { h, exporter } = await traced({ steps: [answer('Hi.')] });
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const manager = asyncContextManager();
    context.setGlobalContextManager(manager);
    try {
      const { sessionId } = await h.runtime.createSession();
      const request = provider.getTracer('app').startSpan('POST /chat');
      await context.with(trace.setSpan(context.active(), request), () =>
        h.runtime.submitTurn({ sessionId, input: 'hi' }),
      );
      request.end();
      await h.runtime.settled(sessionId);
      const events = await allEvents(h, sessionId);
      const spans = exporter.getFinishedSpans();
      const [app] = named(spans, 'POST /chat');
      expect(spanOfEvent(spans, ofType(events, 'turn.submitted')[0])).toBe(app);
      const [turn] = named(spans, 'invoke_agent main');
      expect(turn).toBeDefined();
      expect(parentOf(turn)).toBe(idOf(app));
      expect(turn?.spanContext().traceId).toBe(app?.spanContext().traceId);
    } finally {
      context.disable();
    }
  });

  it('without a tracer provider nothing is traced and no event carries trace ids', async () => {
    const h = await harness({ steps: [answer('Hi.')] });
    opened.push(h);
    const { events } = await runTurn(h);
    expect(events.length).toBeGreaterThan(0);
    expect(events.filter((e) => e.traceId !== undefined || e.spanId !== undefined)).toEqual([]);
  });
});
