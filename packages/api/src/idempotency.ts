// Idempotency-Key (docs/api.md), for the validation POST routes of an account: a key (1-255
// printable ASCII) is kept 24 h with a SHA-256 of the route and body. Same key and body after
// success: the stored response again, byte for byte, with `Idempotent-Replayed: true`. Same key,
// other body or route: 409 idempotency_key_conflict. Same key while the first is still running: 409
// idempotency_request_in_progress. Only successful responses are stored; any other outcome frees
// the key so a corrected or later retry can run (docs/decisions/security-and-auth.md,
// "Idempotency").
//
// The claim is a lease the request renews every third of SVC_CLAIM_LEASE_MS while it runs: when
// its process dies (a front killed mid-ingest), a retry takes the key over once the lease has run
// out, on any process, instead of answering 409 for minutes.
//
// It wraps the route handler rather than adding hooks: requests without the header (nearly all)
// pay one header lookup, and the stored body is the route's own serialisation of the result.

import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError, type ErrorCode } from '@svc/contracts';
import { keepRenewing, type Store } from '@svc/store';

/** What an idempotent route can answer because of the header. */
export const IDEMPOTENCY_CODES = ['invalid_idempotency_key', 'idempotency_key_conflict', 'idempotency_request_in_progress'] as const satisfies readonly ErrorCode[];

const TTL_MS = 24 * 3600_000;
const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;

/**
 * What an idempotent route's work gets: the claimed key, and the serialiser that turns its
 * response into the stored (and sent) body. The work records that body with its charge.
 */
export interface IdempotencyRecord {
  key: string;
  /** The claim's owner: the completion names it (a claim taken over cannot be completed). */
  owner: string;
  /** The status the response is sent (and replayed) with: set it on the reply before the work records. */
  readonly status: number;
  serialize: (response: unknown) => string;
}

/** Runs `work` once per (account, Idempotency-Key); without the header, just runs it. */
export function idempotent(store: Store, req: FastifyRequest, reply: FastifyReply, work: (record?: IdempotencyRecord) => Promise<unknown>): Promise<unknown> {
  const raw = req.headers['idempotency-key'];
  if (raw === undefined || !req.principal) return work();
  return once(store, req, reply, raw, work);
}

async function once(store: Store, req: FastifyRequest, reply: FastifyReply, raw: string | string[], work: (record?: IdempotencyRecord) => Promise<unknown>): Promise<unknown> {
  const key = Array.isArray(raw) ? (raw[0] ?? '') : raw;
  if (!KEY_FORMAT.test(key)) throw new ServiceError('invalid_idempotency_key');
  const { accountId } = req.principal!;
  const route = `${req.method} ${req.routeOptions.url}`;
  const hash = createHash('sha256').update(route).update('\n').update(JSON.stringify(req.body ?? null)).digest('hex');
  const r = await store.idempotency.begin(accountId, key, route, hash, TTL_MS);
  if (r.state === 'conflict') throw new ServiceError('idempotency_key_conflict');
  if (r.state === 'in_progress') throw new ServiceError('idempotency_request_in_progress');
  reply.type('application/json; charset=utf-8');
  if (r.state === 'replay') {
    reply.header('Idempotent-Replayed', 'true');
    return reply.status(r.status).send(r.body);
  }
  const { owner } = r;
  const stopRenewing = keepRenewing(store.idempotency.leaseMs, () => store.idempotency.renew(accountId, key, owner), (err) => req.log.warn({ err }, 'could not renew an Idempotency-Key claim'));
  let body: string | undefined;
  try {
    const response = await work({ key, owner, get status() { return reply.statusCode; }, serialize: (res) => (body = String(reply.serialize(res))) });
    if (body === undefined) {
      body = String(reply.serialize(response));
      await store.idempotency.complete({ accountId, key, owner, status: reply.statusCode, body });
    }
  } catch (err) {
    await store.idempotency.abandon(accountId, key, owner);
    throw err;
  } finally {
    stopRenewing();
  }
  return reply.send(body);
}
