import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('a protocol turn', () => {
  it('reads a file, answers, and records the standard events', async () => {
    h = await harness({
      steps: [
        {
          protocol: {
            kind: 'act',
            message: 'Reading.',
            calls: [{ id: 'read_readme', type: 'tool', name: 'read', args: { filePath: 'README.md' } }],
          },
        },
        { protocol: { kind: 'answer', message: 'The README says hello.' } },
      ],
    });
    const { sessionId, threadId } = await h.runtime.createSession({ title: 'smoke' });
    const submitted = await h.runtime.submitTurn({ sessionId, input: 'What does the README say?' });
    expect(submitted.status).toBe('accepted');
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'The README says hello.' });
    const { events } = await h.runtime.getSession({ sessionId, limit: 1000 });
    const types = events.map((e) => e.type);
    expect(types).toContain('tool.result');
    expect(types.indexOf('permission.evaluated')).toBeLessThan(types.indexOf('tool.started'));
    expect(types.at(-2)).toBe('turn.completed');
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    const result = events.find((e) => e.type === 'tool.result');
    expect(JSON.stringify(result?.payload)).toContain('Hello from the sample workspace');
    const replay = await h.runtime.replaySession(sessionId);
    expect(replay.differences).toEqual([]);
  });
});
