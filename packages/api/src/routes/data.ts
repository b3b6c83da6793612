// The data endpoints (docs/api.md, "Data endpoints"): POST /v1/company/*, /v1/linkedin/*,
// /v1/people/*, /v1/profile/enrich, /v1/mobile/find, /v1/prospect/email-to-person, /v1/find/bulk.
//
// Gate order, so a caller learns first what it can fix: the key (and the address and key rate
// limits), the scope, the data product (403 product_not_enabled), the endpoint's own rate limit
// (bulk company 100/min, bulk find 10,000/min), the family's configuration (503
// feature_not_configured, with the family's message), then the body (400, each field its code).
// Fastify's schema here documents the body (OpenAPI) without validating it: @svc/enrich's checks
// give every field its own code and the contract's exact message, after the gates above.

import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { DATA_ENDPOINTS, DATA_LIMITS, DEPARTMENTS, EMPLOYEE_RANGES, LINE_TYPES, NOT_CONFIGURED_PERSON_LOOKUP, NOT_CONFIGURED_ROLE_LOOKUP, SENIORITIES, ServiceError, type DataEndpoint, type DataFamily, type ErrorCode } from '@svc/contracts';
import type { DataCompletion } from '@svc/billing';
import * as rq from '@svc/enrich';
import type { ApiServices } from '../types.ts';
import { errorResponses, type RouteErrors } from '../schemas.ts';
import { IDEMPOTENCY_CODES, idempotent, type IdempotencyRecord } from '../idempotency.ts';
import { JSON_BODY_CODES } from '../plugins/errors.ts';
import { MINUTE_MS, rateLimited, setRateHeaders } from '../plugins/auth.ts';

/** What every data route can answer besides its own input codes. */
const COMMON = [...JSON_BODY_CODES, 'product_not_enabled', 'feature_not_configured', ...IDEMPOTENCY_CODES, 'insufficient_credits', 'validation_upstream_failed', 'provider_unavailable', 'internal_error'] as const satisfies readonly ErrorCode[];

/** Each endpoint's own input codes (the 400s of its body). */
const INPUT: Record<DataEndpoint, readonly ErrorCode[]> = {
  'company/enrich': ['domain_required', 'invalid_domain'],
  'company/enrich/bulk': ['companies_required', 'too_many_companies', 'invalid_max_concurrent'],
  'company/enrich-linkedin': ['company_linkedin_url_required', 'invalid_linkedin_url'],
  'company/domain-to-linkedin': ['domain_required', 'invalid_domain'],
  'linkedin/company': ['domain_or_linkedin_url_required', 'invalid_domain', 'invalid_linkedin_url'],
  'linkedin/hires': ['domain_or_linkedin_url_required', 'invalid_domain', 'invalid_linkedin_url', 'invalid_days_back', 'invalid_limit'],
  'people/search': ['domain_required', 'invalid_domain', 'invalid_limit'],
  'people/lookup': ['first_name_required', 'company_domain_required', 'invalid_domain'],
  'people/role': ['role_required', 'company_name_required'],
  'profile/enrich': ['email_or_linkedin_url_required', 'invalid_linkedin_url'],
  'mobile/find': ['contact_identity_required', 'invalid_domain', 'invalid_linkedin_url'],
  'prospect/email-to-person': ['email_required'],
  'find/bulk': ['contacts_required', 'too_many_contacts', 'invalid_max_concurrent'],
};

/** The endpoints with a rate of their own (per key, per minute). */
const OWN_RATE: Partial<Record<DataEndpoint, number>> = {
  'company/enrich/bulk': DATA_LIMITS.companyBulkPerMinute,
  'find/bulk': DATA_LIMITS.findBulkPerMinute,
};

/** People-family endpoints whose "not configured" message is their own. */
const OWN_503: Partial<Record<DataEndpoint, string>> = {
  'people/lookup': NOT_CONFIGURED_PERSON_LOOKUP,
  'people/role': NOT_CONFIGURED_ROLE_LOOKUP,
};

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const num = { type: 'number' } as const;
const bool = { type: 'boolean' } as const;
const nullable = (t: 'string' | 'integer' | 'number') => ({ type: [t, 'null'] }) as const;
const nstr = nullable('string');
const nint = nullable('integer');
const nnum = nullable('number');
const common = { found: bool, credits_charged: int, cache_hit: bool, source_provider: nullable('string'), latency_ms: int, error: str } as const;


