// A local HTTP stand-in for the part of Stripe's API the Stripe adapter uses: it keeps
// subscriptions, answers `POST /v1/subscriptions/:id` (form-encoded `cancel_at_period_end`) and
// `GET /v1/subscriptions/:id` in Stripe's shapes (the current period on the items, as Stripe's API
// versions since 2025-03 put it), records every request, can be told to fail, and sends signed
// webhook events to the service the way Stripe does (the signature made with the SDK's own helper).

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

export interface StandinSubscription {
  id: string;
  status: string;
  cancel_at_period_end: boolean;
  current_period_start: number;
  current_period_end: number;
  metadata: Record<string, string>;
}

export interface StripeStandin {
  url: string;
  /** Requests received: method, path, form body, Authorization header. */
  requests: Array<{ method: string; path: string; form: Record<string, string>; authorization: string | undefined }>;
  subscriptions: Map<string, StandinSubscription>;
  /** While set, every API request answers this status with a Stripe error body. */
  failWith: number | null;
  object(id: string): Record<string, unknown>;
  /** Signs an event with the webhook secret (Stripe's scheme, the SDK's helper) and POSTs it. */
  send(webhookUrl: string, event: { id: string; type: string; data: { object: Record<string, unknown> } }, opts?: { secret?: string; timestamp?: number }): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

const stripe = new Stripe('sk_test_standin', { telemetry: false });

export async function startStripeStandin(webhookSecret: string): Promise<StripeStandin> {
  const s: StripeStandin = {
    url: '',
    requests: [],
    subscriptions: new Map(),
    failWith: null,
    object(id) {
      const sub = s.subscriptions.get(id)!;
      return {
        id: sub.id,
        object: 'subscription',
        status: sub.status,
        cancel_at_period_end: sub.cancel_at_period_end,
        metadata: sub.metadata,
        items: { object: 'list', data: [{ id: `si_${id}`, object: 'subscription_item', current_period_start: sub.current_period_start, current_period_end: sub.current_period_end }] },
      };
    },
    async send(webhookUrl, event, opts = {}) {
      const payload = JSON.stringify({ object: 'event', api_version: '2026-10-28.endive', created: Math.floor(Date.now() / 1000), livemode: false, ...event });
      const header = stripe.webhooks.generateTestHeaderString({ payload, secret: opts.secret ?? webhookSecret, ...(opts.timestamp !== undefined && { timestamp: opts.timestamp }) });
      const res = await fetch(webhookUrl, { method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': header }, body: payload });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : null };
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const path = (req.url ?? '').split('?')[0]!;
      const form = Object.fromEntries(new URLSearchParams(body));
      s.requests.push({ method: req.method ?? '', path, form, authorization: req.headers.authorization });
      const answer = (status: number, json: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_standin_${s.requests.length}` });
        res.end(JSON.stringify(json));
      };
      if (s.failWith !== null) return answer(s.failWith, { error: { type: 'api_error', message: 'stand-in told to fail' } });
      const m = /^\/v1\/subscriptions\/([A-Za-z0-9_]+)$/.exec(path);
      const sub = m ? s.subscriptions.get(m[1]!) : undefined;
      if (!m || !sub) return answer(404, { error: { type: 'invalid_request_error', code: 'resource_missing', message: `No such subscription: '${m?.[1] ?? ''}'` } });
      if (req.method === 'POST' && form.cancel_at_period_end !== undefined) sub.cancel_at_period_end = form.cancel_at_period_end === 'true';
      return answer(200, s.object(sub.id));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  s.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return s;
}
