// People Data Labs (PDL) as a data vendor, on its public v5 HTTP API: person enrichment
// (`GET /v5/person/enrich`), person search (`POST /v5/person/search`, an Elasticsearch query) and
// company enrichment (`GET /v5/company/enrich`). PdlProvider answers the company, people (search,
// lookup, role), profile and mobile ports; its `linkedin` view answers the LinkedIn port (company
// data, hires).
//
// The API key travels in the `X-Api-Key` header only: never in a URL, and never in a message or
// an error this adapter makes (PDL's own error text is passed on with the key blanked out).
//
// What PDL answers, in our terms:
// - 200: found. 404: not found (`{ found: false, error: 'not found' }`), for search too (PDL
//   answers 404 when no record matches a query).
// - 401/403: the key was refused; 402: out of credits; other 4xx: the request was refused. None of
//   these is retried. 429: rate limited, retryable, with Retry-After (seconds or a date) or else
//   PDL's x-ratelimit-reset (a date or epoch seconds) as the hint. 5xx, 408, network failures and
//   an aborted call: retryable. A 200 whose body is not JSON or not PDL's shape: not retryable.
//
// Normalisation (each table below is exported, and tested as a table):
// - seniority from `job_title_levels`, the most senior level winning: cxo/owner/partner → C-Level,
//   vp → VP, director → Director, manager → Manager, senior → Senior, entry → Individual,
//   training/unpaid → Intern, none → null;
// - department from `job_title_role`, with `job_title_sub_role` first for the executive sub-roles
//   and as the fallback when the role says nothing we can use;
// - company size onto the contract's ranges (5001-10000 and 10001+ → 5001+);
// - company type: public_subsidiary → public; educational → null (a school may be public, private
//   or a nonprofit: no guess);
// - countries: PDL's lower-case English names to ISO alpha-2 through Intl.DisplayNames, read in
//   reverse (no table of our own);
// - LinkedIn URLs canonical (`https://www.linkedin.com/in/<slug>`, `.../company/<slug>`); other
//   social URLs and websites given a scheme; mobiles in E.164 (libphonenumber), valid ones only;
// - likelihood (1-10) → confidence ×10 (0-100), or ÷10 for the company port's 0-1 confidence;
// - PDL growth rates are fractions (0.12 = 12%) and become percent; without them, growth is worked
//   out from `employee_count_by_month` when PDL gives it.
//
// Searches have no likelihood, so confidence there is ours (see `lookup` and `role`). PDL's search
// has no documented sort: `hires` asks for `limit` records in the window and orders that page
// newest first itself (fetching more to sort would cost a credit per record).

import { request, type Dispatcher } from 'undici';
import type { CompanyType, Department, EmployeeRange, Seniority } from '@svc/contracts';
import { ProviderError, type ProviderAnswer } from '../chain.ts';
import { DNS_RULES } from '../company/dns-signals.ts';
import type { Company, CompanyProvider } from '../company/native.ts';
import { WEB_TECH_NAMES } from '../company/web-tech.ts';
import { canonicalSocialUrl } from '../company/website.ts';
import { canonicalLinkedInCompanyUrl, canonicalLinkedInProfileUrl, linkedInSlug } from '../linkedin-url.ts';
import { normalisePhone } from '../phone.ts';
import type { Education, Experience, Hire, LinkedInCompany, LinkedInProvider, MobileProvider, PeopleProvider, PersonProfile, ProfileProvider } from '../ports.ts';
import { normaliseDomain } from '../requests.ts';
import type { HiresQuery, LinkedInCompanyQuery, MobileQuery, PeopleSearchQuery, PersonLookupQuery, ProfileQuery, RoleLookupQuery } from '../requests.ts';

export const PDL_DEFAULT_BASE_URL = 'https://api.peopledatalabs.com';

export interface PdlOptions {
  apiKey: string;
  /** Default https://api.peopledatalabs.com (tests point it at a stand-in). */
  baseUrl?: string;
  dispatcher?: Dispatcher;
  /** PDL's `min_likelihood` (1-10) on enrichments; unset: PDL's own default. */
  minLikelihood?: number;
  /** The clock (hires' window, recent job changes); tests fix it. */
  now?: () => Date;
}

/** A job started this recently counts as a recent job change. */
export const RECENT_JOB_CHANGE_DAYS = 90;

// ---------------------------------------------------------------------------------------------
// Normalisation tables

/** PDL's job title levels, most senior first, with the seniority each one means. */
export const PDL_LEVEL_SENIORITY: ReadonlyArray<readonly [string, Seniority]> = [
  ['cxo', 'C-Level'],
  ['owner', 'C-Level'],
  ['partner', 'C-Level'],
  ['vp', 'VP'],
  ['director', 'Director'],
  ['manager', 'Manager'],
  ['senior', 'Senior'],
  ['entry', 'Individual'],
  ['training', 'Intern'],
  ['unpaid', 'Intern'],
];

