// Idempotency records (DESIGN 6): one per (account, Idempotency-Key), claimed while the first
// request runs, completed with its response (in the same transaction as its charge, see ledger.ts).

import type { Db, Queryable } from './db.ts';

export type IdempotencyBegin =
  | { state: 'new' }
  | { state: 'replay'; status: number; body: string }
  | { state: 'conflict' }
  | { state: 'in_progress' };

export class IdempotencyRepo {
  constructor(private readonly db: Db) {}

  /**
   * Claims an idempotency key for a request. `new`: go ahead, then complete() or abandon().
   * A claim left in progress longer than `staleMs` (its process died) may be taken over.
   */
  async begin(accountId: string, key: string, route: string, requestHash: string, ttlMs: number, staleMs: number): Promise<IdempotencyBegin> {
    return this.db.transaction(async (tx) => {
      await tx.query(
        `DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2
            AND (expires_at < now() OR (status = 'in_progress' AND created_at < now() - ($3::bigint * interval '1 millisecond')))`,
        [accountId, key, staleMs],
      );
      const inserted = await tx.query(
        `INSERT INTO idempotency_keys (account_id, key, route, request_hash, status, expires_at)
         VALUES ($1, $2, $3, $4, 'in_progress', now() + ($5::bigint * interval '1 millisecond'))
         ON CONFLICT (account_id, key) DO NOTHING RETURNING key`,
        [accountId, key, route, requestHash, ttlMs],
      );
      if (inserted.length > 0) return { state: 'new' as const };
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

  async complete(accountId: string, key: string, status: number, body: string): Promise<void> {
    await completeIn(this.db, { accountId, key, status, body });
  }

  async abandon(accountId: string, key: string): Promise<void> {
    await this.db.query("DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND status = 'in_progress'", [accountId, key]);
  }

  /**
   * Deletes claims still in progress that were made more than `olderThanMs` ago (their process
   * died: the charge of such a request never committed, since completion commits with it), so a
   * retry runs at once instead of answering 409 until the claim is stale. Returns how many.
   */
  async releaseInProgress(olderThanMs: number): Promise<number> {
    return this.#deleteCount("status = 'in_progress' AND created_at < now() - ($1::bigint * interval '1 millisecond')", [olderThanMs]);
  }

  /** Deletes records (completed or not) whose time to live has passed. Returns how many. */
  async sweepExpired(): Promise<number> {
    return this.#deleteCount('expires_at < now()', []);
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
  status: number;
  body: string;
}

export async function completeIn(q: Queryable, c: IdempotentCompletion): Promise<void> {
  await q.query("UPDATE idempotency_keys SET status = 'done', response_status = $3, response_body = $4 WHERE account_id = $1 AND key = $2", [c.accountId, c.key, c.status, c.body]);
}

