// Every bad request gets its exact status and a stable `code` (docs/errors.md), never a 500.

import t from 'tap';
import { makeKey, startStack } from '../helpers/stack.ts';

const stack = await startStack();
t.teardown(() => stack.close());
const store = stack.store;

const single = await makeKey(stack, { scopes: ['email:validate:single'] });
const creditsOnly = await makeKey(stack, { scopes: ['credits:read'] });
const bulkOnly = await makeKey(stack, { scopes: ['email:validate:bulk'] });
const revoked = await makeKey(stack);
await store.keys.setState(revoked.id, 'revoked');
const inactive = await makeKey(stack);
await store.keys.setState(inactive.id, 'inactive');
const expired = await makeKey(stack);
await store.keys.expire(expired.id, new Date(Date.now() - 1000));
const broke = await makeKey(stack, { credits: 0 });
const canceled = await makeKey(stack, { credits: 10 });
await stack.db.query("UPDATE accounts SET subscription_status = 'canceled' WHERE id = $1", [canceled.accountId]);

const ok = { email: 'jane.doe@accept.test' };
const json = { 'content-type': 'application/json' };

interface Bad {
  name: string;
  method?: string;
  route?: string;
  key?: string | null;
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
  status: number;
  code: string;
  extra?: Record<string, unknown>;
}

const bad: Bad[] = [
  { name: 'missing key', key: null, body: ok, status: 401, code: 'api_key_required', extra: { message: 'X-API-Key header is required' } },
  { name: 'empty key header', key: '', body: ok, status: 401, code: 'api_key_required' },
  { name: 'unknown key', key: 'svc_live_NotARealKeyAtAll000000000000', body: ok, status: 401, code: 'invalid_api_key', extra: { message: 'Invalid API key' } },
  { name: 'key without the svc_ prefix', key: 'hello-world-key', body: ok, status: 401, code: 'invalid_api_key' },
  { name: 'absurdly long key', key: `svc_live_${'x'.repeat(400)}`, body: ok, status: 401, code: 'invalid_api_key' },
  { name: 'revoked key', key: revoked.key, body: ok, status: 401, code: 'api_key_revoked', extra: { message: 'API key has been revoked' } },
  { name: 'inactive key', key: inactive.key, body: ok, status: 401, code: 'api_key_inactive' },
  { name: 'expired key', key: expired.key, body: ok, status: 401, code: 'api_key_expired' },
  { name: 'single validation without its scope', key: creditsOnly.key, body: ok, status: 403, code: 'insufficient_scope', extra: { required_scope: 'email:validate:single' } },
  { name: 'single validation with only the bulk scope', key: bulkOnly.key, body: ok, status: 403, code: 'insufficient_scope', extra: { required_scope: 'email:validate:single' } },
  { name: 'bulk validation without its scope', route: '/v1/validate/bulk', key: single.key, body: { emails: ['a@accept.test'] }, status: 403, code: 'insufficient_scope', extra: { required_scope: 'email:validate:bulk' } },
  { name: 'credits without its scope', method: 'GET', route: '/v1/credits', key: single.key, status: 403, code: 'insufficient_scope', extra: { required_scope: 'credits:read' } },
  { name: 'malformed JSON', raw: '{"email": ', headers: json, status: 400, code: 'invalid_json' },
  { name: 'JSON with a trailing comma', raw: '{"email": "a@b.test",}', headers: json, status: 400, code: 'invalid_json' },
  { name: 'empty body with a JSON content type', raw: '', headers: json, status: 400, code: 'invalid_json' },
  { name: 'missing email', body: {}, status: 400, code: 'email_required' },
  { name: 'other field but no email', body: { mail: 'a@b.test' }, status: 400, code: 'email_required' },
  { name: 'empty email', body: { email: '' }, status: 400, code: 'email_required' },
  { name: 'whitespace-only email', body: { email: '   ' }, status: 400, code: 'email_required' },
  { name: 'numeric email', body: { email: 123 }, status: 400, code: 'invalid_email_type' },
  { name: 'null email', body: { email: null }, status: 400, code: 'invalid_email_type' },
  { name: 'array email', body: { email: ['a@b.test'] }, status: 400, code: 'invalid_email_type' },
  { name: 'object email', body: { email: { a: 1 } }, status: 400, code: 'invalid_email_type' },
  { name: 'body is a JSON array', raw: '["a@b.test"]', headers: json, status: 400, code: 'invalid_request' },
  { name: 'body is a JSON string', raw: '"a@b.test"', headers: json, status: 400, code: 'invalid_request' },
  { name: 'body is JSON null', raw: 'null', headers: json, status: 400, code: 'invalid_request' },
  { name: 'bulk: zero emails', route: '/v1/validate/bulk', body: { emails: [] }, status: 400, code: 'emails_required' },
  { name: 'bulk: 101 emails', route: '/v1/validate/bulk', body: { emails: Array.from({ length: 101 }, (_, i) => `u${i}@accept.test`) }, status: 400, code: 'too_many_emails' },
  { name: 'bulk: missing emails', route: '/v1/validate/bulk', body: { email: 'a@accept.test' }, status: 400, code: 'emails_required' },
  { name: 'bulk: emails is a string', route: '/v1/validate/bulk', body: { emails: 'a@accept.test' }, status: 400, code: 'invalid_request' },
  { name: 'bulk: a non-string email', route: '/v1/validate/bulk', body: { emails: ['a@accept.test', 7] }, status: 400, code: 'invalid_email_type' },
  { name: 'body over the limit', raw: JSON.stringify({ email: 'a@b.test', pad: 'x'.repeat(1_100_000) }), headers: json, status: 413, code: 'payload_too_large' },
  { name: 'text/plain content type', raw: 'jane.doe@accept.test', headers: { 'content-type': 'text/plain' }, status: 415, code: 'unsupported_media_type' },
  { name: 'form content type', raw: 'email=jane.doe%40accept.test', headers: { 'content-type': 'application/x-www-form-urlencoded' }, status: 415, code: 'unsupported_media_type' },
  { name: 'idempotency key too long', body: ok, headers: { 'idempotency-key': 'k'.repeat(256) }, status: 400, code: 'invalid_idempotency_key' },
  { name: 'empty idempotency key', body: ok, headers: { 'idempotency-key': '' }, status: 400, code: 'invalid_idempotency_key' },
  { name: 'unknown route', route: '/v1/nope', body: ok, status: 404, code: 'route_not_found' },
  { name: 'wrong method on a route', method: 'GET', route: '/v1/validate', status: 404, code: 'route_not_found' },
  { name: 'no credits left', key: broke.key, body: ok, status: 402, code: 'insufficient_credits', extra: { required: 1, available: 0 } },
  { name: 'bulk needing more credits than available', route: '/v1/validate/bulk', key: broke.key, body: { emails: ['a@accept.test', 'b@accept.test', 'not-an-address'] }, status: 402, code: 'insufficient_credits', extra: { required: 2, available: 0 } },
  { name: 'subscription ended', key: canceled.key, body: ok, status: 402, code: 'subscription_inactive' },
];

