// One catalogue of stable error codes (spec core 7; STYLE 5). Every code has an HTTP status, a
// retry class and a line in docs/errors.md (a test pins all three). Codes are append-only: never
// rename one, add a new one.

export interface ErrorSpec {
  status: number;
  /** Short title for people (the `error` field); may change. */
  error: string;
  /** Default `message`. */
  message: string;
  /** Whether an official client retries it with the same idempotency key (spec core 7). */
  retry: boolean;
}

const e = (status: number, error: string, message: string, retry = false): ErrorSpec => ({ status, error, message, retry });

export const ERRORS = {
  // authentication and access gates
  api_key_required: e(401, 'Unauthorized', 'X-API-Key header is required'),
  invalid_api_key: e(401, 'Unauthorized', 'Invalid API key'),
  api_key_revoked: e(401, 'Unauthorized', 'API key has been revoked'),
  api_key_inactive: e(401, 'Unauthorized', 'API key is inactive'),
  api_key_expired: e(401, 'Unauthorized', 'API key has expired'),
  insufficient_scope: e(403, 'Forbidden', 'API key lacks the scope this route needs'),
  subscription_inactive: e(402, 'Payment Required', 'Subscription has ended; validation is blocked'),
  insufficient_credits: e(402, 'Payment Required', 'Not enough credits for this request'),
  rate_limited: e(429, 'Too Many Requests', 'You have exceeded the rate limit', true),
  // request shape
  invalid_json: e(400, 'Bad Request', 'Request body is not valid JSON'),
  payload_too_large: e(413, 'Payload Too Large', 'Request body is larger than the limit'),
  unsupported_media_type: e(415, 'Unsupported Media Type', 'Content-Type must be application/json'),
  invalid_request: e(400, 'Bad Request', 'Request body does not match the schema'),
  email_required: e(400, 'Bad Request', 'email is required'),
  invalid_email_type: e(400, 'Bad Request', 'email must be a string'),
  emails_required: e(400, 'Bad Request', 'emails array with at least one email is required'),
  too_many_emails: e(400, 'Bad Request', 'maximum 100 emails per request; split into batches of 100'),
  route_not_found: e(404, 'Not Found', 'Route not found'),
  // idempotency
  invalid_idempotency_key: e(400, 'Bad Request', 'Idempotency-Key must be 1-255 printable ASCII characters'),
  idempotency_key_conflict: e(409, 'Conflict', 'Idempotency-Key was already used with a different request body'),
  idempotency_request_in_progress: e(409, 'Conflict', 'A request with this Idempotency-Key is still being processed', true),
  // jobs (reserved for the job routes; codes named by spec core 7)
  job_not_found: e(404, 'Not Found', 'Job not found'),
  invalid_job_state: e(409, 'Conflict', 'The job is not in a state that allows this operation'),
  // server side
  validation_upstream_failed: e(503, 'Service Unavailable', 'A dependency failed during validation; retry later', true),
  control_plane_route_misconfigured: e(500, 'Internal Server Error', 'Route is misconfigured; operator repair needed'),
  service_unavailable: e(503, 'Service Unavailable', 'Service is shutting down or not ready; retry later', true),
  internal_error: e(500, 'Internal Server Error', 'Unexpected error', true),
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

/** An expected, coded rejection. Thrown inside handlers and hooks, rendered by the one error handler. */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string | number> = {},
    /** The underlying error, for the log (never sent to the client). */
    override readonly cause?: unknown,
  ) {
    super(message ?? ERRORS[code].message);
  }

  get status(): number {
    return ERRORS[this.code].status;
  }

  body(): Record<string, unknown> {
    return { error: ERRORS[this.code].error, message: this.message, code: this.code, ...this.extra };
  }
}
