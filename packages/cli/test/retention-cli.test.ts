import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import SQLite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { assertEventsConform } from '../../runtime/test/support/schemas.js';
import { ndjson, oarIn, outputOf, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * Artifact retention through the real `oar` binary (docs/reliability.md "Artifact retention"): `oar artifacts
 * expire` with `--dry-run` and for real, by the policy of oar.config.json; the current compaction summary is kept;
 * `output.expired` lands in the session's log and conforms; a long-lived `oar worker` sweeps on its own; a missing
 * or invalid policy is a usage error. Age is made by moving the rows' `created_at` back in the SQLite file.
 */

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

function project(retention?: Record<string, unknown>): string {
  const cwd = tempDir('oar-retention-');
  writeJson(cwd, 'script.json', {
    steps: Array.from({ length: 4 }, (_, i) => answer(`Answer ${i + 1}.`)),
    compaction: { steps: [{ text: 'Summary: the notes were read.' }] },
  });
  writeJson(cwd, 'notes.txt', { notes: 'the plan' });
  writeJson(cwd, 'oar.config.json', {
    model: 's',
    models: { s: { provider: 'script', file: 'script.json' } },
    ...(retention ? { retention: { artifacts: retention } } : {}),
  });
  return cwd;
}

/** Run a turn with notes.txt attached; the session id. */
function runWithAttachment(cwd: string, session?: string): string {
  const result = oarIn(cwd, [
    'run',
    ...(session ? ['--session', session] : []),
    '--attach',
    'notes.txt',
    '--json',
    'read the notes',
  ]);
  expect(result.code, result.stderr).toBe(0);
  const last = ndjson(result.stdout).at(-1) as { result: { sessionId: string } };
  return last.result.sessionId;
}

/** Move every artifact of the session `days` back in time. */
function age(cwd: string, sessionId: string, days: number): void {
  const db = new SQLite(join(cwd, '.oar/oar.db'));
  try {
    const createdAt = new Date(Date.now() - days * 86_400_000).toISOString();
    db.prepare('update oar_artifacts set created_at = ? where session_id = ?').run(createdAt, sessionId);
  } finally {
    db.close();
  }
}

function events(cwd: string, sessionId: string): RuntimeEvent[] {
  return ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
}

function attachmentOf(log: RuntimeEvent[]): string {
  const submitted = log.find((e) => e.type === 'turn.submitted');
  const attachments = (submitted?.payload as { attachments?: { artifactId: string }[] } | undefined)?.attachments;
  return attachments?.[0]?.artifactId as string;
}

describe('oar artifacts expire', () => {
  it('lists what would expire, expires it, keeps the compaction summary, and records output.expired', () => {
    const cwd = project({ maxAgeDays: 30 });
    const session = runWithAttachment(cwd);
    const compacted = oarIn(cwd, ['compact', session, '--json']);
    expect(compacted.code, compacted.stderr).toBe(0);
    const summaryId = String((JSON.parse(compacted.stdout) as { summaryRef: string }).summaryRef).slice(
      'artifact://'.length,
    );
    const notes = attachmentOf(events(cwd, session));
    age(cwd, session, 40);

    const dry = oarIn(cwd, ['artifacts', 'expire', '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    const planned = JSON.parse(dry.stdout) as {
      dryRun: boolean;
      expired: { artifactId: string }[];
      kept: { artifactId: string; reason: string }[];
      policy: unknown;
    };
    expect(planned).toMatchObject({ dryRun: true, policy: { maxAgeDays: 30, keep: ['file-version:*'] } });
    expect(planned.expired.map((a) => a.artifactId)).toEqual([notes]);
    expect(planned.kept).toMatchObject([{ artifactId: summaryId, reason: 'compaction_summary' }]);
    expect(events(cwd, session).some((e) => e.type === 'output.expired')).toBe(false);

    const real = oarIn(cwd, ['artifacts', 'expire']);
    expect(real.code, real.stderr).toBe(0);
    expect(real.stdout).toContain('expired 1 artifact(s)');
    expect(real.stdout).toContain(notes);
    expect(real.stdout).toContain(`${summaryId}  compaction_summary`);
    expect(real.stdout).toContain('recorded 1 output.expired event(s)');
    const log = events(cwd, session);
    assertEventsConform(log);
    const expired = log.filter((e) => e.type === 'output.expired');
    expect(expired.map((e) => (e.payload as { artifactIds: string[] }).artifactIds)).toEqual([[notes]]);

    const again = oarIn(cwd, ['artifacts', 'expire', '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ expired: [], events: 0 });
    // The session goes on from its summary; `replay` finds the read models equal to the log.
    expect(runWithAttachment(cwd, session)).toBe(session);
    expect(oarIn(cwd, ['replay', session]).code).toBe(0);
  });

  it('without a policy, or with an invalid one, is a usage error and changes nothing', () => {
    const cwd = project();
    runWithAttachment(cwd);
    const none = oarIn(cwd, ['artifacts', 'expire']);
    expect(none.code).toBe(2);
    expect(JSON.parse(none.stderr.trim())).toMatchObject({ error: { code: 'invalid_option', retryable: false } });
    expect(none.stderr).toContain('--max-age-days');
    for (const args of [
      ['--max-age-days', '0'],
      ['--max-age-days', 'soon'],
      ['--max-age-days', '1', '--keep', '*'],
    ]) {
      const bad = oarIn(cwd, ['artifacts', 'expire', ...args]);
      expect(bad.code, args.join(' ')).toBe(2);
      expect(JSON.parse(bad.stderr.trim())).toMatchObject({ error: { code: 'invalid_option' } });
    }
    // A flag is a policy on its own: nothing is old enough here.
    const flag = oarIn(cwd, ['artifacts', 'expire', '--max-age-days', '1', '--json']);
    expect(flag.code, flag.stderr).toBe(0);
    expect(JSON.parse(flag.stdout)).toMatchObject({ expired: [], policy: { maxAgeDays: 1 } });
  });

  it('a long-lived `oar worker` with a policy sweeps on its own', async () => {
    const cwd = project({ maxAgeDays: 30, sweepEveryMinutes: 0.01 });
    const session = runWithAttachment(cwd);
    const notes = attachmentOf(events(cwd, session));
    age(cwd, session, 40);
    const worker = spawnOar(cwd, ['worker']);
    const exited = outputOf(worker);
    let expired: RuntimeEvent | undefined;
    try {
      const deadline = Date.now() + 30_000;
      while (!expired && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        expired = events(cwd, session).find((e) => e.type === 'output.expired');
      }
    } finally {
      worker.kill('SIGTERM');
    }
    const exit = await exited;
    expect(exit.code, exit.stderr).toBe(0);
    expect((expired?.payload as { artifactIds: string[] } | undefined)?.artifactIds).toEqual([notes]);
    assertEventsConform(events(cwd, session));
  }, 60_000);
});
