import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import {
  act,
  allEvents,
  answer,
  blockingTool,
  ofType,
  payload,
  registryWith,
  slowReadTool,
  type Timeline,
} from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const slow = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  type: 'tool',
  name: 'slow_read',
  args: { label: id },
  ...extra,
});

describe('parallel reads', () => {
  it('runs three independent read-only calls concurrently', async () => {
    const timeline: Timeline = [];
    h = await harness(
      { steps: [act([slow('a'), slow('b'), slow('c')]), answer('All three read.')] },
      { tools: registryWith(slowReadTool(timeline)) },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read three' });
    await h.runtime.settled(sessionId);
    // Every call started before any finished: they overlapped.
    expect(timeline.slice(0, 3).sort()).toEqual(['start:a', 'start:b', 'start:c']);
    const events = await allEvents(h, sessionId);
    const toolEvents = events.filter((e) => e.type === 'tool.started' || e.type === 'tool.result');
    expect(toolEvents.slice(0, 3).map((e) => e.type)).toEqual(['tool.started', 'tool.started', 'tool.started']);
    expect(ofType(events, 'tool.result')).toHaveLength(3);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'All three read.' });
  });

  it('honours maxParallel', async () => {
    const timeline: Timeline = [];
    h = await harness(
      { steps: [act([slow('a'), slow('b'), slow('c')]), answer('ok')] },
      { tools: registryWith(slowReadTool(timeline)), limits: { maxParallel: 2 } },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read three' });
    await h.runtime.settled(sessionId);
    let running = 0;
    let peak = 0;
    for (const entry of timeline) {
      running += entry.startsWith('start:') ? 1 : -1;
      peak = Math.max(peak, running);
    }
    expect(peak).toBe(2);
  });

  it('a write runs alone: never overlapping the reads around it', async () => {
    const timeline: Timeline = [];
    h = await harness(
      {
        steps: [
          act([slow('r1'), { id: 'w', type: 'tool', name: 'slow_block', args: { label: 'w' } }, slow('r2')]),
          answer('ok'),
        ],
      },
      { tools: registryWith(slowReadTool(timeline), blockingTool(timeline, 60)), permissions: { mode: 'bypass' } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'mixed' });
    await h.runtime.settled(sessionId);
    const ws = timeline.indexOf('start:w');
    const we = timeline.indexOf('end:w');
    expect(ws).toBeGreaterThanOrEqual(0);
    expect(we).toBe(ws + 1); // nothing started or ended while the write ran
    // Declaration order is kept around the write: r1 before it, r2 after it.
    expect(timeline.indexOf('end:r1')).toBeLessThan(ws);
    expect(timeline.indexOf('start:r2')).toBeGreaterThan(we);
    const events = await allEvents(h, sessionId);
    const started = ofType(events, 'tool.started').map((e) => payload(e).graphActionId);
    expect(started).toEqual(['r1', 'w', 'r2']);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome?.status).toBe('completed');
  });
});
