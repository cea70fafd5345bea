import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { isLiveEvent, resolveModel } from '../../src/index.js';
import { modelHandle } from '../../src/models/resolve.js';
import type { ModelScriptStep } from '../../src/models/testing.js';
import { type FakeOpenAI, fakeOpenAI } from '../support/fake-openai.js';
import { assertEventsConform, eventProblems } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { allEvents, ofType, payload } from './helpers.js';

/**
 * Streaming (issue: models as a governed resource, section 4): a model call streams (`doStream`); its text and
 * tool-call arguments reach the session's subscribers as live-only `model.delta` events in their position, are
 * never stored, and `model.completed` keeps the whole output. An interrupt stops the stream at once and the
 * `model.failed` keeps what was streamed.
 */
let h: Harness | undefined;
let fake: FakeOpenAI | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
  await fake?.close();
  fake = undefined;
});

/** Collects what a `deltas: true` subscriber gets, until stopped. */
function follow(sessionId: string) {
  const seen: RuntimeEvent[] = [];
  const controller = new AbortController();
  const done = (async () => {
    for await (const event of (h as Harness).runtime.subscribe(sessionId, {
      signal: controller.signal,
      deltas: true,
    })) {
      seen.push(event);
    }
  })();
  return {
    seen,
    async stop() {
      controller.abort();
      await done;
    },
  };
}

const deltas = (events: RuntimeEvent[], channel?: string) =>
  events.filter((e) => e.type === 'model.delta' && (!channel || payload(e).channel === channel));
const joined = (events: RuntimeEvent[]) => events.map((e) => payload(e).delta).join('');

/** Waits until `check` holds, polling (the drivers run in the background). */
async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * The live events' positions are increasing (model.delta and the tool.args beside it alike), and each comes after
 * the durable event whose sequence it carries.
 */
function expectPositioned(seen: RuntimeEvent[]): void {
  let last = [0, 0];
  let durable = 0;
  for (const event of seen) {
    const position = isLiveEvent(event) ? [event.sequence, Number(payload(event).index)] : [event.sequence, 0];
    const [sequence = 0, index = 0] = position;
    const [lastSequence = 0, lastIndex = 0] = last;
    expect(sequence > lastSequence || (sequence === lastSequence && index > lastIndex)).toBe(true);
    if (isLiveEvent(event)) expect(event.sequence).toBeLessThanOrEqual(durable);
    else durable = event.sequence;
    last = position;
  }
}

describe('streaming with the scripted model', () => {
  it('text and tool-call arguments arrive as live deltas in order; the log keeps only model.completed', async () => {
    const message = 'Streaming works: every word arrives as it is produced.';
    const step = { text: 'Let me answer.', protocol: { kind: 'answer', message }, chunks: 8 } as ModelScriptStep;
    h = await harness({ steps: [step] });
    const { sessionId } = await h.runtime.createSession();
    const live = follow(sessionId);
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    await until(() => live.seen.some((e) => e.type === 'turn.completed'));
    await live.stop();

    const stored = await allEvents(h, sessionId);
    expect(ofType(stored, 'model.delta')).toEqual([]);
    assertEventsConform(stored);
    const completed = payload(ofType(stored, 'model.completed')[0]).output as {
      text: string;
      toolCalls: { name: string; arguments: string }[];
    };
    expect(joined(deltas(live.seen, 'text'))).toBe(completed.text);
    expect(joined(deltas(live.seen, 'tool_call'))).toBe(completed.toolCalls[0]?.arguments);
    expect(JSON.parse(joined(deltas(live.seen, 'tool_call')))).toEqual({ kind: 'answer', message });
    expect(deltas(live.seen).length).toBeGreaterThan(2);
    // Each delta validates against the published event schemas and OAR's profile, and names its call.
    for (const delta of deltas(live.seen)) {
      expect(eventProblems(delta)).toEqual([]);
      expect(delta).toMatchObject({ sessionId, threadId: expect.any(String), turnId: expect.any(String) });
    }
    for (const delta of deltas(live.seen, 'tool_call')) {
      expect(delta.toolCallId).toBe('call_0_0');
      expect(payload(delta).toolName).toBe('AgentProtocolOutput');
    }
    // Durable events and deltas interleave in position order: the deltas follow the model.requested.
    expectPositioned(live.seen);
    const requested = ofType(live.seen, 'model.requested')[0] as RuntimeEvent;
    const completedEvent = ofType(live.seen, 'model.completed')[0] as RuntimeEvent;
    const firstDelta = live.seen.indexOf(deltas(live.seen)[0] as RuntimeEvent);
    expect(firstDelta).toBeGreaterThan(live.seen.indexOf(requested));
    expect(live.seen.indexOf(deltas(live.seen).at(-1) as RuntimeEvent)).toBeLessThan(live.seen.indexOf(completedEvent));
    // A subscriber without `deltas` sees only the log.
    const plain: RuntimeEvent[] = [];
    const controller = new AbortController();
    for await (const event of h.runtime.subscribe(sessionId, { signal: controller.signal })) {
      plain.push(event);
      if (plain.length === stored.length) controller.abort();
    }
    expect(plain).toEqual(stored);
  });

  it('an interrupt stops the stream within a second; model.failed keeps the partial output', async () => {
    const message = 'word '.repeat(400);
    // 200 pieces, 100 ms apart: a stream that ignored the interrupt would run for 20 s.
    const step = { protocol: { kind: 'answer', message }, chunks: 200, chunkDelayMs: 100 } as ModelScriptStep;
    h = await harness({ steps: [step] });
    const { sessionId } = await h.runtime.createSession();
    const live = follow(sessionId);
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await until(() => deltas(live.seen).length >= 3);
    const asked = Date.now();
    await h.runtime.interruptTurn({ sessionId, reason: 'stop' });
    await h.runtime.settled(sessionId);
    const stopped = Date.now() - asked;
    const streamedBefore = joined(deltas(live.seen));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await live.stop();
    // Generous for a loaded machine; the stream itself stops at the abort.
    expect(stopped).toBeLessThan(1000 * 3);
    expect(joined(deltas(live.seen))).toBe(streamedBefore); // nothing streamed after the interrupt settled

    const stored = await allEvents(h, sessionId);
    expect(ofType(stored, 'model.delta')).toEqual([]);
    expect(ofType(stored, 'model.completed')).toEqual([]);
    const failed = payload(ofType(stored, 'model.failed')[0]);
    expect(failed).toMatchObject({ failureClass: 'cancelled', error: { code: 'interrupted' } });
    const partial = failed.partialToolCalls as { name: string; arguments: string; toolCallId: string }[];
    expect(partial).toHaveLength(1);
    expect(partial[0]?.name).toBe('AgentProtocolOutput');
    const full = JSON.stringify({ kind: 'answer', message });
    expect(partial[0]?.arguments.length).toBeGreaterThan(0);
    expect(full.startsWith(partial[0]?.arguments ?? 'x')).toBe(true);
    expect(partial[0]?.arguments.length).toBeLessThan(full.length);
    expect(ofType(stored, 'turn.failed')[0]?.status).toBe('cancelled');
    assertEventsConform(stored);
  });
});

