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
import type { CompanyBulkQuery, CompanyQuery, FindBulkQuery, HiresQuery, LinkedInCompanyQuery, MobileQuery, PeopleSearchQuery, PersonLookupQuery, ProfileQuery, RoleLookupQuery } from './requests.ts';
import type { Hire, LinkedInCompany, LinkedInProvider, MobileProvider, PeopleProvider, PersonProfile, ProfileProvider } from './ports.ts';
import type { ProviderAnswer } from './chain.ts';
import { normalisePhone } from './phone.ts';
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

/** The longest time to live of the data endpoints' caches: older rows are never read again (the sweep prunes them). */
export const ENRICH_CACHE_MAX_TTL_MS = Math.max(...Object.values(CACHE_TTL_MS));

export interface DataFamilies {
  company: ProviderChain<CompanyProvider>;
  finder?: ProviderChain<FinderProvider>;
  linkedin?: ProviderChain<LinkedInProvider>;
  people?: ProviderChain<PeopleProvider>;
  profile?: ProviderChain<ProfileProvider>;
  mobile?: ProviderChain<MobileProvider>;
}

/** What a vendor lookup found (from the providers or the cache), before its response is shaped. */
type VendorAnswer<V> = { found: true; value: V; provider: string; cache_hit: boolean } | { found: false; error: string; cache_hit: boolean };

