// The official client of the email validation API (docs/api.md; docs/errors.md): one method per public
// route, global fetch only. Every call goes through `request`, which applies the retry rule of
// docs/errors.md (./retry.ts) with exponential back-off and full jitter, bounded by a number of
// attempts and a total deadline, and sends the same Idempotency-Key on every attempt of a write.

import { SvcApiError, SvcNetworkError, type ErrorBody } from './errors.ts';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffOptions } from './retry.ts';
import type {
  BulkCompanyEnrichment,
  BulkFindResponse,
  BulkValidationResponse,
  CatchallRecovery,
  CompanyEnrichment,
  CompanyToEnrich,
  ContactToFind,
  CreditBalance,
  DomainLinkedIn,
  DownloadLink,
  EmailToPerson,
  HiresQuery,
  Job,
  JobCreated,
  JobPage,
  JobState,
  LinkedInCompany,
  LinkedInCompanyEnrichment,
  LinkedInCompanyQuery,
  LinkedInHires,
  MobileLookup,
  MobileQuery,
  OutcomeImportResult,
  OutcomeRow,
  PeopleSearchQuery,
  PeopleSearchResponse,
  PersonLookup,
  PersonLookupQuery,
  PreparedUpload,
  ProfileEnrichment,
  ProfileQuery,
  RequestBody,
  RoleLookup,
  RoleLookupQuery,
  SubscriptionState,
  UploadReceipt,
  ValidationResult,
} from './types.ts';

export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080';

export interface ClientOptions {
  /** The API key (`svc_test_…` or `svc_live_…`), sent as `X-API-Key`. */
  apiKey: string;
  /** Where the service answers; default http://127.0.0.1:8080. */
  baseUrl?: string;
  /** Attempts per call, the first included (default 5). 1 turns retries off. */
  maxAttempts?: number;
  /** The most one call may take, all attempts and waits included (default 60,000 ms). */
  deadlineMs?: number;
  /** The most one attempt may take, from sending to the last byte of the answer (default 30,000 ms). */
  timeoutMs?: number;
  /** Back-off between attempts: full jitter over min(capMs, baseMs·2^(n-1)) (default 250 ms, 8,000 ms). */
  backoff?: Partial<BackoffOptions>;
  /** Sent as `User-Agent` (default `svc-client/0.1.0`). */
  userAgent?: string;
  /** Called before each wait for a retry (logging, metrics). */
  onRetry?: (event: RetryEvent) => void;
  /** For tests and special transports. */
  fetch?: typeof fetch;
  /** [0, 1); for tests of the jitter. */
  random?: () => number;
  /** Makes Idempotency-Keys (default `svc-` + a random UUID). */
  makeIdempotencyKey?: () => string;
}

export interface RetryEvent {
  method: string;
  path: string;
  /** The attempt that failed (1 = the first). */
  attempt: number;
  /** How long the client waits before the next attempt. */
  delayMs: number;
  error: SvcApiError | SvcNetworkError;
}

/** Options every method takes. */
export interface CallOptions {
  /** Cancels the call (not retried; the signal's reason is thrown). */
  signal?: AbortSignal;
  /** Overrides the client's deadline for this call. */
  deadlineMs?: number;
  /** Overrides the client's attempts for this call. */
  maxAttempts?: number;
}

/** Options of the writes that carry an Idempotency-Key. */
export interface WriteOptions extends CallOptions {
  /**
   * A durable key of your own (1-255 printable ASCII), to make the write once across restarts of
   * your program: reuse it only with the identical request. Without it the client makes one per
   * call and sends it on every retry of that call.
   */
  idempotencyKey?: string;
}

export interface RequestSpec extends WriteOptions {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** A path on the base URL (`/v1/…`), or an absolute URL (a signed upload URL). */
  path: string;
  query?: Record<string, string | number | undefined>;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as is, with `contentType`. */
  body?: string | Uint8Array;
  contentType?: string;
  /** Send an Idempotency-Key (the caller's or a new one). */
  idempotent?: boolean;
  /** Send the API key (not to a signed URL). Default true. */
  auth?: boolean;
  /** Read the answer as text rather than JSON (the results CSV). */
  text?: boolean;
}

