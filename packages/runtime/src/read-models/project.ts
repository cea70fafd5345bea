import type { RuntimeEvent, Task } from '@oar/protocol';
import { type JobState, reduceJob } from './job.js';
import { reduceRun } from './run.js';
import { reduceSession, type SessionState, ticksSessionClock } from './session.js';
import { reduceTask } from './task.js';
import { reduceThread, threadChange, withThreadClock } from './thread.js';
import type { RunState, ThreadState, ThreadView } from './thread-state.js';

/** The read models a session keeps, by kind and key. */
export interface ReadModels {
  session?: SessionState;
  threads: Map<string, ThreadState>;
  runs: Map<string, RunState>;
  tasks: Map<string, Task>;
  toolInventory: Map<string, Record<string, unknown>>;
  jobs: Map<string, JobState>;
}

export type ReadModelKind = 'session' | 'thread' | 'run' | 'task' | 'tool_inventory' | 'job';

export function emptyReadModels(): ReadModels {
  return { threads: new Map(), runs: new Map(), tasks: new Map(), toolInventory: new Map(), jobs: new Map() };
}

/** A copy of the maps (the models themselves are never mutated, so they are shared). */
export function copyReadModels(models: ReadModels): ReadModels {
  return {
    ...(models.session ? { session: models.session } : {}),
    threads: new Map(models.threads),
    runs: new Map(models.runs),
    tasks: new Map(models.tasks),
    toolInventory: new Map(models.toolInventory),
    jobs: new Map(models.jobs),
  };
}

/** Which read models an event touches: the only ones the incremental path loads and writes. */
export function touchedKeys(event: RuntimeEvent): { kind: ReadModelKind; key: string }[] {
  const keys: { kind: ReadModelKind; key: string }[] = [{ kind: 'session', key: event.sessionId }];
  if (event.threadId) keys.push({ kind: 'thread', key: event.threadId });
  if (event.runId && event.threadId) keys.push({ kind: 'run', key: event.runId });
  if (event.taskId && event.type.startsWith('task.')) keys.push({ kind: 'task', key: event.taskId });
  if (event.type === 'tool.catalog.resolved' && event.threadId)
    keys.push({ kind: 'tool_inventory', key: event.threadId });
  if (event.jobId && event.type.startsWith('job.')) keys.push({ kind: 'job', key: event.jobId });
  return keys;
}

/**
 * The read model `event` creates from nothing (its reducer ignores any earlier state of that key): a batch that
 * starts a model this way needs no look at the store for it.
 */
export function createdKey(event: RuntimeEvent): { kind: ReadModelKind; key: string } | undefined {
  if (event.type === 'thread.started' && event.threadId) return { kind: 'thread', key: event.threadId };
  if (event.type === 'task.created' && event.taskId) return { kind: 'task', key: event.taskId };
  if (event.type === 'job.created' && event.jobId) return { kind: 'job', key: event.jobId };
  if (event.type === 'run.status' && event.runId && event.threadId && isDeclared(event)) {
    return { kind: 'run', key: event.runId };
  }
  return undefined;
}

const isDeclared = (event: RuntimeEvent) => (event.payload as { phase?: unknown } | undefined)?.phase === 'declared';

/** Apply one event to the read models it touches (each model value is replaced, never mutated). */
export function applyEvent(models: ReadModels, event: RuntimeEvent): void {
  models.session = reduceSession(models.session, event);
  if (event.threadId) {
    const thread = reduceThread(models.threads.get(event.threadId), event);
    if (thread) models.threads.set(event.threadId, thread);
  }
  applyOthers(models, event);
}

