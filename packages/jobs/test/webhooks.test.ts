// The webhook dispatcher against a real HTTP receiver on 127.0.0.1 (allowPrivate, or refused
// without it), over the real outbox on PGlite (and on Postgres for the two-dispatcher case when
// it answers). Single attempts run through runOnce() with an injected clock, so the back-off and
// the 24 h limit are asserted to the millisecond; the poll loop is checked with start()/stop(),
// waiting on the dispatcher's own log lines and the receiver's requests, never on sleeps.

import t from 'tap';
import { createHash, createHmac } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { migrate, openPglite, openPostgres, Store, webhookEventId, type Db, type WebhookEvent } from '@svc/store';
import { buildJobEvent, jobWebhookEvent, webhookRetryDelayMs, WebhookDispatcher, type WebhookDispatcherOptions, type WebhookLogger } from '../src/webhooks/webhooks.ts';
import type { Resolver } from '@svc/egress';
import { freshPglite, migratedPglite } from '../../../test/helpers/pglite.ts';
import { freshSchema, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';
import { until } from '../../../test/helpers/until.ts';

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

const SECRET = 'whsec_test_0123456789abcdef';
/** Every account's one current secret, in these tests (the store's own is tested below). */
const SECRETS = async (): Promise<string[]> => [SECRET];
const T0 = new Date('2026-03-01T12:00:00.000Z');
const H = 3_600_000;

interface Received {
  id: string;
  signature: string;
  body: string;
  headers: IncomingHttpHeaders;
  method: string;
  path: string;
}

type Handler = (req: Received, res: ServerResponse, nthForId: number) => void | Promise<void>;

/** A webhook receiver on 127.0.0.1: records every request; `handler` answers (default 200). */
async function receiver(t: Tap, handler: Handler = (_r, res) => void res.end('ok')) {
  const requests: Received[] = [];
  const events = new EventEmitter();
  const inFlight = new Map<string, number>();
  let maxConcurrentPerId = 0;
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const r: Received = {
      id: String(req.headers['x-webhook-id']),
      signature: String(req.headers['x-signature']),
      body: Buffer.concat(chunks).toString('utf8'),
      headers: req.headers,
      method: req.method ?? '',
      path: req.url ?? '',
    };
    requests.push(r);
    const n = requests.filter((x) => x.id === r.id).length;
    inFlight.set(r.id, (inFlight.get(r.id) ?? 0) + 1);
    maxConcurrentPerId = Math.max(maxConcurrentPerId, inFlight.get(r.id)!);
    events.emit('request', r);
    try {
      await handler(r, res, n);
    } finally {
      inFlight.set(r.id, inFlight.get(r.id)! - 1);
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  return {
    port,
    url: (p = '/hook') => `http://127.0.0.1:${port}${p}`,
    requests,
    events,
    get maxConcurrentPerId() {
      return maxConcurrentPerId;
    },
    /** Resolves when `n` requests in all have arrived (fails after `ms`). */
    until: (n: number, ms = 10_000) => waitUntil(events, 'request', () => requests.length >= n, ms, `${n} requests (got ${requests.length})`),
  };
}

/** Resolves once `cond()` holds, re-checked on every `event`; rejects loudly after `ms`. */
function waitUntil(em: EventEmitter, event: string, cond: () => boolean, ms: number, what: string): Promise<void> {
  if (cond()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      em.off(event, check);
      reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
    }, ms);
    function check(): void {
      if (!cond()) return;
      clearTimeout(timer);
      em.off(event, check);
      resolve();
    }
    em.on(event, check);
  });
}

/** A logger that keeps its lines and announces each. */
function recordingLogger() {
  const lines: Array<{ level: string; msg: string; obj: Record<string, unknown> }> = [];
  const events = new EventEmitter();
  const at = (level: string) => (obj: object, msg: string) => {
    lines.push({ level, msg, obj: obj as Record<string, unknown> });
    events.emit('line');
  };
  const logger: WebhookLogger = { info: at('info'), warn: at('warn'), error: at('error') };
  const count = (msg: string) => lines.filter((l) => l.msg === msg).length;
  return { logger, lines, count, until: (msg: string, n: number, ms = 10_000) => waitUntil(events, 'line', () => count(msg) >= n, ms, `${n} × "${msg}" (got ${count(msg)})`) };
}

