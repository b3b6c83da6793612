// Asynchronous validation jobs (migration 005): the job rows with their progress counters and
// credit reservation, and one result row per unique email. Every money move happens in the same
// transaction as the job's state change, through the JobCredits hook the caller hands in (the
// amounts are @svc/billing's rules; repos/credits.ts):
// - create / queue: the hold and the job row commit together (a crash leaves neither or both);
// - recordResults: rows inserted once per (job, idx) and the counters advanced by exactly the rows
//   that statement inserted or finished, so a result delivered twice counts once;
// - finalize / fail / cancel: the settlement and the final state together, exactly once (the job
//   row is locked, and only a running job moves).

import type { Decision } from '../analytics/analytics.ts';
import { enqueueDecisions } from './decision-outbox.ts';
import { insertDecisionPacks } from '../analytics/sql-analytics.ts';
import { checkDecision } from '../analytics/validate.ts';
import { dbJson, dbText } from '../db/text.ts';
import { JOB_COUNTERS, countResult, emptyJobCounters, type JobCounters, type JobState, type ResultItem, type ValidationResultBody } from '@svc/contracts';
import type { Db, Queryable } from '../db/db.ts';
import { completeIn, type IdempotentCompletion } from './idempotency.ts';
import { DEFAULT_CLAIM_LEASE_MS } from '../db/lease.ts';
import type { JobCredits, JobEnd } from './credits.ts';

export type JobSource = 'json' | 'csv';

/** One row of `jobs`: its counters are columns (JOB_COUNTERS). */
export interface JobRecord extends JobCounters {
  id: string;
  account_id: string;
  status: JobState;
  source: JobSource;
  filename: string | null;
  webhook_url: string | null;
  email_column: string | null;
  total_rows: number;
  unique_emails: number;
  reservation_id: string | null;
  credits_reserved: number;
  processed: number;
  credits_charged: number;
  credits_refunded: number;
  finalized: boolean;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  error: string | null;
  input_key: string | null;
  results_key: string | null;
}

/** What a job is created with: its input is in the blob store already (inputKey). */
export interface NewJob {
  id: string;
  accountId: string;
  source: JobSource;
  filename?: string | null;
  webhookUrl?: string | null;
  emailColumn?: string | null;
  totalRows: number;
  uniqueEmails: number;
  inputKey: string;
  /** The creator's claim on publishing the job's work (default 15 s; renewPublish extends it). */
  publishLeaseMs?: number;
}

/** The work a job is queued with (its counts and input), for a job that was awaiting its upload. */
export type QueuedInput = Pick<NewJob, 'totalRows' | 'uniqueEmails' | 'inputKey' | 'publishLeaseMs'> & { emailColumn?: string | null };


export type CreateJobResult = { ok: true; job: JobRecord } | { ok: false; available: number };
export type QueueJobResult = CreateJobResult | { ok: false; reason: 'not_found' | 'invalid_state'; job?: JobRecord };
export type CancelJobResult = { ok: true; job: JobRecord } | { ok: false; reason: 'not_found' | 'invalid_state'; job?: JobRecord };

/**
 * The result of one unique email, as the aggregator records it: a results message's item (its
 * priced verdict, attempts and state), with a deferred email's next probe as a Date.
 */
export type JobResultInput = Pick<ResultItem, 'idx' | 'email' | 'verdict' | 'chargeable' | 'attempts' | 'state'> & { nextAttemptAt?: Date };

export interface RecordOutcome {
  /** False: the job is no longer running (canceled, failed, completed); nothing was written. */
  accepted: boolean;
  /** Rows this call wrote (inserted, or a deferred row moved on). */
  written: number;
  /** Of those, rows that are now done (counted in processed). */
  finished: number;
  /** The job after the call (undefined when it does not exist). */
  job?: JobRecord;
}

/** A stored result, for rendering the results CSV. */
export interface StoredResult {
  idx: number;
  email: string;
  verdict: ValidationResultBody;
  state: 'done' | 'deferred';
}

/** A deferred email whose re-probe is due. */
export interface DueRow {
  jobId: string;
  accountId: string;
  idx: number;
  email: string;
  attempts: number;
}

