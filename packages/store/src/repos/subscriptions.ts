// Subscriptions over the relational port (tables: infra/migrations/015_subscriptions.sql).
// The payment processor decides; this repository keeps what it reported: the subscription row and
// its mirror on the account (what the gates and GET /v1/credits read) in one transaction, each
// processor event applied once (by its id), and the credit movements of a period (grant at a
// renewal, expire at the end) through the ledger in that same transaction.

import type { SubscriptionPlan } from '@svc/contracts';
import type { Db, Queryable } from '../db/db.ts';
import { expireIn, grantIn } from './ledger.ts';

export type Processor = 'local' | 'stripe';

/** A plan as the plans table holds it (the wire shape contracts names). */
export type Plan = SubscriptionPlan;

export interface SubscriptionRecord {
  id: string;
  account_id: string;
  processor: Processor;
  plan_id: string;
  status: string;
  cancel_at_period_end: boolean;
  current_period_start: Date;
  current_period_end: Date;
  ended_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** The processor's view of a subscription, as an event or an API answer carries it. */
export interface SubscriptionState {
  id: string;
  status: string;
  cancel_at_period_end: boolean;
  current_period_start: Date;
  current_period_end: Date;
  ended_at?: Date | null;
}

const COLUMNS = 'id, account_id, processor, plan_id, status, cancel_at_period_end, current_period_start, current_period_end, ended_at, created_at, updated_at';

function record(r: Record<string, unknown>): SubscriptionRecord {
  const d = (v: unknown): Date => new Date(v as string | Date);
  return {
    id: r.id as string,
    account_id: r.account_id as string,
    processor: r.processor as Processor,
    plan_id: r.plan_id as string,
    status: r.status as string,
    cancel_at_period_end: r.cancel_at_period_end as boolean,
    current_period_start: d(r.current_period_start),
    current_period_end: d(r.current_period_end),
    ended_at: r.ended_at ? d(r.ended_at) : null,
    created_at: d(r.created_at),
    updated_at: d(r.updated_at),
  };
}

const plan = (r: Record<string, unknown>): Plan => ({
  id: r.id as string,
  name: r.name as string,
  price_cents: Number(r.price_cents),
  currency: r.currency as string,
  credits_per_period: Number(r.credits_per_period),
  period_days: Number(r.period_days),
});

/** What one event did, for its row in subscription_events and the caller. */
export type EventResult = 'applied' | 'duplicate' | `ignored: ${string}`;

/** The writes an event may make, inside the event's own transaction. */
export interface SubscriptionTx {
  get(id: string): Promise<SubscriptionRecord | undefined>;
  /** Takes the processor's state for a known subscription, and mirrors it on the account. */
  update(state: SubscriptionState): Promise<SubscriptionRecord>;
  /** Grants a period's credits through the ledger. */
  grant(accountId: string, credits: number, note: string): Promise<void>;
  /** Sets the account's available credits to 0 through the ledger; returns how many expired. */
  expire(accountId: string, note: string): Promise<number>;
  plan(id: string): Promise<Plan | undefined>;
  create(s: { id: string; account_id: string; processor: Processor; plan_id: string } & SubscriptionState): Promise<SubscriptionRecord>;
}

export class SubscriptionsRepo {
  constructor(private readonly db: Db) {}

  async plans(): Promise<Plan[]> {
    return (await this.db.query('SELECT id, name, price_cents, currency, credits_per_period, period_days FROM plans ORDER BY price_cents, id')).map(plan);
  }

  async plan(id: string): Promise<Plan | undefined> {
    return planIn(this.db, id);
  }

  async get(id: string): Promise<SubscriptionRecord | undefined> {
    const r = (await this.db.query(`SELECT ${COLUMNS} FROM subscriptions WHERE id = $1`, [id]))[0];
    return r ? record(r) : undefined;
  }

  /** The account's subscription that has not ended, if any. */
  async live(accountId: string): Promise<SubscriptionRecord | undefined> {
    const r = (await this.db.query(`SELECT ${COLUMNS} FROM subscriptions WHERE account_id = $1 AND status <> 'canceled'`, [accountId]))[0];
    return r ? record(r) : undefined;
  }

  /** The account's newest subscription, ended or not. */
  async latest(accountId: string): Promise<SubscriptionRecord | undefined> {
    const r = (await this.db.query(`SELECT ${COLUMNS} FROM subscriptions WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`, [accountId]))[0];
    return r ? record(r) : undefined;
  }

  /** Live subscriptions of a processor whose period has ended by `now` (the local processor's renewals). */
  async due(processor: Processor, now: Date, limit = 100): Promise<SubscriptionRecord[]> {
    return (
      await this.db.query(`SELECT ${COLUMNS} FROM subscriptions WHERE processor = $1 AND status <> 'canceled' AND current_period_end <= $2 ORDER BY current_period_end LIMIT $3`, [processor, now, limit])
    ).map(record);
  }

  /**
   * Live local subscriptions whose current period has no applied invoice event (`idOf` names the
   * one expected): a crash between a period's state and its invoice left the credits ungranted.
   */
  async missingInvoice(idOf: { prefix: string; separator: string }, limit = 100): Promise<SubscriptionRecord[]> {
    return (
      await this.db.query(
        `SELECT ${COLUMNS} FROM subscriptions s WHERE processor = 'local' AND status <> 'canceled'
           AND NOT EXISTS (SELECT 1 FROM subscription_events e WHERE e.id = $1 || s.id || $2 || floor(extract(epoch FROM s.current_period_start))::bigint::text)
         ORDER BY created_at LIMIT $3`,
        [idOf.prefix, idOf.separator, limit],
      )
    ).map(record);
  }

