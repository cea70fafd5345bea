import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { fakeOpenAI, mostInFlight } from '../../runtime/test/support/fake-openai.js';
import { POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { type SseMessage, sseMessage } from '../../server/test/support.js';
import { FIXTURES, tempDir, writeJson } from './cli-helpers.js';
import {
  describeProc,
  exitOf,
  graphActionId,
  killAll,
  labelledAct,
  oar,
  ofType,
  type Proc,
  randomName,
  readLog,
  sleep,
  start,
  until,
  withSchema,
} from './processes.js';

/**
 * Scale-out on PostgreSQL with real processes (issue 14): `oar serve --no-worker` API nodes and `oar worker`
 * processes on one store.
 * - Workers and an API node: 20 turns submitted over HTTP and with `oar run --detach` run on three workers; one is
 *   killed with SIGKILL mid-graph. Every session ends once, no non-idempotent side effect happens twice (what the
 *   killed worker had started becomes `lost`), every log is gap-free and replays, and an SSE client on the API node
 *   sees every event of its session exactly once, in order.
 * - Drain: SIGTERM on a worker driving a slow turn: it exits 0, the step it was in completes, another worker
 *   continues the turn.
 * - Concurrency bound: `--concurrency 1` never runs two threads at once.
 * - The lease thief: a worker stopped (SIGSTOP) past its lease is taken over, and once continued appends nothing.
 * - Shared limits: three workers against a fake provider limited to 2 concurrent calls never run a third.
 * - Dropped connections: every connection of a worker terminated mid-run (pg_terminate_backend); nothing is lost.
 *
 * Side effects are recorded by the fixture effect-tools.mjs in effects.ndjson (a start and an end line per call,
 * with the process id), so a duplicate or an overlap cannot hide. Nothing here asserts on durations.
 */

// ----- processes ---------------------------------------------------------------------------------------------

function worker(p: Project, args: string[] = []): Proc {
  return start(p.cwd, ['worker', ...args]);
}

/** `oar run --detach --json PROMPT`: the session id of the recorded turn. */
async function detach(p: Project, prompt: string): Promise<string> {
  const run = await oar(p.cwd, ['run', '--detach', '--json', prompt]);
  expect(run.code, describeProc(run)).toBe(0);
  const ids = JSON.parse(run.out) as { sessionId: string; threadId: string; turnId: string };
  expect(ids).toMatchObject({
    sessionId: expect.any(String),
    threadId: expect.any(String),
    turnId: expect.any(String),
  });
  return ids.sessionId;
}

// ----- projects ----------------------------------------------------------------------------------------------

interface Call {
  id: string;
  tool: 'effect' | 'effect_idempotent';
  delayMs?: number;
  depends?: string;
}

/** One scripted model step of labelled calls, after 50 ms of "thinking". */
const act = (calls: Call[]) => labelledAct(calls, 50);
const answer = (message: string) => ({ delayMs: 50, protocol: { kind: 'answer', message } });

interface Project {
  cwd: string;
  store: string;
}

function project(store: string, steps: unknown[], options: { leaseTtlMs?: number } = {}): Project {
  const cwd = tempDir('oar-scale-');
  writeJson(cwd, 'script.json', { steps });
  writeJson(cwd, 'oar.config.json', {
    model: 'script:script.json',
    tools: { modules: [join(FIXTURES, 'effect-tools.mjs')] },
    permissions: { mode: 'bypass' },
    ...(options.leaseTtlMs ? { worker: { leaseTtlMs: options.leaseTtlMs } } : {}),
    store,
  });
  return { cwd, store };
}

interface Effect {
  phase: 'start' | 'end';
  label: string;
  tool: 'effect' | 'effect_idempotent';
  sessionId: string;
  toolCallId: string;
  pid: number;
  at: number;
}

/** The side effects so far (complete lines only). */
function effects(cwd: string): Effect[] {
  const file = join(cwd, 'effects.ndjson');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .slice(0, -1)
    .map((line) => JSON.parse(line) as Effect);
}

const started = (cwd: string) => effects(cwd).filter((e) => e.phase === 'start');

// ----- the log -----------------------------------------------------------------------------------------------

/** Sequences 1..N, the replay equal, one turn submitted and ended exactly once, no tool call ended twice. */
async function consistentLog(p: Project, sessionId: string): Promise<RuntimeEvent[]> {
  const { events, replay } = await readLog(p, sessionId);
  expect(events.length, `events of ${sessionId}`).toBeGreaterThan(0);
  expect(
    events.map((e) => e.sequence),
    `sequences of ${sessionId}: 1..N without gaps`,
  ).toEqual(events.map((_, i) => i + 1));
  expect(replay, `replay of ${sessionId}`).toMatchObject({ equal: true, differences: [], contradictions: [] });
  const submitted = ofType(events, 'turn.submitted').map((e) => e.turnId);
  expect(submitted, `turns of ${sessionId}`).toHaveLength(1);
  const endings = events.filter((e) => e.type === 'turn.completed' || e.type === 'turn.failed');
  expect(
    endings.map((e) => e.turnId),
    `endings of the turn of ${sessionId}`,
  ).toEqual(submitted);
  const ended = events
    .filter((e) => e.type === 'tool.result' || e.type === 'tool.failed')
    .map((e) => `${e.runId}/${graphActionId(e)}`);
  expect(ended.length, `tool calls ended twice in ${sessionId}: ${ended}`).toBe(new Set(ended).size);
  return events;
}

const endingOf = (events: RuntimeEvent[]) =>
  events.find((e) => e.type === 'turn.completed' || e.type === 'turn.failed') as RuntimeEvent;

/**
 * Side effects against the logs: a non-idempotent action's effect happened at most once per session; every effect
 * has a `tool.started` in the log, written before it (write-ahead); every effect's action ended in the log, with a
 * result, or — when the process that ran it died or lost its lease — as `lost`; an effect of a killed process
 * without a result is `lost`, never re-run.
 *
 * `cutOff`: the processes the test killed or cut from the store. An idempotent call's `tool.started` is not made
 * durable before it runs (that is what idempotent buys), so such a process may have run one to its end and died
 * (or lost its connection) before committing anything of it; another worker then runs it again, and the log has
 * the one fact of the run that counted.
 */
function effectsMatchLogs(all: Effect[], logs: Map<string, RuntimeEvent[]>, cutOff: number[] = []): void {
  const starts = all.filter((e) => e.phase === 'start');
  const key = (e: Effect) => `${e.sessionId}/${e.label}`;
  const byAction = new Map<string, Effect[]>();
  for (const e of starts) byAction.set(key(e), [...(byAction.get(key(e)) ?? []), e]);
  for (const [action, runs] of byAction) {
    const [sessionId, label] = action.split('/') as [string, string];
    const events = logs.get(sessionId);
    expect(events, `the log of ${sessionId} (effect ${label})`).toBeDefined();
    if (!events) continue;
    const startedInLog = ofType(events, 'tool.started', label);
    // An idempotent run of a process that was cut off may have left no fact (see `cutOff`); every other run that
    // ended, and every non-idempotent one, has its own.
    const ended = new Set(all.filter((e) => e.phase === 'end').map((e) => e.toolCallId));
    const accounted =
      runs[0]?.tool === 'effect' ? runs : runs.filter((e) => ended.has(e.toolCallId) && !cutOff.includes(e.pid));
    expect(accounted.length, `effects of ${action} vs its tool.started events`).toBeLessThanOrEqual(
      startedInLog.length,
    );
    if (runs[0]?.tool === 'effect') expect(runs.length, `non-idempotent ${action} ran more than once`).toBe(1);
    const results = ofType(events, 'tool.result', label);
    const failures = ofType(events, 'tool.failed', label);
    expect(results.length + failures.length, `${action} ended in the log`).toBeGreaterThanOrEqual(1);
    if (runs[0]?.tool === 'effect' && results.length === 0) {
      expect(
        failures.map((f) => f.status),
        `${action} has no result: it is lost`,
      ).toEqual(['lost']);
    }
  }
}

// ----- HTTP and SSE ------------------------------------------------------------------------------------------

const ADMIN_KEY = `oar_${'Sc4le0ut_-'.repeat(4)}`;

interface ApiNode {
  proc: Proc;
  url: string;
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }>;
}

