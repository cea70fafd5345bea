import { type Action, oarError } from '@oar/protocol';
import { actionIds, actionStatusChange, actionStatusEvent } from '../facts/action.js';
import { OarRuntimeError, toOarError } from '../kernel/errors.js';
import { actionHistory } from '../read-models/run.js';
import {
  isTerminalActionStatus,
  type RunActionStatus,
  type RunState,
  TERMINAL_RUN_ACTION_STATUSES,
  type ThreadView,
} from '../read-models/thread-state.js';
import { isStoreFault } from '../store/faults.js';
import { callFacts } from '../tools/tool.js';
import type { Engine } from './engine.js';
import { type ExecutorContext, executorContext, sessionDoors } from './executor-context.js';
import { graphOrder } from './ordering.js';
import { ReadWriteLock } from './rw-lock.js';

/** The statuses an action ends with other than completed. */
const FAILED: ReadonlySet<RunActionStatus> = new Set(TERMINAL_RUN_ACTION_STATUSES.filter((s) => s !== 'completed'));

/**
 * Runs one action by its executor type: the executor registry (executors/registry.ts), handed in by the loop so the
 * scheduler stays below the executors it schedules.
 */
export type ExecuteAction = (ctx: ExecutorContext) => Promise<RunActionStatus>;

/** Statuses a halted graph ends: not started yet, or waiting for a human decision. */
const HALTABLE: ReadonlySet<RunActionStatus> = new Set(['pending', 'waiting_permission', 'waiting_input']);

type Halt = { reason: string; policy: 'abort' | 'ask_model' };

/** An action that ended failed/denied/cancelled/lost under `abort` or `ask_model` halts the rest of its graph. */
function haltFor(action: Action, status: RunActionStatus): Halt | undefined {
  if (!FAILED.has(status) || status === 'skipped' || action.failurePolicy.onFailure === 'continue') return undefined;
  return {
    policy: action.failurePolicy.onFailure === 'abort' ? 'abort' : 'ask_model',
    reason: `"${action.id}" ended ${status} and its failure policy is ${action.failurePolicy.onFailure}`,
  };
}

function haltOf(run: RunState, actions: Map<string, Action>): Halt | undefined {
  for (const id of run.order) {
    const action = actions.get(id);
    const status = run.actions[id]?.status;
    const halt = action && status ? haltFor(action, status) : undefined;
    if (halt) return halt;
  }
  return undefined;
}

/** Refusals of the log itself: the driver must stop, not record them as an action's failure. */
const REFUSED = new Set(['lease_lost', 'contradictory_fact']);

/** Read-only, concurrency-safe tools share the lock; everything else (writes, agents, humans) holds it alone. */
function isShared(engine: Engine, action: Action): boolean {
  if (action.executor.type === 'runtime') return true;
  if (action.executor.type !== 'tool') return false;
  const tool = engine.tools.get(action.executor.target);
  if (!tool) return false;
  if (!tool.factsOf) return tool.isReadOnly && tool.isConcurrencySafe;
  // A tool whose calls differ is locked by what this call does (an input that does not parse: by its own flags).
  const parsed = engine.tools.parseInput(tool.name, action.input);
  const facts = parsed.ok ? callFacts(tool, parsed.input) : tool;
  return facts.isReadOnly && facts.isConcurrencySafe;
}

/**
 * Execute what can run of one action graph: dependency order, shared/exclusive locking, failure policies.
 * Returns when nothing more can run now — everything terminal, or the rest waits on a human, a child agent or
 * a dependency that is not done. Every status change is an event, so a restart continues from the log.
 */