  /**
   * Sets `cancel_at_period_end` to `to` if it is not already, on the account's live subscription:
   * the row as it was before (`changed` false when the flag already had that value, or when there
   * is no live subscription: `before` undefined). One conditional UPDATE, so of two concurrent
   * cancels exactly one changes it.
   */
  async flipCancel(accountId: string, to: boolean): Promise<{ changed: boolean; before: SubscriptionRecord | undefined }> {
    return this.db.transaction(async (tx) => {
      const rows = await tx.query(
        `UPDATE subscriptions SET cancel_at_period_end = $2, updated_at = now() WHERE account_id = $1 AND status <> 'canceled' AND cancel_at_period_end = $3 RETURNING ${COLUMNS}`,
        [accountId, to, !to],
      );
      if (rows[0]) {
        await tx.query('UPDATE accounts SET cancel_at_period_end = $2 WHERE id = $1', [accountId, to]);
        return { changed: true, before: { ...record(rows[0]), cancel_at_period_end: !to } };
      }
      const r = (await tx.query(`SELECT ${COLUMNS} FROM subscriptions WHERE account_id = $1 AND status <> 'canceled'`, [accountId]))[0];
      return { changed: false, before: r ? record(r) : undefined };
    });
  }

  /**
   * Applies one processor event at most once: records its id, then runs `apply` in the same
   * transaction (a retried delivery of the same id answers `duplicate` and changes nothing; an
   * `apply` that throws leaves no trace, so the processor's retry applies it then).
   */
  async applyEvent(ev: { id: string; processor: Processor; type: string; subscription_id: string | null }, apply: (tx: SubscriptionTx) => Promise<EventResult>): Promise<EventResult> {
    return this.db.transaction(async (tx) => {
      const fresh = await tx.query('INSERT INTO subscription_events (id, processor, type, subscription_id, result) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING RETURNING id', [
        ev.id,
        ev.processor,
        ev.type,
        ev.subscription_id,
        'pending',
      ]);
      if (fresh.length === 0) return 'duplicate';
      const result = await apply(subscriptionTx(tx));
      await tx.query('UPDATE subscription_events SET result = $2 WHERE id = $1', [ev.id, result]);
      return result;
    });
  }

  /** The events seen for a subscription, oldest first (admin `subscription show`). */
  async events(subscriptionId: string): Promise<Array<{ id: string; type: string; result: string; received_at: Date }>> {
    return (await this.db.query<{ id: string; type: string; result: string; received_at: Date }>('SELECT id, type, result, received_at FROM subscription_events WHERE subscription_id = $1 ORDER BY received_at, id', [subscriptionId])).map(
      (r) => ({ ...r, received_at: new Date(r.received_at) }),
    );
  }
}

async function planIn(q: Queryable, id: string): Promise<Plan | undefined> {
  const r = (await q.query('SELECT id, name, price_cents, currency, credits_per_period, period_days FROM plans WHERE id = $1', [id]))[0];
  return r ? plan(r) : undefined;
}

async function mirror(q: Queryable, s: SubscriptionRecord): Promise<void> {
  await q.query('UPDATE accounts SET subscription_status = $2, subscription_id = $3, current_period_end = $4, cancel_at_period_end = $5 WHERE id = $1', [
    s.account_id,
    s.status,
    s.id,
    s.current_period_end,
    s.cancel_at_period_end,
  ]);
}

function subscriptionTx(tx: Queryable): SubscriptionTx {
  return {
    async get(id) {
      const r = (await tx.query(`SELECT ${COLUMNS} FROM subscriptions WHERE id = $1 FOR UPDATE`, [id]))[0];
      return r ? record(r) : undefined;
    },
    async update(state) {
      const r = (
        await tx.query(
          `UPDATE subscriptions SET status = $2, cancel_at_period_end = $3, current_period_start = $4, current_period_end = $5, ended_at = $6, updated_at = now() WHERE id = $1 RETURNING ${COLUMNS}`,
          [state.id, state.status, state.cancel_at_period_end, state.current_period_start, state.current_period_end, state.ended_at ?? null],
        )
      )[0];
      if (!r) throw new Error(`no subscription ${state.id}`);
      const s = record(r);
      await mirror(tx, s);
      return s;
    },
    grant: (accountId, credits, note) => grantIn(tx, accountId, credits, note),
    expire: (accountId, note) => expireIn(tx, accountId, note),
    plan: (id) => planIn(tx, id),
    async create(s) {
      const r = (
        await tx.query(
          `INSERT INTO subscriptions (id, account_id, processor, plan_id, status, cancel_at_period_end, current_period_start, current_period_end, ended_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${COLUMNS}`,
          [s.id, s.account_id, s.processor, s.plan_id, s.status, s.cancel_at_period_end, s.current_period_start, s.current_period_end, s.ended_at ?? null],
        )
      )[0]!;
      const rec = record(r);
      await mirror(tx, rec);
      return rec;
    },
  };
}
