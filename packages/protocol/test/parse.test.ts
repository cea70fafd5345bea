import { describe, expect, it } from 'vitest';
import { type CatalogInput, type ParseOutcome, parseAssistantText, parseToolCall } from '../src/index.js';
import { readRepoJson, readRepoText } from './helpers.js';

const catalog = readRepoJson<CatalogInput>('examples/catalog.json');
const codes = (outcome: ParseOutcome) => outcome.errors.map((e) => e.code);
const repairCodes = (outcome: ParseOutcome) => outcome.repairs.map((r) => r.code);
const readCall = { id: 'r1', type: 'tool', name: 'read', args: { filePath: 'a.ts' } };

describe('tool carrier', () => {
  it('normalizes act with the carrier mapping table', () => {
    const outcome = parseToolCall(readRepoJson('examples/act.json'), { catalog });
    expect(outcome.ok).toBe(true);
    const d = outcome.declaration!;
    expect(d.intent).toBe('execute');
    expect(d.source).toEqual({ carrier: 'tool', form: 'carrier', recovered: false });
    expect(d.actions.map((a) => [a.id, a.executor.type, a.executor.target, a.dependsOn])).toEqual([
      ['find_manifests', 'tool', 'glob', []],
      ['read_package', 'tool', 'read', ['find_manifests']],
      ['review_package', 'agent', 'auto', ['read_package']],
    ]);
    expect(d.actions[0]!.title).toBe('Find manifests');
    expect(d.actions[0]!.resultPolicy.returnToModel).toBe('summary');
    expect(d.actions[2]!.resultPolicy.returnToModel).toBe('structured');
    expect(d.actions[2]!.prompt).toBe('Review package.json for risky scripts and unpinned dependencies.');
    expect(d.actions[1]!.input).toEqual({ filePath: 'package.json' });
  });

  it.each([
    ['answer', { kind: 'answer', message: 'Done.' }, 'respond'],
    ['done', { kind: 'done' }, 'stop'],
    ['done with message', { kind: 'done', message: 'Bye' }, 'stop'],
  ])('maps %s', (_name, input, intent) => {
    const outcome = parseToolCall(input, { catalog });
    expect(outcome.ok).toBe(true);
    expect(outcome.declaration!.intent).toBe(intent);
    expect(outcome.declaration!.actions).toEqual([]);
  });

  it('accepts the arguments as the JSON string a provider sends', () => {
    const outcome = parseToolCall(JSON.stringify({ kind: 'act', calls: [readCall] }), { catalog });
    expect(outcome.ok).toBe(true);
    expect(outcome.repairs).toEqual([]);
  });

  it('accepts a native AgentProtocolOutput call {name, arguments}', () => {
    const outcome = parseToolCall(
      { name: 'AgentProtocolOutput', arguments: JSON.stringify({ kind: 'answer', message: 'hi' }) },
      { catalog },
    );
    expect(outcome.ok).toBe(true);
    expect(outcome.recovered).toBe(false);
  });
});

describe('tool carrier: every executor type, semantic tool calls and context refs', () => {
  it('carries a semantic tool call: auto with capabilities, a prompt, context refs', () => {
    const call = {
      id: 'inspect',
      type: 'tool',
      name: 'auto',
      capabilities: ['filesystem', 'search'],
      prompt: 'Locate the toolbar components.',
      context: ['input:user.goal'],
    };
    const outcome = parseToolCall({ kind: 'act', calls: [call] }, { catalog });
    expect(outcome.errors).toEqual([]);
    const [action] = outcome.declaration!.actions;
    // Two tools match and there is a task: it stays `auto` for the tool worker.
    expect(action!.executor).toEqual({ type: 'tool', target: 'auto', capabilities: ['filesystem', 'search'] });
    expect(action!.prompt).toBe('Locate the toolbar components.');
    expect(action!.contextRefs).toEqual(['input:user.goal']);
  });

  it.each([
    ['human', { id: 'ask', type: 'human', name: 'ask_user', args: { question: 'Which branch?' } }],
    ['runtime', { id: 'more', type: 'runtime', name: 'expand_ref', args: { ref: 'artifact://abc' } }],
  ])('reaches %s executors', (type, call) => {
    const outcome = parseToolCall({ kind: 'act', calls: [call] }, { catalog });
    expect(outcome.errors).toEqual([]);
    expect(outcome.declaration!.actions[0]!.executor.type).toBe(type);
  });

  it('rejects md: refs and unknown ref kinds in a call context', () => {
    const bad = (ref: string) =>
      parseToolCall({ kind: 'act', calls: [{ ...readCall, context: [ref] }] }, { catalog }).errors.map((e) => e.path);
    expect(bad('md:notes')).toEqual(['/calls/0/context/0']);
    expect(bad('http://example.com')).toEqual(['/calls/0/context/0']);
  });

  it('checks action refs against dependencies and history', () => {
    const calls = [readCall, { ...readCall, id: 'r2', context: ['action:r1.summary'] }];
    expect(codes(parseToolCall({ kind: 'act', calls }, { catalog }))).toEqual(['reference_not_dependency']);
    const ok = parseToolCall({ kind: 'act', calls: [{ ...calls[1], depends: 'r1' }, readCall] }, { catalog });
    expect(ok.errors).toEqual([]);
  });
});