const expectedSignature = (unix: number, body: string): string => `t=${unix},v1=${createHmac('sha256', SECRET).update(`${unix}.${body}`).digest('hex')}`;

async function pgliteStore(t: Tap): Promise<Store> {
  const db = await migratedPglite();
  t.teardown(() => db.close());
  return new Store(db);
}

const jobResource = (id: string) => ({ id, status: 'completed', total_emails: 3, processed_emails: 3, credits_reserved: 3, credits_charged: 2, credits_refunded: 1 });

/** Enqueues a job.completed event for `jobId` to `url` and returns its row. */
async function enqueue(store: Store, accountId: string, jobId: string, url: string, createdAt: Date = T0): Promise<WebhookEvent> {
  const e = jobWebhookEvent({ accountId, url, event: 'job.completed', job: jobResource(jobId), createdAt });
  await store.webhooks.enqueue(e);
  return (await store.webhooks.get(e.id))!;
}

/** A dispatcher on an injected clock, for runOnce(). */
function clocked(store: Store, over: Partial<WebhookDispatcherOptions> = {}) {
  const clock = { now: new Date(T0) };
  const d = new WebhookDispatcher({ store, secrets: SECRETS, allowPrivate: true, now: () => new Date(clock.now), random: () => 0.5, ...over });
  return { d, clock, advance: (ms: number) => void (clock.now = new Date(clock.now.getTime() + ms)) };
}

t.test('the event body and its outbox row', async (t) => {
  const job = jobResource('job_123');
  const id = webhookEventId('job_123', 'job.completed');
  const body = buildJobEvent('job.completed', job, T0);
  t.strictSame(body, { id, event: 'job.completed', job, created_at: '2026-03-01T12:00:00.000Z' }, '{id, event, job, created_at}');
  t.equal(Object.keys(body).join(','), 'id,event,job,created_at', 'in that order');
  t.equal(id, `whk_${createHash('sha256').update('job_123\njob.completed').digest('hex').slice(0, 24)}`, 'the id is the store’s webhookEventId');
  t.equal(buildJobEvent('job.failed', job, T0).id, webhookEventId('job_123', 'job.failed'), 'job.failed has its own id');
  t.strictSame(
    jobWebhookEvent({ accountId: 'acc_1', url: 'https://h.example/x', event: 'job.completed', job, createdAt: T0 }),
    { id, accountId: 'acc_1', jobId: 'job_123', url: 'https://h.example/x', event: 'job.completed', payload: JSON.stringify(body), createdAt: T0 },
    'the outbox row carries the serialised body',
  );
});

t.test('back-off schedule', async (t) => {
  const nominal = [1, 2, 3, 4, 5, 6, 7, 8, 9, 30, 1000].map((n) => webhookRetryDelayMs(n, () => 0.5));
  t.strictSame(nominal, [30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000, 3_600_000, 3_600_000], '30 s doubling, capped at 1 h');
  t.strictSame([1, 2, 7, 8].map((n) => webhookRetryDelayMs(n, () => 0)), [24_000, 48_000, 1_536_000, 2_880_000], 'jitter low end: 0.8 ×');
  t.strictSame([1, 2, 7, 8].map((n) => webhookRetryDelayMs(n, () => 0.999_999)), [36_000, 72_000, 2_303_999, 3_600_000], 'jitter high end: just under 1.2 ×, never past 1 h');
  t.equal(webhookRetryDelayMs(0, () => 0.5), 30_000, 'attempt 0 counts as the first');
  // How many attempts 24 h allows at the nominal delays (the last one on the deadline itself).
  let at = 0;
  let attempts = 1;
  while (at < 24 * H) {
    at = Math.min(at + webhookRetryDelayMs(attempts, () => 0.5), 24 * H);
    attempts++;
  }
  t.equal(attempts, 31, '31 attempts in 24 h at the nominal delays');
});

