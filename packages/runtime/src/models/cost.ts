import { costOf, DEFAULT_PRICES_AS_OF, priceOf } from '../config/prices.js';
import type { EventDraft } from '../log/draft.js';
import type { ModelHandle, ModelOutput } from './model-call.js';
import { reasoningSummary } from './reasoning.js';

/**
 * Cost facts of model calls (docs/models.md "Prices and cost"): `cost.estimated` before a call, from the estimated
 * input only (the output is not known yet), and `cost.recorded` after it, from the usage the provider reported.
 * A model without a known price has neither: an unknown price stays unknown rather than becoming a zero.
 */

type TurnIds = { threadId: string; turnId: string };

function priced(model: ModelHandle) {
  const price = priceOf(model);
  if (!price) return undefined;
  return {
    price,
    facts: {
      modelId: model.modelId,
      provider: model.provider,
      currency: 'USD',
      priceSource: model.price ? 'configured' : `defaults of ${DEFAULT_PRICES_AS_OF}`,
      approximate: true,
    },
  };
}

export function costEstimated(ids: TurnIds, model: ModelHandle, inputTokenEstimate: number): EventDraft[] {
  const known = priced(model);
  if (!known) return [];
  const amount = costOf(known.price, { inputTokens: inputTokenEstimate, outputTokens: 0 });
  return [
    {
      type: 'cost.estimated',
      ...ids,
      payload: { ...known.facts, amount, inputTokens: inputTokenEstimate, basis: 'estimated input tokens only' },
    },
  ];
}

export function costRecorded(ids: TurnIds, model: ModelHandle, usage: ModelOutput['usage']): EventDraft[] {
  const known = priced(model);
  if (!known) return [];
  return [{ type: 'cost.recorded', ...ids, payload: { ...known.facts, amount: costOf(known.price, usage), usage } }];
}

/**
 * A completed rerank's facts (a runner's `models.rerank`): `model.completed` with the ranking's indices and scores;
 * a reranker reports no tokens, so the usage is empty ("not reported", never zeros) and no cost is recorded.
 */
export function rerankCompleted(
  ids: TurnIds,
  model: Pick<ModelHandle, 'modelId' | 'provider'>,
  ranking: { index: number; score: number }[],
  durationMs: number,
): EventDraft[] {
  const { modelId, provider } = model;
  return [
    {
      type: 'model.completed',
      ...ids,
      payload: { modelId, provider, finishReason: 'stop', usage: {}, durationMs, output: { ranking } },
    },
  ];
}

/**
 * A completed model call's facts: its `reasoning.summary` when the model reasoned (models/reasoning.ts),
 * `model.completed` (the model, how it finished, its usage and output) and, when the model has a price, its
 * `cost.recorded`. The loop's steps, compaction and the runner host's model proxy all record a call this way; `lead`
 * and `trail` are their own fields (a compaction's purpose, a retry's attempt), on the reasoning's record too.
 */
export function modelCompleted(
  ids: TurnIds,
  model: ModelHandle,
  output: ModelOutput,
  fields: { lead?: Record<string, unknown>; trail?: Record<string, unknown> } = {},
): EventDraft[] {
  return [
    ...reasoningSummary(ids, model, output.reasoning, { ...fields.lead, ...fields.trail }),
    {
      type: 'model.completed',
      ...ids,
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        ...fields.lead,
        finishReason: output.finishReason as 'stop',
        usage: output.usage,
        durationMs: output.durationMs,
        output: { text: output.text, toolCalls: output.toolCalls },
        ...fields.trail,
      },
    },
    ...costRecorded(ids, model, output.usage),
  ];
}
