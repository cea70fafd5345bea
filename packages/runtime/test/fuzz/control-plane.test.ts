import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bindingModel, OarRuntimeError, Runtime, Store } from '../../src/index.js';

/**
 * Control-plane commands and queries with random ids and random payloads — as a future HTTP client could send
 * them, so not only the shapes TypeScript allows — against a Runtime (control plane only) on a SQLite store that
 * already holds real history: a completed turn, a turn waiting for an approval with a queued turn behind it, a
 * failed task. Every rejection is an OarRuntimeError `{code, message, retryable}` (never a TypeError or a SQLite
 * error), and nothing already recorded changes: each session's log before a command is a prefix of its log after,
 * and at the end every session replays to its stored read models.
 *
 * A fixed seed (fast-check prints it, with the failing case's path); OAR_FUZZ_SEED / OAR_FUZZ_RUNS explore more.
 */
const SEED = Number(process.env.OAR_FUZZ_SEED ?? 20_151_115);
const runs = (n: number) => ({
  seed: SEED,
  numRuns: Math.max(1, Math.round(n * Number(process.env.OAR_FUZZ_RUNS ?? 1))),
});

const dir = mkdtempSync(join(tmpdir(), 'oar-fuzz-control-'));
const workspace = join(dir, 'ws');
let store: Store;
let runtime: Runtime;
/** Real ids of the history, by kind; the generators pick from them (and from anything else). */
const ids: Record<'session' | 'thread' | 'turn' | 'task' | 'action' | 'queued' | 'run', string[]> = {
  session: [],
  thread: [],
  turn: [],
  task: [],
  action: [],
  queued: [],
  run: [],
};

function script(name: string, steps: unknown[]): string {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify({ steps }));
  return `script:${file}`;
}
const act = (calls: unknown[]) => ({ protocol: { kind: 'act', calls } });
const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

beforeAll(async () => {
  mkdirSync(workspace);
  writeFileSync(join(workspace, 'README.md'), '# Sample\n');
  store = await Store.open(join(dir, 'oar.db'));
  // A worker makes the history, then goes; the fuzzed runtime is a control plane only.
  const driver = await Runtime.create({
    store,
    workspaceRoot: workspace,
    model: (agent, binding) => bindingModel(agent, binding, {}),
  });
  const session = async (model: string, inputs: string[]) => {
    const { sessionId } = await driver.createSession({ title: model, binding: { model } });
    for (const input of inputs) await driver.submitTurn({ sessionId, input });
    await driver.settled(sessionId);
    return sessionId;
  };
  const read = { id: 'r1', type: 'tool', name: 'read', args: { filePath: 'README.md' } };
  const write = { id: 'w1', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'x\n' } };
  const missing = { id: 'm1', type: 'tool', name: 'read', args: { filePath: 'missing.txt' } };
  await session(script('done.json', [act([read]), answer('read it')]), ['read the README']);
  await session(script('waits.json', [act([write]), answer('written')]), ['write it', 'and then this']);
  await session(script('fails.json', [act([missing]), answer('it is missing')]), ['read a missing file']);
  await driver.close();

  runtime = await Runtime.create({
    store,
    workspaceRoot: workspace,
    worker: false,
    resumeOnStart: false,
    // Resolves bound models (checkBinding, updateBinding verify them) but never calls one: no worker runs here.
    model: (agent, binding) => bindingModel(agent, binding, {}),
  });
  for (const { sessionId } of await runtime.listSessions()) {
    ids.session.push(sessionId);
    for (const e of await runtime.log.read(sessionId)) {
      if (e.threadId) ids.thread.push(e.threadId);
      if (e.turnId) ids.turn.push(e.turnId);
      if (e.taskId) ids.task.push(e.taskId);
      if (e.runId) ids.run.push(e.runId);
      if (e.type === 'action.required' && e.actionId) ids.action.push(e.actionId);
      if (e.type === 'turn.submitted' && e.status === 'queued' && e.turnId) ids.queued.push(e.turnId);
    }
  }
  for (const key of Object.keys(ids) as (keyof typeof ids)[]) ids[key] = [...new Set(ids[key])];
  // The history the fuzzer needs to reach the deep paths.
  expect(ids.session).toHaveLength(3);
  expect(ids.action.length).toBeGreaterThan(0);
  expect(ids.queued.length).toBeGreaterThan(0);
  expect(ids.task.length).toBeGreaterThan(1);
}, 60_000);

