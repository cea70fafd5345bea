import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { estimateTokens } from '../src/result.js';
import {
  parseTranscriptInput,
  renderTranscript,
  TRANSCRIPT_CLOSING_INSTRUCTION,
  TranscriptInputSchema,
  type TranscriptSource,
  type TranscriptTurnInput,
} from '../src/transcript.js';

const golden = (name: string): string => readFileSync(new URL(`./golden/${name}`, import.meta.url), 'utf8');
const example = (): TranscriptSource =>
  JSON.parse(readFileSync(new URL('../../../examples/transcript.json', import.meta.url), 'utf8'));

/** The spec's own example, turns 1 and 2 ("Runtime 到模型:Request Transcript"). */
const specTurns: TranscriptTurnInput[] = [
  { kind: 'user', text: '当前插件各个按钮点了都没效果,你进行一次 code review,定位问题,然后修复' },
  {
    kind: 'protocol',
    runId: 'apr_abc123',
    purpose: 'Inspect extension wiring',
    calls: [
      {
        action: { id: 'read_extension', executor: 'tool:read', input: { filePath: 'src/extension/extension.ts' } },
        result: {
          status: 'completed',
          artifacts: ['artifact://call_read_extension'],
          content: 'extension.ts registers the custom editor provider and command handlers.',
        },
      },
    ],
  },
];

/** The spec's observation example ("Runtime Observation:执行结果回放"), authored with the object executor form. */
const specObservationTurn: TranscriptTurnInput = {
  kind: 'protocol',
  index: 2,
  runId: 'run_123',
  purpose: 'Toolbar Button Review',
  status: 'completed',
  calls: [
    {
      action: { id: 'inspect_code', executor: { type: 'tool', target: 'auto' }, operation: 'inspect_sources' },
      result: {
        id: 'inspect_code',
        status: 'completed',
        artifacts: ['artifact://run_123/inspect_code'],
        summary:
          'Found Toolbar.vue, ToolbarButton.vue, toolbarConfig.ts, useToolbar.ts, useEditor.ts, and related tests.',
      },
    },
    {
      action: {
        id: 'review_toolbar',
        executor: { type: 'agent', target: 'auto' },
        operation: 'review_code',
        dependsOn: ['inspect_code'],
      },
      result: {
        status: 'completed',
        artifacts: ['artifact://run_123/review_toolbar'],
        content:
          'Found two issues: undo/redo state is not wired through, and the table dropdown can be hidden by a higher layer.',
      },
    },
  ],
};

const ciTurns: TranscriptTurnInput[] = [
  { kind: 'user', text: 'Why does `npm test` fail on CI but pass locally?' },
  {
    kind: 'protocol',
    runId: 'run_ci_1',
    purpose: 'Inspect CI failure',
    declaration: {
      kind: 'act',
      message: 'I will read the CI log.',
      calls: [{ id: 'read_log', type: 'tool', name: 'read', args: { filePath: 'ci/last-run.log' } }],
    },
    calls: [
      {
        action: { id: 'read_log', executor: 'tool:read', input: { filePath: 'ci/last-run.log' } },
        result: {
          status: 'completed',
          artifacts: ['artifact://run_ci_1/read_log'],
          content:
            'FAIL test/date.test.ts\n  expected 2024-01-01, received 2023-12-31\nTZ=UTC on CI; local TZ=Asia/Shanghai\n',
        },
      },
    ],
  },
  { kind: 'user', text: 'Fix it so it passes in every timezone.' },
  {
    kind: 'protocol',
    runId: 'run_ci_2',
    purpose: 'Pin the test timezone',
    declaration: {
      kind: 'act',
      calls: [
        {
          id: 'edit_config',
          type: 'tool',
          name: 'edit',
          args: { filePath: 'vitest.config.ts', patch: "env: { TZ: 'UTC' }" },
        },
        { id: 'run_tests', type: 'tool', name: 'bash', args: { command: 'npm test' }, depends: 'edit_config' },
      ],
    },
    calls: [
      {
        action: {
          id: 'edit_config',
          executor: 'tool:edit',
          input: { filePath: 'vitest.config.ts', patch: "env: { TZ: 'UTC' }" },
        },
        result: {
          status: 'completed',
          artifacts: ['artifact://run_ci_2/edit_config'],
          content: "Added env.TZ = 'UTC' to vitest.config.ts.",
        },
      },
      {
        action: { id: 'run_tests', executor: 'tool:bash', dependsOn: 'edit_config', input: { command: 'npm test' } },
        result: {
          status: 'failed',
          error: { code: 'tool.exit_nonzero', message: 'npm test exited with code 1', retryable: false },
          artifacts: ['artifact://run_ci_2/run_tests'],
          content: '1 failed: test/format.test.ts › formats local midnight',
        },
      },
    ],
  },
];

