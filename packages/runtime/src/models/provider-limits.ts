import { type ProviderLimits, ProviderLimitsSchema } from '../config/provider-limits.js';

/**
 * In-process limits per provider and per model (docs/models.md "Provider limits"): how many calls may run at once
 * (`maxConcurrency`) and start per minute (`requestsPerMinute`), shared by every session the runtime drives; and
 * the pause a provider asks for with a 429 `retry-after`, which holds back every caller of that model in the
 * process, not only the one that was told. Across processes (workers of one PostgreSQL store) the same rules are
 * kept in the store instead: models/shared-limits.ts.
 */

/** Why a call waits for its turn to start. */
export type SlotWaitReason = 'concurrency' | 'requests_per_minute' | 'rate_limited';

export interface SlotWait {
  reason: SlotWaitReason;
  /** The provider or model whose limit holds the call back. */
  key: string;
  /** The configured limit (concurrency or per minute); absent for a provider's pause. */
  limit?: number;
  /** Until when a provider's pause lasts, or when a per-minute slot frees up (ISO time), when known. */
  until?: string;
}

/** A started call's hold on its slots: released once when the call ends. */
export interface Slot {
  release(): void;
}

const MINUTE_MS = 60_000;

/**
 * What the runner asks of provider limits: a slot to start a call, and a provider's pause to honour. The in-process
 * `ProviderLimiter` (one process, SQLite) and the store-backed `SharedProviderLimiter` (every worker of a
 * PostgreSQL store, models/shared-limits.ts) both answer it.
 */
export interface Limiter {
  /** Where the limits are kept: this process's memory, or the store (shared by every worker of it). */
  readonly scope: 'process' | 'store';
  acquire(
    model: { provider: string; modelId: string },
    signal: AbortSignal,
    onWait?: (wait: SlotWait) => void | Promise<void>,
  ): Promise<Slot>;
  pause(model: { provider: string; modelId: string }, ms: number): void;
  /** Behave like a dead process (fault trials): stop renewing what is held, release nothing. */
  abandon?(): void;
}

interface KeyState {
  running: number;
  /** Start times (ms) of the calls of the last minute, oldest first. */
  starts: number[];
  /** A provider's pause (429 retry-after): no call starts before this time (ms). */
  pausedUntil: number;
}

interface Waiter {
  keys: string[];
  grant: (slot: Slot) => void;
}

