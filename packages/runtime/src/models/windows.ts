/**
 * Model context windows and output limits (docs/models.md "Capabilities"): how many tokens one request may hold
 * (prompt and output together) and how many the model may write. A configured model may carry its own
 * (`models.<name>.contextWindow`, `models.<name>.maxOutputTokens`); otherwise the dated defaults below apply to the
 * hosted models they name. Unknown stays unknown: a model without a known window is never excluded for its window.
 */

/** When the default windows were taken from the providers' model pages. */
export const DEFAULT_WINDOWS_AS_OF = '2025-10-01';

export interface ModelWindow {
  /** Tokens of one request, prompt and output together. */
  contextWindow: number;
  /** The most tokens the model writes in one answer. */
  maxOutputTokens?: number;
}

/** Context windows by `provider:modelId`, as of DEFAULT_WINDOWS_AS_OF. */
export const DEFAULT_WINDOWS: Readonly<Record<string, ModelWindow>> = {
  'openai:gpt-4.1': { contextWindow: 1_047_576, maxOutputTokens: 32_768 },
  'openai:gpt-4.1-mini': { contextWindow: 1_047_576, maxOutputTokens: 32_768 },
  'openai:gpt-4.1-nano': { contextWindow: 1_047_576, maxOutputTokens: 32_768 },
  'openai:gpt-4o': { contextWindow: 128_000, maxOutputTokens: 16_384 },
  'openai:gpt-4o-mini': { contextWindow: 128_000, maxOutputTokens: 16_384 },
  'openai:o3': { contextWindow: 200_000, maxOutputTokens: 100_000 },
  'openai:o4-mini': { contextWindow: 200_000, maxOutputTokens: 100_000 },
  'openai:gpt-5': { contextWindow: 400_000, maxOutputTokens: 128_000 },
  'openai:gpt-5-mini': { contextWindow: 400_000, maxOutputTokens: 128_000 },
  'anthropic:claude-sonnet-4-5': { contextWindow: 200_000, maxOutputTokens: 64_000 },
  'anthropic:claude-opus-4-1': { contextWindow: 200_000, maxOutputTokens: 32_000 },
  'anthropic:claude-haiku-4-5': { contextWindow: 200_000, maxOutputTokens: 64_000 },
};

/**
 * The output reserve of a request when nothing says how much the model may write: room for a declaration with a
 * few calls. A model's own `maxOutputTokens` (configured, or from the table) replaces it when smaller.
 */
export const DEFAULT_OUTPUT_RESERVE = 4_096;

/** A model's context window: its configured one, else the default for its provider and id, else unknown. */
export function contextWindowOf(model: {
  provider: string;
  modelId: string;
  contextWindow?: number;
}): number | undefined {
  return model.contextWindow ?? DEFAULT_WINDOWS[`${model.provider}:${model.modelId}`]?.contextWindow;
}

/** The tokens a request keeps free for the answer: the model's output limit, capped by DEFAULT_OUTPUT_RESERVE. */
export function outputReserveOf(model: { provider: string; modelId: string; maxOutputTokens?: number }): number {
  const limit = model.maxOutputTokens ?? DEFAULT_WINDOWS[`${model.provider}:${model.modelId}`]?.maxOutputTokens;
  return limit === undefined ? DEFAULT_OUTPUT_RESERVE : Math.min(limit, DEFAULT_OUTPUT_RESERVE);
}
