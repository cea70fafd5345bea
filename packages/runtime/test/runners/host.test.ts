import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import type { AgentAPIError } from '@oar/runner-sdk';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScript, RunnerBinding } from '../../src/index.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, allEvents, answer, ofType, payload, waitFor } from '../engine/helpers.js';
import { tempDir } from '../support/temp-dirs.js';
import { audits, codeOf, inProcess } from './probe.js';

/**
 * The runner host's security matrix and failure modes (issue section 10, docs/runners.md): each refusal is an
 * AgentAPIError with the spec's code AND an audit event; each misbehaving runner fails the turn with a clear code
 * and loses nothing already recorded. In-process runners test the proxy; a fake runner process (fixtures/runners/fake,
 * raw NDJSON) tests the transport.
 */

const FAKE = join(import.meta.dirname, '../fixtures/runners/fake');
const opened: Harness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const ANSWER: ModelScript = { steps: [{ text: 'model says hi' }, { text: 'model again' }] };

async function turnOn(runner: RunnerBinding, script: ModelScript = ANSWER, input = 'go') {
  const h = await harness(script, { mainAgent: { name: 'main', runner } });
  opened.push(h);
  const { sessionId } = await h.runtime.createSession({});
  await h.runtime.submitTurn({ sessionId, input });
  await h.runtime.settled(sessionId);
  return { h, sessionId, events: await allEvents(h, sessionId) };
}

const turnEnd = (events: RuntimeEvent[]) => events.find((e) => e.type === 'turn.completed' || e.type === 'turn.failed');
const turnError = (events: RuntimeEvent[]) =>
  (payload(turnEnd(events)).error ?? {}) as { code?: string; message?: string };

