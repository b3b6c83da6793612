// Fixed-window request counters (the rate-limit port). In-process here; the cluster adapter uses
// Redis INCR + PEXPIRE with the same contract.

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the counter starts again. */
  resetSeconds: number;
}

export interface RateLimiterPort {
  /**
   * Counts one request for `key` against `limit` per `windowMs`. The in-process adapter answers
   * synchronously (no promise on the hot path of every request); Redis answers with a promise.
   */
  hit(key: string, limit: number, windowMs: number): RateDecision | Promise<RateDecision>;
}

/**
 * A window opens at a key's first request and lasts windowMs. A key that goes over its limit is
 * refused until its window ends; the refusal that first crosses the limit restarts the window,
 * so `retry_after` is the full window (60 s for the API's limits) for the request that hit it.
 */
export class MemoryRateLimiter implements RateLimiterPort {
  #windows = new Map<string, { count: number; resetAt: number; blocked: boolean }>();
  #sweepAt = 0;

  constructor(readonly now: () => number = Date.now) {}

  hit(key: string, limit: number, windowMs: number): RateDecision {
    const now = this.now();
    if (now >= this.#sweepAt) this.#sweep(now, windowMs);
    let w = this.#windows.get(key);
    if (!w || w.resetAt <= now) {
      w = { count: 0, resetAt: now + windowMs, blocked: false };
      this.#windows.set(key, w);
    }
    w.count++;
    if (w.count > limit && !w.blocked) {
      w.blocked = true;
      w.resetAt = now + windowMs;
    }
    return {
      allowed: w.count <= limit,
      limit,
      remaining: Math.max(0, limit - w.count),
      resetSeconds: Math.max(1, Math.ceil((w.resetAt - now) / 1000)),
    };
  }

  #sweep(now: number, windowMs: number): void {
    for (const [k, w] of this.#windows) if (w.resetAt <= now) this.#windows.delete(k);
    this.#sweepAt = now + windowMs;
  }
}
