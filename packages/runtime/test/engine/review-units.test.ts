import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { unifiedDiff } from '../../src/control-plane/review-render.js';
import { reduceSession, type SessionState } from '../../src/read-models/session.js';
import { tempDir } from '../support/temp-dirs.js';

/**
 * The review's diffs are real unified diffs: `patch` applied to the content before gives the content after, for
 * random texts (fixed seed; OAR_FUZZ_SEED explores more). And an evidence fact of a log written before this
 * format (`kind: evidence_pack`) still counts as an evidence export.
 */
const SEED = Number(process.env.OAR_FUZZ_SEED ?? 20_151_115);
const patchMissing = spawnSync('patch', ['--version']).status !== 0;

describe('unifiedDiff', () => {
  it.skipIf(patchMissing)('is applied by patch(1) to give the new content', () => {
    const dir = tempDir('oar-diff-');
    const line = fc.constantFrom('a', 'b', 'c', 'd', '', ' x', 'e\te', '-', '+', '\\ x');
    const text = fc
      .tuple(fc.array(line, { maxLength: 30 }), fc.boolean())
      .map(([lines, newline]) => (lines.length === 0 ? '' : `${lines.join('\n')}${newline ? '\n' : ''}`));
    fc.assert(
      fc.property(text, text, (before, after) => {
        const diff = unifiedDiff('f.txt', before, after);
        if (before === after) return diff === '';
        const file = join(dir, 'f.txt');
        writeFileSync(file, before);
        writeFileSync(join(dir, 'f.patch'), `${diff}\n`);
        const applied = spawnSync('patch', ['--quiet', '--force', file, join(dir, 'f.patch')], { encoding: 'utf8' });
        expect(applied.status, `${applied.stdout}${applied.stderr}\n${diff}`).toBe(0);
        expect(readFileSync(file, 'utf8')).toBe(after);
        return true;
      }),
      { seed: SEED, numRuns: Number(process.env.OAR_FUZZ_RUNS ?? 150) },
    );
  });

  it('shows only the changed lines with three lines of context', () => {
    const before = `${Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join('\n')}\n`;
    const after = before.replace('line 10\n', 'line ten\n');
    expect(unifiedDiff('f.txt', before, after)).toBe(
      [
        '--- a/f.txt',
        '+++ b/f.txt',
        '@@ -7,7 +7,7 @@',
        ' line 7',
        ' line 8',
        ' line 9',
        '-line 10',
        '+line ten',
        ' line 11',
        ' line 12',
        ' line 13',
      ].join('\n'),
    );
  });
});

describe('the evidence reducer', () => {
  const base = { runtimeId: 'rt_1', sessionId: 'ses_1', schemaVersion: 'oar-0.1.0', eventId: 'e' };
  const event = (sequence: number, type: string, fields: Record<string, unknown>) =>
    ({ ...base, sequence, type, timestamp: `2026-01-01T00:00:0${sequence}.000Z`, ...fields }) as RuntimeEvent;

  it('counts an evidence_pack of an older log as an evidence export, and ignores evidence it does not know', () => {
    let state: SessionState | undefined;
    for (const e of [
      event(1, 'session.created', { payload: {} }),
      event(2, 'evidence.changed', {
        evidenceId: 'ev_old',
        threadId: 'thr_1',
        payload: { kind: 'evidence_pack', events: 1, ref: 'runtime://evidence/ev_old' },
      }),
      event(3, 'evidence.changed', { evidenceId: 'ev_ext', payload: { packRef: 'evidence://elsewhere' } }),
      event(4, 'action.resolved', { threadId: 'thr_1', actionId: 'a', payload: { decision: 'deny' } }),
    ]) {
      state = reduceSession(state, e);
    }
    expect(state?.evidence?.exports).toEqual([
      {
        kind: 'evidence',
        exportId: 'ev_old',
        ref: 'runtime://evidence/ev_old',
        sequence: 2,
        at: '2026-01-01T00:00:02.000Z',
      },
    ]);
    expect(state?.evidence?.audit).toEqual({
      thr_1: { decisions: { 'deny by user': 1 }, sandboxViolations: 0, redactions: 0 },
    });
  });
});
