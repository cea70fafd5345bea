import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Catalog } from '../src/catalog.js';
import {
  type Action,
  DEFAULT_FAILURE_POLICY,
  DEFAULT_RESULT_POLICY,
  type Declaration,
  type Executor,
} from '../src/declaration.js';
import { ProtocolIssueSchema } from '../src/errors.js';
import {
  DEFAULT_VALIDATION_LIMITS,
  HUMAN_OPERATIONS,
  RUNTIME_OPERATIONS,
  VALIDATION_CODES,
  type ValidateDeclarationOptions,
  type ValidationCode,
  validateDeclaration,
} from '../src/validate.js';

// ---- builders

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
      inputSchema: objectSchema({ path: { type: 'string' }, limit: { type: 'integer', minimum: 1 } }, ['path']),
      capabilities: ['filesystem', 'read'],
    },
    {
      name: 'write_file',
      description: 'Write a file',
      inputSchema: objectSchema({ path: { type: 'string' }, content: { type: 'string' } }, ['path', 'content']),
      capabilities: ['filesystem', 'write'],
    },
    {
      name: 'search',
      description: 'Web search',
      inputSchema: objectSchema({ query: { type: 'string', minLength: 1 }, url: { type: 'string', format: 'uri' } }, [
        'query',
      ]),
      capabilities: ['search', 'read'],
    },
    { name: 'broken', description: 'Catalog fault', inputSchema: { type: 'nonsense' }, capabilities: [] },
  ],
  agents: [
    { name: 'code-reviewer', description: '', capabilities: ['code_review', 'testing'] },
    { name: 'frontend-dev', description: '', capabilities: ['frontend', 'code_review'] },
  ],
};

function run(declaration: Declaration, options: Partial<ValidateDeclarationOptions> = {}) {
  return validateDeclaration(declaration, { catalog, ...options });
}

function codes(declaration: Declaration, options: Partial<ValidateDeclarationOptions> = {}): ValidationCode[] {
  return run(declaration, options).issues.map((i) => i.code as ValidationCode);
}

// ---- one bad and one good case per code

type Case = { declaration: Declaration; options?: Partial<ValidateDeclarationOptions>; path?: string };
type Row = { code: ValidationCode; bad: Case[]; good: Case[] };

const tool = (name: string, input: Record<string, unknown>, caps: string[] = []): ActionOverrides => ({
  executor: { type: 'tool', target: name, capabilities: caps },
  input,
});

