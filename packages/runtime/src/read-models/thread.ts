import { type OarError, RECONCILE_ACTION_TYPE, type RuntimeEvent, type UnreconciledAction } from '@oar/protocol';
import { hookRunOf, MAX_TURN_HOOK_RUNS } from './hook-runs.js';
import { answered, processChange, processRequestOf } from './processes.js';
import { rollbackChange } from './rollback.js';
import { endedActionStatus } from './run.js';
import { withState } from './session.js';
import {
  dependencyCompleted,
  type PendingDecision,
  pendingTaskTurns,
  streamingChange,
  type ThreadState,
  type ToolWorkerState,
  type TurnAttachment,
  TurnAttachmentSchema,
  type TurnState,
  turnTaskOf,
} from './thread-state.js';

/**
 * The thread projection: a pure reducer from events to `ThreadState` (its runs are projected by `reduceRun`).
 * Replaying a thread's events from nothing
 * yields exactly the state the engine kept incrementally (tested as a property). It never reads anything but
 * the event, so the event payloads must carry every fact the runner needs to continue after a restart.
 */

type Payload = Record<string, unknown>;
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

function updateTurn(state: ThreadState, turnId: string | undefined, change: (turn: TurnState) => TurnState) {
  return { ...state, turns: state.turns.map((turn) => (turn.turnId === turnId ? change(turn) : turn)) };
}

/** An action ended: drop a decision it no longer needs (its run records how it ended). */
function actionEnded(state: ThreadState, event: RuntimeEvent): ThreadState {
  const actionId = str((event.payload as Payload).graphActionId);
  const pending = state.pending.filter((p) => !(p.runId === event.runId && p.graphActionId === actionId));
  if (pending.length === state.pending.length) return state;
  return { ...state, pending, status: state.status === 'closed' ? 'closed' : waitingStatus(pending, event.turnId) };
}

/** A turn's attachments as `turn.submitted` recorded them (entries that are not one are left out). */
function attachmentsOf(value: unknown): { attachments?: TurnAttachment[] } {
  if (!Array.isArray(value) || value.length === 0) return {};
  const attachments = value.flatMap((a) => {
    const parsed = TurnAttachmentSchema.safeParse(a);
    return parsed.success ? [parsed.data] : [];
  });
  return attachments.length > 0 ? { attachments } : {};
}

/** A lost action's reconciliation request, as the thread lists it until it is answered. */
function unreconciledOf(event: RuntimeEvent, payload: Payload): UnreconciledAction {
  return {
    actionId: event.actionId ?? '',
    ...(event.turnId ? { turnId: event.turnId } : {}),
    runId: str(event.runId) ?? '',
    graphActionId: str(payload.graphActionId) ?? '',
    toolCallId: str(payload.toolCallId) ?? '',
    ...(str(payload.toolName) ? { toolName: str(payload.toolName) } : {}),
    ...(str(payload.idempotencyKey) ? { idempotencyKey: str(payload.idempotencyKey) } : {}),
    prompt: str(payload.prompt) ?? '',
    lostAt: event.timestamp,
  };
}

function waitingStatus(pending: PendingDecision[], turnId: string | undefined): ThreadState['status'] {
  const waiting = pending.find((p) => p.turnId === turnId);
  if (waiting === undefined) return 'running';
  return waiting.actionType === 'user_input' ? 'waiting_input' : 'waiting_permission';
}

function endTurn(state: ThreadState, event: RuntimeEvent, change: Partial<TurnState>): ThreadState {
  const turnId = event.turnId;
  // `workingSince` says only whether a running turn is still preparing: an ended turn does not keep it.
  const ended = updateTurn(state, turnId, ({ workingSince: _working, ...turn }) => ({
    ...turn,
    ...change,
    completedAt: event.timestamp,
  }));
  // A turn that never started (a task's turn withdrawn) ends alone: the running turn's state stays as it is.
  if (turnId === undefined || turnId !== state.activeTurnId) {
    return { ...ended, pending: ended.pending.filter((p) => p.turnId !== turnId) };
  }
  const { interrupt, resourceWait: _wait, ...next } = ended;
  return {
    ...next,
    ...(interrupt && interrupt.turnId !== turnId ? { interrupt } : {}),
    pending: next.pending.filter((p) => p.turnId !== turnId),
    activeTurnId: next.activeTurnId === turnId ? undefined : next.activeTurnId,
    status: next.status === 'closed' ? 'closed' : 'idle',
  };
}

