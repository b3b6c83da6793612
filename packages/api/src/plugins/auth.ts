// The shared gates (keys, scopes, rate limits: docs/api.md "Conventions") as one plugin (Fastify's Decorators and Hooks guides):
// `request.principal` is declared with decorateRequest, and every route that names a `scope` gets
// the gate as its own route-level onRequest hook. In order: IP rate limit, key (missing, unknown,
// revoked, inactive, expired), key rate limit, scope, product (the data endpoints), subscription. Routes without a scope
// (health, OpenAPI) pay nothing.
//
// The gate is callback-style and only goes asynchronous when an adapter does (a key-cache miss,
// Redis): the common request pays no promise here.

import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { ServiceError, type ErrorCode, type Scope } from '@svc/contracts';
import { subscriptionEnded } from '@svc/billing';
import { hashKey, keyRefusal, type KeyRecord, type RateDecision, type RateLimiterPort } from '@svc/store';

export interface Principal {
  key: KeyRecord;
  accountId: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated key and its account; set by the gate of a route with a scope. */
    principal: Principal | null;
  }
  interface FastifyInstance {
    /** Forget cached key lookups (after an admin changes a key). */
    clearKeyCache(): void;
  }
  interface FastifyContextConfig {
    /** Scope the route needs (docs/api.md); `any`: any active key of the account; undefined = no key needed. */
    scope?: Scope | 'any';
    /** The route is blocked by an ended subscription (402). */
    billable?: boolean;
    /** The route needs a product beyond the general catalogue (403 product_not_enabled without it). */
    product?: 'data';
  }
}

export interface AuthOptions {
  keys: { findByHash(hash: string): Promise<KeyRecord | undefined> };
  rateLimiter: RateLimiterPort;
  rateLimitPerIp: number;
  rateLimitPerKey: number;
  /** True while the server drains (SIGTERM): gated routes answer 503 service_unavailable. */
  isDraining: () => boolean;
  /** Records that a key was used; called on a key-cache miss, not awaited (the callee throttles and logs). */
  touch?(keyId: string): void;
}

/**
 * Every code the gate answers with, in its order (for the OpenAPI document): draining, the rate
 * limits, the key, the scope, and a key lookup that fails (a bug: 500; a lost database: 503,
 * `validation_upstream_failed` on billable routes).
 * `subscription_inactive` is added on billable routes.
 */
export const GATE_CODES = [
  'service_unavailable',
  'rate_limited',
  'api_key_required',
  'mcp_token_not_accepted',
  'invalid_api_key',
  'api_key_revoked',
  'api_key_inactive',
  'api_key_expired',
  'insufficient_scope',
  'internal_error',
] as const satisfies readonly ErrorCode[];
export const BILLABLE_GATE_CODES = ['subscription_inactive'] as const satisfies readonly ErrorCode[];

/** The window of both rate limits: a minute. */
export const MINUTE_MS = 60_000;
const KEY_CACHE_MS = 2_000;