export async function scheduleRun(
  engine: Engine,
  thread: ThreadView,
  run: RunState,
  signal: AbortSignal,
  execute: ExecuteAction,
): Promise<void> {
  const statuses = new Map<string, RunActionStatus>(run.order.map((id) => [id, run.actions[id]?.status ?? 'pending']));
  const actions = new Map(run.declaration.actions.map((a) => [a.id, a]));
  // The order the graph's strategy and barriers add, and how many of its actions may run at once (ordering.ts).
  const order = graphOrder(run.declaration, engine.limits.maxParallel);
  const lock = new ReadWriteLock(order.concurrency);
  const inFlight = new Map<string, Promise<void>>();
  // The halt is derived from durable statuses, so a later pass (after an approval, after a restart) keeps it.
  let halted = haltOf(run, actions);

  /** A halted graph ends its not-yet-started actions: cancelled (abort) or skipped (ask_model). */
  const haltAction = (action: Action, by: Halt): Promise<void> => {
    const status = by.policy === 'abort' ? 'cancelled' : 'skipped';
    const error = oarError(by.policy === 'abort' ? 'graph_aborted' : 'awaiting_model_decision', by.reason);
    statuses.set(action.id, status);
    return engine.append(thread.sessionId, [actionStatusEvent(context(action), status, { error })]);
  };

  let completedBefore: ReadonlySet<string> | undefined;
  const depStatus = (id: string): RunActionStatus | 'historical' | undefined => {
    const status = statuses.get(id);
    if (status !== undefined) return status;
    completedBefore ??= new Set(actionHistory(thread.runs.values()).completedActionIds);
    return completedBefore.has(id) ? 'historical' : undefined;
  };

  /** Every action the strategy or a barrier puts before `id` has ended (whatever its outcome). */
  const ordered = (id: string): boolean =>
    (order.after.get(id) ?? []).every((before) => {
      const status = statuses.get(before);
      return status !== undefined && isTerminalActionStatus(status);
    });

  const doors = sessionDoors(engine, thread.sessionId);
  const context = (action: Action): ExecutorContext =>
    executorContext(
      doors,
      {
        thread,
        run,
        action,
        state: run.actions[action.id] ?? {
          id: action.id,
          status: 'pending',
          toolCallId: `${run.runId}.${action.id}`,
          attempt: 0,
        },
      },
      signal,
    );

  /** A fact the log refused or the store could not take: nothing more may be written by this driver. */
  let refused: unknown;
  for (;;) {
    if (signal.aborted || refused !== undefined) break;
    const settle: Promise<void>[] = [];
    for (const id of run.order) {
      const action = actions.get(id);
      if (!action || inFlight.has(id)) continue;
      if (halted && HALTABLE.has(statuses.get(id) ?? 'pending')) {
        // Also an action waiting for a decision: its request is withdrawn with it.
        settle.push(haltAction(action, halted));
        continue;
      }
      if (statuses.get(id) !== 'pending') continue;
      const deps = action.dependsOn.map((dep) => [dep, depStatus(dep)] as const);
      const failedDep = deps.find(([, status]) => status !== undefined && FAILED.has(status as RunActionStatus));
      if (failedDep) {
        statuses.set(id, 'skipped');
        const error = oarError('dependency_failed', `skipped: dependency "${failedDep[0]}" ended ${failedDep[1]}`, {
          details: { dependency: failedDep[0], status: failedDep[1] },
        });
        settle.push(engine.append(thread.sessionId, [actionStatusEvent(context(action), 'skipped', { error })]));
        continue;
      }
      if (!deps.every(([, status]) => status === 'completed' || status === 'historical')) continue;
      if (!ordered(id)) continue;
      const exclusive = !isShared(engine, action);
      const task = (async () => {
        const release = await lock.acquire(exclusive);
        try {
          if (signal.aborted) return;
          // The graph may have been halted while this action waited for the lock: it must not start then.
          if (halted) {
            await haltAction(action, halted);
            return;
          }
          let status: RunActionStatus;
          try {
            status = await runWithRetries(engine, context(action), () => halted !== undefined, execute);
          } catch (thrown) {
            // The log refused a fact (this worker lost its lease, or it contradicts the record) or the store cannot
            // take one (full, read-only, gone): nothing more may be written about this action by this driver.
            // The graph stops where it is (the action stays as recorded) and the driver fails with the cause.
            if ((thrown instanceof OarRuntimeError && REFUSED.has(thrown.code)) || isStoreFault(thrown)) {
              refused ??= thrown;
              return;
            }
            // An executor that throws (a store error, a tool returning something unserializable) fails its own
            // action; it must not tear down the graph while sibling actions are still running.
            status = 'failed';
            await engine
              .append(thread.sessionId, [actionStatusEvent(context(action), 'failed', { error: toOarError(thrown) })])
              .catch(() => undefined);
          }
          statuses.set(id, status);
          halted ??= haltFor(action, status);
        } finally {
          release();
          inFlight.delete(id);
        }
      })();
      inFlight.set(id, task);
    }
    const settled = await Promise.allSettled(settle);
    const failure = settled.find((result) => result.status === 'rejected');
    if (failure) {
      // Never leave a tool running behind a failed driver: wait for the actions in flight, then fail.
      await Promise.allSettled(inFlight.values());
      throw (failure as PromiseRejectedResult).reason;
    }
    if (inFlight.size === 0) {
      // Nothing running: loop again only if an action became runnable through what just settled.
      const runnable = run.order.some((id) => {
        const action = actions.get(id);
        if (!action) return false;
        if (halted) return HALTABLE.has(statuses.get(id) ?? 'pending');
        if (statuses.get(id) !== 'pending') return false;
        const depsSettled = action.dependsOn.every((dep) => {
          const status = depStatus(dep);
          return (
            status === 'completed' ||
            status === 'historical' ||
            (status !== undefined && FAILED.has(status as RunActionStatus))
          );
        });
        // A dependency that failed skips the action whatever its order; otherwise it also waits for its order.
        return (
          depsSettled && (ordered(id) || action.dependsOn.some((dep) => FAILED.has(depStatus(dep) as RunActionStatus)))
        );
      });
      if (!runnable) break;
      continue;
    }
    await Promise.race(inFlight.values()).catch(() => undefined);
  }
  await Promise.allSettled(inFlight.values());
  if (refused !== undefined) throw refused;
}

