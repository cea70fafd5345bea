import {
  EXECUTOR_TYPES,
  type ExecutorType,
  type PermissionDecision,
  PermissionEvaluatedPayloadSchema,
} from '@oar/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { PermissionRequest, SessionGrant } from '../../src/config/permission-request.js';
import {
  type PermissionMode,
  type PermissionPolicy,
  type PermissionRule,
  PermissionRuleSchema,
  PermissionsConfigSchema,
} from '../../src/config/permissions.js';
import { PERMISSION_MODES } from '../../src/kernel/constants.js';
import { grantCovers, ruleMatches } from '../../src/policy/permission-match.js';
import { describeRule, evaluatePermission, toPermissionEvaluatedPayload } from '../../src/policy/permissions.js';
import { grantFor } from '../../src/policy/request.js';
import { globNamesPath } from '../../src/policy/sensitive-paths.js';

type ToolFlags = { isReadOnly?: boolean; isDestructive?: boolean; capabilities?: string[] };

function toolCall(name: string, flags: ToolFlags = {}, paths: string[] = []): PermissionRequest {
  return {
    executor: { type: 'tool', target: name },
    tool: {
      name,
      isReadOnly: flags.isReadOnly ?? false,
      isDestructive: flags.isDestructive ?? false,
      isConcurrencySafe: flags.isReadOnly ?? false,
      capabilities: flags.capabilities ?? [],
    },
    paths,
  };
}

const read = (paths: string[] = ['src/a.ts']) =>
  toolCall('read_file', { isReadOnly: true, capabilities: ['filesystem', 'read'] }, paths);
const write = (paths: string[] = ['src/a.ts']) =>
  toolCall('write_file', { capabilities: ['filesystem', 'write'] }, paths);
const destroy = (paths: string[] = ['src/a.ts']) =>
  toolCall('delete_file', { isDestructive: true, capabilities: ['filesystem', 'write'] }, paths);
const other = (type: ExecutorType, target: string): PermissionRequest => ({ executor: { type, target }, paths: [] });

const evaluate = (request: PermissionRequest, policy: Partial<PermissionPolicy> = {}) =>
  evaluatePermission(request, { mode: 'default', rules: [], ...policy });

describe('mode table (no rules, no grants)', () => {
  const kinds: Record<string, PermissionRequest> = {
    read: read(),
    write: write(),
    destructive: destroy(),
    unknownTool: { executor: { type: 'tool', target: 'mystery' }, paths: [] },
    agent: other('agent', 'researcher'),
    human: other('human', 'user'),
    runtime: other('runtime', 'expand_ref'),
    pipeline: other('pipeline', 'build'),
    service: other('service', 'billing'),
  };
  const expected: Record<PermissionMode, Record<keyof typeof kinds, PermissionDecision>> = {
    default: {
      read: 'allow',
      write: 'ask',
      destructive: 'ask',
      unknownTool: 'ask',
      agent: 'allow',
      human: 'allow',
      runtime: 'allow',
      pipeline: 'ask',
      service: 'ask',
    },
    'read-only': {
      read: 'allow',
      write: 'deny',
      destructive: 'deny',
      unknownTool: 'deny',
      agent: 'allow',
      human: 'allow',
      runtime: 'allow',
      pipeline: 'deny',
      service: 'deny',
    },
    'accept-edits': {
      read: 'allow',
      write: 'allow',
      destructive: 'ask',
      unknownTool: 'ask',
      agent: 'allow',
      human: 'allow',
      runtime: 'allow',
      pipeline: 'ask',
      service: 'ask',
    },
    bypass: {
      read: 'allow',
      write: 'allow',
      destructive: 'allow',
      unknownTool: 'allow',
      agent: 'allow',
      human: 'allow',
      runtime: 'allow',
      pipeline: 'allow',
      service: 'allow',
    },
  };
  const cases = PERMISSION_MODES.flatMap((mode) =>
    Object.keys(kinds).map((kind) => ({ mode, kind, want: expected[mode][kind] })),
  );

  it.each(cases)('$mode × $kind → $want', ({ mode, kind, want }) => {
    const result = evaluate(kinds[kind]!, { mode });
    expect(result.decision).toBe(want);
    expect(result.mode).toBe(mode);
    expect(result.source).toBe(mode === 'default' ? 'default' : 'mode');
    expect(result.rule).toBeUndefined();
    expect(result.reason).not.toBe('');
    if (want === 'ask') expect(result.decisions).toEqual(['approve', 'deny', 'approve_for_session']);
    else expect(result.decisions).toBeUndefined();
  });

  it('treats a tool flagged both read-only and destructive as destructive', () => {
    const confused = toolCall('odd', { isReadOnly: true, isDestructive: true });
    expect(evaluate(confused).decision).toBe('ask');
    expect(evaluate(confused, { mode: 'read-only' }).decision).toBe('deny');
  });
});