/** The most senior of PDL's levels, as our seniority; null when PDL names none we know. */
export function pdlSeniority(levels: unknown): Seniority | null {
  if (!Array.isArray(levels)) return null;
  const have = new Set(levels.filter((l): l is string => typeof l === 'string').map((l) => l.toLowerCase()));
  for (const [level, seniority] of PDL_LEVEL_SENIORITY) if (have.has(level)) return seniority;
  return null;
}

/** PDL's levels for each seniority (for search filters). */
export function pdlLevelsFor(seniority: Seniority): string[] {
  return PDL_LEVEL_SENIORITY.filter(([, s]) => s === seniority).map(([l]) => l);
}

/** PDL job title roles (the taxonomy since v28) that name one of our departments. */
export const PDL_ROLE_DEPARTMENT: Readonly<Record<string, Department>> = {
  sales: 'Sales',
  sales_engineering: 'Sales',
  partnerships: 'Sales',
  engineering: 'Engineering',
  marketing: 'Marketing',
  finance: 'Finance',
  human_resources: 'HR',
  operations: 'Operations',
  product: 'Product',
  legal: 'Legal',
};

/** Sub-roles that name a department when the role does not (executive and board_member always win). */
export const PDL_SUB_ROLE_DEPARTMENT: Readonly<Record<string, Department>> = {
  executive: 'Executive',
  board_member: 'Executive',
  product_management: 'Product',
  product_design: 'Product',
  software: 'Engineering',
  devops: 'Engineering',
  data_engineering: 'Engineering',
  qa_engineering: 'Engineering',
  web: 'Engineering',
  recruiting: 'HR',
  talent_analytics: 'HR',
  human_resources: 'HR',
  accounting: 'Finance',
  bookkeeping: 'Finance',
  financial: 'Finance',
  planning_and_analysis: 'Finance',
  investor_relations: 'Finance',
  legal: 'Legal',
  legal_services: 'Legal',
  compliance: 'Legal',
  account_executive: 'Sales',
  account_management: 'Sales',
  business_development: 'Sales',
  sales_development: 'Sales',
  revenue_operations: 'Operations',
  logistics: 'Operations',
  procurement: 'Operations',
  brand: 'Marketing',
  growth: 'Marketing',
  marketing_design: 'Marketing',
  marketing_services: 'Marketing',
};

const EXECUTIVE_SUB_ROLES = new Set(['executive', 'board_member']);

/** Our department for PDL's role and sub-role; null when neither names one. */
export function pdlDepartment(role: unknown, subRole: unknown): Department | null {
  const r = typeof role === 'string' ? role.toLowerCase() : '';
  const s = typeof subRole === 'string' ? subRole.toLowerCase() : '';
  if (EXECUTIVE_SUB_ROLES.has(s)) return 'Executive';
  return PDL_ROLE_DEPARTMENT[r] ?? PDL_SUB_ROLE_DEPARTMENT[s] ?? null;
}

/** The roles and sub-roles that map onto a department (for search filters). */
export function pdlRolesFor(department: Department): { roles: string[]; subRoles: string[] } {
  return {
    roles: Object.entries(PDL_ROLE_DEPARTMENT)
      .filter(([, d]) => d === department)
      .map(([r]) => r),
    subRoles: Object.entries(PDL_SUB_ROLE_DEPARTMENT)
      .filter(([, d]) => d === department)
      .map(([s]) => s),
  };
}

export const PDL_SIZE_RANGE: Readonly<Record<string, EmployeeRange>> = {
  '1-10': '1-10',
  '11-50': '11-50',
  '51-200': '51-200',
  '201-500': '201-500',
  '501-1000': '501-1000',
  '1001-5000': '1001-5000',
  '5001-10000': '5001+',
  '10001+': '5001+',
};

export function pdlEmployeeRange(size: unknown): EmployeeRange | null {
  return typeof size === 'string' ? (PDL_SIZE_RANGE[size.trim()] ?? null) : null;
}

export const PDL_COMPANY_TYPE: Readonly<Record<string, CompanyType | null>> = {
  public: 'public',
  public_subsidiary: 'public',
  private: 'private',
  nonprofit: 'nonprofit',
  government: 'government',
  educational: null,
};

export function pdlCompanyType(type: unknown): CompanyType | null {
  return typeof type === 'string' ? (PDL_COMPANY_TYPE[type.toLowerCase()] ?? null) : null;
}

