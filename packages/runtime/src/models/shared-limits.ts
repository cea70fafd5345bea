import { sql } from 'kysely';
import { type ProviderLimits, ProviderLimitsSchema } from '../config/provider-limits.js';
import { newId } from '../kernel/ids.js';
import type { Store } from '../store/store.js';
import { type Limiter, ProviderLimiter, type Slot, type SlotWait } from './provider-limits.js';

/**
 * Provider limits shared by every worker of one store (docs/models.md "Provider limits", docs/deployment.md): the
 * same rules as the in-process `ProviderLimiter` — calls running at once per key, calls started in any 60 s, and a
 * provider's 429 pause that holds back every caller of that model — kept in the store's tables, so three workers
 * with a limit of 2 never run a third call, and a retry-after one worker is told is respected by all.
 *
 * A call takes its slots in one transaction (on PostgreSQL under an advisory lock per key, taken in key order so
 * two callers never deadlock): count what is running and what started in the last minute, and insert its own rows
 * if they fit. A slot is renewed while its call runs and expires otherwise, so the slots of a worker that died free
 * up within `slotTtlMs`. A call that does not fit polls (with jitter) until it does, or until its signal aborts.
 * Keys without a configured limit cost one read of the pauses, nothing written.
 */

const MINUTE_MS = 60_000;

export interface SharedLimiterOptions {
  /** The worker's name on its slots. */
  owner: string;
  /** How long a slot lasts without renewal (default 30 s); renewed every third of it. */
  slotTtlMs?: number;
  /** How often a waiting call looks again (default 200 ms, with up to half of it as jitter). */
  pollMs?: number;
}

export class SharedProviderLimiter implements Limiter {
  readonly scope = 'store';
  private limits: ProviderLimits;
  private readonly ttl: number;
  private readonly pollMs: number;
  /** The renewals of the slots held now. */
  private readonly renewals = new Set<NodeJS.Timeout>();

  constructor(
    private readonly store: Store,
    limits: ProviderLimits,
    private readonly options: SharedLimiterOptions,
  ) {
    this.limits = ProviderLimitsSchema.parse(limits);
    this.ttl = options.slotTtlMs ?? 30_000;
    this.pollMs = options.pollMs ?? 200;
  }

  configure(limits: ProviderLimits): void {
    this.limits = ProviderLimitsSchema.parse(limits);
  }

