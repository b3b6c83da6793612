// The shared vocabulary is a contract (docs/errors.md):
// - every error code has a status, a retry class and a line in docs/errors.md that agrees with it;
// - codes are append-only: the pinned list below may only grow, at its end;
// - every reason code and charge reason is explained in docs/decisions/ (the index docs/decisions.md and its topics).

import { readFileSync, readdirSync } from 'node:fs';
import t from 'tap';
import { CHARGE_REASONS, ERRORS, ERROR_CODES, REASON_CODES, isErrorCode, ServiceError } from '../src/index.ts';

const doc = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
// The decisions: the index and one file per topic.
const decisionsDir = new URL('../../../docs/decisions/', import.meta.url);
const decisions = [readFileSync(new URL('../../../docs/decisions.md', import.meta.url), 'utf8'), ...readdirSync(decisionsDir).filter((f) => f.endsWith('.md')).sort().map((f) => readFileSync(new URL(f, decisionsDir), 'utf8'))].join('\n');
const rows = new Map<string, { status: number; retry: boolean; doc: string }>();
for (const m of doc.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| (yes|no) \| (.*) \|$/gm)) rows.set(m[1]!, { status: Number(m[2]), retry: m[3] === 'yes', doc: m[4]! });

/**
 * Every code ever published, in the order it was added. A code is never renamed or removed: add
 * new ones at the end (and to the catalogue, docs/errors.md and the count below).
 */
const PUBLISHED: Array<[code: string, status: number]> = [
  ['api_key_required', 401],
  ['invalid_api_key', 401],
  ['api_key_revoked', 401],
  ['api_key_inactive', 401],
  ['api_key_expired', 401],
  ['insufficient_scope', 403],
  ['subscription_inactive', 402],
  ['insufficient_credits', 402],
  ['rate_limited', 429],
  ['invalid_json', 400],
  ['payload_too_large', 413],
  ['unsupported_media_type', 415],
  ['invalid_request', 400],
  ['email_required', 400],
  ['invalid_email_type', 400],
  ['emails_required', 400],
  ['too_many_emails', 400],
  ['route_not_found', 404],
  ['invalid_idempotency_key', 400],
  ['idempotency_key_conflict', 409],
  ['idempotency_request_in_progress', 409],
  ['job_not_found', 404],
  ['invalid_job_state', 409],
  ['validation_upstream_failed', 503],
  ['control_plane_route_misconfigured', 500],
  ['service_unavailable', 503],
  ['internal_error', 500],
  ['not_ready', 503],
  ['headers_too_large', 431],
  ['http_version_not_supported', 505],
  ['request_timeout', 408],
  ['invalid_emails', 400],
  ['invalid_signature', 403],
  ['upload_missing', 409],
  ['email_column_not_found', 400],
  ['invalid_csv', 400],
  ['invalid_webhook_url', 400],
  ['missing_outcomes', 400],
  ['too_many_outcomes', 400],
  ['outcome_import_failed', 503],
  ['outcome_suppression_failed', 503],
  ['invalid_outcome_query', 400],
  ['connector_unavailable', 403],
  ['connector_not_found', 404],
  ['connector_status_failed', 503],
  ['connector_create_failed', 503],
  ['connector_revoke_failed', 503],
  ['invalid_connector_secret', 404],
  ['subscription_not_found', 404],
  ['subscription_already_canceling', 409],
  ['subscription_not_canceling', 409],
  ['payment_processor_unavailable', 503],
  ['invalid_webhook_signature', 400],
  ['mcp_token_not_accepted', 401],
  ['api_key_not_accepted', 401],
  ['invalid_access_token', 401],
  ['access_token_expired', 401],
  ['product_not_enabled', 403],
  ['feature_not_configured', 503],
  ['provider_unavailable', 503],
  ['domain_required', 400],
  ['companies_required', 400],
  ['too_many_companies', 400],
  ['email_or_linkedin_url_required', 400],
  ['first_name_required', 400],
  ['role_required', 400],
  ['company_linkedin_url_required', 400],
  ['contact_identity_required', 400],
  ['contacts_required', 400],
  ['too_many_contacts', 400],
  ['invalid_limit', 400],
  ['invalid_days_back', 400],
  ['invalid_max_concurrent', 400],
  ['invalid_linkedin_url', 400],
  ['invalid_domain', 400],
  ['domain_or_linkedin_url_required', 400],
  ['company_domain_required', 400],
  ['company_name_required', 400],
  ['not_signed_in', 401],
  ['invalid_credentials', 401],
  ['sign_in_throttled', 429],
  ['csrf_token_invalid', 403],
  ['owner_role_required', 403],
  ['operator_required', 403],
  ['sign_in_link_not_found', 404],
  ['sign_in_link_used', 409],
  ['sign_in_link_expired', 409],
  ['email_taken', 409],
  ['invalid_password', 400],
  ['key_not_found', 404],
  ['key_revoked', 409],
  ['key_expired', 409],
  ['user_not_found', 404],
  ['last_owner', 409],
  ['oauth_grant_not_found', 404],
  ['account_not_found', 404],
  ['plan_not_found', 404],
  ['subscription_exists', 409],
  ['subscription_not_local', 409],
];