/** A `compact` request recorded on the thread (`thread.updated` `compactionRequest`). */
function compactionRequestOf(payload: Payload, at: string): Pick<ThreadState, 'compactionRequest'> | undefined {
  const request = payload.compactionRequest as { requestId?: unknown; reason?: unknown } | undefined;
  if (!request || typeof request.requestId !== 'string') return undefined;
  return {
    compactionRequest: {
      requestId: request.requestId,
      ...(typeof request.reason === 'string' ? { reason: request.reason } : {}),
      requestedAt: at,
    },
  };
}

/** The span ids a turn's event carries, for the turn's next span to run under (tracing.ts). */
function traceOf(event: RuntimeEvent): { trace?: { traceId: string; spanId: string } } {
  return event.traceId && event.spanId ? { trace: { traceId: event.traceId, spanId: event.spanId } } : {};
}

export function reduceThread(state: ThreadState | undefined, event: RuntimeEvent): ThreadState | undefined {
  const payload = (event.payload ?? {}) as Payload;
  if (event.type === 'thread.started') {
    const parent = payload.parent as ThreadState['parent'] | undefined;
    return {
      threadId: event.threadId,
      sessionId: event.sessionId,
      agent: str(payload.agent) ?? 'main',
      ...(str(payload.title) ? { title: str(payload.title) } : {}),
      ...(str(payload.parentThreadId) ? { parentThreadId: str(payload.parentThreadId) } : {}),
      ...(parent ? { parent } : {}),
      ...(spawnedByOf(payload.spawnedBy) ?? {}),
      ...(payload.toolWorker ? { toolWorker: { ...(payload.toolWorker as ToolWorkerState), tokensUsed: 0 } } : {}),
      ...(payload.job ? { job: payload.job as NonNullable<ThreadState['job']> } : {}),
      depth: typeof payload.depth === 'number' ? payload.depth : 0,
      status: 'idle',
      createdAt: event.timestamp,
      updatedAt: event.timestamp,
      turns: [],
      queue: [],
      pending: [],
      modelCalls: 0,
      state: {},
      incidents: [],
      subagents: [],
      lastSequence: event.sequence,
    };
  }
  if (!state) return state;
  return withThreadClock(state, threadChange(state, event), event);
}

/**
 * What an event changes of a thread, its clock (`updatedAt`, `lastSequence`) aside: a new object of this reduction,
 * or `state` itself when the event changes nothing else (replay then sets the clock once, from the last such event).
 */
export function threadChange(state: ThreadState, event: RuntimeEvent): ThreadState {
  const base = streamingChange(endedActionStatus(event) ? actionEnded(state, event) : state, event);
  return applyThreadFacts(base, event, (event.payload ?? {}) as Payload);
}

/**
 * `next` (what `threadChange` made of `state`) with the event's clock. A changed thread is this reduction's own new
 * object: its clock is set on it rather than copied once more (a replay of 100k events spent a fifth of its time
 * copying thread states twice).
 */
export function withThreadClock(state: ThreadState, next: ThreadState, event: RuntimeEvent): ThreadState {
  if (next === state) return { ...state, updatedAt: event.timestamp, lastSequence: event.sequence };
  next.updatedAt = event.timestamp;
  next.lastSequence = event.sequence;
  return next;
}

