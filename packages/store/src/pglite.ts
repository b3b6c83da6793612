// Embedded adapter: PGlite (Postgres compiled to WASM) in a data directory. PGlite is a single
// connection, so every top-level query and transaction runs under one mutex: a plain query can
// never land inside another caller's open transaction. One process per data directory: a lock
// file guards it (a second process opening the same directory corrupts it).

import { mkdirSync, openSync, closeSync, readFileSync, writeFileSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { PGlite, types } from '@electric-sql/pglite';
import type { Db, Queryable, Row } from './db.ts';

export class DataDirLockedError extends Error {
  constructor(readonly dir: string, readonly pid: number) {
    super(`data directory ${dir} is in use by process ${pid}; stop it first (or use its admin socket)`);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the data directory's lock file, or throws DataDirLockedError naming the holder. */
export function lockDataDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'svc.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx');
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          unlinkSync(file);
        } catch {
          /* already gone */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(readFileSync(file, 'utf8'));
      if (pid && pid !== process.pid && alive(pid)) throw new DataDirLockedError(dir, pid);
      unlinkSync(file); // stale lock of a dead process
    }
  }
  throw new Error(`could not lock ${dir}`);
}

export async function openPglite(dataDir: string | undefined): Promise<Db> {
  const unlock = dataDir ? lockDataDir(dataDir) : () => {};
  // numeric (1700) comes back as a string by default: parse it to a number like the pg adapter does.
  const parsers = { [types.NUMERIC]: (v: string) => Number(v) };
  const pg = dataDir ? new PGlite(path.join(dataDir, 'pgdata'), { parsers }) : new PGlite({ parsers });
  await pg.waitReady;
  let chain: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn, fn);
    chain = run.catch(() => undefined);
    return run;
  };
  const q = (target: Pick<PGlite, 'query'>): Queryable['query'] =>
    async <T extends Row>(sql: string, params?: unknown[]) => (await target.query<T>(sql, params)).rows;
  return {
    kind: 'pglite',
    query: (sql, params) => exclusive(() => q(pg)(sql, params)),
    transaction: (fn) => exclusive(() => pg.transaction((tx) => fn({ query: q(tx) }))),
    // A script that fails after its own BEGIN leaves the one connection in an aborted transaction;
    // roll it back before anyone else's query runs (the pg adapter drops a failed connection).
    exec: (sql) =>
      exclusive(async () => {
        try {
          await pg.exec(sql);
        } catch (err) {
          if (pg.isInTransaction()) await pg.exec('ROLLBACK').catch(() => {});
          throw err;
        }
      }),
    close: () =>
      exclusive(async () => {
        await pg.close();
        unlock();
      }),
  };
}