const rows: Row[] = [
  {
    code: 'invalid_action_id',
    bad: [
      { declaration: decl([act('has space')]), path: '/actions/0/id' },
      { declaration: decl([act('-leading')]), path: '/actions/0/id' },
      { declaration: decl([act('x'.repeat(129))]), path: '/actions/0/id' },
      { declaration: decl([act('ok'), act('')]), path: '/actions/1/id' },
      { declaration: decl([act('abc')]), options: { limits: { maxIdLength: 2 } } },
    ],
    good: [{ declaration: decl([act('a.b:c-d_1'), act('_x'), act('9'), act('x'.repeat(128))]) }],
  },
  {
    code: 'duplicate_action_id',
    bad: [{ declaration: decl([act('a'), act('a')]), path: '/actions/1/id' }],
    good: [{ declaration: decl([act('a'), act('b')]) }],
  },
  {
    code: 'action_id_reused',
    bad: [
      { declaration: decl([act('a')]), options: { history: { usedActionIds: ['a'] } }, path: '/actions/0/id' },
      { declaration: decl([act('a')]), options: { history: { completedActionIds: ['a'] } } },
    ],
    good: [
      { declaration: decl([act('a')]), options: { history: { usedActionIds: ['b'], completedActionIds: ['c'] } } },
    ],
  },
  {
    code: 'unknown_dependency',
    bad: [
      { declaration: decl([act('a', { dependsOn: ['zzz'] })]), path: '/actions/0/dependsOn/0' },
      { declaration: decl([act('a', { dependsOn: ['b', 'ghost'] }), act('b')]), path: '/actions/0/dependsOn/1' },
    ],
    good: [
      { declaration: decl([act('a', { dependsOn: ['b'] }), act('b')]) },
      { declaration: decl([act('a', { dependsOn: ['old'] })]), options: { history: { completedActionIds: ['old'] } } },
    ],
  },
  {
    code: 'self_dependency',
    bad: [{ declaration: decl([act('a', { dependsOn: ['a'] })]), path: '/actions/0/dependsOn/0' }],
    good: [{ declaration: decl([act('a', { dependsOn: ['b'] }), act('b')]) }],
  },
  {
    code: 'dependency_not_completed',
    bad: [
      {
        declaration: decl([act('a', { dependsOn: ['old'] })]),
        options: { history: { usedActionIds: ['old'] } },
        path: '/actions/0/dependsOn/0',
      },
    ],
    good: [
      {
        declaration: decl([act('a', { dependsOn: ['old'] })]),
        options: { history: { usedActionIds: ['old'], completedActionIds: ['old'] } },
      },
    ],
  },
  {
    code: 'dependency_cycle',
    bad: [
      {
        declaration: decl([act('a', { dependsOn: ['b'] }), act('b', { dependsOn: ['a'] })]),
        path: '/actions/0/dependsOn/0',
      },
    ],
    good: [{ declaration: decl([act('a', { dependsOn: ['b'] }), act('b'), act('c', { dependsOn: ['a', 'b'] })]) }],
  },
  {
    code: 'dependency_against_order',
    bad: [
      {
        // Sequential: b runs after a, so a cannot wait for b.
        declaration: decl([act('a', { dependsOn: ['b'] }), act('b')], {
          execution: { mode: 'ephemeral', strategy: 'sequential' },
        }),
        path: '/actions/0/dependsOn/0',
      },
      {
        // A wait barrier between them: c runs after w, w after a.
        declaration: decl([
          act('a', { dependsOn: ['c'] }),
          act('w', { executor: { type: 'runtime', target: 'wait' }, input: {} }),
          act('c'),
        ]),
        path: '/actions/0/dependsOn/0',
      },
    ],
    good: [
      { declaration: decl([act('a', { dependsOn: ['b'] }), act('b')]) },
      {
        declaration: decl([act('a'), act('b', { dependsOn: ['a'] })], {
          execution: { mode: 'ephemeral', strategy: 'sequential' },
        }),
      },
      {
        // A wait that joins its dependencies is no barrier.
        declaration: decl([
          act('a', { dependsOn: ['c'] }),
          act('w', { executor: { type: 'runtime', target: 'wait' }, input: {}, dependsOn: ['a'] }),
          act('c'),
        ]),
      },
    ],
  },
  {
    code: 'dependency_chain_too_long',
    bad: [
      {
        declaration: decl([act('a'), act('b', { dependsOn: ['a'] }), act('c', { dependsOn: ['b'] })]),
        options: { limits: { maxDepth: 2 } },
      },
    ],
    good: [
      {
        declaration: decl([act('a'), act('b', { dependsOn: ['a'] }), act('c', { dependsOn: ['a'] })]),
        options: { limits: { maxDepth: 2 } },
      },
    ],
  },
  {
    code: 'executor_type_auto',
    bad: [
      {
        declaration: decl([act('a', { executor: { type: 'auto' as Executor['type'], target: 'auto' } })]),
        path: '/actions/0/executor/type',
      },
    ],
    good: [{ declaration: decl([act('a', { executor: { type: 'tool', target: 'read_file' } })]) }],
  },
  {
    code: 'unknown_executor',
    bad: [
      {
        declaration: decl([act('a', { executor: { type: 'runtime', target: 'explode' } })]),
        path: '/actions/0/executor/target',
      },
      { declaration: decl([act('a', { executor: { type: 'runtime', target: 'auto' } })]) },
      { declaration: decl([act('a', { executor: { type: 'human', target: 'sing' } })]) },
      { declaration: decl([act('a', { executor: { type: 'pipeline', target: 'lint' } })]) },
      {
        declaration: decl([act('a', { executor: { type: 'service', target: 'crm' } })]),
        options: { executors: { service: ['billing'] } },
      },
      {
        declaration: decl([act('a', { executor: { type: 'robot' as Executor['type'] } })]),
        path: '/actions/0/executor/type',
      },
      { declaration: decl([{ ...act('a'), executor: undefined as unknown as Executor }]), path: '/actions/0/executor' },
    ],
    good: [
      {
        declaration: decl(
          RUNTIME_OPERATIONS.map((op, i) => act(`r${i}`, { executor: { type: 'runtime', target: op }, input: {} })),
        ),
      },
      {
        declaration: decl(
          [...HUMAN_OPERATIONS, 'auto'].map((op, i) => act(`h${i}`, { executor: { type: 'human', target: op } })),
        ),
      },
      { declaration: decl([act('a', { operation: 'summarize', executor: { type: 'runtime', target: 'auto' } })]) },
      {
        declaration: decl([
          act('a', { executor: { type: 'pipeline', target: 'lint' } }),
          act('b', { executor: { type: 'service', target: 'crm' } }),
        ]),
        options: { executors: { pipeline: ['lint'], service: ['crm'] } },
      },
    ],
  },
  {
    code: 'unknown_tool',
    bad: [{ declaration: decl([act('a', tool('read_fil', { path: 'x' }))]), path: '/actions/0/executor/target' }],
    good: [{ declaration: decl([act('a', tool('read_file', { path: 'x' }))]) }],
  },
  {
    code: 'tool_target_unresolved',
    bad: [
      { declaration: decl([act('a', tool('auto', { path: 'x' }, ['read']))]), path: '/actions/0/executor/target' },
      { declaration: decl([act('a', tool('auto', { path: 'x' }, ['teleport']))]) },
      { declaration: decl([act('a', tool('auto', { path: 'x' }))]) },
    ],
    good: [
      { declaration: decl([act('a', tool('auto', { path: 'x' }, ['filesystem', 'read']))]) },
      // A task in words for several tools is a semantic action: the tool worker does it.
      { declaration: decl([act('a', { ...tool('auto', {}, ['read']), prompt: 'Find the config files' })]) },
      {
        declaration: decl([act('a', { ...tool('auto', {}, ['read']), promptRef: 'action:earlier.summary' })]),
        options: { history: { completedActionIds: ['earlier'] } },
      },
    ],
  },
  {
    code: 'invalid_tool_args',
    bad: [
      { declaration: decl([act('a', tool('read_file', {}))]), path: '/actions/0/input' },
      { declaration: decl([act('a', tool('read_file', { path: 3 }))]), path: '/actions/0/input/path' },
      { declaration: decl([act('a', tool('read_file', { path: 'x', extra: true }))]) },
      { declaration: decl([act('a', tool('search', { query: 'q', url: 'not a uri' }))]), path: '/actions/0/input/url' },
    ],
    good: [
      { declaration: decl([act('a', tool('read_file', { path: 'x', limit: 3 }))]) },
      // Partial input with a task: the named tool's worker completes the call.
      { declaration: decl([act('a', { ...tool('read_file', { limit: 3 }), prompt: 'Read the main config' })]) },
      { declaration: decl([act('a', tool('search', { query: 'q', url: 'https://example.com/' }))]) },
    ],
  },
  {
    code: 'reference_not_dependency',
    bad: [
      {
        declaration: decl([act('a'), act('b', { contextRefs: ['action:a.summary'] })]),
        path: '/actions/1/contextRefs/0',
      },
      { declaration: decl([act('a'), act('b', { promptRef: 'action:a.output' })]), path: '/actions/1/promptRef' },
    ],
    good: [{ declaration: decl([act('a'), act('b', { dependsOn: ['a'], contextRefs: ['action:a.summary'] })]) }],
  },
  {
    code: 'unresolved_reference',
    bad: [
      { declaration: decl([act('b', { contextRefs: ['action:ghost.output'] })]), path: '/actions/0/contextRefs/0' },
      // Used earlier but not completed: there is no result to read.
      {
        declaration: decl([act('b', { contextRefs: ['action:old.summary'] })]),
        options: { history: { usedActionIds: ['old'] } },
      },
    ],
    good: [
      {
        declaration: decl([act('b', { contextRefs: ['action:old.summary', 'input:user.goal', 'artifact:x'] })]),
        options: { history: { completedActionIds: ['old'] } },
      },
    ],
  },
  {
    code: 'invalid_tool_schema',
    bad: [{ declaration: decl([act('a', tool('broken', {}))]), path: '/actions/0/executor/target' }],
    good: [{ declaration: decl([act('a', tool('read_file', { path: 'x' }))]) }],
  },
  {
    code: 'invalid_input',
    bad: [
      { declaration: decl([act('a', { input: [] as unknown as Record<string, unknown> })]), path: '/actions/0/input' },
      { declaration: decl([act('a', { input: { n: 1n } })]), path: '/actions/0/input' },
    ],
    good: [{ declaration: decl([act('a', { input: { path: 'x' } })]) }],
  },
  {
    code: 'unknown_agent',
    bad: [
      {
        declaration: decl([act('a', { executor: { type: 'agent', target: 'reviewer' } })]),
        path: '/actions/0/executor/target',
      },
      {
        declaration: decl([act('a', { executor: { type: 'agent', target: 'code-reviewer' } })]),
        options: { catalog: { tools: catalog.tools, agents: [] } },
      },
    ],
    good: [{ declaration: decl([act('a', { executor: { type: 'agent', target: 'code-reviewer' } })]) }],
  },
  {
    code: 'no_agent_for_capabilities',
    bad: [
      {
        declaration: decl([act('a', { executor: { type: 'agent', target: 'auto', capabilities: ['cooking'] } })]),
        path: '/actions/0/executor/capabilities',
      },
      {
        declaration: decl([
          act('a', { executor: { type: 'agent', target: 'auto', capabilities: ['testing', 'frontend'] } }),
        ]),
      },
    ],
    good: [
      { declaration: decl([act('a', { executor: { type: 'agent', target: 'auto', capabilities: ['code_review'] } })]) },
      { declaration: decl([act('a', { executor: { type: 'agent', target: 'auto', capabilities: [] } })]) },
    ],
  },
  {
    code: 'no_agents_available',
    bad: [
      {
        declaration: decl([act('a', { executor: { type: 'agent', target: 'auto', capabilities: ['code_review'] } })]),
        options: { catalog: { tools: catalog.tools, agents: [] } },
        path: '/actions/0/executor/target',
      },
    ],
    good: [
      { declaration: decl([act('a', { executor: { type: 'agent', target: 'auto', capabilities: ['code_review'] } })]) },
    ],
  },
  {
    code: 'too_many_actions',
    bad: [{ declaration: decl(Array.from({ length: 33 }, (_, i) => act(`a${i}`))), path: '/actions' }],
    good: [{ declaration: decl(Array.from({ length: 32 }, (_, i) => act(`a${i}`))) }],
  },
  {
    code: 'args_too_large',
    bad: [
      // 40k characters but 80k UTF-8 bytes: the limit is in bytes, not characters.
      { declaration: decl([act('a', { input: { path: 'é'.repeat(40_000) } })]), path: '/actions/0/input' },
      { declaration: decl([act('a', { input: { path: 'xxxx' } })]), options: { limits: { maxArgsBytes: 10 } } },
    ],
    good: [
      { declaration: decl([act('a', { input: { path: 'x'.repeat(60_000) } })]) },
      { declaration: decl([act('a', { input: { path: 'xx' } })]), options: { limits: { maxArgsBytes: 13 } } },
    ],
  },
  {
    code: 'too_many_dependencies',
    bad: [
      {
        declaration: decl([act('a', { dependsOn: ['b', 'c', 'd'] }), act('b'), act('c'), act('d')]),
        options: { limits: { maxDependsPerAction: 2 } },
        path: '/actions/0/dependsOn',
      },
    ],
    good: [
      {
        declaration: decl([act('a', { dependsOn: ['b', 'c'] }), act('b'), act('c')]),
        options: { limits: { maxDependsPerAction: 2 } },
      },
    ],
  },
  {
    code: 'empty_action_graph',
    bad: [
      { declaration: decl([]), path: '/actions' },
      { declaration: decl([], { intent: 'plan' }) },
      { declaration: decl([], { intent: 'revise' }) },
    ],
    good: [
      { declaration: decl([act('a')]) },
      { declaration: decl([], { intent: 'respond', message: 'hi' }) },
      { declaration: decl([], { intent: 'expand_ref' }) },
    ],
  },
  {
    code: 'unexpected_actions',
    bad: [
      { declaration: decl([act('a')], { intent: 'respond' }), path: '/actions' },
      { declaration: decl([act('a')], { intent: 'stop' }) },
    ],
    good: [{ declaration: decl([], { intent: 'stop' }) }, { declaration: decl([act('a')], { intent: 'plan' }) }],
  },
];

