// The job aggregator (key = job id, so one aggregator owns a job): writes results idempotently (job + row), wakes
// the scheduler for greylisted emails, and once every unique email is done renders the results
// CSV into the blob store and finalizes the job exactly once (credits settled, `completed`, and the
// in-transaction hook: a webhook outbox row), then calls the after-commit hook.
//
// Every step may run twice after a crash and changes nothing the second time: a result row is
// written once per (job, idx), the CSV is rendered from stored data only (same bytes, replaced
// atomically), and only the finalize that moves the job from running to completed settles.

import { addressIdentity, jobCredits } from '@svc/billing';
import type { BlobStore, Decision, InFinalTx, JobDecisions, JobRecord, JobResultInput, Store } from '@svc/store';
import { isResultsMessage, type ResultItem } from '@svc/contracts';
import { RESULTS_TOPIC } from '@svc/bus';
import type { Bus, BusMessage, Scheduler } from '@svc/bus';
import { resultsCsv, type RowRenderer } from '../csv/results-csv.ts';
import { resultsKey } from '../intake/rows.ts';
import { failedResult } from './worker.ts';

/** The part of a pino logger the job pipeline uses. */
export interface JobsLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export const silentLogger: JobsLogger = { info: () => {}, warn: () => {}, error: () => {} };

/** Called after a job became final (completed or failed) and that was committed. */
export type OnFinal = (job: JobRecord) => void | Promise<void>;

export interface AggregatorOptions {
  store: Pick<Store, 'jobs'>;
  blobs: BlobStore;
  bus: Bus;
  scheduler: Scheduler;
  renderer?: RowRenderer;
  onFinal?: OnFinal;
  onFinalTx?: InFinalTx;
  /**
   * Analytics: each unique email's final result is a decision (id `<job id>:<idx>`), queued in the
   * decision outbox with its row, then shipped by the relay (kicked after each write).
   */
  analytics?: { kick(): void };
  log: JobsLogger;
  /** Results messages waiting on the bus before the probe stage waits to publish more (SubscribeOptions.maxQueued; default: no bound). */
  maxQueued?: number;
}

/**
 * The decisions of a results message's final rows (a deferred row is decided later). A
 * redelivered message makes the same ids, which analytics counts once.
 */
export function jobDecisions(jobId: string, accountId: string, results: readonly ResultItem[], decidedAt = new Date()): Decision[] {
  const out: Decision[] = [];
  for (const r of results) {
    if (r.state !== 'done') continue;
    out.push({
      id: `${jobId}:${r.idx}`,
      account_id: accountId,
      ...addressIdentity(r.email),
      result: r.verdict.result,
      reason_code: r.verdict.reason_code,
      layer: r.verdict.validation_layer,
      mx_host: r.mx_host ?? null,
      latency_ms: r.latency_ms ?? 0,
      job_id: jobId,
      source: 'job',
      credits_charged: r.verdict.credits_charged,
      decided_at: decidedAt,
    });
  }
  return out;
}

const RUNNING = new Set(['queued', 'processing']);

export class JobAggregator {
  #finishing = new Map<string, Promise<void>>();

  constructor(private readonly opts: AggregatorOptions) {}

  start(partitions: number): void {
    this.opts.bus.subscribe(RESULTS_TOPIC, (m) => this.handle(m), { partitions, deadLetter: (m) => this.recordEach(m), ...(this.opts.maxQueued ? { maxQueued: this.opts.maxQueued } : {}) });
  }

  async handle(message: BusMessage): Promise<void> {
    if (!isResultsMessage(message)) throw new Error(`unknown results message v${message.v}`);
    await this.#record(message.job_id, message.results);
  }

