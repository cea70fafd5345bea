import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent, SessionSnapshot } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { assertEventsConform } from '../../runtime/test/support/schemas.js';
import { type CliResult, ndjson, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * Budgets through the real `oar` binary (issue 16 §3): a budget stops a turn cleanly (`budget_exceeded`, exit 1,
 * `oar inspect` shows it), or the turn waits (exit 3, the `oar limit` follow-up printed, `oar inspect` shows
 * `waiting_resource`) and `oar limit` raises the limit and continues the same turn; bad limits are structured
 * errors (exit 2).
 */

const read = (id: string) => ({
  protocol: {
    kind: 'act',
    message: `reading (${id})`,
    calls: [{ id, type: 'tool', name: 'read', args: { filePath: 'README.md' }, result: 'summary' }],
  },
});
const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

function setup(budgets: Record<string, unknown>) {
  const dir = tempDir('oar-budget-cli-');
  writeFileSync(join(dir, 'README.md'), '# Budgeted\n');
  writeJson(dir, 'script.json', { steps: [read('r1'), answer('Read it.')] });
  const config = writeJson(dir, 'oar.config.json', { model: 'script:script.json', budgets });
  return { dir, config, store: join(dir, 'oar.db') };
}

function sessionOf(run: CliResult): string {
  const id = /session (ses_[A-Za-z0-9_-]+)/.exec(run.stdout)?.[1];
  expect(id, `no session id in:\n${run.stdout}\n${run.stderr}`).toBeDefined();
  return id as string;
}

const errorOf = (run: CliResult) =>
  (JSON.parse(run.stderr.trim().split('\n').at(-1) ?? '{}') as { error: never }).error;

describe('oar and budgets', () => {
  it('a budget stops a turn cleanly: budget_exceeded with the spend, and oar inspect shows it', async () => {
    const { dir, store } = setup({ turn: { modelCalls: 1 }, onExceeded: 'fail' });
    const run = oarIn(dir, ['run', '--store', store, 'read the README']);
    expect(run.code, run.stdout + run.stderr).toBe(1);
    expect(run.stdout).toContain('budget_exceeded');
    const sessionId = sessionOf(run);
    const inspect = oarIn(dir, ['inspect', sessionId, '--store', store]);
    expect(inspect.code).toBe(0);
    expect(inspect.stdout).toContain('budgets: turn modelCalls 1; session none; on exceeded: fail');
    const json = JSON.parse(oarIn(dir, ['inspect', sessionId, '--json', '--store', store]).stdout) as SessionSnapshot;
    expect(json.threads[0]?.lastOutcome).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exceeded', details: { scope: 'turn', dimension: 'modelCalls', limit: 1, spent: 1 } },
    });
    const events = ndjson(
      oarIn(dir, ['events', sessionId, '--json', '--store', store]).stdout,
    ) as unknown as RuntimeEvent[];
    expect(events.filter((e) => e.type === 'quota.blocked')).toHaveLength(1);
    assertEventsConform(events);
  });

  it('onExceeded wait: run exits 3 with the oar limit follow-up; oar limit continues the same turn', async () => {
    const { dir, store } = setup({ turn: { modelCalls: 1 } });
    const run = oarIn(dir, ['run', '--store', store, 'read the README']);
    expect(run.code, run.stdout + run.stderr).toBe(3);
    const sessionId = sessionOf(run);
    expect(run.stdout).toContain('Waiting for a budget');
    expect(run.stdout).toContain(`oar limit ${sessionId} --turn-calls`);
    const inspect = oarIn(dir, ['inspect', sessionId, '--store', store]);
    expect(inspect.stdout).toMatch(
      /waiting_resource \(quota: the next model call would exceed the turn budget of 1 model calls/,
    );

    // Bad input changes nothing and says what is wrong.
    const negative = oarIn(dir, ['limit', sessionId, '--turn-cost', '-1', '--store', store]);
    expect(negative.code).toBe(2);
    expect(errorOf(negative)).toMatchObject({ code: 'invalid_limit', retryable: false });
    const unknown = oarIn(dir, ['limit', 'ses_nope', '--turn-calls', '3', '--store', store]);
    expect(unknown.code).toBe(2);
    expect(errorOf(unknown)).toMatchObject({ code: 'session_not_found' });

    const raised = oarIn(dir, ['limit', sessionId, '--turn-calls', '5', '--reason', 'more room', '--store', store]);
    expect(raised.code, raised.stdout + raised.stderr).toBe(0);
    expect(raised.stdout).toContain('turn.modelCalls: 1 → 5');
    expect(raised.stdout).toContain('Read it.');
    const events = ndjson(
      oarIn(dir, ['events', sessionId, '--json', '--store', store]).stdout,
    ) as unknown as RuntimeEvent[];
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === 'turn.started')).toHaveLength(1);
    expect(types.indexOf('quota.blocked')).toBeLessThan(types.indexOf('limit.changed'));
    expect(types.indexOf('limit.changed')).toBeLessThan(types.indexOf('turn.completed'));
    expect(events.find((e) => e.type === 'limit.changed')?.payload).toMatchObject({
      reason: 'more room',
      changedBy: 'cli',
    });
    assertEventsConform(events);
  });
});
