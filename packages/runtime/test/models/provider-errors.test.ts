import { createServer } from 'node:net';
import type { OarError } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { type ModelsConfig, resolveModel } from '../../src/index.js';
import { withoutSdkAdvice } from '../../src/models/provider-errors.js';
import { modelHandle } from '../../src/models/resolve.js';
import { type Harness, harness } from '../engine/harness.js';
import { allEvents, errorCode, ofType, payload } from '../engine/helpers.js';
import { type FakeOpenAI, type FakeReply, fakeOpenAI, type ResponsesEndpoint } from '../support/fake-openai.js';

/**
 * Provider failures in OAR's terms (docs/models.md "What a provider failure tells you"): each one names what to put
 * in oar.config.json or which variable to set, and never the AI SDK's code advice. Against the fake OpenAI server
 * speaking the real wire formats (Responses and Chat Completions), through the real provider packages.
 */

let h: Harness | undefined;
let fake: FakeOpenAI | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  await fake?.close();
  h = undefined;
  fake = undefined;
});

const ANSWER: FakeReply = {
  kind: 'answer',
  toolCalls: [{ name: 'AgentProtocolOutput', arguments: JSON.stringify({ kind: 'answer', message: 'Hi from afar.' }) }],
};
const noError = (): OarError => {
  throw new Error('expected the model not to resolve');
};
/** What a person should never be told to do: write AI SDK code. */
const SDK_ADVICE = /openai\.chat\(|createOpenAI|@ai-sdk\//;

/** One turn with `spec` resolved under `env` (and `models`), one attempt per call; its events and outcome. */
async function turnWith(spec: string, env: Record<string, string>, models: ModelsConfig = {}) {
  const resolved = await resolveModel(spec, { cwd: process.cwd(), env, models });
  h = await harness(
    { steps: [] },
    {
      model: () => ({ ...modelHandle(resolved), retry: { attempts: 1 } }),
    },
  );
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'hello' });
  await h.runtime.settled(sessionId);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  return { events: await allEvents(h, sessionId), outcome: read.lastOutcome as { status: string; error?: OarError } };
}

async function failureOf(reply: FakeReply | undefined, responses: ResponsesEndpoint = 'none'): Promise<OarError> {
  fake = await fakeOpenAI(() => reply ?? ANSWER, { responses });
  const { outcome } = await turnWith('openai:fake-model', { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: fake.baseURL });
  expect(outcome.status).toBe('failed');
  const error = outcome.error as OarError;
  expect(error.message).not.toMatch(SDK_ADVICE);
  return error;
}