/** The CI conversation with a long log in turn 2, so that the summary level visibly shortens it. */
const ciLog = [
  '> app@1.0.0 test',
  '> vitest run',
  '',
  ' RUN  v4.1.0 /home/runner/work/app',
  '',
  ...Array.from({ length: 12 }, (_, i) => ` ✓ test/module-${i + 1}.test.ts (${i + 3} tests) ${i + 2}ms`),
  ' ❯ test/date.test.ts (6 tests | 1 failed) 9ms',
  "   × formats the first day of the year → expected '2024-01-01' to be '2023-12-31'",
  '',
  ' Test Files  1 failed | 12 passed (13)',
  '      Tests  1 failed | 95 passed (96)',
  '   Duration  1.31s',
  '',
  'env: TZ=UTC (local runs use TZ=Asia/Shanghai)',
].join('\n');
const budgetTurns: TranscriptTurnInput[] = ciTurns.map((turn, i) =>
  i === 1 && turn.kind === 'protocol'
    ? { ...turn, calls: (turn.calls ?? []).map((c) => ({ ...c, result: { ...c.result, content: ciLog } })) }
    : turn,
);
const BUDGET = 600;

describe('transcript goldens', () => {
  it('reproduces the spec example turns 1 and 2 byte for byte, in every replay mode', () => {
    const expected = golden('spec-example-turns.md');
    for (const mode of ['full', 'compressed', 'hybrid'] as const) {
      expect(renderTranscript(specTurns, { mode }).text).toBe(expected);
    }
  });

  it("reproduces the spec's observation example (executor lines, Depends, call next to result)", () => {
    expect(renderTranscript([specObservationTurn]).text).toBe(golden('spec-observation-turn.md'));
  });

  it('full replay includes the exact previous declaration, then the observations', () => {
    const { text, omitted } = renderTranscript(example(), { mode: 'full' });
    expect(text).toBe(golden('example-full.md'));
    expect(omitted).toEqual([]);
  });

  it('compressed replay shows a declaration summary + ref and describes each action', () => {
    const { text, omitted } = renderTranscript(example(), { mode: 'compressed' });
    expect(text).toBe(golden('example-compressed.md'));
    expect(omitted).toEqual([
      {
        turn: 2,
        kind: 'protocol',
        level: 'compressed',
        reason: 'mode',
        refs: ['runtime://runs/run_toolbar_1/declaration'],
      },
    ]);
  });

  it('hybrid replay keeps recent short declarations exact and summarizes old ones', () => {
    const { text, omitted } = renderTranscript(ciTurns, { mode: 'hybrid', recentTurns: 2 });
    expect(text).toBe(golden('hybrid-ci.md'));
    expect(omitted).toEqual([
      { turn: 2, kind: 'protocol', level: 'compressed', reason: 'mode', refs: ['runtime://runs/run_ci_1/declaration'] },
    ]);
  });

  it('degrades the oldest turns first under a budget and records what was left out', () => {
    const { text, tokens, omitted } = renderTranscript(budgetTurns, { budgetTokens: BUDGET });
    expect(text).toBe(golden('budget-ci.md'));
    expect(tokens).toBe(estimateTokens(text));
    expect(tokens).toBeLessThanOrEqual(BUDGET);
    expect(omitted).toEqual([
      {
        turn: 2,
        kind: 'protocol',
        level: 'summary',
        reason: 'budget',
        refs: ['runtime://runs/run_ci_1/declaration', 'artifact://run_ci_1/read_log'],
      },
    ]);
  });

  it('degrades further to one-line stubs, never touching the latest user request', () => {
    const { text, omitted } = renderTranscript(budgetTurns, { budgetTokens: 380 });
    expect(text).toBe(golden('budget-ci-stub.md'));
    expect(omitted).toEqual([
      { turn: 2, kind: 'protocol', level: 'stub', reason: 'budget', refs: ['runtime://runs/run_ci_1'] },
      {
        turn: 4,
        kind: 'protocol',
        level: 'compressed',
        reason: 'budget',
        refs: ['runtime://runs/run_ci_2/declaration'],
      },
    ]);
  });
});

