import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScriptStep } from '../../src/models/testing.js';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, dsl, ofType, payload, recordingModel } from './helpers.js';

/**
 * The result policy end to end through the engine: `if_truncated` (fail, ask_model), `store_full: false`, the
 * action's description and reason in what the model is shown next, and the corrective retry's wording.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const big = Array.from({ length: 400 }, (_, i) => `line ${i + 1}: ${'lorem ipsum dolor sit amet '.repeat(3)}`).join(
  '\n',
);

const readBig = (resultPolicy: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  dsl([
    {
      id: 'read_big',
      title: 'Read the big file',
      description: 'Read big.txt to find line 200.',
      reason: 'The user asked what line 200 says.',
      executor: { type: 'tool', target: 'read' },
      input: { filePath: 'big.txt' },
      result_policy: resultPolicy,
      ...extra,
    },
  ]);

async function run(steps: ModelScriptStep[]) {
  const recorder = recordingModel({ steps });
  h = await harness(
    { steps: [] },
    { model: recorder.model, files: { 'big.txt': big }, limits: { observationTokens: 200 } },
  );
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'what does line 200 of big.txt say?' });
  await h.runtime.settled(sessionId);
  const events = await allEvents(h, sessionId);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  return { events, read, prompts: recorder.prompts, sessionId };
}

describe('if_truncated through the engine', () => {
  it('fail: the action fails with output_over_budget (size, budget, ref); the full output is stored', async () => {
    const { events, read, prompts, sessionId } = await run([
      readBig({ return_to_model: 'full', if_truncated: 'fail' }),
      answer('It did not fit.'),
    ]);
    const artifact = ofType(events, 'artifact.changed')[0];
    expect(payload(artifact).size).toBeGreaterThan(big.length);
    const ref = payload(ofType(events, 'tool.result')[0]).outputRef as string;
    expect(ref).toMatch(/^artifact:\/\//);
    const row = actionRows(read).find((a) => a.actionId === 'read_big');
    expect(row?.status).toBe('failed');
    expect(row?.error?.code).toBe('output_over_budget');
    expect(row?.error?.message).toContain(`the full output is stored at ${ref}`);
    const observation = payload(ofType(events, 'tool.result')[0]).observation as {
      status: string;
      error: { details: Record<string, unknown> };
    };
    expect(observation.status).toBe('failed');
    expect(observation.error.details).toMatchObject({ budgetTokens: 200, ref, ifTruncated: 'fail' });
    expect(observation.error.details.outputTokens as number).toBeGreaterThan(200);
    expect(ofType(events, 'output.spilled')).toHaveLength(0);
    // The model is shown the failure, not a preview.
    expect(prompts[1]?.text).toContain('Error: `output_over_budget`');
    expect(prompts[1]?.text).not.toContain('line 1: lorem');
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'It did not fit.' });
    expect((await h?.runtime.replaySession(sessionId))?.differences).toEqual([]);
  });

  it('ask_model: the model sees the preview and is asked to expand a range of the ref or continue', async () => {
    const { events, read, prompts } = await run([
      readBig({ return_to_model: 'full', if_truncated: 'ask_model' }),
      answer('Continuing with the preview.'),
    ]);
    const ref = payload(ofType(events, 'tool.result')[0]).outputRef as string;
    expect(actionRows(read).find((a) => a.actionId === 'read_big')?.status).toBe('completed');
    expect(prompts[1]?.text).toContain('line 1: lorem');
    expect(prompts[1]?.text).toContain(
      `Decide before going on: request expand_ref on ${ref} with a range (start_line/end_line, pattern or max_tokens) for the part you need, or continue with this preview.`,
    );
  });

  it('provide_ref_and_summary: the preview and the ref, as without the field', async () => {
    const { events, prompts } = await run([
      readBig({ return_to_model: 'full', if_truncated: 'provide_ref_and_summary' }),
      answer('ok'),
    ]);
    const ref = payload(ofType(events, 'tool.result')[0]).outputRef as string;
    expect(ofType(events, 'output.spilled')).toHaveLength(1);
    expect(prompts[1]?.text).toContain(`request expand_ref on ${ref} to see more]`);
  });
});

describe('store_full: false through the engine', () => {
  it('the full output is still stored, and the observation says the request was not applied and why', async () => {
    const { events, prompts } = await run([readBig({ return_to_model: 'summary', store_full: false }), answer('ok')]);
    expect(payload(ofType(events, 'artifact.changed')[0]).size).toBeGreaterThan(big.length);
    const ref = payload(ofType(events, 'tool.result')[0]).outputRef as string;
    expect(prompts[1]?.text).toContain(
      `[store_full: false was not applied: the runtime keeps every full output in its audit record, so it stays stored at ${ref}]`,
    );
  });
});

describe('description and reason in the next model request', () => {
  it('the observation shows the description and the reason', async () => {
    const { prompts } = await run([readBig({ return_to_model: 'summary' }), answer('ok')]);
    expect(prompts[1]?.text).toContain('Description: Read big.txt to find line 200.');
    expect(prompts[1]?.text).toContain('Reason: The user asked what line 200 says.');
  });
});

describe('corrective retry wording', () => {
  it('unbalanced JSON without finish reason length is invalid_json, not "cut off"', async () => {
    const { events, prompts } = await run([
      { toolCalls: [{ name: 'AgentProtocolOutput', arguments: '{"kind": "answer", "message": "The README sa' }] },
      answer('Recovered.'),
    ]);
    const codes = (payload(ofType(events, 'runtime.warning')[0]).details as { errors: { code: string }[] }).errors;
    expect(codes.map((e) => e.code)).toEqual(['invalid_json']);
    expect(prompts[1]?.text).toContain('[invalid_json]');
    expect(prompts[1]?.text).not.toMatch(/cut off/i);
  });

  it('the same payload with finish reason length is truncated_output', async () => {
    const { events } = await run([
      {
        toolCalls: [{ name: 'AgentProtocolOutput', arguments: '{"kind": "answer", "message": "The README sa' }],
        finishReason: 'length',
      },
      answer('Recovered.'),
    ]);
    const codes = (payload(ofType(events, 'runtime.warning')[0]).details as { errors: { code: string }[] }).errors;
    expect(codes.map((e) => e.code)).toEqual(['truncated_output']);
  });

  const correction = (events: Awaited<ReturnType<typeof run>>['events']) =>
    (payload(ofType(events, 'runtime.warning')[0]).details as { correction: string }).correction;

  it('a correction built from messages that end in a full stop has no doubled full stops', async () => {
    const { events, prompts } = await run([
      act([
        { id: 'r1', type: 'tool', name: 'read', args: { path: 'README.md' } },
        { id: 'r2', type: 'tool', name: 'read', args: { filePath: 'README.md' }, depends: 'r1' },
      ]),
      answer('Recovered.'),
    ]);
    const text = correction(events);
    expect(text).toContain('[invalid_tool_args]');
    expect(text).not.toContain('..');
    // The prompt is recorded as JSON: the correction appears in it escaped.
    expect(prompts[1]?.text).toContain(JSON.stringify(text).slice(1, -1));
  });

  it('the plain-text correction under the tool carrier has no doubled full stops either', async () => {
    const { events } = await run([{ text: 'Here is my answer in prose.' }, answer('Recovered.')]);
    const text = correction(events);
    expect(text).toContain('[no_tool_call]');
    expect(text).not.toContain('..');
  });
});