/** The fields every vendor-backed answer carries. */
interface Common {
  found: boolean;
  credits_charged: number;
  cache_hit: boolean;
  source_provider: string | null;
  latency_ms: number;
  error?: string;
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
      // A miss while a provider failed is not remembered: that provider may know the company.
      if (r.failures.length === 0) await this.#store('company', q.domain, CACHE_TTL_MS.company, { found: false, value: { error } });
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
      const rows = await Promise.all(q.items.map((item) => gate.run(() => this.#findOne(accountId, item, q.validate, finder))));
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

  async #findOne(accountId: string, item: FindBulkQuery['items'][number], validate: boolean, finder: ProviderChain<FinderProvider>): Promise<FindRow> {
    const t0 = this.#now();
    const base = { id: item.input, email: null, confidence: 0, source_provider: null, providers_tried: [] as string[], pattern: null, not_found: false, credits_charged: 0 };
    const latency = () => Math.max(0, Math.round(this.#now() - t0));
    if (!item.ok) return { ...base, latency_ms: 0, error: item.error };
    const c = item.query;
    const domain = c.domain ?? (c.company ? await this.store.enrichCache.domainOfCompany(c.company, CACHE_TTL_MS.company) : undefined);
    if (!domain) return { ...base, latency_ms: latency(), error: 'the domain of this company is not known; give the contact\'s domain' };
    const r: ChainResult<FoundEmail> = await finder.run((p, signal) => p.find({ first_name: c.first_name, last_name: c.last_name, domain, account_id: accountId }, signal), { accepts: (f) => f.confidence >= FINDER_CHARGE_CONFIDENCE });
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

  /**
   * One vendor-backed lookup: the cache (when the endpoint has one and no refresh is asked), else
   * the family's providers under a hold of `maxCost`, the answer (or the miss) cached, the
   * response shaped and charged by `respond`.
   */
  async #vendor<P extends { name: string }, V, R>(o: {
    accountId: string;
    endpoint: string;
    chain: ProviderChain<P> | undefined;
    family: DataFamily;
    maxCost: number;
    cache?: { key: string; ttlMs: number };
    force?: boolean;
    call: (p: P, signal: AbortSignal) => Promise<ProviderAnswer<V>>;
    respond: (a: VendorAnswer<V>, latency_ms: number) => { response: R; credits: number };
    completion?: DataCompletion<R> | undefined;
  }): Promise<R> {
    const chain = o.chain;
    if (!chain?.configured) throw new ServiceError('feature_not_configured', NOT_CONFIGURED[o.family]);
    const started = this.#now();
    const latency = () => Math.max(0, Math.round(this.#now() - started));
    if (o.cache && !o.force) {
      const hit = await this.#cached(o.endpoint, o.cache.key, o.cache.ttlMs);
      if (hit) {
        const a: VendorAnswer<V> = hit.found ? { found: true, value: hit.value as V, provider: hit.source_provider ?? '', cache_hit: true } : { found: false, error: (hit.value as { error?: string })?.error ?? 'not found', cache_hit: true };
        const { response, credits } = o.respond(a, latency());
        return chargeKnownData(this.store, o.accountId, o.endpoint, credits, response, o.completion);
      }
    }
    return chargeData(
      this.store,
      o.accountId,
      o.endpoint,
      o.maxCost,
      async () => {
        const r = await chain.run(o.call);
        if ('failed' in r) throw new ServiceError('provider_unavailable', undefined, {}, {}, new Error(r.errors.join('; ')));
        const a: VendorAnswer<V> = r.found ? { found: true, value: r.value, provider: r.provider, cache_hit: false } : { found: false, error: r.error ?? 'not found', cache_hit: false };
        // A miss while a provider failed is not remembered (as for companies).
        if (o.cache && (r.found || r.failures.length === 0)) await this.#store(o.endpoint, o.cache.key, o.cache.ttlMs, a.found ? { found: true, value: a.value, source_provider: a.provider } : { found: false, value: { error: a.error } });
        return o.respond(a, latency());
      },
      o.completion,
    );
  }

  #common(a: VendorAnswer<unknown>, credits: number, latency_ms: number): Common {
    return a.found
      ? { found: true, credits_charged: credits, cache_hit: a.cache_hit, source_provider: a.provider, latency_ms }
      : { found: false, credits_charged: 0, cache_hit: a.cache_hit, source_provider: null, latency_ms, error: a.error };
  }

  /** POST /v1/linkedin/company: 1 credit fresh, 0 from the 7-day cache. */
  linkedinCompany(accountId: string, q: LinkedInCompanyQuery, completion?: DataCompletion<LinkedInCompanyResponse>): Promise<LinkedInCompanyResponse> {
    return this.#vendor({
      accountId,
      endpoint: 'linkedin/company',
      chain: this.families.linkedin,
      family: 'linkedin',
      maxCost: 1,
      cache: { key: q.linkedin_url ?? q.domain!, ttlMs: CACHE_TTL_MS.linkedinCompany },
      call: (p, signal) => p.company(q, signal),
      respond: (a, latency) => {
        const credits = a.found && !a.cache_hit ? 1 : 0;
        const body = a.found ? a.value : EMPTY_LINKEDIN_COMPANY;
        return { response: { ...body, ...this.#common(a, credits, latency) }, credits };
      },
      completion,
    });
  }

  /** POST /v1/linkedin/hires: 2 credits fresh, 0 from the 24-hour cache. */
  hires(accountId: string, q: HiresQuery, completion?: DataCompletion<HiresResponse>): Promise<HiresResponse> {
    return this.#vendor({
      accountId,
      endpoint: 'linkedin/hires',
      chain: this.families.linkedin,
      family: 'linkedin',
      maxCost: 2,
      cache: { key: `${q.linkedin_url ?? q.domain}|${q.days_back}|${q.limit}`, ttlMs: CACHE_TTL_MS.hires },
      call: (p, signal) => p.hires(q, signal),
      respond: (a, latency) => {
        const credits = a.found && !a.cache_hit ? 2 : 0;
        const found = a.found ? a.value : { domain: q.domain ?? null, company_name: null, hires: [] as Hire[], total: 0 };
        const breakdown: Record<string, number> = {};
        for (const h of found.hires) if (h.department) breakdown[h.department] = (breakdown[h.department] ?? 0) + 1;
        const top = Object.entries(breakdown)
          .sort((x, y) => y[1] - x[1] || x[0].localeCompare(y[0]))
          .slice(0, 3)
          .map(([d]) => d);
        const response: HiresResponse = {
          domain: found.domain ?? q.domain ?? null,
          company_name: found.company_name,
          recent_hires: found.hires,
          total: found.total,
          days_back: q.days_back,
          // Hires per month over the window (30-day months), from the vendor's count.
          hiring_velocity: Math.round((found.total / (q.days_back / 30)) * 100) / 100,
          top_departments: top,
          department_breakdown: breakdown,
          ...this.#common(a, credits, latency),
        };
        return { response, credits };
      },
      completion,
    });
  }

  /** POST /v1/people/search: 2 credits per profile returned. */
  peopleSearch(accountId: string, q: PeopleSearchQuery, completion?: DataCompletion<PeopleSearchResponse>): Promise<PeopleSearchResponse> {
    return this.#vendor({
      accountId,
      endpoint: 'people/search',
      chain: this.families.people,
      family: 'people',
      maxCost: 2 * q.limit,
      call: (p, signal) => p.search(q, signal),
      respond: (a, latency_ms) => {
        const people = a.found ? a.value.people.slice(0, q.limit) : [];
        const credits = 2 * people.length;
        return { response: { people, total: a.found ? a.value.total : 0, limit: q.limit, offset: q.offset, source_provider: a.found ? a.provider : null, credits_charged: credits, latency_ms }, credits };
      },
      completion,
    });
  }

