import { PermissionEvaluatedPayloadSchema } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import type { PermissionRequest } from '../../src/config/permission-request.js';
import type { PermissionPolicy, PermissionRule } from '../../src/config/permissions.js';
import { pathFilter } from '../../src/executors/tool.js';
import { PERMISSION_MODES } from '../../src/kernel/constants.js';
import { evaluatePermission, toPermissionEvaluatedPayload } from '../../src/policy/permissions.js';
import { grantFor } from '../../src/policy/request.js';
import { DEFAULT_DENY_RULES, globNamesPath, sensitivePathRule } from '../../src/policy/sensitive-paths.js';

function toolCall(name: string, isReadOnly: boolean, paths: string[]): PermissionRequest {
  return {
    executor: { type: 'tool', target: name },
    tool: { name, isReadOnly, isDestructive: false, isConcurrencySafe: isReadOnly, capabilities: [] },
    paths,
  };
}
const read = (...paths: string[]) => toolCall('read', true, paths);
const write = (...paths: string[]) => toolCall('write', false, paths);
const evaluate = (request: PermissionRequest, policy: Partial<PermissionPolicy> = {}) =>
  evaluatePermission(request, { mode: 'default', rules: [], ...policy });

const SENSITIVE: Record<string, string> = {
  '.env': 'dotenv',
  '.env.local': 'dotenv',
  'apps/web/.env.production': 'dotenv',
  '.envrc': 'dotenv',
  'certs/server.pem': 'private_key_file',
  'tls.key': 'private_key_file',
  'deploy/keystore.p12': 'private_key_file',
  id_rsa: 'ssh_private_key',
  id_ed25519: 'ssh_private_key',
  'keys/id_ecdsa_sk': 'ssh_private_key',
  'backup/id_rsa.old': 'ssh_private_key',
  'id_rsa-github': 'ssh_private_key',
  '.ssh': 'ssh_dir',
  '.ssh/config': 'ssh_dir',
  '.ssh/known_hosts': 'ssh_dir',
  'home/me/.ssh/id_ed25519.pub': 'ssh_dir',
  './.env': 'dotenv',
  'src/../.env': 'dotenv',
  '/home/me/.ssh/id_rsa': 'ssh_private_key',
  '../.env': 'dotenv',
};

const ORDINARY = [
  '.env.example',
  '.env.sample',
  '.env.template',
  'config/.env.local.example',
  'id_rsa.pub',
  'keys/id_ed25519.pub',
  'src/id_utils.ts',
  'src/identity.ts',
  'src/env.ts',
  'environment.ts',
  'docs/keys.md',
  'src/ssh.ts',
  'key.ts',
  'pem.md',
  'src/a.ts',
];

describe('which paths the default rules name', () => {
  it.each(Object.entries(SENSITIVE))('%s → %s', (path, rule) => {
    expect(sensitivePathRule(path)?.name).toBe(rule);
  });

  it.each(ORDINARY)('%s is an ordinary file', (path) => {
    expect(sensitivePathRule(path)).toBeUndefined();
  });

  it('every default rule has a stable name and a reason', () => {
    expect(DEFAULT_DENY_RULES.map((rule) => rule.name)).toEqual([
      'dotenv',
      'private_key_file',
      'ssh_private_key',
      'ssh_dir',
    ]);
    for (const rule of DEFAULT_DENY_RULES) expect(rule.reason).not.toBe('');
  });
});

describe('default deny', () => {
  it.each(Object.keys(SENSITIVE))('reading %s is denied by default, in every mode (bypass included)', (path) => {
    for (const mode of PERMISSION_MODES) {
      const result = evaluate(read(path), { mode });
      expect(result).toMatchObject({ decision: 'deny', source: 'default', mode });
      expect(result.defaultRule?.name).toBe(SENSITIVE[path]);
      expect(result.rule).toBeUndefined();
      expect(result.reason).toContain(`default rule "${SENSITIVE[path]}"`);
    }
  });

  it('writing one is denied too (an edit shows the content; a write to ~/.ssh opens the machine)', () => {
    expect(evaluate(write('.env'), { mode: 'accept-edits' })).toMatchObject({ decision: 'deny', source: 'default' });
    expect(evaluate(write('.ssh/authorized_keys'), { mode: 'bypass' }).decision).toBe('deny');
  });

  it.each(ORDINARY)('%s is left to the mode', (path) => {
    expect(evaluate(read(path)).decision).toBe('allow');
  });

  it('one sensitive path among several denies the call', () => {
    expect(evaluate(read('src/a.ts', 'config/.env'))).toMatchObject({
      decision: 'deny',
      defaultRule: { name: 'dotenv', path: 'config/.env' },
    });
  });

  it('is recorded with the rule in defaults.<name> notation, and fits the protocol payload', () => {
    const request = read('./.env');
    const payload = toPermissionEvaluatedPayload(evaluate(request), request);
    expect(PermissionEvaluatedPayloadSchema.parse(payload)).toMatchObject({
      decision: 'deny',
      source: 'default',
      rule: 'defaults.dotenv {"decision":"deny","paths":["**/.env*"],"except":["**/.env*.example","**/.env*.sample","**/.env*.template"]}',
      paths: ['.env'],
    });
  });

  it('a host may turn the defaults off (defaultRules: [])', () => {
    expect(evaluate(read('.env'), { defaultRules: [] }).decision).toBe('allow');
  });
});

