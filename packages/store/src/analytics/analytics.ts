// The Analytics port (DESIGN 3, 4: "every validation decision also goes to analytics"). Two
// adapters: SQL tables in the relational store (embedded profile, PGlite or Postgres: SqlAnalytics
// here) and ClickHouse (cluster profile: clickhouse-analytics.ts). Outcome reports read from it.
//
// Recording is cheap on the request path: record() validates and appends to an in-memory buffer
// and returns; the buffer is written in batches (when it holds `batchSize` rows, or `flushIntervalMs`
// after the first unwritten row), one write at a time. When the backend is down the rows stay
// buffered (at most `maxBuffered`; beyond it the oldest are dropped and counted in `dropped`),
// writes are retried with exponential back-off, and the whole backlog is written once it answers
// again. Every write is idempotent by decision id, so a retry after a write that did land (a
// timeout, a lost reply) counts nothing twice.
//
// Queries read the backend only: a row still in the buffer is not seen until it is written
// (flush() forces that).

import { EventEmitter } from 'node:events';
import {
  emptyOutcomeMatrix,
  LAYERS,
  OUTCOME_LABELS,
  OUTCOME_SIGNALS,
  OUTCOME_SOURCES,
  OUTCOME_VALUES,
  PREDICTED_RESULTS,
  REASON_CODES,
  VALIDATION_RESULTS,
  type DomainOutcomeMatrix,
  type Layer,
  type OutcomeLabel,
  type OutcomeMatrix,
  type OutcomeSignal,
  type OutcomeSource,
  type OutcomeValue,
  type PredictedResult,
  type ReasonCode,
  type ValidationResult,
} from '@svc/contracts';
import type { Queryable } from '../db/db.ts';

export const DECISION_SOURCES = ['single', 'bulk', 'job', 'mcp'] as const;
export type DecisionSource = (typeof DECISION_SOURCES)[number];

/** One validation decision, as analytics keeps it. Never the address itself: its hash. */
export interface Decision {
  /** Unique decision id: a redelivered decision carries the same id and is counted once. */
  id: string;
  account_id: string;
  /** Hex SHA-256 (64 lowercase hex digits) of the normalized address. */
  email_hash: string;
  /** The address's domain (stored lowercased). */
  domain: string;
  result: ValidationResult;
  reason_code: ReasonCode;
  /** validation_layer of the verdict. */
  layer: Layer;
  mx_host: string | null;
  /** Whole milliseconds (a fraction is rounded). */
  latency_ms: number;
  job_id: string | null;
  source: DecisionSource;
  credits_charged: number;
  /** Millisecond precision; between 1970 and 2105 (ClickHouse DateTime's range). */
  decided_at: Date;
}

/** One accepted outcome event, as analytics keeps it (issue 8 reports). Never the address: its hash. */
export interface OutcomeFact {
  /** The stored event's id: a redelivered fact is counted once. */
  id: string;
  account_id: string;
  /** The same hash as Decision.email_hash (SHA-256 of the verifier's mailbox key). */
  email_hash: string;
  domain: string;
  outcome: OutcomeValue;
  label: OutcomeLabel;
  signal: OutcomeSignal | null;
  source: OutcomeSource;
  /** The event time (its occurred_at, else when it was imported). */
  occurred_at: Date;
}

export type ResultCounts = Record<ValidationResult, number>;

/** A time window: `from` inclusive, `to` exclusive (from <= decided_at < to), millisecond precision. */
export interface Window {
  account_id: string;
  from: Date;
  to: Date;
}

export interface DomainSummaryRow {
  domain: string;
  /** Distinct decisions for the domain in the window. */
  total: number;
  /** Decisions per result (every result present, 0 when none). */
  counts: ResultCounts;
  /** sum(latency_ms) / total. */
  mean_latency_ms: number;
}

export interface AnalyticsStats {
  /** Rows recorded and not yet written (buffered, plus the batch being written). */
  pending: number;
  /** Rows written since start. */
  written: number;
  /** Rows dropped: the oldest beyond `maxBuffered` while the backend was down, and what close() could not write. */
  dropped: number;
  /** Consecutive failed writes (0 once one succeeds). */
  failures: number;
  lastError: string | undefined;
}

