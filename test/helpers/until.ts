// Waiting on a condition that has no event of its own (a row in a database, a counter of another
// object, a server's clock), checked every 5 ms; the wait fails, naming what it waited for,
// after `ms`. Shared by the package tests (the store's Redis, blob and cache suites, the job pipeline).

import type { Queryable } from '@svc/store';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The promise, or a rejection naming what did not happen within `ms`. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}

/** Tracks whether a promise has settled, without awaiting it. */
export function track<T>(p: Promise<T>): { p: Promise<T>; done: () => boolean } {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  return { p, done: () => settled };
}

/** Resolves once `cond()` holds; rejects with "`what`: not within `ms` ms" when it does not in time. */
export async function until(cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(5);
  }
}

/**
 * Resolves once the database's clock (now(), what the store's leases and times to live are
 * judged by) is more than `ms` past where it stood at the call; `db` is queried outside any
 * transaction, where now() is the statement's time.
 */
export async function databaseClockPasses(db: Queryable, ms: number, what: string): Promise<void> {
  const [row] = await db.query<{ at: string }>(`SELECT now()::text AS at`);
  const past = async () => (await db.query<{ past: boolean }>(`SELECT now() - $1::timestamptz > $2::double precision * interval '1 millisecond' AS past`, [row!.at, ms]))[0]!.past === true;
  await until(past, ms + 5000, what);
}

/** Resolves once Redis's clock (TIME, what PX, PEXPIRE and the scripts' leases are judged by) is more than `ms` past where it stood at the call. */
export async function redisClockPasses(redis: { time(): Promise<Array<string | number>> }, ms: number, what: string): Promise<void> {
  const at = async () => {
    const [s, us] = await redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };
  const from = await at();
  await until(async () => (await at()) > from + ms, ms + 5000, what);
}
