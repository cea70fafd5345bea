import { PeerClosedError, PeerError, toWireError, type WireError, wireError } from '@oar/runner-sdk';
import { classify, encodeMessage, type LangbotRequest, type LangbotResponse, MessageReader } from './frames.js';

/** Requests of the runner handled at once; more are answered busy (as LangBot's MAX_INFLIGHT_ACTIONS). */
export const MAX_INFLIGHT = 128;
/**
 * Refusals (busy, a duplicate seq_id, a malformed request) not yet written: a plugin that keeps sending requests
 * without reading its answers would otherwise make the host queue refusals without end. Past it, a wire fault.
 */
export const MAX_QUEUED_REFUSALS = MAX_INFLIGHT;

/** What a handler of a runner → host request gets besides the data: a way to stream, and the connection's end. */
export interface LangbotRequestStream {
  /** One `continue` response; after the handler returns, the stream is closed by an `end` frame. */
  send(data: Record<string, unknown>): Promise<void>;
  readonly signal: AbortSignal;
}

/**
 * A handler of the runner's requests. Its answer is one success response with the returned data; a handler that
 * called `stream.send` is answered with the `end` frame instead. A throw is an error response (code 1, the message,
 * and the structured error under `data.error`).
 */
export type LangbotRequestHandler = (
  action: string,
  data: Record<string, unknown>,
  stream: LangbotRequestStream,
) => Promise<Record<string, unknown> | undefined>;

interface Pending {
  /** Set for a stream: each `continue` response's data. Otherwise the first response answers. */
  onData?: (data: Record<string, unknown>) => Promise<void> | void;
  resolve(data: Record<string, unknown>): void;
  reject(error: unknown): void;
  /** The stream's data handlers, one after another: the end waits for them. */
  chain: Promise<void>;
}

/**
 * One LangBot peer over a line stream (the host side of a plugin's stdio): numbered requests with their pending
 * answers and streams, the runner's requests dispatched to a handler, chunked messages both ways. Lines that are no
 * frame are the runner's log (`onLog`), not a fault; a frame that breaks the wire's bounds is (`onFault`).
 */
export class LangbotConnection {
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  private readonly handling = new Map<number, AbortController>();
  private writes: Promise<void> = Promise.resolve();
  private refusals = 0;
  private closedWith: WireError | undefined;
  private readonly reader: MessageReader;

  constructor(
    private readonly writeLine: (line: string) => Promise<void>,
    private readonly handler: LangbotRequestHandler,
    private readonly onLog: (line: string) => void,
    private readonly onFault: (error: WireError) => void,
  ) {
    this.reader = new MessageReader(
      (text) => this.message(text),
      (line) => this.onLog(line),
      (error) => this.fault(error),
    );
  }

  /** One received line (without its newline). */
  receive(line: string): void {
    if (!this.closedWith) this.reader.line(line);
  }

  /** A request answered by one response: its data (a non-zero code rejects with the runner's message). */
  call(action: string, data: Record<string, unknown>, options: { signal?: AbortSignal } = {}) {
    return this.send(action, data, undefined, options.signal);
  }

  /** A streamed request: each `continue` response's data to `onData`, in order; resolves at the `end` frame. */
  stream(
    action: string,
    data: Record<string, unknown>,
    onData: (data: Record<string, unknown>) => Promise<void> | void,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    return this.send(action, data, onData, options.signal).then(() => undefined);
  }

  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /** The connection is gone: pending requests fail with `error`, running handlers are aborted. */
  close(error: WireError = wireError('connection_closed', 'the connection closed')): void {
    if (this.closedWith) return;
    this.closedWith = error;
    for (const pending of this.pending.values()) pending.reject(new PeerClosedError(error));
    this.pending.clear();
    for (const controller of this.handling.values()) controller.abort(new PeerClosedError(error));
  }

  /** A fault of the runner's output: reported once, and the connection closes. */
  fault(error: WireError): void {
    if (this.closedWith) return;
    this.onFault(error);
    this.close(error);
  }

