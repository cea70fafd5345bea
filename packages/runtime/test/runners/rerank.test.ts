import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ModelRerankResult } from '@oar/runner-sdk';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AgentConfig, bindingModel, type SessionBinding } from '../../src/index.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { type Harness, harness } from '../engine/harness.js';
import { allEvents, ofType, payload } from '../engine/helpers.js';
import { audits, codeOf, inProcess } from './probe.js';

/**
 * models.rerank through the model proxy (issue 29 §5, spec 7.1): a configured `cohere` model ranks the documents
 * over Cohere's own wire (POST {baseURL}/rerank), here a fake Cohere server on a real socket — the model boundary.
 * The call is granted like the other model ops, bracketed by model.requested … model.completed / model.failed, and
 * audited; a model whose provider offers no reranking refuses it.
 */

interface Seen {
  path: string;
  authorization: string | undefined;
  body: { model: string; query: string; documents: string[]; top_n?: number };
}
const seen: Seen[] = [];
let failNext = false;
let server: Server;
let baseURL = '';

const bodyOf = async (req: IncomingMessage) => {
  let text = '';
  for await (const chunk of req) text += chunk;
  return JSON.parse(text);
};

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const body = await bodyOf(req);
    seen.push({ path: req.url ?? '', authorization: req.headers.authorization, body });
    if (failNext) {
      failNext = false;
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: 'overloaded' }));
      return;
    }
    // Score by how many query words a document holds: a ranking the test can predict.
    const words = (body.query as string).toLowerCase().split(/\s+/);
    const results = (body.documents as string[])
      .map((doc, index) => ({
        index,
        relevance_score: words.filter((w) => doc.toLowerCase().includes(w)).length / words.length,
      }))
      .sort((a, b) => b.relevance_score - a.relevance_score)
      .slice(0, body.top_n ?? body.documents.length);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'rr_1', results, meta: { billed_units: { search_units: 1 } } }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const opened: Harness[] = [];
afterEach(async () => {
  seen.length = 0;
  for (const h of opened.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const RERANK_MANIFEST = {
  permissions: { models: ['invoke', 'stream', 'rerank'], tools: [], history: [], artifacts: [] },
};

async function turnOn(probe: Parameters<typeof inProcess>[0], manifest = RERANK_MANIFEST) {
  const scripted = createScriptedModel({ steps: [{ text: 'unused' }] });
  const h = await harness(
    { steps: [] },
    {
      mainAgent: { name: 'main', runner: inProcess(probe, manifest) },
      models: { ranker: { provider: 'cohere', model: 'rerank-v3.5', baseURL, apiKeyEnv: 'TEST_COHERE_KEY' } },
      // `ranker` resolves as oar.config.json's entry would; the agent's own model stays scripted.
      model: (agent: AgentConfig, binding: SessionBinding) =>
        agent.model === 'ranker'
          ? bindingModel(agent, binding, { TEST_COHERE_KEY: 'k-test' })
          : { model: scripted, provider: 'oar-script', modelId: scripted.modelId, supportsForcedToolChoice: true },
    },
  );
  opened.push(h);
  const { sessionId } = await h.runtime.createSession({});
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  await h.runtime.settled(sessionId);
  return allEvents(h, sessionId);
}

describe('models.rerank through the model proxy', () => {
  it('ranks texts and JSON objects through a cohere model, most relevant first, and records the call', async () => {
    let ranked: ModelRerankResult | undefined;
    const documents = ['a recipe for bread', { title: 'durable agent runtimes', body: 'event logs' }, 'runtime notes'];
    const events = await turnOn(async (_ctx, { api, emit }) => {
      ranked = await api.models.rerank('ranker', 'durable runtime', documents, 2);
      await emit('run.completed', { message: { content: 'ranked' } });
    });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({
      path: '/v2/rerank',
      authorization: 'Bearer k-test',
      body: { model: 'rerank-v3.5', query: 'durable runtime', top_n: 2 },
    });
    // An object is sent as its JSON text and answered as the object itself.
    expect(seen[0]?.body.documents[1]).toBe(JSON.stringify(documents[1]));
    expect(ranked?.results).toEqual([
      { index: 1, score: 1, document: documents[1] },
      { index: 2, score: 0.5, document: 'runtime notes' },
    ]);
    const requested = ofType(events, 'model.requested');
    expect(requested).toHaveLength(1);
    expect(payload(requested[0])).toMatchObject({
      provider: 'cohere',
      modelId: 'rerank-v3.5',
      documentCount: 3,
      runner: { op: 'rerank' },
    });
    const completed = ofType(events, 'model.completed');
    expect(completed).toHaveLength(1);
    // A reranker reports no tokens: the usage says "not reported", not zero.
    expect(payload(completed[0])).toMatchObject({
      provider: 'cohere',
      usage: {},
      output: {
        ranking: [
          { index: 1, score: 1 },
          { index: 2, score: 0.5 },
        ],
      },
    });
    expect(audits(events)).toEqual([
      expect.objectContaining({ action: 'models.rerank', result: 'allowed', resource: 'ranker', scope: 'model' }),
    ]);
  });

  it('refuses a model without reranking, an ungranted op and bad arguments; a provider failure is recorded', async () => {
    const codes: Record<string, string> = {};
    let retryable: boolean | undefined;
    const events = await turnOn(async (_ctx, { api, emit }) => {
      codes.noReranking = await codeOf(() => api.models.rerank('default', 'q', ['a']));
      codes.noDocuments = await codeOf(() => api.models.rerank('ranker', 'q', []));
      codes.unknownModel = await codeOf(() => api.models.rerank('other', 'q', ['a']));
      failNext = true;
      try {
        await api.models.rerank('ranker', 'q', ['a']);
        codes.failed = 'ok';
      } catch (error) {
        codes.failed = (error as { code: string }).code;
        retryable = (error as { retryable?: boolean }).retryable;
      }
      await emit('run.completed', {});
    });
    expect(codes).toEqual({
      noReranking: 'not_found',
      noDocuments: 'invalid_argument',
      unknownModel: 'unauthorized',
      failed: 'runtime_error',
    });
    expect(retryable).toBe(true);
    const failed = ofType(events, 'model.failed');
    expect(failed).toHaveLength(1);
    expect(payload(failed[0])).toMatchObject({ provider: 'cohere', modelId: 'rerank-v3.5', attempt: 1 });
    // The refused calls reached no provider; the failed one did, once (no retry behind the runner's back).
    expect(seen).toHaveLength(1);

    const ungranted: Record<string, string> = {};
    await turnOn(
      async (_ctx, { api }) => {
        ungranted.code = await codeOf(() => api.models.rerank('ranker', 'q', ['a']));
      },
      { permissions: { models: ['invoke'], tools: [], history: [], artifacts: [] } },
    );
    expect(ungranted.code).toBe('unauthorized');
  });
});
