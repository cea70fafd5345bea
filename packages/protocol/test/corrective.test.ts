import { describe, expect, it } from 'vitest';
import type { Catalog } from '../src/catalog.js';
import {
  type Action,
  DEFAULT_FAILURE_POLICY,
  DEFAULT_RESULT_POLICY,
  type Declaration,
  type Executor,
} from '../src/declaration.js';
import { correctiveLine, joinSentences, type ProtocolIssue } from '../src/errors.js';
import { MAX_OUTPUT_CHARS, PARSE_CODES, type ParseOptions, parseAssistantText, parseToolCall } from '../src/parse.js';
import { VALIDATION_CODES, type ValidateDeclarationOptions, validateDeclaration } from '../src/validate.js';

/**
 * The corrective retry is built from the issues verbatim (`correctiveLine`): its wording must be clean for every
 * code the protocol can report — no doubled full stops where a message that ends in "." meets its hint — and a
 * payload that merely fails to parse is not called cut off unless the model's finish reason says so.
 */

const objectSchema = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
});

const catalog: Catalog = {
  tools: [
    {
      name: 'read_file',
      description: 'Read a file',
      inputSchema: objectSchema({ path: { type: 'string' } }, ['path']),
      capabilities: ['filesystem', 'read'],
    },
    {
      name: 'grep',
      description: 'Search',
      inputSchema: objectSchema({ pattern: { type: 'string' } }, ['pattern']),
      capabilities: ['filesystem', 'read', 'search'],
    },
    { name: 'broken', description: 'Catalog fault', inputSchema: { type: 'nonsense' }, capabilities: [] },
  ],
  agents: [{ name: 'code-reviewer', description: 'Reviews code', capabilities: ['code_review'] }],
};
const noAgents: Catalog = { tools: catalog.tools, agents: [] };

type ActionOverrides = Omit<Partial<Action>, 'executor'> & { executor?: Partial<Executor> };
function act(id: string, overrides: ActionOverrides = {}): Action {
  const { executor, ...rest } = overrides;
  return {
    id,
    executor: { type: 'tool', target: 'read_file', capabilities: [], ...executor },
    input: { path: 'README.md' },
    dependsOn: [],
    contextRefs: [],
    resultPolicy: DEFAULT_RESULT_POLICY,
    failurePolicy: DEFAULT_FAILURE_POLICY,
    ...rest,
  };
}
function decl(actions: Action[], overrides: Partial<Declaration> = {}): Declaration {
  return {
    intent: 'execute',
    persist: false,
    execution: { mode: 'ephemeral', strategy: 'dag' },
    actions,
    source: { carrier: 'tool', form: 'carrier', recovered: false },
    ...overrides,
  };
}

const read = { id: 'r1', type: 'tool', name: 'read_file', args: { path: 'a.ts' } };
const options: ParseOptions = { catalog };
const block = (envelope: unknown, tail = '') =>
  `\`\`\`json agent-protocol\n${JSON.stringify(envelope)}\n\`\`\`\n${tail}`;
const graph = (actions: unknown[], extra: Record<string, unknown> = {}) => ({
  type: 'agent.protocol',
  version: '1',
  intent: 'execute',
  payload: { type: 'action_graph', actions },
  ...extra,
});
const dslRead = { type: 'action', id: 'r1', executor: { type: 'tool', target: 'read_file' }, input: { path: 'a' } };

