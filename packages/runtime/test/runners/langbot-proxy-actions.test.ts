import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { estimateTokens, type RuntimeEvent } from '@oar/protocol';
import { type AgentRunContext, PeerError, type RunTools } from '@oar/runner-sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { langbotModelResources, langbotModelUuid, toOarMessages } from '../../src/agent-runners/langbot/llm-shapes.js';
import {
  answerLangbotAction,
  isLangbotProxyAction,
  type LangbotRunInfo,
  langbotAvailableApis,
} from '../../src/agent-runners/langbot/proxy-actions.js';
import type { ModelScript, RunnerBinding } from '../../src/index.js';
import { type Harness, harness } from '../engine/harness.js';
import { allEvents, ofType, payload } from '../engine/helpers.js';
import { audits, inProcess, codeOf as sdkCodeOf } from './probe.js';

/**
 * LangBot's proxy actions answered through OAR's governed host API (agent-runners/langbot/proxy-actions.ts): each
 * mapping runs against a real runtime (SQLite, a live run) — an in-process runner hands every LangBot action to
 * `answerLangbotAction` with a host API that is the run's own AGENT_API, so the run's grants, audit and facts apply
 * and a refusal comes back as the structured error LangBot's SDK reads.
 */

const opened: Harness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

type Data = Record<string, unknown>;
/** One LangBot action of the run; `data` gets the run's run_id unless it names one. */
type Answer = (action: string, data?: Data, onData?: (data: Data) => void) => Promise<Data>;
type LangbotProbe = (answer: Answer, ctx: AgentRunContext, tools: RunTools, run: LangbotRunInfo) => Promise<void>;

/** The run's identity as the LangBot transport hands it over: the ids the host froze at the run's start. */
function runInfo(ctx: AgentRunContext): LangbotRunInfo {
  return {
    runId: ctx.run_id,
    models: ctx.resources.models.map((m) => m.model_id),
    runnerId: 'plugin:test/probe/probe',
    conversationId: ctx.conversation?.conversation_id ?? undefined,
    turnId: ctx.metadata.turn_id as string,
    deadlineAt: (ctx.runtime.deadline_at ?? 0) * 1000,
    startedAt: Date.now(),
  };
}

/** An in-process runner whose run answers LangBot actions through its own AGENT_API. */
function langbot(probe: LangbotProbe, manifest: Data = {}, binding: Partial<RunnerBinding> = {}): RunnerBinding {
  return inProcess(
    async (ctx, tools) => {
      const run = runInfo(ctx);
      const host = {
        call: (action: string, p: Data, onChunk?: (c: unknown) => void) => tools.api.call(action, p, onChunk),
      };
      const answer: Answer = (action, data = {}, onData) =>
        answerLangbotAction(action, { run_id: ctx.run_id, ...data }, host, run, onData);
      await probe(answer, ctx, tools, run);
      await tools.emit('message.completed', { message: { role: 'assistant', content: 'ok' } });
    },
    manifest,
    binding,
  );
}

/** The structured error an action is refused with ({code, message, details}), or 'ok'. */
async function refusal(fn: () => Promise<unknown>) {
  try {
    await fn();
    return 'ok';
  } catch (error) {
    if (error instanceof PeerError)
      return { code: error.error.code, details: error.error.details, message: error.message };
    throw error;
  }
}
const codeOf = async (fn: () => Promise<unknown>) => {
  const r = await refusal(fn);
  return typeof r === 'string' ? r : r.code;
};

const ANSWER: ModelScript = { steps: [{ text: 'model says hi' }] };

async function turns(
  runner: RunnerBinding,
  inputs: string[],
  options: { script?: ModelScript; systemPrompt?: string; files?: Record<string, string> } = {},
) {
  const h = await harness(options.script ?? ANSWER, {
    mainAgent: { name: 'main', runner, ...(options.systemPrompt ? { systemPrompt: options.systemPrompt } : {}) },
    ...(options.files ? { files: options.files } : {}),
  });
  opened.push(h);
  const { sessionId } = await h.runtime.createSession({});
  for (const input of inputs) {
    await h.runtime.submitTurn({ sessionId, input });
    await h.runtime.settled(sessionId);
  }
  return { h, sessionId, events: await allEvents(h, sessionId) };
}