describe('lifting a default deny', () => {
  const allow = (paths: string[], extra: Partial<PermissionRule> = {}): PermissionRule => ({
    decision: 'allow',
    paths,
    ...extra,
  });

  it.each([
    ['.env', ['.env']],
    ['.env', ['**/.env*']],
    ['apps/web/.env.local', ['apps/web/.env.local']],
    ['apps/web/.env.local', ['**/.env.local']],
    ['certs/server.pem', ['certs/*.pem']],
    ['tls.key', ['*.{pem,key}']],
    ['.ssh/config', ['.ssh/**']],
    ['.ssh/config', ['.ssh/config']],
    ['id_rsa', ['id_rsa']],
  ])('an allow rule naming %s (%j) lifts it', (path, globs) => {
    const result = evaluate(read(path), { rules: [allow(globs, { tool: 'read' })] });
    expect(result).toMatchObject({ decision: 'allow', source: 'rule', rule: { index: 0 } });
  });

  it.each([
    ['.env', ['**']],
    ['.env', ['*']],
    ['src/.env', ['src/**']],
    ['certs/server.pem', ['certs/**']],
    ['.ssh/config', ['**/*']],
  ])('a broad allow rule (%s under %j) does not', (path, globs) => {
    expect(evaluate(read(path), { rules: [allow(globs)] })).toMatchObject({ decision: 'deny', source: 'default' });
  });

  it('neither does an allow rule without paths, a session grant, or the mode', () => {
    const call = read('.env');
    expect(evaluate(call, { rules: [{ decision: 'allow', tool: 'read' }] }).decision).toBe('deny');
    expect(evaluate(call, { rules: [{ decision: 'allow' }], mode: 'bypass' }).decision).toBe('deny');
    expect(evaluate(call, { grants: [grantFor(call)] }).decision).toBe('deny');
  });

  it('the allow rule must match the call: its other conditions and every touched path', () => {
    expect(evaluate(read('.env'), { rules: [allow(['.env'], { tool: 'write' })] }).decision).toBe('deny');
    expect(evaluate(read('.env', 'src/a.ts'), { rules: [allow(['.env'])] }).decision).toBe('deny');
    expect(evaluate(read('.env', 'src/a.ts'), { rules: [allow(['.env', 'src/**'])] }).decision).toBe('allow');
  });

  it("a user's deny rule stays final, and an ask rule still asks", () => {
    const lifted = allow(['.env']);
    expect(evaluate(read('.env'), { rules: [lifted, { decision: 'deny', paths: ['**/.env'] }] })).toMatchObject({
      decision: 'deny',
      source: 'rule',
    });
    expect(evaluate(read('.env'), { rules: [lifted, { decision: 'ask', tool: 'read' }] }).decision).toBe('ask');
  });

  it('the read-only ceiling still holds for writes', () => {
    const rules = [allow(['.env'])];
    expect(evaluate(read('.env'), { mode: 'read-only', rules }).decision).toBe('allow');
    expect(evaluate(write('.env'), { mode: 'read-only', rules })).toMatchObject({ decision: 'deny', source: 'mode' });
  });

  it('globNamesPath: a glob names a file when it does not also match an ordinary file beside it', () => {
    expect(globNamesPath('.env', '.env')).toBe(true);
    expect(globNamesPath('**/.env*', 'a/.env')).toBe(true);
    expect(globNamesPath('src/.*', 'src/.env')).toBe(true);
    expect(globNamesPath('.ssh/*', '.ssh/config')).toBe(true);
    expect(globNamesPath('**', '.env')).toBe(false);
    expect(globNamesPath('src/**', 'src/.env')).toBe(false);
    expect(globNamesPath('docs/**', '.env')).toBe(false);
  });
});

describe('tools that find files themselves (glob, grep)', () => {
  const grep = toolCall('grep', true, ['.']);

  it('skip the files a default rule names', () => {
    const mayAccess = pathFilter([], grep);
    expect(mayAccess('src/a.ts')).toBe(true);
    expect(mayAccess('.env.example')).toBe(true);
    for (const path of ['.env', 'apps/.env.local', 'certs/a.pem', '.ssh/id_rsa', 'id_ed25519']) {
      expect(mayAccess(path), path).toBe(false);
    }
  });

  it('unless an allow rule names them', () => {
    const mayAccess = pathFilter([{ decision: 'allow', tool: 'grep', paths: ['.', '.env'] }], grep);
    expect(mayAccess('.env')).toBe(true);
    expect(mayAccess('apps/.env.local')).toBe(false);
  });
});
