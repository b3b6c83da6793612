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
import type { Decision } from '../src/analytics/analytics.ts';
import { analyticsConformance, type AnalyticsAdapter, type Tap } from './analytics-conformance.ts';
import { PGlite } from '@electric-sql/pglite';
import { openPglite } from '../src/db/pglite.ts';
import { migratedPglite, pgliteTemplate } from '../../../test/helpers/pglite.ts';
import { readFileSync } from 'node:fs';
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

t.test('migration 027 fills email_key for the decisions written before it', async (t) => {
  const db = await migratedPglite();
  t.teardown(() => db.close());
  // The table as 026 left it, with two decisions in it; then 027's script.
  await db.exec(`DROP INDEX validation_decisions_email_key; ALTER TABLE validation_decisions DROP COLUMN email_key;
    CREATE INDEX validation_decisions_account_email ON validation_decisions (account_id, email_hash, decided_at DESC);
    INSERT INTO validation_decisions (id, account_id, email_hash, domain, result, reason_code, layer, mx_host, latency_ms, job_id, source, credits_charged, decided_at)
    VALUES ('m1', 'acc_m', '${'e'.repeat(64)}', 'example.com', 'valid', 'accepted', 'smtp', NULL, 1, NULL, 'single', 1, now()),
           ('m2', 'acc_m', '${'1'.repeat(64)}', 'example.com', 'valid', 'accepted', 'smtp', NULL, 1, NULL, 'single', 1, now());`);
  await db.exec(readFileSync(new URL('../../../infra/migrations/027_decision_email_key.sql', import.meta.url), 'utf8'));
  const rows = await db.query<{ id: string; k: string }>(`SELECT id, email_key::text AS k FROM validation_decisions ORDER BY id`);
  t.strictSame(rows, [
    { id: 'm1', k: emailKey('e'.repeat(64)) },
    { id: 'm2', k: emailKey('1'.repeat(64)) },
  ]);
  t.equal(emailKey('e'.repeat(64)), '-1229782938247303442', 'a key with the top bit set is negative');
});