const turnEnds = (events: RuntimeEvent[]) =>
  events.filter((e) => e.type === 'turn.completed' || e.type === 'turn.failed').map((e) => e.type);

describe('LangBot model actions', () => {
  it('invoke_llm: uuid → model, content lists / null and tool calls reshaped, funcs → tools, usage named', async () => {
    const seen: Data = {};
    const script: ModelScript = {
      steps: [
        {
          toolCalls: [{ id: 'c1', name: 'lookup', arguments: { q: 'x' } }],
          usage: { inputTokens: 12, outputTokens: 3 },
        },
        { text: 'plain answer', usage: { inputTokens: 5, outputTokens: 2 } },
      ],
    };
    const { events } = await turns(
      langbot(async (answer, ctx) => {
        seen.models = ctx.resources.models.map((m) => m.model_id);
        seen.tools = await answer('invoke_llm', {
          llm_model_uuid: langbotModelUuid('default'),
          messages: [
            {
              role: 'system',
              content: [
                { type: 'text', text: 'be ' },
                { type: 'text', text: 'brief' },
              ],
            },
            { role: 'user', content: 'look it up' },
            {
              role: 'assistant',
              content: null,
              tool_calls: [{ id: 't0', type: 'function', function: { name: 'lookup', arguments: '{"q":"a"}' } }],
            },
            { role: 'tool', tool_call_id: 't0', content: 'A' },
          ],
          funcs: [
            {
              name: 'lookup',
              human_desc: 'Look up',
              description: 'look a word up',
              parameters: { type: 'object', properties: { q: { type: 'string' } } },
            },
          ],
          extra_args: {},
          timeout: 120,
        });
        // The plain model id is taken too.
        seen.plain = await answer('invoke_llm', {
          llm_model_uuid: 'default',
          messages: [{ role: 'user', content: 'hi' }],
        });
        seen.unknown = await refusal(() =>
          answer('invoke_llm', {
            llm_model_uuid: langbotModelUuid('elsewhere'),
            messages: [{ role: 'user', content: 'x' }],
          }),
        );
        seen.image = await codeOf(() =>
          answer('invoke_llm', {
            llm_model_uuid: 'default',
            messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }],
          }),
        );
        seen.role = await codeOf(() =>
          answer('invoke_llm', { llm_model_uuid: 'default', messages: [{ role: 'command', content: 'x' }] }),
        );
        seen.shape = await codeOf(() => answer('invoke_llm', { llm_model_uuid: 'default', messages: 'hi' }));
      }),
      ['go'],
      { script },
    );
    // The run's model resources are OAR ids; the mapping takes each one's uuid or the id itself.
    expect(seen.models).toEqual(['default']);
    expect(seen.tools).toEqual({
      message: {
        role: 'assistant',
        name: null,
        content: null,
        tool_calls: [
          { id: expect.any(String), type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } },
        ],
        tool_call_id: null,
      },
      usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 },
      finish_reason: 'tool-calls',
    });
    expect(seen.plain).toMatchObject({
      message: { role: 'assistant', content: 'plain answer', tool_calls: null },
      usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
    });
    // An unknown uuid reaches the host, which refuses it (and audits the refusal) like any model outside the run.
    expect(seen.unknown).toMatchObject({ code: 'unauthorized', details: { model_id: langbotModelUuid('elsewhere') } });
    expect([seen.image, seen.role, seen.shape]).toEqual(['invalid_argument', 'invalid_argument', 'invalid_argument']);
    // What reached OAR's model layer: the four messages and the one tool, as model facts of the thread.
    const requested = ofType(events, 'model.requested').map((e) => payload(e));
    expect(requested[0]).toMatchObject({ messageCount: 4, toolCount: 1 });
    expect(
      audits(events)
        .filter((a) => a.action === 'models.invoke')
        .map((a) => a.result),
    ).toEqual(['allowed', 'allowed', 'refused']);
  });

  it('reshapes messages both ways: text parts joined, null as empty, tool calls and tool results', () => {
    expect(
      toOarMessages([
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
        { role: 'assistant', content: null, tool_calls: [{ id: 'x', function: { name: 'f', arguments: { k: 1 } } }] },
        { role: 'tool', content: 'r', tool_call_id: 'x', name: 'f' },
      ]),
    ).toEqual([
      { role: 'user', content: 'ab' },
      { role: 'assistant', content: '', tool_calls: [{ id: 'x', name: 'f', arguments: '{"k":1}' }] },
      { role: 'tool', content: 'r', tool_call_id: 'x', name: 'f' },
    ]);
    expect(langbotModelUuid('default')).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(langbotModelUuid('default')).toBe(langbotModelUuid('default'));
    expect(langbotModelUuid('default')).not.toBe(langbotModelUuid('other'));
    // What the transport lists in the LangBot run context, so the SDK's own checks pass.
    expect(langbotModelResources(['default'], ['invoke', 'stream'])).toEqual([
      { model_id: langbotModelUuid('default'), operations: ['invoke', 'stream', 'count_tokens'] },
    ]);
    expect(langbotAvailableApis({ history_page: true, event_page: false, state: true }, true)).toMatchObject({
      prompt_get: true,
      history_page: true,
      event_page: false,
      steering_pull: true,
      run_cancel: false,
    });
  });

  it('invoke_llm_stream: deltas as MessageChunks with all_content, a final chunk, then usage', async () => {
    const chunks: Data[] = [];
    let end: Data | undefined;
    let whole: Data | undefined;
    await turns(
      langbot(async (answer) => {
        end = await answer(
          'invoke_llm_stream',
          { llm_model_uuid: langbotModelUuid('default'), messages: [{ role: 'user', content: 'hi' }] },
          (data) => {
            chunks.push(data);
          },
        );
        // Without a stream to write to, the answer is the final chunk with the usage.
        whole = await answer('invoke_llm_stream', {
          llm_model_uuid: 'default',
          messages: [{ role: 'user', content: 'again' }],
        });
      }),
      ['go'],
      {
        script: {
          steps: [
            { text: 'hello streamed world', chunks: 3, usage: { inputTokens: 4, outputTokens: 6 } },
            { toolCalls: [{ id: 'c9', name: 'lookup', arguments: { q: 'y' } }] },
          ],
        },
      },
    );
    expect(whole).toMatchObject({
      chunk: {
        is_final: true,
        content: '',
        tool_calls: [{ type: 'function', function: { name: 'lookup', arguments: '{"q":"y"}' } }],
      },
      usage: { prompt_tokens: expect.any(Number) },
      finish_reason: 'tool-calls',
    });
    expect(end).toEqual({});
    const pieces = chunks.filter((c) => c.chunk && !(c.chunk as Data).is_final).map((c) => c.chunk as Data);
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.map((p) => p.content).join('')).toBe('hello streamed world');
    expect(pieces.at(-1)?.all_content).toBe('hello streamed world');
    expect(pieces.map((p) => p.msg_sequence)).toEqual(pieces.map((_, i) => i));
    expect(chunks.at(-2)).toEqual({
      chunk: {
        role: 'assistant',
        content: '',
        all_content: 'hello streamed world',
        tool_calls: null,
        is_final: true,
        msg_sequence: pieces.length,
      },
    });
    expect(chunks.at(-1)).toEqual({
      usage: { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 },
      finish_reason: 'stop',
    });
  });

  it("count_tokens: OAR's estimate, said to be one; refused for a model outside the run", async () => {
    const seen: Data = {};
    await turns(
      langbot(async (answer) => {
        seen.count = await answer('count_tokens', {
          llm_model_uuid: langbotModelUuid('default'),
          messages: [{ role: 'user', content: [{ type: 'text', text: 'count these words please' }] }],
          funcs: [],
        });
        seen.other = await codeOf(() =>
          answer('count_tokens', { llm_model_uuid: 'gpt-x', messages: [{ role: 'user', content: 'x' }] }),
        );
      }),
      ['go'],
    );
    expect(seen.count).toEqual({
      tokens: estimateTokens('count these words please'),
      estimate: true,
      method: 'oar_estimate',
    });
    expect(seen.other).toBe('unauthorized');
  });

  it('a model action the manifest does not grant is refused with the host code, and audited', async () => {
    let code = '';
    const { events } = await turns(
      langbot(
        async (answer) => {
          code = await codeOf(() =>
            answer('invoke_llm', { llm_model_uuid: 'default', messages: [{ role: 'user', content: 'x' }] }),
          );
        },
        { permissions: {} },
      ),
      ['go'],
    );
    expect(code).toBe('unauthorized');
    expect(audits(events)).toEqual([
      expect.objectContaining({ action: 'models.invoke', result: 'refused', code: 'unauthorized' }),
    ]);
  });
});

