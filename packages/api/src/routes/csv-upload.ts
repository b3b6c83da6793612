// CSV jobs over HTTP (docs/api.md): POST /v1/csv/prepare-upload, the signed
// PUT /v1/csv/uploads/{id} served by the service itself, and POST /v1/csv/start-processing.
// Routes translate HTTP to @svc/jobs' CsvJobs use cases and back; the job is then
// read, listed, downloaded and canceled through the job routes (routes/jobs.ts).
//
// The PUT carries no API key: its signed URL authorises it, so it has no scope and no gate (like
// the signed results download). It takes any body type, or none (`curl -T file.csv "<url>"`
// sends no Content-Type; browsers and SDKs send text/csv or application/octet-stream): a parser
// in its own encapsulated context hands the request stream on untouched, and the use case
// streams it to the blob store under SVC_CSV_MAX_BYTES, so Fastify's body limit does not apply.

import type { FastifyError, FastifyPluginAsync } from 'fastify';
import { ServiceError, type ErrorCode } from '@svc/contracts';
import { upstream } from '@svc/billing';
import { MAX_FILENAME_CHARS, type CsvJobs, type JobsService } from '@svc/jobs';
import type { JobRecord } from '@svc/store';
import type { Readable } from 'node:stream';
import type { ApiServices } from '../types.ts';
import { errorResponses, type RouteErrors } from '../schemas.ts';
import { IDEMPOTENCY_CODES, idempotent } from '../idempotency.ts';
import { JSON_BODY_CODES } from '../plugins/errors.ts';

type ValidationErrors = NonNullable<FastifyError['validation']>;

const field = (e: ValidationErrors[number] | undefined): string | undefined =>
  e?.keyword === 'required' ? (e.params as { missingProperty?: string }).missingProperty : e?.instancePath.slice(1) || undefined;

function prepareError(errors: ValidationErrors): ErrorCode | ServiceError {
  const f = field(errors[0]);
  if (f === 'filename') return new ServiceError('invalid_request', `filename is required: a string of 1 to ${MAX_FILENAME_CHARS} characters`);
  if (f === 'webhook_url') return new ServiceError('invalid_webhook_url', 'webhook_url must be a string (an http or https URL)');
  return 'invalid_request';
}

function startError(errors: ValidationErrors): ErrorCode | ServiceError {
  const f = field(errors[0]);
  if (f === 'batch_id') return new ServiceError('invalid_request', 'batch_id is required: the batch_id of prepare-upload');
  if (f === 'email_column') return new ServiceError('invalid_request', 'email_column is required: the name of the CSV column holding the email addresses');
  return 'invalid_request';
}

/** A query that is not the signed URL's (a parameter repeated, for one) is a bad signature. */
const uploadQueryError = (): ServiceError => new ServiceError('invalid_signature');

/** What the use cases can throw besides their own codes: a lost database, a bug. */
const STORE_CODES = ['internal_error'] as const satisfies readonly ErrorCode[];

const prepareConfig = {
  scope: 'email:validate:bulk',
  billable: true,
  mapValidation: prepareError,
  errors: [...JSON_BODY_CODES, 'invalid_webhook_url', ...IDEMPOTENCY_CODES, 'validation_upstream_failed', ...STORE_CODES],
} as const satisfies RouteErrors & { mapValidation: typeof prepareError };

const startConfig = {
  scope: 'email:validate:bulk',
  billable: true,
  mapValidation: startError,
  errors: [
    ...JSON_BODY_CODES,
    'too_many_emails',
    ...IDEMPOTENCY_CODES,
    'insufficient_credits',
    'job_not_found',
    'invalid_job_state',
    'upload_missing',
    'email_column_not_found',
    'invalid_csv',
    'validation_upstream_failed',
    ...STORE_CODES,
  ],
} as const satisfies RouteErrors & { mapValidation: typeof startError };

// The signed URL is its own authorisation: no key, no gates.
const uploadConfig = {
  mapValidation: uploadQueryError,
  errors: ['invalid_request', 'invalid_signature', 'job_not_found', 'invalid_job_state', 'payload_too_large', 'service_unavailable', ...STORE_CODES],
} as const satisfies RouteErrors & { mapValidation: typeof uploadQueryError };

const idempotencyHeader = { type: 'object', properties: { 'idempotency-key': { type: 'string', description: 'Optional; 1-255 printable characters, kept 24 h' } } } as const;

const preparedSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['batch_id', 'upload_url', 'method', 'headers', 'expires_at', 'max_bytes'],
  properties: {
    batch_id: { type: 'string', description: 'The job id (`job_…`): start it with POST /v1/csv/start-processing, read it with GET /v1/csv/jobs/{id}' },
    upload_url: { type: 'string', description: 'Signed URL to PUT the CSV to, without an API key (`curl -T leads.csv "<upload_url>"`)' },
    method: { type: 'string', enum: ['PUT'] },
    headers: {
      type: 'object',
      additionalProperties: false,
      required: ['Content-Type'],
      properties: { 'Content-Type': { type: 'string', enum: ['text/csv'] } },
      description: 'Headers to send with the upload (any Content-Type, or none, is accepted)',
    },
    expires_at: { type: 'string', format: 'date-time', description: 'The upload URL is refused (403 `invalid_signature`) after this' },
    max_bytes: { type: 'integer', description: 'The largest CSV accepted (SVC_CSV_MAX_BYTES); a larger one is 413 `payload_too_large`' },
  },
} as const;

