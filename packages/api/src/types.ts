// What the front receives from the composition root (@svc/runtime): its services and settings.

import type { ReadinessState } from '@svc/contracts';
import type { CsvJobs, JobsService } from '@svc/jobs';
import type { Analytics, RateLimiterPort, Store } from '@svc/store';
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
  /** Where every validation decision goes (DESIGN 4); without it none is recorded. */
  analytics?: Pick<Analytics, 'record'>;
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