describe('repairs (each recorded)', () => {
  const cases: [string, unknown, string, (o: ParseOutcome) => void][] = [
    [
      'input wrapper',
      { input: JSON.stringify({ kind: 'act', calls: [readCall] }) },
      'input_wrapper_unwrapped',
      (o) => expect(o.declaration!.actions[0]!.id).toBe('r1'),
    ],
    [
      'calls as a JSON string',
      { kind: 'act', calls: JSON.stringify([readCall]) },
      'calls_string_parsed',
      (o) => expect(o.declaration!.actions).toHaveLength(1),
    ],
    [
      '"none" in a depends array',
      { kind: 'act', calls: [{ ...readCall, depends: ['none'] }] },
      'depends_none_removed',
      (o) => expect(o.declaration!.actions[0]!.dependsOn).toEqual([]),
    ],
    [
      'depends: "none"',
      { kind: 'act', calls: [{ ...readCall, depends: 'None' }] },
      'depends_none_removed',
      (o) => expect(o.declaration!.actions[0]!.dependsOn).toEqual([]),
    ],
    [
      'whitespace-only call items',
      { kind: 'act', calls: ['  ', readCall, '\n'] },
      'blank_call_removed',
      (o) => expect(o.declaration!.actions).toHaveLength(1),
    ],
    [
      'raw newlines in a stringified payload',
      '{"kind": "answer", "message": "line one\nline\ttwo"}',
      'control_characters_escaped',
      (o) => expect(o.declaration!.message).toBe('line one\nline\ttwo'),
    ],
    [
      '"answer" instead of "message"',
      { kind: 'answer', answer: 'The answer.' },
      'message_alias_renamed',
      (o) => expect(o.declaration!.message).toBe('The answer.'),
    ],
    [
      '"text" instead of "message" on done',
      { kind: 'done', text: 'Finished.' },
      'message_alias_renamed',
      (o) => expect(o.declaration!.message).toBe('Finished.'),
    ],
  ];
  it.each(cases)('%s', (_name, input, code, check) => {
    const outcome = parseToolCall(input, { catalog });
    expect(outcome.errors).toEqual([]);
    expect(outcome.ok).toBe(true);
    expect(repairCodes(outcome)).toContain(code);
    check(outcome);
  });

  it('does not repair an ambiguous message alias (both answer and text)', () => {
    const outcome = parseToolCall({ kind: 'answer', answer: 'a', text: 'b' }, { catalog });
    expect(outcome.ok).toBe(false);
    expect(outcome.repairs).toEqual([]);
  });

  it('records several repairs at once', () => {
    const outcome = parseToolCall(
      { input: JSON.stringify({ kind: 'act', calls: JSON.stringify([{ ...readCall, depends: ['none'] }]) }) },
      { catalog },
    );
    expect(outcome.ok).toBe(true);
    expect(repairCodes(outcome)).toEqual(['input_wrapper_unwrapped', 'calls_string_parsed', 'depends_none_removed']);
  });
});