/** Letters and digits only, lower-case, accents and punctuation gone, `&` read as "and". */
function fold(s: string): string {
  return s
    .toLowerCase()
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .replace(/&/g, ' and ')
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

let countryByName: Map<string, string> | undefined;

/**
 * ISO 3166-1 alpha-2 of an English country name ("united states" → US), from the names ICU
 * gives each region code (long and short forms). User-assigned and exceptionally reserved codes
 * (EU, UN, the pseudo-regions...) are left out, and so are withdrawn codes that ICU reads as
 * another (DD is Germany's DE); Kosovo's XK is kept.
 */
export function pdlCountryCode(name: unknown): string | null {
  if (typeof name !== 'string' || name.trim() === '') return null;
  if (!countryByName) {
    countryByName = new Map();
    const notCountries = /^(?:AA|Q[M-Z]|X[A-JL-Z]|ZZ|EU|EZ|UN|AC|CP|DG|EA|IC|TA)$/;
    for (const style of ['long', 'short'] as const) {
      const names = new Intl.DisplayNames(['en'], { type: 'region', style, fallback: 'none' });
      for (let a = 65; a <= 90; a++) {
        for (let b = 65; b <= 90; b++) {
          const code = String.fromCharCode(a, b);
          // Skip the user-assigned and reserved codes, and old codes ICU keeps as aliases (DD → DE).
          if (notCountries.test(code) || new Intl.Locale(`und-${code}`).region !== code) continue;
          const n = names.of(code);
          if (n && n !== code) {
            const key = fold(n);
            if (!countryByName.has(key)) countryByName.set(key, code);
          }
        }
      }
    }
  }
  return countryByName.get(fold(name)) ?? null;
}

/**
 * How alike two texts are, 0 to 1: 1 when equal once case, accents and punctuation are set aside;
 * otherwise the share of words they have in common (Dice: twice the common words over the words of
 * both), to two decimals. Empty text: 0.
 */
export function similarity(a: string | null | undefined, b: string | null | undefined): number {
  if (!a || !b) return 0;
  const x = fold(a);
  const y = fold(b);
  if (x === '' || y === '') return 0;
  if (x === y) return 1;
  const xs = new Set(x.split(' '));
  const ys = new Set(y.split(' '));
  let common = 0;
  for (const w of xs) if (ys.has(w)) common++;
  return Math.round(((2 * common) / (xs.size + ys.size)) * 100) / 100;
}

/** C-suite titles PDL writes in full: a role asked as "CFO" also matches "chief financial officer", and the other way round. */
const ROLE_ACRONYMS: Readonly<Record<string, string>> = {
  ceo: 'chief executive officer',
  cfo: 'chief financial officer',
  coo: 'chief operating officer',
  cto: 'chief technology officer',
  cmo: 'chief marketing officer',
  cio: 'chief information officer',
  cro: 'chief revenue officer',
  cpo: 'chief product officer',
  chro: 'chief human resources officer',
  ciso: 'chief information security officer',
};

/** The role as asked, plus its long form or acronym. */
export function rolePhrases(role: string): string[] {
  const r = fold(role);
  const out = new Set([r]);
  const long = ROLE_ACRONYMS[r];
  if (long) out.add(long);
  for (const [acronym, full] of Object.entries(ROLE_ACRONYMS)) if (full === r) out.add(acronym);
  return [...out].filter(Boolean);
}

// ---------------------------------------------------------------------------------------------
// Reading PDL's records (every field may be missing, null, or `true` where the plan hides a value)

type Rec = Record<string, unknown>;

const isRec = (v: unknown): v is Rec => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const int = (v: unknown): number | null => {
  const n = num(v);
  return n === null ? null : Math.round(n);
};
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.map(str).filter((s): s is string => s !== null) : []);
const rec = (v: unknown): Rec => (isRec(v) ? v : {});

/** The names the native rules give products, by their lower case (PDL's are lower-cased). */
const KNOWN_TECH = new Map([...WEB_TECH_NAMES, ...DNS_RULES.map((r) => r.product)].map((n) => [n.toLowerCase(), n]));
/** A product's name as the native rules write it (`salesforce` → `Salesforce`), else as PDL gave it. */
const technologyName = (n: string): string => KNOWN_TECH.get(n.toLowerCase()) ?? n;

/** `acme.test` → `https://acme.test`. */
function withScheme(v: unknown): string | null {
  const s = str(v);
  if (!s) return null;
  return /^https?:\/\//i.test(s) ? s : `https://${s.replace(/^\/\//, '')}`;
}

function year(v: unknown): number | null {
  const m = /^(\d{4})/.exec(str(v) ?? '');
  return m ? Number(m[1]) : null;
}

/** YYYY-MM-DD of a date (UTC). */
function isoDay(d: Date): string {
  return d.toISOString().slice(0, 10);
}

/** Dates as PDL writes them (YYYY, YYYY-MM, YYYY-MM-DD) in an order that sorts: missing parts as the first. */
function sortableDate(v: unknown): string {
  const s = str(v) ?? '';
  return s.length === 4 ? `${s}-01-01` : s.length === 7 ? `${s}-01` : s;
}

