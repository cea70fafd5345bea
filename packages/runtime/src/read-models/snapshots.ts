import {
  type ExecutionEnvironment,
  OAR_SCHEMA_VERSION,
  type SessionSnapshot,
  type Task,
  type ThreadReadModel,
  type ThreadStatus,
  type TurnStatus,
} from '@oar/protocol';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import { effectiveBudgets, hasBudgets } from './budgets.js';
import { bindingOf, type SessionState } from './session.js';
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
  // The standard's thread status has no waiting_resource: the thread is blocked, its turn says on what.
  waiting_resource: 'blocked',
  completed: 'completed',
  failed: 'failed',
  closed: 'completed',
};

export function toThreadReadModel(thread: ThreadView, tasks: Task[]): ThreadReadModel {
  const threadTasks = tasks.filter((task) => task.threadId === thread.threadId);
  // The turn that finished last: not always the last submitted (a task's turn held by its dependencies runs after
  // turns submitted behind it).
  let last: (typeof thread.turns)[number] | undefined;
  for (const turn of thread.turns) {
    if (turn.completedAt && (!last?.completedAt || turn.completedAt >= last.completedAt)) last = turn;
  }
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
      const resource = thread.resourceWait?.turnId === turn.turnId ? thread.resourceWait : undefined;
      return {
        turnId: turn.turnId,
        status: (turn.status === 'running' && resource && thread.activeTurnId === turn.turnId
          ? 'waiting_resource'
          : turn.status === 'running' && waiting && thread.activeTurnId === turn.turnId
            ? thread.pending[0]?.actionType === 'user_input'
              ? 'waiting_input'
              : 'waiting_permission'
            : turn.status) as TurnStatus,
        ...(turn.spend
          ? {
              costState: {
                tokens: turn.spend.tokens,
                modelCalls: turn.spend.modelCalls,
                amount: turn.spend.costUsd,
                currency: 'USD',
                approximate: true,
              },
            }
          : {}),
        ...(resource
          ? {
              limitState: {
                waiting: true,
                kind: resource.kind,
                reason: resource.reason,
                key: resource.key,
                since: resource.since,
                ...(resource.message ? { message: resource.message } : {}),
                ...(resource.details ? { details: resource.details } : {}),
              },
            }
          : {}),
        ...(turn.hookRuns?.length ? { hookRuns: turn.hookRuns } : {}),
        ...(turn.attachments?.length ? { attachments: turn.attachments } : {}),
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
      // A runner run's question: the run is alive and waits for the answer (docs/runners.md "Decisions").
      ...(p.runnerId ? { runnerId: p.runnerId, runId: p.runId } : {}),
      prompt: p.prompt,
      requestedAt: p.requestedAt,
    })),
    ...(thread.unreconciled?.length ? { unreconciledActions: thread.unreconciled } : {}),
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
    // The processes the thread's commands started that are still running (or not known to have ended).
    ...(thread.processes?.length ? { processes: thread.processes.map((p) => ({ ...p, status: 'running' })) } : {}),
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
    ...contextHistory(thread),
  };
}

/**
 * The thread's context boundary (the standard's context_boundary_snapshot): the compaction the model's context
 * starts from — which turns its summary replaced, where it is stored — and a compaction still requested.
 */
function contextHistory(thread: ThreadView): Pick<ThreadReadModel, 'history'> {
  const boundary = thread.compaction;
  if (!boundary && !thread.compactionRequest) return {};
  return {
    history: {
      ...(boundary
        ? {
            contextBoundary: {
              compactionId: boundary.compactionId,
              trigger: boundary.trigger,
              compactedTurns: boundary.turnCount,
              throughTurnId: boundary.throughTurnId,
              ...(boundary.throughSequence !== undefined ? { throughSequence: boundary.throughSequence } : {}),
              summaryRef: boundary.summaryRef,
              summaryPreview: boundary.summaryPreview,
              summarySource: boundary.summarySource,
              tokensBefore: boundary.tokensBefore,
              tokensAfter: boundary.tokensAfter,
              compactedAt: boundary.at,
            },
          }
        : {}),
      compactions: thread.compactionCount ?? 0,
      ...(thread.compactionRequest ? { compactionRequested: { ...thread.compactionRequest } } : {}),
    },
  };
}

/**
 * The limit part of the routing/limit summary: the limits in force (the binding's, as `limit.changed` changed
 * them), what the session spent (wall time: of its ended turns), the threads waiting for a resource, and the
 * provider rate limits its calls met (`rateLimits`: hits, the last one).
 */
