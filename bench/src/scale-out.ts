import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildRuntime, DEFAULT_LEASE_TTL_MS, loadConfig, type Runtime } from '@oar/runtime';
import pg from 'pg';
import {
  type BenchOutput,
  log,
  POSTGRES_URL,
  percentile,
  type ScaleOutResult,
  type ScaleOutTakeover,
  type ScaleOutThroughput,
  tempDir,
} from './common.js';
import { readStream } from './serve-load.js';

/**
 * Scale-out on PostgreSQL with real processes (issue 14): the built `oar worker` binary, one process per worker,
 * on a fresh schema of the local PostgreSQL (dropped afterwards).
 *
 * - Throughput: 1, 2 and 4 workers (`--concurrency CONCURRENCY` each), on an I/O-bound workload (a scripted model
 *   that waits 50 ms per call, a tool that waits 200 ms) and on a zero-latency one. A turn is two steps with one
 *   tool call each, then the answer. Per row the bench creates enough sessions to keep every worker's threads busy,
 *   submits one turn to each (from its own control plane: a runtime without a worker), and counts the turns that
 *   complete between the end of the submissions and the moment fewer turns are left than the workers have threads:
 *   the steady state, with ramp-up and tail left out. Over that window: the whole machine's CPU (busy share, ms
 *   per turn) and the worker processes' own (ms per turn, from /proc). Beside each rate, in the notes: the machine's
 *   1-minute load average at the window's start and end (on a shared machine a rate means little without it).
 * - Takeover: a worker driving a long turn is killed with SIGKILL (its process is gone: a worker of the same
 *   machine takes the lease over at its next poll), or stopped with SIGSTOP (the process is still there: the lease
 *   has to run out), while another worker runs; measured from the signal to the first event the other worker
 *   commits in that session. Leases last LEASE_MS there. A third path: SIGKILL, then a worker started only after
 *   the kill (a restart), which takes a lease of a dead process of its own machine over as it starts. A failure of
 *   this phase (a wait that times out, an error) is a note in the result, not the end of the benchmark: the
 *   throughput figures measured before it still count.
 * - Delivery: an API node (`oar serve --no-worker`) and two workers; SSE clients on the API node follow sessions
 *   whose turns (submitted over HTTP) the workers run; latency from an event's timestamp (taken inside the append's
 *   transaction) to its arrival at the client. Every client's sequence is checked for gaps and duplicates.
 *
 * `SCALE_OUT_QUICK=1` runs it with small counts (a check that it works, not figures); `SCALE_OUT_PHASES=takeover`
 * (any of throughput, takeover, delivery) runs only some phases.
 */

const QUICK = process.env.SCALE_OUT_QUICK === '1';
/** The phases to run (default all): throughput, takeover, delivery. */
const PHASES = new Set(
  (process.env.SCALE_OUT_PHASES ?? 'throughput,takeover,delivery').split(',').map((s) => s.trim()),
);
const WORKER_COUNTS = [1, 2, 4];
/** Threads each worker drives at once (`oar worker --concurrency`). */
const CONCURRENCY = Number(process.env.SCALE_OUT_CONCURRENCY ?? 4);
const WORKLOADS = [
  // Turns per worker thread: enough for a steady-state window of several turns per thread after the submissions.
  { name: 'I/O-bound', script: 'io.json', modelMs: 50, toolMs: 200, turnsPerThread: QUICK ? 3 : 15 },
  { name: 'zero latency', script: 'zero.json', modelMs: 0, toolMs: 0, turnsPerThread: QUICK ? 3 : 20 },
];
/** Tool calls per turn (one per step), then the answer. */
const TOOL_STEPS = 2;
/** The lease of the takeover phase's workers (`worker.leaseTtlMs`): short, so expiry is seen in a moment. */
const LEASE_MS = Number(process.env.SCALE_OUT_LEASE_MS ?? 2000);
const TAKEOVER_SAMPLES = QUICK ? 1 : 3;
const DELIVERY = { sessions: QUICK ? 4 : 24, turns: QUICK ? 2 : 5, workers: 2 };

