import type { LanguageModelV3StreamPart } from '@ai-sdk/provider';
import type { RuntimeEvent, TurnReadModel } from '@oar/protocol';
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScriptStep } from '../../src/models/testing.js';
import { replay, threadView } from '../../src/read-models/project.js';
import { toThreadReadModel } from '../../src/read-models/snapshots.js';
import { assertEventsConform, assertSnapshotConforms, eventProblems } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, ofType, payload, recordingModel } from './helpers.js';

/**
 * Issue 29, the standard's streaming events and status: a model call's reasoning streams as live-only
 * `reasoning.delta` and is recorded once as `reasoning.summary`; its tool calls' arguments stream as live-only
 * `tool.args` (pieces, then `complete` with the whole `input`; never stored, as `model.completed` keeps them); and
 * the turn is `streaming` from its call's first piece (one durable `thread.updated`) until the call ends.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const LIVE = new Set(['model.delta', 'tool.args', 'reasoning.delta']);
const READ = { id: 'readme_1', type: 'tool', name: 'read', args: { filePath: 'README.md' } };

/** What a `deltas: true` subscriber gets, until the turn has completed. */
async function followTurn(sessionId: string, input: string): Promise<RuntimeEvent[]> {
  const seen: RuntimeEvent[] = [];
  const controller = new AbortController();
  const done = (async () => {
    for await (const event of (h as Harness).runtime.subscribe(sessionId, {
      signal: controller.signal,
      deltas: true,
    })) {
      seen.push(event);
      if (event.type === 'turn.completed' || event.type === 'turn.failed') controller.abort();
    }
  })();
  await (h as Harness).runtime.submitTurn({ sessionId, input });
  await done;
  return seen;
}

const joined = (events: RuntimeEvent[]) => events.map((e) => String(payload(e).delta ?? '')).join('');
const isStreamingFact = (e: RuntimeEvent) =>
  e.type === 'thread.updated' && (payload(e).changed as string[] | undefined)?.includes('streaming') === true;

