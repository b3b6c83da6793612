// POST /v1/validate and POST /v1/validate/bulk (docs/api.md).

import type { FastifyError, FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ErrorCode } from '@svc/contracts';
import { summarize, validateAndCharge, type ChargedResult, type ChargeOptions } from '@svc/billing';
import type { ApiServices } from '../types.ts';
import { errorResponses, type RouteErrors } from '../schemas.ts';
import { IDEMPOTENCY_CODES, idempotent, type IdempotencyRecord } from '../idempotency.ts';
import { JSON_BODY_CODES } from '../plugins/errors.ts';

type ValidationErrors = NonNullable<FastifyError['validation']>;

export const MAX_BULK = 100;

function singleError(errors: ValidationErrors): ErrorCode {
  const e = errors[0];
  if (!e) return 'invalid_request';
  if (e.keyword === 'required' && (e.params as { missingProperty?: string }).missingProperty === 'email') return 'email_required';
  if (e.instancePath === '/email') return e.keyword === 'type' ? 'invalid_email_type' : 'email_required';
  return 'invalid_request';
}

function bulkError(errors: ValidationErrors): ErrorCode {
  const e = errors[0];
  if (!e) return 'invalid_request';
  if (e.keyword === 'required' && (e.params as { missingProperty?: string }).missingProperty === 'emails') return 'emails_required';
  if (e.instancePath === '/emails') {
    if (e.keyword === 'maxItems') return 'too_many_emails';
    if (e.keyword === 'minItems') return 'emails_required';
    return 'invalid_request';
  }
  if (/^\/emails\/\d+$/.test(e.instancePath)) return 'invalid_email_type';
  return 'invalid_request';
}

/** What @svc/billing's validateAndCharge throws: a refused charge, a lost database, a bug. */
const CHARGE_CODES = ['insufficient_credits', 'validation_upstream_failed', 'internal_error'] as const satisfies readonly ErrorCode[];

const singleConfig = {
  scope: 'email:validate:single',
  billable: true,
  mapValidation: singleError,
  errors: [...JSON_BODY_CODES, 'email_required', 'invalid_email_type', ...IDEMPOTENCY_CODES, ...CHARGE_CODES],
} as const satisfies RouteErrors & { mapValidation: typeof singleError };

const bulkConfig = {
  scope: 'email:validate:bulk',
  billable: true,
  mapValidation: bulkError,
  errors: [...JSON_BODY_CODES, 'emails_required', 'too_many_emails', 'invalid_email_type', ...IDEMPOTENCY_CODES, ...CHARGE_CODES],
} as const satisfies RouteErrors & { mapValidation: typeof bulkError };

const idempotencyHeader = { type: 'object', properties: { 'idempotency-key': { type: 'string', description: 'Optional; 1-255 printable characters, kept 24 h' } } } as const;

/** A single validation's answer: its one result. */
const oneResult = (results: ChargedResult[]): ChargedResult => results[0]!;
/** A bulk validation's answer: the results and their summary. */
const bulkAnswer = (results: ChargedResult[]) => ({ results, summary: summarize(results) });

export const validateRoutes: FastifyPluginAsync<{ services: ApiServices }> = async (app, { services }) => {
  const { store, verifier } = services;
  // Every answered address is a decision for analytics: `<request id>:<index>`, recorded once the charge commits.
  const decisions = (req: FastifyRequest, source: 'single' | 'bulk'): Pick<ChargeOptions, 'decisions'> =>
    services.analytics ? { decisions: { sink: services.analytics, requestId: String(req.id), source, log: req.log } } : {};
  // The route's work, answered in the route's shape; with an Idempotency-Key, that answer is
  // rendered and recorded with the charge. (Module-level helpers, not closures per request: the
  // TypeScript loader names every named closure it creates, a cost on the cached path.)
  function charge<A>(req: FastifyRequest, emails: string[], source: 'single' | 'bulk', shape: (rs: ChargedResult[]) => A, record: IdempotencyRecord | undefined): Promise<A> {
    const completion = record && { key: record.key, owner: record.owner, status: record.status, render: (rs: ChargedResult[]) => record.serialize(shape(rs)) };
    return validateAndCharge(store, verifier, req.principal!.accountId, emails, { ...(completion && { completion }), ...decisions(req, source) }).then(shape);
  }

  app.post<{ Body: { email: string } }>(
    '/v1/validate',
    {
      config: singleConfig,
      schema: {
        summary: 'Validate one email address',
        tags: ['validation'],
        security: [{ apiKey: [] }],
        headers: idempotencyHeader,
        body: {
          type: 'object',
          required: ['email'],
          properties: { email: { type: 'string', pattern: '\\S', description: 'The address to validate' } },
        },
        response: { 200: { $ref: 'ValidationResult#' }, ...errorResponses(singleConfig) },
      },
    },
    async (req, reply) => idempotent(store, req, reply, (record) => charge(req, [req.body.email.trim()], 'single', oneResult, record)),
  );

  app.post<{ Body: { emails: string[] } }>(
    '/v1/validate/bulk',
    {
      config: bulkConfig,
      schema: {
        summary: `Validate up to ${MAX_BULK} email addresses`,
        description: 'Results come back in input order, one per submitted string. Addresses of one domain share one SMTP session.',
        tags: ['validation'],
        security: [{ apiKey: [] }],
        headers: idempotencyHeader,
        body: {
          type: 'object',
          required: ['emails'],
          properties: { emails: { type: 'array', minItems: 1, maxItems: MAX_BULK, items: { type: 'string' } } },
        },
        response: { 200: { $ref: 'BulkValidationResponse#' }, ...errorResponses(bulkConfig) },
      },
    },
    async (req, reply) =>
      idempotent(store, req, reply, (record) =>
        charge(
          req,
          req.body.emails.map((e) => e.trim()),
          'bulk',
          bulkAnswer,
          record,
        ),
      ),
  );
};
