// JSON schemas of the public resources. They validate requests, serialise responses fast and
// generate the OpenAPI 3.1 document (GET /openapi.json). Enumerations come from @svc/contracts.

import { CHARGE_REASONS, COMPANY_TYPES, CONFIDENCES, DEPARTMENTS, EMPLOYEE_RANGES, ERROR_CODES, PROFILE_SENIORITIES, ERRORS, JOB_RESULT_FIELDS, JOB_STATES, LAYERS, QUALITIES, REASON_CODES, VALIDATION_RESULTS, type ErrorCode, type Scope } from '@svc/contracts';
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

const int = { type: 'integer' } as const;
const intFields = <const K extends string>(keys: readonly K[]) => Object.fromEntries(keys.map((k) => [k, int])) as Record<K, typeof int>;

/** The job status resource (docs/api.md; @svc/jobs JobStatus). */
export const jobStatusSchema = {
  $id: 'JobStatus',
  type: 'object',
  additionalProperties: false,
  required: ['id', 'status', 'progress', 'results', 'credit_reservation', 'created_at', 'started_at', 'completed_at', 'source', 'filename', 'webhook_url', 'download'],
  properties: {
    id: { type: 'string' },
    status: { type: 'string', enum: JOB_STATES },
    progress: {
      type: 'object',
      additionalProperties: false,
      required: ['processed', 'total', 'percent'],
      description: 'Unique emails with a final result, of all unique emails.',
      properties: { processed: int, total: int, percent: { type: 'number' } },
    },
    results: {
      type: 'object',
      additionalProperties: false,
      required: [...JOB_RESULT_FIELDS],
      description: 'Result counts are over unique emails; until the job is finalized, credits_charged counts the High-Value Validations found so far and credits_refunded is 0.',
      properties: intFields(JOB_RESULT_FIELDS),
    },
    credit_reservation: {
      type: 'object',
      additionalProperties: false,
      required: ['reserved', 'reserved_credits', 'credits_charged', 'credits_consumed', 'refunded_credits', 'credits_per_high_value_validation', 'finalized'],
      properties: {
        reserved: { type: 'boolean' },
        reserved_credits: int,
        credits_charged: int,
        credits_consumed: int,
        refunded_credits: int,
        credits_per_high_value_validation: int,
        finalized: { type: 'boolean' },
      },
    },
    created_at: { type: 'string', format: 'date-time' },
    started_at: { type: ['string', 'null'], format: 'date-time' },
    completed_at: { type: ['string', 'null'], format: 'date-time' },
    source: { type: 'string', enum: ['json', 'csv'] },
    filename: { type: ['string', 'null'] },
    webhook_url: { type: ['string', 'null'] },
    download: {
      type: 'object',
      additionalProperties: false,
      required: ['available', 'url'],
      properties: {
        available: { type: 'boolean', description: 'The results CSV can be downloaded (the job is completed, or canceled with partial results).' },
        url: { type: 'string', description: 'The download route (GET it with the API key).' },
      },
    },
  },
} as const;

export const jobCreatedSchema = {
  $id: 'JobCreated',
  type: 'object',
  additionalProperties: false,
  required: ['id', 'status', 'total_rows', 'unique_emails', 'credits_reserved', 'created_at'],
  properties: {
    id: { type: 'string' },
    status: { type: 'string', enum: ['queued'] },
    total_rows: int,
    unique_emails: int,
    credits_reserved: { type: 'integer', description: 'One per unique email; what is not charged is refunded when the job finishes.' },
    created_at: { type: 'string', format: 'date-time' },
  },
} as const;

const nullableString = { type: ['string', 'null'] } as const;

/** A company, as company/enrich answers it (every field present; null when the public signals do not say it). */
export const companyEnrichmentSchema = {
  $id: 'CompanyEnrichment',
  type: 'object',
  required: [
    'domain', 'company_name', 'display_name', 'description', 'website', 'employee_count', 'employee_range', 'revenue_range', 'industry', 'sub_industry',
    'founded_year', 'company_type', 'location', 'linkedin_url', 'twitter_url', 'facebook_url', 'phone', 'technologies', 'technology_count', 'funding',
    'confidence', 'found', 'credits_charged', 'cache_hit', 'source_provider', 'latency_ms',
  ],
  properties: {
    domain: { type: 'string', description: 'The domain asked about, in canonical form (lower case, punycode).' },
    company_name: nullableString,
    display_name: nullableString,
    description: nullableString,
    website: nullableString,
    employee_count: { type: ['integer', 'null'] },
    employee_range: { type: ['string', 'null'], enum: [...EMPLOYEE_RANGES, null] },
    revenue_range: nullableString,
    industry: nullableString,
    sub_industry: nullableString,
    founded_year: { type: ['integer', 'null'] },
    company_type: { type: ['string', 'null'], enum: [...COMPANY_TYPES, null] },
    location: {
      type: 'object',
      required: ['city', 'region', 'country', 'country_code'],
      properties: { city: nullableString, region: nullableString, country: nullableString, country_code: { type: ['string', 'null'], description: 'ISO 3166-1 alpha-2' } },
    },
    linkedin_url: nullableString,
    twitter_url: nullableString,
    facebook_url: nullableString,
    phone: { type: ['string', 'null'], description: 'E.164' },
    technologies: { type: 'array', items: { type: 'string' } },
    technology_count: { type: 'integer' },
    funding: {
      type: 'object',
      required: ['total_raised', 'last_round', 'last_round_date'],
      properties: { total_raised: { type: ['number', 'null'] }, last_round: nullableString, last_round_date: nullableString },
    },
    confidence: { type: 'number', minimum: 0, maximum: 1, description: 'Grows with the independent signals that agree.' },
    found: { type: 'boolean' },
    credits_charged: { type: 'integer' },
    cache_hit: { type: 'boolean' },
    source_provider: { ...nullableString, description: '`website` (the native provider) or the vendor that answered.' },
    latency_ms: { type: 'integer' },
    error: { type: 'string', description: 'Why nothing was found.' },
  },
} as const;