const BIN = fileURLToPath(new URL('../../packages/cli/bin/oar.js', import.meta.url));
const TOOLS = fileURLToPath(new URL('../fixtures/latency-tools.mjs', import.meta.url));
const INPUT = 'Wait twice, then answer.';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Poll until `check` holds (a condition that never comes is an error naming what was awaited). */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 60_000, every = 20): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check()); await sleep(every)) {
    if (Date.now() > deadline) throw new Error(`scale-out: gave up after ${ms / 1000} s waiting for ${what}`);
  }
}

/** A model script of `turns` turns, each TOOL_STEPS steps of one `wait` call, then an answer. */
function latencyScript(turns: number, modelMs: number, toolMs: number, toolSteps = TOOL_STEPS) {
  const steps: unknown[] = [];
  for (let t = 0; t < turns; t++) {
    for (let s = 0; s < toolSteps; s++) {
      steps.push({
        delayMs: modelMs,
        protocol: { kind: 'act', calls: [{ id: `w${s}`, type: 'tool', name: 'wait', args: { delayMs: toolMs } }] },
      });
    }
    steps.push({ delayMs: modelMs, protocol: { kind: 'answer', message: `turn ${t + 1} done` } });
  }
  return { description: `bench scale-out: ${turns} turn(s) of ${toolSteps} ${toolMs} ms tool call(s)`, steps };
}

// ----- processes -------------------------------------------------------------------------------------------------

class OarProcess {
  readonly child: ChildProcess;
  out = '';
  err = '';
  exited = false;
  readonly exit: Promise<number | null>;

  constructor(
    cwd: string,
    args: string[],
    env: NodeJS.ProcessEnv = {},
    /** The config file it was started with (undefined: oar.config.json). */
    readonly config?: string,
  ) {
    this.child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (chunk: Buffer) => {
      this.out += chunk.toString();
    });
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.err += chunk.toString();
    });
    this.exit = new Promise((resolve) =>
      this.child.on('close', (code) => {
        this.exited = true;
        all.delete(this);
        resolve(code);
      }),
    );
    all.add(this);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  describe(): string {
    return `pid ${this.pid}\nstdout:\n${this.out}\nstderr:\n${this.err}`;
  }

  signal(signal: NodeJS.Signals): void {
    if (!this.exited) this.child.kill(signal);
  }

  /** SIGTERM (a worker drains), then wait for the exit; SIGKILL if it takes longer than `ms`. */
  async stop(ms = 30_000): Promise<void> {
    this.signal('SIGCONT');
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), ms);
    await this.exit;
    clearTimeout(timer);
  }
}

/** Every process this benchmark started, killed on the way out whatever happens. */
const all = new Set<OarProcess>();
process.on('exit', () => {
  for (const proc of all) {
    proc.signal('SIGCONT');
    proc.signal('SIGKILL');
  }
});

/** `oar worker`, once it has printed its banner (it is claiming from then on). */
async function startWorker(cwd: string, id: string, config?: string): Promise<OarProcess> {
  const proc = new OarProcess(
    cwd,
    [
      'worker',
      '--id',
      id,
      '--concurrency',
      String(CONCURRENCY),
      '--drain-seconds',
      '10',
      ...(config ? ['--config', config] : []),
    ],
    {},
    config,
  );
  await until(() => proc.err.includes('OAR worker') || proc.exited, `worker ${id} to start`, 60_000);
  if (proc.exited) throw new Error(`scale-out: worker ${id} exited at start\n${proc.describe()}`);
  return proc;
}

// ----- the store -------------------------------------------------------------------------------------------------

interface Project {
  cwd: string;
  store: string;
  schema: string;
}