/**
 * The port. Events: 'written' (rows: number) after each batch lands, 'write_failed' (err: Error)
 * after each failed write (the rows stay buffered), 'dropped' (rows: number) when rows are dropped.
 */
export interface Analytics {
  /**
   * Buffers decisions for writing and returns at once. Rejects (recording none of them) when one
   * is malformed (TypeError) or after close().
   */
  record(decisions: readonly Decision[]): Promise<void>;
  /**
   * Writes decisions now, past the buffer, and resolves once they landed (idempotent by id: a
   * decision written again is counted once). Rejects with the backend's error, having written
   * some or none; the caller sends them again (the job decision outbox).
   */
  recordNow(decisions: readonly Decision[]): Promise<void>;
  /** Distinct decisions per result in the window; every result is a key (0 when none). */
  countByResult(q: Window): Promise<ResultCounts>;
  /** The account's decisions for one address hash, latest first (decided_at, then id, descending); limit 1-1000, default 20. */
  decisionsFor(q: { account_id: string; email_hash: string; limit?: number }): Promise<Decision[]>;
  /** Per domain in the window: most decisions first, then domain (byte order); limit 1-10000, default 100. */
  domainSummary(q: Window & { limit?: number }): Promise<DomainSummaryRow[]>;
  /** Buffers outcome facts like record() (same batching, back-off, idempotence by id). */
  recordOutcomes(facts: readonly OutcomeFact[]): Promise<void>;
  /**
   * Every fact of the account with from <= occurred_at < to, joined to the account's latest
   * decision for the same address hash with decided_at <= occurred_at (ties: the greater id);
   * `not_validated` when there is none. Claims (no signal) per label; sent and open signals apart.
   */
  outcomeMatrix(q: Window): Promise<OutcomeMatrix>;
  /** The same per fact domain: most facts first, then domain (byte order); limit 1-10000, default 100. */
  outcomeDomains(q: Window & { limit?: number }): Promise<DomainOutcomeMatrix[]>;
  /**
   * Writes everything recorded before the call (now, ignoring any back-off). Rejects with the
   * backend's error if a write fails; the unwritten rows stay buffered and are retried.
   */
  flush(): Promise<void>;
  /**
   * Stops recording and writes the buffer (one attempt). If that fails the unwritten rows are
   * counted in `dropped` and close() rejects. Releases what the adapter owns.
   */
  close(): Promise<void>;
  readonly pending: number;
  readonly dropped: number;
  stats(): AnalyticsStats;
  on(event: 'written' | 'dropped', listener: (rows: number) => void): this;
  on(event: 'write_failed', listener: (err: Error) => void): this;
  off(event: 'written' | 'dropped', listener: (rows: number) => void): this;
  off(event: 'write_failed', listener: (err: Error) => void): this;
}

export interface AnalyticsOptions {
  /** Rows per write, and the buffer size that triggers one (default 1000). */
  batchSize?: number;
  /** How long the first unwritten row waits for a write at most, when no failure holds it back (default 1000 ms). */
  flushIntervalMs?: number;
  /** Rows kept while the backend is down; beyond it the oldest are dropped (default 100,000). */
  maxBuffered?: number;
  /** First retry delay after a failed write (default 500 ms); doubles per failure... */
  retryMinMs?: number;
  /** ...up to this (default 10,000 ms): after an outage the backlog starts to land within this long. */
  retryMaxMs?: number;
}

const MAX_ID = 256;
const MAX_HOST = 255;
const MAX_INT4 = 2_147_483_647;
/** ClickHouse DateTime is unsigned 32-bit seconds. */
const MAX_TIME_MS = 4_294_967_295_000;
const HASH = /^[0-9a-f]{64}$/;

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

/**
 * Checks one decision and returns the copy analytics keeps (domain lowercased, latency rounded).
 * Everything a backend would refuse is refused here: a refused row in a batch would hold up every
 * row behind it.
 */
