// Waiting on a condition that has no event of its own (a row in a database, a counter of another
// object, a server's clock), checked every 5 ms; the wait fails, naming what it waited for,
// after `ms`. Shared by the package tests (the store's Redis, blob and cache suites, the job pipeline).

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves once `cond()` holds; rejects with "`what`: not within `ms` ms" when it does not in time. */
export async function until(cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await sleep(5);
  }
}
