import { type WireError, wireError } from '@oar/runner-sdk';
import { z } from 'zod';

/**
 * LangBot's plugin wire, one JSON object per line over stdio (LangBot plugin SDK, runtime/io):
 *
 *   request   {"seq_id": 3, "action": "run_agent", "data": {…}}                  (an optional "context" envelope)
 *   response  {"seq_id": 3, "code": 0, "message": "success", "data": {…}, "chunk_status": "continue"}
 *   stream    zero or more `continue` responses, then one response with "chunk_status": "end" (its data empty)
 *   error     {"seq_id": 3, "code": 1, "message": "…", "data": {}}                 any code other than 0
 *
 * Each side numbers its own requests, so a request and a response are told apart by `code`, not by `seq_id`. A
 * message longer than CHUNK_BYTES (as UTF-8) is sent as `{"type": "chunk_start", "total_size": n}`, then
 * `{"type": "chunk_data", "data": "<slice>", "offset": bytes so far}` lines, then `{"type": "chunk_end"}`.
 */

/** A message longer than this (UTF-8 bytes) is sent in chunks, as LangBot's stdio connection does. */
export const CHUNK_BYTES = 16 * 1024;
/** The largest message either side reassembles (LangBot's MAX_MESSAGE_BYTES). */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/**
 * The most lines one chunked message may take: a peer could otherwise make the other side hold millions of tiny
 * slices long before the byte bound is reached (LangBot's MAX_MESSAGE_FRAGMENTS).
 */
export const MAX_MESSAGE_FRAGMENTS = 4096;

const Data = z.record(z.string(), z.unknown());

export const LangbotRequestSchema = z.looseObject({
  seq_id: z.number().int(),
  action: z.string().min(1).max(128),
  data: Data,
});
export type LangbotRequest = z.infer<typeof LangbotRequestSchema>;

export const LangbotResponseSchema = z.looseObject({
  seq_id: z.number().int().nullable().optional(),
  code: z.number().int(),
  message: z.string().default(''),
  data: Data.nullable().default({}),
  chunk_status: z.enum(['continue', 'end']).nullable().optional(),
});
export type LangbotResponse = z.infer<typeof LangbotResponseSchema>;

const ChunkStartSchema = z.looseObject({ type: z.literal('chunk_start'), total_size: z.number().int() });
const ChunkDataSchema = z.looseObject({ type: z.literal('chunk_data'), data: z.string(), offset: z.number().int() });
const ChunkEndSchema = z.looseObject({ type: z.literal('chunk_end') });

/** The wire fault a broken chunk sequence is: the names OAR's own wire (runner-sdk rpc.ts) gives the same faults. */
type ChunkFault = 'frame_too_large' | 'invalid_frame';

/** What one received message is: a request, a response, a line that is no frame at all, or a malformed frame. */
export type Received =
  | { kind: 'request'; request: LangbotRequest }
  | { kind: 'response'; response: LangbotResponse }
  /** Not a frame (a print, a log line): the runner's log on this wire, never a fault. */
  | { kind: 'log'; line: string }
  /** Frame-shaped (a `code` or an `action`) but not valid: refused, with the `seq_id` when there was one. */
  | { kind: 'invalid'; reason: string; seqId?: number; isRequest: boolean };

/** Classify one complete message (a line, or a reassembled chunk sequence). */
export function classify(text: string): Received {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { kind: 'log', line: text };
  }
  if (!json || typeof json !== 'object' || Array.isArray(json)) return { kind: 'log', line: text };
  const object = json as Record<string, unknown>;
  const seqId = typeof object.seq_id === 'number' && Number.isInteger(object.seq_id) ? object.seq_id : undefined;
  // As LangBot's handler routes: anything with a `code` is a response, else anything with an `action` a request.
  if ('code' in object) {
    const parsed = LangbotResponseSchema.safeParse(object);
    if (!parsed.success) return { kind: 'invalid', reason: 'a malformed response', isRequest: false, ...seq(seqId) };
    return { kind: 'response', response: parsed.data };
  }
  if ('action' in object) {
    const parsed = LangbotRequestSchema.safeParse(object);
    if (!parsed.success) return { kind: 'invalid', reason: 'a malformed request', isRequest: true, ...seq(seqId) };
    return { kind: 'request', request: parsed.data };
  }
  return { kind: 'log', line: text };
}

function seq(seqId: number | undefined): { seqId?: number } {
  return seqId === undefined ? {} : { seqId };
}

/** Split text into slices of at most `maxBytes` UTF-8 bytes each, never inside a code point. */
export function splitUtf8(text: string, maxBytes: number): string[] {
  const slices: string[] = [];
  let current = '';
  let size = 0;
  for (const char of text) {
    const bytes = Buffer.byteLength(char);
    if (current && size + bytes > maxBytes) {
      slices.push(current);
      current = '';
      size = 0;
    }
    current += char;
    size += bytes;
  }
  if (current) slices.push(current);
  return slices;
}

/**
 * The lines (without newlines) that carry one message: the message itself, or its chunk sequence when it is longer
 * than CHUNK_BYTES. A message over MAX_MESSAGE_BYTES is refused: the other side would refuse it anyway.
 */