function applyThreadFacts(state: ThreadState, event: RuntimeEvent, payload: Payload): ThreadState {
  switch (event.type) {
    case 'thread.updated': {
      const interrupt = payload.interrupt as { turnId?: unknown; reason?: unknown } | undefined;
      return withState(
        {
          ...withResourceWait(state, event, payload),
          ...(str(payload.title) ? { title: str(payload.title) } : {}),
          ...(payload.closed === true ? { status: 'closed' as const } : {}),
          // A closed sub-agent reopened (`resume_subagent`): it takes turns again.
          ...(payload.reopened === true && state.status === 'closed'
            ? { status: state.activeTurnId ? ('running' as const) : ('idle' as const) }
            : {}),
          ...(compactionRequestOf(payload, event.timestamp) ?? {}),
          ...processRequestOf(state, payload, event.timestamp),
          ...(interrupt && typeof interrupt.turnId === 'string' && interrupt.turnId === state.activeTurnId
            ? {
                interrupt: {
                  turnId: interrupt.turnId,
                  reason: str(interrupt.reason) ?? 'interrupted',
                  requestedAt: event.timestamp,
                },
              }
            : {}),
        },
        payload,
      );
    }
    case 'turn.submitted': {
      const turn: TurnState = {
        turnId: event.turnId,
        status: payload.status === 'queued' ? 'queued' : 'accepted',
        input: str(payload.input) ?? '',
        ...attachmentsOf(payload.attachments),
        submittedAt: event.timestamp,
        modelSteps: 0,
        correctiveRetries: 0,
        runIds: [],
        ...(str(payload.bindingHash) ? { bindingHash: str(payload.bindingHash) } : {}),
        ...traceOf(event),
        ...turnTaskOf(payload.task),
        ...(str(payload.notBefore) ? { notBefore: str(payload.notBefore) } : {}),
      };
      const queue =
        payload.status === 'queued'
          ? [
              ...state.queue,
              {
                turnId: event.turnId,
                input: turn.input,
                enqueuedAt: event.timestamp,
                source: str(payload.source) ?? 'user',
              },
            ]
          : state.queue;
      return { ...state, turns: [...state.turns, turn], queue };
    }
    case 'queue.changed': {
      const order = Array.isArray(payload.queuedTurns)
        ? (payload.queuedTurns as { queuedTurnId: string }[]).map((q) => q.queuedTurnId)
        : [];
      const removed = payload.change === 'removed' ? str(payload.queuedTurnId) : undefined;
      const byId = new Map(state.queue.map((q) => [q.turnId, q]));
      const queue = order.flatMap((id) => {
        const entry = byId.get(id);
        return entry ? [entry] : [];
      });
      const next = { ...state, queue };
      return removed ? updateTurn(next, removed, (turn) => ({ ...turn, status: 'cancelled' })) : next;
    }
    case 'task.dependency.updated':
      return dependencyCompleted(state, event.taskId, payload);
    case 'task.paused':
    case 'task.resumed':
      return pendingTaskTurns(state, event.taskId, { paused: event.type === 'task.paused' });
    case 'turn.started':
      return {
        ...updateTurn(state, event.turnId, (turn) => ({
          ...turn,
          status: 'running',
          startedAt: event.timestamp,
          ...(str(payload.bindingHash) ? { bindingHash: str(payload.bindingHash) } : {}),
          ...traceOf(event),
        })),
        queue: state.queue.filter((q) => q.turnId !== event.turnId),
        activeTurnId: event.turnId,
        status: 'running',
      };
    case 'model.failed': {
      // Every call counts against the turn's budgets, a compaction's summary call too.
      const spent = spendOf(state, event, payload);
      // A compaction's summary call is no protocol step: it moves its own cursor only.
      if (payload.purpose === 'compaction') return compactionCall(spent);
      // An attempt that will be retried is a call made (the scripted model's cursor moves on), not a step ended.
      if (typeof payload.retryInMs === 'number') return { ...spent, modelCalls: state.modelCalls + 1 };
      return endStep(spent, event);
    }
    case 'model.completed': {
      const spent = spendOf(state, event, payload);
      if (payload.purpose === 'compaction') return compactionCall(spent);
      return endStep(spent, event);
    }
    case 'cost.recorded': {
      const amount = typeof payload.amount === 'number' ? payload.amount : 0;
      return updateTurn(state, event.turnId, (turn) => {
        const spend = turn.spend ?? { tokens: 0, costUsd: 0, modelCalls: 0 };
        return { ...turn, spend: { ...spend, costUsd: Math.round((spend.costUsd + amount) * 1e6) / 1e6 } };
      });
    }
    case 'routing.candidates.resolved': {
      const excluded = Array.isArray(payload.excluded) ? (payload.excluded as Payload[]) : [];
      const specs = excluded
        .filter((e) => e.capabilityGap)
        .flatMap((e) => (str(e.spec) ? [str(e.spec) as string] : []));
      if (specs.length === 0 && !state.turns.some((t) => t.turnId === event.turnId && t.capabilityExclusions)) {
        return state;
      }
      return updateTurn(state, event.turnId, (turn) => ({ ...turn, capabilityExclusions: specs.sort() }));
    }
    case 'quota.low':
      if (payload.scope !== 'turn' || typeof payload.key !== 'string') return state;
      return updateTurn(state, event.turnId, (turn) => ({
        ...turn,
        quotaLow: [...(turn.quotaLow ?? []), payload.key as string],
      }));
    case 'quota.blocked':
      // Only a wait changes the thread; a turn the block fails ends with its own facts.
      if (payload.policy !== 'wait' || event.turnId !== state.activeTurnId) return state;
      return {
        ...state,
        status: state.status === 'closed' ? 'closed' : 'waiting_resource',
        resourceWait: {
          kind: 'quota',
          turnId: event.turnId,
          key: str(payload.key) ?? '',
          reason: 'quota',
          ...(str(payload.message) ? { message: str(payload.message) } : {}),
          since: event.timestamp,
          details: {
            scope: payload.scope,
            dimension: payload.dimension,
            limit: payload.limit,
            spent: payload.spent,
            requested: payload.requested,
          },
        },
      };
    case 'context.compaction.completed':
    case 'context.compaction.failed':
      return compactionEnded(state, event, payload);
    case 'history.rollback.started':
    case 'history.rollback.completed':
      return rollbackChange(state, event);
    case 'runtime.warning':
    case 'runtime.error': {
      const incident = {
        severity: event.type === 'runtime.error' ? ('error' as const) : ('warning' as const),
        code: str(payload.code) ?? 'unknown',
        message: str(payload.message) ?? '',
        at: event.timestamp,
        ...(event.turnId ? { turnId: event.turnId } : {}),
        eventId: event.eventId,
      };
      // A warning that refuses a process request answers it (read-models/processes.ts).
      const requestId = str((payload.details as Payload | undefined)?.requestId);
      const next = { ...answered(state, requestId), incidents: [...state.incidents, incident] };
      if (payload.code !== 'protocol_violation') return next;
      const correction = str((payload.details as Payload | undefined)?.correction) ?? incident.message;
      return updateTurn(next, event.turnId, (turn) => ({
        ...turn,
        correctiveRetries: turn.correctiveRetries + 1,
        pendingCorrection: correction,
      }));
    }
    case 'process.started':
    case 'process.input':
    case 'process.completed':
    case 'process.failed':
    case 'process.terminated':
      return processChange(state, event, payload);
    case 'sandbox.violation':
      // What the sandbox refused (a write outside the workspace, a connection): visible with its cause.
      return {
        ...state,
        incidents: [
          ...state.incidents,
          {
            severity: 'warning',
            code: `sandbox_violation:${str(payload.kind) ?? 'unknown'}`,
            message: str(payload.message) ?? 'the sandbox refused an operation',
            at: event.timestamp,
            ...(event.turnId ? { turnId: event.turnId } : {}),
            eventId: event.eventId,
          },
        ],
      };
    case 'model.requested':
      return working(state, event);
    case 'run.status':
      return applyRunStatus(working(state, event), event, payload);
    case 'action.required': {
      if (payload.actionType === RECONCILE_ACTION_TYPE)
        return { ...state, unreconciled: [...(state.unreconciled ?? []), unreconciledOf(event, payload)] };
      const runner = payload.runner as { runnerId?: unknown } | undefined;
      const decision: PendingDecision = {
        actionId: event.actionId,
        actionType:
          payload.actionType === 'user_input' || payload.actionType === 'platform_action'
            ? payload.actionType
            : 'tool_approval',
        turnId: event.turnId,
        runId: str(event.runId) ?? '',
        graphActionId: str(payload.graphActionId) ?? '',
        ...(runner && str(runner.runnerId) ? { runnerId: str(runner.runnerId), taskId: str(event.taskId) } : {}),
        ...(str(payload.toolCallId) ? { toolCallId: str(payload.toolCallId) } : {}),
        ...(str(payload.toolName) ? { toolName: str(payload.toolName) } : {}),
        prompt: str(payload.prompt) ?? '',
        ...(Array.isArray(payload.decisions) ? { decisions: payload.decisions.map(String) } : {}),
        requestedAt: event.timestamp,
      };
      const waiting = decision.actionType === 'user_input' ? 'waiting_input' : 'waiting_permission';
      return { ...state, pending: [...state.pending, decision], status: waiting };
    }
    case 'action.resolved': {
      if (state.unreconciled?.some((u) => u.actionId === event.actionId)) {
        const unreconciled = state.unreconciled.filter((u) => u.actionId !== event.actionId);
        return { ...state, unreconciled };
      }
      const decision = state.pending.find((p) => p.actionId === event.actionId);
      if (!decision) return state;
      const pending = state.pending.filter((p) => p.actionId !== event.actionId);
      return {
        ...state,
        pending,
        status: state.status === 'closed' ? 'closed' : waitingStatus(pending, decision.turnId),
      };
    }
    case 'subagent.spawned': {
      const childThreadId = str(payload.childThreadId) ?? '';
      return {
        ...state,
        subagents: [
          ...state.subagents,
          { subagentId: event.subagentId, agent: str(payload.agentName) ?? 'auto', childThreadId, status: 'running' },
        ],
      };
    }
    case 'subagent.completed':
    case 'subagent.failed':
    case 'subagent.closed':
    case 'subagent.status':
    case 'subagent.input': {
      const status = subagentStatusOf(event.type, payload);
      if (!status) return state;
      // A closed sub-agent stays closed (a turn the close stopped ends after it) until it is reopened.
      const reopens = event.type === 'subagent.status' && status === 'idle';
      const next = (s: ThreadState['subagents'][number]) => (s.status === 'closed' && !reopens ? s : { ...s, status });
      return {
        ...state,
        subagents: state.subagents.map((s) => (s.subagentId === event.subagentId ? next(s) : s)),
      };
    }
    case 'hook.completed':
    case 'hook.failed':
      return updateTurn(state, event.turnId, (turn) => ({
        ...turn,
        hookRuns: [...(turn.hookRuns ?? []), hookRunOf(event)].slice(-MAX_TURN_HOOK_RUNS),
      }));
    case 'turn.completed':
      return endTurn(state, event, {
        status: 'completed',
        ...(str(payload.answer) ? { answer: str(payload.answer) } : {}),
      });
    case 'turn.failed': {
      const error = payload.error as OarError;
      return endTurn(state, event, { status: event.status === 'cancelled' ? 'cancelled' : 'failed', error });
    }
    default:
      return state;
  }
}

