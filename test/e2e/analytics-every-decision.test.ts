// Cached validations under concurrency, end to end on the embedded stack: every answered
// validation is one analytics decision (exact counts, one row per X-Request-ID), written by the
// buffer without any flush() of the test's own: the service's close() writes what is still
// buffered. And the money is exact: the group-committed debits (one ledger row per note and
// batch) add up to one credit per chargeable answer, and the ledger agrees with the balance.
// Embedded profile only: the cluster profile writes decisions to ClickHouse (test/e2e/analytics.test.ts
// covers that adapter end to end).

import t from 'tap';
import { CLUSTER_PROFILE, makeKey, startStack } from '../helpers/stack.ts';

t.setTimeout(120_000);

if (CLUSTER_PROFILE) {
  t.plan(0, 'embedded profile only: the cluster profile keeps decisions in ClickHouse (test/e2e/analytics.test.ts)');
} else {
  t.test('concurrent cached validations: every decision in analytics, every credit in the ledger', async (t) => {
    const stack = await startStack();
    t.teardown(() => stack.close());
    const { key, accountId } = await makeKey(stack, { credits: 1000 });
    const ROLE = 'info@accept.test';
    const CHARGED = 'jane.doe@accept.test';
    const from = new Date(Date.now() - 1000);

    // One real validation of each fills the verdict cache; every request after it is answered from the cache.
    const ids: string[] = [];
    for (const email of [ROLE, CHARGED]) {
      const r = await stack.call('POST', '/v1/validate', { key, body: { email } });
      t.equal(r.status, 200, `warm-up ${email}`);
      ids.push(r.headers.get('x-request-id')!);
    }

    const N = 150;
    const answers = await Promise.all(Array.from({ length: 2 * N }, (_, i) => stack.call('POST', '/v1/validate', { key, body: { email: i % 2 ? CHARGED : ROLE } })));
    t.strictSame(
      answers.map((a) => a.status),
      Array(2 * N).fill(200),
      'every concurrent request answered 200',
    );
    t.equal(answers.filter((a) => a.body.result === 'valid_role_based' && a.body.credits_charged === 0).length, N, `${N} role answers, not charged`);
    t.equal(answers.filter((a) => a.body.result === 'valid' && a.body.credits_charged === 1).length, N, `${N} chargeable answers, 1 credit each`);
    ids.push(...answers.map((a) => a.headers.get('x-request-id')!));

    // No flush() here: the service's shutdown closes analytics, which writes the buffer.
    const pending = stack.svc.services.analytics.pending;
    await stack.svc.close();
    const analytics = stack.store.sqlAnalytics();
    t.teardown(() => analytics.close());
    const counts = await analytics.countByResult({ account_id: accountId, from, to: new Date(Date.now() + 1000) });
    t.strictSame(counts, { valid: N + 1, valid_role_based: N + 1, risky: 0, invalid: 0, unknown: 0 }, `every decision written (${pending} were still buffered at close)`);
    const rows = await stack.db.query<{ id: string; credits_charged: number; source: string }>('SELECT id, credits_charged, source FROM validation_decisions WHERE account_id = $1', [accountId]);
    t.strictSame(rows.map((r) => r.id).sort(), ids.map((id) => `${id}:0`).sort(), 'one decision per request, by its request id');
    t.equal(rows.reduce((n, r) => n + r.credits_charged, 0), N + 1, 'credits charged, as analytics has them');
    t.ok(rows.every((r) => r.source === 'single'), 'source single');

    const balance = await stack.store.ledger.balance(accountId);
    t.equal(balance?.balance, 1000 - (N + 1), 'one credit per chargeable answer');
    t.strictSame(await stack.store.ledger.totals(accountId), { balance: 1000 - (N + 1), reserved: 0 }, 'the ledger agrees with the balance');
    const kinds = await stack.db.query<{ kind: string; total: number }>(
      "SELECT kind, sum(amount)::int AS total FROM credit_ledger WHERE account_id = $1 AND kind IN ('debit', 'charge') GROUP BY kind ORDER BY kind",
      [accountId],
    );
    // The warm-up's validation was not cached yet: reserved and charged; every later one a debit.
    t.strictSame(kinds, [{ kind: 'charge', total: 1 }, { kind: 'debit', total: N }], 'the warm-up charged from a reservation, the cached ones debited');
  });
}