describe('the per-run API proxy refuses what the run was not granted', () => {
  it('answers the granted calls and audits them with run, runner, action and resource', async () => {
    const seen: string[] = [];
    const { events } = await turnOn(
      inProcess(async (_ctx, { api, emit }) => {
        const result = await api.models.invoke('default', [{ role: 'user', content: 'hi' }]);
        seen.push(result.message.content);
        await emit('message.completed', {
          message: { role: 'assistant', content: `answer: ${result.message.content}` },
        });
      }),
    );
    expect(seen).toEqual(['model says hi']);
    expect(payload(turnEnd(events)).answer).toBe('answer: model says hi');
    expect(ofType(events, 'model.completed')).toHaveLength(1);
    const [call] = audits(events);
    expect(call).toMatchObject({ action: 'models.invoke', result: 'allowed', resource: 'default' });
    expect(call?.runId).toMatch(/^run_/);
  });

  it('refuses a model, a tool, another conversation and an unknown artifact outside the run', async () => {
    const codes: Record<string, string> = {};
    const { events } = await turnOn(
      inProcess(
        async (ctx, { api }) => {
          codes.model = await codeOf(() => api.models.invoke('other', [{ role: 'user', content: 'x' }]));
          codes.tool = await codeOf(() => api.tools.call('write', { filePath: 'x.txt', content: 'x' }));
          codes.history = await codeOf(() => api.history.page({ conversation_id: 'thr_someone_else' }));
          codes.artifact = await codeOf(() => api.artifacts.read_range('art_not_in_this_session'));
          codes.rerank = await codeOf(() => api.models.rerank('default', 'q', ['a']));
          codes.storage = await codeOf(() => api.storage.get('plugin', 'k'));
          codes.detail = await codeOf(() => api.tools.get_detail('write'));
          expect(ctx.resources.tools.map((t) => t.tool_name)).toEqual(['read']);
        },
        {},
        { policy: { models: ['default'], tools: ['read'] } },
      ),
    );
    expect(codes).toEqual({
      model: 'unauthorized',
      tool: 'unauthorized',
      history: 'unauthorized',
      artifact: 'not_found',
      rerank: 'unauthorized',
      storage: 'unauthorized',
      detail: 'not_found',
    });
    expect(audits(events)).toEqual([
      expect.objectContaining({ action: 'models.invoke', result: 'refused', code: 'unauthorized', resource: 'other' }),
      expect.objectContaining({ action: 'tools.call', result: 'refused', code: 'unauthorized', resource: 'write' }),
      expect.objectContaining({
        action: 'history.page',
        result: 'refused',
        code: 'unauthorized',
        resource: 'thr_someone_else',
      }),
      expect.objectContaining({ action: 'artifacts.read_range', result: 'refused', code: 'not_found' }),
      // The manifest asks for invoke and stream only.
      expect.objectContaining({
        action: 'models.rerank',
        result: 'refused',
        code: 'unauthorized',
        resource: 'default',
      }),
      expect.objectContaining({
        action: 'storage.get',
        result: 'refused',
        code: 'unauthorized',
        scope: 'storage:plugin',
      }),
      expect.objectContaining({ action: 'tools.get_detail', result: 'refused', code: 'not_found' }),
    ]);
    // Nothing ran: no model call, no tool call.
    expect(ofType(events, 'model.requested')).toHaveLength(0);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
  });

  it('refuses a call with no run_id, with another run_id, and with the id of a run that ended', async () => {
    const codes: Record<string, string> = {};
    let first: string | undefined;
    const runner = inProcess(async (ctx, { api, emit }) => {
      if (!first) {
        first = ctx.run_id;
        codes.none = await codeOf(() => api.call('history.page', {}, undefined, null));
        codes.forged = await codeOf(() => api.call('history.page', {}, undefined, 'run_of_someone_else'));
      } else {
        // The previous turn's run has ended: its id opens nothing any more.
        codes.ended = await codeOf(() => api.call('history.page', {}, undefined, first as string));
      }
      await emit('run.completed', { message: { content: 'done' } });
    });
    const { h, sessionId, events } = await turnOn(runner);
    await h.runtime.submitTurn({ sessionId, input: 'again' });
    await h.runtime.settled(sessionId);
    expect(codes).toEqual({ none: 'unauthorized', forged: 'unauthorized', ended: 'unauthorized' });
    const refused = audits(events);
    expect(refused[0]).toMatchObject({ action: 'history.page', result: 'refused', code: 'unauthorized', runId: null });
    expect(refused[1]).toMatchObject({ result: 'refused', code: 'unauthorized', runId: 'run_of_someone_else' });
    const later = audits(await allEvents(h, sessionId)).slice(2);
    expect(later).toEqual([expect.objectContaining({ result: 'refused', code: 'unauthorized', runId: first })]);
    expect(payload(turnEnd(events)).answer).toBe('done');
  });

  it('refuses an oversized payload and a call over the rate limit', async () => {
    const codes: string[] = [];
    const { events } = await turnOn(
      inProcess(
        async (_ctx, { api }) => {
          codes.push(await codeOf(() => api.state.set('conversation', 'big', 'x'.repeat(300 * 1024))));
          codes.push(await codeOf(() => api.history.page()));
          codes.push(await codeOf(() => api.history.page()));
        },
        {},
        { policy: { callsPerMinute: 2 } },
      ),
    );
    expect(codes).toEqual(['payload_too_large', 'ok', 'rate_limited']);
    expect(audits(events).map((a) => a.code ?? a.result)).toEqual(['payload_too_large', 'allowed', 'rate_limited']);
  });

  it('runs a granted tool through the governed path and denies one the permission rules deny', async () => {
    const results: unknown[] = [];
    const h = await harness(ANSWER, {
      mainAgent: {
        name: 'main',
        runner: inProcess(async (_ctx, { api }) => {
          results.push(await api.tools.call('read', { filePath: 'README.md' }));
          results.push(await codeOf(() => api.tools.call('read', { filePath: 'secret.txt' })));
        }),
      },
      files: { 'README.md': 'hello readme\n', 'secret.txt': 'no\n' },
      permissions: { mode: 'default', rules: [{ decision: 'deny', tool: 'read', paths: ['secret.txt'] }] },
    });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(results[0]).toMatchObject({ ok: true, content: expect.stringContaining('hello readme') });
    // The runner is handed the call's idempotency key, the one its tool.started records.
    expect((results[0] as { idempotency_key?: string }).idempotency_key).toMatch(/^idem_[0-9a-f]{32}$/);
    expect((results[0] as { idempotency_key?: string }).idempotency_key).toBe(
      payload(ofType(events, 'tool.started')[0]).idempotencyKey,
    );
    expect(results[1]).toBe('unauthorized');
    const decisions = ofType(events, 'permission.evaluated').map((e) => payload(e).decision);
    expect(decisions).toEqual(['allow', 'deny']);
    expect(ofType(events, 'tool.result')).toHaveLength(1);
    expect(ofType(events, 'artifact.changed').length).toBeGreaterThanOrEqual(1);
  });
});