function project(): Project {
  const cwd = tempDir('scale-out');
  const schema = `oar_bench_scale_${randomBytes(4).toString('hex')}`;
  const url = new URL(POSTGRES_URL);
  url.searchParams.set('schema', schema);
  const store = url.toString();
  const config = (extra: Record<string, unknown> = {}) => ({
    store,
    model: 'script:io.json',
    tools: { builtin: [], modules: [TOOLS] },
    permissions: { mode: 'bypass' },
    ...extra,
  });
  writeFileSync(join(cwd, 'oar.config.json'), JSON.stringify(config(), null, 2));
  writeFileSync(join(cwd, 'takeover.config.json'), JSON.stringify(config({ worker: { leaseTtlMs: LEASE_MS } })));
  for (const w of WORKLOADS) writeFileSync(join(cwd, w.script), JSON.stringify(latencyScript(1, w.modelMs, w.toolMs)));
  // Takeover: one long turn per session (40 steps of 300 ms; interrupted once the sample is taken).
  writeFileSync(join(cwd, 'long.json'), JSON.stringify(latencyScript(1, 50, 300, 40)));
  writeFileSync(join(cwd, 'delivery.json'), JSON.stringify(latencyScript(DELIVERY.turns, 50, 200)));
  return { cwd, store, schema };
}

/** A control plane on the store (no worker): creates sessions bound to `script` and submits their turns. */
async function controlPlane(p: Project, script: string): Promise<Runtime> {
  const { config, baseDir } = await loadConfig(undefined, p.cwd);
  const { runtime } = await buildRuntime(config, baseDir, {
    cwd: p.cwd,
    env: process.env,
    worker: false,
    resumeOnStart: false,
    model: `script:${script}`,
  });
  return runtime;
}

/** Run `fn` over `items`, `parallel` at a time. */
async function pool<T>(items: readonly T[], parallel: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

/** Turn endings committed at or after `since` (ISO), with their commit timestamps. */
async function endings(runtime: Runtime, since: string): Promise<{ type: string; at: number; body: string }[]> {
  const rows = await runtime.store.db
    .selectFrom('oar_events')
    .select(['type', 'timestamp', 'body'])
    .where('type', 'in', ['turn.completed', 'turn.failed'])
    .where('timestamp', '>=', since)
    .execute();
  return rows.map((r) => ({ type: r.type, at: Date.parse(r.timestamp), body: r.body }));
}

/** Busy and total CPU time of the machine so far (all cores, ms). */
function cpuTimes(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const { times } of cpus()) {
    const sum = times.user + times.nice + times.sys + times.irq + times.idle;
    total += sum;
    busy += sum - times.idle;
  }
  return { busy, total };
}

// ----- throughput ------------------------------------------------------------------------------------------------

/**
 * CPU time the processes have used so far (ms), from /proc (Linux; clock ticks of 10 ms, USER_HZ = 100), NaN
 * where it cannot be read. Unlike the machine's figure it leaves out whatever else runs on the machine.
 */
function processCpuMs(pids: number[]): number {
  let ms = 0;
  for (const pid of pids) {
    try {
      // Fields after the command name (which may hold spaces, in parentheses): utime and stime are the 12th and 13th.
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      ms += (Number(fields[11]) + Number(fields[12])) * 10;
    } catch {
      return Number.NaN;
    }
  }
  return ms;
}

/** A throughput row's rate beside the machine's load average at the start and end of its window. */
function loadNote(row: ScaleOutThroughput, from: number, to: number): string {
  const rate = `${row.workload}, ${row.workers} worker(s): ${Math.round(row.turnsPerMinute)} turns/min`;
  return `scale-out: ${rate} at a load average (1 min) of ${from.toFixed(2)} at the window's start, ${to.toFixed(2)} at its end`;
}

