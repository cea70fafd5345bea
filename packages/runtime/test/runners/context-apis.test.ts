import { createHash } from 'node:crypto';
import type { LanguageModelV3, LanguageModelV3CallOptions } from '@ai-sdk/provider';
import type { AgentAPIError } from '@oar/runner-sdk';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConfig, ModelScript, RunnerBinding } from '../../src/index.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { type Harness, harness } from '../engine/harness.js';
import { allEvents, ofType, payload } from '../engine/helpers.js';
import { audits, codeOf, inProcess, type Probe } from './probe.js';

/**
 * The proxy's context APIs beyond history.page (docs/runners.md): history.search, artifacts.metadata / read_range /
 * open_stream on binary artifacts, models.* extra_args, and results the manifest's capabilities do not declare.
 * Each refusal is checked with its spec code and its audit event.
 */

const opened: Harness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const ANSWER: ModelScript = { steps: [{ text: 'model says hi' }, { text: 'model again' }] };

/** An in-process runner of its own id with the history, artifact and model ops these tests use. */
function apis(probe: Probe, manifest: Record<string, unknown> = {}): RunnerBinding {
  const permissions = { models: ['invoke', 'stream'], history: ['page', 'search'], artifacts: ['metadata', 'read'] };
  return inProcess(probe, { permissions, ...manifest }, {}, 'plugin:test/apis/probe');
}

async function session(runner: RunnerBinding, options: Parameters<typeof harness>[1] = {}) {
  const h = await harness(ANSWER, { mainAgent: { name: 'main', runner }, ...options });
  opened.push(h);
  const { sessionId } = await h.runtime.createSession({});
  const turn = async (input: string) => {
    await h.runtime.submitTurn({ sessionId, input });
    await h.runtime.settled(sessionId);
    return allEvents(h, sessionId);
  };
  return { h, sessionId, turn };
}

describe('history.search', () => {
  it('ranks the conversation transcript by term match, with history.page cursors, bounded and granted', async () => {
    let turnNo = 0;
    const seen: Record<string, unknown> = {};
    const { turn } = await session(
      apis(async (ctx, { api, emit }) => {
        turnNo++;
        if (turnNo === 4) {
          seen.available = ctx.context.available_apis.history_search;
          const found = await api.history.search('Pineapple harvest', null, 3);
          seen.found = found.items.map((m) => `${m.role}:${m.content}`);
          seen.scores = found.items.map((m) => m.score);
          // A result's cursor pages from it like any history.page cursor.
          const first = found.items[0]?.cursor as string;
          seen.after = (await api.history.page({ after_cursor: first, limit: 1 })).items.map((m) => m.content);
          seen.users = (await api.history.search('pineapple', { roles: ['user'] })).items.map((m) => m.content);
          seen.none = (await api.history.search('kiwi')).items;
          seen.codes = [
            await codeOf(() => api.history.search('pineapple', { conversation_id: 'thr_someone_else' } as never)),
            await codeOf(() => api.history.search('pineapple', null, 51)),
            await codeOf(() => api.history.search('  ... ')),
          ];
        }
        await emit('message.completed', {
          message: {
            role: 'assistant',
            content: turnNo === 1 ? 'The PINEAPPLE harvest is in June; pineapple season.' : `answer ${turnNo}`,
          },
        });
      }),
    );
    await turn('when is the pineapple harvest?');
    await turn('tell me about apples');
    await turn('and pineapple juice');
    const events = await turn('search now');
    expect(seen.available).toBe(true);
    expect(seen.found).toEqual([
      'assistant:The PINEAPPLE harvest is in June; pineapple season.',
      'user:when is the pineapple harvest?',
      'user:and pineapple juice',
    ]);
    const scores = seen.scores as number[];
    expect(scores[0]).toBeGreaterThan(scores[1] as number);
    expect(scores[1]).toBeGreaterThan(scores[2] as number);
    expect(seen.after).toEqual(['tell me about apples']);
    // Newer first among equal scores.
    expect(seen.users).toEqual(['and pineapple juice', 'when is the pineapple harvest?']);
    expect(seen.none).toEqual([]);
    expect(seen.codes).toEqual(['unauthorized', 'invalid_argument', 'invalid_argument']);
    const refused = audits(events).filter((a) => a.result === 'refused');
    expect(refused.map((a) => [a.action, a.code, a.resource])).toEqual([
      ['history.search', 'unauthorized', 'thr_someone_else'],
      ['history.search', 'invalid_argument', expect.stringMatching(/^thr_/)],
      ['history.search', 'invalid_argument', expect.stringMatching(/^thr_/)],
    ]);
  });

  it('is refused when the manifest or the binding does not grant search', async () => {
    let state: unknown;
    const runner = apis(
      async (ctx, { api }) => {
        state = [ctx.context.available_apis.history_search, await codeOf(() => api.history.search('x'))];
      },
      { permissions: { history: ['page'] } },
    );
    const { turn } = await session(runner);
    const events = await turn('go');
    expect(state).toEqual([false, 'unauthorized']);
    expect(audits(events)).toEqual([
      expect.objectContaining({ action: 'history.search', result: 'refused', code: 'unauthorized' }),
    ]);
  });
});

