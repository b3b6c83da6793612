// CSV jobs (docs/decisions/jobs-and-csv.md, "CSV jobs"): prepare-upload makes a job awaiting its
// upload and a signed PUT URL served by the service itself; the PUT streams the body into the blob
// store; start-processing reads the upload in chunks (csv.ts, on the CSV pool when one is given)
// straight into the job intake (intake/intake.ts), which dedupes, stores the rows with their input
// columns, holds the credits and publishes the work. From then on a CSV job is any job: the results
// CSV is the stored input columns followed by the result columns, row for row (results-csv.ts).
//
//   POST /v1/csv/prepare-upload  → job `awaiting_upload`, `PUT <public url>/v1/csv/uploads/<id>?expires=…&signature=…`
//   PUT  /v1/csv/uploads/<id>     → jobs/<id>/upload.csv (replaced by a later PUT; at most maxBytes)
//   POST /v1/csv/start-processing → the job `queued` (or 400/402/409, the job still awaiting its upload)
//
// Choices (docs/decisions/jobs-and-csv.md, "CSV jobs"):
// - The signature (signed-urls.ts: HMAC-SHA256 over PUT, the path and the expiry) is the PUT's
//   only authorisation; it is checked before anything else is looked at, so a bad or expired URL says
//   nothing about the job (403 invalid_signature).
// - A CSV the reader refuses (invalid_csv, email_column_not_found, too_many_emails) or an account
//   short of credits leaves the job awaiting its upload with its upload kept: the caller can fix
//   the column name, upload a corrected file to the same URL while it is valid, or add credits,
//   and start again. Nothing is reserved until the whole file has been read.
// - A row whose email cell is empty stays a row: it is counted in total_rows, validated like any
//   string (`invalid` / `invalid_syntax`, never charged) and shown in the results CSV. All the
//   empty cells of a file are one unique "email" (dedupe by exact text), so they hold one credit
//   between them until the job finishes, and it is refunded.
// - A CSV holds at most MAX_JOB_EMAILS data rows (400 too_many_emails), the JSON job's limit.
// - Once the job is queued the raw upload is deleted: the rows blob keeps every cell.

import { isJobId, notPrintable, ServiceError } from '@svc/contracts';
import { BlobTooLargeError, DEFAULT_CLAIM_LEASE_MS, keepRenewing, type BlobStore, type IdempotentCompletion, type JobRecord, type Store } from '@svc/store';
import type { Readable } from 'node:stream';
import { readCsv, type ChunkParser, type CsvChunk, type CsvFailure } from './csv.ts';
import { newJobId, type IntakeRow } from '../intake/intake.ts';
import { MAX_JOB_EMAILS, type JobsService } from '../service.ts';
import { signQuery, verifyQuery } from '../signed-urls.ts';

/** The signed path a CSV is PUT to (no API key: the signature authorises it). */
export const uploadPath = (jobId: string): string => `/v1/csv/uploads/${jobId}`;
/** Where an upload is kept until the job starts. */
export const uploadKey = (jobId: string): string => `jobs/${jobId}/upload.csv`;

/**
 * Rows per chunk start-processing cuts the upload into. Parsed inline, a chunk is parsed in one
 * turn of the event loop (csv-parse: about 5 µs a row) before the intake dedupes it, so a small
 * chunk keeps requests served during a 500,000-row start-processing waiting a few milliseconds
 * at most (bench/jobs/ingest.ts; the first chunks of a fresh process run before the parser is
 * optimised, several times slower).
 */
export const START_CHUNK_ROWS = 250;

/** Longest `filename` accepted by prepare-upload. */
export const MAX_FILENAME_CHARS = 255;

export interface CsvJobsOptions {
  /** The job pipeline: the intake, job reads and the status resource. */
  jobs: Pick<JobsService, 'createJob' | 'get' | 'checkWebhookUrl'>;
  store: Pick<Store, 'jobs'>;
  blobs: BlobStore;
  /** SVC_PUBLIC_URL: the base of the upload URL. */
  publicUrl: string;
  /** SVC_SECRET (or the generated one): the HMAC key of signed URLs. */
  secret: string;
  /** SVC_CSV_MAX_BYTES: the largest upload. */
  maxBytes: number;
  /** SVC_CLAIM_LEASE_MS: how long a start-processing claim outlives its process (default DEFAULT_CLAIM_LEASE_MS). */
  claimLeaseMs?: number;
  /** How long an upload URL stays valid (default 1 h). */
  uploadTtlMs?: number;
  /** Parses CSV chunks off the event loop (the CSV pool); inline when absent. */
  parser?: ChunkParser;
  /** Rows per parsed chunk (default START_CHUNK_ROWS). */
  chunkRows?: number;
  /** Most data rows of a CSV (default MAX_JOB_EMAILS). */
  maxRows?: number;
  now?: () => number;
}

