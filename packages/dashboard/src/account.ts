// The account page's API (owners only): the subscription and credits as GET /v1/credits shows them,
// cancel and reactivate through billing's SubscriptionService (the REST routes' use case, with their
// 404 and 409s), the MCP apps connected to the account (its OAuth grants: listed, revoked), and the
// account's webhook signing secrets by their first characters (the service of GET /v1/webhooks/secret).

import type { FastifyInstance } from 'fastify';
import { ServiceError } from '@svc/contracts';
import type { OAuthGrantListing } from '@svc/store';
import { hide, hideNoBody, iso, type DashboardContext } from './context.ts';

/** A connected app as the page shows it: never a token, only the key's prefix. */
export const appBody = (g: OAuthGrantListing) => ({
  id: g.id,
  client_id: g.client_id,
  client_name: g.client_name,
  scopes: g.scopes,
  resource: g.resource,
  created_at: g.created_at.toISOString(),
  last_token_at: iso(g.last_token_at),
  revoked_at: iso(g.revoked_at),
  key: { id: g.key_id, prefix: g.key_prefix, name: g.key_name, state: g.key_state },
});

export async function accountRoutes(app: FastifyInstance, { store, opts, guard }: DashboardContext): Promise<void> {
  app.get(`/account`, hide, async (req) => {
    const s = await guard(req, 'owner');
    const accountId = s.user.account_id;
    const credits = (await store.ledger.balance(accountId))!;
    const sub = await store.subscriptions.latest(accountId);
    const plan = sub ? await store.subscriptions.plan(sub.plan_id) : undefined;
    return {
      credits,
      subscription: sub
        ? {
            id: sub.id,
            processor: sub.processor,
            plan: { id: sub.plan_id, name: plan?.name ?? null, credits_per_period: plan?.credits_per_period ?? null, period_days: plan?.period_days ?? null },
            status: sub.status,
            cancel_at_period_end: sub.cancel_at_period_end,
            current_period_start: sub.current_period_start.toISOString(),
            current_period_end: sub.current_period_end.toISOString(),
            ended_at: iso(sub.ended_at),
          }
        : null,
      // Whether this process can change a subscription (it always can where the API can).
      can_change_subscription: opts.subscriptions !== undefined,
    };
  });

  if (opts.subscriptions) {
    const subscriptions = opts.subscriptions;
    app.post(`/account/subscription/cancel`, hideNoBody, async (req) => {
      const s = await guard(req, 'owner');
      return subscriptions.cancel(s.user.account_id);
    });
    app.post(`/account/subscription/reactivate`, hideNoBody, async (req) => {
      const s = await guard(req, 'owner');
      return subscriptions.reactivate(s.user.account_id);
    });
  }

  app.get(`/account/apps`, hide, async (req) => {
    const s = await guard(req, 'owner');
    return { apps: (await store.oauth.grants(s.user.account_id)).map(appBody) };
  });

  // Revoking ends the grant as POST /oauth/revoke does (store.oauth.revokeGrant): every MCP request
  // checks its grant, so its tokens are refused from the next request on.
  app.post<{ Params: { id: string } }>(`/account/apps/:id/revoke`, hideNoBody, async (req) => {
    const s = await guard(req, 'owner');
    const [grant] = await store.oauth.grants(s.user.account_id, { grantId: req.params.id, withRevoked: true });
    if (!grant) throw new ServiceError('oauth_grant_not_found');
    const changed = await store.oauth.revokeGrant(grant.id);
    return { id: grant.id, changed, message: changed ? `${grant.client_name || 'The app'} is disconnected: its tokens stop working now` : 'This app was disconnected already' };
  });

  if (opts.webhookSecrets) {
    const secrets = opts.webhookSecrets;
    app.get(`/account/webhook-secrets`, hide, async (req) => {
      const s = await guard(req, 'owner');
      return secrets.list(s.user.account_id);
    });
  }
}
