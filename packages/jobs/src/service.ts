// The job pipeline of one process, composed over its ports (store, blob store, bus, scheduler,
// verifier): intake, worker, aggregator, the greylist scheduler, restart recovery, and the use
// cases the API translates to HTTP (create, read, list, cancel, download). A route never touches
// the pipeline's parts directly.
//
// Restart recovery (start()): every queued or processing job is resumed from the store alone.
// Its unique emails without a result row are published again; its deferred emails are due at
// their time (the scheduler reads them from the store); a job whose every email is done but that
// was not finalized is finalized; a canceled job whose partial CSV was not written gets it. A
// kill -9 at any moment therefore loses nothing, and nothing is done twice that counts: result
// rows are written once per (job, idx) and the settlement happens once (JobsRepo).

import { DecisionRelay } from './pipeline/decision-relay.ts';
import { jobCredits } from '@svc/billing';
import { isJobId, ServiceError, type JobState, type Network } from '@svc/contracts';
import { DEFAULT_CLAIM_LEASE_MS, keepRenewing, type Analytics, type BlobStore, type InFinalTx, type JobRecord, type Store } from '@svc/store';
import type { Readable } from 'node:stream';
import { JobAggregator, silentLogger, type JobsLogger, type OnFinal } from './pipeline/aggregator.ts';
import { intake, type IntakeInput, type IntakeRow } from './intake/intake.ts';
import type { WorkItem } from '@svc/contracts';
import { publishWork } from './pipeline/publish.ts';
import { validateWebhookUrl } from '@svc/egress';
import { TimerScheduler, type Bus, type Scheduler, type SchedulerTimers } from '@svc/bus';
import { parseSegments } from './csv/render.ts';
import { resultsCsv, type RowRenderer } from './csv/results-csv.ts';
import { openRows } from './intake/rows.ts';
import { signQuery, verifyQuery } from './signed-urls.ts';
import { jobStatus, downloadable, type JobStatus } from './status.ts';
import { JobWorker, type JobVerifier } from './pipeline/worker.ts';

/** Emails per JSON job. */
export const MAX_JOB_EMAILS = 500_000;

