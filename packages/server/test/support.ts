import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { type ModelScript, Runtime, type RuntimeOptions, Store, type ToolRegistry, Workspaces } from '@oar/runtime';
import { createScriptedModel } from '@oar/runtime/testing';
import { createLogger, type RunningServer, type ServeOptions, startServer } from '../src/index.js';

/**
 * A real server on a real socket (127.0.0.1, a free port) over a runtime on a real SQLite file, with a scripted
 * model: the only fake is the model. `logs` holds every JSON log line the server wrote.
 */
export interface TestServer {
  server: RunningServer;
  runtime: Runtime;
  store: Store;
  workspace: string;
  dir: string;
  url: string;
  adminKey: string;
  logs: string[];
  /** fetch with the admin key (or `key`) as bearer, a JSON body when `body` is given. */
  call(
    method: string,
    path: string,
    options?: { key?: string | null; body?: unknown; headers?: Record<string, string> },
  ): Promise<Response>;
  json<T = Record<string, unknown>>(
    method: string,
    path: string,
    options?: { key?: string | null; body?: unknown },
  ): Promise<{ status: number; body: T }>;
  keyOf(scope: 'admin' | 'operator' | 'viewer', workspaceId?: string): Promise<string>;
  close(): Promise<void>;
}

export const READ_SCRIPT: ModelScript = {
  description: 'server tests: read README.md, then answer',
  steps: [
    {
      protocol: {
        kind: 'act',
        calls: [{ id: 'read_readme', type: 'tool', name: 'read', args: { filePath: 'README.md' } }],
      },
    },
    { protocol: { kind: 'answer', message: 'The README says hello.' } },
  ],
} as ModelScript;

export async function testServer(
  options: {
    script?: ModelScript;
    runtime?: Partial<RuntimeOptions>;
    serve?: Partial<ServeOptions>;
    files?: Record<string, string>;
    /** A PostgreSQL URL and a fresh schema to use instead of a SQLite file (the schema is dropped by `close`). */
    postgres?: { url: string; schema: string; drop: (schema: string) => Promise<void> };
    /** Runs on the SQLite file before the server's runtime opens it; what it returns runs at `close`. */
    before?: (at: { dbFile: string; workspace: string }) => Promise<() => Promise<void>>;
  } = {},
): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'oar-server-'));
  const workspace = join(dir, 'ws');
  mkdirSync(workspace);
  for (const [name, content] of Object.entries(
    options.files ?? { 'README.md': '# Sample\n\nHello from the sample workspace.\n' },
  )) {
    writeFileSync(join(workspace, name), content);
  }
  const after = await options.before?.({ dbFile: join(dir, 'oar.db'), workspace });
  const store = options.postgres
    ? await Store.open(options.postgres.url, { schema: options.postgres.schema })
    : await Store.open(join(dir, 'oar.db'));
  const model = createScriptedModel(options.script ?? READ_SCRIPT);
  const runtime = await Runtime.create({
    store,
    workspaceRoot: workspace,
    model: () => ({ model, provider: 'oar-script', modelId: model.modelId, supportsForcedToolChoice: true }),
    ...options.runtime,
  });
  const logs: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      logs.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const server = await startServer({
    runtime,
    port: 0,
    logger: createLogger({ destination, level: 'debug' }),
    ...options.serve,
  });
  const adminKey = server.createdAdminKey ?? options.serve?.adminKey ?? '';
  const call: TestServer['call'] = (method, path, o = {}) => {
    const key = o.key === undefined ? adminKey : o.key;
    return fetch(`${server.url}${path}`, {
      method,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...o.headers,
      },
      ...(o.body !== undefined ? { body: typeof o.body === 'string' ? o.body : JSON.stringify(o.body) } : {}),
    });
  };
  const workspaces = new Workspaces(store);
  return {
    server,
    runtime,
    store,
    workspace,
    dir,
    url: server.url,
    adminKey,
    logs,
    call,
    async json(method, path, o) {
      const response = await call(method, path, o);
      return { status: response.status, body: (await response.json()) as never };
    },
    async keyOf(scope, workspaceId = 'default') {
      return (await workspaces.createKey({ workspaceId, scope, name: `test ${scope}` })).key;
    },
    async close() {
      await server.close();
      await store.close();
      await after?.();
      if (options.postgres) await options.postgres.drop(options.postgres.schema);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Reads an SSE response until `until` says stop (or the stream ends); returns the parsed messages. */
export async function readSse(
  response: Response,
  until: (messages: SseMessage[]) => boolean,
  timeoutMs = 10_000,
): Promise<SseMessage[]> {
  const messages: SseMessage[] = [];
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const deadline = setTimeout(() => void reader.cancel(), timeoutMs);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end = buffer.indexOf('\n\n');
      while (end >= 0) {
        const message = sseMessage(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (message) messages.push(message);
        end = buffer.indexOf('\n\n');
      }
      if (until(messages)) break;
    }
  } finally {
    clearTimeout(deadline);
    await reader.cancel().catch(() => undefined);
  }
  return messages;
}

export interface SseMessage {
  event: string;
  id?: string;
  data: string;
}

/** One SSE message from the lines of one block (up to a blank line); undefined for a comment-only block. */
export function sseMessage(block: string): SseMessage | undefined {
  const message: SseMessage = { event: 'message', data: '' };
  const data: string[] = [];
  let comment = true;
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    comment = false;
    const [field, ...rest] = line.split(':');
    const value = rest.join(':').replace(/^ /, '');
    if (field === 'event') message.event = value;
    else if (field === 'id') message.id = value;
    else if (field === 'data') data.push(value);
  }
  if (comment) return undefined;
  message.data = data.join('\n');
  return message;
}

/** Polls `check` until it holds. */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Lost actions, for real: a first runtime on the store file starts each session's first tool call, which never
 * returns, and is abandoned mid-call (as a kill leaves it). Give the server's runtime the same tools and a short lease
 * (`worker: {leaseTtlMs: 300, pollMs: 50}`): it takes the threads over and records the calls lost.
 */
export function crashMidCall(crash: {
  sessionIds: string[];
  script: ModelScript;
  tools: ToolRegistry;
}): (at: { dbFile: string; workspace: string }) => Promise<() => Promise<void>> {
  return async ({ dbFile, workspace }) => {
    const store = await Store.open(dbFile);
    const model = createScriptedModel(crash.script);
    const crashed = await Runtime.create({
      store,
      workspaceRoot: workspace,
      model: () => ({ model, provider: 'oar-script', modelId: model.modelId, supportsForcedToolChoice: true }),
      tools: crash.tools,
      permissions: { mode: 'bypass' },
      worker: { leaseTtlMs: 300, pollMs: 50 },
    });
    for (const sessionId of crash.sessionIds) {
      await crashed.createSession({ sessionId });
      await crashed.submitTurn({ sessionId, input: 'go' });
    }
    for (const sessionId of crash.sessionIds) {
      await until(async () => (await crashed.log.read(sessionId)).some((e) => e.type === 'tool.started'));
    }
    crashed.worker?.abandon();
    // Never closed (its drivers are stuck in the tool, as in a crash): only its connection is released, at the end.
    return () => store.close();
  };
}
