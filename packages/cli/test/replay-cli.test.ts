import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { assertEventsConform } from '../../runtime/test/support/schemas.js';
import { ndjson, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar replay --repair` through the real binary, on a real SQLite file whose read models were made to differ from
 * the log the way an older store's do (a session row from before the session projection kept `evidence`, a thread
 * row an older reducer wrote): `oar replay` reports them (exit 1); `--repair` rewrites them from the log and records
 * `history.reconstructed` and `snapshot.repaired` (exit 0); the next `oar replay` finds nothing, and a second repair
 * writes nothing.
 */

const act = (calls: unknown[]) => ({ protocol: { kind: 'act', message: 'Reading.', calls } });
const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

function events(cwd: string, sessionId: string): RuntimeEvent[] {
  const run = oarIn(cwd, ['events', sessionId, '--json']);
  expect(run.code, run.stderr).toBe(0);
  return ndjson(run.stdout) as unknown as RuntimeEvent[];
}

describe('oar replay --repair', () => {
  it('rewrites the read models that differ from the log, records it, and the next replay is equal', () => {
    const cwd = tempDir('oar-replay-');
    writeFileSync(join(cwd, 'notes.txt'), 'remember the milk\n');
    writeJson(cwd, 'script.json', {
      steps: [act([{ id: 'r1', type: 'tool', name: 'read', args: { filePath: 'notes.txt' } }]), answer('Milk.')],
    });
    writeJson(cwd, 'oar.config.json', { model: 'script:script.json' });
    const run = oarIn(cwd, ['run', '--json', 'what do the notes say?']);
    expect(run.code, run.stderr).toBe(0);
    const sessionId = (ndjson(run.stdout).at(-1) as { result: { sessionId: string } }).result.sessionId;
    const exported = oarIn(cwd, ['export', sessionId, '--evidence', '--out', join(cwd, 'evidence.json')]);
    expect(exported.code, exported.stderr).toBe(0);
    const logged = events(cwd, sessionId);
    const threadId = logged.find((e) => e.type === 'thread.started')?.threadId as string;
    expect(JSON.parse(oarIn(cwd, ['replay', sessionId]).stdout)).toMatchObject({ equal: true });

    // The store as an older version left it.
    const db = new Database(join(cwd, '.oar/oar.db'));
    try {
      db.prepare(`update oar_read_models set body = json_remove(body, '$.evidence') where kind = 'session'`).run();
      db.prepare(
        `update oar_read_models set body = json_set(body, '$.status', 'running'), status = 'running' where kind = 'thread'`,
      ).run();
    } finally {
      db.close();
    }

    const found = oarIn(cwd, ['replay', sessionId]);
    expect(found.code, found.stderr).toBe(1);
    const report = {
      equal: false,
      differences: ['session', `thread ${threadId}`],
      contradictions: [],
      events: logged.length,
    };
    expect(JSON.parse(found.stdout)).toEqual(report);

    const repaired = oarIn(cwd, ['replay', sessionId, '--repair']);
    expect(repaired.code, repaired.stderr).toBe(0);
    const readModels = [
      { kind: 'session', key: sessionId, change: 'differed' },
      { kind: 'thread', key: threadId, change: 'differed' },
    ];
    expect(JSON.parse(repaired.stdout)).toEqual({
      ...report,
      repair: {
        status: 'repaired',
        readModels,
        counts: { differed: 2, missing: 0, extra: 0 },
        recorded: [
          { type: 'history.reconstructed', sequence: logged.length + 1 },
          { type: 'snapshot.repaired', sequence: logged.length + 2 },
        ],
      },
    });

    // Recorded like every fact: the published schemas, gap-free after the rest of the log.
    const log = events(cwd, sessionId);
    assertEventsConform(log);
    const [reconstructed, snapshotRepaired] = log.slice(-2);
    expect(reconstructed).toMatchObject({
      type: 'history.reconstructed',
      payload: { reason: 'repair', eventCount: logged.length, throughSequence: logged.length },
    });
    expect(snapshotRepaired).toMatchObject({
      type: 'snapshot.repaired',
      payload: { throughSequence: logged.length, readModels, threadIds: [threadId] },
    });
    const inspected = JSON.parse(oarIn(cwd, ['inspect', sessionId, '--json']).stdout) as {
      threads: { status: string; evidenceSummary: { evidenceRefs: string[] } }[];
    };
    expect(inspected.threads[0]?.status).toBe('idle');
    expect(inspected.threads[0]?.evidenceSummary.evidenceRefs).toHaveLength(1);

    const again = oarIn(cwd, ['replay', sessionId]);
    expect(again.code, again.stdout).toBe(0);
    expect(JSON.parse(again.stdout)).toEqual({
      equal: true,
      differences: [],
      contradictions: [],
      events: logged.length + 2,
    });
    // Nothing left to repair: nothing written.
    const idle = oarIn(cwd, ['replay', sessionId, '--repair']);
    expect(idle.code, idle.stderr).toBe(0);
    expect(JSON.parse(idle.stdout)).toMatchObject({ equal: true, repair: { status: 'not_needed' } });
    expect(events(cwd, sessionId)).toHaveLength(logged.length + 2);

    // An unknown session is one structured error (exit 2), as without --repair.
    const unknown = oarIn(cwd, ['replay', 'ses_nope', '--repair']);
    expect(unknown.code).toBe(2);
    expect(JSON.parse(unknown.stderr).error.code).toBe('session_not_found');
  });
});
