// Starting and stopping the whole service in one process (the embedded profile, or a front on the
// cluster adapters that are configured). Used by the entry points and by the tests.

import { createServer, type Server } from 'node:net';
import v8 from 'node:v8';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '@svc/api';
import { issueLink } from '@svc/accounts';
import { validateAndCharge } from '@svc/billing';
import { dashboardApi, dashboardPages, ensureDashboardBuilt } from '@svc/dashboard';
import { DirBlobStore, keyKindOf, hashKey, type Store } from '@svc/store';
import { adminSocketPath, serveAdminSocket } from '@svc/admin';
import { ENRICH_CACHE_MAX_TTL_MS, parseCompanyEnrich, parseFindBulk } from '@svc/enrich';
import { CONNECTOR_PLATFORMS, domainsReport, OUTCOME_BODY_LIMIT, outcomeCsvRows, summaryReport } from '@svc/outcomes';
import { listWebhookSecrets } from '@svc/jobs';
import { releaseOrphanedHolds, releaseStaleSyncHolds, SYNC_HOLD_ORPHANED_MS } from '@svc/billing';
import { listenConfigError, type Config } from './config.ts';
import { createServices, type Services } from './services.ts';

export interface RunningService {
  app: FastifyInstance;
  services: Services;
  url: string;
  /** The key generated at first start when no bootstrap key was configured (printed once). */
  generatedKey?: string;
  /** First start with the dashboard on: the owner's single-use set-up link (printed once, valid 24 h). */
  setupUrl?: string;
  close(): Promise<void>;
}

export type BootstrapOutcome =
  | { kind: 'created'; accountId: string; generatedKey?: string }
  | { kind: 'exists' }
  /** SVC_BOOTSTRAP_API_KEY is set but the store already has accounts: it is a first-start setting. */
  | { kind: 'ignored' };

/**
 * First start (no account yet): SVC_BOOTSTRAP_API_KEY becomes an unrestricted key of a new
 * account holding SVC_BOOTSTRAP_CREDITS; without it a key is generated and returned to be printed
 * once. Once any account exists, nothing is created.
 */
export async function bootstrap(store: Store, config: Pick<Config, 'bootstrapApiKey' | 'bootstrapCredits'>): Promise<BootstrapOutcome> {
  const given = config.bootstrapApiKey;
  const known = async () => given !== undefined && (await store.keys.findByHash(hashKey(given))) !== undefined;
  if (await known()) return { kind: 'exists' };
  const key = given ? { kind: keyKindOf(given)!, scopes: null, name: 'bootstrap', key: given } : { kind: 'live' as const, scopes: null, name: 'generated at first start' };
  const first = await store.accounts.createFirst({ name: 'bootstrap', credits: config.bootstrapCredits, key });
  // Another process may have bootstrapped the same key between the two statements.
  if (!first) return given && !(await known()) ? { kind: 'ignored' } : { kind: 'exists' };
  return given ? { kind: 'created', accountId: first.accountId } : { kind: 'created', accountId: first.accountId, generatedKey: first.key };
}

export interface StartOptions {
  /** A store opened by the caller (tests); it stays open when the service closes. */
  store?: Store;
  /**
   * Called with the key generated at first start as soon as it exists, before the first log line
   * and before listening, so the operator sees it even if listening then fails (it stays valid).
   */
  onGeneratedKey?: (key: string) => void;
  /**
   * First start with the dashboard on: called once listening with the owner's single-use set-up
   * link (the dashboard's first sign-in) and its expiry.
   */
  onSetupLink?: (url: string, expiresAt: Date) => void;
  /** Where log lines go (default: stdout); tests read them from here. */
  logStream?: NonNullable<Parameters<typeof buildApp>[2]>['logStream'];
}

/**
 * Fails (EADDRINUSE, EACCES, …) if the service could not listen on its address, before anything
 * is opened or created: a first start whose port is taken must not create the account and show
 * its generated key only to exit (the next start would show none). Port 0 always binds.
 */