async function throughput(
  p: Project,
  workerProcesses: OarProcess[],
  workload: (typeof WORKLOADS)[number],
): Promise<{ row: ScaleOutThroughput; note: string }> {
  const workers = workerProcesses.length;
  const pids = workerProcesses.map((w) => w.pid);
  const threads = workers * CONCURRENCY;
  const turns = threads * workload.turnsPerThread;
  const runtime = await controlPlane(p, workload.script);
  try {
    const since = new Date().toISOString();
    const sessions: string[] = [];
    await pool(
      Array.from({ length: turns }, (_, i) => i),
      8,
      async (i) => {
        sessions.push((await runtime.createSession({ title: `${workload.name} ${workers}w ${i}` })).sessionId);
      },
    );
    // CPU samples every 250 ms: the window's busy share (and load average) is read from the two samples closest to
    // its ends.
    const sample = () => ({ at: Date.now(), ...cpuTimes(), workersMs: processCpuMs(pids), load: loadavg()[0] ?? 0 });
    const samples = [sample()];
    const sampler = setInterval(() => samples.push(sample()), 250);
    await pool(sessions, 8, async (sessionId) => {
      await runtime.submitTurn({ sessionId, input: INPUT });
    });
    const submitted = Date.now();
    let ended: Awaited<ReturnType<typeof endings>> = [];
    await until(
      async () => {
        ended = await endings(runtime, since);
        return ended.length >= turns;
      },
      `${turns} ${workload.name} turns on ${workers} worker(s)`,
      300_000,
      250,
    );
    clearInterval(sampler);
    samples.push(sample());
    const failed = ended.filter((e) => e.type !== 'turn.completed');
    if (failed.length > 0) throw new Error(`scale-out: ${failed.length} turn(s) failed, e.g. ${failed[0]?.body}`);
    // The steady state: from the end of the submissions until fewer turns are left than there are threads.
    const times = ended.map((e) => e.at).sort((a, b) => a - b);
    const windowEnd = times[turns - threads - 1] ?? submitted;
    const inWindow = times.filter((t) => t > submitted && t <= windowEnd).length;
    const windowMs = windowEnd - submitted;
    const nearest = (at: number) =>
      samples.reduce((best, s) => (Math.abs(s.at - at) < Math.abs(best.at - at) ? s : best));
    const [from, to] = [nearest(submitted), nearest(windowEnd)];
    const row: ScaleOutThroughput = {
      workload: workload.name,
      modelMs: workload.modelMs,
      toolMs: workload.toolMs,
      workers,
      concurrency: CONCURRENCY,
      turns,
      windowTurns: inWindow,
      windowSeconds: windowMs / 1000,
      turnsPerMinute: windowMs > 0 ? (inWindow / windowMs) * 60_000 : Number.NaN,
      cpuBusyPercent: to.total > from.total ? ((to.busy - from.busy) / (to.total - from.total)) * 100 : Number.NaN,
      cpuMsPerTurn: inWindow > 0 ? (to.busy - from.busy) / inWindow : Number.NaN,
      workerCpuMsPerTurn: inWindow > 0 ? (to.workersMs - from.workersMs) / inWindow : Number.NaN,
    };
    const note = loadNote(row, from.load, to.load);
    log(`scale-out: ${JSON.stringify(row)}\n  ${note}`);
    return { row, note };
  } finally {
    await runtime.close();
    await runtime.store.close();
  }
}

// ----- takeover ----------------------------------------------------------------------------------------------------

type TakeoverPath = ScaleOutTakeover['path'];

/**
 * One worker drives a long turn; it is killed (or stopped) right after a tool call started, while it waits for the
 * tool (so it is not in the middle of an append). Returns ms from the signal to the first event another worker
 * commits in the session, and ms the lease still had at the signal. The turn is interrupted afterwards, so nothing
 * of it is left for the next sample's workers.
 */
async function takeoverSample(
  p: Project,
  runtime: Runtime,
  current: OarProcess,
  path: TakeoverPath,
  n: number,
): Promise<{ ms: number; leaseLeftMs: number; next: OarProcess }> {
  const { sessionId } = await runtime.createSession({ title: `takeover ${path} ${n}` });
  await runtime.submitTurn({ sessionId, input: 'A long turn.' });
  try {
    return await measureTakeover(p, runtime, sessionId, current, path, n);
  } catch (error) {
    // The long turn of a failed sample is interrupted (as far as it can be): the next phase's workers must not
    // find it and run it.
    await runtime.interruptTurn({ sessionId, reason: 'the sample failed', waitMs: 5_000 }).catch(() => undefined);
    throw error;
  }
}

