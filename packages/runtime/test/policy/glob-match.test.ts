import fc from 'fast-check';
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import type { PermissionRequest } from '../../src/config/permission-request.js';
import { PermissionRuleSchema } from '../../src/config/permissions.js';
import { globMatches } from '../../src/kernel/match/glob-match.js';
import { evaluatePermission } from '../../src/policy/permissions.js';
import { sensitivePathRule } from '../../src/policy/sensitive-paths.js';

/**
 * Globs of permission rules run on a linear-time engine (kernel/match/glob-match.ts). Seen: picomatch (which rules used)
 * compiles nested extglob stars to a backtracking RegExp; a rule like the one below met with a long path froze the
 * process for minutes inside the permission check — before any tool timeout could act.
 */

const write = (path: string): PermissionRequest => ({
  executor: { type: 'tool', target: 'write' },
  tool: { name: 'write', isReadOnly: false, isDestructive: false, isConcurrencySafe: false, capabilities: [] },
  paths: [path],
});

describe('permission globs in linear time', () => {
  it('a rule with nested extglob stars against a long model-chosen path is decided at once', () => {
    const rule = PermissionRuleSchema.parse({ decision: 'deny', paths: ['**/*(a*)*(a*)*(a*)*(a*)*(a*)*(a*)!'] });
    // picomatch on this input backtracks for minutes: the test would never finish.
    const path = `src/${'a'.repeat(5_000)}`;
    expect(evaluatePermission(write(path), { mode: 'bypass', rules: [rule] }).decision).toBe('allow');
    expect(evaluatePermission(write(`${path}!`), { mode: 'bypass', rules: [rule] }).decision).toBe('deny');
  });

  it('dotfiles are matched by wildcards (a deny on src/** covers src/.env)', () => {
    expect(globMatches(['src/**'], 'src/.env')).toBe(true);
    expect(globMatches(['*.pem'], '.hidden.pem')).toBe(true);
    expect(globMatches(['**/.ssh/**'], 'home/.ssh/id_rsa')).toBe(true);
    expect(globMatches(['docs/*'], 'docs/.draft')).toBe(true);
    expect(globMatches(['docs/*'], 'docs/a/b')).toBe(false);
    expect(sensitivePathRule('config/.env.local')?.name).toBeDefined();
    expect(sensitivePathRule('src/environment.ts')).toBeUndefined();
  });

  it('agrees with picomatch (dot: true) on ordinary globs and paths', () => {
    const globs = [
      '**',
      'src/**',
      '*.ts',
      '**/*.{ts,js}',
      'src/*/index.?s',
      '.env*',
      '**/.env*',
      'a/**/b',
      '[a-c]*.md',
    ];
    const segment = fc.constantFrom('src', 'a', 'b', '.env', '.env.local', 'x.ts', 'y.js', 'index.ts', 'c.md', 'lib');
    fc.assert(
      fc.property(fc.constantFrom(...globs), fc.array(segment, { minLength: 1, maxLength: 4 }), (glob, parts) => {
        const path = parts.join('/');
        expect(globMatches([glob], path), `${glob} vs ${path}`).toBe(picomatch(glob, { dot: true })(path));
      }),
      { numRuns: 500 },
    );
  });

  it('a glob with no linear-time form is a configuration error naming it, not a rule that never matches', () => {
    const parsed = PermissionRuleSchema.safeParse({ decision: 'deny', paths: ['src/!(keep).ts'] });
    expect(parsed.success).toBe(false);
    expect(JSON.stringify(parsed.error?.issues)).toContain('unusable glob \\"src/!(keep).ts\\"');
    expect(parsed.error?.issues[0]?.path).toEqual(['paths', 0]);
    expect(PermissionRuleSchema.safeParse({ decision: 'deny', operation: 'calendar.*' }).success).toBe(true);
  });
});
