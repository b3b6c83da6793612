// The webhook outbox (migration 006). The job finalizer enqueues an event in the transaction that
// completes the job (enqueueIn), so a job is never completed without its event nor the other way
// round; dispatchers claim due events with a lease (due), send them, and record the outcome.
// Delivery is at least once: a dispatcher that dies mid-request leaves its event to be claimed
// again when the lease passes, and receivers dedupe on the event id.

import { createHash } from 'node:crypto';
import type { Db, Queryable } from '../db/db.ts';

export type WebhookEventType = 'job.completed' | 'job.failed';
export type WebhookStatus = 'pending' | 'delivered' | 'failed';

/** An event to put in the outbox. */
export interface NewWebhookEvent {
  /** webhookEventId(jobId, event): the same job and event always give the same id. */
  id: string;
  accountId: string;
  jobId: string;
  url: string;
  event: WebhookEventType;
  /** The exact body to POST (JSON text), sent byte for byte on every attempt. */
  payload: string;
  /** When the event happened (the body's `created_at`); retries stop 24 h after it. Default: the database's now(). */
  createdAt?: Date;
}

/** One row of the outbox. */
export interface WebhookEvent {
  id: string;
  account_id: string;
  job_id: string;
  url: string;
  event: WebhookEventType;
  payload: string;
  status: WebhookStatus;
  /** Deliveries started, counted when claimed: the claim that returned this row included. */
  attempts: number;
  next_attempt_at: Date;
  last_error: string | null;
  created_at: Date;
  delivered_at: Date | null;
}

/** The lease of a claim when due() is not told otherwise: well beyond one request's 10 s. */
export const DEFAULT_WEBHOOK_LEASE_MS = 60_000;

const MAX_ERROR_CHARS = 500;

/**
 * The id of a job's event: `whk_` and 24 hex digits of SHA-256 over the job id and the event.
 * Deterministic, so a finalizer retried after a crash enqueues the same id (and nothing new).
 */
export function webhookEventId(jobId: string, event: WebhookEventType): string {
  return `whk_${createHash('sha256').update(`${jobId}\n${event}`).digest('hex').slice(0, 24)}`;
}

const COLUMNS = 'id, account_id, job_id, url, event, payload, status, attempts, next_attempt_at, last_error, created_at, delivered_at';

type RawEvent = Omit<WebhookEvent, 'next_attempt_at' | 'created_at' | 'delivered_at'> & {
  next_attempt_at: Date | string;
  created_at: Date | string;
  delivered_at: Date | string | null;
};

const toEvent = (r: RawEvent): WebhookEvent => ({
  ...r,
  next_attempt_at: new Date(r.next_attempt_at),
  created_at: new Date(r.created_at),
  delivered_at: r.delivered_at === null ? null : new Date(r.delivered_at),
});

const clip = (error: string): string => (error.length > MAX_ERROR_CHARS ? `${error.slice(0, MAX_ERROR_CHARS - 1)}…` : error);

/**
 * Puts an event in the outbox inside the caller's transaction. Idempotent: an id already there
 * (the finalizer ran twice) changes nothing. Returns whether a row was inserted.
 */
export async function enqueueWebhookIn(tx: Queryable, e: NewWebhookEvent): Promise<boolean> {
  const rows = await tx.query(
    `INSERT INTO webhook_events (id, account_id, job_id, url, event, payload, created_at, next_attempt_at)
     VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7::timestamptz, now()), COALESCE($7::timestamptz, now()))
     ON CONFLICT (id) DO NOTHING RETURNING id`,
    [e.id, e.accountId, e.jobId, e.url, e.event, e.payload, e.createdAt ?? null],
  );
  return rows.length > 0;
}

export class WebhooksRepo {
  constructor(private readonly db: Db) {}

  /** enqueueWebhookIn inside the job finalizer's transaction (the usual caller). */
  enqueueIn(tx: Queryable, e: NewWebhookEvent): Promise<boolean> {
    return enqueueWebhookIn(tx, e);
  }

  /** enqueueWebhookIn on its own. */
  enqueue(e: NewWebhookEvent): Promise<boolean> {
    return enqueueWebhookIn(this.db, e);
  }

