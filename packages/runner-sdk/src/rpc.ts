import { randomUUID } from 'node:crypto';
import { z } from 'zod';

/**
 * The runner wire: JSON-RPC-like frames, one JSON object per line (NDJSON), both ways over one byte stream pair.
 *
 *   request   {"id": "h7", "method": "RUN_AGENT", "params": {…}}
 *   stream    {"id": "h7", "kind": "continue", "data": …}   zero or more, in order
 *   end       {"id": "h7", "kind": "end", "data": …}        exactly one of end / error closes a request
 *   error     {"id": "h7", "kind": "error", "error": {"code", "message", "retryable", "details"}}
 *   cancel    {"id": "h7", "kind": "cancel"}               the requester gives up; the handler's signal aborts
 *   part      {"part": "p1", "data": "<slice>", "last": false}  a frame longer than maxFrameBytes, in slices
 *
 * Either side may send requests (the host runs a runner, the runner calls the host's API), so one `Peer` class is
 * both client and server. Bounds: a line is at most `maxFrameBytes`, a reassembled frame at most `maxMessageBytes`,
 * and at most `maxInFlight` requests run at once each way (more outgoing ones wait for a slot: backpressure; more
 * incoming ones are refused with `rate_limited`).
 */

export interface WireError {
  code: string;
  message: string;
  retryable: boolean;
  details: Record<string, unknown>;
}

export const WireErrorSchema = z.looseObject({
  code: z.string(),
  message: z.string(),
  retryable: z.boolean().default(false),
  details: z.record(z.string(), z.unknown()).default({}),
});

/** A failed request, as the requester sees it: the peer's structured error. */
export class PeerError extends Error {
  constructor(readonly error: WireError) {
    super(error.message);
    this.name = 'PeerError';
  }
  get code(): string {
    return this.error.code;
  }
}

export interface PeerLimits {
  /** The longest line either side may send or receive, in bytes (default 1 MiB). */
  maxFrameBytes: number;
  /** The largest frame reassembled from parts (default 16 MiB). */
  maxMessageBytes: number;
  /** Requests running at once in each direction (default 128, as the reference host). */
  maxInFlight: number;
}

export const DEFAULT_PEER_LIMITS: PeerLimits = {
  maxFrameBytes: 1024 * 1024,
  maxMessageBytes: 16 * 1024 * 1024,
  maxInFlight: 128,
};

/** What a request handler gets besides the params: a way to stream chunks, and the requester's cancellation. */
export interface RequestStream {
  send(data: unknown): Promise<void>;
  readonly signal: AbortSignal;
}

export type RequestHandler = (method: string, params: unknown, stream: RequestStream) => Promise<unknown>;

const FrameSchema = z.union([
  z.looseObject({ part: z.string(), data: z.string(), last: z.boolean() }),
  z.looseObject({ id: z.string(), method: z.string(), params: z.unknown().optional() }),
  z.looseObject({ id: z.string(), kind: z.enum(['continue', 'end']), data: z.unknown().optional() }),
  z.looseObject({ id: z.string(), kind: z.literal('error'), error: WireErrorSchema }),
  z.looseObject({ id: z.string(), kind: z.literal('cancel') }),
]);

interface Pending {
  onChunk?: (data: unknown) => void;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** Why a peer stopped: a protocol fault of the other side, or the connection closing. */
export class PeerClosedError extends PeerError {}

export function wireError(code: string, message: string, details: Record<string, unknown> = {}): WireError {
  return { code, message, retryable: false, details };
}

export class Peer {
  readonly limits: PeerLimits;
  private readonly pending = new Map<string, Pending>();
  private readonly handling = new Map<string, AbortController>();
  private readonly parts = new Map<string, string>();
  private writes: Promise<void> = Promise.resolve();
  private slots: number;
  private readonly waiting: (() => void)[] = [];
  private closedWith: WireError | undefined;
  private counter = 0;
  private readonly prefix: string;

  constructor(
    private readonly writeLine: (line: string) => Promise<void> | void,
    private readonly handler: RequestHandler,
    limits: Partial<PeerLimits> = {},
    /** Called once on a protocol fault of the other side (garbage, an oversized frame): the connection is unusable. */
    private readonly onFault?: (error: WireError) => void,
  ) {
    this.limits = { ...DEFAULT_PEER_LIMITS, ...limits };
    this.slots = this.limits.maxInFlight;
    this.prefix = randomUUID().slice(0, 8);
  }