function budgetSummary(session: SessionState, threads: ThreadView[]): Record<string, unknown> {
  const budgets = effectiveBudgets(bindingOf(session)?.budgets, session.limits);
  const waiting = threads
    .filter((t) => t.resourceWait)
    .map((t) => ({
      threadId: t.threadId,
      turnId: t.resourceWait?.turnId,
      kind: t.resourceWait?.kind,
      reason: t.resourceWait?.reason,
    }));
  const rateLimits = session.rateLimits ? { rateLimits: { ...session.rateLimits } } : {};
  if (!hasBudgets(budgets) && waiting.length === 0) return session.rateLimits ? { limitState: rateLimits } : {};
  return {
    limitState: {
      ...rateLimits,
      turn: budgets.turn,
      session: budgets.session,
      onExceeded: budgets.onExceeded,
      lowAt: budgets.lowAt,
      sessionSpent: {
        tokens: session.usage.totalTokens,
        costUsd: session.cost?.amount ?? 0,
        modelCalls: session.budget?.modelCalls ?? 0,
        endedTurnsWallTimeMs: session.budget?.turnTimeMs ?? 0,
      },
      ...(waiting.length > 0 ? { waiting } : {}),
    },
  };
}

export function toSessionSnapshot(session: SessionState, threads: ThreadView[], tasks: Task[]): SessionSnapshot {
  const count = (status: Task['status']) => tasks.filter((t) => t.status === status).length;
  return {
    schemaVersion: OAR_SCHEMA_VERSION,
    runtimeId: session.runtimeId,
    sessionId: session.sessionId,
    ...(session.title ? { title: session.title } : {}),
    workspaceId: session.workspaceId ?? DEFAULT_WORKSPACE,
    createdAt: session.createdAt,
    updatedAt: session.updatedAt,
    // The session's own order: the main thread first, then threads in the order they started.
    threads: [...threads]
      .sort((a, b) => session.threadIds.indexOf(a.threadId) - session.threadIds.indexOf(b.threadId))
      .map((thread) => toThreadReadModel(thread, tasks)),
    tasks,
    // Where the session's work runs (the standard's execution_environment_snapshot, also get_execution_environment).
    executionEnvironment: toExecutionEnvironment(session, threads),
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
    routingLimitSummary: {
      ...budgetSummary(session, threads),
      ...(session.routing
        ? {
            ...(session.cost ? { costState: { ...session.cost, approximate: true } } : {}),
            candidateCount: session.routing.candidateCount,
            singleCandidate: session.routing.candidateCount === 1,
            selectedModel: session.routing.selectedModel,
            ...(session.routing.provider ? { provider: session.routing.provider } : {}),
            ...(session.routing.reason ? { reason: session.routing.reason } : {}),
            ...(session.routing.fallback ? { fallback: session.routing.fallback } : {}),
          }
        : {}),
    },
    telemetrySummary: { joinStatus: 'unavailable', usage: { ...session.usage } },
    evidenceRefs: [],
  };
}

/**
 * Where a session's work runs (`get_execution_environment`), from its current binding and the processes its threads
 * recorded as started and not ended (of one thread when `threadId` is given). Names of variables, never values.
 */
export function toExecutionEnvironment(
  session: SessionState,
  threads: readonly ThreadState[],
  threadId?: string,
): ExecutionEnvironment {
  const binding = bindingOf(session);
  const activeProcesses = threads.flatMap((thread) =>
    // The recorded process with its thread; the run and call that started it stay in the thread's read model.
    (thread.processes ?? []).map(({ runId: _run, toolCallId: _call, ...process }) => ({
      ...process,
      threadId: thread.threadId,
    })),
  );
  const scope = { sessionId: session.sessionId, ...(threadId !== undefined ? { threadId } : {}) };
  if (!binding) {
    return {
      ...scope,
      binding: 'unknown',
      workspaceRoots: [],
      env: { passed: [], secrets: [] },
      processLimits: { status: 'unavailable', reason: 'the session was recorded without a binding' },
      activeProcesses,
    };
  }
  const exec = binding.exec;
  return {
    ...scope,
    binding: 'recorded',
    cwd: binding.workspaceRoot,
    workspaceRoots: [binding.workspaceRoot],
    env: {
      passed: [...(exec?.env ?? [])],
      secrets: [...new Set([...(binding.secrets?.env ?? []), ...(exec?.secrets ?? [])])],
    },
    processLimits: exec
      ? {
          status: 'available',
          sandboxProfile: exec.sandbox.profile,
          network: exec.sandbox.network,
          timeoutMs: exec.timeoutMs,
          maxTimeoutMs: exec.maxTimeoutMs,
          killGraceMs: exec.killGraceMs,
          maxBackground: exec.maxBackground,
        }
      : { status: 'unavailable', reason: 'the binding runs no commands (exec is off)' },
    activeProcesses,
  };
}
