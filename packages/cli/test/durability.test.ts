import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { FIXTURES, ndjson, oarIn, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * kill -9 in the middle of an action graph, then `oar resume` on the same store: the completed action is never
 * re-run, the interrupted non-idempotent action becomes `lost` (and the model is told), an interrupted
 * idempotent action is re-run. Side effects are counted in a file, so duplicates cannot hide.
 */

function project(
  tool: 'count' | 'count_idempotent' | 'count_once',
  store: string | undefined,
  delayMs: number,
): string {
  const cwd = tempDir('oar-durable-');
  writeJson(cwd, 'script.json', {
    steps: [
      {
        protocol: {
          kind: 'act',
          calls: [
            { id: 'a', type: 'tool', name: 'count', args: { label: 'a' } },
            { id: 'b', type: 'tool', name: tool, args: { label: 'b', delayMs }, depends: 'a' },
          ],
        },
      },
      { protocol: { kind: 'answer', message: 'Resumed after the crash.' } },
    ],
  });
  writeJson(cwd, 'oar.config.json', {
    model: 'script:script.json',
    // An absolute module path: the fixture resolves zod from this repository.
    tools: { modules: [join(FIXTURES, 'count-tools.mjs')] },
    permissions: { mode: 'bypass' },
    ...(store ? { store } : {}),
  });
  return cwd;
}

/** Start `oar run`, wait until action b has durably started, then SIGKILL the process. */
async function crashDuringB(cwd: string): Promise<string> {
  const child = spawnOar(cwd, ['run', '--json', 'count twice']);
  let buffer = '';
  let sessionId = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`b never started:\n${buffer}`)), 30_000);
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      for (const event of ndjson(buffer) as unknown as RuntimeEvent[]) {
        sessionId = event.sessionId ?? sessionId;
        if (event.type === 'tool.started' && (event.payload as { graphActionId?: string }).graphActionId === 'b') {
          // Kill only once b's side effect has happened, so the crash is truly "after the effect, before the result".
          const poll = setInterval(() => {
            if (!readFileSync(join(cwd, 'counts.txt'), 'utf8').includes('b')) return;
            clearInterval(poll);
            clearTimeout(timer);
            child.kill('SIGKILL');
            resolve();
          }, 10);
          return;
        }
      }
    });
  });
  await new Promise((resolve) => child.on('exit', resolve));
  return sessionId;
}

/** `oar resume` the crashed session (it must exit 0), then its log. */
function resumed(cwd: string, sessionId: string): RuntimeEvent[] {
  const resume = oarIn(cwd, ['resume', sessionId]);
  expect(resume.code, resume.stdout + resume.stderr).toBe(0);
  return ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
}

/** The tool starts of a log, as `action#attempt`, with their idempotency keys. */
function starts(log: RuntimeEvent[]): { at: string; idempotencyKey: string }[] {
  return log
    .filter((e) => e.type === 'tool.started')
    .map((e) => e.payload as unknown as { graphActionId: string; attempt: number; idempotencyKey: string })
    .map((s) => ({ at: `${s.graphActionId}#${s.attempt}`, idempotencyKey: s.idempotencyKey }));
}

