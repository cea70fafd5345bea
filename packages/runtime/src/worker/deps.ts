import type { EventLog } from '../log/event-log.js';
import type { LiveChannel } from '../log/live.js';
import type { Notifier } from '../log/notifier.js';
import type { Tracing } from '../log/tracing.js';
import type { Limiter } from '../models/provider-limits.js';
import type { SessionState } from '../read-models/session.js';
import type { BoundConfig } from '../scheduler/engine.js';

export interface WorkerDeps {
  log: EventLog;
  notifier: Notifier;
  runtimeId: string;
  /** The runnable configuration of a session's binding (`hash` picks a turn's binding; default the current). */
  configFor(session: SessionState | undefined, hash: string | undefined): Promise<BoundConfig>;
  /** Spans for what this worker does (default: the global tracer provider's, a no-op without an SDK). */
  tracing?: Tracing;
  /** Where the streamed output of the model calls it makes goes (`model.delta`, live-only); none: nowhere. */
  live?: LiveChannel;
  /** Limits per provider and model shared by every thread this worker drives (default: none but 429 pauses). */
  limiter?: Limiter;
}

/** The state of one thread this worker drives: its lease, its abort controller, whether it was kicked again. */
export interface Driver {
  sessionId: string;
  threadId: string;
  again: boolean;
  lost: boolean;
  controller: AbortController;
  done: Promise<void>;
  renewal?: NodeJS.Timeout;
  /** The driver's engine, once the lease is claimed (its staged facts die with an abandoned worker). */
  engine?: { stop(): void };
  /** Handed back between two turns because other threads waited for a driver (fair share): it queues again. */
  yielded?: boolean;
  /** Left idle until then (ms since the epoch): its next turn waits out a backoff. Recorded on the lease it releases. */
  wakeAt?: number;
}
