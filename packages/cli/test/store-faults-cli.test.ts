import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type CliResult, oarIn, writeJson } from './cli-helpers.js';

/**
 * A store that cannot take writes says why, with its own code (docs/errors.md), and loses nothing it recorded.
 * Seen: a SQLite store on a full disk answered `internal_error` "cannot rollback - no transaction is active" (exit 70):
 * SQLite had rolled the transaction back itself and the explicit rollback's error hid the real one; a store on a
 * read-only mount answered `store_unavailable` where the docs promise `store_read_only`.
 *
 * Each test runs on a small tmpfs of its own, which needs root (mount). In CI the tests run as root and fail loudly if
 * mounting fails; elsewhere they are skipped with a message.
 */

const mounts: string[] = [];
afterAll(() => {
  for (const dir of mounts) {
    try {
      execFileSync('umount', [dir]);
    } catch {
      // Already unmounted (a test that failed half-way may have); the directory is removed below either way.
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A tmpfs of `size` mounted on a new directory, or why there cannot be one here. */
function tmpfs(size: string): string | Error {
  const dir = mkdtempSync(join(tmpdir(), 'oar-tmpfs-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    return error as Error;
  }
  mounts.push(dir);
  return dir;
}

const probe = tmpfs('1m');
const unavailable = probe instanceof Error ? probe : undefined;
if (unavailable && process.env.CI) throw new Error(`mounting a tmpfs is required in CI: ${unavailable.message}`);
if (unavailable) console.warn(`store-faults-cli: skipped, cannot mount a tmpfs here (${unavailable.message})`);

function project(dir: string): void {
  const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
  writeJson(dir, 'script.json', { steps: [answer('one'), answer('two'), answer('three')] });
  writeJson(dir, 'oar.config.json', { model: 'script:script.json' });
}

function structured(result: CliResult): { code: string; message: string; retryable: boolean } {
  const line = result.stderr.trim().split('\n').at(-1) ?? '';
  return (JSON.parse(line) as { error: { code: string; message: string; retryable: boolean } }).error;
}

function events(cwd: string, sessionId: string): { type: string; sequence: number }[] {
  const result = oarIn(cwd, ['events', sessionId, '--store', 'oar.db', '--json']);
  expect(result.code).toBe(0);
  return result.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { type: string; sequence: number });
}

function firstSession(cwd: string): string {
  const run = oarIn(cwd, ['run', '--store', 'oar.db', '--json', 'first']);
  expect(run.code).toBe(0);
  return (JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as { result: { sessionId: string } }).result
    .sessionId;
}

describe.skipIf(unavailable)('a store that cannot take writes', { timeout: 120_000 }, () => {
  it('on a full disk is store_full (exit 74, retryable), and after space is freed nothing is lost', () => {
    const cwd = tmpfs('3m') as string;
    project(cwd);
    const sessionId = firstSession(cwd);
    const before = events(cwd, sessionId);

    // Fill the file system to about 100 KB free: the next turn's writes meet a full disk.
    const free = statfsSync(cwd);
    const filler = join(cwd, 'filler');
    writeFileSync(filler, Buffer.alloc(Math.max(0, free.bavail * free.bsize - 100 * 1024)));
    const full = oarIn(cwd, ['run', '--store', 'oar.db', '--session', sessionId, 'second']);
    expect(full.code).toBe(74);
    expect(structured(full)).toMatchObject({ code: 'store_full', retryable: true });
    expect(full.stderr).not.toContain('internal_error');

    rmSync(filler);
    // Every event recorded before the fault is still there, unchanged.
    expect(events(cwd, sessionId).slice(0, before.length)).toEqual(before);
    expect(oarIn(cwd, ['resume', sessionId, '--store', 'oar.db']).code).toBe(0);
    expect(oarIn(cwd, ['replay', sessionId, '--store', 'oar.db']).code).toBe(0);
    // A turn submitted before the disk filled up was finished by the resume; none is left half-done.
    const after = events(cwd, sessionId);
    const count = (type: string) => after.filter((event) => event.type === type).length;
    expect(count('turn.completed') + count('turn.failed')).toBe(count('turn.submitted'));
    // And the session goes on.
    const next = oarIn(cwd, ['run', '--store', 'oar.db', '--session', sessionId, 'third']);
    expect(next.code).toBe(0);
  });

  it('on a read-only mount is store_read_only (exit 74, not retryable), for reads and writes alike', () => {
    const cwd = tmpfs('4m') as string;
    project(cwd);
    const sessionId = firstSession(cwd);
    execFileSync('mount', ['-o', 'remount,ro', cwd]);
    try {
      for (const args of [
        ['run', '--store', 'oar.db', '--session', sessionId, 'second'],
        ['inspect', sessionId, '--store', 'oar.db'],
      ]) {
        const result = oarIn(cwd, args);
        expect(result.code).toBe(74);
        expect(structured(result)).toMatchObject({ code: 'store_read_only', retryable: false });
      }
    } finally {
      execFileSync('mount', ['-o', 'remount,rw', cwd]);
    }
    // Writable again, the store is as it was.
    expect(oarIn(cwd, ['run', '--store', 'oar.db', '--session', sessionId, 'second']).code).toBe(0);
  });
});
