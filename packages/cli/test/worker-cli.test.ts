import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type CliResult, FIXTURES, oarIn, outputOf, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar run --detach`, `oar wait` and `oar worker` on the embedded SQLite store (the PostgreSQL deployment with
 * several workers and an API node is scale-out.test.ts): a detached turn is recorded and nothing runs it until a
 * worker does; `wait` reports it like `oar run`, or gives up without changing anything; bad options and unknown
 * sessions get structured errors.
 */

function project(): string {
  const cwd = tempDir('oar-worker-');
  writeJson(cwd, 'script.json', { steps: [{ protocol: { kind: 'answer', message: 'ran on a worker' } }] });
  writeJson(cwd, 'oar.config.json', { model: 'script:script.json' });
  return cwd;
}

function structured(result: CliResult): { code: string; message: string; retryable: boolean } {
  const line = result.stderr.trim().split('\n').at(-1) ?? '';
  return (JSON.parse(line) as { error: { code: string; message: string; retryable: boolean } }).error;
}

describe('detached turns, oar wait and oar worker on SQLite', { timeout: 120_000 }, () => {
  it('a detached turn waits for a worker: wait times out (75) and changes nothing; a worker runs it; wait says 0', async () => {
    const cwd = project();
    const detached = oarIn(cwd, ['run', '--detach', '--json', 'hello']);
    expect(detached.code, detached.stderr).toBe(0);
    const ids = JSON.parse(detached.stdout) as { sessionId: string; turnId: string };
    expect(ids.turnId).toMatch(/^turn_/);

    // No worker yet: the turn is only recorded.
    const early = oarIn(cwd, ['wait', ids.sessionId, '--timeout', '1']);
    expect(early.code, early.stderr).toBe(75);
    expect(structured(early)).toMatchObject({ code: 'wait_timeout', retryable: true });
    const before = oarIn(cwd, ['events', ids.sessionId, '--json']);
    expect(before.stdout).toContain('"turn.submitted"');
    expect(before.stdout).not.toContain('"turn.started"');

    const worker = spawnOar(cwd, ['worker', '--concurrency', '2']);
    const exited = outputOf(worker);
    try {
      const waited = oarIn(cwd, ['wait', ids.sessionId, '--timeout', '50', '--json']);
      expect(waited.code, waited.stderr).toBe(0);
      expect(JSON.parse(waited.stdout.trim().split('\n').at(-1) ?? '')).toMatchObject({
        result: { sessionId: ids.sessionId, status: 'completed', answer: 'ran on a worker' },
      });
      // Plain `wait` prints the answer as `oar run` does.
      const plain = oarIn(cwd, ['wait', ids.sessionId]);
      expect(plain.code).toBe(0);
      expect(plain.stdout).toContain('ran on a worker');
    } finally {
      worker.kill('SIGTERM');
    }
    const exit = await exited;
    expect(exit.code, exit.stderr).toBe(0);
    expect(exit.stderr).toContain('OAR worker');
    expect(exit.stderr).toContain('draining');
  });

  it('bad options and unknown sessions are structured errors', () => {
    const cwd = project();
    for (const args of [
      ['worker', '--concurrency', '0'],
      ['worker', '--concurrency', 'many'],
      ['worker', '--id', 'no spaces allowed'],
      ['worker', '--drain-seconds', '-1'],
      ['wait', 'ses_x', '--timeout', 'soon'],
    ]) {
      const result = oarIn(cwd, args);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(structured(result).code, args.join(' ')).toBe('invalid_option');
    }
    // No store here yet: waiting creates none, and says where it looked.
    const nowhere = oarIn(cwd, ['wait', 'ses_doesnotexist']);
    expect(nowhere.code, nowhere.stderr).toBe(2);
    expect(structured(nowhere).code).toBe('store_not_found');
    expect(oarIn(cwd, ['workspaces', 'create', 'team']).code).toBe(0);
    const unknown = oarIn(cwd, ['wait', 'ses_doesnotexist']);
    expect(unknown.code, unknown.stderr).toBe(2);
    expect(structured(unknown).code).toBe('session_not_found');
  });

  it('a worker killed with SIGKILL: a running worker of the same machine takes its thread over before the lease expires', async () => {
    const cwd = tempDir('oar-worker-');
    writeJson(cwd, 'script.json', {
      steps: [
        {
          protocol: {
            kind: 'act',
            calls: [{ id: 'slow', type: 'tool', name: 'effect_idempotent', args: { label: 'slow', delayMs: 3000 } }],
          },
        },
        { protocol: { kind: 'answer', message: 'taken over' } },
      ],
    });
    // A lease far longer than the test: only the dead-process check can explain a takeover in time.
    writeJson(cwd, 'oar.config.json', {
      model: 'script:script.json',
      tools: { modules: [join(FIXTURES, 'effect-tools.mjs')] },
      permissions: { mode: 'bypass' },
      worker: { leaseTtlMs: 3_600_000 },
    });
    const started = (): { label: string; phase: string; pid: number }[] =>
      existsSync(join(cwd, 'effects.ndjson'))
        ? readFileSync(join(cwd, 'effects.ndjson'), 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((line) => JSON.parse(line))
        : [];
    const { sessionId } = JSON.parse(oarIn(cwd, ['run', '--detach', '--json', 'go']).stdout) as { sessionId: string };
    // The first worker's call would take an hour: it is surely still running when the worker is killed.
    const first = spawnOar(cwd, ['worker', '--id', 'first'], { OAR_TEST_EFFECT_DELAY_MS: '3600000' });
    const firstExit = outputOf(first);
    for (let i = 0; i < 600 && !started().some((e) => e.phase === 'start'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(started().map((e) => [e.phase, e.pid])).toEqual([['start', first.pid]]);
    const second = spawnOar(cwd, ['worker', '--id', 'second']);
    const secondExit = outputOf(second);
    // The second worker is up (it has looked at the store and found the thread held) before the first dies.
    let banner = '';
    await new Promise<void>((resolve) => {
      second.stderr.on('data', (chunk: Buffer) => {
        banner += chunk.toString();
        if (banner.includes('SIGTERM drains')) resolve();
      });
    });
    try {
      first.kill('SIGKILL');
      await firstExit;
      // Nothing else happens in the store (no command, no waiter): the second worker finds the dead holder itself.
      for (let i = 0; i < 600 && !started().some((e) => e.pid === second.pid); i++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(started().map((e) => e.pid)).toContain(second.pid);
      const waited = oarIn(cwd, ['wait', sessionId, '--timeout', '50', '--json']);
      expect(waited.code, waited.stderr).toBe(0);
      expect(waited.stdout).toContain('taken over');
      // The idempotent call was run again by the second worker (attempt 2), once.
      expect(
        started()
          .filter((e) => e.phase === 'start')
          .map((e) => e.pid),
      ).toEqual([first.pid, second.pid]);
    } finally {
      second.kill('SIGTERM');
    }
    expect((await secondExit).code).toBe(0);
  });
});
