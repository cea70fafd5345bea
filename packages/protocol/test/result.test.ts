import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RETURN_TO_MODEL, type ResultPolicy, type ReturnToModel } from '../src/declaration.js';
import {
  type ActionStatus,
  aggregateStatus,
  estimateTokens,
  type FullOutput,
  headWithinTokens,
  mechanicalSummary,
  ProtocolResultSchema,
  protocolResult,
  shapeObservation,
  tailWithinTokens,
} from '../src/result.js';

const action = {
  id: 'grep_src',
  title: 'Search sources',
  executor: { type: 'tool' as const, target: 'grep' },
  input: { pattern: 'TODO' },
};
const REF = 'artifact://run_1/grep_src';
const lines = Array.from({ length: 30 }, (_, i) => `src/file${i + 1}.ts:${i + 10}: // TODO fix ${i + 1}`);
const text = lines.join('\n');
const policy = (returnToModel: ReturnToModel, extra: Partial<ResultPolicy> = {}): ResultPolicy => ({
  returnToModel,
  storeFull: true,
  ...extra,
});
const out = (extra: Partial<FullOutput> = {}): FullOutput => ({ text, artifacts: [REF], ...extra });
const truncationNote = (source: string): string =>
  `[truncated: ~${estimateTokens(source)} tokens in full; request expand_ref on ${REF} to see more]`;
const mechanical = `${lines.slice(0, 3).join('\n')}\n… (30 lines, ${text.length} chars in full output)`;

describe('estimateTokens', () => {
  it.each([
    ['', 0],
    ['abcd', 1],
    ['abcde', 2],
    ['你好', 2],
    ['你好abcd', 3],
    ['こんにちは', 5],
    ['한국어', 3],
    ['é', 1],
    ['ééé', 2],
    ['😀😀', 1],
    ['𠀀', 1],
    ['a'.repeat(400), 100],
  ])('%j → %i', (input, tokens) => {
    expect(estimateTokens(input)).toBe(tokens);
  });

  it('is monotone under appending and never negative', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        expect(estimateTokens(a + b)).toBeGreaterThanOrEqual(estimateTokens(a));
        expect(estimateTokens(a + b)).toBeLessThanOrEqual(estimateTokens(a) + estimateTokens(b));
      }),
    );
  });

  it('head/tail previews are a prefix/suffix within the budget, never splitting a surrogate pair', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 400 }), fc.integer({ min: 0, max: 60 }), (s, max) => {
        const head = headWithinTokens(s, max);
        const tail = tailWithinTokens(s, max);
        expect(s.startsWith(head)).toBe(true);
        expect(s.endsWith(tail)).toBe(true);
        expect(estimateTokens(head)).toBeLessThanOrEqual(max);
        expect(estimateTokens(tail)).toBeLessThanOrEqual(max);
        expect(head).not.toMatch(/[\uD800-\uDBFF]$/);
        expect(tail).not.toMatch(/^[\uDC00-\uDFFF]/);
      }),
    );
  });
});

describe('aggregateStatus', () => {
  const cases: Array<[ActionStatus[], string]> = [
    [[], 'completed'],
    [['completed'], 'completed'],
    [['completed', 'skipped'], 'completed'],
    [['completed', 'waiting'], 'blocked'],
    [['blocked'], 'blocked'],
    [['running', 'completed'], 'blocked'],
    [['pending'], 'blocked'],
    [['failed', 'completed'], 'failed'],
    [['lost'], 'failed'],
    [['denied', 'completed'], 'failed'],
    [['cancelled'], 'failed'],
    [['waiting', 'failed'], 'failed'],
  ];
  it.each(cases)('%j → %s', (statuses, expected) => {
    expect(aggregateStatus(statuses.map((status) => ({ status })))).toBe(expected);
  });
});

describe('agent.protocol.result record', () => {
  it("parses the spec's own record (no artifacts field) and defaults artifacts to []", () => {
    const record = ProtocolResultSchema.parse({
      type: 'agent.protocol.result',
      version: '1',
      run_id: 'run_123',
      status: 'completed',
      actions: [
        {
          id: 'inspect_code',
          title: 'Inspect Code',
          description: 'Find toolbar components, editor integration, styles, and tests.',
          status: 'completed',
          summary: 'Found Toolbar.vue and related tests.',
        },
      ],
      next: 'final_answer',
    });
    expect(record.actions[0]?.artifacts).toEqual([]);
  });

  it('protocolResult computes the aggregate itself', () => {
    const result = protocolResult('run_1', [
      { id: 'a', status: 'completed', artifacts: [] },
      { id: 'b', status: 'denied', artifacts: [] },
    ]);
    expect(result).toMatchObject({ type: 'agent.protocol.result', run_id: 'run_1', status: 'failed' });
    expect(ProtocolResultSchema.parse(result)).toEqual(result);
  });
});

