import type { EventDraft } from './draft.js';

/**
 * Durability chosen per commit by what it records (docs/reliability.md, "The contract"). On SQLite a commit either
 * waits until the file is flushed to disk, or returns once it is in the write-ahead log in memory: a crash of the
 * OAR process loses neither, a power loss (or an operating-system crash) may lose the relaxed ones that came last —
 * never one before a flushed commit, since a flush writes everything before it too, so the log then ends earlier
 * and still has no gap, and every process that had seen those commits died with them. PostgreSQL commits always
 * wait (store/dialect.ts says why: its server can lose them while OAR lives on).
 *
 * A writer may ask for a relaxed commit only where losing it can only make work run again: a step boundary or a
 * linger commit of a driven thread, whose staged facts are about read-only and idempotent work (the write-ahead rule
 * commits the rest durably at once). This function is the safety net the log applies whoever asks: a commit that
 * records any of these facts is flushed, since the world, a person or a client may act on it.
 */
export function needsFlush(drafts: readonly EventDraft[]): boolean {
  return drafts.some(mustReachDisk);
}

function mustReachDisk(draft: EventDraft): boolean {
  switch (draft.type) {
    // About to act on the world in a way that must not happen twice: its start must survive to be reconciled.
    case 'tool.started':
      return draft.payload.idempotent !== true;
    case 'process.started':
    // A turn's end is an answer a client has been given; a question or a decision is what a person acts on.
    case 'turn.completed':
    case 'turn.failed':
    case 'action.required':
    case 'action.resolved':
    case 'permission.requested':
    case 'permission.resolved':
    case 'subagent.spawned':
      return true;
    default:
      return false;
  }
}
