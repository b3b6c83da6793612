// The composition root: turns a Config into running services, choosing each port's adapter
// (embedded: PGlite and in-process; cluster: Postgres and Redis).

import { connectRedis, MemoryCache, MemoryRateLimiter, openStore, RedisCache, RedisRateLimiter, type RateLimiterPort, type Store } from '@svc/store';
import { Verifier, verifierConfig, type CachePort } from '@svc/verifier';
import { nodeDns, netSmtpConnector, tcpReachable } from '@svc/verifier/adapters';
import type { Config } from './config.ts';
import { Readiness } from './readiness.ts';

export interface Services {
  config: Config;
  store: Store;
  verifier: Verifier;
  rateLimiter: RateLimiterPort;
  readiness: Readiness;
  /** Closes the cache / rate-limit connection (Redis); nothing for the in-process adapters. */
  closeCache: () => Promise<void>;
}

/**
 * A cache outage must not fail validations: a failed read is a miss, a failed write is skipped.
 * (The cache is an optimisation; readiness reports the outage.)
 */
function resilient(cache: CachePort): CachePort {
  return {
    get: async <T>(key: string) => {
      try {
        return await cache.get<T>(key);
      } catch {
        return undefined;
      }
    },
    set: async <T>(key: string, value: T, ttlMs: number) => {
      try {
        await cache.set(key, value, ttlMs);
      } catch {
        /* skipped */
      }
    },
  };
}

export async function createServices(config: Config, opts: { store?: Store } = {}): Promise<Services> {
  const store = opts.store ?? (await openStore(config.databaseUrl ? { databaseUrl: config.databaseUrl } : { dataDir: config.dataDir }));
  const dns = nodeDns({ servers: config.dnsServers, timeoutMs: config.dnsTimeoutMs, tries: 2 });
  // Cache and rate limits: in-process (embedded), or Redis when REDIS_URL is set (cluster).
  let cache: CachePort;
  let rateLimiter: RateLimiterPort;
  let cachePing: () => Promise<boolean>;
  let closeCache = async () => {};
  if (config.redisUrl) {
    const redis = connectRedis(config.redisUrl);
    const rc = new RedisCache(redis);
    cache = resilient(rc);
    const limiter = new RedisRateLimiter(redis);
    // Abuse protection fails open: a Redis outage must not turn every request into an error
    // (readiness reports the outage).
    rateLimiter = {
      hit: (key, limit, windowMs) =>
        Promise.resolve(limiter.hit(key, limit, windowMs)).catch(() => ({ allowed: true, limit, remaining: limit, resetSeconds: Math.ceil(windowMs / 1000) })),
    };
    cachePing = () => rc.ping();
    closeCache = async () => void (await redis.quit());
  } else {
    const mc = new MemoryCache();
    cache = mc;
    rateLimiter = new MemoryRateLimiter();
    cachePing = async () => {
      await mc.set('ready:ping', 1, 1000);
      return (await mc.get<number>('ready:ping')) === 1;
    };
  }
  const verifier = new Verifier({
    dns,
    smtp: netSmtpConnector,
    cache,
    config: verifierConfig({
      smtpPort: config.smtpPort,
      heloName: config.heloName,
      mailFrom: config.mailFrom,
      smtpTimeoutMs: config.smtpTimeoutMs,
      smtpRetries: config.smtpRetries,
      smtpRetryDelayMs: config.smtpRetryDelayMs,
      maxConnectionsPerMx: config.maxConnectionsPerMx,
      resultCacheTtlMs: config.resultCacheTtlMs,
      deadlineMs: config.validationTimeoutMs,
    }),
  });
  const readiness = new Readiness({
    dns,
    tcpReachable,
    cachePing,
    // DESIGN 6: `database` is a readiness check when a database server is configured.
    ...(config.databaseUrl ? { databasePing: () => store.ping() } : {}),
    readyDomain: config.readyDomain,
    smtpPort: config.smtpPort,
    timeoutMs: Math.min(config.smtpTimeoutMs, 5000),
  });
  return { config, store, verifier, rateLimiter, readiness, closeCache };
}