  /**
   * Claims up to `limit` pending events due at `now` (oldest due first) and returns them. One
   * statement selects with FOR UPDATE SKIP LOCKED, moves next_attempt_at a lease ahead and counts
   * the attempt, so two dispatchers (two processes on one Postgres) never claim the same event
   * while the lease runs. A claimer that dies leaves the event to be claimed again after it.
   */
  async due(now: Date, limit: number, leaseMs = DEFAULT_WEBHOOK_LEASE_MS): Promise<WebhookEvent[]> {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new RangeError('limit must be a positive integer');
    if (!Number.isSafeInteger(leaseMs) || leaseMs <= 0) throw new RangeError('leaseMs must be a positive integer');
    const rows = await this.db.query<RawEvent>(
      `WITH claimed AS (
         SELECT id FROM webhook_events
          WHERE status = 'pending' AND next_attempt_at <= $1::timestamptz
          ORDER BY next_attempt_at, created_at, id
          LIMIT $2
          FOR UPDATE SKIP LOCKED
       )
       UPDATE webhook_events w
          SET next_attempt_at = $1::timestamptz + ($3::bigint * interval '1 millisecond'), attempts = w.attempts + 1
         FROM claimed WHERE w.id = claimed.id
       RETURNING ${COLUMNS.split(', ').map((c) => `w.${c}`).join(', ')}`,
      [now, limit, leaseMs],
    );
    return rows.map(toEvent).sort((a, b) => a.created_at.getTime() - b.created_at.getTime() || (a.id < b.id ? -1 : 1));
  }

  /**
   * The receiver took the event (2xx). Whoever holds the claim, a delivered event stays
   * delivered: the receiver has it. Returns false if it was no longer pending.
   */
  async delivered(id: string, at?: Date): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE webhook_events SET status = 'delivered', delivered_at = COALESCE($2::timestamptz, now())
        WHERE id = $1 AND status = 'pending' RETURNING id`,
      [id, at ?? null],
    );
    return rows.length > 0;
  }

  /**
   * The attempt failed: try again at `at`. `attempt` (the row's `attempts` as claimed) fences a
   * claim whose lease passed: if another dispatcher claimed the event since, nothing changes and
   * this returns false.
   */
  async retryLater(id: string, at: Date, error: string, attempt?: number): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE webhook_events SET next_attempt_at = $2::timestamptz, last_error = $3
        WHERE id = $1 AND status = 'pending' AND ($4::int IS NULL OR attempts = $4::int) RETURNING id`,
      [id, at, clip(error), attempt ?? null],
    );
    return rows.length > 0;
  }

  /**
   * Makes every pending event due now: for a process that owns all delivery (embedded) at start,
   * so a claim left by a killed run is not waited out for its lease. An event waiting out a
   * back-off is sent early once, which a receiver deduplicating on the event id takes in its
   * stride (delivery is at least once). Returns how many were moved.
   */
  async releaseAll(now: Date = new Date()): Promise<number> {
    const rows = await this.db.query(`UPDATE webhook_events SET next_attempt_at = $1::timestamptz WHERE status = 'pending' AND next_attempt_at > $1::timestamptz RETURNING id`, [now]);
    return rows.length;
  }

  /** No more attempts (status failed). Fenced by `attempt` like retryLater. */
  async giveUp(id: string, error: string, attempt?: number): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE webhook_events SET status = 'failed', last_error = $2
        WHERE id = $1 AND status = 'pending' AND ($3::int IS NULL OR attempts = $3::int) RETURNING id`,
      [id, clip(error), attempt ?? null],
    );
    return rows.length > 0;
  }

  async get(id: string): Promise<WebhookEvent | undefined> {
    const r = (await this.db.query<RawEvent>(`SELECT ${COLUMNS} FROM webhook_events WHERE id = $1`, [id]))[0];
    return r && toEvent(r);
  }

  /** A job's events, oldest first. */
  async listForJob(jobId: string): Promise<WebhookEvent[]> {
    return (await this.db.query<RawEvent>(`SELECT ${COLUMNS} FROM webhook_events WHERE job_id = $1 ORDER BY created_at, id`, [jobId])).map(toEvent);
  }
}
