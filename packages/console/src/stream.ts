import { getKey } from './api';

/**
 * A resumable Server-Sent Events subscription over `fetch` (an `EventSource` only dispatches event names it was
 * told about in advance, and the session stream names each message by its event type). Each message's `id:` is
 * the last durable sequence; when the stream ends or breaks (server restart, network loss, `server.closing`) we
 * reconnect with `Last-Event-ID` set to it, after a growing delay, so nothing is missed and nothing repeated. The
 * state goes to `reconnecting` the moment the connection is lost, so the screen says so instead of showing stale
 * data as live.
 */

export type StreamState = 'connecting' | 'live' | 'reconnecting';

export interface StreamStatus {
  state: StreamState;
  attempts: number;
  cursor?: number;
  error?: string;
}

export interface StreamHandlers {
  onMessage(type: string, data: unknown, id: string | undefined): void;
  onState(status: StreamStatus): void;
  /** The route is missing or the key is not allowed (404, 401, 403): no retry, the caller falls back. */
  onUnavailable?(status: number): void;
}

export interface Stream {
  close(): void;
}

export function openStream(path: string, handlers: StreamHandlers, cursor?: number): Stream {
  let last = cursor;
  let attempts = 0;
  let closed = false;
  let controller: AbortController | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const status = (state: StreamState, error?: string) =>
    handlers.onState({ state, attempts, ...(last !== undefined ? { cursor: last } : {}), ...(error ? { error } : {}) });

  const retry = (error: string) => {
    if (closed) return;
    attempts++;
    status('reconnecting', error);
    timer = setTimeout(open, Math.min(250 * 2 ** Math.min(attempts - 1, 5), 5_000));
  };

  const open = async () => {
    if (closed) return;
    controller = new AbortController();
    status(attempts === 0 ? 'connecting' : 'reconnecting');
    try {
      const response = await fetch(path, {
        headers: {
          accept: 'text/event-stream',
          authorization: `Bearer ${getKey() ?? ''}`,
          ...(last !== undefined ? { 'last-event-id': String(last) } : {}),
        },
        signal: controller.signal,
      });
      if ([401, 403, 404].includes(response.status) && handlers.onUnavailable) {
        closed = true;
        handlers.onUnavailable(response.status);
        return;
      }
      if (!response.ok || !response.body) {
        retry(`the stream answered ${response.status}`);
        return;
      }
      attempts = 0;
      status('live');
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, '\n');
        let end = buffer.indexOf('\n\n');
        while (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          dispatch(block);
          end = buffer.indexOf('\n\n');
        }
      }
      retry('the stream ended');
    } catch (error) {
      if (closed) return;
      retry(`the connection was lost (${(error as Error).message})`);
    }
  };

  const dispatch = (block: string) => {
    let type = 'message';
    let id: string | undefined;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line === '' || line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') type = value;
      else if (field === 'id') id = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length === 0) return;
    if (id && /^\d+$/.test(id)) last = Number(id);
    let parsed: unknown;
    try {
      parsed = JSON.parse(data.join('\n'));
    } catch {
      parsed = data.join('\n');
    }
    if (type === 'server.closing') status('reconnecting', 'the server is restarting');
    handlers.onMessage(type, parsed, id);
  };

  void open();
  return {
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      controller?.abort();
    },
  };
}