  /** Give the peer one received line (without its newline). */
  receive(line: string): void {
    if (this.closedWith || line.trim() === '') return;
    if (Buffer.byteLength(line) > this.limits.maxFrameBytes) {
      this.fault(wireError('frame_too_large', `a frame of more than ${this.limits.maxFrameBytes} bytes`));
      return;
    }
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      this.fault(wireError('invalid_frame', 'a line that is not JSON', { line: line.slice(0, 200) }));
      return;
    }
    const parsed = FrameSchema.safeParse(json);
    if (!parsed.success) {
      this.fault(wireError('invalid_frame', 'a line that is not a frame', { line: line.slice(0, 200) }));
      return;
    }
    this.frame(parsed.data as Record<string, unknown>);
  }

  private frame(frame: Record<string, unknown>): void {
    if (typeof frame.part === 'string') {
      const sofar = (this.parts.get(frame.part) ?? '') + (frame.data as string);
      if (Buffer.byteLength(sofar) > this.limits.maxMessageBytes) {
        this.fault(wireError('frame_too_large', `a message of more than ${this.limits.maxMessageBytes} bytes`));
        return;
      }
      if (!frame.last) {
        this.parts.set(frame.part, sofar);
        return;
      }
      this.parts.delete(frame.part);
      // A reassembled frame is checked like a line, except for the line limit it was split to get around.
      let inner: unknown;
      try {
        inner = JSON.parse(sofar);
      } catch {
        this.fault(wireError('invalid_frame', 'a reassembled frame that is not JSON'));
        return;
      }
      const parsed = FrameSchema.safeParse(inner);
      if (!parsed.success || 'part' in (parsed.data as object)) {
        this.fault(wireError('invalid_frame', 'a reassembled frame that is not a frame'));
        return;
      }
      this.frame(parsed.data as Record<string, unknown>);
      return;
    }
    const id = frame.id as string;
    if (typeof frame.method === 'string') {
      this.handle(id, frame.method, frame.params);
      return;
    }
    if (frame.kind === 'cancel') {
      this.handling.get(id)?.abort(new PeerError(wireError('cancelled', 'the requester cancelled')));
      return;
    }
    const pending = this.pending.get(id);
    if (!pending) return; // an answer to a request given up on (cancelled, timed out): dropped
    if (frame.kind === 'continue') {
      pending.onChunk?.(frame.data);
      return;
    }
    this.pending.delete(id);
    if (frame.kind === 'end') pending.resolve(frame.data);
    else pending.reject(new PeerError(frame.error as WireError));
  }

  private handle(id: string, method: string, params: unknown): void {
    if (this.handling.has(id)) {
      const error = wireError('invalid_argument', `request id ${id} is already running`);
      this.send({ id, kind: 'error', error }).catch(() => undefined);
      return;
    }
    if (this.handling.size >= this.limits.maxInFlight) {
      const error = { ...wireError('rate_limited', `more than ${this.limits.maxInFlight} requests in flight`) };
      this.send({ id, kind: 'error', error: { ...error, retryable: true } }).catch(() => undefined);
      return;
    }
    const controller = new AbortController();
    this.handling.set(id, controller);
    const stream: RequestStream = {
      send: (data) => (controller.signal.aborted ? Promise.resolve() : this.send({ id, kind: 'continue', data })),
      signal: controller.signal,
    };
    void (async () => {
      // A peer that closed meanwhile cannot be answered: the answer is dropped, never an unhandled rejection.
      try {
        const result = await this.handler(method, params, stream);
        await this.send({ id, kind: 'end', data: result ?? null }).catch(() => undefined);
      } catch (error) {
        await this.send({ id, kind: 'error', error: toWireError(error) }).catch(() => undefined);
      } finally {
        this.handling.delete(id);
      }
    })();
  }

  /**
   * Send a request and wait for its end; `onChunk` gets each streamed chunk in order. An abort of `signal` sends
   * `cancel` and rejects at once (a late answer is dropped).
   */
  async request(
    method: string,
    params: unknown,
    options: { onChunk?: (data: unknown) => void; signal?: AbortSignal } = {},
  ): Promise<unknown> {
    await this.slot(options.signal);
    const id = `${this.prefix}-${++this.counter}`;
    try {
      return await new Promise<unknown>((resolve, reject) => {
        if (this.closedWith) {
          reject(new PeerClosedError(this.closedWith));
          return;
        }
        const onAbort = () => {
          if (!this.pending.delete(id)) return;
          void this.send({ id, kind: 'cancel' }).catch(() => undefined);
          reject(options.signal?.reason ?? new PeerError(wireError('cancelled', 'cancelled')));
        };
        if (options.signal?.aborted) {
          reject(options.signal.reason);
          return;
        }
        options.signal?.addEventListener('abort', onAbort, { once: true });
        const done = () => options.signal?.removeEventListener('abort', onAbort);
        this.pending.set(id, {
          ...(options.onChunk ? { onChunk: options.onChunk } : {}),
          resolve: (value) => {
            done();
            resolve(value);
          },
          reject: (error) => {
            done();
            reject(error);
          },
        });
        this.send({ id, method, params }).catch((error: unknown) => {
          if (this.pending.delete(id)) {
            done();
            reject(error);
          }
        });
      });
    } finally {
      this.release();
    }
  }

