export type { Db, Queryable, Row } from './db.ts';
export { openPglite, lockDataDir, DataDirLockedError } from './pglite.ts';
export { openPostgres } from './postgres.ts';
export { migrate } from './migrate.ts';
export { Store, hashKey, generateKey, keyKindOf, KEY_PREFIX } from './store.ts';
export type { KeyRecord, KeyKind, KeyState, Balance, ReserveResult, IdempotencyBegin, IdempotentCompletion, DebitResult } from './store.ts';
export { MemoryCache } from './memory-cache.ts';
export { MemoryRateLimiter } from './rate-limit.ts';
export type { RateLimiterPort, RateDecision } from './rate-limit.ts';

import { openPglite } from './pglite.ts';
import { openPostgres } from './postgres.ts';
import { migrate } from './migrate.ts';
import { Store } from './store.ts';

/** Opens the relational store of the configured profile and brings its schema up to date. */
export async function openStore(opts: { databaseUrl?: string; dataDir?: string }): Promise<Store> {
  const db = opts.databaseUrl ? await openPostgres(opts.databaseUrl) : await openPglite(opts.dataDir);
  await migrate(db);
  return new Store(db);
}
export { connectRedis, RedisCache, RedisRateLimiter } from './redis.ts';
export { displayPrefix } from './store.ts';
