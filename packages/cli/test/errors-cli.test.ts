import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type CliResult, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * Every error has its code, and its exit status (docs/errors.md). Seen: exit 70 (`internal_error`) for a malformed
 * PostgreSQL URL and for a directory that cannot be created; `--store /proc/nope/oar.db` looped forever; a
 * `mysql://` URL silently became a SQLite file in a directory called `mysql:`; usage mistakes printed prose.
 */

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function project(): string {
  const cwd = tempDir('oar-errors-');
  dirs.push(cwd);
  writeJson(cwd, 'script.json', {
    steps: [
      {
        protocol: {
          kind: 'act',
          message: 'Writing.',
          calls: [{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'out.md', content: 'x' } }],
        },
      },
      { protocol: { kind: 'answer', message: 'done' } },
    ],
  });
  writeJson(cwd, 'oar.config.json', { model: 'script:script.json' });
  return cwd;
}

function structured(result: CliResult): { code: string; message: string; retryable: boolean; details?: unknown } {
  const line = result.stderr.trim().split('\n').at(-1) ?? '';
  const parsed = JSON.parse(line) as { error: { code: string; message: string; retryable: boolean } };
  expect(Object.keys(parsed.error)).toEqual(expect.arrayContaining(['code', 'message', 'retryable']));
  return parsed.error;
}

describe('store and input errors have their own codes and exit statuses', { timeout: 120_000 }, () => {
  const cwd = project();
  it.each([
    [
      'a directory that cannot be created (it used to loop forever)',
      ['--store', '/proc/nope/oar.db'],
      'store_unavailable',
      74,
    ],
    ['an unsupported scheme', ['--store', 'mysql://localhost/db'], 'unsupported_store', 2],
    ['a malformed PostgreSQL URL', ['--store', 'postgres://user:pw@[::1'], 'invalid_store', 2],
    ['an unreachable PostgreSQL server', ['--store', 'postgres://user:s3cret@127.0.0.1:1/db'], 'store_unavailable', 74],
    ['a store path under a file', ['--store', 'oar.config.json/x.db'], 'store_unavailable', 74],
    ['a workspace that is a file', ['--workspace', 'oar.config.json'], 'workspace_unavailable', 2],
  ])('%s', (_what, flags, code, exit) => {
    const result = oarIn(cwd, ['run', ...flags, 'hello']);
    expect(result.code).toBe(exit);
    const error = structured(result);
    expect(error.code).toBe(code);
    // A connection string's password never appears in an error.
    expect(result.stderr).not.toContain('s3cret');
    expect(result.stderr).not.toContain(':pw@');
  });

  it('following the events of an unknown session is session_not_found, not an endless poll', () => {
    const result = oarIn(cwd, ['events', 'ses_nope', '--after', '3', '--follow']);
    expect(result.code).toBe(2);
    expect(structured(result).code).toBe('session_not_found');
  });

  it('a usage mistake is a structured error with exit 2, not prose', () => {
    for (const args of [['run', '--no-such-flag', 'x'], ['respond'], ['nope']]) {
      const result = oarIn(cwd, args);
      expect(result.code).toBe(2);
      expect(structured(result).code).toBe('usage_error');
    }
  });
});

describe('answering a decision', { timeout: 120_000 }, () => {
  it('twice says it was already resolved (how and when); a wrong id lists the pending ones', () => {
    const cwd = project();
    const store = join(cwd, 'oar.db');
    const run = oarIn(cwd, ['run', '--store', store, '--json', 'write it']);
    expect(run.code).toBe(3);
    const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as { result: { sessionId: string } };
    const sessionId = result.result.sessionId;
    // The decision shows what the tool would do and why it asks (text output of run and inspect).
    const inspect = oarIn(cwd, ['inspect', sessionId, '--store', store]);
    expect(inspect.stdout).toContain('input: {"filePath":"out.md","content":"x"}');
    expect(inspect.stdout).toMatch(/(rule|mode): /);
    const show = oarIn(cwd, ['inspect', sessionId, '--store', store, '--json']);
    const actionId = /"actionId":\s*"([^"]+)"/.exec(show.stdout)?.[1] ?? '';
    expect(actionId).not.toBe('');

    const wrong = oarIn(cwd, ['respond', sessionId, 'act_nope', 'approve', '--store', store]);
    expect(wrong.code).toBe(2);
    const notFound = structured(wrong);
    expect(notFound.code).toBe('action_not_found');
    expect(notFound.message).toContain(actionId);
    expect(JSON.stringify(notFound.details)).toContain(actionId);

    const first = oarIn(cwd, ['respond', sessionId, actionId, 'deny', '--store', store]);
    expect(first.code).not.toBe(2);
    const again = oarIn(cwd, ['respond', sessionId, actionId, 'approve', '--store', store]);
    expect(again.code).toBe(2);
    const resolved = structured(again);
    expect(resolved.code).toBe('decision_already_resolved');
    expect(resolved.details).toMatchObject({ actionId, decision: 'deny', resolvedAt: expect.any(String) });
  });
});