function experience(e: Rec): Experience {
  const company = rec(e.company);
  const title = rec(e.title);
  return {
    company: str(company.name),
    title: str(title.name),
    department: pdlDepartment(title.role, title.sub_role),
    location: strs(e.location_names)[0] ?? null,
    start_date: str(e.start_date),
    end_date: str(e.end_date),
    is_current: e.is_primary === true,
    description: str(e.summary),
  };
}

function education(e: Rec): Education {
  return {
    school: str(rec(e.school).name),
    degree: strs(e.degrees)[0] ?? null,
    field: strs(e.majors)[0] ?? null,
    start_year: year(e.start_date),
    end_year: year(e.end_date),
  };
}

/** A PDL person record as our profile. */
export function pdlPersonProfile(p: Rec, now: Date): PersonProfile {
  const countryCode = pdlCountryCode(p.location_country);
  const rawMobile = str(p.mobile_phone);
  const phone = rawMobile ? normalisePhone(rawMobile, countryCode ?? undefined) : undefined;
  const jobs = (Array.isArray(p.experience) ? p.experience.filter(isRec) : []).map((e) => ({ raw: e, value: experience(e) }));
  const start = str(p.job_start_date);
  const recent = start !== null && now.getTime() - Date.parse(sortableDate(start)) <= RECENT_JOB_CHANGE_DAYS * 86_400_000;
  // The previous job: the latest-starting one that is not the current one.
  const previous = jobs
    .filter((j) => j.raw.is_primary !== true)
    .sort((a, b) => sortableDate(b.raw.start_date).localeCompare(sortableDate(a.raw.start_date)))[0]?.value;
  return {
    first_name: str(p.first_name),
    last_name: str(p.last_name),
    full_name: str(p.full_name),
    email: str(p.work_email),
    personal_email: str(p.recommended_personal_email) ?? strs(p.personal_emails)[0] ?? null,
    mobile: phone?.valid ? phone.e164 : null,
    linkedin_url: linkedInProfile(p.linkedin_url),
    twitter_url: canonicalSocialUrl('twitter', str(p.twitter_url)),
    profile_picture: null,
    title: str(p.job_title),
    headline: str(p.headline),
    department: pdlDepartment(p.job_title_role, p.job_title_sub_role),
    seniority: pdlSeniority(p.job_title_levels),
    company: str(p.job_company_name),
    company_domain: domainOf(p.job_company_website),
    company_size: pdlEmployeeRange(p.job_company_size),
    industry: str(p.job_company_industry) ?? str(p.industry),
    location: str(p.location_name),
    city: str(p.location_locality),
    region: str(p.location_region),
    country: str(p.location_country),
    country_code: countryCode,
    skills: strs(p.skills),
    experience: jobs.map((j) => j.value),
    education: (Array.isArray(p.education) ? p.education.filter(isRec) : []).map(education),
    connections: int(p.linkedin_connections),
    followers: null,
    recent_job_change: recent,
    job_change_date: start,
    previous_company: previous?.company ?? null,
    previous_title: previous?.title ?? null,
  };
}

function linkedInProfile(v: unknown): string | null {
  const s = str(v);
  return s ? (canonicalLinkedInProfileUrl(s) ?? null) : null;
}

function linkedInCompany(v: unknown): string | null {
  const s = str(v);
  return s ? (canonicalLinkedInCompanyUrl(s) ?? null) : null;
}

function domainOf(v: unknown): string | null {
  const s = str(v);
  return s ? (normaliseDomain(s) ?? null) : null;
}

function hire(p: Rec): Hire {
  return {
    first_name: str(p.first_name),
    last_name: str(p.last_name),
    full_name: str(p.full_name),
    title: str(p.job_title),
    seniority: pdlSeniority(p.job_title_levels),
    department: pdlDepartment(p.job_title_role, p.job_title_sub_role),
    linkedin_url: linkedInProfile(p.linkedin_url),
    location: str(p.location_name),
    start_date: str(p.job_start_date),
  };
}

/** Percent (one decimal) from PDL's fraction. */
const percent = (v: unknown): number | null => {
  const n = num(v);
  return n === null ? null : Math.round(n * 1000) / 10;
};

/** Growth over `months` from a month → headcount series ("2024-05": 120), in percent. */
function growthFromSeries(series: unknown, months: number): number | null {
  if (!isRec(series)) return null;
  const keys = Object.keys(series)
    .filter((k) => /^\d{4}-\d{2}$/.test(k) && num(series[k]) !== null)
    .sort();
  const last = keys.at(-1);
  if (!last) return null;
  const [y, m] = last.split('-').map(Number) as [number, number];
  const back = new Date(Date.UTC(y, m - 1 - months, 1));
  const before = num(series[back.toISOString().slice(0, 7)]);
  const now = num(series[last])!;
  if (!before) return null;
  return Math.round((now / before - 1) * 1000) / 10;
}

