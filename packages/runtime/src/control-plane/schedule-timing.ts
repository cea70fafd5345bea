import { Cron } from 'croner';

/**
 * When a schedule fires (docs/schedules.md): pure functions of a cron expression, a time zone and a clock the caller
 * passes in, so the ticker's decisions are tested without waiting. Croner does the calendar (time zones, DST).
 */

/** A cron time older than this when it is found is "missed" (nothing ran then), not merely late. */
export const MISSED_AFTER_MS = 60_000;
/** The most missed times counted one by one (a schedule every second, down for a week, says "at least" this). */
export const MAX_COUNTED_MISSES = 10_000;

export interface CronSpec {
  cron: string;
  timezone?: string | undefined;
}

function cronOf(spec: CronSpec): Cron {
  return new Cron(spec.cron, { paused: true, ...(spec.timezone ? { timezone: spec.timezone } : {}) });
}

/** The first cron time strictly after `after`, or undefined when there is none (a date in the past). */
export function nextFireAfter(spec: CronSpec, after: Date): Date | undefined {
  return cronOf(spec).nextRun(after) ?? undefined;
}

/** The next `count` cron times strictly after `after`. */
export function nextFirings(spec: CronSpec, after: Date, count: number): Date[] {
  return cronOf(spec).nextRuns(count, after);
}

/** What is due of a schedule at `now`, from its pointer (the first cron time not yet handled). */
export interface DueFirings {
  /** Times missed (older than MISSED_AFTER_MS): the latest of them, and how many there were. */
  missed?: { latest: Date; count: number };
  /** Times due now, oldest first: each is fired (or claimed by another worker). */
  onTime: Date[];
  /** The pointer after these: the first cron time after `now` (undefined: the schedule never fires again). */
  next: Date | undefined;
}

/**
 * The firings due at `now` for a schedule whose first unhandled time is `pointer`. A time is on time while it is at
 * most `missedAfterMs` old; older ones are missed — the worker was down, or the schedule was added with a pointer in
 * the past — and are reported together, for the catch-up policy to decide.
 */
export function dueFirings(spec: CronSpec, pointer: Date, now: Date, missedAfterMs = MISSED_AFTER_MS): DueFirings {
  const cron = cronOf(spec);
  const onTime: Date[] = [];
  let missed: DueFirings['missed'];
  const missedBefore = now.getTime() - missedAfterMs;
  // The pointer is a cron time (the first not yet handled): the step from just before it finds it again.
  let time = cron.nextRun(new Date(pointer.getTime() - 1)) ?? undefined;
  while (time && time.getTime() <= now.getTime()) {
    if (time.getTime() < missedBefore) {
      missed = { latest: time, count: (missed?.count ?? 0) + 1 };
      if (missed.count >= MAX_COUNTED_MISSES) {
        // Counted enough ("at least" this many): on to the first time that is not missed, uncounted.
        time = cron.nextRun(new Date(missedBefore - 1)) ?? undefined;
        continue;
      }
    } else {
      onTime.push(time);
    }
    time = cron.nextRun(time) ?? undefined;
  }
  return { ...(missed ? { missed } : {}), onTime, next: time };
}

/** What the catch-up policy makes of missed times: one skipped record, or one firing for the latest. */
export function catchUpDecision(
  policy: 'skip' | 'run_once',
  missed: { latest: Date; count: number },
): { action: 'skip' | 'fire'; fireAt: Date; reason: 'missed'; count: number } {
  return {
    action: policy === 'run_once' ? 'fire' : 'skip',
    fireAt: missed.latest,
    reason: 'missed',
    count: missed.count,
  };
}

/**
 * What the overlap policy makes of a firing while the previous firing's work still runs: start anyway (the
 * previous is over), skip this one, queue it behind the previous (a turn waits in the thread's queue; a session or
 * job firing waits as a `queued` record until the previous ended), or cancel the previous and start.
 */
export function overlapDecision(
  policy: 'skip' | 'queue' | 'cancel',
  previousRunning: boolean,
  kind: 'turn' | 'session' | 'job',
): 'start' | 'skip' | 'enqueue' | 'wait' | 'cancel_then_start' {
  if (!previousRunning) return 'start';
  if (policy === 'skip') return 'skip';
  if (policy === 'cancel') return 'cancel_then_start';
  return kind === 'turn' ? 'enqueue' : 'wait';
}
