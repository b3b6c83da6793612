// The Analytics port: every validation decision also goes to analytics, and the outcome reports
// read from it. Two adapters: SQL tables in the relational store (embedded profile, PGlite or
// Postgres: sql-analytics.ts) and ClickHouse (cluster profile: clickhouse-analytics.ts), both on
// the buffer of buffered.ts. Input checks are in validate.ts, the report arithmetic in report.ts.
//
// Queries read the backend only: a row still in the buffer is not seen until it is written
// (flush() forces that).

import type {
  DomainOutcomeMatrix,
  Layer,
  OutcomeLabel,
  OutcomeMatrix,
  OutcomeSignal,
  OutcomeSource,
  OutcomeValue,
  ReasonCode,
  ValidationResult,
} from '@svc/contracts';

export const DECISION_SOURCES = ['single', 'bulk', 'job', 'mcp'] as const;
export type DecisionSource = (typeof DECISION_SOURCES)[number];

/** One validation decision, as analytics keeps it. Never the address itself: its hash. */
export interface Decision {
  /**
   * Unique decision id: a redelivered decision carries the same id and is counted once. A
   * redelivery is the decision as first made, its account and decided_at too (the SQL table's key
   * is all three).
   */
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

/** A stored decision as a database hands it back (numbers may come as strings), with its time. */
export function decisionFromRow(r: Omit<Decision, 'latency_ms' | 'credits_charged' | 'decided_at'> & { latency_ms: number | string; credits_charged: number | string }, decidedAt: Date): Decision {
  return {
    id: r.id,
    account_id: r.account_id,
    email_hash: r.email_hash,
    domain: r.domain,
    result: r.result,
    reason_code: r.reason_code,
    layer: r.layer,
    mx_host: r.mx_host,
    latency_ms: Number(r.latency_ms),
    job_id: r.job_id,
    source: r.source,
    credits_charged: Number(r.credits_charged),
    decided_at: decidedAt,
  };
}

/** One accepted outcome event, as analytics keeps it (for the outcome reports). Never the address: its hash. */
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

/** One UTC day's decisions. */
export interface DailyCounts {
  /** The UTC day, YYYY-MM-DD. */
  day: string;
  /** Distinct decisions decided that day (in the window). */
  total: number;
  /** Per result (every result present, 0 when none). */
  counts: ResultCounts;
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
  /** Distinct decisions per UTC day and result in the window, oldest day first; days without any are left out. */
  daily(q: Window): Promise<DailyCounts[]>;
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
