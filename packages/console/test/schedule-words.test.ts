import { describe, expect, it } from 'vitest';
import { firingNote, inTime, nextChangeAt, startedHref, startedText, startText } from '../src/schedule-words.js';
import type { Schedule, ScheduleFiring } from '../src/types.js';

/** How the console words a schedule and its firings, and when it reads them again (the rest: schedules.e2e.test.ts). */

const firing = (f: Partial<ScheduleFiring>): ScheduleFiring => ({
  scheduleId: 's',
  fireAt: '2026-01-01T03:00:00.000Z',
  status: 'started',
  ...f,
});

describe('schedule words', () => {
  it('says what a firing starts', () => {
    expect(startText({ kind: 'session', input: 'Write the report', title: 'nightly' })).toBe(
      'new session “nightly”: “Write the report”',
    );
    expect(startText({ kind: 'turn', sessionId: 'ses_1', input: 'Any news?' })).toBe('turn in ses_1: “Any news?”');
    expect(startText({ kind: 'job', items: [1, 2, 3], prompt: 'p', name: 'accounts' })).toBe(
      'job “accounts” over 3 items',
    );
  });

  it('links a started firing to its session, its turn’s thread or its job', () => {
    const started = { sessionId: 'ses_sch_1', threadId: 'thr_1', turnId: 'turn_sch_1' };
    expect(startedHref(firing({ started }), 'session')).toBe('/sessions/ses_sch_1');
    expect(startedText(firing({ started }), 'session')).toBe('session ses_sch_1');
    expect(startedHref(firing({ started }), 'turn')).toBe('/sessions/ses_sch_1?thread=thr_1');
    expect(startedText(firing({ started }), 'turn')).toBe('turn turn_sch_1');
    expect(startedHref(firing({ started: { sessionId: 'ses_sch_1', jobId: 'job_1' } }), 'job')).toBe('/jobs/job_1');
    expect(startedHref(firing({ status: 'skipped', reason: 'overlap' }), 'session')).toBeUndefined();
  });

  it('says why a firing did not start', () => {
    expect(firingNote(firing({ status: 'skipped', reason: 'missed', details: { count: 3 } }))).toBe(
      'missed: no worker ran (3 cron times)',
    );
    expect(firingNote(firing({ status: 'skipped', reason: 'overlap' }))).toBe('the previous firing’s work still ran');
    expect(firingNote(firing({ status: 'queued', reason: 'overlap' }))).toBe(
      'waits for the previous firing’s work to end',
    );
    expect(
      firingNote(firing({ status: 'failed', reason: 'session_not_found', details: { error: { message: 'gone' } } })),
    ).toBe('session_not_found: gone');
    expect(firingNote(firing({ started: { sessionId: 's' }, details: { missed: 2 } }))).toBe('catch-up: 2 missed');
  });

  it('reads again a second after the earliest next cron time of an active schedule', () => {
    const s = (paused: boolean, next: string[]) => ({ paused, nextFirings: next }) as unknown as Schedule;
    const at = '2026-01-01T03:00:00.000Z';
    expect(nextChangeAt([s(true, []), s(false, [at]), s(false, ['2026-01-01T04:00:00.000Z'])])).toBe(
      Date.parse(at) + 1_000,
    );
    expect(nextChangeAt([s(true, [])])).toBeUndefined();
    expect(inTime(at, Date.parse(at) - 3_000)).toBe('in 3 s');
    expect(inTime(at, Date.parse(at))).toBe('now');
  });
});
