// The Find & enrich page's routes: POST /v1/find/bulk and POST /v1/company/enrich for a signed-in
// person, through the REST routes' body parsers and @svc/enrich's DataService, so the answers,
// the codes and the charge (billing's chargeData inside the service) are the API's own.
//
// The gates come in the REST route's order (packages/api/src/routes/data.ts): the data product
// (403 product_not_enabled), an ended subscription (402 subscription_inactive, as on every
// billable route), the finder's own rate (per user here, as it is per key there), the family's
// configuration (503 feature_not_configured with the family's message), then the body (400, each
// field its code). Owners and members may use them: they spend credits as validating does.

import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { DATA_ENDPOINTS, DATA_LIMITS, ServiceError, type DataEndpoint } from '@svc/contracts';
import { hide, requireBillable, type DashboardContext, type Session } from './context.ts';

const MINUTE_MS = 60_000;

export async function dataRoutes(app: FastifyInstance, { store, opts, guard }: DashboardContext): Promise<void> {
  if (!opts.data) return;
  const { service, parseCompanyEnrich, parseFindBulk } = opts.data;
  const { rateLimiter } = opts;

  /** The gates of the REST route for `endpoint`, in its order, up to the body. */
  async function gates(s: Session, endpoint: DataEndpoint, perMinute?: number): Promise<void> {
    const accountId = s.user.account_id;
    if (!(await store.accounts.dataProduct(accountId))) throw new ServiceError('product_not_enabled');
    await requireBillable(store, accountId);
    if (perMinute !== undefined) {
      const d = await rateLimiter.hit(`data:${endpoint}:user:${s.user.id}`, perMinute, MINUTE_MS);
      if (!d.allowed) throw new ServiceError('rate_limited', undefined, { retry_after: 60 }, { 'Retry-After': 60 });
    }
    service.requireFamily(DATA_ENDPOINTS[endpoint].family);
  }

  // The REST body as it is: { contacts: [{ first_name, last_name, domain | company, ... }], validate?, max_concurrent? }.
  app.post(`/data/find`, hide, async (req) => {
    const s = await guard(req, 'session');
    await gates(s, 'find/bulk', DATA_LIMITS.findBulkPerMinute);
    return service.findBulk(s.user.account_id, parseFindBulk(req.body), `find_${randomBytes(12).toString('hex')}`);
  });

  // The REST body as it is: { domain, company_name?, force_refresh? }.
  app.post(`/data/company`, hide, async (req) => {
    const s = await guard(req, 'session');
    await gates(s, 'company/enrich');
    return service.companyEnrich(s.user.account_id, parseCompanyEnrich(req.body));
  });
}
