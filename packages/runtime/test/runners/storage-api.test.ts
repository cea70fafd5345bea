import type { RuntimeEvent } from '@oar/protocol';
import { AgentAPIError } from '@oar/runner-sdk';
import { expect, it } from 'vitest';
import type { ModelScript, RunnerBinding } from '../../src/index.js';
import { MAX_STORAGE_VALUE_BYTES, STORAGE_AREA_QUOTA_BYTES } from '../../src/store/runner-storage.js';
import { harness } from '../engine/harness.js';
import { allEvents, payload } from '../engine/helpers.js';
import { describeStores, type StoreFactory } from '../support/stores.js';
import { audits, inProcess, type Probe } from './probe.js';

/**
 * storage.* (docs/runners.md "Storage"): the three areas on a real store — SQLite and PostgreSQL (which fails under
 * CI when it is unreachable) —, granted as manifest ∩ binding policy, with keys, value sizes and the area quota
 * checked; each refusal is an AgentAPIError with the spec's code AND an audit event; values outlive the run.
 */

const ANSWER: ModelScript = { steps: [{ text: 'unused' }] };

/** An in-process runner of plugin `author/name` asking for `storage` areas, whose run is `probe`. */
function runner(
  probe: Probe,
  storage: ('plugin' | 'workspace' | 'binding')[],
  binding: Partial<RunnerBinding> = {},
  plugin = 'test/probe',
): RunnerBinding {
  return inProcess(probe, { permissions: { storage } }, binding, `plugin:${plugin}/probe`);
}

/** One runtime on the factory's store; `turn` runs one turn of a new session on the given runner. */
async function host(factory: StoreFactory) {
  const db = await factory.fresh();
  const runtimes: Awaited<ReturnType<typeof harness>>[] = [];
  factory.defer(async () => {
    for (const h of runtimes) await h.runtime.close();
  });
  const turns = async (binding: RunnerBinding, count: number) => {
    const h = await harness(ANSWER, { store: db.store, mainAgent: { name: 'main', runner: binding } });
    runtimes.push(h);
    const { sessionId } = await h.runtime.createSession({});
    for (let i = 0; i < count; i++) {
      await h.runtime.submitTurn({ sessionId, input: `go ${i + 1}` });
      await h.runtime.settled(sessionId);
    }
    return allEvents(h, sessionId);
  };
  return {
    /** One turn of a new session on the runner. */
    turn: (binding: RunnerBinding) => turns(binding, 1),
    /** `count` turns of one new session on the runner. */
    turns,
  };
}

const turnEnd = (events: RuntimeEvent[]) => events.find((e) => e.type === 'turn.completed' || e.type === 'turn.failed');

/** The AgentAPIError a call fails with ({code, details}), or 'ok'. */
async function refusal(
  fn: () => Promise<unknown>,
): Promise<string | { code: string; details: Record<string, unknown> }> {
  try {
    await fn();
    return 'ok';
  } catch (error) {
    if (error instanceof AgentAPIError) return { code: error.code, details: error.details };
    throw error;
  }
}
const codeOf = async (fn: () => Promise<unknown>) => {
  const r = await refusal(fn);
  return typeof r === 'string' ? r : r.code;
};

