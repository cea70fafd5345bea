import {
  advancePointer,
  claimFiring,
  dueScheduleRows,
  retakeFiring,
  type ScheduleRow,
  scheduleRow,
  staleFirings,
} from '../control-plane/schedule-rows.js';
import { catchUpDecision, dueFirings, MISSED_AFTER_MS } from '../control-plane/schedule-timing.js';
import { type FiringPort, fire } from './schedule-firing.js';

/** How often a worker looks for due firings. */
export const DEFAULT_TICK_MS = 1_000;
/** How long a claimed firing may stay unstarted before another worker takes it over (its claimer died). */
export const DEFAULT_CLAIM_GRACE_MS = 30_000;

export interface TickerOptions {
  tickMs?: number;
  claimGraceMs?: number;
  /** See schedule-timing.ts MISSED_AFTER_MS. */
  missedAfterMs?: number;
  /** The clock (tests). */
  now?: () => Date;
  /** Run before the first tick that succeeds (the config file's schedules into the store). */
  prepare?: () => Promise<void>;
}

/**
 * The schedules' ticker of a worker (docs/schedules.md), like the artifact sweeper: a timer, never overlapping
 * itself, unref'd, stopped on close. Each tick reads the schedules whose next cron time has come and claims each due
 * time by inserting its firing row — the primary key lets one worker's insert take effect, so every worker may tick
 * and each time still fires once — then starts the work (schedule-firing.ts) and moves the pointer on. Claims left
 * unstarted past the grace period (a worker died between claim and start) and firings `queued` behind a previous
 * one's work are taken over by whichever worker updates them first.
 */
export class ScheduleTicker {
  lastError: unknown;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly tickMs: number;
  private readonly graceMs: number;
  private readonly missedAfterMs: number;
  private readonly now: () => Date;
  private prepare: (() => Promise<void>) | undefined;

  constructor(
    private readonly port: FiringPort,
    options: TickerOptions = {},
  ) {
    this.tickMs = options.tickMs ?? DEFAULT_TICK_MS;
    this.graceMs = options.claimGraceMs ?? DEFAULT_CLAIM_GRACE_MS;
    this.missedAfterMs = options.missedAfterMs ?? MISSED_AFTER_MS;
    this.now = options.now ?? (() => new Date());
    this.prepare = options.prepare;
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().then(() => {
        this.running = undefined;
        this.schedule(this.tickMs);
      });
    }, delayMs);
    this.timer.unref();
  }

  /** One tick now (what the timer runs); failures are kept as `lastError` and the next tick tries again. */
  async tick(): Promise<void> {
    try {
      if (this.prepare) {
        await this.prepare();
        this.prepare = undefined;
      }
      const now = this.now();
      for (const schedule of await dueScheduleRows(this.port.db, now.toISOString())) {
        if (this.stopped) return;
        await this.handle(schedule, now);
      }
      await this.takeOver(now);
      this.lastError = undefined;
    } catch (error) {
      this.lastError = error;
    }
  }

  /** A due schedule: its missed times by the catch-up policy, its on-time ones fired, its pointer moved on. */
  private async handle(schedule: ScheduleRow, now: Date): Promise<void> {
    if (!schedule.nextFireAt) return;
    const due = dueFirings(schedule.definition, new Date(schedule.nextFireAt), now, this.missedAfterMs);
    let last: string | undefined;
    if (due.missed) {
      const decision = catchUpDecision(schedule.definition.catchUp, due.missed);
      const fireAt = decision.fireAt.toISOString();
      const details = { count: decision.count };
      const claimed = await claimFiring(this.port.db, {
        scheduleId: schedule.scheduleId,
        fireAt,
        ...(decision.action === 'skip'
          ? { status: 'skipped', reason: 'missed', details }
          : { status: 'claimed', reason: 'catch_up', details }),
      });
      if (claimed && decision.action === 'fire') await fire(this.port, schedule, fireAt, { missed: decision.count });
      last = fireAt;
    }
    for (const time of due.onTime) {
      if (this.stopped) return;
      const fireAt = time.toISOString();
      if (await claimFiring(this.port.db, { scheduleId: schedule.scheduleId, fireAt, status: 'claimed' })) {
        await fire(this.port, schedule, fireAt);
      }
      last = fireAt;
    }
    await advancePointer(this.port.db, schedule.scheduleId, last, due.next?.toISOString());
  }

  /** Claims whose worker died before starting them, and queued firings whose turn may have come. */
  private async takeOver(now: Date): Promise<void> {
    const stale = [
      ...(await staleFirings(this.port.db, 'claimed', new Date(now.getTime() - this.graceMs).toISOString())),
      ...(await staleFirings(this.port.db, 'queued', new Date(now.getTime() - this.tickMs).toISOString())),
    ];
    for (const firing of stale) {
      if (this.stopped) return;
      const schedule = await scheduleRow(this.port.db, firing.scheduleId);
      if (!schedule || schedule.paused) continue;
      if (!(await retakeFiring(this.port.db, firing))) continue;
      const missed = typeof firing.details?.count === 'number' ? firing.details.count : undefined;
      await fire(this.port, schedule, firing.fireAt, missed ? { missed } : {});
    }
  }

  /** Stop ticking; resolves once a tick in progress ended (before the store it uses is closed). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