describe('a sub-agent bound to a runner', () => {
  it('runs the delegated turn on the runner; the delegation ends with its answer', async () => {
    let input: string | undefined;
    const helper = inProcess(async (ctx, { emit }) => {
      input = ctx.input.text ?? undefined;
      await emit('message.completed', { message: { role: 'assistant', content: 'the helper ran on a runner' } });
    });
    const h = await harness(
      {
        steps: [
          act([{ id: 'delegate', type: 'agent', name: 'helper', args: { prompt: 'do the helping' } }]),
          answer('main is done'),
        ],
      },
      { agents: [{ name: 'helper', description: 'helps', capabilities: [], carrier: 'tool', runner: helper }] },
    );
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(input).toContain('do the helping');
    const delegated = ofType(events, 'subagent.completed')[0];
    expect(payload(delegated).summary).toBe('the helper ran on a runner');
    expect(ofType(events, 'task.created').map((e) => payload(e).taskKind)).toContain('runner');
    const ends = ofType(events, 'turn.completed').map((e) => payload(e).answer);
    expect(ends).toEqual(['the helper ran on a runner', 'main is done']);
  });
});

describe('history.page', () => {
  it('pages the transcript of the conversation backward and forward with opaque cursors', async () => {
    const seen: { items: { role: string; content: string }[]; has_more: boolean; next_cursor: string | null }[] = [];
    let turn = 0;
    const runner = inProcess(async (ctx, { api, emit }) => {
      turn++;
      if (turn === 3) {
        expect(ctx.context.inline_policy).toMatchObject({ delivered_count: 0, source_total_count: 4 });
        const last = await api.history.page({ limit: 2 });
        seen.push(last);
        seen.push(await api.history.page({ limit: 2, before_cursor: last.next_cursor ?? '' }));
        seen.push(await api.history.page({ limit: 10, after_cursor: last.items[0]?.cursor as string }));
      }
      await emit('message.completed', { message: { role: 'assistant', content: `answer ${turn}` } });
    });
    const { h, sessionId } = await turnOn(runner, ANSWER, 'question 1');
    for (const input of ['question 2', 'question 3']) {
      await h.runtime.submitTurn({ sessionId, input });
      await h.runtime.settled(sessionId);
    }
    const contents = seen.map((page) => page.items.map((m) => `${m.role}:${m.content}`));
    expect(contents).toEqual([
      ['user:question 2', 'assistant:answer 2'],
      ['user:question 1', 'assistant:answer 1'],
      ['assistant:answer 2'],
    ]);
    expect(seen.map((page) => page.has_more)).toEqual([true, false, false]);
  });
});

type Page = {
  items: { event_id: string; event_type: string; sequence: number; payload_truncated?: boolean }[];
  next_cursor: string | null;
  has_more: boolean;
};

describe('events.get / events.page', () => {
  it("pages the conversation's envelopes with opaque cursors, big payloads left out of pages", async () => {
    const pages: Page[] = [];
    const got: Record<string, unknown> = {};
    const codes: string[] = [];
    const runner = inProcess(
      async (_ctx, { api }) => {
        pages.push((await api.events.page({ limit: 2 })) as Page);
        pages.push((await api.events.page({ limit: 200, before_cursor: pages[0]?.next_cursor ?? undefined })) as Page);
        const submitted = pages[1]?.items.find((e) => e.event_type === 'turn.submitted');
        got.submitted = submitted;
        got.whole = await api.events.get(submitted?.event_id ?? '');
        codes.push(await codeOf(() => api.events.get('evt_not_here')));
        codes.push(await codeOf(() => api.events.page({ before_cursor: 'bm90LWEtY3Vyc29y' })));
      },
      { permissions: { events: ['get', 'page'] } },
    );
    await turnOn(runner, ANSWER, `a long question ${'x'.repeat(6_000)}`);
    expect(pages[0]?.items).toHaveLength(2);
    expect(pages[0]?.has_more).toBe(true);
    const sequences = [...(pages[1]?.items ?? []), ...(pages[0]?.items ?? [])].map((e) => e.sequence);
    expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
    expect(new Set(sequences).size).toBe(sequences.length);
    expect(got.submitted).toMatchObject({ payload_truncated: true });
    expect(JSON.stringify(got.whole)).toContain('x'.repeat(6_000));
    expect(codes).toEqual(['not_found', 'invalid_argument']);
  });
});