t.test('500 twice then 200: three attempts, same id and bytes, fresh signatures, delivered', async (t) => {
  const store = await pgliteStore(t);
  const acc = await store.accounts.create({ name: 'hooks' });
  const rx = await receiver(t, (_r, res, n) => {
    res.statusCode = n <= 2 ? 500 : 200;
    res.end(n <= 2 ? 'boom' : 'thanks');
  });
  const ev = await enqueue(store, acc, 'job_retry', rx.url('/hook?token=abc'));
  const { d, advance, clock } = clocked(store);

  t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'retry', error: 'HTTP 500', nextAttemptAt: new Date(T0.getTime() + 30_000) }], 'attempt 1: 500, retry in 30 s');
  t.strictSame(await d.runOnce(), [], 'nothing due before then');
  advance(29_999);
  t.strictSame(await d.runOnce(), [], 'still nothing 1 ms before');
  advance(1);
  const t2 = clock.now.getTime();
  t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 2, outcome: 'retry', error: 'HTTP 500', nextAttemptAt: new Date(t2 + 60_000) }], 'attempt 2: 500, retry in 1 min');
  advance(60_000);
  const t3 = clock.now.getTime();
  t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 3, outcome: 'delivered', status: 200 }], 'attempt 3: delivered');
  t.strictSame(await d.runOnce(), [], 'and never again');

  t.equal(rx.requests.length, 3, 'three requests');
  t.strictSame(
    rx.requests.map((r) => r.id),
    [ev.id, ev.id, ev.id],
    'the same X-Webhook-Id on every attempt',
  );
  t.ok(
    rx.requests.every((r) => r.body === ev.payload),
    'the same body bytes on every attempt (the payload fixed at enqueue)',
  );
  t.strictSame(JSON.parse(rx.requests[0]!.body), { id: ev.id, event: 'job.completed', job: jobResource('job_retry'), created_at: T0.toISOString() }, 'the body');
  const sentAt = [T0.getTime(), t2, t3].map((ms) => Math.floor(ms / 1000));
  t.strictSame(
    rx.requests.map((r) => r.signature),
    sentAt.map((u) => expectedSignature(u, ev.payload)),
    'X-Signature = t=<send time>,v1=HMAC-SHA256(secret, t.body), recomputed per attempt',
  );
  t.not(rx.requests[0]!.signature, rx.requests[1]!.signature, 'so two attempts carry different signatures');
  const h = rx.requests[0]!.headers;
  t.equal(rx.requests[0]!.method, 'POST');
  t.equal(rx.requests[0]!.path, '/hook?token=abc', 'the URL as given, query included');
  t.equal(h['content-type'], 'application/json');
  t.equal(h['user-agent'], 'email-validation-service-webhooks/0.1');
  t.equal(h['content-length'], String(Buffer.byteLength(ev.payload)));

  t.strictSame(await store.webhooks.get(ev.id), {
    ...ev,
    status: 'delivered',
    attempts: 3,
    next_attempt_at: new Date(t3 + 60_000), // the lease of the last claim
    last_error: 'HTTP 500', // the last failure, kept for operators
    delivered_at: new Date(t3),
  });
});

t.test('gives up 24 h after the event', async (t) => {
  const store = await pgliteStore(t);
  const acc = await store.accounts.create();
  const rx = await receiver(t, (_r, res) => {
    res.statusCode = 503;
    res.end();
  });
  const ev = await enqueue(store, acc, 'job_down', rx.url());
  const { d, clock } = clocked(store);
  clock.now = new Date(T0.getTime() + 24 * H - 10_000);
  t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'retry', error: 'HTTP 503', nextAttemptAt: new Date(T0.getTime() + 24 * H) }], '10 s before the deadline: the retry lands on the deadline, not 30 s later');
  clock.now = new Date(T0.getTime() + 24 * H);
  const error = 'gave up after 2 attempts in 24 h; last: HTTP 503';
  t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 2, outcome: 'failed', error }], 'at the deadline: the last attempt fails, given up');
  t.strictSame(await store.webhooks.get(ev.id), { ...ev, status: 'failed', attempts: 2, next_attempt_at: new Date(T0.getTime() + 24 * H + 60_000), last_error: error });
  clock.now = new Date(T0.getTime() + 48 * H);
  t.strictSame(await d.runOnce(), [], 'a failed event is never sent again');
  t.equal(rx.requests.length, 2);

  // One found long after its deadline (the service was down) still gets one attempt.
  const late = await enqueue(store, acc, 'job_late', rx.url());
  t.strictSame(await d.runOnce(), [{ id: late.id, attempt: 1, outcome: 'failed', error: 'gave up after 1 attempts in 24 h; last: HTTP 503' }], 'one attempt, then given up');
  t.equal(rx.requests.length, 3);
});

