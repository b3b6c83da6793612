// One catalogue of stable error codes (docs/errors.md). Every code has an HTTP status, a
// retry class and the line that documents it in docs/errors.md (a contract test pins all of them,
// and their number). Codes are append-only: never rename or remove one, add a new one.

export interface ErrorSpec {
  status: number;
  /** Short title for people (the `error` field); may change. */
  error: string;
  /** Default `message`. */
  message: string;
  /** Whether an official client retries it with the same idempotency key (docs/errors.md). */
  retry: boolean;
  /** When it happens: the line of docs/errors.md. */
  doc: string;
}

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
  505: 'HTTP Version Not Supported',
};

const e = (status: number, message: string, doc: string, retry = false): ErrorSpec => ({ status, error: TITLES[status] ?? 'Error', message, retry, doc });

export const ERRORS = {
  // authentication and access gates
  api_key_required: e(401, 'X-API-Key header is required', 'no `X-API-Key` header (message `X-API-Key header is required`)'),
  invalid_api_key: e(401, 'Invalid API key', 'the key is not known (message `Invalid API key`)'),
  api_key_revoked: e(401, 'API key has been revoked', 'the key was revoked; revocation is final (message `API key has been revoked`)'),
  api_key_inactive: e(401, 'API key is inactive', 'the key was deactivated; an operator can activate it again'),
  api_key_expired: e(401, 'API key has expired', "the key's expiry time has passed (routine rotation)"),
  insufficient_scope: e(403, 'API key lacks the scope this route needs', 'the key lacks the route\'s scope; `required_scope` names it'),
  subscription_inactive: e(402, 'Subscription has ended; validation is blocked', "the account's subscription has ended; validation is blocked"),
  insufficient_credits: e(402, 'Not enough credits for this request', 'not enough available credits; `required` (most the request can cost) and `available`'),
  rate_limited: e(429, 'You have exceeded the rate limit', 'over 1,000 requests/min from one IP or 10,000/min for one key; `retry_after` 60 and `Retry-After: 60`', true),
  // request shape
  invalid_json: e(400, 'Request body is not valid JSON', 'the body is not valid JSON (or is empty with a JSON content type)'),
  payload_too_large: e(413, 'Request body is larger than the limit', 'the body is larger than `SVC_BODY_LIMIT_BYTES` (1 MiB; a batch job: `SVC_JOB_BODY_LIMIT_BYTES`, 64 MiB), or a CSV upload is larger than `SVC_CSV_MAX_BYTES`'),
  unsupported_media_type: e(415, 'Content-Type must be application/json', 'the body is not `application/json`'),
  invalid_request: e(400, 'Request body does not match the schema', 'the body does not have the route\'s shape (e.g. a JSON array instead of an object), the URL is malformed, or the HTTP request itself is malformed (bad header characters, conflicting `Content-Length`/`Transfer-Encoding`, no `Host`)'),
  email_required: e(400, 'email is required', '`email` missing, empty or only whitespace'),
  invalid_email_type: e(400, 'email must be a string', '`email` (or an item of `emails`) is not a string'),
  emails_required: e(400, 'emails array with at least one email is required', 'bulk or batch job: `emails` missing or empty'),
  too_many_emails: e(400, 'maximum 100 emails per request; split into batches of 100', 'bulk: more than 100 emails (split into batches of 100); batch job: more than 500,000'),
  route_not_found: e(404, 'Route not found', 'no such route (or method)'),
  // idempotency
  invalid_idempotency_key: e(400, 'Idempotency-Key must be 1-255 printable ASCII characters', '`Idempotency-Key` is empty, longer than 255 or not printable ASCII'),
  idempotency_key_conflict: e(409, 'Idempotency-Key was already used with a different request body', 'the key was used before with a different body or route'),
  idempotency_request_in_progress: e(409, 'A request with this Idempotency-Key is still being processed', 'the first request with this key is still running', true),
  // jobs (reserved for the job routes)
  job_not_found: e(404, 'Job not found', 'no such job for this account (an unknown id, or another account\'s job)'),
  invalid_job_state: e(409, 'The job is not in a state that allows this operation', "the job's state forbids the operation: download before completion, start twice, cancel a finished job"),
  // server side
  validation_upstream_failed: e(503, 'A dependency failed during validation; retry later', 'the database could not be reached (connection refused or lost, timeout, server shutting down) while credits were held, taken or settled; nothing was charged for the failed request', true),
  control_plane_route_misconfigured: e(500, 'Route is misconfigured; operator repair needed', 'a route is misconfigured; an operator must repair it'),
  service_unavailable: e(503, 'Service is shutting down or not ready; retry later', 'the service is draining (SIGTERM) and takes no new requests, or the database could not be reached outside a validation (e.g. reading the balance)', true),
  internal_error: e(500, 'Unexpected error', 'an unexpected error, including a broken invariant in the store (a bug: it is logged with the request id)', true),
  not_ready: e(503, 'Service is not ready', '`/ready`: a readiness check failed; the body is the readiness body (`status` `not_ready`, `checks`, `errors`)', true),
  // the HTTP layer (answered before any route: Node's parser, the server's own checks)
  headers_too_large: e(431, 'Request headers are larger than the limit', 'the request line and headers together are larger than 16 KiB'),
  http_version_not_supported: e(505, 'Only HTTP/1.0 and HTTP/1.1 are supported', 'the request line names an HTTP version other than 1.0 or 1.1 (e.g. `HTTP/3.0`, `HTTP/1.7`, `HTTP/2.0` in HTTP/1 syntax)'),
  request_timeout: e(408, 'The request did not arrive in time', 'the request line, headers and body did not all arrive within 30 s of the request starting', true),
  // jobs (docs/api.md)
  invalid_emails: e(400, 'emails must be an array of strings', 'batch job: an item of `emails` is not a string'),
  invalid_signature: e(403, 'The signed URL is invalid or has expired', 'a signed URL (CSV upload, results download) has a bad or expired signature'),
  upload_missing: e(409, 'No CSV has been uploaded for this batch', 'start-processing before the CSV was uploaded to the signed URL'),
  email_column_not_found: e(400, 'The CSV has no column with that name', 'start-processing: `email_column` is not a column of the CSV header'),
  invalid_csv: e(400, 'The CSV could not be parsed', 'the CSV is malformed (broken quoting, not UTF-8, no header row, no data rows)'),
  invalid_webhook_url: e(400, 'webhook_url must be an http or https URL', '`webhook_url` is not an absolute `http`/`https` URL'),
  // outcomes (docs/decisions/outcomes.md)
  missing_outcomes: e(400, 'outcomes array with at least one row is required', 'outcome import: `outcomes` missing or empty, or a CSV with a header and no rows'),
  too_many_outcomes: e(400, 'maximum 10,000 outcomes per request', 'outcome import: more than 10,000 rows'),
  outcome_import_failed: e(503, 'The outcomes could not be stored; retry with the same event identities', 'outcome import: the event log could not be written; nothing was kept, and the same import again succeeds', true),
  outcome_suppression_failed: e(503, 'The suppression step did not finish; retry the same import', 'outcome import: the fail-closed suppression step (suppression list, verdict-cache invalidation) failed; nothing was kept, and the same import again succeeds', true),
  invalid_outcome_query: e(400, 'Invalid outcome query parameter', 'outcome events or reports: a bad `email`, `limit`, `cursor`, `from` or `to` (the message names it)'),
  connector_unavailable: e(403, 'This account cannot use sender-platform connectors', 'connector routes: the account may not use connectors, or the platform is not supported'),
  connector_not_found: e(404, 'No connector for this platform', 'connector status or revoke before one was created'),
  connector_status_failed: e(503, 'The connector status could not be read; retry with bounded backoff', 'connector status: the store could not be read', true),
  connector_create_failed: e(503, 'The connector could not be created; retry with bounded backoff', 'connector create: the credential could not be stored (the previous URL, if any, still works)', true),
  connector_revoke_failed: e(503, 'The connector could not be revoked; treat it as live and retry', 'connector revoke: the revocation could not be stored; the credential stays live until a later revoke succeeds', true),
  invalid_connector_secret: e(404, 'Unknown or revoked webhook URL', 'inbound connector webhook: the URL\'s secret matches no active connector (revoked, replaced, or never issued)'),
  // subscriptions (core 2.4, 3.2)
  subscription_not_found: e(404, 'No active subscription', 'cancel or reactivate: the account has no active subscription (none, or it has already ended)'),
  subscription_already_canceling: e(409, 'The subscription is already set to cancel at the period end', 'cancel: the subscription is already set to cancel at the period end (nothing changed)'),
  subscription_not_canceling: e(409, 'The subscription has no pending cancellation', 'reactivate: the active subscription is not set to cancel (nothing to undo)'),
  payment_processor_unavailable: e(503, 'The payment processor could not be reached; retry later', 'cancel or reactivate: the payment processor did not answer or failed; nothing changed here', true),
  invalid_webhook_signature: e(400, 'The webhook signature is missing or invalid', 'inbound payment-processor webhook: the `Stripe-Signature` header is missing, malformed, too old or does not match the body'),
  // hosted MCP credentials (core 5)
  mcp_token_not_accepted: e(401, 'MCP access tokens are not accepted on the public API; use an API key', 'the public API got an `Authorization: Bearer` hosted-MCP token instead of an `X-API-Key`'),
  api_key_not_accepted: e(401, 'API keys are not accepted on MCP; complete the OAuth flow', 'the hosted MCP endpoint got an `X-API-Key` (it takes only OAuth bearer tokens)'),
  invalid_access_token: e(401, 'The access token is missing, unknown or revoked', 'hosted MCP: no `Authorization: Bearer` token, or the token is unknown or revoked'),
  access_token_expired: e(401, 'The access token has expired; refresh it', 'hosted MCP: the bearer token is past its expiry; use the refresh token'),
  // data endpoints (docs/api.md, "Data endpoints")
  product_not_enabled: e(403, 'The data product is not enabled for this account', 'data endpoints: the account does not have the data product; an operator enables it (`npm run admin -- account data --account ID --enable`)'),
  feature_not_configured: e(503, 'This feature is not configured', 'data endpoints: no provider is configured for the endpoint\'s family (the message names it, e.g. `company enrichment not configured`); retrying cannot help until an operator configures one'),
  provider_unavailable: e(503, 'Every data provider for this request failed; retry later', 'data endpoints: every configured provider of the family failed (timeout, error, open circuit); nothing was charged', true),
  domain_required: e(400, 'domain is required', 'data endpoints: `domain` missing or empty (message `domain is required`)'),
  companies_required: e(400, 'companies array is required', 'company enrich bulk: `companies` missing, not an array, or empty (message `companies array is required`)'),
  too_many_companies: e(400, 'maximum 25 companies per request', 'company enrich bulk: more than 25 companies (message `maximum 25 companies per request`)'),
  email_or_linkedin_url_required: e(400, 'email or linkedin_url required', 'profile enrich: neither `email` nor `linkedin_url` (message `email or linkedin_url required`)'),
  first_name_required: e(400, 'first_name is required', 'person lookup: `first_name` missing or empty (message `first_name is required`)'),
  role_required: e(400, 'role is required', 'role lookup: `role` missing or empty (message `role is required`)'),
  company_linkedin_url_required: e(400, 'company_linkedin_url is required', 'company enrich by LinkedIn: `company_linkedin_url` missing or empty'),
  contact_identity_required: e(400, 'email, linkedin_url, or first_name+last_name required', 'mobile find: none of `email`, `linkedin_url`, or `first_name` with `last_name`'),
  contacts_required: e(400, 'contacts array is required', 'bulk find: `contacts` missing, not an array, or empty (message `contacts array is required`); a contact that lacks a name or a domain is a result with `error`, not a failed request'),
  too_many_contacts: e(400, 'maximum 100 contacts per request', 'bulk find: more than 100 contacts'),
  invalid_limit: e(400, 'limit is out of range', 'people search or hires: `limit` or `offset` is not an integer in its range (the message gives the range)'),
  invalid_days_back: e(400, 'days_back must be an integer from 1 to 180', 'hires: `days_back` is not an integer from 1 to 180'),
  invalid_max_concurrent: e(400, 'max_concurrent must be an integer from 1 to 10', 'bulk enrich or bulk find: `max_concurrent` is not an integer from 1 to 10'),
  invalid_linkedin_url: e(400, 'linkedin_url is not a LinkedIn company URL', 'a LinkedIn URL field is not a LinkedIn URL of the kind the endpoint takes (the message names the field)'),
  invalid_domain: e(400, 'domain is not a valid domain name', 'a `domain` (or `company_domain`, a contact\'s `domain`) is not a domain name'),
  domain_or_linkedin_url_required: e(400, 'domain or linkedin_url required', 'LinkedIn company or hires: neither `domain` nor `linkedin_url`'),
  company_domain_required: e(400, 'company_domain is required', 'person lookup: `company_domain` missing or empty'),
  company_name_required: e(400, 'company_name is required', 'role lookup: `company_name` missing or empty'),
  // the dashboard's own routes (/dashboard/api, docs/decisions/dashboard.md)
  not_signed_in: e(401, 'Sign in to use the dashboard', 'dashboard: no session cookie, or its session ended (signed out, idle longer than `SVC_SESSION_IDLE_S`, older than `SVC_SESSION_MAX_S`, or its user removed)'),
  invalid_credentials: e(401, 'Wrong email address or password', 'dashboard sign-in: no user with that address, or the wrong password (the answer does not say which, and takes as long either way)'),
  sign_in_throttled: e(429, 'Too many sign-in attempts; try again later', 'dashboard sign-in: more than 10 attempts for one address or 50 from one IP address in 15 minutes; `retry_after` and `Retry-After` give the seconds to wait', true),
  csrf_token_invalid: e(403, 'This request lacks the session\'s CSRF token; reload the page', 'dashboard: a change (POST, PUT, PATCH, DELETE) without the session\'s `X-CSRF-Token`, or sent from another origin'),
  owner_role_required: e(403, 'Only the account owner may do this', 'dashboard: a member asked for key, team, billing or sender-connector management, which only owners have'),
  operator_required: e(403, 'Only the service\'s operators may do this', 'dashboard: the operator console (every account, credit grants, the data product, subscriptions) asked for by a user without the operator flag, which only the admin CLI grants'),
  sign_in_link_not_found: e(404, 'This sign-in link is not known', 'dashboard set-up: the link\'s token is unknown (mistyped or never issued)'),
  sign_in_link_used: e(409, 'This sign-in link has been used already', 'dashboard set-up: a single-use link (the owner\'s first-run link, an invitation) was redeemed before'),
  sign_in_link_expired: e(409, 'This sign-in link has expired; ask for a new one', 'dashboard set-up: the link is older than its lifetime (24 hours for the first-run link, 7 days for an invitation)'),
  email_taken: e(409, 'This email address already has a sign-in', 'dashboard: a user with that address exists (an address signs in to one account)'),
  invalid_password: e(400, 'password must be at least 12 characters', 'dashboard: a new password shorter than 12 or longer than 256 characters (the message says which)'),
  key_not_found: e(404, 'no such key', 'dashboard: the key id is not one of the account\'s keys'),
  key_revoked: e(409, 'The key is revoked; revocation cannot be undone', 'dashboard: a change of a revoked key other than revoking it again'),
  key_expired: e(409, 'The key has expired; create a new key', 'dashboard: activating or rotating a key past its expiry'),
  user_not_found: e(404, 'no such user', 'dashboard: the user id is not one of the account\'s current users'),
  last_owner: e(409, 'An account keeps at least one owner', 'dashboard: a role change that would leave the account without an owner (demoting its only owner, yourself included)'),
  oauth_grant_not_found: e(404, 'no such connected app', 'dashboard: the id is not one of the account\'s MCP app grants (OAuth)'),
  account_not_found: e(404, 'no such account', 'dashboard operator console: the account id is not known'),
  plan_not_found: e(404, 'no such plan', 'dashboard operator console: subscribing an account to a plan that is not in `plans`'),
  subscription_exists: e(409, 'The account already has a live subscription', 'dashboard operator console: subscribing an account that has a subscription which has not ended'),
  subscription_not_local: e(409, 'This subscription\'s periods move with Stripe\'s events', 'dashboard operator console: moving the period of a subscription the local payment processor does not run (a Stripe one)'),
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;
export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

export const isErrorCode = (s: string): s is ErrorCode => Object.hasOwn(ERRORS, s);

/**
 * A problem the operator must fix before the process can run (a setting, the data directory), not
 * a request's: entry points print its message on one line and exit 2, without a stack.
 */
export class OperatorError extends Error {}

/**
 * An expected, coded rejection, thrown by use cases (billing, jobs) and HTTP gates alike and
 * rendered by the front's one error handler. Inside one process only: across threads and
 * processes, send `{ ok: false, code, message }`.
 */
export class ServiceError extends Error {
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

  /** The error body (docs/errors.md). */
  body(): ErrorBody {
    return { error: ERRORS[this.code].error, message: this.message, code: this.code, ...this.extra };
  }
}

/** The error body (docs/errors.md). */
export interface ErrorBody {
  error: string;
  message: string;
  code: ErrorCode;
  retry_after?: number;
  required_scope?: string;
  required?: number;
  available?: number;
  [extra: string]: unknown;
}

/**
 * Awaits `p`; any failure that is not already a ServiceError becomes the ServiceError `code`
 * (with `message`, else the code's own), the original as its cause. For a dependency whose every
 * failure means one thing to the caller (an analytics read that failed is an outage; a failed
 * import stored nothing).
 */
export async function failingAs<T>(p: Promise<T>, code: ErrorCode, message?: string): Promise<T> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof ServiceError) throw err;
    throw new ServiceError(code, message, {}, {}, err);
  }
}
