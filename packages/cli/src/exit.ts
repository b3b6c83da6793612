// The exit codes of `svc`, by class of failure, so a script can branch without parsing text
// (docs/api.md "Official client and CLI"; docs/decisions/clients.md).

import { SvcApiError, SvcNetworkError } from '@svc/client';

export const EXIT = {
  /** Done. */
  ok: 0,
  /** Bad arguments, an unknown command, no API key, an unsafe config file. */
  usage: 1,
  /** The service refused the input (400, 413, 415, other 4xx), or a local file is missing or unreadable. */
  badInput: 2,
  /** Authentication or access: 401, 403. */
  auth: 3,
  /** Not enough credits, or the subscription has ended: 402. */
  credits: 4,
  /** Not found or conflict: 404, 409 (a job's state, an idempotency key reused with another body). */
  notFound: 5,
  /** Worth trying later: network failures, timeouts, 408, 429, 5xx (after the client's own retries). */
  retryable: 6,
  /** `job wait` / `job create --wait`: the job ended `failed` or `canceled`. */
  jobNotCompleted: 7,
  /** An unexpected error in `svc` itself (a bug: report it with the message). */
  internal: 8,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A problem `svc` reports itself (usage, configuration, a local file), with its exit code. */
export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
  ) {
    super(message);
  }
}

/** The exit code of a failure. */
export function exitCodeOf(err: unknown): ExitCode {
  if (err instanceof CliError) return err.exitCode;
  if (err instanceof SvcNetworkError) return EXIT.retryable;
  if (err instanceof SvcApiError) {
    const s = err.status;
    if (s === 401 || s === 403) return EXIT.auth;
    if (s === 402) return EXIT.credits;
    if (s === 404 || (s === 409 && !err.isRetryable)) return EXIT.notFound;
    if (err.isRetryable || s >= 500) return EXIT.retryable;
    return EXIT.badInput;
  }
  return EXIT.internal;
}
