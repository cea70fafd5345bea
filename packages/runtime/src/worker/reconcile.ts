import { type Action, oarError } from '@oar/protocol';
import { reconcileService } from '../executors/service.js';
import { reconcileAnswer, stillUnreconciled } from '../facts/reconcile.js';
import { OarRuntimeError, toOarError } from '../kernel/errors.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';
import type { ReconcileVerdict } from '../tools/tool.js';

/** How long a tool's reconcile step may take when the tool names no timeout of its own. */
const RECONCILE_TIMEOUT_MS = 30_000;

/** Who can answer for a lost action: its tool's reconcile step, or its service's reconcile GET. */
interface Reconciler {
  /** `tool:<name>` or `service:<name>`: recorded as who resolved it. */
  by: string;
  timeoutMs: number;
  ask(idempotencyKey: string, signal: AbortSignal): Promise<ReconcileVerdict | undefined>;
}

function reconcilerOf(engine: Engine, action: Action): Reconciler | undefined {
  const name = action.executor.target;
  if (action.executor.type === 'service') {
    const service = engine.binding.services?.find((s) => s.name === name);
    if (!service?.reconcile) return undefined;
    return {
      by: `service:${name}`,
      timeoutMs: service.timeoutMs,
      ask: (key, signal) => reconcileService(service, action.input, key, signal),
    };
  }
  const tool = action.executor.type === 'tool' ? engine.tools.get(name) : undefined;
  const reconcile = tool?.reconcile;
  if (!tool || !reconcile) return undefined;
  const parsed = engine.tools.parseInput(tool.name, action.input);
  if (!parsed.ok) return undefined;
  return {
    by: `tool:${name}`,
    timeoutMs: tool.timeoutMs ?? RECONCILE_TIMEOUT_MS,
    ask: (key, signal) =>
      reconcile({ input: parsed.input, idempotencyKey: key }, { workspaceRoot: engine.workspaceRoot, signal }),
  };
}

/**
 * Ask whoever can look a lost call up by its idempotency key (a tool's `reconcile` step, a service's `reconcile`
 * GET) whether it took effect, and record each answer given. Run by the lease holder as it takes the thread over,
 * after recovery recorded what was lost. Each question is asked once per process (`asked`): a call lost before this
 * process started is asked when it first takes the thread, not at every drive of it. One that cannot tell (no
 * answer, an error, a timeout) leaves it to a person, with its error on record as a warning.
 */
export async function reconcileLost(
  engine: Engine,
  thread: ThreadView,
  signal: AbortSignal,
  asked: Set<string>,
): Promise<number> {
  let answered = 0;
  for (const request of thread.unreconciled ?? []) {
    const run = thread.runs.get(request.runId);
    const action = run?.declaration.actions.find((a) => a.id === request.graphActionId);
    const reconciler = action ? reconcilerOf(engine, action) : undefined;
    if (!reconciler || !request.idempotencyKey || !run || !action || signal.aborted) continue;
    if (asked.has(request.actionId)) continue;
    asked.add(request.actionId);
    const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
    let verdict: ReconcileVerdict | undefined;
    try {
      verdict = await reconciler.ask(
        request.idempotencyKey,
        AbortSignal.any([signal, AbortSignal.timeout(reconciler.timeoutMs)]),
      );
    } catch (error) {
      // Stopped (shutdown, a lost lease), not unable to tell: the next holder asks again.
      if (signal.aborted) {
        asked.delete(request.actionId);
        return answered;
      }
      await engine.append(thread.sessionId, [
        {
          type: 'runtime.warning',
          threadId: thread.threadId,
          actionId: request.actionId,
          payload: oarError(
            'reconcile_failed',
            `${reconciler.by} could not tell whether the lost call took effect; it waits for a person`,
            { retryable: true, details: { by: reconciler.by, cause: toOarError(error) } },
          ),
        },
      ]);
      continue;
    }
    if (!verdict) continue;
    const drafts = reconcileAnswer(request, ids, action, {
      decision: verdict.happened ? 'happened' : 'not_happened',
      resolvedBy: reconciler.by,
      reason: `asked by idempotency key ${request.idempotencyKey}`,
      ...(verdict.evidence ? { evidence: verdict.evidence } : {}),
    });
    try {
      await engine.append(thread.sessionId, drafts, {
        durable: true,
        guard: stillUnreconciled(thread.sessionId, thread.threadId, request.actionId),
      });
    } catch (error) {
      // A person answered while the tool was asked: theirs stands, and the turn goes on.
      if (error instanceof OarRuntimeError && error.code === 'decision_already_resolved') continue;
      throw error;
    }
    answered++;
  }
  return answered;
}
