import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, Store } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import {
  actionRows,
  allEvents,
  answer,
  dsl,
  ofType,
  payload,
  READ_ONLY_TEST_TOOL,
  registryWith,
  slowReadTool,
  type Timeline,
} from './helpers.js';

/**
 * The DSL's `execution.strategy` and `max_concurrency`, and the runtime's `wait` and `checkpoint` operations, govern
 * scheduling (docs/protocol.md "Execution strategy"): one at a time in declaration order, a bound on concurrency,
 * barriers that order what comes before and after them, and a checkpoint that makes everything before it durable.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const slow = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  executor: { type: 'tool', target: 'slow_read' },
  input: { label: id },
  ...extra,
});
const runtimeOp = (id: string, operation: string) => ({
  id,
  executor: { type: 'runtime', target: operation },
  input: {},
});

/** The most actions the timeline shows running at once. */
function peak(timeline: Timeline): number {
  let running = 0;
  let most = 0;
  for (const entry of timeline) {
    running += entry.startsWith('start:') ? 1 : -1;
    most = Math.max(most, running);
  }
  return most;
}

async function run(steps: Parameters<typeof harness>[0]['steps'], timeline: Timeline, extra = {}) {
  h = await harness({ steps }, { tools: registryWith(slowReadTool(timeline, 'slow_read', 60)), ...extra });
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  await h.runtime.settled(sessionId);
  return { sessionId, threadId };
}

describe('execution strategy', () => {
  it('dag runs independent actions side by side (the baseline the others change)', async () => {
    const timeline: Timeline = [];
    await run([dsl([slow('a'), slow('b'), slow('c')]), answer('ok')], timeline);
    expect(peak(timeline)).toBe(3);
  });

  it('sequential runs one at a time, in declaration order', async () => {
    const timeline: Timeline = [];
    await run(
      [dsl([slow('c'), slow('a'), slow('b')], { execution: { strategy: 'sequential' } }), answer('ok')],
      timeline,
    );
    expect(timeline).toEqual(['start:c', 'end:c', 'start:a', 'end:a', 'start:b', 'end:b']);
  });

  it('max_concurrency bounds how many run at once', async () => {
    const timeline: Timeline = [];
    const { sessionId } = await run(
      [dsl([slow('a'), slow('b'), slow('c'), slow('d')], { execution: { max_concurrency: 2 } }), answer('ok')],
      timeline,
    );
    expect(peak(timeline)).toBe(2);
    expect(timeline.filter((e) => e.startsWith('end:'))).toHaveLength(4);
    const declared = ofType(await allEvents(h as Harness, sessionId), 'run.status').find(
      (e) => payload(e).phase === 'declared',
    );
    expect(JSON.stringify(payload(declared))).toContain('"maxConcurrency":2');
  });

  it('sequential goes on after a failure under failure_policy continue, and stops under abort', async () => {
    const timeline: Timeline = [];
    const missing = { id: 'x', executor: { type: 'tool', target: 'read' }, input: { filePath: 'missing.txt' } };
    const { sessionId, threadId } = await run(
      [dsl([slow('a'), missing, slow('b')], { execution: { strategy: 'sequential' } }), answer('ok')],
      timeline,
    );
    expect(timeline).toEqual(['start:a', 'end:a', 'start:b', 'end:b']);
    const rows = actionRows(await (h as Harness).runtime.getThreadRead({ sessionId, threadId }));
    expect(rows.map((r) => [r.actionId, r.status])).toEqual([
      ['a', 'completed'],
      ['x', 'failed'],
      ['b', 'completed'],
    ]);
    await h?.runtime.close();
    await h?.store.close();

    const later: Timeline = [];
    const aborted = await run(
      [
        dsl([slow('a'), { ...missing, failure_policy: 'abort' }, slow('b')], { execution: { strategy: 'sequential' } }),
        answer('stopped'),
      ],
      later,
    );
    expect(later).toEqual(['start:a', 'end:a']);
    const after = actionRows(await (h as Harness).runtime.getThreadRead(aborted));
    expect(after.find((r) => r.actionId === 'b')?.status).toBe('cancelled');
  });
});

describe('wait and checkpoint', () => {
  it('a wait is a barrier: what is declared after it starts only once everything before it ended', async () => {
    const timeline: Timeline = [];
    h = await harness(
      { steps: [dsl([slow('a'), slow('b'), runtimeOp('w', 'wait'), slow('c'), slow('d')]), answer('ok')] },
      { tools: registryWith(slowReadTool(timeline, 'slow_read', 60)) },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const firstAfter = Math.min(timeline.indexOf('start:c'), timeline.indexOf('start:d'));
    expect(firstAfter).toBeGreaterThan(timeline.indexOf('end:a'));
    expect(firstAfter).toBeGreaterThan(timeline.indexOf('end:b'));
    // Before and after the barrier, independent actions still run side by side.
    expect(peak(timeline.slice(0, 4))).toBe(2);
    expect(peak(timeline.slice(4))).toBe(2);
    const events = await allEvents(h, sessionId);
    const waitEnded = events.findIndex(
      (e) => e.type === 'run.status' && payload(e).graphActionId === 'w' && e.status === 'completed',
    );
    const cStarted = events.findIndex((e) => e.type === 'tool.started' && payload(e).graphActionId === 'c');
    expect(waitEnded).toBeGreaterThan(-1);
    expect(cStarted).toBeGreaterThan(waitEnded);
  });

  it('a checkpoint is a durability point: what came before it is in the store before anything after it runs', async () => {
    // Facts of read-only work are staged and committed at the next commit point (here: 60 s away at the earliest);
    // the probe, declared after the barrier, reads the store through its own connection.
    for (const [operation, committedBefore] of [
      ['checkpoint', true],
      ['wait', false],
    ] as const) {
      const seen: boolean[] = [];
      let dbFile = '';
      const probe = defineTool<{ label: string }>({
        name: 'probe',
        description: 'Looks at the store from outside.',
        input: z.strictObject({ label: z.string() }),
        ...READ_ONLY_TEST_TOOL,
        async execute() {
          const outside = await Store.open(dbFile);
          try {
            const rows = await outside.db.selectFrom('oar_events').select('body').execute();
            seen.push(rows.some((r) => r.body.includes('"tool.result"') && r.body.includes('"graphActionId":"a"')));
          } finally {
            await outside.close();
          }
          return { text: 'looked' };
        },
      });
      const timeline: Timeline = [];
      h = await harness(
        {
          steps: [
            dsl([
              slow('a'),
              runtimeOp('cp', operation),
              { id: 'p', executor: { type: 'tool', target: 'probe' }, input: { label: 'p' } },
            ]),
            answer('ok'),
          ],
        },
        { tools: registryWith(slowReadTool(timeline, 'slow_read', 10), probe), worker: { lingerMs: 60_000 } },
      );
      dbFile = join(h.dir, 'oar.db');
      const { sessionId } = await h.runtime.createSession();
      await h.runtime.submitTurn({ sessionId, input: 'go' });
      await h.runtime.settled(sessionId);
      expect({ operation, seen }).toEqual({ operation, seen: [committedBefore] });
      await h.runtime.close();
      await h.store.close();
      h = undefined;
    }
  });
});