describe('reasoning and tool arguments, streamed by the scripted model', () => {
  const reasoning = 'The user wants a greeting. I will answer at once, politely, in one sentence.';
  const message = 'Hello there: a greeting, as asked.';

  it('streams reasoning.delta and tool.args live, records one reasoning.summary, stores no piece', async () => {
    const step = { reasoning, text: 'Answering.', protocol: { kind: 'answer', message }, chunks: 6 } as ModelScriptStep;
    h = await harness({ steps: [step] });
    const { sessionId } = await h.runtime.createSession();
    const seen = await followTurn(sessionId, 'greet me');
    const stored = await allEvents(h, sessionId);

    // The log: no piece of any stream, one summary of the reasoning, before the call's completion, with its ids.
    for (const type of LIVE) expect(ofType(stored, type)).toEqual([]);
    const summaries = ofType(stored, 'reasoning.summary');
    expect(summaries).toHaveLength(1);
    const completed = ofType(stored, 'model.completed')[0] as RuntimeEvent;
    const summary = summaries[0] as RuntimeEvent;
    expect(payload(summary)).toMatchObject({
      summary: reasoning,
      chars: reasoning.length,
      modelId: payload(completed).modelId,
      provider: 'oar-script',
    });
    expect(payload(summary).truncated).toBeUndefined();
    expect({ threadId: summary.threadId, turnId: summary.turnId }).toEqual({
      threadId: completed.threadId,
      turnId: completed.turnId,
    });
    expect(summary.sequence).toBeLessThan(completed.sequence);
    // Reasoning is not output: model.completed does not carry it, and the answer is the protocol's message.
    expect(JSON.stringify(payload(completed).output)).not.toContain('politely');
    expect(payload(ofType(stored, 'turn.completed')[0]).answer).toBe(message);
    assertEventsConform(stored);

    // Live: the reasoning in pieces, then the text; the arguments as model.delta AND tool.args pieces, then complete.
    const pieces = ofType(seen, 'reasoning.delta');
    expect(pieces.length).toBeGreaterThan(1);
    expect(joined(pieces)).toBe(reasoning);
    const args = (payload(completed).output as { toolCalls: { arguments: string }[] }).toolCalls[0]?.arguments;
    const toolArgs = ofType(seen, 'tool.args');
    const argPieces = toolArgs.filter((e) => payload(e).complete === undefined);
    expect(argPieces.length).toBeGreaterThan(1);
    expect(joined(argPieces)).toBe(args);
    expect(joined(argPieces)).toBe(
      joined(seen.filter((e) => e.type === 'model.delta' && payload(e).channel === 'tool_call')),
    );
    const complete = toolArgs.at(-1) as RuntimeEvent;
    expect(payload(complete)).toMatchObject({
      complete: true,
      toolName: 'AgentProtocolOutput',
      input: { kind: 'answer', message },
    });
    expect(payload(complete).delta).toBeUndefined();
    for (const event of toolArgs) expect(event).toMatchObject({ stepId: 'call_0_0', toolCallId: 'call_0_0' });
    // Every live event is a valid event of the published core and Lime schemas and of OAR's profile.
    for (const event of seen.filter((e) => LIVE.has(e.type))) {
      expect(eventProblems(event)).toEqual([]);
      expect(event.turnId).toBe(completed.turnId);
    }
    // In order: reasoning before the text, the complete arguments after their last piece, all before the completion.
    const at = (e: RuntimeEvent | undefined) => seen.indexOf(e as RuntimeEvent);
    const firstText = seen.find((e) => e.type === 'model.delta' && payload(e).channel === 'text');
    expect(at(pieces.at(-1))).toBeLessThan(at(firstText));
    expect(at(argPieces.at(-1))).toBeLessThan(at(complete));
    expect(at(complete)).toBeLessThan(at(seen.find((e) => e.type === 'model.completed')));
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('never shows the reasoning to a later model call', async () => {
    const { model, prompts } = recordingModel({
      steps: [
        { reasoning: 'SECRET-PLAN: read the README before answering.', ...act([READ]) },
        { protocol: { kind: 'answer', message: 'Read it.' } },
      ],
    });
    h = await harness({ steps: [] }, { model });
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read the readme' });
    await h.runtime.settled(sessionId);
    const stored = await allEvents(h, sessionId);
    expect(ofType(stored, 'turn.completed')).toHaveLength(1);
    expect(payload(ofType(stored, 'reasoning.summary')[0]).summary).toContain('SECRET-PLAN');
    expect(prompts).toHaveLength(2);
    // The second call is shown what the first one did, not what it thought.
    expect(prompts[1]?.text).toContain('readme_1');
    expect(prompts[1]?.text).not.toContain('SECRET-PLAN');
  });

  it('redacts a secret in the reasoning, live and recorded, and caps a long reasoning', async () => {
    const token = `ghp_${'a1B2c3D4e5'.repeat(4)}`;
    const long = `Thinking with ${token} in mind. ${'step by step '.repeat(2000)}`;
    const step = { reasoning: long, protocol: { kind: 'answer', message: 'Done.' }, chunks: 40 } as ModelScriptStep;
    h = await harness({ steps: [step] });
    const { sessionId } = await h.runtime.createSession();
    const seen = await followTurn(sessionId, 'think hard');
    const stored = await allEvents(h, sessionId);
    const recorded = payload(ofType(stored, 'reasoning.summary')[0]);
    expect(String(recorded.summary)).not.toContain(token);
    expect(String(recorded.summary)).toContain('[REDACTED:github_token]');
    expect(recorded.truncated).toBe(true);
    expect(recorded.chars).toBe(long.length);
    expect(String(recorded.summary).length).toBeLessThanOrEqual(16_384);
    // Cut at whitespace: the summary is the (redacted) reasoning's beginning, ending on a whole word.
    const redacted = long.replace(token, '[REDACTED:github_token]');
    const kept = String(recorded.summary);
    expect(redacted.startsWith(kept)).toBe(true);
    expect(redacted.charAt(kept.length)).toBe(' ');
    const live = joined(ofType(seen, 'reasoning.delta'));
    expect(live).not.toContain(token);
    expect(live).toContain('[REDACTED:github_token]');
    assertEventsConform(stored);
  });
});

describe('reasoning from a provider (the AI SDK mock model)', () => {
  it('streams and records the reasoning of a provider call like a scripted one', async () => {
    const args = JSON.stringify({ kind: 'answer', message: 'Yes.' });
    const parts: LanguageModelV3StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'reasoning-start', id: 'r' },
      { type: 'reasoning-delta', id: 'r', delta: 'Is it yes? ' },
      { type: 'reasoning-delta', id: 'r', delta: 'It is.' },
      { type: 'reasoning-end', id: 'r' },
      { type: 'tool-input-start', id: 'call_p', toolName: 'AgentProtocolOutput' },
      { type: 'tool-input-delta', id: 'call_p', delta: args },
      { type: 'tool-input-end', id: 'call_p' },
      { type: 'tool-call', toolCallId: 'call_p', toolName: 'AgentProtocolOutput', input: args },
      {
        type: 'finish',
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage: {
          inputTokens: { total: 5, noCache: 5, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: 9, text: 4, reasoning: 5 },
        },
      },
    ];
    const model = new MockLanguageModelV3({
      doStream: async () => ({ stream: convertArrayToReadableStream(parts) }),
    });
    h = await harness(
      { steps: [] },
      { model: () => ({ model, provider: 'mock', modelId: 'mock-reasoner', supportsForcedToolChoice: true }) },
    );
    const { sessionId } = await h.runtime.createSession();
    const seen = await followTurn(sessionId, 'yes?');
    const stored = await allEvents(h, sessionId);
    expect(joined(ofType(seen, 'reasoning.delta'))).toBe('Is it yes? It is.');
    expect(payload(ofType(stored, 'reasoning.summary')[0])).toMatchObject({
      summary: 'Is it yes? It is.',
      modelId: 'mock-reasoner',
      provider: 'mock',
    });
    expect(payload(ofType(stored, 'model.completed')[0]).usage).toMatchObject({ reasoningTokens: 5 });
    expect(payload(ofType(seen, 'tool.args').at(-1))).toMatchObject({ complete: true, input: { kind: 'answer' } });
    // The first piece was reasoning: the call's streaming mark says so.
    expect(payload(stored.find(isStreamingFact)).streaming).toMatchObject({ channel: 'reasoning', attempt: 1 });
    assertEventsConform(stored);
  });
});

