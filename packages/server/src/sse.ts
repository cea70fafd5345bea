import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { errorBody } from './errors.js';
import type { Inflight } from './inflight.js';

/**
 * The plumbing every Server-Sent Events stream of the API shares: heartbeats, a deadline per write (a client that
 * takes nothing is cut off), shutdown (a final `server.closing` event with the stream's cursor), the count of open
 * streams a graceful shutdown waits for, and a last `error` event when the stream fails. What a stream sends is
 * its own (`run`).
 */

export interface StreamOptions {
  /** Milliseconds between heartbeat comments (default 15 s): proxies keep the connection, clients see it alive. */
  heartbeatMs?: number;
  /** A write that waits longer than this for the client ends the stream (default 30 s). */
  slowClientMs?: number;
  /** Ends every open stream (server shutdown): each gets a final `server.closing` event with its cursor. */
  closing?: AbortSignal;
  /** Counts open streams (a graceful shutdown waits for their last event). */
  inflight?: Inflight;
}

/** Sends one message; `id` is the resume cursor a client's `Last-Event-ID` will carry. */
export type Send = (event: string, data: unknown, id?: number | string) => Promise<void>;

/** A client that did not take a write within the deadline: the stream ends without a last message. */
export class SlowClient extends Error {}

/** `write` with a deadline: a client that does not take the data in time is cut off (SlowClient). */
export async function writeWithin(ms: number, write: () => Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      write(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new SlowClient()), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A stream whose messages `run` sends until `signal` aborts (the client left, or the server closes). `run` returns
 * its cursor, for the final `server.closing` message.
 */
export function openStream(
  c: Context,
  options: StreamOptions,
  run: (send: Send, signal: AbortSignal, cursor: (value: unknown) => void) => Promise<void>,
): Response {
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const slowClientMs = options.slowClientMs ?? 30_000;
  return streamSSE(c, async (stream) => {
    options.inflight?.enter();
    const stop = new AbortController();
    stream.onAbort(() => stop.abort());
    const onClosing = () => stop.abort();
    options.closing?.addEventListener('abort', onClosing);
    let cursor: unknown;
    const send: Send = (event, data, id) =>
      writeWithin(slowClientMs, () =>
        stream.writeSSE({ event, data: JSON.stringify(data), ...(id !== undefined ? { id: String(id) } : {}) }),
      );
    const heartbeat = setInterval(() => {
      // A comment line: ignored by EventSource, keeps proxies and the connection alive.
      void stream.write(': heartbeat\n\n').catch(() => stop.abort());
    }, heartbeatMs);
    try {
      await run(send, stop.signal, (value) => {
        cursor = value;
      });
      if (options.closing?.aborted) await send('server.closing', { cursor, retryMs: 1000 }).catch(() => undefined);
    } catch (error) {
      // The stream's last message: what failed (as any API error) and where to resume.
      if (!(error instanceof SlowClient))
        await send('error', { ...errorBody(error).body, cursor }).catch(() => undefined);
    } finally {
      clearInterval(heartbeat);
      options.closing?.removeEventListener('abort', onClosing);
      stop.abort();
      options.inflight?.exit();
    }
  });
}

/** Resolves when `signal` aborts. */
export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