/** The `subagent.status` values its parent's entry takes: a turn starting or ending, a reopening. */
const SUBAGENT_STATUSES = new Set(['running', 'idle', 'completed', 'failed']);

/**
 * A sub-agent's status in its parent's list after a `subagent.*` fact: its end, its close, more input (`running`),
 * a later turn starting or ending, a reopening (`subagent.status`; a `blocked` status says why it waits, and
 * leaves the entry as it is).
 */
function subagentStatusOf(type: string, payload: Payload): string | undefined {
  if (type === 'subagent.completed') return 'completed';
  if (type === 'subagent.failed') return 'failed';
  if (type === 'subagent.closed') return 'closed';
  if (type === 'subagent.input') return 'running';
  return SUBAGENT_STATUSES.has(payload.status as string) ? (payload.status as string) : undefined;
}

/** Who spawned a sub-agent's thread through the control plane, as `thread.started` records it. */
function spawnedByOf(value: unknown): Pick<ThreadState, 'spawnedBy'> | undefined {
  const spawned = value as { threadId?: unknown; subagentId?: unknown } | undefined;
  if (typeof spawned?.threadId !== 'string' || typeof spawned.subagentId !== 'string') return undefined;
  return { spawnedBy: { threadId: spawned.threadId, subagentId: spawned.subagentId } };
}