function growth(c: Rec, key: string, months: number): number | null {
  return percent(rec(c.employee_growth_rate)[key]) ?? growthFromSeries(c.employee_count_by_month, months);
}

/** The latest funding round PDL details (the one on `last_funding_date` when it names one). */
function lastRound(c: Rec): Rec | undefined {
  const rounds = Array.isArray(c.funding_details) ? c.funding_details.filter(isRec) : [];
  const last = str(c.last_funding_date);
  return rounds.find((r) => last !== null && str(r.funding_round_date) === last) ?? rounds.sort((a, b) => sortableDate(b.funding_round_date).localeCompare(sortableDate(a.funding_round_date)))[0];
}

/** A PDL company record as LinkedIn company data. */
export function pdlLinkedInCompany(c: Rec): LinkedInCompany {
  const loc = rec(c.location);
  const listed = Array.isArray(c.locations) ? c.locations.filter(isRec) : [];
  const locations = (listed.length > 0 ? listed : Object.keys(loc).length > 0 ? [{ ...loc, is_primary: true }] : []).map((l) => ({
    city: str(l.locality),
    region: str(l.region),
    country: str(l.country),
    is_hq: l.is_primary === true,
    address: str(l.street_address),
  }));
  const rounds = Array.isArray(c.funding_details) ? c.funding_details.filter(isRec) : [];
  const investors = [...new Set(rounds.flatMap((r) => [...strs(r.investing_companies), ...strs(r.investing_individuals)]))];
  return {
    name: str(c.display_name) ?? str(c.name),
    linkedin_url: linkedInCompany(c.linkedin_url),
    website: withScheme(c.website),
    industry: str(c.industry),
    company_type: pdlCompanyType(c.type),
    founded_year: int(c.founded),
    description: str(c.summary),
    tagline: str(c.headline),
    specialties: strs(c.tags),
    employee_count: int(c.employee_count),
    employee_count_range: pdlEmployeeRange(c.size),
    follower_count: int(c.linkedin_follower_count),
    employee_growth_6m: growth(c, '6_month', 6),
    employee_growth_1y: growth(c, '12_month', 12),
    employee_growth_2y: growth(c, '24_month', 24),
    headquarters: str(loc.name),
    locations,
    funding: {
      total_funding: num(c.total_funding_raised),
      last_round: str(c.latest_funding_stage),
      last_round_date: str(c.last_funding_date),
      last_round_amount: num(lastRound(c)?.funding_raised),
      investors,
    },
  };
}

/** A PDL company record as the company port's answer. */
export function pdlCompany(c: Rec, likelihood: number | null): Company {
  const loc = rec(c.location);
  const technologies = [...new Set((Array.isArray(c.technologies_used) ? c.technologies_used.filter(isRec) : []).map((t) => str(t.name)).filter((n): n is string => n !== null).map(technologyName))];
  return {
    company_name: str(c.name),
    display_name: str(c.display_name) ?? str(c.name),
    description: str(c.summary),
    website: withScheme(c.website),
    employee_count: int(c.employee_count),
    employee_range: pdlEmployeeRange(c.size),
    revenue_range: str(c.inferred_revenue),
    industry: str(c.industry),
    sub_industry: null,
    founded_year: int(c.founded),
    company_type: pdlCompanyType(c.type),
    location: { city: str(loc.locality), region: str(loc.region), country: str(loc.country), country_code: pdlCountryCode(loc.country) },
    linkedin_url: linkedInCompany(c.linkedin_url),
    twitter_url: canonicalSocialUrl('twitter', str(c.twitter_url)),
    facebook_url: canonicalSocialUrl('facebook', str(c.facebook_url)),
    phone: null,
    technologies,
    technology_count: technologies.length,
    funding: { total_raised: num(c.total_funding_raised), last_round: str(c.latest_funding_stage), last_round_date: str(c.last_funding_date) },
    confidence: likelihood === null ? 0 : Math.max(0, Math.min(1, likelihood / 10)),
    source_provider: 'pdl',
  };
}

/** Likelihood 1-10 → confidence 0-100. */
const confidence100 = (likelihood: unknown): number => {
  const n = num(likelihood);
  return n === null ? 0 : Math.max(0, Math.min(100, Math.round(n * 10)));
};

// ---------------------------------------------------------------------------------------------
// The provider

type Answer<T> = { found: true; body: T } | { found: false };

const NOT_FOUND = { found: false, error: 'not found' } as const;

