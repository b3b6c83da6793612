// The composition root: turns a Config into running services, choosing each port's adapter
// (embedded: PGlite and in-process; cluster: Postgres, Redis, Kafka and ClickHouse).

import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { ClickHouseAnalytics, connectRedis, DirBlobStore, type Analytics, type BlobStore, MemoryCache, MemoryRateLimiter, openStore, RedisCache, RedisMxThrottle, RedisRateLimiter, type RateLimiterPort, type Store } from '@svc/store';
import { InProcessBus, isKafkaWarmup, KafkaBus, type Bus } from '@svc/bus';
import { OutcomesService } from '@svc/outcomes';
import { CatchallRecovery, createCsvPool, CsvJobs, enqueueJobWebhook, JobsService, silentLogger, WebhookDispatcher, type JobsLogger } from '@svc/jobs';
import { Engine, ENGINE_DEFAULTS, type MxThrottle } from '@svc/engine';
import { Verifier, verifierConfig, type CachePort } from '@svc/verifier';
import { HostedMcp } from '@svc/mcp';
import { DataService, NativeCompanyProvider, NativeFinder, PdlProvider, ProviderChain, ShapeLearner, webDns } from '@svc/enrich';
import { createNetSmtpConnector, nodeDns, tcpReachable } from '@svc/verifier/adapters';
import { applySuppressions, isConnectionFailure, LocalProcessor, StripeProcessor, SubscriptionService } from '@svc/billing';
import { ConfigError, redactUrl, type Config } from './config.ts';
import { clickhouseSelect1, Readiness } from './readiness.ts';

