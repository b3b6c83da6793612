// The client's retry rule (docs/errors.md) against a fault-injecting local server: every status and
// code, as a table, with the number of attempts, the Idempotency-Key of every attempt, and the
// request id the error keeps (the last answer's; none after a network-only failure). Then the
// deadline, the per-attempt timeout, the back-off bounds, the caller's signal, which methods
// send a key, and the exact bodies of the data calls.

import t from 'tap';
import { ERRORS, type ErrorSpec } from '@svc/contracts';
import { backoffDelay, isRetryable, retryAfterHeader, SvcApiError, SvcClient, SvcNetworkError, type ClientOptions, type RetryEvent, type WriteOptions } from '../src/index.ts';
import { fail, requestIdOf, startFaultServer, type Step } from '../../../test/helpers/fault-server.ts';

const server = await startFaultServer();
t.teardown(() => server.close());

const OK: Step = { status: 200, body: { email: 'jane.doe@accept.test', result: 'valid' } };

/** A client of the fault server with a tiny back-off (the waits are tested apart). */
function client(options: Partial<ClientOptions> = {}): SvcClient {
  return new SvcClient({ apiKey: 'svc_test_faultServerKey000000001', baseUrl: server.url, backoff: { baseMs: 1, capMs: 4 }, ...options });
}

