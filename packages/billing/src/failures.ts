// Bugs are not outages. Only a failure to reach the database is a temporary
// dependency failure (503 validation_upstream_failed, retried by clients); anything else that
// the store throws (a CHECK constraint, a broken invariant, bad SQL) is a bug: it stays an
// unexpected error (500 internal_error) and is logged.

import { ServiceError } from '@svc/contracts';

/** Socket-level error codes of Node (pg's connection, a Redis client). */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ENOTCONN']);

/** Messages of pg and PGlite for a connection that is gone or could not be had in time. */
const CONNECTION_TEXT = /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|PGlite is closed|Cannot use a pool after calling end)/i;

/**
 * Whether `err` means the database could not be reached: PostgreSQL SQLSTATE class 08
 * (connection exception), 53 (insufficient resources), 57P01-57P05 (admin or crash shutdown,
 * cannot connect now, idle session timeout), 57014 (statement timeout: a stalled server), a
 * socket error, or the client's own connection and read timeouts.
 */
export function isConnectionFailure(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (/^(08|53)[0-9A-Z]{3}$/.test(code) || /^57P0[1-5]$/.test(code) || code === '57014') return true;
    if (SOCKET_CODES.has(code)) return true;
  }
  const errors = (err as { errors?: unknown }).errors; // AggregateError of a multi-address connect
  if (Array.isArray(errors) && errors.length > 0 && errors.every(isConnectionFailure)) return true;
  const message = (err as { message?: unknown }).message;
  return typeof message === 'string' && CONNECTION_TEXT.test(message);
}

/** Awaits a store call; a connection-class failure becomes 503 validation_upstream_failed. */
export async function upstream<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof ServiceError || !isConnectionFailure(err)) throw err;
    throw new ServiceError('validation_upstream_failed', undefined, {}, {}, err);
  }
}
