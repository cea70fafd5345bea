import type { ActionResult, Declaration, OarError, RuntimeEvent } from '@oar/protocol';
import type { PendingDecision, RunAction, RunActionStatus, RunState, ThreadState, TurnState } from './thread-state.js';

/**
 * The thread projection: a pure reducer from events to `ThreadState`. Replaying a thread's events from nothing
 * yields exactly the state the engine kept incrementally (tested as a property). It never reads anything but
 * the event, so the event payloads must carry every fact the runner needs to continue after a restart.
 */

type Payload = Record<string, unknown>;
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

function updateTurn(state: ThreadState, turnId: string | undefined, change: (turn: TurnState) => TurnState) {
  return { ...state, turns: state.turns.map((turn) => (turn.turnId === turnId ? change(turn) : turn)) };
}

function updateRun(state: ThreadState, runId: string | undefined, change: (run: RunState) => RunState) {
  const run = runId === undefined ? undefined : state.runs[runId];
  if (!run || runId === undefined) return state;
  return { ...state, runs: { ...state.runs, [runId]: change(run) } };
}

function updateAction(
  state: ThreadState,
  runId: string | undefined,
  actionId: string | undefined,
  change: (action: RunAction) => RunAction,
): ThreadState {
  return updateRun(state, runId, (run) => {
    const action = actionId === undefined ? undefined : run.actions[actionId];
    if (!action || actionId === undefined) return run;
    return { ...run, actions: { ...run.actions, [actionId]: change(action) } };
  });
}

const TERMINAL: ReadonlySet<RunActionStatus> = new Set([
  'completed',
  'failed',
  'denied',
  'skipped',
  'cancelled',
  'lost',
]);
export const isTerminalActionStatus = (status: RunActionStatus) => TERMINAL.has(status);

function finishAction(state: ThreadState, event: RuntimeEvent, status: RunActionStatus, result: unknown) {
  const payload = event.payload as Payload;
  const actionId = str(payload.graphActionId);
  let next = updateAction(state, event.runId, actionId, (action) => ({
    ...action,
    status,
    endedAt: event.timestamp,
    ...(result ? { result: result as ActionResult } : {}),
  }));
  if (status === 'completed' && actionId !== undefined && !next.completedActionIds.includes(actionId)) {
    next = { ...next, completedActionIds: [...next.completedActionIds, actionId] };
  }
  // An action that ended (e.g. cancelled by its graph's failure policy) has no decision left to wait for.
  const pending = next.pending.filter((p) => !(p.runId === event.runId && p.graphActionId === actionId));
  if (pending.length !== next.pending.length) {
    const waiting = pending.find((p) => p.turnId === event.turnId);
    const threadStatus =
      next.status === 'closed'
        ? 'closed'
        : waiting === undefined
          ? 'running'
          : waiting.actionType === 'user_input'
            ? 'waiting_input'
            : 'waiting_permission';
    next = { ...next, pending, status: threadStatus };
  }
  return next;
}

function endTurn(state: ThreadState, event: RuntimeEvent, change: Partial<TurnState>): ThreadState {
  const turnId = event.turnId;
  const runs = Object.fromEntries(
    Object.entries(state.runs).map(([id, run]) => {
      if (run.turnId !== turnId || run.status === 'completed' || run.status === 'failed') return [id, run];
      const actions = Object.fromEntries(
        Object.entries(run.actions).map(([aid, a]) => [
          aid,
          isTerminalActionStatus(a.status) ? a : { ...a, status: 'cancelled' as const, endedAt: event.timestamp },
        ]),
      );
      return [id, { ...run, status: 'cancelled' as const, actions }];
    }),
  );
  const next = updateTurn(state, turnId, (turn) => ({ ...turn, ...change, completedAt: event.timestamp }));
  return {
    ...next,
    runs,
    pending: next.pending.filter((p) => p.turnId !== turnId),
    activeTurnId: next.activeTurnId === turnId ? undefined : next.activeTurnId,
    status: next.status === 'closed' ? 'closed' : 'idle',
  };
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
      depth: typeof payload.depth === 'number' ? payload.depth : 0,
      status: 'idle',
      createdAt: event.timestamp,
      updatedAt: event.timestamp,
      turns: [],
      queue: [],
      pending: [],
      runs: {},
      usedActionIds: [],
      completedActionIds: [],
      modelCalls: 0,
      incidents: [],
      subagents: [],
      lastSequence: event.sequence,
    };
  }
  if (!state) return state;
  const next = applyThreadEvent(state, event, payload);
  return { ...next, updatedAt: event.timestamp, lastSequence: event.sequence };
}

