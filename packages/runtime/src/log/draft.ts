import type { EventFields, EventType } from '@oar/protocol';
import type { Db } from '../store/store.js';

/** What the engine writes: an event without the fields the log assigns (ids, sequence, time, profile fields). */
export type EventDraft = {
  [T in EventType]: { type: T } & Omit<
    EventFields<T>,
    'sessionId' | 'sequence' | 'runtimeId' | 'eventId' | 'timestamp' | 'schemaVersion'
  >;
}[EventType];

/** A precondition re-checked under the session row lock, inside the append's transaction (see `EventLog.append`). */
export type AppendGuard = (tx: Db) => Promise<void>;

/**
 * When a driven thread's facts reach the store. By default they are staged: part of the thread's working truth at
 * once, written at the next commit point (a crash of the process before it loses them, and they are redone).
 */
export interface WriteTiming {
  /** Commit now, with everything staged before, and wait for the disk: the write-ahead rule of a side effect. */
  durable?: boolean;
  /**
   * Commit now, with everything staged before (the step boundary: observers see the step before the model call);
   * the disk is waited for only when a fact in the commit needs it (log/durability.ts).
   */
  commit?: boolean;
  /** Checks committed state inside the transaction (see `EventLog.append`): written at once, and flushed. */
  guard?: AppendGuard;
}
