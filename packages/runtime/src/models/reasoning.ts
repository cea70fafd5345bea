import type { EventDraft } from '../log/draft.js';

/**
 * The durable record of a model call's reasoning (`reasoning.summary`). Its pieces are live-only
 * (`reasoning.delta`, worker/thread-deltas.ts), like the output's: the log grows once per call that reasoned, never
 * per token. The text is what the provider sent as reasoning (a summary, or the thinking itself) — the standard's
 * "reasoning or planning stream besides the final text" — kept for review, never replayed to a model or executed.
 */

/** How many characters of a call's reasoning its `reasoning.summary` keeps (as much as a failed call's partial output). */
export const REASONING_SUMMARY_LIMIT = 16_384;

/** How far back from the limit a cut looks for whitespace, so a secret is not cut in two (then unrecognisable). */
const CUT_WINDOW = 1024;

/** `text` cut to `limit` characters, at whitespace near the limit when there is some. */
function capped(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const head = text.slice(0, limit);
  for (let i = head.length - 1; i >= Math.max(0, head.length - CUT_WINDOW); i--) {
    if (/\s/.test(head.charAt(i))) return head.slice(0, i);
  }
  return head;
}

/**
 * The `reasoning.summary` of a call that reasoned (none for one that did not): the call's ids (the envelope's
 * thread and turn; the log's tracing adds the call's span), its model, and its reasoning, capped. The log redacts it
 * like every fact before it is stored.
 */
export function reasoningSummary(
  ids: { threadId: string; turnId: string },
  model: { modelId: string; provider: string },
  reasoning: string | undefined,
  fields: Record<string, unknown> = {},
): EventDraft[] {
  if (!reasoning) return [];
  const summary = capped(reasoning, REASONING_SUMMARY_LIMIT);
  return [
    {
      type: 'reasoning.summary',
      ...ids,
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        ...fields,
        summary,
        chars: reasoning.length,
        ...(summary.length < reasoning.length ? { truncated: true } : {}),
      },
    },
  ];
}
