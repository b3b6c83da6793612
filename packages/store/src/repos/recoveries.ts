// Catch-all recovery records (migration 014): the per-job claim, and the committing transaction
// that rewrites the job's recovered results, records the evidence and settles the money at once.

import type { ValidationResultBody } from '@svc/contracts';
import type { Db } from '../db/db.ts';
import { newId } from '../db/ids.ts';
import type { RecoveryCredits } from './credits.ts';

export interface RecoveryRecord {
  id: string;
  job_id: string;
  account_id: string;
  status: 'running' | 'completed';
  rows: number;
  upgraded: number;
  downgraded: number;
  credits_reserved: number;
  credits_charged: number;
  reservation_id: string | null;
  created_at: Date;
  completed_at: Date | null;
}

export interface RecoveredRow {
  idx: number;
  email: string;
  previous_result: string;
  result: string;
  reason_code: string;
  evidence: Record<string, unknown>;
  /** The job result row's new verdict. */
  verdict: ValidationResultBody;
}

/** What an account's catch-all recoveries completed in a window did (the dashboard's Accuracy page). */
export interface RecoverySummary {
  /** Recoveries completed in the window. */
  recoveries: number;
  /** Risky catch-all rows they looked at. */
  rows: number;
  /** Rows upgraded to valid (the charged ones). */
  upgraded: number;
  /** Rows downgraded to invalid. */
  downgraded: number;
  credits_charged: number;
  /** Changed rows per reason code (recovered_delivery, recovered_pattern, recovered_hard_bounce). */
  by_reason: Record<string, number>;
  /** The latest recoveries, newest first. */
  latest: Array<{ recovery_id: string; job_id: string; rows: number; upgraded: number; downgraded: number; credits_charged: number; completed_at: Date }>;
}

const COLUMNS = 'id, job_id, account_id, status, rows, upgraded, downgraded, credits_reserved, credits_charged, reservation_id, created_at, completed_at';

const toRecord = (r: Record<string, unknown>): RecoveryRecord => ({
  ...(r as unknown as RecoveryRecord),
  rows: Number(r.rows),
  upgraded: Number(r.upgraded),
  downgraded: Number(r.downgraded),
  credits_reserved: Number(r.credits_reserved),
  credits_charged: Number(r.credits_charged),
  created_at: new Date(r.created_at as string),
  completed_at: r.completed_at === null ? null : new Date(r.completed_at as string),
});

export class RecoveriesRepo {
  constructor(private readonly db: Db) {}

  /**
   * Claims the job's recovery: a new running record, or the existing one. A running record whose
   * lease has passed (its process died) is taken over. `claimed` says whether this caller owns it.
   */
  async claim(jobId: string, accountId: string, leaseMs: number): Promise<{ claimed: boolean; record: RecoveryRecord }> {
    const id = newId('rec');
    const rows = await this.db.query(
      `INSERT INTO catchall_recoveries (id, job_id, account_id, status, lease_until)
       VALUES ($1, $2, $3, 'running', now() + ($4::bigint * interval '1 millisecond'))
       ON CONFLICT (job_id) DO UPDATE SET id = EXCLUDED.id, lease_until = EXCLUDED.lease_until, created_at = now(), reservation_id = NULL
        WHERE catchall_recoveries.status = 'running' AND catchall_recoveries.lease_until < now()
       RETURNING ${COLUMNS}`,
      [id, jobId, accountId, leaseMs],
    );
    if (rows[0]) return { claimed: true, record: toRecord(rows[0]) };
    const [existing] = await this.db.query(`SELECT ${COLUMNS} FROM catchall_recoveries WHERE job_id = $1`, [jobId]);
    return { claimed: false, record: toRecord(existing!) };
  }

  /** Gives a claim back (nothing was reserved or changed): a later request may try again. */
  async release(id: string): Promise<void> {
    await this.db.query(`DELETE FROM catchall_recoveries WHERE id = $1 AND status = 'running'`, [id]);
  }

  async setReservation(id: string, reservationId: string, reserved: number, rows: number): Promise<void> {
    await this.db.query('UPDATE catchall_recoveries SET reservation_id = $2, credits_reserved = $3, rows = $4 WHERE id = $1', [id, reservationId, reserved, rows]);
  }

