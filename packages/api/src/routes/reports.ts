// Accuracy reports (docs/decisions/outcomes.md), scope `email:outcomes:read` only:
// GET /v1/outcomes/email/reports/summary and .../domains over a window `from` <= t < `to`. Each
// outcome is joined (by the analytics port: SQL embedded, ClickHouse in cluster) to the account's
// validation decision for the address made before it; @svc/outcomes turns the counts into the
// report (confusion matrix, hard-bounce rate per predicted result with a 95% interval, precision).

import type { FastifyPluginAsync } from 'fastify';
import { failingAs, ServiceError } from '@svc/contracts';
import { domainsReport, summaryReport } from '@svc/outcomes';
import type { Analytics } from '@svc/store';
import { errorResponses, type RouteErrors } from '../schemas.ts';

/** The longest window a report reads (a year and a day). */
export const MAX_REPORT_DAYS = 366;
/** The window when `from` is not given: the 30 days before `to`. */
export const DEFAULT_REPORT_DAYS = 30;
const DAY = 86_400_000;

const reportConfig = { scope: 'email:outcomes:read', errors: ['invalid_outcome_query', 'service_unavailable'] } as const satisfies RouteErrors;

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** The window of a report request: RFC 3339 `from` and `to` (defaults: now, and 30 days before `to`). */
export function reportWindow(q: { from?: string; to?: string }, now = Date.now()): { from: Date; to: Date } {
  const at = (name: string, v: string): Date => {
    const ms = RFC3339.test(v) ? Date.parse(v) : NaN;
    if (Number.isNaN(ms)) throw new ServiceError('invalid_outcome_query', `${name} must be an RFC 3339 date-time (e.g. 2026-01-01T00:00:00Z)`);
    return new Date(ms);
  };
  const to = q.to === undefined ? new Date(now) : at('to', q.to);
  const from = q.from === undefined ? new Date(to.getTime() - DEFAULT_REPORT_DAYS * DAY) : at('from', q.from);
  if (from.getTime() >= to.getTime()) throw new ServiceError('invalid_outcome_query', 'from must be earlier than to');
  if (to.getTime() - from.getTime() > MAX_REPORT_DAYS * DAY) throw new ServiceError('invalid_outcome_query', `the window is at most ${MAX_REPORT_DAYS} days`);
  return { from, to };
}

const windowQuery = {
  type: 'object',
  properties: {
    from: { type: 'string', description: 'Start of the window, inclusive (RFC 3339; default: 30 days before `to`)' },
    to: { type: 'string', description: 'End of the window, exclusive (RFC 3339; default: now)' },
    limit: { type: 'string', description: 'domains only: rows, 1-10000 (default 100)' },
  },
} as const;

/** A failure of the analytics backend while reading is an outage: retry later. */
const reading = <T>(p: Promise<T>): Promise<T> => failingAs(p, 'service_unavailable', 'The analytics store could not be read; retry later');

export const reportRoutes: FastifyPluginAsync<{ analytics: Pick<Analytics, 'outcomeMatrix' | 'outcomeDomains'> }> = async (app, { analytics }) => {
  app.get<{ Querystring: { from?: string; to?: string } }>(
    '/v1/outcomes/email/reports/summary',
    {
      config: reportConfig,
      schema: {
        summary: 'Accuracy summary: every outcome in the window against the validation made before it',
        description: 'Confusion matrix (validation result × outcome label), hard-bounce rate per predicted result with counts and a 95% Wilson interval, precision of `valid` and `invalid` against decision-grade labels. Accuracy figures are null with `denominator_status` `sent_event_missing` while the window has no `sent` event.',
        tags: ['outcomes'],
        security: [{ apiKey: [] }],
        querystring: windowQuery,
        response: errorResponses(reportConfig),
      },
    },
    async (req) => {
      const w = reportWindow(req.query);
      const matrix = await reading(analytics.outcomeMatrix({ account_id: req.principal!.accountId, ...w }));
      return summaryReport(matrix, w);
    },
  );

  app.get<{ Querystring: { from?: string; to?: string; limit?: string } }>(
    '/v1/outcomes/email/reports/domains',
    {
      config: reportConfig,
      schema: {
        summary: 'The accuracy summary per recipient domain (most outcomes first)',
        tags: ['outcomes'],
        security: [{ apiKey: [] }],
        querystring: windowQuery,
        response: errorResponses(reportConfig),
      },
    },
    async (req) => {
      const w = reportWindow(req.query);
      const raw = req.query.limit;
      const limit = raw === undefined ? 100 : /^[0-9]{1,5}$/.test(raw) ? Number(raw) : NaN;
      if (!(limit >= 1 && limit <= 10_000)) throw new ServiceError('invalid_outcome_query', 'limit must be an integer from 1 to 10000');
      const rows = await reading(analytics.outcomeDomains({ account_id: req.principal!.accountId, ...w, limit }));
      return domainsReport(rows, w);
    },
  );
};
