// Subscriptions with the Stripe adapter against a local HTTP stand-in for Stripe's API:
// the state table of core 3.2 through HTTP, the outbound `cancel_at_period_end` updates, inbound
// webhooks verified with Stripe's signature scheme (signed with the SDK's own helper) and applied
// once by event id, and the processor's failure leaving nothing changed.

import t, { type Test } from 'tap';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';
import { startStripeStandin, type StripeStandin } from '../helpers/stripe-standin.ts';

const WHSEC = 'whsec_standin0secret0for0tests';
const standin: StripeStandin = await startStripeStandin(WHSEC);
const stack: Stack = await startStack({
  env: { SVC_PAYMENT_PROCESSOR: 'stripe', SVC_STRIPE_SECRET_KEY: 'sk_test_standin0key', SVC_STRIPE_WEBHOOK_SECRET: WHSEC, SVC_STRIPE_API_URL: standin.url },
});
t.teardown(async () => {
  await stack.close();
  await standin.close();
});

const hook = `${stack.url}/v1/webhooks/stripe`;
const now = Math.floor(Date.now() / 1000);
const credits = async (key: string) => (await stack.call('GET', '/v1/credits', { key })).body;

/** A Stripe subscription at the stand-in, announced to the service as Stripe would: created, then its first invoice paid. */
async function stripeSubscription(t: Test, accountId: string, id: string, plan = 'starter') {
  standin.subscriptions.set(id, { id, status: 'active', cancel_at_period_end: false, current_period_start: now, current_period_end: now + 30 * 86_400, metadata: { account_id: accountId, plan } });
  const created = await standin.send(hook, { id: `evt_${id}_created`, type: 'customer.subscription.created', data: { object: standin.object(id) } });
  t.strictSame([created.status, created.body], [200, { received: true, result: 'applied' }], 'customer.subscription.created');
  const invoice = {
    id: `in_${id}_1`,
    object: 'invoice',
    billing_reason: 'subscription_create',
    parent: { type: 'subscription_details', subscription_details: { subscription: id, metadata: { account_id: accountId, plan } } },
    lines: { object: 'list', data: [{ period: { start: now, end: now + 30 * 86_400 } }] },
  };
  const paid = await standin.send(hook, { id: `evt_${id}_paid`, type: 'invoice.paid', data: { object: invoice } });
  t.strictSame([paid.status, paid.body], [200, { received: true, result: 'applied' }], 'invoice.paid');
}

t.test('the state table of core 3.2 with Stripe: outbound updates, the period end by webhook', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 0 });
  await stripeSubscription(t, accountId, 'sub_standin_a');
  const start = await credits(key);
  t.strictSame([start.balance, start.subscription_status, start.cancel_at_period_end, start.current_period_end], [2000, 'active', false, new Date((now + 30 * 86_400) * 1000).toISOString()]);

  standin.requests.length = 0;
  const c = await stack.call('POST', '/v1/subscriptions/cancel', { key });
  t.equal(c.status, 200);
  t.strictSame([c.body.subscription_id, c.body.status, c.body.cancel_at_period_end, c.body.current_period_end], ['sub_standin_a', 'active', true, new Date((now + 30 * 86_400) * 1000).toISOString()]);
  t.strictSame(
    standin.requests.map((r) => [r.method, r.path, r.form, r.authorization]),
    [['POST', '/v1/subscriptions/sub_standin_a', { cancel_at_period_end: 'true' }, 'Bearer sk_test_standin0key']],
    'one update at Stripe: cancel_at_period_end=true',
  );
  t.equal(standin.subscriptions.get('sub_standin_a')!.cancel_at_period_end, true);
  // Stripe then sends customer.subscription.updated: the same state, applied once.
  const updated = { id: 'evt_a_updated', type: 'customer.subscription.updated', data: { object: standin.object('sub_standin_a') } };
  t.strictSame((await standin.send(hook, updated)).body, { received: true, result: 'applied' });
  t.strictSame((await standin.send(hook, updated)).body, { received: true, result: 'duplicate' }, 'a redelivery');
  t.equal((await credits(key)).cancel_at_period_end, true);

  const again = await stack.call('POST', '/v1/subscriptions/cancel', { key });
  t.strictSame([again.status, again.body.code], [409, 'subscription_already_canceling']);
  t.equal(standin.requests.length, 1, 'no second call to Stripe');

  const re = await stack.call('POST', '/v1/subscriptions/reactivate', { key });
  t.strictSame([re.status, re.body.cancel_at_period_end], [200, false]);
  t.strictSame(standin.requests.at(-1)!.form, { cancel_at_period_end: 'false' });
  t.equal((await credits(key)).balance, 2000, 'credits kept');
  t.equal((await stack.call('POST', '/v1/subscriptions/cancel', { key })).status, 200);

  // The period end: Stripe ends the subscription and sends customer.subscription.deleted.
  const sub = standin.subscriptions.get('sub_standin_a')!;
  sub.status = 'canceled';
  const deleted = await standin.send(hook, { id: 'evt_a_deleted', type: 'customer.subscription.deleted', data: { object: { ...standin.object('sub_standin_a'), ended_at: sub.current_period_end } } });
  t.strictSame(deleted.body, { received: true, result: 'applied' });
  const after = await credits(key);
  t.strictSame([after.balance, after.available, after.subscription_status], [0, 0, 'canceled']);
  t.strictSame((await stack.store.ledger.entries(accountId, 10)).map((e) => `${e.kind} ${e.amount}`).reverse(), ['grant 2000', 'expire 2000'], 'the plan grant, then the expiry');
  const blocked = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } });
  t.strictSame([blocked.status, blocked.body.code], [402, 'subscription_inactive']);
  t.strictSame((await stack.call('POST', '/v1/subscriptions/cancel', { key })).body.code, 'subscription_not_found');
});

