// The Analytics conformance suite on ClickHouseAnalytics, against a real ClickHouse
// (CLICKHOUSE_URL, default http://127.0.0.1:8123; Debian's clickhouse-server 18.16 in CI, started
// by scripts/infra-up.sh). Each test gets a database of its own, dropped at teardown. "Backend
// down" is a TCP forwarder between the adapter and the server: closing it leaves the adapter's
// URL pointing at a closed port (connections refused, open ones cut); reopening it on the same
// port brings the server back. Unreachable server: skipped, unless CI_REQUIRE_SERVICES=1 (then it
// fails).
//
// Also here: the quoting helpers against hostile strings (text and a round trip through the
// server), and exact counts with duplicates stored as separate parts, before and after a merge.

import t from 'tap';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { createClient } from '@clickhouse/client';
import { ClickHouseAnalytics, chIdent, chString, chUInt, DEFAULT_CLICKHOUSE_URL, openClickHouseAnalytics } from '../src/analytics/clickhouse-analytics.ts';
import type { Analytics, Decision } from '../src/analytics/analytics.ts';
import { analyticsConformance, type Tap } from './analytics-conformance.ts';

const URL_ = process.env.CLICKHOUSE_URL || DEFAULT_CLICKHOUSE_URL;
const REQUIRED = process.env.CI_REQUIRE_SERVICES === '1';
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
/** A string for a test name, ASCII only (a raw U+2028 would break the TAP stream). */
const show = (s: string): string => JSON.stringify(s).replace(/[^\x20-\x7e]/gu, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);

async function unreachable(): Promise<string | undefined> {
  try {
    const res = await fetch(new URL('/?query=SELECT%201', URL_), { signal: AbortSignal.timeout(3000) });
    const body = (await res.text()).trim();
    return res.ok && body === '1' ? undefined : `HTTP ${res.status}: ${body.slice(0, 200)}`;
  } catch (err) {
    const e = err as Error & { cause?: Error };
    return e.cause?.message ?? e.message;
  }
}

const admin = createClient({ url: URL_, request_timeout: 30_000 });
const adminRows = async <T>(query: string): Promise<T[]> => (await (await admin.query({ query, format: 'JSONEachRow' })).json()) as T[];

/** A database name of its own, dropped when `t` ends (after `before`, which closes what uses it). */
function freshDatabase(t: Tap, before: () => Promise<void> = async () => {}): string {
  const name = `svc_test_${randomBytes(6).toString('hex')}`;
  t.teardown(async () => {
    await before();
    await admin.command({ query: `DROP DATABASE IF EXISTS ${chIdent(name)}` });
  });
  return name;
}

/** A TCP forwarder to the server that can be closed (a closed port) and reopened on the same port. */
class Forwarder {
  #server: net.Server | undefined;
  readonly #sockets = new Set<net.Socket>();
  port = 0;
  readonly #target: URL;

  constructor(target: string) {
    this.#target = new URL(target);
  }

  get url(): string {
    return `${this.#target.protocol}//127.0.0.1:${this.port}`;
  }

