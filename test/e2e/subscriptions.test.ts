// Subscriptions through HTTP with the local payment processor (docs/api.md; docs/decisions/credits-and-billing.md): the
// state table row by row, renewal, the period end (credits to 0 through the ledger, validation
// 402), concurrency of cancels, events applied once, and work in flight at the period end.
// Runs in both profiles (TEST_PROFILE=cluster: Postgres).

import t from 'tap';
import { runAdmin } from '@svc/admin';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';

const stack: Stack = await startStack();
t.teardown(() => stack.close());

const DAY = 86_400_000;
const subscribe = async (accountId: string, plan = 'starter') => {
  const r = await runAdmin(stack.store, ['subscription', 'create', '--account', accountId, '--plan', plan]);
  if (r.code !== 0) throw new Error(r.out);
  return (await stack.store.subscriptions.live(accountId))!;
};
const advance = (accountId: string) => runAdmin(stack.store, ['subscription', 'advance-period', '--account', accountId]);
const credits = async (key: string) => (await stack.call('GET', '/v1/credits', { key })).body;
const kinds = async (accountId: string) => (await stack.store.ledger.entries(accountId, 100)).map((e) => `${e.kind} ${e.amount}`).reverse();

t.test('no active subscription: cancel and reactivate answer 404 subscription_not_found', async (t) => {
  const { key } = await makeKey(stack, { credits: 10 });
  for (const route of ['/v1/subscriptions/cancel', '/v1/subscriptions/reactivate']) {
    const r = await stack.call('POST', route, { key });
    t.strictSame([r.status, r.body.code], [404, 'subscription_not_found'], route);
    t.equal(r.body.message, 'No active subscription');
  }
});

t.test('any active key of the account may cancel: a key restricted to credits:read', async (t) => {
  const { accountId } = await makeKey(stack, { credits: 0 });
  const { key } = await stack.store.keys.create({ accountId, kind: 'live', scopes: ['credits:read'] });
  await subscribe(accountId);
  const r = await stack.call('POST', '/v1/subscriptions/cancel', { key });
  t.equal(r.status, 200);
  const bad = await stack.call('POST', '/v1/subscriptions/cancel', { key: 'svc_test_0000000000000000000000' });
  t.strictSame([bad.status, bad.body.code], [401, 'invalid_api_key'], 'a key is still required');
});