  /** POST /v1/people/lookup: 2 credits for the LinkedIn URL, 3 with the profile; cached 7 days, hits charged the same. */
  personLookup(accountId: string, q: PersonLookupQuery, completion?: DataCompletion<PersonLookupResponse>): Promise<PersonLookupResponse> {
    const cost = q.enrich_profile ? 3 : 2;
    const key = [q.first_name, q.last_name ?? '', q.company_domain, q.title ?? '', q.location ?? ''].map((x) => x.toLowerCase()).join('|');
    return this.#vendor({
      accountId,
      endpoint: 'people/lookup',
      chain: this.families.people,
      family: 'people',
      maxCost: cost,
      cache: { key, ttlMs: CACHE_TTL_MS.person },
      call: (p, signal) => p.lookup(q, signal),
      respond: (a, latency) => {
        const credits = a.found ? cost : 0;
        const v = a.found ? a.value : undefined;
        const response: PersonLookupResponse = {
          linkedin_url: v?.linkedin_url ?? '',
          ...(q.enrich_profile && v ? { profile: v.profile } : {}),
          similarity_scores: v?.similarity_scores ?? { name: 0, company: 0, title: 0, location: 0 },
          confidence: v?.confidence ?? 0,
          ...this.#common(a, credits, latency),
        };
        return { response, credits };
      },
      completion,
    });
  }

  /** POST /v1/people/role: 3 credits, 4 with the profile. */
  roleLookup(accountId: string, q: RoleLookupQuery, completion?: DataCompletion<RoleLookupResponse>): Promise<RoleLookupResponse> {
    const cost = q.enrich_profile ? 4 : 3;
    return this.#vendor({
      accountId,
      endpoint: 'people/role',
      chain: this.families.people,
      family: 'people',
      maxCost: cost,
      call: (p, signal) => p.role(q, signal),
      respond: (a, latency) => {
        const credits = a.found ? cost : 0;
        const v = a.found ? a.value : undefined;
        return { response: { linkedin_url: v?.linkedin_url ?? '', ...(q.enrich_profile && v ? { profile: v.profile } : {}), confidence: v?.confidence ?? 0, ...this.#common(a, credits, latency) }, credits };
      },
      completion,
    });
  }

  /** POST /v1/profile/enrich: 3 credits when found; cached 7 days, hits charged the same. */
  profileEnrich(accountId: string, q: ProfileQuery, completion?: DataCompletion<ProfileResponse>): Promise<ProfileResponse> {
    return this.#vendor({
      accountId,
      endpoint: 'profile/enrich',
      chain: this.families.profile,
      family: 'profile',
      maxCost: 3,
      cache: { key: (q.email ?? q.linkedin_url!).toLowerCase(), ttlMs: CACHE_TTL_MS.profile },
      call: (p, signal) => p.profile(q, signal),
      respond: (a, latency) => {
        const credits = a.found ? 3 : 0;
        return { response: { profile: a.found ? a.value.profile : null, confidence: a.found ? a.value.confidence : 0, ...this.#common(a, credits, latency) }, credits };
      },
      completion,
    });
  }

  /** POST /v1/prospect/email-to-person: 1 credit when found. */
  emailToPerson(accountId: string, email: string, completion?: DataCompletion<EmailToPersonResponse>): Promise<EmailToPersonResponse> {
    return this.#vendor({
      accountId,
      endpoint: 'prospect/email-to-person',
      chain: this.families.profile,
      family: 'profile',
      maxCost: 1,
      call: (p, signal) => p.profile({ email }, signal),
      respond: (a) => {
        if (!a.found) return { response: { person: null, found: false, credits_charged: 0 }, credits: 0 };
        const pr = a.value.profile;
        const person = { linkedin_url: pr.linkedin_url, first_name: pr.first_name, last_name: pr.last_name, full_name: pr.full_name, title: pr.title, headline: pr.headline, location: pr.location, company_name: pr.company, email: pr.email ?? email, phone: pr.mobile };
        return { response: { person, found: true, credits_charged: 1 }, credits: 1 };
      },
      completion,
    });
  }

  /** POST /v1/mobile/find: 2 credits when a valid number is found; cached 7 days, hits charged the same. */
  mobileFind(accountId: string, q: MobileQuery, completion?: DataCompletion<MobileResponse>): Promise<MobileResponse> {
    const key = [q.email ?? '', q.linkedin_url ?? '', q.first_name ?? '', q.last_name ?? '', q.domain ?? '', q.company ?? ''].map((x) => x.toLowerCase()).join('|');
    return this.#vendor({
      accountId,
      endpoint: 'mobile/find',
      chain: this.families.mobile,
      family: 'mobile',
      maxCost: 2,
      cache: { key, ttlMs: CACHE_TTL_MS.mobile },
      call: (p, signal) => p.mobile(q, signal),
      respond: (a, latency) => {
        const echo = q.email ? { email: q.email } : {};
        const info = a.found ? normalisePhone(a.value.number) : undefined;
        if (!a.found || !info || !info.valid) {
          const miss: VendorAnswer<unknown> = a.found ? { found: false, error: 'the number found is not a valid phone number', cache_hit: a.cache_hit } : a;
          return { response: { mobile: null, mobile_raw: a.found ? a.value.number : null, country_code: info?.country_code ?? null, carrier: null, line_type: info?.line_type ?? null, valid: false, confidence: 0, ...echo, ...this.#common(miss, 0, latency) }, credits: 0 };
        }
        return {
          response: { mobile: info.e164, mobile_raw: a.value.number, country_code: info.country_code ?? null, carrier: a.value.carrier, line_type: info.line_type ?? null, valid: true, confidence: a.value.confidence, ...echo, ...this.#common(a, 2, latency) },
          credits: 2,
        };
      },
      completion,
    });
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

const EMPTY_LINKEDIN_COMPANY: LinkedInCompany = {
  name: null,
  linkedin_url: null,
  website: null,
  industry: null,
  company_type: null,
  founded_year: null,
  description: null,
  tagline: null,
  specialties: [],
  employee_count: null,
  employee_count_range: null,
  follower_count: null,
  employee_growth_6m: null,
  employee_growth_1y: null,
  employee_growth_2y: null,
  headquarters: null,
  locations: [],
  funding: { total_funding: null, last_round: null, last_round_date: null, last_round_amount: null, investors: [] },
};

export type LinkedInCompanyResponse = LinkedInCompany & Common;
export type HiresResponse = {
  domain: string | null;
  company_name: string | null;
  recent_hires: Hire[];
  total: number;
  days_back: number;
  hiring_velocity: number;
  top_departments: string[];
  department_breakdown: Record<string, number>;
} & Common;
export interface PeopleSearchResponse {
  people: PersonProfile[];
  total: number;
  limit: number;
  offset: number;
  source_provider: string | null;
  credits_charged: number;
  latency_ms: number;
}
export type PersonLookupResponse = { linkedin_url: string; profile?: PersonProfile; similarity_scores: { name: number; company: number; title: number; location: number }; confidence: number } & Common;
export type RoleLookupResponse = { linkedin_url: string; profile?: PersonProfile; confidence: number } & Common;
export type ProfileResponse = { profile: PersonProfile | null; confidence: number } & Common;
export interface EmailToPersonResponse {
  person: Record<string, string | null> | null;
  found: boolean;
  credits_charged: number;
}
export type MobileResponse = { mobile: string | null; mobile_raw: string | null; country_code: string | null; carrier: string | null; line_type: string | null; valid: boolean; confidence: number; email?: string } & Common;