/** The read models other than the session's and the threads': runs, tasks, the tool inventory, jobs. */
function applyOthers(models: ReadModels, event: RuntimeEvent): void {
  if (event.runId && event.threadId) {
    const run = reduceRun(models.runs.get(event.runId), event);
    if (run) models.runs.set(event.runId, run);
  }
  if (event.taskId && event.type.startsWith('task.')) {
    const task = reduceTask(models.tasks.get(event.taskId), event);
    if (task) models.tasks.set(event.taskId, task);
  }
  if (event.jobId && event.type.startsWith('job.')) {
    const job = reduceJob(models.jobs.get(event.jobId), event);
    if (job) models.jobs.set(event.jobId, job);
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

/**
 * Rebuild every read model of a session from its events (`oar replay`, and the rebuild == incremental test): the
 * same reducers as `applyEvent`, but the session's and a thread's clock (`updatedAt`, `lastSequence`) is not copied
 * into a new object for every event that changes nothing else — no intermediate state is ever seen here, so each
 * model takes the clock of the last event that only ticked it, once, at the end (unless a later change set it).
 */
export function replay(events: Iterable<RuntimeEvent>): ReadModels {
  const models = emptyReadModels();
  let sessionTick: RuntimeEvent | undefined;
  const threadTicks = new Map<string, RuntimeEvent>();
  for (const event of events) {
    if (models.session && ticksSessionClock(event)) sessionTick = event;
    else {
      models.session = reduceSession(models.session, event);
      sessionTick = undefined;
    }
    const threadId = event.threadId;
    const thread = threadId && event.type !== 'thread.started' ? models.threads.get(threadId) : undefined;
    if (thread && threadId) {
      const changed = threadChange(thread, event);
      if (changed === thread) threadTicks.set(threadId, event);
      else {
        models.threads.set(threadId, withThreadClock(thread, changed, event));
        threadTicks.delete(threadId);
      }
    } else if (threadId) {
      const started = reduceThread(undefined, event);
      if (started) models.threads.set(threadId, started);
      threadTicks.delete(threadId);
    }
    applyOthers(models, event);
  }
  if (models.session && sessionTick) models.session = reduceSession(models.session, sessionTick);
  for (const [threadId, event] of threadTicks) {
    const thread = models.threads.get(threadId) as ThreadState;
    models.threads.set(threadId, withThreadClock(thread, thread, event));
  }
  return models;
}

/**
 * The runs of a thread, in the order its turns declared them. A Map, not a record: a long thread has thousands of
 * runs, and copying a record that size to change one entry cost half a millisecond (a Map copy, a twelfth of it).
 */
export function threadRuns(thread: ThreadState, runs: ReadonlyMap<string, RunState>): Map<string, RunState> {
  const out = new Map<string, RunState>();
  for (const turn of thread.turns) {
    for (const runId of turn.runIds) {
      const run = runs.get(runId);
      if (run) out.set(runId, run);
    }
  }
  return out;
}

/**
 * A thread view after a change, without joining every run again: the thread replaced, the `changed` runs (of this
 * thread) replaced, a new run added last when it is the thread's latest (a run is declared by the running turn,
 * after every earlier run); anything else is joined anew. Equal to `threadView` of the changed models.
 */
export function updatedView(view: ThreadView, thread: ThreadState, changed: readonly RunState[]): ThreadView {
  // A rollback removed turns: their runs leave the view with them (the loop must not see their actions again).
  if (thread.turns.length < view.turns.length) {
    const runs = new Map(view.runs);
    for (const run of changed) runs.set(run.runId, run);
    return { ...thread, runs: threadRuns(thread, runs) };
  }
  if (changed.length === 0) return { ...thread, runs: view.runs };
  const runs = new Map(view.runs);
  const added: string[] = [];
  for (const run of changed) {
    if (!runs.has(run.runId)) added.push(run.runId);
    runs.set(run.runId, run);
  }
  if (added.length > 0 && !endsWithRuns(thread, added)) return { ...thread, runs: threadRuns(thread, runs) };
  return { ...thread, runs };
}

/** Whether the thread's last declared runs are `runIds`, in that order. */
function endsWithRuns(thread: ThreadState, runIds: readonly string[]): boolean {
  let wanted = runIds.length - 1;
  for (let t = thread.turns.length - 1; t >= 0 && wanted >= 0; t--) {
    const ids = (thread.turns[t] as ThreadState['turns'][number]).runIds;
    for (let r = ids.length - 1; r >= 0 && wanted >= 0; r--, wanted--) if (ids[r] !== runIds[wanted]) return false;
  }
  return wanted < 0;
}

/** A thread joined with its runs. */
export function threadView(models: ReadModels, threadId: string): ThreadView | undefined {
  const thread = models.threads.get(threadId);
  return thread ? { ...thread, runs: threadRuns(thread, models.runs) } : undefined;
}

/** Every thread of the session joined with its runs. */
export function threadViews(models: ReadModels): ThreadView[] {
  return [...models.threads.values()].map((thread) => ({ ...thread, runs: threadRuns(thread, models.runs) }));
}