describe('rule precedence', () => {
  it('deny beats allow regardless of order, in every mode', () => {
    const rules: PermissionRule[] = [
      { decision: 'allow', tool: 'write_file' },
      { decision: 'deny', tool: 'write_file', reason: 'no writes here' },
    ];
    for (const mode of PERMISSION_MODES) {
      const result = evaluate(write(), { mode, rules });
      expect(result).toMatchObject({ decision: 'deny', source: 'rule', rule: { index: 1, decision: 'deny' } });
      expect(result.reason).toContain('no writes here');
    }
  });

  it('deny beats a session grant and an ask rule', () => {
    const rules: PermissionRule[] = [
      { decision: 'ask', tool: 'write_file' },
      { decision: 'deny', paths: ['secrets/**'] },
    ];
    const grants = grantFor(write(['secrets/key']));
    const result = evaluate(write(['secrets/key']), { rules, grants: [grants] });
    expect(result).toMatchObject({ decision: 'deny', rule: { index: 1 } });
  });

  it('ask beats allow rules, grants and the mode — bypass included', () => {
    const rules: PermissionRule[] = [
      { decision: 'allow', tool: '*' },
      { decision: 'ask', tool: 'write_file', paths: ['package.json'] },
    ];
    const call = write(['package.json']);
    const grants = [grantFor(call)];
    for (const mode of ['default', 'accept-edits', 'bypass'] as const) {
      const result = evaluate(call, { mode, rules, grants });
      expect(result).toMatchObject({ decision: 'ask', source: 'rule', rule: { index: 1 } });
      // "Ask every time": an approval for the session would never be consulted, so it is not offered.
      expect(result.decisions).toEqual(['approve', 'deny']);
    }
  });

  it('read-only mode is a ceiling: allow rules, grants and ask rules do not lift it', () => {
    const call = write();
    const rules: PermissionRule[] = [{ decision: 'allow', tool: 'write_file' }];
    expect(evaluate(call, { mode: 'read-only', rules })).toMatchObject({ decision: 'deny', source: 'mode' });
    expect(evaluate(call, { mode: 'read-only', grants: [grantFor(call)] }).decision).toBe('deny');
    const askRules: PermissionRule[] = [{ decision: 'ask', tool: 'write_file' }];
    expect(evaluate(call, { mode: 'read-only', rules: askRules }).decision).toBe('deny');
    // …but ask and deny rules still apply to what read-only mode allows.
    expect(evaluate(read(), { mode: 'read-only', rules: [{ decision: 'ask', tool: 'read_file' }] }).decision).toBe(
      'ask',
    );
    expect(evaluate(read(), { mode: 'read-only', rules: [{ decision: 'deny', tool: 'read_file' }] }).decision).toBe(
      'deny',
    );
  });

  it('an allow rule turns a mode ask into allow', () => {
    const result = evaluate(destroy(), { rules: [{ decision: 'allow', tool: 'delete_file', paths: ['tmp/**'] }] });
    expect(result.decision).toBe('ask');
    const inTmp = evaluate(destroy(['tmp/x.log']), {
      rules: [{ decision: 'allow', tool: 'delete_file', paths: ['tmp/**'] }],
    });
    expect(inTmp).toMatchObject({ decision: 'allow', source: 'rule', rule: { index: 0 } });
  });

  it('the first matching rule of the deciding kind is the one reported', () => {
    const rules: PermissionRule[] = [
      { decision: 'allow', tool: 'read_file' },
      { decision: 'deny', tool: 'write_file', reason: 'first' },
      { decision: 'deny', capability: 'write', reason: 'second' },
    ];
    expect(evaluate(write(), { rules }).rule).toMatchObject({ index: 1, reason: 'first' });
  });

  it('a message counts rules from 1; the recorded index and rules[N] stay 0-based array positions', () => {
    const rules: PermissionRule[] = [
      { decision: 'allow', tool: 'read_file' },
      { decision: 'deny', tool: 'write_file', reason: 'no writes' },
    ];
    const result = evaluate(write(), { rules });
    expect(result.reason).toBe('rule #2 denies this call: no writes');
    expect(result.rule?.index).toBe(1);
    expect(describeRule(result.rule as never)).toMatch(/^rules\[1\] /);
  });

  it('deny rules can target non-tool executors', () => {
    const rules: PermissionRule[] = [{ decision: 'deny', executor: 'agent' }];
    expect(evaluate(other('agent', 'researcher'), { rules, mode: 'bypass' }).decision).toBe('deny');
    expect(evaluate(other('human', 'user'), { rules }).decision).toBe('allow');
  });
});

