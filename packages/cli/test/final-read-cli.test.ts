import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { type CliResult, outputOf, spawnOar, tempDir, writeJson } from './cli-helpers.js';
import { PgFaultProxy } from './pg-fault-proxy.js';

/**
 * Seen in the fault trials (docs/reliability.md): one `oar run` exited 74 (`store_unavailable`, retryable) although
 * its turn had been recorded as completed — a PostgreSQL connection dropped by the server hit the CLI's read of
 * the outcome, after the turn had settled. That read is retried now, a bounded number of times, on a retryable
 * store fault. The fault is injected exactly there: a proxy between the real `oar` process and the real server
 * drops the connection (FATAL 57P01, what `pg_terminate_backend` sends) of the first reads of the session's read
 * models once `turn.completed` has been written.
 */

/** The query `getSession` reads the session's read models with (loadAllReadModels). */
const ALL_READ_MODELS = /^select "kind", "key", "body" from (?:"\w+"\.)?"oar_read_models" where "session_id" = \$1$/;

function runOar(cwd: string, args: string[]): Promise<CliResult> {
  // Asynchronous: the proxy runs on this process's event loop.
  return outputOf(spawnOar(cwd, args));
}

describe('oar run reads the outcome of a settled turn through a dropped PostgreSQL connection', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL final-read test: ${unavailable.message}`);
    return;
  }

  /** `oar run --json finish` on a fresh schema through a proxy that drops `count` reads after the turn completed. */
  async function runThroughFaults(count: number) {
    const upstream = new URL(POSTGRES_URL);
    const proxy = await PgFaultProxy.start(
      { host: upstream.hostname, port: Number(upstream.port || 5432) },
      { armOn: 'turn.completed', query: ALL_READ_MODELS, count },
    );
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const viaProxy = new URL(POSTGRES_URL);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    viaProxy.searchParams.set('schema', schema);
    try {
      const cwd = tempDir('oar-final-read-');
      writeJson(cwd, 'script.json', { steps: [{ protocol: { kind: 'answer', message: 'All done.' } }] });
      writeJson(cwd, 'oar.config.json', { model: 'script:script.json', store: viaProxy.toString() });
      const run = await runOar(cwd, ['run', '--json', 'finish']);
      return { run, dropped: proxy.dropped };
    } finally {
      await proxy.close();
      await dropSchema(schema);
    }
  }

  it('retries the read on store_unavailable and reports the completed turn (exit 0, not 74)', {
    timeout: 60_000,
  }, async () => {
    const { run, dropped } = await runThroughFaults(2);
    // The fault was injected where it was meant to be: the reads after the turn completed.
    expect(dropped, run.stdout + run.stderr).toBe(2);
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as { result: unknown };
    expect(result.result).toMatchObject({ status: 'completed', answer: 'All done.' });
  });

  it('a store that stays unreachable is still reported: store_unavailable, exit 74, after 5 attempts', {
    timeout: 60_000,
  }, async () => {
    const { run, dropped } = await runThroughFaults(50);
    expect(dropped, run.stdout + run.stderr).toBe(5);
    expect(run.code, run.stderr).toBe(74);
    const error = (JSON.parse(run.stderr.trim().split('\n').at(-1) ?? '{}') as { error: unknown }).error;
    expect(error).toMatchObject({ code: 'store_unavailable', retryable: true });
  });
});

describe('oar resume reads its sessions through a dropped PostgreSQL connection', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL resume-read test: ${unavailable.message}`);
    return;
  }

  it('retries the read of a named session on store_unavailable (exit 3: still waiting, not 74)', {
    timeout: 60_000,
  }, async () => {
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const direct = new URL(POSTGRES_URL);
    direct.searchParams.set('schema', schema);
    const upstream = new URL(POSTGRES_URL);
    // Armed by the first thing any `oar` process sends (the migration check), so the fault hits resume's own reads.
    const proxy = await PgFaultProxy.start(
      { host: upstream.hostname, port: Number(upstream.port || 5432) },
      { armOn: 'oar_migrations', query: ALL_READ_MODELS, count: 2 },
    );
    const viaProxy = new URL(direct);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    try {
      const cwd = tempDir('oar-resume-read-');
      writeJson(cwd, 'script.json', {
        steps: [
          {
            protocol: {
              kind: 'act',
              calls: [{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'x' } }],
            },
          },
          { protocol: { kind: 'answer', message: 'written' } },
        ],
      });
      writeJson(cwd, 'oar.config.json', { model: 'script:script.json', store: direct.toString() });
      // Waits for the approval of the write (no TTY, no decision flag): exit 3.
      const run = await runOar(cwd, ['run', '--json', 'write it']);
      expect(run.code, run.stderr).toBe(3);
      const sessionId = (JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as { result: { sessionId: string } })
        .result.sessionId;
      const resumed = await runOar(cwd, ['resume', '--store', viaProxy.toString(), sessionId]);
      expect(proxy.dropped, resumed.stdout + resumed.stderr).toBe(2);
      expect(resumed.code, resumed.stderr).toBe(3);
      expect(resumed.stdout).toContain('still waiting for a decision');
    } finally {
      await proxy.close();
      await dropSchema(schema);
    }
  });
});
