import type { RuntimeEvent, Task, TaskAttempt, TaskRelationship, TaskStatusValue } from '@oar/protocol';
import { memberOf } from './thread-state.js';

/**
 * The task projection: the public task read model (objective, status, attempts, relationships). Tasks come from the
 * model's declarations (action graphs, plans, delegations), from runners, and from people and clients through the
 * control plane (`create_task` … `link_tasks`, docs/tasks.md); one reducer for all.
 */

type Payload = Record<string, unknown>;

/**
 * The statuses that end a task: it is never active again (but through `retry_task`, from a retryable one).
 * `TaskStatusValueSchema` is @oar/protocol's vocabulary (its other final status, stale, the engine never records).
 */
export const TERMINAL_TASK_STATUSES = ['completed', 'failed', 'cancelled', 'timed_out', 'lost', 'archived'] as const;
export const isTerminalTaskStatus = memberOf<TaskStatusValue>(TERMINAL_TASK_STATUSES);

/** The ends `retry_task` starts a new attempt from: the work did not get done (an archived task stays filed). */
export const RETRYABLE_TASK_STATUSES = ['failed', 'cancelled', 'timed_out', 'lost'] as const;
export const isRetryableTaskStatus = memberOf<TaskStatusValue>(RETRYABLE_TASK_STATUSES);

/**
 * Whether a time budget ended the work an error ended (the standard's `timed_out`, not merely `failed`): its turn's
 * wall-time budget ran out (`budget_exceeded` on `wallTimeMs`), or a runner run passed its deadline
 * (`runner_timeout`). The turn's status (read-models/snapshots.ts) and its task's end (`task.timed_out`) say so.
 */
export function isTimeout(error: { code: string; details?: Record<string, unknown> } | undefined): boolean {
  if (!error) return false;
  return (
    error.code === 'runner_timeout' || (error.code === 'budget_exceeded' && error.details?.dimension === 'wallTimeMs')
  );
}

/**
 * Whether a task is in the lists of the session's tasks (the snapshot's `tasks`, a thread's, `list_tasks`): an
 * archived one is filed away, out of the recent ones, and still found by id (`get_task`).
 */
export const isListedTask = (task: Task): boolean => task.status !== 'archived';

/** The fields of a task a person or client defines (`create_task`, `update_task`), each replaced when given. */
export const TASK_DEFINITION_FIELDS = [
  'title',
  'objective',
  'visibility',
  'scope',
  'constraints',
  'taskProfile',
  'priority',
  'assignee',
  'acceptance',
] as const satisfies readonly (keyof Task)[];

const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** The definition fields `source` carries (only those present: an absent one keeps its value). */
export function definitionOf(source: object): Partial<Pick<Task, (typeof TASK_DEFINITION_FIELDS)[number]>> {
  const fields: Record<string, unknown> = {};
  for (const key of TASK_DEFINITION_FIELDS) {
    const value = (source as Record<string, unknown>)[key];
    if (value !== undefined) fields[key] = value;
  }
  return fields;
}

export function reduceTask(state: Task | undefined, event: RuntimeEvent): Task | undefined {
  const next = taskChange(state, event);
  if (!state || !next || next.status === state.status) return next;
  // Asked to cancel, a task stays `cancelling` until it ends: its work still running may report (a graph's action
  // retried, a decision awaited), but nothing makes it active again.
  if (state.status === 'cancelling' && !isTerminalTaskStatus(next.status)) {
    next.status = state.status;
    if (state.statusReason !== undefined) next.statusReason = state.statusReason;
    return next;
  }
  // An ended task is active again only through a retry: a late start of a turn it had is a fact about the turn.
  if (isTerminalTaskStatus(state.status) && !isTerminalTaskStatus(next.status) && event.type !== 'task.retrying') {
    next.status = state.status;
    return next;
  }
  // A reason belongs to the status it was given with: a new status without one has none (not the old one's). A
  // cancellation asked for ends with the reason it was asked with.
  if (next.statusReason === state.statusReason && state.status !== 'cancelling') delete next.statusReason;
  if (isTerminalTaskStatus(next.status)) {
    delete next.pausedFrom;
    delete next.pausedWith;
  }
  return next;
}

