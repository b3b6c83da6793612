// The tools' input and output schemas (zod; the SDK turns them into the JSON Schema of
// tools/list). Each output schema has exactly the fields of the REST response it mirrors (the
// API's JSON schemas in packages/api/src/schemas.ts; a test there keeps the two equal), and the
// structured content of a tool is parsed through it: what an agent receives is what the REST
// route would have answered, field for field, and nothing internal leaks.

import * as z from 'zod';
import { CHARGE_REASONS, COMPANY_TYPES, CONFIDENCES, EMPLOYEE_RANGES, JOB_RESULT_FIELDS, JOB_STATES, LAYERS, QUALITIES, REASON_CODES, VALIDATION_RESULTS } from '@svc/contracts';
import { MAX_JOB_EMAILS } from '@svc/jobs';

/** Emails per svc_validate_bulk call, as POST /v1/validate/bulk. */
export const MAX_BULK = 100;

const int = () => z.number().int();
const quality = z.enum(QUALITIES);

export const validationResult = z.object({
  email: z.string(),
  result: z.enum(VALIDATION_RESULTS),
  reason: z.string().describe('Human explanation; empty for a plain valid address.'),
  reason_code: z.enum(REASON_CODES).describe('Stable machine reason.'),
  syntax_valid: z.boolean(),
  dns_valid: z.boolean(),
  smtp_valid: z.boolean(),
  is_role_based: z.boolean(),
  role_type: z.string().optional(),
  is_free_provider: z.boolean(),
  is_disposable: z.boolean(),
  is_catchall: z.boolean(),
  catchall_confidence: z.enum(CONFIDENCES).optional(),
  b2b_outbound_quality: quality,
  b2b_quality: quality,
  credits_charged: z.union([z.literal(0), z.literal(1)]),
  charge_reason: z.enum(CHARGE_REASONS).describe('Why credits were or were not charged.'),
  validation_layer: z.enum(LAYERS),
  smtp_response: z.string().optional(),
  did_you_mean: z.string().optional(),
  flags: z.array(z.string()),
});

export const bulkResponse = z.object({
  results: z.array(validationResult).describe('One per submitted string, in input order.'),
  summary: z.object({ total: int(), valid: int(), valid_role_based: int(), risky: int(), invalid: int(), unknown: int(), credits_charged: int() }),
});

export const creditBalance = z.object({
  account_id: z.string(),
  balance: int(),
  reserved: int(),
  available: int().describe('balance − reserved: what new work can use.'),
  subscription_status: z.string(),
  current_period_end: z.string().nullable(),
  cancel_at_period_end: z.boolean(),
});


export const jobStatus = z.object({
  id: z.string(),
  status: z.enum(JOB_STATES),
  progress: z.object({ processed: int(), total: int(), percent: z.number() }),
  results: z.object(Object.fromEntries(JOB_RESULT_FIELDS.map((k) => [k, int()])) as Record<(typeof JOB_RESULT_FIELDS)[number], z.ZodNumber>),
  credit_reservation: z.object({
    reserved: z.boolean(),
    reserved_credits: int(),
    credits_charged: int(),
    credits_consumed: int(),
    refunded_credits: int(),
    credits_per_high_value_validation: int(),
    finalized: z.boolean(),
  }),
  created_at: z.string(),
  started_at: z.string().nullable(),
  completed_at: z.string().nullable(),
  source: z.enum(['json', 'csv']),
  filename: z.string().nullable(),
  webhook_url: z.string().nullable(),
  download: z.object({ available: z.boolean(), url: z.string().describe('The REST download route (needs an API key); agents use svc_get_job_download_url.') }),
});

export const jobCreated = z.object({
  id: z.string(),
  status: z.literal('queued'),
  total_rows: int(),
  unique_emails: int(),
  credits_reserved: int().describe('One per unique email; what is not charged is refunded when the job finishes.'),
  created_at: z.string(),
});

export const jobList = z.object({ jobs: z.array(jobStatus), next_cursor: z.string().nullable().describe('null after the last page') });

export const downloadLink = z.object({ url: z.string().describe('Signed URL of the results CSV: no key needed, valid for an hour.'), expires_at: z.string() });

