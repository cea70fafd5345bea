import { z } from 'zod';

/**
 * Model prices (docs/models.md "Prices and cost"): what one million tokens cost, in US dollars. A configured model
 * may carry its own (`models.<name>.price`); otherwise the dated defaults below apply to the hosted models they
 * name. Both are approximate — providers change prices, discounts and tiers — so a recorded cost is an estimate of
 * the bill, never the bill. A model with no known price has no cost facts: an unknown price stays unknown.
 */
export const ModelPriceSchema = z.strictObject({
  inputPerMillion: z.number().nonnegative(),
  outputPerMillion: z.number().nonnegative(),
  /** Input tokens read from the provider's prompt cache (the input price when omitted). */
  cachedInputPerMillion: z.number().nonnegative().optional(),
  /** Input tokens written to the prompt cache (the input price when omitted). */
  cacheWritePerMillion: z.number().nonnegative().optional(),
});
export type ModelPrice = z.infer<typeof ModelPriceSchema>;

/** When the default prices were taken from the providers' public price lists. */
export const DEFAULT_PRICES_AS_OF = '2025-10-01';

/** Approximate list prices by `provider:modelId` (USD per million tokens), as of DEFAULT_PRICES_AS_OF. */
export const DEFAULT_PRICES: Readonly<Record<string, ModelPrice>> = {
  'openai:gpt-4.1': { inputPerMillion: 2, outputPerMillion: 8, cachedInputPerMillion: 0.5 },
  'openai:gpt-4.1-mini': { inputPerMillion: 0.4, outputPerMillion: 1.6, cachedInputPerMillion: 0.1 },
  'openai:gpt-4.1-nano': { inputPerMillion: 0.1, outputPerMillion: 0.4, cachedInputPerMillion: 0.025 },
  'openai:gpt-4o': { inputPerMillion: 2.5, outputPerMillion: 10, cachedInputPerMillion: 1.25 },
  'openai:gpt-4o-mini': { inputPerMillion: 0.15, outputPerMillion: 0.6, cachedInputPerMillion: 0.075 },
  'openai:o3': { inputPerMillion: 2, outputPerMillion: 8, cachedInputPerMillion: 0.5 },
  'openai:o4-mini': { inputPerMillion: 1.1, outputPerMillion: 4.4, cachedInputPerMillion: 0.275 },
  'openai:gpt-5': { inputPerMillion: 1.25, outputPerMillion: 10, cachedInputPerMillion: 0.125 },
  'openai:gpt-5-mini': { inputPerMillion: 0.25, outputPerMillion: 2, cachedInputPerMillion: 0.025 },
  'anthropic:claude-sonnet-4-5': {
    inputPerMillion: 3,
    outputPerMillion: 15,
    cachedInputPerMillion: 0.3,
    cacheWritePerMillion: 3.75,
  },
  'anthropic:claude-opus-4-1': {
    inputPerMillion: 15,
    outputPerMillion: 75,
    cachedInputPerMillion: 1.5,
    cacheWritePerMillion: 18.75,
  },
  'anthropic:claude-haiku-4-5': {
    inputPerMillion: 1,
    outputPerMillion: 5,
    cachedInputPerMillion: 0.1,
    cacheWritePerMillion: 1.25,
  },
};

/** The price of a model: its configured one, else the default for its provider and id, else unknown. */
export function priceOf(model: { provider: string; modelId: string; price?: ModelPrice }): ModelPrice | undefined {
  return model.price ?? DEFAULT_PRICES[`${model.provider}:${model.modelId}`];
}

/** The cost of a call's tokens at `price`, in USD; cached and cache-write tokens are parts of the input count. */
export function costOf(
  price: ModelPrice,
  usage: { inputTokens: number; outputTokens: number; cachedInputTokens?: number; cacheWriteTokens?: number },
): number {
  const cached = usage.cachedInputTokens ?? 0;
  const written = usage.cacheWriteTokens ?? 0;
  const plain = Math.max(0, usage.inputTokens - cached - written);
  const dollars =
    plain * price.inputPerMillion +
    cached * (price.cachedInputPerMillion ?? price.inputPerMillion) +
    written * (price.cacheWritePerMillion ?? price.inputPerMillion) +
    usage.outputTokens * price.outputPerMillion;
  // Micro-dollar precision: enough for a single call, and sums stay exact enough to compare.
  return Math.round(dollars) / 1e6;
}