describe('validateDeclaration: one row per code', () => {
  it('covers every exported code', () => {
    expect(new Set(rows.map((r) => r.code))).toEqual(new Set(Object.values(VALIDATION_CODES)));
    for (const [key, value] of Object.entries(VALIDATION_CODES)) expect(key).toBe(value);
  });

  for (const row of rows) {
    describe(row.code, () => {
      row.bad.forEach((c, n) => {
        it(`reports it (bad #${n})`, () => {
          const result = run(c.declaration, c.options);
          const hits = result.issues.filter((i) => i.code === row.code);
          expect(hits.length).toBeGreaterThan(0);
          expect(result.ok).toBe(false);
          if (c.path) expect(hits.map((h) => h.path)).toContain(c.path);
          for (const hit of hits) {
            expect(ProtocolIssueSchema.safeParse(hit).success).toBe(true);
            expect(hit.message.length).toBeGreaterThan(0);
            expect(hit.hint.length).toBeGreaterThan(0);
          }
        });
      });
      row.good.forEach((c, n) => {
        it(`accepts the corrected form (good #${n})`, () => {
          const result = run(c.declaration, c.options);
          expect(result.issues).toEqual([]);
          expect(result.ok).toBe(true);
        });
      });
    });
  }
});

describe('hints are written for a corrective retry', () => {
  it('unknown_tool suggests the near name and lists the available tools', () => {
    const [issue] = run(decl([act('a', tool('read_fil', { path: 'x' }))])).issues;
    expect(issue?.hint).toContain("Did you mean 'read_file'?");
    expect(issue?.hint).toContain('read_file, write_file, search, broken');
  });

  it('truncates long tool lists', () => {
    const many: Catalog = {
      tools: Array.from({ length: 30 }, (_, i) => ({
        name: `tool_${i}`,
        description: '',
        inputSchema: { type: 'object' },
        capabilities: [],
      })),
      agents: [],
    };
    const [issue] = run(decl([act('a', tool('nope', {}))]), { catalog: many }).issues;
    expect(issue?.hint).toContain('tool_19');
    expect(issue?.hint).not.toContain('tool_20');
    expect(issue?.hint).toContain('(+10 more)');
  });

  it('says there are no tools when the catalog has none', () => {
    const [issue] = run(decl([act('a')]), { catalog: { tools: [], agents: [] } }).issues;
    expect(issue?.code).toBe('unknown_tool');
    expect(issue?.hint).toMatch(/No tools are available/);
  });

  it('action_id_reused names a fresh id and the used ones', () => {
    const [issue] = run(decl([act('a')]), { history: { usedActionIds: ['a', 'a_2'] } }).issues;
    expect(issue?.hint).toContain("'a_3'");
    expect(issue?.hint).toContain('already used: a, a_2');
  });

  it('duplicate_action_id proposes an unused id', () => {
    const issue = run(decl([act('a'), act('a'), act('a_2')])).issues.find((i) => i.code === 'duplicate_action_id');
    expect(issue?.hint).toContain("'a_3'");
  });

  it('invalid_action_id proposes a sanitized id', () => {
    const [issue] = run(decl([act('read the file')])).issues;
    expect(issue?.hint).toContain("'read_the_file'");
  });

  it('invalid_tool_args says what to fix and shows the expected input compactly', () => {
    const issues = run(decl([act('a', tool('read_file', { extra: 1 }))])).issues;
    expect(issues.map((i) => i.code)).toEqual(['invalid_tool_args', 'invalid_tool_args']);
    const required = issues.find((i) => i.message.includes('required'));
    const extra = issues.find((i) => i.message.includes('additional'));
    expect(required?.hint).toContain("Add the required property 'path'");
    expect(extra?.message).toContain("'extra'");
    expect(extra?.hint).toContain("Remove the property 'extra'");
    expect(required?.hint).toContain('{ path: string, limit?: integer }');
  });

  it('tool_target_unresolved lists the matching candidates when ambiguous', () => {
    const [issue] = run(decl([act('a', tool('auto', { path: 'x' }, ['read']))])).issues;
    expect(issue?.hint).toContain('read_file, search');
    expect(issue?.details).toMatchObject({ candidates: ['read_file', 'search'] });
  });

  it('tool_target_unresolved lists tools with capabilities when nothing matches', () => {
    const [issue] = run(decl([act('a', tool('auto', {}, ['teleport']))])).issues;
    expect(issue?.hint).toContain('read_file [filesystem, read]');
  });

  it('no_agent_for_capabilities lists agents with their capabilities', () => {
    const [issue] = run(
      decl([act('a', { executor: { type: 'agent', target: 'auto', capabilities: ['cooking'] } })]),
    ).issues;
    expect(issue?.hint).toContain('code-reviewer [code_review, testing]');
  });

  it('unknown_dependency lists the ids it could depend on', () => {
    const issue = run(decl([act('a', { dependsOn: ['bb'] }), act('b')]), {
      history: { completedActionIds: ['old'] },
    }).issues[0];
    expect(issue?.hint).toContain("Did you mean 'b'?");
    expect(issue?.hint).toContain('(b)');
    expect(issue?.hint).toContain('(old)');
  });

  it('invalid_tool_schema blames the catalog, not the model', () => {
    const [issue] = run(decl([act('a', tool('broken', {}))])).issues;
    expect(issue?.message).toMatch(/catalog/);
  });
});