function taskChange(state: Task | undefined, event: RuntimeEvent): Task | undefined {
  const payload = (event.payload ?? {}) as Payload;
  if (event.type === 'task.created') {
    // The keys in the order rows recorded before client tasks have them (`oar replay` compares them as JSON).
    const { title, objective, visibility, ...definition } = definitionOf(payload);
    return {
      taskId: event.taskId,
      sessionId: event.sessionId,
      ...(event.threadId ? { threadId: event.threadId } : {}),
      ...(event.turnId ? { turnId: event.turnId } : {}),
      ...(event.parentTaskId ? { parentTaskId: event.parentTaskId } : {}),
      ...(title !== undefined ? { title } : {}),
      ...(objective !== undefined ? { objective } : {}),
      taskKind: typeof payload.taskKind === 'string' ? payload.taskKind : 'action_graph',
      visibility: visibility ?? 'foreground',
      ...definition,
      ...(payload.requestedBy ? { requestedBy: payload.requestedBy as Task['requestedBy'] } : {}),
      status: 'accepted',
      attempts: [],
      relationships: event.parentTaskId ? [{ kind: 'parent', targetId: event.parentTaskId }] : [],
      createdAt: event.timestamp,
      updatedAt: event.timestamp,
    };
  }
  if (!state) return state;
  // This reduction's own copy of the task: each case changes it, none copies it again.
  const next: Task = { ...state, updatedAt: event.timestamp };
  const set = (change: Partial<Task>): Task => Object.assign(next, change);
  const attempt = (change: Partial<TaskAttempt>): Task => {
    const attempts = next.attempts ?? [];
    // The attempt an event is about is nearly always the latest: looked for from the end, the rest shared.
    const index = attempts.findLastIndex((a) => a.runId === event.runId);
    if (index < 0) return set({ attempts: attempts.slice() });
    const changed = attempts.slice();
    changed[index] = { ...(attempts[index] as TaskAttempt), ...change };
    return set({ attempts: changed });
  };
  const reason = str(payload.reason);
  switch (event.type) {
    case 'task.accepted':
      return set({
        status: 'accepted',
        ...(payload.requestedBy ? { requestedBy: payload.requestedBy as Task['requestedBy'] } : {}),
      });
    case 'task.updated':
      return set({ ...definitionOf(payload), ...(event.threadId ? { threadId: event.threadId } : {}) });
    case 'task.queued':
      return set({
        status: 'queued',
        ...(event.threadId ? { threadId: event.threadId } : {}),
        ...(reason ? { statusReason: reason } : {}),
      });
    case 'task.delegated':
      return set({ ...(event.threadId ? { threadId: event.threadId } : {}) });
    case 'task.progress':
      return set({ progress: progressOf(payload, event.timestamp) });
    case 'task.paused':
      return set({
        status: 'paused',
        pausedFrom: payload.pausedFrom as TaskStatusValue,
        ...(str(payload.propagatedFrom) ? { pausedWith: str(payload.propagatedFrom) } : {}),
        statusReason: reason ?? 'paused',
      });
    case 'task.resumed': {
      const { pausedFrom: _from, pausedWith: _with, ...rest } = next;
      const resumed = Object.assign(rest, {
        status: (str(payload.status) as TaskStatusValue | undefined) ?? 'running',
        ...(reason ? { statusReason: reason } : {}),
      });
      // Its dependencies may have completed while it was paused: then it is ready, not blocked.
      return unblockedIfReady(resumed);
    }
    case 'task.cancel_requested': {
      // A paused task asked to cancel is no longer paused: nothing resumes it.
      const { pausedFrom: _from, pausedWith: _with, ...rest } = next;
      return Object.assign(rest, { status: 'cancelling' as const, statusReason: reason ?? 'cancel requested' });
    }
    case 'task.dependency.updated':
      return edgeChanged(next, event, payload);
    case 'task.attempt.started':
      return set({
        status: 'running',
        currentRunId: event.runId,
        startedAt: next.startedAt ?? event.timestamp,
        attempts: [
          ...(next.attempts ?? []),
          {
            runId: event.runId,
            status: 'running',
            startedAt: event.timestamp,
            attemptCount: typeof payload.attempt === 'number' ? payload.attempt : (next.attempts?.length ?? 0) + 1,
          },
        ],
      });
    case 'task.attempt.completed':
      return attempt({
        status: 'completed',
        endedAt: event.timestamp,
        ...(typeof payload.summary === 'string' ? { completionSummary: payload.summary } : {}),
      });
    case 'task.attempt.failed':
      return attempt({
        status: 'failed',
        endedAt: event.timestamp,
        ...(payload.error ? { lastError: payload.error as TaskAttempt['lastError'] } : {}),
      });
    case 'task.waiting':
      return set({
        status: payload.waitingFor === 'input' ? 'waiting_input' : 'waiting_permission',
        ...ownReason(next, reason),
      });
    case 'task.started':
      return set({ status: 'running', startedAt: next.startedAt ?? event.timestamp });
    case 'task.retrying':
      return set({ status: 'retrying' });
    case 'task.completed':
      return set({ status: 'completed', endedAt: event.timestamp });
    case 'task.failed':
      return set({ status: 'failed', endedAt: event.timestamp, lastError: payload.error as Task['lastError'] });
    case 'task.cancelled':
      return set({ status: 'cancelled', endedAt: event.timestamp, ...ownReason(next, reason) });
    case 'task.timed_out':
      return set({ status: 'timed_out', endedAt: event.timestamp, lastError: payload.error as Task['lastError'] });
    case 'task.archived':
      // Filed as it ended: `archivedFrom` keeps that end (its outcome, its verification) readable.
      return set({
        status: 'archived',
        archivedFrom: (str(payload.archivedFrom) as TaskStatusValue | undefined) ?? state.status,
        archivedAt: event.timestamp,
        ...ownReason(next, reason),
      });
    case 'task.lost':
      return set({
        status: 'lost',
        endedAt: event.timestamp,
        ...(payload.error ? { lastError: payload.error as Task['lastError'] } : {}),
      });
    case 'task.blocked':
      return set({
        status: 'blocked',
        ...(event.threadId && next.taskKind === 'task' ? { threadId: event.threadId } : {}),
        ...ownReason(next, reason),
      });
    default:
      return next;
  }
}

