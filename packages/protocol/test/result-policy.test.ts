import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ResultPolicy } from '../src/declaration.js';
import { parseAssistantText } from '../src/parse.js';
import { estimateTokens, type FullOutput, shapeObservation } from '../src/result.js';
import { renderTranscript } from '../src/transcript.js';

/**
 * The result-policy fields beyond `return_to_model`: `if_truncated` (provide_ref_and_summary | fail | ask_model),
 * `store_full: false`, and the action's `description` / `reason` in what the model sees (docs/protocol.md,
 * "Results, observations and result policies").
 */

const REF = 'artifact://run_1/read_log';
const action = {
  id: 'read_log',
  title: 'Read the build log',
  description: 'Read the CI build log to find the failing step.',
  reason: 'The user asked why CI fails.',
  executor: { type: 'tool' as const, target: 'read' },
  input: { filePath: 'build.log' },
};
const text = Array.from({ length: 200 }, (_, i) => `step ${i + 1}: compiling module ${i + 1} ok`).join('\n');
const out = (extra: Partial<FullOutput> = {}): FullOutput => ({ text, artifacts: [REF], ...extra });
const policy = (extra: Partial<ResultPolicy> = {}): ResultPolicy => ({
  returnToModel: 'full',
  storeFull: true,
  ...extra,
});
const BUDGET = 120;

describe('if_truncated: parsed and normalized', () => {
  const dsl = (resultPolicy: Record<string, unknown>) =>
    `\`\`\`json agent-protocol\n${JSON.stringify({
      type: 'agent.protocol',
      version: '1',
      intent: 'execute',
      payload: {
        type: 'action_graph',
        actions: [
          {
            type: 'action',
            id: 'read_log',
            executor: { type: 'tool', target: 'read' },
            input: { filePath: 'build.log' },
            result_policy: resultPolicy,
          },
        ],
      },
    })}\n\`\`\`\n`;

  it.each([
    ['provide_ref_and_summary', 'provide_ref_and_summary'],
    ['fail', 'fail'],
    ['ask_model', 'ask_model'],
    ['ask-model', 'ask_model'],
  ])('accepts %s', (value, normalized) => {
    const outcome = parseAssistantText(dsl({ return_to_model: 'full', if_truncated: value }), { validate: false });
    expect(outcome.errors).toEqual([]);
    expect(outcome.declaration?.actions[0]?.resultPolicy.ifTruncated).toBe(normalized);
  });

  it('rejects an unknown value with the accepted ones in the message', () => {
    const outcome = parseAssistantText(dsl({ return_to_model: 'full', if_truncated: 'shrug' }), { validate: false });
    expect(outcome.ok).toBe(false);
    expect(outcome.errors[0]).toMatchObject({
      code: 'invalid_schema',
      path: '/payload/actions/0/result_policy/if_truncated',
    });
    expect(outcome.errors[0]?.message).toContain('provide_ref_and_summary, fail, ask_model');
  });

  it("keeps the model's store_full request as sent (default true)", () => {
    const asked = parseAssistantText(dsl({ return_to_model: 'summary', store_full: false }), { validate: false });
    expect(asked.declaration?.actions[0]?.resultPolicy.storeFull).toBe(false);
    const unset = parseAssistantText(dsl({ return_to_model: 'summary' }), { validate: false });
    expect(unset.declaration?.actions[0]?.resultPolicy.storeFull).toBe(true);
  });
});

describe('if_truncated: provide_ref_and_summary (the default)', () => {
  it('is a preview plus the ref note, exactly as without the field', () => {
    const without = shapeObservation(action, out(), policy(), BUDGET);
    const explicit = shapeObservation(action, out(), policy({ ifTruncated: 'provide_ref_and_summary' }), BUDGET);
    expect(explicit).toEqual(without);
    expect(explicit.result.status).toBe('completed');
    expect(explicit.result.truncated).toBe(true);
    expect(explicit.result.content).toContain(
      `[truncated: ~${estimateTokens(text)} tokens in full; request expand_ref on ${REF} to see more]`,
    );
  });
});

describe('if_truncated: fail', () => {
  it('an output over the budget fails the action with output_over_budget naming the size, the budget and the ref', () => {
    const { result } = shapeObservation(action, out(), policy({ ifTruncated: 'fail' }), BUDGET);
    expect(result.status).toBe('failed');
    expect(result.content).toBeUndefined();
    expect(result.truncated).toBeUndefined();
    // The full output is still stored and named.
    expect(result.artifacts).toEqual([REF]);
    const tokens = estimateTokens(text);
    expect(result.error).toEqual({
      code: 'output_over_budget',
      message: `the output is ~${tokens} tokens, over the budget of ${BUDGET} tokens (if_truncated: fail); the full output is stored at ${REF}`,
      retryable: false,
      details: { outputTokens: tokens, budgetTokens: BUDGET, ref: REF, ifTruncated: 'fail' },
    });
  });

  it('an output within the budget completes as usual', () => {
    const { result } = shapeObservation(action, out({ text: 'ok' }), policy({ ifTruncated: 'fail' }), BUDGET);
    expect(result).toMatchObject({ status: 'completed', content: 'ok' });
    expect(result.error).toBeUndefined();
  });

  it('applies to every policy that can truncate (summary, adaptive too)', () => {
    const long = Array.from({ length: 60 }, (_, i) => `finding ${i}: ${'x'.repeat(40)}`).join('\n');
    for (const returnToModel of ['summary', 'excerpt', 'structured', 'adaptive', 'on_demand'] as const) {
      const { result } = shapeObservation(
        action,
        { text: long, summary: long, structured: { findings: long }, artifacts: [REF] },
        policy({ returnToModel, ifTruncated: 'fail' }),
        60,
      );
      expect(result.status, returnToModel).toBe('failed');
      expect(result.error?.code, returnToModel).toBe('output_over_budget');
    }
  });

  it('an action that already failed keeps its own error; its output is shown as a preview plus the ref', () => {
    const error = { code: 'tool_error', message: 'exit 1', retryable: false };
    const { result } = shapeObservation(
      action,
      out({ error, status: 'failed' }),
      policy({ returnToModel: 'on_failure', ifTruncated: 'fail' }),
      BUDGET,
    );
    expect(result.status).toBe('failed');
    expect(result.error).toEqual(error);
    expect(result.truncated).toBe(true);
    expect(result.content).toContain(`request expand_ref on ${REF}`);
  });
});