t.test('private targets: refused unless allowPrivate', async (t) => {
  const store = await pgliteStore(t);
  const acc = await store.accounts.create();
  const rx = await receiver(t);

  await t.test('a loopback literal is refused and given up at once', async (t) => {
    const ev = await enqueue(store, acc, 'job_loop', rx.url());
    const { d } = clocked(store, { allowPrivate: false });
    const error = 'refused: 127.0.0.1 is a loopback address';
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'failed', error }]);
    t.equal(rx.requests.length, 0, 'no request reached the receiver');
    t.equal((await store.webhooks.get(ev.id))?.status, 'failed');
    t.equal((await store.webhooks.get(ev.id))?.last_error, error);
  });

  await t.test('the same target with allowPrivate is delivered', async (t) => {
    const ev = await enqueue(store, acc, 'job_loop_ok', rx.url());
    const { d } = clocked(store, { allowPrivate: true });
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'delivered', status: 200 }]);
    t.strictSame(
      rx.requests.map((r) => r.id),
      [ev.id],
    );
  });

  await t.test('IPv4-mapped ::ffff:127.0.0.1 is refused', async (t) => {
    const ev = await enqueue(store, acc, 'job_mapped', `http://[::ffff:127.0.0.1]:${rx.port}/hook`);
    const { d } = clocked(store, { allowPrivate: false });
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'failed', error: 'refused: ::ffff:7f00:1 is a loopback address' }]);
    t.equal(rx.requests.length, 1, 'nothing new reached the receiver');
  });

  await t.test('a DNS name resolving to 10.0.0.1 is refused, and retried (DNS may change)', async (t) => {
    const table: Record<string, string> = { 'hooks.test': '10.0.0.1' };
    const resolve: Resolver = async (h) => [{ address: table[h]!, family: 4 }];
    const ev = await enqueue(store, acc, 'job_dns', `http://hooks.test:${rx.port}/hook`);
    const { d, advance } = clocked(store, { allowPrivate: false, resolve });
    const error = 'hooks.test resolves to 10.0.0.1, a private address';
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'retry', error, nextAttemptAt: new Date(T0.getTime() + 30_000) }]);
    t.equal((await store.webhooks.get(ev.id))?.status, 'pending');
    t.equal(rx.requests.length, 1, 'no request');
    // The owner fixes the record (here: to a loopback address, refused too).
    table['hooks.test'] = '127.0.0.1';
    advance(30_000);
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 2, outcome: 'retry', error: 'hooks.test resolves to 127.0.0.1, a loopback address', nextAttemptAt: new Date(T0.getTime() + 90_000) }]);
    t.equal(rx.requests.length, 1, 'still no request');
  });

  await t.test('the connection goes to the address the guard resolved (pinned), resolved once per attempt', async (t) => {
    const calls: string[] = [];
    // No DNS knows hooks.test: only the guard's answer can take the request to the receiver.
    const resolve: Resolver = async (h) => {
      calls.push(h);
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const ev = await enqueue(store, acc, 'job_pinned', `http://hooks.test:${rx.port}/pinned`);
    const { d } = clocked(store, { allowPrivate: true, resolve });
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'delivered', status: 200 }]);
    t.strictSame(calls, ['hooks.test'], 'one resolution: the connect did not resolve again');
    const r = rx.requests.at(-1)!;
    t.equal(r.id, ev.id);
    t.equal(r.headers.host, `hooks.test:${rx.port}`, 'Host is the URL’s host');
  });
});

