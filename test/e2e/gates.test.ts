// Idempotency, rate limits, request ids, health probes and the OpenAPI document, through HTTP.

import t from 'tap';
import { Agent, request } from 'undici';
import { BOOTSTRAP_KEY, CLUSTER_PROFILE, makeKey, startStack } from '../helpers/stack.ts';

const stack = await startStack();
t.teardown(() => stack.close());
const store = stack.store;

t.test('Idempotency-Key: replay, conflict, in progress', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 10 });
  const body = { email: 'john.smith@accept.test' };
  const first = await stack.call('POST', '/v1/validate', { key, body, headers: { 'idempotency-key': 'order-42' } });
  t.equal(first.status, 200);
  t.equal(first.body.credits_charged, 1);
  t.equal(first.headers.get('idempotent-replayed'), null);
  const again = await stack.call('POST', '/v1/validate', { key, body, headers: { 'idempotency-key': 'order-42' } });
  t.equal(again.status, 200);
  t.equal(again.headers.get('idempotent-replayed'), 'true');
  t.equal(again.text, first.text, 'the stored response, byte for byte');
  t.equal((await store.ledger.balance(accountId))!.balance, 9, 'a replay charges nothing');
  const other = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' }, headers: { 'idempotency-key': 'order-42' } });
  t.equal(other.status, 409);
  t.equal(other.body.code, 'idempotency_key_conflict');
  // Another account may use the same key string independently.
  const second = await makeKey(stack, { credits: 1 });
  const mine = await stack.call('POST', '/v1/validate', { key: second.key, body, headers: { 'idempotency-key': 'order-42' } });
  t.equal(mine.status, 200);
  t.equal(mine.headers.get('idempotent-replayed'), null);

  // In progress: the slow banner server keeps the first request busy while the second arrives.
  const slow = { email: 'jane.doe@slowbanner.test' };
  const before = stack.sim.statsFor('slowbanner.test').connections;
  const p1 = stack.call('POST', '/v1/validate', { key, body: slow, headers: { 'idempotency-key': 'slow-1' } });
  // Once the first request's SMTP session is open, its key claim is certainly recorded.
  for (let i = 0; i < 200 && stack.sim.statsFor('slowbanner.test').connections === before; i++) await new Promise((r) => setTimeout(r, 10));
  const p2 = await stack.call('POST', '/v1/validate', { key, body: slow, headers: { 'idempotency-key': 'slow-1' } });
  t.equal(p2.status, 409);
  t.equal(p2.body.code, 'idempotency_request_in_progress');
  t.equal((await p1).status, 200);

  // A failed request does not keep its key: after topping up, the same key runs for real.
  const poor = await makeKey(stack, { credits: 0 });
  const denied = await stack.call('POST', '/v1/validate', { key: poor.key, body, headers: { 'idempotency-key': 'retry-me' } });
  t.equal(denied.status, 402);
  await store.ledger.grant(poor.accountId, 1);
  const paid = await stack.call('POST', '/v1/validate', { key: poor.key, body, headers: { 'idempotency-key': 'retry-me' } });
  t.equal(paid.status, 200);
  t.equal(paid.headers.get('idempotent-replayed'), null);
  t.equal(paid.body.credits_charged, 1);
});

t.test('X-Request-ID on every response, unique', async (t) => {
  const a = await stack.call('GET', '/health', { key: null });
  const b = await stack.call('GET', '/v1/credits');
  const c = await stack.call('GET', '/nowhere', { key: null });
  const ids = [a, b, c].map((r) => r.headers.get('x-request-id'));
  t.ok(ids.every((id) => /^req_[0-9a-f]{32}$/.test(id ?? '')));
  t.equal(new Set(ids).size, 3);
});

