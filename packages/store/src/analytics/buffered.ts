// The buffer both Analytics adapters share. Recording is cheap on the request path: record()
// validates and appends to an in-memory buffer and returns; the buffer is written in batches (when
// it holds `batchSize` rows, or `flushIntervalMs` after the first unwritten row), one write at a
// time. When the backend is down the rows stay buffered (at most `maxBuffered`; beyond it the
// oldest are dropped and counted in `dropped`), writes are retried with exponential back-off, and
// the whole backlog is written once it answers again. Every write is idempotent by decision id, so
// a retry after a write that did land (a timeout, a lost reply) counts nothing twice.

import { EventEmitter } from 'node:events';
import { emptyOutcomeMatrix, type DomainOutcomeMatrix, type OutcomeMatrix } from '@svc/contracts';
import type { Analytics, AnalyticsOptions, AnalyticsStats, DailyCounts, Decision, DomainSummaryRow, OutcomeFact, ResultCounts, Window } from './analytics.ts';
import { addToMatrix, domainMatrices, type MatrixRow } from './report.ts';
import { checkDecision, checkLimit, checkOutcomeFact } from './validate.ts';

const isFact = (r: Decision | OutcomeFact): r is OutcomeFact => 'label' in r;

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
  /** Whether the drain under way writes down to the last row (else full batches only). */
  #drainAll = false;
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
  abstract daily(q: Window): Promise<DailyCounts[]>;
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
    if (this.#buffer.length >= this.#batchSize) this.#kick(false);
    else this.#armFlush();
  }

  /** Writes what is buffered `flushIntervalMs` from now, unless a timer is set already. */
  #armFlush(): void {
    this.#flushTimer ??= unref(setTimeout(() => this.#kick(true), this.#interval));
  }

  async flush(): Promise<void> {
    const target = this.#recorded;
    // Rows leave the buffer in order (written or dropped), so once that many have left, every
    // row recorded before this call has.
    while (this.#written + this.#dropped < target) await this.#drain(true);
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

  /** A background drain (`all`: down to the last row, else full batches only); its failure is reported by event and retried, never thrown. */
  #kick(all: boolean): void {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    this.#drain(all).catch(() => {});
  }

  /**
   * Writes the buffer batch by batch, one drain at a time: until it is empty (`all`: a flush, the
   * interval's timer, a retry), or while it holds a full batch (the size trigger). Rows recorded
   * during a write wait for their batch to fill or for the interval, rather than going at once in
   * a smaller one: under load that kept batches at what arrives during one write (~100 decisions on
   * the embedded store), and a statement costs the store's thread about as much as 100 decisions.
   */
  #drain(all: boolean): Promise<void> {
    // (A drain of full batches under way goes on to the last row once one is asked for.)
    if (all) this.#drainAll = true;
    this.#draining ??= (async () => {
      try {
        while (this.#buffer.length >= (this.#drainAll ? 1 : this.#batchSize)) {
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
        if (this.#buffer.length > 0) this.#armFlush();
        else {
          clearTimeout(this.#flushTimer);
          this.#flushTimer = undefined;
        }
      } finally {
        this.#draining = undefined;
        this.#drainAll = false;
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
        this.#drain(true).catch(() => {});
      }, delay),
    );
  }
}

/** Timers never keep the process alive: close() is what writes the last rows. */
function unref(t: NodeJS.Timeout): NodeJS.Timeout {
  t.unref();
  return t;
}