const ns = () => z.string().nullable();
export const companyEnrichment = z.object({
  domain: z.string(),
  company_name: ns(),
  display_name: ns(),
  description: ns(),
  website: ns(),
  employee_count: int().nullable(),
  employee_range: z.enum(EMPLOYEE_RANGES).nullable(),
  revenue_range: ns(),
  industry: ns(),
  sub_industry: ns(),
  founded_year: int().nullable(),
  company_type: z.enum(COMPANY_TYPES).nullable(),
  location: z.object({ city: ns(), region: ns(), country: ns(), country_code: ns() }),
  linkedin_url: ns(),
  twitter_url: ns(),
  facebook_url: ns(),
  phone: ns().describe('E.164'),
  technologies: z.array(z.string()),
  technology_count: int(),
  funding: z.object({ total_raised: z.number().nullable(), last_round: ns(), last_round_date: ns() }),
  confidence: z.number().describe('0 to 1: grows with the independent signals that agree.'),
  found: z.boolean(),
  credits_charged: int(),
  cache_hit: z.boolean(),
  source_provider: ns(),
  latency_ms: int(),
  error: z.string().optional(),
});
export const findResult = z.object({
  id: z.string(),
  email: ns(),
  confidence: int().describe('0 to 100; 70 or more is charged'),
  source_provider: ns().describe('`smtp` (the mail server accepted it) or `pattern` (a catch-all domain)'),
  providers_tried: z.array(z.string()),
  pattern: ns(),
  not_found: z.boolean(),
  credits_charged: int(),
  latency_ms: int(),
  error: z.string().optional(),
  validation: validationResult.optional(),
});
const jobId = z.string().max(64).describe('The job id (`job_…`)');

/** The tools' inputs (raw shapes, as McpServer.registerTool takes them). */
export const inputs = {
  svc_get_credits: {},
  svc_validate_email: { email: z.string().describe('The address to validate') },
  svc_validate_bulk: { emails: z.array(z.string()).min(1).max(MAX_BULK).describe(`1-${MAX_BULK} addresses; results come back in this order`) },
  svc_create_validation_job: {
    emails: z.array(z.string()).min(1).max(MAX_JOB_EMAILS).describe('The addresses to validate (duplicates are validated once)'),
    webhook_url: z.string().optional().describe('Called with job.completed or job.failed (http or https)'),
  },
  svc_get_job: { job_id: jobId },
  svc_list_jobs: {
    limit: z.number().int().min(1).max(100).optional().describe('Jobs per page, 1-100 (default 20)'),
    cursor: z.string().max(200).optional().describe('The next_cursor of the previous page'),
    status: z.enum(JOB_STATES).optional().describe('Only jobs in this state'),
  },
  svc_get_job_download_url: {
    job_id: jobId,
    segment: z.string().max(200).optional().describe('Keep only these results: a comma list of valid, valid_role_based, risky, invalid, unknown'),
  },
  // Checked by the data endpoints' own rules (the REST codes and messages), not here.
  svc_enrich_company: {
    domain: z.string().optional().describe('The company\'s domain (required), e.g. acme.com'),
    company_name: z.string().optional().describe('The name you expect (raises confidence when it matches)'),
    force_refresh: z.boolean().optional().describe('Fetch again instead of the 30-day cache'),
  },
  svc_find_email: {
    first_name: z.string().optional().describe('Required'),
    last_name: z.string().optional().describe('Required'),
    domain: z.string().optional().describe('The company\'s domain (or give company)'),
    company: z.string().optional().describe('The company\'s name, when its domain is known to the service'),
    validate: z.boolean().optional().describe('Also validate the address found (+1 credit when it is a High-Value Validation)'),
  },
} as const;

/** The tools' outputs: exactly the REST response bodies. */
export const outputs = {
  svc_get_credits: creditBalance,
  svc_validate_email: validationResult,
  svc_validate_bulk: bulkResponse,
  svc_create_validation_job: jobCreated,
  svc_get_job: jobStatus,
  svc_list_jobs: jobList,
  svc_get_job_download_url: downloadLink,
  svc_enrich_company: companyEnrichment,
  svc_find_email: findResult,
} as const;

export type ToolName = keyof typeof outputs;
export const TOOL_NAMES = Object.keys(outputs) as ToolName[];

/** The JSON Schema of a tool's output (what tools/list shows); the API's schema test compares it with the REST schema. */
export const outputJsonSchema = (name: ToolName): Record<string, unknown> => z.toJSONSchema(outputs[name]) as Record<string, unknown>;
