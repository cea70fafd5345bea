import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { priceOf } from '../../src/config/prices.js';
import { bindingModel, type ModelChoice } from '../../src/index.js';
import { assertEventsConform } from '../support/schemas.js';
import { tempDir } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { allEvents, ofType, payload } from './helpers.js';

/**
 * Chains and fallback (issue: models as a governed resource, section 2): a model choice may be a chain; each
 * candidate is resolved in order and the choice recorded; a call that gives up on one candidate for a class the
 * chain falls back on moves to the next, as a fact.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
const error = (statusCode: number, extra: Record<string, unknown> = {}) => ({
  error: { message: `provider said ${statusCode}`, statusCode, ...extra },
});

/** A script file: the scripted model replays step N at the thread's N-th model call (whichever model made it). */
function script(dir: string, name: string, steps: unknown[]): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ steps }));
  return `script:${file}`;
}

async function runWith(model: ModelChoice, env: Record<string, string> = {}, models = {}) {
  h = await harness(
    { steps: [] },
    {
      defaultModel: model,
      models,
      limits: { modelRetryInitialDelayMs: 5, modelRetryMaxDelayMs: 1_000 },
      model: (agent, binding) => bindingModel(agent, binding, env),
    },
  );
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  await h.runtime.settled(sessionId);
  const events = await allEvents(h, sessionId);
  return { events, sessionId, threadId };
}

const routing = (events: RuntimeEvent[]) =>
  events.filter((e) => e.type.startsWith('routing.') || e.type.startsWith('model.')).map((e) => e.type);

describe('model chains', () => {
  it('a rate-limited primary that asks for too long a wait falls back; the chain answers', async () => {
    const dir = tempDir('oar-chain-');
    // The primary asks to wait 120 s, past the 1 s cap: the call gives up on it and the fallback takes it.
    const primary = script(dir, 'primary', [error(429, { headers: { 'retry-after': '120' } })]);
    const fallback = script(dir, 'fallback', [answer('unused'), answer('From the fallback.')]);
    const { events, sessionId, threadId } = await runWith([primary, fallback]);
    expect(routing(events)).toEqual([
      'routing.candidates.resolved',
      'routing.decided',
      'model.requested',
      'model.failed',
      'routing.fallback.applied',
      'model.requested',
      'model.completed',
    ]);
    expect(payload(ofType(events, 'routing.decided')[0])).toMatchObject({
      selectedModel: 'primary',
      candidateCount: 2,
    });
    expect(payload(ofType(events, 'model.failed')[0])).toMatchObject({ failureClass: 'rate_limited', fallback: true });
    expect(payload(ofType(events, 'routing.fallback.applied')[0])).toMatchObject({
      from: 'primary',
      to: 'fallback',
      trigger: 'rate_limited',
      attempts: 1,
    });
    expect(payload(ofType(events, 'model.requested')[1])).toMatchObject({
      modelId: 'fallback',
      fallbackFrom: 'primary',
    });
    expect(payload(ofType(events, 'model.completed')[0])).toMatchObject({ modelId: 'fallback' });
    expect(ofType(events, 'rate_limit.hit')).toHaveLength(1);
    const read = await h?.runtime.getThreadRead({ sessionId, threadId });
    expect(read?.lastOutcome).toMatchObject({ status: 'completed', answer: 'From the fallback.' });
    const { snapshot } = (await h?.runtime.getSession({ sessionId })) ?? {};
    expect(snapshot?.routingLimitSummary).toMatchObject({
      selectedModel: 'fallback',
      fallback: { from: 'primary', to: 'fallback', trigger: 'rate_limited', attempts: 1 },
    });
    assertEventsConform(events);
    expect((await h?.runtime.replaySession(sessionId))?.differences).toEqual([]);
  });

  it('never falls back on auth: the next candidate would fail the same way', async () => {
    const dir = tempDir('oar-chain-');
    const primary = script(dir, 'primary', [error(401)]);
    const fallback = script(dir, 'fallback', [answer('never')]);
    const { events } = await runWith([primary, fallback]);
    expect(ofType(events, 'routing.fallback.applied')).toEqual([]);
    expect(payload(ofType(events, 'turn.failed')[0]).error).toMatchObject({ code: 'model_auth' });
  });

  it('fallbackOn narrows the classes: a 5xx falls back, a timeout-free 429 then does not', async () => {
    const dir = tempDir('oar-chain-');
    const primary = script(dir, 'primary', [error(429, { headers: { 'retry-after': '120' } })]);
    const fallback = script(dir, 'fallback', [answer('never')]);
    const { events } = await runWith({ chain: [primary, fallback], fallbackOn: ['transient'] });
    expect(ofType(events, 'routing.fallback.applied')).toEqual([]);
    expect(payload(ofType(events, 'turn.failed')[0]).error).toMatchObject({ code: 'model_rate_limited' });
  });

  it('a candidate that cannot be used is excluded with the reason; the next one is chosen', async () => {
    const dir = tempDir('oar-chain-');
    const fallback = script(dir, 'fallback', [answer('Local answer.')]);
    const { events } = await runWith(['openai:gpt-4.1', fallback]);
    const resolved = payload(ofType(events, 'routing.candidates.resolved')[0]);
    expect(resolved.excluded).toMatchObject([{ spec: 'openai:gpt-4.1' }]);
    expect(String((resolved.excluded as { reason: string }[])[0]?.reason)).toContain('OPENAI_API_KEY');
    expect(payload(ofType(events, 'routing.decided')[0])).toMatchObject({ selectedModel: 'fallback' });
    expect(ofType(events, 'turn.completed')).toHaveLength(1);
  });

  it('a primary that is down (connection refused) falls back to the next candidate', async () => {
    const dir = tempDir('oar-chain-');
    const fallback = script(dir, 'fallback', [answer('unused'), answer('Served locally.')]);
    const models = {
      down: { provider: 'openai-compatible' as const, model: 'm', baseURL: 'http://127.0.0.1:9/v1' },
    };
    h = await harness(
      { steps: [] },
      {
        defaultModel: ['down', fallback],
        models,
        limits: { modelAttempts: 1 },
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'routing.fallback.applied')[0])).toMatchObject({ from: 'm', to: 'fallback' });
    expect(payload(ofType(events, 'turn.completed')[0])).toMatchObject({ answer: 'Served locally.' });
  });

  it('no usable candidate: routing.not_possible names every exclusion and the turn fails no_model', async () => {
    const { events } = await runWith(['openai:gpt-4.1', 'anthropic:claude-sonnet-4-5']);
    const notPossible = payload(ofType(events, 'routing.not_possible')[0]);
    expect(notPossible.excluded).toHaveLength(2);
    expect(payload(ofType(events, 'turn.failed')[0]).error).toMatchObject({ code: 'no_model' });
  });
});

