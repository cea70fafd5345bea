import {
  type ActionResult,
  type Declaration,
  isReconcileDecision,
  RECONCILE_ACTION_TYPE,
  type RuntimeEvent,
} from '@oar/protocol';
import { setRecent } from '../kernel/lru.js';
import { isTerminalActionStatus, type RunAction, type RunActionStatus, type RunState } from './thread-state.js';

/**
 * The run projection: one executed action graph and the status of each of its actions. Kept apart from the
 * thread so that an event about one action rewrites one run, not the thread's whole history.
 */

type Payload = Record<string, unknown>;
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** The action status an event ends an action with, if it does (shared by the run and the thread reducers). */
export function endedActionStatus(event: RuntimeEvent): RunActionStatus | undefined {
  const payload = (event.payload ?? {}) as Payload;
  switch (event.type) {
    case 'tool.result':
    case 'subagent.completed':
      // The executor finished, but the result policy may fail the action (`if_truncated: fail`: the output was
      // over the budget); the observation it recorded says so.
      return (payload.observation as { status?: unknown } | undefined)?.status === 'failed' ? 'failed' : 'completed';
    case 'tool.failed':
      return (str(payload.actionStatus) as RunActionStatus | undefined) ?? 'failed';
    case 'subagent.failed':
      return 'failed';
    case 'action.resolved':
      return payload.decision === 'deny' ? 'denied' : undefined;
    case 'run.status': {
      const status = str(payload.status) as RunActionStatus | undefined;
      return payload.phase === 'action' && status && isTerminalActionStatus(status) ? status : undefined;
    }
    default:
      return undefined;
  }
}

/** A thread's action history, as the validator checks a new declaration against it. */
export interface ActionHistory {
  /**
   * Every action id declared in the thread: a model may not reuse one. An id can appear twice (a task retry declares
   * its failed actions again in a new run); consumers treat the list as a set.
   */
  usedActionIds: string[];
  /** The ids of actions that completed (a later graph may depend on them). */
  completedActionIds: string[];
}

const runHistories = new WeakMap<RunState, ActionHistory>();

/** One run's part of the history, remembered against the run object. */
function historyOf(run: RunState): ActionHistory {
  let part = runHistories.get(run);
  if (!part) {
    part = {
      usedActionIds: run.order,
      completedActionIds: run.order.filter((id) => run.actions[id]?.status === 'completed'),
    };
    runHistories.set(run, part);
  }
  return part;
}

/**
 * The history of a thread's runs. Derived, not kept in the thread's read model: two lists that grew with every
 * step made the thread document, its projection (a copy per declared graph) and replay grow quadratically. Each
 * run's part is remembered against the run object (runs are immutable values), so a step pays one pass over the
 * thread's runs.
 */
export function actionHistory(runs: Iterable<RunState>): ActionHistory {
  const usedActionIds: string[] = [];
  const completedActionIds: string[] = [];
  for (const run of runs) {
    const part = historyOf(run);
    for (const id of part.usedActionIds) usedActionIds.push(id);
    for (const id of part.completedActionIds) completedActionIds.push(id);
  }
  return { usedActionIds, completedActionIds };
}

/**
 * A thread's action ids as sets (the validator's `ValidationHistoryIndex`), kept up to date from one step to the
 * next instead of rebuilt: at step 1,000 building them (and the lists before them) was a tenth of a step. Per
 * thread, the runs last indexed are compared with the thread's runs by identity (runs are immutable values, so the
 * same object is the same run): only runs that changed or are new are counted again. Counts, because an id can be
 * declared in two runs (a task retry declares its failed actions again).
 *
 * The sets are live: the next `actionIndex` call for the same thread changes them. Use them at once (validation
 * runs synchronously), never keep them.
 */
export function actionIndex(threadId: string, runs: Iterable<RunState>): ThreadActionIndex {
  let index = threadIndexes.get(threadId);
  if (!index) index = new ThreadActionIndex();
  setRecent(threadIndexes, threadId, index, MAX_THREAD_INDEXES);
  return index.update(runs);
}

/**
 * Only threads being stepped need their index (it holds their runs): a few dozen at once in a busy process. Past
 * that a thread's step counts its runs again, as before the index; an idle session costs no memory here.
 */
const MAX_THREAD_INDEXES = 64;
const threadIndexes = new Map<string, ThreadActionIndex>();

export class ThreadActionIndex {
  readonly used = new Set<string>();
  readonly completed = new Set<string>();
  private readonly runs: RunState[] = [];
  private readonly usedCounts = new Map<string, number>();
  private readonly completedCounts = new Map<string, number>();

  update(runs: Iterable<RunState>): this {
    let position = 0;
    for (const run of runs) {
      if (this.runs[position] !== run) {
        this.forgetFrom(position);
        this.count(run, 1);
        this.runs.push(run);
      }
      position++;
    }
    this.forgetFrom(position);
    return this;
  }

  /** Stop counting the runs at `position` and after (they changed, or the thread no longer has them). */
  private forgetFrom(position: number): void {
    for (let i = position; i < this.runs.length; i++) this.count(this.runs[i] as RunState, -1);
    this.runs.length = Math.min(this.runs.length, position);
  }

  private count(run: RunState, by: 1 | -1): void {
    const part = historyOf(run);
    // A run's completed ids are among its declared ones, so `used` holds every completed id (the validator's rule).
    for (const id of part.usedActionIds) tally(this.usedCounts, this.used, id, by);
    for (const id of part.completedActionIds) tally(this.completedCounts, this.completed, id, by);
  }
}

