import { type Action, oarError } from '@oar/protocol';
import type { Engine } from '../engine.js';
import { runAgentAction } from '../executors/agent.js';
import { runHumanAction } from '../executors/human.js';
import { runRuntimeAction } from '../executors/runtime-ops.js';
import { runToolAction } from '../executors/tool.js';
import { isTerminalActionStatus } from '../read-models/thread.js';
import type { RunActionStatus, RunState, ThreadState } from '../read-models/thread-state.js';
import { type ActionContext, actionStatusEvent } from './action-context.js';
import { ReadWriteLock } from './rw-lock.js';

const FAILED: ReadonlySet<RunActionStatus> = new Set(['failed', 'denied', 'skipped', 'cancelled', 'lost']);

async function runAction(ctx: ActionContext): Promise<RunActionStatus> {
  switch (ctx.action.executor.type) {
    case 'tool':
      return runToolAction(ctx);
    case 'agent':
      return runAgentAction(ctx);
    case 'human':
      return runHumanAction(ctx);
    case 'runtime':
      return runRuntimeAction(ctx);
    default: {
      const error = oarError(
        'executor_unavailable',
        `no ${ctx.action.executor.type} executor "${ctx.action.executor.target}" is configured in this runtime`,
      );
      await ctx.engine.append(ctx.thread.sessionId, [actionStatusEvent(ctx, 'failed', { error })]);
      return 'failed';
    }
  }
}

/** Read-only, concurrency-safe tools share the lock; everything else (writes, agents, humans) holds it alone. */
function isShared(engine: Engine, action: Action): boolean {
  if (action.executor.type === 'runtime') return true;
  if (action.executor.type !== 'tool') return false;
  const tool = engine.tools.get(action.executor.target);
  return tool?.isReadOnly === true && tool.isConcurrencySafe;
}

/**
 * Execute what can run of one action graph: dependency order, shared/exclusive locking, failure policies.
 * Returns when nothing more can run now — everything terminal, or the rest waits on a human, a child agent or
 * a dependency that is not done. Every status change is an event, so a restart continues from the log.
 */
export async function scheduleRun(
  engine: Engine,
  thread: ThreadState,
  run: RunState,
  signal: AbortSignal,
): Promise<void> {
  const statuses = new Map<string, RunActionStatus>(run.order.map((id) => [id, run.actions[id]?.status ?? 'pending']));
  const actions = new Map(run.declaration.actions.map((a) => [a.id, a]));
  const lock = new ReadWriteLock(engine.limits.maxParallel);
  const inFlight = new Map<string, Promise<void>>();
  let halted: { reason: string; policy: 'abort' | 'ask_model' } | undefined;

  const depStatus = (id: string): RunActionStatus | 'historical' | undefined =>
    statuses.get(id) ?? (thread.completedActionIds.includes(id) ? 'historical' : undefined);

  const context = (action: Action): ActionContext => ({
    engine,
    thread,
    run,
    action,
    state: run.actions[action.id] ?? {
      id: action.id,
      status: 'pending',
      toolCallId: `${run.runId}.${action.id}`,
      attempt: 0,
    },
    signal,
  });

  for (;;) {
    if (signal.aborted) break;
    const settle: Promise<void>[] = [];
    for (const id of run.order) {
      const action = actions.get(id);
      if (!action || statuses.get(id) !== 'pending' || inFlight.has(id)) continue;
      if (halted) {
        const status = halted.policy === 'abort' ? 'cancelled' : 'skipped';
        const error = oarError(halted.policy === 'abort' ? 'graph_aborted' : 'awaiting_model_decision', halted.reason);
        statuses.set(id, status);
        settle.push(engine.append(thread.sessionId, [actionStatusEvent(context(action), status, { error })]));
        continue;
      }
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
      const exclusive = !isShared(engine, action);
      const task = (async () => {
        const release = await lock.acquire(exclusive);
        try {
          if (signal.aborted) return;
          const status = await runAction(context(action));
          statuses.set(id, status);
          if (FAILED.has(status) && status !== 'skipped' && action.failurePolicy.onFailure !== 'continue' && !halted) {
            halted = {
              policy: action.failurePolicy.onFailure === 'abort' ? 'abort' : 'ask_model',
              reason: `"${id}" ended ${status} and its failure policy is ${action.failurePolicy.onFailure}`,
            };
          }
        } finally {
          release();
          inFlight.delete(id);
        }
      })();
      inFlight.set(id, task);
    }
    await Promise.all(settle);
    if (inFlight.size === 0) {
      // Nothing running: loop again only if an action became runnable through what just settled.
      const runnable = run.order.some((id) => {
        const action = actions.get(id);
        if (!action || statuses.get(id) !== 'pending') return false;
        if (halted) return true;
        return action.dependsOn.every((dep) => {
          const status = depStatus(dep);
          return (
            status === 'completed' ||
            status === 'historical' ||
            (status !== undefined && FAILED.has(status as RunActionStatus))
          );
        });
      });
      if (!runnable) break;
      continue;
    }
    await Promise.race(inFlight.values());
  }
  await Promise.allSettled(inFlight.values());
}

/** All actions of the run reached a terminal status. */
export function runFinished(run: RunState): boolean {
  return run.order.every((id) => {
    const status = run.actions[id]?.status;
    return status !== undefined && isTerminalActionStatus(status);
  });
}