export interface ApiResponse<T> {
  status: number;
  headers: Headers;
  body: T;
  /** The `X-Request-ID` of the answer. */
  requestId: string | undefined;
  /** Attempts it took. */
  attempts: number;
}

export interface WaitOptions extends CallOptions {
  /** Between two polls (default 1,000 ms). */
  intervalMs?: number;
  /** Give up (a `SvcNetworkError` of kind `timeout`) after this long; default: wait for ever. */
  timeoutMs?: number;
  /** Called with every status read. */
  onProgress?: (job: Job) => void;
}

/** The states a job does not leave. */
export const FINAL_JOB_STATES: readonly JobState[] = ['completed', 'failed', 'canceled'];

const MAX_BULK = 100;
/** The most companies one POST /v1/company/enrich/bulk takes. */
export const MAX_COMPANIES_PER_REQUEST = 25;
/** The most contacts one POST /v1/find/bulk takes. */
export const MAX_CONTACTS_PER_REQUEST = 100;

export class SvcClient {
  readonly baseUrl: string;
  readonly #apiKey: string;
  readonly #maxAttempts: number;
  readonly #deadlineMs: number;
  readonly #timeoutMs: number;
  readonly #backoff: BackoffOptions;
  readonly #userAgent: string;
  readonly #fetch: typeof fetch;
  readonly #random: () => number;
  readonly #newKey: () => string;
  readonly #onRetry: ((e: RetryEvent) => void) | undefined;

  constructor(options: ClientOptions) {
    if (typeof options.apiKey !== 'string' || options.apiKey === '') throw new TypeError('SvcClient: apiKey is required');
    this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    this.#apiKey = options.apiKey;
    this.#maxAttempts = positiveInt('maxAttempts', options.maxAttempts ?? 5);
    this.#deadlineMs = positiveInt('deadlineMs', options.deadlineMs ?? 60_000);
    this.#timeoutMs = positiveInt('timeoutMs', options.timeoutMs ?? 30_000);
    this.#backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
    this.#userAgent = options.userAgent ?? 'svc-client/0.1.0';
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#random = options.random ?? Math.random;
    this.#newKey = options.makeIdempotencyKey ?? (() => `svc-${globalThis.crypto.randomUUID()}`);
    this.#onRetry = options.onRetry;
  }

  // ----------------------------------------------------------------------------------------------
  // Validation

  /** POST /v1/validate: one address (`email:validate:single`). Bad syntax is a result, not an error. */
  async validate(email: string, options: WriteOptions = {}): Promise<ValidationResult> {
    return (await this.request<ValidationResult>({ ...options, method: 'POST', path: '/v1/validate', json: { email }, idempotent: true })).body;
  }

  /** POST /v1/validate/bulk: up to 100 addresses, one result each, in order (`email:validate:bulk`). */
  async validateBulk(emails: readonly string[], options: WriteOptions = {}): Promise<BulkValidationResponse> {
    if (emails.length > MAX_BULK) throw new RangeError(`validateBulk takes at most ${MAX_BULK} emails (got ${emails.length}); split them, or create a job`);
    return (await this.request<BulkValidationResponse>({ ...options, method: 'POST', path: '/v1/validate/bulk', json: { emails }, idempotent: true })).body;
  }

  // ----------------------------------------------------------------------------------------------
  // Jobs

  /** POST /v1/validate/batch: a job of up to 500,000 addresses; answers at once (202). */
  async createJob(emails: readonly string[], options: WriteOptions & { webhookUrl?: string } = {}): Promise<JobCreated> {
    const json = { emails, ...(options.webhookUrl !== undefined ? { webhook_url: options.webhookUrl } : {}) };
    return (await this.request<JobCreated>({ ...options, method: 'POST', path: '/v1/validate/batch', json, idempotent: true })).body;
  }

  /** POST /v1/csv/prepare-upload: a batch awaiting its CSV, and the signed URL to PUT it to. */
  async prepareUpload(filename: string, options: WriteOptions & { webhookUrl?: string } = {}): Promise<PreparedUpload> {
    const json = { filename, ...(options.webhookUrl !== undefined ? { webhook_url: options.webhookUrl } : {}) };
    return (await this.request<PreparedUpload>({ ...options, method: 'POST', path: '/v1/csv/prepare-upload', json, idempotent: true })).body;
  }