describe('rule conditions', () => {
  it('requires ALL given conditions (AND)', () => {
    const rule: PermissionRule = { decision: 'deny', tool: 'write_file', paths: ['src/**'], capability: 'write' };
    expect(ruleMatches(rule, write(['src/a.ts']))).toBe(true);
    expect(ruleMatches(rule, write(['docs/a.md']))).toBe(false);
    expect(ruleMatches(rule, read(['src/a.ts']))).toBe(false);
    expect(ruleMatches({ ...rule, capability: 'network' }, write(['src/a.ts']))).toBe(false);
  });

  it('a rule without conditions matches everything', () => {
    expect(ruleMatches({ decision: 'deny' }, read())).toBe(true);
    expect(ruleMatches({ decision: 'deny' }, other('service', 'billing'))).toBe(true);
  });

  it('matches tool names exactly or by glob', () => {
    const mcp = toolCall('mcp__github__create_issue');
    expect(ruleMatches({ decision: 'deny', tool: 'mcp__*' }, mcp)).toBe(true);
    expect(ruleMatches({ decision: 'deny', tool: 'mcp__github__*' }, mcp)).toBe(true);
    expect(ruleMatches({ decision: 'deny', tool: 'mcp__slack__*' }, mcp)).toBe(false);
    expect(ruleMatches({ decision: 'deny', tool: 'mcp' }, mcp)).toBe(false);
    expect(ruleMatches({ decision: 'deny', tool: 'read_file' }, read())).toBe(true);
    expect(ruleMatches({ decision: 'deny', tool: 'read_*' }, write())).toBe(false);
  });

  it('matches an unknown tool by its executor target, but never by its flags', () => {
    const unknown: PermissionRequest = { executor: { type: 'tool', target: 'mcp__x__y' }, paths: [] };
    expect(ruleMatches({ decision: 'deny', tool: 'mcp__*' }, unknown)).toBe(true);
    expect(ruleMatches({ decision: 'deny', readOnly: false }, unknown)).toBe(false);
    expect(ruleMatches({ decision: 'deny', capability: 'network' }, unknown)).toBe(false);
  });

  it('tool conditions never match non-tool executors', () => {
    const agent = other('agent', 'researcher');
    expect(ruleMatches({ decision: 'deny', tool: '*' }, agent)).toBe(false);
    expect(ruleMatches({ decision: 'deny', readOnly: true }, agent)).toBe(false);
    expect(ruleMatches({ decision: 'deny', executor: 'agent' }, agent)).toBe(true);
    expect(ruleMatches({ decision: 'deny', executor: 'tool' }, agent)).toBe(false);
  });

  it('matches flags and capabilities', () => {
    expect(ruleMatches({ decision: 'ask', destructive: true }, destroy())).toBe(true);
    expect(ruleMatches({ decision: 'ask', destructive: true }, write())).toBe(false);
    expect(ruleMatches({ decision: 'ask', readOnly: true }, read())).toBe(true);
    expect(ruleMatches({ decision: 'ask', readOnly: false }, read())).toBe(false);
    expect(ruleMatches({ decision: 'ask', capability: 'read' }, read())).toBe(true);
    expect(ruleMatches({ decision: 'ask', capability: 'rea' }, read())).toBe(false);
    const net = toolCall('fetch', { isReadOnly: true, capabilities: ['network'] });
    expect(evaluate(net, { rules: [{ decision: 'ask', capability: 'network' }] }).decision).toBe('ask');
  });

  it('matches path globs, dotfiles included', () => {
    const deny = (paths: string[]): PermissionRule => ({ decision: 'deny', paths });
    expect(ruleMatches(deny(['src/**']), write(['src/a.ts']))).toBe(true);
    expect(ruleMatches(deny(['src/**']), write(['src/deep/nested/a.ts']))).toBe(true);
    expect(ruleMatches(deny(['src/**']), write(['src/.env']))).toBe(true);
    expect(ruleMatches(deny(['src/**']), write(['src/.config/x.json']))).toBe(true);
    expect(ruleMatches(deny(['src/**']), write(['lib/a.ts']))).toBe(false);
    expect(ruleMatches(deny(['src/**']), write(['srcx/a.ts']))).toBe(false);
    expect(ruleMatches(deny(['**/.env*']), write(['.env']))).toBe(true);
    expect(ruleMatches(deny(['**/.env*']), write(['apps/web/.env.local']))).toBe(true);
    expect(ruleMatches(deny(['*.md']), write(['README.md']))).toBe(true);
    expect(ruleMatches(deny(['*.md']), write(['docs/a.md']))).toBe(false);
    expect(ruleMatches(deny(['**/*.md']), write(['docs/a.md']))).toBe(true);
  });

  it('normalizes touched paths before matching, so a deny cannot be dodged by spelling', () => {
    const rule: PermissionRule = { decision: 'deny', paths: ['secrets/**'] };
    for (const path of ['./secrets/k', 'secrets//k', 'lib/../secrets/k', 'secrets\\k']) {
      expect(ruleMatches(rule, write([path])), path).toBe(true);
    }
  });

  it('deny/ask rules match when ANY touched path matches; allow rules only when ALL do', () => {
    const paths = ['docs/a.md', 'src/b.ts'];
    expect(ruleMatches({ decision: 'deny', paths: ['src/**'] }, write(paths))).toBe(true);
    expect(ruleMatches({ decision: 'ask', paths: ['src/**'] }, write(paths))).toBe(true);
    expect(ruleMatches({ decision: 'allow', paths: ['docs/**'] }, write(paths))).toBe(false);
    expect(ruleMatches({ decision: 'allow', paths: ['docs/**', 'src/**'] }, write(paths))).toBe(true);
  });

  it('a rule with paths never matches a call that touches none', () => {
    expect(ruleMatches({ decision: 'deny', paths: ['**'] }, toolCall('bash'))).toBe(false);
    expect(ruleMatches({ decision: 'deny', paths: ['**'] }, other('agent', 'a'))).toBe(false);
  });
});