describe('knowledge.retrieve', () => {
  it('searches a workspace folder indexed with FTS5, only the granted knowledge bases', async () => {
    let found: { results: { content: string; metadata: { source: string }; score: number }[] } | undefined;
    const codes: string[] = [];
    let offered: string[] = [];
    const runner = inProcess(
      async (ctx, { api }) => {
        offered = ctx.resources.knowledge_bases.map((kb) => kb.kb_id);
        found = await api.call('knowledge.retrieve', {
          kb_id: 'docs',
          query_text: 'where do pineapples grow?',
          top_k: 2,
        });
        codes.push(await codeOf(() => api.call('knowledge.retrieve', { kb_id: 'private', query_text: 'x' })));
        codes.push(await codeOf(() => api.call('knowledge.retrieve', { kb_id: 'nowhere', query_text: 'x' })));
      },
      { permissions: { knowledge_bases: ['retrieve'] } },
      {
        knowledge: [
          { id: 'docs', folder: 'docs' },
          { id: 'private', folder: 'private' },
        ],
        policy: { knowledgeBases: ['docs'] },
      },
    );
    const h = await harness(ANSWER, {
      mainAgent: { name: 'main', runner },
      files: {
        'README.md': 'not in the knowledge base: pineapples pineapples pineapples\n',
      },
    });
    opened.push(h);
    const { mkdirSync, writeFileSync } = await import('node:fs');
    mkdirSync(join(h.workspace, 'docs'));
    mkdirSync(join(h.workspace, 'private'));
    writeFileSync(
      join(h.workspace, 'docs/fruit.md'),
      '# Fruit\n\nPineapples grow in warm places.\n\nApples grow in orchards.\n',
    );
    writeFileSync(join(h.workspace, 'docs/tools.md'), 'Hammers and saws.\n');
    writeFileSync(join(h.workspace, 'private/secret.md'), 'pineapples are private\n');
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    expect(offered).toEqual(['docs']);
    expect(found?.results[0]).toMatchObject({
      content: 'Pineapples grow in warm places.',
      metadata: { source: 'docs/fruit.md' },
    });
    expect(found?.results.every((r) => r.metadata.source.startsWith('docs/'))).toBe(true);
    expect(codes).toEqual(['unauthorized', 'unauthorized']);
    expect(audits(await allEvents(h, sessionId)).map((a) => [a.action, a.resource, a.result])).toEqual([
      ['knowledge.retrieve', 'docs', 'allowed'],
      ['knowledge.retrieve', 'private', 'refused'],
      ['knowledge.retrieve', 'nowhere', 'refused'],
    ]);
  });
});

describe('budgets', () => {
  it('refuse a runner model call past a budget without making the thread wait', async () => {
    const codes: string[] = [];
    let reason: unknown;
    const runner = inProcess(async (_ctx, { api, emit }) => {
      codes.push(await codeOf(() => api.models.invoke('default', [{ role: 'user', content: 'one' }])));
      try {
        await api.models.invoke('default', [{ role: 'user', content: 'two' }]);
        codes.push('ok');
      } catch (error) {
        codes.push((error as AgentAPIError).code);
        reason = (error as AgentAPIError).details.reason;
      }
      await emit('message.completed', { message: { role: 'assistant', content: 'stopped by the budget' } });
    });
    const h = await harness(ANSWER, {
      mainAgent: { name: 'main', runner },
      budgets: { turn: { modelCalls: 1 }, onExceeded: 'wait' },
    });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(codes).toEqual(['ok', 'rate_limited']);
    expect(reason).toBe('budget_exceeded');
    expect(ofType(events, 'quota.blocked')).toHaveLength(1);
    expect(ofType(events, 'model.requested')).toHaveLength(1);
    expect(payload(turnEnd(events)).answer).toBe('stopped by the budget');
  });
});