describe('carrier errors', () => {
  const cases: [string, unknown, string][] = [
    ['act without calls', { kind: 'act' }, 'calls_required'],
    ['act with empty calls', { kind: 'act', calls: [] }, 'calls_required'],
    ['answer with calls', { kind: 'answer', message: 'x', calls: [readCall] }, 'calls_not_allowed'],
    ['done with calls', { kind: 'done', calls: [readCall] }, 'calls_not_allowed'],
    ['answer without message', { kind: 'answer' }, 'message_required'],
    ['unknown kind', { kind: 'think' }, 'invalid_schema'],
    ['unknown call field', { kind: 'act', calls: [{ ...readCall, reason: 'x' }] }, 'invalid_schema'],
    ['bad call type', { kind: 'act', calls: [{ ...readCall, type: 'function' }] }, 'invalid_schema'],
    ['bad result policy', { kind: 'act', calls: [{ ...readCall, result: 'everything' }] }, 'invalid_schema'],
    ['invalid call id', { kind: 'act', calls: [{ ...readCall, id: 'has space' }] }, 'invalid_schema'],
    ['invalid JSON', '{"kind": "act", calls: []}', 'invalid_json'],
    // Unbalanced JSON is not called cut off without the finish reason `length` (see corrective.test.ts).
    ['unbalanced JSON', '{"kind": "act", "calls": [{"id": "r1", "type": "tool"', 'invalid_json'],
    ['calls string that is not JSON', { kind: 'act', calls: '[{id: 1}]' }, 'invalid_json'],
    ['not an object', 42, 'invalid_schema'],
    ['null', null, 'invalid_schema'],
    ['unknown tool', { kind: 'act', calls: [{ ...readCall, name: 'rm' }] }, 'unknown_tool'],
    ['bad tool args', { kind: 'act', calls: [{ ...readCall, args: { path: 'a.ts' } }] }, 'invalid_tool_args'],
    [
      'dependency cycle',
      {
        kind: 'act',
        calls: [
          { ...readCall, id: 'a', depends: 'b' },
          { ...readCall, id: 'b', depends: 'a' },
        ],
      },
      'dependency_cycle',
    ],
    [
      'two AgentProtocolOutput calls',
      [
        { name: 'AgentProtocolOutput', arguments: { kind: 'done' } },
        { name: 'AgentProtocolOutput', arguments: { kind: 'done' } },
      ],
      'multiple_declarations',
    ],
    [
      'AgentProtocolOutput mixed with a direct call',
      [
        { name: 'AgentProtocolOutput', arguments: { kind: 'done' } },
        { name: 'read', arguments: { filePath: 'a' } },
      ],
      'mixed_calls',
    ],
    ['no calls at all', [], 'empty_output'],
  ];
  it.each(cases)('%s', (_name, input, code) => {
    const outcome = parseToolCall(input, { catalog });
    expect(outcome.ok).toBe(false);
    expect(codes(outcome)).toContain(code);
    for (const error of outcome.errors) {
      expect(error.hint.length).toBeGreaterThan(10);
      expect(typeof error.path).toBe('string');
    }
  });

  it('points schema errors at the offending field', () => {
    const outcome = parseToolCall(
      { kind: 'act', calls: [readCall, { ...readCall, id: 'r2', type: 'x' }] },
      { catalog },
    );
    expect(outcome.errors[0]!.path).toBe('/calls/1/type');
  });

  it('reports every fault at once', () => {
    const outcome = parseToolCall(
      {
        kind: 'act',
        calls: [
          { ...readCall, id: 'a', name: 'nope' },
          { ...readCall, id: 'b', args: {} },
          { ...readCall, id: 'c', depends: 'zzz' },
        ],
      },
      { catalog },
    );
    expect(codes(outcome).sort()).toEqual(['invalid_tool_args', 'unknown_dependency', 'unknown_tool']);
  });

  it('rejects ids already used in the thread and accepts dependencies on completed ones', () => {
    const history = { completedActionIds: ['r1'], usedActionIds: ['r1'] };
    expect(codes(parseToolCall({ kind: 'act', calls: [readCall] }, { catalog, history }))).toContain(
      'action_id_reused',
    );
    const ok = parseToolCall({ kind: 'act', calls: [{ ...readCall, id: 'r2', depends: 'r1' }] }, { catalog, history });
    expect(ok.ok).toBe(true);
  });
});