describe('artifacts.* on binary artifacts', () => {
  it('reports metadata, reads ranges as base64 and streams the whole artifact in bounded chunks', async () => {
    const bytes = Buffer.from(Array.from({ length: 150_000 }, (_, i) => (i * 31 + 7) % 256));
    const sha = createHash('sha256').update(bytes).digest('hex');
    let artifactId = '';
    const seen: Record<string, unknown> = {};
    let turnNo = 0;
    const { turn } = await session(
      apis(async (_ctx, { api, emit }) => {
        turnNo++;
        if (turnNo === 1) {
          await emit('artifact.created', {
            name: 'blob.bin',
            mime_type: 'application/octet-stream',
            content: bytes.toString('base64'),
            encoding: 'base64',
          });
        } else {
          seen.metadata = await api.artifacts.metadata(artifactId);
          seen.range = await api.artifacts.read_range(artifactId, 149_990, 100);
          const chunks: { offset: number; length: number }[] = [];
          const parts: Uint8Array[] = [];
          seen.end = await api.artifacts.open_stream(artifactId, (chunk, offset) => {
            chunks.push({ offset, length: chunk.length });
            parts.push(chunk);
          });
          seen.chunks = chunks;
          seen.streamed = Buffer.concat(parts);
          seen.codes = [
            await codeOf(() => api.artifacts.open_stream('art_not_here', () => undefined)),
            await codeOf(() => api.artifacts.read_range(artifactId, 0, 2 * 1024 * 1024)),
            await codeOf(() => api.call('artifacts.open_stream', {})),
          ];
        }
        await emit('message.completed', { message: { role: 'assistant', content: 'ok' } });
      }),
    );
    const first = await turn('make it');
    artifactId = ofType(first, 'artifact.changed')[0]?.artifactId as string;
    expect(artifactId).toMatch(/^art_/);
    const events = await turn('read it');
    expect(seen.metadata).toMatchObject({
      artifact_id: artifactId,
      name: expect.stringMatching(/blob\.bin$/),
      mime_type: 'application/octet-stream',
      size: 150_000,
      sha256: sha,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(seen.range).toMatchObject({ offset: 149_990, encoding: 'base64', eof: true });
    expect(Buffer.from((seen.range as { data: string }).data, 'base64')).toEqual(bytes.subarray(149_990));
    expect(seen.end).toEqual({ size: 150_000, sha256: sha });
    expect(seen.chunks).toEqual([
      { offset: 0, length: 65_536 },
      { offset: 65_536, length: 65_536 },
      { offset: 131_072, length: 150_000 - 131_072 },
    ]);
    expect((seen.streamed as Buffer).equals(bytes)).toBe(true);
    expect(seen.codes).toEqual(['not_found', 'payload_too_large', 'invalid_argument']);
    expect(audits(events).map((a) => [a.action, a.result, a.code ?? null, a.scope])).toEqual([
      ['artifacts.metadata', 'allowed', null, 'session'],
      ['artifacts.read_range', 'allowed', null, 'session'],
      ['artifacts.open_stream', 'allowed', null, 'session'],
      ['artifacts.open_stream', 'refused', 'not_found', 'session'],
      ['artifacts.read_range', 'refused', 'payload_too_large', 'session'],
      ['artifacts.open_stream', 'refused', 'invalid_argument', null],
    ]);
  });

  it('refuses open_stream without the read grant', async () => {
    let code: string | undefined;
    const { turn } = await session(
      apis(
        async (_ctx, { api }) => {
          code = await codeOf(() => api.artifacts.open_stream('art_x', () => undefined));
        },
        { permissions: { artifacts: ['metadata'] } },
      ),
    );
    const events = await turn('go');
    expect(code).toBe('unauthorized');
    expect(audits(events)).toEqual([
      expect.objectContaining({ action: 'artifacts.open_stream', result: 'refused', code: 'unauthorized' }),
    ]);
  });
});

describe('models.* extra_args', () => {
  it('passes the allow-listed generation settings to the model and refuses an unknown key by name', async () => {
    const calls: LanguageModelV3CallOptions[] = [];
    const model = (agent: AgentConfig) => {
      const inner = createScriptedModel(ANSWER);
      const wrapped: LanguageModelV3 = {
        ...inner,
        specificationVersion: inner.specificationVersion,
        provider: inner.provider,
        modelId: inner.modelId,
        supportedUrls: inner.supportedUrls,
        doGenerate: (options) => {
          calls.push(options);
          return inner.doGenerate(options);
        },
        doStream: (options) => {
          calls.push(options);
          return inner.doStream(options);
        },
      };
      return { model: wrapped, provider: 'oar-script', modelId: `${agent.name}-model`, supportsForcedToolChoice: true };
    };
    const refusals: { code: string; message: string; details: Record<string, unknown> }[] = [];
    const { turn } = await session(
      apis(async (_ctx, { api }) => {
        await api.models.invoke('default', [{ role: 'user', content: 'hi' }], undefined, {
          temperature: 0.2,
          top_p: 0.9,
          max_tokens: 64,
          stop: 'END',
          seed: 7,
        });
        for (const extra of [{ temperature: 0.2, api_key: 'sk-nope' }, { temperature: 'hot' }]) {
          try {
            await api.models.invoke('default', [{ role: 'user', content: 'again' }], undefined, extra);
          } catch (error) {
            const e = error as AgentAPIError;
            refusals.push({ code: e.code, message: e.message, details: e.details });
          }
        }
      }),
      { model },
    );
    const events = await turn('go');
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      temperature: 0.2,
      topP: 0.9,
      maxOutputTokens: 64,
      stopSequences: ['END'],
      seed: 7,
    });
    expect(refusals[0]).toMatchObject({ code: 'invalid_argument', details: { keys: ['api_key'] } });
    expect(refusals[0]?.message).toContain('"api_key"');
    expect(refusals[1]).toMatchObject({ code: 'invalid_argument', details: { keys: ['temperature'] } });
    expect(ofType(events, 'model.requested')).toHaveLength(1);
    expect(audits(events).map((a) => [a.action, a.result, a.code ?? null])).toEqual([
      ['models.invoke', 'allowed', null],
      ['models.invoke', 'refused', 'invalid_argument'],
      ['models.invoke', 'refused', 'invalid_argument'],
    ]);
  });
});

