// Names for the shapes the client's methods take and answer, read off the generated OpenAPI
// types (./openapi.ts), so a change to a route's schema reaches callers as a type change. The few
// shapes the document does not describe yet are written here, after the spec (and say so).

import type { components, paths } from './openapi.ts';

type Method = 'get' | 'post' | 'put' | 'delete';
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type JsonOf<R> = R extends { content: { 'application/json': infer B } } ? B : never;
/** The JSON body of response `S` of `M P`. */
export type ResponseBody<P extends keyof paths, M extends Method, S extends number> = Operation<P, M> extends { responses: infer R } ? (S extends keyof R ? JsonOf<R[S]> : never) : never;
/** The JSON request body of `M P`. */
export type RequestBody<P extends keyof paths, M extends Method> = Operation<P, M> extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;

export type { components, paths };

export type ValidationResult = components['schemas']['ValidationResult'];
export type BulkValidationResponse = components['schemas']['BulkValidationResponse'];
export type CreditBalance = components['schemas']['CreditBalance'];
export type Job = components['schemas']['JobStatus'];
export type JobCreated = components['schemas']['JobCreated'];
export type JobState = Job['status'];
export type JobPage = ResponseBody<'/v1/csv/jobs', 'get', 200>;
export type PreparedUpload = ResponseBody<'/v1/csv/prepare-upload', 'post', 200>;
export type UploadReceipt = ResponseBody<'/v1/csv/uploads/{id}', 'put', 200>;
export type DownloadLink = ResponseBody<'/v1/csv/jobs/{id}/download', 'get', 200>;
export type OutcomeImportResult = ResponseBody<'/v1/outcomes/email/import', 'post', 200>;
/** The error codes the service documents (docs/errors.md); a client must still expect others. */
export type KnownErrorCode = components['schemas']['Error']['code'];

/** One outcome row (docs/api.md "Delivery outcomes"): the document takes any object. */
export interface OutcomeRow {
  email: string;
  outcome?: string;
  source?: string;
  external_id?: string;
  occurred_at?: string;
  [field: string]: unknown;
}

/**
 * The answer of POST /v1/csv/jobs/{id}/recover-catchalls (202): the document does not describe
 * its body yet, so only the fields docs/api.md shows are named.
 */
export interface CatchallRecovery {
  recovery_id: string;
  job_id: string;
  status: string;
  rows: number;
  credits_reserved: number;
  upgraded: number;
  downgraded: number;
  unchanged: number;
  credits_charged: number;
  credits_refunded: number;
  recovered: Array<{ email: string; previous_result: string; result: string; reason_code: string; evidence: Record<string, unknown> }>;
  [field: string]: unknown;
}

/**
 * The subscription cancellation response (docs/api.md), for POST /v1/subscriptions/cancel and
 * /reactivate; typed by hand until those routes are in the document.
 */
export interface SubscriptionState {
  subscription_id: string;
  status: string;
  cancel_at_period_end: boolean;
  current_period_end: string;
  message: string;
  [field: string]: unknown;
}
