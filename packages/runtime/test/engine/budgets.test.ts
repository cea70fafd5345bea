import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { type Budgets, bindingModel, OarConfigSchema, Runtime, Store } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { tempDir } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { allEvents, errorCode, ofType, payload, types } from './helpers.js';

/**
 * Budgets per turn and per session (issue 16 §3, docs/models.md "Budgets"): `quota.low` once near a limit, a call
 * that would exceed one is not made (`quota.blocked`), then the thread waits in `waiting_resource` until a limit is
 * raised (`limit.changed`, the same turn continues — across a restart too) or the turn fails with
 * `budget_exceeded` and the spend. Nothing crashes, nothing pending is lost.
 */
let h: Harness | undefined;
const extra: { runtime: Runtime; store: Store }[] = [];
afterEach(async () => {
  for (const r of extra.splice(0)) {
    await r.runtime.close();
    await r.store.close();
  }
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const read = (id: string) => ({
  protocol: {
    kind: 'act',
    message: `reading (${id})`,
    calls: [{ id, type: 'tool', name: 'read', args: { filePath: 'README.md' }, result: 'summary' }],
  },
  usage: { inputTokens: 100, outputTokens: 20 },
});
const answer = (message: string) => ({
  protocol: { kind: 'answer', message },
  usage: { inputTokens: 100, outputTokens: 20 },
});

/** Three model calls: read, read, answer. */
const THREE_CALLS = [read('r1'), read('r2'), answer('Done reading.')];

function scriptFile(dir: string, steps: unknown[]): string {
  const file = join(dir, 'budget.json');
  writeFileSync(file, JSON.stringify({ steps }));
  return file;
}

async function start(budgets: Budgets, steps: unknown[] = THREE_CALLS, storeUrl?: string) {
  const dir = tempDir('oar-budget-');
  const file = scriptFile(dir, steps);
  h = await harness(
    { steps: [] },
    {
      defaultModel: `script:${file}`,
      budgets,
      limits: { modelRetryInitialDelayMs: 5 },
      permissions: { mode: 'bypass' },
      model: (agent, binding) => bindingModel(agent, binding, {}),
      ...(storeUrl ? { storeUrl } : {}),
    },
  );
  const { sessionId, threadId } = await h.runtime.createSession();
  const { turnId } = await h.runtime.submitTurn({ sessionId, input: 'read it twice' });
  await h.runtime.settled(sessionId);
  return { sessionId, threadId, turnId, file, dir };
}

describe('budgets', () => {
  it('onExceeded fail: the call is not made, quota.blocked, the turn fails budget_exceeded with the spend', async () => {
    const { sessionId, threadId } = await start({ turn: { modelCalls: 2 }, onExceeded: 'fail' });
    const events = await allEvents(h as Harness, sessionId);
    // Two calls made, the third blocked before its request.
    expect(ofType(events, 'model.requested')).toHaveLength(2);
    expect(types(events).filter((t) => t.startsWith('quota.'))).toEqual(['quota.low', 'quota.blocked']);
    const blocked = ofType(events, 'quota.blocked')[0];
    expect(blocked?.status).toBe('failed');
    expect(payload(blocked)).toMatchObject({
      scope: 'turn',
      dimension: 'modelCalls',
      limit: 2,
      spent: 2,
      requested: 1,
      projected: 3,
      policy: 'fail',
    });
    expect(blocked?.limitState).toMatchObject({ turn: { limits: { modelCalls: 2 } }, onExceeded: 'fail' });
    expect(payload(ofType(events, 'quota.low')[0])).toMatchObject({ scope: 'turn', dimension: 'modelCalls', limit: 2 });
    const failed = payload(ofType(events, 'turn.failed')[0]);
    expect(failed.error).toMatchObject({
      code: 'budget_exceeded',
      retryable: false,
      details: { scope: 'turn', dimension: 'modelCalls', limit: 2, spent: 2 },
    });
    expect((failed.error as { details: { spend: { turn: { tokens: number } } } }).details.spend.turn.tokens).toBe(240);
    // Pending work kept: the completed reads stay completed.
    const readModel = await h?.runtime.getThreadRead({ sessionId, threadId });
    expect(readModel?.actions?.map((a) => a.status)).toEqual(['completed', 'completed']);
    expect(readModel?.turns?.[0]?.status).toBe('failed');
    assertEventsConform(events);
    expect((await h?.runtime.replaySession(sessionId))?.differences).toEqual([]);
  });

  it('a turn whose wall-time budget ran out is timed_out, not merely failed', async () => {
    // The first call takes longer than the turn may: the next call is stopped by the time budget.
    const slowRead = { ...read('r1'), delayMs: 300 };
    const { sessionId, threadId, turnId } = await start({ turn: { wallTimeMs: 200 }, onExceeded: 'fail' }, [
      slowRead,
      answer('never'),
    ]);
    const failed = payload(ofType(await allEvents(h as Harness, sessionId), 'turn.failed')[0]);
    expect(failed.error).toMatchObject({ code: 'budget_exceeded', details: { dimension: 'wallTimeMs' } });
    const turn = (await h?.runtime.getThreadRead({ sessionId, threadId }))?.turns?.find((t) => t.turnId === turnId);
    expect(turn?.status).toBe('timed_out');
  });

  it('onExceeded wait: waiting_resource with the spend; raising the limit continues the same turn', async () => {
    const { sessionId, threadId, turnId } = await start({ turn: { modelCalls: 2 }, onExceeded: 'wait' });
    let events = await allEvents(h as Harness, sessionId);
    const blocked = ofType(events, 'quota.blocked')[0];
    expect(blocked?.status).toBe('waiting_resource');
    expect(payload(blocked)).toMatchObject({ policy: 'wait', dimension: 'modelCalls', limit: 2, spent: 2 });
    expect(ofType(events, 'turn.failed')).toEqual([]);
    const { snapshot } = (await h?.runtime.getSession({ sessionId, limit: 0 })) ?? {};
    const thread = snapshot?.threads[0];
    expect(thread?.status).toBe('blocked');
    const turn = thread?.turns.find((t) => t.turnId === turnId);
    expect(turn?.status).toBe('waiting_resource');
    expect(turn?.limitState).toMatchObject({ waiting: true, kind: 'quota', reason: 'quota' });
    expect(turn?.costState).toMatchObject({ modelCalls: 2, tokens: 240 });
    expect(snapshot?.routingLimitSummary.limitState).toMatchObject({
      turn: { modelCalls: 2 },
      onExceeded: 'wait',
      waiting: [{ threadId, kind: 'quota' }],
    });
    assertSnapshotConforms(snapshot as NonNullable<typeof snapshot>);
    // Settled and driven again (a resume): the same wait, recorded once.
    h?.runtime.worker?.kick(sessionId, threadId);
    await h?.runtime.settled(sessionId);
    expect(ofType(await allEvents(h as Harness, sessionId), 'quota.blocked')).toHaveLength(1);

    const changed = await h?.runtime.changeLimits({ sessionId, turn: { modelCalls: 5 }, reason: 'more room' });
    expect(changed).toMatchObject({
      changes: [{ scope: 'turn', dimension: 'modelCalls', from: 2, to: 5 }],
      resumed: [threadId],
    });
    await h?.runtime.settled(sessionId);
    events = await allEvents(h as Harness, sessionId);
    const limit = ofType(events, 'limit.changed')[0];
    expect(payload(limit)).toMatchObject({ reason: 'more room', changes: [{ dimension: 'modelCalls', to: 5 }] });
    expect(limit?.limitState).toMatchObject({ turn: { modelCalls: 5 } });
    // The same turn continued and answered; it started once.
    expect(ofType(events, 'turn.started')).toHaveLength(1);
    expect(payload(ofType(events, 'turn.completed')[0])).toMatchObject({ answer: 'Done reading.' });
    expect(ofType(events, 'turn.completed')[0]?.turnId).toBe(turnId);
    const read = await h?.runtime.getThreadRead({ sessionId, threadId });
    expect(read?.status).toBe('idle');
    assertEventsConform(events);
    expect((await h?.runtime.replaySession(sessionId))?.differences).toEqual([]);
  });

  it('a waiting turn survives a restart: another runtime on the store continues it after limit.changed', async () => {
    const dir = tempDir('oar-budget-store-');
    const storeUrl = join(dir, 'oar.db');
    const { sessionId, turnId, file } = await start(
      { session: { tokens: 300 }, onExceeded: 'wait' },
      THREE_CALLS,
      storeUrl,
    );
    let events = await allEvents(h as Harness, sessionId);
    expect(payload(ofType(events, 'quota.blocked')[0])).toMatchObject({
      scope: 'session',
      dimension: 'tokens',
      limit: 300,
    });
    // The process ends while the turn waits.
    await h?.runtime.close();
    await h?.store.close();
    h = undefined;
    const store = await Store.open(storeUrl);
    const runtime = await Runtime.create({
      store,
      workspaceRoot: dir,
      defaultModel: `script:${file}`,
      model: (agent, binding) => bindingModel(agent, binding, {}),
    });
    extra.push({ runtime, store });
    await runtime.settled(sessionId);
    expect(ofType(await runtime.log.read(sessionId), 'quota.blocked')).toHaveLength(1);
    await runtime.changeLimits({ sessionId, session: { tokens: null } });
    await runtime.settled(sessionId);
    events = await runtime.log.read(sessionId);
    expect(ofType(events, 'turn.completed')[0]?.turnId).toBe(turnId);
    assertEventsConform(events);
  });

  it('quota.low is recorded once per limit; a session cost budget counts the priced calls', async () => {
    const dir = tempDir('oar-budget-');
    const file = scriptFile(dir, THREE_CALLS);
    // Output at $5,000 per million: each call's 20 output tokens cost 0.1 USD (the estimate before a call, of its
    // input only, is 0 here). Call 1 spends 0.1 (past half of 0.15: quota.low at the next check, once), call 2
    // is allowed (0.1 + 0 ≤ 0.15) and spends 0.2, call 3 is blocked.
    const price = { inputPerMillion: 0, outputPerMillion: 5000 };
    const models = { priced: { provider: 'script' as const, file, price } };
    h = await harness(
      { steps: [] },
      {
        defaultModel: 'priced',
        models,
        budgets: { session: { costUsd: 0.15 }, onExceeded: 'fail', lowAt: 0.5 },
        permissions: { mode: 'bypass' },
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const low = ofType(events, 'quota.low');
    expect(low).toHaveLength(1);
    expect(payload(low[0])).toMatchObject({ scope: 'session', dimension: 'costUsd', limit: 0.15, currency: 'USD' });
    expect(payload(ofType(events, 'quota.blocked')[0])).toMatchObject({ dimension: 'costUsd', spent: 0.2 });
    expect(payload(ofType(events, 'turn.failed')[0]).error).toMatchObject({ code: 'budget_exceeded' });
    assertEventsConform(events);
  });

  it('a provider retry is a call like any: a budget stops it before it is sent', async () => {
    const steps = [{ error: { message: 'provider down', statusCode: 500 } }, answer('never sent')];
    const { sessionId } = await start({ turn: { modelCalls: 1 }, onExceeded: 'fail' }, steps);
    const events = await allEvents(h as Harness, sessionId);
    expect(
      types(events).filter((t) => t.startsWith('model.') || t.startsWith('quota.') || t === 'turn.failed'),
    ).toEqual(['model.requested', 'model.failed', 'quota.low', 'quota.blocked', 'turn.failed']);
    expect(payload(ofType(events, 'model.failed')[0])).toMatchObject({ failureClass: 'transient', attempt: 1 });
    expect(payload(ofType(events, 'turn.failed')[0]).error).toMatchObject({ code: 'budget_exceeded' });
    assertEventsConform(events);
  });

  it('bad limit changes are structured errors and change nothing', async () => {
    const { sessionId } = await start({ turn: { modelCalls: 10 } }, [answer('ok')]);
    const rt = (h as Harness).runtime;
    expect(await errorCode(rt.changeLimits({ sessionId, turn: { costUsd: -1 } }))).toBe('invalid_limit');
    expect(await errorCode(rt.changeLimits({ sessionId, turn: { modelCalls: 1.5 } }))).toBe('invalid_limit');
    expect(await errorCode(rt.changeLimits({ sessionId, turn: { bananas: 3 } as never }))).toBe('invalid_limit');
    expect(await errorCode(rt.changeLimits({ sessionId }))).toBe('invalid_limit');
    expect(await errorCode(rt.changeLimits({ sessionId, lowAt: 2 }))).toBe('invalid_limit');
    expect(await errorCode(rt.changeLimits({ sessionId: 'ses_nope', turn: { tokens: 5 } }))).toBe('session_not_found');
    expect(ofType(await allEvents(h as Harness, sessionId), 'limit.changed')).toEqual([]);
  });
});

describe('docs/models.md examples', () => {
  const doc = readFileSync(fileURLToPath(new URL('../../../../docs/models.md', import.meta.url)), 'utf8');
  /** The first `jsonc` block after a heading, without its `// …` comments, as a config file. */
  const example = (heading: string) => {
    const section = doc.slice(doc.indexOf(heading));
    const block = /```jsonc\n([\s\S]*?)\n```/.exec(section)?.[1] ?? '';
    return OarConfigSchema.parse(JSON.parse(block.replace(/(^|\s)\/\/\s.*$/gm, '$1')));
  };

  it('the budgets, provider limits, idle timeout and capability examples are valid configuration', () => {
    expect(example('## Budgets').budgets).toEqual({
      turn: { tokens: 200000, costUsd: 0.5, modelCalls: 20, wallTimeMs: 600000 },
      session: { costUsd: 5 },
      onExceeded: 'wait',
      lowAt: 0.8,
    });
    expect(example('## Provider limits').providerLimits).toMatchObject({
      openai: { maxConcurrency: 8, requestsPerMinute: 500 },
      'openai:gpt-4.1': { maxConcurrency: 2 },
    });
    expect(example('### Idle-stream timeout').models.local).toMatchObject({ idleTimeoutMs: 30000 });
    expect(example('### Capability checks').models['local-small']).toMatchObject({
      contextWindow: 8192,
      toolCalling: false,
    });
  });
});