function tally(counts: Map<string, number>, present: Set<string>, id: string, by: 1 | -1): void {
  const next = (counts.get(id) ?? 0) + by;
  if (next > 0) {
    counts.set(id, next);
    present.add(id);
  } else {
    counts.delete(id);
    present.delete(id);
  }
}

function updateAction(run: RunState, actionId: string | undefined, change: (action: RunAction) => RunAction): RunState {
  const action = actionId === undefined ? undefined : run.actions[actionId];
  if (!action || actionId === undefined) return run;
  return { ...run, actions: { ...run.actions, [actionId]: change(action) } };
}

function finish(run: RunState, event: RuntimeEvent, status: RunActionStatus, result: unknown): RunState {
  const actionId = str((event.payload as Payload).graphActionId);
  return updateAction(run, actionId, (action) => {
    const { pendingActionId: _ended, ...rest } = action;
    return { ...rest, status, endedAt: event.timestamp, ...(result ? { result: result as ActionResult } : {}) };
  });
}

/** A new run from its `run.status declared` event. */
function declared(event: RuntimeEvent, payload: Payload): RunState | undefined {
  const runId = str(event.runId);
  if (runId === undefined || !event.threadId) return undefined;
  const declaration = payload.declaration as Declaration;
  const actions: Record<string, RunAction> = {};
  for (const action of declaration.actions) {
    actions[action.id] = { id: action.id, status: 'pending', toolCallId: `${runId}.${action.id}`, attempt: 0 };
  }
  return {
    runId,
    threadId: event.threadId,
    taskId: str(event.taskId) ?? str(payload.taskId) ?? '',
    turnId: event.turnId ?? '',
    declaration,
    status: 'running',
    actions,
    order: declaration.actions.map((a) => a.id),
  };
}

export function reduceRun(run: RunState | undefined, event: RuntimeEvent): RunState | undefined {
  const payload = (event.payload ?? {}) as Payload;
  if (event.type === 'run.status' && payload.phase === 'declared') return declared(event, payload);
  if (!run) return run;
  const ended = endedActionStatus(event);
  if (ended) {
    return finish(run, event, ended, event.type === 'action.resolved' ? undefined : payload.observation);
  }
  const actionId = str(payload.graphActionId);
  switch (event.type) {
    case 'run.status': {
      if (payload.phase === 'action') {
        const status = str(payload.status) as RunActionStatus | undefined;
        if (!status) return run;
        return updateAction(run, actionId, (a) => {
          if (status !== 'pending') return { ...a, status };
          // Back to pending (a retry, or a re-run after a restart): the previous attempt's result is history. Only a
          // retry under an earlier attempt's key (idempotent by key, after a crash) keeps a key; any other retry is
          // a new attempt with a key of its own.
          const { result: _previous, endedAt: _ended, keyAttempt: _key, ...rest } = a;
          return {
            ...rest,
            status,
            ...(typeof payload.keyAttempt === 'number' ? { keyAttempt: payload.keyAttempt } : {}),
          };
        });
      }
      if (payload.phase === 'observed')
        return { ...run, status: (str(payload.status) ?? 'completed') as RunState['status'] };
      if (payload.phase === 'cancelled') {
        const actions = Object.fromEntries(
          Object.entries(run.actions).map(([id, a]) => [
            id,
            isTerminalActionStatus(a.status) ? a : { ...a, status: 'cancelled' as const, endedAt: event.timestamp },
          ]),
        );
        return { ...run, status: 'cancelled', actions };
      }
      return run;
    }
    case 'action.required': {
      // Whether a lost action took effect is asked after it ended: the action stays as it is until answered.
      if (payload.actionType === RECONCILE_ACTION_TYPE) return run;
      const waiting = payload.actionType === 'user_input' ? 'waiting_input' : 'waiting_permission';
      const scope = payload.scope as { paths?: unknown } | undefined;
      const paths = Array.isArray(scope?.paths) ? scope.paths.filter((p): p is string => typeof p === 'string') : [];
      return updateAction(run, actionId, (a) => {
        const { approvalPaths: _earlier, ...rest } = a;
        return {
          ...rest,
          status: waiting,
          pendingActionId: event.actionId,
          ...(payload.actionType === 'tool_approval' && scope ? { approvalPaths: paths } : {}),
        };
      });
    }
    case 'action.resolved':
      // A reconciliation's answer ends nothing here: the status change recorded with it does.
      if (isReconcileDecision(payload.decision)) return run;
      // An approval (a denial ended the action above): run it, with the human's payload when there is one.
      return updateAction(run, actionId, (a) => {
        const { pendingActionId: _resolved, ...rest } = a;
        return {
          ...rest,
          status: 'pending',
          approved: true,
          ...(payload.payload ? { response: payload.payload as Record<string, unknown> } : {}),
        };
      });
    case 'tool.started':
      return updateAction(run, actionId, (a) => ({
        ...a,
        status: 'running',
        attempt: typeof payload.attempt === 'number' ? payload.attempt : a.attempt,
        startedAt: event.timestamp,
        ...(typeof payload.idempotent === 'boolean' ? { idempotent: payload.idempotent } : {}),
        ...(payload.idempotentByKey === true ? { idempotentByKey: true } : {}),
        ...(typeof payload.idempotencyKey === 'string' ? { idempotencyKey: payload.idempotencyKey } : {}),
      }));
    case 'subagent.spawned':
      return updateAction(run, actionId, (a) => ({
        ...a,
        status: 'running',
        startedAt: event.timestamp,
        subagentId: event.subagentId,
        childThreadId: str(payload.childThreadId) ?? '',
      }));
    default:
      return run;
  }
}
