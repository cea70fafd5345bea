import {
  type EvidenceExport,
  type EvidenceSummary,
  type ExecutionEnvironment,
  OAR_SCHEMA_VERSION,
  type SessionSnapshot,
  type Task,
  type ThreadReadModel,
  type ThreadStatus,
  type TurnStatus,
  type VerificationOutcome,
} from '@oar/protocol';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import { effectiveBudgets, hasBudgets } from './budgets.js';
import { type JobState, jobCounts } from './job.js';
import { bindingOf, type SessionState } from './session.js';
import { isListedTask, isTimeout } from './task.js';
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

/**
 * A thread's read model. `session` (its session's projection) gives the evidence summary the exports recorded for
 * it and what its audit notes count; without it they list only what the thread itself holds.
 */
export function toThreadReadModel(thread: ThreadView, tasks: Task[], session?: SessionState): ThreadReadModel {
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
    // A job's item thread names its job and item (docs/jobs.md): a reader goes from the thread to the job at once.
    ...(thread.job ? { jobs: [{ jobId: thread.job.jobId, itemIndex: thread.job.index }] } : {}),
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
            : turn.status === 'running' && turn.streamingSince !== undefined && thread.activeTurnId === turn.turnId
              ? // Its model call's output arrives (thread-state.ts, `streamingChange`); the thread stays running.
                'streaming'
              : turn.status === 'running' && turn.workingSince === undefined && turn.runIds.length === 0
                ? 'preparing'
                : turn.status === 'failed' && isTimeout(turn.error)
                  ? 'timed_out'
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
    evidenceSummary: evidenceSummary(thread, threadTasks, session),
    telemetry: telemetryOf(traceIdsOf([thread])),
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
    tasks: threadTasks.filter(isListedTask),
    ...contextHistory(thread),
  };
}

/** At most this many trace ids are listed (the newest turns'). */
const MAX_TRACE_IDS = 100;

/** The trace ids of the threads' turns: each turn's `turn.started` carries one when tracing is on (log/tracing.ts). */
function traceIdsOf(threads: readonly ThreadState[]): string[] {
  const ids = new Set(threads.flatMap((t) => t.turns.flatMap((turn) => (turn.trace ? [turn.trace.traceId] : []))));
  return [...ids].slice(-MAX_TRACE_IDS);
}

const NO_TRACES =
  'no event carries a trace id: tracing was off (no OpenTelemetry SDK or tracerProvider; docs/tracing.md)';

/** Telemetry is available when the facts carry trace ids; whether a backend received their spans is unknown here. */
function telemetryOf(traceIds: string[]) {
  return traceIds.length > 0
    ? { status: 'available' as const, traceIds, joinStatus: 'unknown' as const }
    : { status: 'unavailable' as const, reason: NO_TRACES, joinStatus: 'unavailable' as const };
}

/**
 * The thread's evidence summary (the standard's evidence_summary), from the facts only: the exports that cover it
 * (the session's, or one scoped to the thread) by kind, its turns' trace ids, the verification outcomes its tasks'
 * acceptance gives (or `unavailable`: OAR runs no checks of its own), and audit notes counted by reducers.
 */
function evidenceSummary(thread: ThreadView, tasks: Task[], session: SessionState | undefined): EvidenceSummary {
  const exports = (session?.evidence?.exports ?? []).filter((e) => !e.threadId || e.threadId === thread.threadId);
  const refs = (kind?: EvidenceExport['kind']) => exports.filter((e) => !kind || e.kind === kind).map((e) => e.ref);
  return {
    evidenceRefs: refs(),
    traceIds: traceIdsOf([thread]),
    verificationOutcomes: verificationOutcomes(tasks),
    replayRefs: refs('replay'),
    reviewRefs: refs('review'),
    auditNotes: auditNotes(thread, session, exports),
    exports: exports.map((e) => ({ ...e })),
  };
}

/** A task with acceptance criteria is verified by its owner: completed is passed, failed failed, else pending. */
function verificationOutcomes(tasks: Task[]): VerificationOutcome[] {
  const checked = tasks.filter((t) => (t.acceptance?.length ?? 0) > 0);
  if (checked.length === 0) {
    const detail = 'no verification facts: no task of the thread has acceptance criteria (OAR runs no checks itself)';
    return [{ name: 'verification', status: 'unavailable', detail }];
  }
  const outcome: Partial<Record<Task['status'], string>> = {
    completed: 'passed',
    failed: 'failed',
    cancelled: 'cancelled',
    timed_out: 'timed_out',
    lost: 'lost',
  };
  // An archived task's verification is how it had ended: filing it away changes no outcome.
  return checked.map((t) => ({
    name: `task ${t.taskId} acceptance`,
    status: outcome[t.archivedFrom ?? t.status] ?? 'pending',
    detail: `${t.acceptance?.length} criteria; task ${t.status}${t.statusReason ? `: ${t.statusReason}` : ''}`,
  }));
}