  /** The connection is gone: every pending request fails with `error`, running handlers are aborted. */
  close(error: WireError = wireError('connection_closed', 'the connection closed')): void {
    if (this.closedWith) return;
    this.closedWith = error;
    for (const [, pending] of this.pending) pending.reject(new PeerClosedError(error));
    this.pending.clear();
    for (const [, controller] of this.handling) controller.abort(new PeerClosedError(error));
    for (const wake of this.waiting.splice(0)) wake();
  }

  /** Resolves once no incoming request is being handled (or after `timeoutMs`): answer them before closing. */
  async settled(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.handling.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /** A protocol fault of the other side (garbage, an oversized line): report it once and close. */
  fault(error: WireError): void {
    if (this.closedWith) return;
    this.onFault?.(error);
    this.close(error);
  }

  /** One frame on the wire, in order, after the previous write drained; split into parts when over the limit. */
  private send(frame: Record<string, unknown>): Promise<void> {
    const line = JSON.stringify(frame);
    const lines: string[] = [];
    if (Buffer.byteLength(line) <= this.limits.maxFrameBytes) lines.push(line);
    else {
      if (Buffer.byteLength(line) > this.limits.maxMessageBytes) {
        return Promise.reject(
          new PeerError(wireError('payload_too_large', `a message of more than ${this.limits.maxMessageBytes} bytes`)),
        );
      }
      // Slices of characters, small enough that each part's JSON (escapes included) stays under the frame limit.
      const part = `p-${this.prefix}-${++this.counter}`;
      const size = Math.max(1, Math.floor(this.limits.maxFrameBytes / 8));
      for (let at = 0; at < line.length; at += size) {
        const data = line.slice(at, at + size);
        lines.push(JSON.stringify({ part, data, last: at + size >= line.length }));
      }
    }
    const write = this.writes.then(async () => {
      if (this.closedWith) throw new PeerClosedError(this.closedWith);
      for (const one of lines) await this.writeLine(one);
    });
    this.writes = write.catch(() => undefined);
    return write;
  }

  private async slot(signal?: AbortSignal): Promise<void> {
    while (this.slots === 0 && !this.closedWith) {
      await new Promise<void>((resolve) => {
        this.waiting.push(resolve);
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
      if (signal?.aborted) throw signal.reason;
    }
    this.slots--;
  }

  private release(): void {
    this.slots++;
    this.waiting.shift()?.();
  }
}

/** Any thrown value as a wire error: a PeerError keeps its own; a structured `{code, message}` error keeps its code. */
export function toWireError(error: unknown): WireError {
  if (error instanceof PeerError) return error.error;
  if (error && typeof error === 'object' && 'code' in error && typeof (error as { code: unknown }).code === 'string') {
    const e = error as { code: string; message?: string; retryable?: boolean; details?: Record<string, unknown> };
    return {
      code: e.code,
      message: e.message ?? e.code,
      retryable: e.retryable === true,
      details: e.details && typeof e.details === 'object' ? e.details : {},
    };
  }
  return wireError('runtime_error', error instanceof Error ? error.message : String(error));
}

/**
 * Lines out of a byte stream: a line longer than `maxBytes` (no newline within it) is a fault, so a peer that never
 * sends a newline cannot make the other side buffer without bound.
 */
export class LineSplitter {
  private buffer = '';
  constructor(
    private readonly maxBytes: number,
    private readonly onLine: (line: string) => void,
    private readonly onOverflow: () => void,
  ) {}

  push(chunk: string): void {
    this.buffer += chunk;
    let index = this.buffer.indexOf('\n');
    while (index >= 0) {
      const line = this.buffer.slice(0, index);
      this.buffer = this.buffer.slice(index + 1);
      this.onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
      index = this.buffer.indexOf('\n');
    }
    if (this.buffer.length > this.maxBytes) {
      this.buffer = '';
      this.onOverflow();
    }
  }
}
