import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchOutput, log, makeWorkspace, percentile, type ServeLoadResult, tempDir } from './common.js';
import { turnScript } from './concurrency.js';

/**
 * `oar serve` under load, on loopback: SESSIONS sessions run turns back to back (a scripted model with 20 ms per
 * call; a turn is three `read` steps and an answer) while CLIENTS SSE clients follow them (CLIENTS / SESSIONS per
 * session), for DURATION_MS. Half-way the server process is killed (SIGKILL) and started again on the same store
 * and port: every client reconnects with its `Last-Event-ID`, every driver re-sends its turn (same client turn
 * id: idempotent). At the end each client's sequence is checked against the log: gaps and duplicates are counted
 * (the benchmark fails if there is any). Delivery latency is from an event's commit timestamp to its arrival at a
 * client, outside the restart window. `SERVE_PROFILE=1` writes the server processes' CPU profiles to
 * /tmp/serve-prof (the killed one cannot write its own).
 */
const SESSIONS = 50;
const CLIENTS = 200;
const DURATION_MS = 30_000;
const KILL_AT_MS = 15_000;
const READS_PER_TURN = 3;
const TURNS = 400;
/** Latency samples are not taken from the kill until this long after the restart (catch-up is not delivery). */
const RESTART_WINDOW_MS = 3_000;

const CHILD = fileURLToPath(new URL('./serve-child.ts', import.meta.url));

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export interface Sse {
  event: string;
  id?: string;
  data: string;
}

/** Calls `onMessage` for each SSE message of `response` until the stream ends or `signal` aborts. */
export async function readStream(response: Response, signal: AbortSignal, onMessage: (m: Sse) => void): Promise<void> {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const onAbort = () => void reader.cancel().catch(() => undefined);
  signal.addEventListener('abort', onAbort);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const message: Sse = { event: 'message', data: '' };
        let comment = true;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          comment = false;
          const colon = line.indexOf(':');
          const field = line.slice(0, colon);
          const value = line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') message.event = value;
          else if (field === 'id') message.id = value;
          else if (field === 'data') message.data += value;
        }
        if (!comment) onMessage(message);
      }
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Stops the SSE clients, at the end or on a failure. Every connection has an AbortController of its own: fetch keeps
 * its listener on the signal it was given until the request is garbage-collected, and readStream adds one per
 * stream, so one signal shared by all clients collected a listener per client and per reconnection (thousands,
 * with a MaxListenersExceededWarning for each past undici's limit).
 */
class ClientStop {
  private readonly open = new Set<AbortController>();
  private stopped = false;

  get aborted(): boolean {
    return this.stopped;
  }

  /** A signal for one connection, aborted by `abort()` (already aborted if that happened); `close` when it ends. */
  connection(): { signal: AbortSignal; close: () => void } {
    const controller = new AbortController();
    if (this.stopped) controller.abort();
    else this.open.add(controller);
    return { signal: controller.signal, close: () => this.open.delete(controller) };
  }

  abort(): void {
    this.stopped = true;
    for (const controller of this.open) controller.abort();
    this.open.clear();
  }
}

class ServerProcess {
  private child: ChildProcess | undefined;
  constructor(private readonly args: string[]) {}

  async start(): Promise<void> {
    const child = spawn(
      process.execPath,
      [
        ...(process.env.SERVE_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=/tmp/serve-prof'] : []),
        '--import',
        'tsx',
        CHILD,
        ...this.args,
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('ready')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`the server exited (${code}) before it was ready`)));
    });
  }

  kill(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    // A child ended by a signal has no exit code, only a signal code (and sends no second 'exit').
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.kill(signal);
    });
  }
}