describe('direct-request recovery (tool channel)', () => {
  it('recovers a native call to a catalog tool as an act with one call, flagged recovered', () => {
    const outcome = parseToolCall({ name: 'read', arguments: '{"filePath": "src/a.ts"}' }, { catalog });
    expect(outcome.ok).toBe(true);
    expect(outcome.recovered).toBe(true);
    const d = outcome.declaration!;
    expect(d.intent).toBe('execute');
    expect(d.source).toEqual({ carrier: 'tool', form: 'direct_tool_call', recovered: true });
    expect(d.actions).toHaveLength(1);
    expect(d.actions[0]!.executor).toEqual({ type: 'tool', target: 'read', capabilities: [] });
    expect(d.actions[0]!.input).toEqual({ filePath: 'src/a.ts' });
  });

  it('recovers several native calls, with ids unique against the thread', () => {
    const outcome = parseToolCall(
      [
        { name: 'read', arguments: { filePath: 'a' } },
        { type: 'function', function: { name: 'read', arguments: '{"filePath":"b"}' } },
      ],
      { catalog, history: { usedActionIds: ['read_1'] } },
    );
    expect(outcome.ok).toBe(true);
    expect(outcome.declaration!.actions.map((a) => a.id)).toEqual(['read_2', 'read_3']);
  });

  it('recovers a native call to a catalog agent as a delegation, its prompt from the arguments', () => {
    const outcome = parseToolCall(
      [
        { name: 'code-reviewer', arguments: { prompt: 'Review src/a.ts' } },
        { name: 'read', arguments: { filePath: 'a' } },
      ],
      { catalog },
    );
    expect(outcome.errors).toEqual([]);
    expect(outcome.recovered).toBe(true);
    const [review, read] = outcome.declaration!.actions;
    expect(review!.executor).toEqual({ type: 'agent', target: 'code-reviewer', capabilities: [] });
    expect(review!.prompt).toBe('Review src/a.ts');
    expect(read!.executor.type).toBe('tool');
  });

  it('fails closed when one of several calls names neither a tool nor an agent', () => {
    const outcome = parseToolCall(
      [
        { name: 'code-reviewer', arguments: { prompt: 'x' } },
        { name: 'deployer', arguments: {} },
      ],
      { catalog },
    );
    expect(codes(outcome)).toEqual(['unknown_direct_call']);
    expect(outcome.declaration).toBeUndefined();
  });

  it('fails closed for a tool outside the catalog', () => {
    const outcome = parseToolCall({ name: 'shell', arguments: { cmd: 'rm -rf /' } }, { catalog });
    expect(outcome.ok).toBe(false);
    expect(codes(outcome)).toEqual(['unknown_direct_call']);
    expect(outcome.errors[0]!.hint).toContain('AgentProtocolOutput');
    expect(outcome.declaration).toBeUndefined();
  });

  it('fails closed when the arguments do not validate', () => {
    const outcome = parseToolCall({ name: 'read', arguments: { file: 'x' } }, { catalog });
    expect(outcome.ok).toBe(false);
    expect(codes(outcome)).toContain('recovery_rejected');
    expect(codes(outcome)).toContain('invalid_tool_args');
  });

  it('fails closed when the arguments do not parse', () => {
    const outcome = parseToolCall({ name: 'read', arguments: '{"filePath": ' }, { catalog });
    expect(outcome.ok).toBe(false);
    expect(outcome.recovered).toBe(true);
  });

  it('never executes tool calls of an agent not enabled for the protocol', () => {
    const outcome = parseToolCall({ kind: 'act', calls: [readCall] }, { catalog, protocolEnabled: false });
    expect(outcome.ok).toBe(false);
    expect(codes(outcome)).toEqual(['protocol_disabled']);
  });
});

const block = (json: unknown, after = '') =>
  `Intro.\n\n\`\`\`json agent-protocol\n${JSON.stringify(json, null, 2)}\n\`\`\`\n${after}`;
const envelope = (actions: unknown[], extra: Record<string, unknown> = {}) => ({
  type: 'agent.protocol',
  version: '1',
  intent: 'execute',
  payload: { type: 'action_graph', actions },
  ...extra,
});
const dslRead = {
  type: 'action',
  id: 'inspect',
  executor: { type: 'tool', target: 'read' },
  input: { filePath: 'a.ts' },
};