describe('dependency cycles', () => {
  it('names the cycle in message and details', () => {
    const result = run(
      decl([act('a', { dependsOn: ['b'] }), act('b', { dependsOn: ['c'] }), act('c', { dependsOn: ['a'] })]),
    );
    expect(result.issues).toHaveLength(1);
    const [issue] = result.issues;
    expect(issue?.code).toBe('dependency_cycle');
    expect(issue?.message).toContain('a → b → c → a');
    expect(issue?.hint).toContain('a → b → c → a');
    expect(issue?.details).toEqual({ cycle: ['a', 'b', 'c', 'a'] });
    expect(issue?.path).toBe('/actions/0/dependsOn/0');
  });

  it('starts the name at the earliest declared action of the cycle', () => {
    const result = run(
      decl([act('x'), act('c', { dependsOn: ['a'] }), act('a', { dependsOn: ['b'] }), act('b', { dependsOn: ['c'] })]),
    );
    expect(result.issues.map((i) => i.details?.cycle)).toEqual([['c', 'a', 'b', 'c']]);
    expect(result.issues[0]?.path).toBe('/actions/1/dependsOn/0');
  });

  it('reports each distinct cycle once', () => {
    // a ⇄ b and a ⇄ c share a; the duplicated dependency must not produce a second report of a ⇄ b.
    const result = run(
      decl([act('a', { dependsOn: ['b', 'c', 'b'] }), act('b', { dependsOn: ['a'] }), act('c', { dependsOn: ['a'] })]),
    );
    const cycles = result.issues.filter((i) => i.code === 'dependency_cycle').map((i) => i.details?.cycle);
    expect(cycles).toEqual([
      ['a', 'b', 'a'],
      ['a', 'c', 'a'],
    ]);
  });

  it('reports separate cycles in separate components', () => {
    const result = run(
      decl([
        act('a', { dependsOn: ['b'] }),
        act('b', { dependsOn: ['a'] }),
        act('c', { dependsOn: ['d'] }),
        act('d', { dependsOn: ['c'] }),
        act('e', { dependsOn: ['a', 'c'] }),
      ]),
    );
    expect(result.issues.map((i) => i.message)).toEqual([
      expect.stringContaining('a → b → a'),
      expect.stringContaining('c → d → c'),
    ]);
  });

  it('keeps self-dependency separate from cycles', () => {
    expect(codes(decl([act('a', { dependsOn: ['a'] })]))).toEqual(['self_dependency']);
  });

  it('names the long chain when it exceeds maxDepth', () => {
    const result = run(decl([act('c', { dependsOn: ['b'] }), act('b', { dependsOn: ['a'] }), act('a')]), {
      limits: { maxDepth: 2 },
    });
    expect(result.issues[0]?.details).toEqual({ chain: ['a', 'b', 'c'], max: 2 });
    // Points at the dependencies of the last action of the chain, where shortening starts.
    expect(result.issues[0]?.path).toBe('/actions/0/dependsOn');
    expect(result.issues[0]?.message).toContain('a → b → c');
  });
});

