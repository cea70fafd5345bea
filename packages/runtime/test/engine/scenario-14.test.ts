import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bindingModel } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { tempDir } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { allEvents, answer, ofType, payload } from './helpers.js';

/**
 * Acceptance scenario 14 of the Agent Runtime standard, model routing and single candidate: "Given only one model
 * candidate is available, runtime emits `routing.single_candidate` and the read model shows candidate count,
 * decision reason, capability gap, cost state, and limit state." One configured model (a priced scripted model,
 * resolved from the binding as any configured model is) and session budgets: each turn records its task profile,
 * then `routing.single_candidate` (one candidate, why, no capability gap) before its first model call — no chain
 * facts — and the session snapshot's `routingLimitSummary` shows the candidate count, the selected model, the
 * decision reason, the capability gap, the cost of the priced calls and the limits with what was spent.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('acceptance scenario 14: model routing and single candidate', () => {
  it('records routing.single_candidate; the read model shows count, reason, gap, cost and limits', async () => {
    const dir = tempDir('oar-single-');
    const file = join(dir, 'only.json');
    const usage = { inputTokens: 1_000, outputTokens: 200 };
    writeFileSync(
      file,
      JSON.stringify({
        steps: [
          { ...answer('One.'), usage },
          { ...answer('Two.'), usage },
        ],
      }),
    );
    h = await harness(
      { steps: [] },
      {
        defaultModel: 'only',
        models: { only: { provider: 'script', file, price: { inputPerMillion: 3, outputPerMillion: 15 } } },
        budgets: { turn: { tokens: 50_000 }, session: { costUsd: 1 } },
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    const first = await h.runtime.submitTurn({ sessionId, input: 'one' });
    await h.runtime.settled(sessionId);
    const second = await h.runtime.submitTurn({ sessionId, input: 'two' });
    await h.runtime.settled(sessionId);

    const events = await allEvents(h, sessionId);
    const single = ofType(events, 'routing.single_candidate');
    // One decision per turn, with the turn's ids, before its first model call; no chain was resolved.
    expect(single.map((e) => [e.threadId, e.turnId])).toEqual([
      [threadId, first.turnId],
      [threadId, second.turnId],
    ]);
    expect(events.filter((e) => ['routing.decided', 'routing.candidates.resolved'].includes(e.type))).toEqual([]);
    for (const decision of single) {
      const turn = events.filter((e) => e.turnId === decision.turnId);
      const index = (type: string) => turn.findIndex((e) => e.type === type);
      expect(index('task.profile.resolved')).toBeLessThan(index('routing.single_candidate'));
      expect(index('routing.single_candidate')).toBeLessThan(index('model.requested'));
      expect(payload(decision)).toEqual({
        candidateCount: 1,
        selectedModel: payload(turn[index('model.requested')]).modelId,
        provider: 'script',
        decisionSource: 'configuration',
        reason: 'the only candidate: one model is configured',
        capabilityGap: 'none',
      });
    }
    // The requirements it was checked against: the main agent on the tool carrier needs tool calling.
    expect(payload(ofType(events, 'task.profile.resolved')[0])).toMatchObject({
      taskKind: 'agent_turn',
      requirements: { toolCalling: true },
    });
    // Priced: each call's cost recorded.
    expect(ofType(events, 'cost.recorded').map((e) => payload(e).amount)).toEqual([0.006, 0.006]);

    const { snapshot } = await h.runtime.getSession({ sessionId });
    assertSnapshotConforms(snapshot);
    const summary = snapshot.routingLimitSummary;
    expect(summary).toMatchObject({
      candidateCount: 1,
      singleCandidate: true,
      selectedModel: payload(single[0]).selectedModel,
      provider: 'script',
      reason: 'the only candidate: one model is configured',
      capabilityGap: 'none',
      costState: { currency: 'USD', amount: 0.012, pricedCalls: 2, approximate: true },
      limitState: {
        turn: { tokens: 50_000 },
        session: { costUsd: 1 },
        sessionSpent: { tokens: 2_400, costUsd: 0.012, modelCalls: 2 },
      },
    });
    // Per turn too: each turn's cost state.
    expect(snapshot.threads[0]?.turns.map((t) => t.costState)).toEqual([
      expect.objectContaining({ tokens: 1_200, modelCalls: 1, amount: 0.006 }),
      expect.objectContaining({ tokens: 1_200, modelCalls: 1, amount: 0.006 }),
    ]);
    assertEventsConform(events);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});
