import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { oarIn, outputOf, spawnOar, tempDir, writeJson } from './cli-helpers.js';
import { PgFaultProxy } from './pg-fault-proxy.js';

/**
 * A worker rides out a store it cannot reach when it starts. Seen (docs/reliability.md): `oar worker` processes whose
 * PostgreSQL connections were terminated (`pg_terminate_backend`, FATAL 57P01) while they started exited 74 — twice
 * both workers at once — and the sessions submitted to them stayed unstarted. The fault is put exactly there: a
 * proxy between the real `oar worker` and the real server drops the connection of its first queries.
 */

describe('oar worker starting on a store that drops its connections', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL worker store-wait test: ${unavailable.message}`);
    return;
  }

  /** A project on a fresh schema with one detached turn, and a proxy that drops `count` of its queries. */
  async function setup(count: number) {
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const direct = new URL(POSTGRES_URL);
    direct.searchParams.set('schema', schema);
    const cwd = tempDir('oar-store-wait-');
    writeJson(cwd, 'script.json', { steps: [{ protocol: { kind: 'answer', message: 'Started after all.' } }] });
    writeJson(cwd, 'oar.config.json', { model: 'script:script.json' });
    const detached = oarIn(cwd, ['run', '--detach', '--json', '--store', direct.toString(), 'start me']);
    expect(detached.code, detached.stderr).toBe(0);
    const { sessionId } = JSON.parse(detached.stdout) as { sessionId: string };
    const upstream = new URL(POSTGRES_URL);
    // Armed by the worker's first connection (its startup message names the schema); then every query is dropped.
    const proxy = await PgFaultProxy.start(
      { host: upstream.hostname, port: Number(upstream.port || 5432) },
      { armOn: schema, query: /./, count },
    );
    const viaProxy = new URL(direct);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    return {
      cwd,
      sessionId,
      proxy,
      direct: direct.toString(),
      viaProxy: viaProxy.toString(),
      cleanup: async () => {
        await proxy.close();
        await dropSchema(schema);
      },
    };
  }

  it('keeps trying, then runs the waiting turn; it exits only when told (SIGTERM, exit 0)', {
    timeout: 90_000,
  }, async () => {
    const s = await setup(6);
    try {
      const worker = spawnOar(s.cwd, ['worker', '--store', s.viaProxy]);
      const exited = outputOf(worker);
      // Spawned, not run synchronously: the proxy lives on this process's event loop.
      const waited = await outputOf(
        spawnOar(s.cwd, ['wait', s.sessionId, '--store', s.direct, '--timeout', '60', '--json']),
      );
      expect(s.proxy.dropped, 'the faults were injected at start').toBe(6);
      expect(worker.exitCode, 'the worker is still running').toBeNull();
      expect(waited.code, waited.stderr).toBe(0);
      expect(waited.stdout).toContain('Started after all.');
      worker.kill('SIGTERM');
      const result = await exited;
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).toContain('store unavailable');
      expect(result.stderr).toContain('trying again');
    } finally {
      await s.cleanup();
    }
  });

  it('gives up after --store-wait-seconds with store_unavailable (exit 74); SIGTERM while it waits is exit 0', {
    timeout: 90_000,
  }, async () => {
    const s = await setup(100_000);
    try {
      const started = Date.now();
      const gaveUp = await outputOf(spawnOar(s.cwd, ['worker', '--store', s.viaProxy, '--store-wait-seconds', '2']));
      expect(gaveUp.code, gaveUp.stderr).toBe(74);
      expect(Date.now() - started).toBeGreaterThan(1_000);
      const error = (JSON.parse(gaveUp.stderr.trim().split('\n').at(-1) ?? '{}') as { error: unknown }).error;
      expect(error).toMatchObject({ code: 'store_unavailable', retryable: true });

      const waiting = spawnOar(s.cwd, ['worker', '--store', s.viaProxy]);
      const stopped = outputOf(waiting);
      let stderr = '';
      waiting.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const deadline = Date.now() + 30_000;
      while (!stderr.includes('trying again') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      waiting.kill('SIGTERM');
      const result = await stopped;
      expect(result.code, result.stderr).toBe(0);
      // It never started: no banner.
      expect(result.stderr).not.toContain('OAR worker');
    } finally {
      await s.cleanup();
    }
  });
});
