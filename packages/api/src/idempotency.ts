// Idempotency-Key (DESIGN 6): on the validation POST routes (route-level hooks) of an account, a key (1-255 printable
// ASCII) is kept 24 h with a SHA-256 of the route and body. Same key and body after success:
// the stored response again, with `Idempotent-Replayed: true`. Same key, other body: 409
// idempotency_key_conflict. Same key while the first is still running: 409
// idempotency_request_in_progress. Only successful (2xx) responses are stored; any other outcome
// frees the key so a corrected or later retry can run (docs/decisions.md).

import { createHash } from 'node:crypto';
import type { onResponseAsyncHookHandler, onSendAsyncHookHandler, preHandlerAsyncHookHandler } from 'fastify';
import type { Store } from '@svc/store';
import { ApiError } from './errors.ts';

const TTL_MS = 24 * 3600_000;
/** A claim older than this is taken over: the process that made it died. */
const STALE_MS = 10 * 60_000;
const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;

declare module 'fastify' {
  interface FastifyRequest {
    idempotency?: { accountId: string; key: string };
  }
}

/** Route-level hooks for the POST routes that honour Idempotency-Key (other routes pay nothing). */
export function idempotencyHooks(store: Store): { preHandler: preHandlerAsyncHookHandler; onSend: onSendAsyncHookHandler<unknown>; onResponse: onResponseAsyncHookHandler } {
  const preHandler: preHandlerAsyncHookHandler = async (req, reply) => {
    if (!req.principal) return;
    const raw = req.headers['idempotency-key'];
    if (raw === undefined) return;
    const key = Array.isArray(raw) ? raw[0] ?? '' : raw;
    if (!KEY_FORMAT.test(key)) throw new ApiError('invalid_idempotency_key');
    const route = `${req.method} ${req.routeOptions.url}`;
    const hash = createHash('sha256').update(route).update('\n').update(JSON.stringify(req.body ?? null)).digest('hex');
    const r = await store.beginIdempotent(req.principal.accountId, key, route, hash, TTL_MS, STALE_MS);
    switch (r.state) {
      case 'new':
        req.idempotency = { accountId: req.principal.accountId, key };
        return;
      case 'conflict':
        throw new ApiError('idempotency_key_conflict');
      case 'in_progress':
        throw new ApiError('idempotency_request_in_progress');
      case 'replay':
        reply.header('Idempotent-Replayed', 'true');
        reply.header('Content-Type', 'application/json; charset=utf-8');
        return reply.status(r.status).send(r.body);
    }
  };

  const onSend: onSendAsyncHookHandler<unknown> = async (req, reply, payload) => {
    const idem = req.idempotency;
    if (!idem) return payload;
    req.idempotency = undefined;
    if (reply.statusCode >= 200 && reply.statusCode < 300 && typeof payload === 'string') {
      await store.completeIdempotent(idem.accountId, idem.key, reply.statusCode, payload);
    } else {
      await store.abandonIdempotent(idem.accountId, idem.key);
    }
    return payload;
  };

  // A request that dies before sending (client gone, crash in a hook) must not hold its key.
  const onResponse: onResponseAsyncHookHandler = async (req) => {
    const idem = req.idempotency;
    if (idem) await store.abandonIdempotent(idem.accountId, idem.key);
  };
  return { preHandler, onSend, onResponse };
}
