import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake OpenAI-compatible `/chat/completions` server speaking the real wire format: JSON answers, and SSE streams
 * (`stream: true`) with usage in the last chunk (`stream_options.include_usage`), optional pauses between chunks
 * and stalls, and HTTP errors with their headers. Every request is logged with its arrival time.
 */

export interface FakeUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
}

/** What one request gets. */
export type FakeReply =
  | {
      kind: 'answer';
      /** Assistant text (streamed in `pieces`). */
      text?: string;
      /** Native tool calls; `arguments` is the JSON text as the model writes it (streamed in `pieces`). */
      toolCalls?: { id?: string; name: string; arguments: string }[];
      usage?: FakeUsage;
      /** How many chunks each text and each tool call's arguments are split into (default 3). */
      pieces?: number;
      /** Pause before each content chunk of a stream. */
      chunkDelayMs?: number;
      /** Stop sending after this many content chunks and keep the connection open (a stalled stream). */
      stallAfter?: number;
    }
  | { kind: 'error'; status: number; headers?: Record<string, string>; body?: unknown };

export interface FakeRequest {
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  url: string | undefined;
  /** Milliseconds since the server started. */
  at: number;
  /** When the client closed the connection (ms since start), if it did before the reply ended. */
  closedAt?: number;
  /** When the exchange was over, either way (ms since start): with `at`, how many requests were in flight at once. */
  endedAt?: number;
}

export interface FakeOpenAI {
  baseURL: string;
  requests: FakeRequest[];
  close(): Promise<void>;
}

/** The most requests that were in flight at any one moment. */
export function mostInFlight(requests: readonly FakeRequest[]): number {
  const edges = requests.flatMap((r) => [
    { at: r.at, delta: 1 },
    { at: r.endedAt ?? Number.POSITIVE_INFINITY, delta: -1 },
  ]);
  // An exchange that ends at the very moment another starts does not overlap it: ends first.
  edges.sort((x, y) => x.at - y.at || x.delta - y.delta);
  let now = 0;
  let most = 0;
  for (const edge of edges) {
    now += edge.delta;
    most = Math.max(most, now);
  }
  return most;
}

const DEFAULT_USAGE: FakeUsage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

function split(text: string, pieces: number): string[] {
  if (text.length === 0) return [];
  const size = Math.max(1, Math.ceil(text.length / pieces));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

const base = () => ({
  id: 'chatcmpl-fake',
  object: 'chat.completion.chunk',
  created: 1_700_000_000,
  model: 'fake-model',
});

/** The SSE chunks of an answer: role first, then text pieces, then each tool call's pieces, finish, usage. */
export function streamChunks(reply: Extract<FakeReply, { kind: 'answer' }>): unknown[][] {
  const pieces = reply.pieces ?? 3;
  const content: unknown[][] = [];
  for (const piece of split(reply.text ?? '', pieces)) {
    content.push([{ ...base(), choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] }]);
  }
  (reply.toolCalls ?? []).forEach((call, index) => {
    const id = call.id ?? `call_fake_${index}`;
    split(call.arguments, pieces).forEach((piece, n) => {
      const tool =
        n === 0
          ? { index, id, type: 'function', function: { name: call.name, arguments: piece } }
          : { index, function: { arguments: piece } };
      content.push([{ ...base(), choices: [{ index: 0, delta: { tool_calls: [tool] }, finish_reason: null }] }]);
    });
  });
  return [
    [{ ...base(), choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }],
    ...content,
    [
      {
        ...base(),
        choices: [{ index: 0, delta: {}, finish_reason: reply.toolCalls?.length ? 'tool_calls' : 'stop' }],
      },
      { ...base(), choices: [], usage: reply.usage ?? DEFAULT_USAGE },
    ],
  ];
}