describe('all violations at once', () => {
  it('reports four faults of one declaration as four issues', () => {
    const result = run(
      decl([
        act('a', tool('nope', {})), // unknown_tool
        act('a', tool('read_file', { path: 'x' })), // duplicate_action_id
        act('c', { ...tool('read_file', { path: 'x' }), dependsOn: ['ghost'] }), // unknown_dependency
        act('d', tool('read_file', { path: 7 })), // invalid_tool_args
      ]),
    );
    expect(result.ok).toBe(false);
    expect(result.issues.map((i) => [i.code, i.path])).toEqual([
      ['unknown_tool', '/actions/0/executor/target'],
      ['duplicate_action_id', '/actions/1/id'],
      ['unknown_dependency', '/actions/2/dependsOn/0'],
      ['invalid_tool_args', '/actions/3/input/path'],
    ]);
  });

  it('still validates every action when there are too many', () => {
    const actions = Array.from({ length: 40 }, (_, i) => act(`a${i}`));
    actions.push(act('bad one'));
    expect(codes(decl(actions))).toEqual(['too_many_actions', 'invalid_action_id']);
  });

  it('caps argument issues per action', () => {
    const properties = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`p${i}`, { type: 'string' }]));
    const wide: Catalog = {
      tools: [{ name: 'wide', description: '', inputSchema: { type: 'object', properties }, capabilities: [] }],
      agents: [],
    };
    const input = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`p${i}`, i]));
    const issues = run(decl([act('a', tool('wide', input))]), { catalog: wide }).issues;
    expect(issues).toHaveLength(20);
    expect(issues[19]?.message).toContain('+10 more errors');
  });

  it('orders issues declaration first, then action by action, then the graph', () => {
    const result = run(
      decl(
        [
          act('x y', { ...tool('nope', {}), dependsOn: ['ghost'] }),
          act('a', { ...tool('read_file', { path: 7 }), dependsOn: ['b'] }),
          act('b', { ...tool('broken', { path: 'x'.repeat(60) }), dependsOn: ['a'] }),
          act('old', tool('read_file', { path: 'x' })),
        ],
        { intent: 'respond' },
      ),
      { history: { usedActionIds: ['old'] }, limits: { maxArgsBytes: 50 } },
    );
    expect(result.issues.map((i) => [i.code, i.path])).toEqual([
      ['unexpected_actions', '/actions'],
      ['invalid_action_id', '/actions/0/id'],
      ['unknown_tool', '/actions/0/executor/target'],
      ['unknown_dependency', '/actions/0/dependsOn/0'],
      ['invalid_tool_args', '/actions/1/input/path'],
      ['invalid_tool_schema', '/actions/2/executor/target'],
      ['args_too_large', '/actions/2/input'],
      ['action_id_reused', '/actions/3/id'],
      ['dependency_cycle', '/actions/1/dependsOn/0'],
    ]);
  });
});

