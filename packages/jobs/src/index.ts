// @svc/jobs: bulk jobs. The job service (service.ts: the use cases the API calls, and the pipeline
// of a process), the status resource (status.ts), catch-all recovery (recovery.ts) and signed URLs
// (signed-urls.ts); intake (intake/: dedupe, credits held, the stored input, work published); the
// pipeline stages over @svc/bus (pipeline/: route, probe, aggregate and finalize, the decision
// relay); CSV in and out (csv/); job webhooks (webhooks/).
export { WebhookDispatcher, rotateWebhookSecret, listWebhookSecrets, DEFAULT_SECRET_GRACE_S, MAX_SECRET_GRACE_S, type RotatedSecretBody, type SecretListBody, buildJobEvent, jobWebhookEvent, enqueueJobWebhook, webhookRetryDelayMs, WEBHOOK_FIRST_RETRY_MS, WEBHOOK_MAX_RETRY_MS, WEBHOOK_RETRY_FOR_MS, type WebhookDispatcherOptions, type DeliveryOutcome, type JobWebhookBody, type WebhookLogger } from './webhooks/webhooks.ts';
export { JobsService, MAX_JOB_EMAILS, resultsPath, type JobsServiceOptions, type DownloadLink } from './service.ts';
export { CsvJobs, csvError, uploadPath, uploadKey, MAX_FILENAME_CHARS, type CsvJobsOptions, type PreparedUpload, type UploadReceipt } from './csv/csv-jobs.ts';
export { JobAggregator, jobDecisions, silentLogger, type JobsLogger, type OnFinal } from './pipeline/aggregator.ts';
export { JobWorker, priceVerdict, type JobVerifier, type WorkerOptions } from './pipeline/worker.ts';
export { intake, dedupeKey, newJobId, type IntakeInput, type IntakeRow, type IntakeDeps } from './intake/intake.ts';
export { jobStatus, downloadable, CREDITS_PER_HIGH_VALUE_VALIDATION, type JobStatus } from './status.ts';
export { resultsCsv, type RowRenderer, type ResultsCsvDeps } from './csv/results-csv.ts';
export { rowsKey, dupsKey, resultsKey, openRows, type RowsHeader, type StoredRow, type StoredRows } from './intake/rows.ts';
export { WORK_CHUNK, DOMAIN_BUCKETS, publishWork, bucketKey } from './pipeline/publish.ts';
export { signQuery, verifyQuery, type SignatureCheck, type SignedQuery } from './signed-urls.ts';
export { readCsv, parseCsvChunk, serializeFields, formatCell, findEmailColumn, detectDelimiter, MAX_FIELD_CHARS, MAX_RECORD_BYTES, type CsvChunk, type CsvFailure, type CsvRow, type CsvErrorCode, type ChunkParser, type LineEnd, type ParseTask, type ParseResult, type ReadCsvOptions } from './csv/csv.ts';
export { createCsvPool, type CsvPool, type CsvPoolOptions } from './csv/csv-pool.ts';
export type { RenderTask, RenderResult } from './csv/csv-task.ts';
export { RESULT_COLUMNS, renderHeader, renderRows, parseSegments, type RenderRow, type ResultCells, type SegmentsResult } from './csv/render.ts';
export { webhookSignature, verifyWebhookSignature } from './webhooks/signature.ts';
export { CatchallRecovery, learnPattern, localShape, PATTERN_MIN_CONFIRMED, PATTERN_SHARE, RECOVERED_LISTED, type RecoveryDeps, type RecoveryResponse } from './recovery.ts';