describe('openai: on another server (OPENAI_BASE_URL)', () => {
  it('sends the Responses API request there with the key, and the turn completes', async () => {
    fake = await fakeOpenAI(() => ANSWER, { responses: 'responses' });
    const { outcome } = await turnWith('openai:fake-model', {
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: fake.baseURL,
    });
    expect(outcome).toMatchObject({ status: 'completed', answer: 'Hi from afar.' });
    expect(fake.requests[0]).toMatchObject({ url: '/v1/responses', headers: { authorization: 'Bearer sk-test' } });
    expect(fake.requests[0]?.body).toMatchObject({ model: 'fake-model', stream: true });
  });

  it("an entry's baseURL wins over OPENAI_BASE_URL", async () => {
    fake = await fakeOpenAI(() => ANSWER, { responses: 'responses' });
    const { outcome } = await turnWith(
      'far',
      { OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' },
      { far: { provider: 'openai', model: 'fake-model', baseURL: fake.baseURL } },
    );
    expect(outcome).toMatchObject({ status: 'completed', answer: 'Hi from afar.' });
    expect(fake.requests).toHaveLength(1);
  });
});

describe('provider failures name the OAR setting that fixes them', () => {
  it('a missing key names its variable and apiKeyEnv', async () => {
    const error = await resolveModel('openai:gpt-4.1', { cwd: '/', env: {} }).then(noError, (e) => e.error as OarError);
    expect(error).toMatchObject({ code: 'model_credentials_missing', details: { envVar: 'OPENAI_API_KEY' } });
    expect(error.details?.hint).toMatch(/set OPENAI_API_KEY .*"apiKeyEnv" .*oar\.config\.json/);
  });

  it('an unknown provider or name says how to write the model', async () => {
    expect(await errorCode(resolveModel('google:gemini', { cwd: '/', env: {} }))).toBe('unknown_model');
    const error = await resolveModel('google:gemini', { cwd: '/', env: {} }).then(noError, (e) => e.error as OarError);
    expect(error.details?.hint).toContain('"model" in oar.config.json');
  });

  it('HTTP 401 and 403 are model_auth naming OPENAI_API_KEY and apiKeyEnv', async () => {
    for (const status of [401, 403]) {
      const error = await failureOf({ kind: 'error', status }, 'responses');
      expect(error).toMatchObject({ code: 'model_auth', retryable: false, details: { statusCode: status } });
      expect(error.details?.hint).toMatch(/set OPENAI_API_KEY, or .*"apiKeyEnv"/);
      expect(error.message).toContain(String(error.details?.hint));
      await fake?.close();
      fake = undefined;
      await h?.runtime.close();
      await h?.store.close();
      h = undefined;
    }
  });

  it('HTTP 404 (a Chat-Completions-only server, or no such model) points at the model id, baseURL and openai-compatible', async () => {
    const error = await failureOf(undefined, 'none');
    expect(error).toMatchObject({ code: 'model_invalid_request', details: { statusCode: 404 } });
    expect(error.details?.hint).toContain('"fake-model"');
    expect(error.details?.hint).toContain('OPENAI_BASE_URL');
    expect(error.details?.hint).toContain(`{"provider": "openai-compatible", "baseURL": "${fake?.baseURL}"`);
  });

  it('HTTP 429 is model_rate_limited with the retry setting', async () => {
    const error = await failureOf({ kind: 'error', status: 429 }, 'responses');
    expect(error).toMatchObject({ code: 'model_rate_limited', retryable: true });
    expect(error.details?.hint).toContain('"retry": {"attempts"');
  });

  it('a Chat Completions answer to a Responses request says to configure openai-compatible, not to write SDK code', async () => {
    const error = await failureOf(undefined, 'chat');
    expect(error).toMatchObject({ code: 'model_invalid_request', retryable: false });
    expect(error.message).toContain('Chat Completions format');
    expect(error.details?.hint).toContain('"provider": "openai-compatible"');
    expect(error.details?.hint).toContain('under "models" in oar.config.json');
  });

  it("drops the AI SDK's code advice from any provider message, keeping what happened", () => {
    expect(
      withoutSdkAdvice(
        "OpenAI API key is missing. Pass it using the 'apiKey' parameter or the OPENAI_API_KEY environment variable.",
      ),
    ).toBe('OpenAI API key is missing.');
    expect(withoutSdkAdvice('Not Found. The model does not exist.')).toBe('Not Found. The model does not exist.');
  });

  it('a server that is not there names the URL and where it comes from', async () => {
    // A port that was free a moment ago: nothing listens there.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise((resolve) => probe.close(resolve));
    const { outcome, events } = await turnWith('openai:fake-model', {
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`,
    });
    expect(outcome.error).toMatchObject({ code: 'model_transient', details: { code: 'ECONNREFUSED' } });
    expect(outcome.error?.details?.hint).toContain(`nothing answered at http://127.0.0.1:${port}/v1/responses`);
    expect(outcome.error?.details?.hint).toContain('OPENAI_BASE_URL');
    expect(outcome.error?.message).not.toMatch(SDK_ADVICE);
    expect(payload(ofType(events, 'model.failed')[0])).toMatchObject({ failureClass: 'transient' });
  });
});