describe('auto tool resolution', () => {
  it('fills in the single tool with all requested capabilities without mutating the input', () => {
    const input = decl([act('a', tool('auto', { path: 'x' }, ['filesystem', 'read'])), act('b')]);
    const snapshot = structuredClone(input);
    const result = run(input);
    expect(result.ok).toBe(true);
    expect(result.declaration.actions[0]?.executor).toEqual({
      type: 'tool',
      target: 'read_file',
      capabilities: ['filesystem', 'read'],
    });
    expect(result.declaration.actions[1]).toBe(input.actions[1]);
    expect(result.resolutions).toEqual([
      expect.objectContaining({ actionId: 'a', path: '/actions/0/executor/target', target: 'read_file' }),
    ]);
    expect(input).toEqual(snapshot);
  });

  it('validates the input against the resolved tool', () => {
    const result = run(decl([act('a', tool('auto', { text: 'x' }, ['write']))]));
    expect(result.declaration.actions[0]?.executor.target).toBe('write_file');
    expect(result.issues.map((i) => i.code)).toEqual(['invalid_tool_args', 'invalid_tool_args', 'invalid_tool_args']);
  });

  it('returns the same declaration object when nothing was resolved', () => {
    const input = decl([act('a')]);
    expect(run(input).declaration).toBe(input);
  });

  it('resolves runtime auto from the operation field', () => {
    const result = run(decl([act('a', { operation: 'merge', executor: { type: 'runtime', target: 'auto' } })]));
    expect(result.declaration.actions[0]?.executor.target).toBe('merge');
    expect(result.resolutions[0]?.target).toBe('merge');
  });
});