describe('the streaming status', () => {
  it('a turn is running while its call waits for its first piece, streaming while pieces arrive, then ends', async () => {
    // 500 ms before the first piece, then 12 pieces 100 ms apart: long enough to be seen both ways.
    const step = {
      protocol: { kind: 'answer', message: 'A slow answer, one piece at a time.' },
      delayMs: 500,
      chunks: 12,
      chunkDelayMs: 100,
    } as ModelScriptStep;
    h = await harness({ steps: [step] });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go slowly' });
    const statuses: string[] = [];
    let streamingSnapshot: Awaited<ReturnType<Harness['runtime']['getSession']>>['snapshot'] | undefined;
    const deadline = Date.now() + 15_000;
    for (;;) {
      const { snapshot } = await h.runtime.getSession({ sessionId });
      const thread = snapshot.threads.find((t) => t.threadId === threadId);
      const status = (thread?.turns[0] as TurnReadModel | undefined)?.status;
      if (status && statuses.at(-1) !== status) statuses.push(status);
      if (status === 'streaming' && !streamingSnapshot) {
        streamingSnapshot = snapshot;
        // The thread has no streaming status of its own (the standard's thread statuses): it is running.
        expect(thread?.status).toBe('running');
      }
      if (status === 'completed' || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(statuses).toContain('streaming');
    expect(statuses.indexOf('running')).toBeGreaterThanOrEqual(0);
    expect(statuses.indexOf('running')).toBeLessThan(statuses.indexOf('streaming'));
    expect(statuses.at(-1)).toBe('completed');
    assertSnapshotConforms(streamingSnapshot as NonNullable<typeof streamingSnapshot>);

    // One durable fact per call, between its request and its completion, whatever the number of pieces.
    await h.runtime.settled(sessionId);
    const stored = await allEvents(h, sessionId);
    const marks = stored.filter(isStreamingFact);
    expect(marks).toHaveLength(1);
    const mark = marks[0] as RuntimeEvent;
    expect(payload(mark).streaming).toEqual({
      modelId: 'script',
      provider: 'oar-script',
      attempt: 1,
      channel: 'tool_call',
    });
    const requested = ofType(stored, 'model.requested')[0] as RuntimeEvent;
    const completed = ofType(stored, 'model.completed')[0] as RuntimeEvent;
    expect(mark.turnId).toBe(requested.turnId);
    expect(requested.sequence).toBeLessThan(mark.sequence);
    expect(mark.sequence).toBeLessThan(completed.sequence);
    assertEventsConform(stored);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('is derived from the log: streaming from the mark until the call ends, each call on its own', async () => {
    const steps = [act([READ]), { protocol: { kind: 'answer', message: 'Read it.' } }] as ModelScriptStep[];
    h = await harness({ steps });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read' });
    await h.runtime.settled(sessionId);
    const stored = await allEvents(h, sessionId);
    // Two calls, two marks; each status follows from the events up to it.
    expect(stored.filter(isStreamingFact)).toHaveLength(2);
    const statusAfter = (count: number) => {
      const thread = threadView(replay(stored.slice(0, count)), threadId);
      return thread ? toThreadReadModel(thread, []).turns[0]?.status : undefined;
    };
    const seen = stored.map((event, i) => ({
      type: event.type,
      status: statusAfter(i + 1),
      mark: isStreamingFact(event),
    }));
    for (const [i, entry] of seen.entries()) {
      if (entry.mark) expect(entry.status, `after the mark at ${i}`).toBe('streaming');
      if (entry.type === 'model.requested') expect(entry.status, `after model.requested at ${i}`).not.toBe('streaming');
      if (entry.type === 'model.completed') expect(entry.status, `after model.completed at ${i}`).toBe('running');
    }
    expect(seen.at(-1)?.status).toBe('completed');
  });
});
