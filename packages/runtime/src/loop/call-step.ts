import type { OarError } from '@oar/protocol';
import { MODEL_CALL_DEFAULTS } from '../config/binding.js';
import { turnIds } from '../facts/turn-end.js';
import { isClosing } from '../kernel/errors.js';
import { waitUnlessAborted } from '../kernel/signals.js';
import type { EventDraft } from '../log/draft.js';
import { costEstimated, modelCompleted } from '../models/cost.js';
import { callModel, type ModelHandle, type ModelOutput } from '../models/model-call.js';
import { type ModelFailure, type ModelRetryPolicy, retryDelay } from '../models/model-errors.js';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { AgentConfig, Engine } from '../scheduler/engine.js';
import { budgetGate } from './budgets/budget-gate.js';
import { compactOnOverflow } from './compact.js';
import { contextBudget } from './context/compaction.js';
import { fallbackApplied, type ModelCandidate, nextCandidate } from './model/model-chain.js';
import { providerSlot } from './model/provider-slot.js';
import { streamingStarted } from './model/streaming-started.js';
import { modelRequested } from './prepare-step.js';
import type { PreparedStep } from './step.js';
import { failTurn } from './turn-end.js';

/** Phase 2 of a model step (loop/model-step.ts): the model call, its retries and fallbacks, and their facts. */
/**
 * Phase 2: make the call and record how it ended (model.completed, or model.failed and a failed turn). A retryable
 * failure (transient, timeout, rate limited) is retried under the model's policy, each attempt a recorded fact:
 * `model.failed` with its class and the wait (`retryInMs`), `rate_limit.hit` for a 429, then the next
 * `model.requested`. Every attempt counts as a model call of the thread (a scripted model's step index follows
 * them), only the call's end counts as a step. Returns the output for phase 3, or undefined when the call failed
 * or the work was interrupted meanwhile.
 */
export async function callStep(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  step: PreparedStep,
  signal: AbortSignal,
): Promise<ModelOutput | undefined> {
  const { agent, chain } = step;
  let context = step.context;
  const ids = turnIds(thread, turn);
  let index = 0;
  let model = step.model;
  let policy = retryPolicy(engine, model);
  // Every attempt is a model call of the thread (the scripted model's cursor), whichever candidate made it.
  for (let attempt = 1, calls = 0; ; attempt++, calls++) {
    const timeoutMs = model.timeoutMs ?? engine.limits.modelTimeoutMs ?? MODEL_CALL_DEFAULTS.timeoutMs;
    // This process's limits of the provider and model (concurrency, per minute, a 429's pause) come first.
    const slot = await providerSlot(engine, thread.sessionId, ids, model, signal);
    const idleTimeoutMs = model.idleTimeoutMs ?? engine.limits.modelIdleTimeoutMs;
    // The call's first streamed piece is recorded once: the turn is `streaming` from it until the call ends.
    const streaming = streamingStarted(engine, thread.sessionId, ids, model, attempt);
    const call =
      slot.cancelled ??
      (await callModel(model, {
        system: context.system,
        transcript: context.transcript.text,
        carrier: agent.carrier,
        signal,
        modelCall: thread.modelCalls + calls,
        timeoutMs,
        deltas: streaming.sink,
        // The answer's limit, reserved out of the context budget (the provider's default when nothing is known).
        ...maxOutputOf(engine, agent, model),
        ...(idleTimeoutMs !== undefined ? { idleTimeoutMs } : {}),
      }));
    if (slot.cancelled === undefined) slot.release();
    await streaming.recorded();
    if (call.ok) {
      const output = call.output;
      await engine.append(
        thread.sessionId,
        modelCompleted(ids, model, output, { trail: attempt > 1 ? { attempt } : {} }),
      );
      return signal.aborted ? undefined : output;
    }
    const { failure } = call;
    // A provider's pause (429 retry-after) holds back every caller of this model in the process, up to the wait
    // this model's policy accepts (a longer one fails or falls back here, and the others find out themselves).
    if (failure.failureClass === 'rate_limited' && failure.retryAfterMs !== undefined) {
      engine.limiter.pause(model, Math.min(failure.retryAfterMs, policy.maxDelayMs));
    }
    // The request does not fit the window: compact once and send the smaller request again (a second overflow
    // falls back to the next candidate of the chain, or fails, as any failure).
    if (
      failure.failureClass === 'context_overflow' &&
      !signal.aborted &&
      !step.compacted &&
      agent.compaction?.enabled !== false
    ) {
      const smaller = await compactOnOverflow(engine, thread, turn, step, model, {
        failure,
        attempt,
        durationMs: call.durationMs,
      });
      if (smaller === 'stop') return undefined;
      if (smaller) {
        context = smaller;
        step.context = smaller;
        await engine.append(
          thread.sessionId,
          [
            modelRequested(thread, turn, step, { attempt: attempt + 1, retryOf: failure.failureClass }, model),
            ...costEstimated(ids, model, smaller.tokenEstimate),
          ],
          { durable: true },
        );
        continue;
      }
    }
    const retryInMs = signal.aborted ? undefined : retryDelay(failure, attempt, policy);
    // Given up on this model for a class the chain falls back on: the next candidate takes the call.
    const next =
      retryInMs === undefined && !signal.aborted ? nextCandidate(chain, index, failure.failureClass) : undefined;
    const failed: EventDraft = {
      type: 'model.failed',
      ...ids,
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        error: failure.error,
        durationMs: call.durationMs,
        failureClass: failure.failureClass,
        attempt,
        ...(failure.statusCode !== undefined ? { statusCode: failure.statusCode } : {}),
        ...(retryInMs !== undefined ? { retryInMs } : {}),
        ...(next !== undefined ? { fallback: true } : {}),
      },
    };
    if (signal.aborted) {
      // The interrupt records the turn's end. The call itself is bracketed (model.requested … model.failed), which
      // also counts it as made; a runtime that is closing records nothing, so a restart repeats the same call.
      if (!isClosing(signal)) await engine.append(thread.sessionId, [failed]);
      return undefined;
    }
    const candidate = next === undefined ? undefined : chain.candidates[next];
    if (next !== undefined && candidate) {
      const from = chain.candidates[index] as ModelCandidate;
      await engine.append(thread.sessionId, [failed, ...rateLimitFacts(ids, model, failure, attempt)]);
      // The fallback's request is a call like any: a budget may stop it.
      if (!(await budgetAllows(engine, thread, turn, candidate.handle, context.tokenEstimate))) return undefined;
      await engine.append(
        thread.sessionId,
        [
          fallbackApplied(ids, from, candidate, failure.failureClass, attempt),
          modelRequested(thread, turn, step, { attempt: 1, fallbackFrom: model.modelId }, candidate.handle),
          ...costEstimated(ids, candidate.handle, context.tokenEstimate),
        ],
        { durable: true },
      );
      index = next;
      model = candidate.handle;
      policy = retryPolicy(engine, model);
      attempt = 0;
      continue;
    }
    // Durable at once when a wait follows: observers see the failure (and its time) while the thread waits.
    await engine.append(thread.sessionId, [failed, ...rateLimitFacts(ids, model, failure, attempt)], {
      commit: retryInMs !== undefined,
    });
    if (retryInMs === undefined) {
      await failTurn(engine, thread, turn, withAttempts(failure.error, attempt, policy));
      return undefined;
    }
    // An interrupt ends the wait at once (the interrupt then records the turn's end).
    if (!(await waitUnlessAborted(retryInMs, signal))) return undefined;
    // A retry is a call like any: a budget may stop it (the step then starts over once the thread may go on).
    if (!(await budgetAllows(engine, thread, turn, model, context.tokenEstimate))) return undefined;
    const retry = modelRequested(thread, turn, step, { attempt: attempt + 1, retryOf: failure.failureClass }, model);
    await engine.append(thread.sessionId, [retry], { durable: true });
  }
}