describe('LangBot invoke_rerank', () => {
  it('names the model by its uuid, keeps the ranking as {index, relevance_score}, refuses extra_args by name', async () => {
    const calls: [string, Data][] = [];
    const host = {
      call: async (action: string, payload: Data) => {
        calls.push([action, payload]);
        return {
          results: [
            { index: 1, score: 0.9, document: 'b' },
            { index: 0, score: 0.2, document: 'a' },
          ],
        };
      },
    };
    const run: LangbotRunInfo = { runId: 'run_1', models: ['default', 'ranker'] };
    // As LangBot's SDK sends it: extra_args {} and its timeout always there.
    const answer = await answerLangbotAction(
      'invoke_rerank',
      {
        run_id: 'run_1',
        rerank_model_uuid: langbotModelUuid('ranker'),
        query: 'q',
        documents: ['a', 'b'],
        top_k: 2,
        extra_args: {},
        timeout: 30,
      },
      host,
      run,
    );
    expect(calls).toEqual([['models.rerank', { model_id: 'ranker', query: 'q', documents: ['a', 'b'], top_k: 2 }]]);
    expect(answer).toEqual({
      results: [
        { index: 1, relevance_score: 0.9 },
        { index: 0, relevance_score: 0.2 },
      ],
    });
    const refused = await refusal(() =>
      answerLangbotAction(
        'invoke_rerank',
        { rerank_model_uuid: 'ranker', query: 'q', documents: ['a'], extra_args: { return_documents: true } },
        host,
        run,
      ),
    );
    expect(refused).toMatchObject({ code: 'invalid_argument', details: { extra_args: ['return_documents'] } });
    expect(calls).toHaveLength(1);
  });
});