t.test('health probes', async (t) => {
  const h = await stack.call('GET', '/health', { key: null });
  t.equal(h.status, 200);
  t.equal(h.body.status, 'healthy');
  t.ok(!Number.isNaN(Date.parse(h.body.timestamp)));
  const l = await stack.call('GET', '/live', { key: null });
  t.same([l.status, l.body.status], [200, 'alive']);
  const r = await stack.call('GET', '/ready', { key: null });
  t.equal(r.status, 200);
  t.equal(r.body.status, 'ready');
  // The cluster profile adds database (DATABASE_URL), kafka (KAFKA_BROKERS) and clickhouse (CLICKHOUSE_URL).
  const cluster = CLUSTER_PROFILE ? { database: 'ok', kafka: 'ok', clickhouse: 'ok' } : {};
  t.same(r.body.checks, { redis: 'ok', dns: 'ok', smtp: 'ok', ...cluster }, 'the documented readiness keys (database only with DATABASE_URL)');
  t.notOk('errors' in r.body);
});

t.test('readiness fails with 503 not_ready when the ready domain has no mail server', async (t) => {
  const readiness = stack.svc.services.readiness;
  const saved = readiness.deps.readyDomain;
  readiness.deps.readyDomain = 'servfail.test';
  await readiness.refresh();
  const r = await stack.call('GET', '/ready', { key: null });
  t.equal(r.status, 503);
  t.equal(r.body.status, 'not_ready');
  t.equal(r.body.checks.dns, 'failed');
  t.equal(r.body.checks.smtp, 'failed');
  t.equal(r.body.checks.redis, 'ok');
  t.ok(r.body.errors.length >= 1 && r.body.errors.every((e: unknown) => typeof e === 'string'));
  readiness.deps.readyDomain = 'alldead.test';
  await readiness.refresh();
  const r2 = await stack.call('GET', '/ready', { key: null });
  t.same([r2.status, r2.body.checks.dns, r2.body.checks.smtp], [503, 'ok', 'failed']);
  readiness.deps.readyDomain = saved;
  await readiness.refresh();
  t.equal((await stack.call('GET', '/ready', { key: null })).status, 200);
});

t.test('OpenAPI 3.1 document from the route schemas', async (t) => {
  const r = await stack.call('GET', '/openapi.json', { key: null });
  t.equal(r.status, 200);
  t.equal(r.body.openapi, '3.1.0');
  for (const p of ['/v1/validate', '/v1/validate/bulk', '/v1/credits', '/health', '/ready', '/live']) t.ok(r.body.paths[p], p);
  t.same(r.body.components.securitySchemes.apiKey, { type: 'apiKey', in: 'header', name: 'X-API-Key' });
  const text = JSON.stringify(r.body);
  t.ok(text.includes('b2b_outbound_quality') && text.includes('charge_reason'), 'the result schema is in the document');
});

t.test('GET /v1/credits', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 12, scopes: ['credits:read'] });
  const r = await stack.call('GET', '/v1/credits', { key });
  t.equal(r.status, 200);
  t.strictSame(r.body, { account_id: accountId, balance: 12, reserved: 0, available: 12, subscription_status: 'active', current_period_end: null, cancel_at_period_end: false });
  t.equal(r.headers.get('ratelimit-limit'), '1000', 'the tighter of the two limits is reported');
});

