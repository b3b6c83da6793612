// @svc/jobs: job intake (JSON, CSV), dedupe, reservation, aggregation, finalization, result CSV, webhooks.
export { WebhookDispatcher, buildJobEvent, jobWebhookEvent, webhookRetryDelayMs, WEBHOOK_FIRST_RETRY_MS, WEBHOOK_MAX_RETRY_MS, WEBHOOK_RETRY_FOR_MS, type WebhookDispatcherOptions, type DeliveryOutcome, type JobWebhookBody, type WebhookLogger } from './webhooks.ts';
export { validateWebhookUrl, guardTarget, classifyAddress, pinnedLookup, systemResolver, MAX_WEBHOOK_URL_LENGTH, type WebhookUrlCheck, type WebhookUrlProblem, type GuardResult, type GuardOptions, type GuardRefusal, type AddressClass, type Resolver, type ResolvedAddress } from './net-guard.ts';
export { readCsv, parseCsvChunk, serializeFields, formatCell, findEmailColumn, detectDelimiter, MAX_FIELD_CHARS, MAX_RECORD_BYTES, type CsvChunk, type CsvFailure, type CsvRow, type CsvErrorCode, type ChunkParser, type LineEnd, type ParseTask, type ParseResult, type ReadCsvOptions } from './csv.ts';
export { createCsvPool, type CsvPool, type CsvPoolOptions } from './csv-pool.ts';
export type { RenderTask, RenderResult } from './csv-task.ts';
export { RESULT_COLUMNS, renderHeader, renderRows, parseSegments, type RenderRow, type ResultCells, type SegmentsResult } from './render.ts';
export { webhookSignature, verifyWebhookSignature } from './signing.ts';
