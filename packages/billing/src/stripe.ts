// The Stripe adapter of the PaymentProcessor port, on the official `stripe` SDK:
// outbound, `subscriptions.update(id, {cancel_at_period_end})`; inbound, webhook events verified
// with Stripe's signature scheme (the SDK's `webhooks.constructEvent`: HMAC-SHA256 of
// `timestamp.body` under the endpoint's `whsec_` secret, 5 minutes' tolerance) and applied once
// each by their id (SubscriptionService.applyEvent).

import Stripe from 'stripe';
import { ServiceError } from '@svc/contracts';
import type { SubscriptionRecord, SubscriptionState } from '@svc/store';
import { subscriptionState, type PaymentProcessor, type ProcessorEvent } from './subscriptions.ts';

export interface StripeOptions {
  /** The account's secret API key (`sk_live_…`, `sk_test_…`). */
  secretKey: string;
  /** The webhook endpoint's signing secret (`whsec_…`). */
  webhookSecret: string;
  /** Another API origin (a local stand-in in tests); default Stripe's. */
  apiUrl?: string;
  /** Per request (default 10 s). */
  timeoutMs?: number;
}

export class StripeProcessor implements PaymentProcessor {
  readonly name = 'stripe' as const;
  readonly #stripe: Stripe;
  readonly #webhookSecret: string;

  constructor(opts: StripeOptions) {
    const config: ConstructorParameters<typeof Stripe>[1] = { timeout: opts.timeoutMs ?? 10_000, maxNetworkRetries: 2, telemetry: false };
    if (opts.apiUrl) {
      const u = new URL(opts.apiUrl);
      config.host = u.hostname;
      config.port = u.port || (u.protocol === 'http:' ? 80 : 443);
      config.protocol = u.protocol === 'http:' ? 'http' : 'https';
    }
    this.#stripe = new Stripe(opts.secretKey, config);
    this.#webhookSecret = opts.webhookSecret;
  }

  async setCancelAtPeriodEnd(sub: SubscriptionRecord, cancel: boolean): Promise<SubscriptionState> {
    const updated = await this.#stripe.subscriptions.update(sub.id, { cancel_at_period_end: cancel });
    const state = subscriptionState(updated as unknown as Record<string, unknown>);
    if (!state) throw new Error(`Stripe answered subscription ${sub.id} without its status or period`);
    return state;
  }

  /**
   * The event of an inbound webhook, if its `Stripe-Signature` header signs this exact body
   * (the raw bytes, before any JSON parsing); otherwise 400 `invalid_webhook_signature`.
   */
  verify(rawBody: Buffer, signature: string | undefined): ProcessorEvent {
    if (!signature) throw new ServiceError('invalid_webhook_signature', 'The Stripe-Signature header is missing');
    try {
      return this.#stripe.webhooks.constructEvent(rawBody, signature, this.#webhookSecret) as unknown as ProcessorEvent;
    } catch (err) {
      throw new ServiceError('invalid_webhook_signature', undefined, {}, {}, err);
    }
  }
}