  async open(): Promise<void> {
    if (this.#server) return;
    const server = net.createServer((client) => {
      const upstream = net.connect(Number(this.#target.port || 8123), this.#target.hostname);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.address() as net.AddressInfo).port;
    this.#server = server;
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

function decision(i: number, over: Partial<Decision> = {}): Decision {
  return {
    id: `ch_${i}`,
    account_id: 'acc_a',
    email_hash: sha256(`u${i}@example.com`),
    domain: 'example.com',
    result: 'valid',
    reason_code: 'accepted',
    layer: 'smtp',
    mx_host: null,
    latency_ms: 10,
    job_id: null,
    source: 'job',
    credits_charged: 1,
    decided_at: new Date(Date.UTC(2025, 0, 1, 0, 0, 0, i)),
    ...over,
  };
}

const HOSTILE = [
  '',
  "'",
  "''",
  '\\',
  "\\'",
  "'\\",
  "x' OR '1'='1",
  "'; DROP DATABASE default; --",
  '\u0000',
  'a\u0000b',
  '\n\r\t\b\f\v\u0007\u001b',
  '\\x41',
  '\\0',
  '`ident`',
  '"double"',
  '{name:String}',
  '?',
  '$1',
  '日本語 ünïcødé',
  '🙂👍🏽',
  '\u2028\u2029',
  '\u007f\u0080\u00ff',
  String.fromCharCode(...Array.from({ length: 128 }, (_, i) => i)),
];

const why = await unreachable();
if (why) {
  if (REQUIRED) t.fail(`CI_REQUIRE_SERVICES=1 but ClickHouse at ${URL_} is unreachable: ${why}`);
  else t.plan(0, `ClickHouse at ${URL_} is unreachable (${why}): skipping; run scripts/infra-up.sh, or set CLICKHOUSE_URL; CI_REQUIRE_SERVICES=1 makes this a failure`);
} else {
  t.teardown(() => admin.close());

  t.test('quoting helpers', async (t) => {
    t.equal(chString("it's"), "'it\\x27s'");
    t.equal(chString('a\\b'), "'a\\x5cb'");
    t.equal(chString('é'), "'\\xc3\\xa9'");
    t.equal(chString(''), "''");
    for (const s of HOSTILE) t.match(chString(s), /^'(?:[\x20-\x26\x28-\x5b\x5d-\x7e]|\\x[0-9a-f]{2})*'$/, `printable ASCII and \\xHH escapes only: ${show(s)}`);
    t.throws(() => chString(5 as unknown as string), TypeError);
    t.equal(chUInt(0), '0');
    t.equal(chUInt(4_294_967_295_000), '4294967295000');
    for (const bad of [-1, 1.5, Number.NaN, Infinity, 2 ** 53, '1' as unknown as number, '1; DROP' as unknown as number]) t.throws(() => chUInt(bad), RangeError, `chUInt(${String(bad)})`);
    t.equal(chIdent('svc_test_01'), '`svc_test_01`');
    for (const bad of ['', '1abc', 'a-b', 'a`b', 'a b', 'db.t', 'x'.repeat(64), "a'"]) t.throws(() => chIdent(bad), RangeError, `chIdent(${show(bad)})`);

    // Through the server: every hostile string comes back byte for byte, and matches only itself.
    const lone = '\ud800'; // encoded as U+FFFD, like Buffer.from does
    const strings = [...HOSTILE, lone, randomBytes(64).toString('latin1')];
    const rows = await adminRows<{ i: string; s: string; eq: string | number }>(
      strings.map((s, i) => `SELECT ${i} AS i, ${chString(s)} AS s, ${chString(s)} = ${chString(s)} AS eq`).join(' UNION ALL ') + ' ',
    );
    rows.sort((a, b) => Number(a.i) - Number(b.i));
    t.equal(rows.length, strings.length);
    for (const [i, s] of strings.entries()) {
      t.equal(rows[i]!.s, s === lone ? '\ufffd' : s, `round trip ${show(s)}`);
      t.equal(Number(rows[i]!.eq), 1);
    }
    const [n] = await adminRows<{ n: string }>(`SELECT ${chUInt(2 ** 53 - 1)} AS n`);
    t.equal(n!.n, String(2 ** 53 - 1));
  });

  t.test('conformance', async (t) => {
    analyticsConformance(t, {
      name: 'clickhouse',
      async fresh(t: Tap) {
        const fwd = new Forwarder(URL_);
        await fwd.open();
        const opened: Analytics[] = [];
        const database = freshDatabase(t, async () => {
          await fwd.open(); // a test may end with the server "down": close() writes through it
          for (const a of opened) await a.close().catch(() => {});
          await fwd.close();
        });
        return {
          async open(opts) {
            const a = new ClickHouseAnalytics({ ...opts, url: fwd.url, database, requestTimeoutMs: 5000 });
            opened.push(a);
            return a;
          },
          async setDown(down) {
            if (down) await fwd.close();
            else await fwd.open();
          },
        };
      },
    });
  });

  t.test('duplicates stored as separate parts count once, before and after a merge', async (t) => {
    let a: ClickHouseAnalytics | undefined;
    const database = freshDatabase(t, async () => void (await a?.close().catch(() => {})));
    a = await openClickHouseAnalytics({ url: URL_, database, flushIntervalMs: 60_000, batchSize: 4 });
    const table = `${chIdent(database)}.${chIdent('validation_decisions')}`;
    const email = sha256('dup@example.com');
    const ds = [
      decision(1, { email_hash: email, latency_ms: 10 }),
      decision(2, { result: 'invalid', reason_code: 'mailbox_not_found', latency_ms: 20 }),
      decision(3, { domain: 'other.test', latency_ms: 33 }),
    ];
    // Five separate inserts (five parts), each holding copies; one with the same row twice.
    await a.record([ds[0]!, ds[1]!, ds[0]!]);
    await a.flush();
    for (let k = 0; k < 3; k++) {
      await a.record(ds);
      await a.flush();
    }
    await a.record([ds[2]!]);
    await a.flush();
    const stored = async (): Promise<number> => Number((await adminRows<{ n: string }>(`SELECT count() AS n FROM ${table}`))[0]!.n);
    t.equal(await stored(), 13, 'thirteen physical rows');
    const window = { account_id: 'acc_a', from: new Date(Date.UTC(2025, 0, 1)), to: new Date(Date.UTC(2025, 0, 2)) };
    const check = async (when: string): Promise<void> => {
      t.strictSame(await a!.countByResult(window), { valid: 2, valid_role_based: 0, risky: 0, invalid: 1, unknown: 0 }, `${when}: countByResult`);
      t.strictSame((await a!.decisionsFor({ account_id: 'acc_a', email_hash: email })).map((d) => d.id), ['ch_1'], `${when}: decisionsFor`);
      t.strictSame(
        await a!.domainSummary(window),
        [
          { domain: 'example.com', total: 2, counts: { valid: 1, valid_role_based: 0, risky: 0, invalid: 1, unknown: 0 }, mean_latency_ms: 15 },
          { domain: 'other.test', total: 1, counts: { valid: 1, valid_role_based: 0, risky: 0, invalid: 0, unknown: 0 }, mean_latency_ms: 33 },
        ],
        `${when}: domainSummary`,
      );
    };
    await check('before a merge');
    await admin.command({ query: `OPTIMIZE TABLE ${table} FINAL` });
    t.equal(await stored(), 3, 'the merge folds the copies (ReplacingMergeTree by id)');
    await check('after a merge');
  });

  t.test('an adapter started while ClickHouse is unreachable buffers, then creates its schema and catches up', async (t) => {
    const fwd = new Forwarder(URL_);
    await fwd.open();
    await fwd.close(); // fwd.port is now a closed port
    let a: ClickHouseAnalytics | undefined;
    const database = freshDatabase(t, async () => {
      await a?.close().catch(() => {});
      await fwd.close();
    });
    await t.rejects(openClickHouseAnalytics({ url: fwd.url, database }), 'openClickHouseAnalytics() needs the server');
    a = new ClickHouseAnalytics({ url: fwd.url, database, flushIntervalMs: 10, retryMinMs: 20, retryMaxMs: 200 });
    await a.record([decision(1), decision(2)]);
    await t.rejects(a.flush());
    t.equal(a.pending, 2);
    await fwd.open();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no catch-up within 15 s: ${JSON.stringify(a!.stats())}`)), 15_000);
      const on = (): void => {
        if (a!.pending > 0) return;
        clearTimeout(timer);
        a!.off('written', on);
        resolve();
      };
      a!.on('written', on);
    });
    t.equal((await a.countByResult({ account_id: 'acc_a', from: new Date(0), to: new Date(Date.UTC(2030, 0, 1)) })).valid, 2);
    const [db] = await adminRows<{ n: string }>(`SELECT count() AS n FROM system.databases WHERE name = ${chString(database)}`);
    t.equal(Number(db!.n), 1, 'the database was created on the first write');
  });
}
