// The data endpoints' use cases (docs/api.md, "Data endpoints"): for each request, the family's
// configuration (503 when it has no provider), the cache (with the endpoint's time-to-live and
// `force_refresh`), the provider chain, and the money (billing's chargeData: a hold, then a charge
// of exactly what was found, recorded with the Idempotency-Key's response). Routes only translate
// HTTP to these calls and back.

import { FINDER_CHARGE_CONFIDENCE, NOT_CONFIGURED, ServiceError, type DataFamily, type ValidationResultBody } from '@svc/contracts';
import { chargeData, chargeKnownData, chargeReasonFor, type DataCompletion } from '@svc/billing';
import type { Store } from '@svc/store';
import type { ChainResult, ProviderChain } from './chain.ts';
import type { Company, CompanyProvider } from './company/native.ts';
import type { FinderProvider, FoundEmail } from './finder/native.ts';
import type { CompanyBulkQuery, CompanyQuery, FindBulkQuery } from './requests.ts';
import { Semaphore, type CachePort } from '@svc/verifier';

const DAY_MS = 24 * 3600_000;

/** Time-to-live of each cache (the endpoint's answers; one cache serves the endpoints that share an answer). */
export const CACHE_TTL_MS = {
  company: 30 * DAY_MS,
  /** A LinkedIn company URL → the domain a company find named it for (enrich-linkedin reads it). */
  linkedinDomain: 30 * DAY_MS,
  linkedinCompany: 7 * DAY_MS,
  hires: DAY_MS,
  person: 7 * DAY_MS,
  profile: 7 * DAY_MS,
  mobile: 7 * DAY_MS,
} as const;

export interface DataFamilies {
  company: ProviderChain<CompanyProvider>;
  finder?: ProviderChain<FinderProvider>;
}

export type CompanyResponse = Omit<Company, 'source_provider'> & {
  domain: string;
  found: boolean;
  cache_hit: boolean;
  credits_charged: number;
  source_provider: string | null;
  latency_ms: number;
  error?: string;
};

const EMPTY_COMPANY: Omit<Company, 'source_provider' | 'confidence'> = {
  company_name: null,
  display_name: null,
  description: null,
  website: null,
  employee_count: null,
  employee_range: null,
  revenue_range: null,
  industry: null,
  sub_industry: null,
  founded_year: null,
  company_type: null,
  location: { city: null, region: null, country: null, country_code: null },
  linkedin_url: null,
  twitter_url: null,
  facebook_url: null,
  phone: null,
  technologies: [],
  technology_count: 0,
  funding: { total_raised: null, last_round: null, last_round_date: null },
};

/** One company lookup's outcome, before money: found (with its data), not found, or failed. */
type CompanyLookup = { found: true; company: Company; cache_hit: boolean } | { found: false; cache_hit: boolean; error: string };

export class DataService {
  readonly #now: () => number;

  readonly #front: CachePort | undefined;

  constructor(
    private readonly store: Pick<Store, 'ledger' | 'idempotency' | 'enrichCache'>,
    private readonly families: DataFamilies,
    opts: {
      now?: () => number;
      /**
       * The service's cache (in-process, or Redis in the cluster profile) in front of the store's
       * enrich_cache table: a hit costs no database read. It holds an answer no longer than the
       * table's time-to-live has left.
       */
      cache?: CachePort;
    } = {},
  ) {
    this.#now = opts.now ?? (() => performance.now());
    this.#front = opts.cache;
  }

  /** An answer of the cache (front, then the table), with the time it was fetched. */
  async #cached(endpoint: string, key: string, ttlMs: number): Promise<{ found: boolean; value: unknown; source_provider: string | null } | undefined> {
    const frontKey = `e:${endpoint}:${key}`;
    const front = this.#front ? await this.#front.get<{ found: boolean; value: unknown; source_provider: string | null; at: number }>(frontKey) : undefined;
    if (front && Date.now() - front.at < ttlMs) return front;
    const row = await this.store.enrichCache.get(endpoint, key, ttlMs);
    if (!row) return undefined;
    const at = row.fetched_at.getTime();
    const left = ttlMs - (Date.now() - at);
    if (this.#front && left > 0) await this.#front.set(frontKey, { found: row.found, value: row.value, source_provider: row.source_provider, at }, left);
    return row;
  }

