// In-process cache adapter (embedded profile). Bounded: the oldest entries go first when full.

import type { CachePort } from '@svc/verifier';

export class MemoryCache implements CachePort {
  #map = new Map<string, { value: unknown; expires: number }>();

  constructor(
    readonly maxEntries = 200_000,
    readonly now: () => number = Date.now,
  ) {}

  get<T>(key: string): T | undefined {
    const e = this.#map.get(key);
    if (!e) return undefined;
    if (e.expires <= this.now()) {
      this.#map.delete(key);
      return undefined;
    }
    return e.value as T;
  }

  set<T>(key: string, value: T, ttlMs: number): void {
    this.#map.delete(key);
    this.#map.set(key, { value, expires: this.now() + ttlMs });
    if (this.#map.size > this.maxEntries) {
      const oldest = this.#map.keys().next().value;
      if (oldest !== undefined) this.#map.delete(oldest);
    }
  }

  get size(): number {
    return this.#map.size;
  }
}