/** One contact's answer of find/bulk. */
export const findResultSchema = {
  $id: 'FindResult',
  type: 'object',
  required: ['id', 'email', 'confidence', 'source_provider', 'providers_tried', 'pattern', 'not_found', 'credits_charged', 'latency_ms'],
  properties: {
    id: { type: 'string', description: "The contact's own id, else its index." },
    email: nullableString,
    confidence: { type: 'integer', minimum: 0, maximum: 100 },
    source_provider: { ...nullableString, description: '`smtp` (the mail server accepted it), `pattern` (a catch-all domain: the domain\'s evidence), or a vendor.' },
    providers_tried: { type: 'array', items: { type: 'string' } },
    pattern: { ...nullableString, description: 'e.g. `{first}.{last}`' },
    not_found: { type: 'boolean' },
    credits_charged: { type: 'integer' },
    latency_ms: { type: 'integer' },
    error: { type: 'string' },
    validation: { $ref: 'ValidationResult#' },
  },
} as const;

const nullableInt = { type: ['integer', 'null'] } as const;
const seniority = { type: ['string', 'null'], enum: [...PROFILE_SENIORITIES, null] } as const;
const department = { type: ['string', 'null'], enum: [...DEPARTMENTS, null] } as const;

/** A person, as the people, profile and role endpoints answer it (a vendor's data, normalised). */
export const personProfileSchema = {
  $id: 'PersonProfile',
  type: 'object',
  required: [
    'first_name', 'last_name', 'full_name', 'email', 'personal_email', 'mobile', 'linkedin_url', 'twitter_url', 'profile_picture', 'title', 'headline',
    'department', 'seniority', 'company', 'company_domain', 'company_size', 'industry', 'location', 'city', 'region', 'country', 'country_code', 'skills',
    'experience', 'education', 'connections', 'followers', 'recent_job_change', 'job_change_date', 'previous_company', 'previous_title',
  ],
  properties: {
    first_name: nullableString,
    last_name: nullableString,
    full_name: nullableString,
    email: nullableString,
    personal_email: nullableString,
    mobile: { ...nullableString, description: 'E.164' },
    linkedin_url: nullableString,
    twitter_url: nullableString,
    profile_picture: nullableString,
    title: nullableString,
    headline: nullableString,
    department,
    seniority,
    company: nullableString,
    company_domain: nullableString,
    company_size: { type: ['string', 'null'], enum: [...EMPLOYEE_RANGES, null] },
    industry: nullableString,
    location: nullableString,
    city: nullableString,
    region: nullableString,
    country: nullableString,
    country_code: { ...nullableString, description: 'ISO 3166-1 alpha-2' },
    skills: { type: 'array', items: { type: 'string' } },
    experience: {
      type: 'array',
      items: {
        type: 'object',
        required: ['company', 'title', 'department', 'location', 'start_date', 'end_date', 'is_current', 'description'],
        properties: { company: nullableString, title: nullableString, department, location: nullableString, start_date: nullableString, end_date: nullableString, is_current: { type: 'boolean' }, description: nullableString },
      },
    },
    education: {
      type: 'array',
      items: {
        type: 'object',
        required: ['school', 'degree', 'field', 'start_year', 'end_year'],
        properties: { school: nullableString, degree: nullableString, field: nullableString, start_year: nullableInt, end_year: nullableInt },
      },
    },
    connections: nullableInt,
    followers: nullableInt,
    recent_job_change: { type: 'boolean' },
    job_change_date: nullableString,
    previous_company: nullableString,
    previous_title: nullableString,
  },
} as const;

/** One recent hire of linkedin/hires. */
export const hireSchema = {
  $id: 'Hire',
  type: 'object',
  required: ['first_name', 'last_name', 'full_name', 'title', 'seniority', 'department', 'linkedin_url', 'location', 'start_date'],
  properties: { first_name: nullableString, last_name: nullableString, full_name: nullableString, title: nullableString, seniority, department, linkedin_url: nullableString, location: nullableString, start_date: nullableString },
} as const;

export const sharedSchemas = [errorSchema, validationResultSchema, bulkResponseSchema, creditsSchema, jobStatusSchema, jobCreatedSchema, companyEnrichmentSchema, findResultSchema, personProfileSchema, hireSchema];

/** What decides a route's error codes: its gates (scope, billable) and its own `errors`. */
export interface RouteErrors {
  scope?: Scope | 'any';
  billable?: boolean;
  errors?: readonly ErrorCode[];
  /** A POST route that takes no body (or an optional `{}`): see FastifyContextConfig.noBody. */
  noBody?: boolean;
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