function scenario(storeFor: () => Promise<string | undefined>) {
  it('a non-idempotent action interrupted by kill -9 becomes lost; nothing runs twice', async () => {
    const store = await storeFor();
    const cwd = project('count', store, 30_000);
    const sessionId = await crashDuringB(cwd);
    expect(readFileSync(join(cwd, 'counts.txt'), 'utf8')).toBe('a\nb\n');
    const log = resumed(cwd, sessionId);
    expect(readFileSync(join(cwd, 'counts.txt'), 'utf8')).toBe('a\nb\n');
    const lost = log.find((e) => e.type === 'tool.failed' && e.status === 'lost');
    expect(lost?.payload).toMatchObject({ graphActionId: 'b', actionStatus: 'lost' });
    expect(
      log
        .filter((e) => e.type === 'tool.started')
        .map((e) => (e.payload as unknown as { graphActionId: string }).graphActionId),
    ).toEqual(['a', 'b']);
    const completed = log.find((e) => e.type === 'turn.completed');
    expect(completed?.payload).toMatchObject({ answer: 'Resumed after the crash.' });
    // Lost is not silent: it waits for someone to say whether it took effect, and `oar respond` records who did.
    const asked = log.find((e) => e.type === 'action.required');
    expect(asked?.payload).toMatchObject({ actionType: 'reconcile', graphActionId: 'b', toolName: 'count' });
    const actionId = asked?.actionId ?? '';
    const wrong = oarIn(cwd, ['respond', sessionId, actionId, 'approve']);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('invalid_decision');
    const answered = oarIn(cwd, ['respond', sessionId, actionId, 'happened', '--reason', 'counts.txt has b']);
    expect(answered.code, answered.stdout + answered.stderr).toBe(0);
    const after = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
    expect(after.find((e) => e.type === 'action.resolved' && e.actionId === actionId)?.payload).toMatchObject({
      decision: 'happened',
      reason: 'counts.txt has b',
    });
    expect(readFileSync(join(cwd, 'counts.txt'), 'utf8')).toBe('a\nb\n');
    expect(JSON.parse(oarIn(cwd, ['replay', sessionId]).stdout).equal).toBe(true);
  });

  it('an idempotent action interrupted by kill -9 is re-run; the completed one is not', async () => {
    const store = await storeFor();
    // b takes 2 s, long enough to be killed mid-run, short enough for the re-run to finish within the test.
    const cwd = project('count_idempotent', store, 2_000);
    const sessionId = await crashDuringB(cwd);
    const log = resumed(cwd, sessionId);
    expect(readFileSync(join(cwd, 'counts.txt'), 'utf8')).toBe('a\nb\nb\n');
    const started = starts(log);
    expect(started.map((s) => s.at)).toEqual(['a#1', 'b#1', 'b#2']);
    // A re-run of an idempotent action is a new attempt, with a new key.
    expect(started[2]?.idempotencyKey).not.toBe(started[1]?.idempotencyKey);
    expect(log.some((e) => e.type === 'turn.completed')).toBe(true);
  }, 90_000);

  it('an action idempotent by key interrupted by kill -9 is retried under the same key: the effect happens once', async () => {
    const store = await storeFor();
    const cwd = project('count_once', store, 30_000);
    const sessionId = await crashDuringB(cwd);
    expect(readFileSync(join(cwd, 'counts.txt'), 'utf8')).toBe('a\nb\n');
    const log = resumed(cwd, sessionId);
    // The retry asked under the same key, and the world (the tool's keys.txt) answered without counting again.
    expect(readFileSync(join(cwd, 'counts.txt'), 'utf8')).toBe('a\nb\n');
    const started = starts(log);
    expect(started.map((s) => s.at)).toEqual(['a#1', 'b#1', 'b#2']);
    expect(started[2]?.idempotencyKey).toBe(started[1]?.idempotencyKey);
    expect(log.some((e) => e.type === 'tool.failed')).toBe(false);
    const result = log.find(
      (e) => e.type === 'tool.result' && (e.payload as { graphActionId?: string }).graphActionId === 'b',
    );
    expect(JSON.stringify(result?.payload)).toContain('already counted b');
    expect(log.some((e) => e.type === 'turn.completed')).toBe(true);
    expect(JSON.parse(oarIn(cwd, ['replay', sessionId]).stdout).equal).toBe(true);
  }, 90_000);
}

describe('kill -9 and resume on SQLite', () => {
  scenario(async () => undefined);
});

describe('kill -9 and resume on PostgreSQL', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL durability tests: ${unavailable.message}`);
    return;
  }
  scenario(async () => `${POSTGRES_URL}?schema=oar_cli_${Math.random().toString(36).slice(2, 10)}`);
});
