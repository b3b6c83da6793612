// One conformance suite for the Analytics port, run against every adapter: SQL (PGlite and
// Postgres, analytics-sql.test.ts) and ClickHouse (analytics-clickhouse.test.ts). Each adapter
// supplies fresh, isolated, empty backends and a switch that makes the backend unreachable and
// reachable again; everything here is written once against the port.
//
// Counts are asserted exactly. Waits are on the port's events ('written', 'write_failed',
// 'dropped') with a timeout, never on a bare sleep.

import tap from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { VALIDATION_RESULTS } from '@svc/contracts';
import type { Analytics, AnalyticsOptions, Decision, OutcomeFact, ResultCounts } from '../src/analytics/analytics.ts';

export type Tap = Parameters<Parameters<typeof tap.test>[0]>[0];

export interface AnalyticsTarget {
  /** A new Analytics on this backend (every one opened shares its data and its down/up switch); closed at teardown. */
  open(opts?: AnalyticsOptions): Promise<Analytics>;
  /** Makes the backend unreachable (writes and queries fail as a stopped server's would), or reachable again. */
  setDown(down: boolean): Promise<void>;
}

export interface AnalyticsAdapter {
  readonly name: string;
  /** A fresh, empty backend isolated from every other one, removed when `t` ends. */
  fresh(t: Tap): Promise<AnalyticsTarget>;
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/** 2025-03-01T12:00:00.999Z: one millisecond before a second boundary. */
const T0 = Date.UTC(2025, 2, 1, 12, 0, 0, 999);
const WIDE = { from: new Date(Date.UTC(2000, 0, 1)), to: new Date(Date.UTC(2100, 0, 1)) };
const HOSTILE = `it's "quoted" \\ back\\slash \\' {br,aces} NULL ' OR '1'='1 --; tab\t new\nline \r ünïcødé 日本 🙂 \`tick\` ?{p:String}`;

let seq = 0;
const run = randomBytes(3).toString('hex');

/** A decision with defaults; every call gets a new id and a later decided_at. */
function dec(over: Partial<Decision> = {}): Decision {
  seq++;
  return {
    id: `d_${run}_${String(seq).padStart(6, '0')}`,
    account_id: 'acc_a',
    email_hash: sha256(`user${seq}@example.com`),
    domain: 'example.com',
    result: 'valid',
    reason_code: 'accepted',
    layer: 'smtp',
    mx_host: 'mx1.example.com',
    latency_ms: 100,
    job_id: null,
    source: 'single',
    credits_charged: 1,
    decided_at: new Date(T0 + seq),
    ...over,
  };
}

const counts = (partial: Partial<ResultCounts>): ResultCounts => ({ ...(Object.fromEntries(VALIDATION_RESULTS.map((r) => [r, 0])) as ResultCounts), ...partial });

/** Resolves once cond() holds, checking now and after each `event`; rejects after `ms`. */
function until(a: Analytics, event: 'written' | 'write_failed' | 'dropped', cond: () => boolean, what: string, ms = 15_000): Promise<void> {
  return new Promise((resolve, reject) => {
    if (cond()) return resolve();
    const on = (): void => {
      if (!cond()) return;
      clearTimeout(timer);
      a.off(event as 'written', on);
      resolve();
    };
    const timer = setTimeout(() => {
      a.off(event as 'written', on);
      reject(new Error(`timed out after ${ms} ms waiting for ${what} (stats ${JSON.stringify(a.stats())})`));
    }, ms);
    a.on(event as 'written', on);
  });
}

export function analyticsConformance(t: Tap, adapter: AnalyticsAdapter): void {
  t.test('outcome matrix: each fact against the latest decision at or before it; signals apart; windows, accounts, redeliveries; domains', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000 });
    const h = (s: string) => sha256(`${run}:${s}`);
    const at = (s: number) => new Date(T0 + s * 1000);
    // Decisions: x valid at 10 s then invalid at 100 s; y risky at 10 s; z (another account) valid.
    await a.record([
      dec({ email_hash: h('x'), result: 'valid', decided_at: at(10), domain: 'one.example' }),
      dec({ email_hash: h('x'), result: 'invalid', reason_code: 'mailbox_not_found', decided_at: at(100), domain: 'one.example' }),
      dec({ email_hash: h('y'), result: 'risky', reason_code: 'catch_all', decided_at: at(10), domain: 'two.example' }),
      dec({ account_id: 'acc_b', email_hash: h('z'), result: 'valid', decided_at: at(10) }),
    ]);
    let n = 0;
    const fact = (over: Partial<OutcomeFact>): OutcomeFact => ({ id: `f_${run}_${++n}`, account_id: 'acc_a', email_hash: h('x'), domain: 'one.example', outcome: 'bounced', label: 'bounced_hard', signal: null, source: 'api', occurred_at: at(50), ...over });
    const redelivered = fact({ label: 'delivered', outcome: 'replied', occurred_at: at(10) }); // at the decision's own time: joined to it
    await a.recordOutcomes([
      fact({}), // x at 50 s: the valid decision (the invalid one is later)
      redelivered,
      fact({ occurred_at: at(200) }), // x at 200 s: the invalid decision
      fact({ email_hash: h('y'), domain: 'two.example', label: 'bounced_soft' }),
      fact({ email_hash: h('nobody'), domain: 'two.example', label: 'blocked_policy' }), // never validated
      fact({ occurred_at: at(5) }), // before any decision of x
      fact({ label: 'unknown', outcome: 'sent', signal: 'sent' }),
      fact({ email_hash: h('y'), domain: 'two.example', label: 'unknown', outcome: 'opened', signal: 'open' }),
      fact({ account_id: 'acc_b', email_hash: h('z') }), // another account
      fact({ occurred_at: at(5000) }), // outside the window below
    ]);
    await a.recordOutcomes([redelivered]);
    await a.flush();
    const m = await a.outcomeMatrix({ account_id: 'acc_a', from: at(0), to: at(1000) });
    const zero = { delivered: 0, bounced_hard: 0, bounced_soft: 0, blocked_policy: 0, unknown: 0 };
    t.strictSame(m.claims, {
      valid: { ...zero, bounced_hard: 1, delivered: 1 },
      valid_role_based: zero,
      risky: { ...zero, bounced_soft: 1 },
      invalid: { ...zero, bounced_hard: 1 },
      unknown: zero,
      not_validated: { ...zero, blocked_policy: 1, bounced_hard: 1 },
    });
    t.strictSame(m.sent, { valid: 1, valid_role_based: 0, risky: 0, invalid: 0, unknown: 0, not_validated: 0 });
    t.strictSame(m.opens, { valid: 0, valid_role_based: 0, risky: 1, invalid: 0, unknown: 0, not_validated: 0 });
    const b = await a.outcomeMatrix({ account_id: 'acc_b', from: at(0), to: at(1000) });
    t.equal(b.claims.valid.bounced_hard, 1, 'the other account sees its own');
    const edge = await a.outcomeMatrix({ account_id: 'acc_a', from: at(50), to: at(200) });
    t.equal(edge.claims.valid.bounced_hard + edge.claims.invalid.bounced_hard, 1, 'from inclusive (50 s), to exclusive (200 s)');
    const d = await a.outcomeDomains({ account_id: 'acc_a', from: at(0), to: at(1000) });
    t.strictSame(d.map((x) => [x.domain, x.total]), [['one.example', 5], ['two.example', 3]]);
    t.strictSame((await a.outcomeDomains({ account_id: 'acc_a', from: at(0), to: at(1000), limit: 1 })).map((x) => x.domain), ['one.example']);
    await t.rejects(a.recordOutcomes([fact({ email_hash: 'not-a-hash' })]), TypeError, 'a malformed fact is refused');
  });

  t.test('an empty backend answers zeros', async (t) => {
    const a = await (await adapter.fresh(t)).open();
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({}), 'every result, 0');
    t.strictSame(await a.decisionsFor({ account_id: 'acc_a', email_hash: sha256('x') }), []);
    t.strictSame(await a.domainSummary({ account_id: 'acc_a', ...WIDE }), []);
    t.strictSame(a.stats(), { pending: 0, written: 0, dropped: 0, failures: 0, lastError: undefined });
  });

  t.test('counts per result; accounts are isolated', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000 });
    const evil = `acc' OR '1'='1`;
    const plan: Array<[string, Decision['result'], number]> = [
      ['acc_a', 'valid', 3],
      ['acc_a', 'risky', 2],
      ['acc_a', 'invalid', 1],
      ['acc_a', 'unknown', 1],
      ['acc_a', 'valid_role_based', 1],
      ['acc_b', 'invalid', 4],
      [evil, 'risky', 2],
      [HOSTILE, 'unknown', 1],
    ];
    const rows: Decision[] = [];
    for (const [account_id, result, n] of plan) for (let i = 0; i < n; i++) rows.push(dec({ account_id, result, email_hash: sha256(`shared${i}@example.com`) }));
    await a.record(rows);
    t.equal(a.pending, rows.length, 'buffered');
    await a.flush();
    t.equal(a.pending, 0, 'written');
    t.equal(a.stats().written, rows.length);
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({ valid: 3, risky: 2, invalid: 1, unknown: 1, valid_role_based: 1 }), 'acc_a');
    t.strictSame(await a.countByResult({ account_id: 'acc_b', ...WIDE }), counts({ invalid: 4 }), 'acc_b');
    t.strictSame(await a.countByResult({ account_id: evil, ...WIDE }), counts({ risky: 2 }), 'an account id with quotes counts only its own rows');
    t.strictSame(await a.countByResult({ account_id: HOSTILE, ...WIDE }), counts({ unknown: 1 }), 'hostile account id');
    t.strictSame(await a.countByResult({ account_id: 'acc_c', ...WIDE }), counts({}), 'an account with nothing');
    t.strictSame(await a.countByResult({ account_id: "' OR 1=1 --", ...WIDE }), counts({}), 'an injection attempt matches nothing');
    t.equal((await a.decisionsFor({ account_id: 'acc_b', email_hash: sha256('shared0@example.com') })).length, 1, "acc_b sees only its own decision for a hash acc_a shares");
    t.strictSame(
      (await a.domainSummary({ account_id: 'acc_b', ...WIDE })).map((r) => [r.domain, r.total]),
      [['example.com', 4]],
      'domain summary per account',
    );
  });

  t.test('daily: distinct decisions per UTC day and result, oldest first, window edges, accounts, redeliveries', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000 });
    const at = (iso: string) => new Date(iso);
    const late = dec({ result: 'invalid', decided_at: at('2025-03-01T23:59:59.999Z') });
    const rows = [
      dec({ result: 'valid', decided_at: at('2025-03-01T00:00:00.000Z') }),
      dec({ result: 'valid', decided_at: at('2025-03-01T12:30:00.000Z') }),
      late,
      dec({ result: 'risky', decided_at: at('2025-03-02T00:00:00.000Z') }),
      dec({ result: 'unknown', decided_at: at('2025-03-04T08:00:00.000Z') }),
      dec({ result: 'valid', decided_at: at('2025-03-05T00:00:00.000Z') }), // on `to`: outside
      dec({ result: 'valid', decided_at: at('2025-02-28T23:59:59.999Z') }), // before `from`
      dec({ account_id: 'acc_b', result: 'invalid', decided_at: at('2025-03-01T10:00:00.000Z') }),
    ];
    await a.record([...rows, late]); // a redelivery of one decision counts once
    await a.flush();
    const win = { from: at('2025-03-01T00:00:00.000Z'), to: at('2025-03-05T00:00:00.000Z') };
    t.strictSame(
      await a.daily({ account_id: 'acc_a', ...win }),
      [
        { day: '2025-03-01', total: 3, counts: counts({ valid: 2, invalid: 1 }) },
        { day: '2025-03-02', total: 1, counts: counts({ risky: 1 }) },
        { day: '2025-03-04', total: 1, counts: counts({ unknown: 1 }) },
      ],
      'acc_a: three days with decisions, the empty day left out',
    );
    t.strictSame(await a.daily({ account_id: 'acc_b', ...win }), [{ day: '2025-03-01', total: 1, counts: counts({ invalid: 1 }) }], 'acc_b: its own only');
    t.strictSame(await a.daily({ account_id: "' OR 1=1 --", ...win }), [], 'an injection attempt matches nothing');
    await t.rejects(a.daily({ account_id: 'acc_a', from: new Date(Number.NaN), to: win.to }), TypeError, 'an invalid Date');
  });

  t.test('a redelivered decision (same id) counts once: same call, same batch, across batches', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000, batchSize: 2 });
    const email = sha256('dup@example.com');
    const d1 = dec({ email_hash: email, latency_ms: 10 });
    const d2 = dec({ result: 'invalid', reason_code: 'mailbox_not_found', latency_ms: 20 });
    const d3 = dec({ result: 'risky', reason_code: 'catch_all', layer: 'catchall', latency_ms: 30 });
    await a.record([d1, d2, d1]); // d1 twice in one call; batches [d1, d2], [d1]
    await a.flush();
    await a.record([d1]);
    await a.record([{ ...d2 }]);
    await a.flush();
    await a.record([d3, d1, d2, d3]);
    await a.flush();
    t.equal(a.stats().written, 9, 'every copy was written');
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({ valid: 1, invalid: 1, risky: 1 }), 'three decisions');
    const mine = await a.decisionsFor({ account_id: 'acc_a', email_hash: email });
    t.strictSame(mine.map((d) => d.id), [d1.id], 'decisionsFor lists it once');
    const summary = await a.domainSummary({ account_id: 'acc_a', ...WIDE });
    t.strictSame(summary, [{ domain: 'example.com', total: 3, counts: counts({ valid: 1, invalid: 1, risky: 1 }), mean_latency_ms: 20 }], 'latency mean over distinct decisions');

    // A second instance (another process) delivering the same decisions again.
    const b = await (await adapter.fresh(t)).open();
    t.strictSame(await b.countByResult({ account_id: 'acc_a', ...WIDE }), counts({}), 'fresh backends are isolated');
  });

  t.test('the same decision from two processes counts once', async (t) => {
    const target = await adapter.fresh(t);
    const [a, b] = [await target.open({ flushIntervalMs: 60_000 }), await target.open({ flushIntervalMs: 60_000 })];
    const ds = [dec(), dec(), dec({ result: 'unknown', reason_code: 'smtp_tempfail' })];
    await Promise.all([a.record(ds), b.record(ds.slice(1))]);
    await Promise.all([a.flush(), b.flush()]);
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({ valid: 2, unknown: 1 }));
  });

  t.test('time windows: from inclusive, to exclusive, to the millisecond', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000 });
    const T = T0 + 10_000; // hh:mm:10.999
    const U = T + 2001; // hh:mm:13.000
    const at = [T - 1, T, T + 1, U - 1, U, U + 1];
    await a.record(at.map((ms, i) => dec({ decided_at: new Date(ms), domain: i % 2 ? 'odd.test' : 'even.test', result: VALIDATION_RESULTS[i % 5]! })));
    await a.flush();
    const total = async (from: number, to: number): Promise<number> =>
      Object.values(await a.countByResult({ account_id: 'acc_a', from: new Date(from), to: new Date(to) })).reduce((x, y) => x + y, 0);
    t.equal(await total(T, U), 3, '[T, U) holds T, T+1, U-1');
    t.equal(await total(T - 1, U + 1), 5, '[T-1, U+1)');
    t.equal(await total(T - 1, U + 2), 6, '[T-1, U+2)');
    t.equal(await total(T, T), 0, 'an empty window');
    t.equal(await total(T, T + 1), 1, 'one millisecond');
    t.equal(await total(U - 1, U), 1, 'the last millisecond before to');
    t.equal(await total(U, T), 0, 'to before from');
    t.equal(await total(T + 2, U - 1), 0, 'between rows, across a second boundary');
    t.equal(await total(0, T), 1, 'from the epoch');
    t.equal(await total(-8.64e15, 8.64e15), 6, 'the widest Dates there are');
    t.equal(await total(-8.64e15, T), 1, 'from before 1970');
    t.equal(await total(U + 1, 8.64e15), 1, 'to the end of time');
    await t.rejects(a.countByResult({ account_id: 'acc_a', from: new Date(Number.NaN), to: new Date(U) }), TypeError, 'an invalid Date');
    t.strictSame(await a.countByResult({ account_id: 'acc_a', from: new Date(T), to: new Date(U) }), counts({ valid_role_based: 1, risky: 1, invalid: 1 }), 'which ones');
    const s = await a.domainSummary({ account_id: 'acc_a', from: new Date(T), to: new Date(U) });
    t.strictSame(
      s.map((r) => [r.domain, r.total]),
      [
        ['odd.test', 2],
        ['even.test', 1],
      ],
      'domainSummary uses the same window',
    );
  });

  t.test('decisionsFor: every field round-trips, latest first, ties by id, limit, per account', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000 });
    const email = sha256('round.trip@example.com');
    const base = Date.UTC(2025, 5, 30, 23, 59, 59, 123);
    const older = dec({ id: 'k_1', email_hash: email, decided_at: new Date(base - 86_400_000), mx_host: null, job_id: null, source: 'bulk', credits_charged: 0, result: 'unknown', reason_code: 'dns_timeout', layer: 'dns', latency_ms: 0 });
    const middle = dec({ id: 'k_2', email_hash: email, decided_at: new Date(base), mx_host: HOSTILE, job_id: HOSTILE, source: 'job', domain: 'Example.COM', latency_ms: 12.4 });
    const tieA = dec({ id: 'k_3a', email_hash: email, decided_at: new Date(base + 1), source: 'mcp', result: 'invalid', reason_code: 'mailbox_not_found', credits_charged: 0, latency_ms: 2_000_000_000 });
    const tieB = dec({ id: 'k_3b', email_hash: email, decided_at: new Date(base + 1), domain: HOSTILE, credits_charged: 7 });
    const otherAccount = dec({ id: 'k_x', account_id: 'acc_b', email_hash: email, decided_at: new Date(base + 5) });
    const otherEmail = dec({ id: 'k_y', decided_at: new Date(base + 5) });
    const hostileId = dec({ id: HOSTILE, email_hash: sha256('hostile@example.com') });
    await a.record([middle, tieA, otherAccount, older, tieB, otherEmail, hostileId]);
    await a.flush();

    const got = await a.decisionsFor({ account_id: 'acc_a', email_hash: email });
    const want = [tieB, tieA, { ...middle, domain: 'example.com', latency_ms: 12 }, older].map((d) => ({ ...d, domain: d.domain.toLowerCase() }));
    t.strictSame(got, want, 'latest first; at the same instant the greater id first; domain lowercased, latency rounded');
    t.ok(got.every((d) => d.decided_at instanceof Date), 'decided_at comes back as a Date');
    t.strictSame((await a.decisionsFor({ account_id: 'acc_a', email_hash: email, limit: 2 })).map((d) => d.id), ['k_3b', 'k_3a'], 'limit');
    t.strictSame((await a.decisionsFor({ account_id: 'acc_a', email_hash: email, limit: 1 })).map((d) => d.id), ['k_3b'], 'limit 1');
    t.strictSame((await a.decisionsFor({ account_id: 'acc_b', email_hash: email })).map((d) => d.id), ['k_x'], 'another account');
    t.strictSame(await a.decisionsFor({ account_id: 'acc_a', email_hash: sha256('hostile@example.com') }), [hostileId], 'a hostile id round-trips');
    t.strictSame(await a.decisionsFor({ account_id: 'acc_a', email_hash: "' OR '1'='1" }), [], 'a hostile hash finds nothing');
    await t.rejects(a.decisionsFor({ account_id: 'acc_a', email_hash: email, limit: 0 }), RangeError, 'limit 0');
    await t.rejects(a.decisionsFor({ account_id: 'acc_a', email_hash: email, limit: 1001 }), RangeError, 'limit over 1000');
  });

  t.test('domainSummary: exact counts, mean latency, order, limit', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000, batchSize: 3 });
    const rows: Decision[] = [];
    const add = (domain: string, result: Decision['result'], latency_ms: number, over: Partial<Decision> = {}): void => void rows.push(dec({ domain, result, latency_ms, ...over }));
    add('b.test', 'valid', 10);
    add('b.test', 'valid', 10);
    add('b.test', 'valid', 10);
    add('b.test', 'valid', 10);
    add('b.test', 'valid', 10);
    add('a.test', 'valid', 10);
    add('a.test', 'valid', 20);
    add('a.test', 'invalid', 30);
    add('a.test', 'risky', 40);
    add('a.test', 'unknown', 55);
    add('c.test', 'valid_role_based', 1);
    add('c.test', 'valid_role_based', 1);
    add('c.test', 'invalid', 2);
    add('d.test', 'unknown', 7);
    add('d.test', 'unknown', 7, { decided_at: new Date(Date.UTC(2101, 0, 1)) }); // outside the window
    add('e.test', 'valid', 1, { account_id: 'acc_b' }); // another account
    await a.record(rows);
    await a.record([rows[0]!, rows[5]!, rows[12]!]); // redelivered
    await a.flush();
    const s = await a.domainSummary({ account_id: 'acc_a', ...WIDE });
    t.strictSame(s, [
      { domain: 'a.test', total: 5, counts: counts({ valid: 2, invalid: 1, risky: 1, unknown: 1 }), mean_latency_ms: 31 },
      { domain: 'b.test', total: 5, counts: counts({ valid: 5 }), mean_latency_ms: 10 },
      { domain: 'c.test', total: 3, counts: counts({ valid_role_based: 2, invalid: 1 }), mean_latency_ms: 4 / 3 },
      { domain: 'd.test', total: 1, counts: counts({ unknown: 1 }), mean_latency_ms: 7 },
    ]);
    t.strictSame((await a.domainSummary({ account_id: 'acc_a', ...WIDE, limit: 2 })).map((r) => r.domain), ['a.test', 'b.test'], 'limit; equal totals by domain');
    t.strictSame((await a.domainSummary({ account_id: 'acc_b', ...WIDE })).map((r) => [r.domain, r.total]), [['e.test', 1]]);
    await t.rejects(a.domainSummary({ account_id: 'acc_a', ...WIDE, limit: 0 }), RangeError);
  });

  t.test('buffered rows are invisible until written, visible after flush()', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000 });
    await a.record([dec(), dec(), dec({ result: 'risky', reason_code: 'catch_all' })]);
    t.equal(a.pending, 3);
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({}), 'not written yet');
    await a.flush();
    t.equal(a.pending, 0);
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({ valid: 2, risky: 1 }), 'visible after flush');
    await a.flush();
    t.equal(a.stats().written, 3, 'a flush with nothing buffered writes nothing');
  });

  t.test('full batches are written at once without flush(); the rest waits for flushIntervalMs', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 400, batchSize: 10 });
    const sizes: number[] = [];
    a.on('written', (n) => sizes.push(n));
    const t0 = Date.now();
    await a.record(Array.from({ length: 25 }, () => dec()));
    await until(a, 'written', () => sizes.length === 2, 'the full batches');
    t.strictSame(sizes, [10, 10], 'batches of batchSize, in order');
    t.equal(a.pending, 5, 'the rest is not written in a smaller batch at once');
    await until(a, 'written', () => a.pending === 0, 'the interval write');
    t.strictSame(sizes, [10, 10, 5]);
    t.ok(Date.now() - t0 >= 395, `the rest went after the interval (${Date.now() - t0} ms)`);
    t.equal((await a.countByResult({ account_id: 'acc_a', ...WIDE })).valid, 25);
  });

  t.test('a partial batch is written after flushIntervalMs without flush()', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 50 });
    await a.record([dec(), dec()]);
    t.equal(a.pending, 2);
    await until(a, 'written', () => a.pending === 0, 'the interval write');
    t.equal((await a.countByResult({ account_id: 'acc_a', ...WIDE })).valid, 2);
  });

  t.test('2,500 rows in one flush, in batches of 1,000', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000, batchSize: 1000 });
    const sizes: number[] = [];
    a.on('written', (n) => sizes.push(n));
    const rows = Array.from({ length: 2500 }, (_, i) => dec({ result: VALIDATION_RESULTS[i % 5]!, domain: `d${i % 7}.test` }));
    // recorded in one call: the buffer reaches batchSize, so writing starts on its own
    await a.record(rows);
    await a.flush();
    t.strictSame(sizes, [1000, 1000, 500]);
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({ valid: 500, valid_role_based: 500, risky: 500, invalid: 500, unknown: 500 }));
    const s = await a.domainSummary({ account_id: 'acc_a', ...WIDE });
    t.strictSame(s.map((r) => r.total), [358, 357, 357, 357, 357, 357, 357], 'per domain');
    t.equal(s[0]!.domain, 'd0.test');
  });

  t.test('backend down: rows stay buffered, writes are retried with back-off, the backlog lands when it returns', async (t) => {
    const target = await adapter.fresh(t);
    const a = await target.open({ flushIntervalMs: 10, retryMinMs: 20, retryMaxMs: 200 });
    await a.record([dec()]);
    await a.flush(); // the schema exists, the backend works
    await target.setDown(true);
    const failures: string[] = [];
    a.on('write_failed', (err) => failures.push(err.message));
    await a.record([dec(), dec({ result: 'invalid', reason_code: 'mailbox_not_found' }), dec()]);
    await t.rejects(a.flush(), 'flush() reports the failure');
    t.equal(a.pending, 3, 'the rows are kept');
    await until(a, 'write_failed', () => a.stats().failures >= 3, 'retries');
    t.ok(failures.length >= 3, `retried on its own (${failures.length} failed writes)`);
    t.match(a.stats(), { pending: 3, written: 1, dropped: 0 });
    t.type(a.stats().lastError, 'string', 'lastError says why');
    await a.record([dec(), dec({ result: 'unknown', reason_code: 'smtp_timeout' })]);
    t.equal(a.pending, 5, 'recording goes on while the backend is down');
    await target.setDown(false);
    await until(a, 'written', () => a.pending === 0, 'the backlog to be written after the backend returned');
    t.match(a.stats(), { pending: 0, written: 6, dropped: 0, failures: 0, lastError: undefined });
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({ valid: 4, invalid: 1, unknown: 1 }), 'every row arrived once');
  });

  t.test('backend down over the cap: the oldest rows are dropped and counted', async (t) => {
    const target = await adapter.fresh(t);
    const a = await target.open({ flushIntervalMs: 10, retryMinMs: 20, retryMaxMs: 100, maxBuffered: 10 });
    await a.flush();
    await target.setDown(true);
    const email = sha256('capped@example.com');
    const rows = Array.from({ length: 15 }, () => dec({ email_hash: email }));
    let droppedEvents = 0;
    a.on('dropped', (n) => (droppedEvents += n));
    await a.record(rows.slice(0, 6));
    await t.rejects(a.flush());
    await a.record(rows.slice(6));
    await until(a, 'dropped', () => a.dropped === 5, 'five drops');
    t.equal(a.pending, 10, 'the cap');
    t.equal(droppedEvents, 5, "'dropped' events");
    await target.setDown(false);
    await a.flush();
    t.equal(a.dropped, 5);
    t.strictSame(
      (await a.decisionsFor({ account_id: 'acc_a', email_hash: email, limit: 100 })).map((d) => d.id),
      rows.slice(5).reverse().map((d) => d.id),
      'the ten newest arrived, the five oldest were dropped',
    );
  });

  t.test('close() writes the buffer; recording after close() is refused', async (t) => {
    const target = await adapter.fresh(t);
    const a = await target.open({ flushIntervalMs: 60_000 });
    await a.record([dec(), dec(), dec({ result: 'risky', reason_code: 'catch_all' }), dec()]);
    await a.close();
    t.equal(a.pending, 0);
    await t.rejects(a.record([dec()]), /closed/);
    await a.close(); // twice is fine
    const b = await target.open();
    t.strictSame(await b.countByResult({ account_id: 'acc_a', ...WIDE }), counts({ valid: 3, risky: 1 }), 'another instance sees them');
  });

  t.test('close() with the backend down: what it could not write is counted as dropped, and it says so', async (t) => {
    const target = await adapter.fresh(t);
    const a = await target.open({ flushIntervalMs: 60_000 });
    await a.flush();
    await target.setDown(true);
    await a.record([dec(), dec(), dec()]);
    await t.rejects(a.close(), /3 decision\(s\) not written/);
    t.match(a.stats(), { pending: 0, dropped: 3 });
    await target.setDown(false);
    const b = await target.open();
    t.strictSame(await b.countByResult({ account_id: 'acc_a', ...WIDE }), counts({}));
  });

  t.test('a malformed decision is refused and nothing of its call is recorded', async (t) => {
    const a = await (await adapter.fresh(t)).open({ flushIntervalMs: 60_000 });
    const bad: Array<[string, Record<string, unknown>]> = [
      ['uppercase hash', { email_hash: sha256('x').toUpperCase() }],
      ['an address for a hash', { email_hash: 'someone@example.com' }],
      ['unknown result', { result: 'maybe' }],
      ['unknown reason code', { reason_code: 'because' }],
      ['unknown layer', { layer: 'imap' }],
      ['unknown source', { source: 'api' }],
      ['negative latency', { latency_ms: -1 }],
      ['NaN latency', { latency_ms: Number.NaN }],
      ['fractional credits', { credits_charged: 1.5 }],
      ['credits over int4', { credits_charged: 2 ** 31 }],
      ['invalid date', { decided_at: new Date(Number.NaN) }],
      ['date string', { decided_at: '2025-01-01T00:00:00Z' }],
      ['before 1970', { decided_at: new Date(-1) }],
      ['empty id', { id: '' }],
      ['NUL in id', { id: 'a\u0000b' }],
      ['NUL in domain', { domain: 'a\u0000.test' }],
      ['undefined mx_host', { mx_host: undefined }],
      ['numeric job_id', { job_id: 5 }],
      ['empty account', { account_id: '' }],
    ];
    for (const [why, over] of bad) {
      await t.rejects(a.record([dec(), { ...dec(), ...over } as Decision]), TypeError, why);
    }
    t.equal(a.pending, 0, 'nothing buffered');
    await t.rejects(a.record('nope' as unknown as Decision[]), TypeError);
    await a.record([]);
    await a.flush();
    t.strictSame(await a.countByResult({ account_id: 'acc_a', ...WIDE }), counts({}));
  });
}
