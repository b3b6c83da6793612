// What /openapi.json says about each route's responses, read off the same
// configuration that builds them: every status the route can answer and only those, each error
// status with the `code`s it can carry, and the headers every response has: `X-Request-ID`, and
// on a route behind the gates the RateLimit headers (with `Retry-After` on 429). The route's
// response schemas themselves stay as they are (the shared `Error` schema serialises every
// error): only the document is narrowed.

import { STATUS_CODES } from 'node:http';
import type { FastifySchema, RouteOptions } from 'fastify';
import { ERRORS, type ErrorCode } from '@svc/contracts';
import { routeCodes, type RouteErrors } from './schemas.ts';

type Schema = Record<string, unknown>;

const requestIdHeader = { 'X-Request-ID': { type: 'string', pattern: '^req_[0-9a-f]{32}$', description: 'Opaque id of this request (quote it when reporting a problem).' } };
const rateLimitHeaders = {
  'RateLimit-Limit': { type: 'integer', description: 'Requests allowed per minute (the tighter of the address and key limits).' },
  'RateLimit-Remaining': { type: 'integer', description: 'Requests left in the current minute.' },
  'RateLimit-Reset': { type: 'integer', description: 'Seconds until the current minute ends.' },
};
const retryAfterHeader = { 'Retry-After': { type: 'integer', description: 'Seconds to wait before retrying (60).' } };
const replayedHeader = { 'Idempotent-Replayed': { type: 'string', enum: ['true'], description: 'Present when this is the stored response of an earlier request with the same Idempotency-Key.' } };

/** Fields some codes add to the error body (docs/errors.md), and whether they always carry them. */
const EXTRAS: Partial<Record<ErrorCode, Record<string, { schema: Schema; always: boolean }>>> = {
  rate_limited: { retry_after: { schema: { type: 'integer', description: 'Seconds to wait (60).' }, always: true } },
  insufficient_scope: { required_scope: { schema: { type: 'string', description: 'The scope the key lacks.' }, always: true } },
  insufficient_credits: {
    required: { schema: { type: 'integer', description: 'Credits the request can cost at most.' }, always: true },
    available: { schema: { type: 'integer', description: 'Credits available when it was refused.' }, always: false },
  },
};

/** The error body of one status of a route, narrowed to the codes it can carry there. */
function errorBody(codes: readonly ErrorCode[]): Schema {
  const properties: Record<string, Schema> = {
    error: { type: 'string', description: 'Short title for people; may change.' },
    message: { type: 'string', description: 'What happened, for people.' },
    code: { type: 'string', enum: [...codes], description: 'Stable machine code (docs/errors.md); branch on it.' },
  };
  const required = ['error', 'message', 'code'];
  const fields = new Set(codes.flatMap((c) => Object.keys(EXTRAS[c] ?? {})));
  for (const field of fields) {
    const of = codes.map((c) => EXTRAS[c]?.[field]);
    properties[field] = of.find((x) => x)!.schema;
    // Required only when every code of the status carries it.
    if (of.every((x) => x?.always)) required.push(field);
  }
  return { type: 'object', required, properties };
}

const isErrorRef = (s: unknown): boolean => typeof s === 'object' && s !== null && (s as { $ref?: unknown }).$ref === 'Error#';

/** @fastify/swagger's `transform`: the documented form of one route. */
export function documentRoute({ schema, url, route }: { schema: FastifySchema; url: string; route: RouteOptions }): { schema: FastifySchema; url: string } {
  const response = schema?.response as Record<string, unknown> | undefined;
  if (!response) return { schema, url };
  const config = route.config as RouteErrors | undefined;
  const codes = routeCodes(config);
  const gated = Boolean(config?.scope);
  const byStatus = new Map<string, ErrorCode[]>();
  for (const c of codes) byStatus.set(String(ERRORS[c].status), [...(byStatus.get(String(ERRORS[c].status)) ?? []), c]);
  // The document and the route cannot drift apart: each code's status is a response, and each
  // shared-Error response has a code.
  for (const status of byStatus.keys()) if (!(status in response)) throw new Error(`${route.method} ${url}: code ${byStatus.get(status)![0]} has status ${status}, which the route does not declare`);
  const documented: Record<string, unknown> = {};
  for (const [status, s] of Object.entries(response)) {
    const own = byStatus.get(status) ?? [];
    if (isErrorRef(s) && own.length === 0) throw new Error(`${route.method} ${url}: status ${status} has no error code`);
    const headers = {
      ...requestIdHeader,
      ...(gated && rateLimitHeaders),
      ...(status === '429' && retryAfterHeader),
      ...((status === '200' || status === '202') && codes.includes('idempotency_key_conflict') && replayedHeader),
    };
    const description = own.length ? `${STATUS_CODES[status]}: ${own.map((c) => `\`${c}\``).join(', ')}` : (STATUS_CODES[status] ?? status);
    // @fastify/swagger takes `x-response-description` as the response's description (and leaves
    // the body schema's own description alone).
    documented[status] = { ...(isErrorRef(s) ? errorBody(own) : (s as Schema)), 'x-response-description': description, headers };
  }
  return { schema: { ...schema, response: documented }, url };
}
