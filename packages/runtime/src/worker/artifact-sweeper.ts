import type { ArtifactRetention } from '../config/retention.js';
import { type ExpireArtifactsReport, expireArtifacts } from '../control-plane/retention.js';
import type { EventLog } from '../log/event-log.js';

/** The first sweep after start waits at most this long (a process restarted often still sweeps). */
const FIRST_SWEEP_MAX_MS = 60_000;

/**
 * The periodic artifact retention sweep of a long-lived worker (`oar serve`, `oar worker`; docs/reliability.md
 * "Artifact retention"): every `sweepEveryMinutes`, one `expireArtifacts` — whose first statement is one range read
 * of an index holding only unexpired artifacts, so a sweep with nothing to do costs one empty read. Sweeps never
 * overlap in a process; several workers on one PostgreSQL store may sweep at once, and the tombstones' guard lets
 * only one of them expire a given artifact. A failed sweep (the store unavailable) is kept as `lastError` and tried
 * again next time: retention is never urgent.
 */
export class ArtifactSweeper {
  /** The last sweep's report, and the error of the last one that failed (cleared by a success). */
  lastReport: ExpireArtifactsReport | undefined;
  lastError: unknown;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly log: EventLog,
    private readonly policy: ArtifactRetention,
  ) {
    const everyMs = Math.round(policy.sweepEveryMinutes * 60_000);
    this.timer = setTimeout(() => this.tick(everyMs), Math.min(everyMs, FIRST_SWEEP_MAX_MS));
    this.timer.unref();
  }

  private tick(everyMs: number): void {
    if (this.stopped) return;
    this.running = this.sweep().then(() => {
      this.running = undefined;
      if (this.stopped) return;
      this.timer = setTimeout(() => this.tick(everyMs), everyMs);
      this.timer.unref();
    });
  }

  /** One sweep now (also what the timer runs). */
  async sweep(): Promise<ExpireArtifactsReport | undefined> {
    try {
      this.lastReport = await expireArtifacts(this.log, this.policy);
      this.lastError = undefined;
      return this.lastReport;
    } catch (error) {
      this.lastError = error;
      return undefined;
    }
  }

  /** Stop sweeping; resolves once a sweep in progress ended (before the store it uses is closed). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