export interface Services {
  config: Config;
  store: Store;
  verifier: Verifier;
  rateLimiter: RateLimiterPort;
  readiness: Readiness;
  /** Closes the cache / rate-limit connection (Redis); nothing for the in-process adapters. */
  closeCache: () => Promise<void>;
  /** Job inputs and results CSVs: a directory under SVC_DATA_DIR (`blobs/`), or PostgreSQL with DATABASE_URL (shared by every process). */
  blobs: BlobStore;
  /** The job transport: in-process, or Kafka when KAFKA_BROKERS is set. */
  bus: Bus;
  /** The job pipeline; started by startService, stopped on shutdown. */
  jobs: JobsService;
  /** CSV batches: prepare-upload, the signed upload (at most SVC_CSV_MAX_BYTES), start-processing into the job intake. */
  csvJobs: CsvJobs;
  /** Delivery outcomes: imports, events, connectors. */
  outcomes: OutcomesService;
  /** The accuracy reports read the analytics port. */
  reports: Analytics;
  /** Catch-all recovery of completed jobs. */
  recovery: CatchallRecovery;
  /** Subscriptions: cancel, reactivate and the payment processor's events. */
  subscriptions: SubscriptionService;
  /** The local payment processor (SVC_PAYMENT_PROCESSOR=local): renewals, period ends; undefined with Stripe. */
  localProcessor?: LocalProcessor;
  /** The Stripe adapter's webhook verification (SVC_PAYMENT_PROCESSOR=stripe). */
  stripeWebhook?: StripeProcessor;
  /** Stops the CSV worker threads (nothing when parsing inline). */
  closeCsvPool: () => Promise<void>;
  /** Delivers job webhooks from the outbox (started by startService unless SVC_ROLE=front). */
  webhooks: WebhookDispatcher;
  /** SVC_SECRET, or the secret generated once and kept in the store: the HMAC key of signed URLs and webhooks. */
  secret: string;
  /**
   * Every validation decision (sync and job; docs/decisions/storage-and-cluster.md "Analytics"): ClickHouse with CLICKHOUSE_URL, else the
   * relational store's decision_packs table. Buffered; closed (flushed) before the store.
   */
  analytics: Analytics;
  /** Hosted MCP for AI agents: its OAuth server and the svc_* tools on the same use cases. */
  mcp: HostedMcp;
  /** The data endpoints: each family's providers (SVC_*_PROVIDERS), the cache and the money. */
  data: DataService;
  /** Where the job pipeline logs (silent until the API's logger is set). */
  setJobsLogger: (log: JobsLogger) => void;
  /** The shapes of existing addresses the email finder learns from fresh verdicts; flushed before the store closes. */
  finderShapes: ShapeLearner;
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

/** File-system errors on the data directory that the operator must fix (a path, a permission, a disk). */
const DATA_DIR_ERRORS = new Set(['EACCES', 'EPERM', 'ENOENT', 'ENOTDIR', 'EROFS', 'EEXIST', 'ENOSPC', 'EISDIR', 'ELOOP', 'ENAMETOOLONG']);
/** PostgreSQL refusing us: bad password or user (28xxx), no such database (3D000). */
const REFUSED_SQLSTATE = /^(28[0-9A-Z]{3}|3D000)$/;

/**
 * Opens the store of the configured profile. A store that cannot be opened because of the
 * configuration (a data directory that cannot be created or written, a database that cannot be
 * reached or refuses us) is a ConfigError naming the variable: one line, exit 2, no stack.
 */
async function openConfiguredStore(config: Config): Promise<Store> {
  try {
    return await openStore(config.databaseUrl ? { databaseUrl: config.databaseUrl } : { dataDir: config.dataDir });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const message = (err as Error).message ?? String(err);
    if (config.databaseUrl && (isConnectionFailure(err) || (typeof code === 'string' && REFUSED_SQLSTATE.test(code)))) {
      throw new ConfigError('DATABASE_URL', `${redactUrl(config.databaseUrl)}: cannot connect (${[code, message].filter(Boolean).join(' ')})`);
    }
    if (!config.databaseUrl && typeof code === 'string' && DATA_DIR_ERRORS.has(code)) throw new ConfigError('SVC_DATA_DIR', `${config.dataDir} cannot be used: ${message}`);
    throw err;
  }
}

export async function createServices(config: Config, opts: { store?: Store } = {}): Promise<Services> {
  const store = opts.store ?? (await openConfiguredStore(config));
  store.idempotency.leaseMs = config.claimLeaseMs;
  const dns = nodeDns({ servers: config.dnsServers, timeoutMs: config.dnsTimeoutMs, tries: 2, maxInFlight: config.dnsConcurrency });
  // Cache and rate limits: in-process (embedded), or Redis when REDIS_URL is set (cluster).
  let cache: CachePort;
  let rateLimiter: RateLimiterPort;
  let cachePing: () => Promise<boolean>;
  let closeCache = async () => {};
  // The cache itself, not the resilient wrapper: a suppression's verdict invalidation must fail
  // the import when the cache cannot be reached (fail-closed: docs/decisions/outcomes.md).
  let rawCache: CachePort;
  // The SMTP session limit per MX host: this process's own (embedded), or shared through Redis by
  // every process with the same SVC_EGRESS_ID (cluster: fronts' sync probes and workers alike).
  let throttle: MxThrottle | undefined;
  let throttleErrors: (err: unknown) => void = () => {};
  if (config.redisUrl) {
    const redis = connectRedis(config.redisUrl, config.redisKeyPrefix);
    const shared = new RedisMxThrottle({ redis, egressId: config.egressId, max: config.maxConnectionsPerMx, onError: (err) => throttleErrors(err) });
    throttle = shared;
    const rc = new RedisCache(redis);
    rawCache = rc;
    cache = resilient(rc);
    const limiter = new RedisRateLimiter(redis);
    // Abuse protection fails open: a Redis outage must not turn every request into an error
    // (readiness reports the outage).
    rateLimiter = {
      hit: (key, limit, windowMs) =>
        Promise.resolve(limiter.hit(key, limit, windowMs)).catch(() => ({ allowed: true, limit, remaining: limit, resetSeconds: Math.ceil(windowMs / 1000) })),
    };
    cachePing = () => rc.ping();
    closeCache = async () => {
      await shared.close();
      await redis.quit();
    };
  } else {
    const mc = new MemoryCache(undefined, undefined, config.memoryCacheMb * 1_048_576);
    rawCache = mc;
    cache = mc;
    rateLimiter = new MemoryRateLimiter();
    cachePing = async () => {
      await mc.set('ready:ping', 1, 1000);
      return (await mc.get<number>('ready:ping')) === 1;
    };
  }
  // Without SVC_SECRET, signed URLs, webhook signatures and the catch-all probes' local parts use a
  // secret generated on first start and kept in the store, so they survive restarts and every
  // process sharing the store agrees on it.
  const secret = config.secret ?? (await store.settings.generated('signing_secret', () => randomBytes(32).toString('base64url')));
  const engine = new Engine({
    dns,
    probeSalt: secret,
    ...(throttle ? { throttle } : {}),
    // Its own TLS context and session cache: nothing of an engine is kept at module level.
    smtp: createNetSmtpConnector(),
    cache,
    config: {
      ...ENGINE_DEFAULTS,
      smtpPort: config.smtpPort,
      heloName: config.heloName,
      mailFrom: config.mailFrom,
      smtpTimeoutMs: config.smtpTimeoutMs,
      smtpRetryDelayMs: config.smtpRetryDelayMs,
      maxConnectionsPerMx: config.maxConnectionsPerMx,
      idleMs: config.smtpIdleMs,
    },
  });
  // The email finder learns the shapes of existing addresses from every fresh verdict (validations,
  // jobs, finds): shapes only, never addresses (packages/enrich/src/finder/shapes.ts).
  const finderShapes = new ShapeLearner(store.finderPatterns, { warn: (err, lost) => log.warn({ err, lost, component: 'finder' }, 'finder: address shapes not recorded') });
  const verifier = new Verifier({
    dns,
    probe: engine,
    cache,
    observe: (f) => finderShapes.verdict(f.domain, f.local, f.verdict),
    config: verifierConfig({
      smtpRetries: config.smtpRetries,
      resultCacheTtlMs: config.resultCacheTtlMs,
      deadlineMs: config.validationTimeoutMs,
    }),
  });
  // Jobs (docs/decisions/jobs-and-csv.md): the blob store beside the database, the in-process bus, and the pipeline.
  let jobsLog: JobsLogger = silentLogger;
  const log: JobsLogger = {
    info: (o, m) => jobsLog.info(o, m),
    warn: (o, m) => jobsLog.warn(o, m),
    error: (o, m) => jobsLog.error(o, m),
  };
  const analytics = openAnalytics(config, store, log);
  const onBusError = (err: unknown, topic: string, key?: string) => {
    // A consumer's own failure (no message): while processes start together the cluster settles
    // (topics created, leaders and coordinators elected, groups rebalanced), and the consumer
    // retries by itself: said at info. Anything else about a consumer is a warning; a message
    // whose handler failed is an error (retried, then dead-lettered: SVC_BUS_MAX_ATTEMPTS).
    if (key === undefined) {
      if (isKafkaWarmup(err)) log.info({ topic, reason: (err as Error | undefined)?.message }, 'kafka: a topic or consumer group is not ready yet (being created or rebalanced); the consumer retries');
      else log.warn({ err, topic }, 'job bus consumer failed; it restarts');
    } else log.error({ err, topic, key }, 'job message failed; retried after a back-off, dead-lettered after SVC_BUS_MAX_ATTEMPTS');
  };
  const kafkaBus = config.kafkaBrokers
    ? new KafkaBus({
        brokers: config.kafkaBrokers,
        clientId: `svc-${config.role}-${os.hostname()}-${process.pid}`,
        groupPrefix: config.kafkaTopicPrefix.replace(/\.$/, '') || 'svc',
        topicPrefix: config.kafkaTopicPrefix,
        defaultPartitions: config.kafkaPartitions,
        // A killed worker holds its partitions until its session times out (kafkajs default 30 s,
        // measured as 30-60 s stalls of the whole group in test/e2e/cluster-crash.test.ts).
        consumer: { sessionTimeout: config.kafkaSessionTimeoutMs, heartbeatInterval: Math.floor(config.kafkaSessionTimeoutMs / 3) },
        onError: onBusError,
        onSlow: (at) => log.warn(at, 'bus message still being handled; its partition waits behind it'),
        maxAttempts: config.busMaxAttempts,
        // kafkajs's own lines go to the service's log as warnings (it logs a group's rebalances,
        // which members learn of from "rebalancing" answers, as errors).
        logCreator:
          () =>
          ({ namespace, log: entry }) => {
            const { message, ...rest } = entry;
            // A group's rebalance (members joining and leaving, a start, a deploy) is how Kafka
            // works: its lines ("The group is rebalancing, re-joining", heartbeats answered
            // "rebalancing") are info; everything else kafkajs says stays a warning.
            const routine = /rebalanc|re-joining|already exists/i.test(`${String(message)} ${String((rest as { error?: unknown }).error ?? '')}`);
            (routine ? log.info : log.warn)({ component: 'kafka', namespace, ...rest }, String(message));
          },
      })
    : undefined;
  const bus: Bus = kafkaBus ?? new InProcessBus({ onError: onBusError, maxAttempts: config.busMaxAttempts, deadLetters: store.deadLetters });
  const readinessTimeoutMs = Math.min(config.smtpTimeoutMs, 5000);
  const clickhouseUrl = config.clickhouseUrl;
  const readiness = new Readiness({
    dns,
    tcpReachable,
    cachePing,
    // `database` is a readiness check (docs/api.md) when a database server is configured.
    ...(config.databaseUrl ? { databasePing: () => store.ping() } : {}),
    // The cluster profile's servers, when configured (a metadata request; SELECT 1).
    ...(kafkaBus ? { kafkaPing: () => kafkaBus.ping() } : {}),
    ...(clickhouseUrl ? { clickhousePing: () => clickhouseSelect1(clickhouseUrl, readinessTimeoutMs) } : {}),
    readyDomain: config.readyDomain,
    smtpPort: config.smtpPort,
    timeoutMs: readinessTimeoutMs,
  });
  const blobs: BlobStore = config.databaseUrl ? store.blobs : new DirBlobStore(path.join(config.dataDir, 'blobs'));
  throttleErrors = (err) => log.warn({ err }, 'shared MX session limit (Redis): error; retrying');
  // CSV parsing and results rendering on a Piscina pool when configured (SVC_CSV_POOL_THREADS).
  const csvPool = config.csvPoolThreads > 0 ? createCsvPool({ threads: config.csvPoolThreads }) : undefined;
  const jobs = new JobsService({
    ...(csvPool ? { renderer: csvPool } : {}),
    store,
    blobs,
    bus,
    verifier,
    publicUrl: config.publicUrl,
    secret,
    greylistDelayMs: config.jobGreylistDelayMs,
    greylistAttempts: config.jobGreylistAttempts,
    claimLeaseMs: config.claimLeaseMs,
    busMaxQueued: config.busMaxQueued,
    allowPrivateWebhooks: config.webhookAllowPrivate,
    allowNetworks: config.outboundAllowNetworks,
    // Embedded, this process is the only one working on the store's jobs.
    ownsAllWork: !config.databaseUrl,
    consume: config.role !== 'front',
    // Kafka keeps the published work across restarts: a starting worker resends only unpublished work.
    durableBus: !!config.kafkaBrokers,
    log,
    // Job webhooks: the event joins the transaction that finalises the job; the dispatcher delivers it.
    onFinalTx: enqueueJobWebhook(store.webhooks, config.publicUrl),
    onFinal: () => webhooks.kick(),
    analytics,
  });
  const webhooks = new WebhookDispatcher({ store, allowPrivate: config.webhookAllowPrivate, allowNetworks: config.outboundAllowNetworks, logger: log });
  const csvJobs = new CsvJobs({ jobs, store, blobs, publicUrl: config.publicUrl, secret, maxBytes: config.csvMaxBytes, claimLeaseMs: config.claimLeaseMs, ...(csvPool ? { parser: csvPool } : {}) });
  const outcomes = new OutcomesService({
    store,
    analytics,
    publicUrl: config.publicUrl,
    log,
    // A suppressed mailbox's cached verdict (shared by every account) is dropped: the next
    // validation of it by anyone probes again.
    invalidateVerdicts: async (mailboxes) => {
      await Promise.all(mailboxes.map((m) => rawCache.set(`v:${m}`, null, 0)));
      return mailboxes.length;
    },
  });
  const payments = subscriptionsOf(store, config);
  const data = dataService(config, store, verifier, cache);
  const mcp = new HostedMcp({ store, verifier, jobs, analytics, data, publicUrl: config.publicUrl, accessTokenTtlS: config.mcpAccessTokenTtlS });
  return { config, store, mcp, data, verifier, rateLimiter, readiness, closeCache, blobs, bus, jobs, csvJobs, webhooks, outcomes, ...payments, reports: analytics, recovery: new CatchallRecovery({ store, blobs, ...(csvPool ? { renderer: csvPool } : {}) }), closeCsvPool: async () => void (await csvPool?.close()), secret, analytics, setJobsLogger: (l) => (jobsLog = l), finderShapes };
}

/** The data endpoints' families from the configuration (docs/api.md, "Data endpoints"). */
export function dataService(config: Config, store: Store, verifier: Verifier, cache?: CachePort): DataService {
  const dns = webDns(config.dnsServers, config.dnsTimeoutMs);
  // One People Data Labs client for every family that names it (loadConfig refuses pdl without a key).
  const pdl = config.pdlApiKey ? new PdlProvider({ apiKey: config.pdlApiKey, ...(config.pdlBaseUrl ? { baseUrl: config.pdlBaseUrl } : {}) }) : undefined;
  const vendor = <P>(names: string[], variable: string, view: (p: PdlProvider) => P): P[] =>
    names.map((name) => {
      if (name === 'pdl' && pdl) return view(pdl);
      throw new ConfigError(variable, `names ${name}, which this build does not have`);
    });
  const company = config.companyProviders.map((name) => {
    if (name === 'pdl' && pdl) return pdl;
    if (name === 'native') {
      return new NativeCompanyProvider({
        dns,
        fetch: {
          timeoutMs: config.webFetchTimeoutMs,
          maxBytes: config.webFetchMaxBytes,
          httpPort: config.webHttpPort,
          httpsPort: config.webHttpsPort,
          guard: { allowPrivate: config.webhookAllowPrivate, allowNetworks: config.outboundAllowNetworks },
          userAgent: 'email-validation-service-company-data/0.1',
        },
      });
    }
    throw new ConfigError('SVC_COMPANY_PROVIDERS', `names ${name}, which this build does not have`);
  });
  const finder = config.finderProviders.map((name) => {
    if (name === 'native') return new NativeFinder({ prober: verifier, evidence: store.finderPatterns, maxCandidates: config.finderMaxCandidates, suppress: async (accountId, plan) => applySuppressions(store, accountId, plan),
        delivered: async (accountId, mailboxes) => new Set([...(await store.outcomes.evidenceFor(accountId, mailboxes))].flatMap(([m, e]) => (e.label === 'delivered' ? [m] : []))),
        deliveredOn: (accountId, domain) => store.outcomes.deliveredMailboxes(accountId, domain),
      });
    throw new ConfigError('SVC_FINDER_PROVIDERS', `names ${name}, which this build does not have`);
  });
  return new DataService(
    store,
    {
    // A website fetch has its own time cap; the chain's is a little longer, and a site is not
    // retried at once. A vendor in the chain keeps the vendor's three attempts and 10 s.
    company: new ProviderChain(company, { perProvider: { native: { timeoutMs: config.webFetchTimeoutMs + 1_000, attempts: 1 } } }),
    // A find is one validation of its candidates (each bounded by SVC_VALIDATION_TIMEOUT_MS); a mail server is not asked twice at once.
    finder: new ProviderChain(finder, { timeoutMs: config.validationTimeoutMs + 5_000, attempts: 1 }),
    // The vendor's: its calls retried on 429 and 5xx (three attempts), 10 s each, a circuit per family.
    linkedin: new ProviderChain(vendor(config.linkedinProviders, 'SVC_LINKEDIN_PROVIDERS', (p) => p.linkedin)),
    people: new ProviderChain(vendor(config.peopleProviders, 'SVC_PEOPLE_PROVIDERS', (p) => p)),
    profile: new ProviderChain(vendor(config.profileProviders, 'SVC_PROFILE_PROVIDERS', (p) => p)),
    mobile: new ProviderChain(vendor(config.mobileProviders, 'SVC_MOBILE_PROVIDERS', (p) => p)),
    },
    cache ? { cache } : {},
  );
}

/** How often an analytics outage is logged at most (the rows wait in the buffer meanwhile). */
const ANALYTICS_LOG_EVERY_MS = 60_000;

/**
 * The Analytics adapter of the configuration (ClickHouse with CLICKHOUSE_URL, else the store's
 * SQL tables), with its outages logged as warnings: the first failed write at once, then at most
 * one line a minute saying how many writes failed since (not one line per retry); dropped rows
 * likewise; and one line when writes land again.
 */
export function openAnalytics(config: Pick<Config, 'clickhouseUrl' | 'clickhouseDatabase'>, store: Store, log: JobsLogger): Analytics {
  const analytics: Analytics = config.clickhouseUrl ? new ClickHouseAnalytics({ url: config.clickhouseUrl, database: config.clickhouseDatabase }) : store.sqlAnalytics();
  // Analytics in the store's own table: a job's decisions go there in its results' transaction.
  store.jobs.decisionsInTable = !config.clickhouseUrl;
  const backend = config.clickhouseUrl ? 'clickhouse' : 'sql';
  let lastFailLog = -Infinity;
  let failedSince = 0;
  let lastDropLog = -Infinity;
  let droppedSince = 0;
  let down = false;
  analytics.on('write_failed', (err) => {
    down = true;
    failedSince++;
    const now = Date.now();
    if (now - lastFailLog < ANALYTICS_LOG_EVERY_MS) return;
    lastFailLog = now;
    log.warn({ component: 'analytics', backend, err, failed_writes: failedSince, pending: analytics.pending }, 'analytics write failed; decisions stay buffered and are retried');
    failedSince = 0;
  });
  analytics.on('dropped', (rows) => {
    droppedSince += rows;
    const now = Date.now();
    if (now - lastDropLog < ANALYTICS_LOG_EVERY_MS) return;
    lastDropLog = now;
    log.warn({ component: 'analytics', backend, dropped: droppedSince, dropped_total: analytics.dropped }, 'analytics buffer full: oldest decisions dropped');
    droppedSince = 0;
  });
  analytics.on('written', () => {
    if (!down) return;
    down = false;
    failedSince = 0;
    lastFailLog = -Infinity;
    log.info({ component: 'analytics', backend, pending: analytics.pending }, 'analytics writes succeed again');
  });
  return analytics;
}

/** The subscriptions service on the configured payment processor (local, or Stripe). */
export function subscriptionsOf(store: Store, config: Pick<Config, 'paymentProcessor' | 'stripeSecretKey' | 'stripeWebhookSecret' | 'stripeApiUrl'>): Pick<Services, 'subscriptions' | 'localProcessor' | 'stripeWebhook'> {
  if (config.paymentProcessor === 'stripe') {
    const stripe = new StripeProcessor({ secretKey: config.stripeSecretKey!, webhookSecret: config.stripeWebhookSecret!, ...(config.stripeApiUrl && { apiUrl: config.stripeApiUrl }) });
    return { subscriptions: new SubscriptionService(store, stripe), stripeWebhook: stripe };
  }
  const local = new LocalProcessor(store);
  const subscriptions = new SubscriptionService(store, local);
  local.attach(subscriptions);
  return { subscriptions, localProcessor: local };
}
