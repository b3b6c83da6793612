// What the composition root (runtime) hands the dashboard's API: the store, the ports and the
// REST API's use cases it calls (never a second copy of their rules).

import type { DataFamily, DomainOutcomeMatrix, JobState, OutcomeMatrix } from '@svc/contracts';
import type { CancellationResponse, LocalProcessor } from '@svc/billing';
import type { Analytics, JobRecord, RateLimiterPort, Store } from '@svc/store';

export interface DashboardApiOptions {
  store: Store;
  rateLimiter: RateLimiterPort;
  /** The service's HMAC secret (SVC_SECRET or the stored one): CSRF tokens are derived from it. */
  secret: string;
  /** SVC_PUBLIC_URL: the base of sign-in links, and whether cookies are Secure (https). */
  publicUrl: string;
  sessionIdleS: number;
  sessionMaxS: number;
  /** Called after a key changed state (the API's short key cache forgets it). */
  onKeyChange?: () => void;
  /**
   * One address validated and charged to the account, exactly as `POST /v1/validate` does it (the
   * composition root passes billing's validateAndCharge); the answer is the API's result object.
   */
  validate?: (accountId: string, email: string, requestId: string) => Promise<unknown>;
  /** The account's jobs, through the jobs service the REST routes use (absent on a process without jobs). */
  jobs?: DashboardJobs;
  /** CSV batches, through the service of POST /v1/csv/prepare-upload and start-processing. */
  csv?: DashboardCsv;
  /** Validations per day by verdict for the usage page (the analytics port; absent: the page shows credits only). */
  analytics?: Pick<Analytics, 'daily'>;
  /** The accuracy reports: what GET /v1/outcomes/email/reports/summary and /domains call. */
  reports?: DashboardReports;
  /** Outcome imports and the sender-platform connector: the REST outcome routes' service and CSV reader. */
  outcomes?: DashboardOutcomes;
  /** POST /v1/find/bulk and /v1/company/enrich: the REST routes' body parsers and @svc/enrich's DataService. */
  data?: DashboardData;
  /** Cancel and reactivate, through billing's SubscriptionService (POST /v1/subscriptions/cancel and /reactivate). */
  subscriptions?: DashboardSubscriptions;
  /** The local payment processor (SVC_PAYMENT_PROCESSOR=local): the operator's create and advance-period; absent with Stripe. */
  localProcessor?: DashboardLocalProcessor;
  /** The account's webhook signing secrets, through the service of GET /v1/webhooks/secret (@svc/jobs' listWebhookSecrets). */
  webhookSecrets?: DashboardWebhookSecrets;
}

/** What the dashboard asks of billing's SubscriptionService (it is one). */
export interface DashboardSubscriptions {
  cancel(accountId: string): Promise<CancellationResponse>;
  reactivate(accountId: string): Promise<CancellationResponse>;
}

/** What the dashboard asks of billing's LocalProcessor (it is one). */
export type DashboardLocalProcessor = Pick<LocalProcessor, 'create' | 'advancePeriod'>;

/** What the dashboard asks of the webhook secrets' service: the current ones, by their first characters. */
export interface DashboardWebhookSecrets {
  list(accountId: string): Promise<{ secrets: Array<{ id: string; secret_prefix: string; created_at: string; expires_at: string | null }> }>;
}

/** What the dashboard asks of @svc/jobs' CsvJobs (it is one). */
export interface DashboardCsv {
  prepare(accountId: string, input: { filename: string; webhookUrl?: string | null }): Promise<{ job: JobRecord; upload: { batch_id: string; upload_url: string; expires_at: string; max_bytes: number } }>;
  start(accountId: string, batchId: string, emailColumn: string): Promise<JobRecord>;
}

/** What the dashboard asks of @svc/jobs' JobsService (it is one). */
export interface DashboardJobs {
  get(accountId: string, id: string): Promise<JobRecord>;
  list(accountId: string, opts: { limit?: number; cursor?: string; status?: JobState }): Promise<{ jobs: JobRecord[]; next_cursor: string | null }>;
  status(job: JobRecord): unknown;
  cancel(accountId: string, id: string): Promise<JobRecord>;
  downloadLink(accountId: string, id: string, segment?: string): Promise<{ url: string; expires_at: string }>;
}

/** The accuracy reports: the analytics port and @svc/outcomes' summaryReport and domainsReport. */
export interface DashboardReports {
  analytics: Pick<Analytics, 'outcomeMatrix' | 'outcomeDomains'>;
  summary(m: OutcomeMatrix, w: { from: Date; to: Date }): unknown;
  domains(rows: readonly DomainOutcomeMatrix[], w: { from: Date; to: Date }): unknown;
}

/** Outcome imports and connectors: @svc/outcomes' OutcomesService (it is one), its CSV reader and limits. */
export interface DashboardOutcomes {
  service: {
    import(accountId: string, rows: readonly unknown[], opts: { defaultSource: 'csv_import' }): Promise<unknown>;
    createConnector(accountId: string, platform: string): Promise<{ webhook_url: string }>;
    connectorStatus(accountId: string, platform: string): Promise<unknown>;
    revokeConnector(accountId: string, platform: string): Promise<unknown>;
  };
  /** A CSV import body to its rows (outcomeCsvRows: invalid_csv, missing_outcomes, too_many_outcomes). */
  csvRows(text: string): readonly unknown[];
  /** The largest import body (OUTCOME_BODY_LIMIT). */
  maxBytes: number;
  /** The platforms a connector serves (CONNECTOR_PLATFORMS). */
  platforms: readonly string[];
}

/** The data endpoints: @svc/enrich's DataService (it is one) and the REST routes' body parsers. */
export interface DashboardData {
  service: {
    requireFamily(family: DataFamily): void;
    companyEnrich(accountId: string, q: unknown): Promise<unknown>;
    findBulk(accountId: string, q: unknown, id: string): Promise<unknown>;
  };
  parseCompanyEnrich(body: unknown): unknown;
  parseFindBulk(body: unknown): unknown;
}