/** The prepare-upload response. */
export interface PreparedUpload {
  batch_id: string;
  upload_url: string;
  method: 'PUT';
  headers: { 'Content-Type': 'text/csv' };
  expires_at: string;
  max_bytes: number;
}

export interface UploadReceipt {
  batch_id: string;
  /** Bytes stored. */
  bytes: number;
}

/** A CSV reader failure as the catalogue's error; the message names the line when the reader knows it. */
export function csvError(f: CsvFailure): ServiceError {
  return new ServiceError(f.code, f.message);
}

const intakeRows = (c: CsvChunk): IntakeRow[] => c.rows.map((r) => ({ fields: r.fields, email: r.email }));

export class CsvJobs {
  readonly #o: CsvJobsOptions & { now: () => number };
  /** Batches whose start-processing is running in this process (a second concurrent start is 409). */
  readonly #starting = new Set<string>();

  constructor(opts: CsvJobsOptions) {
    this.#o = { ...opts, now: opts.now ?? Date.now };
  }

  get maxBytes(): number {
    return this.#o.maxBytes;
  }

  /**
   * POST /v1/csv/prepare-upload: a CSV job awaiting its upload (no credits held yet) and the
   * signed URL to PUT the file to. `filename` (1-255 characters, not only spaces) is kept for
   * the job's status; a `webhook_url` is checked as a JSON job's is (400 invalid_webhook_url).
   */
  async prepare(accountId: string, input: { filename: string; webhookUrl?: string | null }): Promise<{ job: JobRecord; upload: PreparedUpload }> {
    const { filename } = input;
    if (typeof filename !== 'string' || filename.trim() === '' || filename.length > MAX_FILENAME_CHARS) {
      throw new ServiceError('invalid_request', `filename is required: a string of 1 to ${MAX_FILENAME_CHARS} characters`);
    }
    // Shown in job listings and on terminals (svc job list): printable text only.
    const why = notPrintable(filename);
    if (why) throw new ServiceError('invalid_request', `filename must be printable text: ${why}`);
    const webhookUrl = input.webhookUrl === undefined || input.webhookUrl === null ? null : this.#o.jobs.checkWebhookUrl(input.webhookUrl);
    const job = await this.#o.store.jobs.createAwaitingUpload({ id: newJobId(), accountId, filename, webhookUrl });
    return { job, upload: this.uploadLink(job.id) };
  }

