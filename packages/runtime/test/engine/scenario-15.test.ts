import { afterEach, describe, expect, it } from 'vitest';
import { bindingModel } from '../../src/index.js';
import { type FakeOpenAI, type FakeReply, fakeOpenAI } from '../support/fake-openai.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { allEvents, ofType, payload } from './helpers.js';

/**
 * Acceptance scenario 15 of the Agent Runtime standard (issue 16 §8): rate limit and quota. A provider answers a
 * call with 429 + retry-after, the call is retried and answers (`rate_limit.hit`, cost recorded); the session's
 * token budget runs low (`quota.low`) and then stops the next turn's call (`quota.blocked`, `waiting_resource`)
 * until the limit is raised (`limit.changed`) — and the evidence export joins every one of these facts to the
 * turn it belongs to, by the same correlation ids as the log, the read models and the UI.
 */
let h: Harness | undefined;
let server: FakeOpenAI | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  await server?.close();
  h = undefined;
  server = undefined;
});

const usage = { prompt_tokens: 5_000, completion_tokens: 100, total_tokens: 5_100 };
const answer = (message: string): FakeReply => ({
  kind: 'answer',
  toolCalls: [{ name: 'AgentProtocolOutput', arguments: JSON.stringify({ kind: 'answer', message }) }],
  usage,
});

describe('acceptance scenario 15: rate limit and quota, joined to turn ids in the evidence export', () => {
  it('records the 429, the quota facts and the limit change per turn, and exports them joined', async () => {
    server = await fakeOpenAI((index) =>
      index === 0
        ? {
            kind: 'error',
            status: 429,
            headers: {
              'retry-after-ms': '60',
              'x-ratelimit-remaining-requests': '0',
              'x-ratelimit-limit-requests': '60',
              'x-request-id': 'req_fake_429',
            },
          }
        : answer(index === 1 ? 'First answer.' : 'Second answer.'),
    );
    h = await harness(
      { steps: [] },
      {
        defaultModel: 'fake',
        models: {
          fake: {
            provider: 'openai-compatible',
            model: 'fake-model',
            baseURL: server.baseURL,
            price: { inputPerMillion: 1, outputPerMillion: 2 },
          },
        },
        budgets: { session: { tokens: 6_000 }, onExceeded: 'wait' },
        limits: { modelRetryInitialDelayMs: 5 },
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    const first = await h.runtime.submitTurn({ sessionId, input: 'first question' });
    await h.runtime.settled(sessionId);
    const second = await h.runtime.submitTurn({ sessionId, input: 'second question' });
    await h.runtime.settled(sessionId);

    // Turn 2 waits for the session budget, visibly.
    const waiting = await h.runtime.getSession({ sessionId, limit: 0 });
    expect(waiting.snapshot.threads[0]?.turns.find((t) => t.turnId === second.turnId)?.status).toBe('waiting_resource');
    assertSnapshotConforms(waiting.snapshot);
    expect(waiting.snapshot.routingLimitSummary.limitState).toMatchObject({
      session: { tokens: 6_000 },
      sessionSpent: { tokens: 5_100, modelCalls: 2 },
      waiting: [{ threadId, turnId: second.turnId, kind: 'quota' }],
      rateLimits: { hits: 1, last: { modelId: 'fake-model', turnId: first.turnId, retryAfterMs: 60 } },
    });
    await h.runtime.changeLimits({ sessionId, session: { tokens: 50_000 }, reason: 'scenario 15' });
    await h.runtime.settled(sessionId);

    const events = await allEvents(h, sessionId);
    const hit = ofType(events, 'rate_limit.hit')[0];
    expect(hit?.turnId).toBe(first.turnId);
    expect(payload(hit)).toMatchObject({
      retryAfterMs: 60,
      providerRequestId: 'req_fake_429',
      limits: { 'x-ratelimit-remaining-requests': '0' },
    });
    const low = ofType(events, 'quota.low')[0];
    const blocked = ofType(events, 'quota.blocked')[0];
    expect(low?.turnId).toBe(second.turnId);
    expect(blocked?.turnId).toBe(second.turnId);
    expect(payload(blocked)).toMatchObject({ scope: 'session', dimension: 'tokens', limit: 6_000, spent: 5_100 });
    expect(ofType(events, 'turn.completed').map((e) => e.turnId)).toEqual([first.turnId, second.turnId]);

    const pack = await h.runtime.exportEvidence(sessionId);
    const joined = (type: string) => pack.limits.filter((l) => l.type === type);
    expect(joined('rate_limit.hit')).toMatchObject([
      { turnId: first.turnId, threadId, retryAfterMs: 60, providerRequestId: 'req_fake_429', modelId: 'fake-model' },
    ]);
    expect(joined('quota.low')).toMatchObject([{ turnId: second.turnId, scope: 'session', dimension: 'tokens' }]);
    expect(joined('quota.blocked')).toMatchObject([{ turnId: second.turnId, limit: 6_000, policy: 'wait' }]);
    expect(joined('limit.changed')).toMatchObject([{ reason: 'scenario 15' }]);
    expect(joined('cost.recorded').map((c) => c.turnId)).toEqual([first.turnId, second.turnId]);
    expect(pack.turns[first.turnId]).toMatchObject({
      threadId,
      modelCalls: 2,
      tokens: 5_100,
      rateLimitHits: 1,
      quotaBlocked: 0,
      outcome: 'completed',
    });
    expect(pack.turns[second.turnId]).toMatchObject({
      modelCalls: 1,
      quotaLow: 1,
      quotaBlocked: 1,
      outcome: 'completed',
    });
    expect(pack.turns[first.turnId]?.costUsd).toBeCloseTo(0.0052, 6);
    // The same ids as the log's: every limit fact's turn is one the correlation lists.
    for (const fact of pack.limits) if (fact.turnId) expect(pack.correlation.turnIds).toContain(fact.turnId);
    // The model failure is in the failures too, with its structured error.
    expect(pack.failures.find((f) => f.type === 'model.failed')).toMatchObject({
      turnId: first.turnId,
      error: { code: 'model_rate_limited', retryable: true },
    });
    assertEventsConform(await allEvents(h, sessionId));
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});
