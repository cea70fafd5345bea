import { expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, type Runtime } from '../../src/index.js';
import { describeStores } from '../support/stores.js';
import { harness } from './harness.js';
import { act, answer, registryWith, waitForEvent } from './helpers.js';

/**
 * The workspace's list of lost actions nobody has answered (`GET /v1/decisions` `unreconciled`) reads thread rows by
 * their text before parsing them: on both stores it must find a lost action of any session, keep to a workspace,
 * and forget it once answered.
 */

const SCRIPT = {
  steps: [act([{ id: 'w', type: 'tool', name: 'write_once', args: { text: 'x' } }]), answer('after restart')],
};

/** Not idempotent; its first call never returns (the runtime "dies" in it). */
function writeOnce(calls: { n: number }) {
  return defineTool<{ text: string }>({
    name: 'write_once',
    description: 'Writes once.',
    input: z.strictObject({ text: z.string() }),
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: false,
    isIdempotent: false,
    interruptBehavior: 'block',
    capabilities: ['write'],
    async execute() {
      calls.n++;
      if (calls.n === 1) await new Promise(() => undefined);
      return { text: 'written' };
    },
  });
}

describeStores('unreconciled actions across a workspace', (factory) => {
  it('lists a lost action until it is answered, in its workspace only', async () => {
    const db = await factory.fresh();
    const calls = { n: 0 };
    const options = {
      tools: registryWith(writeOnce(calls)),
      permissions: { mode: 'bypass' as const },
      worker: { leaseTtlMs: 300, pollMs: 50 },
    };
    const crashed = await harness(SCRIPT, { ...options, store: db.store });
    const { sessionId, threadId } = await crashed.runtime.createSession();
    await crashed.runtime.submitTurn({ sessionId, input: 'go' });
    await waitForEvent(crashed, sessionId, 'tool.started');
    crashed.runtime.worker?.abandon();
    // The crashed runtime is never closed (its driver is stuck in the tool); the factory closes its store.
    const second = await harness(SCRIPT, { ...options, store: await db.open(), workspaceRoot: crashed.workspace });
    const runtime: Runtime = second.runtime;
    try {
      await runtime.settled(sessionId);
      const listed = await runtime.unreconciledActions();
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({ sessionId, threadId, graphActionId: 'w', toolName: 'write_once' });
      expect(await runtime.unreconciledActions({ workspaceId: 'default' })).toHaveLength(1);
      expect(await runtime.unreconciledActions({ workspaceId: 'elsewhere' })).toEqual([]);
      await runtime.respondAction({ sessionId, actionId: listed[0]?.actionId ?? '', decision: 'not_happened' });
      expect(await runtime.unreconciledActions()).toEqual([]);
      expect(calls.n).toBe(1);
    } finally {
      await runtime.close();
    }
  });
});