describe('the result stream', () => {
  it('keeps a credential the runner sends out of the record, the answer and the exports', async () => {
    const key = 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f';
    const { h, sessionId, events } = await turnOn(
      inProcess(async (_ctx, { emit }) => {
        await emit('artifact.created', { name: 'dump.txt', content: `OPENAI_API_KEY=${key}` });
        await emit('message.completed', { message: { role: 'assistant', content: `the key is ${key}` } });
      }),
    );
    expect(payload(turnEnd(events)).answer).toContain('[REDACTED');
    const evidence = await h.runtime.exportEvidence(sessionId);
    const everything = JSON.stringify([events, await h.runtime.exportReplay(sessionId), evidence]);
    expect(everything).not.toContain(key);
    // The runner run is a task attempt of the turn: the evidence shows it.
    const runId = ofType(events, 'task.created')[0]?.runId as string;
    expect(JSON.stringify(evidence)).toContain(runId);
  });

  it('records state.updated (checked) and artifacts, and hands the state to the next run', async () => {
    const states: unknown[] = [];
    const runner = inProcess(
      async (ctx, { emit, api }) => {
        states.push(ctx.state.conversation);
        await emit('state.updated', { scope: 'conversation', key: 'external.session_id', value: 'ext-1' });
        await emit('state.updated', { scope: 'nowhere', key: 'x', value: 1 });
        await emit('artifact.created', { name: 'report.txt', content: 'a report' });
        await emit('message.completed', { message: { role: 'assistant', content: 'ok' } });
        states.push((await api.state.get('conversation', 'external.session_id')).value);
      },
      { capabilities: { stateful_session: true } },
    );
    const { h, sessionId, events } = await turnOn(runner);
    expect(ofType(events, 'runtime.warning').map((e) => payload(e).details)).toEqual([
      expect.objectContaining({ reason: 'state_refused' }),
    ]);
    expect(ofType(events, 'artifact.changed')).toHaveLength(1);
    await h.runtime.submitTurn({ sessionId, input: 'again' });
    await h.runtime.settled(sessionId);
    expect(states).toEqual([{}, 'ext-1', { 'external.session_id': 'ext-1' }, 'ext-1']);
  });
});

/** A turn on the fake runner process in `mode`. */
async function fakeTurn(mode: string, policy: RunnerBinding['policy'] = {}, extraEnv: Record<string, string> = {}) {
  process.env.FAKE_MODE = mode;
  for (const [k, v] of Object.entries(extraEnv)) process.env[k] = v;
  return turnOn({
    id: 'plugin:test/fake/fake',
    package: FAKE,
    config: {},
    policy: { env: ['FAKE_MODE', 'FAKE_PID_FILE'], ...policy },
  });
}

