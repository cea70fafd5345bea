import { describe, expect, it } from 'vitest';
import type { ModelScript } from '../../src/index.js';
import { replay } from '../../src/read-models/project.js';
import { TimeTravel } from '../../src/read-models/time-travel.js';
import { harness } from '../engine/harness.js';

/**
 * Time travel (`snapshotAt`, the console's scrubber): the read models at any position, rebuilt from the nearest
 * checkpoint below it, equal a replay of the log's prefix — whatever the order positions are asked in, and after
 * the checkpoints were thinned.
 */
const STEPS = 30;
const script = {
  description: 'time travel: many reads, then an answer',
  steps: [
    ...Array.from({ length: STEPS }, (_, i) => ({
      protocol: { kind: 'act', calls: [{ id: `r${i}`, type: 'tool', name: 'read', args: { filePath: 'README.md' } }] },
    })),
    { protocol: { kind: 'answer', message: 'done' } },
  ],
} as ModelScript;

describe('time travel', () => {
  it('gives, at every position, exactly the replay of the prefix; reads only from the nearest checkpoint', async () => {
    const h = await harness(script, { limits: { maxSteps: 1_000 } });
    try {
      const { sessionId } = await h.runtime.createSession({});
      await h.runtime.submitTurn({ sessionId, input: 'read' });
      await h.runtime.settled(sessionId);
      const events = await h.runtime.log.read(sessionId);
      expect(events.length).toBeGreaterThan(200);
      const reads: number[] = [];
      const travel = new TimeTravel(
        async (_id, after, limit) => {
          reads.push(limit);
          return events.slice(after, after + limit);
        },
        { every: 7, maxPerSession: 5, maxSessions: 2 },
      );
      // Forward, backward and scattered, so checkpoints are made, thinned and reused.
      const positions = [events.length, 1, 50, 49, 120, 3, events.length - 1, 77, 200, 8, 150];
      for (const at of positions) {
        const models = await travel.at(sessionId, at);
        expect(models, `at ${at}`).toEqual(replay(events.slice(0, at)));
      }
      // After the first full pass, a position reads far less than its whole prefix.
      const last = reads.at(-1) as number;
      expect(last).toBeLessThan(150);
      // Asked again: the same.
      const twice = await travel.at(sessionId, 150);
      expect(twice).toEqual(replay(events.slice(0, 150)));
    } finally {
      await h.runtime.close();
      await h.store.close();
    }
  });
});