describe('transcript rules', () => {
  it('hybrid is the default mode and, with every turn recent, equals full replay', () => {
    expect(renderTranscript(example()).text).toBe(golden('example-full.md'));
  });

  it('hybrid summarizes a recent declaration that is too long', () => {
    const { text, omitted } = renderTranscript(example(), { maxExactDeclarationTokens: 50 });
    expect(text).toBe(golden('example-compressed.md'));
    expect(omitted.map((o) => [o.turn, o.level, o.reason])).toEqual([[2, 'compressed', 'mode']]);
  });

  it('never renders private reasoning, wherever the input carries it', () => {
    const secret = 'PRIVATE-CHAIN-OF-THOUGHT';
    const turns = [
      { kind: 'user', text: 'hello', reasoning: secret },
      {
        kind: 'protocol',
        runId: 'r1',
        reasoning: secret,
        calls: [
          {
            reasoning: secret,
            action: { id: 'a', executor: 'tool:read', input: { filePath: 'x' }, reasoning: secret },
            result: { status: 'completed', content: 'ok', reasoning: secret },
          },
        ],
      },
      { kind: 'answer', text: 'done', reasoning: secret, reasoning_content: secret },
    ];
    for (const mode of ['full', 'compressed', 'hybrid'] as const) {
      expect(renderTranscript(turns as never, { mode }).text).not.toContain(secret);
    }
    expect(JSON.stringify(TranscriptInputSchema.parse(turns))).not.toContain(secret);
  });

  it('places every call immediately before its own result', () => {
    const { text } = renderTranscript(ciTurns, { mode: 'full' });
    const headings = text.split('\n').filter((l) => l.startsWith('### Call ') || l.startsWith('### Result for '));
    expect(headings).toEqual([
      '### Call read_log',
      '### Result for read_log',
      '### Call edit_config',
      '### Result for edit_config',
      '### Call run_tests',
      '### Result for run_tests',
    ]);
  });

  it('renders the answer turn and ends with the closing instruction', () => {
    const { text } = renderTranscript([{ kind: 'answer', text: 'All done.\n' }]);
    expect(text).toBe(
      `<turn index="1">\n## Assistant answer\n\nAll done.\n</turn>\n\n${TRANSCRIPT_CLOSING_INSTRUCTION}\n`,
    );
    expect(renderTranscript([]).text).toBe(`${TRANSCRIPT_CLOSING_INSTRUCTION}\n`);
    expect(renderTranscript([{ kind: 'user', text: 'hi' }], { closingInstruction: '' }).text).toBe(
      '<turn index="1">\n## User request\n\nhi\n</turn>\n',
    );
  });

  it('computes Status from the results when the turn does not give one', () => {
    const turn = (status: string): TranscriptTurnInput =>
      ({
        kind: 'protocol',
        runId: 'r',
        calls: [
          { action: { id: 'a', executor: 'agent:auto' }, result: { status: 'completed' } },
          { action: { id: 'b', executor: 'agent:auto' }, result: { status } },
        ],
      }) as TranscriptTurnInput;
    expect(renderTranscript([turn('waiting')]).text).toContain('Status: blocked\n');
    expect(renderTranscript([turn('denied')]).text).toContain('Status: failed\n');
    expect(renderTranscript([turn('skipped')]).text).toContain('Status: completed\n');
  });

  it('fences content that itself contains fences with a longer fence', () => {
    const { text } = renderTranscript([
      {
        kind: 'protocol',
        runId: 'r',
        calls: [
          {
            action: { id: 'a', executor: 'agent:auto', input: { task: 'x' } },
            result: { status: 'completed', content: 'Use:\n```ts\nfoo()\n```' },
          },
        ],
      },
    ]);
    expect(text).toContain('````md\nUse:\n```ts\nfoo()\n```\n````');
    expect(text).toContain('```json\n{\n  "task": "x"\n}\n```');
  });

  it('renders structured JSON content in a json fence', () => {
    const { text } = renderTranscript([
      {
        kind: 'protocol',
        runId: 'r',
        calls: [{ action: { id: 'a', executor: 'tool:count' }, result: { status: 'completed', structured: { n: 3 } } }],
      },
    ]);
    expect(text).toContain('### Result for a\n\nStatus: completed\n\n```json\n{\n  "n": 3\n}\n```');
  });

  it('accepts the Observation shape ({call, result}) so parsing is idempotent', () => {
    const once = TranscriptInputSchema.parse(ciTurns);
    const twice = TranscriptInputSchema.parse(once);
    expect(twice).toEqual(once);
    expect(renderTranscript(once).text).toBe(renderTranscript(ciTurns).text);
  });

  it('reports invalid input as a structured error', () => {
    const bad = parseTranscriptInput({
      turns: [
        {
          kind: 'protocol',
          runId: 'r',
          calls: [{ action: { id: 'a', executor: 'tool:x' }, result: { id: 'b', status: 'completed' } }],
        },
      ],
    });
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      expect(bad.error.code).toBe('invalid_transcript_input');
      expect(bad.error.message).toContain('/turns/0/calls/0/result/id');
    }
    expect(parseTranscriptInput({ turns: [{ kind: 'thought', text: 'x' }] }).ok).toBe(false);
    expect(parseTranscriptInput(example()).ok).toBe(true);
  });

  it('the latest user request survives any budget verbatim; the last turn never goes below summary', () => {
    const long = `${'Please investigate this carefully. '.repeat(80)}END-OF-REQUEST`;
    const turns: TranscriptTurnInput[] = [...ciTurns.slice(0, 2), { kind: 'user', text: long }, ...ciTurns.slice(3)];
    const { text, omitted } = renderTranscript(turns, { budgetTokens: 1 });
    expect(text).toContain(long);
    expect(omitted.map((o) => [o.turn, o.level])).toEqual([
      [1, 'dropped'],
      [2, 'dropped'],
      [4, 'summary'],
    ]);
    expect(text).toContain('<turn index="4">');
    expect(text).not.toContain('<turn index="1">');
  });

  it('property: output fits any feasible budget, keeps the latest user request, and degrades monotonically', () => {
    const floor = renderTranscript(ciTurns, { budgetTokens: 0 }).tokens;
    const ceiling = renderTranscript(ciTurns).tokens;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: ceiling + 50 }), (budget) => {
        const { text, tokens } = renderTranscript(ciTurns, { budgetTokens: budget });
        expect(text).toContain('Fix it so it passes in every timezone.');
        expect(text.endsWith(`${TRANSCRIPT_CLOSING_INSTRUCTION}\n`)).toBe(true);
        if (budget >= floor) expect(tokens).toBeLessThanOrEqual(budget);
        else expect(tokens).toBe(floor);
        const more = renderTranscript(ciTurns, { budgetTokens: budget + 25 }).tokens;
        expect(more).toBeGreaterThanOrEqual(tokens);
      }),
      { numRuns: 150 },
    );
  });
});
