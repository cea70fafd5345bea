import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ndjson, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar run --attach FILE` through the real binary (docs/engine.md "Turn attachments"): files become artifacts of the
 * session recorded on the turn, text as text and anything else as bytes; a file that cannot be read is a usage
 * error before anything is recorded.
 */

function project() {
  const dir = tempDir('oar-attach-');
  writeJson(dir, 'script.json', { steps: [{ protocol: { kind: 'answer', message: 'I saw the files.' } }] });
  writeJson(dir, 'oar.config.json', { model: 'script:script.json' });
  writeFileSync(join(dir, 'notes.md'), '# Notes\n\nShip on Friday.\n');
  writeFileSync(join(dir, 'chart.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 255, 1]));
  return dir;
}

describe('oar run --attach', () => {
  it('records the files on the turn as artifacts, shown in inspect', () => {
    const dir = project();
    const run = oarIn(dir, ['run', '--attach', 'notes.md', '--attach', 'chart.png', 'what do they say?', '--json']);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const events = ndjson(run.stdout);
    const submitted = events.find((e) => e.type === 'turn.submitted');
    const recorded = submitted?.payload as { attachments: Record<string, unknown>[] };
    const attachments = recorded.attachments;
    expect(attachments.map((a) => [a.name, a.mimeType, a.size])).toEqual([
      ['notes.md', 'text/markdown', 25],
      ['chart.png', 'image/png', 7],
    ]);
    expect(events.filter((e) => e.type === 'artifact.changed').map((e) => e.artifactId)).toEqual(
      attachments.map((a) => a.artifactId),
    );
    const sessionId = submitted?.sessionId as string;
    const inspect = JSON.parse(oarIn(dir, ['inspect', sessionId, '--json']).stdout) as {
      threads: { turns: { attachments?: { name: string }[] }[] }[];
    };
    expect(inspect.threads[0]?.turns[0]?.attachments?.map((a) => a.name)).toEqual(['notes.md', 'chart.png']);
  });

  it('refuses a file it cannot read (exit 2, file_unreadable) before recording anything', () => {
    const dir = project();
    const run = oarIn(dir, ['run', '--attach', 'missing.txt', 'hi', '--json']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('file_unreadable');
    expect(run.stderr).toContain('missing.txt');
    const sessions = oarIn(dir, ['sessions', '--json']);
    expect(JSON.parse(sessions.stdout)).toEqual([]);
  });
});
