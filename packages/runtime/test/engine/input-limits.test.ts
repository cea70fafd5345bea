import { MAX_JSON_DEPTH, MAX_OUTPUT_CHARS } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScriptStep } from '../../src/models/testing.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload, recordingModel, types } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

async function run(steps: ModelScriptStep[], options: Parameters<typeof harness>[1] = {}) {
  const recorder = recordingModel({ steps });
  h = await harness({ steps: [] }, { ...options, model: recorder.model });
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  await h.runtime.settled(sessionId);
  const events = await allEvents(h, sessionId);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  return { events, read, prompts: recorder.prompts };
}

const DEPTH = 100_000;
const nestedText = `${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}`;
function nestedValue(): unknown {
  let value: unknown = [];
  for (let i = 1; i < DEPTH; i += 1) value = [value];
  return value;
}

/** The rejected output went down the corrective-retry path with `code`, and the corrected answer ended the turn. */
async function expectCorrected(steps: ModelScriptStep[], code: string, limit: number) {
  const { events, read, prompts } = await run([...steps, answer('Recovered.')]);
  expect(types(events)).not.toContain('model.failed');
  const warnings = ofType(events, 'runtime.warning');
  expect(warnings.map((e) => payload(e).code)).toEqual(['protocol_violation']);
  const errors = (payload(warnings[0]).details as { errors: { code: string; message: string }[] }).errors;
  expect(errors.map((e) => e.code)).toEqual([code]);
  expect(errors[0]?.message).toContain(String(limit));
  expect(prompts[1]?.text).toContain(code);
  expect(types(events)).not.toContain('tool.started');
  expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Recovered.' });
}

describe('deeply nested JSON from the model is a protocol error, not a crash or a model error', () => {
  it('in AgentProtocolOutput arguments as the provider sends them (a JSON string)', async () => {
    const args = `{"kind":"act","calls":[{"id":"r","type":"tool","name":"read","args":{"filePath":${nestedText}}}]}`;
    await expectCorrected(
      [{ toolCalls: [{ name: 'AgentProtocolOutput', arguments: args }] }],
      'nesting_too_deep',
      MAX_JSON_DEPTH,
    );
  });

  it('in a scripted declaration object (the scripted model writes it without recursing)', async () => {
    const deep = act([{ id: 'r', type: 'tool', name: 'read', args: { filePath: nestedValue() } }]);
    await expectCorrected([deep as ModelScriptStep], 'nesting_too_deep', MAX_JSON_DEPTH);
  });

  it('in a fenced agent-protocol block', async () => {
    const block = {
      type: 'agent.protocol',
      version: '1',
      intent: 'execute',
      payload: {
        type: 'action_graph',
        actions: [{ type: 'action', id: 'r', executor: { type: 'tool', target: 'read' }, input: { x: 'DEEP' } }],
      },
    };
    const text = `\`\`\`json agent-protocol\n${JSON.stringify(block).replace('"DEEP"', nestedText)}\n\`\`\`\n`;
    await expectCorrected([{ text }], 'nesting_too_deep', MAX_JSON_DEPTH);
  });
});

describe('oversized model output is a protocol error', () => {
  it('assistant text over the limit', async () => {
    await expectCorrected([{ text: 'x'.repeat(MAX_OUTPUT_CHARS + 1) }], 'output_too_large', MAX_OUTPUT_CHARS);
  });
});

describe('a tool timeout holds while a tool matches a pathological pattern', () => {
  it('grep is stopped at its timeout and the turn goes on', async () => {
    const started = Date.now();
    const { events, read } = await run(
      [
        // Over a minute of matching for this one line, in one synchronous RE2 call (see match-worker.ts).
        act([{ id: 'g', type: 'tool', name: 'grep', args: { pattern: `${'a{0,1000}'.repeat(12)}[0-9]` } }]),
        answer('Gave up on that search.'),
      ],
      { files: { 'long.txt': `${'a'.repeat(100_000)}\n` }, limits: { toolTimeoutMs: 1_500 } },
    );
    const failed = ofType(events, 'tool.failed');
    expect(failed).toHaveLength(1);
    expect(payload(failed[0]).error).toMatchObject({ code: 'tool_timeout' });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Gave up on that search.' });
    expect(Date.now() - started).toBeLessThan(20_000);
  });
});
