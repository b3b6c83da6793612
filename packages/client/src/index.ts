// @svc/client: the official TypeScript client of the email validation API. No dependencies:
// global fetch (Node 20+, browsers, Deno, Bun). See docs/api.md "Official client and CLI".

export { SvcClient, DEFAULT_BASE_URL, FINAL_JOB_STATES, MAX_COMPANIES_PER_REQUEST, MAX_CONTACTS_PER_REQUEST, type ApiResponse, type CallOptions, type ClientOptions, type RequestSpec, type RetryEvent, type WaitOptions, type WriteOptions } from './client.ts';
export { SvcApiError, SvcError, SvcNetworkError, retryAfterHeader, type ErrorBody } from './errors.ts';
export { backoffDelay, DEFAULT_BACKOFF, isRetryable, type BackoffOptions } from './retry.ts';
export type * from './types.ts';