t.test('the state table of core 3.2, row by row, with renewal', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 5 });
  const sub = await subscribe(accountId, 'starter');
  t.match(sub.id, /^sub_local_[0-9a-f]{20}$/);
  t.equal(sub.status, 'active');
  t.equal(sub.current_period_end.getTime() - sub.current_period_start.getTime(), 30 * DAY, 'a 30-day period');
  const start = await credits(key);
  t.strictSame([start.balance, start.subscription_status, start.cancel_at_period_end, start.current_period_end], [2005, 'active', false, sub.current_period_end.toISOString()], "the first period's 2,000 credits granted");

  // Row 1: active, flag false -> cancel -> active, flag true; the processor event; credits usable.
  const c = await stack.call('POST', '/v1/subscriptions/cancel', { key });
  t.equal(c.status, 200);
  t.strictSame(Object.keys(c.body).sort(), ['cancel_at_period_end', 'current_period_end', 'message', 'status', 'subscription_id']);
  t.strictSame([c.body.subscription_id, c.body.status, c.body.cancel_at_period_end, c.body.current_period_end], [sub.id, 'active', true, sub.current_period_end.toISOString()]);
  t.equal(c.body.message, `Subscription will be canceled at the end of the current period (${sub.current_period_end.toISOString()}). Validation and the full credit balance stay available until then; there are no further charges.`);
  const events = await stack.store.subscriptions.events(sub.id);
  t.strictSame(
    events.map((e) => `${e.type} ${e.result}`),
    ['customer.subscription.created applied', 'invoice.paid applied', 'customer.subscription.updated applied', 'answer.subscription applied'],
    'the cancel emitted customer.subscription.updated',
  );
  const during = await credits(key);
  t.strictSame([during.balance, during.subscription_status, during.cancel_at_period_end], [2005, 'active', true]);
  const v = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } });
  t.strictSame([v.status, v.body.result], [200, 'valid'], 'validation stays usable until the period end');
  t.equal((await credits(key)).balance, 2004, 'and charges as before');

  // Row 2: active, flag true -> cancel -> 409, unchanged.
  const again = await stack.call('POST', '/v1/subscriptions/cancel', { key });
  t.strictSame([again.status, again.body.code], [409, 'subscription_already_canceling']);
  t.equal((await stack.store.subscriptions.get(sub.id))!.cancel_at_period_end, true);

  // Row 4: active, flag true -> reactivate before the period end -> cancellation undone, credits kept.
  const re = await stack.call('POST', '/v1/subscriptions/reactivate', { key });
  t.equal(re.status, 200);
  t.strictSame([re.body.subscription_id, re.body.status, re.body.cancel_at_period_end, re.body.current_period_end], [sub.id, 'active', false, sub.current_period_end.toISOString()]);
  t.equal(re.body.message, `Cancellation undone: the subscription stays active and renews at the end of the current period (${sub.current_period_end.toISOString()}). Credits are kept.`);
  t.strictSame([(await credits(key)).balance, (await credits(key)).cancel_at_period_end], [2004, false]);
  const twice = await stack.call('POST', '/v1/subscriptions/reactivate', { key });
  t.strictSame([twice.status, twice.body.code], [409, 'subscription_not_canceling']);

  // Renewal: the period end of a subscription not set to cancel grants the plan's credits.
  const renewed = await advance(accountId);
  t.equal(renewed.code, 0, renewed.out);
  t.match(renewed.out, `subscription ${sub.id} renewed`);
  const next = (await stack.store.subscriptions.get(sub.id))!;
  t.strictSame([next.status, next.current_period_start.toISOString(), next.current_period_end.toISOString()], ['active', sub.current_period_end.toISOString(), new Date(sub.current_period_end.getTime() + 30 * DAY).toISOString()]);
  t.strictSame([(await credits(key)).balance, (await credits(key)).current_period_end], [4004, next.current_period_end.toISOString()], 'renewal granted 2,000 through the ledger');

  // Row 5: active, flag true -> period end -> canceled; credits to 0 through a ledger entry; 402.
  t.equal((await stack.call('POST', '/v1/subscriptions/cancel', { key })).status, 200);
  const ended = await advance(accountId);
  t.equal(ended.code, 0, ended.out);
  t.match(ended.out, `subscription ${sub.id} ended`);
  const gone = (await stack.store.subscriptions.get(sub.id))!;
  t.strictSame([gone.status, gone.ended_at?.toISOString()], ['canceled', next.current_period_end.toISOString()]);
  const after = await credits(key);
  t.strictSame([after.balance, after.reserved, after.available, after.subscription_status], [0, 0, 0, 'canceled']);
  t.strictSame(await kinds(accountId), ['grant 5', 'grant 2000', 'reserve 1', 'charge 1', 'grant 2000', 'expire 4004'], 'every movement is a ledger row');
  t.strictSame(await stack.store.ledger.totals(accountId), { balance: 0, reserved: 0 }, 'the ledger alone says 0');
  const blocked = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } });
  t.strictSame([blocked.status, blocked.body.code], [402, 'subscription_inactive']);
  const bulk = await stack.call('POST', '/v1/validate/bulk', { key, body: { emails: ['jane.doe@accept.test'] } });
  t.strictSame([bulk.status, bulk.body.code], [402, 'subscription_inactive']);
  const job = await stack.call('POST', '/v1/validate/batch', { key, body: { emails: ['jane.doe@accept.test'] } });
  t.strictSame([job.status, job.body.code], [402, 'subscription_inactive'], 'and jobs');
  const none = await stack.call('POST', '/v1/subscriptions/cancel', { key });
  t.strictSame([none.status, none.body.code], [404, 'subscription_not_found'], 'an ended subscription is no active subscription');
  t.strictSame([(await stack.call('POST', '/v1/subscriptions/reactivate', { key })).body.code], ['subscription_not_found'], 'and cannot be reactivated');
  const noMore = await advance(accountId);
  t.strictSame([noMore.code, noMore.out], [1, `account ${accountId} has no live subscription`]);
});

t.test('ten concurrent cancels: exactly one 200, nine 409; then ten concurrent reactivates likewise', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 0 });
  await subscribe(accountId);
  const tally = (rs: Array<{ status: number; body: { code?: string } }>) => rs.map((r) => (r.status === 200 ? '200' : `${r.status} ${r.body.code}`)).sort();
  const cancels = await Promise.all(Array.from({ length: 10 }, () => stack.call('POST', '/v1/subscriptions/cancel', { key })));
  t.strictSame(tally(cancels), ['200', ...Array(9).fill('409 subscription_already_canceling')]);
  const reacts = await Promise.all(Array.from({ length: 10 }, () => stack.call('POST', '/v1/subscriptions/reactivate', { key })));
  t.strictSame(tally(reacts), ['200', ...Array(9).fill('409 subscription_not_canceling')]);
  t.equal((await credits(key)).cancel_at_period_end, false);
});