/** A short-lived cache of key lookups: saves a database round trip per request under load. */
class KeyCache {
  #map = new Map<string, { rec: KeyRecord; at: number }>();
  get(key: string): KeyRecord | undefined {
    const e = this.#map.get(key);
    if (!e) return undefined;
    if (Date.now() - e.at > KEY_CACHE_MS) {
      this.#map.delete(key);
      return undefined;
    }
    return e.rec;
  }
  set(key: string, rec: KeyRecord): void {
    if (this.#map.size > 10_000) this.#map.clear();
    this.#map.set(key, { rec, at: Date.now() });
  }
  clear(): void {
    this.#map.clear();
  }
}

/** Continues with a value now, or after a promise: adapters may answer either way. */
function then<T, R>(v: T | Promise<T>, f: (t: T) => R | Promise<R>): R | Promise<R> {
  return v instanceof Promise ? v.then(f) : f(v);
}

/**
 * The RateLimit headers. Named in lower case, as Fastify stores (and Node sends) every header
 * name: a name already in lower case is not lowered again into a new string per request.
 */
export function setRateHeaders(reply: FastifyReply, d: RateDecision): void {
  reply.header('ratelimit-limit', d.limit);
  reply.header('ratelimit-remaining', d.remaining);
  reply.header('ratelimit-reset', d.resetSeconds);
}

/** Over a rate limit: 429 with `retry_after` 60 and `Retry-After: 60` (docs/errors.md). */
export const rateLimited = (): ServiceError => new ServiceError('rate_limited', undefined, { retry_after: 60 }, { 'Retry-After': 60 });

export const auth = fp<AuthOptions>(
  async (app, opts) => {
    const { keys, rateLimiter, rateLimitPerIp, rateLimitPerKey, isDraining, touch } = opts;
    const keyCache = new KeyCache();
    const inflight = new Map<string, Promise<KeyRecord>>();
    const lookUp = (key: string): Promise<KeyRecord> => {
      const done = () => {
        if (inflight.get(key) === p) inflight.delete(key);
      };
      const p: Promise<KeyRecord> = keys.findByHash(hashKey(key)).then(
        (found) => {
          done();
          if (!found) throw new ServiceError('invalid_api_key');
          keyCache.set(key, found);
          touch?.(found.id);
          return found;
        },
        (err: unknown) => {
          done();
          throw err;
        },
      );
      inflight.set(key, p);
      return p;
    };
    app.decorate('clearKeyCache', () => {
      keyCache.clear();
      inflight.clear();
    });
    app.decorateRequest('principal', null);

    // Every response of a gated route carries the RateLimit headers (the OpenAPI document says
    // so): the address's counts first, the key's instead once they are the tighter.
    const check = (req: FastifyRequest, reply: FastifyReply, scope: Scope | 'any'): void | Promise<void> =>
      then(rateLimiter.hit(`ip:${req.ip}`, rateLimitPerIp, MINUTE_MS), (ip) => {
        setRateHeaders(reply, ip);
        if (isDraining()) throw new ServiceError('service_unavailable');
        if (!ip.allowed) throw rateLimited();
        const raw = req.headers['x-api-key'];
        const key = Array.isArray(raw) ? raw[0] : raw;
        // A hosted-MCP bearer token is not an API key (docs/api.md): refused with its own code.
        if (!key) throw new ServiceError(/^Bearer\s/i.test(req.headers.authorization ?? '') ? 'mcp_token_not_accepted' : 'api_key_required');
        if (key.length > 256) throw new ServiceError('invalid_api_key');
        // The short-lived cache is keyed by the presented key itself (process memory only, like
        // the request that carries it), which spares a SHA-256 per request; the store sees only the hash.
        // Requests that miss the cache together share one lookup.
        const lookup = keyCache.get(key) ?? inflight.get(key) ?? lookUp(key);
        return then(lookup, (rec) => {
          const refused = keyRefusal(rec, Date.now());
          if (refused) throw new ServiceError(refused);
          // The request's own child logger (shared by req and reply) gains the key's short prefix;
          // setBindings is far cheaper than a child per request, and skipped when nothing would be
          // logged (as pino itself skips disabled levels).
          const log = req.log as unknown as import('pino').Logger;
          if (log.isLevelEnabled('error')) log.setBindings({ key: rec.display_prefix, account: rec.account_id });
          return then(rateLimiter.hit(`key:${rec.id}`, rateLimitPerKey, MINUTE_MS), (k) => {
            if (k.remaining < ip.remaining) setRateHeaders(reply, k);
            if (!k.allowed) throw rateLimited();
            if (scope !== 'any' && rec.scopes !== null && !rec.scopes.includes(scope)) {
              throw new ServiceError('insufficient_scope', `API key lacks the ${scope} scope`, { required_scope: scope });
            }
            if (req.routeOptions.config.product === 'data' && !rec.data_product) throw new ServiceError('product_not_enabled');
            if (req.routeOptions.config.billable && subscriptionEnded(rec.subscription_status)) throw new ServiceError('subscription_inactive');
            req.principal = { key: rec, accountId: rec.account_id };
          });
        });
      });

    const gateFor =
      (scope: Scope | 'any'): onRequestHookHandler =>
      (req, reply, done) => {
        let pending: void | Promise<void>;
        try {
          pending = check(req, reply, scope);
        } catch (err) {
          return done(err as Error);
        }
        if (pending) pending.then(() => done(), done);
        else done();
      };

    // Route-level hooks: every route declared with a scope gets its gate first.
    app.addHook('onRoute', (route) => {
      const scope = route.config?.scope;
      if (!scope) return;
      const own = route.onRequest ? (Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest]) : [];
      route.onRequest = [gateFor(scope), ...own];
    });
  },
  { name: 'svc-auth', fastify: '5.x' },
);