export class ProviderLimiter implements Limiter {
  readonly scope = 'process';
  private limits: ProviderLimits;
  private readonly states = new Map<string, KeyState>();
  private readonly waiters: Waiter[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(limits: ProviderLimits = {}) {
    this.limits = ProviderLimitsSchema.parse(limits);
  }

  /** Replace the configured limits (running calls keep their slots). */
  configure(limits: ProviderLimits): void {
    this.limits = ProviderLimitsSchema.parse(limits);
    this.pump();
  }

  /** The keys a call of this model counts against. */
  static keysOf(model: { provider: string; modelId: string }): string[] {
    return [model.provider, `${model.provider}:${model.modelId}`];
  }

  /**
   * Start a call: at once when every key has room, otherwise after `onWait` was told why (once per reason) and the
   * slot came free. An abort ends the wait at once (the promise rejects with the signal's reason).
   */
  async acquire(
    model: { provider: string; modelId: string },
    signal: AbortSignal,
    onWait?: (wait: SlotWait) => void | Promise<void>,
  ): Promise<Slot> {
    const keys = ProviderLimiter.keysOf(model);
    if (this.waiters.length === 0 && this.blocked(keys, Date.now()) === undefined) return this.take(keys);
    if (signal.aborted) throw signal.reason;
    let told: string | undefined;
    const tell = async () => {
      const wait = this.blocked(keys, Date.now());
      const said = wait ? `${wait.reason}:${wait.key}` : undefined;
      if (wait && said !== told) {
        told = said;
        await onWait?.(wait);
      }
    };
    await tell();
    // Aborted while `onWait` was being told: no wait to start.
    if (signal.aborted) throw signal.reason;
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
        keys,
        grant: (slot) => {
          signal.removeEventListener('abort', onAbort);
          resolve(slot);
        },
      };
      const onAbort = () => {
        const at = this.waiters.indexOf(waiter);
        if (at >= 0) this.waiters.splice(at, 1);
        reject(signal.reason);
        this.pump();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
      this.pump();
    });
  }

  /**
   * A provider asked to wait (a 429 with `retry-after`): no call of that model starts before the time is up, in
   * any session of this runtime.
   */
  pause(model: { provider: string; modelId: string }, ms: number): void {
    if (!(ms > 0)) return;
    const state = this.state(`${model.provider}:${model.modelId}`);
    state.pausedUntil = Math.max(state.pausedUntil, Date.now() + ms);
    this.pump();
  }

  /** Calls running now under a key (tests, inspection). */
  running(key: string): number {
    return this.states.get(key)?.running ?? 0;
  }

  private state(key: string): KeyState {
    let state = this.states.get(key);
    if (!state) {
      state = { running: 0, starts: [], pausedUntil: 0 };
      this.states.set(key, state);
    }
    return state;
  }

  /** What holds a call of these keys back now, if anything. */
  private blocked(keys: string[], now: number): SlotWait | undefined {
    for (const key of keys) {
      const state = this.states.get(key);
      if (state && state.pausedUntil > now) {
        return { reason: 'rate_limited', key, until: new Date(state.pausedUntil).toISOString() };
      }
      const limit = this.limits[key];
      if (!limit) continue;
      if (limit.maxConcurrency !== undefined && (state?.running ?? 0) >= limit.maxConcurrency) {
        return { reason: 'concurrency', key, limit: limit.maxConcurrency };
      }
      if (limit.requestsPerMinute !== undefined && state) {
        const recent = state.starts.filter((at) => at > now - MINUTE_MS);
        if (recent.length >= limit.requestsPerMinute) {
          const free = (recent[0] ?? now) + MINUTE_MS;
          return {
            reason: 'requests_per_minute',
            key,
            limit: limit.requestsPerMinute,
            until: new Date(free).toISOString(),
          };
        }
      }
    }
    return undefined;
  }

  private take(keys: string[]): Slot {
    const now = Date.now();
    for (const key of keys) {
      const state = this.state(key);
      state.running++;
      state.starts = [...state.starts.filter((at) => at > now - MINUTE_MS), now];
    }
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        for (const key of keys) {
          const state = this.state(key);
          state.running = Math.max(0, state.running - 1);
          if (state.running === 0 && state.pausedUntil <= Date.now() && state.starts.length === 0) {
            this.states.delete(key);
          }
        }
        this.pump();
      },
    };
  }

  /** Grant waiting calls in order while they fit; wake up again when a pause or a per-minute window ends. */
  private pump(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const now = Date.now();
    for (let i = 0; i < this.waiters.length; ) {
      const waiter = this.waiters[i] as Waiter;
      if (this.blocked(waiter.keys, now) === undefined) {
        this.waiters.splice(i, 1);
        // Taken at once, so the next waiter sees this one's slot in use.
        waiter.grant(this.take(waiter.keys));
        continue;
      }
      i++;
    }
    const next = this.nextChange(now);
    if (next !== undefined) {
      this.timer = setTimeout(() => this.pump(), Math.max(1, next - now));
      this.timer.unref();
    }
  }

  /** When a waiter might fit again by time alone: a pause ends, or a start leaves its minute. */
  private nextChange(now: number): number | undefined {
    if (this.waiters.length === 0) return undefined;
    let next: number | undefined;
    const consider = (at: number) => {
      if (at > now && (next === undefined || at < next)) next = at;
    };
    for (const waiter of this.waiters) {
      for (const key of waiter.keys) {
        const state = this.states.get(key);
        if (!state) continue;
        consider(state.pausedUntil);
        const limit = this.limits[key]?.requestsPerMinute;
        if (limit !== undefined) {
          const recent = state.starts.filter((at) => at > now - MINUTE_MS);
          if (recent.length >= limit) consider((recent[recent.length - limit] ?? now) + MINUTE_MS);
        }
      }
    }
    return next;
  }
}