  private send(
    action: string,
    data: Record<string, unknown>,
    onData: Pending['onData'],
    signal: AbortSignal | undefined,
  ): Promise<Record<string, unknown>> {
    const seqId = ++this.seq;
    return new Promise((resolve, reject) => {
      if (this.closedWith) {
        reject(new PeerClosedError(this.closedWith));
        return;
      }
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      // LangBot has no cancel frame: giving up only stops listening (the run's end closes the connection).
      const onAbort = () => {
        if (this.pending.delete(seqId)) reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => signal?.removeEventListener('abort', onAbort);
      this.pending.set(seqId, {
        ...(onData ? { onData } : {}),
        chain: Promise.resolve(),
        resolve: (value) => {
          done();
          resolve(value);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      });
      this.write({ seq_id: seqId, action, data }).catch((error: unknown) => {
        if (this.pending.delete(seqId)) {
          done();
          reject(error);
        }
      });
    });
  }

  private message(text: string): void {
    const received = classify(text);
    switch (received.kind) {
      case 'log':
        this.onLog(received.line);
        return;
      case 'invalid':
        // A malformed request still gets its refusal, as LangBot's handler answers one; a malformed response has
        // nobody to answer and is dropped. Either way the runner's log says so.
        this.onLog(
          `[oar] refused ${received.reason}${received.seqId !== undefined ? ` (seq_id ${received.seqId})` : ''}`,
        );
        if (received.isRequest && received.seqId !== undefined) {
          this.refuse(received.seqId, wireError('invalid_argument', received.reason));
        }
        return;
      case 'response':
        this.response(received.response);
        return;
      case 'request':
        this.request(received.request);
        return;
    }
  }

  private response(response: LangbotResponse): void {
    const seqId = response.seq_id ?? -1;
    const pending = this.pending.get(seqId);
    if (!pending) {
      // An answer to nothing this side asked (a wrong or replayed seq_id): dropped, never routed elsewhere.
      this.onLog(`[oar] dropped a response to no pending request (seq_id ${seqId})`);
      return;
    }
    const data = response.data ?? {};
    if (response.code !== 0) {
      this.pending.delete(seqId);
      const error = (data as { error?: unknown }).error;
      pending.reject(
        new PeerError(
          error && typeof error === 'object' && typeof (error as { code?: unknown }).code === 'string'
            ? toWireError(error)
            : wireError('runner_error', response.message || `the runner answered code ${response.code}`, {
                code: response.code,
              }),
        ),
      );
      return;
    }
    if (!pending.onData) {
      // A single answer: its first response, whatever its chunk_status (LangBot's call_action).
      this.pending.delete(seqId);
      pending.resolve(data);
      return;
    }
    if (response.chunk_status === 'end') {
      this.pending.delete(seqId);
      void pending.chain.then(
        () => pending.resolve(data),
        (error: unknown) => pending.reject(error),
      );
      return;
    }
    const onData = pending.onData;
    pending.chain = pending.chain.then(() => onData(data));
    // A failing consumer ends the stream: the rest of its answers are dropped.
    pending.chain.catch((error: unknown) => {
      if (this.pending.get(seqId) === pending) {
        this.pending.delete(seqId);
        pending.reject(error);
      }
    });
  }

  private request(request: LangbotRequest): void {
    const seqId = request.seq_id;
    if (this.handling.has(seqId)) {
      this.refuse(seqId, wireError('invalid_argument', `seq_id ${seqId} is already running`));
      return;
    }
    if (this.handling.size >= MAX_INFLIGHT) {
      this.refuse(seqId, {
        ...wireError('rate_limited', `more than ${MAX_INFLIGHT} requests in flight`),
        retryable: true,
      });
      return;
    }
    const controller = new AbortController();
    this.handling.set(seqId, controller);
    let streamed = false;
    const stream: LangbotRequestStream = {
      send: async (data) => {
        if (controller.signal.aborted) return;
        streamed = true;
        await this.respond(seqId, { code: 0, message: 'success', data, chunk_status: 'continue' });
      },
      signal: controller.signal,
    };
    void (async () => {
      try {
        const data = await this.handler(request.action, request.data, stream);
        await this.respond(
          seqId,
          streamed
            ? { code: 0, message: 'success', data: {}, chunk_status: 'end' }
            : { code: 0, message: 'success', data: data ?? {}, chunk_status: 'continue' },
        );
      } catch (error) {
        await this.respond(seqId, errorResponse(toWireError(error)));
      } finally {
        this.handling.delete(seqId);
      }
    })();
  }

  /** A request refused before it ran, its answer queued within MAX_QUEUED_REFUSALS (past it: a wire fault). */
  private refuse(seqId: number, error: WireError): void {
    if (this.refusals >= MAX_QUEUED_REFUSALS) {
      this.fault(
        wireError('rate_limited', `more than ${MAX_QUEUED_REFUSALS} refused requests wait for the plugin to read them`),
      );
      return;
    }
    this.refusals++;
    void this.respond(seqId, errorResponse(error)).then(() => {
      this.refusals--;
    });
  }

  private respond(seqId: number, response: Record<string, unknown>): Promise<void> {
    return this.write({ seq_id: seqId, ...response }).catch(() => undefined);
  }

  /** One message, in order after the previous one (a chunked message's lines are never interleaved). */
  private write(message: Record<string, unknown>): Promise<void> {
    let lines: string[];
    try {
      lines = encodeMessage(message);
    } catch (error) {
      return Promise.reject(new PeerError(wireError('payload_too_large', (error as Error).message)));
    }
    const write = this.writes.then(async () => {
      if (this.closedWith) throw new PeerClosedError(this.closedWith);
      for (const line of lines) await this.writeLine(line);
    });
    this.writes = write.catch(() => undefined);
    return write;
  }
}

/**
 * An error response LangBot's SDK understands: a non-zero code and a message (raised there as ActionCallError with
 * the message), and the structured error under `data.error` for a runner that wants its code.
 */
export function errorResponse(error: WireError): Record<string, unknown> {
  return {
    code: 1,
    message: `${error.code}: ${error.message}`,
    data: { error: { code: error.code, message: error.message, retryable: error.retryable, details: error.details } },
    chunk_status: 'continue',
  };
}