t.test('rate limits: 1,000/min per IP and 10,000/min per key, retry_after 60', async (t) => {
  // Requests from different loopback source addresses count as different clients.
  const agents = new Map<string, Agent>();
  const from = (ip: string) => {
    let a = agents.get(ip);
    if (!a) agents.set(ip, (a = new Agent({ localAddress: ip, connections: 16 })));
    return a;
  };
  t.teardown(() => Promise.all([...agents.values()].map((a) => a.close())));
  const hit = async (ip: string, key: string) => {
    const r = await request(`${stack.url}/v1/credits`, { headers: { 'x-api-key': key }, dispatcher: from(ip) });
    const body = (await r.body.json()) as Record<string, unknown>;
    return { status: r.statusCode, headers: r.headers, body };
  };
  const burst = async (ip: string, key: string, n: number) => {
    let okCount = 0;
    for (let i = 0; i < n; i += 50) {
      const rs = await Promise.all(Array.from({ length: Math.min(50, n - i) }, () => hit(ip, key)));
      okCount += rs.filter((r) => r.status === 200).length;
    }
    return okCount;
  };

  // Per IP: 1,000 pass, the 1,001st is refused even with another valid key.
  const ipKey = (await makeKey(stack, { scopes: ['credits:read'] })).key;
  t.equal(await burst('127.0.50.1', ipKey, 1000), 1000);
  const over = await hit('127.0.50.1', BOOTSTRAP_KEY);
  t.equal(over.status, 429);
  t.equal(over.body.code, 'rate_limited');
  t.equal(over.body.retry_after, 60);
  t.equal(over.headers['retry-after'], '60');
  t.equal(over.headers['ratelimit-remaining'], '0');
  t.equal(over.headers['ratelimit-limit'], '1000');
  t.equal((await hit('127.0.50.2', ipKey)).status, 200, 'another address is not affected');

  // Per key: 10,000 requests spread over 11 addresses pass; the next one, from a fresh address, is refused.
  const busy = await makeKey(stack, { scopes: ['credits:read'] });
  let total = 0;
  for (let i = 0; i < 10; i++) total += await burst(`127.0.51.${i + 1}`, busy.key, 1000);
  t.equal(total, 10_000);
  const keyOver = await hit('127.0.52.1', busy.key);
  t.equal(keyOver.status, 429);
  t.equal(keyOver.body.code, 'rate_limited');
  t.equal(keyOver.body.retry_after, 60);
  t.equal(keyOver.headers['ratelimit-limit'], '10000');
  t.equal((await hit('127.0.52.1', ipKey)).status, 200, 'another key from the same address is not affected');
});

t.test('a malformed URL gets the catalogue body and a request id', async (t) => {
  const r = await stack.call('GET', '/v1/%zz', { key: null });
  t.equal(r.status, 400);
  t.equal(r.body.code, 'invalid_request');
  t.match(r.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/);
});

t.test('a failing database during validation is 503 validation_upstream_failed, and nothing is held', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 5 });
  const store = stack.store;
  // Warm the cache so the next request takes the debit path, then break the store's write paths.
  t.equal((await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } })).status, 200);
  // What pg throws when the server goes away mid-request.
  const { debit, reserve } = store.ledger;
  store.ledger.debit = () => Promise.reject(new Error('Connection terminated unexpectedly'));
  store.ledger.reserve = () => Promise.reject(new Error('Connection terminated unexpectedly'));
  t.teardown(() => {
    store.ledger.debit = debit;
    store.ledger.reserve = reserve;
  });
  const cached = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } });
  t.same([cached.status, cached.body.code], [503, 'validation_upstream_failed']);
  const fresh = await stack.call('POST', '/v1/validate', { key, body: { email: 'fresh.one@catchall.test' } });
  t.same([fresh.status, fresh.body.code], [503, 'validation_upstream_failed']);
  store.ledger.debit = debit;
  store.ledger.reserve = reserve;
  const b = await store.ledger.balance(accountId);
  t.same([b!.balance, b!.reserved], [4, 0], 'only the first, successful request was charged');
});

t.test('a lost database in the key lookup or the balance read is a retryable 503, not a 500', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 5, scopes: ['credits:read', 'email:validate:single'] });
  const store = stack.store;
  const { findByHash } = store.keys;
  const { balance } = store.ledger;
  const lost = () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));
  t.teardown(() => {
    store.keys.findByHash = findByHash;
    store.ledger.balance = balance;
  });
  store.keys.findByHash = lost; // a key the gate has not cached yet
  const credits = await stack.call('GET', '/v1/credits', { key });
  t.strictSame([credits.status, credits.body.code], [503, 'service_unavailable']);
  const validate = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } });
  t.strictSame([validate.status, validate.body.code], [503, 'validation_upstream_failed']);
  store.keys.findByHash = findByHash;
  store.ledger.balance = lost;
  const read = await stack.call('GET', '/v1/credits', { key });
  t.strictSame([read.status, read.body.code, read.body.message], [503, 'service_unavailable', 'A dependency is unavailable; retry later']);
  store.ledger.balance = balance;
  t.equal((await stack.call('GET', '/v1/credits', { key })).body.balance, 5);
  t.equal((await store.ledger.balance(accountId))!.balance, 5);
});

