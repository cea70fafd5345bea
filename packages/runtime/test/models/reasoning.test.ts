import type { LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider';
import { createEvent, validateEventProfile } from '@oar/protocol';
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import { modelCompleted } from '../../src/models/cost.js';
import { callModel, type ModelHandle, type ModelRequest } from '../../src/models/model-call.js';
import type { CompletedToolCall, ModelDelta, ModelDeltaSink } from '../../src/models/model-deltas.js';
import { REASONING_SUMMARY_LIMIT } from '../../src/models/reasoning.js';

/**
 * Provider reasoning through `callModel` with the AI SDK's own mock model (`MockLanguageModelV3`): reasoning parts
 * are streamed to the sink on their own channel, kept apart from the output (`ModelOutput.reasoning`, never in the
 * text or a failed call's partial output), and recorded once as `reasoning.summary` beside `model.completed`.
 * A tool call's arguments end with the sink's `toolCall`, the whole arguments as the model sent them.
 */

const usage: LanguageModelV3Usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 20, text: 8, reasoning: 12 },
};
const args = JSON.stringify({ kind: 'answer', message: 'Forty-two.' });

function streamOf(parts: LanguageModelV3StreamPart[]) {
  return new MockLanguageModelV3({ doStream: async () => ({ stream: convertArrayToReadableStream(parts) }) });
}

function recorder() {
  const deltas: ModelDelta[] = [];
  const calls: CompletedToolCall[] = [];
  const sink: ModelDeltaSink = {
    delta: (d) => deltas.push(d),
    toolCall: (c) => calls.push(c),
    end: () => undefined,
  };
  return { deltas, calls, sink };
}

const request = (sink: ModelDeltaSink): ModelRequest => ({
  system: 'system',
  transcript: 'user',
  carrier: 'tool',
  signal: new AbortController().signal,
  modelCall: 0,
  timeoutMs: 5_000,
  deltas: sink,
});

const handle = (model: MockLanguageModelV3, extra: Partial<ModelHandle> = {}): ModelHandle => ({
  model,
  provider: 'mock',
  modelId: 'mock-reasoner',
  supportsForcedToolChoice: true,
  ...extra,
});

const REASONED: LanguageModelV3StreamPart[] = [
  { type: 'stream-start', warnings: [] },
  { type: 'reasoning-start', id: 'r1' },
  { type: 'reasoning-delta', id: 'r1', delta: 'The question is ' },
  { type: 'reasoning-delta', id: 'r1', delta: 'famous.' },
  { type: 'reasoning-end', id: 'r1' },
  // A second block the provider never ends: kept as it stands.
  { type: 'reasoning-delta', id: 'r2', delta: 'Answer briefly.' },
  { type: 'text-start', id: 't' },
  { type: 'text-delta', id: 't', delta: 'Thinking done. ' },
  { type: 'text-end', id: 't' },
  { type: 'tool-input-start', id: 'call_1', toolName: 'AgentProtocolOutput' },
  { type: 'tool-input-delta', id: 'call_1', delta: args.slice(0, 10) },
  { type: 'tool-input-delta', id: 'call_1', delta: args.slice(10) },
  { type: 'tool-input-end', id: 'call_1' },
  { type: 'tool-call', toolCallId: 'call_1', toolName: 'AgentProtocolOutput', input: args },
  { type: 'finish', usage, finishReason: { unified: 'tool-calls', raw: 'tool_calls' } },
];

