import { describe, expect, it } from 'vitest';
import { cronProblem, ScheduleDefinitionSchema } from '../../src/config/schedules.js';
import {
  catchUpDecision,
  dueFirings,
  nextFireAfter,
  nextFirings,
  overlapDecision,
} from '../../src/control-plane/schedule-timing.js';

/** When schedules fire (docs/schedules.md): pure functions of the cron, the time zone and an injected clock. */
const at = (iso: string) => new Date(iso);
const iso = (dates: Date[]) => dates.map((d) => d.toISOString());

describe('cron parsing', () => {
  it('takes five or six fields and IANA time zones; names the field that is wrong', () => {
    expect(cronProblem('0 3 * * *')).toBeUndefined();
    expect(cronProblem('*/10 * * * * *', 'Europe/Paris')).toBeUndefined();
    expect(cronProblem('every night')).toMatchObject({ field: 'cron' });
    expect(cronProblem('* * * * * * * *')).toMatchObject({ field: 'cron' });
    expect(cronProblem('0 3 * * *', 'Mars/Olympus')).toMatchObject({ field: 'timezone' });
    const parsed = ScheduleDefinitionSchema.safeParse({
      scheduleId: 'x',
      cron: 'nope',
      start: { kind: 'session', input: 'hi' },
    });
    expect(parsed.success ? [] : parsed.error.issues.map((i) => i.path.join('.'))).toEqual(['cron']);
  });

  it('refuses a binding on a turn schedule (the session has its own), fills the defaults', () => {
    const turn = ScheduleDefinitionSchema.safeParse({
      scheduleId: 'x',
      cron: '0 3 * * *',
      start: { kind: 'turn', sessionId: 'ses_1', input: 'hi' },
      budget: { session: { tokens: 10 } },
    });
    expect(turn.success ? [] : turn.error.issues.map((i) => i.path.join('.'))).toEqual(['budget']);
    const session = ScheduleDefinitionSchema.parse({
      scheduleId: 'x',
      cron: '0 3 * * *',
      start: { kind: 'session', input: 'hi' },
    });
    expect(session).toMatchObject({ catchUp: 'skip', overlap: 'skip', paused: false });
  });
});

describe('next firing', () => {
  it('is the first cron time strictly after, in the schedule`s time zone (DST included)', () => {
    const nightly = { cron: '0 3 * * *', timezone: 'America/New_York' };
    expect(nextFireAfter(nightly, at('2026-01-01T00:00:00Z'))?.toISOString()).toBe('2026-01-01T08:00:00.000Z');
    // Summer time: 3 am in New York is 07:00 UTC.
    expect(nextFireAfter(nightly, at('2026-07-01T00:00:00Z'))?.toISOString()).toBe('2026-07-01T07:00:00.000Z');
    expect(iso(nextFirings({ cron: '*/20 * * * * *' }, at('2026-01-01T00:00:00Z'), 3))).toEqual([
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:40.000Z',
      '2026-01-01T00:01:00.000Z',
    ]);
  });
});

describe('due firings and catch-up', () => {
  const everySecond = { cron: '* * * * * *' };

  it('fires the times due since the pointer, oldest first, and moves the pointer after now', () => {
    const due = dueFirings(everySecond, at('2026-01-01T00:00:01Z'), at('2026-01-01T00:00:03.500Z'));
    expect(iso(due.onTime)).toEqual([
      '2026-01-01T00:00:01.000Z',
      '2026-01-01T00:00:02.000Z',
      '2026-01-01T00:00:03.000Z',
    ]);
    expect(due.missed).toBeUndefined();
    expect(due.next?.toISOString()).toBe('2026-01-01T00:00:04.000Z');
    expect(dueFirings(everySecond, at('2026-01-01T00:00:05Z'), at('2026-01-01T00:00:04Z')).onTime).toEqual([]);
  });

  it('reports times older than the tolerance as missed: how many, and the latest', () => {
    const hourly = { cron: '0 * * * *' };
    const due = dueFirings(hourly, at('2026-01-01T00:00:00Z'), at('2026-01-01T05:00:30Z'), 60_000);
    expect(due.missed).toEqual({ latest: at('2026-01-01T04:00:00Z'), count: 5 });
    expect(iso(due.onTime)).toEqual(['2026-01-01T05:00:00.000Z']);
    expect(catchUpDecision('skip', { latest: at('2026-01-01T04:00:00Z'), count: 5 })).toMatchObject({
      action: 'skip',
      reason: 'missed',
      count: 5,
    });
    expect(catchUpDecision('run_once', { latest: at('2026-01-01T04:00:00Z'), count: 5 })).toMatchObject({
      action: 'fire',
      fireAt: at('2026-01-01T04:00:00Z'),
    });
  });
});

describe('overlap', () => {
  it('starts when the previous work ended; otherwise skips, queues (a turn enqueues) or cancels', () => {
    expect(overlapDecision('skip', false, 'turn')).toBe('start');
    expect(overlapDecision('skip', true, 'session')).toBe('skip');
    expect(overlapDecision('queue', true, 'turn')).toBe('enqueue');
    expect(overlapDecision('queue', true, 'job')).toBe('wait');
    expect(overlapDecision('cancel', true, 'job')).toBe('cancel_then_start');
  });
});