export function checkDecision(d: Decision, i = 0): Decision {
  if (d === null || typeof d !== 'object') return fail(i, 'decision', 'must be an object');
  const email_hash = d.email_hash;
  if (typeof email_hash !== 'string' || !HASH.test(email_hash)) fail(i, 'email_hash', 'must be 64 lowercase hex digits (SHA-256)');
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
  if (typeof f.email_hash !== 'string' || !HASH.test(f.email_hash)) fail(i, 'email_hash', 'must be 64 lowercase hex digits (SHA-256)');
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

const isFact = (r: Decision | OutcomeFact): r is OutcomeFact => 'label' in r;

/** One count of an adapter's matrix query: facts per (predicted result, label, signal[, domain]). */
export interface MatrixRow {
  domain?: string;
  result: string;
  label: string;
  signal: string | null;
  n: number;
}

/** Adds one (result, label, signal) count to a matrix. */
export function addToMatrix(m: OutcomeMatrix, result: string, label: string, signal: string | null, n: number): void {
  const r = ((PREDICTED_RESULTS as readonly string[]).includes(result) ? result : 'not_validated') as PredictedResult;
  if (signal === 'sent') m.sent[r] += n;
  else if (signal === 'open') m.opens[r] += n;
  else if ((OUTCOME_LABELS as readonly string[]).includes(label)) m.claims[r][label as OutcomeLabel] += n;
}

/** Every result at 0. */
export const zeroCounts = (): ResultCounts => Object.fromEntries(VALIDATION_RESULTS.map((r) => [r, 0])) as ResultCounts;

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

/**
 * The buffer, batching, back-off and catch-up shared by both adapters. An adapter supplies
 * write() (idempotent by id: a row already there is left as it is), the queries, and
 * closeBackend().
 */
export abstract class BufferedAnalytics extends EventEmitter implements Analytics {
  readonly #batchSize: number;
  readonly #interval: number;
  readonly #cap: number;
  readonly #retryMin: number;
  readonly #retryMax: number;
  /** Oldest first; a failed batch goes back to the front, so rows leave in the order they came. */
  #buffer: Array<Decision | OutcomeFact> = [];
  #inFlight = 0;
  #written = 0;
  #dropped = 0;
  #failures = 0;
  #lastError: string | undefined;
  #recorded = 0;
  #flushTimer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #draining: Promise<void> | undefined;
  #closed = false;

  constructor(opts: AnalyticsOptions = {}) {
    super();
    const int = (v: number | undefined, dflt: number, min: number, name: string): number => {
      const n = v ?? dflt;
      if (!Number.isInteger(n) || n < min) throw new RangeError(`${name} must be an integer >= ${min}`);
      return n;
    };
    this.#batchSize = int(opts.batchSize, 1000, 1, 'batchSize');
    this.#interval = int(opts.flushIntervalMs, 1000, 0, 'flushIntervalMs');
    this.#cap = int(opts.maxBuffered, 100_000, 1, 'maxBuffered');
    this.#retryMin = int(opts.retryMinMs, 500, 1, 'retryMinMs');
    this.#retryMax = Math.max(this.#retryMin, int(opts.retryMaxMs, 10_000, 1, 'retryMaxMs'));
  }

  /** Writes one batch (at most batchSize rows). Idempotent by id. Throws when the backend is unavailable. */
  protected abstract write(batch: readonly Decision[]): Promise<void>;
  /** Writes outcome facts, idempotent by id, like write(). */
  protected abstract writeOutcomes(batch: readonly OutcomeFact[]): Promise<void>;
  /** (result, label, signal[, domain]) counts of the window's facts, each joined to the decision before it (`not_validated`: none). */
  protected abstract matrixRows(q: Window, byDomain: boolean): Promise<MatrixRow[]>;

  async outcomeMatrix(q: Window): Promise<OutcomeMatrix> {
    const m = emptyOutcomeMatrix();
    for (const r of await this.matrixRows(q, false)) addToMatrix(m, r.result, r.label, r.signal, r.n);
    return m;
  }

  async outcomeDomains(q: Window & { limit?: number }): Promise<DomainOutcomeMatrix[]> {
    const limit = checkLimit(q.limit, 100, 10_000);
    return domainMatrices(await this.matrixRows(q, true), limit);
  }
  /** Releases the adapter's own resources (connections it opened). */
  protected abstract closeBackend(): Promise<void>;
  abstract countByResult(q: Window): Promise<ResultCounts>;
  abstract decisionsFor(q: { account_id: string; email_hash: string; limit?: number }): Promise<Decision[]>;
  abstract domainSummary(q: Window & { limit?: number }): Promise<DomainSummaryRow[]>;

  get pending(): number {
    return this.#buffer.length + this.#inFlight;
  }

  get dropped(): number {
    return this.#dropped;
  }

  stats(): AnalyticsStats {
    return { pending: this.pending, written: this.#written, dropped: this.#dropped, failures: this.#failures, lastError: this.#lastError };
  }

  async record(decisions: readonly Decision[]): Promise<void> {
    if (!Array.isArray(decisions)) throw new TypeError('decisions must be an array');
    this.#append(decisions.map((d, i) => checkDecision(d, i)));
  }

  async recordNow(decisions: readonly Decision[]): Promise<void> {
    if (!Array.isArray(decisions)) throw new TypeError('decisions must be an array');
    if (this.#closed) throw new Error('analytics is closed');
    const rows = decisions.map((d, i) => checkDecision(d, i));
    for (let at = 0; at < rows.length; at += this.#batchSize) await this.write(rows.slice(at, at + this.#batchSize));
  }

  async recordOutcomes(facts: readonly OutcomeFact[]): Promise<void> {
    if (!Array.isArray(facts)) throw new TypeError('facts must be an array');
    this.#append(facts.map((f, i) => checkOutcomeFact(f, i)));
  }

  #append(rows: ReadonlyArray<Decision | OutcomeFact>): void {
    if (this.#closed) throw new Error('analytics is closed');
    if (rows.length === 0) return;
    for (const r of rows) this.#buffer.push(r);
    this.#recorded += rows.length;
    const over = this.#buffer.length - this.#cap;
    if (over > 0) this.#drop(over);
    if (this.#retryTimer) return; // backing off: the retry writes the backlog
    if (this.#buffer.length >= this.#batchSize) this.#kick();
    else this.#flushTimer ??= unref(setTimeout(() => this.#kick(), this.#interval));
  }

  async flush(): Promise<void> {
    const target = this.#recorded;
    // Rows leave the buffer in order (written or dropped), so once that many have left, every
    // row recorded before this call has.
    while (this.#written + this.#dropped < target) await this.#drain();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#clearTimers();
    try {
      await this.flush();
    } catch (err) {
      const lost = this.#buffer.length;
      if (lost > 0) this.#drop(lost);
      this.#clearTimers();
      await this.closeBackend().catch(() => {});
      throw new Error(`analytics closed with ${lost} decision(s) not written: ${(err as Error).message}`, { cause: err });
    }
    this.#clearTimers();
    await this.closeBackend();
  }

  #drop(n: number): void {
    this.#buffer.splice(0, n);
    this.#dropped += n;
    this.emit('dropped', n);
  }

  #clearTimers(): void {
    clearTimeout(this.#flushTimer);
    clearTimeout(this.#retryTimer);
    this.#flushTimer = this.#retryTimer = undefined;
  }

  /** A background drain: its failure is reported by event and retried, never thrown. */
  #kick(): void {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    this.#drain().catch(() => {});
  }

  /** Writes the buffer batch by batch until it is empty; one drain at a time. */
  #drain(): Promise<void> {
    this.#draining ??= (async () => {
      try {
        while (this.#buffer.length > 0) {
          const batch = this.#buffer.splice(0, this.#batchSize);
          this.#inFlight = batch.length;
          try {
            const facts = batch.filter(isFact);
            const decisions = facts.length === 0 ? (batch as Decision[]) : batch.filter((r): r is Decision => !isFact(r));
            if (decisions.length > 0) await this.write(decisions);
            if (facts.length > 0) await this.writeOutcomes(facts);
          } catch (err) {
            this.#inFlight = 0;
            this.#buffer = batch.concat(this.#buffer);
            const over = this.#buffer.length - this.#cap;
            if (over > 0) this.#drop(over);
            this.#failures++;
            this.#lastError = (err as Error)?.message ?? String(err);
            this.#scheduleRetry();
            this.emit('write_failed', err);
            throw err;
          }
          this.#inFlight = 0;
          this.#written += batch.length;
          this.#failures = 0;
          this.#lastError = undefined;
          clearTimeout(this.#retryTimer);
          this.#retryTimer = undefined;
          this.emit('written', batch.length);
        }
        clearTimeout(this.#flushTimer);
        this.#flushTimer = undefined;
      } finally {
        this.#draining = undefined;
      }
    })();
    return this.#draining;
  }

  #scheduleRetry(): void {
    if (this.#closed) return;
    clearTimeout(this.#flushTimer);
    clearTimeout(this.#retryTimer);
    this.#flushTimer = undefined;
    const base = Math.min(this.#retryMax, this.#retryMin * 2 ** Math.min(30, this.#failures - 1));
    const delay = Math.round(base * (0.75 + Math.random() * 0.25)); // jitter: processes restarted together do not retry in step
    this.#retryTimer = unref(
      setTimeout(() => {
        this.#retryTimer = undefined;
        this.#drain().catch(() => {});
      }, delay),
    );
  }
}

/** Timers never keep the process alive: close() is what writes the last rows. */
function unref(t: NodeJS.Timeout): NodeJS.Timeout {
  t.unref();
  return t;
}

const COLUMNS = ['id', 'account_id', 'email_hash', 'domain', 'result', 'reason_code', 'layer', 'mx_host', 'latency_ms', 'job_id', 'source', 'credits_charged', 'decided_at'] as const;
/** Rows per INSERT statement: 13 parameters each, well under Postgres's 65,535. */
const ROWS_PER_STATEMENT = 1000;

/** A row of validation_decisions: a Decision as the database gives it back. */
type DecisionRow = Decision & Record<string, unknown>;

/**
 * The embedded profile's adapter: the `validation_decisions` table (infra/migrations/
 * 007_analytics.sql) in the relational store, on PGlite or Postgres through the same SQL. It uses
 * the store's connection and does not close it.
 */
export class SqlAnalytics extends BufferedAnalytics {
  readonly #db: Queryable;

  constructor(db: Queryable, opts: AnalyticsOptions = {}) {
    super(opts);
    this.#db = db;
  }

  protected async write(batch: readonly Decision[]): Promise<void> {
    for (let start = 0; start < batch.length; start += ROWS_PER_STATEMENT) {
      const rows = batch.slice(start, start + ROWS_PER_STATEMENT);
      const params: unknown[] = [];
      const tuples = rows.map((d) => {
        const at = params.length;
        params.push(d.id, d.account_id, d.email_hash, d.domain, d.result, d.reason_code, d.layer, d.mx_host, d.latency_ms, d.job_id, d.source, d.credits_charged, d.decided_at.toISOString());
        return `(${COLUMNS.map((_, k) => `$${at + k + 1}`).join(', ')})`;
      });
      // A duplicate id (in this statement, or written before) inserts nothing.
      await this.#db.query(`INSERT INTO validation_decisions (${COLUMNS.join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT (id) DO NOTHING`, params);
    }
  }

  protected async closeBackend(): Promise<void> {
    // The connection is the store's.
  }

  async countByResult(q: Window): Promise<ResultCounts> {
    const { from, to } = checkWindow(q);
    const rows = await this.#db.query<{ result: ValidationResult; n: number }>(
      `SELECT result, count(*)::int AS n FROM validation_decisions
        WHERE account_id = $1 AND decided_at >= $2::timestamptz AND decided_at < $3::timestamptz
        GROUP BY result`,
      [q.account_id, new Date(from).toISOString(), new Date(to).toISOString()],
    );
    const out = zeroCounts();
    for (const r of rows) out[r.result] = r.n;
    return out;
  }

  async decisionsFor(q: { account_id: string; email_hash: string; limit?: number }): Promise<Decision[]> {
    const limit = checkLimit(q.limit, 20, 1000);
    const rows = await this.#db.query<DecisionRow>(
      `SELECT ${COLUMNS.join(', ')} FROM validation_decisions
        WHERE account_id = $1 AND email_hash = $2
        ORDER BY decided_at DESC, id COLLATE "C" DESC
        LIMIT $3`,
      [q.account_id, q.email_hash, limit],
    );
    return rows.map((r) => ({
      id: r.id,
      account_id: r.account_id,
      email_hash: r.email_hash,
      domain: r.domain,
      result: r.result,
      reason_code: r.reason_code,
      layer: r.layer,
      mx_host: r.mx_host,
      latency_ms: r.latency_ms,
      job_id: r.job_id,
      source: r.source,
      credits_charged: r.credits_charged,
      decided_at: new Date(r.decided_at),
    }));
  }

  async domainSummary(q: Window & { limit?: number }): Promise<DomainSummaryRow[]> {
    const { from, to } = checkWindow(q);
    const limit = checkLimit(q.limit, 100, 10_000);
    const perResult = VALIDATION_RESULTS.map((r, k) => `count(*) FILTER (WHERE result = '${r}')::int AS r${k}`).join(', ');
    const rows = await this.#db.query<Record<string, number> & { domain: string; total: number; latency_sum: number }>(
      `SELECT domain, count(*)::int AS total, ${perResult}, sum(latency_ms)::bigint AS latency_sum
         FROM validation_decisions
        WHERE account_id = $1 AND decided_at >= $2::timestamptz AND decided_at < $3::timestamptz
        GROUP BY domain
        ORDER BY count(*) DESC, domain COLLATE "C" ASC
        LIMIT $4`,
      [q.account_id, new Date(from).toISOString(), new Date(to).toISOString(), limit],
    );
    return rows.map((r) => ({
      domain: r.domain,
      total: r.total,
      counts: Object.fromEntries(VALIDATION_RESULTS.map((res, k) => [res, Number(r[`r${k}`])])) as ResultCounts,
      mean_latency_ms: Number(r.latency_sum) / r.total,
    }));
  }

  protected async writeOutcomes(batch: readonly OutcomeFact[]): Promise<void> {
    // The columns as arrays: one short statement however many rows (a batch is at most batchSize).
    await this.#db.query(
      `INSERT INTO outcome_facts (id, account_id, email_hash, domain, outcome, label, signal, source, occurred_at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[])
       ON CONFLICT (id) DO NOTHING`,
      [
        batch.map((f) => f.id),
        batch.map((f) => f.account_id),
        batch.map((f) => f.email_hash),
        batch.map((f) => f.domain),
        batch.map((f) => f.outcome),
        batch.map((f) => f.label),
        batch.map((f) => f.signal),
        batch.map((f) => f.source),
        batch.map((f) => f.occurred_at.toISOString()),
      ],
    );
  }

  protected async matrixRows(q: Window, byDomain: boolean): Promise<MatrixRow[]> {
    const { from, to } = checkWindow(q);
    return this.#db.query<MatrixRow & Record<string, unknown>>(
      `SELECT ${byDomain ? 'f.domain, ' : ''}coalesce(d.result, 'not_validated') AS result, f.label, f.signal, count(*)::int AS n
         FROM outcome_facts f
         LEFT JOIN LATERAL (
           SELECT result FROM validation_decisions v
            WHERE v.account_id = f.account_id AND v.email_hash = f.email_hash AND v.decided_at <= f.occurred_at
            ORDER BY v.decided_at DESC, v.id COLLATE "C" DESC
            LIMIT 1
         ) d ON true
        WHERE f.account_id = $1 AND f.occurred_at >= $2::timestamptz AND f.occurred_at < $3::timestamptz
        GROUP BY ${byDomain ? 'f.domain, ' : ''}coalesce(d.result, 'not_validated'), f.label, f.signal`,
      [q.account_id, new Date(from).toISOString(), new Date(to).toISOString()],
    );
  }

}

/** Per-domain matrices from (domain, result, label, signal, n) rows: most facts first, then domain (byte order). */
export function domainMatrices(rows: readonly MatrixRow[], limit: number): DomainOutcomeMatrix[] {
  const by = new Map<string, DomainOutcomeMatrix>();
  for (const r of rows) {
    const d = r.domain ?? '';
    let m = by.get(d);
    if (!m) by.set(d, (m = { domain: d, total: 0, ...emptyOutcomeMatrix() }));
    addToMatrix(m, r.result, r.label, r.signal, r.n);
    m.total += r.n;
  }
  return [...by.values()].sort((a, b) => b.total - a.total || (a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0)).slice(0, limit);
}