t.test('failures are retried with a reason that carries no URL', async (t) => {
  const store = await pgliteStore(t);
  const acc = await store.accounts.create();

  await t.test('a receiver that never answers: timeout', async (t) => {
    const rx = await receiver(t, () => {}); // holds the request open
    const ev = await enqueue(store, acc, 'job_slow', rx.url('/slow?secret=s3cr3t'));
    const { d } = clocked(store, { timeoutMs: 200, leaseMs: 1_000 });
    const started = Date.now();
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'retry', error: 'no response in 200 ms', nextAttemptAt: new Date(T0.getTime() + 30_000) }]);
    t.ok(Date.now() - started < 5_000, 'bounded by the timeout');
  });

  await t.test('nothing listening: connection refused', async (t) => {
    // A port that was just free (listened on, then closed).
    const srv = createServer();
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    const free = (srv.address() as AddressInfo).port;
    await new Promise((r) => srv.close(r));
    const ev = await enqueue(store, acc, 'job_refused', `http://127.0.0.1:${free}/x`);
    const { d } = clocked(store);
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'retry', error: 'connection failed (ECONNREFUSED)', nextAttemptAt: new Date(T0.getTime() + 30_000) }]);
  });

  await t.test('a redirect is not followed: retried', async (t) => {
    const rx = await receiver(t, (_r, res) => {
      res.statusCode = 302;
      res.setHeader('location', 'http://169.254.169.254/latest/meta-data');
      res.end();
    });
    const ev = await enqueue(store, acc, 'job_redirect', rx.url());
    const { d } = clocked(store);
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'retry', error: 'HTTP 302', nextAttemptAt: new Date(T0.getTime() + 30_000) }]);
    t.equal(rx.requests.length, 1, 'one request, no second one to the Location');
  });

  await t.test('4xx and 429 are retried too', async (t) => {
    for (const status of [400, 404, 410, 429]) {
      const rx = await receiver(t, (_r, res) => {
        res.statusCode = status;
        res.end();
      });
      const ev = await enqueue(store, acc, `job_${status}`, rx.url());
      const { d } = clocked(store);
      t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'retry', error: `HTTP ${status}`, nextAttemptAt: new Date(T0.getTime() + 30_000) }], `${status}`);
    }
  });

  await t.test('an endless response body is cut off; the 2xx delivers', async (t) => {
    const rx = await receiver(t, (_r, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(16 * 1024, 0x61);
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const ev = await enqueue(store, acc, 'job_big', rx.url());
    const { d } = clocked(store);
    t.strictSame(await d.runOnce(), [{ id: ev.id, attempt: 1, outcome: 'delivered', status: 200 }]);
  });

  t.test('no error names the URL', async (t) => {
    const rows = await Promise.all(['job_slow', 'job_refused', 'job_redirect'].map((j) => store.webhooks.listForJob(j)));
    const errors = rows.flat().map((r) => r.last_error ?? '');
    t.equal(errors.length, 3);
    t.notOk(
      errors.some((e) => e.includes('s3cr3t') || e.includes('http')),
      'last_error never holds the URL or its query',
    );
  });
});

t.test('durability: stopped mid-way, a new dispatcher on the same store delivers the rest, each id once', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-webhooks-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  let db: Db = await freshPglite(dir);
  t.teardown(() => db.close().catch(() => {}));
  await migrate(db);
  let store = new Store(db);
  const acc = await store.accounts.create();
  const rx = await receiver(t, async (_r, res) => {
    await new Promise((r) => setTimeout(r, 30)); // a receiver that takes a moment
    res.end('ok');
  });
  const n = 20;
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await enqueue(store, acc, `job_dur_${i}`, rx.url(), new Date())).id);

  const logA = recordingLogger();
  const a = new WebhookDispatcher({ store, secrets: SECRETS, allowPrivate: true, pollMs: 20, concurrency: 2, logger: logA.logger });
  a.start();
  await rx.until(5);
  await a.stop();
  const deliveredByA = logA.count('webhook delivered');
  t.ok(deliveredByA >= 5 && deliveredByA < n, `the first dispatcher stopped mid-way (${deliveredByA} of ${n})`);
  t.equal(rx.requests.length, deliveredByA, 'stop() waited for its attempts in flight: every request it sent is recorded delivered');
  t.equal(logA.lines.filter((l) => l.level !== 'info').length, 0, 'no failure');

  // A process restart: the outbox is all that carries over.
  await db.close();
  db = await openPglite(dir);
  store = new Store(db);
  const logB = recordingLogger();
  const b = new WebhookDispatcher({ store, secrets: SECRETS, allowPrivate: true, pollMs: 20, concurrency: 2, logger: logB.logger });
  b.start();
  await logB.until('webhook delivered', n - deliveredByA);
  await b.stop();

  const perId = new Map<string, number>();
  for (const r of rx.requests) perId.set(r.id, (perId.get(r.id) ?? 0) + 1);
  t.strictSame([...perId.keys()].sort(), [...ids].sort(), 'every event reached the receiver');
  t.ok([...perId.values()].every((c) => c === 1), 'each exactly once');
  const rows = await Promise.all(ids.map((id) => store.webhooks.get(id)));
  t.ok(
    rows.every((r) => r?.status === 'delivered' && r.attempts === 1),
    'every row delivered after one attempt',
  );
});