/** The `maxOutputTokens` of a call to `model`: the output reserve of the agent's budget with it, when known. */
function maxOutputOf(engine: Engine, agent: AgentConfig, model: ModelHandle): { maxOutputTokens?: number } {
  const { maxOutputTokens } = contextBudget(engine.limits, agent, model);
  return maxOutputTokens !== undefined ? { maxOutputTokens } : {};
}

/**
 * The budget check before a retry's or a fallback's request (loop/budgets/budget-gate.ts): false when a limit stops it —
 * the thread then waits in `waiting_resource`, or the turn has failed with `budget_exceeded`.
 */
async function budgetAllows(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  model: ModelHandle,
  inputTokenEstimate: number,
): Promise<boolean> {
  const now = await engine.loadThread(thread.sessionId, thread.threadId);
  const gate = await budgetGate(engine, now, turn, model, inputTokenEstimate);
  if (gate.status === 'failed') await failTurn(engine, now, turn, gate.error);
  return gate.status === 'ok';
}

/** The model's retry policy: its own configured fields, else the limits', else the defaults. */
function retryPolicy(engine: Engine, model: ModelHandle): ModelRetryPolicy {
  const limits = engine.limits;
  return {
    attempts: model.retry?.attempts ?? limits.modelAttempts ?? MODEL_CALL_DEFAULTS.attempts,
    initialDelayMs:
      model.retry?.initialDelayMs ?? limits.modelRetryInitialDelayMs ?? MODEL_CALL_DEFAULTS.initialDelayMs,
    maxDelayMs: model.retry?.maxDelayMs ?? limits.modelRetryMaxDelayMs ?? MODEL_CALL_DEFAULTS.maxDelayMs,
  };
}

/** A 429 is also a `rate_limit.hit`: what the provider said (its wait, its limit headers, its request id). */
function rateLimitFacts(
  ids: ReturnType<typeof turnIds>,
  model: ModelHandle,
  failure: ModelFailure,
  attempt: number,
): EventDraft[] {
  if (failure.failureClass !== 'rate_limited') return [];
  return [
    {
      type: 'rate_limit.hit',
      ...ids,
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        attempt,
        ...(failure.statusCode !== undefined ? { statusCode: failure.statusCode } : {}),
        ...(failure.retryAfterMs !== undefined ? { retryAfterMs: failure.retryAfterMs } : {}),
        ...(failure.rateLimit ? { limits: failure.rateLimit } : {}),
        ...(failure.providerRequestId ? { providerRequestId: failure.providerRequestId } : {}),
      },
    },
  ];
}

/** The error a call ends the turn with: how many attempts it took, and why no more were made. */
function withAttempts(error: OarError, attempts: number, policy: ModelRetryPolicy): OarError {
  const retryAfterMs = error.details?.retryAfterMs;
  const reason = !error.retryable
    ? 'not_retryable'
    : typeof retryAfterMs === 'number' && retryAfterMs > policy.maxDelayMs
      ? 'retry_after_too_long'
      : 'attempts_exhausted';
  return { ...error, details: { ...error.details, attempts, maxAttempts: policy.attempts, gaveUp: reason } };
}
