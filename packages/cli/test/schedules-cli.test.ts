import type { RuntimeEvent } from '@oar/protocol';
import type { ScheduleView } from '@oar/runtime';
import { describe, expect, it } from 'vitest';
import { ndjson, oarIn, outputOf, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar schedules` through the real binary (issue 30 §2, docs/schedules.md): a schedule of `oar.config.json` fired
 * by `oar worker` with the schedule's facts on the session it starts; add, list, get, pause, resume, remove; bad
 * input as structured errors.
 */

function project(config: Record<string, unknown> = {}): string {
  const cwd = tempDir('oar-schedules-');
  writeJson(cwd, 'script.json', {
    steps: Array.from({ length: 30 }, () => ({ protocol: { kind: 'answer', message: 'report written' } })),
  });
  writeJson(cwd, 'oar.config.json', { model: 'script:script.json', ...config });
  return cwd;
}

const jsonOf = <T>(stdout: string) => JSON.parse(stdout) as T;
const errorOf = (stderr: string) =>
  (JSON.parse(stderr.trim().split('\n').at(-1) ?? '{}') as { error: Record<string, unknown> }).error;

async function until<T>(check: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

describe('oar schedules', { timeout: 120_000 }, () => {
  it('oar worker fires a schedule of the config file: a session with the schedule facts and its own budget', async () => {
    const cwd = project({
      schedules: [
        {
          scheduleId: 'every-second',
          cron: '* * * * * *',
          start: { kind: 'session', input: 'Write the daily report', title: 'daily' },
          budget: { session: { tokens: 50_000 } },
        },
      ],
    });
    // The store exists before the worker (the worker continues a store, as `oar serve` does).
    expect(
      oarIn(cwd, ['schedules', 'add', '--id', 'later', '--cron', '0 3 * * *', '--new-session', '--input', 'x']).code,
    ).toBe(0);
    const worker = spawnOar(cwd, ['worker']);
    const exited = outputOf(worker);
    let fired: ScheduleView;
    try {
      fired = await until(() => {
        const got = oarIn(cwd, ['schedules', 'get', 'every-second', '--json']);
        if (got.code !== 0) return undefined;
        const view = jsonOf<ScheduleView>(got.stdout);
        return view.lastFirings.some((f) => f.status === 'started') ? view : undefined;
      });
      expect(oarIn(cwd, ['schedules', 'pause', 'every-second']).code).toBe(0);
    } finally {
      worker.kill('SIGTERM');
    }
    expect((await exited).code).toBe(0);
    expect(fired.source).toBe('config');
    const firing = fired.lastFirings.find((f) => f.status === 'started');
    const sessionId = firing?.started?.sessionId as string;
    const events = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
    expect(events[0]?.payload).toMatchObject({
      schedule: { scheduleId: 'every-second', firedAt: firing?.fireAt, kind: 'session' },
      binding: { budgets: { session: { tokens: 50_000 } } },
    });
    const list = oarIn(cwd, ['schedules', 'list']);
    expect(list.stdout).toContain('every-second');
    expect(list.stdout).toContain('[config]');
    expect(list.stdout).toContain('later');
  });

  it('add, get, pause, resume, remove; bad input is a structured error naming the field', () => {
    const cwd = project();
    const added = oarIn(cwd, [
      'schedules',
      'add',
      '--id',
      'nightly',
      '--cron',
      '0 3 * * *',
      '--timezone',
      'Europe/Paris',
      '--new-session',
      '--input',
      'Summarise',
      '--overlap',
      'cancel',
      '--catch-up',
      'run_once',
      '--budget-tokens',
      '20000',
      '--json',
    ]);
    expect(added.code, added.stderr).toBe(0);
    expect(jsonOf<ScheduleView>(added.stdout)).toMatchObject({
      scheduleId: 'nightly',
      timezone: 'Europe/Paris',
      overlap: 'cancel',
      catchUp: 'run_once',
      budget: { session: { tokens: 20_000 } },
      start: { kind: 'session', input: 'Summarise' },
    });
    expect(jsonOf<ScheduleView>(oarIn(cwd, ['schedules', 'pause', 'nightly', '--json']).stdout).paused).toBe(true);
    const resumed = jsonOf<ScheduleView>(oarIn(cwd, ['schedules', 'resume', 'nightly', '--json']).stdout);
    expect(resumed.paused).toBe(false);
    expect(resumed.nextFirings).toHaveLength(3);
    const got = oarIn(cwd, ['schedules', 'get', 'nightly']);
    expect(got.stdout).toContain('0 3 * * * (Europe/Paris) → session');
    expect(oarIn(cwd, ['schedules', 'remove', 'nightly']).stdout).toContain('removed');
    expect(oarIn(cwd, ['schedules', 'list']).stdout).toContain('no schedules');

    const bad = (args: string[], code: string, field?: string) => {
      const run = oarIn(cwd, ['schedules', ...args]);
      expect(run.code, run.stderr).toBe(2);
      const error = errorOf(run.stderr);
      expect(error).toMatchObject({ code, retryable: false });
      if (field) expect((error.details as Record<string, unknown>).field).toBe(field);
    };
    bad(['add', '--cron', 'at dawn', '--new-session', '--input', 'x'], 'invalid_input', 'cron');
    bad(
      ['add', '--cron', '0 3 * * *', '--timezone', 'Mars/Olympus', '--new-session', '--input', 'x'],
      'invalid_input',
      'timezone',
    );
    bad(['add', '--cron', '0 3 * * *', '--input', 'x'], 'invalid_option');
    bad(
      ['add', '--cron', '0 3 * * *', '--new-session', '--input', 'x', '--overlap', 'never'],
      'invalid_input',
      'overlap',
    );
    bad(['add', '--cron', '0 3 * * *', '--new-session', '--input', 'x', '--budget-tokens', 'lots'], 'invalid_option');
    bad(['get', 'nope'], 'schedule_not_found');
    bad(['pause', 'nope'], 'schedule_not_found');
  });
});