/** The analytics decisions of a job's rows that this write made done (by idx): queued in the decision outbox in the write's transaction. */
export type JobDecisions = (job: JobRecord, doneIdx: readonly number[]) => Decision[];

/** Runs inside the transaction that makes a job final (an outbox row commits with it, or not at all). */
export type InFinalTx = (tx: Queryable, job: JobRecord) => Promise<void>;

const ACTIVE = "('queued', 'processing')";

const COLUMNS = `id, account_id, status, source, filename, webhook_url, email_column, total_rows, unique_emails, reservation_id,
  credits_reserved, processed, ${JOB_COUNTERS.join(', ')},
  credits_charged, credits_refunded, finalized, created_at, started_at, completed_at, error, input_key, results_key`;

/** `valid = valid + $3, …`: each counter advanced by a parameter, from $3 on. */
const COUNTER_ADDS = JOB_COUNTERS.map((k, i) => `${k} = ${k} + $${i + 3}`).join(', ');

const dateOrNull = (d: unknown): Date | null => (d === null || d === undefined ? null : new Date(d as string));

function toJob(r: Record<string, unknown>): JobRecord {
  return { ...(r as unknown as JobRecord), created_at: new Date(r.created_at as string), started_at: dateOrNull(r.started_at), completed_at: dateOrNull(r.completed_at) };
}

/** Opaque list cursor: the (created_at, id) of the last job of a page, microseconds kept. */
export function encodeJobCursor(createdKey: string, id: string): string {
  return Buffer.from(JSON.stringify([createdKey, id])).toString('base64url');
}

/** The (created_at, id) of a cursor, or undefined when it is not one of ours. */
export function decodeJobCursor(cursor: string): { createdKey: string; id: string } | undefined {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (!Array.isArray(v) || v.length !== 2) return undefined;
    const [createdKey, id] = v as unknown[];
    if (typeof createdKey !== 'string' || typeof id !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(createdKey) || Number.isNaN(Date.parse(createdKey)) || id.length > 64) return undefined;
    return { createdKey, id };
  } catch {
    return undefined;
  }
}

export class JobsRepo {
  /**
   * Where recordResults puts the decisions of the rows it makes done: false, the decision outbox
   * (a relay ships it to analytics wherever that is); true, the store's decision_packs itself, for
   * analytics on this database's table (Store.sqlAnalytics): the same transaction, without the
   * outbox's insert, lease and delete.
   */
  decisionsInTable = false;

  constructor(private readonly db: Db) {}

  /**
   * Records a job whose input is stored, and holds its credits (`credits_reserved`: what
   * `credits.reserve` held), in one transaction: `insufficient` (ok false, with the available
   * credits) writes nothing. `completes`: an idempotent request's response, recorded in the same
   * transaction.
   */
  async create(job: NewJob, credits: JobCredits, completes?: (job: JobRecord) => IdempotentCompletion): Promise<CreateJobResult> {
    return this.db.transaction(async (tx) => {
      const hold = await credits.reserve(tx, job.accountId, job.uniqueEmails);
      if (!hold.ok) return { ok: false as const, available: hold.available };
      const rows = await tx.query(
        `INSERT INTO jobs (id, account_id, status, source, filename, webhook_url, email_column, total_rows, unique_emails, reservation_id, credits_reserved, input_key, publish_claimed_until)
         VALUES ($1, $2, 'queued', $3, $4, $5, $6, $7, $8, $9, $12, $10, now() + make_interval(secs => $11::double precision / 1000)) RETURNING ${COLUMNS}`,
        [job.id, job.accountId, job.source, job.filename ?? null, job.webhookUrl ?? null, job.emailColumn ?? null, job.totalRows, job.uniqueEmails, hold.reservationId, job.inputKey, job.publishLeaseMs ?? DEFAULT_CLAIM_LEASE_MS, hold.amount],
      );
      const created = toJob(rows[0]!);
      if (completes) await completeIn(tx, completes(created));
      return { ok: true as const, job: created };
    });
  }