function compactionCall(state: ThreadState): ThreadState {
  return { ...state, compactionCalls: (state.compactionCalls ?? 0) + 1 };
}

/** A compaction ended: a completed one moves the context boundary; either answers the request it was made for. */
function compactionEnded(state: ThreadState, event: RuntimeEvent, payload: Payload): ThreadState {
  const { compactionRequest, ...rest } = state;
  const next: ThreadState =
    compactionRequest && (payload.requestId === undefined || payload.requestId === compactionRequest.requestId)
      ? rest
      : state;
  if (event.type !== 'context.compaction.completed') return next;
  const range = (payload.range ?? {}) as Payload;
  const throughTurnId = str(range.toTurnId);
  const summaryRef = str(payload.summaryRef);
  if (!throughTurnId || !summaryRef) return next;
  const covered = state.turns.findIndex((t) => t.turnId === throughTurnId) + 1;
  return {
    ...next,
    compaction: {
      compactionId: str(payload.compactionId) ?? event.eventId,
      trigger: str(payload.trigger) ?? 'threshold',
      throughTurnId,
      turnCount: covered,
      ...(typeof range.toSequence === 'number' ? { throughSequence: range.toSequence } : {}),
      summaryRef,
      summaryPreview: str(payload.summaryPreview) ?? '',
      summarySource: str(payload.summarySource) ?? 'model',
      tokensBefore: typeof payload.tokensBefore === 'number' ? payload.tokensBefore : 0,
      tokensAfter: typeof payload.tokensAfter === 'number' ? payload.tokensAfter : 0,
      at: event.timestamp,
    },
    compactionCount: (state.compactionCount ?? 0) + 1,
  };
}

