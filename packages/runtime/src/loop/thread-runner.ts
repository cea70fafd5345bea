import { type ActionResult, oarError, protocolResult } from '@oar/protocol';
import { executeAction } from '../executors/registry.js';
import { threadAgent } from '../executors/tool-worker.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { isTerminalRunStatus, type RunState, type ThreadView, type TurnState } from '../read-models/thread-state.js';
import type { AgentConfig, Engine } from '../scheduler/engine.js';
import { runFinished, scheduleRun } from '../scheduler/run-scheduler.js';
import { compactOnRequest } from './compact.js';
import { modelStep } from './model-step.js';
import { AGAIN, type NextStep, waitFor } from './next-step.js';
import { startNextTurn } from './turn-start.js';

/** Runs one turn of an agent bound to a runner (agent-runners/host.ts); true when it made progress. */
export type RunnerTurn = (
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  agent: AgentConfig,
  signal: AbortSignal,
) => Promise<boolean>;

/**
 * The protocol runner loop, one step at a time. `advance` takes the thread's durable state, as its worker just read
 * it, and performs the next step — start a queued turn, continue the current action graph, or make the next model
 * call — so the same function continues a turn after an approval, an interrupt or a process restart.
 * Returns what comes next (loop/next-step.ts): again when it made progress, else what the thread waits for. A turn
 * of an agent bound to a runner is one run of `runnerTurn` (agent-runners/host.ts, above the loop: the worker hands
 * it in).
 */
export async function advance(engine: Engine, thread: ThreadView, runnerTurn?: RunnerTurn): Promise<NextStep> {
  const { sessionId, threadId } = thread;
  if (thread.status === 'closed') return waitFor('closed');
  // A requested compaction first: it changes only what later model calls are shown, never the turn's work.
  if (thread.compactionRequest) {
    await compactOnRequest(engine, thread);
    return AGAIN;
  }
  const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
  if (!turn) return startNextTurn(engine, thread);
  const signal = engine.signal(threadId);
  if (signal.aborted) return waitFor('interrupted');

  const run = turn.runIds.map((id) => thread.runs.get(id)).findLast((r): r is RunState => r !== undefined);
  if (run && !isTerminalRunStatus(run.status)) {
    if (!runFinished(run)) {
      await scheduleRun(engine, thread, run, signal, executeAction);
      // Interrupted: the interrupt records how the graph ended (cancelled), not an ordinary observation.
      if (signal.aborted) return waitFor('interrupted');
      const after = await engine.loadThread(sessionId, threadId);
      const updated = after.runs.get(run.runId);
      if (!updated || !runFinished(updated)) return waitFor('actions');
      await observeRun(engine, after, updated);
      return AGAIN;
    }
    await observeRun(engine, thread, run);
    return AGAIN;
  }
  // An agent bound to a runner runs the turn as one runner run instead of model steps (agent-runners/host.ts).
  const agent = threadAgent(engine, thread);
  if (agent.runner) {
    if (!runnerTurn)
      throw new OarRuntimeError(
        'internal_error',
        `agent "${agent.name}" is bound to a runner, and no runner host is here`,
      );
    return (await runnerTurn(engine, thread, turn, agent, signal)) ? AGAIN : waitFor('runner');
  }
  // A budget that holds the call leaves the thread waiting for a resource: nothing to do until a limit changes.
  return (await modelStep(engine, thread, turn, signal)) ? AGAIN : waitFor('resource');
}

/** Close a finished graph: the aggregate result, the task attempt's end, and the task's end. */
async function observeRun(engine: Engine, thread: ThreadView, run: RunState): Promise<void> {
  const results = run.order.map(
    (id) => run.actions[id]?.result ?? ({ id, status: 'cancelled', artifacts: [] } as ActionResult),
  );
  const result = protocolResult(run.runId, results, 'continue');
  const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
  const failed = result.status === 'failed';
  const summary = `${results.filter((r) => r.status === 'completed').length}/${results.length} actions completed`;
  const lost = results.filter((r) => r.status === 'lost').map((r) => r.id);
  await engine.append(thread.sessionId, [
    {
      type: 'run.status',
      ...ids,
      status: result.status === 'completed' ? 'completed' : 'failed',
      payload: { phase: 'observed', status: result.status, title: run.declaration.title ?? 'action graph', result },
    },
    failed
      ? {
          type: 'task.attempt.failed',
          ...ids,
          payload: {
            retryable: true,
            error: oarError('actions_failed', summary),
            failureCategory: lost.length > 0 ? 'lost' : 'action_failure',
          },
        }
      : { type: 'task.attempt.completed', ...ids, payload: { summary } },
    // An action the runtime lost (it cannot tell whether it took effect) leaves its task lost, not failed.
    failed && lost.length > 0
      ? { type: 'task.lost', ...ids, payload: { reason: 'lost', lostActions: lost, error: oarError('lost', summary) } }
      : failed
        ? { type: 'task.failed', ...ids, payload: { error: oarError('actions_failed', summary) } }
        : { type: 'task.completed', ...ids, payload: { summary } },
  ]);
}
