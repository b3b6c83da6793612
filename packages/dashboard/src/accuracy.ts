// The Accuracy page's routes: the outcome reports of GET /v1/outcomes/email/reports/summary and
// /domains (the same analytics port and the same @svc/outcomes functions), the same report per day
// or week of the window, what the account's catch-all recoveries did (their records, migration
// 014), the outcome CSV import and the sender-platform connector of the REST outcome routes
// (packages/api/src/routes/outcomes.ts, @svc/outcomes' OutcomesService).
//
// Who: anyone signed in reads the reports and the connector's status, and imports outcomes (it
// costs nothing, like validating it is the members' work); creating and revoking the connector is
// for owners: its webhook URL is a standing credential that writes into the account, as a key is.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { failingAs, ServiceError } from '@svc/contracts';
import { bodyOf, DAY_MS, hide, hideNoBody, query, readAnalytics, windowOf as windowIn, type DashboardContext } from './context.ts';

const windowOf = (req: FastifyRequest) => windowIn(req, 'invalid_outcome_query');

/** The windows the page offers, in days. */
/** Day buckets read at most this many days (one report each). */
export const MAX_DAY_BUCKETS = 31;
/** Reports of the buckets read at once. */
const BUCKETS_AT_ONCE = 4;
/** The latest recoveries listed. */
const RECOVERIES_LISTED = 20;

/** The window cut into days or weeks, newest last; weeks end with `to`, the oldest one may be shorter. */
export function bucketsOf(w: { from: Date; to: Date }, size: 'day' | 'week'): Array<{ from: Date; to: Date }> {
  const step = size === 'day' ? DAY_MS : 7 * DAY_MS;
  const out: Array<{ from: Date; to: Date }> = [];
  for (let end = w.to.getTime(); end > w.from.getTime(); end -= step) out.unshift({ from: new Date(Math.max(w.from.getTime(), end - step)), to: new Date(end) });
  return out;
}

const reading = readAnalytics;

/** A database failure while importing is the retryable import failure (nothing was kept), as on REST. */
const storing = <T>(p: Promise<T>): Promise<T> => failingAs(p, 'outcome_import_failed');

export async function accuracyRoutes(app: FastifyInstance, { store, opts, guard }: DashboardContext): Promise<void> {
  // ---- The reports, for anyone signed in.

  if (opts.reports) {
    const { analytics, summary, domains } = opts.reports;
    const summaryOf = (accountId: string, w: { from: Date; to: Date }) => reading(analytics.outcomeMatrix({ account_id: accountId, from: w.from, to: w.to })).then((m) => summary(m, w));

    app.get(`/accuracy/summary`, hide, async (req) => {
      const s = await guard(req, 'session');
      return summaryOf(s.user.account_id, windowOf(req));
    });

    app.get(`/accuracy/domains`, hide, async (req) => {
      const s = await guard(req, 'session');
      const w = windowOf(req);
      const raw = query(req, 'limit');
      const limit = raw === undefined ? 100 : /^[0-9]{1,5}$/.test(raw) ? Number(raw) : NaN;
      if (!(limit >= 1 && limit <= 10_000)) throw new ServiceError('invalid_outcome_query', 'limit must be an integer from 1 to 10000');
      const rows = await reading(analytics.outcomeDomains({ account_id: s.user.account_id, from: w.from, to: w.to, limit }));
      return domains(rows, { from: w.from, to: w.to });
    });

    // Over time: the summary report of each day or week of the window (the same function per bucket).
    app.get(`/accuracy/trend`, hide, async (req) => {
      const s = await guard(req, 'session');
      const w = windowOf(req);
      const size = query(req, 'bucket') ?? (w.days <= 7 ? 'day' : 'week');
      if (size !== 'day' && size !== 'week') throw new ServiceError('invalid_outcome_query', 'bucket must be day or week');
      if (size === 'day' && w.days > MAX_DAY_BUCKETS) throw new ServiceError('invalid_outcome_query', `bucket day reads at most ${MAX_DAY_BUCKETS} days; use week`);
      const buckets = bucketsOf(w, size);
      const reports: unknown[] = [];
      for (let at = 0; at < buckets.length; at += BUCKETS_AT_ONCE) reports.push(...(await Promise.all(buckets.slice(at, at + BUCKETS_AT_ONCE).map((b) => summaryOf(s.user.account_id, b)))));
      return { from: w.from.toISOString(), to: w.to.toISOString(), bucket: size, buckets: reports };
    });
  }

  // Catch-all recovery: what the account's recoveries completed in the window did, as their records keep it.
  app.get(`/accuracy/recoveries`, hide, async (req) => {
    const s = await guard(req, 'session');
    const w = windowOf(req);
    const r = await store.recoveries.accountSummary(s.user.account_id, w, RECOVERIES_LISTED);
    return {
      from: w.from.toISOString(),
      to: w.to.toISOString(),
      recoveries: r.recoveries,
      rows: r.rows,
      upgraded: r.upgraded,
      downgraded: r.downgraded,
      unchanged: r.rows - r.upgraded - r.downgraded,
      credits_charged: r.credits_charged,
      by_reason: r.by_reason,
      latest: r.latest.map((x) => ({ ...x, unchanged: x.rows - x.upgraded - x.downgraded, completed_at: x.completed_at.toISOString() })),
    };
  });

  // ---- Outcomes: the CSV import (anyone signed in) and the connector (owners change it).

  if (opts.outcomes) {
    const { service, csvRows, maxBytes, platforms } = opts.outcomes;
    const platformOf = (p: string): string => {
      if (!platforms.includes(p)) throw new ServiceError('connector_unavailable', `No connector for the platform "${p.slice(0, 64)}"; supported: ${platforms.join(', ')}`);
      return p;
    };

    // The page sends the file's text in JSON (the dashboard takes JSON bodies only); the service
    // reads it as POST /v1/outcomes/email/import reads a text/csv body, and answers the same.
    app.post(`/accuracy/import`, { ...hide, bodyLimit: 2 * maxBytes + 64 * 1024 }, async (req) => {
      const s = await guard(req, 'session');
      const csv = bodyOf(req).csv;
      if (typeof csv !== 'string') throw new ServiceError('invalid_request', 'csv is required: the text of the CSV file');
      if (Buffer.byteLength(csv) > maxBytes) throw new ServiceError('payload_too_large', `The CSV is larger than ${maxBytes / 1024 / 1024} MiB`);
      const rows = csvRows(csv);
      return storing(service.import(s.user.account_id, rows, { defaultSource: 'csv_import' }));
    });

    app.get<{ Params: { platform: string } }>(`/accuracy/connectors/:platform`, hide, async (req) => {
      const s = await guard(req, 'session');
      return service.connectorStatus(s.user.account_id, platformOf(req.params.platform));
    });
    app.post<{ Params: { platform: string } }>(`/accuracy/connectors/:platform`, hideNoBody, async (req, reply) => {
      const s = await guard(req, 'owner');
      const out = await service.createConnector(s.user.account_id, platformOf(req.params.platform));
      return reply.status(201).send(out);
    });
    app.delete<{ Params: { platform: string } }>(`/accuracy/connectors/:platform`, hide, async (req) => {
      const s = await guard(req, 'owner');
      return service.revokeConnector(s.user.account_id, platformOf(req.params.platform));
    });
  }
}