/** A model call's tokens and the call itself, counted on its turn (budgets). */
function spendOf(state: ThreadState, event: RuntimeEvent, payload: Payload): ThreadState {
  const usage = payload.usage as { inputTokens?: number; outputTokens?: number; totalTokens?: number } | undefined;
  const tokens = usage ? (usage.totalTokens ?? (usage.inputTokens ?? 0) + (usage.outputTokens ?? 0)) : 0;
  return updateTurn(state, event.turnId, (turn) => {
    const spend = turn.spend ?? { tokens: 0, costUsd: 0, modelCalls: 0 };
    return { ...turn, spend: { ...spend, tokens: spend.tokens + tokens, modelCalls: spend.modelCalls + 1 } };
  });
}

/**
 * A `thread.updated` about a resource wait: `resourceWait` set (a provider's limit holds a call back) puts the
 * thread in `waiting_resource`; `resourceWait: null` (the call started, or a limit was raised) ends the wait.
 */
function withResourceWait(state: ThreadState, event: RuntimeEvent, payload: Payload): ThreadState {
  if (!('resourceWait' in payload) || state.status === 'closed') return state;
  const wait = payload.resourceWait as Record<string, unknown> | null;
  if (wait === null || typeof wait !== 'object') {
    if (state.status !== 'waiting_resource' && state.resourceWait === undefined) return state;
    const { resourceWait: _ended, ...rest } = state;
    return {
      ...rest,
      status: state.activeTurnId ? waitingStatus(state.pending, state.activeTurnId) : 'idle',
    };
  }
  if (!state.activeTurnId) return state;
  return {
    ...state,
    status: 'waiting_resource',
    resourceWait: {
      kind: 'provider',
      turnId: state.activeTurnId,
      key: str(wait.key) ?? '',
      reason: str(wait.reason) ?? 'provider',
      ...(str(wait.message) ? { message: str(wait.message) } : {}),
      since: event.timestamp,
      details: wait,
    },
  };
}

/** A model call ended (answered, or failed for good): one step of the turn and one call of the thread. */
function endStep(state: ThreadState, event: RuntimeEvent): ThreadState {
  const next = {
    ...updateTurn(state, event.turnId, (turn) => {
      const { pendingCorrection: _cleared, ...rest } = turn;
      return { ...rest, modelSteps: turn.modelSteps + 1 };
    }),
    modelCalls: state.modelCalls + 1,
  };
  if (!state.toolWorker) return next;
  // A tool worker's token bound counts what its calls used: only they tally tokens per thread.
  const usage = ((event.payload ?? {}) as Payload).usage as { inputTokens?: number; outputTokens?: number } | undefined;
  const used = (usage?.inputTokens ?? 0) + (usage?.outputTokens ?? 0);
  return { ...next, toolWorker: { ...state.toolWorker, tokensUsed: state.toolWorker.tokensUsed + used } };
}

/** The turn's work began (its first model call or runner status): it is no longer preparing. */
function working(state: ThreadState, event: RuntimeEvent): ThreadState {
  const turn = state.turns.find((t) => t.turnId === event.turnId);
  if (!turn || turn.workingSince !== undefined || turn.status !== 'running') return state;
  return updateTurn(state, event.turnId, (t) => ({ ...t, workingSince: event.timestamp }));
}

function applyRunStatus(state: ThreadState, event: RuntimeEvent, payload: Payload): ThreadState {
  // A valid declaration of any kind ends a run of protocol violations: the next one gets its corrective retry.
  if (payload.phase === 'decision')
    return updateTurn(state, event.turnId, (turn) => ({ ...turn, correctiveRetries: 0 }));
  const runId = str(event.runId);
  if (runId === undefined || payload.phase !== 'declared') return state;
  return updateTurn(state, event.turnId, (turn) => ({
    ...turn,
    correctiveRetries: 0,
    runIds: [...turn.runIds, runId],
  }));
}
