import type { RuntimeEvent } from '@oar/protocol';
import { setRecent } from '../kernel/lru.js';
import { applyEvent, copyReadModels, emptyReadModels, type ReadModels } from './project.js';

/**
 * Read models as they were after any event (time travel), fast on long sessions: a prefix of an append-only log
 * never changes, so the models after every `every`-th event are kept as checkpoints and a position is rebuilt from
 * the nearest one below it — at most `every` events read and applied instead of the whole prefix.
 *
 * A checkpoint copies the maps, not the models: reducers replace a model when an event changes it and never mutate
 * one, so checkpoints share every model that did not change between them. Bounded: `maxPerSession` checkpoints
 * per session (the spacing doubles when a session outgrows them) and `maxSessions` sessions, least recently used
 * first out.
 */
export class TimeTravel {
  private readonly sessions = new Map<string, { every: number; checkpoints: Map<number, ReadModels> }>();

  constructor(
    private readonly read: (sessionId: string, after: number, limit: number) => Promise<RuntimeEvent[]>,
    private readonly options: { every: number; maxPerSession: number; maxSessions: number } = {
      every: 1_000,
      maxPerSession: 32,
      maxSessions: 8,
    },
  ) {}

  async at(sessionId: string, sequence: number): Promise<ReadModels> {
    let entry = this.sessions.get(sessionId);
    if (!entry) entry = { every: this.options.every, checkpoints: new Map() };
    setRecent(this.sessions, sessionId, entry, this.options.maxSessions);
    let from = 0;
    for (const position of entry.checkpoints.keys()) if (position <= sequence && position > from) from = position;
    const base = entry.checkpoints.get(from);
    const models = base ? copy(base) : emptyReadModels();
    const events = sequence > from ? await this.read(sessionId, from, sequence - from) : [];
    for (const event of events) {
      applyEvent(models, event);
      if (event.sequence % entry.every === 0 && !entry.checkpoints.has(event.sequence)) {
        entry.checkpoints.set(event.sequence, copy(models));
        if (entry.checkpoints.size > this.options.maxPerSession) thin(entry);
      }
    }
    return models;
  }
}

const copy = copyReadModels;

/** Double the spacing: keep only the checkpoints at multiples of the new one. */
function thin(entry: { every: number; checkpoints: Map<number, ReadModels> }): void {
  entry.every *= 2;
  for (const position of [...entry.checkpoints.keys()]) {
    if (position % entry.every !== 0) entry.checkpoints.delete(position);
  }
}