async function measureTakeover(
  p: Project,
  runtime: Runtime,
  sessionId: string,
  current: OarProcess,
  path: TakeoverPath,
  n: number,
): Promise<{ ms: number; leaseLeftMs: number; next: OarProcess }> {
  const events = async () =>
    runtime.store.db
      .selectFrom('oar_events')
      .select(['sequence', 'type', 'timestamp'])
      .where('session_id', '=', sessionId)
      .orderBy('sequence')
      .execute();
  const started = async () => (await events()).filter((e) => e.type === 'tool.started').length;
  const ended = async () => (await events()).some((e) => e.type === 'turn.completed' || e.type === 'turn.failed');
  await until(async () => (await started()) >= 1, `the victim worker to run the turn\n${current.describe()}`);
  // The other worker runs before the signal, except on the restart path where it starts after it.
  const restart = path === 'SIGKILL, worker started after';
  let next = restart ? undefined : await startWorker(p.cwd, `w${n}`, current.config);
  const before = await started();
  await until(async () => (await started()) > before, 'the next tool call of the victim worker');
  if (await ended()) throw new Error('scale-out: the long turn ended before the signal (a slow machine?)');
  await sleep(30);
  const signalled = Date.now();
  current.signal(path === 'SIGSTOP' ? 'SIGSTOP' : 'SIGKILL');
  const lease = await runtime.store.db
    .selectFrom('oar_thread_leases')
    .select(['expires_at'])
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  next ??= await startWorker(p.cwd, `w${n}`, current.config);
  let first: number | undefined;
  await until(
    async () => {
      const after = (await events()).find((e) => Date.parse(e.timestamp) >= signalled);
      first = after ? Date.parse(after.timestamp) : undefined;
      return first !== undefined;
    },
    `another worker to continue after ${path}`,
    60_000,
    10,
  );
  await runtime.interruptTurn({ sessionId, reason: 'the sample is over' });
  await until(ended, 'the taken-over turn to end');
  if (path === 'SIGSTOP') {
    // Woken, it finds its lease gone (fencing: it appends nothing); it is not needed any more.
    current.signal('SIGCONT');
    current.signal('SIGKILL');
  }
  await current.exit;
  return { ms: (first as number) - signalled, leaseLeftMs: Number(lease?.expires_at ?? 0) - signalled, next };
}

/** Adds a row to `rows` per path as it completes (a failure later leaves the rows of the paths before it). */
async function takeover(p: Project, rows: ScaleOutTakeover[]): Promise<void> {
  const before = new Set(all);
  const runtime = await controlPlane(p, 'long.json');
  const paths: TakeoverPath[] = ['SIGKILL', 'SIGSTOP', 'SIGKILL, worker started after'];
  let n = 0;
  try {
    let current = await startWorker(p.cwd, `w${n++}`, 'takeover.config.json');
    for (const path of paths) {
      const leaseTtlMs = path === 'SIGKILL, worker started after' ? DEFAULT_LEASE_TTL_MS : LEASE_MS;
      const row: ScaleOutTakeover = { path, leaseTtlMs, ms: [], leaseLeftMs: [] };
      // A worker started after a SIGKILL takes the dead process's lease over at once: shown with the default
      // 30 s lease, which expiry could not explain.
      const config = path === 'SIGKILL, worker started after' ? undefined : 'takeover.config.json';
      if (current.config !== config) {
        await current.stop();
        current = await startWorker(p.cwd, `w${n++}`, config);
      }
      for (let i = 0; i < TAKEOVER_SAMPLES; i++) {
        const sample = await takeoverSample(p, runtime, current, path, n++);
        row.ms.push(sample.ms);
        row.leaseLeftMs.push(sample.leaseLeftMs);
        current = sample.next;
      }
      log(`scale-out: takeover ${JSON.stringify(row)}`);
      rows.push(row);
    }
  } finally {
    // Every worker of the phase goes, also one a failed sample left running (or stopped): the next phase counts
    // its own workers.
    await Promise.all([...all].filter((proc) => !before.has(proc)).map((proc) => proc.stop()));
    await runtime.close();
    await runtime.store.close();
  }
}

