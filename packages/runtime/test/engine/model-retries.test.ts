import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LanguageModelV3CallOptions } from '@ai-sdk/provider';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveModel } from '../../src/index.js';
import { modelHandle } from '../../src/models/resolve.js';
import { createScriptedModel, type ModelScriptStep } from '../../src/models/testing.js';
import { type FakeOpenAI, fakeOpenAI } from '../support/fake-openai.js';
import { tempDir } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { allEvents, answer, ofType, payload, waitForEvent } from './helpers.js';

/**
 * Provider failures are facts (issue: models as a governed resource, section 1). Each failed attempt is a
 * `model.failed` with its class, the wait before the next (`retryInMs`), a 429 also a `rate_limit.hit`; the retry
 * is a new `model.requested` with the next attempt, and the scripted model's step index follows the attempts.
 */
let h: Harness | undefined;
let fake: FakeOpenAI | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
  await fake?.close();
  fake = undefined;
});

/** Fast retries for tests: a few milliseconds of backoff. */
const FAST = { modelRetryInitialDelayMs: 5 };
const failing = (statusCode: number, extra: Record<string, unknown> = {}): ModelScriptStep =>
  ({ error: { message: `provider said ${statusCode}`, statusCode, ...extra } }) as ModelScriptStep;

async function runTurn(steps: ModelScriptStep[], limits: Record<string, number> = FAST) {
  h = await harness({ steps }, { limits });
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  await h.runtime.settled(sessionId);
  return { events: await allEvents(h, sessionId), sessionId, threadId };
}

const modelFacts = (events: RuntimeEvent[]) =>
  events.filter((e) => e.type.startsWith('model.') || e.type === 'rate_limit.hit').map((e) => e.type);