function completion(reply: Extract<FakeReply, { kind: 'answer' }>) {
  const toolCalls = (reply.toolCalls ?? []).map((call, index) => ({
    id: call.id ?? `call_fake_${index}`,
    type: 'function',
    function: { name: call.name, arguments: call.arguments },
  }));
  return {
    id: 'chatcmpl-fake',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'fake-model',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: reply.text ?? null,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
      },
    ],
    usage: reply.usage ?? DEFAULT_USAGE,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function writeStream(res: ServerResponse, reply: Extract<FakeReply, { kind: 'answer' }>, request: FakeRequest) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const groups = streamChunks(reply);
  let sent = 0;
  for (const [index, group] of groups.entries()) {
    const isContent = index > 0 && index < groups.length - 1;
    if (isContent) {
      if (reply.stallAfter !== undefined && sent >= reply.stallAfter) return; // keep the connection open
      if (reply.chunkDelayMs) await sleep(reply.chunkDelayMs);
      sent++;
    }
    if (request.closedAt !== undefined || res.destroyed) return;
    for (const chunk of group) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }
  res.end('data: [DONE]\n\n');
}

/**
 * The SSE events of an answer in OpenAI's Responses API format (`POST /v1/responses`, what `openai:` models call):
 * created, a message item with its text deltas, a function_call item per tool call with its argument deltas,
 * completed with the usage.
 */
export function responsesEvents(reply: Extract<FakeReply, { kind: 'answer' }>): unknown[] {
  const pieces = reply.pieces ?? 3;
  const usage = reply.usage ?? DEFAULT_USAGE;
  const events: unknown[] = [
    {
      type: 'response.created',
      response: { id: 'resp_fake', created_at: 1_700_000_000, model: 'fake-model' },
    },
  ];
  let index = 0;
  if (reply.text) {
    const item = { type: 'message', id: 'msg_fake' };
    events.push({ type: 'response.output_item.added', output_index: index, item });
    for (const delta of split(reply.text, pieces)) {
      events.push({ type: 'response.output_text.delta', item_id: 'msg_fake', delta });
    }
    events.push({ type: 'response.output_item.done', output_index: index, item });
    index++;
  }
  (reply.toolCalls ?? []).forEach((call, n) => {
    const item = { type: 'function_call', id: `fc_fake_${n}`, call_id: call.id ?? `call_fake_${n}`, name: call.name };
    events.push({ type: 'response.output_item.added', output_index: index, item: { ...item, arguments: '' } });
    for (const delta of split(call.arguments, pieces)) {
      events.push({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index: index, delta });
    }
    events.push({
      type: 'response.output_item.done',
      output_index: index,
      item: { ...item, arguments: call.arguments, status: 'completed' },
    });
    index++;
  });
  events.push({
    type: 'response.completed',
    response: { usage: { input_tokens: usage.prompt_tokens, output_tokens: usage.completion_tokens } },
  });
  return events;
}

/**
 * What `/v1/responses` is on this server: `none` (404, a Chat-Completions-only server: the default), `responses`
 * (OpenAI's Responses API), or `chat` (a server that answers it in the Chat Completions format anyway).
 */
export type ResponsesEndpoint = 'none' | 'responses' | 'chat';

/** Start the server; `replies` is called for each request (0-based) and says what it gets. */
export async function fakeOpenAI(
  replies: (index: number, body: Record<string, unknown>) => FakeReply,
  options: { responses?: ResponsesEndpoint } = {},
): Promise<FakeOpenAI> {
  const responses = options.responses ?? 'none';
  const started = Date.now();
  const requests: FakeRequest[] = [];
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as Record<string, unknown>;
      const request: FakeRequest = { body, headers: req.headers, url: req.url, at: Date.now() - started };
      requests.push(request);
      res.on('close', () => {
        request.endedAt = Date.now() - started;
        if (!res.writableFinished) request.closedAt = Date.now() - started;
      });
      const isResponses = req.url === '/v1/responses' && responses !== 'none';
      if (req.url !== '/v1/chat/completions' && !isResponses) {
        res.writeHead(404).end();
        return;
      }
      const reply = replies(requests.length - 1, body);
      if (reply.kind === 'error') {
        res
          .writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers })
          .end(JSON.stringify(reply.body ?? { error: { message: `fake error ${reply.status}` } }));
        return;
      }
      if (isResponses && responses === 'responses') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        for (const event of responsesEvents(reply)) res.write(`data: ${JSON.stringify(event)}\n\n`);
        res.end('data: [DONE]\n\n');
        return;
      }
      if (body.stream === true) {
        void writeStream(res, reply, request);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(reply)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