afterAll(async () => {
  await runtime?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

// ----- generators ----------------------------------------------------------------------------------------------

const garbage = fc.oneof(
  fc.constantFrom(null, undefined, 0, -1, 1.5, true, '', ' ', '../x', 'a'.repeat(300), [], {}),
  fc.jsonValue({ maxDepth: 2 }),
);
/** An id of `kind`: mostly a real one, else another kind's, random text or any value at all. */
const id = (kind: keyof typeof ids) =>
  fc.oneof(
    {
      arbitrary: fc
        .constant(null)
        .map(() => ids[kind])
        .chain((real) => fc.constantFrom(...(real.length ? real : ['none']))),
      weight: 5,
    },
    {
      arbitrary: fc
        .constantFrom('session', 'thread', 'turn', 'task', 'action', 'queued', 'run')
        .chain((k) => fc.constantFrom(...(ids[k as keyof typeof ids].length ? ids[k as keyof typeof ids] : ['none']))),
      weight: 1,
    },
    { arbitrary: fc.string({ maxLength: 20 }), weight: 1 },
    { arbitrary: garbage, weight: 1 },
  );
const text = fc.oneof({ arbitrary: fc.string({ maxLength: 40 }), weight: 4 }, { arbitrary: garbage, weight: 1 });
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
/** Sometimes the whole input is replaced by anything at all. */
const input = <T>(shaped: fc.Arbitrary<T>) =>
  fc.oneof({ arbitrary: shaped, weight: 6 }, { arbitrary: garbage, weight: 1 });
const clean = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

const bindingUpdate = fc.oneof(
  fc.record(
    {
      model: fc.constantFrom('script:/nope.json', 'openai:gpt-4.1', 'nope', ''),
      workspaceRoot: fc.constantFrom(workspace, join(dir, 'missing'), '/', ''),
      queuePolicy: fc.constantFrom('queue', 'reject', 'x'),
      onProtocolFailure: fc.constantFrom('fail', 'plain_text'),
      permissions: fc.record({ mode: fc.constantFrom('default', 'bypass', 'read-only', 'x'), rules: fc.constant([]) }),
      limits: fc.record({ maxSteps: fc.integer({ min: -1, max: 50 }) }, { requiredKeys: [] }),
      tools: fc.array(fc.constantFrom('read', 'write', 'nope'), { maxLength: 2 }),
      toolModules: fc.array(fc.constantFrom('/nope.mjs', 'node:fs'), { maxLength: 1 }),
      agents: fc.constant([]),
    },
    { requiredKeys: [] },
  ),
  garbage,
);

type Call = { name: string; run: (r: Runtime) => Promise<unknown> };
const call = <T>(name: string, arb: fc.Arbitrary<T>, run: (r: Runtime, input: T) => Promise<unknown>) =>
  arb.map((value): Call => ({ name: `${name}(${safeJson(value)})`, run: (r) => run(r, value) }));
const safeJson = (value: unknown) => {
  try {
    return JSON.stringify(value)?.slice(0, 300) ?? String(value);
  } catch {
    return String(value);
  }
};
// biome-ignore lint/suspicious/noExplicitAny: the fuzzer passes what TypeScript would refuse, on purpose
type Loose = any;

const commands = fc.oneof(
  call(
    'createSession',
    input(
      fc
        .record({
          title: maybe(text),
          sessionId: maybe(fc.oneof(id('session'), fc.string())),
          agent: maybe(text),
          binding: maybe(bindingUpdate),
        })
        .map(clean),
    ),
    (r, i: Loose) => r.createSession(i),
  ),
  call('updateBinding', input(fc.record({ sessionId: id('session'), update: bindingUpdate })), (r, i: Loose) =>
    r.updateBinding(i),
  ),
  call(
    'submitTurn',
    input(
      fc
        .record({
          sessionId: id('session'),
          threadId: maybe(id('thread')),
          turnId: maybe(fc.oneof(id('turn'), fc.string())),
          input: text,
          source: maybe(text),
        })
        .map(clean),
    ),
    (r, i: Loose) => r.submitTurn(i),
  ),
  call(
    'removeQueuedTurn',
    input(fc.record({ sessionId: id('session'), threadId: id('thread'), turnId: id('queued') })),
    (r, i: Loose) => r.removeQueuedTurn(i),
  ),
  call(
    'promoteQueuedTurn',
    input(fc.record({ sessionId: id('session'), threadId: id('thread'), turnId: id('queued') })),
    (r, i: Loose) => r.promoteQueuedTurn(i),
  ),
  call(
    'interruptTurn',
    input(
      fc
        .record({
          sessionId: id('session'),
          threadId: maybe(id('thread')),
          reason: maybe(text),
          waitMs: maybe(fc.constantFrom(0, 1, 50, -5, Number.NaN)),
        })
        .map(clean),
    ),
    (r, i: Loose) => r.interruptTurn(i),
  ),
  call(
    'respondAction',
    input(
      fc
        .record({
          sessionId: id('session'),
          actionId: id('action'),
          decision: fc.oneof(fc.constantFrom('approve', 'deny', 'approve_for_session'), text),
          reason: maybe(text),
          payload: maybe(fc.oneof(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), garbage)),
        })
        .map(clean),
    ),
    (r, i: Loose) => r.respondAction(i),
  ),
  call(
    'closeSubagent',
    input(
      fc
        .record({ sessionId: id('session'), subagentId: fc.oneof(fc.string(), garbage), reason: maybe(text) })
        .map(clean),
    ),
    (r, i: Loose) => r.closeSubagent(i),
  ),
  call(
    'cancelTask',
    input(fc.record({ sessionId: id('session'), taskId: id('task'), reason: maybe(text) }).map(clean)),
    (r, i: Loose) => r.cancelTask(i),
  ),
  call('retryTask', input(fc.record({ sessionId: id('session'), taskId: id('task') })), (r, i: Loose) =>
    r.retryTask(i),
  ),
  call(
    'setState',
    input(
      fc
        .record({
          sessionId: id('session'),
          threadId: maybe(id('thread')),
          key: fc.oneof(fc.constantFrom('k', 'a.b:c-d'), text),
          value: fc.oneof(fc.jsonValue({ maxDepth: 3 }), garbage),
        })
        .map(clean),
    ),
    (r, i: Loose) => r.setState(i),
  ),
  // Queries: they must refuse as cleanly (and write nothing; the exports each record one fact by design).
  call(
    'getSession',
    input(
      fc
        .record({
          sessionId: id('session'),
          cursor: maybe(fc.oneof(fc.integer({ min: -5, max: 100 }), garbage)),
          limit: maybe(fc.oneof(fc.integer({ min: -5, max: 100 }), garbage)),
        })
        .map(clean),
    ),
    (r, i: Loose) => r.getSession(i),
  ),
  call('getThreadRead', input(fc.record({ sessionId: id('session'), threadId: id('thread') })), (r, i: Loose) =>
    r.getThreadRead(i),
  ),
  call('getBinding', id('session'), (r, i: Loose) => r.getBinding(i)),
  call(
    'getToolInventory',
    input(fc.record({ sessionId: id('session'), threadId: maybe(id('thread')) }).map(clean)),
    (r, i: Loose) => r.getToolInventory(i),
  ),
  call(
    'getState',
    input(fc.record({ sessionId: id('session'), threadId: maybe(id('thread')), key: maybe(text) }).map(clean)),
    (r, i: Loose) => r.getState(i),
  ),
  call(
    'listSubagents',
    input(fc.record({ sessionId: id('session'), threadId: maybe(id('thread')) }).map(clean)),
    (r, i: Loose) => r.listSubagents(i),
  ),
  call('replaySession', id('session'), (r, i: Loose) => r.replaySession(i)),
  call('exportReplay', id('session'), (r, i: Loose) => r.exportReplay(i)),
  call('exportEvidence', id('session'), (r, i: Loose) => r.exportEvidence(i)),
  call(
    'exportReview',
    input(
      fc
        .record({
          sessionId: id('session'),
          threadId: maybe(id('thread')),
          turnId: maybe(id('turn')),
          taskId: maybe(id('task')),
          format: maybe(fc.oneof(fc.constantFrom('json', 'markdown'), text)),
        })
        .map(clean),
    ),
    (r, i: Loose) => r.exportReview(i),
  ),
  call('checkBinding', maybe(id('session')), (r, i: Loose) => r.checkBinding(i)),
);

// ----- checks --------------------------------------------------------------------------------------------------

/** A rejection is the runtime's structured error, and not a bug report. */
function structured(name: string, error: unknown): void {
  if (!(error instanceof OarRuntimeError)) {
    const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new Error(`${name} rejected with something other than an OarRuntimeError: ${what}`, { cause: error });
  }
  expect(error.code, name).toMatch(/^[a-z][a-z0-9_]*$/);
  expect(error.code, `${name}: ${error.message}`).not.toBe('internal_error');
  expect(typeof error.error.message, name).toBe('string');
  expect(typeof error.error.retryable, name).toBe('boolean');
}

async function logs(): Promise<Map<string, RuntimeEvent[]>> {
  const all = new Map<string, RuntimeEvent[]>();
  for (const { sessionId } of await runtime.listSessions()) all.set(sessionId, await runtime.log.read(sessionId));
  return all;
}

describe('control-plane commands never fail unstructured', () => {
  it('random commands: structured rejections, and nothing recorded changes', async () => {
    await fc.assert(
      fc.asyncProperty(commands, async (command) => {
        const before = await logs();
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            command.run(runtime),
            new Promise((_, reject) => {
              timer = setTimeout(() => reject(new Error(`${command.name} did not settle in 20 s`)), 20_000);
            }),
          ]);
        } catch (error) {
          structured(command.name, error);
        } finally {
          clearTimeout(timer);
        }
        const after = await logs();
        for (const [sessionId, events] of before) {
          expect(
            after.get(sessionId)?.slice(0, events.length),
            `${command.name}: the recorded log of ${sessionId}`,
          ).toEqual(events);
        }
      }),
      runs(200),
    );
    for (const sessionId of (await logs()).keys()) {
      const replay = await runtime.replaySession(sessionId);
      expect(replay, `replay of ${sessionId}`).toMatchObject({ equal: true, differences: [], contradictions: [] });
    }
  }, 300_000);
});

