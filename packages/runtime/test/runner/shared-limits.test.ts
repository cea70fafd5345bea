import { expect, it } from 'vitest';
import { SharedProviderLimiter } from '../../src/models/shared-limits.js';
import { describeStores } from '../support/stores.js';

/**
 * Provider limits shared through the store (models/shared-limits.ts): two limiters on two independent Store
 * connections of one database stand for two workers. Whatever the interleaving, the number of slots held at once
 * never exceeds the limit; a pause one worker records holds back the other; a dead worker's slots run out.
 */
const MODEL = { provider: 'fake', modelId: 'm1' };
const never = new AbortController().signal;

describeStores('shared provider limits', (factory) => {
  it('three workers with a concurrency limit of 2 never hold a third slot', async () => {
    const db = await factory.fresh();
    // PostgreSQL: three pools, as three workers have. SQLite: one connection (OAR keeps limits in memory there; the
    // class still holds on it, serialized by the connection).
    const another = async () => (factory.dialect === 'postgres' ? db.open() : db.store);
    const stores = [db.store, await another(), await another()];
    const limiters = stores.map(
      (store, i) => new SharedProviderLimiter(store, { fake: { maxConcurrency: 2 } }, { owner: `w${i}`, pollMs: 10 }),
    );
    let running = 0;
    let most = 0;
    const waits: string[] = [];
    const call = async (limiter: SharedProviderLimiter) => {
      const slot = await limiter.acquire(MODEL, never, (wait) => {
        waits.push(wait.reason);
      });
      running++;
      most = Math.max(most, running);
      // The shared count agrees with what the callers hold.
      expect(await limiter.running('fake')).toBeLessThanOrEqual(2);
      // Held long enough that the nine callers surely overlap, however slow the store's transactions are.
      await new Promise((resolve) => setTimeout(resolve, 150));
      running--;
      slot.release();
    };
    await Promise.all(Array.from({ length: 9 }, (_, i) => call(limiters[i % 3] as SharedProviderLimiter)));
    expect(most).toBe(2);
    expect(waits).toContain('concurrency');
    // Released slots are gone (the release is not awaited by the caller: poll until the deletes landed).
    for (let i = 0; i < 100 && (await limiters[0]?.running('fake')) !== 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await limiters[0]?.running('fake')).toBe(0);
  });

  it('a per-minute limit counts the starts of every worker', async () => {
    const db = await factory.fresh();
    const limits = { 'fake:m1': { requestsPerMinute: 3 } };
    const a = new SharedProviderLimiter(db.store, limits, { owner: 'a', pollMs: 10 });
    const b = new SharedProviderLimiter(factory.dialect === 'postgres' ? await db.open() : db.store, limits, {
      owner: 'b',
      pollMs: 10,
    });
    for (const limiter of [a, b, a]) (await limiter.acquire(MODEL, never)).release();
    const controller = new AbortController();
    let told: { reason: string; until?: string } | undefined;
    const fourth = b.acquire(MODEL, controller.signal, (wait) => {
      told = wait;
      controller.abort(new Error('gave up'));
    });
    await expect(fourth).rejects.toThrow('gave up');
    expect(told?.reason).toBe('requests_per_minute');
    expect(Date.parse(told?.until ?? '')).toBeGreaterThan(Date.now());
  });

  it("a provider's pause recorded by one worker holds back the other's calls of that model only", async () => {
    const db = await factory.fresh();
    const a = new SharedProviderLimiter(db.store, {}, { owner: 'a', pollMs: 10 });
    const b = new SharedProviderLimiter(
      factory.dialect === 'postgres' ? await db.open() : db.store,
      {},
      {
        owner: 'b',
        pollMs: 10,
      },
    );
    a.pause(MODEL, 60_000);
    // The pause is written without the caller waiting for it: wait until it is in the store.
    for (let i = 0; i < 100; i++) {
      const rows = await db.store.db.selectFrom('oar_provider_pauses').selectAll().execute();
      if (rows.length > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const controller = new AbortController();
    let told: { reason: string; key: string } | undefined;
    const blocked = b.acquire(MODEL, controller.signal, (wait) => {
      told = wait;
      controller.abort(new Error('stop waiting'));
    });
    await expect(blocked).rejects.toThrow('stop waiting');
    expect(told).toMatchObject({ reason: 'rate_limited', key: 'fake:m1' });
    // Another model of the provider is not paused.
    (await b.acquire({ provider: 'fake', modelId: 'm2' }, never)).release();
  });

  it("a dead worker's slots run out: once it stops renewing, the other worker's call proceeds within the TTL", async () => {
    const db = await factory.fresh();
    const limits = { fake: { maxConcurrency: 1 } };
    const dead = new SharedProviderLimiter(db.store, limits, { owner: 'dead', slotTtlMs: 300, pollMs: 10 });
    const alive = new SharedProviderLimiter(factory.dialect === 'postgres' ? await db.open() : db.store, limits, {
      owner: 'alive',
      slotTtlMs: 300,
      pollMs: 10,
    });
    await dead.acquire(MODEL, never); // never released
    const reasons: string[] = [];
    const waiting = alive.acquire(MODEL, never, (wait) => {
      reasons.push(wait.reason);
    });
    // While the holder renews, the other waits (the renewal runs every 100 ms, well inside the 300 ms TTL).
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(reasons).toEqual(['concurrency']);
    dead.abandon();
    const slot = await waiting;
    expect(await alive.running('fake')).toBe(1);
    slot.release();
  });
});
