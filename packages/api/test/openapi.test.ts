// /openapi.json lists, per route, exactly the responses the route can give, each error status
// with the codes it can carry there and every response with its headers. Before, every gated
// route listed the same ten statuses (GET /v1/credits "could" answer 400, 409, 413, 415), error
// bodies allowed any code, and no header was documented. The expectations below are written out
// by hand from the gates and handlers, not computed by the code under test.

import { Validator } from '@seriousme/openapi-schema-validator';
import t from 'tap';
import { buildFakeApp, KEYS } from './fakes.ts';

type Doc = { openapi: string; paths: Record<string, Record<string, { responses: Record<string, Response> }>> };
type Response = { headers?: Record<string, unknown>; content?: { 'application/json': { schema: { $ref?: string; required?: string[]; properties?: Record<string, { enum?: string[] }> } } } };

const app = await buildFakeApp();
t.teardown(() => app.close());
const served = await app.inject({ method: 'GET', url: '/openapi.json' });
const doc = served.json() as Doc;

const GATE = {
  401: ['api_key_required', 'mcp_token_not_accepted', 'invalid_api_key', 'api_key_revoked', 'api_key_inactive', 'api_key_expired'],
  403: ['insufficient_scope'],
  429: ['rate_limited'],
  500: ['internal_error'],
};
const VALIDATION = {
  ...GATE,
  402: ['subscription_inactive', 'insufficient_credits'],
  409: ['idempotency_key_conflict', 'idempotency_request_in_progress'],
  413: ['payload_too_large'],
  415: ['unsupported_media_type'],
  503: ['validation_upstream_failed', 'service_unavailable'],
};

/** Route → status → the codes its body can carry (empty: a success body). */
const EXPECTED: Record<string, Record<string, Record<string, string[]>>> = {
  '/v1/validate': {
    post: { 200: [], ...VALIDATION, 400: ['invalid_json', 'invalid_request', 'email_required', 'invalid_email_type', 'invalid_idempotency_key'] },
  },
  '/v1/validate/bulk': {
    post: { 200: [], ...VALIDATION, 400: ['invalid_json', 'invalid_request', 'invalid_email_type', 'emails_required', 'too_many_emails', 'invalid_idempotency_key'] },
  },
  '/v1/credits': { get: { 200: [], ...GATE, 503: ['service_unavailable'] } },
  '/health': { get: { 200: [] } },
  '/live': { get: { 200: [] } },
  '/ready': { get: { 200: [], 503: ['not_ready'] } },
};
const GATED = new Set(['/v1/validate', '/v1/validate/bulk', '/v1/credits']);

t.test('the document is valid OpenAPI 3.1', async (t) => {
  t.equal(served.statusCode, 200);
  t.equal(doc.openapi, '3.1.0');
  const validator = new Validator();
  const result = await validator.validate(doc as unknown as Record<string, unknown>);
  t.strictSame(result, { valid: true }, JSON.stringify(result.errors ?? null));
  t.equal(validator.version, '3.1');
});

t.test('each route lists exactly the statuses it can answer, each error with exactly its codes', async (t) => {
  t.strictSame(Object.keys(doc.paths).sort(), Object.keys(EXPECTED).sort(), 'the routes');
  for (const [path, methods] of Object.entries(EXPECTED)) {
    t.strictSame(Object.keys(doc.paths[path] ?? {}), Object.keys(methods), `${path}: methods`);
    for (const [method, statuses] of Object.entries(methods)) {
      const responses = doc.paths[path]?.[method]?.responses ?? {};
      t.strictSame(Object.keys(responses).sort(), Object.keys(statuses).sort(), `${method} ${path}: statuses`);
      for (const [status, codes] of Object.entries(statuses)) {
        const schema = responses[status]?.content?.['application/json'].schema;
        const documented = schema?.properties?.code?.enum;
        if (codes.length === 0) t.equal(documented, undefined, `${method} ${path} ${status}: a success body`);
        else {
          t.strictSame([...(documented ?? [])].sort(), [...codes].sort(), `${method} ${path} ${status}: codes`);
          t.ok(schema?.required?.includes('code'), `${method} ${path} ${status}: code is required`);
        }
      }
    }
  }
});

t.test('extra error fields are documented where they are always sent', async (t) => {
  const schema = (path: string, status: string) => doc.paths[path]!.post!.responses[status]!.content!['application/json'].schema;
  t.ok(schema('/v1/validate', '429').required?.includes('retry_after'));
  t.ok(schema('/v1/validate', '403').required?.includes('required_scope'));
  // 402 is also subscription_inactive, which has neither.
  t.ok(schema('/v1/validate', '402').properties?.required && schema('/v1/validate', '402').properties?.available);
  t.notOk(schema('/v1/validate', '402').required?.includes('required'));
});

t.test('headers: X-Request-ID on every response, RateLimit on every gated one, Retry-After on 429', async (t) => {
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      for (const [status, r] of Object.entries(op.responses)) {
        const names = Object.keys(r.headers ?? {});
        const want = ['X-Request-ID'];
        if (GATED.has(path)) want.push('RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset');
        if (status === '429') want.push('Retry-After');
        if (GATED.has(path) && method === 'post' && status === '200') want.push('Idempotent-Replayed');
        t.strictSame(names.sort(), want.sort(), `${method} ${path} ${status}`);
      }
    }
  }
});

