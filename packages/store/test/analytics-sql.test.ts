// The Analytics conformance suite on the SQL adapter (SqlAnalytics over the store's Db): PGlite,
// and Postgres when it answers (TEST_DATABASE_URL or postgres://postgres@127.0.0.1:5432/test; a
// schema per test, dropped at teardown; CI_REQUIRE_SERVICES=1 makes an unreachable server a
// failure). "Backend down" is a Queryable in front of the Db whose queries fail like a refused
// connection's while the switch is off.

import t from 'tap';
import type { Db, Queryable } from '../src/db/db.ts';
import { migrate } from '../src/db/migrate.ts';
import { openPostgres } from '../src/db/postgres.ts';
import type { Analytics } from '../src/analytics/analytics.ts';
import { emailKey, SqlAnalytics } from '../src/analytics/sql-analytics.ts';
import { dbJson } from '../src/db/text.ts';
import type { Decision } from '../src/analytics/analytics.ts';
import { analyticsConformance, type AnalyticsAdapter, type Tap } from './analytics-conformance.ts';
import { PGlite } from '@electric-sql/pglite';
import { openPglite } from '../src/db/pglite.ts';
import { freshPglite, migratedPglite, pgliteTemplate } from '../../../test/helpers/pglite.ts';
import { freshSchema, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';

// tap's default of 120 s a file is too tight on a loaded 2-core machine: 65 s in a full CI run on a
// slow day.
t.setTimeout(240_000);

const REQUIRED = process.env.CI_REQUIRE_SERVICES === '1';

function sqlAdapter(name: string, open: () => Promise<{ db: Db; cleanup: () => Promise<void> }>): AnalyticsAdapter {
  return {
    name,
    async fresh(t: Tap) {
      const { db, cleanup } = await open();
      let down = false;
      const refused = () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED (test: backend down)'), { code: 'ECONNREFUSED' }));
      // The adapter's own write path: COPY where the Db has it (PGlite), INSERT where not.
      const switched: Queryable & Pick<Db, 'copyIn'> = {
        query: (sql, params) => (down ? refused() : db.query(sql, params)),
        ...(db.copyIn && { copyIn: (table, columns, rows) => (down ? refused() : db.copyIn!(table, columns, rows)) }),
      };
      const opened: Analytics[] = [];
      t.teardown(async () => {
        down = false;
        for (const a of opened) await a.close().catch(() => {});
        await cleanup();
      });
      return {
        async open(opts) {
          const a = new SqlAnalytics(switched, opts);
          opened.push(a);
          return a;
        },
        async setDown(d) {
          down = d;
        },
      };
    },
  };
}

t.test('pglite', async (t) => {
  // Every fresh database starts from the dump of one migrated database (migrating each is most of the cost).
  const pg = new PGlite({ loadDataDir: await pgliteTemplate() });
  const unused = () => Promise.reject(new Error('migrate() only runs scripts'));
  await migrate({ kind: 'pglite', exec: async (sql) => void (await pg.exec(sql)), query: unused, transaction: unused, close: () => pg.close() });
  const template = await pg.dumpDataDir('none');
  await pg.close();
  analyticsConformance(
    t,
    sqlAdapter('pglite', async () => {
      const db = await openPglite(undefined, { template });
      return { db, cleanup: () => db.close() };
    }),
  );
});

const why = await pgUnreachable();
t.test('postgres', async (t) => {
  if (why) {
    if (REQUIRED) t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${PG_SHOWN} is unreachable: ${why}`);
    else t.plan(0, `Postgres at ${PG_SHOWN} is unreachable (${why}): skipping; start it, or set TEST_DATABASE_URL; CI_REQUIRE_SERVICES=1 makes this a failure`);
    return;
  }
  analyticsConformance(
    t,
    sqlAdapter('postgres', async () => {
      const { url, drop } = await freshSchema();
      const db = await openPostgres(url);
      await migrate(db);
      return {
        db,
        cleanup: async () => {
          await db.close();
          await drop();
        },
      };
    }),
  );
});

t.test('email_key: the first 64 bits of the hash as SQL computes them; addresses that share them are told apart', async (t) => {
  const db = await migratedPglite();
  t.teardown(() => db.close());
  for (const h of ['0'.repeat(64), 'f'.repeat(64), `8000000000000000${'a'.repeat(48)}`, `7fffffffffffffff${'b'.repeat(48)}`, `00000000000000ff${'c'.repeat(48)}`]) {
    const [r] = await db.query<{ k: string }>(`SELECT (('x' || left($1::text, 16))::bit(64)::bigint)::text AS k`, [h]);
    t.equal(emailKey(h), r!.k, `${h.slice(0, 16)}: ${r!.k}`);
  }
  const a = new SqlAnalytics(db);
  t.teardown(() => a.close());
  const twinA = `0123456789abcdef${'a'.repeat(48)}`;
  const twinB = `0123456789abcdef${'b'.repeat(48)}`;
  const base = { account_id: 'acc_k', domain: 'example.com', reason_code: 'accepted', layer: 'smtp', mx_host: null, latency_ms: 1, job_id: null, source: 'single', credits_charged: 0 } as const;
  const d = (id: string, email_hash: string, result: Decision['result'], ms: number): Decision => ({ ...base, id, email_hash, result, decided_at: new Date(ms) });
  await a.recordNow([d('k1', twinA, 'valid', 1_000), d('k2', twinB, 'invalid', 2_000), d('k3', twinA, 'valid', 500)]);
  t.strictSame((await a.decisionsFor({ account_id: 'acc_k', email_hash: twinA })).map((x) => x.id), ['k1', 'k3'], "one address's decisions, latest first");
  t.strictSame((await a.decisionsFor({ account_id: 'acc_k', email_hash: twinB })).map((x) => x.id), ['k2'], 'its twin (same first 64 bits) apart');
  t.strictSame(await a.decisionsFor({ account_id: 'acc_k', email_hash: 'not a hash' }), [], 'a malformed hash has no decisions');
  // The outcome of twinA after twinB's later decision joins twinA's own (valid), not the twin's (invalid).
  await a.recordOutcomes([{ id: 'f1', account_id: 'acc_k', email_hash: twinA, domain: 'example.com', outcome: 'bounced', label: 'bounced_hard', signal: null, source: 'api', occurred_at: new Date(3_000) }]);
  await a.flush();
  const m = await a.outcomeMatrix({ account_id: 'acc_k', from: new Date(0), to: new Date(10_000) });
  t.strictSame([m.claims.valid.bounced_hard, m.claims.invalid.bounced_hard], [1, 0]);
});

t.test('migrations 027 and 028 carry the decisions written before them into packs, every field as it was', async (t) => {
  const db = await freshPglite();
  t.teardown(() => db.close());
  // A database as 026 left it: 027 and 028 marked applied, so migrate() stops before them.
  await db.exec(`CREATE TABLE schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
    INSERT INTO schema_migrations (name) VALUES ('027_decision_email_key.sql'), ('028_decision_packs.sql');`);
  await migrate(db);
  t.strictSame((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'decision_packs'`))[0]!.n, 0, 'no packs before 028');
  const h1 = 'e'.repeat(64);
  const h2 = '1'.repeat(64);
  await db.exec(`INSERT INTO validation_decisions (id, account_id, email_hash, domain, result, reason_code, layer, mx_host, latency_ms, job_id, source, credits_charged, decided_at)
    VALUES ('m1', 'acc_m', '${h1}', 'example.com', 'valid', 'accepted', 'smtp', 'mx.example.com', 12, NULL, 'single', 1, '2026-01-02T03:04:05.678Z'),
           ('m2', 'acc_m', '${h2}', 'example.org', 'invalid', 'mailbox_not_found', 'smtp', NULL, 40, 'job_1', 'job', 0, '2026-01-02T03:04:06.000Z'),
           ('m3', 'acc_m', '${h1}', 'example.com', 'risky', 'catch_all', 'catchall', 'mx.example.com', 7, NULL, 'bulk', 0, '2026-01-03T00:00:00.001Z'),
           ('n1', 'acc_n', '${h1}', 'example.com', 'unknown', 'smtp_tempfail', 'smtp', NULL, 3, NULL, 'mcp', 0, '2026-01-02T03:04:05.678Z');`);
  await db.exec(`DELETE FROM schema_migrations WHERE name IN ('027_decision_email_key.sql', '028_decision_packs.sql')`);
  t.strictSame(await migrate(db), ['027_decision_email_key.sql', '028_decision_packs.sql']);
  const packs = await db.query<{ account_id: string; keys: string; first_at: Date; last_at: Date }>(`SELECT account_id, email_keys::text AS keys, first_at, last_at FROM decision_packs ORDER BY account_id`);
  t.strictSame(
    packs.map((p) => [p.account_id, p.keys, new Date(p.first_at).toISOString(), new Date(p.last_at).toISOString()]),
    [
      ['acc_m', `{${emailKey(h1)},${emailKey(h2)},${emailKey(h1)}}`, '2026-01-02T03:04:05.678Z', '2026-01-03T00:00:00.001Z'],
      ['acc_n', `{${emailKey(h1)}}`, '2026-01-02T03:04:05.678Z', '2026-01-02T03:04:05.678Z'],
    ],
    "a pack per account, its keys in time order (027's email_key), its times' bounds",
  );
  t.equal(emailKey(h1), '-1229782938247303442', 'a key with the top bit set is negative');
  const head = (iso: string, letter: string) => `${String(Date.parse(iso)).padStart(13, '0')}${letter}`;
  t.strictSame(
    (await db.query<{ heads: string; hashes: string }>(`SELECT heads, encode(hashes, 'hex') AS hashes FROM decision_packs ORDER BY account_id`)).map((r) => [r.heads, r.hashes]),
    [
      [head('2026-01-02T03:04:05.678Z', 'v') + head('2026-01-02T03:04:06.000Z', 'i') + head('2026-01-03T00:00:00.001Z', 'k'), h1 + h2 + h1],
      [head('2026-01-02T03:04:05.678Z', 'u'), h1],
    ],
    "each decision's time and result at a fixed width, and its hash, as the adapter writes them",
  );
  const a = new SqlAnalytics(db);
  t.teardown(() => a.close());
  const base = { account_id: 'acc_m', email_hash: h1, domain: 'example.com', mx_host: 'mx.example.com', job_id: null } as const;
  t.strictSame(await a.decisionsFor({ account_id: 'acc_m', email_hash: h1 }), [
    { ...base, id: 'm3', result: 'risky', reason_code: 'catch_all', layer: 'catchall', latency_ms: 7, source: 'bulk', credits_charged: 0, decided_at: new Date('2026-01-03T00:00:00.001Z') },
    { ...base, id: 'm1', result: 'valid', reason_code: 'accepted', layer: 'smtp', latency_ms: 12, source: 'single', credits_charged: 1, decided_at: new Date('2026-01-02T03:04:05.678Z') },
  ]);
  t.strictSame((await a.decisionsFor({ account_id: 'acc_m', email_hash: h2 }))[0], {
    id: 'm2', account_id: 'acc_m', email_hash: h2, domain: 'example.org', result: 'invalid', reason_code: 'mailbox_not_found', layer: 'smtp', mx_host: null, latency_ms: 40, job_id: 'job_1', source: 'job', credits_charged: 0, decided_at: new Date('2026-01-02T03:04:06.000Z'),
  });
  const day = { from: new Date('2026-01-02T00:00:00Z'), to: new Date('2026-01-03T00:00:00.001Z') };
  t.strictSame(await a.countByResult({ account_id: 'acc_m', ...day }), { valid: 1, valid_role_based: 0, risky: 0, invalid: 1, unknown: 0 }, 'to is exclusive, to the millisecond');
  const view = await db.query<{ id: string; decided_at: Date; latency_ms: number }>(`SELECT id, decided_at, latency_ms FROM validation_decisions WHERE account_id = 'acc_m' ORDER BY id`);
  t.strictSame(view.map((r) => [r.id, new Date(r.decided_at).toISOString(), r.latency_ms]), [
    ['m1', '2026-01-02T03:04:05.678Z', 12],
    ['m2', '2026-01-02T03:04:06.000Z', 40],
    ['m3', '2026-01-03T00:00:00.001Z', 7],
  ], 'the view shows them a row each, as the table had them');
});