export interface JobsServiceOptions {
  store: Store;
  blobs: BlobStore;
  bus: Bus;
  verifier: JobVerifier;
  /** SVC_PUBLIC_URL: the base of signed download URLs and of `download.url`. */
  publicUrl: string;
  /** SVC_SECRET (or the generated one): the HMAC key of signed URLs. */
  secret: string;
  /** SVC_JOB_GREYLIST_DELAY_MS (default 300000). */
  greylistDelayMs?: number;
  /** SVC_JOB_GREYLIST_ATTEMPTS (default 3). */
  greylistAttempts?: number;
  /** SVC_WEBHOOK_ALLOW_PRIVATE: webhook URLs naming loopback or private addresses are accepted. */
  allowPrivateWebhooks?: boolean;
  /** SVC_OUTBOUND_ALLOW_NETWORKS: webhook URLs naming addresses of these networks are accepted too. */
  allowNetworks?: readonly Network[];
  /**
   * The bus keeps published messages across restarts (Kafka): a starting process resumes only the
   * jobs whose work was never published (an intake that died first), not every unfinished job.
   * The in-process bus loses its messages with the process: every unfinished job is resumed.
   */
  durableBus?: boolean;
  /**
   * Work messages probed at once (default 16, the Kafka topics' default partition count). A
   * message waits for all of its up to 500 addresses, so few lanes leave most MX hosts idle: a
   * 2,000-address job on bench/engine's world did 655/s with 4, 850-940/s with 16 (load 8-10).
   */
  workPartitions?: number;
  /** Results messages recorded at once (default 2). */
  resultPartitions?: number;
  /**
   * SVC_BUS_MAX_QUEUED: messages the MX topic and the results topic each hold waiting before a
   * publisher waits (SubscribeOptions.maxQueued; the in-process bus, Kafka ignores it). The work
   * topic is not bounded: an intake publishes all of its work before this process probes any.
   */
  busMaxQueued?: number;
  /** Renders results CSV rows off the event loop (the CSV pool); inline when absent. */
  renderer?: RowRenderer;
  /**
   * Called after a job became final (completed or failed) and that was committed; not durable (a
   * crash between the commit and the call skips it): put what must happen in `onFinalTx`.
   */
  onFinal?: OnFinal;
  /** Runs inside the transaction that completes or fails a job (a webhook outbox row commits with it). */
  onFinalTx?: InFinalTx;
  /** This process owns all the work (embedded): re-probe leases left by a dead run are released at start. */
  ownsAllWork?: boolean;
  /** Run the worker, aggregator and scheduler here (default true); false: take jobs only (a front). */
  consume?: boolean;
  /** How long a signed download URL stays valid (default 1 h). */
  downloadTtlMs?: number;
  /** How long a taken re-probe is leased before it is due again (default 10 min). */
  reprobeLeaseMs?: number;
  /**
   * SVC_CLAIM_LEASE_MS (default 15 s): how long the claim on publishing a job's work outlives the
   * process holding it. A consuming process looks every third of it for jobs whose claim ran out
   * with their work unpublished (their front died mid-intake) and publishes what is missing.
   */
  claimLeaseMs?: number;
  /** The greylist re-probes' scheduler (default a TimerScheduler over the store's deferred results, on `now` and `timers`). */
  scheduler?: Scheduler;
  /**
   * The timers the default scheduler wakes up with for the re-probes (Node's by default). With
   * `now` they are the re-probes' clock: a test moves both forward instead of waiting.
   */
  timers?: SchedulerTimers;
  /** Analytics: every unique email's final result is a decision, queued with its result (the decision outbox) and shipped here by a relay. */
  analytics?: Pick<Analytics, 'recordNow'>;
  log?: JobsLogger;
  now?: () => number;
}

/** The signed path of a job's results CSV (no API key: the signature authorises it). */
export const resultsPath = (jobId: string): string => `/v1/csv/jobs/${jobId}/results.csv`;

export interface DownloadLink {
  url: string;
  expires_at: string;
}

const ACTIVE: readonly JobState[] = ['queued', 'processing'];

/** Stored job input older than this without a job is an orphan (and the orphan sweep's period). */
export const ORPHAN_BLOB_AGE_MS = 3_600_000;

export class JobsService {
  readonly scheduler: Scheduler;
  readonly aggregator: JobAggregator;
  readonly worker: JobWorker;
  /** Ships the decision outbox to analytics (with `analytics`). */
  readonly relay: DecisionRelay | undefined;
  readonly #o: JobsServiceOptions & { log: JobsLogger; now: () => number };
  #started = false;
  #background = new Set<Promise<unknown>>();
  #sweepTimer: NodeJS.Timeout | undefined;
  #orphanTimer: NodeJS.Timeout | undefined;
  /** Job intakes running in this process, and the probes waiting for them to end. */
  #intakes = 0;
  #intakeWaiters: Array<() => void> = [];
  #sweeping: Promise<void> | undefined;
  #stopped = false;

