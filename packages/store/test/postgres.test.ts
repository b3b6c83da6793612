// The store conformance suite on the cluster adapter (Postgres through `pg`). Every fresh database
// is a new schema `t_<random>` reached through `options=-c search_path=...`, dropped at teardown.
// TEST_DATABASE_URL overrides the server; CI_REQUIRE_SERVICES=1 turns "unreachable" into a failure.

import t from 'tap';
import type { Db } from '../src/db/db.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { storeConformance, type Adapter } from './conformance.ts';
import { freshSchema, PG_SHOWN as shown, pgUnreachable } from '../../../test/helpers/postgres.ts';

const REQUIRED = process.env.CI_REQUIRE_SERVICES === '1';

const adapter: Adapter = {
  kind: 'postgres',
  parallel: true,
  async fresh(t) {
    const open = new Set<Db>();
    const connect = async (): Promise<Db> => {
      const db = await openPostgres(url);
      open.add(db);
      return db;
    };
    const { schema, url, drop } = await freshSchema();
    t.teardown(async () => {
      for (const db of open) await db.close().catch(() => {});
      open.clear();
      await drop();
    });
    let db = await connect();
    const [{ sp }] = (await db.query<{ sp: string }>('SELECT current_schema() AS sp')) as [{ sp: string }];
    if (sp !== schema) throw new Error(`search_path not applied: current_schema() is ${sp}, wanted ${schema}`);
    return {
      get db() {
        return db;
      },
      async restart() {
        open.delete(db);
        await db.close();
        db = await connect();
        return db;
      },
      another: connect,
    };
  },
};

const why = await pgUnreachable();
if (!why) {
  storeConformance(t, adapter);
} else if (REQUIRED) {
  t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${shown} is unreachable: ${why}`);
} else {
  t.plan(0, `Postgres at ${shown} is unreachable (${why}): skipping; start it, or set TEST_DATABASE_URL; CI_REQUIRE_SERVICES=1 makes this a failure`);
}