function applyThreadEvent(state: ThreadState, event: RuntimeEvent, payload: Payload): ThreadState {
  switch (event.type) {
    case 'thread.updated':
      return {
        ...state,
        ...(str(payload.title) ? { title: str(payload.title) } : {}),
        ...(payload.closed === true ? { status: 'closed' as const } : {}),
      };
    case 'turn.submitted': {
      const turn: TurnState = {
        turnId: event.turnId,
        status: payload.status === 'queued' ? 'queued' : 'accepted',
        input: str(payload.input) ?? '',
        submittedAt: event.timestamp,
        modelSteps: 0,
        correctiveRetries: 0,
        runIds: [],
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
    case 'turn.started':
      return {
        ...updateTurn(state, event.turnId, (turn) => ({ ...turn, status: 'running', startedAt: event.timestamp })),
        queue: state.queue.filter((q) => q.turnId !== event.turnId),
        activeTurnId: event.turnId,
        status: 'running',
      };
    case 'model.completed':
    case 'model.failed':
      return {
        ...updateTurn(state, event.turnId, (turn) => {
          const { pendingCorrection: _cleared, ...rest } = turn;
          return { ...rest, modelSteps: turn.modelSteps + 1 };
        }),
        modelCalls: state.modelCalls + 1,
      };
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
      const next = { ...state, incidents: [...state.incidents, incident] };
      if (payload.code !== 'protocol_violation') return next;
      const correction = str((payload.details as Payload | undefined)?.correction) ?? incident.message;
      return updateTurn(next, event.turnId, (turn) => ({
        ...turn,
        correctiveRetries: turn.correctiveRetries + 1,
        pendingCorrection: correction,
      }));
    }
    case 'run.status':
      return applyRunStatus(state, event, payload);
    case 'action.required': {
      const decision: PendingDecision = {
        actionId: event.actionId,
        actionType: payload.actionType === 'user_input' ? 'user_input' : 'tool_approval',
        turnId: event.turnId,
        runId: str(event.runId) ?? '',
        graphActionId: str(payload.graphActionId) ?? '',
        ...(str(payload.toolCallId) ? { toolCallId: str(payload.toolCallId) } : {}),
        ...(str(payload.toolName) ? { toolName: str(payload.toolName) } : {}),
        prompt: str(payload.prompt) ?? '',
        ...(Array.isArray(payload.decisions) ? { decisions: payload.decisions.map(String) } : {}),
        requestedAt: event.timestamp,
      };
      const waiting = decision.actionType === 'user_input' ? 'waiting_input' : 'waiting_permission';
      return {
        ...updateAction(state, decision.runId, decision.graphActionId, (a) => ({
          ...a,
          status: waiting,
          decisionId: decision.actionId,
        })),
        pending: [...state.pending, decision],
        status: waiting,
      };
    }
    case 'action.resolved': {
      const decision = state.pending.find((p) => p.actionId === event.actionId);
      if (!decision) return state;
      const approved = payload.decision !== 'deny';
      const pending = state.pending.filter((p) => p.actionId !== event.actionId);
      const next = updateAction(state, decision.runId, decision.graphActionId, (a) => {
        const { decisionId: _resolved, ...rest } = a;
        return approved
          ? {
              ...rest,
              status: 'pending',
              approved: true,
              ...(payload.payload ? { response: payload.payload as Record<string, unknown> } : {}),
            }
          : { ...rest, status: 'denied', endedAt: event.timestamp };
      });
      const waitingLeft = pending.find((p) => p.turnId === decision.turnId);
      const status =
        waitingLeft === undefined
          ? 'running'
          : waitingLeft.actionType === 'user_input'
            ? 'waiting_input'
            : 'waiting_permission';
      return { ...next, pending, status };
    }
    case 'tool.started':
      return updateAction(state, event.runId, str(payload.graphActionId), (a) => ({
        ...a,
        status: 'running',
        attempt: typeof payload.attempt === 'number' ? payload.attempt : a.attempt,
        startedAt: event.timestamp,
        ...(typeof payload.idempotent === 'boolean' ? { idempotent: payload.idempotent } : {}),
      }));
    case 'tool.result':
      return finishAction(state, event, 'completed', payload.observation);
    case 'tool.failed':
      return finishAction(
        state,
        event,
        (str(payload.actionStatus) as RunActionStatus) ?? 'failed',
        payload.observation,
      );
    case 'subagent.spawned': {
      const childThreadId = str(payload.childThreadId) ?? '';
      const next = updateAction(state, event.runId, str(payload.graphActionId), (a) => ({
        ...a,
        status: 'running',
        startedAt: event.timestamp,
        subagentId: event.subagentId,
        childThreadId,
      }));
      return {
        ...next,
        subagents: [
          ...next.subagents,
          { subagentId: event.subagentId, agent: str(payload.agentName) ?? 'auto', childThreadId, status: 'running' },
        ],
      };
    }
    case 'subagent.completed':
    case 'subagent.failed': {
      const status = event.type === 'subagent.completed' ? 'completed' : 'failed';
      const next = finishAction(state, event, status, payload.observation);
      return {
        ...next,
        subagents: next.subagents.map((s) => (s.subagentId === event.subagentId ? { ...s, status } : s)),
      };
    }
    case 'subagent.closed':
      return {
        ...state,
        subagents: state.subagents.map((s) => (s.subagentId === event.subagentId ? { ...s, status: 'closed' } : s)),
      };
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

function applyRunStatus(state: ThreadState, event: RuntimeEvent, payload: Payload): ThreadState {
  const runId = str(event.runId) ?? str(payload.runId);
  if (runId === undefined) return state;
  switch (payload.phase) {
    case 'declared': {
      const declaration = payload.declaration as Declaration;
      const actions: Record<string, RunAction> = {};
      for (const action of declaration.actions) {
        actions[action.id] = { id: action.id, status: 'pending', toolCallId: `${runId}.${action.id}`, attempt: 0 };
      }
      const run: RunState = {
        runId,
        taskId: str(event.taskId) ?? str(payload.taskId) ?? '',
        turnId: event.turnId ?? '',
        declaration,
        status: 'running',
        actions,
        order: declaration.actions.map((a) => a.id),
      };
      const used = new Set(state.usedActionIds);
      for (const id of run.order) used.add(id);
      const next = updateTurn(state, event.turnId, (turn) => ({
        ...turn,
        correctiveRetries: 0,
        runIds: [...turn.runIds, runId],
      }));
      return { ...next, runs: { ...next.runs, [runId]: run }, usedActionIds: [...used] };
    }
    case 'action': {
      const status = str(payload.status) as RunActionStatus | undefined;
      if (!status) return state;
      if (isTerminalActionStatus(status)) return finishAction(state, event, status, payload.observation);
      return updateAction(state, runId, str(payload.graphActionId), (a) => {
        if (status !== 'pending') return { ...a, status };
        // Back to pending (a retry, or a re-run after a restart): the previous attempt's result is history.
        const { result: _previous, endedAt: _ended, ...rest } = a;
        return { ...rest, status };
      });
    }
    case 'observed':
    case 'cancelled': {
      const status =
        payload.phase === 'cancelled' ? 'cancelled' : ((str(payload.status) ?? 'completed') as RunState['status']);
      return updateRun(state, runId, (run) => ({ ...run, status }));
    }
    default:
      return state;
  }
}
