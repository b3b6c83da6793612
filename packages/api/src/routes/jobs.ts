// Asynchronous jobs (docs/api.md): POST /v1/validate/batch, the job list, one
// job, its download (a signed URL, or a 302 to it), cancel, and the signed results CSV itself.
// Routes translate HTTP to @svc/jobs' use cases and back.

import { Readable } from 'node:stream';
import { errorCodes, type FastifyError, type FastifyPluginAsync, type FastifyRequest } from 'fastify';
import { JOB_STATES, ServiceError, type ErrorCode, type JobState } from '@svc/contracts';
import { upstream } from '@svc/billing';
import { MAX_JOB_EMAILS, type JobsService } from '@svc/jobs';
import type { JobRecord } from '@svc/store';
import type { ApiServices, ApiSettings } from '../types.ts';
import { parseJsonInSlices, readBodyInTurns } from '../json-slices.ts';
import { errorResponses, type RouteErrors } from '../schemas.ts';
import { IDEMPOTENCY_CODES, idempotent } from '../idempotency.ts';
import { JSON_BODY_CODES } from '../plugins/errors.ts';

type ValidationErrors = NonNullable<FastifyError['validation']>;

/** The default body limit of a batch: 500,000 addresses of average length with JSON quoting fit well within it. */
export const DEFAULT_JOB_BODY_LIMIT = 64 * 1_048_576;

function batchError(errors: ValidationErrors): ErrorCode | ServiceError {
  const e = errors[0];
  if (!e) return 'invalid_request';
  if (e.keyword === 'required' && (e.params as { missingProperty?: string }).missingProperty === 'emails') return 'emails_required';
  if (e.instancePath === '/emails') {
    if (e.keyword === 'maxItems') return new ServiceError('too_many_emails', `maximum ${MAX_JOB_EMAILS.toLocaleString('en-US')} emails per job`);
    if (e.keyword === 'minItems') return 'emails_required';
    return 'invalid_request';
  }
  if (/^\/emails\/\d+$/.test(e.instancePath)) return new ServiceError('invalid_emails', `emails must be an array of strings; item ${e.instancePath.slice(8)} is not a string`);
  if (e.instancePath === '/webhook_url') return new ServiceError('invalid_webhook_url', 'webhook_url must be a string (an http or https URL)');
  return 'invalid_request';
}

function queryError(errors: ValidationErrors): ErrorCode | ServiceError {
  const e = errors[0];
  const field = e?.instancePath.slice(1) || (e?.params as { additionalProperty?: string } | undefined)?.additionalProperty;
  return new ServiceError('invalid_request', field ? `Bad query parameter ${field}: ${e?.message ?? 'invalid'}` : 'Bad query string');
}

/** What the job use cases can throw besides their own codes: a lost database, a bug. */
const STORE_CODES = ['internal_error'] as const satisfies readonly ErrorCode[];

const batchConfig = {
  scope: 'email:validate:bulk',
  billable: true,
  mapValidation: batchError,
  errors: [...JSON_BODY_CODES, 'emails_required', 'too_many_emails', 'invalid_emails', 'invalid_webhook_url', ...IDEMPOTENCY_CODES, 'insufficient_credits', 'validation_upstream_failed', ...STORE_CODES],
} as const satisfies RouteErrors & { mapValidation: typeof batchError };

const listConfig = { scope: 'email:validate:bulk', mapValidation: queryError, errors: ['invalid_request', ...STORE_CODES] } as const satisfies RouteErrors & { mapValidation: typeof queryError };
const readConfig = { scope: 'email:validate:bulk', mapValidation: queryError, errors: ['invalid_request', 'job_not_found', ...STORE_CODES] } as const satisfies RouteErrors & { mapValidation: typeof queryError };
const downloadConfig = { scope: 'email:validate:bulk', mapValidation: queryError, errors: ['invalid_request', 'job_not_found', 'invalid_job_state', ...STORE_CODES] } as const satisfies RouteErrors & { mapValidation: typeof queryError };
const cancelConfig = { scope: 'email:validate:bulk', mapValidation: queryError, errors: ['invalid_request', 'job_not_found', 'invalid_job_state', ...STORE_CODES] } as const satisfies RouteErrors & { mapValidation: typeof queryError };
const recoverConfig = {
  scope: 'email:validate:bulk',
  billable: true,
  noBody: true,
  mapValidation: queryError,
  errors: [...JSON_BODY_CODES, 'job_not_found', 'invalid_job_state', 'insufficient_credits', 'validation_upstream_failed', ...STORE_CODES],
} as const satisfies RouteErrors & { mapValidation: typeof queryError };
// The signed URL is its own authorisation: no key, no gates.
const resultsConfig = { mapValidation: queryError, errors: ['invalid_request', 'invalid_signature', 'job_not_found', 'invalid_job_state', 'service_unavailable', ...STORE_CODES] } as const satisfies RouteErrors & { mapValidation: typeof queryError };

