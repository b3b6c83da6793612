// What the front receives from the composition root (@svc/runtime): its services and settings.

import type { ReadinessState } from '@svc/contracts';
import type { ProcessorEvent, SubscriptionService } from '@svc/billing';
import type { CatchallRecovery, CsvJobs, JobsService } from '@svc/jobs';
import type { OutcomesService } from '@svc/outcomes';
import type { Analytics, RateLimiterPort, Store } from '@svc/store';
import type { HostedMcp } from '@svc/mcp';
import type { DataService } from '@svc/enrich';
import type { Verifier } from '@svc/verifier';

/** What the front needs from the composition root. */
export interface ApiServices {
  store: Store;
  verifier: Verifier;
  rateLimiter: RateLimiterPort;
  readiness: { readonly state: ReadinessState };
  /** The job pipeline (intake, reads, cancel, downloads); without it the job routes are not served. */
  jobs?: JobsService;
  /** CSV batches (prepare-upload, the signed upload, start-processing); served with `jobs`. */
  csvJobs?: CsvJobs;
  /** Delivery outcomes (imports, events, connectors); without it the outcome routes are not served. */
  outcomes?: OutcomesService;
  /** Catch-all recovery of completed jobs (served with `jobs`). */
  recovery?: CatchallRecovery;
  /** The accuracy reports' reads (the Analytics port); without it the report routes are not served. */
  reports?: Pick<Analytics, 'outcomeMatrix' | 'outcomeDomains'>;
  /** Subscriptions (cancel, reactivate, the processor's events); without it those routes are not served. */
  subscriptions?: SubscriptionService;
  /** The Stripe adapter's webhook verification; with it POST /v1/webhooks/stripe is served. */
  stripeWebhook?: { verify(rawBody: Buffer, signature: string | undefined): ProcessorEvent };
  /** Where every validation decision goes (docs/decisions/storage-and-cluster.md "Analytics"); without it none is recorded. */
  analytics?: Pick<Analytics, 'record'>;
  /** Hosted MCP for AI agents (OAuth endpoints and the svc_* tools); without it /mcp and /oauth/* are not served. */
  mcp?: HostedMcp;
  /** The data endpoints (company, LinkedIn, people, profiles, mobiles, the finder); without it they are not served. */
  data?: DataService;
}

/** The settings the front uses (a slice of the runtime configuration). */
export interface ApiSettings {
  logLevel: string;
  bodyLimitBytes: number;
  trustProxy: boolean;
  publicUrl: string;
  rateLimitPerIp: number;
  rateLimitPerKey: number;
  /** Body limit of POST /v1/validate/batch (default 64 MiB). */
  jobBodyLimitBytes?: number;
}