describe('config schema', () => {
  it('parses the permissions section with defaults', () => {
    expect(PermissionsConfigSchema.parse({})).toEqual({ mode: 'default', rules: [] });
    const config = PermissionsConfigSchema.parse({
      mode: 'accept-edits',
      rules: [{ decision: 'deny', tool: 'bash', paths: ['.git/**'], reason: 'keep history intact' }],
    });
    expect(config.rules[0]?.paths).toEqual(['.git/**']);
  });

  it('rejects misspelled conditions, empty path lists and unknown modes', () => {
    expect(PermissionRuleSchema.safeParse({ decision: 'allow', path: ['docs/**'] }).success).toBe(false);
    expect(PermissionRuleSchema.safeParse({ decision: 'allow', paths: [] }).success).toBe(false);
    expect(PermissionRuleSchema.safeParse({ decision: 'maybe' }).success).toBe(false);
    expect(PermissionRuleSchema.safeParse({ decision: 'deny', executor: 'robot' }).success).toBe(false);
    expect(PermissionsConfigSchema.safeParse({ mode: 'plan' }).success).toBe(false);
  });
});

describe('session grants', () => {
  it('grantFor records the exact tool and the exact normalized paths', () => {
    expect(grantFor(write(['./src/a.ts', 'src/a.ts', 'src/b.ts']))).toEqual({
      tool: 'write_file',
      paths: ['src/a.ts', 'src/b.ts'],
    });
    expect(grantFor(toolCall('bash'))).toEqual({ tool: 'bash' });
    expect(grantFor(other('pipeline', 'build'))).toEqual({ executor: 'pipeline', tool: 'build' });
  });

  it('allows what was approved for the session and nothing next to it', () => {
    const grants: SessionGrant[] = [grantFor(write(['src/a.ts']))];
    expect(evaluate(write(['src/a.ts']), { grants })).toMatchObject({
      decision: 'allow',
      source: 'human',
      grant: grants[0],
    });
    expect(evaluate(write(['./src/a.ts']), { grants }).decision).toBe('allow');
    expect(evaluate(write(['src/b.ts']), { grants }).decision).toBe('ask');
    expect(evaluate(write(['src/a.ts', 'src/b.ts']), { grants }).decision).toBe('ask');
    expect(evaluate(write([]), { grants }).decision).toBe('ask');
    expect(evaluate(toolCall('edit_file', {}, ['src/a.ts']), { grants }).decision).toBe('ask');
  });

  it('a grant without paths covers only calls that touch none', () => {
    const grant: SessionGrant = { tool: 'bash' };
    expect(grantCovers(grant, toolCall('bash'))).toBe(true);
    expect(grantCovers(grant, toolCall('bash', {}, ['src/a.ts']))).toBe(false);
    expect(grantCovers(grant, other('service', 'bash'))).toBe(false);
  });

  it('covers non-tool executors by exact target', () => {
    const grants = [grantFor(other('service', 'billing'))];
    expect(evaluate(other('service', 'billing'), { grants }).decision).toBe('allow');
    expect(evaluate(other('service', 'billing2'), { grants }).decision).toBe('ask');
    expect(evaluate(other('pipeline', 'billing'), { grants }).decision).toBe('ask');
  });

  it('a grant wins over the mode default but not over deny or ask rules', () => {
    const call = destroy(['tmp/x']);
    const grants = [grantFor(call)];
    expect(evaluate(call, { mode: 'accept-edits', grants }).decision).toBe('allow');
    expect(evaluate(call, { grants, rules: [{ decision: 'deny', destructive: true }] }).decision).toBe('deny');
    expect(evaluate(call, { grants, rules: [{ decision: 'ask', destructive: true }] }).decision).toBe('ask');
  });
});