export async function run(): Promise<BenchOutput> {
  const dir = tempDir('serve-load');
  const workspace = makeWorkspace('serve-load-ws');
  const scriptFile = join(dir, 'script.json');
  writeFileSync(scriptFile, JSON.stringify(turnScript(TURNS, READS_PER_TURN)));
  const statsFile = join(dir, 'stats.ndjson');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const key = `oar_${randomBytes(30).toString('base64url')}`;
  const server = new ServerProcess([join(dir, 'oar.db'), workspace, String(port), key, scriptFile, statsFile]);
  await server.start();
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

  /** A request that rides out the restart: retried until the server answers (any status but a network error). */
  async function call(method: string, path: string, body?: unknown): Promise<Response> {
    for (;;) {
      try {
        return await fetch(`${url}${path}`, { method, headers: auth, ...(body ? { body: JSON.stringify(body) } : {}) });
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }

  const sessions: string[] = [];
  for (let i = 0; i < SESSIONS; i++) {
    const response = await call('POST', '/v1/sessions', { title: `load ${i}` });
    sessions.push(((await response.json()) as { sessionId: string }).sessionId);
  }

  const started = performance.now();
  let killedAt = Number.POSITIVE_INFINITY;
  let restartedAt = Number.POSITIVE_INFINITY;
  const latencies: number[] = [];
  const turnWaiters = new Map<string, () => void>();
  let turnsCompleted = 0;
  const stopClients = new ClientStop();
  let reconnects = 0;

  interface Client {
    sessionId: string;
    received: number[];
    lastId?: string;
    done: Promise<void>;
  }
  const clients: Client[] = Array.from({ length: CLIENTS }, (_, i) => {
    const client: Client = { sessionId: sessions[i % SESSIONS] as string, received: [], done: Promise.resolve() };
    const first = i < SESSIONS; // one client per session resolves its session's turns
    client.done = (async () => {
      while (!stopClients.aborted) {
        const connection = stopClients.connection();
        try {
          const response = await fetch(`${url}/v1/sessions/${client.sessionId}/events`, {
            headers: {
              accept: 'text/event-stream',
              authorization: `Bearer ${key}`,
              ...(client.lastId ? { 'last-event-id': client.lastId } : {}),
            },
            signal: connection.signal,
          });
          await readStream(response, connection.signal, (m) => {
            if (m.id === undefined) return;
            client.lastId = m.id;
            if (m.event === 'snapshot' || m.event === 'server.closing') return;
            const event = JSON.parse(m.data) as { sequence: number; timestamp: string; type: string; turnId?: string };
            client.received.push(event.sequence);
            const now = performance.now();
            if (now < killedAt || now > restartedAt + RESTART_WINDOW_MS) {
              latencies.push(Date.now() - Date.parse(event.timestamp));
            }
            if (first && (event.type === 'turn.completed' || event.type === 'turn.failed') && event.turnId) {
              if (event.type === 'turn.completed') turnsCompleted++;
              turnWaiters.get(event.turnId)?.();
            }
          });
        } catch {
          // The server went away (killed) or the client was stopped: reconnect below unless stopped.
        } finally {
          connection.close();
        }
        if (!stopClients.aborted) {
          reconnects++;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    })();
    return client;
  });

  // Drivers: each session runs turns back to back until the time is up.
  const endAt = started + DURATION_MS;
  const drivers = sessions.map(async (sessionId, s) => {
    for (let t = 0; performance.now() < endAt; t++) {
      const turnId = `load-${s}-${t}`;
      const finished = new Promise<void>((resolve) => turnWaiters.set(turnId, resolve));
      await call('POST', `/v1/sessions/${sessionId}/turns`, { input: 'Read three notes, then answer.', turnId });
      await finished;
      turnWaiters.delete(turnId);
    }
  });

  let wall: number;
  const last = new Map<string, number>();
  try {
    await new Promise((resolve) => setTimeout(resolve, KILL_AT_MS));
    killedAt = performance.now();
    log('serve-load: SIGKILL to the server, restarting it');
    await server.kill('SIGKILL');
    await server.start();
    restartedAt = performance.now();
    await Promise.all(drivers);
    wall = (performance.now() - started) / 1000;

    // Every client must end with the whole log of its session.
    for (const sessionId of sessions) {
      const page = (await (await call('GET', `/v1/sessions/${sessionId}/events?limit=1`)).json()) as {
        lastSequence: number;
      };
      last.set(sessionId, page.lastSequence);
    }
    const deadline = performance.now() + 20_000;
    while (
      clients.some((c) => (c.received.at(-1) ?? 0) < (last.get(c.sessionId) ?? 0)) &&
      performance.now() < deadline
    ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    // Ended or failed: the clients stop reconnecting and the server goes either way.
    stopClients.abort();
    await Promise.all(clients.map((c) => c.done));
    await server.kill('SIGTERM');
  }

  let gaps = 0;
  let duplicates = 0;
  let events = 0;
  for (const client of clients) {
    const seen = new Set<number>();
    for (const sequence of client.received) {
      if (seen.has(sequence)) duplicates++;
      seen.add(sequence);
    }
    events += client.received.length;
    // A client starts after the snapshot it got first (sequence 2 for a session that had not run yet).
    const from = Math.min(...client.received);
    for (let sequence = from; sequence <= (last.get(client.sessionId) ?? 0); sequence++) {
      if (!seen.has(sequence)) gaps++;
    }
  }
  const stats = readFileSync(statsFile, 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { rssMb: number; lagP99Ms: number; lagMaxMs: number });
  const result: ServeLoadResult = {
    sessions: SESSIONS,
    clients: CLIENTS,
    seconds: wall,
    turnsPerSecond: turnsCompleted / wall,
    events,
    gaps,
    duplicates,
    reconnects,
    latencyP50Ms: percentile(latencies, 50),
    latencyP99Ms: percentile(latencies, 99),
    rssMb: Math.max(...stats.map((s) => s.rssMb)),
    lagP99Ms: Math.max(0, ...stats.map((s) => s.lagP99Ms)),
  };
  log(`serve-load: ${JSON.stringify(result)}`);
  if (gaps > 0 || duplicates > 0) throw new Error(`serve-load: ${gaps} gap(s) and ${duplicates} duplicate(s)`);
  return { serveLoad: [result] };
}
