// Request ids and request logs of the front.
// - X-Request-ID is opaque: every id is random, none a counter's next value (it was a
//   per-process random prefix and a counter, so consecutive ids shared 16 hex digits).
// - A key passed in the query string never reaches a log line (Fastify's default request
//   serializer logged the URL with its query).

import net from 'node:net';
import t from 'tap';
import { nextRequestId } from '../src/request-id.ts';
import { buildApp } from '../src/app.ts';
import { buildFakeApp, fakeServices, KEYS, LogCapture, settings } from './fakes.ts';

const ID = /^req_[0-9a-f]{32}$/;

t.test('X-Request-ID: random, no shared prefix, not sequential', async (t) => {
  const app = await buildFakeApp();
  t.teardown(() => app.close());
  const ids: string[] = [];
  for (let i = 0; i < 50; i++) {
    const r = await app.inject({ method: 'GET', url: i % 2 ? '/health' : '/v1/credits', headers: { 'x-api-key': KEYS.full } });
    t.equal(r.statusCode, 200);
    ids.push(String(r.headers['x-request-id']));
  }
  t.ok(ids.every((id) => ID.test(id)), 'req_ + 32 hex digits');
  t.equal(new Set(ids).size, 50, 'all distinct');
  t.equal(new Set(ids.map((id) => id.slice(4, 20))).size, 50, 'their first 16 hex digits are all distinct (no per-process prefix)');
  const tail = (id: string) => BigInt(`0x${id.slice(20)}`);
  for (let i = 1; i < ids.length; i++) {
    const gap = tail(ids[i]!) - tail(ids[i - 1]!);
    // A counter steps by 1; two random 64-bit tails are this close once in 2^31 pairs.
    t.ok(gap > 2n ** 32n || gap < -(2n ** 32n), `ids ${i - 1} and ${i} are not consecutive values (${ids[i - 1]}, ${ids[i]})`);
  }
});

t.test('the id pool refills: ids stay distinct and well-formed across refills', async (t) => {
  const ids = Array.from({ length: 1000 }, () => nextRequestId());
  t.ok(ids.every((id) => ID.test(id)));
  t.equal(new Set(ids).size, 1000);
  t.equal(new Set(ids.map((id) => id.slice(4, 12))).size, 1000, 'no two share their first 8 hex digits (chance of a repeat: about 1e-4)');
});

const SECRET = 'svc_live_SECRETqueryKey0123456789abc';

t.test('a key in the query string never reaches the request log', async (t) => {
  const log = new LogCapture();
  const app = await buildFakeApp({ logLevel: 'info' }, log);
  t.teardown(() => app.close());

  const ok = await app.inject({ method: 'GET', url: `/v1/credits?api_key=${SECRET}&x=1`, headers: { 'x-api-key': KEYS.full } });
  t.equal(ok.statusCode, 200);
  const denied = await app.inject({ method: 'GET', url: `/v1/credits?api_key=${SECRET}` });
  t.same([denied.statusCode, denied.json().code], [401, 'api_key_required']);
  const missing = await app.inject({ method: 'GET', url: `/v1/nowhere?api_key=${SECRET}` });
  t.same([missing.statusCode, missing.json().code], [404, 'route_not_found']);
  // A bug: logged at error level.
  const failed = await app.inject({ method: 'GET', url: `/v1/credits?api_key=${SECRET}`, headers: { 'x-api-key': KEYS.failing } });
  t.same([failed.statusCode, failed.json().code], [500, 'internal_error']);

  const lines = log.lines.map((l) => JSON.parse(l) as { msg: string; req?: { method: string; url: string } });
  const incoming = lines.filter((l) => l.msg === 'incoming request');
  t.equal(incoming.length, 4, 'each request was logged');
  t.strictSame(
    incoming.map((l) => l.req?.url),
    ['/v1/credits?[redacted]', '/v1/credits?[redacted]', '/v1/nowhere?[redacted]', '/v1/credits?[redacted]'],
    'the path is logged, the query replaced',
  );
  t.equal(lines.filter((l) => l.msg === 'unexpected error').length, 1, 'the 500 was logged (with its request id, not its URL)');
  const text = log.lines.join('\n');
  t.notOk(text.includes('SECRET'), 'the query key is in no log line');
  t.notOk(text.includes(KEYS.full) || text.includes(KEYS.failing), 'nor is the X-API-Key header');
  const plain = await app.inject({ method: 'GET', url: '/health' });
  t.equal(plain.statusCode, 200);
  t.equal((JSON.parse(log.lines.at(-2)!) as { req: { url: string } }).req.url, '/health', 'a URL without a query is logged as it is');
});

