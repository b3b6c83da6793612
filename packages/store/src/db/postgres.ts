// Cluster adapter: Postgres through a `pg` pool. int8 (20) and numeric (1700) are parsed to
// numbers to match PGlite; credit amounts stay far below 2^53.

import pg from 'pg';
import type { Db, Queryable, Row } from './db.ts';

const types = {
  getTypeParser: ((oid: number, format?: string) => {
    if (oid === 20 || oid === 1700) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as 'text');
  }) as typeof pg.types.getTypeParser,
};

export async function openPostgres(url: string, max = 10): Promise<Db> {
  // Bounded waits: a stalled server must fail requests (503), not hold them and the debit queue forever.
  const pool = new pg.Pool({ connectionString: url, max, types, connectionTimeoutMillis: 10_000, statement_timeout: 30_000, query_timeout: 35_000 });
  pool.on('error', () => {}); // an idle client's error must not crash the process; queries report their own
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    await pool.end().catch(() => {}); // a pool that never connected must not keep the process alive
    throw err;
  }
  const q = (c: pg.Pool | pg.PoolClient): Queryable['query'] =>
    async <T extends Row>(sql: string, params?: unknown[]) => (await c.query(sql, params)).rows as T[];
  return {
    kind: 'postgres',
    query: q(pool),
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const out = await fn({ query: q(client) });
        await client.query('COMMIT');
        return out;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    exec: async (sql) => void (await pool.query(sql)),
    close: () => pool.end(),
  };
}