  /** The signed upload URL of a batch, valid for uploadTtlMs from now. */
  uploadLink(jobId: string, expiresAt = new Date(this.#o.now() + (this.#o.uploadTtlMs ?? 3_600_000))): PreparedUpload {
    const path = uploadPath(jobId);
    return {
      batch_id: jobId,
      upload_url: `${this.#o.publicUrl}${path}?${signQuery(this.#o.secret, 'PUT', path, {}, expiresAt)}`,
      method: 'PUT',
      headers: { 'Content-Type': 'text/csv' },
      expires_at: new Date(Math.floor(expiresAt.getTime() / 1000) * 1000).toISOString(),
      max_bytes: this.#o.maxBytes,
    };
  }

  /**
   * PUT /v1/csv/uploads/{id}: checks the signature (403 invalid_signature, bad or expired), then
   * the job (409 invalid_job_state once started), then streams `body` into the blob store,
   * replacing an earlier upload of the batch. More than maxBytes (announced by `contentLength`
   * or counted while streaming): 413 payload_too_large and nothing stored (an earlier upload of
   * the batch stays).
   */
  async upload(jobId: string, query: Record<string, unknown>, body: Readable | AsyncIterable<Buffer>, contentLength?: number): Promise<UploadReceipt> {
    const { secret, store, blobs, maxBytes } = this.#o;
    const check = verifyQuery(secret, 'PUT', uploadPath(jobId), query, this.#o.now());
    if (check !== 'ok') throw new ServiceError('invalid_signature', check === 'expired' ? 'The upload URL has expired; prepare a new upload with POST /v1/csv/prepare-upload' : undefined);
    const job = isJobId(jobId) ? await store.jobs.byId(jobId) : undefined;
    if (!job) throw new ServiceError('job_not_found');
    if (job.status !== 'awaiting_upload') throw new ServiceError('invalid_job_state', `The batch is ${job.status}; a CSV can be uploaded only before start-processing`);
    if (contentLength !== undefined && contentLength > maxBytes) throw tooLarge(maxBytes);
    try {
      const { bytes } = await blobs.put(uploadKey(jobId), body, { maxBytes });
      return { batch_id: jobId, bytes };
    } catch (err) {
      if (err instanceof BlobTooLargeError) throw tooLarge(maxBytes);
      throw err;
    }
  }

  /**
   * POST /v1/csv/start-processing: reads the uploaded CSV, streamed, and queues the job with its
   * credits held (one per unique email). In order: 404 job_not_found (unknown, or another
   * account's), 409 invalid_job_state (started already, or being started), 409 upload_missing,
   * then the file: 400 email_column_not_found / invalid_csv / too_many_emails, 402
   * insufficient_credits. Any of these leaves the job awaiting its upload.
   */
  async start(accountId: string, batchId: string, emailColumn: string, opts: { completion?: (job: JobRecord) => IdempotentCompletion } = {}): Promise<JobRecord> {
    const { blobs, jobs, store } = this.#o;
    const job = await jobs.get(accountId, batchId);
    const beingStarted = () => new ServiceError('invalid_job_state', `The batch is ${job.status === 'awaiting_upload' ? 'being started' : job.status}; start-processing runs once per batch`);
    if (job.status !== 'awaiting_upload' || this.#starting.has(batchId)) throw beingStarted();
    this.#starting.add(batchId);
    // The claim in the database covers every process sharing the store (two fronts); the set
    // above answers a second request to this process without a round trip.
    let claimed = false;
    let stopRenewing: (() => void) | undefined;
    const lease = this.#o.claimLeaseMs ?? DEFAULT_CLAIM_LEASE_MS;
    try {
      claimed = await store.jobs.claimIntake(accountId, batchId, lease);
      if (!claimed) throw beingStarted();
      stopRenewing = keepRenewing(lease, () => store.jobs.renewIntake(batchId, lease));
      const source = await blobs.get(uploadKey(batchId));
      if (!source) throw new ServiceError('upload_missing', `No CSV has been uploaded for ${batchId}: PUT the file to the upload_url of prepare-upload first`);
      const reader = readCsv(source, {
        emailColumn,
        maxRows: this.#o.maxRows ?? MAX_JOB_EMAILS,
        ...(this.#o.parser ? { parser: this.#o.parser } : {}),
        chunkRows: this.#o.chunkRows ?? START_CHUNK_ROWS,
      });
      try {
        // The first chunk carries the header (the job's input columns) and the email column.
        const first = await reader.next();
        if (first.done) throw new ServiceError('invalid_csv', 'the file is empty: a header row naming the columns is required');
        if (!first.value.ok) throw csvError(first.value);
        const head = first.value;
        async function* rows(): AsyncGenerator<IntakeRow[]> {
          yield intakeRows(head);
          for await (const c of reader) {
            if (!c.ok) throw csvError(c); // intake deletes what it stored and nothing is reserved
            yield intakeRows(c);
          }
        }
        const queued = await jobs.createJob({
          accountId,
          source: 'csv',
          columns: head.header,
          emailIndex: head.emailIndex,
          bom: head.bom,
          rows: rows(),
          filename: job.filename,
          emailColumn: head.header[head.emailIndex]!,
          jobId: batchId,
          ...(opts.completion ? { completion: opts.completion } : {}),
        });
        await blobs.delete(uploadKey(batchId)).catch(() => {});
        claimed = false; // queued: the claim no longer matters (it only ever applies to awaiting_upload)
        return queued;
      } finally {
        await reader.return(undefined);
        source.destroy();
      }
    } finally {
      stopRenewing?.();
      if (claimed) await store.jobs.releaseIntake(batchId).catch(() => {});
      this.#starting.delete(batchId);
    }
  }
}

const tooLarge = (maxBytes: number): ServiceError =>
  new ServiceError('payload_too_large', `The CSV is larger than the upload limit of ${maxBytes} bytes (max_bytes); split it into several batches`);
