// The data endpoints' request bodies, checked field by field (docs/api.md, "Data endpoints"): each
// missing or out-of-range field is a 400 with its own stable code and the contract's exact
// message, never a truncated list or a guess. Pure: no I/O. The routes call these after the
// gates (key, scope, product, rate limit, configuration), so a caller learns first what it can fix.
//
// Domains are taken the way people paste them (`https://www.Acme.com/about`, `acme.com.`): the
// scheme, path, a leading `www.` and a trailing dot are dropped, the rest lower-cased and put in
// its ASCII (punycode) form. A bulk request's items are checked one by one: an item that cannot
// be used is a result with `error`, not a failed request.

import { domainToASCII } from 'node:url';
import { DATA_LIMITS, DEPARTMENTS, SENIORITIES, ServiceError, type Department, type ErrorCode, type Seniority } from '@svc/contracts';
import { canonicalLinkedInCompanyUrl, canonicalLinkedInProfileUrl } from './linkedin-url.ts';

type Body = Record<string, unknown>;

const MAX_TEXT = 512;

function body(raw: unknown): Body {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ServiceError('invalid_request', 'The request body must be a JSON object');
  return raw as Body;
}

/** A text field: undefined when absent, null or only whitespace; a non-string is invalid_request. */
function text(b: Body, field: string, max = MAX_TEXT): string | undefined {
  const v = b[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new ServiceError('invalid_request', `${field} must be a string`);
  const t = v.trim();
  if (t.length > max) throw new ServiceError('invalid_request', `${field} is longer than ${max} characters`);
  return t === '' ? undefined : t;
}

function required(b: Body, field: string, code: ErrorCode): string {
  const v = text(b, field);
  if (v === undefined) throw new ServiceError(code);
  return v;
}

function flag(b: Body, field: string): boolean {
  const v = b[field];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw new ServiceError('invalid_request', `${field} must be true or false`);
  return v;
}

function int(b: Body, field: string, min: number, max: number, dflt: number, code: ErrorCode, message: string): number {
  const v = b[field];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new ServiceError(code, message);
  return v;
}

/** The domain in its canonical form (lower-case ASCII, no scheme, path, `www.` or trailing dot), or undefined if it is not one. */
export function normaliseDomain(input: string): string | undefined {
  let s = input.trim().toLowerCase();
  s = s.replace(/^[a-z][a-z0-9+.-]*:\/\//, '');
  s = s.split(/[/?#]/, 1)[0] ?? '';
  if (s.includes('@')) s = s.slice(s.lastIndexOf('@') + 1);
  s = s.replace(/:\d+$/, '').replace(/\.$/, '');
  if (s.startsWith('www.')) s = s.slice(4);
  if (s.length === 0 || s.length > 253) return undefined;
  const ascii = domainToASCII(s);
  if (!ascii || ascii.length > 253) return undefined;
  const labels = ascii.split('.');
  if (labels.length < 2) return undefined;
  for (const l of labels) if (!/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(l)) return undefined;
  // The top-level label is never all digits: that is an IP address, not a domain.
  if (/^\d+$/.test(labels.at(-1)!)) return undefined;
  return ascii;
}

function domainField(b: Body, field: string, code: ErrorCode = 'domain_required'): string {
  const raw = required(b, field, code);
  const d = normaliseDomain(raw);
  if (!d) throw new ServiceError('invalid_domain', `${field} is not a valid domain name`);
  return d;
}

function optionalDomain(b: Body, field: string): string | undefined {
  const raw = text(b, field);
  if (raw === undefined) return undefined;
  const d = normaliseDomain(raw);
  if (!d) throw new ServiceError('invalid_domain', `${field} is not a valid domain name`);
  return d;
}

function companyUrl(b: Body, field: string): string | undefined {
  const raw = text(b, field, 2048);
  if (raw === undefined) return undefined;
  const url = canonicalLinkedInCompanyUrl(raw);
  if (!url) throw new ServiceError('invalid_linkedin_url', `${field} is not a LinkedIn company URL (https://www.linkedin.com/company/…)`);
  return url;
}

/** A LinkedIn profile (person) URL, canonical `https://www.linkedin.com/in/<slug>`. */
function profileUrl(b: Body, field: string): string | undefined {
  const raw = text(b, field, 2048);
  if (raw === undefined) return undefined;
  const url = canonicalLinkedInProfileUrl(raw);
  if (!url) throw new ServiceError('invalid_linkedin_url', `${field} is not a LinkedIn profile URL (https://www.linkedin.com/in/…)`);
  return url;
}

function email(b: Body, field: string): string | undefined {
  const raw = text(b, field, 320);
  if (raw === undefined) return undefined;
  const at = raw.lastIndexOf('@');
  if (at < 1 || at === raw.length - 1) throw new ServiceError('invalid_request', `${field} is not an email address`);
  const domain = normaliseDomain(raw.slice(at + 1));
  if (!domain) throw new ServiceError('invalid_request', `${field} is not an email address`);
  return `${raw.slice(0, at)}@${domain}`;
}

const maxConcurrent = (b: Body) =>
  int(b, 'max_concurrent', DATA_LIMITS.maxConcurrentMin, DATA_LIMITS.maxConcurrentMax, DATA_LIMITS.maxConcurrentDefault, 'invalid_max_concurrent', 'max_concurrent must be an integer from 1 to 10');

// ---------------------------------------------------------------------------------------------

export interface CompanyQuery {
  domain: string;
  company_name?: string;
  force_refresh: boolean;
}

export function parseCompanyEnrich(raw: unknown): CompanyQuery {
  const b = body(raw);
  const company_name = text(b, 'company_name');
  return { domain: domainField(b, 'domain'), ...(company_name && { company_name }), force_refresh: flag(b, 'force_refresh') };
}

/** One item of a bulk request: its parsed query, or why it cannot be used (the item's `error`). */
export type BulkItem<Q> = { ok: true; query: Q; input: string } | { ok: false; error: string; input: string };

export interface CompanyBulkQuery {
  items: BulkItem<CompanyQuery>[];
  max_concurrent: number;
}

export function parseCompanyBulk(raw: unknown): CompanyBulkQuery {
  const b = body(raw);
  const list = b.companies;
  if (!Array.isArray(list) || list.length === 0) throw new ServiceError('companies_required');
  if (list.length > DATA_LIMITS.companiesPerBulk) throw new ServiceError('too_many_companies');
  const max_concurrent = maxConcurrent(b);
  const items = list.map((item): BulkItem<CompanyQuery> => {
    const input = typeof item === 'object' && item !== null && typeof (item as Body).domain === 'string' ? ((item as Body).domain as string) : '';
    try {
      return { ok: true, query: parseCompanyEnrich(item), input };
    } catch (err) {
      if (err instanceof ServiceError) return { ok: false, error: err.message, input };
      throw err;
    }
  });
  return { items, max_concurrent };
}

export function parseCompanyByLinkedIn(raw: unknown): { linkedin_url: string } {
  const b = body(raw);
  if (text(b, 'company_linkedin_url', 2048) === undefined) throw new ServiceError('company_linkedin_url_required');
  return { linkedin_url: companyUrl(b, 'company_linkedin_url')! };
}

export function parseDomainToLinkedIn(raw: unknown): { domain: string } {
  return { domain: domainField(body(raw), 'domain') };
}

export type LinkedInCompanyQuery = { domain: string; linkedin_url?: string } | { domain?: string; linkedin_url: string };

function domainOrCompanyUrl(b: Body): LinkedInCompanyQuery {
  const domain = optionalDomain(b, 'domain');
  const linkedin_url = companyUrl(b, 'linkedin_url');
  if (domain) return { domain, ...(linkedin_url && { linkedin_url }) };
  if (linkedin_url) return { linkedin_url };
  throw new ServiceError('domain_or_linkedin_url_required');
}

export function parseLinkedInCompany(raw: unknown): LinkedInCompanyQuery {
  return domainOrCompanyUrl(body(raw));
}

export type HiresQuery = LinkedInCompanyQuery & { days_back: number; limit: number };

export function parseHires(raw: unknown): HiresQuery {
  const b = body(raw);
  const q = domainOrCompanyUrl(b);
  const days_back = int(b, 'days_back', 1, DATA_LIMITS.hiresDaysBackMax, DATA_LIMITS.hiresDaysBackDefault, 'invalid_days_back', 'days_back must be an integer from 1 to 180');
  const limit = int(b, 'limit', 1, DATA_LIMITS.hiresLimitMax, DATA_LIMITS.hiresLimitDefault, 'invalid_limit', 'limit must be an integer from 1 to 100');
  return { ...q, days_back, limit };
}

export interface PeopleSearchQuery {
  domain: string;
  title_keywords: string[];
  department?: Department;
  seniority: Seniority[];
  limit: number;
  offset: number;
}

function stringList(b: Body, field: string, maxItems = 20): string[] {
  const v = b[field];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.length > maxItems || !v.every((x) => typeof x === 'string' && x.length <= 100)) {
    throw new ServiceError('invalid_request', `${field} must be an array of at most ${maxItems} strings`);
  }
  return v.map((x: string) => x.trim()).filter(Boolean);
}

/** A value of a closed list, matched without regard to case. */
function oneOf<T extends string>(list: readonly T[], value: string, field: string): T {
  const hit = list.find((x) => x.toLowerCase() === value.toLowerCase());
  if (!hit) throw new ServiceError('invalid_request', `${field} must be one of: ${list.join(', ')}`);
  return hit;
}

export function parsePeopleSearch(raw: unknown): PeopleSearchQuery {
  const b = body(raw);
  const domain = domainField(b, 'domain');
  const title_keywords = stringList(b, 'title_keywords');
  const dept = text(b, 'department');
  const seniority = stringList(b, 'seniority', SENIORITIES.length).map((s) => oneOf(SENIORITIES, s, 'seniority'));
  const limit = int(b, 'limit', 1, DATA_LIMITS.peopleSearchLimitMax, DATA_LIMITS.peopleSearchLimitDefault, 'invalid_limit', 'limit must be an integer from 1 to 50');
  const offset = int(b, 'offset', 0, 10_000, 0, 'invalid_limit', 'offset must be an integer from 0 to 10000');
  return { domain, title_keywords, ...(dept && { department: oneOf(DEPARTMENTS, dept, 'department') }), seniority: [...new Set(seniority)], limit, offset };
}

export interface PersonLookupQuery {
  first_name: string;
  last_name?: string;
  company_domain: string;
  title?: string;
  location?: string;
  enrich_profile: boolean;
}

export function parsePersonLookup(raw: unknown): PersonLookupQuery {
  const b = body(raw);
  const first_name = required(b, 'first_name', 'first_name_required');
  const company_domain = domainField(b, 'company_domain', 'company_domain_required');
  const last_name = text(b, 'last_name');
  const title = text(b, 'title');
  const location = text(b, 'location');
  return { first_name, ...(last_name && { last_name }), company_domain, ...(title && { title }), ...(location && { location }), enrich_profile: flag(b, 'enrich_profile') };
}

export interface RoleLookupQuery {
  role: string;
  company_name: string;
  enrich_profile: boolean;
}

export function parseRoleLookup(raw: unknown): RoleLookupQuery {
  const b = body(raw);
  return { role: required(b, 'role', 'role_required'), company_name: required(b, 'company_name', 'company_name_required'), enrich_profile: flag(b, 'enrich_profile') };
}

export type ProfileQuery = { email: string; linkedin_url?: string } | { email?: string; linkedin_url: string };

export function parseProfileEnrich(raw: unknown): ProfileQuery {
  const b = body(raw);
  const e = email(b, 'email');
  const linkedin_url = profileUrl(b, 'linkedin_url');
  if (e) return { email: e, ...(linkedin_url && { linkedin_url }) };
  if (linkedin_url) return { linkedin_url };
  throw new ServiceError('email_or_linkedin_url_required');
}

export interface MobileQuery {
  email?: string;
  linkedin_url?: string;
  first_name?: string;
  last_name?: string;
  company?: string;
  domain?: string;
}

export function parseMobileFind(raw: unknown): MobileQuery {
  const b = body(raw);
  const e = email(b, 'email');
  const linkedin_url = profileUrl(b, 'linkedin_url');
  const first_name = text(b, 'first_name');
  const last_name = text(b, 'last_name');
  const company = text(b, 'company');
  const domain = optionalDomain(b, 'domain');
  if (!e && !linkedin_url && !(first_name && last_name)) throw new ServiceError('contact_identity_required');
  return { ...(e && { email: e }), ...(linkedin_url && { linkedin_url }), ...(first_name && { first_name }), ...(last_name && { last_name }), ...(company && { company }), ...(domain && { domain }) };
}

export function parseEmailToPerson(raw: unknown): { email: string } {
  const b = body(raw);
  if (text(b, 'email', 320) === undefined) throw new ServiceError('email_required');
  return { email: email(b, 'email')! };
}

export interface FindContact {
  /** The caller's own id of the contact, echoed in its result (else its index). */
  id?: string;
  first_name: string;
  last_name: string;
  domain?: string;
  company?: string;
  linkedin_url?: string;
}

export interface FindBulkQuery {
  items: BulkItem<FindContact>[];
  validate: boolean;
  max_concurrent: number;
}

/** One contact of find/bulk (a single-contact caller such as the MCP tool gets its 400s). */
export function parseFindContact(raw: unknown): FindContact {
  const b = body(raw);
  const first_name = required(b, 'first_name', 'first_name_required');
  const last_name = text(b, 'last_name');
  if (!last_name) throw new ServiceError('invalid_request', 'last_name is required');
  const domain = optionalDomain(b, 'domain');
  const company = text(b, 'company');
  if (!domain && !company) throw new ServiceError('invalid_request', 'domain or company is required');
  const linkedin_url = profileUrl(b, 'linkedin_url');
  const id = text(b, 'id', 200);
  return { ...(id && { id }), first_name, last_name, ...(domain && { domain }), ...(company && { company }), ...(linkedin_url && { linkedin_url }) };
}

export function parseFindBulk(raw: unknown): FindBulkQuery {
  const b = body(raw);
  const list = b.contacts;
  if (!Array.isArray(list) || list.length === 0) throw new ServiceError('contacts_required');
  if (list.length > DATA_LIMITS.contactsPerFind) throw new ServiceError('too_many_contacts');
  const validate = flag(b, 'validate');
  const max_concurrent = maxConcurrent(b);
  const items = list.map((item, i): BulkItem<FindContact> => {
    // The result's id: the contact's own `id` when it has a usable one, else its index.
    const own = typeof item === 'object' && item !== null && typeof (item as Body).id === 'string' ? ((item as Body).id as string).trim().slice(0, 200) : '';
    const input = own || String(i);
    try {
      return { ok: true, query: parseFindContact(item), input };
    } catch (err) {
      if (err instanceof ServiceError) return { ok: false, error: err.message, input };
      throw err;
    }
  });
  return { items, validate, max_concurrent };
}