describe('LangBot tool and knowledge actions', () => {
  it('get_tool_detail and call_tool go through the governed tool path', async () => {
    const seen: Data = {};
    const { events } = await turns(
      langbot(async (answer) => {
        seen.detail = await answer('get_tool_detail', { tool_name: 'read' });
        seen.call = await answer('call_tool', { tool_name: 'read', parameters: { filePath: 'README.md' } });
        seen.missing = await codeOf(() => answer('get_tool_detail', { tool_name: 'nope' }));
      }),
      ['go'],
    );
    expect(seen.detail).toMatchObject({
      tool: { name: 'read', description: expect.any(String), parameters: { type: 'object' } },
    });
    expect(seen.call).toMatchObject({ ok: true, tool_call_id: expect.any(String) });
    expect(String((seen.call as Data).result)).toContain('Hello from the sample workspace');
    expect(seen.missing).toBe('not_found');
    expect(ofType(events, 'tool.result')).toHaveLength(1);
  });

  it('retrieve_knowledge_base: results as RetrievalResultEntry (text content, distance), filters refused', async () => {
    const seen: Data = {};
    const runner = langbot(
      async (answer) => {
        seen.found = await answer('retrieve_knowledge_base', {
          kb_id: 'docs',
          query_text: 'pineapples',
          top_k: 2,
          filters: {},
        });
        seen.filtered = await codeOf(() =>
          answer('retrieve_knowledge_base', { kb_id: 'docs', query_text: 'x', filters: { file: 'a' } }),
        );
      },
      { permissions: { knowledge_bases: ['retrieve'] } },
      { knowledge: [{ id: 'docs', folder: 'docs' }] },
    );
    const h = await harness(ANSWER, { mainAgent: { name: 'main', runner } });
    opened.push(h);
    mkdirSync(join(h.workspace, 'docs'));
    writeFileSync(join(h.workspace, 'docs/fruit.md'), 'Pineapples grow in warm places.\n\nApples grow in orchards.\n');
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const [first] = (seen.found as { results: Data[] }).results;
    expect(first).toMatchObject({
      id: 'docs:0',
      content: [{ type: 'text', text: 'Pineapples grow in warm places.' }],
      metadata: { source: 'docs/fruit.md' },
    });
    expect(first?.distance).toBeGreaterThan(0);
    expect(first?.distance).toBeLessThan(1);
    expect(seen.filtered).toBe('invalid_argument');
  });
});

