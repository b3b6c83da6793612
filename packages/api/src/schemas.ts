// JSON schemas of the public resources. They validate requests, serialise responses fast and
// generate the OpenAPI 3.1 document (GET /openapi.json). Enumerations come from @svc/contracts.

import { CHARGE_REASONS, CONFIDENCES, ERROR_CODES, ERRORS, LAYERS, QUALITIES, REASON_CODES, VALIDATION_RESULTS, type ErrorCode, type Scope } from '@svc/contracts';
import { BILLABLE_GATE_CODES, GATE_CODES } from './plugins/auth.ts';

export const errorSchema = {
  $id: 'Error',
  type: 'object',
  required: ['error', 'message', 'code'],
  properties: {
    error: { type: 'string' },
    message: { type: 'string' },
    code: { type: 'string', enum: ERROR_CODES },
    retry_after: { type: 'integer' },
    required_scope: { type: 'string' },
    required: { type: 'integer' },
    available: { type: 'integer' },
  },
} as const;

const quality = { type: 'string', enum: QUALITIES } as const;

export const validationResultSchema = {
  $id: 'ValidationResult',
  type: 'object',
  required: [
    'email', 'result', 'reason', 'reason_code', 'syntax_valid', 'dns_valid', 'smtp_valid', 'is_role_based', 'is_free_provider',
    'is_disposable', 'is_catchall', 'b2b_outbound_quality', 'b2b_quality', 'credits_charged', 'charge_reason', 'validation_layer', 'flags',
  ],
  properties: {
    email: { type: 'string' },
    result: { type: 'string', enum: VALIDATION_RESULTS },
    reason: { type: 'string', description: 'Human explanation; empty for a plain valid address.' },
    reason_code: { type: 'string', enum: REASON_CODES, description: 'Stable machine reason (extra field; see docs/decisions.md).' },
    syntax_valid: { type: 'boolean' },
    dns_valid: { type: 'boolean' },
    smtp_valid: { type: 'boolean' },
    is_role_based: { type: 'boolean' },
    role_type: { type: 'string' },
    is_free_provider: { type: 'boolean' },
    is_disposable: { type: 'boolean' },
    is_catchall: { type: 'boolean' },
    catchall_confidence: { type: 'string', enum: CONFIDENCES },
    b2b_outbound_quality: quality,
    b2b_quality: quality,
    credits_charged: { type: 'integer', enum: [0, 1] },
    charge_reason: { type: 'string', enum: CHARGE_REASONS, description: 'Why credits were or were not charged.' },
    validation_layer: { type: 'string', enum: LAYERS },
    smtp_response: { type: 'string' },
    did_you_mean: { type: 'string' },
    flags: { type: 'array', items: { type: 'string' } },
  },
} as const;

export const bulkResponseSchema = {
  $id: 'BulkValidationResponse',
  type: 'object',
  required: ['results', 'summary'],
  properties: {
    results: { type: 'array', items: { $ref: 'ValidationResult#' } },
    summary: {
      type: 'object',
      required: ['total', 'valid', 'valid_role_based', 'risky', 'invalid', 'unknown', 'credits_charged'],
      properties: {
        total: { type: 'integer' },
        valid: { type: 'integer' },
        valid_role_based: { type: 'integer' },
        risky: { type: 'integer' },
        invalid: { type: 'integer' },
        unknown: { type: 'integer' },
        credits_charged: { type: 'integer' },
      },
    },
  },
} as const;

export const creditsSchema = {
  $id: 'CreditBalance',
  type: 'object',
  required: ['account_id', 'balance', 'reserved', 'available', 'subscription_status', 'current_period_end', 'cancel_at_period_end'],
  properties: {
    account_id: { type: 'string', description: 'The account the key belongs to.' },
    balance: { type: 'integer' },
    reserved: { type: 'integer' },
    available: { type: 'integer' },
    subscription_status: { type: 'string' },
    current_period_end: { type: ['string', 'null'] },
    cancel_at_period_end: { type: 'boolean' },
  },
} as const;

export const sharedSchemas = [errorSchema, validationResultSchema, bulkResponseSchema, creditsSchema];

/** What decides a route's error codes: its gates (scope, billable) and its own `errors`. */
export interface RouteErrors {
  scope?: Scope;
  billable?: boolean;
  errors?: readonly ErrorCode[];
}

/** Every code a route can answer with, in catalogue order: its gates', then its own. */
export function routeCodes(config: RouteErrors | undefined): ErrorCode[] {
  if (!config) return [];
  const codes = new Set<ErrorCode>(config.errors);
  if (config.scope) for (const c of [...GATE_CODES, ...(config.billable ? BILLABLE_GATE_CODES : [])]) codes.add(c);
  return ERROR_CODES.filter((c) => codes.has(c));
}

/**
 * The error responses of a route: one per status its codes have, each serialised with the shared
 * `Error` schema (which keeps `retry_after`, `required_scope`, `required` and `available`). The
 * OpenAPI document narrows each to the route's codes (openapi.ts).
 */
export function errorResponses(config: RouteErrors): Record<string, { $ref: 'Error#' }> {
  const statuses = [...new Set(routeCodes(config).map((c) => ERRORS[c].status))].sort((a, b) => a - b);
  return Object.fromEntries(statuses.map((s) => [String(s), { $ref: 'Error#' as const }]));
}