describe('streaming over HTTP (openai-compatible, real SSE)', () => {
  async function httpHarness(reply: Parameters<typeof fakeOpenAI>[0]) {
    fake = await fakeOpenAI(reply);
    const resolved = await resolveModel('fake', {
      cwd: process.cwd(),
      env: {},
      models: { fake: { provider: 'openai-compatible', model: 'fake-model', baseURL: fake.baseURL } },
    });
    h = await harness(
      { steps: [] },
      {
        model: () => modelHandle(resolved),
      },
    );
  }

  it('the deltas of an SSE stream reach a subscriber in order and add up to model.completed', async () => {
    const args = JSON.stringify({ kind: 'answer', message: 'Hello from a real stream, piece by piece.' });
    await httpHarness(() => ({
      kind: 'answer',
      toolCalls: [{ id: 'call_sse', name: 'AgentProtocolOutput', arguments: args }],
      pieces: 10,
      usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19, prompt_tokens_details: { cached_tokens: 3 } },
    }));
    const { sessionId } = await (h as Harness).runtime.createSession();
    const live = follow(sessionId);
    await (h as Harness).runtime.submitTurn({ sessionId, input: 'hi' });
    await (h as Harness).runtime.settled(sessionId);
    await until(() => live.seen.some((e) => e.type === 'turn.completed'));
    await live.stop();

    expect(fake?.requests[0]?.body).toMatchObject({ stream: true });
    const stored = await allEvents(h as Harness, sessionId);
    expect(ofType(stored, 'model.delta')).toEqual([]);
    const completed = payload(ofType(stored, 'model.completed')[0]);
    expect(completed).toMatchObject({
      finishReason: 'tool-calls',
      usage: { inputTokens: 12, outputTokens: 7, totalTokens: 19, cachedInputTokens: 3 },
    });
    const output = completed.output as { toolCalls: { arguments: string }[] };
    expect(output.toolCalls[0]?.arguments).toBe(args);
    expect(joined(deltas(live.seen, 'tool_call'))).toBe(args);
    expect(deltas(live.seen, 'tool_call').length).toBeGreaterThan(2);
    expectPositioned(live.seen);
    expect(payload(ofType(stored, 'turn.completed')[0]).answer).toBe('Hello from a real stream, piece by piece.');
  });

  it('an interrupt mid-stream closes the connection within a second and keeps the partial text', async () => {
    const text = 'token '.repeat(300);
    await httpHarness(() => ({ kind: 'answer', text, pieces: 300, chunkDelayMs: 50 }));
    const { sessionId } = await (h as Harness).runtime.createSession();
    const live = follow(sessionId);
    await (h as Harness).runtime.submitTurn({ sessionId, input: 'hi' });
    await until(() => deltas(live.seen).length >= 3);
    const asked = Date.now();
    const startedAt = fake?.requests[0]?.at ?? 0;
    await (h as Harness).runtime.interruptTurn({ sessionId });
    await (h as Harness).runtime.settled(sessionId);
    expect(Date.now() - asked).toBeLessThan(3000);
    await until(() => fake?.requests[0]?.closedAt !== undefined, 3000);
    await live.stop();
    // The client hung up long before the 15 s stream would have ended.
    expect((fake?.requests[0]?.closedAt ?? 0) - startedAt).toBeLessThan(10_000);
    const stored = await allEvents(h as Harness, sessionId);
    const failed = payload(ofType(stored, 'model.failed')[0]);
    expect(failed.failureClass).toBe('cancelled');
    expect(typeof failed.partialText).toBe('string');
    expect(text.startsWith(failed.partialText as string)).toBe(true);
    expect((failed.partialText as string).length).toBeGreaterThan(0);
    expect(ofType(stored, 'model.delta')).toEqual([]);
  });
});