  async acquire(
    model: { provider: string; modelId: string },
    signal: AbortSignal,
    onWait?: (wait: SlotWait) => void | Promise<void>,
  ): Promise<Slot> {
    const keys = ProviderLimiter.keysOf(model);
    let told: string | undefined;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      const taken = await this.tryTake(keys);
      if ('slot' in taken) return taken.slot;
      const said = `${taken.wait.reason}:${taken.wait.key}`;
      if (said !== told) {
        told = said;
        await onWait?.(taken.wait);
      }
      await pause(this.pollMs + Math.random() * (this.pollMs / 2), signal);
    }
  }

  /** A provider asked every caller of this model to wait: recorded for every worker of the store. */
  pause(model: { provider: string; modelId: string }, ms: number): void {
    if (!(ms > 0)) return;
    const key = `${model.provider}:${model.modelId}`;
    const until = Date.now() + ms;
    void this.store.db
      .insertInto('oar_provider_pauses')
      .values({ key, paused_until: until })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet((eb) => ({
          // The later of the two: a shorter retry-after never shortens a pause another worker was told.
          paused_until: sql`case when ${eb.ref('oar_provider_pauses.paused_until')} > ${until} then ${eb.ref('oar_provider_pauses.paused_until')} else ${until} end`,
        })),
      )
      .execute()
      .catch(() => undefined); // the store is briefly unavailable: this worker's own retry still waits
  }

  /**
   * Behave like a process that died (fault trials): stop renewing every held slot, release nothing. The slots run
   * out within the TTL and other workers' calls proceed.
   */
  abandon(): void {
    for (const renewal of this.renewals) clearInterval(renewal);
    this.renewals.clear();
  }

  /** Calls running now under a key, across every worker (tests, inspection). */
  async running(key: string): Promise<number> {
    const row = await this.store.db
      .selectFrom('oar_provider_slots')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('key', '=', key)
      .where('expires_at', '>', Date.now())
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  private async tryTake(keys: string[]): Promise<{ slot: Slot } | { wait: SlotWait }> {
    const now = Date.now();
    const limited = keys.filter((key) => this.limits[key] !== undefined);
    if (limited.length === 0) {
      const paused = await this.pausedKey(this.store.db, keys, now);
      return paused ? { wait: paused } : { slot: { release: () => undefined } };
    }
    const id = newId('slot');
    const outcome = await this.store.transaction(async (tx) => {
      // Sorted: two workers locking overlapping keys take them in one order (no deadlock).
      for (const key of [...limited].sort()) await this.store.sql.lockKey(tx, key);
      const paused = await this.pausedKey(tx, keys, now);
      if (paused) return { wait: paused };
      for (const key of limited) {
        const limit = this.limits[key] ?? {};
        // What has run out is cleared as it is met: a dead worker's slots, starts older than a minute.
        await tx.deleteFrom('oar_provider_slots').where('key', '=', key).where('expires_at', '<=', now).execute();
        await tx
          .deleteFrom('oar_provider_starts')
          .where('key', '=', key)
          .where('started_at', '<=', now - MINUTE_MS)
          .execute();
        if (limit.maxConcurrency !== undefined) {
          const row = await tx
            .selectFrom('oar_provider_slots')
            .select((eb) => eb.fn.countAll<number | string>().as('n'))
            .where('key', '=', key)
            .executeTakeFirst();
          if (Number(row?.n ?? 0) >= limit.maxConcurrency) {
            return { wait: { reason: 'concurrency', key, limit: limit.maxConcurrency } satisfies SlotWait };
          }
        }
        if (limit.requestsPerMinute !== undefined) {
          const starts = await tx
            .selectFrom('oar_provider_starts')
            .select('started_at')
            .where('key', '=', key)
            .orderBy('started_at')
            .execute();
          if (starts.length >= limit.requestsPerMinute) {
            const oldest = Number(starts[0]?.started_at ?? now);
            return {
              wait: {
                reason: 'requests_per_minute',
                key,
                limit: limit.requestsPerMinute,
                until: new Date(oldest + MINUTE_MS).toISOString(),
              } satisfies SlotWait,
            };
          }
        }
      }
      for (const key of limited) {
        const limit = this.limits[key] ?? {};
        if (limit.maxConcurrency !== undefined) {
          await tx
            .insertInto('oar_provider_slots')
            .values({ id: `${id}:${key}`, key, owner: this.options.owner, expires_at: now + this.ttl })
            .execute();
        }
        if (limit.requestsPerMinute !== undefined) {
          await tx
            .insertInto('oar_provider_starts')
            .values({ id: `${id}:${key}`, key, started_at: now })
            .execute();
        }
      }
      return { taken: true as const };
    });
    if ('wait' in outcome && outcome.wait) return { wait: outcome.wait };
    return { slot: this.slot(id, limited) };
  }

  /** A held slot: renewed while the call runs, deleted when it ends. */
  private slot(id: string, keys: string[]): Slot {
    const ids = keys.map((key) => `${id}:${key}`);
    const renewal = setInterval(
      () => {
        void this.store.db
          .updateTable('oar_provider_slots')
          .set({ expires_at: Date.now() + this.ttl })
          .where('id', 'in', ids)
          .execute()
          .catch(() => undefined);
      },
      Math.max(50, Math.floor(this.ttl / 3)),
    );
    renewal.unref();
    this.renewals.add(renewal);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        clearInterval(renewal);
        this.renewals.delete(renewal);
        // Not awaited: a release that fails leaves a slot that runs out on its own within the TTL.
        void this.store.db
          .deleteFrom('oar_provider_slots')
          .where('id', 'in', ids)
          .execute()
          .catch(() => undefined);
      },
    };
  }

  private async pausedKey(
    db: Pick<Store['db'], 'selectFrom'>,
    keys: string[],
    now: number,
  ): Promise<SlotWait | undefined> {
    const rows = await db
      .selectFrom('oar_provider_pauses')
      .select(['key', 'paused_until'])
      .where('key', 'in', keys)
      .where('paused_until', '>', now)
      .execute();
    const row = rows[0];
    if (!row) return undefined;
    return { reason: 'rate_limited', key: row.key, until: new Date(Number(row.paused_until)).toISOString() };
  }
}

/** Wait `ms`, or until the signal aborts (then reject with its reason). */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
