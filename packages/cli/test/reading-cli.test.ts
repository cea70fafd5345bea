import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type CliResult, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * Commands that only read, or continue a session that must exist, never create a store (issue 25: `oar inspect` in
 * a folder without one silently made `.oar/oar.db` there); "not found" names the store searched and how to point
 * at another, once and plainly.
 */

function structured(result: CliResult): { code: string; message: string; details: Record<string, unknown> } {
  const line = result.stderr.trim().split('\n').at(-1) ?? '';
  return (JSON.parse(line) as { error: { code: string; message: string; details: Record<string, unknown> } }).error;
}

describe('reading commands over a missing store', { timeout: 300_000 }, () => {
  const READERS: string[][] = [
    ['inspect', 'ses_nope'],
    ['environment', 'ses_nope'],
    ['events', 'ses_nope'],
    ['events', 'ses_nope', '--follow'],
    ['replay', 'ses_nope'],
    ['export', 'ses_nope'],
    ['session', 'show', 'ses_nope'],
    ['wait', 'ses_nope'],
    ['interrupt', 'ses_nope'],
    ['respond', 'ses_nope', 'act_nope', 'approve'],
    ['limit', 'ses_nope', '--turn-tokens', '10'],
    ['session', 'update', 'ses_nope', '--permission-mode', 'bypass'],
    ['resume', 'ses_nope'],
    ['keys', 'list'],
    ['workspaces', 'list'],
  ];

  it.each(READERS)('oar %s … in an empty folder: store_not_found naming the path, nothing created', (...args) => {
    const cwd = tempDir('oar-reading-');
    const result = oarIn(cwd, args);
    expect(result.code, result.stderr).toBe(2);
    const error = structured(result);
    const path = join(cwd, '.oar/oar.db');
    expect(error.code).toBe('store_not_found');
    expect(error.message).toBe(`no OAR store at ${path} (nothing was created there)`);
    expect(error.details).toMatchObject({ store: path, hint: expect.stringMatching(/--store URL.*OAR_STORE/) });
    expect(existsSync(join(cwd, '.oar'))).toBe(false);
  });

  it('a --store path that does not exist is not created either, nor its directory', () => {
    const cwd = tempDir('oar-reading-');
    const result = oarIn(cwd, ['inspect', 'ses_nope', '--store', 'elsewhere/x.db']);
    expect(result.code).toBe(2);
    expect(structured(result).details.store).toBe(join(cwd, 'elsewhere/x.db'));
    expect(existsSync(join(cwd, 'elsewhere'))).toBe(false);
  });

  it('listings list nothing and say where they looked, creating nothing', () => {
    const cwd = tempDir('oar-reading-');
    const path = join(cwd, '.oar/oar.db');
    const sessions = oarIn(cwd, ['sessions']);
    expect(sessions.code).toBe(0);
    expect(sessions.stdout).toBe(`no sessions: no store at ${path} (--store URL or OAR_STORE names another)\n`);
    expect(JSON.parse(oarIn(cwd, ['sessions', '--json']).stdout)).toEqual([]);
    const resume = oarIn(cwd, ['resume']);
    expect(resume.code).toBe(0);
    expect(resume.stdout).toBe(`nothing to resume: no store at ${path} (--store URL or OAR_STORE names another)\n`);
    expect(existsSync(join(cwd, '.oar'))).toBe(false);
  });
});

describe('an unknown session in an existing store', { timeout: 300_000 }, () => {
  it('says once that the session is not in that store, and how to look in another', () => {
    const cwd = tempDir('oar-reading-');
    writeJson(cwd, 'script.json', { steps: [{ protocol: { kind: 'answer', message: 'hi' } }] });
    mkdirSync(join(cwd, 'stores'));
    const store = join(cwd, 'stores/team.db');
    const run = oarIn(cwd, ['run', '--model', 'script:script.json', '--store', store, '--json', 'hello']);
    expect(run.code, run.stderr).toBe(0);
    for (const args of [
      ['inspect', 'ses_nope', '--store', store],
      ['events', 'ses_nope', '--store', store],
      ['wait', 'ses_nope', '--store', store],
    ]) {
      const result = oarIn(cwd, args);
      expect(result.code, result.stderr).toBe(2);
      const error = structured(result);
      expect(error.code).toBe('session_not_found');
      expect(error.message).toBe(`no session ses_nope in the store ${store}`);
      expect(error.details).toMatchObject({
        sessionId: 'ses_nope',
        store,
        hint: expect.stringMatching(/oar sessions.*--store URL.*OAR_STORE/),
      });
      // One error line, nothing else on stderr.
      expect(result.stderr.trim().split('\n')).toHaveLength(1);
    }
    // OAR_STORE points at it as --store does.
    const viaEnv = oarIn(cwd, ['inspect', 'ses_nope'], undefined, { OAR_STORE: store });
    expect(structured(viaEnv).details.store).toBe(store);
    expect(existsSync(join(cwd, '.oar'))).toBe(false);
  });
});
