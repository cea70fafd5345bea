import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { ndjson, oarIn, outputOf, repoRoot, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * Exactly once through the world's own deduplication (docs/reliability.md "Idempotent by key"), with the example
 * business CLI itself: `oar run` is killed with SIGKILL after `calendar.create` created the event in the CLI's store
 * and before OAR recorded the result; `oar resume` retries the call under the same idempotency key, the CLI answers
 * with the event it created the first time, and its store holds one event.
 *
 * The window between the effect and its record is held open by a post-processor of this test (OAR runs it on the
 * CLI's answer before recording the result): it marks that the answer arrived, then blocks for a few seconds.
 */

const CLI = join(repoRoot, 'examples/business-cli/dist/cli.js');
const KEY = { BUSINESS_CLI_KEY: 'k'.repeat(64) };
const TITLE = 'Crash-proof planning';

function project(store: string | undefined): string {
  const cwd = tempDir('oar-business-durable-');
  writeJson(cwd, 'script.json', {
    steps: [
      {
        protocol: {
          kind: 'act',
          calls: [
            {
              id: 'c',
              type: 'tool',
              name: 'project_cli',
              args: {
                module: 'calendar',
                method: 'create',
                input: { title: TITLE, start_at: '2026-12-04T10:00:00+08:00', end_at: '2026-12-04T11:00:00+08:00' },
              },
            },
          ],
        },
      },
      { protocol: { kind: 'answer', message: 'Booked.' } },
    ],
  });
  // Only the first answer is held (a marker file says it was): the retry's passes at once.
  writeFileSync(
    join(cwd, 'hold.mjs'),
    `import { existsSync, writeFileSync } from 'node:fs';
const marker = ${JSON.stringify(join(cwd, 'answered'))};
export const postProcessors = {
  'calendar.create': () => {
    if (existsSync(marker)) return undefined;
    writeFileSync(marker, 'answered');
    const until = Date.now() + 20_000;
    while (Date.now() < until) {}
    return undefined;
  },
};
`,
  );
  writeJson(cwd, 'oar.config.json', {
    model: 'script:script.json',
    permissions: { mode: 'bypass' },
    tools: {
      builtin: [],
      cli: {
        command: [process.execPath, CLI],
        args: ['--store', join(cwd, 'business.db')],
        allow: ['calendar.*'],
        cwd,
        credential: { algorithm: 'HS256', keyEnv: 'BUSINESS_CLI_KEY' },
        postProcessors: join(cwd, 'hold.mjs'),
      },
    },
    ...(store ? { store } : {}),
  });
  return cwd;
}

/** Start `oar run`, wait until the CLI has answered (its event exists), then SIGKILL the process. */
async function crashAfterTheEffect(cwd: string): Promise<string> {
  const child = spawnOar(cwd, ['run', '--json', 'book it'], KEY);
  const exited = outputOf(child);
  const deadline = Date.now() + 60_000;
  while (!existsSync(join(cwd, 'answered'))) {
    if (Date.now() > deadline) throw new Error(`the CLI never answered:\n${(await exited).stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  child.kill('SIGKILL');
  const { stdout } = await exited;
  const events = ndjson(stdout) as unknown as RuntimeEvent[];
  return events.find((e) => e.sessionId)?.sessionId ?? '';
}

function eventsIn(cwd: string): { id: string; title: string }[] {
  const db = new Database(join(cwd, 'business.db'), { readonly: true });
  try {
    return db.prepare('SELECT id, title FROM events WHERE title = ?').all(TITLE) as { id: string; title: string }[];
  } finally {
    db.close();
  }
}

function scenario(storeFor: () => string | undefined) {
  it('calendar.create killed after its effect is retried under the same key: one event', async () => {
    const cwd = project(storeFor());
    const sessionId = await crashAfterTheEffect(cwd);
    expect(sessionId).not.toBe('');
    const created = eventsIn(cwd);
    expect(created).toHaveLength(1);
    const before = ndjson(
      oarIn(cwd, ['events', sessionId, '--json'], undefined, KEY).stdout,
    ) as unknown as RuntimeEvent[];
    expect(before.some((e) => e.type === 'tool.result')).toBe(false);

    const resume = oarIn(cwd, ['resume', sessionId], undefined, KEY);
    expect(resume.code, resume.stdout + resume.stderr).toBe(0);
    const log = ndjson(oarIn(cwd, ['events', sessionId, '--json'], undefined, KEY).stdout) as unknown as RuntimeEvent[];
    const starts = log.filter((e) => e.type === 'tool.started').map((e) => e.payload as Record<string, unknown>);
    expect(starts.map((s) => [s.attempt, s.idempotentByKey])).toEqual([
      [1, true],
      [2, true],
    ]);
    expect(starts[1]?.idempotencyKey).toBe(starts[0]?.idempotencyKey);
    expect(starts[1]?.keyAttempt).toBe(1);
    // The world acted once: the retry got the first call's event back.
    expect(eventsIn(cwd)).toEqual(created);
    const result = log.find((e) => e.type === 'tool.result');
    expect(JSON.stringify(result?.payload)).toContain(created[0]?.id);
    expect(log.some((e) => e.type === 'tool.failed')).toBe(false);
    expect(log.find((e) => e.type === 'turn.completed')?.payload).toMatchObject({ answer: 'Booked.' });
    expect(JSON.parse(oarIn(cwd, ['replay', sessionId], undefined, KEY).stdout).equal).toBe(true);
  }, 90_000);
}

describe('the example business CLI across kill -9, on SQLite', () => {
  scenario(() => undefined);
});

describe('the example business CLI across kill -9, on PostgreSQL', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL business CLI durability test: ${unavailable.message}`);
    return;
  }
  scenario(() => `${POSTGRES_URL}?schema=oar_cli_${Math.random().toString(36).slice(2, 10)}`);
});
