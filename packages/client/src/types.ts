// Names for the shapes the client's methods take and answer, read off the generated OpenAPI
// types (./openapi.ts), so a change to a route's schema reaches callers as a type change. The few
// shapes the document does not describe yet are written here, after the spec (and say so).

import type { components, paths } from './openapi.ts';

type Method = 'get' | 'post' | 'put' | 'delete';
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;
/** The JSON body of response `S` of `M P`. */
export type ResponseBody<P extends keyof paths, M extends Method, S extends number> = Operation<P, M> extends { responses: infer R } ? (S extends keyof R ? JsonOf<R[S]> : never) : never;
/** The JSON request body of `M P`. */
export type RequestBody<P extends keyof paths, M extends Method> = Operation<P, M> extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;

export type { components, paths };

export type ValidationResult = components['schemas']['ValidationResult'];
export type BulkValidationResponse = components['schemas']['BulkValidationResponse'];
export type CreditBalance = components['schemas']['CreditBalance'];
export type Job = components['schemas']['JobStatus'];
export type JobCreated = components['schemas']['JobCreated'];
export type JobState = Job['status'];
export type JobPage = ResponseBody<'/v1/csv/jobs', 'get', 200>;
export type PreparedUpload = ResponseBody<'/v1/csv/prepare-upload', 'post', 200>;
export type UploadReceipt = ResponseBody<'/v1/csv/uploads/{id}', 'put', 200>;
export type DownloadLink = ResponseBody<'/v1/csv/jobs/{id}/download', 'get', 200>;
export type OutcomeImportResult = ResponseBody<'/v1/outcomes/email/import', 'post', 200>;

// The data endpoints (docs/api.md "Data endpoints"): company data, people data, the email finder.
export type CompanyEnrichment = components['schemas']['CompanyEnrichment'];
/** One company of POST /v1/company/enrich/bulk, in the API's own shape (`domain`, `company_name`, `force_refresh`). */
export type CompanyToEnrich = RequestBody<'/v1/company/enrich/bulk', 'post'>['companies'][number];
export type BulkCompanyEnrichment = ResponseBody<'/v1/company/enrich/bulk', 'post', 200>;
export type LinkedInCompanyEnrichment = ResponseBody<'/v1/company/enrich-linkedin', 'post', 200>;
export type DomainLinkedIn = ResponseBody<'/v1/company/domain-to-linkedin', 'post', 200>;
export type LinkedInCompany = ResponseBody<'/v1/linkedin/company', 'post', 200>;
export type LinkedInHires = ResponseBody<'/v1/linkedin/hires', 'post', 200>;
export type PeopleSearchResponse = ResponseBody<'/v1/people/search', 'post', 200>;
export type PersonLookup = ResponseBody<'/v1/people/lookup', 'post', 200>;
export type RoleLookup = ResponseBody<'/v1/people/role', 'post', 200>;
export type ProfileEnrichment = ResponseBody<'/v1/profile/enrich', 'post', 200>;
export type MobileLookup = ResponseBody<'/v1/mobile/find', 'post', 200>;
export type EmailToPerson = ResponseBody<'/v1/prospect/email-to-person', 'post', 200>;
/** One contact of POST /v1/find/bulk, in the API's own shape (`first_name`, `last_name`, `domain` or `company`, an optional `id`). */
export type ContactToFind = RequestBody<'/v1/find/bulk', 'post'>['contacts'][number];
export type FindResult = components['schemas']['FindResult'];
export type BulkFindResponse = ResponseBody<'/v1/find/bulk', 'post', 200>;

// What the single data calls take, in the client's camelCase; each method maps it onto the
// route's body, typed by the document, so a renamed field fails to compile here.
type PeopleSearchBody = RequestBody<'/v1/people/search', 'post'>;

/** POST /v1/linkedin/company: one of the two. */
export interface LinkedInCompanyQuery {
  domain?: string;
  linkedinUrl?: string;
}

/** POST /v1/linkedin/hires. */
export interface HiresQuery extends LinkedInCompanyQuery {
  /** 1-180 (default 90). */
  daysBack?: number;
  /** 1-100 (default 20). */
  limit?: number;
}

/** POST /v1/people/search. */
export interface PeopleSearchQuery {
  domain: string;
  titleKeywords?: readonly string[];
  department?: PeopleSearchBody['department'];
  seniority?: PeopleSearchBody['seniority'];
  /** 1-50 (default 10). */
  limit?: number;
  offset?: number;
}

/** POST /v1/people/lookup. */
export interface PersonLookupQuery {
  firstName: string;
  lastName?: string;
  companyDomain: string;
  title?: string;
  location?: string;
  /** Add the full profile (one more credit). */
  enrichProfile?: boolean;
}

/** POST /v1/people/role. */
export interface RoleLookupQuery {
  role: string;
  companyName: string;
  enrichProfile?: boolean;
}

/** POST /v1/profile/enrich: one of the two. */
export interface ProfileQuery {
  email?: string;
  linkedinUrl?: string;
}

/** POST /v1/mobile/find: an email, a LinkedIn profile, or a name with a company or domain. */
export interface MobileQuery {
  email?: string;
  linkedinUrl?: string;
  firstName?: string;
  lastName?: string;
  company?: string;
  domain?: string;
}

/** The error codes the service documents (docs/errors.md); a client must still expect others. */
export type KnownErrorCode = components['schemas']['Error']['code'];

/** One outcome row (docs/api.md "Delivery outcomes"): the document takes any object. */
export interface OutcomeRow {
  email: string;
  outcome?: string;
  source?: string;
  external_id?: string;
  occurred_at?: string;
  [field: string]: unknown;
}

/**
 * The answer of POST /v1/csv/jobs/{id}/recover-catchalls (202): the document does not describe
 * its body yet, so only the fields docs/api.md shows are named.
 */
export interface CatchallRecovery {
  recovery_id: string;
  job_id: string;
  status: string;
  rows: number;
  credits_reserved: number;
  upgraded: number;
  downgraded: number;
  unchanged: number;
  credits_charged: number;
  credits_refunded: number;
  recovered: Array<{ email: string; previous_result: string; result: string; reason_code: string; evidence: Record<string, unknown> }>;
  [field: string]: unknown;
}

/**
 * The subscription cancellation response (docs/api.md), for POST /v1/subscriptions/cancel and
 * /reactivate; typed by hand until those routes are in the document.
 */
export interface SubscriptionState {
  subscription_id: string;
  status: string;
  cancel_at_period_end: boolean;
  current_period_end: string;
  message: string;
  [field: string]: unknown;
}