t.test('decisions in packs: grouped by account, 100 a pack; a redelivery is stored again and read once; the view lists each once', async (t) => {
  const db = await migratedPglite();
  t.teardown(() => db.close());
  const a = new SqlAnalytics(db, { batchSize: 1000 });
  t.teardown(() => a.close());
  const mk = (i: number, account: string): Decision => ({
    id: `p${i}`, account_id: account, email_hash: (i % 16).toString(16).repeat(64), domain: 'example.com', result: i % 3 === 0 ? 'invalid' : 'valid', reason_code: 'accepted', layer: 'smtp',
    mx_host: null, latency_ms: i, job_id: null, source: 'single', credits_charged: 0, decided_at: new Date(1_000_000 + i),
  });
  const batch = Array.from({ length: 250 }, (_, i) => mk(i, i % 5 === 0 ? 'acc_q' : 'acc_p'));
  await a.recordNow(batch);
  await a.recordNow(batch.slice(0, 10)); // delivered again
  const packs = await db.query<{ account_id: string; n: number }>(`SELECT account_id, cardinality(email_keys) AS n FROM decision_packs ORDER BY account_id, n DESC`);
  t.strictSame(packs.map((p) => [p.account_id, p.n]), [['acc_p', 100], ['acc_p', 100], ['acc_p', 8], ['acc_q', 50], ['acc_q', 2]], 'acc_p 200 + 8 again, acc_q 50 + 2 again');
  const wide = { from: new Date(0), to: new Date(2_000_000) };
  const p = await a.countByResult({ account_id: 'acc_p', ...wide });
  const q = await a.countByResult({ account_id: 'acc_q', ...wide });
  t.strictSame([p.valid + p.invalid, q.valid + q.invalid], [200, 50], 'every decision once');
  t.equal((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM validation_decisions`))[0]!.n, 250, 'the view lists each once');
  const [first] = await db.query<{ heads: string; hashes: string; body: string }>(
    `SELECT heads, encode(hashes, 'hex') AS hashes, body FROM decision_packs WHERE account_id = 'acc_q' ORDER BY cardinality(email_keys) DESC LIMIT 1`,
  );
  const d0 = batch[0]!; // acc_q's first decision, invalid (0 % 3 === 0)
  t.equal(first!.heads.length, 50 * 14, '14 characters a decision');
  t.equal(first!.heads.slice(0, 14), `${String(d0.decided_at.getTime()).padStart(13, '0')}i`);
  t.equal(first!.hashes.length, 50 * 64, '32 bytes a decision');
  t.equal(first!.hashes.slice(0, 64), d0.email_hash);
  const [stored] = await db.query<{ external: number }>(`SELECT pg_column_size(heads) + pg_column_size(hashes) + pg_column_size(email_keys) AS external FROM decision_packs WHERE account_id = 'acc_p' ORDER BY cardinality(email_keys) DESC LIMIT 1`);
  t.ok(stored!.external > 100 * (14 + 32 + 8), 'a full pack keeps heads, hashes and keys uncompressed in its row');
  t.strictSame((JSON.parse(first!.body) as unknown[][])[0], [d0.id, d0.email_hash, 'example.com', 'invalid', 'accepted', 'smtp', null, 0, null, 'single', 0, d0.decided_at.getTime()], "the body's first decision, every field");
});

t.test("a pack's body is what dbJson makes of its decisions' arrays, whatever their texts hold", async (t) => {
  const db = await migratedPglite();
  t.teardown(() => db.close());
  const a = new SqlAnalytics(db, { batchSize: 1000 });
  t.teardown(() => a.close());
  const texts = ['plain', `q"uote \\ back\\slash /slash`, 'tab\there', 'ünïcødé 日本 🙂', 'lone \ud800 high', 'lone \udc00 low', 'escape-like \\u0000 text', '\u0001\u001f controls', 'x'.repeat(255)];
  const batch: Decision[] = texts.map((s, i) => ({
    id: `id ${s}`.slice(0, 256), account_id: 'acc_t', email_hash: (i % 16).toString(16).repeat(64), domain: s.slice(0, 255), result: 'valid', reason_code: 'accepted', layer: 'smtp',
    mx_host: i % 2 === 0 ? `mx ${s}`.slice(0, 255) : null, latency_ms: i * 1.4, job_id: i % 3 === 0 ? `job ${s}`.slice(0, 256) : null, source: 'job', credits_charged: i % 2, decided_at: new Date(1_700_000_000_000 + i),
  }));
  await a.recordNow(batch);
  const [row] = await db.query<{ body: string }>(`SELECT body FROM decision_packs WHERE account_id = 'acc_t'`);
  const arrays = batch.map((d) => [d.id, d.email_hash, d.domain.toLowerCase(), d.result, d.reason_code, d.layer, d.mx_host, Math.round(d.latency_ms), d.job_id, d.source, d.credits_charged, d.decided_at.getTime()]);
  t.equal(row!.body, dbJson(arrays), 'byte for byte');
  t.equal((JSON.parse(row!.body) as unknown[][])[4]![2], 'lone \ufffd high', 'a lone surrogate became U+FFFD');
});