describe('results the manifest capabilities do not declare', () => {
  it('are ignored with a capability_not_declared warning, never applied', async () => {
    const runner = apis(async (_ctx, { emit }) => {
      await emit('message.delta', { chunk: { role: 'assistant', content: 'hel' } });
      await emit('tool.call.started', { tool_call_id: 'c1', tool_name: 'read' });
      await emit('state.updated', { scope: 'conversation', key: 'external.session_id', value: 'ext-1' });
      await emit('artifact.created', { name: 'note.txt', content: 'needs no capability' });
      await emit('message.completed', { message: { role: 'assistant', content: 'hello' } });
    });
    const { turn } = await session(runner);
    const events = await turn('go');
    const warnings = ofType(events, 'runtime.warning').map((e) => payload(e).details as Record<string, unknown>);
    expect(warnings).toEqual([
      expect.objectContaining({ reason: 'capability_not_declared', type: 'message.delta', capability: 'streaming' }),
      expect.objectContaining({
        reason: 'capability_not_declared',
        type: 'tool.call.started',
        capability: 'tool_calling',
      }),
      expect.objectContaining({
        reason: 'capability_not_declared',
        type: 'state.updated',
        capability: 'stateful_session',
      }),
    ]);
    expect(events.some((e) => payload(e).phase === 'runner_tool')).toBe(false);
    expect(JSON.stringify(ofType(events, 'thread.updated'))).not.toContain('external.session_id');
    expect(ofType(events, 'artifact.changed')).toHaveLength(1);
    expect(payload(events.find((e) => e.type === 'turn.completed')).answer).toBe('hello');
  });

  it('are applied when declared', async () => {
    const runner = apis(
      async (_ctx, { emit }) => {
        await emit('message.delta', { chunk: { role: 'assistant', content: 'hel' } });
        await emit('tool.call.started', { tool_call_id: 'c1', tool_name: 'read' });
        await emit('state.updated', { scope: 'conversation', key: 'external.session_id', value: 'ext-1' });
        await emit('message.completed', { message: { role: 'assistant', content: 'hello' } });
      },
      { capabilities: { streaming: true, tool_calling: true, stateful_session: true } },
    );
    const { turn } = await session(runner);
    const events = await turn('go');
    expect(ofType(events, 'runtime.warning')).toEqual([]);
    expect(events.some((e) => payload(e).phase === 'runner_tool')).toBe(true);
    expect(JSON.stringify(ofType(events, 'thread.updated'))).toContain('external.session_id');
  });
});