describe('LangBot context actions', () => {
  it('history_page and history_search as TranscriptItems; event_page and event_get as AgentEventRecords', async () => {
    const seen: Data[] = [];
    const { events } = await turns(
      langbot(
        async (answer, ctx) => {
          if (ctx.input.text !== 'second') return;
          const page = await answer('history_page', { limit: 500 });
          const search = await answer('history_search', { query: 'first', filters: { roles: ['user'] }, top_k: 99 });
          const evPage = await answer('event_page', { limit: 200, event_types: ['turn.submitted', 'turn.completed'] });
          const small = await answer('event_page', { limit: 2 });
          const first = (evPage.items as Data[])[0] as Data;
          const one = await answer('event_get', { event_id: first.event_id });
          const other = await codeOf(() => answer('event_page', { conversation_id: 'thr_elsewhere' }));
          const badFilter = await codeOf(() =>
            answer('history_search', { query: 'x', filters: { event_types: ['a'] } }),
          );
          seen.push(page, search, evPage, one, { other, badFilter }, small);
        },
        { permissions: { history: ['page', 'search'], events: ['get', 'page'] } },
      ),
      ['first', 'second'],
    );
    const [page, search, evPage, one, codes, small] = seen as [Data, Data, Data, Data, Data, Data];
    const threadId = ofType(events, 'turn.submitted')[0]?.threadId;
    expect(page.items).toEqual([
      expect.objectContaining({ role: 'user', content: 'first', item_type: 'message', conversation_id: threadId }),
      expect.objectContaining({ role: 'assistant', content: 'ok' }),
    ]);
    const item = (page.items as Data[])[0] as Data;
    expect(item.transcript_id).toBe(item.cursor);
    expect(item.event_id).toBe(item.cursor);
    expect(page).toMatchObject({ next_cursor: null, prev_cursor: null, has_more: false });
    expect(search).toMatchObject({ query: 'first', total_count: 1 });
    expect((search.items as Data[])[0]).toMatchObject({
      role: 'user',
      content: 'first',
      metadata: { score: expect.any(Number) },
    });
    expect(
      (evPage.items as Data[]).every((e) => ['turn.submitted', 'turn.completed'].includes(e.event_type as string)),
    ).toBe(true);
    expect((evPage.items as Data[]).map((e) => e.event_type)).toEqual([
      'turn.submitted',
      'turn.completed',
      'turn.submitted',
    ]);
    expect(small).toMatchObject({ has_more: true, next_cursor: expect.any(String) });
    expect(small.items).toHaveLength(2);
    expect(one).toMatchObject({
      event_id: (evPage.items as Data[])[0]?.event_id,
      source: 'oar',
      conversation_id: threadId,
      seq: expect.any(Number),
      event_time: expect.any(Number),
      metadata: { data: expect.any(Object) },
    });
    expect(codes).toEqual({ other: 'unauthorized', badFilter: 'invalid_argument' });
  });

  it('state_get / set / delete / list, with state_list on the new host state.list', async () => {
    const seen: Data = {};
    const { events } = await turns(
      langbot(async (answer) => {
        seen.set = await answer('state_set', { scope: 'conversation', key: 'external.session_id', value: 'ext-1' });
        await answer('state_set', { scope: 'conversation', key: 'external.thread_id', value: { n: 1 } });
        await answer('state_set', { scope: 'conversation', key: 'memory.summary', value: 'short' });
        await answer('state_set', { scope: 'actor', key: 'external.elsewhere', value: 1 });
        seen.get = await answer('state_get', { scope: 'conversation', key: 'external.thread_id' });
        seen.list = await answer('state_list', { scope: 'conversation', prefix: 'external.', limit: 1000 });
        seen.one = await answer('state_list', { scope: 'conversation', limit: 1 });
        seen.deleted = await answer('state_delete', { scope: 'conversation', key: 'external.session_id' });
        seen.again = await answer('state_delete', { scope: 'conversation', key: 'external.session_id' });
        seen.after = await answer('state_list', { scope: 'conversation' });
        seen.missing = await answer('state_get', { scope: 'conversation', key: 'external.session_id' });
        seen.badScope = await codeOf(() => answer('state_list', { scope: 'planet' }));
      }),
      ['go'],
    );
    expect(seen.set).toEqual({ success: true });
    expect(seen.get).toEqual({ value: { n: 1 } });
    expect(seen.list).toEqual({ keys: ['external.session_id', 'external.thread_id'], has_more: false });
    expect(seen.one).toEqual({ keys: ['external.session_id'], has_more: true });
    expect([seen.deleted, seen.again]).toEqual([{ success: true }, { success: false }]);
    expect(seen.after).toEqual({ keys: ['external.thread_id', 'memory.summary'], has_more: false });
    expect(seen.missing).toEqual({ value: null });
    expect(seen.badScope).toBe('invalid_argument');
    expect(
      audits(events)
        .filter((a) => a.action === 'state.list')
        .map((a) => a.scope),
    ).toEqual(['conversation', 'conversation', 'conversation', 'planet']);
  });

  it('state_list is refused when the binding switches host-owned state off', async () => {
    let code = '';
    await turns(
      langbot(
        async (answer) => {
          code = await codeOf(() => answer('state_list', { scope: 'conversation' }));
        },
        {},
        { policy: { state: false } },
      ),
      ['go'],
    );
    expect(code).toBe('unauthorized');
  });

  it('get_prompt answers the agent instructions as system messages', async () => {
    let prompt: Data | undefined;
    await turns(
      langbot(async (answer) => {
        prompt = await answer('get_prompt');
      }),
      ['go'],
      { systemPrompt: 'Be terse. Answer in French.' },
    );
    expect(prompt).toEqual({ prompt: [{ role: 'system', content: 'Be terse. Answer in French.' }] });
  });

  it('get_prompt without instructions is an empty list', async () => {
    let prompt: Data | undefined;
    await turns(
      langbot(async (answer) => {
        prompt = await answer('get_prompt');
      }),
      ['go'],
    );
    expect(prompt).toEqual({ prompt: [] });
  });
});