async function apiNode(p: Project): Promise<ApiNode> {
  const proc = start(p.cwd, ['serve', '--no-worker', '--port', '0'], { OAR_ADMIN_KEY: ADMIN_KEY });
  await until(
    () => /serving at http:\/\/\S+\n/.test(proc.out) || proc.exited,
    () => `oar serve --no-worker to start: ${proc.out}${proc.err}`,
  );
  const match = /serving at (http:\/\/\S+)\n/.exec(proc.out);
  if (!match?.[1]) throw new Error(`oar serve did not start:\n${describeProc(proc)}`);
  expect(proc.out).toContain('worker:  none (--no-worker)');
  const url = match[1];
  return {
    proc,
    url,
    async call(method, path, body) {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    },
  };
}

/** Create a session and submit its turn over HTTP; returns the session id. */
async function submitOverHttp(api: ApiNode, prompt: string): Promise<string> {
  const created = await api.call('POST', '/v1/sessions', {});
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const sessionId = created.body.sessionId as string;
  const turn = await api.call('POST', `/v1/sessions/${sessionId}/turns`, { input: prompt });
  expect(turn.status, JSON.stringify(turn.body)).toBe(202);
  return sessionId;
}

/** An SSE client of one session's events (from the start: `after=0`), collecting every message until closed. */
function sseClient(api: ApiNode, sessionId: string) {
  const messages: SseMessage[] = [];
  const controller = new AbortController();
  let failure: unknown;
  const reading = (async () => {
    const response = await fetch(`${api.url}/v1/sessions/${sessionId}/events?after=0`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}`, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    if (response.status !== 200) throw new Error(`SSE: status ${response.status}: ${await response.text()}`);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const message = sseMessage(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (message) messages.push(message);
      }
    }
  })().catch((error: unknown) => {
    if (!controller.signal.aborted) failure = error;
  });
  /** The durable events received (live-only model deltas and the snapshot left out), as parsed events. */
  const durable = () =>
    messages
      .filter((m) => m.id !== undefined && m.event !== 'snapshot' && m.event !== 'model.delta')
      .map((m) => JSON.parse(m.data) as RuntimeEvent);
  return {
    messages,
    durable,
    failure: () => failure,
    async close() {
      controller.abort();
      await reading;
    },
  };
}

describe('scale-out on PostgreSQL: API nodes and workers as separate processes', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED scale-out tests (PostgreSQL at ${POSTGRES_URL}): ${unavailable.message}`);
    return;
  }
  const schemas: string[] = [];
  /** A store URL with a fresh schema, dropped after the file. */
  const newStore = () => {
    const schema = randomName('oar_t_scale_');
    schemas.push(schema);
    return withSchema(POSTGRES_URL, schema);
  };
  afterEach(async () => {
    await killAll();
  });
  afterAll(async () => {
    await killAll();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      for (const schema of schemas) await client.query(`drop schema if exists "${schema}" cascade`);
    } finally {
      await client.end();
    }
  });

  it('3 workers and an API node run 20 concurrent graphs; a worker killed mid-graph loses nothing, duplicates nothing', async () => {
    // Per turn: a graph of four actions (two non-idempotent ones side by side, an idempotent one after them, a
    // non-idempotent one last), then a second graph, then the answer.
    const steps = [
      act([
        { id: 'a', tool: 'effect', delayMs: 400 },
        { id: 'b', tool: 'effect', delayMs: 300 },
        { id: 'c', tool: 'effect_idempotent', delayMs: 300, depends: 'a' },
        { id: 'd', tool: 'effect', delayMs: 300, depends: 'c' },
      ]),
      act([
        { id: 'e', tool: 'effect', delayMs: 300 },
        { id: 'f', tool: 'effect_idempotent', delayMs: 200, depends: 'e' },
      ]),
      answer('all done'),
    ];
    const p = project(newStore(), steps);
    // The API node first: it creates the schema; the workers then start on a migrated store.
    const api = await apiNode(p);
    const workers = [1, 2, 3].map((n) => worker(p, ['--concurrency', '4', '--id', `w${n}`]));
    await until(
      () => workers.every((w) => w.err.includes('OAR worker') || w.exited),
      () => `three workers to start:\n${workers.map(describeProc).join('\n')}`,
    );
    for (const w of workers) expect(w.exited, describeProc(w)).toBe(false);

    // One HTTP session gets its SSE client before its turn is submitted.
    const watched = await api.call('POST', '/v1/sessions', {});
    expect(watched.status).toBe(201);
    const watchedId = watched.body.sessionId as string;
    const sse = sseClient(api, watchedId);
    const submits: Promise<string>[] = [
      api.call('POST', `/v1/sessions/${watchedId}/turns`, { input: 'watched turn' }).then((r) => {
        expect(r.status).toBe(202);
        return watchedId;
      }),
    ];
    for (let i = 1; i < 20; i++) {
      submits.push(i % 2 === 0 ? submitOverHttp(api, `http turn ${i}`) : detach(p, `detached turn ${i}`));
    }
    const sessions = await Promise.all(submits);
    expect(new Set(sessions).size).toBe(20);

    // The victim: a worker with a non-idempotent action in flight (its effect started, not ended).
    let victim: Proc | undefined;
    await until(
      () => {
        const all = effects(p.cwd);
        const ended = new Set(all.filter((e) => e.phase === 'end').map((e) => e.toolCallId));
        const inFlight = all.filter((e) => e.phase === 'start' && e.tool === 'effect' && !ended.has(e.toolCallId));
        victim = workers.find((w) => inFlight.some((e) => e.pid === w.pid));
        return victim !== undefined;
      },
      () => `a worker with an action in flight: ${JSON.stringify(effects(p.cwd))}`,
    );
    if (!victim) throw new Error('no victim');
    victim.child.kill('SIGKILL');
    await exitOf(victim, 'the killed worker');
    const victimPid = victim.pid;
    const atKill = effects(p.cwd);
    const endedAtKill = new Set(atKill.filter((e) => e.phase === 'end').map((e) => e.toolCallId));
    const cutShort = atKill.filter(
      (e) => e.phase === 'start' && e.pid === victimPid && e.tool === 'effect' && !endedAtKill.has(e.toolCallId),
    );
    expect(cutShort.length, 'the killed worker had a non-idempotent action in flight').toBeGreaterThan(0);

    // Half the sessions are followed with `oar wait` (exit 0: completed), the rest through the API node.
    const waits = sessions
      .filter((_, i) => i % 2 === 1)
      .map((sessionId) => oar(p.cwd, ['wait', sessionId, '--timeout', '60', '--json']));
    const viaApi = sessions.filter((_, i) => i % 2 === 0);
    await until(
      async () => {
        for (const sessionId of viaApi) {
          const page = await api.call('GET', `/v1/sessions/${sessionId}/events?type=turn.completed,turn.failed`);
          if ((page.body.events as unknown[]).length === 0) return false;
        }
        return true;
      },
      () => 'every session followed through the API node to end',
      120_000,
    );
    for (const waited of await Promise.all(waits)) {
      expect(waited.code, describeProc(waited)).toBe(0);
      expect(JSON.parse(waited.out.trim().split('\n').pop() as string)).toMatchObject({
        result: { status: 'completed', answer: 'all done' },
      });
    }

    const logs = new Map<string, RuntimeEvent[]>();
    for (const sessionId of sessions) logs.set(sessionId, await consistentLog(p, sessionId));
    for (const [sessionId, events] of logs) {
      const ending = endingOf(events);
      // A lost action is reported to the model, which carries on: every turn completes.
      expect(`${ending.type}:${ending.status}`, `the end of ${sessionId}`).toBe('turn.completed:completed');
    }
    const all = effects(p.cwd);
    effectsMatchLogs(all, logs, [victimPid]);
    // What the killed worker had in flight is lost, once, and was not re-run by anybody.
    for (const cut of cutShort) {
      const events = logs.get(cut.sessionId) ?? [];
      expect(
        ofType(events, 'tool.failed', cut.label).map((e) => e.status),
        `${cut.sessionId}/${cut.label}`,
      ).toEqual(['lost']);
      expect(ofType(events, 'tool.result', cut.label)).toEqual([]);
      expect(all.filter((e) => e.phase === 'start' && e.sessionId === cut.sessionId && e.label === cut.label)).toEqual([
        cut,
      ]);
    }
    // The surviving workers did the rest, and nobody ran anything after the victim died under its pid.
    const survivors = workers.filter((w) => w !== victim).map((w) => w.pid);
    expect(new Set(all.map((e) => e.pid)).size).toBeGreaterThan(1);
    for (const e of all.filter((x) => x.pid !== victimPid)) expect(survivors).toContain(e.pid);

    // The SSE client on the API node (which executes nothing) saw every event of its session once, in order.
    const last = (logs.get(watchedId) ?? []).length;
    await until(
      () => sse.durable().some((e) => e.sequence === last) || sse.failure() !== undefined,
      () => `the SSE client to reach sequence ${last}: ${sse.durable().map((e) => e.sequence)}`,
    );
    await sse.close();
    expect(sse.failure()).toBeUndefined();
    expect(sse.durable().map((e) => e.sequence)).toEqual((logs.get(watchedId) ?? []).map((e) => e.sequence));
    expect(sse.durable()).toEqual(JSON.parse(JSON.stringify(logs.get(watchedId))));

    // The workers and the API node stop cleanly on SIGTERM.
    for (const proc of [...workers.filter((w) => w !== victim), api.proc]) proc.child.kill('SIGTERM');
    for (const proc of [...workers.filter((w) => w !== victim), api.proc]) {
      const exit = await exitOf(proc, 'a worker or the API node on SIGTERM');
      expect(exit.code, describeProc(Object.assign(proc, exit))).toBe(0);
    }
  }, 300_000);

  it('SIGTERM drains a worker: its step finishes, it exits 0, another worker continues the turn', async () => {
    const steps = [
      act([{ id: 'slow', tool: 'effect', delayMs: 3000 }]),
      act([{ id: 'next', tool: 'effect', delayMs: 100 }]),
      answer('drained and continued'),
    ];
    const p = project(newStore(), steps);
    const sessionId = await detach(p, 'a slow turn');
    const first = worker(p, ['--id', 'first', '--drain-seconds', '60']);
    await until(
      () => started(p.cwd).some((e) => e.label === 'slow'),
      () => `the slow action to start: ${describeProc(first)}`,
    );
    // Told to drain while the slow action runs; the second worker, started after, finds the thread handed back.
    first.child.kill('SIGTERM');
    const second = worker(p, ['--id', 'second']);
    const exit = await exitOf(first, 'the draining worker');
    expect(exit.code, describeProc(Object.assign(first, exit))).toBe(0);
    expect(first.err).toContain('draining');
    expect(first.err).not.toContain('drain deadline passed');

    const waited = await oar(p.cwd, ['wait', sessionId, '--timeout', '60', '--json']);
    expect(waited.code, describeProc(waited)).toBe(0);
    const events = await consistentLog(p, sessionId);
    expect(endingOf(events).type).toBe('turn.completed');
    // The step in flight finished on the draining worker (a result, not lost); the next one ran on the other.
    expect(ofType(events, 'tool.result').map(graphActionId)).toEqual(['slow', 'next']);
    expect(ofType(events, 'tool.failed')).toEqual([]);
    const runs = started(p.cwd);
    expect(runs.map((e) => [e.label, e.pid])).toEqual([
      ['slow', first.pid],
      ['next', second.pid],
    ]);
    effectsMatchLogs(effects(p.cwd), new Map([[sessionId, events]]));
    second.child.kill('SIGTERM');
    expect((await exitOf(second, 'the second worker')).code).toBe(0);
  }, 180_000);

  it('a worker with --concurrency 1 never runs two threads at once; both sessions complete', async () => {
    const steps = [
      act([{ id: 'one', tool: 'effect', delayMs: 500 }]),
      act([{ id: 'two', tool: 'effect', delayMs: 500 }]),
      answer('done'),
    ];
    const p = project(newStore(), steps);
    // The turns wait before the worker starts, so it finds three threads with work at once.
    const sessions = [await detach(p, 'first'), await detach(p, 'second'), await detach(p, 'third')];
    const only = worker(p, ['--concurrency', '1']);
    const waits = await Promise.all(sessions.map((s) => oar(p.cwd, ['wait', s, '--timeout', '60', '--json'])));
    for (const waited of waits) expect(waited.code, describeProc(waited)).toBe(0);
    const logs = new Map<string, RuntimeEvent[]>();
    for (const sessionId of sessions) logs.set(sessionId, await consistentLog(p, sessionId));
    const all = effects(p.cwd);
    effectsMatchLogs(all, logs);
    expect(new Set(all.map((e) => e.pid))).toEqual(new Set([only.pid]));
    // Each call's [start, end] interval, in start order: each ends before the next starts.
    const calls = all
      .filter((e) => e.phase === 'start')
      .map((s) => ({
        start: s.at,
        end: all.find((e) => e.phase === 'end' && e.toolCallId === s.toolCallId)?.at ?? Number.POSITIVE_INFINITY,
        what: `${s.sessionId}/${s.label}`,
      }))
      .sort((x, y) => x.start - y.start);
    expect(calls).toHaveLength(6);
    for (let i = 1; i < calls.length; i++) {
      const [before, after] = [calls[i - 1], calls[i]] as [(typeof calls)[0], (typeof calls)[0]];
      expect(before.end, `${before.what} overlaps ${after.what}`).toBeLessThanOrEqual(after.start);
    }
    only.child.kill('SIGTERM');
    expect((await exitOf(only, 'the worker')).code).toBe(0);
  }, 180_000);

  it('the lease thief: a worker stopped past its lease is taken over, and once continued appends nothing', async () => {
    const steps = [
      act([
        { id: 'quick', tool: 'effect', delayMs: 0 },
        { id: 'stuck', tool: 'effect', delayMs: 2000, depends: 'quick' },
      ]),
      answer('taken over'),
    ];
    const p = project(newStore(), steps, { leaseTtlMs: 1500 });
    const sessionId = await detach(p, 'steal me');
    const thief = worker(p, ['--id', 'stopped']);
    await until(
      () => started(p.cwd).some((e) => e.label === 'stuck'),
      () => `the stuck action to start: ${describeProc(thief)}`,
    );
    thief.child.kill('SIGSTOP');
    try {
      const taker = worker(p, ['--id', 'taker']);
      const waited = await oar(p.cwd, ['wait', sessionId, '--timeout', '60', '--json']);
      expect(waited.code, describeProc(waited)).toBe(0);
      const before = await consistentLog(p, sessionId);
      expect(ofType(before, 'tool.failed', 'stuck').map((e) => e.status)).toEqual(['lost']);
      // Continued: either the stopped worker's tool call ends first and it tries to record it, or its overdue
      // renewal runs first, finds the lease gone and aborts the call. Either way it may write nothing.
      thief.child.kill('SIGCONT');
      // Time to try (the call had at most 2 s left); whatever it attempted has been refused by then.
      await sleep(4000);
      thief.child.kill('SIGTERM');
      const exit = await exitOf(thief, 'the continued worker');
      expect(exit.code, describeProc(Object.assign(thief, exit))).toBe(0);
      const after = await consistentLog(p, sessionId);
      expect(after, 'the continued worker appended nothing').toEqual(before);
      expect(ofType(after, 'tool.result').map(graphActionId)).toEqual(['quick']);
      expect(started(p.cwd).map((e) => [e.label, e.pid])).toEqual([
        ['quick', thief.pid],
        ['stuck', thief.pid],
      ]);
      effectsMatchLogs(effects(p.cwd), new Map([[sessionId, after]]));
      taker.child.kill('SIGTERM');
      expect((await exitOf(taker, 'the taker')).code).toBe(0);
    } finally {
      thief.child.kill('SIGCONT');
    }
  }, 180_000);
  it('shared limits: 3 workers against a provider limited to 2 concurrent calls never run a third', async () => {
    // A fake OpenAI-compatible provider in this process; each answer takes a moment, so the workers press on it.
    const server = await fakeOpenAI(() => ({
      kind: 'answer',
      pieces: 4,
      chunkDelayMs: 250,
      toolCalls: [{ name: 'AgentProtocolOutput', arguments: JSON.stringify({ kind: 'answer', message: 'limited' }) }],
    }));
    try {
      const cwd = tempDir('oar-scale-');
      const store = newStore();
      writeJson(cwd, 'oar.config.json', {
        model: 'fake',
        models: { fake: { provider: 'openai-compatible', model: 'fake-model', baseURL: server.baseURL } },
        providerLimits: { 'openai-compatible': { maxConcurrency: 2 } },
        permissions: { mode: 'bypass' },
        store,
      });
      const p = { cwd, store };
      // One thread at a time per worker: two calls in flight at once can only be two workers' calls, and three
      // workers could run three — so a peak of exactly 2 is the shared limit holding across processes.
      const workers = [1, 2, 3].map((n) => worker(p, ['--concurrency', '1', '--id', `limited${n}`]));
      await until(
        () => workers.every((w) => w.err.includes('OAR worker') || w.exited),
        () => `three workers to start:\n${workers.map(describeProc).join('\n')}`,
      );
      // Submitted together: the calls (a second each) outlast the submits, so the workers press on the limit.
      const sessions = await Promise.all(Array.from({ length: 9 }, (_, i) => detach(p, `limited turn ${i}`)));
      const waits = await Promise.all(sessions.map((s) => oar(cwd, ['wait', s, '--timeout', '90', '--json'])));
      for (const waited of waits) expect(waited.code, describeProc(waited)).toBe(0);

      const calls = server.requests.filter((r) => r.url === '/v1/chat/completions');
      expect(calls).toHaveLength(9);
      // The limit was reached (the workers did press on it together) and never exceeded.
      expect(mostInFlight(calls)).toBe(2);
      const logs = new Map<string, RuntimeEvent[]>();
      for (const sessionId of sessions) logs.set(sessionId, await consistentLog(p, sessionId));
      // Held-back calls are facts: the standard's rate_limit.hit (OAR's shared limit, not the provider) and the
      // thread waiting for a resource; nothing failed.
      const all = [...logs.values()].flat();
      const hits = ofType(all, 'rate_limit.hit');
      expect(hits.length).toBeGreaterThan(0);
      for (const hit of hits) {
        expect(hit.payload).toMatchObject({ enforcedBy: 'oar_shared_limits', reason: 'concurrency', limit: 2 });
      }
      expect(ofType(all, 'thread.updated').some((e) => e.status === 'waiting_resource')).toBe(true);
      expect(ofType(all, 'model.failed')).toEqual([]);
      for (const w of workers) w.child.kill('SIGTERM');
      for (const w of workers) expect((await exitOf(w, 'a limited worker')).code).toBe(0);
    } finally {
      await server.close();
    }
  }, 180_000);
  it("dropped database connections: pg_terminate_backend on a worker's connections mid-run loses nothing", async () => {
    const steps = [
      act([
        { id: 'a', tool: 'effect', delayMs: 600 },
        { id: 'b', tool: 'effect', delayMs: 600, depends: 'a' },
        { id: 'c', tool: 'effect_idempotent', delayMs: 600, depends: 'b' },
      ]),
      answer('survived'),
    ];
    const p = project(newStore(), steps);
    const sessionId = await detach(p, 'cut my connections');
    // The victim's connections (pool and listener) carry an application_name of their own, so only they are cut.
    const appName = randomName('oar_victim_');
    const victimStore = `${p.store}&application_name=${appName}`;
    const victim = start(p.cwd, ['worker', '--id', 'victim', '--store', victimStore]);
    const terminate = async (): Promise<number> => {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      try {
        const { rows } = await client.query(
          'select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1',
          [appName],
        );
        return rows.length;
      } finally {
        await client.end();
      }
    };
    let cuts = 0;
    for (const label of ['a', 'b']) {
      await until(
        () => started(p.cwd).some((e) => e.label === label) || victim.exited,
        () => `action ${label} to start: ${describeProc(victim)}`,
      );
      if (victim.exited) break;
      cuts += await terminate();
    }
    expect(cuts, 'connections of the victim were cut').toBeGreaterThan(0);
    // Whichever way the victim went (it reconnected and carried on, or it gave up cleanly), a second worker is there
    // to take over what it left.
    const backup = worker(p, ['--id', 'backup']);
    const waited = await oar(p.cwd, ['wait', sessionId, '--timeout', '90', '--json']);
    expect(waited.code, `${describeProc(waited)}\nvictim: ${describeProc(victim)}`).toBe(0);
    const events = await consistentLog(p, sessionId);
    expect(endingOf(events).type).toBe('turn.completed');
    effectsMatchLogs(effects(p.cwd), new Map([[sessionId, events]]), [victim.pid]);
    // The victim did not crash: still running, or exited on its own with a structured store error (never killed by
    // an uncaught exception, never internal_error).
    if (victim.exited) {
      const exit = await victim.exit;
      expect(exit.signal, describeProc(Object.assign(victim, exit))).toBeNull();
      expect([0, 74], describeProc(Object.assign(victim, exit))).toContain(exit.code);
    } else {
      victim.child.kill('SIGTERM');
      expect((await exitOf(victim, 'the victim')).code).toBe(0);
    }
    // The victim may have finished the turn before the backup was up: a SIGTERM before its handler is installed
    // would kill it by the signal (exit code null), which says nothing about draining. Stop it once it is running.
    await until(
      () => backup.err.includes('OAR worker') || backup.exited,
      () => `the backup worker to start: ${describeProc(backup)}`,
    );
    backup.child.kill('SIGTERM');
    expect((await exitOf(backup, 'the backup worker')).code).toBe(0);
  }, 180_000);
});