t.test('the catalogue keeps every published code with its status (append-only), and no more than the pin', async (t) => {
  for (const [code, status] of PUBLISHED) {
    t.ok(isErrorCode(code), `${code} still exists`);
    t.equal(ERRORS[code as keyof typeof ERRORS]?.status, status, `${code} keeps its status`);
  }
  t.equal(ERROR_CODES.length, 99, 'the number of codes (a new code updates this pin and the list above)');
  t.strictSame(ERROR_CODES, PUBLISHED.map(([c]) => c), 'new codes are added at the end, in the published order');
});

t.test('every code is documented with the same status, retry class and text', async (t) => {
  for (const [code, spec] of Object.entries(ERRORS)) {
    const row = rows.get(code);
    t.ok(row, `${code} has a line in docs/errors.md`);
    if (row) t.strictSame(row, { status: spec.status, retry: spec.retry, doc: spec.doc }, code);
  }
});

t.test('the document lists no code the service lacks', async (t) => {
  for (const code of rows.keys()) t.ok(code in ERRORS, code);
  t.equal(rows.size, Object.keys(ERRORS).length);
});

t.test('the codes every route relies on exist with their statuses', async (t) => {
  const named: Record<string, number> = {
    insufficient_credits: 402,
    validation_upstream_failed: 503,
    idempotency_key_conflict: 409,
    idempotency_request_in_progress: 409,
    control_plane_route_misconfigured: 500,
    job_not_found: 404,
    invalid_job_state: 409,
    api_key_expired: 401,
    api_key_inactive: 401,
    api_key_revoked: 401,
    invalid_json: 400,
    payload_too_large: 413,
  };
  for (const [code, status] of Object.entries(named)) t.equal(ERRORS[code as keyof typeof ERRORS]?.status, status, code);
});

t.test('retry classes follow the retry rule of docs/errors.md', async (t) => {
  for (const [code, spec] of Object.entries(ERRORS)) {
    const shouldRetry = spec.status === 429 || spec.status >= 500 ? code !== 'control_plane_route_misconfigured' && code !== 'feature_not_configured' && spec.status !== 505 : code === 'idempotency_request_in_progress' || code === 'request_timeout';
    t.equal(spec.retry, shouldRetry, code);
  }
});

t.test('a ServiceError renders the catalogue body', async (t) => {
  const e = new ServiceError('insufficient_credits', 'This request needs up to 3 credits; 1 available', { required: 3, available: 1 });
  t.equal(e.status, 402);
  t.strictSame(e.body(), { error: 'Payment Required', message: 'This request needs up to 3 credits; 1 available', code: 'insufficient_credits', required: 3, available: 1 });
  t.strictSame(new ServiceError('rate_limited').body(), { error: 'Too Many Requests', message: 'You have exceeded the rate limit', code: 'rate_limited' });
});

t.test('docs/decisions lists exactly the reason codes and charge reasons, each explained', async (t) => {
  const row = (title: string): string[] => {
    // A decision is a `### title` heading, the decision's text, then its `*Why:*` paragraph.
    const at = decisions.indexOf(`\n### ${title}\n`);
    t.ok(at >= 0, `docs/decisions has the decision "${title}"`);
    const rest = at < 0 ? '' : decisions.slice(at + title.length + 6);
    const cell = rest.slice(0, rest.search(/\n\*Why:\*|\n#/));
    // Every backticked word in the decision but the field names.
    return [...cell.matchAll(/`([a-z0-9_]+)`/g)].map((m) => m[1]!).filter((w) => !['reason', 'reason_code', 'charge_reason'].includes(w));
  };
  t.strictSame(row('Machine-readable reason').sort(), [...REASON_CODES].sort(), 'the reason_code row lists every code, and no other');
  t.strictSame(row('`charge_reason` values').sort(), [...CHARGE_REASONS].sort(), 'the charge_reason row lists every reason, and no other');
  // And each is explained where it is decided (a row of its own, or the row of its verdict).
  const quoted = new Set([...decisions.matchAll(/`([a-z0-9_]+)`/g)].map((m) => m[1]!));
  for (const code of [...REASON_CODES, ...CHARGE_REASONS]) t.ok(quoted.has(code), `${code} is in docs/decisions`);
});
