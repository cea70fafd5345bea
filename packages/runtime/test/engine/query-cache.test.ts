import { TableNode } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { Runtime } from '../../src/index.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { type Harness, harness } from './harness.js';
import { act, answer } from './helpers.js';

/**
 * Commands and queries read a session's read models through the event log's cache, like the workers: loaded whole
 * once, then kept current by this process's own writes, and loaded again only when the store's last sequence says
 * another writer moved on.
 */
let h: Harness | undefined;
const others: Runtime[] = [];
afterEach(async () => {
  for (const runtime of others.splice(0)) await runtime.close();
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

/** Counts the statements that select read models from then on. */
function countLoads(harness: Harness): { loads: number } {
  const counter = { loads: 0 };
  const db = harness.store.db.withPlugin({
    transformQuery({ node }) {
      const froms = node.kind === 'SelectQueryNode' ? (node.from?.froms ?? []) : [];
      if (froms.some((f) => TableNode.is(f) && f.table.identifier.name === 'oar_read_models')) counter.loads++;
      return node;
    },
    transformResult: async ({ result }) => result,
  });
  Object.defineProperty(harness.store, 'db', { value: db });
  return counter;
}

const read = (id: string) => act([{ id, type: 'tool', name: 'read', args: { filePath: 'README.md' } }]);

describe('read models for commands and queries', () => {
  it('are loaded once, then served from the cache while this process writes', async () => {
    h = await harness({ steps: [read('a'), answer('one'), read('b'), answer('two')] });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'first' });
    await h.runtime.settled(sessionId);
    const counter = countLoads(h);
    const first = await h.runtime.getSession({ sessionId });
    for (let i = 0; i < 5; i++) {
      await h.runtime.getSession({ sessionId });
      await h.runtime.getThreadRead({ sessionId, threadId });
      await h.runtime.getState({ sessionId });
    }
    // Before: every query loaded all of the session's read models (16 statements here).
    expect(counter.loads).toBeLessThanOrEqual(1);

    // This process's own writes keep the cached models whole and current.
    await h.runtime.setState({ sessionId, key: 'plan', value: { step: 2 } });
    await h.runtime.submitTurn({ sessionId, input: 'second' });
    await h.runtime.settled(sessionId);
    const loadsBefore = counter.loads;
    const after = await h.runtime.getSession({ sessionId });
    expect(await h.runtime.getState({ sessionId })).toEqual({ plan: { step: 2 } });
    expect(counter.loads).toBe(loadsBefore);
    expect(after.snapshot.threads[0]?.turns).toHaveLength(2);
    expect(first.snapshot.threads[0]?.turns).toHaveLength(1);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('see what another process wrote', async () => {
    h = await harness({ steps: [read('a'), answer('one')] });
    const { sessionId } = await h.runtime.createSession();
    expect(await h.runtime.getState({ sessionId })).toEqual({});
    // A second runtime on the same SQLite file: a control plane of another process.
    const other = await Runtime.create({
      store: h.store,
      workspaceRoot: h.workspace,
      model: () => {
        const model = createScriptedModel({ steps: [] });
        return { model, provider: 'oar-script', modelId: model.modelId, supportsForcedToolChoice: true };
      },
    });
    others.push(other);
    await other.setState({ sessionId, key: 'owner', value: 'other' });
    expect(await h.runtime.getState({ sessionId })).toEqual({ owner: 'other' });
    const snapshot = await h.runtime.getSession({ sessionId });
    expect(snapshot.snapshot.sessionId).toBe(sessionId);
  });
});