describe('full DSL in text', () => {
  it('parses the bundled example with md: references resolved before anything runs', () => {
    const outcome = parseAssistantText(readRepoText('examples/dsl-message.md'), { catalog });
    expect(outcome.errors).toEqual([]);
    const d = outcome.declaration!;
    expect(d.intent).toBe('execute');
    expect(d.persist).toBe(true);
    expect(d.execution).toEqual({ mode: 'durable', strategy: 'dag' });
    expect(d.title).toBe('Package manifest review');
    expect(d.userVisible).toBe('I will read the manifest, then have the scripts and dependencies reviewed.');
    const review = d.actions[1]!;
    expect(review.prompt).toMatch(/^Check every npm script/);
    expect(review.promptRef).toBe('md:review_scripts.prompt');
    expect(review.context).toEqual(['This is a TypeScript monorepo; the lockfile is committed.']);
    expect(review.contextRefs).toEqual(['action:inspect_manifest.summary']);
    expect(review.failurePolicy).toEqual({ onFailure: 'ask_model', maxAttempts: 1 });
    expect(review.resultPolicy).toMatchObject({ returnToModel: 'structured', maxTokens: 2000, storeFull: true });
    expect(d.source.form).toBe('dsl');
    expect(Object.keys(d.source.sections ?? {})).toEqual(['shared.context', 'review_scripts.prompt', 'user.visible']);
  });

  it('normalizes heading text for md: ids (case, spacing, backticks)', () => {
    const text = block(
      envelope([{ ...dslRead, prompt_ref: 'md:shared_notes' }]),
      '\n## `Shared   Notes`\n\nHello notes.\n### sub\nmore\n',
    );
    const outcome = parseAssistantText(text, { catalog });
    expect(outcome.errors).toEqual([]);
    expect(outcome.declaration!.actions[0]!.prompt).toBe('Hello notes.\n### sub\nmore');
  });

  it('expand_ref becomes runtime actions', () => {
    const outcome = parseAssistantText(
      block({
        type: 'agent.protocol',
        version: '1',
        intent: 'expand_ref',
        payload: {
          type: 'expand_ref',
          refs: [{ ref: 'runtime://run_1/actions/a/output', range: { context_lines: 5 } }],
        },
      }),
      { catalog },
    );
    expect(outcome.errors).toEqual([]);
    expect(outcome.declaration!.actions[0]).toMatchObject({
      id: 'expand_1',
      executor: { type: 'runtime', target: 'expand_ref' },
      input: { ref: 'runtime://run_1/actions/a/output', range: { context_lines: 5 } },
    });
  });

  it('decision payloads become a decide declaration', () => {
    const outcome = parseAssistantText(
      block({
        type: 'agent.protocol',
        version: '1',
        intent: 'decide',
        payload: { type: 'decision', decision: 'retry', run_id: 'run_1', action_ids: ['a'] },
      }),
      { catalog },
    );
    expect(outcome.ok).toBe(true);
    expect(outcome.declaration!.decision).toEqual({ decision: 'retry', runId: 'run_1', actionIds: ['a'] });
  });

  const errorCases: [string, string, string][] = [
    ['no block', 'Just some prose.', 'missing_block'],
    ['untagged agent.protocol block', `\`\`\`json\n${JSON.stringify(envelope([dslRead]))}\n\`\`\``, 'missing_block'],
    ['two blocks', block(envelope([dslRead])) + block(envelope([dslRead])), 'multiple_blocks'],
    ['invalid JSON', '```json agent-protocol\n{"type": "agent.protocol",}\n```', 'invalid_json'],
    ['cut-off block', '```json agent-protocol\n{"type": "agent.protocol", "payload": {', 'unterminated_block'],
    ['wrong version', block(envelope([dslRead], { version: '2' })), 'invalid_schema'],
    ['executor type auto', block(envelope([{ ...dslRead, executor: { type: 'auto' } }])), 'invalid_schema'],
    ['unknown envelope field', block(envelope([dslRead], { mood: 'happy' })), 'invalid_schema'],
    ['unresolved md: prompt', block(envelope([{ ...dslRead, prompt_ref: 'md:missing' }])), 'unresolved_reference'],
    ['unresolved md: context', block(envelope([{ ...dslRead, context_refs: ['md:nope'] }])), 'unresolved_reference'],
    ['invalid reference kind', block(envelope([{ ...dslRead, context_refs: ['http://x'] }])), 'invalid_reference'],
    [
      'action: reference without dependency',
      block(envelope([dslRead, { ...dslRead, id: 'b', context_refs: ['action:inspect.summary'] }])),
      'reference_not_dependency',
    ],
    [
      'action: reference to an unknown action',
      block(envelope([{ ...dslRead, context_refs: ['action:ghost.output'] }])),
      'unresolved_reference',
    ],
    [
      'ambiguous md: section',
      block(envelope([{ ...dslRead, prompt_ref: 'md:p' }]), '\n## p\none\n## p\ntwo\n'),
      'duplicate_section',
    ],
    [
      'intent/payload mismatch',
      block({ type: 'agent.protocol', version: '1', intent: 'decide', payload: { type: 'action_graph', actions: [] } }),
      'intent_payload_mismatch',
    ],
    ['empty text', '   ', 'empty_output'],
  ];
  it.each(errorCases)('%s', (_name, text, code) => {
    const outcome = parseAssistantText(text, { catalog });
    expect(outcome.ok).toBe(false);
    expect(codes(outcome)).toContain(code);
  });

  it('treats protocol text from an agent not enabled for the protocol as plain content', () => {
    const text = block(envelope([dslRead]));
    const outcome = parseAssistantText(text, { catalog, protocolEnabled: false });
    expect(outcome.ok).toBe(true);
    expect(outcome.declaration!.intent).toBe('respond');
    expect(outcome.declaration!.actions).toEqual([]);
    expect(outcome.declaration!.message).toBe(text);
    expect(outcome.declaration!.source.form).toBe('plain_text');
  });

  it('allowPlainText makes block-less prose the answer', () => {
    const outcome = parseAssistantText('All good.', { catalog, allowPlainText: true });
    expect(outcome.ok).toBe(true);
    expect(outcome.declaration!.message).toBe('All good.');
  });
});

