import { type ChildProcess, spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, ndjson, oarIn, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * Ctrl-C on a loaded machine (issue 25: once in six tries it was ignored and the turn ran to its end). `oar run`
 * is sent SIGINT at several moments while other processes keep every core busy; whatever the moment, the outcome is
 * an interrupted command (exit 130, or death by the signal while the CLI was still loading) and either nothing
 * recorded or a turn recorded as cancelled — never a turn that ran on to completion. No timing is asserted: the
 * moments are picked from the command's own output.
 */

let burners: ChildProcess[] = [];
beforeAll(() => {
  // One busy loop per core for the whole file: the worker claims the turn late, the window a Ctrl-C used to fall in.
  burners = cpus().map(() => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
});
afterAll(() => {
  for (const burner of burners) burner.kill('SIGKILL');
});

/** A project whose turn takes long (a 60 s tool call, then an answer): only an interrupt ends it early. */
function project(): string {
  const cwd = tempDir('oar-sigint-');
  writeJson(cwd, 'script.json', {
    steps: [
      {
        protocol: {
          kind: 'act',
          message: 'Counting.',
          calls: [{ id: 'slow', type: 'tool', name: 'count', args: { label: 'slow', delayMs: 60_000 } }],
        },
      },
      { protocol: { kind: 'answer', message: 'done' } },
    ],
  });
  writeJson(cwd, 'oar.config.json', {
    model: 'script:script.json',
    tools: { modules: [join(FIXTURES, 'count-tools.mjs')] },
    permissions: { mode: 'bypass' },
  });
  return cwd;
}

interface Outcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `oar run --json` in `cwd`, sent one SIGINT when `when(stdout)` first holds (at once for `undefined`). */
function interruptedRun(cwd: string, when: ((stdout: string) => boolean) | undefined): Promise<Outcome> {
  const child = spawnOar(cwd, ['run', '--json', 'count slowly']);
  let stdout = '';
  let stderr = '';
  let sent = false;
  const send = () => {
    if (sent) return;
    sent = true;
    child.kill('SIGINT');
  };
  if (!when) send();
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (when?.(stdout)) send();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      // A moment that never came would leave the turn running to its end: that is a failure of its own.
      expect(sent, `SIGINT was never sent:\n${stdout}\n${stderr}`).toBe(true);
      resolve({ code, signal, stdout, stderr });
    }),
  );
}

/** What the store holds: each session's turns and how each ended. */
function recorded(cwd: string): { sessionId: string; events: RuntimeEvent[] }[] {
  const list = oarIn(cwd, ['sessions', '--json']);
  expect(list.code, list.stderr).toBe(0);
  return (JSON.parse(list.stdout) as { sessionId: string }[]).map(({ sessionId }) => {
    const events = oarIn(cwd, ['events', sessionId, '--json']);
    expect(events.code, events.stderr).toBe(0);
    return { sessionId, events: ndjson(events.stdout) as unknown as RuntimeEvent[] };
  });
}

const hasEvent = (type: string) => (stdout: string) => stdout.includes(`"type":"${type}"`);

describe('Ctrl-C under load', { timeout: 240_000 }, () => {
  it.each([
    ['immediately after spawn', undefined],
    ['after the first event', (stdout: string) => stdout.includes('"type":')],
    ['once the turn is submitted, before it starts', hasEvent('turn.submitted')],
    ['once the turn has started', hasEvent('turn.started')],
    ['while the tool runs', hasEvent('tool.started')],
  ])('%s: exit 130 (or the signal) and a cancelled turn or nothing recorded', async (_moment, when) => {
    const cwd = project();
    const outcome = await interruptedRun(cwd, when);
    const seen = `exit ${outcome.code} ${outcome.signal ?? ''}\n${outcome.stdout}\n${outcome.stderr}`;
    // Never a normal exit: 130 from the handler, or death by SIGINT while the CLI was still loading.
    expect(outcome.code === 130 || (outcome.code === null && outcome.signal === 'SIGINT'), seen).toBe(true);
    const sessions = recorded(cwd);
    expect(sessions.length, seen).toBeLessThanOrEqual(1);
    for (const { events } of sessions) {
      expect(
        events.filter((e) => e.type === 'turn.completed'),
        seen,
      ).toEqual([]);
      const submitted = events.filter((e) => e.type === 'turn.submitted');
      const failed = events.filter((e) => e.type === 'turn.failed');
      // A submitted turn ended, and ended cancelled (the standard's turn events: turn.failed, status cancelled).
      expect(failed.length, seen).toBe(submitted.length);
      for (const turn of failed) {
        expect(turn.status).toBe('cancelled');
        expect((turn.payload as { error?: { code?: string } }).error?.code).toBe('interrupted');
      }
    }
    if (outcome.code === 130 && sessions.length === 1) {
      // The command reported the outcome the log has.
      const result = ndjson(outcome.stdout).find((line) => 'result' in line) as
        | { result: { status: string } }
        | undefined;
      expect(result?.result.status, seen).toBe('cancelled');
    }
    if (when !== undefined && sessions.length === 0) {
      // An event was printed, so the session existed: it must be in the store.
      expect.fail(`an event was printed but no session is recorded: ${seen}`);
    }
  });
});