/**
 * Run an action, retrying a failed tool call while its failure policy allows more attempts
 * (`failurePolicy.maxAttempts`). Each retry is recorded before it runs — `task.retrying` and a `run.status`
 * action status `pending` with the next attempt — and its `tool.started` carries that attempt number. Only a
 * tool that actually ran and failed is retried: denials, invalid input, cancellation and interrupts are not.
 */
async function runWithRetries(
  engine: Engine,
  ctx: ExecutorContext,
  halted: () => boolean,
  execute: ExecuteAction,
): Promise<RunActionStatus> {
  let current = ctx;
  for (;;) {
    const status = await execute(current);
    const maxAttempts = ctx.action.failurePolicy.maxAttempts;
    if (status !== 'failed' || ctx.action.executor.type !== 'tool' || maxAttempts <= 1) return status;
    if (ctx.signal.aborted || halted()) return status;
    const thread = await engine.loadThread(ctx.thread.sessionId, ctx.thread.threadId);
    const state = thread.runs.get(ctx.run.runId)?.actions[ctx.action.id];
    // attempt counts tool.started facts: 0 means the tool never ran (unknown tool, invalid input).
    if (!state || state.attempt === 0 || state.attempt >= maxAttempts) return status;
    const nextAttempt = state.attempt + 1;
    const error = state.result?.error;
    const reason = `attempt ${state.attempt} of ${maxAttempts} failed${error ? ` (${error.code})` : ''}`;
    await engine.append(ctx.thread.sessionId, [
      { type: 'task.retrying', ...actionIds(ctx), payload: { nextAttempt, reason, graphActionId: ctx.action.id } },
      actionStatusChange(actionIds(ctx), ctx.action, 'pending', { attempt: nextAttempt, reason }, 'running'),
    ]);
    const { result: _previous, endedAt: _ended, ...rest } = state;
    current = { ...ctx, thread, run: thread.runs.get(ctx.run.runId) ?? ctx.run, state: { ...rest, status: 'pending' } };
  }
}

/** All actions of the run reached a terminal status. */
export function runFinished(run: RunState): boolean {
  return run.order.every((id) => {
    const status = run.actions[id]?.status;
    return status !== undefined && isTerminalActionStatus(status);
  });
}