describe('provider reasoning through callModel', () => {
  it('streams reasoning pieces on their own channel and keeps the reasoning out of the output', async () => {
    const { deltas, calls, sink } = recorder();
    const result = await callModel(handle(streamOf(REASONED)), request(sink));
    if (!result.ok) throw new Error(result.failure.error.message);
    expect(result.output.reasoning).toBe('The question is famous.\n\nAnswer briefly.');
    expect(result.output.text).toBe('Thinking done. ');
    expect(result.output.toolCalls).toEqual([{ name: 'AgentProtocolOutput', arguments: args }]);
    expect(result.output.usage).toMatchObject({ outputTokens: 20, reasoningTokens: 12 });
    const reasoning = deltas.filter((d) => d.channel === 'reasoning').map((d) => d.delta);
    // The second block is set apart as in the whole reasoning: the live pieces add up to what is recorded.
    expect(reasoning).toEqual(['The question is ', 'famous.', '\n\nAnswer briefly.']);
    expect(reasoning.join('')).toBe(result.output.reasoning);
    // Reasoning first, as it streamed; the arguments' end after their last piece.
    expect(deltas.map((d) => d.channel)).toEqual([
      'reasoning',
      'reasoning',
      'reasoning',
      'text',
      'tool_call',
      'tool_call',
    ]);
    expect(calls).toEqual([{ toolCallId: 'call_1', toolName: 'AgentProtocolOutput', input: args }]);
  });

  it('a call that is not streamed (doGenerate) gives the same reasoning, pieces and tool-call end', async () => {
    const model = new MockLanguageModelV3({
      doGenerate: async () => ({
        content: [
          { type: 'reasoning', text: 'Short thought.' },
          { type: 'reasoning', text: 'Another.' },
          { type: 'tool-call', toolCallId: 'call_g', toolName: 'AgentProtocolOutput', input: args },
        ],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      }),
    });
    const { deltas, calls, sink } = recorder();
    const result = await callModel(handle(model, { stream: false }), request(sink));
    if (!result.ok) throw new Error(result.failure.error.message);
    expect(result.output.reasoning).toBe('Short thought.\n\nAnother.');
    expect(result.output.text).toBe('');
    expect(deltas).toEqual([
      { channel: 'reasoning', delta: 'Short thought.' },
      { channel: 'reasoning', delta: '\n\nAnother.' },
      { channel: 'tool_call', delta: args, toolCallId: 'call_g', toolName: 'AgentProtocolOutput' },
    ]);
    expect(calls).toEqual([{ toolCallId: 'call_g', toolName: 'AgentProtocolOutput', input: args }]);
  });

  it("a failed call's partial output keeps what it said, not what it thought", async () => {
    const parts: LanguageModelV3StreamPart[] = [
      { type: 'reasoning-start', id: 'r' },
      { type: 'reasoning-delta', id: 'r', delta: 'private musing' },
      { type: 'text-delta', id: 't', delta: 'Half an answ' },
      { type: 'error', error: new Error('connection reset') },
    ];
    const { sink } = recorder();
    const result = await callModel(handle(streamOf(parts)), request(sink));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.partial).toEqual({ partialText: 'Half an answ' });
  });

  it('a call without reasoning reports none, and records no reasoning.summary', async () => {
    const parts = REASONED.filter((p) => !p.type.startsWith('reasoning'));
    const { deltas, sink } = recorder();
    const result = await callModel(handle(streamOf(parts)), request(sink));
    if (!result.ok) throw new Error(result.failure.error.message);
    expect(result.output.reasoning).toBeUndefined();
    expect(deltas.some((d) => d.channel === 'reasoning')).toBe(false);
    const facts = modelCompleted({ threadId: 'th', turnId: 'tu' }, handle(streamOf([])), result.output);
    expect(facts.map((f) => f.type)).toEqual(['model.completed']);
  });
});

describe('reasoning.summary', () => {
  const ids = { threadId: 'thread_1', turnId: 'turn_1' };
  const output = {
    text: '',
    toolCalls: [],
    finishReason: 'stop',
    usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 },
    durationMs: 5,
  };

  it("is written before the call's model.completed, with its model and the lead and trail fields", () => {
    const facts = modelCompleted(
      ids,
      handle(streamOf([])),
      { ...output, reasoning: 'Because.' },
      {
        lead: { purpose: 'compaction' },
        trail: { attempt: 2 },
      },
    );
    expect(facts.map((f) => f.type)).toEqual(['reasoning.summary', 'model.completed']);
    const summary = facts[0];
    expect(summary).toMatchObject({
      ...ids,
      payload: {
        summary: 'Because.',
        chars: 8,
        modelId: 'mock-reasoner',
        provider: 'mock',
        purpose: 'compaction',
        attempt: 2,
      },
    });
    expect(summary?.payload).not.toHaveProperty('truncated');
    // A valid event of OAR's profile once the log gives it its envelope.
    const event = createEvent('reasoning.summary', {
      ...(summary as { threadId: string; turnId: string; payload: { summary: string } }),
      runtimeId: 'rt',
      sessionId: 'se',
      sequence: 1,
    });
    expect(validateEventProfile(event)).toEqual([]);
  });

  it('is capped at the limit, cut at whitespace, and says so', () => {
    const reasoning = 'word '.repeat(REASONING_SUMMARY_LIMIT);
    const [summary] = modelCompleted(ids, handle(streamOf([])), { ...output, reasoning });
    const payload = summary?.payload as { summary: string; chars: number; truncated?: boolean };
    expect(payload.truncated).toBe(true);
    expect(payload.chars).toBe(reasoning.length);
    expect(payload.summary.length).toBeLessThanOrEqual(REASONING_SUMMARY_LIMIT);
    expect(payload.summary.length).toBeGreaterThan(REASONING_SUMMARY_LIMIT - 10);
    expect(reasoning.startsWith(payload.summary)).toBe(true);
    expect(payload.summary.endsWith('word')).toBe(true);
  });
});
