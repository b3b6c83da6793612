// Subscriptions (docs/api.md, "Subscriptions"): cancel and reactivate, and the payment
// processor's events, which are the only way a subscription's state and its credits change.
//
// The port, PaymentProcessor, has two adapters: LocalProcessor (the embedded profile's: plans as
// data, it renews, grants and ends subscriptions itself and emits the same events a processor
// would) and StripeProcessor (stripe.ts: outbound updates through Stripe's API, inbound webhooks).
// Both speak Stripe's event shapes, so one SubscriptionService applies either's events:
//   customer.subscription.created|updated|deleted  the subscription's state (deleted: it ended,
//                                                  the account's available credits expire to 0)
//   invoice.paid (subscription_create|cycle)       the plan's credits for the period, granted
// Each event is applied once, by its id, in one transaction with its ledger rows.

import { randomBytes } from 'node:crypto';
import { ServiceError } from '@svc/contracts';
import type { EventResult, Plan, Processor, Store, SubscriptionRecord, SubscriptionState, SubscriptionTx } from '@svc/store';

/** A processor event in Stripe's envelope (both adapters emit this shape). */
export interface ProcessorEvent {
  id: string;
  type: string;
  /** Unix seconds. */
  created: number;
  data: { object: Record<string, unknown> };
}

export interface PaymentProcessor {
  readonly name: Processor;
  /**
   * Sets `cancel_at_period_end` at the processor and answers its state of the subscription.
   * Throws when the processor cannot be reached or refuses (nothing is assumed to have changed).
   */
  setCancelAtPeriodEnd(sub: SubscriptionRecord, cancel: boolean): Promise<SubscriptionState>;
}

/** The cancellation response (reactivation answers the same shape). */
export interface CancellationResponse {
  subscription_id: string;
  status: string;
  cancel_at_period_end: boolean;
  current_period_end: string;
  message: string;
}

const unix = (d: Date): number => Math.floor(d.getTime() / 1000);
const fromUnix = (v: unknown): Date | undefined => (typeof v === 'number' && Number.isFinite(v) ? new Date(v * 1000) : undefined);
const obj = (v: unknown): Record<string, unknown> | undefined => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** The first item of a Stripe list (`{data: [...]}`). */
const firstOf = (list: unknown): Record<string, unknown> | undefined => obj((obj(list)?.data as unknown[] | undefined)?.[0]);

/**
 * A Stripe subscription object as a SubscriptionState. Stripe's API versions from 2025-03 moved the
 * current period onto the subscription's items; older ones have it on the subscription.
 */
export function subscriptionState(o: Record<string, unknown>): SubscriptionState | undefined {
  const id = str(o.id);
  const status = str(o.status);
  const item = firstOf(o.items);
  const start = fromUnix(o.current_period_start) ?? fromUnix(item?.current_period_start);
  const end = fromUnix(o.current_period_end) ?? fromUnix(item?.current_period_end);
  if (!id || !status || !start || !end) return undefined;
  return { id, status, cancel_at_period_end: o.cancel_at_period_end === true, current_period_start: start, current_period_end: end, ended_at: fromUnix(o.ended_at) ?? null };
}

/** Where an invoice names its subscription and that subscription's metadata (both API generations). */
function invoiceSubscription(inv: Record<string, unknown>): { id?: string; metadata?: Record<string, unknown> } {
  const details = obj(obj(inv.parent)?.subscription_details) ?? obj(inv.subscription_details);
  const id = str(inv.subscription) ?? str(obj(inv.subscription)?.id) ?? str(details?.subscription);
  return { id, metadata: obj(details?.metadata) };
}

export class SubscriptionService {
  constructor(
    private readonly store: Store,
    private readonly processor: PaymentProcessor,
  ) {}

  /** POST /v1/subscriptions/cancel (cancel at the period end, or now). */
  cancel(accountId: string): Promise<CancellationResponse> {
    return this.#setCancel(accountId, true);
  }