  /** Writes an answer to the table and the front cache. */
  async #store(endpoint: string, key: string, ttlMs: number, answer: { found: boolean; value: unknown; source_provider?: string | null }): Promise<void> {
    await this.store.enrichCache.put(endpoint, key, answer);
    if (this.#front) await this.#front.set(`e:${endpoint}:${key}`, { found: answer.found, value: answer.value, source_provider: answer.source_provider ?? null, at: Date.now() }, ttlMs);
  }

  /** 503 feature_not_configured with the family's message when it has no provider. */
  requireFamily(family: DataFamily): void {
    const chain = (this.families as unknown as Partial<Record<DataFamily, ProviderChain<{ name: string }>>>)[family];
    if (!chain || !chain.configured) throw new ServiceError('feature_not_configured', NOT_CONFIGURED[family]);
  }

  /** A fresh cached answer for the domain's company, if any. */
  async #cachedCompany(domain: string): Promise<CompanyLookup | undefined> {
    const hit = await this.#cached('company', domain, CACHE_TTL_MS.company);
    if (!hit) return undefined;
    return hit.found ? { found: true, company: hit.value as Company, cache_hit: true } : { found: false, cache_hit: true, error: (hit.value as { error?: string })?.error ?? 'not found' };
  }

  /** The company of a domain, from the cache when fresh, else from the providers (cached either way). */
  async #company(q: CompanyQuery): Promise<CompanyLookup> {
    if (!q.force_refresh) {
      const hit = await this.#cachedCompany(q.domain);
      if (hit) return hit;
    }
    const r: ChainResult<Company> = await this.families.company.run((p, signal) => p.company({ domain: q.domain, ...(q.company_name && { company_name: q.company_name }) }, signal));
    if ('failed' in r) throw new ServiceError('provider_unavailable', undefined, {}, {}, new Error(r.errors.join('; ')));
    if (!r.found) {
      const error = r.error ?? 'no company found for this domain';
      await this.#store('company', q.domain, CACHE_TTL_MS.company, { found: false, value: { error } });
      return { found: false, cache_hit: false, error };
    }
    const company = { ...r.value, source_provider: r.value.source_provider || r.provider };
    await this.#store('company', q.domain, CACHE_TTL_MS.company, { found: true, value: company, source_provider: company.source_provider });
    if (company.linkedin_url) await this.#store('linkedin-domain', company.linkedin_url, CACHE_TTL_MS.linkedinDomain, { found: true, value: { domain: q.domain } });
    return { found: true, company, cache_hit: false };
  }

  #companyResponse(domain: string, l: CompanyLookup, started: number): CompanyResponse {
    const latency_ms = Math.max(0, Math.round(this.#now() - started));
    if (!l.found) return { domain, ...EMPTY_COMPANY, confidence: 0, found: false, cache_hit: l.cache_hit, credits_charged: 0, source_provider: null, latency_ms, error: l.error };
    const { source_provider, ...company } = l.company;
    return { domain, ...company, found: true, cache_hit: l.cache_hit, credits_charged: 1, source_provider, latency_ms };
  }

  /** POST /v1/company/enrich: 1 credit if found, cache hits charged the same. */
  async companyEnrich(accountId: string, q: CompanyQuery, completion?: DataCompletion<CompanyResponse>): Promise<CompanyResponse> {
    const started = this.#now();
    // A cache hit's cost is known before any work: one debit, no hold (as a cached validation).
    const hit = q.force_refresh ? undefined : await this.#cachedCompany(q.domain);
    if (hit) {
      const response = this.#companyResponse(q.domain, hit, started);
      return chargeKnownData(this.store, accountId, 'company/enrich', response.credits_charged, response, completion);
    }
    return chargeData(this.store, accountId, 'company/enrich', 1, async () => {
      const response = this.#companyResponse(q.domain, await this.#company(q), started);
      return { response, credits: response.credits_charged };
    }, completion);
  }

  /** POST /v1/company/enrich/bulk: 1 credit per company found; one item's failure is that item's `error`. */
  async companyBulk(accountId: string, q: CompanyBulkQuery, id: string, completion?: DataCompletion<CompanyBulkResponse>): Promise<CompanyBulkResponse> {
    const started = this.#now();
    const maxCost = q.items.filter((i) => i.ok).length;
    return chargeData(this.store, accountId, 'company/enrich/bulk', maxCost, async () => {
      const gate = new Semaphore(q.max_concurrent);
      const failedItem = (domain: string, error: string, latency_ms: number): { kind: 'error'; r: CompanyResponse } => ({
        kind: 'error',
        r: { domain, ...EMPTY_COMPANY, confidence: 0, found: false, cache_hit: false, credits_charged: 0, source_provider: null, latency_ms, error },
      });
      const outcomes = await Promise.all(
        q.items.map((item) =>
          gate.run(async (): Promise<{ kind: 'found' | 'not_found' | 'error'; r: CompanyResponse }> => {
            if (!item.ok) return failedItem(item.input, item.error, 0);
            const t0 = this.#now();
            try {
              const r = this.#companyResponse(item.query.domain, await this.#company(item.query), t0);
              return { kind: r.found ? 'found' : 'not_found', r };
            } catch (err) {
              // A coded failure (every provider down) is this item's error; anything else is a bug.
              if (!(err instanceof ServiceError)) throw err;
              return failedItem(item.query.domain, err.message, Math.round(this.#now() - t0));
            }
          }),
        ),
      );
      const count = (k: string) => outcomes.filter((o) => o.kind === k).length;
      const results = outcomes.map((o) => o.r);
      const summary = {
        total: results.length,
        found: count('found'),
        not_found: count('not_found'),
        errors: count('error'),
        cache_hits: results.filter((r) => r.cache_hit).length,
        credits_charged: results.reduce((n, r) => n + r.credits_charged, 0),
        total_latency_ms: Math.max(0, Math.round(this.#now() - started)),
      };
      return { response: { id, results, summary }, credits: summary.credits_charged };
    }, completion);
  }

  /** POST /v1/company/domain-to-linkedin: the LinkedIn URL a company find names; 1 credit if found. */
  async domainToLinkedIn(accountId: string, domain: string, completion?: DataCompletion<DomainToLinkedInResponse>): Promise<DomainToLinkedInResponse> {
    return chargeData(this.store, accountId, 'company/domain-to-linkedin', 1, async () => {
      const l = await this.#company({ domain, force_refresh: false });
      const url = l.found ? l.company.linkedin_url : null;
      const response: DomainToLinkedInResponse = url ? { linkedin_url: url, found: true, credits_charged: 1 } : { linkedin_url: '', found: false, credits_charged: 0 };
      return { response, credits: response.credits_charged };
    }, completion);
  }

  /**
   * POST /v1/find/bulk: each contact's address through the finder chain, `max_concurrent`
   * contacts at a time (their candidates share the engine's sessions). 1 credit per address found
   * with confidence 70 or more; with `validate`, a found address that is a High-Value Validation
   * adds the validation's 1 credit. Results in input order; a contact that cannot be looked up is
   * a result with `error`.
   */
  async findBulk(accountId: string, q: FindBulkQuery, id: string, completion?: DataCompletion<FindBulkResponse>): Promise<FindBulkResponse> {
    const finder = this.families.finder;
    if (!finder?.configured) throw new ServiceError('feature_not_configured', NOT_CONFIGURED.finder);
    const started = this.#now();
    const maxCost = q.items.filter((i) => i.ok).length * (q.validate ? 2 : 1);
    return chargeData(this.store, accountId, 'find/bulk', maxCost, async () => {
      const gate = new Semaphore(q.max_concurrent);
      const rows = await Promise.all(q.items.map((item) => gate.run(() => this.#findOne(item, q.validate, finder))));
      const summary = {
        total: rows.length,
        found: rows.filter((r) => r.email !== null).length,
        not_found: rows.filter((r) => r.not_found).length,
        errors: rows.filter((r) => r.email === null && !r.not_found).length,
        credits_charged: rows.reduce((n, r) => n + r.credits_charged, 0),
        total_latency_ms: Math.max(0, Math.round(this.#now() - started)),
      };
      return { response: { id, results: rows, summary }, credits: summary.credits_charged };
    }, completion);
  }

  async #findOne(item: FindBulkQuery['items'][number], validate: boolean, finder: ProviderChain<FinderProvider>): Promise<FindRow> {
    const t0 = this.#now();
    const base = { id: item.input, email: null, confidence: 0, source_provider: null, providers_tried: [] as string[], pattern: null, not_found: false, credits_charged: 0 };
    const latency = () => Math.max(0, Math.round(this.#now() - t0));
    if (!item.ok) return { ...base, latency_ms: 0, error: item.error };
    const c = item.query;
    const domain = c.domain ?? (c.company ? await this.store.enrichCache.domainOfCompany(c.company, CACHE_TTL_MS.company) : undefined);
    if (!domain) return { ...base, latency_ms: latency(), error: 'the domain of this company is not known; give the contact\'s domain' };
    const r: ChainResult<FoundEmail> = await finder.run((p, signal) => p.find({ first_name: c.first_name, last_name: c.last_name, domain }, signal), { accepts: (f) => f.confidence >= FINDER_CHARGE_CONFIDENCE });
    if ('failed' in r) return { ...base, providers_tried: r.tried, latency_ms: latency(), error: r.errors.join('; ') };
    if (!r.found) return { ...base, providers_tried: r.tried, not_found: true, latency_ms: latency(), ...(r.error && { error: r.error }) };
    const f = r.value;
    let credits = f.confidence >= FINDER_CHARGE_CONFIDENCE ? 1 : 0;
    let validation: ValidationResultBody | undefined;
    if (validate) {
      const { chargeable, ...verdict } = f.verdict;
      validation = { ...verdict, credits_charged: chargeable ? 1 : 0, charge_reason: chargeReasonFor(f.verdict) };
      credits += validation.credits_charged;
    }
    return {
      ...base,
      email: f.email,
      confidence: f.confidence,
      source_provider: f.source_provider,
      providers_tried: r.tried,
      pattern: f.pattern,
      credits_charged: credits,
      latency_ms: latency(),
      ...(validation && { validation }),
    };
  }

  /** POST /v1/company/enrich-linkedin: the company of a LinkedIn URL a find has seen on a domain; 1 credit if found. */
  async companyByLinkedIn(accountId: string, linkedinUrl: string, completion?: DataCompletion<CompanyByLinkedInResponse>): Promise<CompanyByLinkedInResponse> {
    return chargeData(this.store, accountId, 'company/enrich-linkedin', 1, async () => {
      const known = await this.#cached('linkedin-domain', linkedinUrl, CACHE_TTL_MS.linkedinDomain);
      const domain = (known?.value as { domain?: string } | undefined)?.domain;
      const l = domain ? await this.#company({ domain, force_refresh: false }) : undefined;
      if (!domain || !l?.found || l.company.linkedin_url !== linkedinUrl) {
        return { response: { company: {}, found: false, credits_charged: 0, error: 'no known company has this LinkedIn page' }, credits: 0 };
      }
      const c = l.company;
      const company = {
        name: c.company_name,
        domain,
        description: c.description,
        industry: c.industry,
        employee_count: c.employee_count,
        employee_range: c.employee_range,
        founded_year: c.founded_year,
        company_type: c.company_type,
        hq_city: c.location.city,
        hq_region: c.location.region,
        hq_country: c.location.country,
        linkedin_url: c.linkedin_url,
        website: c.website,
        phone: c.phone,
        technologies: c.technologies,
      };
      return { response: { company, found: true, credits_charged: 1 }, credits: 1 };
    }, completion);
  }
}

export interface CompanyBulkResponse {
  id: string;
  results: CompanyResponse[];
  summary: { total: number; found: number; not_found: number; errors: number; cache_hits: number; credits_charged: number; total_latency_ms: number };
}
export interface DomainToLinkedInResponse {
  linkedin_url: string;
  found: boolean;
  credits_charged: number;
}
export interface CompanyByLinkedInResponse {
  company: Record<string, unknown>;
  found: boolean;
  credits_charged: number;
  error?: string;
}

export interface FindRow {
  id: string;
  email: string | null;
  confidence: number;
  source_provider: string | null;
  providers_tried: string[];
  pattern: string | null;
  not_found: boolean;
  credits_charged: number;
  latency_ms: number;
  error?: string;
  /** With `validate: true`: the found address's validation, as POST /v1/validate answers it. */
  validation?: ValidationResultBody;
}
export interface FindBulkResponse {
  id: string;
  results: FindRow[];
  summary: { total: number; found: number; not_found: number; errors: number; credits_charged: number; total_latency_ms: number };
}
