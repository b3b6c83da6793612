// The store conformance suite on the cluster adapter (Postgres through `pg`). Every fresh database
// is a new schema `t_<random>` reached through `options=-c search_path=...`, dropped at teardown.
// TEST_DATABASE_URL overrides the server; CI_REQUIRE_SERVICES=1 turns "unreachable" into a failure.

import t from 'tap';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import type { Db } from '../src/db.ts';
import { openPostgres } from '../src/postgres.ts';
import { storeConformance, type Adapter } from './conformance.ts';

const BASE = process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const REQUIRED = process.env.CI_REQUIRE_SERVICES === '1';
const shown = BASE.replace(/\/\/[^@/]*@/, '//***@');

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: BASE, connectionTimeoutMillis: 3000 });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function unreachable(): Promise<string | undefined> {
  try {
    await admin((c) => c.query('SELECT 1'));
    return undefined;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { errors?: Error[] };
    return [e.code, e.message || e.errors?.map((x) => x.message).join('; ')].filter(Boolean).join(' ') || String(err);
  }
}

const withSearchPath = (schema: string): string => `${BASE}${BASE.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;

const adapter: Adapter = {
  kind: 'postgres',
  parallel: true,
  async fresh(t) {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    await admin((c) => c.query(`CREATE SCHEMA ${schema}`));
    const url = withSearchPath(schema);
    const open = new Set<Db>();
    const connect = async (): Promise<Db> => {
      const db = await openPostgres(url);
      open.add(db);
      return db;
    };
    t.teardown(async () => {
      for (const db of open) await db.close().catch(() => {});
      open.clear();
      await admin((c) => c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`));
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

const why = await unreachable();
if (!why) {
  storeConformance(t, adapter);
} else if (REQUIRED) {
  t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${shown} is unreachable: ${why}`);
} else {
  t.plan(0, `Postgres at ${shown} is unreachable (${why}): skipping; start it, or set TEST_DATABASE_URL; CI_REQUIRE_SERVICES=1 makes this a failure`);
}