describe('direct-request recovery (text)', () => {
  const recoverable: [string, string][] = [
    ['fenced JSON call', '```json\n{"name": "read", "arguments": {"filePath": "a.ts"}}\n```'],
    [
      'fenced JSON call with args key',
      'Reading:\n```\n{"tool": "x", "name": "read", "args": {"filePath": "a.ts"}}\n```',
    ],
    [
      'XML-style invoke tags',
      '<function_calls>\n<invoke name="read">\n<parameter name="filePath">a.ts</parameter>\n<parameter name="limit">20</parameter>\n</invoke>\n</function_calls>',
    ],
    ['tool_call tags', '<tool_call>{"name": "read", "arguments": {"filePath": "a.ts"}}</tool_call>'],
    ['[TOOL_CALL] markers', '[TOOL_CALL]{"name": "read", "arguments": {"filePath": "a.ts"}}[/TOOL_CALL]'],
  ];
  it.each(recoverable)('%s', (_name, text) => {
    const outcome = parseAssistantText(text, { catalog });
    expect(outcome.errors).toEqual([]);
    expect(outcome.ok).toBe(true);
    expect(outcome.recovered).toBe(true);
    expect(outcome.declaration!.source.form).toBe('text_tool_call');
    expect(outcome.declaration!.actions[0]!.executor.target).toBe('read');
    expect(outcome.declaration!.actions[0]!.input).toMatchObject({ filePath: 'a.ts' });
  });

  it('keeps JSON parameter values typed in XML invoke tags', () => {
    const outcome = parseAssistantText(
      '<invoke name="read"><parameter name="filePath">a.ts</parameter><parameter name="limit">20</parameter></invoke>',
      { catalog },
    );
    expect(outcome.declaration!.actions[0]!.input).toEqual({ filePath: 'a.ts', limit: 20 });
  });

  it('recovers an AgentProtocolOutput call written as text as the carrier', () => {
    const text = `<tool_call>${JSON.stringify({ name: 'AgentProtocolOutput', arguments: { kind: 'act', calls: [readCall] } })}</tool_call>`;
    const outcome = parseAssistantText(text, { catalog });
    expect(outcome.ok).toBe(true);
    expect(outcome.recovered).toBe(true);
    expect(outcome.declaration!.actions[0]!.id).toBe('r1');
  });

  const failClosed: [string, string, string][] = [
    ['unknown tool', '```json\n{"name": "shell", "arguments": {"cmd": "ls"}}\n```', 'unknown_direct_call'],
    ['arguments not valid', '<tool_call>{"name": "read", "arguments": {"file": 1}}</tool_call>', 'recovery_rejected'],
    ['unreadable tool_call body', '<tool_call>{"name": "read", </tool_call>', 'unrecoverable_tool_call'],
    ['unreadable marker body', '[TOOL_CALL] read(a.ts) [/TOOL_CALL]', 'unrecoverable_tool_call'],
    [
      'two AgentProtocolOutput text calls',
      '<tool_call>{"name":"AgentProtocolOutput","arguments":{"kind":"done"}}</tool_call><tool_call>{"name":"AgentProtocolOutput","arguments":{"kind":"done"}}</tool_call>',
      'multiple_declarations',
    ],
  ];
  it.each(failClosed)('fails closed: %s', (_name, text, code) => {
    const outcome = parseAssistantText(text, { catalog });
    expect(outcome.ok).toBe(false);
    expect(outcome.declaration).toBeUndefined();
    expect(codes(outcome)).toContain(code);
  });

  it('ordinary JSON in a fence is content, not a call', () => {
    const outcome = parseAssistantText('Config:\n```json\n{"port": 8080}\n```', { catalog });
    expect(codes(outcome)).toEqual(['missing_block']);
  });
});