  /**
   * In one transaction: the job's changed result rows, the recovery's rows with their evidence,
   * the settlement (`credits.settle`), and the record completed. Undefined when the claim was lost
   * meanwhile (taken over after its lease): nothing is changed.
   */
  async complete(rec: { id: string; reservationId: string | null; rows: number }, jobId: string, changed: readonly RecoveredRow[], credits: RecoveryCredits): Promise<RecoveryRecord | undefined> {
    return this.db.transaction(async (tx) => {
      const own = await tx.query(`SELECT id FROM catchall_recoveries WHERE id = $1 AND status = 'running' FOR UPDATE`, [rec.id]);
      if (own.length === 0) return undefined;
      for (let at = 0; at < changed.length; at += 1000) {
        const slice = changed.slice(at, at + 1000);
        await tx.query(
          `UPDATE job_results r SET verdict = x.verdict::jsonb, chargeable = (x.verdict::jsonb ->> 'credits_charged')::int > 0
             FROM unnest($2::int[], $3::text[]) AS x(idx, verdict)
            WHERE r.job_id = $1 AND r.idx = x.idx`,
          [jobId, slice.map((c) => c.idx), slice.map((c) => JSON.stringify(c.verdict))],
        );
        await tx.query(
          `INSERT INTO catchall_recovery_rows (recovery_id, idx, email, previous_result, result, reason_code, evidence)
           SELECT $1, x.idx, x.email, x.prev, x.res, x.code, x.ev::jsonb
             FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) AS x(idx, email, prev, res, code, ev)`,
          [rec.id, slice.map((c) => c.idx), slice.map((c) => c.email), slice.map((c) => c.previous_result), slice.map((c) => c.result), slice.map((c) => c.reason_code), slice.map((c) => JSON.stringify(c.evidence))],
        );
      }
      const up = changed.filter((c) => c.result === 'valid').length;
      const { settled, charged } = await credits.settle(tx, rec.reservationId, up);
      if (!settled) throw new Error(`recovery ${rec.id}: its reservation is no longer open`);
      const rows = await tx.query(
        `UPDATE catchall_recoveries SET status = 'completed', completed_at = now(), rows = $2, upgraded = $3, downgraded = $4, credits_charged = $5
          WHERE id = $1 RETURNING ${COLUMNS}`,
        [rec.id, rec.rows, up, changed.length - up, charged],
      );
      return toRecord(rows[0]!);
    });
  }

  /** The rows a recovery changed, in job order. */
  async rowsOf(id: string, limit: number): Promise<Array<Omit<RecoveredRow, 'verdict'>>> {
    const rows = await this.db.query<{ idx: number; email: string; previous_result: string; result: string; reason_code: string; evidence: unknown }>(
      'SELECT idx, email, previous_result, result, reason_code, evidence FROM catchall_recovery_rows WHERE recovery_id = $1 ORDER BY idx LIMIT $2',
      [id, limit],
    );
    return rows.map((r) => ({ ...r, evidence: (typeof r.evidence === 'string' ? JSON.parse(r.evidence) : r.evidence) as Record<string, unknown> }));
  }

  /**
   * What the account's recoveries completed in `from` <= completed_at < `to` did: their counts as
   * the records keep them, the changed rows per reason, and the `latest` newest recoveries.
   */
  async accountSummary(accountId: string, w: { from: Date; to: Date }, latest = 20): Promise<RecoverySummary> {
    const where = `r.account_id = $1 AND r.status = 'completed' AND r.completed_at >= $2 AND r.completed_at < $3`;
    const params = [accountId, w.from, w.to];
    const [totals] = await this.db.query<{ recoveries: number; rows: number; upgraded: number; downgraded: number; credits_charged: number }>(
      `SELECT count(*)::int AS recoveries, coalesce(sum(r.rows), 0)::int AS rows, coalesce(sum(r.upgraded), 0)::int AS upgraded,
              coalesce(sum(r.downgraded), 0)::int AS downgraded, coalesce(sum(r.credits_charged), 0)::int AS credits_charged
         FROM catchall_recoveries r WHERE ${where}`,
      params,
    );
    const reasons = await this.db.query<{ reason_code: string; n: number }>(
      `SELECT x.reason_code, count(*)::int AS n FROM catchall_recovery_rows x JOIN catchall_recoveries r ON r.id = x.recovery_id
        WHERE ${where} GROUP BY x.reason_code ORDER BY x.reason_code`,
      params,
    );
    const list = await this.db.query<{ id: string; job_id: string; rows: number; upgraded: number; downgraded: number; credits_charged: number; completed_at: Date }>(
      `SELECT r.id, r.job_id, r.rows, r.upgraded, r.downgraded, r.credits_charged, r.completed_at
         FROM catchall_recoveries r WHERE ${where} ORDER BY r.completed_at DESC, r.id LIMIT $4`,
      [...params, latest],
    );
    return {
      recoveries: Number(totals!.recoveries),
      rows: Number(totals!.rows),
      upgraded: Number(totals!.upgraded),
      downgraded: Number(totals!.downgraded),
      credits_charged: Number(totals!.credits_charged),
      by_reason: Object.fromEntries(reasons.map((r) => [r.reason_code, Number(r.n)])),
      latest: list.map((r) => ({ recovery_id: r.id, job_id: r.job_id, rows: Number(r.rows), upgraded: Number(r.upgraded), downgraded: Number(r.downgraded), credits_charged: Number(r.credits_charged), completed_at: new Date(r.completed_at) })),
    };
  }

  /** The job's catch-all results: risky with reason_code catch_all. */
  async catchallRows(jobId: string): Promise<Array<{ idx: number; email: string; verdict: ValidationResultBody }>> {
    const rows = await this.db.query<{ idx: number; email: string; verdict: unknown }>(
      `SELECT idx, email, verdict FROM job_results WHERE job_id = $1 AND state = 'done' AND verdict ->> 'result' = 'risky' AND verdict ->> 'reason_code' = 'catch_all' ORDER BY idx`,
      [jobId],
    );
    return rows.map((r) => ({ idx: r.idx, email: r.email, verdict: (typeof r.verdict === 'string' ? JSON.parse(r.verdict) : r.verdict) as ValidationResultBody }));
  }
}