/** The response as the document describes it for this route and status. */
function conforms(t: Tap, path: string, method: string, r: { statusCode: number; headers: Record<string, unknown>; json(): Record<string, unknown> }) {
  const documented = doc.paths[path]?.[method]?.responses[String(r.statusCode)];
  t.ok(documented, `${method} ${path} documents ${r.statusCode}`);
  const schema = documented?.content?.['application/json'].schema;
  const body = r.json();
  for (const field of schema?.required ?? []) t.ok(field in body, `${r.statusCode}: ${field} is present`);
  if (schema?.properties?.code?.enum) t.ok(schema.properties.code.enum.includes(body.code as string), `${r.statusCode}: code ${String(body.code)} is documented`);
  for (const h of Object.keys(documented?.headers ?? {})) {
    if (h === 'Idempotent-Replayed') continue; // only on a replay
    t.ok(r.headers[h.toLowerCase()] !== undefined, `${r.statusCode}: header ${h} is sent`);
  }
}
type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

t.test('real responses match the document and keep every error field', async (t) => {
  const limited = await buildFakeApp({ rateLimitPerIp: 1 });
  t.teardown(() => limited.close());
  const first = await limited.inject({ method: 'GET', url: '/v1/credits', headers: { 'x-api-key': KEYS.full } });
  t.equal(first.statusCode, 200);
  conforms(t, '/v1/credits', 'get', first);
  const over = await limited.inject({ method: 'GET', url: '/v1/credits', headers: { 'x-api-key': KEYS.full } });
  t.strictSame([over.statusCode, over.json()], [429, { error: 'Too Many Requests', message: 'You have exceeded the rate limit', code: 'rate_limited', retry_after: 60 }]);
  t.same([over.headers['retry-after'], over.headers['ratelimit-limit'], over.headers['ratelimit-remaining']], ['60', '1', '0']);
  conforms(t, '/v1/credits', 'get', over);

  const noKey = await app.inject({ method: 'GET', url: '/v1/credits' });
  t.strictSame([noKey.statusCode, noKey.json().code], [401, 'api_key_required']);
  t.equal(noKey.headers['ratelimit-limit'], '1000', 'a rejected key still gets the RateLimit headers');
  conforms(t, '/v1/credits', 'get', noKey);

  const scope = await app.inject({ method: 'POST', url: '/v1/validate', headers: { 'x-api-key': KEYS.creditsOnly }, payload: { email: 'a@b.test' } });
  t.strictSame([scope.statusCode, scope.json()], [403, { error: 'Forbidden', message: 'API key lacks the email:validate:single scope', code: 'insufficient_scope', required_scope: 'email:validate:single' }]);
  conforms(t, '/v1/validate', 'post', scope);

  const credits = await app.inject({ method: 'POST', url: '/v1/validate', headers: { 'x-api-key': KEYS.full }, payload: { email: 'a@b.test' } });
  t.strictSame([credits.statusCode, credits.json()], [402, { error: 'Payment Required', message: 'This request needs up to 1 credits; 0 available', code: 'insufficient_credits', required: 1, available: 0 }]);
  conforms(t, '/v1/validate', 'post', credits);

  const bulk = await app.inject({ method: 'POST', url: '/v1/validate/bulk', headers: { 'x-api-key': KEYS.full }, payload: { emails: Array.from({ length: 101 }, (_, i) => `u${i}@b.test`) } });
  t.strictSame([bulk.statusCode, bulk.json().code], [400, 'too_many_emails']);
  conforms(t, '/v1/validate/bulk', 'post', bulk);

  const failing = await app.inject({ method: 'GET', url: '/v1/credits', headers: { 'x-api-key': KEYS.failing } });
  t.strictSame([failing.statusCode, failing.json()], [500, { error: 'Internal Server Error', message: 'Unexpected error', code: 'internal_error' }]);
  conforms(t, '/v1/credits', 'get', failing);

  const health = await app.inject({ method: 'GET', url: '/health' });
  t.equal(health.statusCode, 200);
  t.equal(health.headers['ratelimit-limit'], undefined, 'no gate, no RateLimit headers');
  conforms(t, '/health', 'get', health);
});

t.test('a route whose responses and codes disagree fails start-up', async (t) => {
  const gatedWithoutErrors = await buildFakeApp();
  gatedWithoutErrors.get('/v1/undeclared', { config: { scope: 'credits:read' }, schema: { response: { 200: { type: 'object' } } } }, async () => ({}));
  await t.rejects(async () => {
    await gatedWithoutErrors.ready();
  }, { message: 'GET /v1/undeclared: code api_key_required has status 401, which the route does not declare' });
  await gatedWithoutErrors.close().catch(() => {});
  const errorWithoutCode = await buildFakeApp();
  errorWithoutCode.get('/v1/stray', { schema: { response: { 200: { type: 'object' }, 409: { $ref: 'Error#' } } } }, async () => ({}));
  await t.rejects(async () => {
    await errorWithoutCode.ready();
  }, { message: 'GET /v1/stray: status 409 has no error code' });
  await errorWithoutCode.close().catch(() => {});
});
