import { oarError } from '@oar/protocol';
import { reconcileAnswer, stillUnreconciled } from '../facts/reconcile.js';
import { toOarError } from '../kernel/errors.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';

/** How long a tool's reconcile step may take when the tool names no timeout of its own. */
const RECONCILE_TIMEOUT_MS = 30_000;

/**
 * Ask the tools whose lost calls wait for an answer whether those calls took effect (`ToolDefinition.reconcile`: a
 * GET by idempotency key), and record each answer a tool could give. Run by the lease holder as it takes the thread
 * over, after recovery recorded what was lost — so a call lost in this takeover or an earlier one is asked again
 * whenever the thread is taken over, until someone answers. A tool that cannot tell (no answer, an error, a timeout)
 * leaves it to a person; its error is on record as a warning.
 */
export async function reconcileLost(engine: Engine, thread: ThreadView, signal: AbortSignal): Promise<number> {
  let answered = 0;
  for (const request of thread.unreconciled ?? []) {
    const tool = request.toolName ? engine.tools.get(request.toolName) : undefined;
    const run = thread.runs.get(request.runId);
    const action = run?.declaration.actions.find((a) => a.id === request.graphActionId);
    if (!tool?.reconcile || !request.idempotencyKey || !run || !action || signal.aborted) continue;
    const parsed = engine.tools.parseInput(tool.name, action.input);
    if (!parsed.ok) continue;
    const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
    let verdict: Awaited<ReturnType<NonNullable<typeof tool.reconcile>>>;
    try {
      verdict = await tool.reconcile(
        { input: parsed.input, idempotencyKey: request.idempotencyKey },
        {
          workspaceRoot: engine.workspaceRoot,
          signal: AbortSignal.any([signal, AbortSignal.timeout(tool.timeoutMs ?? RECONCILE_TIMEOUT_MS)]),
        },
      );
    } catch (error) {
      await engine.append(thread.sessionId, [
        {
          type: 'runtime.warning',
          threadId: thread.threadId,
          actionId: request.actionId,
          payload: oarError(
            'reconcile_failed',
            `the reconcile step of "${tool.name}" could not tell whether the lost call took effect; it waits for a person`,
            { retryable: true, details: { tool: tool.name, cause: toOarError(error) } },
          ),
        },
      ]);
      continue;
    }
    if (!verdict) continue;
    const drafts = reconcileAnswer(request, ids, action, {
      decision: verdict.happened ? 'happened' : 'not_happened',
      resolvedBy: `tool:${tool.name}`,
      reason: `the tool's reconcile step, by idempotency key ${request.idempotencyKey}`,
      ...(verdict.evidence ? { evidence: verdict.evidence } : {}),
    });
    await engine.append(thread.sessionId, drafts, {
      durable: true,
      guard: stillUnreconciled(thread.sessionId, thread.threadId, request.actionId),
    });
    answered++;
  }
  return answered;
}