describe('prices and cost', () => {
  it('a priced model records cost.estimated before and cost.recorded after each call; the session sums it', async () => {
    const dir = tempDir('oar-cost-');
    const file = join(dir, 'priced.json');
    const usage = { inputTokens: 1_000, outputTokens: 200, cachedInputTokens: 400 };
    writeFileSync(
      file,
      JSON.stringify({
        steps: [
          { ...answer('One.'), usage },
          { ...answer('Two.'), usage },
        ],
      }),
    );
    // $3 / $15 per million, cached input at $0.30: 600×3 + 400×0.3 + 200×15 = 4,920 micro-dollars a call.
    const price = { inputPerMillion: 3, outputPerMillion: 15, cachedInputPerMillion: 0.3 };
    const models = { priced: { provider: 'script' as const, file, price } };
    const { events, sessionId } = await runWith('priced', {}, models);
    await h?.runtime.submitTurn({ sessionId, input: 'again' });
    await h?.runtime.settled(sessionId);
    const all = await allEvents(h as Harness, sessionId);
    const recorded = ofType(all, 'cost.recorded').map((e) => payload(e));
    expect(recorded.map((p) => p.amount)).toEqual([0.00492, 0.00492]);
    expect(recorded[0]).toMatchObject({
      currency: 'USD',
      priceSource: 'configured',
      approximate: true,
      modelId: 'priced',
    });
    const estimated = payload(ofType(events, 'cost.estimated')[0]);
    const requested = payload(ofType(events, 'model.requested')[0]);
    expect(estimated.amount).toBe(((requested.inputTokenEstimate as number) * 3) / 1e6);
    // The estimate precedes the call, the record follows its completion.
    const types = events.map((e) => e.type);
    expect(types.indexOf('cost.estimated')).toBeLessThan(types.indexOf('model.completed'));
    expect(types.indexOf('cost.recorded')).toBeGreaterThan(types.indexOf('model.completed'));
    const { snapshot } = (await h?.runtime.getSession({ sessionId })) ?? {};
    expect(snapshot?.routingLimitSummary.costState).toMatchObject({ amount: 0.00984, pricedCalls: 2, currency: 'USD' });
    assertEventsConform(all);
  });

  it('an unknown price stays unknown: no cost facts, no cost state', async () => {
    const dir = tempDir('oar-cost-');
    const { events, sessionId } = await runWith(script(dir, 'unpriced', [answer('Free?')]));
    expect(events.filter((e) => e.type.startsWith('cost.'))).toEqual([]);
    const { snapshot } = (await h?.runtime.getSession({ sessionId })) ?? {};
    expect(snapshot?.routingLimitSummary.costState).toBeUndefined();
  });

  it('the dated defaults price common hosted models; others are unknown', () => {
    expect(priceOf({ provider: 'openai', modelId: 'gpt-4.1' })).toMatchObject({ inputPerMillion: 2 });
    expect(priceOf({ provider: 'anthropic', modelId: 'claude-sonnet-4-5' })).toMatchObject({ outputPerMillion: 15 });
    expect(priceOf({ provider: 'local', modelId: 'qwen' })).toBeUndefined();
    expect(
      priceOf({ provider: 'openai', modelId: 'gpt-4.1', price: { inputPerMillion: 1, outputPerMillion: 1 } }),
    ).toEqual({
      inputPerMillion: 1,
      outputPerMillion: 1,
    });
  });
});