export class PdlProvider implements CompanyProvider, PeopleProvider, ProfileProvider, MobileProvider {
  readonly name = 'pdl';
  readonly #key: string;
  readonly #base: string;
  readonly #dispatcher: Dispatcher | undefined;
  readonly #minLikelihood: number | undefined;
  readonly #now: () => Date;

  constructor(o: PdlOptions) {
    if (!o.apiKey) throw new Error('PDL: an API key is required');
    this.#key = o.apiKey;
    this.#base = (o.baseUrl ?? PDL_DEFAULT_BASE_URL).replace(/\/+$/, '');
    this.#dispatcher = o.dispatcher;
    this.#minLikelihood = o.minLikelihood;
    this.#now = o.now ?? (() => new Date());
  }

  // --- company (CompanyProvider) and LinkedIn company data (the `linkedin` view) ---------------

  /** The company of a domain (PDL's `website` match), in the company port's shape. */
  async company(q: { domain: string; company_name?: string }, signal: AbortSignal): Promise<ProviderAnswer<Company>> {
    const r = await this.#get('/v5/company/enrich', { website: q.domain }, signal);
    return r.found ? { found: true, value: pdlCompany(r.body, num(r.body.likelihood)) } : NOT_FOUND;
  }

  /** LinkedIn company data by domain and/or LinkedIn URL (PDL's `website` and `profile`). */
  async linkedInCompany(q: LinkedInCompanyQuery, signal: AbortSignal): Promise<ProviderAnswer<LinkedInCompany>> {
    const r = await this.#get('/v5/company/enrich', { website: q.domain, profile: q.linkedin_url }, signal);
    return r.found ? { found: true, value: pdlLinkedInCompany(r.body) } : NOT_FOUND;
  }

  /**
   * This provider as the LinkedIn port. The company port and the LinkedIn port both call their
   * method `company`, with queries that can look alike ({ domain }) and answers that differ, so
   * one object cannot be both: the LinkedIn chain is given this view.
   */
  readonly linkedin: LinkedInProvider = {
    name: 'pdl',
    company: (q, signal) => this.linkedInCompany(q, signal),
    hires: (q, signal) => this.hires(q, signal),
  };

  // --- people ----------------------------------------------------------------------------------

  async search(q: PeopleSearchQuery, signal: AbortSignal): Promise<ProviderAnswer<{ people: PersonProfile[]; total: number }>> {
    const must: unknown[] = [{ term: { job_company_website: q.domain } }];
    if (q.title_keywords.length > 0) must.push({ bool: { should: q.title_keywords.map((k) => ({ match: { job_title: k } })), minimum_should_match: 1 } });
    if (q.department) {
      const { roles, subRoles } = pdlRolesFor(q.department);
      const should: unknown[] = [];
      if (roles.length > 0) should.push({ terms: { job_title_role: roles } });
      if (subRoles.length > 0) should.push({ terms: { job_title_sub_role: subRoles } });
      must.push({ bool: { should, minimum_should_match: 1 } });
    }
    if (q.seniority.length > 0) must.push({ terms: { job_title_levels: [...new Set(q.seniority.flatMap(pdlLevelsFor))] } });
    const r = await this.#search({ query: { bool: { must } }, size: q.limit, from: q.offset }, signal);
    if (!r.found) return NOT_FOUND;
    const now = this.#now();
    return { found: true, value: { people: r.body.data.map((p) => pdlPersonProfile(p, now)), total: r.body.total } };
  }