describe('if_truncated: ask_model', () => {
  it('shows the preview and asks the model to choose: expand_ref a range, or continue', () => {
    const { result } = shapeObservation(action, out(), policy({ ifTruncated: 'ask_model' }), BUDGET);
    expect(result.status).toBe('completed');
    expect(result.truncated).toBe(true);
    const tokens = estimateTokens(text);
    const note = `[output cut: ~${tokens} tokens in full, over the budget of ${BUDGET} tokens. Decide before going on: request expand_ref on ${REF} with a range (start_line/end_line, pattern or max_tokens) for the part you need, or continue with this preview.]`;
    expect(result.content?.startsWith('step 1: compiling module 1 ok')).toBe(true);
    expect(result.content?.endsWith(note)).toBe(true);
    expect(estimateTokens(result.content ?? '')).toBeLessThanOrEqual(BUDGET);
  });

  it('an adaptive result names the omitted sections and asks the same question', () => {
    const structured = { errors: 'E1 failed', diff: 'd'.repeat(2000) };
    const { result } = shapeObservation(
      action,
      { structured, artifacts: [REF] },
      policy({ returnToModel: 'adaptive', priority: ['errors', 'diff'], ifTruncated: 'ask_model' }),
      BUDGET,
    );
    expect(result.truncated).toBe(true);
    expect(result.content).toContain('## errors');
    expect(result.content).toContain('[omitted for budget: diff. Decide before going on: request expand_ref on');
    expect(result.content).toContain('or continue with this preview.]');
  });

  it('an output within the budget is shown whole, with no question', () => {
    const { result } = shapeObservation(action, out({ text: 'ok' }), policy({ ifTruncated: 'ask_model' }), BUDGET);
    expect(result.content).toBe('ok');
  });
});

describe('store_full: false', () => {
  const NOTE = `[store_full: false was not applied: the runtime keeps every full output in its audit record, so it stays stored at ${REF}]`;

  it('says in the observation that the request was overridden, and why', () => {
    const { result } = shapeObservation(action, out({ text: 'ok' }), policy({ storeFull: false }), BUDGET);
    expect(result.content).toBe(`ok\n\n${NOTE}`);
    expect(result.artifacts).toEqual([REF]);
  });

  it('under return_to_model none the note is the whole content', () => {
    const { result } = shapeObservation(action, out(), policy({ returnToModel: 'none', storeFull: false }), BUDGET);
    expect(result.content).toBe(NOTE);
  });

  it('the note is paid from the same budget as the output', () => {
    const { result } = shapeObservation(action, out(), policy({ storeFull: false }), BUDGET);
    expect(result.truncated).toBe(true);
    expect(result.content?.endsWith(NOTE)).toBe(true);
    expect(estimateTokens(result.content ?? '')).toBeLessThanOrEqual(BUDGET);
  });

  it('store_full: true (the default) adds nothing', () => {
    const { result } = shapeObservation(action, out({ text: 'ok' }), policy(), BUDGET);
    expect(result.content).toBe('ok');
  });
});

describe('description and reason in the observation', () => {
  it('the observed call carries both', () => {
    const { call, result } = shapeObservation(action, out({ text: 'ok' }), policy(), BUDGET);
    expect(call.description).toBe(action.description);
    expect(call.reason).toBe(action.reason);
    expect(result.description).toBe(action.description);
  });

  const turn = (declaration?: string) => ({
    kind: 'protocol' as const,
    runId: 'run_1',
    purpose: 'Why CI fails',
    ...(declaration !== undefined ? { declaration } : {}),
    calls: [
      {
        call: shapeObservation(action, out({ text: 'step 7: error TS2345' }), policy(), BUDGET).call,
        result: { id: 'read_log', status: 'completed' as const, content: 'step 7: error TS2345', artifacts: [REF] },
      },
    ],
  });
  const golden = (name: string): string => readFileSync(new URL(`./golden/${name}`, import.meta.url), 'utf8');

  it('the transcript shows the description and the reason when the declaration is not in view (golden)', () => {
    expect(renderTranscript([turn()]).text).toBe(golden('description-reason.md'));
  });

  it('with the exact declaration in view the description is still shown, the reason is not repeated (golden)', () => {
    const { text } = renderTranscript([turn('```json agent-protocol\n{"type":"agent.protocol"}\n```')], {
      mode: 'full',
    });
    expect(text).toBe(golden('description-reason-full.md'));
  });

  it('the summary level keeps the description and drops the reason', () => {
    const long = { kind: 'user' as const, text: 'x '.repeat(50) };
    const { text, omitted } = renderTranscript([long, turn(), { kind: 'user', text: 'next' }], { budgetTokens: 180 });
    expect(omitted.find((o) => o.kind === 'protocol')?.level).toBe('summary');
    expect(text).toContain('Args: `{"filePath":"build.log"}`');
    expect(text).toContain('Description: Read the CI build log to find the failing step.');
    expect(text).not.toContain('Reason:');
  });
});
