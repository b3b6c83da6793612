// Subscriptions with the local payment processor: the plans, create one, show one, and move the
// processor's clock to the period end (renew, or end one set to cancel). The rules of create and
// advance-period are billing's (subscribeLocally, advanceLocalPeriod), shared with the dashboard's
// operator console.

import type { Store } from '@svc/store';
import { advanceLocalPeriod, LocalProcessor, SubscriptionService, subscribeLocally } from '@svc/billing';
import { type AdminResult, type Command, cell, columns, iso, needAccount, usageError } from '../command.ts';

/** The local payment processor over the store, with its events applied by a SubscriptionService. */
function localProcessor(store: Store): LocalProcessor {
  const local = new LocalProcessor(store);
  local.attach(new SubscriptionService(store, local));
  return local;
}

async function showSubscription(store: Store, account: string, headline?: string): Promise<AdminResult> {
  const s = await store.subscriptions.latest(account);
  if (!s) return { code: 1, out: `account ${account} has no subscription` };
  const b = (await store.ledger.balance(account))!;
  const events = await store.subscriptions.events(s.id);
  const lines: Array<[string, string]> = [
    ['id', s.id],
    ['account', s.account_id],
    ['processor', s.processor],
    ['plan', s.plan_id],
    ['status', s.status],
    ['cancel_at_period_end', String(s.cancel_at_period_end)],
    ['current_period', `${iso(s.current_period_start)} to ${iso(s.current_period_end)}`],
    ['ended', iso(s.ended_at)],
    ['credits', `balance ${b.balance}, reserved ${b.reserved}, available ${b.available}`],
    ['events', String(events.length)],
  ];
  const w = Math.max(...lines.map(([k]) => k.length));
  const out = [
    ...(headline ? [headline] : []),
    ...lines.map(([k, val]) => `${k.padEnd(w)}  ${val}`),
    ...events.map((e) => `  ${iso(e.received_at)}  ${e.type}  ${cell(e.result)}`),
  ];
  return { code: 0, out: out.join('\n') };
}

export const subscriptionsCommands: Command[] = [
  {
    noun: 'subscription',
    verb: 'plans',
    synopsis: '',
    about: 'Lists the plans (rows of `plans`): id, price, credits granted each period, period length, name.',
    options: [],
    async run(store) {
      const rows = (await store.subscriptions.plans()).map((p) => [p.id, `${(p.price_cents / 100).toFixed(2)} ${p.currency}`, String(p.credits_per_period), `${p.period_days} d`, cell(p.name)]);
      return { code: 0, out: columns(['ID', 'PRICE', 'CREDITS', 'PERIOD', 'NAME'], rows, new Set([1, 2, 3])) };
    },
  },
  {
    noun: 'subscription',
    verb: 'create',
    synopsis: '--account ACCOUNT_ID --plan PLAN_ID',
    about: "Subscribes an account to a plan with the local payment processor, from now: the first period's credits are granted (a ledger row), and it renews at the period end. (With Stripe, subscriptions come from Stripe's own events.)",
    options: [
      ['--account ACCOUNT_ID', 'the account (required); it must have no live subscription'],
      ['--plan PLAN_ID', 'the plan (required; `admin subscription plans` lists them)'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      if (!v.plan) return usageError('--plan is required', this);
      const r = await subscribeLocally(store, localProcessor(store), account, v.plan);
      if (!r.ok) return { code: 1, out: r.message };
      return showSubscription(store, account, `subscription ${r.subscription.id} created`);
    },
  },
  {
    noun: 'subscription',
    verb: 'show',
    synopsis: '--account ACCOUNT_ID',
    about: "Shows an account's newest subscription (status, plan, period, cancel_at_period_end), its credits, and the processor events applied to it.",
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      return showSubscription(store, account);
    },
  },
  {
    noun: 'subscription',
    verb: 'advance-period',
    synopsis: '--account ACCOUNT_ID',
    about: "Moves the local payment processor's clock to the end of the account's current period, now: a subscription set to cancel ends (canceled; its credits expire to 0, a ledger row), any other renews (the plan's credits granted, the next period begins). For operators and tests.",
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const r = await advanceLocalPeriod(store, localProcessor(store), account);
      if (!r.ok) return { code: 1, out: r.message };
      const after = r.subscription;
      return showSubscription(store, account, after.status === 'canceled' ? `subscription ${after.id} ended` : `subscription ${after.id} renewed`);
    },
  },
];