describe('history', () => {
  const history = { usedActionIds: ['done', 'failed'], completedActionIds: ['done'] };

  it('allows depending on completed actions, rejects used-but-incomplete ones and unknown ones', () => {
    const result = run(decl([act('a', { dependsOn: ['done', 'failed', 'never'] })]), { history });
    expect(result.issues.map((i) => [i.code, i.path])).toEqual([
      ['dependency_not_completed', '/actions/0/dependsOn/1'],
      ['unknown_dependency', '/actions/0/dependsOn/2'],
    ]);
  });

  it('rejects reusing any historical id, completed or not', () => {
    expect(codes(decl([act('done'), act('failed')]), { history })).toEqual(['action_id_reused', 'action_id_reused']);
  });

  it('prefers an action of this declaration over history when both match a dependency', () => {
    // The reuse is reported once; the dependency itself is a normal in-graph edge.
    expect(codes(decl([act('failed'), act('b', { dependsOn: ['failed'] })]), { history })).toEqual([
      'action_id_reused',
    ]);
  });
});

describe('JSON Schema handling', () => {
  it('compiles draft-07 tool schemas and tools sharing an $id', () => {
    const shared = (name: string): Catalog['tools'][number] => ({
      name,
      description: '',
      inputSchema: {
        $schema: 'http://json-schema.org/draft-07/schema#',
        $id: 'https://example.com/same',
        type: 'object',
        properties: { n: { type: 'integer' } },
        required: ['n'],
      },
      capabilities: [],
    });
    const cat: Catalog = { tools: [shared('one'), shared('two')], agents: [] };
    const result = run(decl([act('a', tool('one', { n: 1 })), act('b', tool('two', { n: 'x' }))]), { catalog: cat });
    expect(result.issues.map((i) => [i.code, i.path])).toEqual([['invalid_tool_args', '/actions/1/input/n']]);
  });

  it('handles recursive schemas and vendor keywords', () => {
    const tree = {
      type: 'object',
      'x-vendor': true,
      properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } },
      required: ['name'],
    };
    const cat: Catalog = {
      tools: [{ name: 'tree', description: '', inputSchema: tree, capabilities: [] }],
      agents: [],
    };
    expect(run(decl([act('a', tool('tree', { name: 'r', children: [{ name: 'c' }] }))]), { catalog: cat }).ok).toBe(
      true,
    );
    const bad = run(decl([act('a', tool('tree', { name: 'r', children: [{}] }))]), { catalog: cat });
    expect(bad.issues.map((i) => i.path)).toEqual(['/actions/0/input/children/0']);
  });

  it('escapes odd property names in issue paths', () => {
    const cat: Catalog = {
      tools: [
        {
          name: 't',
          description: '',
          inputSchema: { type: 'object', properties: { 'a/b': { type: 'string' } } },
          capabilities: [],
        },
      ],
      agents: [],
    };
    expect(run(decl([act('a', tool('t', { 'a/b': 1 }))]), { catalog: cat }).issues[0]?.path).toBe(
      '/actions/0/input/a~1b',
    );
  });

  it('reports the same broken schema for every action that uses it, every time', () => {
    const d = decl([act('a', tool('broken', {})), act('b', tool('broken', {}))]);
    expect(codes(d)).toEqual(['invalid_tool_schema', 'invalid_tool_schema']);
    expect(codes(d)).toEqual(['invalid_tool_schema', 'invalid_tool_schema']);
  });
});

describe('limits', () => {
  it('exports the documented defaults', () => {
    expect(DEFAULT_VALIDATION_LIMITS).toEqual({
      maxActions: 32,
      maxArgsBytes: 65_536,
      maxDependsPerAction: 32,
      maxIdLength: 128,
      maxDepth: 32,
    });
  });

  it('ignores undefined overrides', () => {
    const result = run(decl(Array.from({ length: 32 }, (_, i) => act(`a${i}`))), {
      limits: { maxActions: undefined },
    });
    expect(result.ok).toBe(true);
  });
});

describe('robustness', () => {
  it('never throws on unchecked data shaped roughly like a declaration', () => {
    const garbage = [
      { intent: 'execute' },
      { intent: 'execute', actions: [null, 1, 'x', {}, { id: 'a', executor: null, dependsOn: 'b', input: null }] },
      {
        intent: 'execute',
        actions: [{ id: 'a', executor: { type: 'tool', target: 5, capabilities: 'read' }, dependsOn: [1, null] }],
      },
      { intent: 'execute', actions: [{ id: 7, executor: { type: 'agent', target: 'auto' } }] },
    ] as unknown as Declaration[];
    const badCatalogs = [
      catalog,
      {} as Catalog,
      { tools: [null, { name: 'x' }], agents: [{ name: 'y' }] } as unknown as Catalog,
    ];
    for (const d of garbage) {
      for (const c of badCatalogs) {
        expect(() => validateDeclaration(d, { catalog: c })).not.toThrow();
        expect(validateDeclaration(d, { catalog: c }).ok).toBe(false);
      }
    }
  });

  it('handles a very long chain without recursion', () => {
    const n = 20_000;
    const actions = Array.from({ length: n }, (_, i) => act(`a${i}`, { dependsOn: i > 0 ? [`a${i - 1}`] : [] }));
    const result = run(decl(actions), { limits: { maxActions: n, maxDepth: n } });
    expect(result.ok).toBe(true);
    actions[0] = act('a0', { dependsOn: [`a${n - 1}`] });
    const cyclic = run(decl(actions), { limits: { maxActions: n, maxDepth: n } });
    expect(cyclic.issues.map((i) => i.code)).toEqual(['dependency_cycle']);
  });
});