export function encodeMessage(message: Record<string, unknown>): string[] {
  const text = JSON.stringify(message);
  const size = Buffer.byteLength(text);
  if (size <= CHUNK_BYTES) return [text];
  if (size > MAX_MESSAGE_BYTES) throw new Error(`a message of ${size} bytes; the limit is ${MAX_MESSAGE_BYTES}`);
  const lines = [JSON.stringify({ type: 'chunk_start', total_size: size })];
  let offset = 0;
  for (const slice of splitUtf8(text, CHUNK_BYTES)) {
    lines.push(JSON.stringify({ type: 'chunk_data', data: slice, offset }));
    offset += Buffer.byteLength(slice);
  }
  lines.push(JSON.stringify({ type: 'chunk_end' }));
  return lines;
}

/**
 * Incoming lines to whole messages: a chunk sequence is reassembled with LangBot's bounds (declared size at most
 * MAX_MESSAGE_BYTES, offsets in order, never more bytes than declared, at most MAX_MESSAGE_FRAGMENTS lines); a
 * sequence that breaks them is a fault of the wire (`onFault`), since nothing after it can be framed with certainty.
 */
export class MessageReader {
  private chunk: { total: number; received: number; parts: string[]; fragments: number } | undefined;

  constructor(
    private readonly onMessage: (text: string) => void,
    private readonly onLog: (line: string) => void,
    private readonly onFault: (error: WireError) => void,
  ) {}

  /** One line, without its newline. */
  line(raw: string): void {
    const line = raw.trim();
    if (line === '') return;
    const marker = chunkMarker(line);
    if (this.chunk) {
      this.chunk.fragments++;
      if (this.chunk.fragments > MAX_MESSAGE_FRAGMENTS) {
        this.broken(
          'frame_too_large',
          'too_many_fragments',
          `a chunked message of more than ${MAX_MESSAGE_FRAGMENTS} lines`,
        );
        return;
      }
      if (!marker) {
        // LangBot skips what is not a chunk line inside a sequence; here it is still the runner's log.
        this.onLog(line);
        return;
      }
      const data = ChunkDataSchema.safeParse(marker);
      if (data.success) {
        if (data.data.offset !== this.chunk.received) {
          this.broken(
            'invalid_frame',
            'offset_mismatch',
            `a chunk at offset ${data.data.offset}, expected ${this.chunk.received}`,
          );
          return;
        }
        this.chunk.received += Buffer.byteLength(data.data.data);
        if (this.chunk.received > this.chunk.total) {
          this.broken(
            'frame_too_large',
            'past_declared_size',
            `a chunked message past its declared ${this.chunk.total} bytes`,
          );
          return;
        }
        this.chunk.parts.push(data.data.data);
        return;
      }
      if (ChunkEndSchema.safeParse(marker).success) {
        const { total, received, parts } = this.chunk;
        this.chunk = undefined;
        if (received !== total) {
          this.broken('invalid_frame', 'incomplete', `a chunked message of ${received} bytes, declared ${total}`);
          return;
        }
        this.onMessage(parts.join(''));
        return;
      }
      this.broken(
        'invalid_frame',
        'unexpected_chunk',
        'a chunk_start inside a chunked message, or a malformed chunk line',
      );
      return;
    }
    if (marker) {
      const start = ChunkStartSchema.safeParse(marker);
      if (!start.success) {
        this.broken('invalid_frame', 'unexpected_chunk', 'a chunk line outside a chunked message');
        return;
      }
      const total = start.data.total_size;
      if (total < 0) {
        this.broken('invalid_frame', 'negative_size', `a chunked message declared ${total} bytes`);
        return;
      }
      if (total > MAX_MESSAGE_BYTES) {
        this.broken(
          'frame_too_large',
          'declared_too_large',
          `a chunked message of ${total} bytes; the limit is ${MAX_MESSAGE_BYTES}`,
        );
        return;
      }
      this.chunk = { total, received: 0, parts: [], fragments: 0 };
      return;
    }
    this.onMessage(line);
  }

  /**
   * A broken chunk sequence, named as OAR's own wire names a broken frame (one concept, one name): `frame_too_large`
   * or `invalid_frame`, the check that failed in `details.chunk`. The host records it as the run's
   * `runner_protocol_error` with `details.reason` the code; it never reaches a user as a code of its own.
   */
  private broken(reason: ChunkFault, chunk: string, message: string): void {
    this.chunk = undefined;
    this.onFault(wireError(reason, message, { chunk }));
  }
}

/** The object of a chunk line (`type` chunk_start / chunk_data / chunk_end), else undefined. */
function chunkMarker(line: string): Record<string, unknown> | undefined {
  // Cheap test first: most lines are frames or log text.
  if (!line.startsWith('{') || !line.includes('"chunk_')) return undefined;
  try {
    const json = JSON.parse(line) as unknown;
    if (json && typeof json === 'object' && !Array.isArray(json)) {
      const type = (json as { type?: unknown }).type;
      if (type === 'chunk_start' || type === 'chunk_data' || type === 'chunk_end')
        return json as Record<string, unknown>;
    }
  } catch {
    // Not JSON: a log line.
  }
  return undefined;
}