  constructor(opts: JobsServiceOptions) {
    this.#o = { ...opts, log: opts.log ?? silentLogger, now: opts.now ?? Date.now };
    const { store, blobs, bus, log } = this.#o;
    if (opts.analytics) this.relay = new DecisionRelay({ store, analytics: opts.analytics, log });
    this.scheduler =
      opts.scheduler ??
      new TimerScheduler(
        {
          nextDue: () => store.jobs.nextDeferredAt(),
          runDue: (now) => this.#reprobeDue(now),
        },
        { onError: (err) => log.error({ err }, 'greylist scheduler failed'), now: this.#o.now, ...(opts.timers ? { timers: opts.timers } : {}) },
      );
    this.aggregator = new JobAggregator({
      store,
      blobs,
      bus,
      scheduler: this.scheduler,
      log,
      ...(opts.renderer ? { renderer: opts.renderer } : {}),
      ...(opts.onFinal ? { onFinal: opts.onFinal } : {}),
      ...(opts.onFinalTx ? { onFinalTx: opts.onFinalTx } : {}),
      ...(this.relay ? { analytics: this.relay } : {}),
      ...(opts.busMaxQueued ? { maxQueued: opts.busMaxQueued } : {}),
    });
    this.worker = new JobWorker({
      ...(opts.busMaxQueued ? { maxQueued: opts.busMaxQueued } : {}),
      store,
      verifier: opts.verifier,
      bus,
      gate: () => this.#intakesDone(),
      greylistDelayMs: opts.greylistDelayMs ?? 300_000,
      greylistAttempts: opts.greylistAttempts ?? 3,
      now: this.#o.now,
    });
  }

  /** Subscribes the worker and aggregator, resumes every unfinished job, arms the scheduler. */
  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    if (this.#o.consume === false) return;
    const { store, log } = this.#o;
    this.worker.start(this.#o.workPartitions ?? 16);
    this.aggregator.start(this.#o.resultPartitions ?? 2);
    this.relay?.start();
    if (this.#o.ownsAllWork) await store.jobs.releaseLeases();
    for (const job of await store.jobs.listUnfinished()) {
      try {
        if (job.processed >= job.unique_emails) {
          log.info({ job_id: job.id }, 'resuming job: finalizing');
          await this.aggregator.complete(job.id);
        } else if (!this.#o.durableBus) await this.#resume(job);
        // A durable bus still holds the work of a job that published it; one whose work is not
        // published yet is claimed by the sweep below once its intake's claim runs out.
      } catch (err) {
        log.error({ err, job_id: job.id }, 'could not resume job');
      }
    }
    for (const job of await store.jobs.listCanceledUnrendered()) this.#inBackground(this.aggregator.renderCanceled(job), job.id, 'partial results of a canceled job');
    await this.scheduler.start();
    await this.sweepUnpublished();
    this.#sweepTimer = setInterval(() => void this.sweepUnpublished(), Math.max(100, Math.floor(this.#lease / 3)));
    this.#sweepTimer.unref();
    const orphans = () => this.#inBackground(this.sweepOrphanBlobs(), 'blobs', 'sweep of orphaned job blobs');
    orphans();
    this.#orphanTimer = setInterval(orphans, ORPHAN_BLOB_AGE_MS);
    this.#orphanTimer.unref();
  }

  /**
   * Deletes the blobs under `jobs/<id>/` stored more than `olderThanMs` ago (default 1 h) whose
   * job does not exist: the input an intake stored before its process died, ahead of creating the
   * job (a retry with the same Idempotency-Key makes a new job). Returns how many it deleted.
   */
  async sweepOrphanBlobs(olderThanMs = ORPHAN_BLOB_AGE_MS): Promise<number> {
    const { store, blobs, log } = this.#o;
    const cutoff = this.#o.now() - olderThanMs;
    const byJob = new Map<string, string[]>();
    for (const e of await blobs.list('jobs/')) {
      if (e.storedAt.getTime() > cutoff) continue;
      const id = e.key.split('/')[1]!;
      const keys = byJob.get(id);
      if (keys) keys.push(e.key);
      else byJob.set(id, [e.key]);
    }
    let deleted = 0;
    let orphans = 0;
    for (const [id, keys] of byJob) {
      if (await store.jobs.byId(id)) continue;
      orphans++;
      for (const key of keys) {
        await blobs.delete(key);
        deleted++;
      }
    }
    if (deleted > 0) log.info({ deleted, orphans }, 'deleted the stored input of intakes that died before creating their job');
    return deleted;
  }

  /** Stops the scheduler and the unpublished sweep; the bus (closed by the owner) stops the worker and aggregator. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#sweepTimer);
    clearInterval(this.#orphanTimer);
    await this.#sweeping;
    await this.scheduler.stop();
    await Promise.allSettled([...this.#background]);
  }

  get #lease(): number {
    return this.#o.claimLeaseMs ?? DEFAULT_CLAIM_LEASE_MS;
  }

  /**
   * Publishes the missing work of every running job whose work is not on the bus and whose
   * publish claim ran out (its intake's process died, or publishing failed), one claim per job
   * across processes. Runs at start and every third of the lease; one sweep at a time.
   */
  sweepUnpublished(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#sweeping ??= (async () => {
      const { store, log } = this.#o;
      try {
        for (;;) {
          const jobs = await store.jobs.claimUnpublished(this.#lease, 20);
          for (const job of jobs) {
            log.info({ job_id: job.id }, 'taking over a job whose work was not published');
            try {
              await this.#resume(job);
            } catch (err) {
              log.error({ err, job_id: job.id }, 'could not publish the work of a taken-over job; tried again when the claim runs out');
            }
          }
          if (jobs.length < 20 || this.#stopped) return;
        }
      } catch (err) {
        log.error({ err }, 'sweep of unpublished jobs failed');
      } finally {
        this.#sweeping = undefined;
      }
    })();
    return this.#sweeping;
  }

  async #resume(job: JobRecord): Promise<void> {
    const { store, blobs, bus, log } = this.#o;
    if (job.processed >= job.unique_emails) {
      log.info({ job_id: job.id }, 'resuming job: finalizing');
      await this.aggregator.complete(job.id);
      return;
    }
    const rows = job.input_key ? await openRows(blobs, job.input_key) : undefined;
    if (!rows) {
      await this.aggregator.fail(job.id, 'the stored input of the job is missing');
      return;
    }
    const have = new Set(await store.jobs.resultIdxs(job.id));
    const emailAt = rows.header.email_index;
    const missing: WorkItem[] = [];
    let next = 0;
    for await (const batch of rows.batches()) {
      for (const r of batch) {
        if (r.idx !== next) continue; // a repeat of an earlier email
        next++;
        if (!have.has(r.idx)) missing.push([r.idx, (r.fields[emailAt] ?? '').trim(), 0]);
      }
    }
    log.info({ job_id: job.id, unique: job.unique_emails, republished: missing.length }, 'resuming job');
    const stopRenewing = keepRenewing(this.#lease, () => store.jobs.renewPublish(job.id, this.#lease));
    try {
      await publishWork(bus, job.id, missing, job.account_id);
    } finally {
      stopRenewing();
    }
    await store.jobs.markWorkPublished(job.id);
  }

  async #reprobeDue(now: Date): Promise<void> {
    const { store, bus } = this.#o;
    for (;;) {
      const due = await store.jobs.claimDue(now, 5000, this.#o.reprobeLeaseMs ?? 600_000);
      if (due.length === 0) return;
      const byJob = new Map<string, { accountId: string; items: WorkItem[] }>();
      for (const d of due) {
        let job = byJob.get(d.jobId);
        if (!job) byJob.set(d.jobId, (job = { accountId: d.accountId, items: [] }));
        job.items.push([d.idx, d.email, d.attempts]);
      }
      for (const [jobId, job] of byJob) await publishWork(bus, jobId, job.items, job.accountId);
      if (due.length < 5000) return;
    }
  }

  #inBackground(p: Promise<unknown>, jobId: string, what: string): void {
    const tracked = p.catch((err: unknown) => this.#o.log.error({ err, job_id: jobId }, `${what} failed`));
    this.#background.add(tracked);
    void tracked.finally(() => this.#background.delete(tracked));
  }

  // ------------------------------------------------------------------------------------------
  // Use cases

  /** Checks a job's webhook_url (400 invalid_webhook_url); the URL as given. */
  checkWebhookUrl(value: unknown): string {
    const r = validateWebhookUrl(value, { allowPrivate: this.#o.allowPrivateWebhooks ?? false, ...(this.#o.allowNetworks ? { allowNetworks: this.#o.allowNetworks } : {}) });
    if (!r.ok) throw new ServiceError('invalid_webhook_url', r.message);
    return r.url;
  }

  /** A JSON job (POST /v1/validate/batch): 1-500,000 strings, in input order. */
  async createJsonJob(accountId: string, emails: readonly string[], opts: { webhookUrl?: string | null; completion?: IntakeInput['completion'] } = {}): Promise<JobRecord> {
    if (emails.length === 0) throw new ServiceError('emails_required');
    if (emails.length > MAX_JOB_EMAILS) throw new ServiceError('too_many_emails', `maximum ${MAX_JOB_EMAILS.toLocaleString('en-US')} emails per job`);
    const webhookUrl = opts.webhookUrl === undefined || opts.webhookUrl === null ? null : this.checkWebhookUrl(opts.webhookUrl);
    return this.createJob({
      accountId,
      source: 'json',
      columns: ['email'],
      emailIndex: 0,
      rows: chunks(emails),
      webhookUrl,
      ...(opts.completion ? { completion: opts.completion } : {}),
    });
  }

  /**
   * Resolves when no job intake is running in this process. An all-in-one process (SVC_ROLE=all)
   * probes only between intakes: a 500,000-address intake takes seconds, and probing the work it
   * has published so far alongside it made it three times slower, put requests served meanwhile
   * at a 0.2-1.4 s p99 and the process at 730-770 MiB (bench/jobs/ingest.ts, workers on).
   */
  #intakesDone(): Promise<void> {
    return this.#intakes === 0 ? Promise.resolve() : new Promise((resolve) => this.#intakeWaiters.push(resolve));
  }

  /** Any job's intake (the CSV job's start-processing comes through here too); see intake.ts. */
  async createJob(input: IntakeInput): Promise<JobRecord> {
    this.#intakes++;
    try {
      return await this.#intake(input);
    } finally {
      if (--this.#intakes === 0) for (const go of this.#intakeWaiters.splice(0)) go();
    }
  }

  #intake(input: IntakeInput): Promise<JobRecord> {
    const { store, blobs, bus, log } = this.#o;
    return intake(
      { store, blobs, bus, claimLeaseMs: this.#lease, onPublishError: (err, jobId) => log.error({ err, job_id: jobId }, 'publishing job work failed; a worker publishes it once this claim runs out') },
      input,
    );
  }

  /** The account's job (404 job_not_found for an unknown id or another account's job). */
  async get(accountId: string, id: string): Promise<JobRecord> {
    // An id that is not one of ours is unknown: it never reaches the store (a NUL in it would
    // fail the query).
    const job = isJobId(id) ? await this.#o.store.jobs.get(accountId, id) : undefined;
    if (!job) throw new ServiceError('job_not_found');
    return job;
  }

  /** A page of the account's jobs, newest first (GET /v1/csv/jobs); `limit` 1-100 (default 20); a bad limit or a cursor that is not ours: 400 invalid_request. */
  async list(accountId: string, opts: { limit?: number; cursor?: string; status?: JobState }): Promise<{ jobs: JobRecord[]; next_cursor: string | null }> {
    const limit = opts.limit ?? 20;
    if (!(Number.isInteger(limit) && limit >= 1 && limit <= 100)) throw new ServiceError('invalid_request', 'limit must be an integer from 1 to 100');
    try {
      const page = await this.#o.store.jobs.list(accountId, { ...opts, limit });
      return { jobs: page.jobs, next_cursor: page.next ?? null };
    } catch (err) {
      if (err instanceof RangeError) throw new ServiceError('invalid_request', 'cursor is not a cursor of this list');
      throw err;
    }
  }

  /**
   * Cancels a queued or processing job (DELETE /v1/csv/jobs/{id}): work in flight for it is
   * dropped, the High-Value Validations already done are charged and the rest refunded; its
   * partial results CSV is written in the background. A finished job: 409 invalid_job_state.
   */
  async cancel(accountId: string, id: string): Promise<JobRecord> {
    if (!isJobId(id)) throw new ServiceError('job_not_found');
    const r = await this.#o.store.jobs.cancel(accountId, id, jobCredits);
    if (!r.ok) throw new ServiceError(r.reason === 'not_found' ? 'job_not_found' : 'invalid_job_state', r.reason === 'invalid_state' ? `The job is ${r.job?.status}; only a queued or processing job can be canceled` : undefined);
    if (r.job.input_key) this.#inBackground(this.aggregator.renderCanceled(r.job), r.job.id, 'partial results of a canceled job');
    return r.job;
  }

  /** The status resource of a job. */
  status(job: JobRecord): JobStatus {
    return jobStatus(job, this.#o.publicUrl);
  }

  /**
   * A signed URL of the job's results CSV (GET /v1/csv/jobs/{id}/download), valid for an hour,
   * optionally of some results only (`segment`: a comma list of result values; bad → 400
   * invalid_request). Before the results exist: 409 invalid_job_state.
   */
  async downloadLink(accountId: string, id: string, segment?: string): Promise<DownloadLink> {
    const seg = parseSegments(segment);
    if (!seg.ok) throw new ServiceError('invalid_request', seg.message);
    const job = await this.get(accountId, id);
    if (!downloadable(job)) throw new ServiceError('invalid_job_state', `The job is ${job.status}; its results can be downloaded once it is completed`);
    const expires = new Date(this.#o.now() + (this.#o.downloadTtlMs ?? 3_600_000));
    const path = resultsPath(job.id);
    const params: Record<string, string> = seg.segments ? { segment: [...seg.segments].join(',') } : {};
    return { url: `${this.#o.publicUrl}${path}?${signQuery(this.#o.secret, 'GET', path, params, expires)}`, expires_at: new Date(Math.floor(expires.getTime() / 1000) * 1000).toISOString() };
  }

  /**
   * The results CSV behind a signed URL: the signature checked first (403 invalid_signature for a
   * bad or expired one), then the job. Without a segment it is the stored file; with one, it is
   * rendered again from the stored rows and results, keeping only those results.
   */
  async openResults(id: string, query: Record<string, unknown>): Promise<{ job: JobRecord; body: Readable | AsyncIterable<string> }> {
    const check = verifyQuery(this.#o.secret, 'GET', resultsPath(id), query, this.#o.now());
    if (check !== 'ok') throw new ServiceError('invalid_signature', check === 'expired' ? 'The signed URL has expired; ask for a new one' : undefined);
    const job = isJobId(id) ? await this.#o.store.jobs.byId(id) : undefined;
    if (!job) throw new ServiceError('job_not_found');
    if (!downloadable(job)) throw new ServiceError('invalid_job_state');
    const seg = parseSegments(typeof query.segment === 'string' ? query.segment : undefined);
    if (!seg.ok) throw new ServiceError('invalid_request', seg.message);
    if (seg.segments) return { job, body: resultsCsv(this.#o, job, seg.segments) };
    const stored = await this.#o.blobs.get(job.results_key!);
    if (!stored) throw new Error(`job ${job.id}: results ${job.results_key} missing`);
    return { job, body: stored };
  }

  /** Jobs still running (operators). */
  unfinished(): Promise<JobRecord[]> {
    return this.#o.store.jobs.listUnfinished();
  }

  /** Whether a job is still running. */
  static running(job: Pick<JobRecord, 'status'>): boolean {
    return ACTIVE.includes(job.status);
  }
}

/** The JSON job's strings as intake rows, in chunks: the input column shows the string as sent, the email is trimmed. */
function* chunks(emails: readonly string[]): Generator<IntakeRow[]> {
  for (let i = 0; i < emails.length; i += 2000) {
    const out: IntakeRow[] = [];
    for (let j = i; j < Math.min(i + 2000, emails.length); j++) out.push({ fields: [emails[j]!], email: emails[j]!.trim() });
    yield out;
  }
}
