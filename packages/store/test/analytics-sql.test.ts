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
import { SqlAnalytics } from '../src/analytics/sql-analytics.ts';
import { analyticsConformance, type AnalyticsAdapter, type Tap } from './analytics-conformance.ts';
import { PGlite } from '@electric-sql/pglite';
import { openPglite } from '../src/db/pglite.ts';
import { pgliteTemplate } from '../../../test/helpers/pglite.ts';
import { freshSchema, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';

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