t.test('nor does a request answered before routing (malformed, or without Host)', async (t) => {
  const log = new LogCapture();
  const app = await buildFakeApp({ logLevel: 'info' }, log);
  t.teardown(() => app.close());
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as net.AddressInfo;
  const send = (raw: string) =>
    new Promise<string>((resolve, reject) => {
      let data = '';
      const s = net.connect({ port, host: '127.0.0.1' }, () => s.write(raw));
      s.setTimeout(5000, () => reject(new Error('no close within 5 s')));
      s.on('data', (c) => (data += c.toString('latin1')));
      s.on('error', reject);
      s.on('close', () => resolve(data));
    });
  const malformed = await send(`GET /v1/credits?api_key=${SECRET} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${KEYS.full}\r\nX-Note: a\x01b\r\n\r\n`);
  t.match(malformed, /^HTTP\/1\.1 400 Bad Request\r\n/);
  const hostless = await send(`GET /v1/credits?api_key=${SECRET} HTTP/1.1\r\nX-API-Key: ${KEYS.full}\r\n\r\n`);
  t.match(hostless, /^HTTP\/1\.1 400 Bad Request\r\n/);
  const lines = log.lines.map((l) => JSON.parse(l) as { msg: string; code?: string; reqId?: string });
  t.strictSame(
    lines.filter((l) => l.code).map((l) => [l.msg, l.code]),
    [
      ['malformed or incomplete request', 'invalid_request'],
      ['request refused before routing', 'invalid_request'],
    ],
  );
  t.ok(lines.filter((l) => l.code).every((l) => ID.test(l.reqId ?? '')), 'logged with the request id the client got');
  t.ok(malformed.includes(`X-Request-ID: ${lines.find((l) => l.code)!.reqId}`));
  const text = log.lines.join('\n');
  t.notOk(text.includes('SECRET'), 'the query key is in no log line');
  t.notOk(text.includes(KEYS.full), 'nor is the X-API-Key header');
});

t.test('a client that hangs up mid-body is not a database outage: nothing at error level', async (t) => {
  const log = new LogCapture();
  const app = await buildFakeApp({ logLevel: 'info' }, log);
  t.teardown(() => app.close());
  // The error handler has answered once onError hooks ran and the handler's log line (if any) is written.
  const handled = new Promise<Error>((resolve) => app.addHook('onError', async (_req, _reply, err) => resolve(err)));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as net.AddressInfo;
  const s = net.connect({ port, host: '127.0.0.1' }, () => {
    s.write(`POST /v1/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${KEYS.full}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"email":`);
    setImmediate(() => s.destroy());
  });
  s.on('error', () => {});
  const err = await handled;
  await new Promise((r) => setImmediate(r));
  t.equal((err as { code?: string }).code, 'ECONNRESET', 'the body stream failed because the client went away');
  const levels = log.lines.map((l) => JSON.parse(l) as { level: number; msg: string });
  t.strictSame(levels.filter((l) => l.level >= 50).map((l) => l.msg), [], 'no error-level line (it was "dependency failed")');
});


t.test('requests that miss the key cache together share one lookup (a found key and an unknown one)', async (t) => {
  const services = fakeServices();
  const real = services.store.keys;
  const lookups: string[] = [];
  (services.store as { keys: unknown }).keys = {
    findByHash: async (hash: string) => {
      lookups.push(hash);
      await new Promise((r) => setTimeout(r, 10)); // a database round trip
      return real.findByHash(hash);
    },
    touch: async () => {},
  };
  const app = await buildApp(services, settings);
  t.teardown(() => app.close());
  const many = (key: string) => Promise.all(Array.from({ length: 20 }, () => app.inject({ method: 'GET', url: '/v1/credits', headers: { 'x-api-key': key } })));
  const [found, unknown] = await Promise.all([many(KEYS.full), many('svc_test_notAKeyAnyoneHas0000000000')]);
  t.strictSame(found.map((r) => r.statusCode), Array(20).fill(200));
  t.strictSame(unknown.map((r) => [r.statusCode, r.json().code]), Array(20).fill([401, 'invalid_api_key']));
  t.equal(lookups.length, 2, 'one lookup per key, not one per request');
  // The unknown key is not cached: a later request looks it up again; the found one is cached.
  await many('svc_test_notAKeyAnyoneHas0000000000');
  await many(KEYS.full);
  t.equal(lookups.length, 3);
});
