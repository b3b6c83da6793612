// @svc/store: the relational store on PGlite or PostgreSQL (db/) with one repository per
// aggregate (repos/); the cache and rate-limit adapters (in-process, Redis) and the Redis MX
// throttle (cache/); the blob stores (blob/); the analytics adapters, SQL and ClickHouse (analytics/).
export type { Db, Queryable, Row } from './db/db.ts';
export { openPglite, DataDirLockedError, type PgliteOptions, DataDirPermissionError } from './db/pglite.ts';
export { openPostgres } from './db/postgres.ts';
export { migrate } from './db/migrate.ts';
export { Store, openStore } from './store.ts';
export { AccountsRepo, type AccountListing } from './repos/accounts.ts';
export { OAuthRepo, type OAuthClientRecord, type OAuthGrantListing, type OAuthCodeRecord, type OAuthTokenRecord, type NewOAuthGrant, type NewTokenPair, type RedeemResult } from './repos/oauth.ts';
export { KeysRepo, hashKey, keyRefusal, keyKindOf, displayPrefix, KEY_PREFIX, type KeyRecord, type KeyListing, type KeyKind, type KeyState } from './repos/keys.ts';
export { UsersRepo, type UserRecord, type UserCredentials, type UserRole, type SessionRecord, type LinkKind, type LinkRecord, type RedeemRefusal } from './repos/users.ts';
export { LedgerRepo, type LedgerEntry, type Balance, type ReserveResult, type DebitResult } from './repos/ledger.ts';
export { IdempotencyRepo, type IdempotencyBegin, type IdempotentCompletion } from './repos/idempotency.ts';
export { WebhooksRepo, webhookEventId, enqueueWebhookIn, DEFAULT_WEBHOOK_LEASE_MS, type WebhookEvent, type NewWebhookEvent, type WebhookEventType, type WebhookStatus } from './repos/webhooks.ts';
export {
  JobsRepo,
  encodeJobCursor,
  decodeJobCursor,
  type JobRecord,
  type JobSource,
  type NewJob,
  type QueuedInput,
  type CreateJobResult,
  type QueueJobResult,
  type CancelJobResult,
  type JobResultInput,
  type RecordOutcome,
  type JobDecisions,
  type StoredResult,
  type DueRow,
  type InFinalTx,
} from './repos/jobs.ts';
export { SettingsRepo } from './repos/settings.ts';
export { EnrichCacheRepo, type CachedAnswer } from './repos/enrich-cache.ts';
export { FinderPatternsRepo, type ShapeSighting } from './repos/finder-patterns.ts';
export { DeadLettersRepo, type DeadLetterRow } from './repos/dead-letters.ts';
export { DecisionOutboxRepo } from './repos/decision-outbox.ts';
export { WebhookSecretsRepo, WEBHOOK_SECRET_PATTERN, MAX_GRACE_MS, type WebhookSecretInfo, type RotatedSecret } from './repos/webhook-secrets.ts';
export { dbText, dbJson } from './db/text.ts';
export { RecoveriesRepo, type RecoveryRecord, type RecoveredRow } from './repos/recoveries.ts';
export { OutcomesRepo, OutcomeWriteError, SUPPRESSION_FLAG_TTL_MS, type NewOutcomeEvent, type StoredOutcomeEvent, type EventFate, type ImportResult, type ImportOptions, type ConnectorRecord, type SuppressionRules } from './repos/outcomes.ts';
export { DirBlobStore, BlobTooLargeError, checkBlobKey, checkBlobPrefix, type BlobStore, type BlobPutOptions, type BlobEntry } from './blob/blob.ts';
export { reserveIn, settleIn, expireIn } from './repos/ledger.ts';
export type { JobCredits, JobEnd, JobHold, RecoveryCredits } from './repos/credits.ts';
export { SubscriptionsRepo, type Plan, type Processor, type SubscriptionRecord, type SubscriptionState, type SubscriptionTx, type EventResult } from './repos/subscriptions.ts';
export { MEMORY_CACHE_CHARS, MemoryCache } from './cache/memory-cache.ts';
export { MemoryRateLimiter, type RateLimiterPort, type RateDecision } from './cache/rate-limit.ts';
export { connectRedis, RedisCache, RedisRateLimiter } from './cache/redis.ts';
export { SqlAnalytics } from './analytics/sql-analytics.ts';
export { BufferedAnalytics } from './analytics/buffered.ts';
export { checkDecision, checkOutcomeFact } from './analytics/validate.ts';
export {
  DECISION_SOURCES,
  type OutcomeFact,
  type Analytics,
  type AnalyticsOptions,
  type AnalyticsStats,
  type DailyCounts,
  type Decision,
  type DecisionSource,
  type DomainSummaryRow,
  type ResultCounts,
  type Window as AnalyticsWindow,
} from './analytics/analytics.ts';
export { ClickHouseAnalytics, openClickHouseAnalytics, chString, chUInt, chIdent, DEFAULT_CLICKHOUSE_URL, DEFAULT_CLICKHOUSE_DATABASE, type ClickHouseAnalyticsOptions } from './analytics/clickhouse-analytics.ts';
export { RedisMxThrottle, type RedisMxThrottleOptions, type RedisMxThrottleStats } from './cache/redis-mx-throttle.ts';
export { PgBlobStore, BlobGoneError, BlobUploadLostError, type PgBlobStoreOptions } from './blob/blob-pg.ts';
export { DEFAULT_CLAIM_LEASE_MS, keepRenewing } from './db/lease.ts';