/** What the audit of the thread counts: decisions and who made them, incidents, sandbox violations, redactions. */
function auditNotes(thread: ThreadView, session: SessionState | undefined, exports: EvidenceExport[]): string[] {
  const audit = session?.evidence?.audit[thread.threadId];
  const notes: string[] = [];
  const decisions = Object.entries(audit?.decisions ?? {});
  if (decisions.length > 0) notes.push(`decisions: ${decisions.map(([key, n]) => `${n} ${key}`).join(', ')}`);
  const errors = thread.incidents.filter((i) => i.severity === 'error').length;
  if (thread.incidents.length > 0)
    notes.push(`incidents: ${errors} error(s), ${thread.incidents.length - errors} warning(s)`);
  if (thread.unreconciled?.length) notes.push(`lost actions not reconciled: ${thread.unreconciled.length}`);
  if (audit?.sandboxViolations) notes.push(`sandbox violations: ${audit.sandboxViolations}`);
  if (audit?.redactions) notes.push(`secrets redacted before recording: ${audit.redactions}`);
  const kinds = ['evidence', 'replay', 'review'].map((k) => [k, exports.filter((e) => e.kind === k).length] as const);
  if (exports.length > 0)
    notes.push(
      `exports: ${kinds
        .filter(([, n]) => n > 0)
        .map(([k, n]) => `${n} ${k}`)
        .join(', ')}`,
    );
  return notes;
}

/**
 * The thread's context boundary (the standard's context_boundary_snapshot): the compaction the model's context
 * starts from — which turns its summary replaced, where it is stored — and a compaction still requested.
 */
function contextHistory(thread: ThreadView): Pick<ThreadReadModel, 'history'> {
  const boundary = thread.compaction;
  if (!boundary && !thread.compactionRequest && !thread.rollback) return {};
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
      // A rollback recorded as started and not completed: the thread is held until it is run again to its end.
      ...(thread.rollback ? { rollbackInProgress: { ...thread.rollback } } : {}),
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

export function toSessionSnapshot(
  session: SessionState,
  threads: ThreadView[],
  tasks: Task[],
  jobs: readonly JobState[] = [],
): SessionSnapshot {
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
      .map((thread) => toThreadReadModel(thread, tasks, session)),
    // Archived tasks are filed away: counted below, fetched by id (`get_task`), not listed.
    tasks: tasks.filter(isListedTask),
    // How much history there is behind the shell: get_session pages it recent first (`before` / `previousCursor`).
    historySummary: { eventCount: session.lastSequence, firstSequence: 1, lastSequence: session.lastSequence },
    // Where the session's work runs (the standard's execution_environment_snapshot, also get_execution_environment).
    executionEnvironment: toExecutionEnvironment(session, threads),
    taskSummary: {
      total: tasks.length,
      // A task being cancelled is still active: its work runs until it stopped.
      active: tasks.filter((t) => ['running', 'accepted', 'preparing', 'retrying', 'cancelling'].includes(t.status))
        .length,
      waiting: tasks.filter((t) => t.status.startsWith('waiting')).length,
      blocked: count('blocked'),
      completed: count('completed'),
      failed: count('failed'),
      cancelled: count('cancelled'),
      timedOut: count('timed_out'),
      lost: count('lost'),
      archived: count('archived'),
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
            ...(session.routing.capabilityGap ? { capabilityGap: session.routing.capabilityGap } : {}),
            ...(session.routing.fallback ? { fallback: session.routing.fallback } : {}),
          }
        : {}),
    },
    telemetrySummary: { ...telemetryOf(traceIdsOf(threads)), usage: { ...session.usage } },
    // Every recorded export's ref (the newest MAX_EVIDENCE_EXPORTS), oldest first.
    evidenceRefs: (session.evidence?.exports ?? []).map((e) => e.ref),
    ...(jobs.length ? { subagentJobSummary: jobSummary(jobs) } : {}),
  };
}

/**
 * The standard's subagent_job_summary for the session's jobs: progress, the threads assigned, and whether a job is
 * recoverable (a running one is: its items' threads are taken over like any thread).
 */
function jobSummary(jobs: readonly JobState[]) {
  return {
    jobs: [...jobs]
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt))
      .map((job) => ({
        jobId: job.jobId,
        ...(job.name ? { name: job.name } : {}),
        status: job.status,
        round: job.round,
        counts: jobCounts(job),
        assignedThreads: job.items.filter((i) => i.attempts > 0).length,
        recoverable: job.status === 'running',
      })),
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
