import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { ndjson, oarIn, outputOf, repoRoot, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * A runner's question answered from another process (docs/runners.md "Decisions"): `oar run --runner` drives the
 * local-agent runner, whose tools.call of `write` the default mode asks about. The run stays alive and says how to
 * answer; `oar respond` in a second process approves (or denies), and the waiting call goes on.
 */

const LOCAL_AGENT = join(repoRoot, 'examples/runners/local-agent');
const RUNNER_ID = 'plugin:oar/local-agent/default';

function project() {
  const dir = tempDir('oar-runner-decisions-');
  writeJson(dir, 'script.json', {
    steps: [
      { toolCalls: [{ name: 'write', arguments: { filePath: 'out.txt', content: 'written after approval' } }] },
      { text: 'I tried to write the file.' },
    ],
  });
  writeJson(dir, 'oar.config.json', { model: 'script:script.json', runners: { packages: [LOCAL_AGENT] } });
  writeFileSync(join(dir, 'README.md'), '# decisions\n');
  return dir;
}

/** Resolves with the first stdout line that matches, as the child prints it. */
function lineMatching(
  child: ReturnType<typeof spawnOar>,
  pattern: RegExp,
  timeoutMs = 30_000,
): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} in:\n${seen}`)), timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const match = seen.match(pattern);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    });
  });
}

const HINT = /oar respond (ses_\S+) (act_\S+) approve\|deny/;

function decisions(storeFor: (dir: string) => string) {
  it('oar respond from another process approves a runner call that waits for it', async () => {
    const dir = project();
    const store = storeFor(dir);
    const run = spawnOar(dir, ['run', '--runner', RUNNER_ID, 'write the file', '--store', store]);
    const done = outputOf(run);
    const [, sessionId, actionId] = await lineMatching(run, HINT);
    expect(existsSync(join(dir, 'out.txt'))).toBe(false);
    // The question is on the record, pending, with the runner that asked.
    const inspect = oarIn(dir, ['inspect', sessionId as string, '--json', '--store', store]);
    const snapshot = JSON.parse(inspect.stdout) as { threads: { pendingRequests: Record<string, unknown>[] }[] };
    expect(snapshot.threads[0]?.pendingRequests).toEqual([
      expect.objectContaining({ actionId, runnerId: RUNNER_ID, actionType: 'tool_approval' }),
    ]);

    const respond = oarIn(dir, ['respond', sessionId as string, actionId as string, 'approve', '--store', store]);
    expect(respond.code, `${respond.stdout}\n${respond.stderr}`).toBe(0);
    const ran = await done;
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe('written after approval');

    const log = ndjson(oarIn(dir, ['events', sessionId as string, '--json', '--store', store]).stdout);
    const resolved = log.find((e) => e.type === 'action.resolved');
    expect(resolved).toMatchObject({ actionId, payload: expect.objectContaining({ decision: 'approve' }) });
    expect(log.filter((e) => e.type === 'tool.result')).toHaveLength(1);
    expect(log.find((e) => e.type === 'turn.completed')?.payload).toMatchObject({
      answer: 'I tried to write the file.',
    });
    const sequences = log.map((e) => e.sequence);
    expect(sequences).toEqual(sequences.map((_, i) => i + 1));
  });

  it('a host killed while its runner waits: resume records the run lost and closes the question', async () => {
    const dir = project();
    const store = storeFor(dir);
    const run = spawnOar(dir, ['run', '--runner', RUNNER_ID, 'write the file', '--store', store]);
    const exited = new Promise((resolve) => run.on('exit', resolve));
    const [, sessionId, actionId] = await lineMatching(run, HINT);
    run.kill('SIGKILL');
    await exited;
    const resume = oarIn(dir, ['resume', sessionId as string, '--store', store]);
    expect(resume.code, `${resume.stdout}\n${resume.stderr}`).toBe(0);
    const log = ndjson(oarIn(dir, ['events', sessionId as string, '--json', '--store', store]).stdout);
    expect(log.find((e) => e.type === 'turn.failed')?.payload).toMatchObject({
      error: expect.objectContaining({ code: 'runner_lost' }),
    });
    expect(log.find((e) => e.type === 'action.resolved')).toMatchObject({
      actionId,
      payload: expect.objectContaining({ decision: 'deny', resolvedBy: 'runtime' }),
    });
    // An answer that comes too late says so.
    const late = oarIn(dir, ['respond', sessionId as string, actionId as string, 'approve', '--store', store]);
    expect(late.code).not.toBe(0);
    expect(late.stderr + late.stdout).toContain('decision_already_resolved');
    expect(existsSync(join(dir, 'out.txt'))).toBe(false);
  });

  it('--deny-all answers the runner question itself: the call is refused and nothing is written', () => {
    const dir = project();
    const store = storeFor(dir);
    const run = oarIn(dir, ['run', '--runner', RUNNER_ID, 'write the file', '--deny-all', '--json', '--store', store]);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const events = ndjson(run.stdout);
    expect(events.find((e) => e.type === 'action.resolved')?.payload).toMatchObject({ decision: 'deny' });
    expect(events.filter((e) => e.type === 'tool.started')).toHaveLength(0);
    expect(existsSync(join(dir, 'out.txt'))).toBe(false);
    const refused = events
      .filter((e) => ((e.payload ?? {}) as { phase?: string }).phase === 'runner_api')
      .map((e) => (e.payload as { runner: { action: string; result: string; code?: string } }).runner)
      .find((a) => a.action === 'tools.call');
    expect(refused).toMatchObject({ result: 'refused', code: 'unauthorized' });
  });
}

describe('runner decisions through the real binary on SQLite', () => {
  decisions((dir) => join(dir, 'oar.db'));
});

describe('runner decisions through the real binary on PostgreSQL', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL runner decision test: ${unavailable.message}`);
    return;
  }
  const schemas: string[] = [];
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(schema);
  });
  decisions(() => {
    const schema = `oar_rdec_${Math.random().toString(36).slice(2, 10)}`;
    schemas.push(schema);
    return `${POSTGRES_URL}?schema=${schema}`;
  });
});