/** Runs a call; answers its result or the error it threw. */
async function settle<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await p };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Every data call: its route, the exact JSON it sends, and the call (docs/api.md "Data endpoints"). */
const DATA_CALLS: Array<[string, string, (c: SvcClient, o: WriteOptions) => Promise<unknown>]> = [
  ['POST /v1/company/enrich', '{"domain":"acme-robotics.test","company_name":"Acme Robotics","force_refresh":true}', (c, o) => c.enrichCompany('acme-robotics.test', { ...o, companyName: 'Acme Robotics', forceRefresh: true })],
  ['POST /v1/company/enrich/bulk', '{"companies":[{"domain":"acme-robotics.test"},{"domain":"globex-meta.test","force_refresh":true}],"max_concurrent":3}', (c, o) => c.enrichCompanies(['acme-robotics.test', { domain: 'globex-meta.test', force_refresh: true }], { ...o, maxConcurrent: 3 })],
  ['POST /v1/company/enrich-linkedin', '{"company_linkedin_url":"https://www.linkedin.com/company/acme-robotics"}', (c, o) => c.companyByLinkedIn('https://www.linkedin.com/company/acme-robotics', o)],
  ['POST /v1/company/domain-to-linkedin', '{"domain":"acme-robotics.test"}', (c, o) => c.domainToLinkedIn('acme-robotics.test', o)],
  ['POST /v1/linkedin/company', '{"linkedin_url":"https://www.linkedin.com/company/acme-robotics"}', (c, o) => c.linkedInCompany({ linkedinUrl: 'https://www.linkedin.com/company/acme-robotics' }, o)],
  ['POST /v1/linkedin/hires', '{"domain":"acme-robotics.test","days_back":30,"limit":5}', (c, o) => c.linkedInHires({ domain: 'acme-robotics.test', daysBack: 30, limit: 5 }, o)],
  ['POST /v1/people/search', '{"domain":"acme-robotics.test","title_keywords":["sales"],"department":"Sales","seniority":["VP","Director"],"limit":5,"offset":10}', (c, o) => c.searchPeople({ domain: 'acme-robotics.test', titleKeywords: ['sales'], department: 'Sales', seniority: ['VP', 'Director'], limit: 5, offset: 10 }, o)],
  ['POST /v1/people/lookup', '{"first_name":"Jane","last_name":"Doe","company_domain":"acme-robotics.test","title":"VP Sales","location":"Austin","enrich_profile":true}', (c, o) => c.lookupPerson({ firstName: 'Jane', lastName: 'Doe', companyDomain: 'acme-robotics.test', title: 'VP Sales', location: 'Austin', enrichProfile: true }, o)],
  ['POST /v1/people/role', '{"role":"CFO","company_name":"Acme Robotics"}', (c, o) => c.lookupRole({ role: 'CFO', companyName: 'Acme Robotics' }, o)],
  ['POST /v1/profile/enrich', '{"email":"jane.doe@acme-robotics.test"}', (c, o) => c.enrichProfile({ email: 'jane.doe@acme-robotics.test' }, o)],
  ['POST /v1/mobile/find', '{"linkedin_url":"https://www.linkedin.com/in/jane-doe","first_name":"Jane","last_name":"Doe","company":"Acme Robotics","domain":"acme-robotics.test"}', (c, o) => c.findMobile({ linkedinUrl: 'https://www.linkedin.com/in/jane-doe', firstName: 'Jane', lastName: 'Doe', company: 'Acme Robotics', domain: 'acme-robotics.test' }, o)],
  ['POST /v1/prospect/email-to-person', '{"email":"jane.doe@acme-robotics.test"}', (c, o) => c.emailToPerson('jane.doe@acme-robotics.test', o)],
  ['POST /v1/find/bulk', '{"contacts":[{"id":"crm-1","first_name":"Jane","last_name":"Doe","domain":"accept.test"},{"first_name":"Maria","last_name":"Garcia","company":"People Co"}],"validate":true,"max_concurrent":2}', (c, o) => c.findEmails([{ id: 'crm-1', first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' }, { first_name: 'Maria', last_name: 'Garcia', company: 'People Co' }], { ...o, validate: true, maxConcurrent: 2 })],
];

const keysSent = (): Array<string | undefined> => server.received.map((r) => r.headers['idempotency-key'] as string | undefined);

t.test('the retry sequence: a dropped connection, 503, 429 with retry_after, in progress, then success', async (t) => {
  server.script(['drop', fail(503, 'service_unavailable'), fail(429, 'rate_limited', { retry_after: 1 }, { 'Retry-After': '1' }), fail(409, 'idempotency_request_in_progress'), OK]);
  const retries: RetryEvent[] = [];
  const t0 = Date.now();
  const r = await settle(client({ onRetry: (e) => retries.push(e) }).validate('jane.doe@accept.test'));
  const took = Date.now() - t0;
  t.strictSame(r, { ok: true, value: OK.body }, 'the fifth attempt answers');
  t.equal(server.received.length, 5, 'five attempts');
  const keys = keysSent();
  t.match(keys[0], /^svc-[0-9a-f-]{36}$/, 'an Idempotency-Key was made');
  t.strictSame(keys, Array(5).fill(keys[0]), 'the same Idempotency-Key on every attempt');
  t.strictSame(server.received.map((x) => x.body), Array(5).fill('{"email":"jane.doe@accept.test"}'), 'the same body on every attempt');
  t.strictSame(
    retries.map((e) => [e.attempt, e.error instanceof SvcApiError ? e.error.code : (e.error as SvcNetworkError).kind]),
    [
      [1, 'network'],
      [2, 'service_unavailable'],
      [3, 'rate_limited'],
      [4, 'idempotency_request_in_progress'],
    ],
    'each failure was retried',
  );
  t.equal(retries[2]!.delayMs, 1000, 'the 429 waited its retry_after (1 s)');
  t.ok(took >= 1000 && took < 3000, `the whole call took the retry_after and little more (${took} ms)`);
  t.ok(server.received[3]!.at - server.received[2]!.at >= 1000, 'the attempt after the 429 came a second later');
});

// Every status and code of the rule: [what, script, attempts made, the outcome]. maxAttempts 3.
interface Row {
  name: string;
  script: Step[];
  attempts: number;
  /** `ok`, or the error: status and code (an API error) or the network error's kind. */
  outcome: 'ok' | { status: number; code: string | undefined } | { network: 'network' | 'timeout' };
}
const TABLE: Row[] = [
  { name: 'dropped connections, then success', script: ['drop', 'drop', OK], attempts: 3, outcome: 'ok' },
  { name: 'dropped connections every time: a network-only failure', script: ['drop'], attempts: 3, outcome: { network: 'network' } },
  { name: '503 service_unavailable twice, then success', script: [fail(503, 'service_unavailable'), fail(503, 'service_unavailable'), OK], attempts: 3, outcome: 'ok' },
  { name: '503 validation_upstream_failed every time', script: [fail(503, 'validation_upstream_failed')], attempts: 3, outcome: { status: 503, code: 'validation_upstream_failed' } },
  { name: '500 internal_error every time', script: [fail(500, 'internal_error')], attempts: 3, outcome: { status: 500, code: 'internal_error' } },
  { name: '503 with a code this client does not know (a future one)', script: [fail(503, 'quantum_flux_unavailable'), OK], attempts: 2, outcome: 'ok' },
  { name: '599 (an unknown status) with an unknown code', script: [fail(599, 'brand_new_code')], attempts: 3, outcome: { status: 599, code: 'brand_new_code' } },
  { name: '502 from a proxy (HTML, no code)', script: [{ status: 502, raw: '<html>Bad Gateway</html>', headers: { 'Content-Type': 'text/html' } }, OK], attempts: 2, outcome: 'ok' },
  { name: '504 without a body', script: [{ status: 504 }], attempts: 3, outcome: { status: 504, code: undefined } },
  { name: '429 rate_limited (retry_after 0), then success', script: [fail(429, 'rate_limited', { retry_after: 0 }), OK], attempts: 2, outcome: 'ok' },
  { name: '429 without a code', script: [{ status: 429, raw: 'slow down' }, OK], attempts: 2, outcome: 'ok' },
  { name: '408 request_timeout, then success', script: [fail(408, 'request_timeout'), OK], attempts: 2, outcome: 'ok' },
  { name: '409 idempotency_request_in_progress every time', script: [fail(409, 'idempotency_request_in_progress')], attempts: 3, outcome: { status: 409, code: 'idempotency_request_in_progress' } },
  { name: '409 idempotency_key_conflict: not retried', script: [fail(409, 'idempotency_key_conflict'), OK], attempts: 1, outcome: { status: 409, code: 'idempotency_key_conflict' } },
  { name: '500 control_plane_route_misconfigured: not retried', script: [fail(500, 'control_plane_route_misconfigured'), OK], attempts: 1, outcome: { status: 500, code: 'control_plane_route_misconfigured' } },
  { name: '505 http_version_not_supported: not retried', script: [fail(505, 'http_version_not_supported'), OK], attempts: 1, outcome: { status: 505, code: 'http_version_not_supported' } },
  { name: '400 email_required: not retried', script: [fail(400, 'email_required'), OK], attempts: 1, outcome: { status: 400, code: 'email_required' } },
  { name: '400 invalid_json: not retried', script: [fail(400, 'invalid_json'), OK], attempts: 1, outcome: { status: 400, code: 'invalid_json' } },
  { name: '400 without a code: not retried', script: [{ status: 400, raw: 'bad' }, OK], attempts: 1, outcome: { status: 400, code: undefined } },
  { name: '401 invalid_api_key: not retried', script: [fail(401, 'invalid_api_key'), OK], attempts: 1, outcome: { status: 401, code: 'invalid_api_key' } },
  { name: '401 api_key_revoked: not retried', script: [fail(401, 'api_key_revoked'), OK], attempts: 1, outcome: { status: 401, code: 'api_key_revoked' } },
  { name: '402 insufficient_credits: not retried', script: [fail(402, 'insufficient_credits', { required: 3, available: 1 }), OK], attempts: 1, outcome: { status: 402, code: 'insufficient_credits' } },
  { name: '402 subscription_inactive: not retried', script: [fail(402, 'subscription_inactive'), OK], attempts: 1, outcome: { status: 402, code: 'subscription_inactive' } },
  { name: '403 insufficient_scope: not retried', script: [fail(403, 'insufficient_scope', { required_scope: 'email:validate:single' }), OK], attempts: 1, outcome: { status: 403, code: 'insufficient_scope' } },
  { name: '403 without a code (an entitlement gate): not retried', script: [{ status: 403, body: { error: 'Forbidden', message: 'no' } }, OK], attempts: 1, outcome: { status: 403, code: undefined } },
  { name: '404 job_not_found: not retried', script: [fail(404, 'job_not_found'), OK], attempts: 1, outcome: { status: 404, code: 'job_not_found' } },
  { name: '413 payload_too_large: not retried', script: [fail(413, 'payload_too_large'), OK], attempts: 1, outcome: { status: 413, code: 'payload_too_large' } },
  { name: 'a 4xx code this client does not know: not retried', script: [fail(422, 'brand_new_input_error'), OK], attempts: 1, outcome: { status: 422, code: 'brand_new_input_error' } },
  { name: 'dropped, then 503, then dropped: the last failure is network-only', script: ['drop', fail(503, 'service_unavailable'), 'drop'], attempts: 3, outcome: { network: 'network' } },
  { name: 'dropped twice, then 503: the error keeps the last answer', script: ['drop', 'drop', fail(503, 'service_unavailable')], attempts: 3, outcome: { status: 503, code: 'service_unavailable' } },
];

t.test('the retry table: attempts, one Idempotency-Key, the request id of the last answer', async (t) => {
  for (const row of TABLE) {
    server.script(row.script);
    const r = await settle(client({ maxAttempts: 3 }).validate('jane.doe@accept.test'));
    t.equal(server.received.length, row.attempts, `${row.name}: ${row.attempts} attempt(s)`);
    const keys = keysSent();
    t.ok(keys[0] !== undefined && keys.every((k) => k === keys[0]), `${row.name}: the same Idempotency-Key on every attempt`);
    if (row.outcome === 'ok') {
      t.ok(r.ok, `${row.name}: answered`);
      continue;
    }
    t.notOk(r.ok, `${row.name}: failed`);
    if (r.ok) continue;
    const err = r.error;
    if ('network' in row.outcome) {
      t.ok(err instanceof SvcNetworkError, `${row.name}: a SvcNetworkError`);
      if (!(err instanceof SvcNetworkError)) continue;
      t.strictSame([err.kind, err.requestId, err.attempts, err.isRetryable], [row.outcome.network, undefined, row.attempts, true], `${row.name}: kind, no request id, attempts`);
    } else {
      t.ok(err instanceof SvcApiError, `${row.name}: a SvcApiError`);
      if (!(err instanceof SvcApiError)) continue;
      t.strictSame([err.status, err.code, err.attempts], [row.outcome.status, row.outcome.code, row.attempts], `${row.name}: status, code, attempts`);
      t.equal(err.requestId, requestIdOf(row.attempts), `${row.name}: the request id of the last answer`);
      t.equal(err.isRetryable, row.attempts > 1, `${row.name}: isRetryable`);
    }
  }
});

t.test('the error carries the fields of the error body (docs/errors.md)', async (t) => {
  server.script([fail(402, 'insufficient_credits', { required: 3, available: 1 })]);
  const credits = await settle(client().createJob(['a@accept.test', 'b@accept.test', 'c@accept.test']));
  t.match(credits, { ok: false, error: { name: 'SvcApiError', status: 402, code: 'insufficient_credits', required: 3, available: 1, message: 'the insufficient_credits message', requestId: requestIdOf(1), method: 'POST', path: '/v1/validate/batch' } });
  server.script([fail(403, 'insufficient_scope', { required_scope: 'credits:read' })]);
  t.match(await settle(client().getCredits()), { ok: false, error: { status: 403, code: 'insufficient_scope', requiredScope: 'credits:read', retryAfter: undefined } });
  server.script([fail(429, 'rate_limited', { retry_after: 60 }, { 'Retry-After': '60' })]);
  t.match(await settle(client().getCredits()), { ok: false, error: { status: 429, code: 'rate_limited', retryAfter: 60, attempts: 1 } }, 'a 60 s wait does not fit the default deadline minus… it gives up at once');
  server.script([{ status: 429, body: { error: 'Too Many Requests', message: 'slow down', code: 'rate_limited' }, headers: { 'Retry-After': '7' } }]);
  t.match(await settle(client({ maxAttempts: 1 }).getCredits()), { ok: false, error: { retryAfter: 7 } }, 'Retry-After when the body has no retry_after');
  t.equal(retryAfterHeader('Wed, 21 Oct 2015 07:28:10 GMT', Date.parse('Wed, 21 Oct 2015 07:28:00 GMT')), 10, 'an HTTP-date Retry-After');
  t.equal(retryAfterHeader('soon'), undefined, 'a malformed Retry-After is ignored');
});

t.test('every code of the catalogue is retried exactly when it says (docs/errors.md retry column)', async (t) => {
  const codes = Object.entries(ERRORS) as Array<[string, ErrorSpec]>;
  t.ok(codes.length >= 57, `the catalogue's ${codes.length} codes`);
  for (const [code, spec] of codes) {
    t.equal(isRetryable(spec.status, code), spec.retry, `isRetryable(${spec.status}, ${code}) = ${spec.retry}`);
    server.script([fail(spec.status, code), OK]);
    const r = await settle(client().getCredits());
    t.strictSame([r.ok, server.received.length], spec.retry ? [true, 2] : [false, 1], `${spec.status} ${code}: ${spec.retry ? 'retried once, then answered' : 'not retried'}`);
  }
});

t.test('the deadline bounds the whole call', async (t) => {
  // 503 for ever, 150-250 ms apart: a 1 s deadline leaves room for a handful of attempts, never 20.
  server.script([fail(503, 'service_unavailable')]);
  const t0 = Date.now();
  const r = await settle(client({ maxAttempts: 20, deadlineMs: 1000, backoff: { baseMs: 250, capMs: 250 }, random: () => 0.6 }).getCredits());
  const took = Date.now() - t0;
  t.match(r, { ok: false, error: { status: 503, code: 'service_unavailable' } });
  const attempts = server.received.length;
  t.ok(attempts >= 4 && attempts <= 7, `attempts stop at the deadline (${attempts}, 150 ms apart)`);
  t.ok(took < 1100, `no attempt or wait starts past the deadline (${took} ms)`);
  t.equal((r as { error: SvcApiError }).error.attempts, attempts, 'the error counts them');

  // A 429 asking for longer than the deadline leaves: it does not wait 60 s.
  server.script([fail(429, 'rate_limited', { retry_after: 60 }), OK]);
  const t1 = Date.now();
  const r429 = await settle(client({ deadlineMs: 5000 }).getCredits());
  t.match(r429, { ok: false, error: { status: 429, retryAfter: 60, attempts: 1 } }, 'the 429 is the answer');
  t.ok(Date.now() - t1 < 1000, 'at once');
  t.equal(server.received.length, 1, 'one attempt');
});

t.test('the per-attempt timeout: a hung server is a timeout, retried, without a request id', async (t) => {
  server.script(['hang']);
  const t0 = Date.now();
  const r = await settle(client({ timeoutMs: 200, maxAttempts: 2 }).validate('jane.doe@accept.test'));
  const took = Date.now() - t0;
  t.match(r, { ok: false, error: { name: 'SvcNetworkError', kind: 'timeout', attempts: 2, requestId: undefined, isRetryable: true } });
  t.equal(server.received.length, 2, 'two attempts');
  t.ok(took >= 400 && took < 1500, `two timeouts of 200 ms (${took} ms)`);
  const keys = keysSent();
  t.ok(keys[0] !== undefined && keys[0] === keys[1], 'the same key on both');

  // The deadline cuts an attempt short: a 300 ms deadline with a 30 s attempt timeout.
  server.script(['hang']);
  const t1 = Date.now();
  const cut = await settle(client({ deadlineMs: 300 }).getCredits());
  t.match(cut, { ok: false, error: { name: 'SvcNetworkError', kind: 'timeout' } });
  t.ok(Date.now() - t1 < 1000, `the deadline ended the hung attempt (${Date.now() - t1} ms)`);
});

t.test('back-off: full jitter under min(cap, base·2^(n-1))', async (t) => {
  const top = () => 0.999999;
  t.strictSame([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, top, { baseMs: 100, capMs: 1000 })), [99, 199, 399, 799, 999, 999], 'the ceilings double up to the cap');
  t.strictSame([1, 2, 3].map((n) => backoffDelay(n, () => 0, { baseMs: 100, capMs: 1000 })), [0, 0, 0], 'the floor is 0');
  t.strictSame([1, 2, 3, 4, 5, 6, 7].map((n) => backoffDelay(n, top)), [249, 499, 999, 1999, 3999, 7999, 7999], 'the defaults: 250 ms doubling to 8 s');
  for (let i = 0; i < 1000; i++) {
    const n = 1 + (i % 8);
    const d = backoffDelay(n, Math.random, { baseMs: 100, capMs: 1000 });
    if (!(d >= 0 && d < Math.min(1000, 100 * 2 ** (n - 1)))) t.fail(`delay ${d} out of bounds for retry ${n}`);
  }
  // Through the client: the waits it announces are the jittered ones, and it really waits them.
  server.script([fail(503, 'service_unavailable'), fail(503, 'service_unavailable'), fail(503, 'service_unavailable'), OK]);
  const waits: number[] = [];
  const r = await settle(client({ backoff: { baseMs: 40, capMs: 100 }, random: () => 0.5, onRetry: (e) => waits.push(e.delayMs) }).getCredits());
  t.ok(r.ok, 'answered on the fourth attempt');
  t.strictSame(waits, [20, 40, 50], 'half of 40, 80, then the 100 ms cap');
  const gaps = server.received.slice(1).map((x, i) => x.at - server.received[i]!.at);
  t.ok(gaps.every((g, i) => g >= waits[i]! - 2), `the attempts are at least that far apart (${gaps.join(', ')} ms)`);
});

t.test("the caller's signal ends the call, without a retry", async (t) => {
  server.script([fail(503, 'service_unavailable')]);
  const controller = new AbortController();
  const p = settle(client({ backoff: { baseMs: 5000, capMs: 5000 }, random: () => 0.99 }).getCredits({ signal: controller.signal }));
  setTimeout(() => controller.abort(new Error('stopped by the caller')), 100);
  const r = await p;
  t.match(r, { ok: false, error: { message: 'stopped by the caller' } }, 'the reason is thrown');
  t.equal(server.received.length, 1, 'no second attempt');
});

t.test('Idempotency-Key: on every write, the same on every retry of one call, a new one per call, the caller’s when given; never on reads', async (t) => {
  const c = client();
  const writes: Array<[string, (key?: string) => Promise<unknown>]> = [
    ['POST /v1/validate', (k) => c.validate('jane.doe@accept.test', k ? { idempotencyKey: k } : {})],
    ['POST /v1/validate/bulk', (k) => c.validateBulk(['jane.doe@accept.test'], k ? { idempotencyKey: k } : {})],
    ['POST /v1/validate/batch', (k) => c.createJob(['jane.doe@accept.test'], k ? { idempotencyKey: k } : {})],
    ['POST /v1/csv/prepare-upload', (k) => c.prepareUpload('leads.csv', k ? { idempotencyKey: k } : {})],
    ['POST /v1/csv/start-processing', (k) => c.startProcessing('job_1', 'email', k ? { idempotencyKey: k } : {})],
    ['POST /v1/csv/jobs/job_1/recover-catchalls', (k) => c.recoverCatchalls('job_1', k ? { idempotencyKey: k } : {})],
    ...DATA_CALLS.map(([route, , call]): [string, (key?: string) => Promise<unknown>] => [route, (k) => call(c, k ? { idempotencyKey: k } : {})]),
    ['POST /v1/outcomes/email/import', (k) => c.importOutcomes([{ email: 'jane.doe@accept.test', outcome: 'delivered' }], k ? { idempotencyKey: k } : {})],
    ['POST /v1/outcomes/email/import', (k) => c.importOutcomes({ csv: 'email,outcome\njane.doe@accept.test,delivered\n' }, k ? { idempotencyKey: k } : {})],
  ];
  for (const [route, call] of writes) {
    server.script([fail(503, 'service_unavailable'), { status: 200, body: {} }, fail(503, 'service_unavailable'), { status: 200, body: {} }, { status: 200, body: {} }]);
    await call();
    await call();
    await call('lead-4711-durable');
    const keys = keysSent();
    t.equal(`${server.received[0]!.method} ${server.received[0]!.url}`, route, `${route}: the route`);
    t.ok(keys[0] !== undefined && keys[0] === keys[1], `${route}: the retry sent the same key`);
    t.ok(keys[2] !== undefined && keys[2] === keys[3] && keys[2] !== keys[0], `${route}: the next call a new one, on both its attempts`);
    t.equal(keys[4], 'lead-4711-durable', `${route}: the caller's durable key`);
  }
  t.equal(server.received[0]!.headers['content-type'], 'text/csv', 'the CSV import is sent as text/csv');
  t.equal(server.received[0]!.body, 'email,outcome\njane.doe@accept.test,delivered\n', 'as is');

  const reads: Array<[string, () => Promise<unknown>]> = [
    ['GET /v1/credits', () => c.getCredits()],
    ['GET /v1/csv/jobs/job_1', () => c.getJob('job_1')],
    ['GET /v1/csv/jobs?limit=5&status=completed', () => c.listJobs({ limit: 5, status: 'completed' })],
    ['GET /v1/csv/jobs/job_1/download?mode=url&segment=valid%2Crisky', () => c.getDownloadUrl('job_1', { segment: ['valid', 'risky'] })],
    ['DELETE /v1/csv/jobs/job_1', () => c.cancelJob('job_1')],
  ];
  for (const [route, call] of reads) {
    server.script([fail(503, 'service_unavailable'), { status: 200, body: { jobs: [], next_cursor: null } }]);
    await call();
    t.equal(`${server.received[0]!.method} ${server.received[0]!.url}`, route, `${route}: the route`);
    t.strictSame(keysSent(), [undefined, undefined], `${route}: retried, without a key`);
    t.equal(server.received[0]!.headers['x-api-key'], 'svc_test_faultServerKey000000001', `${route}: X-API-Key`);
  }
});

t.test('the data calls: each route with its exact body (camelCase options become the API\'s fields), retried like validate', async (t) => {
  const c = client();
  for (const [route, body, call] of DATA_CALLS) {
    server.script([fail(503, 'provider_unavailable'), { status: 200, body: { found: true } }]);
    t.strictSame(await call(c, {}), { found: true }, `${route}: the answer after a retry`);
    t.strictSame(
      server.received.map((x) => [`${x.method} ${x.url}`, x.body, x.headers['content-type']]),
      Array(2).fill([route, body, 'application/json']),
      `${route}: the body, the same on the retry`,
    );
  }
  server.script([fail(503, 'feature_not_configured'), OK]);
  t.match(await settle(c.lookupRole({ role: 'CFO', companyName: 'Acme Robotics' })), { ok: false, error: { status: 503, code: 'feature_not_configured', attempts: 1 } }, 'feature_not_configured: not retried');
  server.script([OK]);
  await t.rejects(c.enrichCompanies(Array(26).fill('acme-robotics.test')), { name: 'RangeError', message: /at most 25 companies \(got 26\)/ });
  await t.rejects(c.findEmails(Array(101).fill({ first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' })), { name: 'RangeError', message: /at most 100 contacts \(got 101\)/ });
  t.equal(server.received.length, 0, 'too many: nothing sent');
});

t.test('subscriptions: POST cancel and reactivate, no body', async (t) => {
  const c = client();
  const state = { subscription_id: 'sub_1', status: 'active', cancel_at_period_end: true, current_period_end: '2026-12-01T00:00:00.000Z', message: 'canceled at the period end' };
  server.script([fail(503, 'payment_processor_unavailable'), { status: 200, body: state }]);
  t.strictSame(await c.cancelSubscription(), state, 'retried after payment_processor_unavailable');
  t.strictSame(server.received.map((x) => [x.method, x.url, x.body, x.headers['content-type'], x.headers['x-api-key']]), Array(2).fill(['POST', '/v1/subscriptions/cancel', '', undefined, 'svc_test_faultServerKey000000001']));
  server.script([fail(409, 'subscription_not_canceling')]);
  t.match(await settle(c.reactivateSubscription()), { ok: false, error: { status: 409, code: 'subscription_not_canceling', attempts: 1 } });
  t.equal(server.received[0]!.url, '/v1/subscriptions/reactivate');
});

t.test('the signed upload goes without the API key, and is retried', async (t) => {
  server.script(['drop', { status: 200, body: { batch_id: 'job_1', bytes: 6 } }]);
  const r = await client().upload(`${server.url}/v1/csv/uploads/job_1?expires=1&signature=abc`, 'email\n');
  t.strictSame(r, { batch_id: 'job_1', bytes: 6 });
  t.strictSame(server.received.map((x) => [x.method, x.url, x.headers['x-api-key'], x.headers['content-type'], x.body]), Array(2).fill(['PUT', '/v1/csv/uploads/job_1?expires=1&signature=abc', undefined, 'text/csv', 'email\n']));
});

t.test('createCsvJob derives one key per step from a durable key', async (t) => {
  server.script([
    { status: 200, body: { batch_id: 'job_7', upload_url: `${server.url}/v1/csv/uploads/job_7?signature=s`, method: 'PUT', headers: { 'Content-Type': 'text/csv' }, expires_at: '2026-01-01T00:00:00Z', max_bytes: 100 } },
    fail(409, 'invalid_job_state'), // a second run: the batch was started already
    { status: 202, body: { id: 'job_7', status: 'queued' } },
  ]);
  const job = await client().createCsvJob('email\na@accept.test\n', { emailColumn: 'email', filename: 'a.csv', idempotencyKey: 'import-2026-11-26' });
  t.match(job, { id: 'job_7', status: 'queued' });
  t.strictSame(
    server.received.map((x) => [x.method, x.url.split('?')[0], x.headers['idempotency-key']]),
    [
      ['POST', '/v1/csv/prepare-upload', 'import-2026-11-26:prepare'],
      ['PUT', '/v1/csv/uploads/job_7', undefined],
      ['POST', '/v1/csv/start-processing', 'import-2026-11-26:start'],
    ],
  );
  t.equal(server.received[2]!.body, '{"batch_id":"job_7","email_column":"email"}');
});

t.test('waitForJob polls to a final state, and gives up after its timeout; iterateJobs follows the cursor', async (t) => {
  const job = (status: string, processed: number) => ({ status: 200, body: { id: 'job_1', status, progress: { processed, total: 4, percent: processed * 25 } } });
  server.script([job('queued', 0), job('processing', 2), job('completed', 4)]);
  const seen: number[] = [];
  const done = await client().waitForJob('job_1', { intervalMs: 10, onProgress: (j) => seen.push(j.progress.processed) });
  t.strictSame([done.status, seen, server.received.length], ['completed', [0, 2, 4], 3]);
  server.script([job('processing', 1)]);
  const t0 = Date.now();
  t.match(await settle(client().waitForJob('job_1', { intervalMs: 50, timeoutMs: 200 })), { ok: false, error: { name: 'SvcNetworkError', kind: 'timeout', message: /job job_1 is still processing \(1\/4\) after 200 ms/ } });
  t.ok(Date.now() - t0 < 400, 'gave up at its timeout');

  server.script([
    { status: 200, body: { jobs: [{ id: 'job_3' }, { id: 'job_2' }], next_cursor: 'c1' } },
    { status: 200, body: { jobs: [{ id: 'job_1' }], next_cursor: null } },
  ]);
  const ids: string[] = [];
  for await (const j of client().iterateJobs({ limit: 2, status: 'completed' })) ids.push(j.id);
  t.strictSame(ids, ['job_3', 'job_2', 'job_1']);
  t.strictSame(server.received.map((x) => x.url), ['/v1/csv/jobs?limit=2&status=completed', '/v1/csv/jobs?limit=2&cursor=c1&status=completed']);
});

t.test('options are checked', async (t) => {
  t.throws(() => new SvcClient({ apiKey: '' }), { name: 'TypeError' });
  t.throws(() => new SvcClient({ apiKey: 'k', maxAttempts: 0 }), { name: 'RangeError' });
  t.throws(() => new SvcClient({ apiKey: 'k', deadlineMs: 1.5 }), { name: 'RangeError' });
  await t.rejects(client().validateBulk(Array(101).fill('a@accept.test')), { name: 'RangeError' }, 'bulk takes 100 at most');
  t.equal(new SvcClient({ apiKey: 'k' }).baseUrl, 'http://127.0.0.1:8080', 'the default base URL');
  t.equal(new SvcClient({ apiKey: 'k', baseUrl: 'https://svc.example.test/' }).baseUrl, 'https://svc.example.test', 'a trailing slash is dropped');
});
