import type { RuntimeEvent, Task } from '@oar/protocol';
import { reduceSession, reduceTask, type SessionState } from './session.js';
import { reduceThread } from './thread.js';
import type { ThreadState } from './thread-state.js';

/** The read models a session keeps, by kind and key. */
export interface ReadModels {
  session?: SessionState;
  threads: Map<string, ThreadState>;
  tasks: Map<string, Task>;
  toolInventory: Map<string, Record<string, unknown>>;
}

export type ReadModelKind = 'session' | 'thread' | 'task' | 'tool_inventory';

export function emptyReadModels(): ReadModels {
  return { threads: new Map(), tasks: new Map(), toolInventory: new Map() };
}

/** Which read models an event touches: the only ones the incremental path loads and writes. */
export function touchedKeys(event: RuntimeEvent): { kind: ReadModelKind; key: string }[] {
  const keys: { kind: ReadModelKind; key: string }[] = [{ kind: 'session', key: event.sessionId }];
  if (event.threadId) keys.push({ kind: 'thread', key: event.threadId });
  if (event.taskId && event.type.startsWith('task.')) keys.push({ kind: 'task', key: event.taskId });
  if (event.type === 'tool.catalog.resolved' && event.threadId)
    keys.push({ kind: 'tool_inventory', key: event.threadId });
  return keys;
}

/** Apply one event to the read models it touches (mutates the maps; each model value is replaced, never mutated). */
export function applyEvent(models: ReadModels, event: RuntimeEvent): void {
  models.session = reduceSession(models.session, event);
  if (event.threadId) {
    const thread = reduceThread(models.threads.get(event.threadId), event);
    if (thread) models.threads.set(event.threadId, thread);
  }
  if (event.taskId && event.type.startsWith('task.')) {
    const task = reduceTask(models.tasks.get(event.taskId), event);
    if (task) models.tasks.set(event.taskId, task);
  }
  if (event.type === 'tool.catalog.resolved' && event.threadId) {
    models.toolInventory.set(event.threadId, {
      threadId: event.threadId,
      turnId: event.turnId,
      resolvedAt: event.timestamp,
      ...(event.payload as Record<string, unknown>),
    });
  }
}

/** Rebuild every read model of a session from its events (`oar replay`, and the rebuild == incremental test). */
export function replay(events: Iterable<RuntimeEvent>): ReadModels {
  const models = emptyReadModels();
  for (const event of events) applyEvent(models, event);
  return models;
}