  /** PUT the CSV to a signed upload URL (no API key: the signature authorises it). A second upload replaces the first. */
  async upload(prepared: Pick<PreparedUpload, 'upload_url'> | string, csv: string | Uint8Array, options: CallOptions = {}): Promise<UploadReceipt> {
    const url = typeof prepared === 'string' ? prepared : prepared.upload_url;
    return (await this.request<UploadReceipt>({ ...options, method: 'PUT', path: url, body: csv, contentType: 'text/csv', auth: false })).body;
  }

  /** POST /v1/csv/start-processing: reads the uploaded CSV, reserves credits and queues the job (202). */
  async startProcessing(batchId: string, emailColumn: string, options: WriteOptions = {}): Promise<Job> {
    return (await this.request<Job>({ ...options, method: 'POST', path: '/v1/csv/start-processing', json: { batch_id: batchId, email_column: emailColumn }, idempotent: true })).body;
  }

  /**
   * A CSV job in one call: prepare the upload, PUT the file, start it. With a durable
   * `idempotencyKey`, each step gets a key derived from it (`…:prepare`, `…:start`), so running the
   * same call again after a crash finds the same batch and the same started job.
   */
  async createCsvJob(csv: string | Uint8Array, options: WriteOptions & { emailColumn?: string; filename?: string; webhookUrl?: string } = {}): Promise<Job> {
    const { emailColumn = 'email', filename = 'upload.csv', idempotencyKey, webhookUrl, ...call } = options;
    const base = idempotencyKey ?? this.#newKey();
    const prepared = await this.prepareUpload(filename, { ...call, idempotencyKey: `${base}:prepare`, ...(webhookUrl !== undefined ? { webhookUrl } : {}) });
    try {
      await this.upload(prepared, csv, call);
    } catch (err) {
      // Run again with the same durable key after the batch was started: the upload is refused,
      // and start-processing below answers the job that was started.
      if (!(idempotencyKey !== undefined && err instanceof SvcApiError && err.code === 'invalid_job_state')) throw err;
    }
    return this.startProcessing(prepared.batch_id, emailColumn, { ...call, idempotencyKey: `${base}:start` });
  }

  /** GET /v1/csv/jobs/{id}: the job status resource (docs/api.md). */
  async getJob(id: string, options: CallOptions = {}): Promise<Job> {
    return (await this.request<Job>({ ...options, method: 'GET', path: `/v1/csv/jobs/${encodeURIComponent(id)}` })).body;
  }

  /** GET /v1/csv/jobs: one page of the account's jobs, newest first (`next_cursor` null on the last page). */
  async listJobs(query: { limit?: number; cursor?: string; status?: JobState } = {}, options: CallOptions = {}): Promise<JobPage> {
    return (await this.request<JobPage>({ ...options, method: 'GET', path: '/v1/csv/jobs', query: { limit: query.limit, cursor: query.cursor, status: query.status } })).body;
  }