  /** POST /v1/subscriptions/reactivate: undoes a cancellation at the period end. */
  reactivate(accountId: string): Promise<CancellationResponse> {
    return this.#setCancel(accountId, false);
  }

  async #setCancel(accountId: string, cancel: boolean): Promise<CancellationResponse> {
    // The flag flips here first, conditionally (of two concurrent cancels one wins, the other is
    // 409); the processor is told after, and a refusal there flips it back.
    const { changed, before } = await this.store.subscriptions.flipCancel(accountId, cancel);
    if (!before) throw new ServiceError('subscription_not_found');
    if (!changed) throw new ServiceError(cancel ? 'subscription_already_canceling' : 'subscription_not_canceling');
    let state: SubscriptionState;
    try {
      state = await this.processor.setCancelAtPeriodEnd({ ...before, cancel_at_period_end: cancel }, cancel);
    } catch (err) {
      await this.store.subscriptions.flipCancel(accountId, !cancel);
      throw new ServiceError('payment_processor_unavailable', undefined, {}, {}, err);
    }
    // The processor's answer is the truth (its event, when it comes, says the same and is a no-op).
    // Recorded like an event (type `answer.subscription`), under an id of its own.
    await this.store.subscriptions.applyEvent({ id: `ans_${randomBytes(12).toString('hex')}`, processor: this.processor.name, type: 'answer.subscription', subscription_id: before.id }, async (tx) => {
      if ((await tx.get(state.id))?.status === 'canceled') return 'ignored: subscription_ended';
      await tx.update(state);
      return 'applied';
    });
    const end = state.current_period_end.toISOString();
    return {
      subscription_id: before.id,
      status: state.status,
      cancel_at_period_end: state.cancel_at_period_end,
      current_period_end: end,
      message: cancel
        ? `Subscription will be canceled at the end of the current period (${end}). Validation and the full credit balance stay available until then; there are no further charges.`
        : `Cancellation undone: the subscription stays active and renews at the end of the current period (${end}). Credits are kept.`,
    };
  }

  /** Applies one processor event once (by its id); answers what it did. */
  applyEvent(ev: ProcessorEvent, processor: Processor = this.processor.name): Promise<EventResult> {
    const o = ev.data.object;
    if (ev.type.startsWith('customer.subscription.')) {
      const state = subscriptionState(o);
      return this.store.subscriptions.applyEvent({ id: ev.id, processor, type: ev.type, subscription_id: str(o.id) ?? null }, async (tx) => {
        if (!state) return 'ignored: malformed_subscription';
        const known = await tx.get(state.id);
        if (!known) {
          const created = await this.#adopt(tx, processor, state, obj(o.metadata));
          if (typeof created === 'string') return created;
          if (state.status === 'canceled') await tx.expire(created.account_id, `subscription ${state.id} ended`);
          return 'applied';
        }
        // Canceled is final: a late or replayed event of an earlier state does not revive it.
        if (known.status === 'canceled') return 'ignored: subscription_ended';
        const ended = ev.type === 'customer.subscription.deleted' || state.status === 'canceled';
        const next = ended ? { ...state, status: 'canceled', ended_at: state.ended_at ?? new Date(ev.created * 1000) } : state;
        await tx.update(next);
        if (ended) await tx.expire(known.account_id, `subscription ${state.id} ended`);
        return 'applied';
      });
    }
    if (ev.type === 'invoice.paid' || ev.type === 'invoice.payment_succeeded') {
      const { id: subId, metadata } = invoiceSubscription(o);
      const reason = str(o.billing_reason);
      const line = obj(firstOf(o.lines)?.period);
      const start = fromUnix(line?.start) ?? fromUnix(o.period_start);
      const end = fromUnix(line?.end) ?? fromUnix(o.period_end);
      return this.store.subscriptions.applyEvent({ id: ev.id, processor, type: ev.type, subscription_id: subId ?? null }, async (tx) => {
        if (!subId) return 'ignored: not_a_subscription_invoice';
        if (reason !== 'subscription_create' && reason !== 'subscription_cycle') return `ignored: billing_reason ${reason ?? 'missing'}`;
        let sub = await tx.get(subId);
        if (!sub && start && end) {
          // The invoice may arrive before the subscription's own event: its metadata names the account.
          const created = await this.#adopt(tx, processor, { id: subId, status: 'active', cancel_at_period_end: false, current_period_start: start, current_period_end: end }, metadata);
          if (typeof created === 'string') return created;
          sub = created;
        }
        if (!sub) return 'ignored: unknown_subscription';
        if (sub.status === 'canceled') return 'ignored: subscription_ended';
        const plan = await tx.plan(sub.plan_id);
        if (!plan) return 'ignored: unknown_plan';
        if (plan.credits_per_period > 0) await tx.grant(sub.account_id, plan.credits_per_period, `plan ${plan.id}: ${reason === 'subscription_create' ? 'first' : 'renewed'} period${start && end ? ` ${start.toISOString()} to ${end.toISOString()}` : ''} (${str(o.id) ?? ev.id})`);
        return 'applied';
      });
    }
    return this.store.subscriptions.applyEvent({ id: ev.id, processor, type: ev.type, subscription_id: null }, async () => `ignored: event type ${ev.type}`);
  }

  /** A subscription the service did not know, made known from its metadata (`account_id`, `plan`). */
  async #adopt(tx: SubscriptionTx, processor: Processor, state: SubscriptionState, metadata: Record<string, unknown> | undefined): Promise<SubscriptionRecord | `ignored: ${string}`> {
    const account = str(metadata?.account_id);
    const planId = str(metadata?.plan);
    if (!account || !planId) return 'ignored: unknown_subscription';
    if (!(await tx.plan(planId))) return 'ignored: unknown_plan';
    try {
      return await tx.create({ ...state, account_id: account, processor, plan_id: planId });
    } catch (err) {
      // Another live subscription of the account, or no such account: not ours to take.
      throw new ServiceError('invalid_request', `subscription ${state.id} cannot be adopted for account ${account}`, {}, {}, err);
    }
  }
}