/**
 * The takeover phase, its failure (a wait that timed out, an error) a note rather than the benchmark's end: the
 * throughput figures measured before it, and the takeover rows of the paths that completed, are still reported.
 */
async function takeoverOrNote(p: Project, rows: ScaleOutTakeover[]): Promise<string | undefined> {
  const started = Date.now();
  try {
    await takeover(p, rows);
    return undefined;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    log(`scale-out: the takeover phase failed (the other phases' figures stand): ${reason}`);
    // The first line only (a reason may go on with a worker's whole output, logged above), without the prefix.
    const seconds = Math.round((Date.now() - started) / 1000);
    return `takeover: did not complete within ${seconds} s: ${reason.split('\n')[0]?.replace(/^scale-out: /, '')}`;
  }
}

// ----- delivery ----------------------------------------------------------------------------------------------------

async function delivery(p: Project): Promise<ScaleOutResult['delivery']> {
  const key = `oar_${randomBytes(30).toString('base64url')}`;
  const api = new OarProcess(p.cwd, ['serve', '--no-worker', '--port', '0', '--model', 'script:delivery.json'], {
    OAR_ADMIN_KEY: key,
  });
  const workers = await Promise.all(
    Array.from({ length: DELIVERY.workers }, (_, i) => startWorker(p.cwd, `delivery${i}`)),
  );
  try {
    await until(() => /serving at http:\/\/\S+\n/.test(api.out) || api.exited, 'the API node to start');
    const url = /serving at (http:\/\/\S+)\n/.exec(api.out)?.[1];
    if (!url) throw new Error(`scale-out: the API node did not start\n${api.describe()}`);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const call = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
      for (;;) {
        const response = await fetch(`${url}${path}`, {
          method,
          headers,
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        // The API key's write rate limit (http-api.md): wait as told, as a client should, and send again.
        if (response.status === 429) {
          await response.body?.cancel();
          await sleep(1000 * Number(response.headers.get('retry-after') ?? 1));
          continue;
        }
        if (response.status >= 300) throw new Error(`scale-out: ${method} ${path}: ${response.status}`);
        return (await response.json()) as Record<string, unknown>;
      }
    };
    const stop = new AbortController();
    const latencies: number[] = [];
    const clients = await Promise.all(
      Array.from({ length: DELIVERY.sessions }, async (_, i) => {
        const sessionId = (await call('POST', '/v1/sessions', { title: `delivery ${i}` })).sessionId as string;
        const client = { sessionId, received: [] as number[], ended: new Map<string, () => void>() };
        const response = await fetch(`${url}/v1/sessions/${sessionId}/events?after=0`, {
          headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
          signal: stop.signal,
        });
        const connected = Date.now();
        const reading = readStream(response, stop.signal, (m) => {
          if (m.id === undefined || m.event === 'snapshot' || m.event === 'model.delta') return;
          const event = JSON.parse(m.data) as { sequence: number; timestamp: string; type: string; turnId?: string };
          client.received.push(event.sequence);
          const at = Date.parse(event.timestamp);
          // Events committed before the client connected are catch-up, not delivery.
          if (at >= connected) latencies.push(Date.now() - at);
          if ((event.type === 'turn.completed' || event.type === 'turn.failed') && event.turnId) {
            client.ended.get(event.turnId)?.();
          }
        }).catch(() => undefined);
        return { ...client, reading };
      }),
    );
    const started = Date.now();
    await Promise.all(
      clients.map(async (client, s) => {
        for (let t = 0; t < DELIVERY.turns; t++) {
          const turnId = `delivery-${s}-${t}`;
          const ended = new Promise<void>((resolve) => client.ended.set(turnId, resolve));
          await call('POST', `/v1/sessions/${client.sessionId}/turns`, { input: INPUT, turnId });
          await ended;
        }
      }),
    );
    const seconds = (Date.now() - started) / 1000;
    let gaps = 0;
    let duplicates = 0;
    for (const client of clients) {
      const page = await call('GET', `/v1/sessions/${client.sessionId}/events?limit=1`);
      const last = Number(page.lastSequence);
      await until(() => (client.received.at(-1) ?? 0) >= last, `the SSE client of ${client.sessionId} to catch up`);
      const seen = new Set<number>();
      for (const sequence of client.received) {
        if (seen.has(sequence)) duplicates++;
        seen.add(sequence);
      }
      for (let sequence = 1; sequence <= last; sequence++) if (!seen.has(sequence)) gaps++;
    }
    stop.abort();
    await Promise.all(clients.map((c) => c.reading));
    const result = {
      sessions: DELIVERY.sessions,
      turns: DELIVERY.sessions * DELIVERY.turns,
      workers: DELIVERY.workers,
      seconds,
      events: clients.reduce((n, c) => n + c.received.length, 0),
      samples: latencies.length,
      gaps,
      duplicates,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      maxMs: Math.max(...latencies),
    };
    log(`scale-out: delivery ${JSON.stringify(result)}`);
    if (gaps > 0 || duplicates > 0) throw new Error(`scale-out: ${gaps} gap(s) and ${duplicates} duplicate(s)`);
    return result;
  } finally {
    await Promise.all([api.stop(), ...workers.map((w) => w.stop())]);
  }
}

// ----- run ---------------------------------------------------------------------------------------------------------

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query(`drop schema if exists "${schema}" cascade`);
  } finally {
    await client.end();
  }
}