  /**
   * A person by name at a company. With a last name: person enrichment (first_name, last_name,
   * company = the domain, location), confidence from PDL's likelihood. With a first name only
   * (too little for PDL's enrichment): a search for that first name at the company's website, with
   * confidence 60 × name similarity × company similarity (a first name alone is weak evidence).
   * Similarity scores are ours (see `similarity`); a field the caller did not give scores 0.
   */
  async lookup(
    q: PersonLookupQuery,
    signal: AbortSignal,
  ): Promise<ProviderAnswer<{ linkedin_url: string; profile: PersonProfile; confidence: number; similarity_scores: { name: number; company: number; title: number; location: number } }>> {
    let record: Rec;
    let likelihood: number | null = null;
    if (q.last_name) {
      const r = await this.#enrich({ first_name: q.first_name, last_name: q.last_name, company: q.company_domain, location: q.location }, signal);
      if (!r.found) return NOT_FOUND;
      record = r.body.data;
      likelihood = r.body.likelihood;
    } else {
      const must = [{ term: { job_company_website: q.company_domain } }, { term: { first_name: fold(q.first_name) } }];
      const r = await this.#search({ query: { bool: { must } }, size: 1 }, signal);
      if (!r.found || !r.body.data[0]) return NOT_FOUND;
      record = r.body.data[0];
    }
    const profile = pdlPersonProfile(record, this.#now());
    if (!profile.linkedin_url) return { found: false, error: 'the person found has no LinkedIn profile' };
    const asked = q.last_name ? `${q.first_name} ${q.last_name}` : q.first_name;
    const scores = {
      name: similarity(asked, q.last_name ? (profile.full_name ?? [profile.first_name, profile.last_name].filter(Boolean).join(' ')) : profile.first_name),
      company: companySimilarity(q.company_domain, profile),
      title: similarity(q.title, profile.title),
      location: similarity(q.location, profile.location),
    };
    const confidence = likelihood !== null ? confidence100(likelihood) : Math.round(60 * scores.name * scores.company);
    return { found: true, value: { linkedin_url: profile.linkedin_url, profile, confidence, similarity_scores: scores } };
  }

  /**
   * Who holds a role at a company: a search for the company's name (PDL keeps names lower-case)
   * and a job title holding the role as a phrase (C-suite acronyms also in full). Confidence: how
   * closely the title found matches the role, at most 90 (a search hit has no likelihood).
   */
  async role(q: RoleLookupQuery, signal: AbortSignal): Promise<ProviderAnswer<{ linkedin_url: string; profile: PersonProfile; confidence: number }>> {
    const phrases = rolePhrases(q.role);
    const must = [{ term: { job_company_name: q.company_name.trim().toLowerCase() } }, { bool: { should: phrases.map((p) => ({ match_phrase: { job_title: p } })), minimum_should_match: 1 } }];
    const r = await this.#search({ query: { bool: { must } }, size: 1 }, signal);
    if (!r.found || !r.body.data[0]) return NOT_FOUND;
    const profile = pdlPersonProfile(r.body.data[0], this.#now());
    if (!profile.linkedin_url) return { found: false, error: 'the person found has no LinkedIn profile' };
    const confidence = Math.min(90, Math.round(100 * Math.max(...phrases.map((p) => similarity(p, profile.title)))));
    return { found: true, value: { linkedin_url: profile.linkedin_url, profile, confidence } };
  }

  // --- profile and mobile ----------------------------------------------------------------------

  async profile(q: ProfileQuery, signal: AbortSignal): Promise<ProviderAnswer<{ profile: PersonProfile; confidence: number }>> {
    const r = await this.#enrich({ email: q.email, profile: q.linkedin_url }, signal);
    if (!r.found) return NOT_FOUND;
    return { found: true, value: { profile: pdlPersonProfile(r.body.data, this.#now()), confidence: confidence100(r.body.likelihood) } };
  }

  /**
   * A mobile number: person enrichment with `required=mobile_phone` (PDL answers 404, and
   * charges nothing, when the person has none). A name needs a company (or domain) beside it.
   * The number is returned as PDL writes it; PDL gives no carrier.
   */
  async mobile(q: MobileQuery, signal: AbortSignal): Promise<ProviderAnswer<{ number: string; carrier: string | null; confidence: number }>> {
    const company = q.company ?? q.domain;
    if (!q.email && !q.linkedin_url && !company) return { found: false, error: 'PDL needs an email, a LinkedIn URL, or a company beside the name' };
    const params = { email: q.email, profile: q.linkedin_url, first_name: q.first_name, last_name: q.last_name, company, required: 'mobile_phone' };
    const r = await this.#enrich(params, signal);
    if (!r.found) return NOT_FOUND;
    const raw = r.body.data.mobile_phone;
    if (raw === true) return { found: false, error: 'PDL has a mobile number that the plan does not include' };
    const number = str(raw);
    if (!number) return { found: false, error: 'no mobile number' };
    return { found: true, value: { number, carrier: null, confidence: confidence100(r.body.likelihood) } };
  }

  // --- hires -----------------------------------------------------------------------------------

  async hires(q: HiresQuery, signal: AbortSignal): Promise<ProviderAnswer<{ domain: string | null; company_name: string | null; hires: Hire[]; total: number }>> {
    const slug = q.linkedin_url ? linkedInSlug(q.linkedin_url) : undefined;
    const company = q.domain ? { term: { job_company_website: q.domain } } : { term: { job_company_linkedin_url: `linkedin.com/company/${slug ?? ''}` } };
    const since = isoDay(new Date(this.#now().getTime() - q.days_back * 86_400_000));
    const must = [company, { range: { job_start_date: { gte: since } } }];
    const r = await this.#search({ query: { bool: { must } }, size: q.limit }, signal);
    if (!r.found) return NOT_FOUND;
    const records = [...r.body.data].sort((a, b) => sortableDate(b.job_start_date).localeCompare(sortableDate(a.job_start_date)));
    const first = records[0] ?? {};
    return {
      found: true,
      value: {
        domain: q.domain ?? domainOf(first.job_company_website),
        company_name: str(first.job_company_name),
        hires: records.slice(0, q.limit).map(hire),
        total: r.body.total,
      },
    };
  }

  // --- HTTP ------------------------------------------------------------------------------------

  async #enrich(params: Record<string, string | undefined>, signal: AbortSignal): Promise<Answer<{ data: Rec; likelihood: number | null }>> {
    const r = await this.#get('/v5/person/enrich', params, signal);
    if (!r.found) return r;
    if (!isRec(r.body.data)) throw new ProviderError('PDL: the answer has no person record', false);
    return { found: true, body: { data: r.body.data, likelihood: num(r.body.likelihood) } };
  }

  async #search(body: { query: unknown; size: number; from?: number }, signal: AbortSignal): Promise<Answer<{ data: Rec[]; total: number }>> {
    const r = await this.#send('POST', '/v5/person/search', {}, { ...body, titlecase: true }, signal);
    if (!r.found) return r;
    if (!Array.isArray(r.body.data)) throw new ProviderError('PDL: the search answer has no data list', false);
    const data = r.body.data.filter(isRec);
    return { found: true, body: { data, total: int(r.body.total) ?? data.length } };
  }

  #get(path: string, params: Record<string, string | undefined>, signal: AbortSignal): Promise<Answer<Rec>> {
    const all: Record<string, string | undefined> = { ...params, titlecase: 'true' };
    if (this.#minLikelihood !== undefined) all.min_likelihood = String(this.#minLikelihood);
    return this.#send('GET', path, all, undefined, signal);
  }

  async #send(method: 'GET' | 'POST', path: string, params: Record<string, string | undefined>, body: unknown, signal: AbortSignal): Promise<Answer<Rec>> {
    const url = new URL(`${this.#base}${path}`);
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') url.searchParams.set(k, v);
    const headers: Record<string, string> = { 'x-api-key': this.#key, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let status: number;
    let text: string;
    let resHeaders: Record<string, string | string[] | undefined>;
    try {
      const res = await request(url, {
        method,
        headers,
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal,
        ...(this.#dispatcher && { dispatcher: this.#dispatcher }),
      });
      status = res.statusCode;
      resHeaders = res.headers;
      text = await res.body.text();
    } catch (err) {
      if (signal.aborted) throw new ProviderError('PDL: the call was aborted before an answer', true);
      const code = (err as { code?: string }).code ?? (err as { name?: string }).name ?? 'error';
      throw new ProviderError(`PDL: the connection failed (${code})`, true);
    }
    if (status === 404) return { found: false };
    if (status >= 200 && status < 300) {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new ProviderError('PDL: the answer is not JSON', false);
      }
      if (!isRec(json)) throw new ProviderError('PDL: the answer is not a JSON object', false);
      return { found: true, body: json };
    }
    throw this.#failure(status, text, resHeaders);
  }

  #failure(status: number, text: string, headers: Record<string, string | string[] | undefined>): ProviderError {
    if (status === 401 || status === 403) return new ProviderError('PDL: the API key was refused', false);
    if (status === 402) return new ProviderError('PDL: out of credits', false);
    if (status === 429) return new ProviderError('PDL: rate limited', true, retryAfterMs(headers, this.#now()));
    if (status >= 500 || status === 408) return new ProviderError(`PDL: HTTP ${status}`, true);
    return new ProviderError(`PDL: the request was refused (HTTP ${status}${this.#pdlMessage(text)})`, false);
  }

  /** PDL's own error message (`{ error: { message } }`), short and without the key. */
  #pdlMessage(text: string): string {
    let message: string | null = null;
    try {
      message = str(rec(rec(JSON.parse(text)).error).message);
    } catch {
      return '';
    }
    if (!message) return '';
    return `: ${message.split(this.#key).join('[key]').slice(0, 200)}`;
  }
}

function companySimilarity(domain: string, profile: PersonProfile): number {
  if (profile.company_domain && profile.company_domain === domain) return 1;
  const labels = domain.split('.').slice(0, -1).join(' ');
  return similarity(labels, profile.company);
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The wait a 429 asks for: Retry-After (seconds or an HTTP date), else x-ratelimit-reset (a date or epoch seconds). */
export function retryAfterMs(headers: Record<string, string | string[] | undefined>, now: Date): number | undefined {
  const ra = header(headers, 'retry-after')?.trim();
  if (ra) {
    if (/^\d+(?:\.\d+)?$/.test(ra)) return Math.round(Number(ra) * 1000);
    const at = Date.parse(ra);
    if (!Number.isNaN(at)) return Math.max(0, at - now.getTime());
  }
  const reset = header(headers, 'x-ratelimit-reset')?.trim();
  if (reset) {
    if (/^\d{9,}$/.test(reset)) return Math.max(0, Number(reset) * 1000 - now.getTime());
    const at = Date.parse(reset);
    if (!Number.isNaN(at)) return Math.max(0, at - now.getTime());
  }
  return undefined;
}
