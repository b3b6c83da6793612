// The relational store: one repository per aggregate over one Db port (PGlite or Postgres). The
// raw connection stays inside: business code goes through the repositories.

import type { AnalyticsOptions } from './analytics/analytics.ts';
import { SqlAnalytics } from './analytics/sql-analytics.ts';
import { PgBlobStore } from './blob/blob-pg.ts';
import type { Db } from './db/db.ts';
import { AccountsRepo } from './repos/accounts.ts';
import { OAuthRepo } from './repos/oauth.ts';
import { IdempotencyRepo } from './repos/idempotency.ts';
import { JobsRepo } from './repos/jobs.ts';
import { KeysRepo } from './repos/keys.ts';
import { UsersRepo } from './repos/users.ts';
import { LedgerRepo } from './repos/ledger.ts';
import { WebhooksRepo } from './repos/webhooks.ts';
import { OutcomesRepo } from './repos/outcomes.ts';
import { RecoveriesRepo } from './repos/recoveries.ts';
import { SubscriptionsRepo } from './repos/subscriptions.ts';
import { migrate } from './db/migrate.ts';
import { openPglite } from './db/pglite.ts';
import { openPostgres } from './db/postgres.ts';
import { SettingsRepo } from './repos/settings.ts';
import { DeadLettersRepo } from './repos/dead-letters.ts';
import { DecisionOutboxRepo } from './repos/decision-outbox.ts';
import { WebhookSecretsRepo } from './repos/webhook-secrets.ts';
import { EnrichCacheRepo } from './repos/enrich-cache.ts';
import { FinderPatternsRepo } from './repos/finder-patterns.ts';

export class Store {
  readonly accounts: AccountsRepo;
  readonly keys: KeysRepo;
  /** The dashboard's people: users, their sessions, single-use sign-in links. */
  readonly users: UsersRepo;
  /** Hosted MCP's OAuth clients, grants, codes and tokens (hashed). */
  readonly oauth: OAuthRepo;
  readonly ledger: LedgerRepo;
  readonly idempotency: IdempotencyRepo;
  readonly jobs: JobsRepo;
  readonly settings: SettingsRepo;
  /** The in-process bus's dead letters. */
  readonly deadLetters: DeadLettersRepo;
  /** Job decisions on their way to analytics. */
  readonly decisionOutbox: DecisionOutboxRepo;
  /** Each account's webhook signing secrets. */
  readonly webhookSecrets: WebhookSecretsRepo;
  readonly webhooks: WebhooksRepo;
  /** The data endpoints' answers (company, LinkedIn, people, ...) with their fetch time. */
  readonly enrichCache: EnrichCacheRepo;
  /** The email finder's evidence: proven address patterns per domain. */
  readonly finderPatterns: FinderPatternsRepo;
  readonly outcomes: OutcomesRepo;
  readonly recoveries: RecoveriesRepo;
  readonly subscriptions: SubscriptionsRepo;
  /** Blobs in the database (the cluster profile's blob store: any front serves any upload and download). */
  readonly blobs: PgBlobStore;
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
    this.accounts = new AccountsRepo(db);
    this.keys = new KeysRepo(db);
    this.users = new UsersRepo(db);
    this.oauth = new OAuthRepo(db);
    this.ledger = new LedgerRepo(db);
    this.idempotency = new IdempotencyRepo(db);
    this.jobs = new JobsRepo(db);
    this.settings = new SettingsRepo(db);
    this.deadLetters = new DeadLettersRepo(db);
    this.decisionOutbox = new DecisionOutboxRepo(db);
    this.webhookSecrets = new WebhookSecretsRepo(db);
    this.webhooks = new WebhooksRepo(db);
    this.enrichCache = new EnrichCacheRepo(db);
    this.finderPatterns = new FinderPatternsRepo(db);
    this.outcomes = new OutcomesRepo(db);
    this.recoveries = new RecoveriesRepo(db);
    this.subscriptions = new SubscriptionsRepo(db);
    this.blobs = new PgBlobStore(db);
  }

  /**
   * Whether the service's schema is there (its accounts table, on the search path): a store opened
   * without migrating may be an empty database, which the admin CLI must not take for a store.
   */
  async hasSchema(): Promise<boolean> {
    return (await this.#db.query<{ present: boolean }>(`SELECT to_regclass('accounts') IS NOT NULL AS present`))[0]?.present === true;
  }

  /** Whether the database answers (readiness). */
  async ping(): Promise<boolean> {
    return (await this.#db.query('SELECT 1 AS ok')).length === 1;
  }

  close(): Promise<void> {
    return this.#db.close();
  }

  /**
   * The embedded profile's Analytics adapter on this store's database (tables decision_packs and outcome_facts).
   * It uses the store's connection: close it (its flush) before the store.
   */
  sqlAnalytics(opts: AnalyticsOptions = {}): SqlAnalytics {
    return new SqlAnalytics(this.#db, opts);
  }
}

/**
 * Opens the relational store of the configured profile and brings its schema up to date, unless
 * `migrate` is false (then no table is created: check `hasSchema()` before use).
 */
export async function openStore(opts: { databaseUrl?: string; dataDir?: string; migrate?: boolean }): Promise<Store> {
  const db = opts.databaseUrl ? await openPostgres(opts.databaseUrl) : await openPglite(opts.dataDir);
  try {
    if (opts.migrate !== false) await migrate(db);
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
  return new Store(db);
}