/** The server's version, or why it cannot be reached. */
async function postgresVersion(): Promise<{ version: string } | { unavailable: string }> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    return { version: String((await client.query('show server_version')).rows[0]?.server_version) };
  } catch (error) {
    return { unavailable: `${POSTGRES_URL}: ${(error as Error).message}` };
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function run(): Promise<BenchOutput> {
  const server = await postgresVersion();
  if ('unavailable' in server) return { notes: [`scale-out skipped: PostgreSQL unreachable (${server.unavailable})`] };
  const p = project();
  try {
    // The first open migrates the fresh schema; the workers then start on a migrated store.
    const first = await controlPlane(p, 'io.json');
    await first.close();
    await first.store.close();

    const rows: ScaleOutThroughput[] = [];
    const notes: string[] = [];
    const workers: OarProcess[] = [];
    for (const count of PHASES.has('throughput') ? WORKER_COUNTS : []) {
      const added = await Promise.all(
        Array.from({ length: count - workers.length }, (_, i) => startWorker(p.cwd, `w${workers.length + i + 1}`)),
      );
      workers.push(...added);
      for (const workload of WORKLOADS) {
        const { row, note } = await throughput(p, workers, workload);
        rows.push(row);
        notes.push(note);
      }
    }
    await Promise.all(workers.map((w) => w.stop()));

    const takeovers: ScaleOutTakeover[] = [];
    const failed = PHASES.has('takeover') ? await takeoverOrNote(p, takeovers) : undefined;
    if (failed) notes.push(failed);
    const delivered = PHASES.has('delivery') ? await delivery(p) : undefined;
    const result: ScaleOutResult = {
      concurrency: CONCURRENCY,
      toolSteps: TOOL_STEPS,
      cores: cpus().length,
      throughput: rows,
      takeover: takeovers,
      ...(delivered ? { delivery: delivered } : {}),
      ...(QUICK ? { quick: true } : {}),
    };
    return { scaleOut: [result], versions: { PostgreSQL: server.version }, ...(notes.length > 0 ? { notes } : {}) };
  } finally {
    await Promise.all([...all].map((proc) => proc.stop(5_000)));
    await dropSchema(p.schema);
  }
}