describe('shapeObservation: one row per result policy', () => {
  const failed = out({ status: 'failed', error: { code: 'tool.exit_nonzero', message: 'exit 2', retryable: false } });
  const structured = { matches: 30, files: ['src/file1.ts', 'src/file2.ts'] };
  const rows: Array<{ name: string; policy: ResultPolicy; output: FullOutput; budget: number; expect: object }> = [
    { name: 'none: status only', policy: policy('none'), output: out(), budget: 1000, expect: { content: undefined } },
    {
      name: 'none keeps the error (a runtime fact, not output)',
      policy: policy('none'),
      output: failed,
      budget: 1000,
      expect: { content: undefined, status: 'failed', error: failed.error },
    },
    {
      name: "summary: the executor's summary when given",
      policy: policy('summary'),
      output: out({ summary: '30 TODOs in 30 files' }),
      budget: 1000,
      expect: { content: '30 TODOs in 30 files', summary: '30 TODOs in 30 files' },
    },
    {
      name: 'summary: otherwise a mechanical one (first lines + size)',
      policy: policy('summary'),
      output: out(),
      budget: 1000,
      expect: { content: mechanical, summary: mechanical },
    },
    {
      name: 'structured: the fields, as JSON',
      policy: policy('structured'),
      output: out({ structured }),
      budget: 1000,
      expect: { structured, content: JSON.stringify(structured, null, 2) },
    },
    {
      name: 'structured without structured output falls back to the summary',
      policy: policy('structured'),
      output: out(),
      budget: 1000,
      expect: { structured: undefined, content: mechanical },
    },
    {
      name: "excerpt: the executor's excerpt when given",
      policy: policy('excerpt'),
      output: out({ excerpt: lines[4] }),
      budget: 1000,
      expect: { content: lines[4], excerpt: lines[4] },
    },
    {
      name: 'full: the whole text within budget',
      policy: policy('full'),
      output: out(),
      budget: 1000,
      expect: { content: text, truncated: undefined },
    },
    {
      name: 'on_failure: nothing when it succeeded',
      policy: policy('on_failure'),
      output: out(),
      budget: 1000,
      expect: { content: undefined },
    },
    {
      name: 'on_failure: the details when it failed',
      policy: policy('on_failure'),
      output: failed,
      budget: 1000,
      expect: { content: text, status: 'failed' },
    },
    {
      name: 'on_demand: summary + ref + how to expand',
      policy: policy('on_demand'),
      output: out({ summary: '30 TODOs' }),
      budget: 1000,
      expect: { summary: '30 TODOs', content: `30 TODOs\n\nFull output: ${REF} — request expand_ref to see more.` },
    },
    {
      name: 'adaptive: sections in priority order, then the rest',
      policy: policy('adaptive', { priority: ['errors', 'missing', 'file_paths'] }),
      output: { structured: { diff: '+a', file_paths: ['x.ts'], errors: ['E1'] }, artifacts: [REF] },
      budget: 1000,
      expect: { content: '## errors\n\n[\n  "E1"\n]\n\n## file_paths\n\n[\n  "x.ts"\n]\n\n## diff\n\n+a' },
    },
  ];

  it.each(rows)('$name', ({ policy: p, output, budget, expect: expected }) => {
    const { call, result } = shapeObservation(action, output, p, budget);
    expect(result).toMatchObject({ id: 'grep_src', title: 'Search sources', artifacts: [REF] });
    for (const [key, value] of Object.entries(expected)) {
      expect(result[key as keyof typeof result], key).toEqual(value);
    }
    expect(call).toEqual({ ...action, dependsOn: [] });
  });
});

