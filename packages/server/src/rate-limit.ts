import { httpError } from './errors.js';

/**
 * Per-key limits on write routes: a token bucket per key id, refilled continuously (`perMinute` tokens a minute,
 * bursts up to `burst`). A request over the limit is refused with `too_many_requests` and the seconds until a
 * token is back (the `retry-after` header). In memory: each API node limits what it serves.
 */
export interface RateLimitOptions {
  /** Write requests a key may make per minute (default 600). 0 turns the limit off. */
  perMinute?: number;
  /** How many may come at once (default: a tenth of a minute's worth, at least 10). */
  burst?: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** How many keys' buckets are kept; the least recently used go first (a forgotten bucket starts full). */
const MAX_BUCKETS = 10_000;

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;
  private readonly burst: number;

  constructor(
    options: RateLimitOptions = {},
    private readonly now: () => number = Date.now,
  ) {
    const perMinute = options.perMinute ?? 600;
    this.perMs = perMinute / 60_000;
    this.burst = options.burst ?? Math.max(10, Math.ceil(perMinute / 10));
  }

  /** Take one token for `keyId`, or throw `too_many_requests`. */
  take(keyId: string): void {
    if (this.perMs === 0) return;
    const now = this.now();
    const bucket = this.buckets.get(keyId) ?? { tokens: this.burst, at: now };
    this.buckets.delete(keyId);
    bucket.tokens = Math.min(this.burst, bucket.tokens + (now - bucket.at) * this.perMs);
    bucket.at = now;
    this.buckets.set(keyId, bucket);
    if (this.buckets.size > MAX_BUCKETS) this.buckets.delete(this.buckets.keys().next().value as string);
    if (bucket.tokens < 1) {
      const retryAfter = Math.ceil((1 - bucket.tokens) / this.perMs / 1000);
      throw httpError('too_many_requests', `too many write requests for this key; retry in ${retryAfter} s`, {
        retryable: true,
        details: { retryAfterSeconds: retryAfter },
      });
    }
    bucket.tokens -= 1;
  }
}
