// The operator console's API (users with the operator flag, which only the admin CLI grants): every
// account with its credits, subscription and data product; and the changes the admin CLI makes,
// through the same use cases: a credit grant (billing's grantCredits, a ledger row), the data
// product on or off (store.accounts.setDataProduct), a local subscription created or its period
// moved (billing's subscribeLocally and advanceLocalPeriod), and cancel or reactivate on the
// account's behalf (billing's SubscriptionService, as POST /v1/subscriptions/cancel does).

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { advanceLocalPeriod, grantCredits, subscribeLocally, type OperatorSubscriptionResult } from '@svc/billing';
import { ServiceError } from '@svc/contracts';
import type { AccountListing, SubscriptionRecord } from '@svc/store';
import { bodyOf, hide, hideNoBody, iso, text, type DashboardContext } from './context.ts';

/** Ledger rows shown with an account. */
const LEDGER_ROWS = 20;

const accountBody = (a: AccountListing) => ({
  id: a.id,
  name: a.name,
  balance: a.balance,
  reserved: a.reserved,
  available: a.available,
  keys: a.keys,
  created_at: a.created_at.toISOString(),
  data_product: a.data_product,
  subscription_status: a.subscription_status,
  subscription_id: a.subscription_id,
  current_period_end: iso(a.current_period_end),
  cancel_at_period_end: a.cancel_at_period_end,
});

const subscriptionBody = (s: SubscriptionRecord) => ({
  id: s.id,
  processor: s.processor,
  plan_id: s.plan_id,
  status: s.status,
  cancel_at_period_end: s.cancel_at_period_end,
  current_period_start: s.current_period_start.toISOString(),
  current_period_end: s.current_period_end.toISOString(),
  ended_at: iso(s.ended_at),
});

export async function operatorRoutes(app: FastifyInstance, { store, opts, guard }: DashboardContext): Promise<void> {
  /** The route's account (404 account_not_found when there is none). */
  async function accountOf(req: FastifyRequest<{ Params: { id: string } }>): Promise<string> {
    const id = req.params.id;
    if (id.length > 100 || !(await store.accounts.exists(id))) throw new ServiceError('account_not_found');
    return id;
  }

  /** One account as the console shows it: its listing, newest subscription and newest ledger rows. */
  async function detail(id: string) {
    const [listing] = await store.accounts.list({ id });
    if (!listing) throw new ServiceError('account_not_found');
    const sub = await store.subscriptions.latest(id);
    const ledger = await store.ledger.entries(id, LEDGER_ROWS);
    return {
      account: accountBody(listing),
      subscription: sub ? subscriptionBody(sub) : null,
      ledger: ledger.map((e) => ({ id: e.id, created_at: e.created_at.toISOString(), kind: e.kind, amount: e.amount, note: e.note, reservation_id: e.reservation_id })),
    };
  }

  const subscriptionResult = async (id: string, r: OperatorSubscriptionResult) => {
    if (!r.ok) throw new ServiceError(r.code, r.message);
    // The subscription's status gates validation, and the API's key cache holds it with the key.
    opts.onKeyChange?.();
    return detail(id);
  };

  app.get(`/operator/accounts`, hide, async (req) => {
    await guard(req, 'operator');
    const [accounts, plans] = await Promise.all([store.accounts.list(), store.subscriptions.plans()]);
    return { accounts: accounts.map(accountBody), plans, local_processor: opts.localProcessor !== undefined };
  });

  app.get<{ Params: { id: string } }>(`/operator/accounts/:id`, hide, async (req) => {
    await guard(req, 'operator');
    return detail(await accountOf(req));
  });

  app.post<{ Params: { id: string } }>(`/operator/accounts/:id/credits`, hide, async (req) => {
    const s = await guard(req, 'operator');
    const body = bodyOf(req);
    const id = await accountOf(req);
    const n = body.credits;
    if (typeof n !== 'number') throw new ServiceError('invalid_request', 'credits must be a positive whole number');
    const note = body.note === undefined || body.note === '' ? '' : text(body, 'note', 200);
    try {
      await grantCredits(store, id, n, `operator grant by ${s.user.id}${note ? `: ${note}` : ''}`);
    } catch (err) {
      // billing's rule (a positive whole number), answered as the request's fault
      if (err instanceof RangeError) throw new ServiceError('invalid_request', err.message);
      throw err;
    }
    return detail(id);
  });

  app.post<{ Params: { id: string } }>(`/operator/accounts/:id/data-product`, hide, async (req) => {
    await guard(req, 'operator');
    const enabled = bodyOf(req).enabled;
    const id = await accountOf(req);
    if (typeof enabled !== 'boolean') throw new ServiceError('invalid_request', 'enabled must be true or false');
    await store.accounts.setDataProduct(id, enabled);
    // The API's short key cache holds the flag with the key: this process forgets it now.
    opts.onKeyChange?.();
    return detail(id);
  });

  if (opts.localProcessor) {
    const local = opts.localProcessor;
    app.post<{ Params: { id: string } }>(`/operator/accounts/:id/subscription`, hide, async (req, reply) => {
      await guard(req, 'operator');
      const plan = text(bodyOf(req), 'plan', 100);
      const id = await accountOf(req);
      const r = await subscriptionResult(id, await subscribeLocally(store, local, id, plan));
      reply.status(201);
      return r;
    });
    app.post<{ Params: { id: string } }>(`/operator/accounts/:id/subscription/advance-period`, hideNoBody, async (req) => {
      await guard(req, 'operator');
      const id = await accountOf(req);
      return subscriptionResult(id, await advanceLocalPeriod(store, local, id));
    });
  }

  if (opts.subscriptions) {
    const subscriptions = opts.subscriptions;
    for (const verb of ['cancel', 'reactivate'] as const) {
      app.post<{ Params: { id: string } }>(`/operator/accounts/:id/subscription/${verb}`, hideNoBody, async (req) => {
        await guard(req, 'operator');
        const id = await accountOf(req);
        const answer = await subscriptions[verb](id);
        return { ...(await detail(id)), message: answer.message };
      });
    }
  }
}