/** Model outputs that produce every parse code. */
const parseCorpus: (() => ProtocolIssue[])[] = [
  () => parseAssistantText('', options).errors,
  () => parseToolCall('{"kind": "act", calls: []}', options).errors,
  () => parseToolCall('{"kind": "act", "calls": [{"id": "r1"', { ...options, finishReason: 'length' }).errors,
  () => parseToolCall({ kind: 'act', calls: [{ ...read, bogus: 1 }] }, options).errors,
  () => parseToolCall({ kind: 'think' }, options).errors,
  () => parseAssistantText('Just prose.', options).errors,
  () => parseAssistantText('```json\n{"type": "agent.protocol"}\n```', options).errors,
  () => parseAssistantText(`${block(graph([dslRead]))}${block(graph([dslRead]))}`, options).errors,
  () => parseAssistantText('```json agent-protocol\n{"type": "agent.protocol"', options).errors,
  () => parseAssistantText(block(graph([{ ...dslRead, prompt_ref: 'md:nope' }])), options).errors,
  () => parseAssistantText(block(graph([{ ...dslRead, prompt_ref: 'md:nope' }]), '## other\n\ntext\n'), options).errors,
  () => parseToolCall({ kind: 'act', calls: [{ ...read, context: ['foo:bar'] }] }, options).errors,
  () => parseAssistantText(block(graph([{ ...dslRead, context_refs: ['foo:bar'] }])), options).errors,
  () => parseAssistantText(block(graph([{ ...dslRead, prompt_ref: 'foo:bar' }])), options).errors,
  () =>
    parseToolCall({ kind: 'act', calls: [read, { ...read, id: 'r2', context: ['action:r1.summary'] }] }, options)
      .errors,
  () =>
    parseAssistantText(block(graph([{ ...dslRead, prompt_ref: 'md:p' }]), '## p\n\none\n\n## p\n\ntwo\n'), options)
      .errors,
  () =>
    parseToolCall(
      [
        { name: 'AgentProtocolOutput', arguments: { kind: 'answer', message: 'a' } },
        { name: 'AgentProtocolOutput', arguments: { kind: 'answer', message: 'b' } },
      ],
      options,
    ).errors,
  () =>
    parseToolCall(
      [
        { name: 'AgentProtocolOutput', arguments: { kind: 'answer', message: 'a' } },
        { name: 'read_file', arguments: { path: 'a' } },
      ],
      options,
    ).errors,
  () => parseToolCall({ name: 'bash', arguments: { command: 'ls' } }, options).errors,
  () => parseAssistantText('<tool_call>not json</tool_call>', options).errors,
  () => parseToolCall({ name: 'read_file', arguments: { file: 'a' } }, options).errors,
  () => parseToolCall({ kind: 'act' }, options).errors,
  () => parseToolCall({ kind: 'answer', message: 'x', calls: [read] }, options).errors,
  () => parseToolCall({ kind: 'answer' }, options).errors,
  () =>
    parseAssistantText(
      block({ ...graph([]), intent: 'execute', payload: { type: 'decision', decision: 'retry' } }),
      options,
    ).errors,
  () => parseAssistantText('x'.repeat(MAX_OUTPUT_CHARS + 1), options).errors,
  () => parseToolCall(`{"kind":"act","calls":${'['.repeat(200)}${']'.repeat(200)}}`, options).errors,
  () => parseToolCall({ kind: 'answer', message: 'x' }, { ...options, protocolEnabled: false }).errors,
  () => parseToolCall({ kind: 'answer', message: 'x' }, { catalog: { tools: 5 } as unknown as Catalog }).errors,
];

/** Declarations that produce every validation code. */
const validationCorpus: [Declaration, Partial<ValidateDeclarationOptions>?][] = [
  [decl([act('has space')])],
  [decl([act('a'), act('a')])],
  [decl([act('a')]), { history: { usedActionIds: ['a'] } }],
  [decl([act('a', { dependsOn: ['zzz'] })])],
  [decl([act('a', { dependsOn: ['a'] })])],
  [decl([act('a', { dependsOn: ['old'] })]), { history: { usedActionIds: ['old'] } }],
  [decl([act('a', { dependsOn: ['b'] }), act('b', { dependsOn: ['a'] })])],
  [decl([act('a'), act('b', { dependsOn: ['a'] }), act('c', { dependsOn: ['b'] })]), { limits: { maxDepth: 2 } }],
  [decl([act('a', { executor: { type: 'auto' as Executor['type'], target: 'auto' } })])],
  [decl([act('a', { executor: { type: 'runtime', target: 'explode' } })])],
  [decl([act('a', { executor: { type: 'tool', target: 'read_fil' } })])],
  [decl([act('a', { executor: { type: 'tool', target: 'auto', capabilities: ['teleport'] } })])],
  [decl([act('a', { input: { path: 3 } })])],
  [decl([act('a', { executor: { type: 'tool', target: 'broken' }, input: {} })])],
  [decl([act('a', { input: [] as unknown as Record<string, unknown> })])],
  [decl([act('a', { executor: { type: 'agent', target: 'reviewer' } })])],
  [decl([act('a', { executor: { type: 'agent', target: 'auto', capabilities: ['cooking'] } })])],
  [decl([act('a', { executor: { type: 'agent', target: 'auto' } })]), { catalog: noAgents }],
  [decl([act('a'), act('b')]), { limits: { maxActions: 1 } }],
  [decl([act('a', { input: { path: 'x'.repeat(100) } })]), { limits: { maxArgsBytes: 50 } }],
  [decl([act('a', { dependsOn: ['b', 'c'] }), act('b'), act('c')]), { limits: { maxDependsPerAction: 1 } }],
  [decl([])],
  [decl([act('a')], { intent: 'respond' })],
  [decl([act('a'), act('b', { contextRefs: ['action:a.summary'] })])],
  [decl([act('b', { contextRefs: ['action:ghost.output'] })])],
  [decl([act('a', { dependsOn: ['b'] }), act('b')], { execution: { mode: 'ephemeral', strategy: 'sequential' } })],
];

function allIssues(): ProtocolIssue[] {
  const issues = parseCorpus.flatMap((produce) => produce());
  for (const [declaration, extra] of validationCorpus) {
    issues.push(...validateDeclaration(declaration, { catalog, ...extra }).issues);
  }
  return issues;
}

