// Cluster adapters of the cache and rate-limit ports on Redis (ioredis). Same contracts as the
// in-process MemoryCache and MemoryRateLimiter; one conformance suite runs against both.

import { Redis } from 'ioredis';
import type { CachePort } from '@svc/verifier';
import type { RateDecision, RateLimiterPort } from './rate-limit.ts';

/** A client of `url`; with `keyPrefix` (SVC_REDIS_KEY_PREFIX) every key it reads or writes, script keys included, starts with it. */
export function connectRedis(url: string, keyPrefix?: string): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false, commandTimeout: 2_000, ...(keyPrefix ? { keyPrefix } : {}) });
  redis.on('error', () => {}); // reported through failed commands and the readiness check
  return redis;
}

export class RedisCache implements CachePort {
  constructor(
    readonly redis: Redis,
    readonly prefix = 'svc:c:',
  ) {}

  async get<T>(key: string): Promise<T | undefined> {
    const v = await this.redis.get(this.prefix + key);
    return v === null ? undefined : (JSON.parse(v) as T);
  }

  async set<T>(key: string, value: T, ttlMs: number): Promise<void> {
    const json = JSON.stringify(value) as string | undefined;
    // Nothing to keep (no time, or nothing a get could return): the key holds nothing afterwards,
    // as in MemoryCache.
    if (ttlMs <= 0 || json === undefined) return void (await this.redis.del(this.prefix + key));
    await this.redis.set(this.prefix + key, json, 'PX', Math.ceil(ttlMs));
  }

  async ping(): Promise<boolean> {
    return (await this.redis.ping()) === 'PONG';
  }
}

// KEYS[1] counter; ARGV limit, windowMs. Returns {count, pttl}. The window starts at the first
// hit; the hit that first crosses the limit restarts it (MemoryRateLimiter's rule).
const HIT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if n == tonumber(ARGV[1]) + 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) ttl = tonumber(ARGV[2]) end
return {n, ttl}
`;

export class RedisRateLimiter implements RateLimiterPort {
  constructor(
    readonly redis: Redis,
    readonly prefix = 'svc:rl:',
  ) {}

  async hit(key: string, limit: number, windowMs: number): Promise<RateDecision> {
    const [count, ttl] = (await this.redis.eval(HIT, 1, this.prefix + key, limit, windowMs)) as [number, number];
    return { allowed: count <= limit, limit, remaining: Math.max(0, limit - count), resetSeconds: Math.max(1, Math.ceil(ttl / 1000)) };
  }
}
