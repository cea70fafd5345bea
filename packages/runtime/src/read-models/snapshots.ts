import {
  OAR_SCHEMA_VERSION,
  type SessionSnapshot,
  type Task,
  type ThreadReadModel,
  type ThreadStatus,
  type TurnStatus,
} from '@oar/protocol';
import type { SessionState } from './session.js';
import type { ThreadState, ThreadView } from './thread-state.js';

/**
 * The public read models (the Agent Runtime snapshot schema) computed from the engine's projections. Honest by
 * construction: a waiting thread is `blocked` with its pending requests listed, never inferred complete.
 */

const THREAD_STATUS: Record<ThreadState['status'], ThreadStatus> = {
  idle: 'idle',
  running: 'running',
  waiting_permission: 'blocked',
  waiting_input: 'blocked',
  completed: 'completed',
  failed: 'failed',
  closed: 'completed',
};

export function toThreadReadModel(thread: ThreadView, tasks: Task[]): ThreadReadModel {
  const threadTasks = tasks.filter((task) => task.threadId === thread.threadId);
  const last = thread.turns.filter((t) => t.completedAt).at(-1);
  const waiting = thread.pending.length > 0;
  const queued = thread.queue.length > 0 && !thread.activeTurnId;
  return {
    threadId: thread.threadId,
    status: queued ? 'queued' : THREAD_STATUS[thread.status],
    ...(thread.title ? { title: thread.title } : {}),
    ...(thread.activeTurnId ? { activeTurnId: thread.activeTurnId } : {}),
    turns: thread.turns.map((turn) => {
      const runId = turn.runIds.at(-1);
      const run = runId ? thread.runs.get(runId) : undefined;
      return {
        turnId: turn.turnId,
        status: (turn.status === 'running' && waiting && thread.activeTurnId === turn.turnId
          ? thread.pending[0]?.actionType === 'user_input'
            ? 'waiting_input'
            : 'waiting_permission'
          : turn.status) as TurnStatus,
        ...(turn.startedAt ? { startedAt: turn.startedAt } : {}),
        ...(turn.completedAt ? { completedAt: turn.completedAt } : {}),
        ...(run ? { taskId: run.taskId, runId: run.runId } : {}),
      };
    }),
    pendingRequests: thread.pending.map((p) => ({
      actionId: p.actionId,
      actionType: p.actionType,
      turnId: p.turnId,
      ...(p.toolCallId ? { toolCallId: p.toolCallId } : {}),
      prompt: p.prompt,
      requestedAt: p.requestedAt,
    })),
    queuedTurns: thread.queue.map((q, position) => ({
      queuedTurnId: q.turnId,
      turnId: q.turnId,
      position,
      source: q.source,
      enqueuedAt: q.enqueuedAt,
    })),
    incidents: thread.incidents.map((i) => ({
      severity: i.severity,
      code: i.code,
      message: i.message,
      at: i.at,
      ...(i.turnId ? { turnId: i.turnId } : {}),
      eventId: i.eventId,
    })),
    evidenceSummary: {},
    ...(last
      ? {
          lastOutcome: {
            turnId: last.turnId,
            status: last.status,
            ...(last.answer !== undefined ? { answer: last.answer } : {}),
            ...(last.error ? { error: last.error } : {}),
          },
        }
      : {}),
    actions: [...thread.runs.values()].flatMap((run) =>
      run.order.map((id) => {
        const action = run.actions[id];
        return {
          runId: run.runId,
          actionId: id,
          status: action?.status ?? 'unknown',
          attempt: action?.attempt ?? 0,
          ...(action?.result?.error ? { error: action.result.error } : {}),
          ...(action?.result?.summary ? { summary: action.result.summary } : {}),
        };
      }),
    ),
    subagents: thread.subagents.map((s) => ({ ...s })),
    tasks: threadTasks,
  };
}

export function toSessionSnapshot(session: SessionState, threads: ThreadView[], tasks: Task[]): SessionSnapshot {
  const count = (status: Task['status']) => tasks.filter((t) => t.status === status).length;
  return {
    schemaVersion: OAR_SCHEMA_VERSION,
    runtimeId: session.runtimeId,
    sessionId: session.sessionId,
    ...(session.title ? { title: session.title } : {}),
    createdAt: session.createdAt,
    updatedAt: session.updatedAt,
    // The session's own order: the main thread first, then threads in the order they started.
    threads: [...threads]
      .sort((a, b) => session.threadIds.indexOf(a.threadId) - session.threadIds.indexOf(b.threadId))
      .map((thread) => toThreadReadModel(thread, tasks)),
    tasks,
    taskSummary: {
      total: tasks.length,
      active: tasks.filter((t) => ['running', 'accepted', 'preparing', 'retrying'].includes(t.status)).length,
      waiting: tasks.filter((t) => t.status.startsWith('waiting')).length,
      blocked: count('blocked'),
      completed: count('completed'),
      failed: count('failed'),
      cancelled: count('cancelled'),
      lost: count('lost'),
    },
    routingLimitSummary: session.routing
      ? {
          ...(session.cost ? { costState: { ...session.cost, approximate: true } } : {}),
          candidateCount: session.routing.candidateCount,
          singleCandidate: session.routing.candidateCount === 1,
          selectedModel: session.routing.selectedModel,
          ...(session.routing.provider ? { provider: session.routing.provider } : {}),
          ...(session.routing.reason ? { reason: session.routing.reason } : {}),
          ...(session.routing.fallback ? { fallback: session.routing.fallback } : {}),
        }
      : {},
    telemetrySummary: { joinStatus: 'unavailable', usage: { ...session.usage } },
    evidenceRefs: [],
  };
}
