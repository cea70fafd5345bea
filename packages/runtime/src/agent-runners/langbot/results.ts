import { z } from 'zod';

/**
 * One LangBot AgentRunResult (as LangBot's SDK emits it) as a result of OAR's wire. The types are the same; the
 * payloads differ where LangBot's SDK differs from the protocol text:
 *   - `message.delta` / `message.completed` / `run.completed`: a message's content may be a list of content parts
 *     or null (LangBot's Message) → its text parts joined (null → "");
 *   - `run.failed` carries `{error, code, retryable}` (the spec's `message` is read too) → `{code, message, retryable}`;
 *   - `finish_reason` and `usage` are kept as they are.
 * Anything else passes through untouched: the host checks every result itself (run id, type, data, capability),
 * so a malformed LangBot result is refused there exactly as on OAR's wire.
 */

const ResultSchema = z.looseObject({
  run_id: z.unknown(),
  type: z.unknown(),
  data: z.record(z.string(), z.unknown()).nullable().optional(),
});

const ContentPart = z.looseObject({ type: z.string().optional(), text: z.string().nullable().optional() });
const Content = z.union([z.string(), z.array(z.unknown()), z.null()]);

/** A LangBot message content as text: a string as is, a list's text parts joined, null as "". */
export function contentText(content: unknown): string | undefined {
  const parsed = Content.safeParse(content);
  if (!parsed.success) return undefined;
  if (parsed.data === null) return '';
  if (typeof parsed.data === 'string') return parsed.data;
  return parsed.data
    .map((part) => ContentPart.safeParse(part))
    .filter((part) => part.success && (part.data.type === undefined || part.data.type === 'text'))
    .map((part) => (part.success ? (part.data.text ?? '') : ''))
    .join('');
}

/** A message object with its content as text (undefined when it is not a message LangBot would accept). */
function messageWithText(message: unknown): Record<string, unknown> | undefined {
  if (!message || typeof message !== 'object' || Array.isArray(message)) return undefined;
  const m = message as Record<string, unknown>;
  // LangBot's MessageChunk/Message may omit content (None): that is an empty text, not a malformed result.
  const text = contentText(m.content === undefined ? null : m.content);
  if (text === undefined) return undefined;
  return { ...m, content: text };
}

/**
 * LangBot's `message.delta` chunks come in two conventions: pieces to append (LangBot's QA runner: "QA_",
 * "RUNNER_STREAM_OK"), and the whole text so far (LangBot's own pipeline replaces the shown message with each chunk,
 * its `all_content` when set, and plugins such as n8n-agent send their accumulated text, the last one `is_final`).
 * OAR's deltas are pieces, so each chunk is read against the run's text so far: `all_content`, or a content that
 * extends the text so far, is the whole text (the delta is what it adds); anything else is a piece.
 */
export class DeltaText {
  private text = '';

  /** The OAR delta for one LangBot chunk's text (its `content`) and `all_content`; "" when it adds nothing. */
  next(content: string, allContent: unknown): string {
    const whole =
      typeof allContent === 'string'
        ? allContent
        : this.text !== '' && content.startsWith(this.text)
          ? content
          : undefined;
    if (whole === undefined) {
      this.text += content;
      return content;
    }
    const added = whole.startsWith(this.text) ? whole.slice(this.text.length) : whole;
    this.text = whole;
    return added;
  }
}

/**
 * One LangBot result as OAR's, for one run (`deltas`: that run's text so far). A `message.delta` that adds nothing
 * (a final chunk repeating the whole text) is dropped: undefined.
 */
export function oarRunResult(raw: unknown, deltas: DeltaText): unknown {
  const mapped = oarResult(raw) as { type?: unknown; data?: { chunk?: { content?: unknown; all_content?: unknown } } };
  if (mapped?.type !== 'message.delta' || typeof mapped.data?.chunk?.content !== 'string') return mapped;
  const chunk = mapped.data.chunk;
  const added = deltas.next(chunk.content as string, chunk.all_content);
  if (added === '') return undefined;
  return { ...mapped, data: { ...mapped.data, chunk: { ...chunk, content: added } } };
}

export function oarResult(raw: unknown): unknown {
  const parsed = ResultSchema.safeParse(raw);
  if (!parsed.success || !parsed.data.data) return raw;
  const result = parsed.data;
  const data = result.data as Record<string, unknown>;
  switch (result.type) {
    case 'message.delta': {
      const chunk = messageWithText(data.chunk);
      return chunk ? { ...result, data: { ...data, chunk } } : raw;
    }
    case 'message.completed': {
      const message = messageWithText(data.message);
      return message ? { ...result, data: { ...data, message } } : raw;
    }
    case 'run.completed': {
      if (data.message === undefined || data.message === null) {
        const { message: _none, ...rest } = data;
        return { ...result, data: rest };
      }
      const message = messageWithText(data.message);
      return message ? { ...result, data: { ...data, message } } : raw;
    }
    case 'run.failed': {
      const text = (v: unknown) => (typeof v === 'string' && v.trim() !== '' ? v : undefined);
      return {
        ...result,
        data: {
          ...data,
          code: text(data.code) ?? 'runner.error',
          message: text(data.message) ?? text(data.error) ?? 'the runner failed',
          retryable: data.retryable === true,
        },
      };
    }
    default:
      return raw;
  }
}
