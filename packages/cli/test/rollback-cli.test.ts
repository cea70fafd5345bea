import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type CliResult, ndjson, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar rollback` through the real binary (docs/engine.md "Rolling back a thread"): two turns of `oar run` that write
 * a file, a dry run, a conflict that changes nothing, and the rollback that restores the file and cuts the history.
 */

function ok(result: CliResult, what: string, code = 0): CliResult {
  expect(result.code, `${what}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`).toBe(code);
  return result;
}

const write = (id: string, content: string) => ({
  protocol: {
    kind: 'act',
    message: 'Writing.',
    calls: [{ id, type: 'tool', name: 'write', args: { filePath: 'notes.txt', content } }],
  },
});
const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

describe('oar rollback', { timeout: 120_000 }, () => {
  it('plans, refuses a file changed by hand, then rolls the thread and its file back', () => {
    const cwd = tempDir('oar-rollback-');
    writeFileSync(join(cwd, 'notes.txt'), 'zero\n');
    // One script for the session: its cursor is the thread's model calls, which a rollback does not rewind.
    writeJson(cwd, 'script.json', {
      steps: [
        write('w1', 'one\n'),
        answer('one'),
        write('w2', 'two\n'),
        answer('two'),
        write('w3', 'three\n'),
        answer('3'),
      ],
    });
    writeJson(cwd, 'oar.config.json', { model: 'script:script.json', permissions: { mode: 'accept-edits' } });
    const first = ok(oarIn(cwd, ['run', 'first']), 'oar run');
    const sessionId = (/session (ses_\w+)/.exec(first.stdout) as RegExpExecArray)[1] as string;
    ok(oarIn(cwd, ['run', '--session', sessionId, 'second']), 'oar run --session');
    const file = join(cwd, 'notes.txt');
    expect(readFileSync(file, 'utf8')).toBe('two\n');
    const events = ndjson(ok(oarIn(cwd, ['events', sessionId, '--json']), 'oar events').stdout) as {
      type: string;
      turnId?: string;
    }[];
    const turns = events.filter((e) => e.type === 'turn.started').map((e) => e.turnId as string);
    expect(turns).toHaveLength(2);

    const plan = ok(oarIn(cwd, ['rollback', sessionId, turns[1] as string, '--dry-run']), 'oar rollback --dry-run');
    expect(plan.stdout).toContain(`would remove 1 turn(s)`);
    expect(plan.stdout).toMatch(/restore\s+notes\.txt/);
    expect(readFileSync(file, 'utf8')).toBe('two\n');

    writeFileSync(file, 'by hand\n');
    const refused = ok(oarIn(cwd, ['rollback', sessionId, turns[1] as string]), 'oar rollback (conflict)', 2);
    const error = (JSON.parse(refused.stderr.trim().split('\n').at(-1) ?? '{}') as { error: { code: string } }).error;
    expect(error.code).toBe('rollback_conflict');
    expect(readFileSync(file, 'utf8')).toBe('by hand\n');
    const conflicted = ok(oarIn(cwd, ['rollback', sessionId, turns[1] as string, '--dry-run']), 'dry run', 1);
    expect(conflicted.stdout).toContain('conflict  notes.txt');

    writeFileSync(file, 'two\n');
    const done = ok(oarIn(cwd, ['rollback', sessionId, turns[1] as string, '--json']), 'oar rollback');
    expect(JSON.parse(done.stdout)).toMatchObject({ status: 'completed', removedTurns: [turns[1]] });
    expect(readFileSync(file, 'utf8')).toBe('one\n');
    const inspect = JSON.parse(ok(oarIn(cwd, ['inspect', sessionId, '--json']), 'oar inspect').stdout) as {
      threads: { turns: { turnId: string }[] }[];
    };
    expect(inspect.threads[0]?.turns.map((t) => t.turnId)).toEqual([turns[0]]);
    // The history goes on from the kept turn.
    ok(oarIn(cwd, ['run', '--session', sessionId, 'again']), 'oar run after');
    expect(readFileSync(file, 'utf8')).toBe('three\n');
    expect(existsSync(file)).toBe(true);
  });
});
