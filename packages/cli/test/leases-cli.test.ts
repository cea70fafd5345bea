import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { Store } from '@oar/runtime';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { FIXTURES, tempDir, writeJson } from './cli-helpers.js';
import {
  describeProc,
  exitOf,
  graphActionId,
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
 * Thread leases seen from the outside: several real `oar` processes on one store and one session. Whatever the
 * interleaving — a second process arriving while the first drives the thread, a stalled (SIGSTOP) lease holder
 * coming back after a takeover, a process working on another session, two resumes racing after a kill -9 — the
 * log must hold one consistent history: no side effect twice, no second ending of a turn or an action, no gap in
 * the sequences, and nothing written by a process that lost its lease.
 *
 * Side effects are counted in counts.txt (fixtures count-tools.mjs and gate-tools.mjs), so a duplicate cannot hide.
 * The log is checked after the processes exit, through the same queries `oar events` and `oar replay` use (one
 * `oar replay` / `oar events --json` per scenario confirms the CLI reports the same).
 */

// ----- processes ---------------------------------------------------------------------------------------------

/** Complete NDJSON lines printed so far (a line still being written is left for later). */
function lines(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .slice(0, -1)
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

function printedEvents(proc: Proc): RuntimeEvent[] {
  if (!proc.out.includes('\n')) return [];
  return lines(proc.out).filter((l) => typeof l.type === 'string') as unknown as RuntimeEvent[];
}

function resultLine(proc: Proc): { sessionId: string; status: string; answer?: string } | undefined {
  const found = lines(proc.out).find((l) => l.result !== undefined);
  return found?.result as { sessionId: string; status: string; answer?: string } | undefined;
}

/** Wait until `oar run --json` has printed its session id; returns it. */
async function sessionOf(proc: Proc): Promise<string> {
  await until(
    () => printedEvents(proc).length > 0 || proc.exited,
    () => `a session id from pid ${proc.pid}: ${proc.out}${proc.err}`,
  );
  const sessionId = printedEvents(proc)[0]?.sessionId;
  if (!sessionId) throw new Error(`no event printed by pid ${proc.pid}:\n${proc.out}\n${proc.err}`);
  return sessionId;
}

/** Wait until the action's tool has started (in the process's output) AND its side effect is in counts.txt. */
async function actionInFlight(proc: Proc, cwd: string, actionId: string): Promise<void> {
  await until(
    () =>
      proc.exited ||
      (proc.out.includes('"tool.started"') &&
        printedEvents(proc).some((e) => e.type === 'tool.started' && graphActionId(e) === actionId) &&
        counts(cwd).includes(actionId)),
    () => `action ${actionId} in flight in pid ${proc.pid}:\n${proc.out}\n${proc.err}`,
  );
  if (proc.exited)
    throw new Error(`pid ${proc.pid} exited before ${actionId} was in flight:\n${proc.out}\n${proc.err}`);
}

// ----- projects ----------------------------------------------------------------------------------------------

interface Call {
  id: string;
  tool: 'count' | 'count_idempotent' | 'gate';
  delayMs?: number;
  depends?: string;
}

/** One scripted model step: an action graph whose labels are the action ids (unique in a script), or an answer. */
const act = (calls: Call[]) => labelledAct(calls);
const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

interface Project {
  cwd: string;
  /** The store URL for the test process's own reads (SQLite: the project's default .oar/oar.db). */
  store: string;
}

function project(
  store: string | undefined,
  steps: unknown[],
  options: { leaseTtlMs?: number; extra?: Record<string, unknown[]> } = {},
): Project {
  const cwd = tempDir('oar-leases-');
  writeJson(cwd, 'script.json', { steps });
  for (const [name, more] of Object.entries(options.extra ?? {})) writeJson(cwd, name, { steps: more });
  writeJson(cwd, 'oar.config.json', {
    model: 'script:script.json',
    tools: { modules: [join(FIXTURES, 'count-tools.mjs'), join(FIXTURES, 'gate-tools.mjs')] },
    permissions: { mode: 'bypass' },
    ...(options.leaseTtlMs ? { worker: { leaseTtlMs: options.leaseTtlMs } } : {}),
    ...(store ? { store } : {}),
  });
  return { cwd, store: store ?? join(cwd, '.oar/oar.db') };
}

/** The side effects so far, one label per line. */
function counts(cwd: string): string[] {
  const file = join(cwd, 'counts.txt');
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
}

// ----- the log -----------------------------------------------------------------------------------------------

/** The lease row of a session's threads (owner, token), straight from `oar_thread_leases`. */
async function leaseRows(p: Project, sessionId: string): Promise<{ owner: string | null; token: number }[]> {
  const store = await Store.open(p.store, { cwd: p.cwd });
  try {
    const rows = await store.db
      .selectFrom('oar_thread_leases')
      .select(['owner', 'token'])
      .where('session_id', '=', sessionId)
      .execute();
    return rows.map((r) => ({ owner: r.owner, token: Number(r.token) }));
  } finally {
    await store.close();
  }
}

/**
 * What every session's log must satisfy, whatever happened to the processes: sequences 1..N without a gap, the
 * replay equal with no contradiction, every submitted turn ended exactly once. Returns the events.
 */
async function consistentLog(p: Project, sessionId: string): Promise<RuntimeEvent[]> {
  const { events, replay } = await readLog(p, sessionId);
  expect(events.length).toBeGreaterThan(0);
  expect(
    events.map((e) => e.sequence),
    'sequences 1..N without gaps',
  ).toEqual(events.map((_, i) => i + 1));
  expect(replay, 'replay of the log').toMatchObject({ equal: true, differences: [], contradictions: [] });
  expect(replay.events).toBe(events.length);
  const submitted = ofType(events, 'turn.submitted').map((e) => e.turnId);
  expect(new Set(submitted).size, 'turn ids are unique').toBe(submitted.length);
  for (const turnId of submitted) {
    const endings = events.filter(
      (e) => (e.type === 'turn.completed' || e.type === 'turn.failed') && e.turnId === turnId,
    );
    expect(
      endings.map((e) => e.type),
      `endings of turn ${turnId}`,
    ).toHaveLength(1);
  }
  // A tool call ends at most once (the replay's contradiction check says the same; this names the action).
  const ended = events
    .filter((e) => e.type === 'tool.result' || e.type === 'tool.failed')
    .map((e) => `${e.runId}/${graphActionId(e)}`);
  expect(ended.length, `tool calls ended twice: ${ended}`).toBe(new Set(ended).size);
  return events;
}

/**
 * Side effects against the log: each label in counts.txt appears exactly as often as the log has a result for it
 * — or, where an action may have ended without one (lost after a crash, cancelled by an interrupt), at most as
 * often as it has a result or a failure, since the effect may have happened before the ending. No label ran more
 * often than the log started it, and a label started twice needs a retry (attempt > 1) in the log.
 */
function sideEffectsMatchLog(cwd: string, events: RuntimeEvent[], options: { failuresAllowed: boolean }): void {
  const done = counts(cwd);
  const labels = new Set([...done, ...ofType(events, 'tool.started').map((e) => graphActionId(e) ?? '?')]);
  for (const label of labels) {
    const times = done.filter((l) => l === label).length;
    const started = ofType(events, 'tool.started', label);
    const results = ofType(events, 'tool.result', label).length;
    const failures = ofType(events, 'tool.failed', label).length;
    if (options.failuresAllowed) expect(times, `side effects of ${label}`).toBeLessThanOrEqual(results + failures);
    else expect(times, `side effects of ${label} vs its tool.result events`).toBe(results);
    expect(times, `side effects of ${label} vs its tool.started events`).toBeLessThanOrEqual(started.length);
    if (started.length > 1) {
      const retried = started.some((e) => ((e.payload as { attempt?: number }).attempt ?? 1) > 1);
      expect(retried, `${label} started ${started.length} times without a retry in the log`).toBe(true);
    }
  }
}

// ----- trials ------------------------------------------------------------------------------------------------

/**
 * Run `count` trials, `parallel` at a time, each in its own directory and store. Every trial runs to the end; the
 * test fails afterwards with every failed trial's error (the directories of failed trials are kept).
 */
async function trials(
  count: number,
  parallel: number,
  trial: (i: number, dirs: string[]) => Promise<void>,
): Promise<void> {
  const failures: string[] = [];
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < count; i = next++) {
      const dirs: string[] = [];
      try {
        await trial(i, dirs);
        for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
      } catch (error) {
        failures.push(`trial ${i} (${dirs.join(', ')}): ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, lane));
  if (failures.length > 0) throw new Error(`${failures.length}/${count} trial(s) failed:\n\n${failures.join('\n\n')}`);
}

// ----- scenarios ---------------------------------------------------------------------------------------------

function scenarios(storeFor: () => string | undefined) {
  it('two processes on one thread, 20 interleavings: no side effect twice, one history', async () => {
    // Turn 1 (steps 0-1) runs a, b, c, d; a second turn (steps 2-3, only when the second process submits one) runs
    // e, f. Labels are unique, so each side effect must appear exactly once. In half of the trials action a is a
    // gate that opens only once the second process has said it follows the first (so that case surely happens);
    // in the other half every action just takes a while and the second process arrives wherever it arrives.
    const turn2 = [
      act([
        { id: 'e', tool: 'count', delayMs: 200 },
        { id: 'f', tool: 'count', delayMs: 200, depends: 'e' },
      ]),
      answer('second answer'),
    ];
    const rest: Call[] = [
      { id: 'b', tool: 'count', delayMs: 300, depends: 'a' },
      { id: 'c', tool: 'count', delayMs: 300, depends: 'b' },
      { id: 'd', tool: 'count', delayMs: 300, depends: 'c' },
    ];
    const gatedSteps = [act([{ id: 'a', tool: 'gate' }, ...rest]), answer('first answer'), ...turn2];
    const timedSteps = [act([{ id: 'a', tool: 'count', delayMs: 300 }, ...rest]), answer('first answer'), ...turn2];
    let followed = 0;
    await trials(20, 4, async (i, dirs) => {
      const gated = i % 4 < 2;
      const mode = i % 2 === 0 ? 'resume' : 'run';
      const delay = Math.round((i * 1500) / 19);
      const p = project(storeFor(), gated ? gatedSteps : timedSteps);
      dirs.push(p.cwd);
      const first = start(p.cwd, ['run', '--json', 'count four']);
      let second: Proc | undefined;
      try {
        const sessionId = await sessionOf(first);
        await sleep(delay);
        second = start(p.cwd, mode === 'resume' ? ['resume', sessionId] : ['run', '--session', sessionId, 'more']);
        const follower = second;
        if (gated) {
          await until(
            () => follower.err.includes('is being driven by') || follower.exited,
            () => `the second process to follow the first:\n${follower.out}\n${follower.err}`,
          );
          writeFileSync(join(p.cwd, 'release-a'), '');
        }
        const [one, two] = await Promise.all([exitOf(first, 'first oar run'), exitOf(second, `second oar ${mode}`)]);
        const context = `${gated ? 'gated' : 'timed'} ${mode} after ${delay} ms\nfirst: ${describeProc(Object.assign(first, one))}\nsecond: ${describeProc(Object.assign(second, two))}`;
        expect(one.code, context).toBe(0);
        expect(resultLine(first), context).toMatchObject({ sessionId, status: 'completed' });
        expect(two.code, context).toBe(0);
        // The second process names the first one when it found the thread held by it (a gated trial always does).
        const note = /thread \S+ is being driven by (\S+) \(lease until/.exec(second.err);
        if (gated) expect(note, context).not.toBeNull();
        if (note) {
          followed++;
          expect(note[1], context).toMatch(new RegExp(`:${first.pid}$`));
        }

        const events = await consistentLog(p, sessionId);
        expect(
          ofType(events, 'tool.failed').map((e) => e.payload),
          `${context}\nno action failed or was lost`,
        ).toEqual([]);
        sideEffectsMatchLog(p.cwd, events, { failuresAllowed: false });
        const expected = mode === 'run' ? ['a', 'b', 'c', 'd', 'e', 'f'] : ['a', 'b', 'c', 'd'];
        expect([...counts(p.cwd)].sort(), context).toEqual(expected);
        const answers = ofType(events, 'turn.completed').map((e) => (e.payload as { answer?: string }).answer);
        expect(answers.sort(), context).toEqual(mode === 'run' ? ['first answer', 'second answer'] : ['first answer']);
        expect(ofType(events, 'turn.failed'), context).toEqual([]);
        if (i === 1) await sameThroughCli(p, sessionId, events);
      } finally {
        writeFileSync(join(p.cwd, 'release-a'), '');
        if (!first.exited) first.child.kill('SIGKILL');
        if (second && !second.exited) second.child.kill('SIGKILL');
      }
    });
    console.info(`20 interleavings: in ${followed} the second process found the first driving the thread`);
  }, 300_000);

  it('a stalled (SIGSTOP) lease holder is taken over after expiry and can write nothing when it wakes', async () => {
    const p = project(storeFor(), [act([{ id: 'a', tool: 'count', delayMs: 4000 }]), answer('carried on')], {
      leaseTtlMs: 1500,
    });
    const first = start(p.cwd, ['run', '--json', 'slow count']);
    try {
      const sessionId = await sessionOf(first);
      await actionInFlight(first, p.cwd, 'a');
      first.child.kill('SIGSTOP');

      const thief = await oar(p.cwd, ['resume', sessionId]);
      expect(thief.code, describeProc(thief)).toBe(0);
      const note = /thread \S+ is being driven by (\S+) \(lease until/.exec(thief.err);
      if (note) expect(note[1]).toMatch(new RegExp(`:${first.pid}$`));
      const before = await consistentLog(p, sessionId);
      const lost = ofType(before, 'tool.failed', 'a');
      expect(lost.map((e) => e.status)).toEqual(['lost']);
      expect(lost[0]?.payload).toMatchObject({ actionStatus: 'lost' });
      expect(ofType(before, 'turn.completed').map((e) => (e.payload as { answer?: string }).answer)).toEqual([
        'carried on',
      ]);
      const leasesBefore = await leaseRows(p, sessionId);
      expect(leasesBefore).toHaveLength(1);
      expect(leasesBefore[0]?.token, 'the takeover is a new tenure').toBeGreaterThanOrEqual(2);
      expect(leasesBefore[0]?.owner ?? '').not.toMatch(new RegExp(`:${first.pid}$`));

      first.child.kill('SIGCONT');
      const woke = await exitOf(first, 'the stalled first process after SIGCONT', 60_000);
      const context = `first after SIGCONT: ${describeProc(Object.assign(first, woke))}`;
      const after = await consistentLog(p, sessionId);
      expect(after.length, `${context}\nnothing appended after the takeover`).toBe(before.length);
      expect(after, context).toEqual(before);
      expect(ofType(after, 'tool.result', 'a'), context).toEqual([]);
      expect(await leaseRows(p, sessionId), `${context}\nthe woken process left the lease alone`).toEqual(leasesBefore);
      // The effect happened once, before the stop (the test waited for it); it was neither re-run nor repeated.
      expect(counts(p.cwd)).toEqual(['a']);
      sideEffectsMatchLog(p.cwd, after, { failuresAllowed: true });
      await sameThroughCli(p, sessionId, after);
      rmSync(p.cwd, { recursive: true, force: true });
    } finally {
      if (!first.exited) {
        first.child.kill('SIGCONT');
        first.child.kill('SIGKILL');
      }
    }
  }, 120_000);

  it('a process working on another session never recovers a live session (10 trials)', async () => {
    await trials(10, 3, async (i, dirs) => {
      const p = project(storeFor(), [act([{ id: 'a', tool: 'gate' }]), answer('A done')], {
        extra: { 'script-b.json': [act([{ id: 'B1', tool: 'count' }]), answer('B done')] },
      });
      dirs.push(p.cwd);
      const first = start(p.cwd, ['run', '--json', 'session A']);
      try {
        const a = await sessionOf(first);
        await actionInFlight(first, p.cwd, 'a');
        const before = await consistentLogOpen(p, a);

        const runB = await oar(p.cwd, ['run', '--json', '--model', 'script:script-b.json', 'session B']);
        expect(runB.code, describeProc(runB)).toBe(0);
        const b = resultLine(runB)?.sessionId ?? '';
        expect(resultLine(runB)).toMatchObject({ status: 'completed', answer: 'B done' });
        expect(b).not.toBe(a);
        const resumeB = await oar(p.cwd, ['resume', b]);
        expect(resumeB.code, describeProc(resumeB)).toBe(0);
        if (i % 2 === 1) {
          // `oar resume` without a session lists what is resumable and resumes nothing.
          const list = await oar(p.cwd, ['resume', '--json']);
          expect(list.code, describeProc(list)).toBe(0);
          const listed = JSON.parse(list.out) as { sessionId: string; reason: string }[];
          expect(listed.map((r) => r.sessionId)).toEqual([a]);
          expect(listed[0]?.reason).toMatch(new RegExp(`being driven by \\S+:${first.pid} until`));
        }

        // A is untouched: still in flight in the first process, nothing appended by anybody else.
        expect(first.exited, 'the first process is still driving A').toBe(false);
        const during = await consistentLogOpen(p, a);
        expect(during, 'nothing was appended to A by the other processes').toEqual(before);
        expect(ofType(during, 'tool.failed')).toEqual([]);
        const leases = await leaseRows(p, a);
        expect(leases.map((l) => l.owner)).toEqual([expect.stringMatching(new RegExp(`:${first.pid}$`))]);

        writeFileSync(join(p.cwd, 'release-a'), '');
        const done = await exitOf(first, 'the first oar run');
        const context = describeProc(Object.assign(first, done));
        expect(done.code, context).toBe(0);
        expect(resultLine(first), context).toMatchObject({ sessionId: a, status: 'completed', answer: 'A done' });
        const eventsA = await consistentLog(p, a);
        expect(ofType(eventsA, 'tool.failed'), 'A lost nothing').toEqual([]);
        expect(ofType(eventsA, 'tool.started', 'a')).toHaveLength(1);
        expect(ofType(eventsA, 'tool.result', 'a')).toHaveLength(1);
        const eventsB = await consistentLog(p, b);
        expect(ofType(eventsB, 'tool.result', 'B1')).toHaveLength(1);
        sideEffectsMatchLog(p.cwd, [...eventsA, ...eventsB], { failuresAllowed: false });
        expect([...counts(p.cwd)].sort()).toEqual(['B1', 'a']);
      } finally {
        writeFileSync(join(p.cwd, 'release-a'), '');
        if (!first.exited) first.child.kill('SIGKILL');
      }
    });
  }, 300_000);

  it('oar interrupt from another process stops the lease holder; the turn is cancelled once', async () => {
    const p = project(storeFor(), [act([{ id: 'a', tool: 'gate' }]), answer('never')]);
    const first = start(p.cwd, ['run', '--json', 'wait at the gate']);
    try {
      const sessionId = await sessionOf(first);
      await actionInFlight(first, p.cwd, 'a');
      const interrupt = await oar(p.cwd, ['interrupt', sessionId, '--json', '--reason', 'stop from elsewhere']);
      expect(interrupt.code, describeProc(interrupt)).toBe(0);
      expect(JSON.parse(interrupt.out)).toMatchObject({ interrupted: true });
      const done = await exitOf(first, 'the interrupted oar run');
      const context = describeProc(Object.assign(first, done));
      // A turn cancelled by an interrupt, from this terminal or from anywhere else: exit 130.
      expect(done.code, context).toBe(130);
      expect(resultLine(first), context).toMatchObject({ sessionId, status: 'cancelled' });
      const events = await consistentLog(p, sessionId);
      expect(
        events.filter((e) => e.type === 'turn.completed' || e.type === 'turn.failed').map((e) => e.status),
        context,
      ).toEqual(['cancelled']);
      expect(ofType(events, 'tool.result')).toEqual([]);
      expect(ofType(events, 'tool.failed', 'a')).toHaveLength(1);
      expect(counts(p.cwd)).toEqual(['a']);
      sideEffectsMatchLog(p.cwd, events, { failuresAllowed: true });
      // The holder released the lease on its way out: nobody holds the thread.
      expect((await leaseRows(p, sessionId)).map((l) => l.owner)).toEqual([null]);
      rmSync(p.cwd, { recursive: true, force: true });
    } finally {
      if (!first.exited) first.child.kill('SIGKILL');
    }
  }, 120_000);

  it('two resumes at once after kill -9: the action is lost once, never re-run, the turn ends once (10 trials)', async () => {
    const steps = [
      act([
        { id: 'a', tool: 'count' },
        { id: 'b', tool: 'count', delayMs: 30_000, depends: 'a' },
      ]),
      answer('recovered'),
    ];
    await trials(10, 3, async (i, dirs) => {
      const p = project(storeFor(), steps);
      dirs.push(p.cwd);
      const first = start(p.cwd, ['run', '--json', 'count twice']);
      const sessionId = await sessionOf(first);
      await actionInFlight(first, p.cwd, 'b');
      first.child.kill('SIGKILL');
      await exitOf(first, 'the killed process');
      expect(counts(p.cwd)).toEqual(['a', 'b']);

      const args = i % 2 === 0 ? ['resume', sessionId] : ['resume', '--json', sessionId];
      const [r1, r2] = await Promise.all([oar(p.cwd, args), oar(p.cwd, ['resume', sessionId])]);
      expect(r1.code, describeProc(r1)).toBe(0);
      expect(r2.code, describeProc(r2)).toBe(0);
      const context = `resume 1: ${describeProc(r1)}\nresume 2: ${describeProc(r2)}`;

      const events = await consistentLog(p, sessionId);
      const lost = ofType(events, 'tool.failed');
      expect(
        lost.map((e) => `${graphActionId(e)}:${e.status}`),
        context,
      ).toEqual(['b:lost']);
      expect(ofType(events, 'tool.started').map(graphActionId), context).toEqual(['a', 'b']);
      expect(ofType(events, 'tool.result').map(graphActionId), context).toEqual(['a']);
      const endings = events.filter((e) => e.type === 'turn.completed' || e.type === 'turn.failed');
      expect(
        endings.map((e) => [e.type, (e.payload as { answer?: string }).answer]),
        context,
      ).toEqual([['turn.completed', 'recovered']]);
      expect(counts(p.cwd), 'nothing re-run').toEqual(['a', 'b']);
      sideEffectsMatchLog(p.cwd, events, { failuresAllowed: true });
      if (i === 0) await sameThroughCli(p, sessionId, events);
    });
  }, 300_000);
}

/** The log of a session that is still being driven: sequences gap-free (the replay may lag, so it is not compared). */
async function consistentLogOpen(p: Project, sessionId: string): Promise<RuntimeEvent[]> {
  const { events } = await readLog(p, sessionId);
  expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
  return events;
}

/** `oar events --json` and `oar replay` report what the test read itself. */
async function sameThroughCli(p: Project, sessionId: string, events: RuntimeEvent[]): Promise<void> {
  const printed = await oar(p.cwd, ['events', sessionId, '--json']);
  expect(printed.code, describeProc(printed)).toBe(0);
  expect(lines(printed.out)).toEqual(JSON.parse(JSON.stringify(events)));
  const replay = await oar(p.cwd, ['replay', sessionId]);
  expect(replay.code, describeProc(replay)).toBe(0);
  expect(JSON.parse(replay.out)).toEqual({ equal: true, differences: [], contradictions: [], events: events.length });
}

describe('thread leases across oar processes on SQLite', () => {
  scenarios(() => undefined);
});

/**
 * A database of our own on the PostgreSQL server, dropped after the file. Each trial still gets its own schema in
 * it. Why not the shared database: opening a store introspects EVERY schema of its database (see the last test),
 * so another test file dropping its schemas at the same moment makes `oar` fail to start with
 * store_migration_failed — a failure that has nothing to do with leases. When the server refuses CREATE DATABASE
 * the shared database is used (with that risk), and the schemas are dropped one by one.
 */
interface TestDatabase {
  url: string;
  isPrivate: boolean;
  /** A store URL with a fresh schema of this database. */
  newStore(): string;
  dispose(): Promise<void>;
}

async function privateDatabase(): Promise<TestDatabase> {
  const name = randomName('oar_leases_');
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  try {
    await admin.query(`create database "${name}"`);
  } catch (error) {
    console.warn(`lease tests share the database of ${POSTGRES_URL}: cannot create one (${(error as Error).message})`);
    const schemas: string[] = [];
    return {
      url: POSTGRES_URL,
      isPrivate: false,
      newStore() {
        const schema = randomName('oar_t_');
        schemas.push(schema);
        return withSchema(POSTGRES_URL, schema);
      },
      async dispose() {
        const client = new pg.Client({ connectionString: POSTGRES_URL });
        await client.connect();
        try {
          for (const schema of schemas) await client.query(`drop schema if exists "${schema}" cascade`);
        } finally {
          await client.end();
        }
      },
    };
  } finally {
    await admin.end();
  }
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    isPrivate: true,
    newStore: () => withSchema(url.toString(), randomName('oar_t_')),
    async dispose() {
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      try {
        await client.query(`drop database if exists "${name}" with (force)`);
      } finally {
        await client.end();
      }
    },
  };
}

describe('thread leases across oar processes on PostgreSQL', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL lease tests: ${unavailable.message}`);
    return;
  }
  // Created in beforeAll (not while collecting), so a run that filters these tests out creates nothing to leak.
  let created: TestDatabase | undefined;
  beforeAll(async () => {
    created = await privateDatabase();
  });
  afterAll(async () => {
    await created?.dispose();
  });
  const database = (): TestDatabase => {
    if (!created) throw new Error('the test database was not created');
    return created;
  };
  scenarios(() => database().newStore());

  /**
   * Seen: Kysely's Migrator introspected every table of every schema in the database, so a schema dropped by
   * anybody else at that moment failed Store.open (and so `oar`) with `schema "…" does not exist`. The store's own
   * migration runner reads only OAR's migration table. Here other schemas of the same (private) database are
   * created and dropped while stores open.
   */
  it('a store opens while other schemas of its database are being dropped', async () => {
    expect(database().isPrivate, 'this test churns schemas, so it needs a database of its own').toBe(true);
    let stop = false;
    const churn = async (n: number) => {
      const client = new pg.Client({ connectionString: database().url });
      await client.connect();
      try {
        for (let i = 0; !stop; i++) {
          const schema = `oar_t_churn_${n}_${i}`;
          await client.query(`create schema ${schema}; create table ${schema}.t (id serial primary key)`);
          await client.query(`drop schema ${schema} cascade`);
        }
      } finally {
        await client.end();
      }
    };
    const churning = [churn(1), churn(2)];
    const failures: string[] = [];
    const store = database().newStore();
    try {
      for (let i = 0; i < 10; i++) {
        try {
          await (await Store.open(store)).close();
        } catch (error) {
          failures.push(`Store.open #${i + 1}: ${(error as Error).message}`);
        }
      }
      const p = project(store, [answer('hello')]);
      for (let i = 0; i < 2; i++) {
        const run = await oar(p.cwd, ['run', '--json', 'hello']);
        if (run.code !== 0) failures.push(`oar run #${i + 1}: exit ${run.code}: ${run.err.trim()}`);
      }
      rmSync(p.cwd, { recursive: true, force: true });
    } finally {
      stop = true;
      await Promise.all(churning);
    }
    expect(failures).toEqual([]);
  }, 180_000);
});
