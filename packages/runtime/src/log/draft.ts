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