/** The id of the local processor's invoice event of a period: `evt_local_<sub>_invoice_<start, unix s>`. */
const INVOICE_EVENT = { prefix: 'evt_local_', separator: '_invoice_' };

/** Adds a plan's period to a date (`period_days` days). */
const periodAfter = (start: Date, plan: Plan): Date => new Date(start.getTime() + plan.period_days * 86_400_000);

/**
 * The embedded profile's payment processor: the plans are rows of `plans`; it creates
 * subscriptions, renews them at their period end (granting the plan's credits), ends those set to
 * cancel, and emits each change as the Stripe-shaped event SubscriptionService applies. Its
 * events' ids are deterministic per period, so two processes renewing the same subscription at
 * once apply it once.
 */
export class LocalProcessor implements PaymentProcessor {
  readonly name = 'local' as const;
  #apply: (ev: ProcessorEvent) => Promise<EventResult> = async () => {
    throw new Error('LocalProcessor: no SubscriptionService attached');
  };

  constructor(
    private readonly store: Store,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** Where its events go (the SubscriptionService built on it). */
  attach(service: SubscriptionService): void {
    this.#apply = (ev) => service.applyEvent(ev, 'local');
  }

  #object(sub: { id: string; account_id: string; plan_id: string }, s: SubscriptionState): Record<string, unknown> {
    return {
      id: sub.id,
      object: 'subscription',
      status: s.status,
      cancel_at_period_end: s.cancel_at_period_end,
      current_period_start: unix(s.current_period_start),
      current_period_end: unix(s.current_period_end),
      ended_at: s.ended_at ? unix(s.ended_at) : null,
      metadata: { account_id: sub.account_id, plan: sub.plan_id },
      items: { data: [{ price: { id: sub.plan_id }, current_period_start: unix(s.current_period_start), current_period_end: unix(s.current_period_end) }] },
    };
  }

  #event(id: string, type: string, object: Record<string, unknown>): ProcessorEvent {
    return { id, type, created: unix(this.now()), data: { object } };
  }

  #invoice(sub: SubscriptionRecord | { id: string; account_id: string; plan_id: string }, reason: 'subscription_create' | 'subscription_cycle', start: Date, end: Date, plan: Plan): ProcessorEvent {
    const id = `in_local_${sub.id.replace(/^sub_local_/, '')}_${unix(start)}`;
    return this.#event(`${INVOICE_EVENT.prefix}${sub.id}${INVOICE_EVENT.separator}${unix(start)}`, 'invoice.paid', {
      id,
      object: 'invoice',
      billing_reason: reason,
      amount_paid: plan.price_cents,
      currency: plan.currency,
      subscription: sub.id,
      subscription_details: { metadata: { account_id: sub.account_id, plan: plan.id } },
      lines: { data: [{ period: { start: unix(start), end: unix(end) } }] },
    });
  }

  /** Subscribes an account to a plan from now: the first period's credits are granted. */
  async create(accountId: string, planId: string): Promise<SubscriptionRecord> {
    const plan = await this.store.subscriptions.plan(planId);
    if (!plan) throw new RangeError(`no plan ${planId}`);
    if (await this.store.subscriptions.live(accountId)) throw new RangeError(`account ${accountId} already has a live subscription`);
    const start = this.now();
    const end = periodAfter(start, plan);
    const sub = { id: `sub_local_${randomBytes(10).toString('hex')}`, account_id: accountId, plan_id: plan.id };
    const state: SubscriptionState = { id: sub.id, status: 'active', cancel_at_period_end: false, current_period_start: start, current_period_end: end, ended_at: null };
    await this.#apply(this.#event(`evt_local_${sub.id}_created`, 'customer.subscription.created', this.#object(sub, state)));
    await this.#apply(this.#invoice(sub, 'subscription_create', start, end, plan));
    return (await this.store.subscriptions.get(sub.id))!;
  }

  async setCancelAtPeriodEnd(sub: SubscriptionRecord, cancel: boolean): Promise<SubscriptionState> {
    const state: SubscriptionState = { id: sub.id, status: sub.status, cancel_at_period_end: cancel, current_period_start: sub.current_period_start, current_period_end: sub.current_period_end, ended_at: null };
    await this.#apply(this.#event(`evt_local_${sub.id}_${randomBytes(8).toString('hex')}`, 'customer.subscription.updated', this.#object(sub, state)));
    return state;
  }

  /**
   * The period end of one subscription, now (the operator's and tests' clock move): one set to
   * cancel ends (`customer.subscription.deleted`: credits to 0); any other renews for the plan's
   * next period (`invoice.paid`, then `customer.subscription.updated`). Answers the new state.
   */
  async advancePeriod(subscriptionId: string): Promise<SubscriptionRecord> {
    const sub = await this.store.subscriptions.get(subscriptionId);
    if (!sub || sub.processor !== 'local') throw new RangeError(`no local subscription ${subscriptionId}`);
    if (sub.status === 'canceled') throw new RangeError(`subscription ${subscriptionId} has ended`);
    const plan = await this.store.subscriptions.plan(sub.plan_id);
    if (!plan) throw new RangeError(`no plan ${sub.plan_id}`);
    const at = unix(sub.current_period_end);
    if (sub.cancel_at_period_end) {
      const state: SubscriptionState = { id: sub.id, status: 'canceled', cancel_at_period_end: true, current_period_start: sub.current_period_start, current_period_end: sub.current_period_end, ended_at: sub.current_period_end };
      await this.#apply(this.#event(`evt_local_${sub.id}_${at}_deleted`, 'customer.subscription.deleted', this.#object(sub, state)));
    } else {
      const start = sub.current_period_end;
      const end = periodAfter(start, plan);
      await this.#apply(this.#invoice(sub, 'subscription_cycle', start, end, plan));
      const state: SubscriptionState = { id: sub.id, status: 'active', cancel_at_period_end: false, current_period_start: start, current_period_end: end, ended_at: null };
      await this.#apply(this.#event(`evt_local_${sub.id}_${at}_renewed`, 'customer.subscription.updated', this.#object(sub, state)));
    }
    return (await this.store.subscriptions.get(sub.id))!;
  }

  /**
   * Every local subscription whose period has ended by now: renewed or ended (a periodic sweep).
   * First, any live subscription whose current period's invoice was never applied (a crash
   * between a period's state and its invoice) gets it now: the same event id, so at most once.
   */
  async renewDue(): Promise<number> {
    for (const sub of await this.store.subscriptions.missingInvoice(INVOICE_EVENT)) {
      const plan = await this.store.subscriptions.plan(sub.plan_id);
      if (!plan) continue;
      const first = (await this.store.subscriptions.events(sub.id)).every((e) => e.type !== 'invoice.paid');
      await this.#apply(this.#invoice(sub, first ? 'subscription_create' : 'subscription_cycle', sub.current_period_start, sub.current_period_end, plan));
    }
    let n = 0;
    // Bounded: a subscription many periods behind catches up a period per round.
    for (let round = 0; round < 1000; round++) {
      const due = await this.store.subscriptions.due('local', this.now());
      if (due.length === 0) return n;
      for (const s of due) {
        await this.advancePeriod(s.id);
        n++;
      }
    }
    return n;
  }
}