t.ok(bad.length >= 30, `${bad.length} bad requests in the table`);

for (const b of bad) {
  t.test(b.name, async (t) => {
    const opts: Parameters<typeof stack.call>[2] = { key: b.key === undefined ? stack.env.SVC_BOOTSTRAP_API_KEY! : b.key };
    if (b.raw !== undefined) opts.raw = b.raw;
    else if (b.body !== undefined) opts.body = b.body;
    if (b.headers) opts.headers = b.headers;
    const res = await stack.call(b.method ?? 'POST', b.route ?? '/v1/validate', opts);
    t.equal(res.status, b.status, 'status');
    t.equal(res.body.code, b.code, 'code');
    t.equal(typeof res.body.error, 'string', 'error');
    t.equal(typeof res.body.message, 'string', 'message');
    t.match(res.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/, 'X-Request-ID');
    for (const [k, v] of Object.entries(b.extra ?? {})) t.equal(res.body[k], v, k);
  });
}

t.test('a rejected request charges nothing and holds nothing', async (t) => {
  const b = await store.ledger.balance(broke.accountId);
  t.same({ balance: b!.balance, reserved: b!.reserved }, { balance: 0, reserved: 0 });
  const c = await store.ledger.balance(canceled.accountId);
  t.same({ balance: c!.balance, reserved: c!.reserved }, { balance: 10, reserved: 0 });
});

t.test('a canceled subscription can still read its balance', async (t) => {
  const res = await stack.call('GET', '/v1/credits', { key: canceled.key });
  t.equal(res.status, 200);
  t.equal(res.body.subscription_status, 'canceled');
});