describe('permission.evaluated payload', () => {
  it('fits the protocol schema', () => {
    const rules: PermissionRule[] = [{ decision: 'deny', tool: 'write_file', paths: ['src/**'], reason: 'frozen' }];
    const call = write(['./src/a.ts']);
    const evaluation = evaluate(call, { rules });
    const payload = toPermissionEvaluatedPayload(evaluation, call);
    expect(PermissionEvaluatedPayloadSchema.parse(payload)).toMatchObject({
      decision: 'deny',
      toolName: 'write_file',
      source: 'rule',
      mode: 'default',
      rule: 'rules[0] {"decision":"deny","tool":"write_file","paths":["src/**"],"reason":"frozen"}',
      paths: ['src/a.ts'],
    });
    expect(describeRule({ index: 3, decision: 'ask' })).toBe('rules[3] {"decision":"ask"}');
  });

  it('fits for every source', () => {
    const call = write();
    const evaluations = [
      evaluate(call),
      evaluate(call, { mode: 'bypass' }),
      evaluate(call, { grants: [grantFor(call)] }),
      evaluate(other('agent', 'researcher')),
    ];
    for (const evaluation of evaluations) {
      const request = evaluation === evaluations[3] ? other('agent', 'researcher') : call;
      expect(
        PermissionEvaluatedPayloadSchema.safeParse(toPermissionEvaluatedPayload(evaluation, request)).success,
      ).toBe(true);
    }
  });
});

