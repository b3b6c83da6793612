// The real PostgreSQL the store suites and the cluster-profile tests use: TEST_DATABASE_URL or
// postgres://postgres@127.0.0.1:5432/test. Each test gets a schema of its own, reached through
// `options=-c search_path=…` and dropped at teardown.

import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const PG_BASE = process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
/** The server's address without credentials, for messages. */
export const PG_SHOWN = PG_BASE.replace(/\/\/[^@/]*@/, '//***@');

/** Runs fn on a short-lived administrative connection. */
export async function pgAdmin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: PG_BASE, connectionTimeoutMillis: 3000 });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Why Postgres cannot be used (undefined when it answers). */
export async function pgUnreachable(): Promise<string | undefined> {
  try {
    await pgAdmin((c) => c.query('SELECT 1'));
    return undefined;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { errors?: Error[] };
    return [e.code, e.message || e.errors?.map((x) => x.message).join('; ')].filter(Boolean).join(' ') || String(err);
  }
}

/** The URL of the server with `schema` first on the search path. */
export const withSearchPath = (schema: string): string => `${PG_BASE}${PG_BASE.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;

/** A new empty schema: its name, its URL, and `drop()` for the teardown (after closing its connections). */
export async function freshSchema(): Promise<{ schema: string; url: string; drop: () => Promise<void> }> {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  await pgAdmin((c) => c.query(`CREATE SCHEMA ${schema}`));
  return { schema, url: withSearchPath(schema), drop: () => pgAdmin(async (c) => void (await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))) };
}
