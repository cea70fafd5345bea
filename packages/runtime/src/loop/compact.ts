import { type OarError, oarError } from '@oar/protocol';
import { threadAgent } from '../executors/tool-worker.js';
import { turnIds } from '../facts/turn-end.js';
import { newId } from '../kernel/ids.js';
import type { ModelHandle } from '../models/model-call.js';
import type { ModelFailure } from '../models/model-errors.js';
import { compactionRange, type ThreadView, type TurnState } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';
import { compactThread, contextBudget } from './context/compaction.js';
import { type AssembledContext, assembleContext } from './context/context.js';
import { resolveChain } from './model/model-chain.js';
import { type PreparedStep, stepCatalog } from './step.js';

/** Compaction as the loop asks for it: a request recorded on the thread, or a call that overflowed the window. */

/**
 * Act on a `compact` request (control-plane `compact`): compact the thread's finished turns now, under this
 * worker's lease, whatever the threshold. The request ends with `context.compaction.completed` or `.failed`.
 */
export async function compactOnRequest(engine: Engine, thread: ThreadView): Promise<void> {
  const request = thread.compactionRequest;
  const turnId = thread.activeTurnId ?? thread.turns.at(-1)?.turnId;
  if (!request || !turnId) return;
  const agent = threadAgent(engine, thread);
  const model = (await resolveChain(engine, agent)).candidates[0]?.handle;
  const fail = (error: OarError) =>
    engine.append(thread.sessionId, [
      {
        type: 'context.compaction.failed',
        threadId: thread.threadId,
        turnId,
        payload: { compactionId: newId('cmp'), trigger: 'manual', error, requestId: request.requestId },
      },
    ]);
  if (!model) {
    await fail(oarError('no_model', `no model is configured for agent "${agent.name}" to summarise with`));
    return;
  }
  const catalog = stepCatalog(engine, thread, agent);
  const outcome = await compactThread(engine, thread, {
    trigger: 'manual',
    agent,
    model,
    budget: contextBudget(engine.limits, agent, model),
    requestId: request.requestId,
    // Asked for now: every finished turn is compacted (the active turn, if any, stays whole).
    keepTurns: 0,
    measure: (view, summary) =>
      assembleContext(view, agent, catalog, {
        budgetTokens: Number.MAX_SAFE_INTEGER,
        ...(summary ? { summary } : {}),
      }).tokenEstimate,
  });
  if (outcome.status === 'nothing_to_compact') {
    await fail(oarError('nothing_to_compact', 'the thread has no finished turns to compact'));
  }
}

/**
 * A `context_overflow` answered the step's call: record the failed attempt as one that is retried (`retryInMs`
 * 0), compact everything finished, and return the smaller context for the retry. Undefined when nothing could be
 * compacted (the failure is then handled as usual); `stop` when the work was interrupted meanwhile.
 */
export async function compactOnOverflow(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  step: PreparedStep,
  model: ModelHandle,
  failed: { failure: ModelFailure; attempt: number; durationMs: number },
): Promise<AssembledContext | 'stop' | undefined> {
  const current = await engine.loadThread(thread.sessionId, thread.threadId);
  if (compactionRange(current, 0).length === 0) return undefined;
  const { failure } = failed;
  await engine.append(thread.sessionId, [
    {
      type: 'model.failed',
      ...turnIds(thread, turn),
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        error: failure.error,
        durationMs: failed.durationMs,
        failureClass: failure.failureClass,
        attempt: failed.attempt,
        ...(failure.statusCode !== undefined ? { statusCode: failure.statusCode } : {}),
        retryInMs: 0,
        compacting: true,
      },
    },
  ]);
  step.compacted = true;
  const budget = contextBudget(engine.limits, step.agent, model);
  const outcome = await compactThread(engine, current, {
    trigger: 'context_overflow',
    agent: step.agent,
    model,
    budget,
    measure: step.measure,
    keepTurns: 0,
  });
  if (outcome.status === 'interrupted') return 'stop';
  return step.reassemble(await engine.loadThread(thread.sessionId, thread.threadId));
}