describeStores('runner storage.*', (factory) => {
  it('redacts a credential on the way in, JSON and bytes alike (storage holds nothing the record may not)', async () => {
    const { turn } = await host(factory);
    const key = 'sk-proj-Ab3dE5fG7hJ9kL1mN3pQ5rS7tV9wX1yZ3aB5';
    const seen: unknown[] = [];
    await turn(
      runner(
        async (_ctx, { api }) => {
          await api.storage.set('binding', 'json', { token: key });
          await api.storage.set('binding', 'bytes', new TextEncoder().encode(`token=${key}`));
          seen.push((await api.storage.get('binding', 'json')).value);
          const bytes = await api.storage.get('binding', 'bytes');
          seen.push(Buffer.from(bytes.value as string, 'base64').toString());
          // A key cannot be redacted without losing it: one that holds a secret is refused.
          seen.push(await codeOf(() => api.storage.set('binding', `k/${key}`, 1)));
        },
        ['binding'],
      ),
    );
    expect(seen).toEqual([{ token: '[REDACTED:openai_key]' }, 'token=[REDACTED:openai_key]', 'invalid_argument']);
  });

  it('keeps JSON and bytes, lists by prefix with opaque cursors, deletes; every call audited', async () => {
    const { turn } = await host(factory);
    const seen: Record<string, unknown> = {};
    const bytes = Uint8Array.from({ length: 300 }, (_, i) => (i * 7) % 256);
    const events = await turn(
      runner(
        async (ctx, { api }) => {
          seen.available = ctx.context.available_apis.storage;
          seen.resources = ctx.resources.storage;
          seen.set = await api.storage.set('plugin', 'checkpoint/1', { step: 1, notes: ['a', 'b'] });
          await api.storage.set('plugin', 'checkpoint/2', 'two');
          await api.storage.set('plugin', 'checkpoint/3', null);
          await api.storage.set('plugin', 'other', 3);
          seen.blob = await api.storage.set('plugin', 'blob.bin', bytes);
          seen.json = await api.storage.get('plugin', 'checkpoint/1');
          seen.bytes = await api.storage.get('plugin', 'blob.bin');
          seen.nullValue = (await api.storage.get('plugin', 'checkpoint/3')).value;
          const first = await api.storage.list('plugin', 'checkpoint/', { limit: 2 });
          const second = await api.storage.list('plugin', 'checkpoint/', { limit: 2, cursor: first.next_cursor });
          seen.pages = [first, second].map((p) => ({ keys: p.items.map((i) => i.key), more: p.has_more }));
          seen.all = (await api.storage.list('plugin')).items.map((i) => `${i.key}:${i.encoding}:${i.size}`);
          seen.deleted = [
            await api.storage.delete('plugin', 'checkpoint/2'),
            await api.storage.delete('plugin', 'checkpoint/2'),
          ];
          seen.afterDelete = await codeOf(() => api.storage.get('plugin', 'checkpoint/2'));
        },
        ['plugin'],
      ),
    );
    expect(seen.available).toBe(true);
    expect(seen.resources).toEqual({ plugin_storage: true, workspace_storage: false, binding_storage: false });
    expect(seen.set).toEqual({ area: 'plugin', key: 'checkpoint/1', size: 28, encoding: 'json' });
    expect(seen.blob).toMatchObject({ size: 300, encoding: 'base64' });
    expect(seen.json).toMatchObject({ key: 'checkpoint/1', value: { step: 1, notes: ['a', 'b'] }, encoding: 'json' });
    expect(seen.bytes).toMatchObject({ encoding: 'base64', size: 300 });
    expect(Buffer.from((seen.bytes as { value: string }).value, 'base64')).toEqual(Buffer.from(bytes));
    expect(seen.nullValue).toBeNull();
    expect(seen.pages).toEqual([
      { keys: ['checkpoint/1', 'checkpoint/2'], more: true },
      { keys: ['checkpoint/3'], more: false },
    ]);
    expect(seen.all).toEqual([
      'blob.bin:base64:300',
      'checkpoint/1:json:28',
      'checkpoint/2:json:5',
      'checkpoint/3:json:4',
      'other:json:1',
    ]);
    expect(seen.deleted).toEqual([{ deleted: true }, { deleted: false }]);
    expect(seen.afterDelete).toBe('not_found');
    const calls = audits(events);
    expect(calls[0]).toMatchObject({
      action: 'storage.set',
      result: 'allowed',
      resource: 'checkpoint/1',
      scope: 'storage:plugin',
    });
    expect(calls.filter((c) => c.action === 'storage.list').map((c) => c.resource)).toEqual([
      'checkpoint/',
      'checkpoint/',
      '',
    ]);
    expect(calls.at(-1)).toMatchObject({
      action: 'storage.get',
      result: 'refused',
      code: 'not_found',
      resource: 'checkpoint/2',
    });
    // The values never enter the record: the audit holds names only.
    expect(JSON.stringify(events)).not.toContain('notes');
  });

  it('refuses areas the manifest does not ask for or the binding narrows away, bad keys, areas and cursors', async () => {
    const { turn } = await host(factory);
    const codes: Record<string, string> = {};
    let available: unknown;
    const events = await turn(
      runner(
        async (ctx, { api }) => {
          available = ctx.context.available_apis.storage;
          codes.notAsked = await codeOf(() => api.storage.get('workspace', 'k'));
          codes.narrowed = await codeOf(() => api.storage.set('plugin', 'k', 1));
          codes.granted = await codeOf(() => api.storage.set('binding', 'k', 1));
          codes.badKey = await codeOf(() => api.storage.set('binding', 'no spaces', 1));
          codes.longKey = await codeOf(() => api.storage.get('binding', 'k'.repeat(257)));
          codes.badArea = await codeOf(() => api.call('storage.get', { area: 'everything', key: 'k' }));
          codes.badCursor = await codeOf(() => api.storage.list('binding', null, { cursor: 'bm90LWEtY3Vyc29y' }));
          codes.noValue = await codeOf(() => api.call('storage.set', { area: 'binding', key: 'k' }));
          codes.badBase64 = await codeOf(() =>
            api.call('storage.set', { area: 'binding', key: 'k', value: 'not base64!', encoding: 'base64' }),
          );
        },
        ['plugin', 'binding'],
        { policy: { storage: ['binding'] } },
      ),
    );
    expect(available).toBe(true);
    expect(codes).toEqual({
      notAsked: 'unauthorized',
      narrowed: 'unauthorized',
      granted: 'ok',
      badKey: 'invalid_argument',
      longKey: 'invalid_argument',
      badArea: 'invalid_argument',
      badCursor: 'invalid_argument',
      noValue: 'invalid_argument',
      badBase64: 'invalid_argument',
    });
    expect(audits(events).map((a) => [a.action, a.scope, a.result, a.code ?? null])).toEqual([
      ['storage.get', 'storage:workspace', 'refused', 'unauthorized'],
      ['storage.set', 'storage:plugin', 'refused', 'unauthorized'],
      ['storage.set', 'storage:binding', 'allowed', null],
      ['storage.set', 'storage:binding', 'refused', 'invalid_argument'],
      ['storage.get', 'storage:binding', 'refused', 'invalid_argument'],
      ['storage.get', 'storage:everything', 'refused', 'invalid_argument'],
      ['storage.list', 'storage:binding', 'refused', 'invalid_argument'],
      ['storage.set', 'storage:binding', 'refused', 'invalid_argument'],
      ['storage.set', 'storage:binding', 'refused', 'invalid_argument'],
    ]);
    // A runner whose manifest asks for no area: the context says so, and every area is refused.
    let none: unknown;
    const bare = await turn(
      runner(async (ctx, { api }) => {
        none = [ctx.context.available_apis.storage, await codeOf(() => api.storage.list('plugin'))];
      }, []),
    );
    expect(none).toEqual([false, 'unauthorized']);
    expect(audits(bare)).toEqual([expect.objectContaining({ action: 'storage.list', code: 'unauthorized' })]);
  });

  it('refuses a value over 1 MiB, a payload over the limit and a write past the area quota', async () => {
    const { turn } = await host(factory);
    const answers: Record<string, unknown> = {};
    const mib = new Uint8Array(MAX_STORAGE_VALUE_BYTES).fill(7);
    const events = await turn(
      runner(
        async (_ctx, { api, emit }) => {
          answers.tooBigBytes = await refusal(() =>
            api.storage.set('workspace', 'big', new Uint8Array(MAX_STORAGE_VALUE_BYTES + 1)),
          );
          answers.tooBigJson = await refusal(() => api.storage.set('workspace', 'big', 'x'.repeat(1_100_000)));
          answers.hugePayload = await codeOf(() => api.storage.set('workspace', 'big', 'x'.repeat(2_000_000)));
          const fits: string[] = [];
          // Seven 1 MiB values, then one that fills the quota to the byte (keys count too): the area is full.
          for (let i = 0; i < 7; i++) fits.push(await codeOf(() => api.storage.set('workspace', `chunk-${i}`, mib)));
          const left = STORAGE_AREA_QUOTA_BYTES - 7 * (MAX_STORAGE_VALUE_BYTES + 'chunk-0'.length) - 'fill'.length;
          fits.push(await codeOf(() => api.storage.set('workspace', 'fill', new Uint8Array(left))));
          fits.push(await codeOf(() => api.storage.set('workspace', 'chunk-8', mib)));
          answers.fits = fits;
          answers.overQuota = await refusal(() => api.storage.set('workspace', 'one-more', 'x'));
          // Replacing a value counts the new size, not both.
          answers.replace = await codeOf(() => api.storage.set('workspace', 'chunk-0', 'small now'));
          answers.afterReplace = await codeOf(() => api.storage.set('workspace', 'one-more', 'x'));
          await emit('message.completed', { message: { role: 'assistant', content: 'done' } });
        },
        ['workspace'],
      ),
    );
    expect(answers.tooBigBytes).toEqual({
      code: 'payload_too_large',
      details: { limit: MAX_STORAGE_VALUE_BYTES, size: MAX_STORAGE_VALUE_BYTES + 1 },
    });
    expect(answers.tooBigJson).toMatchObject({
      code: 'payload_too_large',
      details: { limit: MAX_STORAGE_VALUE_BYTES },
    });
    expect(answers.hugePayload).toBe('payload_too_large');
    expect(answers.fits).toEqual([...Array(8).fill('ok'), 'payload_too_large']);
    expect(answers.overQuota).toMatchObject({
      code: 'payload_too_large',
      details: { reason: 'quota_exceeded', quota: STORAGE_AREA_QUOTA_BYTES, area: 'workspace' },
    });
    expect(answers.replace).toBe('ok');
    expect(answers.afterReplace).toBe('ok');
    const refused = audits(events).filter((a) => a.result === 'refused');
    expect(refused.map((a) => [a.resource, a.code])).toEqual([
      ['big', 'payload_too_large'],
      ['big', 'payload_too_large'],
      // Refused by the proxy before the action read the payload: no key known.
      [null, 'payload_too_large'],
      ['chunk-8', 'payload_too_large'],
      ['one-more', 'payload_too_large'],
    ]);
    expect(payload(turnEnd(events)).answer).toBe('done');
  });

  it('keeps values across runs: the plugin area for the same plugin, the workspace area for any runner', async () => {
    const { turn } = await host(factory);
    const seen: Record<string, unknown> = {};
    await turn(
      runner(
        async (_ctx, { api }) => {
          await api.storage.set('plugin', 'shared', 'from run 1');
          await api.storage.set('workspace', 'note', 'for everyone granted the workspace');
          await api.storage.set('binding', 'mine', 'this binding only');
        },
        ['plugin', 'workspace', 'binding'],
      ),
    );
    // The same plugin (another runner instance, another session): sees the plugin area; the binding area is new.
    await turn(
      runner(
        async (_ctx, { api }) => {
          seen.samePlugin = (await api.storage.get('plugin', 'shared')).value;
          seen.sameWorkspace = (await api.storage.get('workspace', 'note')).value;
          seen.otherBinding = await codeOf(() => api.storage.get('binding', 'mine'));
        },
        ['plugin', 'workspace', 'binding'],
      ),
    );
    // Another plugin: its own plugin area is empty; the workspace area is shared.
    const other = await turn(
      runner(
        async (_ctx, { api }) => {
          seen.otherPlugin = await codeOf(() => api.storage.get('plugin', 'shared'));
          seen.otherList = (await api.storage.list('plugin')).items.length;
          seen.otherWorkspace = (await api.storage.get('workspace', 'note')).value;
        },
        ['plugin', 'workspace'],
        {},
        'someone/else',
      ),
    );
    expect(seen).toEqual({
      samePlugin: 'from run 1',
      sameWorkspace: 'for everyone granted the workspace',
      otherBinding: 'not_found',
      otherPlugin: 'not_found',
      otherList: 0,
      otherWorkspace: 'for everyone granted the workspace',
    });
    expect(audits(other)[0]).toMatchObject({ action: 'storage.get', result: 'refused', code: 'not_found' });
  });

  it('keeps the binding area for the later turns of the same binding', async () => {
    const { turns } = await host(factory);
    const seen: unknown[] = [];
    let turnNo = 0;
    await turns(
      runner(
        async (_ctx, { api }) => {
          turnNo++;
          if (turnNo === 1) await api.storage.set('binding', 'cursor', { page: 3 });
          else seen.push((await api.storage.get('binding', 'cursor')).value);
        },
        ['binding'],
      ),
      2,
    );
    expect(seen).toEqual([{ page: 3 }]);
  });
});
