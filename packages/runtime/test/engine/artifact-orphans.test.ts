import { join } from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, Store } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, registryWith, waitForEvent } from './helpers.js';

/**
 * An artifact and the event that references it land together. Seen: the full output of a tool was stored as an
 * artifact first and recorded second, so a process killed in between (or fenced off after losing its lease) left
 * artifact rows nothing references. Here a worker stalls inside a tool, another takes the thread over, and then
 * the stalled tool returns a large output: its append is refused by fencing, and its artifact must not exist.
 */

const open: Harness[] = [];
const stores: Store[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
  for (const store of stores.splice(0)) await store.close();
});

describe('artifacts written with their events', () => {
  it('a fenced-off worker leaves no artifact row behind; every stored artifact is referenced', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const calls = { n: 0 };
    const tool = defineTool<{ label: string }>({
      name: 'slow_report',
      description: 'Returns a long report, slowly the first time.',
      input: z.strictObject({ label: z.string() }),
      isReadOnly: false,
      isConcurrencySafe: false,
      isDestructive: false,
      isIdempotent: true,
      interruptBehavior: 'block',
      capabilities: ['write'],
      async execute(input) {
        calls.n++;
        if (calls.n === 1) await gate;
        return { text: `report ${input.label} #${calls.n}\n${'line\n'.repeat(20_000)}` };
      },
    });
    const script = {
      steps: [act([{ id: 'r', type: 'tool', name: 'slow_report', args: { label: 'x' } }]), answer('reported')],
    };
    const options = {
      tools: registryWith(tool),
      permissions: { mode: 'bypass' as const },
      worker: { leaseTtlMs: 300, pollMs: 50 },
    };
    const stalled = await harness(script, options);
    stores.push(stalled.store);
    const { sessionId } = await stalled.runtime.createSession();
    await stalled.runtime.submitTurn({ sessionId, input: 'go' });
    await waitForEvent(stalled, sessionId, 'tool.started');
    stalled.runtime.worker?.abandon();

    const store = await Store.open(join(stalled.dir, 'oar.db'));
    const second = await harness(script, { ...options, store, workspaceRoot: stalled.workspace });
    open.push(second);
    await second.runtime.settled(sessionId);
    expect(calls.n).toBe(2);

    // The stalled worker wakes up: its tool returns, its output is refused with its append.
    release();
    await Promise.allSettled(stalled.runtime.worker?.driving() ?? []);

    const { rows } = await sql<{ id: string }>`select id from oar_artifacts`.execute(store.db);
    const log = JSON.stringify(await allEvents(second, sessionId));
    const orphans = rows.map((row) => row.id).filter((id) => !log.includes(id));
    expect(rows.length).toBeGreaterThan(0);
    expect(orphans).toEqual([]);
    expect(log).not.toContain('#1');
  });
});