describe('LangBot storage actions', () => {
  it('set / get / keys / delete per area with value_base64, bytes round-trip; ungranted area refused', async () => {
    const seen: Data = {};
    const bytes = Buffer.from(Uint8Array.from({ length: 256 }, (_, i) => i));
    await turns(
      langbot(
        async (answer, _ctx, { api }) => {
          seen.set = await answer('set_plugin_storage', { key: 'blob.bin', value_base64: bytes.toString('base64') });
          await answer('set_plugin_storage', { key: 'note', value_base64: Buffer.from('hi').toString('base64') });
          // A JSON value an OAR-wire runner of the plugin stored comes back as its JSON text's bytes.
          await api.storage.set('plugin', 'json', { a: 1 });
          seen.get = await answer('get_plugin_storage', { key: 'blob.bin' });
          seen.json = await answer('get_plugin_storage', { key: 'json' });
          seen.keys = await answer('get_plugin_storage_keys');
          seen.deleted = await answer('delete_plugin_storage', { key: 'note' });
          seen.after = await answer('get_plugin_storage_keys');
          seen.missing = await codeOf(() => answer('get_plugin_storage', { key: 'note' }));
          seen.workspace = await codeOf(() => answer('get_workspace_storage_keys'));
          seen.badKey = await codeOf(() => answer('set_plugin_storage', { key: 'has space', value_base64: 'aGk=' }));
          seen.noValue = await codeOf(() => answer('set_plugin_storage', { key: 'k' }));
        },
        { permissions: { storage: ['plugin'] } },
      ),
      ['go'],
    );
    expect(seen.set).toEqual({});
    expect(Buffer.from((seen.get as { value_base64: string }).value_base64, 'base64')).toEqual(bytes);
    expect(Buffer.from((seen.json as { value_base64: string }).value_base64, 'base64').toString()).toBe('{"a":1}');
    expect(seen.keys).toEqual({ keys: ['blob.bin', 'json', 'note'] });
    expect(seen.deleted).toEqual({ deleted: true });
    expect(seen.after).toEqual({ keys: ['blob.bin', 'json'] });
    expect(seen.missing).toBe('not_found');
    expect(seen.workspace).toBe('unauthorized');
    expect(seen.badKey).toBe('invalid_argument');
    expect(seen.noValue).toBe('invalid_argument');
  });
});