describe('shapeObservation: budgets and truncation', () => {
  it('full over budget becomes a head preview + ref note, truncated: true', () => {
    const { result } = shapeObservation(action, out(), policy('full'), 60);
    expect(result.truncated).toBe(true);
    expect(result.content?.startsWith(`${lines[0]}\n`)).toBe(true);
    expect(result.content?.endsWith(`\n…\n${truncationNote(text)}`)).toBe(true);
    expect(estimateTokens(result.content ?? '')).toBeLessThanOrEqual(60);
  });

  it('excerpt over budget keeps head and tail (errors cluster at the end)', () => {
    const { result } = shapeObservation(action, out(), policy('excerpt'), 90);
    expect(result.content).toContain(lines[0]);
    expect(result.content).toContain(lines[29]);
    expect(result.content).toContain('\n…\n');
    expect(result.excerpt).toBe(result.content);
    expect(result.truncated).toBe(true);
    expect(estimateTokens(result.content ?? '')).toBeLessThanOrEqual(90);
  });

  it("the policy's maxTokens applies when smaller than the runtime budget, and the runtime budget always wins", () => {
    const byPolicy = shapeObservation(action, out(), policy('full', { maxTokens: 50 }), 10_000).result;
    expect(estimateTokens(byPolicy.content ?? '')).toBeLessThanOrEqual(50);
    const byRuntime = shapeObservation(action, out(), policy('full', { maxTokens: 10_000 }), 50).result;
    expect(byRuntime.content).toBe(byPolicy.content);
  });

  it('structured over budget shows a preview and leaves the fields to the artifact', () => {
    const big = { rows: Array.from({ length: 200 }, (_, i) => ({ i, v: `value ${i}` })) };
    const { result } = shapeObservation(action, out({ structured: big }), policy('structured'), 80);
    expect(result.structured).toBeUndefined();
    expect(result.truncated).toBe(true);
    expect(result.content).toContain(REF);
  });

  it('adaptive omits whole lower-priority sections and names them', () => {
    const output = {
      structured: { errors: ['TypeError: x is undefined'], diff: 'line\n'.repeat(400), file_paths: ['a.ts'] },
      artifacts: [REF],
    };
    const { result } = shapeObservation(action, output, policy('adaptive', { priority: ['errors', 'diff'] }), 80);
    expect(result.content?.startsWith('## errors\n\n[\n  "TypeError: x is undefined"\n]\n\n## diff\n\nline\n')).toBe(
      true,
    );
    expect(
      result.content?.endsWith(`[omitted for budget: diff, file_paths; request expand_ref on ${REF} to see more]`),
    ).toBe(true);
    expect(result.truncated).toBe(true);
    expect(estimateTokens(result.content ?? '')).toBeLessThanOrEqual(80);
  });

  it('falls back to a runtime:// ref when no artifact ref is given', () => {
    const { result } = shapeObservation(action, { text }, policy('full'), 60, { runId: 'run_9' });
    expect(result.content).toContain('request expand_ref on runtime://runs/run_9/actions/grep_src/output');
    expect(result.artifacts).toEqual([]);
  });

  it('property: content never exceeds a budget that can hold the ref note', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...RETURN_TO_MODEL),
        fc.string({ unit: 'grapheme', maxLength: 3000 }),
        fc.integer({ min: 80, max: 400 }),
        fc.boolean(),
        (mode, body, budget, withStructured) => {
          const output: FullOutput = {
            text: body,
            artifacts: [REF],
            status: 'failed',
            ...(withStructured ? { structured: { a: body.slice(0, 500), b: body.slice(500) } } : {}),
          };
          const { result } = shapeObservation(action, output, policy(mode, { priority: ['b'] }), budget);
          expect(estimateTokens(result.content ?? '')).toBeLessThanOrEqual(budget);
          if (result.truncated) expect(result.content).toContain(REF);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('mechanicalSummary', () => {
  it.each([
    [{ text: 'one line' }, 'one line'],
    [{ text: '\n\n  \n' }, '(no output)'],
    [{ structured: { n: 1 } }, '{"n":1}'],
    [{ structured: { long: 'x'.repeat(400), other: 1 } }, 'Structured result with fields: long, other'],
    [{ structured: Array.from({ length: 100 }, (_, i) => `item-${i}`) }, 'Structured result: 100 items'],
    [
      { error: { code: 'tool.timeout', message: 'timed out after 30s', retryable: true } },
      'tool.timeout: timed out after 30s',
    ],
    [{}, '(no output)'],
  ])('%j → %j', (output, expected) => {
    expect(mechanicalSummary(output as FullOutput)).toBe(expected);
  });
});