describe('provider failures', () => {
  it('a 500 then an answer: the failed attempt, its wait and the retry are facts; the retry takes the next step', async () => {
    const { events, sessionId, threadId } = await runTurn([failing(500), answer('Recovered.')]);
    expect(modelFacts(events)).toEqual(['model.requested', 'model.failed', 'model.requested', 'model.completed']);
    const [firstRequest, retryRequest] = ofType(events, 'model.requested');
    expect(payload(firstRequest).attempt).toBe(1);
    expect(payload(retryRequest)).toMatchObject({ attempt: 2, retryOf: 'transient' });
    const failed = payload(ofType(events, 'model.failed')[0]);
    expect(failed).toMatchObject({ failureClass: 'transient', attempt: 1, statusCode: 500 });
    expect(failed.error).toMatchObject({ code: 'model_transient', retryable: true });
    expect(typeof failed.retryInMs).toBe('number');
    expect(ofType(events, 'turn.completed')).toHaveLength(1);
    // Two calls made, one step taken: the budget counts steps, the scripted model's cursor counts calls.
    const thread = await h?.runtime.log.thread(sessionId, threadId);
    expect(thread?.modelCalls).toBe(2);
    expect(thread?.turns[0]?.modelSteps).toBe(1);
    expect((await h?.runtime.replaySession(sessionId))?.differences).toEqual([]);
  });

  it('a 429 waits what the provider asked and records the rate limit with its headers and request id', async () => {
    const headers = { 'retry-after': '1', 'x-ratelimit-remaining-requests': '0', 'x-request-id': 'req_42' };
    const { events } = await runTurn([failing(429, { headers }), answer('Done.')]);
    expect(modelFacts(events)).toEqual([
      'model.requested',
      'model.failed',
      'rate_limit.hit',
      'model.requested',
      'model.completed',
    ]);
    const failed = ofType(events, 'model.failed')[0];
    expect(payload(failed)).toMatchObject({ failureClass: 'rate_limited', retryInMs: 1000, statusCode: 429 });
    const hit = ofType(events, 'rate_limit.hit')[0];
    expect(payload(hit)).toMatchObject({
      statusCode: 429,
      retryAfterMs: 1000,
      providerRequestId: 'req_42',
      limits: { 'x-ratelimit-remaining-requests': '0' },
    });
    expect(hit?.turnId).toBe(failed?.turnId);
    // The retry was not made before the provider's second was up.
    const retry = ofType(events, 'model.requested')[1];
    expect(Date.parse(retry?.timestamp ?? '') - Date.parse(failed?.timestamp ?? '')).toBeGreaterThanOrEqual(950);
  });

  it('gives up after the policy’s attempts and says so', async () => {
    const { events } = await runTurn([failing(503), failing(503), failing(503), answer('never')], {
      ...FAST,
      modelAttempts: 3,
    });
    const failed = ofType(events, 'model.failed').map(payload);
    expect(failed.map((p) => p.attempt)).toEqual([1, 2, 3]);
    expect(failed.map((p) => typeof p.retryInMs)).toEqual(['number', 'number', 'undefined']);
    const end = payload(ofType(events, 'turn.failed')[0]);
    expect(end.error).toMatchObject({
      code: 'model_transient',
      details: { attempts: 3, maxAttempts: 3, gaveUp: 'attempts_exhausted' },
    });
  });

  it('fails at once on a failure a retry cannot fix, with what to do', async () => {
    const { events } = await runTurn([failing(401), answer('never')]);
    expect(modelFacts(events)).toEqual(['model.requested', 'model.failed']);
    const end = payload(ofType(events, 'turn.failed')[0]);
    expect(end.error).toMatchObject({ code: 'model_auth', retryable: false, details: { gaveUp: 'not_retryable' } });
    expect(String((end.error as { message: string }).message)).toContain('apiKeyEnv');
    const overflow = await runTurnAgain([
      failing(400, { body: '{"error":{"code":"context_length_exceeded","message":"maximum context length"}}' }),
    ]);
    expect(payload(ofType(overflow, 'turn.failed')[0]).error).toMatchObject({ code: 'model_context_overflow' });
  });

  it('a retry-after longer than the policy allows fails instead of waiting', async () => {
    const { events } = await runTurn([failing(429, { headers: { 'retry-after': '120' } }), answer('never')], {
      ...FAST,
      modelRetryMaxDelayMs: 60_000,
    });
    expect(ofType(events, 'model.requested')).toHaveLength(1);
    const end = payload(ofType(events, 'turn.failed')[0]);
    expect(end.error).toMatchObject({ code: 'model_rate_limited', details: { gaveUp: 'retry_after_too_long' } });
  });

  it('a configured model’s own retry policy overrides the limits', async () => {
    const dir = tempDir('oar-model-policy-');
    const file = join(dir, 'flaky.json');
    writeFileSync(file, JSON.stringify({ steps: [failing(503), answer('never')] }));
    const models = { flaky: { provider: 'script' as const, file, retry: { attempts: 1 }, timeoutMs: 5_000 } };
    const resolved = await resolveModel('flaky', { cwd: dir, env: {}, models });
    expect(resolved.info).toMatchObject({ retry: { attempts: 1 }, timeoutMs: 5_000 });
    h = await harness(
      { steps: [] },
      {
        limits: { ...FAST, modelAttempts: 5 },
        model: () => ({
          model: resolved.model,
          provider: resolved.info.provider,
          modelId: resolved.info.modelId,
          supportsForcedToolChoice: true,
          ...(resolved.info.retry ? { retry: resolved.info.retry } : {}),
        }),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'model.failed')).toHaveLength(1);
    expect(payload(ofType(events, 'turn.failed')[0]).error).toMatchObject({
      code: 'model_transient',
      details: { attempts: 1, maxAttempts: 1, gaveUp: 'attempts_exhausted' },
    });
  });

  it('a call past its timeout is a timeout, retried with the next step', async () => {
    const slow = { ...answer('too late'), delayMs: 5_000 } as ModelScriptStep;
    const { events } = await runTurn([slow, answer('On time.')], { ...FAST, modelTimeoutMs: 100 });
    expect(payload(ofType(events, 'model.failed')[0])).toMatchObject({ failureClass: 'timeout' });
    expect(payload(ofType(events, 'turn.completed')[0]).answer).toBe('On time.');
  });

  it('a provider that ignores the timeout’s abort does not hold the step; its late answer is dropped', async () => {
    const inner = createScriptedModel({ steps: [answer('Too late.'), answer('In time.')] });
    const deaf = {
      ...inner,
      specificationVersion: inner.specificationVersion,
      provider: inner.provider,
      modelId: inner.modelId,
      supportedUrls: inner.supportedUrls,
      // The first call ignores its abort signal and answers after 600 ms anyway.
      doGenerate: async (options: LanguageModelV3CallOptions) => {
        const { abortSignal: _ignored, ...rest } = options;
        if (options.providerOptions?.oar?.modelCall === 0) await new Promise((resolve) => setTimeout(resolve, 600));
        return inner.doGenerate(rest);
      },
      doStream: async (options: LanguageModelV3CallOptions) => {
        const { abortSignal: _ignored, ...rest } = options;
        if (options.providerOptions?.oar?.modelCall === 0) await new Promise((resolve) => setTimeout(resolve, 600));
        return inner.doStream(rest);
      },
    };
    h = await harness(
      { steps: [] },
      {
        limits: { ...FAST, modelTimeoutMs: 100 },
        model: () => ({ model: deaf, provider: 'oar-script', modelId: inner.modelId, supportsForcedToolChoice: true }),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    await new Promise((resolve) => setTimeout(resolve, 700)); // the late answer arrives meanwhile
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'model.failed')[0])).toMatchObject({ failureClass: 'timeout' });
    expect(ofType(events, 'model.completed')).toHaveLength(1);
    expect(payload(ofType(events, 'turn.completed')[0]).answer).toBe('In time.');
  });

  it('an interrupt ends the wait for a retry at once', async () => {
    h = await harness({ steps: [failing(429, { headers: { 'retry-after': '30' } }), answer('never')] }, {});
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await waitForEvent(h, sessionId, 'model.failed');
    const asked = Date.now();
    await h.runtime.interruptTurn({ sessionId, threadId });
    await h.runtime.settled(sessionId);
    expect(Date.now() - asked).toBeLessThan(10_000);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'model.requested')).toHaveLength(1);
    expect(payload(ofType(events, 'turn.failed')[0])).toMatchObject({ error: { code: 'interrupted' } });
  });

  it('a process that stops while waiting resumes with the step the log names', async () => {
    const steps = [failing(429, { headers: { 'retry-after': '30' } }), answer('Resumed.')];
    h = await harness({ steps }, {});
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await waitForEvent(h, sessionId, 'model.failed');
    await h.runtime.close();
    const store = h.store;
    // A new process on the same store: the attempt on record counts, so the next call is the script's step 2.
    h = await harness({ steps }, { store });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'turn.completed')[0]).answer).toBe('Resumed.');
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});

