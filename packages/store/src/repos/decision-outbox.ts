// The decision outbox (migration 018): job decisions written in the transaction of the results
// they describe (JobsRepo.recordResults), and shipped to analytics by a relay that deletes what
// landed. A decision is so recorded at least once whatever process dies when, and analytics,
// idempotent by id, counts it once.

import type { Decision } from '../analytics/analytics.ts';
import type { Db, Queryable } from '../db/db.ts';
import { dbJson } from '../db/text.ts';

/** Queues `decisions` in the transaction `tx` (a decision already queued under its id is left as it is). */
export async function enqueueDecisions(tx: Queryable, decisions: readonly Decision[]): Promise<void> {
  if (decisions.length === 0) return;
  await tx.query('INSERT INTO decision_outbox (id, decision) SELECT * FROM unnest($1::text[], $2::jsonb[]) ON CONFLICT (id) DO NOTHING', [
    decisions.map((d) => d.id),
    decisions.map((d) => dbJson(d)),
  ]);
}

type Stored = Omit<Decision, 'decided_at'> & { decided_at: string };

export class DecisionOutboxRepo {
  constructor(private readonly db: Db) {}

  /**
   * Takes the oldest `limit` queued decisions that no relay holds, leased for `leaseMs`, hands
   * them to `send`, and deletes them once it resolved. If `send` throws they are released at once;
   * if the process dies, its lease runs out and another relay takes them. Returns how many were
   * shipped.
   */
  async ship(limit: number, send: (decisions: Decision[]) => Promise<void>, leaseMs = 30_000): Promise<number> {
    const rows = await this.db.query<{ seq: string | number; decision: Stored | string }>(
      `UPDATE decision_outbox SET leased_until = now() + make_interval(secs => $2::double precision / 1000)
        WHERE seq IN (SELECT seq FROM decision_outbox WHERE leased_until IS NULL OR leased_until < now() ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING seq, decision`,
      [limit, leaseMs],
    );
    if (rows.length === 0) return 0;
    const seqs = rows.map((r) => String(r.seq));
    try {
      await send(
        rows.map((r) => {
          const d = (typeof r.decision === 'string' ? JSON.parse(r.decision) : r.decision) as Stored;
          return { ...d, decided_at: new Date(d.decided_at) };
        }),
      );
    } catch (err) {
      await this.db.query('UPDATE decision_outbox SET leased_until = NULL WHERE seq = ANY($1::bigint[])', [seqs]).catch(() => {});
      throw err;
    }
    await this.db.query('DELETE FROM decision_outbox WHERE seq = ANY($1::bigint[])', [seqs]);
    return rows.length;
  }

  /** Decisions queued (tests, metrics). */
  async size(): Promise<number> {
    return Number((await this.db.query<{ n: string | number }>('SELECT count(*) AS n FROM decision_outbox'))[0]!.n);
  }
}