t.test('a processor event is applied once by its id; late events do not revive an ended subscription', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 0 });
  const sub = await subscribe(accountId, 'growth');
  t.equal((await credits(key)).balance, 10_000);
  const subs = stack.svc.services.subscriptions;
  const invoice = {
    id: 'evt_test_renewal_1',
    type: 'invoice.paid',
    created: Math.floor(Date.now() / 1000),
    data: { object: { id: 'in_test_1', object: 'invoice', billing_reason: 'subscription_cycle', subscription: sub.id, lines: { data: [{ period: { start: 1, end: 2 } }] } } },
  };
  t.equal(await subs.applyEvent(invoice, 'local'), 'applied');
  t.equal(await subs.applyEvent(invoice, 'local'), 'duplicate', 'a retried delivery');
  t.equal((await credits(key)).balance, 20_000, 'granted once');
  const other = { ...invoice, id: 'evt_test_other', data: { object: { ...invoice.data.object, billing_reason: 'manual' } } };
  t.equal(await subs.applyEvent(other, 'local'), 'ignored: billing_reason manual');
  t.equal(await subs.applyEvent({ id: 'evt_test_unknown', type: 'charge.refunded', created: 0, data: { object: {} } }, 'local'), 'ignored: event type charge.refunded');
  // The end, then an older "active" update delivered late.
  const end = Math.floor(sub.current_period_end.getTime() / 1000);
  const object = { id: sub.id, object: 'subscription', status: 'canceled', cancel_at_period_end: true, current_period_start: end - 30 * 86_400, current_period_end: end };
  t.equal(await subs.applyEvent({ id: 'evt_test_deleted', type: 'customer.subscription.deleted', created: end, data: { object } }, 'local'), 'applied');
  t.strictSame([(await credits(key)).balance, (await credits(key)).subscription_status], [0, 'canceled']);
  const late = { id: 'evt_test_late', type: 'customer.subscription.updated', created: end - 10, data: { object: { ...object, status: 'active', cancel_at_period_end: false } } };
  t.equal(await subs.applyEvent(late, 'local'), 'ignored: subscription_ended');
  t.equal((await stack.store.subscriptions.get(sub.id))!.status, 'canceled');
  t.equal(await subs.applyEvent({ ...invoice, id: 'evt_test_after_end' }, 'local'), 'ignored: subscription_ended', 'no credits after the end');
  t.equal((await credits(key)).balance, 0);
});

t.test('credits held by work in flight at the period end: charged as done, the rest expires when released', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 0 });
  await subscribe(accountId);
  const held = await stack.store.ledger.reserve(accountId, 50, 'job');
  t.ok(held.ok);
  t.equal((await stack.call('POST', '/v1/subscriptions/cancel', { key })).status, 200);
  await advance(accountId);
  t.strictSame([(await credits(key)).balance, (await credits(key)).reserved, (await credits(key)).available], [50, 50, 0], 'what is held stays held; the rest expired');
  t.equal(await stack.store.ledger.settle((held as { reservationId: string }).reservationId, 20), true);
  const b = await credits(key);
  t.strictSame([b.balance, b.reserved, b.available], [0, 0, 0], '20 charged, the 30 released expire');
  t.strictSame((await kinds(accountId)).slice(-4), ['expire 1950', 'charge 20', 'release 30', 'expire 30']);
  t.strictSame(await stack.store.ledger.totals(accountId), { balance: 0, reserved: 0 });
});

t.test('the renewal sweep: due subscriptions renew (or end) once, however many run it at once', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 0 });
  const sub = await subscribe(accountId);
  // The period ended an hour ago (as if the service had been down across it).
  await stack.db.query("UPDATE subscriptions SET current_period_end = now() - interval '1 hour' WHERE id = $1", [sub.id]);
  const local = stack.svc.services.localProcessor!;
  const runs = await Promise.all([local.renewDue(), local.renewDue(), local.renewDue()]);
  t.ok(runs.reduce((a, b) => a + b, 0) >= 1, 'renewed');
  t.equal((await credits(key)).balance, 4000, 'one renewal: the plan credits once');
  const s = (await stack.store.subscriptions.get(sub.id))!;
  t.ok(s.current_period_end.getTime() > Date.now(), 'the next period runs from the old end');
});

t.test('a crash between a period and its invoice: the sweep grants the missing credits, once', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 0 });
  // What LocalProcessor.create writes first, without the invoice that follows it.
  const start = Math.floor(Date.now() / 1000);
  const id = `sub_local_crash${accountId.slice(-8)}`;
  const object = { id, object: 'subscription', status: 'active', cancel_at_period_end: false, current_period_start: start, current_period_end: start + 30 * 86_400, metadata: { account_id: accountId, plan: 'starter' } };
  t.equal(await stack.svc.services.subscriptions.applyEvent({ id: `evt_local_${id}_created`, type: 'customer.subscription.created', created: start, data: { object } }, 'local'), 'applied');
  t.equal((await credits(key)).balance, 0, 'no credits yet');
  const local = stack.svc.services.localProcessor!;
  await Promise.all([local.renewDue(), local.renewDue()]);
  await local.renewDue();
  t.equal((await credits(key)).balance, 2000, "the first period's credits, once");
  t.strictSame((await stack.store.subscriptions.events(id)).map((e) => `${e.type} ${e.result}`), ['customer.subscription.created applied', 'invoice.paid applied']);
});
