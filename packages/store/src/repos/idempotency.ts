// Idempotency records: one per (account, Idempotency-Key), claimed while the first
// request runs, completed with its response (in the same transaction as its charge, see ledger.ts).
// A claim is a lease (migration 011): the request holding it renews it; one not renewed for a
// lease (its process died) is taken over by the next request with the key, and the request that
// lost it can no longer complete it, so only one of the two ever charges or creates a job.

import { randomUUID } from 'node:crypto';
import { ServiceError } from '@svc/contracts';
import type { Db, Queryable } from '../db/db.ts';
import { DEFAULT_CLAIM_LEASE_MS } from '../db/lease.ts';


export type IdempotencyBegin =
  | { state: 'new'; owner: string }
  | { state: 'replay'; status: number; body: string }
  | { state: 'conflict' }
  | { state: 'in_progress' };

export class IdempotencyRepo {
  /** How long a claim in progress outlives its last renewal: set from SVC_CLAIM_LEASE_MS. */
  leaseMs = DEFAULT_CLAIM_LEASE_MS;
  /**
   * The time claims are stamped and judged by: the database's now() unless set (tests move it on
   * instead of sleeping through a lease). Every process must use the same clock, so production
   * leaves it to the database.
   */
  clock: (() => Date) | undefined;

  constructor(private readonly db: Db) {}

  /** The clock as a query parameter: null means the database's now(). */
  #now(): string | null {
    return this.clock?.().toISOString() ?? null;
  }

  /**
   * Claims an idempotency key for a request. `new`: go ahead (renew() at least every leaseMs / 3),
   * then complete() or abandon() naming the owner it returned. A claim in progress not renewed for
   * `leaseMs` (its process died) is taken over.
   */
  async begin(accountId: string, key: string, route: string, requestHash: string, ttlMs: number, leaseMs: number = this.leaseMs): Promise<IdempotencyBegin> {
    const owner = randomUUID();
    const now = this.#now();
    return this.db.transaction(async (tx) => {
      await tx.query(
        `DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2
            AND (expires_at < coalesce($4::timestamptz, now()) OR (status = 'in_progress' AND heartbeat_at < coalesce($4::timestamptz, now()) - ($3::bigint * interval '1 millisecond')))`,
        [accountId, key, leaseMs, now],
      );
      const inserted = await tx.query(
        `INSERT INTO idempotency_keys (account_id, key, route, request_hash, status, expires_at, owner, heartbeat_at)
         VALUES ($1, $2, $3, $4, 'in_progress', coalesce($7::timestamptz, now()) + ($5::bigint * interval '1 millisecond'), $6, coalesce($7::timestamptz, now()))
         ON CONFLICT (account_id, key) DO NOTHING RETURNING key`,
        [accountId, key, route, requestHash, ttlMs, owner, now],
      );
      if (inserted.length > 0) return { state: 'new' as const, owner };
      const row = (
        await tx.query<{ route: string; request_hash: string; status: string; response_status: number | null; response_body: string | null }>(
          'SELECT route, request_hash, status, response_status, response_body FROM idempotency_keys WHERE account_id = $1 AND key = $2',
          [accountId, key],
        )
      )[0];
      if (!row) return { state: 'in_progress' as const }; // deleted between our statements: treat as busy, the client retries
      if (row.route !== route || row.request_hash !== requestHash) return { state: 'conflict' as const };
      if (row.status === 'in_progress') return { state: 'in_progress' as const };
      return { state: 'replay' as const, status: row.response_status ?? 200, body: row.response_body ?? '' };
    });
  }

  async complete(c: IdempotentCompletion): Promise<void> {
    await completeIn(this.db, c);
  }

  /** Extends the owner's claim; false when it is no longer the owner's (taken over, or gone). */
  async renew(accountId: string, key: string, owner: string): Promise<boolean> {
    const r = await this.db.query(
      "UPDATE idempotency_keys SET heartbeat_at = coalesce($4::timestamptz, now()) WHERE account_id = $1 AND key = $2 AND owner = $3 AND status = 'in_progress' RETURNING key",
      [accountId, key, owner, this.#now()],
    );
    return r.length === 1;
  }

  /** Frees the owner's claim (the request failed: a retry may run at once). Another owner's claim is left alone. */
  async abandon(accountId: string, key: string, owner: string): Promise<void> {
    await this.db.query("DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND owner = $3 AND status = 'in_progress'", [accountId, key, owner]);
  }

  /**
   * Deletes claims still in progress not renewed for `olderThanMs` (their process died: the charge
   * of such a request never committed, since completion commits with it), so a retry runs at once
   * instead of answering 409 until the lease runs out. Returns how many.
   */
  async releaseInProgress(olderThanMs: number): Promise<number> {
    return this.#deleteCount("status = 'in_progress' AND heartbeat_at < coalesce($2::timestamptz, now()) - ($1::bigint * interval '1 millisecond')", [olderThanMs, this.#now()]);
  }

  /** Deletes records (completed or not) whose time to live has passed. Returns how many. */
  async sweepExpired(): Promise<number> {
    return this.#deleteCount('expires_at < coalesce($1::timestamptz, now())', [this.#now()]);
  }

  async #deleteCount(where: string, params: unknown[]): Promise<number> {
    const rows = await this.db.query<{ n: number }>(`WITH gone AS (DELETE FROM idempotency_keys WHERE ${where} RETURNING 1) SELECT count(*)::int AS n FROM gone`, params);
    return rows[0]!.n;
  }
}

/** The response of an idempotent request, recorded in the same transaction as its charge. */
export interface IdempotentCompletion {
  accountId: string;
  key: string;
  /** The claim's owner (begin()): a claim taken over by another request cannot be completed. */
  owner: string;
  status: number;
  body: string;
}

/**
 * Records the response on the owner's claim. Throws ServiceError `idempotency_request_in_progress`
 * when the claim is no longer the owner's (its lease ran out and another request took the key
 * over): thrown inside the charge's or the job's transaction, it rolls that back, so the key's
 * work counts once, the other request's.
 */
export async function completeIn(q: Queryable, c: IdempotentCompletion): Promise<void> {
  const r = await q.query(
    "UPDATE idempotency_keys SET status = 'done', response_status = $3, response_body = $4 WHERE account_id = $1 AND key = $2 AND owner = $5 AND status = 'in_progress' RETURNING key",
    [c.accountId, c.key, c.status, c.body, c.owner],
  );
  if (r.length !== 1) throw new ServiceError('idempotency_request_in_progress', 'Another request took this Idempotency-Key over (this one held it past its lease); retry to get its response');
}