  /**
   * The dead-letter answer of a results message that failed every attempt: its rows are written
   * one at a time, so only a row that fails alone loses its verdict; that row is written
   * `unknown`, reason `processing_failed`, free (its credit released when the job settles). A
   * failure of that write too is thrown (an outage: the bus tries the answer again).
   */
  async recordEach(message: BusMessage): Promise<void> {
    if (!isResultsMessage(message)) return; // not ours to answer: parked, nothing waits for it
    for (const r of message.results) {
      try {
        await this.#record(message.job_id, [r]);
      } catch (err) {
        this.opts.log.error({ err, job_id: message.job_id, idx: r.idx }, 'job result refused: answered unknown (processing_failed)');
        await this.#record(message.job_id, [failedResult(r.idx, r.email, r.attempts)]);
      }
    }
  }

  async #record(jobId: string, results: readonly ResultItem[]): Promise<void> {
    const rows: JobResultInput[] = results.map((r) => ({
      idx: r.idx,
      email: r.email,
      verdict: r.verdict,
      chargeable: r.chargeable,
      attempts: r.attempts,
      state: r.state,
      ...(r.next_attempt_at ? { nextAttemptAt: new Date(r.next_attempt_at) } : {}),
    }));
    const relay = this.opts.analytics;
    const decisions: JobDecisions | undefined = relay
      ? (job, doneIdx) => {
          const done = new Set(doneIdx);
          return jobDecisions(jobId, job.account_id, results.filter((r) => done.has(r.idx)));
        }
      : undefined;
    const out = await this.opts.store.jobs.recordResults(jobId, rows, decisions ? { decisions } : {});
    if (!out.accepted || !out.job) return; // canceled or final: late results are dropped
    if (out.finished > 0) relay?.kick();
    let soonest: number | undefined;
    for (const r of rows) if (r.nextAttemptAt && (soonest === undefined || r.nextAttemptAt.getTime() < soonest)) soonest = r.nextAttemptAt.getTime();
    if (soonest !== undefined) this.opts.scheduler.wake(new Date(soonest));
    if (out.job.processed >= out.job.unique_emails) await this.complete(out.job.id);
  }

  /** Renders and finalizes a job whose every unique email is done (once per process at a time). */
  complete(jobId: string): Promise<void> {
    let p = this.#finishing.get(jobId);
    if (!p) {
      p = this.#complete(jobId).finally(() => this.#finishing.delete(jobId));
      this.#finishing.set(jobId, p);
    }
    return p;
  }

  async #complete(jobId: string): Promise<void> {
    const { store, blobs, log } = this.opts;
    const job = await store.jobs.byId(jobId);
    if (!job || !RUNNING.has(job.status) || job.processed < job.unique_emails) return;
    const key = resultsKey(jobId);
    const { bytes } = await blobs.put(key, resultsCsv(this.opts, job));
    const done = await store.jobs.finalize(jobId, key, jobCredits, this.opts.onFinalTx);
    if (!done) return;
    log.info({ job_id: jobId, rows: done.total_rows, unique: done.unique_emails, charged: done.credits_charged, refunded: done.credits_refunded, bytes }, 'job completed');
    await this.#after(done);
  }

  /** Fails a running job (its whole reservation refunded), once. */
  async fail(jobId: string, error: string): Promise<JobRecord | undefined> {
    const failed = await this.opts.store.jobs.fail(jobId, error, jobCredits, this.opts.onFinalTx);
    if (failed) {
      this.opts.log.error({ job_id: jobId, error }, 'job failed');
      await this.#after(failed);
    }
    return failed;
  }

  /** Writes a canceled job's partial results CSV (what was validated before the cancel). */
  async renderCanceled(job: JobRecord): Promise<void> {
    const key = resultsKey(job.id);
    await this.opts.blobs.put(key, resultsCsv(this.opts, job));
    await this.opts.store.jobs.setResultsKey(job.id, key);
  }

  async #after(job: JobRecord): Promise<void> {
    try {
      await this.opts.onFinal?.(job);
    } catch (err) {
      this.opts.log.error({ err, job_id: job.id }, 'onFinal hook failed');
    }
  }
}
