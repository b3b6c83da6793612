// Usage and credits, for anyone signed in (reading is not managing): the balance (the shape of
// GET /v1/credits), validations per day by verdict (the analytics port) beside the credits spent
// per day (the ledger, where the money is), and the ledger itself, paged and as a CSV download.

import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { ledgerCsv } from '@svc/billing';
import { ServiceError, VALIDATION_RESULTS } from '@svc/contracts';
import { DAY_MS, hide, iso, query, readAnalytics, windowOf, type DashboardContext } from './context.ts';


function limitOf(raw: string | undefined): number {
  if (raw === undefined) return 50;
  const n = Number(raw);
  if (!/^[0-9]{1,3}$/.test(raw) || n < 1 || n > 200) throw new ServiceError('invalid_request', 'limit must be an integer from 1 to 200');
  return n;
}

function cursorOf(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^[1-9][0-9]{0,15}$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw new ServiceError('invalid_request', 'cursor is not a cursor of this list');
  return Number(raw);
}

export async function usageRoutes(app: FastifyInstance, { store, opts, guard }: DashboardContext): Promise<void> {
  app.get('/usage', hide, async (req) => {
    const s = await guard(req, 'session');
    const { from, to } = windowOf(req, 'invalid_request');
    const account = s.user.account_id;
    const [balance, decided, spent] = await Promise.all([
      store.ledger.balance(account),
      opts.analytics ? readAnalytics(opts.analytics.daily({ account_id: account, from, to })) : Promise.resolve([]),
      store.ledger.spentPerDay(account, from, to),
    ]);
    if (!balance) throw new ServiceError('not_signed_in');
    const byDay = new Map(decided.map((d) => [d.day, d]));
    const spentByDay = new Map(spent.map((d) => [d.day, d.credits]));
    const zero = Object.fromEntries(VALIDATION_RESULTS.map((r) => [r, 0]));
    const series = [];
    for (let t = from.getTime(); t < to.getTime(); t += DAY_MS) {
      const day = new Date(t).toISOString().slice(0, 10);
      const d = byDay.get(day);
      series.push({ day, validations: d?.total ?? 0, by_result: d?.counts ?? zero, credits_spent: spentByDay.get(day) ?? 0 });
    }
    return {
      balance: { balance: balance.balance, reserved: balance.reserved, available: balance.available, subscription_status: balance.subscription_status, current_period_end: balance.current_period_end, cancel_at_period_end: balance.cancel_at_period_end },
      from: from.toISOString(),
      to: to.toISOString(),
      analytics: opts.analytics !== undefined,
      days: series,
    };
  });

  app.get('/usage/ledger', hide, async (req) => {
    const s = await guard(req, 'session');
    const limit = limitOf(query(req, 'limit'));
    const before = cursorOf(query(req, 'cursor'));
    const page = await store.ledger.page(s.user.account_id, { limit, ...(before !== undefined && { before }) });
    return {
      entries: page.entries.map((e) => ({ id: e.id, created_at: iso(e.created_at), kind: e.kind, amount: e.amount, note: e.note, reservation_id: e.reservation_id })),
      next_cursor: page.next === null ? null : String(page.next),
    };
  });

  app.get('/usage/ledger.csv', hide, async (req, reply) => {
    const s = await guard(req, 'session');
    const name = `ledger-${new Date().toISOString().slice(0, 10)}.csv`;
    reply.header('content-type', 'text/csv; charset=utf-8').header('content-disposition', `attachment; filename="${name}"`);
    return reply.send(Readable.from(ledgerCsv(store, s.user.account_id)));
  });
}