describe('inputs a JSON caller can send: invalid_input, as a rejected promise', () => {
  // Found by the property above: each of these failed with a TypeError, a SQLite error, a ZodError or an
  // InvalidEventError (some thrown synchronously) before the Runtime checked its inputs' shapes.
  const session = () => ids.session[0] ?? '';
  const cases: [string, (r: Runtime) => Promise<unknown>][] = [
    ['listSubagents(null)', (r) => r.listSubagents(null as Loose)],
    ['submitTurn(undefined)', (r) => r.submitTurn(undefined as Loose)],
    ['getSession with limit 1.5', (r) => r.getSession({ sessionId: session(), limit: 1.5 })],
    ['getSession with a cursor that is an array', (r) => r.getSession({ sessionId: session(), cursor: [] as Loose })],
    ['submitTurn with an empty turnId', (r) => r.submitTurn({ sessionId: session(), input: 'hi', turnId: '' })],
    [
      'submitTurn with an object as turnId',
      (r) => r.submitTurn({ sessionId: session(), input: 'hi', turnId: {} as Loose }),
    ],
    [
      'respondAction with an object as sessionId',
      (r) => r.respondAction({ sessionId: {} as Loose, actionId: 'a', decision: 'approve' }),
    ],
    [
      'removeQueuedTurn with an array as threadId',
      (r) => r.removeQueuedTurn({ sessionId: session(), threadId: [] as Loose, turnId: 't' }),
    ],
    ['createSession with a number as title', (r) => r.createSession({ title: 5 as Loose })],
    ['replaySession({})', (r) => r.replaySession({} as Loose)],
    ['checkBinding([])', (r) => r.checkBinding([] as Loose)],
    ['interruptTurn with waitMs NaN', (r) => r.interruptTurn({ sessionId: session(), waitMs: Number.NaN })],
  ];
  it.each(cases)('%s', async (_name, run) => {
    let result: Promise<unknown> | undefined;
    expect(() => {
      result = run(runtime);
    }, 'no synchronous throw').not.toThrow();
    const error = await result?.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(OarRuntimeError);
    expect((error as OarRuntimeError).code).toBe('invalid_input');
  });
});