t.test('renewal: invoice.paid for a new cycle grants the plan credits once', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 0 });
  await stripeSubscription(t, accountId, 'sub_standin_b', 'growth');
  const cycle = {
    id: 'evt_b_cycle',
    type: 'invoice.paid',
    data: { object: { id: 'in_b_2', object: 'invoice', billing_reason: 'subscription_cycle', parent: { subscription_details: { subscription: 'sub_standin_b' } }, lines: { data: [{ period: { start: now + 30 * 86_400, end: now + 60 * 86_400 } }] } } },
  };
  t.strictSame((await standin.send(hook, cycle)).body, { received: true, result: 'applied' });
  t.strictSame((await standin.send(hook, cycle)).body, { received: true, result: 'duplicate' });
  t.equal((await credits(key)).balance, 20_000);
  const other = { id: 'evt_unrelated', type: 'payment_intent.succeeded', data: { object: { id: 'pi_1', object: 'payment_intent' } } };
  t.strictSame((await standin.send(hook, other)).body, { received: true, result: 'ignored: event type payment_intent.succeeded' }, 'other events: 200, ignored');
  const stranger = { id: 'evt_stranger', type: 'customer.subscription.updated', data: { object: { id: 'sub_not_ours', status: 'active', current_period_start: now, current_period_end: now + 1 } } };
  t.strictSame((await standin.send(hook, stranger)).body, { received: true, result: 'ignored: unknown_subscription' });
});

t.test('webhook signatures: missing, wrong secret, tampered body, too old: 400 invalid_webhook_signature', async (t) => {
  const event = { id: 'evt_sig', type: 'invoice.paid', data: { object: { id: 'in_x', object: 'invoice' } } };
  const wrong = await standin.send(hook, event, { secret: 'whsec_another0secret' });
  t.strictSame([wrong.status, wrong.body.code], [400, 'invalid_webhook_signature'], 'another secret');
  const old = await standin.send(hook, event, { timestamp: now - 3600 });
  t.strictSame([old.status, old.body.code], [400, 'invalid_webhook_signature'], 'outside the 5-minute tolerance');
  const none = await fetch(hook, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(event) });
  t.strictSame([none.status, ((await none.json()) as { code: string }).code], [400, 'invalid_webhook_signature'], 'no Stripe-Signature');
  const payload = JSON.stringify(event);
  const Stripe = (await import('stripe')).default;
  const header = new Stripe('sk_test_x').webhooks.generateTestHeaderString({ payload, secret: WHSEC });
  const tampered = await fetch(hook, { method: 'POST', headers: { 'content-type': 'application/json', 'stripe-signature': header }, body: payload.replace('in_x', 'in_y') });
  t.strictSame([tampered.status, ((await tampered.json()) as { code: string }).code], [400, 'invalid_webhook_signature'], 'a body changed after signing');
  t.equal((await stack.store.subscriptions.events('in_x')).length, 0);
});

t.test('Stripe failing: 503 payment_processor_unavailable, and nothing changed here', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 0 });
  await stripeSubscription(t, accountId, 'sub_standin_c');
  standin.failWith = 500;
  try {
    const r = await stack.call('POST', '/v1/subscriptions/cancel', { key });
    t.strictSame([r.status, r.body.code], [503, 'payment_processor_unavailable']);
  } finally {
    standin.failWith = null;
  }
  t.equal((await credits(key)).cancel_at_period_end, false, 'the flag flipped back');
  t.equal((await stack.store.subscriptions.live(accountId))!.cancel_at_period_end, false);
  const retry = await stack.call('POST', '/v1/subscriptions/cancel', { key });
  t.strictSame([retry.status, retry.body.cancel_at_period_end], [200, true], 'a retry succeeds');
});
