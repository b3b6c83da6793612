// Applies infra/migrations/*.sql in name order, once each, recorded in schema_migrations. Each
// file runs as one script in one transaction, under an advisory lock so two processes starting
// together against one Postgres do not race.

import { readdirSync, readFileSync } from 'node:fs';
import type { Db } from './db.ts';

const DIR = new URL('../../../../infra/migrations/', import.meta.url);

export async function migrate(db: Db): Promise<string[]> {
  // Under the same lock: two concurrent CREATE TABLE IF NOT EXISTS on a fresh database can both
  // pass the existence check, and the loser fails on pg_type's unique index.
  await db.exec(`BEGIN;
SELECT pg_advisory_xact_lock(727274);
CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
COMMIT;`);
  const applied: string[] = [];
  for (const name of readdirSync(DIR).filter((f) => f.endsWith('.sql')).sort()) {
    if (!/^[\w.-]+$/.test(name)) throw new Error(`bad migration file name ${name}`);
    const sql = readFileSync(new URL(name, DIR), 'utf8');
    await db.exec(`BEGIN;
SELECT pg_advisory_xact_lock(727274);
DO $m$ BEGIN
  IF EXISTS (SELECT 1 FROM schema_migrations WHERE name = '${name}') THEN
    RAISE EXCEPTION 'svc-migration-already-applied';
  END IF;
END $m$;
${sql}
INSERT INTO schema_migrations (name) VALUES ('${name}');
COMMIT;`).then(
      () => applied.push(name),
      async (err: Error) => {
        await db.exec('ROLLBACK').catch(() => {});
        if (!String(err.message).includes('svc-migration-already-applied')) throw err;
      },
    );
  }
  return applied;
}