describe('a misbehaving runner process fails the turn with a clear code, losing nothing', () => {
  it.each<[string, string, string | undefined]>([
    ['garbage', 'runner_protocol_error', 'invalid_frame'],
    ['crash', 'runner_crashed', undefined],
    ['no_terminal', 'runner_no_result', undefined],
    ['big', 'runner_result_too_large', undefined],
    ['failed', 'runner.error', undefined],
    ['flood', 'runner_protocol_error', 'too_many_results'],
    ['hugeline', 'runner_protocol_error', 'frame_too_large'],
  ])('%s → %s', async (mode, code, reason) => {
    const { events } = await fakeTurn(mode);
    expect(turnEnd(events)?.type).toBe('turn.failed');
    expect(turnError(events).code).toBe(code);
    if (reason) expect((payload(turnEnd(events)).error as { details: { reason: string } }).details.reason).toBe(reason);
    // The attempt is on record from its start to its end, in order, with nothing contradicting it.
    const kinds = events.map((e) => e.type);
    expect(kinds.indexOf('task.attempt.started')).toBeLessThan(kinds.indexOf('task.attempt.failed'));
    expect(ofType(events, 'task.failed')).toHaveLength(1);
    expect(events.some((e) => payload(e).phase === 'runner_ended')).toBe(true);
  });

  it('ignores an unknown type and a duplicate sequence, and refuses a result after the end', async () => {
    const unknown = await fakeTurn('unknown');
    expect(payload(turnEnd(unknown.events)).answer).toBe('fine');
    expect(ofType(unknown.events, 'runtime.warning').map((e) => payload(e).details)).toEqual([
      expect.objectContaining({ reason: 'unknown_type', type: 'weird.thing' }),
    ]);
    const after = await fakeTurn('after_end');
    expect(payload(turnEnd(after.events)).answer).toBe('done');
    await waitFor(async () =>
      (await allEvents(after.h, after.sessionId)).some(
        (e) => (payload(e).details as { reason?: string })?.reason === 'after_end',
      ),
    );
  });

  it("keeps a bounded, redacted tail of the runner's stderr in the record", async () => {
    const { events } = await fakeTurn('stderr');
    expect(turnError(events).code).toBe('runner_crashed');
    const ended = events.find((e) => payload(e).phase === 'runner_ended');
    const stderr = (payload(ended).runner as { stderr?: string }).stderr ?? '';
    expect(stderr).toContain('fatal: the last words');
    expect(stderr).toContain('[REDACTED');
    expect(stderr.length).toBeLessThanOrEqual(4_096);
    expect(JSON.stringify(events)).not.toContain('sk-proj-Zx9yWv8uTs7rQp6oNm5lKj4iHg3fEd2cBa1');
  });

  it('gives the runner only PATH and the variables its binding names', async () => {
    const { events } = await fakeTurn(
      'env',
      {},
      { OAR_TEST_RUNNER_SECRET: 'sk-test-abcdefghijklmnopqrstuvwxyz123456' },
    );
    const keys = JSON.parse(payload(turnEnd(events)).answer as string) as string[];
    expect(keys).toContain('FAKE_MODE');
    expect(keys).not.toContain('OAR_TEST_RUNNER_SECRET');
    expect(keys.filter((k) => !['PATH', 'FAKE_MODE', 'FAKE_PID_FILE'].includes(k))).toEqual([]);
    expect(JSON.stringify(events)).not.toContain('sk-test-abcdefghijklmnopqrstuvwxyz123456');
  });

  it('times out a runner that never ends: cancel, then the whole process group is killed', async () => {
    const pidFile = join(tempDir('oar-runner-pid-'), 'pids.json');
    const { events } = await fakeTurn('stubborn', { timeoutMs: 1_500 }, { FAKE_PID_FILE: pidFile });
    expect(turnError(events).code).toBe('runner_timeout');
    // Its deadline ended the run's task: timed out (the standard's terminal status), not merely failed.
    const taskEnds = events.filter((e) => ['task.failed', 'task.timed_out'].includes(e.type));
    expect(taskEnds.map((e) => [e.type, (payload(e).error as { code: string }).code])).toEqual([
      ['task.timed_out', 'runner_timeout'],
    ]);
    const ended = events.find((e) => payload(e).phase === 'runner_ended');
    expect((payload(ended).runner as { status: string }).status).toBe('failed');
    const pids = JSON.parse(readFileSync(pidFile, 'utf8')) as number[];
    await waitFor(async () => pids.every((pid) => !alive(pid)));
  });

  it('interrupts a hanging runner: the attempt is cancelled and its process group killed', async () => {
    const pidFile = join(tempDir('oar-runner-pid-'), 'pids.json');
    process.env.FAKE_MODE = 'hang';
    process.env.FAKE_PID_FILE = pidFile;
    const h = await harness(ANSWER, {
      mainAgent: {
        name: 'main',
        runner: {
          id: 'plugin:test/fake/fake',
          package: FAKE,
          config: {},
          policy: { env: ['FAKE_MODE', 'FAKE_PID_FILE'] },
        },
      },
    });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await waitFor(async () => existsSync(pidFile), 10_000);
    const interrupted = await h.runtime.interruptTurn({ sessionId, reason: 'test' });
    expect(interrupted.interrupted).toBe(true);
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(turnEnd(events)?.type).toBe('turn.failed');
    expect(turnError(events).code).toBe('interrupted');
    expect(ofType(events, 'task.cancelled')).toHaveLength(1);
    const pids = JSON.parse(readFileSync(pidFile, 'utf8')) as number[];
    await waitFor(async () => pids.every((pid) => !alive(pid)));
  });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