t.test('a request that takes no body ignores an empty one, whatever its Content-Type', async (t) => {
  const { key } = await makeKey(stack, { credits: 5 });
  const empty = { key, raw: '', headers: json };
  const cases: Array<[string, string, Parameters<typeof stack.call>[2], number, string | undefined]> = [
    ['GET', '/v1/credits', { key, headers: json }, 200, undefined],
    ['GET', '/v1/csv/jobs', { key, headers: json }, 200, undefined],
    ['DELETE', `/v1/csv/jobs/job_${'0'.repeat(24)}`, empty, 404, 'job_not_found'],
    ['GET', `/v1/csv/jobs/job_${'0'.repeat(24)}`, { key, headers: json }, 404, 'job_not_found'],
    ['POST', `/v1/csv/jobs/job_${'0'.repeat(24)}/recover-catchalls`, empty, 404, 'job_not_found'],
    ['POST', '/v1/subscriptions/cancel', empty, 404, 'subscription_not_found'],
    ['POST', '/v1/outcomes/email/connectors/emailbison', empty, 201, undefined],
    // A route that takes a body still refuses an empty one.
    ['POST', '/v1/validate', empty, 400, 'invalid_json'],
    ['POST', '/v1/validate/batch', empty, 400, 'invalid_json'],
  ];
  for (const [method, route, opts, status, code] of cases) {
    const r = await stack.call(method, route, opts);
    t.equal(r.status, status, `${method} ${route}: ${r.text.slice(0, 200)}`);
    t.equal(r.body.code, code, `${method} ${route}: code`);
  }
});

t.test('an id that cannot be one of ours is unknown (never looked up); a file name must be printable', async (t) => {
  const { key } = await makeKey(stack, { credits: 5 });
  // A lone surrogate cannot be percent-encoded: its UTF-8 form (bytes ED A0 80) stands for it in
  // the path, which is not UTF-8, so the URL itself is malformed (400 invalid_request).
  const odd: Array<[string, string, [number, string]]> = [
    ['job_\u0000', 'job_%00', [404, 'job_not_found']],
    [`job_${'a'.repeat(24)}\u0000`, `job_${'a'.repeat(24)}%00`, [404, 'job_not_found']],
    ['job_\ud800', 'job_%ED%A0%80', [400, 'invalid_request']],
    [`JOB_${'a'.repeat(24)}`, `JOB_${'a'.repeat(24)}`, [404, 'job_not_found']],
    [`job_${'a'.repeat(23)}`, `job_${'a'.repeat(23)}`, [404, 'job_not_found']],
    ['\u202ejob', '%E2%80%AEjob', [404, 'job_not_found']],
  ];
  for (const [id, inPath, want] of odd) {
    const p = `/v1/csv/jobs/${inPath}`;
    for (const [method, route] of [['GET', p], ['DELETE', p], ['GET', `${p}/download`], ['POST', `${p}/recover-catchalls`]] as const) {
      const r = await stack.call(method, route, { key });
      t.strictSame([r.status, r.body.code], want, `${method} ${JSON.stringify(id)}${route.slice(p.length)}`);
    }
    const start = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: id, email_column: 'email' } });
    t.strictSame([start.status, start.body.code], [404, 'job_not_found'], `start-processing ${JSON.stringify(id)}`);
  }
  for (const [filename, why] of [
    ['leads\r\n.csv', 'U+000D'],
    ['a\u0000.csv', 'U+0000'],
    ['\u001b[31mred.csv', 'U+001B'],
    ['c1\u0085.csv', 'U+0085'],
    ['vsc.exe\u202e.csv', 'bidirectional control character (U+202E)'],
    ['x\u2066y.csv', 'U+2066'],
    ['\ud800.csv', 'lone surrogate'],
  ]) {
    const r = await stack.call('POST', '/v1/csv/prepare-upload', { key, body: { filename } });
    t.strictSame([r.status, r.body.code], [400, 'invalid_request'], JSON.stringify(filename));
    t.match(r.body.message, `filename must be printable text`, JSON.stringify(filename));
    t.match(r.body.message, why, JSON.stringify(filename));
  }
  const fine = await stack.call('POST', '/v1/csv/prepare-upload', { key, body: { filename: 'Leads – März 2026 😀.csv' } });
  t.equal(fine.status, 200, 'printable Unicode is fine');
});
