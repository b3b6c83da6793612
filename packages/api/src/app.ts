// The thin Fastify front: request ids, the shared gates (IP rate limit, key, key rate limit,
// scope, subscription), one error handler, OpenAPI, and the route plugins.

import { randomBytes } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import type { KeyRecord, RateLimiterPort, Store } from '@svc/store';
import { hashKey } from '@svc/store';
import type { Verifier } from '@svc/verifier/verifier.ts';
import type { Config } from './config.ts';
import { ApiError, type ErrorCode } from './errors.ts';
import type { Readiness } from './readiness.ts';
import { sharedSchemas } from './schemas.ts';
import { creditRoutes } from './routes/credits.ts';
import { healthRoutes } from './routes/health.ts';
import { validateRoutes } from './routes/validate.ts';

export interface Services {
  config: Config;
  store: Store;
  verifier: Verifier;
  rateLimiter: RateLimiterPort;
  readiness: Readiness;
  /** Closes the cache / rate-limit connection (Redis); nothing for the in-process adapters. */
  closeCache: () => Promise<void>;
}

export interface Principal {
  key: KeyRecord;
  accountId: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
  interface FastifyInstance {
    /** Forget cached key lookups (after an admin changes a key). */
    clearKeyCache(): void;
  }
  interface FastifyContextConfig {
    /** Scope the route needs (spec core 5); undefined = no key needed. */
    scope?: string;
    /** The route is blocked by an ended subscription (402). */
    billable?: boolean;
    /** Maps a body-schema failure to a specific error code. */
    mapValidation?: (errors: NonNullable<FastifyError['validation']>) => ErrorCode;
  }
}

const MINUTE_MS = 60_000;

// Request ids: `req_` + 32 hex digits, a random 64-bit prefix per process and a counter, so they
// are unique without paying for a random UUID per request.
const ID_PREFIX = `req_${randomBytes(8).toString('hex')}`;
let idCounter = 0;
const nextRequestId = () => ID_PREFIX + (idCounter++).toString(16).padStart(16, '0');
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

function setRateHeaders(reply: FastifyReply, d: { limit: number; remaining: number; resetSeconds: number }): void {
  reply.header('RateLimit-Limit', d.limit);
  reply.header('RateLimit-Remaining', d.remaining);
  reply.header('RateLimit-Reset', d.resetSeconds);
}

function rateLimited(): ApiError {
  return new ApiError('rate_limited', undefined, { retry_after: 60 }, { 'Retry-After': 60 });
}