/**
 * Why an operator's change of a subscription was refused, in the words the admin CLI prints and
 * the dashboard's operator console answers with: an unknown plan, a live subscription already
 * there, none to move, or one whose periods are Stripe's to move.
 */
export interface SubscriptionRefusal {
  ok: false;
  code: 'plan_not_found' | 'subscription_exists' | 'subscription_not_found' | 'subscription_not_local';
  message: string;
}

export type OperatorSubscriptionResult = { ok: true; subscription: SubscriptionRecord } | SubscriptionRefusal;

/**
 * An operator subscribes an account to a plan with the local payment processor, from now (`admin
 * subscription create`, the operator console): refused for an unknown plan, or when the account
 * already has a live subscription. The caller has checked that the account exists.
 */
export async function subscribeLocally(store: Pick<Store, 'subscriptions'>, local: Pick<LocalProcessor, 'create'>, accountId: string, planId: string): Promise<OperatorSubscriptionResult> {
  if (!(await store.subscriptions.plan(planId))) return { ok: false, code: 'plan_not_found', message: `no plan ${planId}` };
  const live = await store.subscriptions.live(accountId);
  if (live) return { ok: false, code: 'subscription_exists', message: `account ${accountId} already has a live subscription ${live.id} (${live.status})` };
  try {
    return { ok: true, subscription: await local.create(accountId, planId) };
  } catch (err) {
    // Another request subscribed the account between the check and the insert: the one-live index said no.
    if ((err as { code?: unknown }).code === '23505') return { ok: false, code: 'subscription_exists', message: `account ${accountId} already has a live subscription` };
    throw err;
  }
}

/**
 * An operator moves the local processor's clock to the end of the account's current period, now
 * (`admin subscription advance-period`, the operator console): one set to cancel ends, any other
 * renews. Refused without a live subscription, or for a Stripe subscription.
 */
export async function advanceLocalPeriod(store: Pick<Store, 'subscriptions'>, local: Pick<LocalProcessor, 'advancePeriod'>, accountId: string): Promise<OperatorSubscriptionResult> {
  const live = await store.subscriptions.live(accountId);
  if (!live) return { ok: false, code: 'subscription_not_found', message: `account ${accountId} has no live subscription` };
  if (live.processor !== 'local') return { ok: false, code: 'subscription_not_local', message: `subscription ${live.id} is Stripe's: its periods move with Stripe's events` };
  return { ok: true, subscription: await local.advancePeriod(live.id) };
}