export interface CsvUploadRoutesOptions {
  services: ApiServices;
}

export const csvUploadRoutes: FastifyPluginAsync<CsvUploadRoutesOptions> = async (app, { services }) => {
  const { store } = services;
  const jobs = services.jobs as JobsService;
  const csv = services.csvJobs as CsvJobs;

  app.post<{ Body: { filename: string; webhook_url?: string | null } }>(
    '/v1/csv/prepare-upload',
    {
      config: prepareConfig,
      schema: {
        summary: 'Prepare a CSV upload: a batch awaiting its file, and the signed URL to PUT it to',
        description:
          'Nothing is reserved yet. PUT the CSV to `upload_url` (no API key; valid for an hour; at most `max_bytes`), then start it with POST /v1/csv/start-processing. The batch is a job in state `awaiting_upload` until then.',
        tags: ['jobs'],
        security: [{ apiKey: [] }],
        headers: idempotencyHeader,
        body: {
          type: 'object',
          required: ['filename'],
          properties: {
            filename: { type: 'string', minLength: 1, maxLength: MAX_FILENAME_CHARS, description: 'The name of the file, shown in the job' },
            webhook_url: { type: ['string', 'null'], description: 'Called with `job.completed` or `job.failed` (http or https)' },
          },
        },
        response: { 200: preparedSchema, ...errorResponses(prepareConfig) },
      },
    },
    async (req, reply) =>
      idempotent(store, req, reply, async () => {
        const { upload } = await upstream(csv.prepare(req.principal!.accountId, { filename: req.body.filename, webhookUrl: req.body.webhook_url ?? null }));
        return upload;
      }),
  );

  app.post<{ Body: { batch_id: string; email_column: string } }>(
    '/v1/csv/start-processing',
    {
      config: startConfig,
      schema: {
        summary: 'Start a CSV batch: read the uploaded file and queue its validation',
        description:
          'The CSV (`,` `;` or tab delimited, RFC 4180 quoting, UTF-8 with or without a BOM, a header row) is read in full before anything is reserved: one credit per unique email, the rest refunded when the job finishes. An empty email cell is a row validated as `invalid`. A file that cannot be read, a column that is not in the header or too few credits leave the batch awaiting its upload, to be fixed and started again. Answers the job status resource; poll GET /v1/csv/jobs/{id}, then download the results CSV (the input columns, then the result columns).',
        tags: ['jobs'],
        security: [{ apiKey: [] }],
        headers: idempotencyHeader,
        body: {
          type: 'object',
          required: ['batch_id', 'email_column'],
          properties: {
            batch_id: { type: 'string', minLength: 1, maxLength: 64, description: 'The `batch_id` of prepare-upload' },
            email_column: { type: 'string', minLength: 1, maxLength: 1024, description: 'The header of the column holding the emails (an exact match first, then ignoring case and surrounding spaces)' },
          },
        },
        response: { 202: { $ref: 'JobStatus#' }, ...errorResponses(startConfig) },
      },
    },
    async (req, reply) =>
      idempotent(store, req, reply, async (record) => {
        reply.status(202);
        const accountId = req.principal!.accountId;
        const completion = record && ((job: JobRecord) => ({ accountId, key: record.key, owner: record.owner, status: record.status, body: record.serialize(jobs.status(job)) }));
        const job = await upstream(csv.start(accountId, req.body.batch_id, req.body.email_column, completion ? { completion } : {}));
        return jobs.status(job);
      }),
  );

  // The upload, in a context of its own: its parser takes every body as the raw stream.
  await app.register(async (upload) => {
    upload.removeAllContentTypeParsers();
    upload.addContentTypeParser('*', (_req, payload, done) => done(null, payload));

    upload.put<{ Params: { id: string }; Querystring: Record<string, string> }>(
      '/v1/csv/uploads/:id',
      {
        config: uploadConfig,
        schema: {
          summary: 'Upload the CSV of a batch to its signed URL (from prepare-upload)',
          description:
            'No API key: the signature authorises the request. The body is the CSV itself, with any Content-Type or none (`curl -T leads.csv "<upload_url>"`). A later upload to the same batch replaces the earlier one, until the batch is started. A bad or expired signature is 403 `invalid_signature`; a body over `max_bytes` is 413 `payload_too_large` and stores nothing.',
          tags: ['jobs'],
          params: { type: 'object', required: ['id'], properties: { id: { type: 'string', maxLength: 64, description: 'The batch id' } } },
          querystring: {
            type: 'object',
            properties: { expires: { type: 'string', maxLength: 20 }, signature: { type: 'string', maxLength: 128 } },
          },
          response: {
            200: {
              type: 'object',
              additionalProperties: false,
              required: ['batch_id', 'bytes'],
              properties: { batch_id: { type: 'string' }, bytes: { type: 'integer', description: 'Bytes stored' } },
            },
            ...errorResponses(uploadConfig),
          },
        },
      },
      async (req, reply) => {
        const declared = req.headers['content-length'];
        const length = declared === undefined ? undefined : Number(declared);
        const body = (req.body ?? req.raw) as Readable;
        try {
          return await csv.upload(req.params.id, req.query, body, length !== undefined && Number.isSafeInteger(length) ? length : undefined);
        } catch (err) {
          // The rest of a refused body is not read: the connection closes after the answer.
          reply.header('Connection', 'close');
          throw err;
        }
      },
    );
  });
};