describe('properties', () => {
  const idPool = ['a', 'b', 'c', 'd', 'e', 'f', 'bad id', '', 'x'.repeat(130)];
  const executorArb = fc.record({
    type: fc.constantFrom('tool', 'agent', 'runtime', 'human', 'pipeline', 'service', 'auto', 'robot'),
    target: fc.constantFrom('read_file', 'search', 'broken', 'auto', 'nope', 'code-reviewer', 'merge', 'ask_user'),
    capabilities: fc.subarray(['read', 'filesystem', 'code_review', 'write', 'teleport']),
  });
  const actionArb = fc.record({
    id: fc.oneof(fc.constantFrom(...idPool), fc.string()),
    executor: executorArb,
    input: fc.dictionary(fc.constantFrom('path', 'limit', 'query', 'extra', 'a/b'), fc.jsonValue({ maxDepth: 2 })),
    dependsOn: fc.array(fc.oneof(fc.constantFrom(...idPool), fc.string()), { maxLength: 5 }),
    contextRefs: fc.constant([]),
    resultPolicy: fc.constant(DEFAULT_RESULT_POLICY),
    failurePolicy: fc.constant(DEFAULT_FAILURE_POLICY),
    operation: fc.option(fc.constantFrom('summarize', 'review'), { nil: undefined }),
  });
  const historyArb = fc.record({
    usedActionIds: fc.subarray(['a', 'b', 'old', 'older']),
    completedActionIds: fc.subarray(['a', 'old']),
  });

  it('random graphs never make validateDeclaration throw', () => {
    fc.assert(
      fc.property(
        fc.array(actionArb, { maxLength: 40 }),
        fc.constantFrom(...(['execute', 'respond', 'stop', 'plan', 'report'] as const)),
        historyArb,
        (actions, intent, history) => {
          const d = decl(actions as unknown as Action[], { intent });
          const result = validateDeclaration(d, { catalog, history });
          expect(result.ok).toBe(result.issues.length === 0);
          for (const issue of result.issues) {
            expect(Object.values(VALIDATION_CODES)).toContain(issue.code);
            expect(issue.path.startsWith('/actions')).toBe(true);
            expect(ProtocolIssueSchema.safeParse(issue).success).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('acyclic random graphs with known tools validate cleanly', () => {
    // Edges only go from a later to an earlier position of a random topological order, then the actions are
    // declared in a shuffled order, so dependencies point both forwards and backwards in the declaration.
    const dagArb = fc.integer({ min: 1, max: DEFAULT_VALIDATION_LIMITS.maxActions }).chain((n) =>
      fc.tuple(
        fc.constant(n),
        fc.array(fc.array(fc.nat({ max: n - 1 }), { maxLength: 4 }), { minLength: n, maxLength: n }),
        fc.shuffledSubarray(
          Array.from({ length: n }, (_, i) => i),
          { minLength: n, maxLength: n },
        ),
        fc.array(fc.constantFrom('read_file', 'search'), { minLength: n, maxLength: n }),
      ),
    );
    fc.assert(
      fc.property(dagArb, ([n, rawDeps, order, tools]) => {
        const actions = Array.from({ length: n }, (_, i) => {
          const deps = [...new Set((rawDeps[i] ?? []).filter((d) => d < i))].map((d) => `step_${d}`);
          const name = tools[i] ?? 'read_file';
          return act(`step_${i}`, {
            ...tool(name, name === 'search' ? { query: 'q' } : { path: `f${i}` }),
            dependsOn: deps,
          });
        });
        const declared = order.map((i) => actions[i] as Action);
        const result = validateDeclaration(decl(declared), { catalog });
        expect(result.issues.filter((i) => i.code === 'dependency_cycle')).toEqual([]);
        expect(result.issues).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('adding a back edge to an acyclic chain always yields exactly one named cycle', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 20 }), fc.nat(), (n, pick) => {
        const from = pick % n;
        const actions = Array.from({ length: n }, (_, i) =>
          act(`s${i}`, { dependsOn: [...(i > 0 ? [`s${i - 1}`] : []), ...(i === from ? [`s${n - 1}`] : [])] }),
        );
        if (from === n - 1) return; // would be a self-dependency, covered elsewhere
        const result = validateDeclaration(decl(actions), { catalog });
        const cycles = result.issues.filter((i) => i.code === 'dependency_cycle');
        expect(cycles).toHaveLength(1);
        const cycle = cycles[0]?.details?.cycle as string[];
        expect(cycle[0]).toBe(cycle[cycle.length - 1]);
        expect(cycle.length - 1).toBe(n - from);
      }),
    );
  });
});