export async function buildApp(services: Services): Promise<FastifyInstance> {
  const { config, store, rateLimiter } = services;
  const app = Fastify({
    logger: {
      level: config.logLevel,
      redact: { paths: ['req.headers["x-api-key"]', 'req.headers.authorization', 'headers["x-api-key"]'], censor: '[redacted]' },
    },
    bodyLimit: config.bodyLimitBytes,
    genReqId: nextRequestId,
    requestIdHeader: false,
    trustProxy: config.trustProxy,
    // Draining is answered by the gate below, with the error body and X-Request-ID.
    return503OnClosing: false,
    // A request must arrive whole within 30 s (a client that stalls mid-body holds nothing).
    requestTimeout: 30_000,
    // Malformed URLs and the like, answered with the catalogue's body instead of Fastify's.
    frameworkErrors: (err, req, reply) => {
      const e = new ApiError('invalid_request', `Bad request: ${err.message}`);
      void (reply as FastifyReply).header('X-Request-ID', req.id).status(e.status).send(e.body());
    },
    ajv: { customOptions: { allErrors: false, coerceTypes: false, removeAdditional: false } },
  });
  const keyCache = new KeyCache();
  app.decorate('clearKeyCache', () => keyCache.clear());

  // Bodies are JSON only (spec core 4): without this, Fastify would take text/plain as a string.
  app.removeContentTypeParser('text/plain');
  for (const s of sharedSchemas) app.addSchema(s);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Email validation service', version: '1.0.0', description: 'Four-layer email validation (syntax, DNS, SMTP, catch-all) with credits charged only for High-Value Validations.' },
      servers: [{ url: config.publicUrl }],
      components: { securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' } } },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });


  // Draining (SIGTERM): in-flight requests finish, and their keep-alive connections close as
  // soon as their response is written instead of holding the shutdown open until the keep-alive
  // timeout (Node reads keepAliveTimeout each time a socket turns idle).
  let draining = false;
  app.addHook('preClose', async () => {
    draining = true;
    app.server.keepAliveTimeout = 1;
  });

  // Every response carries the request id, error or not; then the shared gates, in order:
  // IP rate limit, key, key rate limit, scope, subscription. One callback-style hook that only
  // goes asynchronous when an adapter does (a key-cache miss, Redis): the common request pays
  // no promise here.
  const gate = (req: FastifyRequest, reply: FastifyReply): void | Promise<void> => {
    reply.header('X-Request-ID', req.id);
    const scope = req.routeOptions.config?.scope;
    if (!scope) return;
    if (draining) throw new ApiError('service_unavailable');
    return then(rateLimiter.hit(`ip:${req.ip}`, config.rateLimitPerIp, MINUTE_MS), (ip) => {
      if (!ip.allowed) {
        setRateHeaders(reply, ip);
        throw rateLimited();
      }
      const raw = req.headers['x-api-key'];
      const key = Array.isArray(raw) ? raw[0] : raw;
      if (!key) throw new ApiError('api_key_required');
      if (key.length > 256) throw new ApiError('invalid_api_key');
      // The short-lived cache is keyed by the presented key itself (process memory only, like
      // the request that carries it), which spares a SHA-256 per request; the store sees only the hash.
      const lookup =
        keyCache.get(key) ??
        store.findKeyByHash(hashKey(key)).then((found) => {
          if (!found) throw new ApiError('invalid_api_key');
          keyCache.set(key, found);
          return found;
        });
      return then(lookup, (rec) => {
        if (rec.state === 'revoked') throw new ApiError('api_key_revoked');
        if (rec.state === 'inactive') throw new ApiError('api_key_inactive');
        if (rec.expires_at && rec.expires_at.getTime() <= Date.now()) throw new ApiError('api_key_expired');
        // The request's own child logger (shared by req and reply) gains the key's short prefix;
        // setBindings is far cheaper than a child per request, and skipped when nothing would be
        // logged (as pino itself skips disabled levels).
        const log = req.log as unknown as import('pino').Logger;
        if (log.isLevelEnabled('error')) log.setBindings({ key: rec.display_prefix, account: rec.account_id });
        return then(rateLimiter.hit(`key:${rec.id}`, config.rateLimitPerKey, MINUTE_MS), (k) => {
          setRateHeaders(reply, k.remaining < ip.remaining ? k : ip);
          if (!k.allowed) throw rateLimited();
          if (rec.scopes !== null && !rec.scopes.includes(scope)) {
            throw new ApiError('insufficient_scope', `API key lacks the ${scope} scope`, { required_scope: scope });
          }
          if (req.routeOptions.config.billable && rec.subscription_status === 'canceled') throw new ApiError('subscription_inactive');
          req.principal = { key: rec, accountId: rec.account_id };
        });
      });
    });
  };
  app.addHook('onRequest', (req, reply, done) => {
    let pending: void | Promise<void>;
    try {
      pending = gate(req, reply);
    } catch (err) {
      return done(err as Error);
    }
    if (pending) pending.then(() => done(), done);
    else done();
  });

  app.setNotFoundHandler(async (req) => {
    throw new ApiError('route_not_found', `Route ${req.method} ${req.url.split('?')[0]} not found`);
  });

  app.setErrorHandler(async (err: FastifyError | ApiError, req, reply) => {
    let apiErr: ApiError;
    if (err instanceof ApiError) {
      apiErr = err;
      if (err.cause) req.log.error({ err: err.cause, code: err.code }, 'dependency failed');
    } else if (err.validation) {
      const map = req.routeOptions.config?.mapValidation;
      apiErr = new ApiError(map ? map(err.validation) : 'invalid_request', undefined, {});
      if (apiErr.code === 'invalid_request') apiErr = new ApiError('invalid_request', `Request body does not match the schema: ${err.message}`);
    } else {
      apiErr = fromFastifyError(err);
      if (apiErr.code === 'internal_error') req.log.error({ err }, 'unexpected error');
    }
    for (const [h, v] of Object.entries(apiErr.headers)) reply.header(h, v);
    return reply.status(apiErr.status).send(apiErr.body());
  });

  await app.register(healthRoutes, { services });
  await app.register(validateRoutes, { services });
  await app.register(creditRoutes, { services });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  return app;
}

function fromFastifyError(err: FastifyError): ApiError {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? new ApiError('payload_too_large') : new ApiError('invalid_request', 'Content-Length does not match the body');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError('invalid_json');
    case 'FST_ERR_CTP_EMPTY_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new ApiError('unsupported_media_type');
  }
  if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON/i.test(err.message))) return new ApiError('invalid_json');
  if (err.statusCode === 413) return new ApiError('payload_too_large');
  if (err.statusCode === 415) return new ApiError('unsupported_media_type');
  if (err.statusCode === 503) return new ApiError('service_unavailable');
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return new ApiError('invalid_request', err.message);
  return new ApiError('internal_error');
}