describe('LangBot steering_pull', () => {
  it('claims the input queued on the thread while the run runs; the queued turn does not run on its own', async () => {
    let pulled: Data | undefined;
    let empty: Data | undefined;
    const holder: { h?: Harness; sessionId?: string } = {};
    const runner = langbot(
      async (answer, ctx) => {
        if (ctx.input.text !== 'start') return;
        const { h, sessionId } = holder as { h: Harness; sessionId: string };
        const queued = await h.runtime.submitTurn({ sessionId, input: 'also mention pears' });
        expect(queued.status).toBe('queued');
        pulled = await answer('steering_pull', { mode: 'all' });
        empty = await answer('steering_pull', { mode: 'one-at-a-time' });
      },
      { capabilities: { steering: true } },
    );
    const h = await harness(ANSWER, { mainAgent: { name: 'main', runner } });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    Object.assign(holder, { h, sessionId });
    await h.runtime.submitTurn({ sessionId, input: 'start' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const items = (pulled?.items ?? []) as Data[];
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({
      claimed_run_id: expect.stringMatching(/^run_/),
      runner_id: 'plugin:test/probe/probe',
      claimed_at: expect.any(Number),
      event: { event_type: 'message.received', source: 'oar', event_id: expect.stringMatching(/^turn_/) },
      input: { text: 'also mention pears', contents: [{ type: 'text', text: 'also mention pears' }] },
    });
    expect(empty).toEqual({ items: [] });
    // One turn ran: the steered one was claimed (queue.changed removed, naming the run), not answered again.
    expect(turnEnds(events)).toEqual(['turn.completed']);
    const claim = ofType(events, 'queue.changed').find((e) => payload(e).change === 'removed');
    expect(payload(claim)).toMatchObject({
      queuedTurnId: (items[0]?.event as Data | undefined)?.event_id,
      steered: { runId: items[0]?.claimed_run_id, runnerId: 'plugin:test/probe/probe' },
    });
  });

  it('is refused without the steering capability', async () => {
    let code = '';
    await turns(
      langbot(async (answer) => {
        code = await codeOf(() => answer('steering_pull'));
      }),
      ['go'],
    );
    expect(code).toBe('unauthorized');
  });
});

describe('LangBot run ledger and unknown actions', () => {
  it('run_get and run_events_page map onto the run and its facts; other ledger actions not_supported', async () => {
    const seen: Data = {};
    await turns(
      langbot(
        async (answer, ctx) => {
          await answer('state_set', { scope: 'conversation', key: 'k', value: 1 });
          seen.run = await answer('run_get');
          seen.ctxRun = ctx.run_id;
          seen.other = await codeOf(() => answer('run_get', { target_run_id: 'run_someone_else' }));
          seen.events = await answer('run_events_page', { limit: 200 });
          seen.cancel = await refusal(() => answer('run_cancel', { reason: 'stop' }));
          seen.append = await codeOf(() => answer('run_append_result', { result: {} }));
          seen.unknown = await refusal(() => answer('vector_upsert', {}));
          seen.forged = await codeOf(() =>
            answer('state_get', { run_id: 'run_forged', scope: 'conversation', key: 'k' }),
          );
        },
        { permissions: { events: ['page'] } },
      ),
      ['go'],
    );
    expect(seen.run).toMatchObject({ run_id: seen.ctxRun, status: 'running', runner_id: 'plugin:test/probe/probe' });
    expect(seen.other).toBe('unauthorized');
    const facts = (seen.events as { items: Data[] }).items;
    expect(facts.length).toBeGreaterThan(0);
    expect(facts.every((f) => f.run_id === seen.ctxRun && typeof f.sequence === 'number')).toBe(true);
    expect(facts.map((f) => f.type)).toContain('run.status');
    expect(seen.cancel).toMatchObject({ code: 'not_supported', details: { action: 'run_cancel' } });
    expect(seen.append).toBe('not_supported');
    expect(seen.unknown).toMatchObject({ code: 'not_supported', message: 'unknown action vector_upsert' });
    expect(seen.forged).toBe('unauthorized');
    expect(isLangbotProxyAction('invoke_llm')).toBe(true);
    expect(isLangbotProxyAction('run_finalize')).toBe(true);
    expect(isLangbotProxyAction('get_workspace_storage_keys')).toBe(true);
    expect(isLangbotProxyAction('vector_upsert')).toBe(false);
  });
});

describe("OAR's host actions for them, on OAR's own wire", () => {
  it('state.list, prompt.get, tokens.count and steering.pull answer in OAR shapes through the typed SDK client, audited', async () => {
    const seen: Data = {};
    const { events } = await turns(
      inProcess(async (_ctx, { api, emit }) => {
        await api.call('state.set', { scope: 'runner', key: 'b', value: 1 });
        await api.call('state.set', { scope: 'runner', key: 'a', value: 2 });
        seen.list = await api.state.list('runner');
        seen.prompt = await api.prompt.get();
        seen.tokens = await api.tokens.count(
          'default',
          [{ role: 'assistant', content: 'x', tool_calls: [{ id: 'c', name: 'read', arguments: '{}' }] }],
          [{ name: 'read', description: 'reads', parameters: { type: 'object' } }],
        );
        seen.steering = await sdkCodeOf(() => api.steering.pull());
        seen.badLimit = await sdkCodeOf(() => api.state.list('runner', null, 101));
        await emit('message.completed', { message: { role: 'assistant', content: 'ok' } });
      }),
      ['go'],
      { systemPrompt: 'Stay on topic.' },
    );
    expect(seen.list).toEqual({ keys: ['a', 'b'], has_more: false });
    expect(seen.prompt).toEqual({ messages: [{ role: 'system', content: 'Stay on topic.' }] });
    expect(seen.tokens).toEqual({
      tokens:
        estimateTokens('x') +
        estimateTokens('read') +
        estimateTokens('{}') +
        estimateTokens('read\nreads\n{"type":"object"}'),
      estimate: true,
      method: 'oar_estimate',
    });
    // The probe's manifest does not declare steering.
    expect(seen.steering).toBe('unauthorized');
    expect(seen.badLimit).toBe('invalid_argument');
    expect(
      audits(events)
        .filter((a) => ['state.list', 'prompt.get', 'tokens.count', 'steering.pull'].includes(a.action))
        .map((a) => `${a.action}:${a.result}`),
    ).toEqual([
      'state.list:allowed',
      'prompt.get:allowed',
      'tokens.count:allowed',
      'steering.pull:refused',
      'state.list:refused',
    ]);
  });
});
