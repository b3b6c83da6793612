// Grants and orphaned holds (holds.ts) against a real (in-memory PGlite) store: a grant adds
// exactly its amount or is refused, and the start-up release frees the sync and recovery holds a
// crash left open, never a job's.

import t from 'tap';
import { Store } from '@svc/store';
import { grantCredits, releaseOrphanedHolds, releaseStaleSyncHolds } from '../src/index.ts';
import { migratedPglite } from '../../../test/helpers/pglite.ts';

const db = await migratedPglite();
t.teardown(() => db.close());
const store = new Store(db);

t.test('a grant adds its amount; anything but a positive whole number is refused', async (t) => {
  const acc = await store.accounts.create({ credits: 5 });
  await grantCredits(store, acc, 7, 'admin grant');
  t.match(await store.ledger.balance(acc), { balance: 12, reserved: 0, available: 12 });
  for (const bad of [0, -3, 1.5, Number.NaN]) await t.rejects(grantCredits(store, acc, bad, 'x'), RangeError, String(bad));
  t.match(await store.ledger.balance(acc), { balance: 12 }, 'nothing moved for a refused grant');
});

t.test('orphaned holds: sync and recovery released, a job hold kept', async (t) => {
  const acc = await store.accounts.create({ credits: 10 });
  for (const [n, purpose] of [[2, 'sync'], [3, 'recovery'], [4, 'job']] as const) t.match(await store.ledger.reserve(acc, n, purpose), { ok: true });
  t.match(await store.ledger.balance(acc), { balance: 10, reserved: 9, available: 1 });
  t.equal(await releaseStaleSyncHolds(store), 0, 'the periodic sweep leaves a fresh sync hold alone');
  t.equal(await releaseOrphanedHolds(store, 0), 2, 'the sync hold and the recovery hold');
  t.match(await store.ledger.balance(acc), { balance: 10, reserved: 4, available: 6 }, "the job's 4 stay held");
});
