// In-process cache adapter (embedded profile). Bounded in entries and in bytes: the oldest
// entries go first when either is full. (A 500,000-address job caches a verdict per address, ~450
// characters of JSON each: the cache fills whatever its bound. At 48 MiB of text it held ~100 MiB
// of the heap, a fifth of a process meant to stay under 512 MB, bench/jobs/big-job.ts; the bound is
// SVC_MEMORY_CACHE_MB, 16 MiB of text by default, docs/decisions/storage-and-cluster.md.)
// Like Redis it hands out copies: values are kept as JSON text, so no caller can change a cached
// value through an object it stored or was given, and a value comes back exactly as it would from
// RedisCache (a Date as a string, undefined fields dropped). The entries read lately are also kept
// parsed (at most HOT_ENTRIES of them), and a get of one copies that value instead of parsing the
// text again: a verdict's copy (a spread, and its arrays) costs ~0.1 µs where JSON.parse costs
// ~0.8 µs, and repeated reads of the same few verdicts are what a cached validation is. Every get
// still returns its own object.

import type { CachePort } from '@svc/verifier';

/** How many entries MemoryCache keeps parsed (the ones read lately; they are emptied when full). */
const HOT_ENTRIES = 1024;

/**
 * A copy of a value that JSON.parse made (plain objects, arrays and primitives only): every
 * object and array is new, strings and numbers are shared (they cannot be changed).
 */
function copyJson<T>(v: T): T {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) {
    const a: unknown[] = new Array(v.length);
    for (let i = 0; i < v.length; i++) a[i] = copyJson(v[i]);
    return a as T;
  }
  const o: Record<string, unknown> = { ...(v as Record<string, unknown>) };
  for (const k in o) {
    const x = o[k];
    if (typeof x === 'object' && x !== null) o[k] = copyJson(x);
  }
  return o as T;
}

/** The default bound of MemoryCache's text (SVC_MEMORY_CACHE_MB). */
export const MEMORY_CACHE_CHARS = 16 * 1_048_576;

/**
 * Makes V8 store `s` as one flat string. JSON.stringify builds its result from pieces (a tree of
 * "cons" strings): a ~450-character verdict kept as is costs ~610 bytes of heap, flattened ~480
 * (100,000 verdicts: 61.5 against 47.8 MiB); a key built by a template literal is such a tree too.
 * Converting a string to a number flattens it in place.
 */
function flat(s: string): string {
  void Number(s);
  return s;
}

export class MemoryCache implements CachePort {
  #map = new Map<string, { json: string; expires: number }>();
  /**
   * The entries read lately, parsed, by key. Every path that replaces or removes an entry of #map
   * goes through #drop, which removes its parsed value too: a value here is always its entry's.
   */
  #hot = new Map<string, unknown>();
  /** Characters of the keys and JSON texts held (one byte each for the ASCII a verdict is). */
  #chars = 0;

  constructor(
    readonly maxEntries = 200_000,
    readonly now: () => number = Date.now,
    readonly maxChars = MEMORY_CACHE_CHARS,
  ) {}

  #drop(key: string): void {
    const e = this.#map.get(key);
    if (!e) return;
    this.#map.delete(key);
    this.#hot.delete(key);
    this.#chars -= key.length + e.json.length;
  }

  get<T>(key: string): T | undefined {
    const e = this.#map.get(key);
    if (!e) return undefined;
    if (e.expires <= this.now()) {
      this.#drop(key);
      return undefined;
    }
    if (this.#hot.has(key)) return copyJson(this.#hot.get(key) as T);
    const value = JSON.parse(e.json) as T;
    if (this.#hot.size >= HOT_ENTRIES) this.#hot.clear();
    this.#hot.set(key, value);
    return copyJson(value);
  }

  set<T>(key: string, value: T, ttlMs: number): void {
    this.#drop(key);
    const json = JSON.stringify(value) as string | undefined;
    // No time, or nothing a get could return (undefined, a function): the key holds nothing.
    if (json === undefined || ttlMs <= 0) return;
    this.#map.set(flat(key), { json: flat(json), expires: this.now() + ttlMs });
    this.#chars += key.length + json.length;
    while (this.#map.size > this.maxEntries || (this.#chars > this.maxChars && this.#map.size > 1)) {
      const oldest = this.#map.keys().next().value;
      if (oldest === undefined) break;
      this.#drop(oldest);
    }
  }

  get size(): number {
    return this.#map.size;
  }

  /** Characters held (keys and JSON texts). */
  get chars(): number {
    return this.#chars;
  }
}
