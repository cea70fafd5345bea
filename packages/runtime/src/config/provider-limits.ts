import { z } from 'zod';

/** Provider limits as configured (docs/models.md "Provider limits"); kept by models/provider-limits.ts. */

export const ProviderLimitSchema = z.strictObject({
  /** Calls running at once. */
  maxConcurrency: z.number().int().min(1).max(1_000).optional(),
  /** Calls started in any 60 seconds. */
  requestsPerMinute: z.number().int().min(1).max(1_000_000).optional(),
});
export type ProviderLimit = z.infer<typeof ProviderLimitSchema>;

/**
 * Limits by key: a provider as events name it (`openai`, `anthropic`, `openai-compatible`, …) or one model of it,
 * `provider:modelId` (`openai:gpt-4.1`). A call counts against both its provider's and its model's limits.
 */
export const ProviderLimitsSchema = z.record(z.string().min(1), ProviderLimitSchema);
export type ProviderLimits = z.infer<typeof ProviderLimitsSchema>;
