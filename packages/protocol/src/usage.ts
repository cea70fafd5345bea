import { z } from 'zod';

const Count = z.number().int().min(0);

/**
 * Token usage as the provider reported it; a missing figure means "not reported", never zero. The reasoning and
 * cache counts are parts of the output and input counts, not added to them. A call's usage (`model.completed`) and
 * a session's totals (the snapshot's `telemetrySummary.usage`) share this shape.
 */
export const UsageSchema = z.looseObject({
  inputTokens: Count.optional(),
  outputTokens: Count.optional(),
  totalTokens: Count.optional(),
  reasoningTokens: Count.optional(),
  cachedInputTokens: Count.optional(),
  cacheWriteTokens: Count.optional(),
});
export type Usage = z.infer<typeof UsageSchema>;