async function twoDispatchers(t: Tap, stores: [Store, Store]): Promise<void> {
  const acc = await stores[0].accounts.create();
  const rx = await receiver(t, async (_r, res) => {
    await new Promise((r) => setTimeout(r, 5 + Math.floor(Math.random() * 25))); // a receiver of uneven speed: the two dispatchers' deliveries interleave
    res.end('ok');
  });
  const n = 40;
  for (let i = 0; i < n; i++) await enqueue(stores[0], acc, `job_two_${i}`, rx.url(), new Date());
  const logs = [recordingLogger(), recordingLogger()];
  const ds = stores.map((store, i) => new WebhookDispatcher({ store, secrets: SECRETS, allowPrivate: true, pollMs: 10, concurrency: 4, logger: logs[i]!.logger }));
  for (const d of ds) d.start();
  await rx.until(n);
  await Promise.all(ds.map((d) => d.stop()));
  t.equal(rx.requests.length, n, `${n} requests`);
  t.equal(new Set(rx.requests.map((r) => r.id)).size, n, 'no event sent twice');
  t.equal(rx.maxConcurrentPerId, 1, 'never two requests for one event at the same time');
  const counts = logs.map((l) => l.count('webhook delivered'));
  t.equal(counts[0]! + counts[1]!, n, 'every event delivered once between them');
  t.ok(counts[0]! > 0 && counts[1]! > 0, `both dispatchers worked (${counts.join(' + ')})`);
}

t.test('two dispatchers on one store (PGlite)', async (t) => {
  const store = await pgliteStore(t);
  await twoDispatchers(t, [store, store]);
});

t.test('two dispatchers on one Postgres (two processes’ pools)', async (t) => {
  const why = await pgUnreachable();
  if (why) {
    if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${PG_SHOWN} is unreachable: ${why}`);
    else t.plan(0, `Postgres at ${PG_SHOWN} is unreachable (${why}): skipping`);
    return;
  }
  const { url, drop } = await freshSchema();
  const a = await openPostgres(url);
  const b = await openPostgres(url);
  t.teardown(async () => {
    await a.close();
    await b.close();
    await drop();
  });
  await migrate(a);
  await twoDispatchers(t, [new Store(a), new Store(b)]);
});

t.test('options', async (t) => {
  const store = await pgliteStore(t);
  t.throws(() => new WebhookDispatcher({ store: { webhooks: store.webhooks } }), /webhook secrets/, 'the accounts\' secrets are required');
  t.throws(() => new WebhookDispatcher({ store, secrets: SECRETS, timeoutMs: 10_000, leaseMs: 10_000 }), RangeError, 'the lease must outlast an attempt');
  // Every poll of the loop asks the outbox for due events: counted, with how many run at once.
  let polls = 0;
  let polling = 0;
  let most = 0;
  const due = store.webhooks.due.bind(store.webhooks);
  store.webhooks.due = async (...args) => {
    polls++;
    most = Math.max(most, ++polling);
    try {
      return await due(...args);
    } finally {
      polling--;
    }
  };
  const d = new WebhookDispatcher({ store, secrets: SECRETS, pollMs: 5 });
  d.start();
  d.start(); // twice is once
  d.kick();
  await until(() => polls >= 5, 5000, "the dispatcher's first 5 polls");
  t.equal(most, 1, 'started twice, one poll loop');
  await d.stop();
  await d.stop(); // and stopping twice is fine
  const stopped = polls;
  d.kick();
  d.start(); // no restart after stop (a loop's first poll would start at once)
  t.equal(polls, stopped, 'no poll after stop, nor after a start that follows it');
  await d.stop();
  t.equal(polls, stopped, 'still none');
});
