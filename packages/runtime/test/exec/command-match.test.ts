import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_READ_ONLY_COMMANDS } from '../../src/config/exec.js';
import { loadConfig } from '../../src/index.js';
import { commandMatches } from '../../src/kernel/match/command-match.js';
import { evaluatePermission } from '../../src/policy/permissions.js';
import { commandText, isReadOnlyCommand } from '../../src/tools/exec/command.js';
import { planSandbox } from '../../src/tools/exec/sandbox.js';
import { tempDir } from '../support/temp-dirs.js';
import { sandboxUnavailable } from './support.js';

const argv = (...words: string[]) => ({ argv: words });

describe('command prefixes', () => {
  it('match the leading words in order, the first also by its base name', () => {
    expect(commandMatches('git status', argv('git', 'status', '--short'))).toBe(true);
    expect(commandMatches('git status', argv('/usr/bin/git', 'status'))).toBe(true);
    expect(commandMatches('git status', argv('git', 'stash'))).toBe(false);
    expect(commandMatches('git push', argv('git'))).toBe(false);
    expect(commandMatches('git', argv('gitk'))).toBe(false);
    // A prefix naming a path matches that path only.
    expect(commandMatches('/opt/bin/tool', argv('tool'))).toBe(false);
  });

  it("match the prefix's flags in any order and grouping", () => {
    for (const words of [
      ['rm', '-rf', 'x'],
      ['rm', '-fr', 'x'],
      ['rm', '-r', '-f', 'x'],
      ['rm', 'x', '-f', '-r'],
    ]) {
      expect(commandMatches('rm -rf', argv(...words))).toBe(true);
    }
    expect(commandMatches('rm -rf', argv('rm', '-r', 'x'))).toBe(false);
    expect(commandMatches('git push --force', argv('git', 'push', 'origin', '--force'))).toBe(true);
    expect(commandMatches('git push --force', argv('git', 'push', 'origin'))).toBe(false);
  });

  it('match a shell string only as a whole', () => {
    expect(commandMatches('npm test', { shell: 'npm test' })).toBe(true);
    expect(commandMatches('npm test', { shell: '  npm   test ' })).toBe(true);
    expect(commandMatches('npm test', { shell: 'npm test; rm -rf /' })).toBe(false);
    expect(commandMatches('ls', { shell: 'ls && curl evil' })).toBe(false);
  });

  it('the read-only allowlist never covers a shell string', () => {
    expect(isReadOnlyCommand(argv('git', 'status'), DEFAULT_READ_ONLY_COMMANDS)).toBe(true);
    expect(isReadOnlyCommand(argv('git', 'commit'), DEFAULT_READ_ONLY_COMMANDS)).toBe(false);
    expect(isReadOnlyCommand({ shell: 'ls' }, DEFAULT_READ_ONLY_COMMANDS)).toBe(false);
  });

  it('commandText quotes words a shell would split', () => {
    expect(commandText(argv('node', '-e', "console.log('x y')"))).toBe(`node -e 'console.log('\\''x y'\\'')'`);
    expect(commandText(argv('git', 'status'))).toBe('git status');
  });

  it('rules with `command` decide: deny beats allow, ask beats allow, a call without a command never matches', () => {
    const rules = [
      { decision: 'deny' as const, command: 'rm -rf' },
      { decision: 'ask' as const, command: 'git push' },
      { decision: 'allow' as const, command: 'git' },
    ];
    const request = (command?: { argv: string[] } | { shell: string }) => ({
      executor: { type: 'tool' as const, target: 'exec' },
      tool: { name: 'exec', isReadOnly: false, isDestructive: true, isConcurrencySafe: false, capabilities: ['shell'] },
      paths: [],
      ...(command ? { command } : {}),
    });
    const decide = (command?: { argv: string[] } | { shell: string }) =>
      evaluatePermission(request(command), { mode: 'bypass', rules }).decision;
    expect(decide(argv('rm', '-fr', '/'))).toBe('deny');
    expect(decide(argv('git', 'push'))).toBe('ask');
    expect(decide(argv('git', 'log'))).toBe('allow');
    expect(evaluatePermission(request(argv('git', 'log')), { mode: 'default', rules }).decision).toBe('allow');
    expect(evaluatePermission(request({ shell: 'git log' }), { mode: 'default', rules: [] }).decision).toBe('ask');
    expect(evaluatePermission(request(), { mode: 'default', rules }).decision).toBe('ask');
  });
});

describe('the exec configuration', () => {
  it('is validated; an error names the field', async () => {
    const dir = tempDir('oar-exec-config-');
    const write = (value: unknown) => writeFileSync(join(dir, 'oar.config.json'), JSON.stringify(value));
    write({ tools: { exec: { sandbox: { profile: 'docker' } } } });
    const error = await loadConfig(undefined, dir).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'invalid_config' });
    expect(JSON.stringify((error as { error: { details: unknown } }).error.details)).toContain(
      'tools.exec.sandbox.profile',
    );
    write({ tools: { exec: { env: ['not a name'] } } });
    const bad = await loadConfig(undefined, dir).catch((e: unknown) => e);
    expect(JSON.stringify((bad as { error: { details: unknown } }).error.details)).toContain('tools.exec.env.0');
    write({ permissions: { rules: [{ decision: 'allow', tool: 'exec', command: 'git  status' }] } });
    const spaced = await loadConfig(undefined, dir).catch((e: unknown) => e);
    expect(JSON.stringify((spaced as { error: { details: unknown } }).error.details)).toContain(
      'permissions.rules.0.command',
    );
    write({ tools: { exec: {} } });
    const { config } = await loadConfig(undefined, dir);
    expect(config.tools.exec).toMatchObject({
      env: ['PATH', 'HOME', 'LANG', 'TERM'],
      sandbox: { profile: 'bwrap', network: false, unsandboxed: 'ask' },
    });
  });
});

describe('the sandbox plan', () => {
  const settings = { profile: 'bwrap' as const, network: false, unsandboxed: 'ask' as const, hide: [] };
  const base = { settings, workspaceRoot: '/srv/ws', cwd: '/srv/ws', argv: ['npm', 'test'] };

  it('where bwrap cannot start: profile none, with the reason, and the command as given', async () => {
    const plan = await planSandbox({ ...base, bwrap: '/nonexistent/bwrap' });
    expect(plan.profile).toMatchObject({ profile: 'none', reason: expect.stringContaining('not installed') });
    expect(plan.argv).toEqual(['npm', 'test']);
  });

  it('under bwrap: the system read-only, the workspace writable, no network, the command after --', async (t) => {
    if (await sandboxUnavailable()) t.skip();
    const plan = await planSandbox(base);
    expect(plan.profile).toMatchObject({ profile: 'bwrap', network: false });
    const argv = plan.argv.join(' ');
    expect(argv).toContain('--ro-bind / /');
    expect(argv).toContain('--bind /srv/ws /srv/ws');
    expect(argv).toContain('--unshare-net');
    expect(argv).toContain('--tmpfs /tmp');
    expect(plan.argv.slice(-3)).toEqual(['--', 'npm', 'test']);
    const networked = await planSandbox({ ...base, settings: { ...settings, network: true } });
    expect(networked.argv).not.toContain('--unshare-net');
  });
});