describe('properties', () => {
  const toolNames = ['read_file', 'write_file', 'delete_file', 'bash', 'mcp__github__issue'];
  const pathPool = ['src/a.ts', 'src/.env', 'docs/x.md', '.git/config', 'package.json', 'lib/deep/b.js'];
  const globPool = ['src/**', '**/.env', '**', '*.json', 'docs/*', '.git/**', 'lib/**/*.js'];

  const requestArb: fc.Arbitrary<PermissionRequest> = fc.oneof(
    fc
      .record({
        name: fc.constantFrom(...toolNames),
        isReadOnly: fc.boolean(),
        isDestructive: fc.boolean(),
        capabilities: fc.subarray(['filesystem', 'read', 'write', 'network']),
        paths: fc.subarray(pathPool),
      })
      .map(({ name, paths, ...flags }) => toolCall(name, flags, paths)),
    fc
      .record({ type: fc.constantFrom(...EXECUTOR_TYPES), target: fc.constantFrom('x', 'bash', 'researcher') })
      .map(({ type, target }) => other(type, target)),
  );

  const ruleArb: fc.Arbitrary<PermissionRule> = fc.record(
    {
      decision: fc.constantFrom('allow', 'ask', 'deny'),
      tool: fc.constantFrom(...toolNames, '*', 'mcp__*', '*_file'),
      executor: fc.constantFrom(...EXECUTOR_TYPES),
      capability: fc.constantFrom('filesystem', 'read', 'write', 'network'),
      readOnly: fc.boolean(),
      destructive: fc.boolean(),
      paths: fc.subarray(globPool, { minLength: 1 }),
    },
    { requiredKeys: ['decision'] },
  );

  const grantArb: fc.Arbitrary<SessionGrant> = requestArb.map(grantFor);

  const policyArb = fc.record({
    mode: fc.constantFrom(...PERMISSION_MODES),
    rules: fc.array(ruleArb, { maxLength: 6 }),
    grants: fc.array(grantArb, { maxLength: 3 }),
  });

  /** Deny/ask rules built from conditions that hold for the request, in any combination: they always match. */
  const matchingRuleArb = (request: PermissionRequest, decision: 'deny' | 'ask'): fc.Arbitrary<PermissionRule> => {
    const conditions: Partial<PermissionRule>[] = [{ executor: request.executor.type }];
    const tool = request.tool;
    if (tool) {
      conditions.push(
        { tool: tool.name },
        { tool: '*' },
        { readOnly: tool.isReadOnly },
        { destructive: tool.isDestructive },
      );
      for (const capability of tool.capabilities) conditions.push({ capability });
    }
    for (const path of request.paths) conditions.push({ paths: [path, 'nowhere/**'] }, { paths: ['**'] });
    return fc.subarray(conditions).map((picked) => Object.assign({ decision }, ...picked));
  };

  it('a matching deny rule always yields deny', () => {
    const arb = requestArb.chain((request) =>
      fc.tuple(fc.constant(request), matchingRuleArb(request, 'deny'), policyArb, fc.nat()),
    );
    fc.assert(
      fc.property(arb, ([request, deny, policy, position]) => {
        expect(ruleMatches(deny, request)).toBe(true);
        const rules = [...policy.rules];
        rules.splice(position % (rules.length + 1), 0, deny);
        expect(evaluatePermission(request, { ...policy, rules }).decision).toBe('deny');
      }),
    );
  });

  it('an unconditional deny rule denies every request', () => {
    fc.assert(
      fc.property(requestArb, policyArb, (request, policy) => {
        const rules = [...policy.rules, { decision: 'deny' } as const];
        expect(evaluatePermission(request, { ...policy, rules }).decision).toBe('deny');
      }),
    );
  });

  it('adding an allow rule or a grant never turns a deny into allow (a default deny: only an allow rule naming the path)', () => {
    fc.assert(
      fc.property(requestArb, policyArb, ruleArb, fc.nat(), (request, policy, extra, position) => {
        const before = evaluatePermission(request, policy);
        fc.pre(before.decision === 'deny');
        const rules = [...policy.rules];
        const allow: PermissionRule = { ...extra, decision: 'allow' };
        rules.splice(position % (rules.length + 1), 0, allow);
        const grants = [...policy.grants, grantFor(request)];
        const after = evaluatePermission(request, { ...policy, rules });
        if (before.source === 'default' && before.defaultRule) {
          // The one deny an allow rule may lift: the default one, by a rule that names the denied path.
          if (after.decision !== 'deny') {
            expect(allow.paths?.some((glob) => globNamesPath(glob, before.defaultRule!.path))).toBe(true);
          }
        } else {
          expect(after.decision).toBe('deny');
        }
        expect(evaluatePermission(request, { ...policy, grants }).decision).toBe('deny');
      }),
    );
  });

  it('a matching ask rule never yields allow', () => {
    const arb = requestArb.chain((request) =>
      fc.tuple(fc.constant(request), matchingRuleArb(request, 'ask'), policyArb, fc.nat()),
    );
    fc.assert(
      fc.property(arb, ([request, ask, policy, position]) => {
        expect(ruleMatches(ask, request)).toBe(true);
        const rules = [...policy.rules];
        rules.splice(position % (rules.length + 1), 0, ask);
        expect(evaluatePermission(request, { ...policy, rules }).decision).not.toBe('allow');
      }),
    );
  });

  it('every evaluation explains itself and fits the protocol payload', () => {
    fc.assert(
      fc.property(requestArb, policyArb, (request, policy) => {
        const result = evaluatePermission(request, policy);
        expect(result.reason.length).toBeGreaterThan(0);
        expect(result.source === 'rule').toBe(result.rule !== undefined);
        expect(result.source === 'human').toBe(result.grant !== undefined);
        expect(result.decision === 'ask').toBe(result.decisions !== undefined);
        expect(PermissionEvaluatedPayloadSchema.safeParse(toPermissionEvaluatedPayload(result, request)).success).toBe(
          true,
        );
      }),
    );
  });
});
