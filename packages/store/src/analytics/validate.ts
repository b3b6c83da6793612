// What analytics accepts: each decision, fact, window and limit is checked before it reaches a
// buffer or a backend.

import { LAYERS, OUTCOME_LABELS, OUTCOME_SIGNALS, OUTCOME_SOURCES, OUTCOME_VALUES, REASON_CODES, VALIDATION_RESULTS } from '@svc/contracts';
import { DECISION_SOURCES, type Decision, type OutcomeFact, type Window } from './analytics.ts';

const MAX_ID = 256;
const MAX_HOST = 255;
const MAX_INT4 = 2_147_483_647;
/** ClickHouse DateTime is unsigned 32-bit seconds. */
const MAX_TIME_MS = 4_294_967_295_000;
/** What a stored address hash is: the hex SHA-256, 64 lower-case digits. */
export const EMAIL_HASH = /^[0-9a-f]{64}$/;

const fail = (i: number, field: string, why: string): never => {
  throw new TypeError(`decision ${i}: ${field} ${why}`);
};

function text(i: number, field: string, v: unknown, max: number): string {
  if (typeof v !== 'string' || v.length === 0) return fail(i, field, 'must be a non-empty string');
  if (v.length > max) return fail(i, field, `is longer than ${max}`);
  // Postgres text cannot hold NUL: one such row would fail its whole batch on every retry.
  if (v.includes('\u0000')) return fail(i, field, 'contains NUL');
  return v;
}

function oneOf<T extends string>(i: number, field: string, v: unknown, list: readonly T[]): T {
  if (typeof v !== 'string' || !(list as readonly string[]).includes(v)) return fail(i, field, `must be one of ${list.join(', ')}`);
  return v as T;
}

function count(i: number, field: string, v: unknown, round: boolean): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return fail(i, field, 'must be a finite number >= 0');
  const n = round ? Math.round(v) : v;
  if (!Number.isInteger(n) || n > MAX_INT4) return fail(i, field, `must be an integer <= ${MAX_INT4}`);
  return n;
}

/** The email_hash checkDecision accepted last. */
let lastHash = '';

/**
 * Checks one decision and returns the copy analytics keeps (domain lowercased, latency rounded).
 * Everything a backend would refuse is refused here: a refused row in a batch would hold up every
 * row behind it.
 */
export function checkDecision(d: Decision, i = 0): Decision {
  if (d === null || typeof d !== 'object') return fail(i, 'decision', 'must be an object');
  const email_hash = d.email_hash;
  // (The last hash that passed is not tested again: cached validations repeat their addresses.)
  if (email_hash !== lastHash) {
    if (typeof email_hash !== 'string' || !EMAIL_HASH.test(email_hash)) fail(i, 'email_hash', 'must be 64 lowercase hex digits (SHA-256)');
    lastHash = email_hash;
  }
  const at = d.decided_at;
  if (!(at instanceof Date) || Number.isNaN(at.getTime())) fail(i, 'decided_at', 'must be a valid Date');
  const ms = at.getTime();
  if (ms < 0 || ms > MAX_TIME_MS) fail(i, 'decided_at', 'must be between 1970 and 2106');
  return {
    id: text(i, 'id', d.id, MAX_ID),
    account_id: text(i, 'account_id', d.account_id, MAX_ID),
    email_hash,
    domain: text(i, 'domain', d.domain, MAX_HOST).toLowerCase(),
    result: oneOf(i, 'result', d.result, VALIDATION_RESULTS),
    reason_code: oneOf(i, 'reason_code', d.reason_code, REASON_CODES),
    layer: oneOf(i, 'layer', d.layer, LAYERS),
    mx_host: d.mx_host === null ? null : text(i, 'mx_host', d.mx_host, MAX_HOST),
    latency_ms: count(i, 'latency_ms', d.latency_ms, true),
    job_id: d.job_id === null ? null : text(i, 'job_id', d.job_id, MAX_ID),
    source: oneOf(i, 'source', d.source, DECISION_SOURCES),
    credits_charged: count(i, 'credits_charged', d.credits_charged, false),
    decided_at: new Date(ms),
  };
}

/** Checks one outcome fact and returns the copy analytics keeps (domain lowercased). */
export function checkOutcomeFact(f: OutcomeFact, i = 0): OutcomeFact {
  if (f === null || typeof f !== 'object') return fail(i, 'fact', 'must be an object');
  if (typeof f.email_hash !== 'string' || !EMAIL_HASH.test(f.email_hash)) fail(i, 'email_hash', 'must be 64 lowercase hex digits (SHA-256)');
  const at = f.occurred_at;
  if (!(at instanceof Date) || Number.isNaN(at.getTime())) fail(i, 'occurred_at', 'must be a valid Date');
  const ms = at.getTime();
  if (ms < 0 || ms > MAX_TIME_MS) fail(i, 'occurred_at', 'must be between 1970 and 2106');
  if (f.signal !== null && !(OUTCOME_SIGNALS as readonly string[]).includes(f.signal)) fail(i, 'signal', `must be null or one of ${OUTCOME_SIGNALS.join(', ')}`);
  return {
    id: text(i, 'id', f.id, MAX_ID),
    account_id: text(i, 'account_id', f.account_id, MAX_ID),
    email_hash: f.email_hash,
    domain: text(i, 'domain', f.domain, MAX_HOST).toLowerCase(),
    outcome: oneOf(i, 'outcome', f.outcome, OUTCOME_VALUES),
    label: oneOf(i, 'label', f.label, OUTCOME_LABELS),
    signal: f.signal,
    source: oneOf(i, 'source', f.source, OUTCOME_SOURCES),
    occurred_at: new Date(ms),
  };
}

/**
 * Checks a query window; returns its bounds in epoch milliseconds, clamped to the range a decision
 * can have ([0, MAX_TIME_MS + 1]: the same rows match, and every backend can read the bounds).
 */
export function checkWindow(q: Window): { from: number; to: number } {
  if (typeof q?.account_id !== 'string') throw new TypeError('account_id must be a string');
  const from = q.from instanceof Date ? q.from.getTime() : NaN;
  const to = q.to instanceof Date ? q.to.getTime() : NaN;
  if (Number.isNaN(from) || Number.isNaN(to)) throw new TypeError('from and to must be valid Dates');
  const clamp = (ms: number): number => Math.min(Math.max(ms, 0), MAX_TIME_MS + 1);
  return { from: clamp(from), to: clamp(to) };
}

export function checkLimit(limit: number | undefined, dflt: number, max: number): number {
  if (limit === undefined) return dflt;
  if (!Number.isInteger(limit) || limit < 1 || limit > max) throw new RangeError(`limit must be an integer from 1 to ${max}`);
  return limit;
}
