import { describe, expect, it } from 'vitest';
import { stepTurn } from '../../src/worker/step-scheduler.js';

describe('step scheduler', () => {
  it('lets one waiting thread go per event-loop iteration, in arrival order, with timers served in between', async () => {
    const order: string[] = [];
    let timerFired = -1;
    const threads = Array.from({ length: 50 }, (_, i) =>
      stepTurn().then(() => {
        order.push(`t${i}`);
        // A step's synchronous work: nothing else may run until it is done.
        const until = Date.now() + 2;
        while (Date.now() < until) {}
      }),
    );
    setTimeout(() => {
      timerFired = order.length;
    }, 0);
    await Promise.all(threads);
    expect(order).toEqual(Array.from({ length: 50 }, (_, i) => `t${i}`));
    // The timer ran long before the fifty steps were done (with plain setImmediate it would wait for all of them).
    expect(timerFired).toBeGreaterThanOrEqual(0);
    expect(timerFired).toBeLessThan(10);
  });
});
