// The retry rule (the retry column of docs/errors.md), and the back-off between attempts.
//
// Retried, always with the same Idempotency-Key: network failures and timeouts (no answer, or
// 408 `request_timeout`), 409 `idempotency_request_in_progress` (the first request with the key
// is still running), 429 (after `retry_after`), and every 5xx, including codes this client does
// not know yet: a server error is presumed temporary. Never retried: every other 4xx (bad input,
// 401 authentication, 402 `insufficient_credits` and `subscription_inactive`, 403 forbidden,
// 404, 409 `idempotency_key_conflict`, …: the same request cannot succeed), and the three 5xx codes
// the catalogue marks final: `control_plane_route_misconfigured` (an operator must repair the
// route), `http_version_not_supported` (the request line itself is refused) and
// `feature_not_configured` (a data endpoint with no provider: an operator must configure one). A test holds this
// table equal to the catalogue's retry column (packages/contracts/src/errors.ts), code for code.

/** 5xx codes that retrying cannot fix. */
const FINAL_5XX: ReadonlySet<string> = new Set(['control_plane_route_misconfigured', 'http_version_not_supported', 'feature_not_configured']);

/** 4xx codes (or statuses) that a later attempt can get past. */
const RETRYABLE_4XX_CODES: ReadonlySet<string> = new Set(['idempotency_request_in_progress', 'request_timeout', 'rate_limited']);
const RETRYABLE_4XX_STATUSES: ReadonlySet<number> = new Set([408, 429]);

/** Whether an answer with this status and code is retried (docs/errors.md). */
export function isRetryable(status: number, code: string | undefined): boolean {
  if (status >= 500) return code === undefined || !FINAL_5XX.has(code);
  if (RETRYABLE_4XX_STATUSES.has(status)) return true;
  return code !== undefined && RETRYABLE_4XX_CODES.has(code);
}

export interface BackoffOptions {
  /** The first delay's ceiling (ms). */
  baseMs: number;
  /** No delay's ceiling is above this (ms). */
  capMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 250, capMs: 8_000 };

/**
 * The delay before retry number `retry` (1 = the second attempt): exponential back-off with full
 * jitter (a uniform draw from [0, min(cap, base·2^(retry-1))]), so clients that failed together
 * do not come back together. `random` returns [0, 1).
 */
export function backoffDelay(retry: number, random: () => number, { baseMs, capMs }: BackoffOptions = DEFAULT_BACKOFF): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, retry - 1));
  return Math.floor(random() * ceiling);
}
