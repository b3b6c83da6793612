// One error handler: every error leaves as the catalogue's body (docs/errors.md) with its
// status, whatever threw it: a use case's ServiceError, a body-schema failure, Fastify itself.

import type { FastifyError, FastifyInstance } from 'fastify';
import { isConnectionFailure } from '@svc/billing';
import { ServiceError, type ErrorCode } from '@svc/contracts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Maps a request-schema failure to a specific error code (or a coded error with its own message). */
    mapValidation?: (errors: NonNullable<FastifyError['validation']>) => ErrorCode | ServiceError;
    /**
     * The codes the route's own work can answer with (its body, handler and use cases), besides
     * its gates (plugins/auth.ts). They make its response schemas and its OpenAPI responses.
     */
    errors?: readonly ErrorCode[];
    /** A POST route that takes no body (or an optional `{}`): an empty body is not parsed, whatever its Content-Type. */
    noBody?: boolean;
  }
}

/** What a route with a JSON body can answer because of the body (see fromFastifyError). */
export const JSON_BODY_CODES = ['unsupported_media_type', 'payload_too_large', 'invalid_json', 'invalid_request'] as const satisfies readonly ErrorCode[];

/** Fastify's own errors, in the catalogue's terms. */
export function fromFastifyError(err: FastifyError): ServiceError {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_EMPTY_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new ServiceError('unsupported_media_type');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ServiceError('payload_too_large');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ServiceError('invalid_request', 'Content-Length does not match the body');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ServiceError('invalid_json');
  }
  if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON/i.test(err.message))) return new ServiceError('invalid_json');
  if (err.statusCode === 413) return new ServiceError('payload_too_large');
  if (err.statusCode === 415) return new ServiceError('unsupported_media_type');
  if (err.statusCode === 503) return new ServiceError('service_unavailable');
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return new ServiceError('invalid_request', err.message);
  return new ServiceError('internal_error');
}

/**
 * PostgreSQL's refusals of text itself (SQLSTATE 22021: a NUL or an invalid byte sequence;
 * 22P05: an untranslatable character; 22P02 on json input: a \u0000 or lone-surrogate escape).
 */
function isTextRefusal(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === '22021' || code === '22P05' || (code === '22P02' && /json|Unicode/i.test(String(message)));
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setNotFoundHandler(async (req) => {
    throw new ServiceError('route_not_found', `Route ${req.method} ${req.url.split('?')[0]} not found`);
  });

  app.setErrorHandler(async (err: FastifyError | ServiceError, req, reply) => {
    let e: ServiceError;
    if (err instanceof ServiceError) {
      e = err;
      if (err.cause) req.log.error({ err: err.cause, code: err.code }, 'dependency failed');
    } else if (err.validation) {
      const map = req.routeOptions.config?.mapValidation;
      const code = map ? map(err.validation) : 'invalid_request';
      if (code instanceof ServiceError) e = code;
      else e = code === 'invalid_request' ? new ServiceError('invalid_request', `Request body does not match the schema: ${err.message}`) : new ServiceError(code);
    } else if (!(err.statusCode && err.statusCode < 500) && isConnectionFailure(err)) {
      // (A 4xx carrying a socket code is the client's own connection: one that hung up mid-body.)
      // The database is out of reach (a key lookup, a balance read): temporary, retried by
      // clients. During a validation it is the spec's validation_upstream_failed.
      e = new ServiceError(req.routeOptions.config?.billable ? 'validation_upstream_failed' : 'service_unavailable', 'A dependency is unavailable; retry later');
      req.log.error({ err, code: e.code }, 'dependency failed');
    } else if (isTextRefusal(err)) {
      // A string from the request that the database cannot store reached it: the edge should
      // have refused it (docs/decisions/jobs-and-csv.md "Strings at the edge"); a 400, logged to be mended.
      e = new ServiceError('invalid_request', 'A value in the request is not text the service can store (it holds a NUL or an unpaired surrogate)');
      req.log.warn({ err }, 'a request string reached the database unchecked');
    } else {
      e = fromFastifyError(err);
      // A bug (including a broken invariant in the store): logged with the request id, answered 500.
      if (e.code === 'internal_error') req.log.error({ err }, 'unexpected error');
    }
    for (const [h, v] of Object.entries(e.headers)) reply.header(h, v);
    return reply.status(e.status).send(e.body());
  });
}