  /** Every job of the account, newest first, page after page. */
  async *iterateJobs(query: { limit?: number; status?: JobState } = {}, options: CallOptions = {}): AsyncGenerator<Job, void, undefined> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listJobs({ ...query, ...(cursor !== undefined ? { cursor } : {}) }, options);
      yield* page.jobs;
      if (page.next_cursor === null || page.jobs.length === 0) return;
      cursor = page.next_cursor;
    }
  }

  /** Polls a job until it is completed, failed or canceled, and answers its last status. */
  async waitForJob(id: string, options: WaitOptions = {}): Promise<Job> {
    const { intervalMs = 1_000, timeoutMs, onProgress, ...call } = options;
    const end = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    for (;;) {
      const job = await this.getJob(id, call);
      onProgress?.(job);
      if (FINAL_JOB_STATES.includes(job.status)) return job;
      if (Date.now() + intervalMs > end) throw new SvcNetworkError('timeout', `job ${id} is still ${job.status} (${job.progress.processed}/${job.progress.total}) after ${timeoutMs} ms`, 'GET', `/v1/csv/jobs/${id}`);
      await sleep(intervalMs, call.signal);
    }
  }

  /** GET /v1/csv/jobs/{id}/download?mode=url: the signed URL of the results CSV (valid for an hour, no key needed). */
  async getDownloadUrl(id: string, options: CallOptions & { segment?: readonly string[] } = {}): Promise<DownloadLink> {
    const { segment, ...call } = options;
    return (await this.request<DownloadLink>({ ...call, method: 'GET', path: `/v1/csv/jobs/${encodeURIComponent(id)}/download`, query: { mode: 'url', segment: segment?.join(',') } })).body;
  }

  /** The results CSV of a job (through the download route's redirect to the signed URL). */
  async download(id: string, options: CallOptions & { segment?: readonly string[] } = {}): Promise<string> {
    const { segment, ...call } = options;
    return (await this.request<string>({ ...call, method: 'GET', path: `/v1/csv/jobs/${encodeURIComponent(id)}/download`, query: { segment: segment?.join(',') }, text: true })).body;
  }

  /** DELETE /v1/csv/jobs/{id}: cancels a queued or processing job (409 `invalid_job_state` once it has finished). */
  async cancelJob(id: string, options: CallOptions = {}): Promise<Job> {
    return (await this.request<Job>({ ...options, method: 'DELETE', path: `/v1/csv/jobs/${encodeURIComponent(id)}` })).body;
  }

  /** POST /v1/csv/jobs/{id}/recover-catchalls: the opt-in recovery of a completed job's risky catch-all rows. */
  async recoverCatchalls(id: string, options: WriteOptions = {}): Promise<CatchallRecovery> {
    return (await this.request<CatchallRecovery>({ ...options, method: 'POST', path: `/v1/csv/jobs/${encodeURIComponent(id)}/recover-catchalls`, json: {}, idempotent: true })).body;
  }

  // ----------------------------------------------------------------------------------------------
  // Account

  /** GET /v1/credits: the balance of the key's account (`credits:read`). */
  async getCredits(options: CallOptions = {}): Promise<CreditBalance> {
    return (await this.request<CreditBalance>({ ...options, method: 'GET', path: '/v1/credits' })).body;
  }

  /**
   * POST /v1/outcomes/email/import (`email:outcomes:write`): rows as objects (sent as JSON), or a
   * CSV text with a header row naming the fields (sent as `text/csv`). Idempotent by `source` +
   * `external_id` on the service's side as well.
   */
  async importOutcomes(outcomes: readonly OutcomeRow[] | { csv: string }, options: WriteOptions = {}): Promise<OutcomeImportResult> {
    const payload = 'csv' in outcomes && typeof outcomes.csv === 'string' ? { body: outcomes.csv, contentType: 'text/csv' } : { json: { outcomes } };
    return (await this.request<OutcomeImportResult>({ ...options, ...payload, method: 'POST', path: '/v1/outcomes/email/import', idempotent: true })).body;
  }

  /** POST /v1/subscriptions/cancel: cancel at the period end (404 `subscription_not_found`, 409 `subscription_already_canceling`). */
  async cancelSubscription(options: CallOptions = {}): Promise<SubscriptionState> {
    return (await this.request<SubscriptionState>({ ...options, method: 'POST', path: '/v1/subscriptions/cancel' })).body;
  }

  /** POST /v1/subscriptions/reactivate: undo a pending cancellation (409 `subscription_not_canceling`). */
  async reactivateSubscription(options: CallOptions = {}): Promise<SubscriptionState> {
    return (await this.request<SubscriptionState>({ ...options, method: 'POST', path: '/v1/subscriptions/reactivate' })).body;
  }

  // ----------------------------------------------------------------------------------------------
  // Data: company data, people data and the email finder (docs/api.md "Data endpoints"). The
  // account needs the data product (403 `product_not_enabled` otherwise); a family without a
  // provider answers 503 `feature_not_configured`, which is not retried. Each is a write: it may
  // charge, so it carries an Idempotency-Key like validate.

  /** POST /v1/company/enrich: company data from a domain (`data:company:read`; 1 credit if found, cache hits too). */
  async enrichCompany(domain: string, options: WriteOptions & { companyName?: string; forceRefresh?: boolean } = {}): Promise<CompanyEnrichment> {
    const { companyName, forceRefresh, ...call } = options;
    const json: RequestBody<'/v1/company/enrich', 'post'> = { domain, company_name: companyName, force_refresh: forceRefresh };
    return this.#post<CompanyEnrichment>('/v1/company/enrich', json, call);
  }

  /**
   * POST /v1/company/enrich/bulk: up to 25 companies, a result each in order (an unusable one is a
   * result with `error`). A string is a domain; an object is the API's item (`domain`,
   * `company_name`, `force_refresh`). 1 credit per company found.
   */
  async enrichCompanies(companies: readonly (string | CompanyToEnrich)[], options: WriteOptions & { maxConcurrent?: number } = {}): Promise<BulkCompanyEnrichment> {
    if (companies.length > MAX_COMPANIES_PER_REQUEST) throw new RangeError(`enrichCompanies takes at most ${MAX_COMPANIES_PER_REQUEST} companies (got ${companies.length}); split them`);
    const { maxConcurrent, ...call } = options;
    const json: RequestBody<'/v1/company/enrich/bulk', 'post'> = { companies: companies.map((c) => (typeof c === 'string' ? { domain: c } : c)), max_concurrent: maxConcurrent };
    return this.#post<BulkCompanyEnrichment>('/v1/company/enrich/bulk', json, call);
  }

  /** POST /v1/company/enrich-linkedin: company data from its LinkedIn page URL (1 credit if found). */
  async companyByLinkedIn(linkedinUrl: string, options: WriteOptions = {}): Promise<LinkedInCompanyEnrichment> {
    const json: RequestBody<'/v1/company/enrich-linkedin', 'post'> = { company_linkedin_url: linkedinUrl };
    return this.#post<LinkedInCompanyEnrichment>('/v1/company/enrich-linkedin', json, options);
  }

  /** POST /v1/company/domain-to-linkedin: the LinkedIn page of a domain's company (1 credit if found). */
  async domainToLinkedIn(domain: string, options: WriteOptions = {}): Promise<DomainLinkedIn> {
    const json: RequestBody<'/v1/company/domain-to-linkedin', 'post'> = { domain };
    return this.#post<DomainLinkedIn>('/v1/company/domain-to-linkedin', json, options);
  }

  /** POST /v1/linkedin/company: LinkedIn company data, by domain or LinkedIn URL (a data vendor). */
  async linkedInCompany(query: LinkedInCompanyQuery, options: WriteOptions = {}): Promise<LinkedInCompany> {
    const json: RequestBody<'/v1/linkedin/company', 'post'> = { domain: query.domain, linkedin_url: query.linkedinUrl };
    return this.#post<LinkedInCompany>('/v1/linkedin/company', json, options);
  }

  /** POST /v1/linkedin/hires: a company's recent hires (a data vendor). */
  async linkedInHires(query: HiresQuery, options: WriteOptions = {}): Promise<LinkedInHires> {
    const json: RequestBody<'/v1/linkedin/hires', 'post'> = { domain: query.domain, linkedin_url: query.linkedinUrl, days_back: query.daysBack, limit: query.limit };
    return this.#post<LinkedInHires>('/v1/linkedin/hires', json, options);
  }

  /** POST /v1/people/search: people at a company (`data:people:read`; 2 credits per profile returned). */
  async searchPeople(query: PeopleSearchQuery, options: WriteOptions = {}): Promise<PeopleSearchResponse> {
    const json: RequestBody<'/v1/people/search', 'post'> = {
      domain: query.domain,
      title_keywords: query.titleKeywords === undefined ? undefined : [...query.titleKeywords],
      department: query.department,
      seniority: query.seniority,
      limit: query.limit,
      offset: query.offset,
    };
    return this.#post<PeopleSearchResponse>('/v1/people/search', json, options);
  }

  /** POST /v1/people/lookup: a person's LinkedIn profile from a name and a company domain. */
  async lookupPerson(query: PersonLookupQuery, options: WriteOptions = {}): Promise<PersonLookup> {
    const json: RequestBody<'/v1/people/lookup', 'post'> = {
      first_name: query.firstName,
      last_name: query.lastName,
      company_domain: query.companyDomain,
      title: query.title,
      location: query.location,
      enrich_profile: query.enrichProfile,
    };
    return this.#post<PersonLookup>('/v1/people/lookup', json, options);
  }

  /** POST /v1/people/role: who holds a role (`CEO`, `Head of Sales`) at a company. */
  async lookupRole(query: RoleLookupQuery, options: WriteOptions = {}): Promise<RoleLookup> {
    const json: RequestBody<'/v1/people/role', 'post'> = { role: query.role, company_name: query.companyName, enrich_profile: query.enrichProfile };
    return this.#post<RoleLookup>('/v1/people/role', json, options);
  }

  /** POST /v1/profile/enrich: a person's profile from an email address or a LinkedIn profile URL. */
  async enrichProfile(query: ProfileQuery, options: WriteOptions = {}): Promise<ProfileEnrichment> {
    const json: RequestBody<'/v1/profile/enrich', 'post'> = { email: query.email, linkedin_url: query.linkedinUrl };
    return this.#post<ProfileEnrichment>('/v1/profile/enrich', json, options);
  }

  /** POST /v1/mobile/find: a person's mobile number. */
  async findMobile(query: MobileQuery, options: WriteOptions = {}): Promise<MobileLookup> {
    const json: RequestBody<'/v1/mobile/find', 'post'> = {
      email: query.email,
      linkedin_url: query.linkedinUrl,
      first_name: query.firstName,
      last_name: query.lastName,
      company: query.company,
      domain: query.domain,
    };
    return this.#post<MobileLookup>('/v1/mobile/find', json, options);
  }

  /** POST /v1/prospect/email-to-person: the person behind an email address (1 credit if found). */
  async emailToPerson(email: string, options: WriteOptions = {}): Promise<EmailToPerson> {
    const json: RequestBody<'/v1/prospect/email-to-person', 'post'> = { email };
    return this.#post<EmailToPerson>('/v1/prospect/email-to-person', json, options);
  }

  /**
   * POST /v1/find/bulk: the email addresses of up to 100 contacts (`email:find`), a result each in
   * order (a contact that cannot be used is a result with `error`). Contacts are in the API's
   * shape: `first_name`, `last_name`, `domain` or `company`, and an optional `id` the result
   * repeats. `validate` adds each found address's validation (and its credit when it is a
   * High-Value Validation). 1 credit per address found with confidence 70 or more.
   */
  async findEmails(contacts: readonly ContactToFind[], options: WriteOptions & { validate?: boolean; maxConcurrent?: number } = {}): Promise<BulkFindResponse> {
    if (contacts.length > MAX_CONTACTS_PER_REQUEST) throw new RangeError(`findEmails takes at most ${MAX_CONTACTS_PER_REQUEST} contacts (got ${contacts.length}); split them`);
    const { validate, maxConcurrent, ...call } = options;
    const json: RequestBody<'/v1/find/bulk', 'post'> = { contacts: [...contacts], validate, max_concurrent: maxConcurrent };
    return this.#post<BulkFindResponse>('/v1/find/bulk', json, call);
  }

  /** A JSON POST that may charge: with an Idempotency-Key (fields left undefined are not sent). */
  async #post<T>(path: string, json: unknown, options: WriteOptions): Promise<T> {
    return (await this.request<T>({ ...options, method: 'POST', path, json, idempotent: true })).body;
  }

  // ----------------------------------------------------------------------------------------------
  // The transport

  /**
   * One call: attempts until an answer that is not retried, the attempts run out or the deadline
   * passes; then the answer, or the last failure (its `attempts` set). A write marked
   * `idempotent` sends the same Idempotency-Key on every attempt.
   */
  async request<T>(spec: RequestSpec): Promise<ApiResponse<T>> {
    const maxAttempts = positiveInt('maxAttempts', spec.maxAttempts ?? this.#maxAttempts);
    const deadline = Date.now() + positiveInt('deadlineMs', spec.deadlineMs ?? this.#deadlineMs);
    const url = this.#url(spec.path, spec.query);
    const headers: Record<string, string> = { Accept: spec.text ? 'text/csv, application/json' : 'application/json', 'User-Agent': this.#userAgent };
    if (spec.auth !== false) headers['X-API-Key'] = this.#apiKey;
    if (spec.idempotent) headers['Idempotency-Key'] = spec.idempotencyKey ?? this.#newKey();
    let body: string | Uint8Array | undefined;
    if (spec.json !== undefined) {
      body = JSON.stringify(spec.json);
      headers['Content-Type'] = 'application/json';
    } else if (spec.body !== undefined) {
      body = spec.body;
      if (spec.contentType) headers['Content-Type'] = spec.contentType;
    }
    let last: SvcApiError | SvcNetworkError | undefined;
    for (let attempt = 1; ; attempt++) {
      spec.signal?.throwIfAborted();
      const left = deadline - Date.now();
      // A timer that fired late can leave no time: the last failure stands.
      if (left <= 0 && last) throw last;
      const outcome = await this.#attempt<T>(spec, url, headers, body, Math.min(this.#timeoutMs, Math.max(1, left)));
      if (!(outcome instanceof SvcApiError || outcome instanceof SvcNetworkError)) return { ...outcome, attempts: attempt };
      const failure = (last = outcome);
      failure.attempts = attempt;
      if (!failure.isRetryable || attempt >= maxAttempts) throw failure;
      // 429 (or any answer with a delay): wait what it asks, at least; else the jittered back-off.
      const jitter = backoffDelay(attempt, this.#random, this.#backoff);
      const asked = failure instanceof SvcApiError && failure.retryAfter !== undefined ? failure.retryAfter * 1000 : 0;
      const delayMs = Math.max(jitter, asked);
      // A wait that would end past the deadline cannot lead to an answer in time: give up now.
      if (Date.now() + delayMs >= deadline) throw failure;
      this.#onRetry?.({ method: spec.method, path: spec.path, attempt, delayMs, error: failure });
      await sleep(delayMs, spec.signal);
    }
  }

  async #attempt<T>(spec: RequestSpec, url: string, headers: Record<string, string>, body: string | Uint8Array | undefined, timeoutMs: number): Promise<Omit<ApiResponse<T>, 'attempts'> | SvcApiError | SvcNetworkError> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = spec.signal ? AbortSignal.any([spec.signal, timeout]) : timeout;
    let res: Response;
    let text: string;
    try {
      // A Uint8Array over any ArrayBufferLike is a valid body at run time; the DOM typings want an ArrayBuffer.
      res = await this.#fetch(url, { method: spec.method, headers, body: body as BodyInit | undefined, signal, redirect: 'follow' });
      text = await res.text();
    } catch (err) {
      if (spec.signal?.aborted) throw spec.signal.reason;
      if (timeout.aborted) return new SvcNetworkError('timeout', `${spec.method} ${spec.path}: no complete answer within ${timeoutMs} ms`, spec.method, spec.path, { cause: err });
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      return new SvcNetworkError('network', `${spec.method} ${spec.path}: ${cause?.code ?? cause?.message ?? (err as Error).message}`, spec.method, spec.path, { cause: err });
    }
    const json = /\bjson\b/i.test(res.headers.get('content-type') ?? '');
    let parsed: unknown = text;
    if (json && text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch {
        // A JSON content type with a body that is not JSON (a broken proxy): the raw text, below.
      }
    }
    if (res.status >= 200 && res.status < 300) {
      if (!spec.text && typeof parsed === 'string' && text !== '') return new SvcApiError(res.status, { message: `expected a JSON answer, got ${res.headers.get('content-type') ?? 'no content type'}` }, res.headers, spec.method, spec.path);
      return { status: res.status, headers: res.headers, body: (spec.text ? text : parsed) as T, requestId: res.headers.get('x-request-id') ?? undefined };
    }
    return new SvcApiError(res.status, typeof parsed === 'object' && parsed !== null ? (parsed as ErrorBody) : text, res.headers, spec.method, spec.path);
  }

  #url(path: string, query: RequestSpec['query']): string {
    const url = /^https?:\/\//i.test(path) ? new URL(path) : new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    return url.toString();
  }
}

function positiveInt(name: string, n: number): number {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`SvcClient: ${name} must be a positive integer, got ${n}`);
  return n;
}

/** Waits `ms`, or rejects with the signal's reason when it aborts first. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done(): void {
      signal?.removeEventListener('abort', abort);
      resolve();
    }
    function abort(): void {
      clearTimeout(timer);
      reject(signal!.reason);
    }
    signal?.addEventListener('abort', abort, { once: true });
  });
}
