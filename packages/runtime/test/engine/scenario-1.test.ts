import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConfig } from '../../src/index.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { type Harness, harness } from './harness.js';
import { allEvents, answer, sleep } from './helpers.js';

/**
 * Acceptance scenario 1 of the Agent Runtime standard, submit and first status: "the runtime emits an accepted or
 * queued fact before any long model output; the thread read model shows preparing, queued or running instead of
 * remaining unknown". The model's resolution is slow here (a provider handshake), and so is its answer.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('acceptance scenario 1: submit and first status', () => {
  it('accepted at once, preparing while the model is resolved, running while it works, queued behind it', async () => {
    const script = { steps: [{ ...answer('First.'), delayMs: 400 }, answer('Second.')] };
    const model = createScriptedModel(script);
    h = await harness(script, {
      model: async (_agent: AgentConfig) => {
        await sleep(400);
        return { model, provider: 'oar-script', modelId: model.modelId, supportsForcedToolChoice: true };
      },
    });
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    const first = await rt.submitTurn({ sessionId, input: 'one' });
    expect(first.status).toBe('accepted');
    const second = await rt.submitTurn({ sessionId, input: 'two' });
    expect(second.status).toBe('queued');

    const seen: string[] = [];
    for (let i = 0; i < 200; i++) {
      const read = await rt.getThreadRead({ sessionId, threadId });
      const status = read.turns?.find((t) => t.turnId === first.turnId)?.status ?? 'absent';
      if (seen.at(-1) !== status) seen.push(status);
      if (status === 'completed') break;
      await sleep(20);
    }
    // Never unknown: accepted (maybe, if read before it started), then preparing, running, completed.
    expect(seen).not.toContain('unknown');
    expect(seen.filter((s) => s !== 'accepted')).toEqual(['preparing', 'running', 'completed']);
    await rt.settled(sessionId);

    const events = await allEvents(h, sessionId);
    const index = (type: string, turnId: string) => events.findIndex((e) => e.type === type && e.turnId === turnId);
    // The accepted and queued facts come before any model output.
    expect(index('turn.submitted', first.turnId)).toBeLessThan(index('model.requested', first.turnId));
    expect(index('turn.submitted', second.turnId)).toBeLessThan(index('model.completed', first.turnId));
    const queued = events.find((e) => e.type === 'turn.submitted' && e.turnId === second.turnId);
    expect(queued?.payload).toMatchObject({ status: 'queued' });
  });
});