t.test('a broken invariant in the store is a bug: 500 internal_error, not a retryable 503, and nothing is charged', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 5 });
  const store = stack.store;
  t.equal((await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } })).status, 200);
  // The ledger refuses the write as its append-only trigger or a CHECK would (SQLSTATE P0001).
  const { debit } = store.ledger;
  store.ledger.debit = () => Promise.reject(Object.assign(new Error('credit_ledger is append-only'), { code: 'P0001' }));
  t.teardown(() => {
    store.ledger.debit = debit;
  });
  const r = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } });
  t.strictSame([r.status, r.body], [500, { error: 'Internal Server Error', message: 'Unexpected error', code: 'internal_error' }]);
  t.match(r.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/);
  store.ledger.debit = debit;
  t.equal((await store.ledger.balance(accountId))!.balance, 4, 'only the first request was charged');
});

t.test('an idempotent response is recorded in the same transaction as its charge', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 5 });
  const store = stack.store;
  const body = { email: 'jane.doe@accept.test' }; // cached by now: the debit path
  const uncached = { email: `atomic.${Date.now()}@catchall.test` }; // the reserve/settle path (not charged: catch-all)
  const valid = { email: 'john.smith@accept.test' };
  // Make recording the response fail inside the database, as a crash at that point would
  // (SQLSTATE 08006, connection_failure: what a client sees when the server dies mid-statement).
  await stack.db.exec(`CREATE FUNCTION t_fail_idem() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.status = 'done' THEN RAISE EXCEPTION 'simulated crash' USING ERRCODE = '08006'; END IF; RETURN NEW; END; $$;
    CREATE TRIGGER t_fail_idem BEFORE UPDATE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION t_fail_idem();`);
  t.teardown(() => stack.db.exec('DROP TRIGGER IF EXISTS t_fail_idem ON idempotency_keys; DROP FUNCTION IF EXISTS t_fail_idem();'));
  for (const [name, b] of [['debit', body], ['settle', valid], ['free', uncached]] as const) {
    const r = await stack.call('POST', '/v1/validate', { key, body: b, headers: { 'idempotency-key': `atomic-${name}` } });
    t.same([r.status, r.body.code], [503, 'validation_upstream_failed'], `${name}: the failure is reported`);
  }
  const after = await store.ledger.balance(accountId);
  t.same([after!.balance, after!.reserved], [5, 1], 'no charge survived without its recorded response; the settle case left its hold open');
  await new Promise((r) => setTimeout(r, 10));
  t.equal(await store.ledger.releaseStale('sync', 0), 1, 'the sweep releases that hold');
  t.equal((await store.ledger.balance(accountId))!.reserved, 0);
  await stack.db.exec('DROP TRIGGER t_fail_idem ON idempotency_keys; DROP FUNCTION t_fail_idem();');
  // The keys were freed: the retries run once, charge once, and replay afterwards.
  const retry = await stack.call('POST', '/v1/validate', { key, body, headers: { 'idempotency-key': 'atomic-debit' } });
  t.same([retry.status, retry.body.credits_charged, retry.headers.get('idempotent-replayed')], [200, 1, null]);
  const replay = await stack.call('POST', '/v1/validate', { key, body, headers: { 'idempotency-key': 'atomic-debit' } });
  t.same([replay.status, replay.headers.get('idempotent-replayed'), replay.text], [200, 'true', retry.text]);
  t.equal((await store.ledger.balance(accountId))!.balance, 4);
});
