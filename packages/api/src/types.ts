// What the front receives from the composition root (@svc/runtime): its services and settings.

import type { ReadinessState } from '@svc/contracts';
import type { RateLimiterPort, Store } from '@svc/store';
import type { Verifier } from '@svc/verifier';

/** What the front needs from the composition root. */
export interface ApiServices {
  store: Store;
  verifier: Verifier;
  rateLimiter: RateLimiterPort;
  readiness: { readonly state: ReadinessState };
}

/** The settings the front uses (a slice of the runtime configuration). */
export interface ApiSettings {
  logLevel: string;
  bodyLimitBytes: number;
  trustProxy: boolean;
  publicUrl: string;
  rateLimitPerIp: number;
  rateLimitPerKey: number;
}
