// The money of jobs and catch-all recoveries (jobs.ts) against a real (in-memory PGlite) store:
// what a job holds, is charged and gets back on each way it ends, and a recovery's hold, charge
// and release. The job repo's own suite checks the same amounts through its whole life.

import t from 'tap';
import { ServiceError } from '@svc/contracts';
import { Store, type JobEnd } from '@svc/store';
import { jobCredits, RecoveryCharges } from '../src/index.ts';
import { migratedPglite } from '../../../test/helpers/pglite.ts';

const db = await migratedPglite();
t.teardown(() => db.close());
const store = new Store(db);

/** Holds a job's credits, then settles it as `status` with `chargeable` results done. */
async function job(credits: number, unique: number, status: JobEnd['status'], chargeable: number) {
  const acc = await store.accounts.create({ credits });
  const hold = await db.transaction((tx) => jobCredits.reserve(tx, acc, unique));
  if (!hold.ok) return { acc, hold };
  let counted = 0;
  const charged = await db.transaction((tx) =>
    jobCredits.settle(tx, { jobId: 'job_x', accountId: acc, reservationId: hold.reservationId, status, chargeable: async () => (counted++, chargeable) }),
  );
  return { acc, hold, charged, counted, balance: await store.ledger.balance(acc) };
}

t.test('a job holds one credit per unique email, or is refused with what is available', async (t) => {
  const ok = await job(10, 4, 'completed', 0);
  t.strictSame(ok.hold, { ok: true, reservationId: ok.hold.ok ? ok.hold.reservationId : '', amount: 4 });
  const refused = await job(3, 4, 'completed', 0);
  t.strictSame(refused.hold, { ok: false, available: 3 });
});

t.test('completed or canceled: charged one per High-Value Validation done, the rest released', async (t) => {
  for (const status of ['completed', 'canceled'] as const) {
    const r = await job(10, 4, status, 3);
    t.equal(r.charged, 3, status);
    t.equal(r.counted, 1, 'the chargeable results are counted once');
    t.match(r.balance, { balance: 7, reserved: 0, available: 7 });
  }
});

t.test('failed: nothing charged, the whole hold released', async (t) => {
  const r = await job(10, 4, 'failed', 3);
  t.equal(r.charged, 0);
  t.equal(r.counted, 0, 'a failed job does not count its results');
  t.match(r.balance, { balance: 10, reserved: 0 });
  const acc = await store.accounts.create({ credits: 5 });
  t.equal(await db.transaction((tx) => jobCredits.settle(tx, { jobId: 'job_y', accountId: acc, reservationId: null, status: 'failed', chargeable: async () => 0 })), 0, 'a job that never held credits');
});

t.test('a recovery holds perRow per catch-all row, charges perRow per upgraded row, and releases on failure', async (t) => {
  const money = new RecoveryCharges(2);
  const acc = await store.accounts.create({ credits: 10 });
  t.strictSame(await money.reserve(store, acc, 0), { reservationId: null, amount: 0 }, 'no rows: no reservation');
  const refused = await money.reserve(store, acc, 6).catch((err: unknown) => err);
  t.ok(refused instanceof ServiceError && refused.code === 'insufficient_credits', '12 credits are more than 10');
  t.match(refused, { extra: { required: 12, available: 10 } });
  const held = await money.reserve(store, acc, 3);
  t.equal(held.amount, 6);
  t.equal(money.rowCharge('valid'), 2);
  t.equal(money.rowCharge('invalid'), 0);
  t.strictSame(await db.transaction((tx) => money.settle(tx, held.reservationId, 2)), { settled: true, charged: 4 });
  t.strictSame(await db.transaction((tx) => money.settle(tx, held.reservationId, 2)), { settled: false, charged: 4 }, 'a reservation settles once');
  t.match(await store.ledger.balance(acc), { balance: 6, reserved: 0 });
  const again = await money.reserve(store, acc, 1);
  await money.release(store, again.reservationId!);
  t.match(await store.ledger.balance(acc), { balance: 6, reserved: 0 }, 'released: nothing charged');
});