const open = (properties: Record<string, unknown>, required?: string[]) => ({ type: 'object', additionalProperties: true, properties, ...(required && { required }) });

/** Each endpoint's documented body and answer. */
const DOCS: Record<DataEndpoint, { summary: string; body: Record<string, unknown>; required?: string[]; response: Record<string, unknown> }> = {
  'company/enrich': {
    summary: 'Company data from a domain (1 credit if found; cached 30 days, hits charged the same)',
    body: { domain: str, company_name: str, force_refresh: bool },
    required: ['domain'],
    response: { $ref: 'CompanyEnrichment#' },
  },
  'company/enrich/bulk': {
    summary: `Company data for up to ${DATA_LIMITS.companiesPerBulk} domains (1 credit per company found)`,
    body: { companies: { type: 'array', maxItems: DATA_LIMITS.companiesPerBulk, items: open({ domain: str, company_name: str, force_refresh: bool }) }, max_concurrent: { type: 'integer', minimum: 1, maximum: 10, default: 5 } },
    required: ['companies'],
    response: open({
      id: str,
      results: { type: 'array', items: { $ref: 'CompanyEnrichment#' } },
      summary: open({ total: int, found: int, not_found: int, errors: int, cache_hits: int, credits_charged: int, total_latency_ms: int }, ['total', 'found', 'not_found', 'errors', 'cache_hits', 'credits_charged', 'total_latency_ms']),
    }, ['id', 'results', 'summary']),
  },
  'company/enrich-linkedin': {
    summary: 'Company data from its LinkedIn page (1 credit if found)',
    body: { company_linkedin_url: str },
    required: ['company_linkedin_url'],
    response: open({ company: open({ name: str, domain: str, description: str, industry: str, employee_count: int, employee_range: str, founded_year: int, company_type: str, hq_city: str, hq_region: str, hq_country: str, linkedin_url: str, website: str, phone: str, technologies: { type: 'array', items: str } }), found: bool, credits_charged: int, error: str }),
  },
  'company/domain-to-linkedin': {
    summary: "A domain's LinkedIn company page (1 credit if found)",
    body: { domain: str },
    required: ['domain'],
    response: open({ linkedin_url: str, found: bool, credits_charged: int }),
  },
  'linkedin/company': {
    summary: 'LinkedIn company data (1 credit fresh, 0 from the 7-day cache)',
    body: { domain: str, linkedin_url: str },
    response: open({
      name: nstr,
      linkedin_url: nstr,
      website: nstr,
      industry: nstr,
      company_type: nstr,
      founded_year: nint,
      description: nstr,
      tagline: nstr,
      specialties: { type: 'array', items: str },
      employee_count: nint,
      employee_count_range: { type: ['string', 'null'], enum: [...EMPLOYEE_RANGES, null] },
      follower_count: nint,
      employee_growth_6m: { ...nnum, description: 'percent (8 = 8%)' },
      employee_growth_1y: nnum,
      employee_growth_2y: nnum,
      headquarters: nstr,
      locations: { type: 'array', items: open({ city: nstr, region: nstr, country: nstr, is_hq: bool, address: nstr }) },
      funding: open({ total_funding: nnum, last_round: nstr, last_round_date: nstr, last_round_amount: nnum, investors: { type: 'array', items: str } }),
      ...common,
    }),
  },
  'linkedin/hires': {
    summary: 'Recent hires of a company (2 credits fresh, 0 from the 24-hour cache)',
    body: { domain: str, linkedin_url: str, days_back: { type: 'integer', minimum: 1, maximum: 180, default: 90 }, limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
    response: open({ domain: nstr, company_name: nstr, recent_hires: { type: 'array', items: { $ref: 'Hire#' } }, total: int, days_back: int, hiring_velocity: { type: 'number', description: 'hires per month' }, top_departments: { type: 'array', items: { type: 'string', enum: DEPARTMENTS } }, department_breakdown: open({}), ...common }),
  },
  'people/search': {
    summary: 'People at a company (2 credits per profile returned)',
    body: { domain: str, title_keywords: { type: 'array', items: str }, department: { type: 'string', enum: DEPARTMENTS }, seniority: { type: 'array', items: { type: 'string', enum: SENIORITIES } }, limit: { type: 'integer', minimum: 1, maximum: 50, default: 10 }, offset: { type: 'integer', minimum: 0, default: 0 } },
    required: ['domain'],
    response: open({ people: { type: 'array', items: { $ref: 'PersonProfile#' } }, total: int, limit: int, offset: int, source_provider: nstr, credits_charged: int, latency_ms: int }),
  },
  'people/lookup': {
    summary: "A person's LinkedIn profile from a name and a company (2 credits; 3 with enrich_profile)",
    body: { first_name: str, last_name: str, company_domain: str, title: str, location: str, enrich_profile: bool },
    required: ['first_name', 'company_domain'],
    response: open({ linkedin_url: str, profile: { $ref: 'PersonProfile#' }, similarity_scores: open({ name: num, company: num, title: num, location: num }), confidence: int, ...common }),
  },
  'people/role': {
    summary: 'Who holds a role at a company (3 credits; 4 with enrich_profile)',
    body: { role: str, company_name: str, enrich_profile: bool },
    required: ['role', 'company_name'],
    response: open({ linkedin_url: str, profile: { $ref: 'PersonProfile#' }, confidence: int, ...common }),
  },
  'profile/enrich': {
    summary: 'A person profile from an email or a LinkedIn URL (3 credits if found)',
    body: { email: str, linkedin_url: str },
    response: open({ profile: { anyOf: [{ $ref: 'PersonProfile#' }, { type: 'null' }] }, confidence: int, ...common }),
  },
  'mobile/find': {
    summary: "A person's mobile number (2 credits if found)",
    body: { email: str, linkedin_url: str, first_name: str, last_name: str, company: str, domain: str },
    response: open({ mobile: { ...nstr, description: 'E.164' }, mobile_raw: nstr, country_code: nstr, carrier: nstr, line_type: { type: ['string', 'null'], enum: [...LINE_TYPES, null] }, valid: bool, confidence: int, email: str, ...common }),
  },
  'prospect/email-to-person': {
    summary: 'The person behind an email address (1 credit if found)',
    body: { email: str },
    required: ['email'],
    response: open({ person: { type: ['object', 'null'], additionalProperties: true }, found: bool, credits_charged: int }),
  },
  'find/bulk': {
    summary: `Find the email addresses of up to ${DATA_LIMITS.contactsPerFind} contacts (1 credit per address found with confidence 70 or more)`,
    body: { contacts: { type: 'array', maxItems: DATA_LIMITS.contactsPerFind, items: open({ first_name: str, last_name: str, domain: str, company: str, linkedin_url: str }) }, validate: bool, max_concurrent: { type: 'integer', minimum: 1, maximum: 10, default: 5 } },
    required: ['contacts'],
    response: open(
      { id: str, results: { type: 'array', items: { $ref: 'FindResult#' } }, summary: open({ total: int, found: int, not_found: int, errors: int, credits_charged: int, total_latency_ms: int }, ['total', 'found', 'not_found', 'errors', 'credits_charged', 'total_latency_ms']) },
      ['id', 'results', 'summary'],
    ),
  },
};

const idempotencyHeader = { type: 'object', properties: { 'idempotency-key': { type: 'string', description: 'Optional; 1-255 printable characters, kept 24 h' } } } as const;

/** What a handler gets: the account, the parsed body's raw form, and the Idempotency-Key's completion. */
type Handler = (req: FastifyRequest, accountId: string, completion: (<T>(record?: IdempotencyRecord) => DataCompletion<T> | undefined), record?: IdempotencyRecord) => Promise<unknown>;

const completionOf =
  <T>(record?: IdempotencyRecord): DataCompletion<T> | undefined =>
    record && { key: record.key, owner: record.owner, status: record.status, render: (r: T) => record.serialize(r) };

export const dataRoutes: FastifyPluginAsync<{ services: ApiServices & { data: rq.DataService } }> = async (app, { services }) => {
  const { store, rateLimiter, data } = services;

  const route = (endpoint: DataEndpoint, handle: Handler) => {
    const { scope, family } = DATA_ENDPOINTS[endpoint];
    const config = { scope, product: 'data', billable: true, errors: [...COMMON, ...INPUT[endpoint]] } as const satisfies RouteErrors & { product: 'data' };
    const doc = DOCS[endpoint];
    app.post(
      `/v1/${endpoint}`,
      {
        config,
        // Documented, not validated here: the checks of @svc/enrich run after the gates.
        validatorCompiler: () => () => true,
        schema: {
          summary: doc.summary,
          tags: ['data'],
          security: [{ apiKey: [] }],
          headers: idempotencyHeader,
          body: { type: 'object', properties: doc.body, ...(doc.required && { required: doc.required }) },
          response: { 200: doc.response, ...errorResponses(config) },
        },
      },
      async (req: FastifyRequest, reply: FastifyReply) => {
        const limit = OWN_RATE[endpoint];
        if (limit !== undefined) {
          const d = await rateLimiter.hit(`data:${endpoint}:${req.principal!.key.id}`, limit, MINUTE_MS);
          if (d.remaining < Number(reply.getHeader('RateLimit-Remaining') ?? Infinity)) setRateHeaders(reply, d);
          if (!d.allowed) throw rateLimited();
        }
        requireConfigured(data, family, OWN_503[endpoint]);
        return idempotent(store, req, reply, (record) => handle(req, req.principal!.accountId, completionOf, record));
      },
    );
  };

  route('company/enrich', (req, account, c, record) => data.companyEnrich(account, rq.parseCompanyEnrich(req.body), c(record)));
  route('company/enrich/bulk', (req, account, c, record) => data.companyBulk(account, rq.parseCompanyBulk(req.body), `enr_${randomBytes(12).toString('hex')}`, c(record)));
  route('company/enrich-linkedin', (req, account, c, record) => data.companyByLinkedIn(account, rq.parseCompanyByLinkedIn(req.body).linkedin_url, c(record)));
  route('company/domain-to-linkedin', (req, account, c, record) => data.domainToLinkedIn(account, rq.parseDomainToLinkedIn(req.body).domain, c(record)));
  // The vendor families (People Data Labs): with no provider configured they answer 503 before reading the body.
  route('linkedin/company', (req, account, c, record) => data.linkedinCompany(account, rq.parseLinkedInCompany(req.body), c(record)));
  route('linkedin/hires', (req, account, c, record) => data.hires(account, rq.parseHires(req.body), c(record)));
  route('people/search', (req, account, c, record) => data.peopleSearch(account, rq.parsePeopleSearch(req.body), c(record)));
  route('people/lookup', (req, account, c, record) => data.personLookup(account, rq.parsePersonLookup(req.body), c(record)));
  route('people/role', (req, account, c, record) => data.roleLookup(account, rq.parseRoleLookup(req.body), c(record)));
  route('profile/enrich', (req, account, c, record) => data.profileEnrich(account, rq.parseProfileEnrich(req.body), c(record)));
  route('mobile/find', (req, account, c, record) => data.mobileFind(account, rq.parseMobileFind(req.body), c(record)));
  route('prospect/email-to-person', (req, account, c, record) => data.emailToPerson(account, rq.parseEmailToPerson(req.body).email, c(record)));
  route('find/bulk', (req, account, c, record) => data.findBulk(account, rq.parseFindBulk(req.body), `find_${randomBytes(12).toString('hex')}`, c(record)));
};

function requireConfigured(data: rq.DataService, family: DataFamily, message?: string): void {
  try {
    data.requireFamily(family);
  } catch (err) {
    if (message && err instanceof ServiceError && err.code === 'feature_not_configured') throw new ServiceError('feature_not_configured', message);
    throw err;
  }
}