const idempotencyHeader = { type: 'object', properties: { 'idempotency-key': { type: 'string', description: 'Optional; 1-255 printable characters, kept 24 h' } } } as const;
const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', maxLength: 64, description: 'The job id (`job_…`)' } } } as const;
const segmentParam = { type: 'string', maxLength: 200, description: 'Keep only these results: a comma list of `valid`, `valid_role_based`, `risky`, `invalid`, `unknown`' } as const;

export interface JobRoutesOptions {
  services: ApiServices;
  settings: Pick<ApiSettings, 'jobBodyLimitBytes'>;
}

export const jobRoutes: FastifyPluginAsync<JobRoutesOptions> = async (app, { services, settings }) => {
  const { store } = services;
  const jobs = services.jobs as JobsService;
  const status = (job: JobRecord) => jobs.status(job);

  // A batch body holds up to 500,000 addresses (~19 MiB): parsed in slices with event-loop turns
  // between them, so requests served during the ingest are not held up by one long JSON.parse
  // (bench/jobs/ingest.ts). Only this plugin's routes (the batch is its one JSON body).
  // The body is read by readBodyInTurns rather than fastify's parseAs (one Buffer.concat of it).
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', async (req: FastifyRequest, payload: AsyncIterable<Buffer | string>) =>
    parseJsonInSlices(await readBodyInTurns(payload, req.headers['content-length'], req.routeOptions.bodyLimit ?? DEFAULT_JOB_BODY_LIMIT, errorCodes)),
  );

  app.post<{ Body: { emails: string[]; webhook_url?: string | null } }>(
    '/v1/validate/batch',
    {
      config: batchConfig,
      bodyLimit: settings.jobBodyLimitBytes ?? DEFAULT_JOB_BODY_LIMIT,
      schema: {
        summary: `Start a validation job of up to ${MAX_JOB_EMAILS.toLocaleString('en-US')} email addresses`,
        description:
          'Duplicates (same mailbox: exact local part, domain in any case) are validated once. One credit per unique email is reserved now; only High-Value Validations are charged when the job completes, the rest is refunded. Poll `GET /v1/csv/jobs/{id}`, then download the results CSV.',
        tags: ['jobs'],
        security: [{ apiKey: [] }],
        headers: idempotencyHeader,
        body: {
          type: 'object',
          required: ['emails'],
          properties: {
            emails: { type: 'array', minItems: 1, maxItems: MAX_JOB_EMAILS, items: { type: 'string' } },
            webhook_url: { type: ['string', 'null'], description: 'Called with `job.completed` or `job.failed` (http or https)' },
          },
        },
        response: { 202: { $ref: 'JobCreated#' }, ...errorResponses(batchConfig) },
      },
    },
    async (req, reply) =>
      idempotent(store, req, reply, async (record) => {
        reply.status(202);
        const accountId = req.principal!.accountId;
        const shape = (job: JobRecord) => ({ id: job.id, status: 'queued' as const, total_rows: job.total_rows, unique_emails: job.unique_emails, credits_reserved: job.credits_reserved, created_at: job.created_at.toISOString() });
        const completion = record && ((job: JobRecord) => ({ accountId, key: record.key, owner: record.owner, status: record.status, body: record.serialize(shape(job)) }));
        const job = await upstream(jobs.createJsonJob(accountId, req.body.emails, { webhookUrl: req.body.webhook_url ?? null, ...(completion ? { completion } : {}) }));
        return shape(job);
      }),
  );

  app.get<{ Querystring: { limit?: string; cursor?: string; status?: JobState } }>(
    '/v1/csv/jobs',
    {
      config: listConfig,
      schema: {
        summary: 'Jobs of the key’s account, newest first',
        tags: ['jobs'],
        security: [{ apiKey: [] }],
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            limit: { type: 'string', pattern: '^[0-9]{1,3}$', description: 'Jobs per page, 1-100 (default 20)' },
            cursor: { type: 'string', maxLength: 200, description: 'The `next_cursor` of the previous page' },
            status: { type: 'string', enum: JOB_STATES, description: 'Only jobs in this state' },
          },
        },
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['jobs', 'next_cursor'],
            properties: { jobs: { type: 'array', items: { $ref: 'JobStatus#' } }, next_cursor: { type: ['string', 'null'], description: 'null after the last page' } },
          },
          ...errorResponses(listConfig),
        },
      },
    },
    async (req) => {
      const page = await jobs.list(req.principal!.accountId, { ...(req.query.limit !== undefined && { limit: Number(req.query.limit) }), ...(req.query.cursor !== undefined ? { cursor: req.query.cursor } : {}), ...(req.query.status ? { status: req.query.status } : {}) });
      return { jobs: page.jobs.map(status), next_cursor: page.next_cursor };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/v1/csv/jobs/:id',
    {
      config: readConfig,
      schema: {
        summary: 'A job’s status, with its dates, source and download',
        tags: ['jobs'],
        security: [{ apiKey: [] }],
        params: idParams,
        response: { 200: { $ref: 'JobStatus#' }, ...errorResponses(readConfig) },
      },
    },
    async (req) => status(await jobs.get(req.principal!.accountId, req.params.id)),
  );

  app.get<{ Params: { id: string }; Querystring: { mode?: 'url'; segment?: string } }>(
    '/v1/csv/jobs/:id/download',
    {
      config: downloadConfig,
      schema: {
        summary: 'The results CSV of a job: a signed URL (`mode=url`), or a redirect to it',
        description: 'The signed URL needs no API key and is valid for an hour. Available once the job is completed (or canceled: the rows validated before the cancel).',
        tags: ['jobs'],
        security: [{ apiKey: [] }],
        params: idParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { mode: { type: 'string', enum: ['url'], description: '`url`: answer the signed URL as JSON instead of redirecting to it' }, segment: segmentParam },
        },
        response: {
          200: {
            type: 'object',
            additionalProperties: false,
            required: ['url', 'expires_at'],
            properties: { url: { type: 'string' }, expires_at: { type: 'string', format: 'date-time' } },
          },
          302: { type: 'null', description: 'Redirect (`Location`, relative) to the signed URL of the results CSV' },
          ...errorResponses(downloadConfig),
        },
      },
    },
    async (req, reply) => {
      const link = await jobs.downloadLink(req.principal!.accountId, req.params.id, req.query.segment);
      if (req.query.mode === 'url') return link;
      // Relative (RFC 9110 10.2.2): the client follows it on the origin it used.
      const target = new URL(link.url);
      return reply.redirect(`${target.pathname}${target.search}`, 302);
    },
  );

  app.get<{ Params: { id: string }; Querystring: Record<string, string> }>(
    '/v1/csv/jobs/:id/results.csv',
    {
      config: resultsConfig,
      schema: {
        summary: 'The results CSV behind a signed URL (from the download route)',
        description: 'Input columns, then `result, reason_code, reason, b2b_outbound_quality, is_role_based, role_type, is_free_provider, is_disposable, is_catchall, catchall_confidence, did_you_mean, credits_charged, charge_reason, validation_layer, smtp_response`; one row per input row, in input order; cells starting with `= + - @` are prefixed with `\'`.',
        tags: ['jobs'],
        params: idParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          required: ['expires', 'signature'],
          properties: { expires: { type: 'string', maxLength: 20 }, signature: { type: 'string', maxLength: 128 }, segment: segmentParam },
        },
        response: { 200: { content: { 'text/csv': { schema: { type: 'string' } } } }, ...errorResponses(resultsConfig) },
      },
    },
    async (req, reply) => {
      const { job, body } = await jobs.openResults(req.params.id, req.query);
      return reply
        .header('Content-Type', 'text/csv; charset=utf-8')
        .header('Content-Disposition', `attachment; filename="${job.id}-results.csv"`)
        .header('Cache-Control', 'private, no-store')
        .send(body instanceof Readable ? body : Readable.from(body));
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/v1/csv/jobs/:id',
    {
      config: cancelConfig,
      schema: {
        summary: 'Cancel a queued or processing job',
        description: 'The High-Value Validations already done are charged; the rest of the reservation is refunded. The rows validated so far can be downloaded. A finished job: 409 `invalid_job_state`.',
        tags: ['jobs'],
        security: [{ apiKey: [] }],
        params: idParams,
        response: { 200: { $ref: 'JobStatus#' }, ...errorResponses(cancelConfig) },
      },
    },
    async (req) => status(await jobs.cancel(req.principal!.accountId, req.params.id)),
  );

  const recovery = services.recovery;
  if (recovery)
    app.post<{ Params: { id: string }; Body: unknown }>(
      '/v1/csv/jobs/:id/recover-catchalls',
      {
        config: recoverConfig,
        schema: {
          summary: "Recover a completed job's catch-all rows with the account's own evidence",
          description:
            'Opt-in. Each risky catch-all row is checked against the account’s delivery outcomes for the address (delivered or replied → `valid`, confirmed hard bounce → `invalid`) and the domain’s address pattern learned from confirmed deliveries. One credit per row is held; only rows upgraded to `valid` are charged. Each recovered row carries the evidence that decided it; the results CSV is rewritten. One recovery per job: asking again answers the same recovery. A job that is not completed: 409 `invalid_job_state`.',
          tags: ['jobs'],
          security: [{ apiKey: [] }],
          params: idParams,
          response: errorResponses(recoverConfig),
        },
      },
      async (req, reply) => {
        const body = req.body;
        if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) throw new ServiceError('invalid_request', 'The body must be a JSON object ({})');
        const out = await upstream(recovery.recover(req.principal!.accountId, req.params.id));
        return reply.status(202).send(out);
      },
    );
};