  /** A CSV job waiting for its upload (no input, no credits held yet). */
  async createAwaitingUpload(job: { id: string; accountId: string; filename: string; webhookUrl?: string | null }): Promise<JobRecord> {
    const rows = await this.db.query(
      `INSERT INTO jobs (id, account_id, status, source, filename, webhook_url) VALUES ($1, $2, 'awaiting_upload', 'csv', $3, $4) RETURNING ${COLUMNS}`,
      [job.id, job.accountId, job.filename, job.webhookUrl ?? null],
    );
    return toJob(rows[0]!);
  }

  /**
   * Moves a job awaiting its upload to `queued` with its input and counts, holding its credits,
   * in one transaction. Another account's job is not_found; a job not awaiting its upload (started
   * twice) is invalid_state.
   */
  /**
   * Claims an awaiting-upload batch for its intake (start-processing) for `leaseMs`: true when this
   * caller has it, false when the batch is unknown, another account's, no longer awaiting its
   * upload, or claimed by another intake whose lease has not run out. Across processes.
   */
  async claimIntake(accountId: string, id: string, leaseMs: number): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE jobs SET intake_claimed_until = now() + make_interval(secs => $3::double precision / 1000)
        WHERE id = $1 AND account_id = $2 AND status = 'awaiting_upload' AND (intake_claimed_until IS NULL OR intake_claimed_until <= now())
        RETURNING id`,
      [id, accountId, leaseMs],
    );
    return rows.length === 1;
  }

  /** Extends a held intake claim by `leaseMs` from now (false: the batch is no longer awaiting its upload). */
  async renewIntake(id: string, leaseMs: number): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE jobs SET intake_claimed_until = now() + make_interval(secs => $2::double precision / 1000)
        WHERE id = $1 AND status = 'awaiting_upload' AND intake_claimed_until IS NOT NULL RETURNING id`,
      [id, leaseMs],
    );
    return rows.length === 1;
  }

  /** Gives an intake claim back (the intake failed: the batch may be started again at once). */
  async releaseIntake(id: string): Promise<void> {
    await this.db.query(`UPDATE jobs SET intake_claimed_until = NULL WHERE id = $1`, [id]);
  }

  async queue(accountId: string, id: string, input: QueuedInput, credits: JobCredits, completes?: (job: JobRecord) => IdempotentCompletion): Promise<QueueJobResult> {
    return this.db.transaction(async (tx) => {
      const cur = await lockJob(tx, id, accountId);
      if (!cur) return { ok: false as const, reason: 'not_found' as const };
      if (cur.status !== 'awaiting_upload') return { ok: false as const, reason: 'invalid_state' as const, job: cur };
      const hold = await credits.reserve(tx, accountId, input.uniqueEmails);
      if (!hold.ok) return { ok: false as const, available: hold.available };
      const rows = await tx.query(
        `UPDATE jobs SET status = 'queued', total_rows = $2, unique_emails = $3, credits_reserved = $8, reservation_id = $4, input_key = $5, email_column = COALESCE($6, email_column),
                publish_claimed_until = now() + make_interval(secs => $7::double precision / 1000)
          WHERE id = $1 RETURNING ${COLUMNS}`,
        [id, input.totalRows, input.uniqueEmails, hold.reservationId, input.inputKey, input.emailColumn ?? null, input.publishLeaseMs ?? DEFAULT_CLAIM_LEASE_MS, hold.amount],
      );
      const job = toJob(rows[0]!);
      if (completes) await completeIn(tx, completes(job));
      return { ok: true as const, job };
    });
  }

  /** The job, if it belongs to the account. */
  async get(accountId: string, id: string): Promise<JobRecord | undefined> {
    const r = (await this.db.query(`SELECT ${COLUMNS} FROM jobs WHERE id = $1 AND account_id = $2`, [id, accountId]))[0];
    return r ? toJob(r) : undefined;
  }

  /** The job, whoever owns it (workers, the aggregator, operators). */
  async byId(id: string): Promise<JobRecord | undefined> {
    const r = (await this.db.query(`SELECT ${COLUMNS} FROM jobs WHERE id = $1`, [id]))[0];
    return r ? toJob(r) : undefined;
  }

  /**
   * The account's jobs, newest first, `limit` at a time; `cursor` is the `next` of the page before
   * (undefined after the last page). A cursor that is not ours throws RangeError.
   */
  async list(accountId: string | undefined, opts: { limit: number; cursor?: string; status?: JobState }): Promise<{ jobs: JobRecord[]; next?: string }> {
    const params: unknown[] = [opts.limit + 1];
    const where: string[] = [];
    if (accountId !== undefined) {
      params.push(accountId);
      where.push(`account_id = $${params.length}`);
    }
    if (opts.status) {
      params.push(opts.status);
      where.push(`status = $${params.length}`);
    }
    if (opts.cursor !== undefined) {
      const c = decodeJobCursor(opts.cursor);
      if (!c) throw new RangeError('not a job list cursor');
      params.push(c.createdKey, c.id);
      where.push(`(created_at, id) < ($${params.length - 1}::timestamptz, $${params.length})`);
    }
    const rows = await this.db.query(
      `SELECT ${COLUMNS}, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key FROM jobs
        ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY created_at DESC, id DESC LIMIT $1`,
      params,
    );
    const page = rows.slice(0, opts.limit);
    const last = page[page.length - 1];
    const jobs = page.map(({ created_key: _k, ...r }) => toJob(r));
    return rows.length > opts.limit && last ? { jobs, next: encodeJobCursor(last.created_key as string, last.id as string) } : { jobs };
  }

  /**
   * Marks a job as being worked on (queued → processing, started_at set once) and says whether
   * it is still running: false for a canceled, failed or completed job, whose work is dropped.
   */
  async claimForWork(id: string): Promise<boolean> {
    // A read first: every work message of a job asks, and an UPDATE of the job row would wait for
    // the aggregator's transaction holding that row.
    const status = await this.#status(id);
    if (status === 'processing') return true;
    if (status !== 'queued') return false;
    const rows = await this.db.query(
      `UPDATE jobs SET status = 'processing', started_at = COALESCE(started_at, now()) WHERE id = $1 AND status IN ${ACTIVE} RETURNING id`,
      [id],
    );
    return rows.length > 0;
  }

  /**
   * Whether the job is processing: the probe stage's check (its MX work was routed, and so claimed,
   * by the route stage; a canceled or finished job's work is dropped). A read, never a claim.
   */
  async isProcessing(id: string): Promise<boolean> {
    return (await this.#status(id)) === 'processing';
  }

  async #status(id: string): Promise<string | undefined> {
    return (await this.db.query<{ status: string }>(`SELECT status FROM jobs WHERE id = $1`, [id]))[0]?.status;
  }

  /**
   * Writes results idempotently in one transaction: a new (job, idx) row is inserted; an existing
   * row changes only when it is deferred and this is a later attempt; anything else (a duplicate
   * delivery) changes nothing. The counters advance by the rows that became done in this call. A
   * job that is not running (canceled, failed, completed) takes nothing.
   */
  async recordResults(jobId: string, results: readonly JobResultInput[], opts: { decisions?: JobDecisions } = {}): Promise<RecordOutcome> {
    // One row per idx (ON CONFLICT cannot touch a row twice in one statement): the latest attempt.
    const byIdx = new Map<number, JobResultInput>();
    for (const r of results) {
      const prev = byIdx.get(r.idx);
      if (!prev || r.attempts > prev.attempts) byIdx.set(r.idx, r);
    }
    const rows = [...byIdx.values()];
    return this.db.transaction(async (tx) => {
      const cur = await lockJob(tx, jobId);
      if (!cur) return { accepted: false, written: 0, finished: 0 };
      if (cur.status !== 'queued' && cur.status !== 'processing') return { accepted: false, written: 0, finished: 0, job: cur };
      if (rows.length === 0) return { accepted: true, written: 0, finished: 0, job: cur };
      const written = await tx.query<{ idx: number }>(
        `INSERT INTO job_results (job_id, idx, email, verdict, chargeable, attempts, state, next_attempt_at)
         SELECT $1, r.idx, r.email, r.verdict::jsonb, r.chargeable, r.attempts, r.state, r.next_at
           FROM unnest($2::int[], $3::text[], $4::text[], $5::boolean[], $6::int[], $7::text[], $8::timestamptz[]) AS r(idx, email, verdict, chargeable, attempts, state, next_at)
         ON CONFLICT (job_id, idx) DO UPDATE SET verdict = EXCLUDED.verdict, chargeable = EXCLUDED.chargeable, attempts = EXCLUDED.attempts,
                                                 state = EXCLUDED.state, next_attempt_at = EXCLUDED.next_attempt_at, leased_until = NULL
          WHERE job_results.state = 'deferred' AND job_results.attempts < EXCLUDED.attempts
         RETURNING idx`,
        [
          jobId,
          rows.map((r) => r.idx),
          // Data the job received or a mail server sent: a NUL in it would fail this write for good.
          rows.map((r) => dbText(r.email)),
          rows.map((r) => dbJson(r.verdict)),
          rows.map((r) => r.chargeable),
          rows.map((r) => r.attempts),
          rows.map((r) => r.state),
          rows.map((r) => (r.state === 'deferred' ? (r.nextAttemptAt ?? new Date()).toISOString() : null)),
        ],
      );
      let processed = 0;
      const d = emptyJobCounters();
      for (const { idx } of written) {
        const r = byIdx.get(idx)!;
        if (r.state !== 'done') continue;
        processed++;
        countResult(d, r.verdict, r.chargeable);
      }
      const after = await tx.query(
        `UPDATE jobs SET status = 'processing', started_at = COALESCE(started_at, now()), processed = processed + $2, ${COUNTER_ADDS}
          WHERE id = $1 RETURNING ${COLUMNS}`,
        [jobId, processed, ...JOB_COUNTERS.map((k) => d[k])],
      );
      const job = toJob(after[0]!);
      // The decisions of the rows that became done, in the same transaction: in the outbox, or in
      // analytics' own table when that is in this database.
      const done = written.map((w) => w.idx).filter((idx) => byIdx.get(idx)!.state === 'done');
      if (opts.decisions && done.length > 0) {
        const decisions = opts.decisions(job, done);
        if (this.decisionsInTable) await insertDecisionPacks(tx, decisions.map((d, i) => checkDecision(d, i)));
        else await enqueueDecisions(tx, decisions);
      }
      return { accepted: true, written: written.length, finished: processed, job };
    });
  }

  /** The idx of every unique email that has a result row (done or deferred). */
  async resultIdxs(jobId: string): Promise<number[]> {
    return (await this.db.query<{ idx: number }>('SELECT idx FROM job_results WHERE job_id = $1', [jobId])).map((r) => r.idx);
  }

  /** Stored results in idx order after `afterIdx`, `limit` at a time (rendering the results CSV). */
  async results(jobId: string, afterIdx: number, limit: number): Promise<StoredResult[]> {
    const rows = await this.db.query<{ idx: number; email: string; verdict: unknown; state: 'done' | 'deferred' }>(
      'SELECT idx, email, verdict, state FROM job_results WHERE job_id = $1 AND idx > $2 ORDER BY idx LIMIT $3',
      [jobId, afterIdx, limit],
    );
    return rows.map((r) => ({ idx: r.idx, email: r.email, state: r.state, verdict: (typeof r.verdict === 'string' ? JSON.parse(r.verdict) : r.verdict) as ValidationResultBody }));
  }

  /**
   * Takes the deferred emails of running jobs that are due at `now` (soonest first, at most
   * `limit`) for a re-probe: each is leased until `now + leaseMs`, so no other call takes it
   * meanwhile; its next result clears the lease, and a lease that passes (the process died)
   * makes it due again. Rows another transaction is taking are skipped.
   */
  async claimDue(now: Date, limit: number, leaseMs: number): Promise<DueRow[]> {
    const rows = await this.db.query<{ job_id: string; account_id: string; idx: number; email: string; attempts: number; next_attempt_at: string }>(
      `UPDATE job_results r SET leased_until = $1::timestamptz + ($3::bigint * interval '1 millisecond')
         FROM (SELECT r2.job_id, r2.idx FROM job_results r2 JOIN jobs j ON j.id = r2.job_id
                WHERE r2.state = 'deferred' AND r2.next_attempt_at <= $1 AND (r2.leased_until IS NULL OR r2.leased_until <= $1) AND j.status IN ${ACTIVE}
                ORDER BY r2.next_attempt_at LIMIT $2 FOR UPDATE OF r2 SKIP LOCKED) due
        WHERE r.job_id = due.job_id AND r.idx = due.idx
        RETURNING r.job_id, (SELECT account_id FROM jobs WHERE id = r.job_id) AS account_id, r.idx, r.email, r.attempts, r.next_attempt_at`,
      [now.toISOString(), limit, leaseMs],
    );
    return rows
      .sort((a, b) => new Date(a.next_attempt_at).getTime() - new Date(b.next_attempt_at).getTime())
      .map((r) => ({ jobId: r.job_id, accountId: r.account_id, idx: r.idx, email: r.email, attempts: r.attempts }));
  }

  /**
   * Ends every re-probe lease, so the deferred emails they held are due at once (when one
   * process owns all the work: the embedded profile at start, where no lease can be alive).
   */
  async releaseLeases(): Promise<number> {
    return (await this.db.query("UPDATE job_results SET leased_until = NULL WHERE state = 'deferred' AND leased_until IS NOT NULL RETURNING idx")).length;
  }

  /** When the next deferred email of a running job is due, its lease counted (undefined: none is deferred). */
  async nextDeferredAt(): Promise<Date | undefined> {
    const r = (
      await this.db.query<{ at: string | null }>(
        `SELECT min(GREATEST(r.next_attempt_at, COALESCE(r.leased_until, r.next_attempt_at))) AS at FROM job_results r JOIN jobs j ON j.id = r.job_id
          WHERE r.state = 'deferred' AND j.status IN ${ACTIVE}`,
      )
    )[0];
    return r?.at ? new Date(r.at) : undefined;
  }

  /**
   * Completes a job whose every unique email is done, exactly once: the reservation settled
   * (`credits.settle`, the rest released), the job `completed` with its results CSV, and `inTx`
   * (an outbox row), in one transaction. Returns the completed job if this call did it, undefined
   * otherwise (not finished yet, or already final).
   */
  async finalize(jobId: string, resultsKey: string, credits: JobCredits, inTx?: InFinalTx): Promise<JobRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const cur = await lockJob(tx, jobId);
      if (!cur || (cur.status !== 'queued' && cur.status !== 'processing') || cur.processed < cur.unique_emails) return undefined;
      const charged = await credits.settle(tx, jobEnd(tx, cur, 'completed'));
      const job = await finishIn(tx, jobId, 'completed', charged, { results_key: resultsKey });
      if (inTx) await inTx(tx, job);
      return job;
    });
  }

  /**
   * Fails a running job, settling its reservation (`credits.settle`: a failed job delivers no
   * results), in one transaction with `inTx`. Idempotent: a job already final is left alone
   * (undefined).
   */
  async fail(jobId: string, error: string, credits: JobCredits, inTx?: InFinalTx): Promise<JobRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const cur = await lockJob(tx, jobId);
      if (!cur || (cur.status !== 'queued' && cur.status !== 'processing' && cur.status !== 'awaiting_upload')) return undefined;
      const charged = await credits.settle(tx, jobEnd(tx, cur, 'failed'));
      const job = await finishIn(tx, jobId, 'failed', charged, { error: error.slice(0, 1000) });
      if (inTx) await inTx(tx, job);
      return job;
    });
  }

  /**
   * Cancels a queued or processing job of the account, settling its reservation (`credits.settle`:
   * the results done so far are delivered in the partial results CSV), in one transaction.
   * Anything else is invalid_state.
   */
  async cancel(accountId: string, id: string, credits: JobCredits): Promise<CancelJobResult> {
    return this.db.transaction(async (tx) => {
      const cur = await lockJob(tx, id, accountId);
      if (!cur) return { ok: false as const, reason: 'not_found' as const };
      if (cur.status !== 'queued' && cur.status !== 'processing') return { ok: false as const, reason: 'invalid_state' as const, job: cur };
      const charged = await credits.settle(tx, jobEnd(tx, cur, 'canceled'));
      return { ok: true as const, job: await finishIn(tx, id, 'canceled', charged, {}) };
    });
  }

  /** Records the results CSV of a job that is final already (a canceled job's partial results). */
  async setResultsKey(jobId: string, key: string): Promise<void> {
    await this.db.query('UPDATE jobs SET results_key = $2 WHERE id = $1', [jobId, key]);
  }

  /** Notes that the job's work is on the bus (its intake, or a resume, published all of it); its publish claim ends. */
  async markWorkPublished(id: string): Promise<void> {
    await this.db.query(`UPDATE jobs SET work_published_at = now(), publish_claimed_until = NULL WHERE id = $1`, [id]);
  }

  /** Extends the claim on publishing a job's work by `leaseMs` from now (false: already published, or no such job). */
  async renewPublish(id: string, leaseMs: number): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE jobs SET publish_claimed_until = now() + make_interval(secs => $2::double precision / 1000) WHERE id = $1 AND work_published_at IS NULL RETURNING id`,
      [id, leaseMs],
    );
    return rows.length === 1;
  }

  /**
   * Claims, for `leaseMs`, up to `limit` running jobs whose work is not on the bus and whose
   * publish claim ran out (the process publishing it died or failed): the caller publishes what is
   * missing and marks the work published. Across processes: one job goes to one caller a lease.
   */
  async claimUnpublished(leaseMs: number, limit: number): Promise<JobRecord[]> {
    const rows = await this.db.query(
      `UPDATE jobs SET publish_claimed_until = now() + make_interval(secs => $1::double precision / 1000)
        WHERE id IN (SELECT id FROM jobs WHERE status IN ${ACTIVE} AND work_published_at IS NULL AND (publish_claimed_until IS NULL OR publish_claimed_until <= now())
                      ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
          AND work_published_at IS NULL
        RETURNING ${COLUMNS}`,
      [leaseMs, limit],
    );
    return rows.map(toJob).sort((a, b) => a.created_at.getTime() - b.created_at.getTime());
  }

  /** Whether the job's work was published (markWorkPublished). */
  async workPublished(id: string): Promise<boolean> {
    const r = await this.db.query<{ p: boolean }>(`SELECT work_published_at IS NOT NULL AS p FROM jobs WHERE id = $1`, [id]);
    return r[0]?.p === true;
  }

  /** Jobs still running (queued or processing), oldest first: what a restart resumes. */
  async listUnfinished(): Promise<JobRecord[]> {
    return (await this.db.query(`SELECT ${COLUMNS} FROM jobs WHERE status IN ${ACTIVE} ORDER BY created_at`)).map(toJob);
  }

  /** Canceled jobs whose partial results CSV was not written yet (a crash came first). */
  async listCanceledUnrendered(): Promise<JobRecord[]> {
    return (await this.db.query(`SELECT ${COLUMNS} FROM jobs WHERE status = 'canceled' AND results_key IS NULL AND input_key IS NOT NULL ORDER BY created_at`)).map(toJob);
  }
}

async function lockJob(tx: Queryable, id: string, accountId?: string): Promise<JobRecord | undefined> {
  const r = (
    await tx.query(`SELECT ${COLUMNS} FROM jobs WHERE id = $1${accountId === undefined ? '' : ' AND account_id = $2'} FOR UPDATE`, accountId === undefined ? [id] : [id, accountId])
  )[0];
  return r ? toJob(r) : undefined;
}

/** The job as its settlement sees it; `chargeable` counts its done, chargeable (High-Value) results. */
function jobEnd(tx: Queryable, job: JobRecord, status: JobEnd['status']): JobEnd {
  return {
    jobId: job.id,
    accountId: job.account_id,
    reservationId: job.reservation_id,
    status,
    chargeable: async () => (await tx.query<{ n: number }>("SELECT count(*)::int AS n FROM job_results WHERE job_id = $1 AND state = 'done' AND chargeable", [job.id]))[0]!.n,
  };
}

async function finishIn(tx: Queryable, id: string, status: 'completed' | 'failed' | 'canceled', charged: number, extra: { results_key?: string; error?: string }): Promise<JobRecord> {
  const rows = await tx.query(
    `UPDATE jobs SET status = $2, credits_charged = $3, credits_refunded = credits_reserved - $3, finalized = true, completed_at = now(),
            results_key = COALESCE($4, results_key), error = COALESCE($5, error)
      WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, status, charged, extra.results_key ?? null, extra.error ?? null],
  );
  return toJob(rows[0]!);
}
