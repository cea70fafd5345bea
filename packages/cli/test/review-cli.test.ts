import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent, SessionSnapshot } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { type CliResult, ndjson, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar export SESSION --review` through the real binary (issue 29 §4, docs/review.md): the review pack of a session
 * or one turn, as JSON or Markdown, recorded in the session (`evidence.changed`, listed by `oar inspect --json`);
 * an unknown turn and a misplaced option are usage errors.
 */

const act = (calls: Record<string, unknown>[]) => ({ protocol: { kind: 'act', message: 'Working.', calls } });
const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
const edit = (id: string, oldString: string, newString: string) => ({
  id,
  type: 'tool',
  name: 'edit',
  args: { filePath: 'notes.txt', oldString, newString },
});

function errorOf(result: CliResult): { code: string; message: string } {
  const line = result.stderr.trim().split('\n').at(-1) ?? '';
  return (JSON.parse(line) as { error: { code: string; message: string } }).error;
}

describe('oar export --review', { timeout: 300_000 }, () => {
  it('the review of a session and of one turn, JSON and Markdown, recorded; unknown ids and bad options refused', () => {
    const cwd = tempDir('oar-review-');
    writeJson(cwd, 'script.json', {
      steps: [
        act([{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'notes.txt', content: 'alpha\nbeta\n' } }]),
        act([edit('e1', 'beta', 'BETA')]),
        answer('Written.'),
        act([edit('e2', 'alpha', 'ALPHA')]),
        answer('Shouted.'),
      ],
    });
    const first = oarIn(cwd, ['run', 'write the notes', '--model', 'script:script.json', '--approve-all']);
    expect(first.code, first.stderr).toBe(0);
    const [session] = JSON.parse(oarIn(cwd, ['sessions', '--json']).stdout) as { sessionId: string }[];
    const sessionId = session?.sessionId as string;
    const second = oarIn(cwd, ['run', 'shout the first line', '--session', sessionId, '--approve-all']);
    expect(second.code, second.stderr).toBe(0);
    const onDisk = readFileSync(join(cwd, 'notes.txt'), 'utf8');
    expect(onDisk).toBe('ALPHA\nBETA\n');
    const events = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
    const turns = events.filter((e) => e.type === 'turn.submitted').map((e) => e.turnId as string);
    expect(turns).toHaveLength(2);
    const resolvedBy = events
      .filter((e) => e.type === 'action.resolved')
      .map((e) => (e.payload as { resolvedBy?: string }).resolvedBy);
    expect(resolvedBy).toHaveLength(3);

    // The whole session, as Markdown: the file OAR created, from nothing to what is on disk.
    const md = oarIn(cwd, ['export', sessionId, '--review', '--markdown']);
    expect(md.code, md.stderr).toBe(0);
    expect(md.stdout).toMatch(/^# Review of session `ses_\w+`\n/);
    for (const heading of ['Summary', 'Changes', 'Approvals', 'Commands', 'Costs']) {
      expect(md.stdout).toContain(`\n## ${heading}\n`);
    }
    const added = onDisk
      .trimEnd()
      .split('\n')
      .map((line) => `+${line}`);
    expect(md.stdout).toContain(['--- /dev/null', '+++ b/notes.txt', '@@ -0,0 +1,2 @@', ...added].join('\n'));
    expect(md.stdout).toContain(`| approve | ${resolvedBy[0]} | write |`);

    // One turn, as JSON: only its edit, diffed against the content the first turn left.
    const turn = oarIn(cwd, ['export', sessionId, '--review', '--turn', turns[1] as string]);
    expect(turn.code, turn.stderr).toBe(0);
    const review = JSON.parse(turn.stdout) as {
      format: string;
      scope: Record<string, string>;
      changes: { path: string; diff: string; calls: unknown[] }[];
      approvals: { decision: string; resolvedBy: string; turnId: string }[];
      turns: { turnId: string; answer: string }[];
    };
    expect(review.format).toBe('oar.review.v1');
    expect(review.scope).toMatchObject({ sessionId, turnId: turns[1] });
    expect(review.turns).toEqual([expect.objectContaining({ turnId: turns[1], answer: 'Shouted.' })]);
    expect(review.changes).toHaveLength(1);
    expect(review.changes[0]?.calls).toHaveLength(1);
    expect(review.changes[0]?.diff).toBe('--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n-alpha\n+ALPHA\n BETA');
    expect(review.approvals).toEqual([{ ...review.approvals[0], decision: 'approve', resolvedBy: resolvedBy[2] }]);

    const out = join(cwd, 'review.md');
    const written = oarIn(cwd, [
      'export',
      sessionId,
      '--review',
      '--markdown',
      '--turn',
      turns[0] as string,
      '--out',
      out,
    ]);
    expect(written.code, written.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toContain(`turn \`${turns[0]}\``);

    // Refused: an unknown turn (nothing recorded), a scope option without --review, --review with --evidence.
    const unknown = oarIn(cwd, ['export', sessionId, '--review', '--turn', 'turn_nope']);
    expect([unknown.code, errorOf(unknown).code]).toEqual([2, 'turn_not_found']);
    const loose = oarIn(cwd, ['export', sessionId, '--turn', turns[0] as string]);
    expect([loose.code, errorOf(loose).code]).toEqual([2, 'invalid_option']);
    const both = oarIn(cwd, ['export', sessionId, '--review', '--evidence']);
    expect([both.code, errorOf(both).code]).toEqual([2, 'invalid_option']);

    // Each export that succeeded is a fact of the session, and the snapshot lists its ref.
    const after = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
    const facts = after.filter((e) => e.type === 'evidence.changed');
    expect(facts.map((e) => (e.payload as { kind: string }).kind)).toEqual(['review', 'review', 'review']);
    const inspected = oarIn(cwd, ['inspect', sessionId, '--json']);
    const snapshot = JSON.parse(inspected.stdout) as SessionSnapshot;
    expect(snapshot.evidenceRefs).toEqual(facts.map((e) => (e.payload as { ref: string }).ref));
    expect(snapshot.threads[0]?.evidenceSummary.reviewRefs).toEqual(snapshot.evidenceRefs);
    expect(snapshot.telemetrySummary.status).toBe('unavailable');
  });
});