async function checkListenable(config: Pick<Config, 'port' | 'host'>): Promise<void> {
  if (config.port === 0) return;
  const probe = createServer();
  await new Promise<void>((resolve, reject) => {
    probe.once('error', reject);
    probe.listen({ port: config.port, host: config.host, exclusive: true }, resolve);
  });
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

export async function startService(config: Config, opts: StartOptions = {}): Promise<RunningService> {
  try {
    await checkListenable(config);
  } catch (err) {
    throw listenConfigError(err, config) ?? err;
  }
  // Process-wide, read by V8 at each full collection: the heap's garbage stays within this share
  // of its live objects (docs/decisions/storage-and-cluster.md, "Memory of a big job").
  if (config.heapGrowingPercent > 0) v8.setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  const services = await createServices(config, opts);
  const { store, verifier, readiness } = services;
  let app: FastifyInstance | undefined;
  let admin: Server | undefined;
  let sweep: NodeJS.Timeout | undefined;
  // One way down, for a failed start and for close(): whatever was opened is closed, in order.
  const shutdown = async (): Promise<void> => {
    readiness.stop();
    clearInterval(sweep);
    admin?.close();
    await app?.close(); // stops accepting, waits for in-flight requests
    // Jobs: no more re-probe wake-ups; the bus lets the messages in progress finish (their results
    // can no longer be published: a restart publishes that work again) and drops the rest.
    await services.jobs.stop();
    await services.webhooks.stop();
    await services.bus.close();
    // The decisions of the last results written are shipped (what fails waits in the outbox).
    await services.jobs.relay?.stop();
    await services.closeCsvPool();
    await verifier.close(); // the engine finishes what is queued; every MX actor QUITs its sessions
    await services.closeCache();
    // Every decision recorded so far is written (the requests and job results above are done)
    // before the store, whose connection the SQL adapter uses, closes. A failure loses only them.
    await services.finderShapes.flush();
    await services.analytics.close().catch((err: unknown) => app?.log.warn({ err, component: 'analytics' }, 'analytics: decisions not written at shutdown'));
    if (!opts.store) await store.close();
  };
  let boot: BootstrapOutcome;
  try {
    // Sync validations never outlive their process: any still open were cut off by a crash, and so
    // were idempotency claims still in progress (their charge never committed). Embedded, this
    // process is the only one: all of them; with DATABASE_URL others may be mid-request: open
    // reservations older than 10 min, and claims their holders stopped renewing a lease ago.
    // A catch-all recovery cut off by a crash leaves its hold open: released the same way.
    await releaseOrphanedHolds(store, config.databaseUrl ? SYNC_HOLD_ORPHANED_MS : 0);
    await store.idempotency.releaseInProgress(config.databaseUrl ? config.claimLeaseMs : 0);
    boot = await bootstrap(store, config);
    if (boot.kind === 'created' && boot.generatedKey) opts.onGeneratedKey?.(boot.generatedKey);
    app = await buildApp(services, config, opts.logStream ? { logStream: opts.logStream } : {});
    if (config.dashboard) {
      const built = app;
      await app.register(dashboardApi, {
        prefix: '/dashboard/api',
        store,
        rateLimiter: services.rateLimiter,
        secret: services.secret,
        publicUrl: config.publicUrl,
        sessionIdleS: config.sessionIdleS,
        sessionMaxS: config.sessionMaxS,
        onKeyChange: () => built.clearKeyCache(),
        validate: async (accountId, email, requestId) =>
          (await validateAndCharge(store, services.verifier, accountId, [email], { decisions: { sink: services.analytics, requestId, source: 'single', log: built.log } }))[0],
        jobs: services.jobs,
        csv: services.csvJobs,
        analytics: services.analytics,
        reports: { analytics: services.analytics, summary: summaryReport, domains: domainsReport },
        outcomes: { service: services.outcomes, csvRows: outcomeCsvRows, maxBytes: OUTCOME_BODY_LIMIT, platforms: CONNECTOR_PLATFORMS },
        data: { service: services.data, parseCompanyEnrich, parseFindBulk },
        subscriptions: services.subscriptions,
        ...(services.localProcessor && { localProcessor: services.localProcessor }),
        webhookSecrets: { list: (accountId) => listWebhookSecrets(store, accountId) },
      });
      if (ensureDashboardBuilt((msg) => built.log.warn(msg))) await app.register(dashboardPages);
    }
    services.setJobsLogger(app.log.child({ component: 'jobs' }));
    // Jobs left unfinished by the last run are resumed before the first request is taken.
    if (services.blobs instanceof DirBlobStore) await services.blobs.sweepPartials();
    await services.jobs.start();
    if (config.role !== 'front') {
      // Embedded, this process is the only deliverer: a claim left by a killed run is released now.
      if (!config.databaseUrl) await store.webhooks.releaseAll();
      services.webhooks.start();
    }
    if (config.webhookAllowPrivate)
      app.log.warn(
        { setting: 'SVC_WEBHOOK_ALLOW_PRIVATE' },
        'SVC_WEBHOOK_ALLOW_PRIVATE=true: job webhooks may call ANY address: loopback (127.0.0.0/8, ::1), private networks (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7), link-local (169.254.0.0/16 with cloud metadata services, fe80::/10), carrier-grade NAT, multicast and reserved ranges. For a receiver on this machine, set SVC_OUTBOUND_ALLOW_NETWORKS=127.0.0.0/8,::1/128 instead',
      );
    if (boot.kind === 'ignored') app.log.warn('SVC_BOOTSTRAP_API_KEY is ignored: it applies on first start only and this store already has accounts (use the admin CLI to add keys)');
    const served = app;
    if (!config.databaseUrl && !opts.store) admin = serveAdminSocket(store, adminSocketPath(config.dataDir), () => served.clearKeyCache(), { publicUrl: config.publicUrl });
    // The first readiness check runs before the port opens, so /ready never answers "not checked
    // yet" to a process that /health already shows up (each check is bounded by its timeout).
    await readiness.start();
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    // Nothing is served yet: close what start-up opened, then name the setting to change.
    await shutdown().catch(() => {});
    throw listenConfigError(err, config) ?? err;
  }
  // A reservation left open by a failed settle or a dead process is released after 10 minutes;
  // idempotency records past their 24 h are deleted (begin() only replaces them key by key).
  const log = app.log;
  sweep = setInterval(() => {
    void releaseStaleSyncHolds(store).catch((err: unknown) => log.error({ err }, 'stale reservation sweep failed'));
    void store.idempotency.sweepExpired().catch((err: unknown) => log.error({ err }, 'expired idempotency record sweep failed'));
    void store.oauth.sweepExpired().catch((err: unknown) => log.error({ err }, 'expired OAuth code and token sweep failed'));
    // Dashboard sessions past their end (and revoked ones a day later) are deleted.
    void store.users.sweepSessions().catch((err: unknown) => log.error({ err }, 'expired dashboard session sweep failed'));
    // The data endpoints' cached answers past the longest time to live are never read again.
    void store.enrichCache.prune(ENRICH_CACHE_MAX_TTL_MS).catch((err: unknown) => log.error({ err }, 'enrich cache sweep failed'));
    // The local payment processor renews (or ends) the subscriptions whose period has ended.
    void services.localProcessor?.renewDue().catch((err: unknown) => log.error({ err }, 'subscription renewal sweep failed'));
  }, 60_000);
  sweep.unref();
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  let closing: Promise<void> | undefined;
  const service: RunningService = {
    app,
    services,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () => (closing ??= shutdown()),
  };
  if (boot.kind === 'created' && boot.generatedKey) service.generatedKey = boot.generatedKey;
  if (boot.kind === 'created' && config.dashboard) {
    // The link names where the service is reached: SVC_PUBLIC_URL, or this address when PORT was 0.
    const base = config.publicUrl === `http://localhost:0` ? `http://localhost:${port}` : config.publicUrl;
    const link = await issueLink(store, base, { kind: 'owner_setup', accountId: boot.accountId, role: 'owner' });
    service.setupUrl = link.url;
    opts.onSetupLink?.(link.url, link.expiresAt);
  }
  return service;
}