/**
 * The reason of a status, for a task made with create_task. The runtime's own tasks keep theirs in their thread's
 * facts, and their rows stay as recorded before client tasks existed (`oar replay` compares them).
 */
function ownReason(task: Task, reason: string | undefined): Pick<Task, 'statusReason'> {
  return reason && task.taskKind === 'task' ? { statusReason: reason } : {};
}

/** A progress report (`append_task_progress`): the latest replaces the one before; the log keeps them all. */
function progressOf(payload: Payload, at: string): NonNullable<Task['progress']> {
  const progress: Record<string, unknown> = { at };
  for (const key of ['message', 'percent', 'completed', 'total', 'refs'] as const) {
    if (payload[key] !== undefined) progress[key] = payload[key];
  }
  return progress;
}

/**
 * An edge of the task graph linked or unlinked, or the task one depends on ended. A task blocked by its
 * dependencies is queued (ready to run) once each of them completed.
 */
function edgeChanged(next: Task, event: RuntimeEvent, payload: Payload): Task {
  const relationships = next.relationships ?? [];
  const kind = str(payload.kind);
  const targetId = str(payload.targetId);
  if (payload.change === 'linked' && kind && targetId) {
    const edge: TaskRelationship = {
      kind,
      targetId,
      ...(str(payload.edgeStatus) ? { status: str(payload.edgeStatus) } : {}),
      ...(str(payload.reason) ? { reason: str(payload.reason) } : {}),
      createdAt: event.timestamp,
    };
    next.relationships = [...relationships.filter((r) => !(r.kind === kind && r.targetId === targetId)), edge];
    if (kind === 'parent') next.parentTaskId = targetId;
    return next;
  }
  if (payload.change === 'unlinked' && kind && targetId) {
    next.relationships = relationships.filter((r) => !(r.kind === kind && r.targetId === targetId));
    if (kind === 'parent' && next.parentTaskId === targetId) delete next.parentTaskId;
    return unblockedIfReady(next);
  }
  const dependency = str(payload.dependencyTaskId);
  const status = str(payload.dependencyStatus);
  if (payload.change === 'dependency_ended' && dependency && status) {
    next.relationships = relationships.map((r) =>
      r.kind === 'dependency' && r.targetId === dependency ? { ...r, status, updatedAt: event.timestamp } : r,
    );
    if (status !== 'completed' && next.status === 'blocked') {
      next.statusReason = `dependency ${dependency} ended ${status}`;
    }
    return unblockedIfReady(next);
  }
  return next;
}

/** A blocked task whose every dependency completed is queued: ready to run (its held turn starts). */
function unblockedIfReady(next: Task): Task {
  if (next.status !== 'blocked') return next;
  const open = (next.relationships ?? []).filter((r) => r.kind === 'dependency' && r.status !== 'completed');
  if (open.length > 0) return next;
  next.status = 'queued';
  next.statusReason = 'its dependencies completed';
  return next;
}