describe('joinSentences', () => {
  it.each([
    [['the id is taken', 'Use a_2.'], 'the id is taken. Use a_2.'],
    [['the id is taken.', 'Use a_2.'], 'the id is taken. Use a_2.'],
    [['is it "a"?', 'Use a_2'], 'is it "a"? Use a_2.'],
    [['cut here…', 'Send less.'], 'cut here… Send less.'],
    [['one  ', '', '  two.'], 'one. two.'],
  ])('%j → %s', (parts, joined) => {
    expect(joinSentences(...parts)).toBe(joined);
  });
});

describe('corrective lines for every issue code', () => {
  const issues = allIssues();

  it('the corpus covers every parse and validation code', () => {
    const expected = new Set<string>([
      ...Object.values(PARSE_CODES),
      ...Object.values(VALIDATION_CODES),
      'protocol_disabled',
      'invalid_catalog',
    ]);
    const seen = new Set(issues.map((i) => i.code));
    expect([...expected].filter((code) => !seen.has(code))).toEqual([]);
  });

  it('no corrective line has a doubled full stop (an ellipsis … is fine)', () => {
    const doubled = issues.map(correctiveLine).filter((line) => line.includes('..'));
    expect(doubled).toEqual([]);
  });

  it('a line is `- [code] at path: message. hint`, with the path only when there is one', () => {
    expect(correctiveLine({ code: 'x', path: '/calls/0', message: 'bad.', hint: 'Fix it.' })).toBe(
      '- [x] at /calls/0: bad. Fix it.',
    );
    expect(correctiveLine({ code: 'x', path: '', message: 'bad', hint: 'Fix it' })).toBe('- [x]: bad. Fix it.');
  });
});

describe('a payload that fails to parse is called cut off only when the finish reason says so', () => {
  const cut = '{"kind": "act", "calls": [{"id": "r1", "type": "tool"';

  it('without a finish reason: invalid_json, with a hint to close the JSON (not "cut off")', () => {
    const [issue] = parseToolCall(cut, options).errors;
    expect(issue?.code).toBe('invalid_json');
    expect(issue?.message).toContain('ends before every string, array and object is closed');
    expect(issue?.hint).not.toMatch(/cut off/i);
    expect(issue?.hint).toContain('close every string, array and object');
  });

  it.each(['stop', 'tool-calls', 'other'])('finish reason %s: invalid_json', (finishReason) => {
    expect(parseToolCall(cut, { ...options, finishReason }).errors[0]?.code).toBe('invalid_json');
  });

  it('finish reason length: truncated_output, telling the model it hit its output limit', () => {
    const [issue] = parseToolCall(cut, { ...options, finishReason: 'length' }).errors;
    expect(issue?.code).toBe('truncated_output');
    expect(issue?.hint).toContain('cut off');
  });

  it('finish reason length also names a balanced but broken payload truncated', () => {
    const [issue] = parseToolCall('{"kind": "act", calls: []}', { ...options, finishReason: 'length' }).errors;
    expect(issue?.code).toBe('truncated_output');
  });

  it('the DSL block and stringified calls follow the same rule', () => {
    const dsl = '```json agent-protocol\n{"type": "agent.protocol", "payload": {\n```\n';
    expect(parseAssistantText(dsl, options).errors[0]?.code).toBe('invalid_json');
    expect(parseAssistantText(dsl, { ...options, finishReason: 'length' }).errors[0]?.code).toBe('truncated_output');
    const calls = { kind: 'act', calls: '[{"id": "r1"' };
    expect(parseToolCall(calls, options).errors[0]?.code).toBe('invalid_json');
    expect(parseToolCall(calls, { ...options, finishReason: 'length' }).errors[0]?.code).toBe('truncated_output');
  });
});

describe('a history given as sets (ValidationHistoryIndex) validates exactly as the same history as lists', () => {
  it('every corpus declaration with a history gets the same issues either way', () => {
    const withHistory = validationCorpus.filter(([, options]) => options?.history !== undefined);
    expect(withHistory.length).toBeGreaterThan(0);
    const cases: [Declaration, Partial<ValidateDeclarationOptions>?][] = [
      ...withHistory,
      [
        decl([act('next', { dependsOn: ['done'] }), act('again', { dependsOn: ['open'] })]),
        { history: { completedActionIds: ['done'], usedActionIds: ['done', 'open'] } },
      ],
    ];
    for (const [declaration, options] of cases) {
      const lists = options?.history as { completedActionIds?: string[]; usedActionIds?: string[] };
      const completed = new Set(lists.completedActionIds ?? []);
      const index = { completed, used: new Set([...(lists.usedActionIds ?? []), ...completed]) };
      const asLists = validateDeclaration(declaration, { catalog, ...options });
      const asSets = validateDeclaration(declaration, { catalog, ...options, history: index });
      expect(asSets).toEqual(asLists);
    }
  });
});
