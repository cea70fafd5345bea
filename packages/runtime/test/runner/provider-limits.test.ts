import { afterEach, describe, expect, it, vi } from 'vitest';
import { budgetExceeded, checkBudgets } from '../../src/facts/budgets.js';
import { ProviderLimiter, type SlotWait } from '../../src/models/provider-limits.js';
import { effectiveBudgets } from '../../src/read-models/budgets.js';

/** The in-process limiter (docs/models.md "Provider limits") and the budget arithmetic (docs/models.md "Budgets"). */
afterEach(() => {
  vi.useRealTimers();
});

const gpt = { provider: 'openai', modelId: 'gpt-4.1' };
const never = new AbortController().signal;
const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('ProviderLimiter', () => {
  it('maxConcurrency: a call waits (told why) until a running one releases its slot', async () => {
    const limiter = new ProviderLimiter({ 'openai:gpt-4.1': { maxConcurrency: 1 } });
    const first = await limiter.acquire(gpt, never);
    const waits: SlotWait[] = [];
    let started = false;
    const second = limiter
      .acquire(gpt, never, (w) => void waits.push(w))
      .then((slot) => {
        started = true;
        return slot;
      });
    await flush();
    expect(started).toBe(false);
    expect(waits).toEqual([{ reason: 'concurrency', key: 'openai:gpt-4.1', limit: 1 }]);
    first.release();
    (await second).release();
    expect(started).toBe(true);
    expect(limiter.running('openai:gpt-4.1')).toBe(0);
  });

  it('a provider limit counts every model of the provider', async () => {
    const limiter = new ProviderLimiter({ openai: { maxConcurrency: 1 } });
    const first = await limiter.acquire(gpt, never);
    const waits: SlotWait[] = [];
    const other = limiter.acquire({ provider: 'openai', modelId: 'gpt-4o' }, never, (w) => void waits.push(w));
    await flush();
    expect(waits[0]).toMatchObject({ reason: 'concurrency', key: 'openai' });
    first.release();
    (await other).release();
  });

  it('requestsPerMinute: the next call starts when the oldest start leaves its minute', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const limiter = new ProviderLimiter({ openai: { requestsPerMinute: 2 } });
    (await limiter.acquire(gpt, never)).release();
    (await limiter.acquire(gpt, never)).release();
    const waits: SlotWait[] = [];
    let started = false;
    const third = limiter
      .acquire(gpt, never, (w) => void waits.push(w))
      .then((slot) => {
        started = true;
        return slot;
      });
    await vi.advanceTimersByTimeAsync(59_000);
    expect(started).toBe(false);
    expect(waits[0]).toMatchObject({ reason: 'requests_per_minute', key: 'openai', limit: 2 });
    await vi.advanceTimersByTimeAsync(1_500);
    expect(started).toBe(true);
    (await third).release();
  });

  it("a 429's pause holds back every caller of that model (not others) until it is over", async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const limiter = new ProviderLimiter();
    limiter.pause(gpt, 2_000);
    (await limiter.acquire({ provider: 'openai', modelId: 'gpt-4o' }, never)).release();
    const waits: SlotWait[] = [];
    let started = false;
    const paused = limiter
      .acquire(gpt, never, (w) => void waits.push(w))
      .then((slot) => {
        started = true;
        return slot;
      });
    await vi.advanceTimersByTimeAsync(1_900);
    expect(started).toBe(false);
    expect(waits[0]).toMatchObject({ reason: 'rate_limited', key: 'openai:gpt-4.1' });
    await vi.advanceTimersByTimeAsync(200);
    expect(started).toBe(true);
    (await paused).release();
  });

  it('an abort ends a wait at once and leaks no slot', async () => {
    const limiter = new ProviderLimiter({ openai: { maxConcurrency: 1 } });
    const first = await limiter.acquire(gpt, never);
    const controller = new AbortController();
    const waiting = limiter.acquire(gpt, controller.signal);
    controller.abort(new Error('interrupted'));
    await expect(waiting).rejects.toThrow('interrupted');
    first.release();
    expect(limiter.running('openai')).toBe(0);
    (await limiter.acquire(gpt, never)).release();
  });
});

describe('budget checks', () => {
  const spend = (turn: Partial<Record<string, number>>, session: Partial<Record<string, number>> = {}) => ({
    turn: { tokens: 0, costUsd: 0, modelCalls: 0, wallTimeMs: 0, ...turn },
    session: { tokens: 0, costUsd: 0, modelCalls: 0, wallTimeMs: 0, ...session },
  });

  it('limit.changed overrides the binding per dimension; null removes a limit', () => {
    const budgets = effectiveBudgets(
      { turn: { tokens: 100, modelCalls: 5 }, session: { costUsd: 1 }, onExceeded: 'fail' },
      { turn: { tokens: 500, modelCalls: null }, onExceeded: 'wait' },
    );
    expect(budgets).toEqual({ turn: { tokens: 500 }, session: { costUsd: 1 }, onExceeded: 'wait', lowAt: 0.8 });
  });

  it('a call is stopped when spent + its estimate would exceed a limit; wall time once it is used up', () => {
    const budgets = effectiveBudgets({ turn: { tokens: 1_000, wallTimeMs: 5_000 } }, undefined);
    const none = { turn: [], session: [] };
    expect(checkBudgets(budgets, spend({ tokens: 400 }), { tokens: 600, costUsd: 0 }, none).exceeded).toBeUndefined();
    const over = checkBudgets(budgets, spend({ tokens: 401 }), { tokens: 600, costUsd: 0 }, none);
    expect(over.exceeded).toMatchObject({ scope: 'turn', dimension: 'tokens', spent: 401, projected: 1_001 });
    const late = checkBudgets(budgets, spend({ wallTimeMs: 5_000 }), { tokens: 0, costUsd: 0 }, none);
    expect(late.exceeded).toMatchObject({ dimension: 'wallTimeMs' });
    const error = budgetExceeded(over.exceeded as NonNullable<typeof over.exceeded>, spend({ tokens: 401 }));
    expect(error).toMatchObject({ code: 'budget_exceeded', retryable: false, details: { limit: 1_000 } });
  });

  it('quota.low once per limit: a recorded key is not reported again', () => {
    const budgets = effectiveBudgets({ session: { modelCalls: 10 } }, undefined);
    const first = checkBudgets(
      budgets,
      spend({}, { modelCalls: 8 }),
      { tokens: 0, costUsd: 0 },
      { turn: [], session: [] },
    );
    expect(first.low).toMatchObject([{ scope: 'session', dimension: 'modelCalls', key: 'session:modelCalls:10' }]);
    const again = checkBudgets(
      budgets,
      spend({}, { modelCalls: 9 }),
      { tokens: 0, costUsd: 0 },
      {
        turn: [],
        session: ['session:modelCalls:10'],
      },
    );
    expect(again.low).toEqual([]);
  });
});
