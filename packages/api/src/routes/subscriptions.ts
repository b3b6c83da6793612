// Subscriptions (docs/api.md; docs/decisions/credits-and-billing.md): POST /v1/subscriptions/cancel and /reactivate
// for any active key of the account, and the payment processor's inbound webhook
// (POST /v1/webhooks/stripe, Stripe-signed, served when the Stripe adapter is configured).

import type { FastifyPluginAsync } from 'fastify';
import { ServiceError } from '@svc/contracts';
import type { ProcessorEvent, SubscriptionService } from '@svc/billing';
import type { ApiServices } from '../types.ts';
import { errorResponses, type RouteErrors } from '../schemas.ts';

const cancelConfig = { scope: 'any', noBody: true, errors: ['subscription_not_found', 'subscription_already_canceling', 'payment_processor_unavailable', 'internal_error'] } as const satisfies RouteErrors;
const reactivateConfig = { scope: 'any', noBody: true, errors: ['subscription_not_found', 'subscription_not_canceling', 'payment_processor_unavailable', 'internal_error'] } as const satisfies RouteErrors;
const webhookConfig = { errors: ['invalid_webhook_signature', 'invalid_request', 'payload_too_large', 'internal_error'] } as const satisfies RouteErrors;

/** Stripe's events are small; a larger body is not one of them. */
const WEBHOOK_BODY_LIMIT = 512 * 1024;

const cancellationSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['subscription_id', 'status', 'cancel_at_period_end', 'current_period_end', 'message'],
  properties: {
    subscription_id: { type: 'string', description: 'The payment processor’s subscription identifier.' },
    status: { type: 'string', description: 'Stays `active` until the period ends.' },
    cancel_at_period_end: { type: 'boolean' },
    current_period_end: { type: 'string', format: 'date-time' },
    message: { type: 'string' },
  },
} as const;

export const subscriptionRoutes: FastifyPluginAsync<{ services: ApiServices & { subscriptions: SubscriptionService } }> = async (app, { services }) => {
  const { subscriptions } = services;
  app.post(
    '/v1/subscriptions/cancel',
    {
      config: cancelConfig,
      schema: {
        summary: 'Cancel the subscription at the end of the current period',
        description:
          'Sets `cancel_at_period_end`: validation and the full credit balance stay usable until `current_period_end`, with no later charges; then the subscription is `canceled`, the credits expire and validation answers 402 `subscription_inactive`. Any active key of the account. 409 when already set to cancel, 404 without an active subscription.',
        tags: ['subscriptions'],
        security: [{ apiKey: [] }],
        response: { 200: cancellationSchema, ...errorResponses(cancelConfig) },
      },
    },
    async (req) => subscriptions.cancel(req.principal!.accountId),
  );

  app.post(
    '/v1/subscriptions/reactivate',
    {
      config: reactivateConfig,
      schema: {
        summary: 'Undo a pending cancellation before the period ends',
        description: 'The cancellation response’s shape with `cancel_at_period_end` false; credits are kept. 409 when no cancellation is pending, 404 without an active subscription.',
        tags: ['subscriptions'],
        security: [{ apiKey: [] }],
        response: { 200: cancellationSchema, ...errorResponses(reactivateConfig) },
      },
    },
    async (req) => subscriptions.reactivate(req.principal!.accountId),
  );

  const stripe = services.stripeWebhook;
  if (!stripe) return;
  await app.register(async (hook) => {
    // The signature covers the exact bytes: this route reads the body raw, whatever its type.
    hook.removeAllContentTypeParsers();
    hook.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: WEBHOOK_BODY_LIMIT }, (_req, body, done) => done(null, body));
    hook.post<{ Body: Buffer }>(
      '/v1/webhooks/stripe',
      {
        config: webhookConfig,
        bodyLimit: WEBHOOK_BODY_LIMIT,
        schema: {
          summary: 'Stripe’s webhook endpoint (Stripe-Signature; no API key)',
          description: 'Subscription and invoice events, each applied once by its id; others are answered 200 and ignored.',
          tags: ['subscriptions'],
          response: {
            200: { type: 'object', additionalProperties: false, required: ['received', 'result'], properties: { received: { type: 'boolean' }, result: { type: 'string' } } },
            ...errorResponses(webhookConfig),
          },
        },
      },
      async (req) => {
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const sig = req.headers['stripe-signature'];
        const event: ProcessorEvent = stripe.verify(raw, Array.isArray(sig) ? sig[0] : sig);
        if (typeof event?.id !== 'string' || typeof event.type !== 'string' || typeof event.data?.object !== 'object' || event.data.object === null) {
          throw new ServiceError('invalid_request', 'The event has no id, type or data.object');
        }
        return { received: true, result: await subscriptions.applyEvent(event, 'stripe') };
      },
    );
  });
};
