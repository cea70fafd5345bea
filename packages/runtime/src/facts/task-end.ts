import { type OarError, oarError, type Task } from '@oar/protocol';
import { OarRuntimeError } from '../kernel/errors.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { isTerminalTaskStatus, isTimeout } from '../read-models/task.js';
import type { ThreadView, TurnState, TurnTask } from '../read-models/thread-state.js';
import type { FactWriter } from './writer.js';

/**
 * The facts of a task's end, shared by the loop (a task's turn ended: facts/turn-end.ts) and the control plane
 * (`complete_task`, `fail_task`): the attempt's end, the task's, and — when it completed — the release of every task
 * that waits for it (`task.dependency.updated` on the dependent, and on its thread when a held turn waits there).
 * Each is computed from the tasks as read, and written under a guard that they are still so: a dependency linked or
 * a task started in between makes the writer read again (`TaskChangedError`).
 */

/** A task the end is computed from changed before it was written; the writer reads again and retries. */
export class TaskChangedError extends OarRuntimeError {
  constructor(taskId: string) {
    super('task_changed', `task "${taskId}" changed while its end was being recorded`, { retryable: true });
  }
}

/** How a task's work ended. */
export type TaskOutcome =
  | { status: 'completed'; summary: string }
  | { status: 'failed'; error: OarError }
  | { status: 'timed_out'; error: OarError }
  | { status: 'cancelled'; error: OarError };

/**
 * How work that ended with `error` ends its task: cancelled when an interrupt stopped it, timed out when a time
 * budget did (the standard's terminal `timed_out`: `retry_task` starts it again), else failed.
 */
export function failureOutcome(error: OarError, cancelled = false): TaskOutcome {
  return { status: cancelled ? 'cancelled' : isTimeout(error) ? 'timed_out' : 'failed', error };
}

/** Who cancelled a task: its owner's command (`cancel_task`, maybe via an ancestor), or an interrupt of its turn. */
export type CancelledBy = 'owner' | 'interrupt';

/**
 * The fact of a task's end — `task.completed`, `.failed`, `.timed_out` or `.cancelled` — for the control plane and
 * the loop alike (a graph's, a delegation's, a runner run's, a client's task).
 */
export function taskEnded(
  ids: { taskId: string; threadId?: string; turnId?: string; runId?: string },
  outcome: TaskOutcome,
  requestedBy: CancelledBy = 'owner',
  propagatedFrom?: string,
): EventDraft {
  switch (outcome.status) {
    case 'completed':
      return { type: 'task.completed', ...ids, payload: { summary: outcome.summary } };
    case 'failed':
      return { type: 'task.failed', ...ids, payload: { error: outcome.error } };
    case 'timed_out':
      return { type: 'task.timed_out', ...ids, payload: { error: outcome.error, reason: outcome.error.message } };
    case 'cancelled':
      return {
        type: 'task.cancelled',
        ...ids,
        payload: { reason: outcome.error.message, requestedBy, ...(propagatedFrom ? { propagatedFrom } : {}) },
      };
  }
}

export interface TaskEnd {
  drafts: EventDraft[];
  guard?: AppendGuard;
}

type TaskLoader = Pick<FactWriter, 'loadTasks'>;

/** The edge kinds a dependency makes, seen from each side: `dependency` on the waiting task, `dependent` on the other. */
export const DEPENDENCY = 'dependency';
export const DEPENDENT = 'dependent';

/**
 * The end of a task's turn (`start_task` made the turn an attempt of it): the attempt ends with the turn; the task
 * completes with it unless it has acceptance criteria (then it waits for its owner's `complete_task`), fails with
 * it, and is cancelled with it unless it was paused (a pause stops the attempt and keeps the task).
 */
export async function taskTurnEnd(
  writer: TaskLoader,
  thread: ThreadView,
  turn: TurnState,
  outcome: TaskOutcome,
): Promise<TaskEnd> {
  const attempt = turn.task;
  if (!attempt) return { drafts: [] };
  const ids = { threadId: thread.threadId, turnId: turn.turnId, taskId: attempt.taskId, runId: attempt.runId };
  const task = (await writer.loadTasks(thread.sessionId, [attempt.taskId])).get(attempt.taskId);
  // A turn that never started (it could not: its binding cannot run here) had no attempt to end.
  const attemptEnd = turn.startedAt !== undefined ? [attemptEnded(ids, outcome)] : [];
  // Ended meanwhile by its owner (fail_task, cancel_task): the attempt's end is all that is left to say.
  if (!task || isTerminalTaskStatus(task.status)) return { drafts: attemptEnd };
  // Its owner asked to cancel it (task.cancel_requested): its work has stopped now, and the task ends cancelled —
  // however the work ended (it may have finished just before the interrupt reached it: the attempt says so).
  if (task.status === 'cancelling') {
    const error = oarError('interrupted', task.statusReason ?? 'task cancelled');
    const end = await taskEnd(writer, thread.sessionId, task, { status: 'cancelled', error }, ids, 'owner');
    return { drafts: [...attemptEnd, ...end.drafts], ...(end.guard ? { guard: end.guard } : {}) };
  }
  if (outcome.status === 'completed' && attempt.acceptance) {
    const waiting: EventDraft = {
      type: 'task.waiting',
      ...ids,
      payload: {
        waitingFor: 'input',
        awaiting: 'acceptance',
        reason: 'the work is done; its acceptance criteria wait for the owner (complete_task or fail_task)',
      },
    };
    return { drafts: [...attemptEnd, waiting], guard: tasksUnchanged(thread.sessionId, [task]) };
  }
  if (outcome.status === 'cancelled' && task.status === 'paused') {
    return { drafts: attemptEnd, guard: tasksUnchanged(thread.sessionId, [task]) };
  }
  const end = await taskEnd(writer, thread.sessionId, task, outcome, ids, 'interrupt');
  return { drafts: [...attemptEnd, ...end.drafts], ...(end.guard ? { guard: end.guard } : {}) };
}