describe('provider failures over HTTP (openai-compatible, real wire format)', () => {
  it('a 429 with retry-after and rate-limit headers is classified, waited out and retried', async () => {
    fake = await fakeOpenAI((index) =>
      index === 0
        ? {
            kind: 'error',
            status: 429,
            headers: { 'retry-after': '1', 'x-ratelimit-limit-requests': '60', 'x-request-id': 'req_http_1' },
            body: { error: { message: 'Rate limit reached', type: 'requests' } },
          }
        : {
            kind: 'answer',
            toolCalls: [
              {
                id: 'call_1',
                name: 'AgentProtocolOutput',
                arguments: JSON.stringify({ kind: 'answer', message: 'Hi.' }),
              },
            ],
            usage: {
              prompt_tokens: 10,
              completion_tokens: 5,
              total_tokens: 15,
              prompt_tokens_details: { cached_tokens: 4 },
              completion_tokens_details: { reasoning_tokens: 2 },
            },
          },
    );
    const baseURL = fake.baseURL;
    const resolved = await resolveModel('fake', {
      cwd: process.cwd(),
      env: {},
      models: { fake: { provider: 'openai-compatible', model: 'fake-model', baseURL, forcedToolChoice: false } },
    });
    h = await harness(
      { steps: [] },
      {
        model: () => modelHandle(resolved),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'hello' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(fake.requests).toHaveLength(2);
    // The answer was streamed (SSE), usage included.
    expect(fake.requests[1]?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(payload(ofType(events, 'model.failed')[0])).toMatchObject({
      failureClass: 'rate_limited',
      statusCode: 429,
      retryInMs: 1000,
    });
    expect(payload(ofType(events, 'rate_limit.hit')[0])).toMatchObject({
      retryAfterMs: 1000,
      providerRequestId: 'req_http_1',
      limits: { 'x-ratelimit-limit-requests': '60' },
    });
    expect(payload(ofType(events, 'turn.completed')[0]).answer).toBe('Hi.');
    // Usage as the provider reported it, cache and reasoning included, and summed for the session.
    const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15, cachedInputTokens: 4, reasoningTokens: 2 };
    expect(payload(ofType(events, 'model.completed')[0]).usage).toMatchObject(usage);
    const { snapshot } = await h.runtime.getSession({ sessionId });
    expect(snapshot.telemetrySummary).toMatchObject({ usage });
  });
});

/** A second turn on a fresh harness (the first one is closed by afterEach only at the end). */
async function runTurnAgain(steps: ModelScriptStep[]): Promise<RuntimeEvent[]> {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
  return (await runTurn(steps)).events;
}
