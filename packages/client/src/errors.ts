// What a call of the client can fail with (docs/errors.md): an answer of the service (`SvcApiError`,
// with its stable `code` to branch on and the `X-Request-ID` of the last response), or no answer
// at all (`SvcNetworkError`: the connection failed or the attempt timed out; no request id). Both
// say whether the client's retry rule counts them as retryable and how many attempts were made.

import { isRetryable } from './retry.ts';

/** The error body (docs/errors.md), as far as the client reads it. */
export interface ErrorBody {
  error?: string;
  message?: string;
  code?: string;
  retry_after?: number;
  required_scope?: string;
  required?: number;
  available?: number;
  [extra: string]: unknown;
}

/** Base of every error the client throws for a failed call. */
export abstract class SvcError extends Error {
  /** Whether the retry rule (docs/errors.md) retries this failure; true only if the client gave up on it (attempts or deadline). */
  abstract readonly isRetryable: boolean;
  /** Attempts made before giving up, this one included. */
  attempts = 1;
}

/** The service answered with an error status. */
export class SvcApiError extends SvcError {
  override readonly name = 'SvcApiError';
  /** The stable machine code (docs/errors.md); undefined when the answer had none (e.g. a proxy's 502 page). */
  readonly code: string | undefined;
  /** The `X-Request-ID` of the last response: quote it when reporting a problem. */
  readonly requestId: string | undefined;
  /** Seconds to wait (429: `retry_after`, else the `Retry-After` header). */
  readonly retryAfter: number | undefined;
  /** 403 `insufficient_scope`: the scope the key lacks. */
  readonly requiredScope: string | undefined;
  /** 402 `insufficient_credits`: credits the request can cost at most. */
  readonly required: number | undefined;
  /** 402 `insufficient_credits`: credits available when it was refused (may be absent). */
  readonly available: number | undefined;

  constructor(
    readonly status: number,
    /** The parsed error body, or the raw text when it was not JSON. */
    readonly body: ErrorBody | string,
    headers: Headers,
    readonly method: string,
    readonly path: string,
  ) {
    const b: ErrorBody = typeof body === 'object' && body !== null ? body : {};
    const message = typeof b.message === 'string' ? b.message : `HTTP ${status}`;
    super(message);
    this.code = typeof b.code === 'string' && b.code !== '' ? b.code : undefined;
    this.requestId = headers.get('x-request-id') ?? undefined;
    this.retryAfter = typeof b.retry_after === 'number' ? b.retry_after : retryAfterHeader(headers.get('retry-after'));
    this.requiredScope = typeof b.required_scope === 'string' ? b.required_scope : undefined;
    this.required = typeof b.required === 'number' ? b.required : undefined;
    this.available = typeof b.available === 'number' ? b.available : undefined;
  }

  get isRetryable(): boolean {
    return isRetryable(this.status, this.code);
  }
}

/** No answer: the connection failed, was dropped, or the attempt ran out of time. */
export class SvcNetworkError extends SvcError {
  override readonly name = 'SvcNetworkError';
  /** Never set: a network-only failure has no response, hence no request id (docs/errors.md). */
  readonly requestId: undefined = undefined;
  readonly isRetryable = true;

  constructor(
    /** `network`: no connection or a dropped one; `timeout`: the attempt's timeout (or the call's deadline) passed. */
    readonly kind: 'network' | 'timeout',
    message: string,
    readonly method: string,
    readonly path: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** `Retry-After` (RFC 9110 10.2.3): delay-seconds or an HTTP-date, as whole seconds from now. */
export function retryAfterHeader(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}