/**
 * A task's own end (`taskEnded`) and the news of it on every task that depends on it (which a completion releases);
 * everything is computed from `task` and its dependents as read, guarded as such.
 */
export async function taskEnd(
  writer: TaskLoader,
  sessionId: string,
  task: Task,
  outcome: TaskOutcome,
  ids: { threadId?: string; turnId?: string; runId?: string } = {},
  /** Who cancelled it (a cancellation only): its owner's command, or an interrupt of its turn. */
  requestedBy: CancelledBy = 'owner',
  /** The ancestor whose cancel reached it (`propagate: children`). */
  propagatedFrom?: string,
): Promise<TaskEnd> {
  const end = taskEnded({ ...ids, taskId: task.taskId }, outcome, requestedBy, propagatedFrom);
  const dependentIds = edges(task, DEPENDENT);
  const dependents = dependentIds.length > 0 ? await writer.loadTasks(sessionId, dependentIds) : new Map();
  const released: EventDraft[] = [];
  for (const dependent of dependents.values()) {
    if (isTerminalTaskStatus(dependent.status)) continue;
    released.push({
      type: 'task.dependency.updated',
      taskId: dependent.taskId,
      // On the dependent's thread too: that is where a held turn waits for this task (read-models/thread.ts).
      ...(dependent.threadId ? { threadId: dependent.threadId } : {}),
      taskRelationship: { kind: DEPENDENCY, targetId: task.taskId, status: outcome.status },
      payload: { change: 'dependency_ended', dependencyTaskId: task.taskId, dependencyStatus: outcome.status },
    });
  }
  return { drafts: [end, ...released], guard: tasksUnchanged(sessionId, [task, ...dependents.values()]) };
}

/** How often a task's end (or a task command) is computed again when a task it read changed before it wrote. */
export const MAX_TASK_RETRIES = 10;

/**
 * An attempt's end: completed with a summary, or failed (a cancellation or a timeout is a failed attempt, its
 * `failureCategory` saying which).
 */
export function attemptEnded(
  ids: { taskId: string; runId: string; threadId?: string; turnId?: string },
  outcome: TaskOutcome,
): EventDraft {
  return outcome.status === 'completed'
    ? { type: 'task.attempt.completed', ...ids, payload: { summary: outcome.summary } }
    : {
        type: 'task.attempt.failed',
        ...ids,
        payload: { error: outcome.error, retryable: true, failureCategory: outcome.status },
      };
}

/** A task's attempt starts (its turn started, or its external owner started the work). */
export function taskAttemptStarted(
  ids: { threadId?: string; turnId?: string },
  attempt: Pick<TurnTask, 'taskId' | 'runId' | 'attempt'>,
): EventDraft[] {
  const at = { ...ids, taskId: attempt.taskId, runId: attempt.runId };
  return [
    { type: 'task.started', ...at, payload: { attempt: attempt.attempt } },
    { type: 'task.attempt.started', ...at, payload: { attempt: attempt.attempt, status: 'running' } },
  ];
}

/** An edge linked, on the task it is recorded on (control-plane/task-graph.ts records both sides of an edge). */
export function edgeLinked(
  taskId: string,
  kind: string,
  targetId: string,
  options: { reason?: string; edgeStatus?: string } = {},
): EventDraft {
  const { reason, edgeStatus } = options;
  return {
    type: 'task.dependency.updated',
    taskId,
    taskRelationship: { kind, targetId, ...(edgeStatus ? { status: edgeStatus } : {}) },
    payload: { change: 'linked', kind, targetId, ...(edgeStatus ? { edgeStatus } : {}), ...(reason ? { reason } : {}) },
  };
}

/** The targets of a task's edges of one kind. */
export function edges(task: Task, kind: string): string[] {
  return (task.relationships ?? []).filter((r) => r.kind === kind).map((r) => r.targetId);
}

/**
 * What task commands and ends are computed from: a task's status, its thread, and its edges with their status (a
 * start computes what it waits for from its dependency edges: a dependency's end changes that edge).
 */
function taskBasis(task: Task | undefined): string {
  if (!task) return 'absent';
  const edges = (task.relationships ?? []).map((r) => [r.kind, r.targetId, r.status ?? null]);
  return JSON.stringify([task.status, task.threadId ?? null, edges]);
}

/**
 * A guard that each task is, under the session lock, what the writer read (status, thread and edges), and that
 * each of `absent` still does not exist (a task about to be created under a caller's id).
 */
export function tasksUnchanged(sessionId: string, tasks: readonly Task[], absent: readonly string[] = []): AppendGuard {
  return async (tx) => {
    const keys = [...tasks.map((t) => t.taskId), ...absent].map((key) => ({ kind: 'task' as const, key }));
    const current = (await loadReadModels(tx, sessionId, keys)).tasks;
    for (const task of tasks) {
      if (taskBasis(current.get(task.taskId)) !== taskBasis(task)) throw new TaskChangedError(task.taskId);
    }
    for (const taskId of absent) if (current.has(taskId)) throw new TaskChangedError(taskId);
  };
}
