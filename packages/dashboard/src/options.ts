// What the composition root (runtime) hands the dashboard's API: the store, the ports and the
// REST API's use cases it calls (never a second copy of their rules).

import type { JobState } from '@svc/contracts';
import type { JobRecord, RateLimiterPort, Store } from '@svc/store';

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
