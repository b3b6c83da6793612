// Money under concurrency: 200 parallel chargeable validations on 50 credits end with exactly
// 50 charged, balance 0, nothing held, and the other 150 refused with 402.

import t from 'tap';
import { makeKey, startStack } from '../helpers/stack.ts';

const stack = await startStack();
t.teardown(() => stack.close());
const store = stack.store;

t.test('200 parallel single validations, 50 credits', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 50 });
  // Two valid personal mailboxes on a server that is not catch-all: every request is chargeable
  // (a valid verdict is charged each time it is delivered, from the cache or not). jane.doe's
  // verdict is cached first (by another account), so both money paths run whatever the timing:
  // one-statement debits for her, reservations for john.smith until his verdict is cached too.
  const warm = await stack.call('POST', '/v1/validate', { key: (await makeKey(stack, { credits: 1 })).key, body: { email: 'jane.doe@accept.test' } });
  t.equal(warm.body.result, 'valid');
  const emails = Array.from({ length: 200 }, (_, i) => (i % 2 ? 'jane.doe' : 'john.smith') + `@accept.test`);
  const res = await Promise.all(emails.map((email) => stack.call('POST', '/v1/validate', { key, body: { email } })));
  const ok = res.filter((r) => r.status === 200);
  const refused = res.filter((r) => r.status === 402);
  t.equal(ok.length, 50, '50 answered');
  t.equal(refused.length, 150, '150 refused');
  t.equal(ok.reduce((n, r) => n + r.body.credits_charged, 0), 50, 'exactly 50 credits charged');
  t.ok(ok.every((r) => r.body.result === 'valid' && r.body.credits_charged === 1));
  t.ok(refused.every((r) => r.body.code === 'insufficient_credits' && r.body.required === 1 && r.body.available === 0));
  const b = await store.ledger.balance(accountId);
  t.same({ balance: b!.balance, reserved: b!.reserved, available: b!.available }, { balance: 0, reserved: 0, available: 0 });
  t.same(await store.ledger.totals(accountId), { balance: 0, reserved: 0 }, 'the ledger agrees');
  // Both money paths ran: reservations for the uncached verdicts, one-statement debits for the
  // cached ones.
  const kinds = await stack.db.query<{ kind: string; n: number }>('SELECT kind, SUM(amount)::int AS n FROM credit_ledger WHERE account_id = $1 GROUP BY kind ORDER BY kind', [accountId]);
  const byKind = Object.fromEntries(kinds.map((k) => [k.kind, k.n]));
  t.ok((byKind.debit ?? 0) > 0, 'some requests were debited directly');
  t.ok((byKind.charge ?? 0) > 0, 'some requests reserved and settled');
  t.equal((byKind.debit ?? 0) + (byKind.charge ?? 0), 50, 'debits + charges = 50');
  t.equal(byKind.reserve ?? 0, (byKind.charge ?? 0) + (byKind.release ?? 0), 'every reservation settled');
});

t.test('parallel bulk requests with mixed results never overdraw', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 7 });
  const body = { emails: ['jane.doe@accept.test', 'info@accept.test', 'x@catchall.test', 'nobody@accept.test', 'bad@@x'] };
  // Each bulk may cost 1 (one valid personal mailbox) and reserves 4 (every address that could be).
  const res = await Promise.all(Array.from({ length: 20 }, () => stack.call('POST', '/v1/validate/bulk', { key, body })));
  const ok = res.filter((r) => r.status === 200);
  t.ok(res.every((r) => r.status === 200 || (r.status === 402 && r.body.code === 'insufficient_credits')), 'only 200 or 402');
  const charged = ok.reduce((n, r) => n + r.body.summary.credits_charged, 0);
  t.ok(ok.every((r) => r.body.summary.credits_charged === 1));
  const b = await store.ledger.balance(accountId);
  t.equal(b!.balance, 7 - charged, 'balance = grant - charged');
  t.equal(b!.reserved, 0, 'nothing left held');
  t.ok(b!.balance >= 0);
  t.same(await store.ledger.totals(accountId), { balance: b!.balance, reserved: 0 });
});

t.test('a duplicate inside one bulk request is charged once', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 5 });
  const res = await stack.call('POST', '/v1/validate/bulk', { key, body: { emails: ['jane.doe@accept.test', 'jane.doe@ACCEPT.test', ' jane.doe@accept.test '] } });
  t.equal(res.status, 200);
  t.same(res.body.results.map((r: { credits_charged: number }) => r.credits_charged), [1, 0, 0]);
  t.same(res.body.results.map((r: { charge_reason: string }) => r.charge_reason), ['high_value_validation', 'duplicate_in_request', 'duplicate_in_request']);
  t.equal(res.body.summary.credits_charged, 1);
  t.equal((await store.ledger.balance(accountId))!.balance, 4);
});

t.test('a quoted local part equivalent to a dot-atom is the same mailbox: charged once, cached once', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 5 });
  const stats = () => stack.sim.statsFor('gmail.com').rcpt;
  const first = stats();
  const res = await stack.call('POST', '/v1/validate/bulk', { key, body: { emails: ['"sim.person.two"@gmail.com', 'sim.person.two@gmail.com', '"sim\\.person.two"@gmail.com'] } });
  t.equal(res.status, 200);
  t.strictSame(
    res.body.results.map((r: Record<string, unknown>) => [r.email, r.result, r.credits_charged, r.charge_reason, r.flags]),
    [
      ['"sim.person.two"@gmail.com', 'valid', 1, 'high_value_validation', []],
      ['sim.person.two@gmail.com', 'valid', 0, 'duplicate_in_request', []],
      ['"sim\\.person.two"@gmail.com', 'valid', 0, 'duplicate_in_request', []],
    ],
  );
  t.equal(stats() - first, 2, 'one RCPT for the mailbox and one for the catch-all probe');
  // The next request is answered from the same cache entry, whichever spelling it uses.
  const again = await stack.call('POST', '/v1/validate', { key, body: { email: 'sim.person.two@gmail.com' } });
  t.strictSame([again.status, again.body.result, again.body.credits_charged], [200, 'valid', 1]);
  t.equal(stats() - first, 2, 'no new RCPT: the quoted spelling filled the cache');
  t.equal((await store.ledger.balance(accountId))!.balance, 3);
});

t.test('a crash between reserve and settle is repaired at the next start', async (t) => {
  const { accountId } = await makeKey(stack, { credits: 3 });
  const r = await store.ledger.reserve(accountId, 2, 'sync'); // as if the process died mid-request
  t.ok(r.ok);
  t.equal((await store.ledger.balance(accountId))!.available, 1);
  t.equal(await store.ledger.releaseStale('sync', 0), 1);
  const b = await store.ledger.balance(accountId);
  t.same({ balance: b!.balance, reserved: b!.reserved }, { balance: 3, reserved: 0 });
});
