import type { ActionResult } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { RevealedObservations } from '../../src/policy/revealed.js';

/** The unredacted side channel is bounded and stands only for the very result it was made with. */

const observation = (text: string): ActionResult => ({ id: 'a', status: 'completed', content: text, artifacts: [] });

describe('RevealedObservations', () => {
  it('answers for the same turn, run, action and attempt only', () => {
    const revealed = new RevealedObservations();
    revealed.remember({ turnId: 't1', runId: 'r1', actionId: 'a', attempt: 1, observation: observation('raw') });
    expect(revealed.get('t1', 'r1', 'a', 1)?.content).toBe('raw');
    expect(revealed.get('t1', 'r1', 'a', 2)).toBeUndefined();
    expect(revealed.get('t2', 'r1', 'a', 1)).toBeUndefined();
    expect(revealed.get('t1', 'r1', 'b', 1)).toBeUndefined();
    expect(revealed.hasRun('r1')).toBe(true);
    revealed.forget('r1', 'a');
    expect(revealed.get('t1', 'r1', 'a', 1)).toBeUndefined();
    expect(revealed.hasRun('r1')).toBe(false);
  });

  it('a call of another turn drops the previous turn’s entries', () => {
    const revealed = new RevealedObservations();
    revealed.remember({ turnId: 't1', runId: 'r1', actionId: 'a', attempt: 1, observation: observation('one') });
    revealed.remember({ turnId: 't2', runId: 'r2', actionId: 'a', attempt: 1, observation: observation('two') });
    expect(revealed.size).toBe(1);
    expect(revealed.holds('t1')).toBe(false);
    expect(revealed.holds('t2')).toBe(true);
  });

  it('keeps at most its entry and character bounds, least recently remembered first out', () => {
    const revealed = new RevealedObservations(3, 10_000);
    for (let i = 0; i < 5; i++) {
      revealed.remember({ turnId: 't', runId: 'r', actionId: `a${i}`, attempt: 1, observation: observation(`${i}`) });
    }
    expect(revealed.size).toBe(3);
    expect(revealed.get('t', 'r', 'a0', 1)).toBeUndefined();
    expect(revealed.get('t', 'r', 'a4', 1)).toBeDefined();

    const small = new RevealedObservations(64, 200);
    small.remember({ turnId: 't', runId: 'r', actionId: 'big', attempt: 1, observation: observation('x'.repeat(500)) });
    expect(small.size).toBe(0);
    small.remember({ turnId: 't', runId: 'r', actionId: 'a', attempt: 1, observation: observation('y'.repeat(80)) });
    small.remember({ turnId: 't', runId: 'r', actionId: 'b', attempt: 1, observation: observation('z'.repeat(80)) });
    expect(small.size).toBe(1);
    expect(small.get('t', 'r', 'b', 1)).toBeDefined();
  });
});
