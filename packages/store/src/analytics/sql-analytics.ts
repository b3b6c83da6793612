// The embedded profile's Analytics adapter: SQL tables in the relational store.

import { VALIDATION_RESULTS, type ValidationResult } from '@svc/contracts';
import type { Db, Queryable } from '../db/db.ts';
import { decisionFromRow, type AnalyticsOptions, type DailyCounts, type Decision, type DomainSummaryRow, type OutcomeFact, type ResultCounts, type Window } from './analytics.ts';
import { BufferedAnalytics } from './buffered.ts';
import { dailyFrom, zeroCounts, type MatrixRow } from './report.ts';
import { checkLimit, checkWindow, EMAIL_HASH } from './validate.ts';

/** A Decision's fields, then this table's own `email_key` (emailKey of the hash). */
const COLUMNS = ['id', 'account_id', 'email_hash', 'domain', 'result', 'reason_code', 'layer', 'mx_host', 'latency_ms', 'job_id', 'source', 'credits_charged', 'decided_at'] as const;
const WRITTEN = [...COLUMNS, 'email_key'] as const;

/**
 * The first 64 bits of a hex SHA-256 as a signed bigint, in decimal: the key of one address's
 * decisions (infra/migrations/027_decision_email_key.sql), the value of
 * `('x' || left(email_hash, 16))::bit(64)::bigint` in SQL.
 */
export const emailKey = (emailHash: string): string => BigInt.asIntN(64, BigInt(`0x${emailHash.slice(0, 16)}`)).toString();
/** The same key computed in SQL from a hash column or parameter. */
const emailKeyOf = (hashSql: string): string => `('x' || left(${hashSql}, 16))::bit(64)::bigint`;
/**
 * Rows per INSERT (or COPY) statement. The store's connection is shared with the requests (on PGlite one
 * statement at a time, in its own thread): a statement of 250 decision rows holds it ~5-10 ms,
 * where one of 1,000 held it 40-70 ms, and a debit or a job's results waits behind it.
 */
const ROWS_PER_STATEMENT = 250;
const ROWS_PER_COPY = 100;

/**
 * Writes checked decisions to validation_decisions on `db` (a connection or a transaction), in
 * statements of ROWS_PER_STATEMENT rows. A decision delivered again (the same account, time and
 * id: in the batch, or written before) inserts nothing. The jobs repository uses it in the
 * transaction of a job's results when analytics is this table (JobsRepo.decisionsInTable).
 */
export async function insertDecisionRows(db: Queryable, batch: readonly Decision[]): Promise<void> {
  for (let start = 0; start < batch.length; start += ROWS_PER_STATEMENT) {
    const rows = batch.slice(start, start + ROWS_PER_STATEMENT);
    // The columns as 13 arrays: one short statement however many rows (13 parameters, not 13 per
    // row: binding thousands of parameters cost more than the rows' own inserts).
    await db.query(
      `INSERT INTO validation_decisions (${WRITTEN.join(', ')})
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[], $10::text[], $11::text[], $12::int[], $13::timestamptz[], $14::bigint[])
       ON CONFLICT (account_id, decided_at, id) DO NOTHING`,
      [
        rows.map((d) => d.id),
        rows.map((d) => d.account_id),
        rows.map((d) => d.email_hash),
        rows.map((d) => d.domain),
        rows.map((d) => d.result),
        rows.map((d) => d.reason_code),
        rows.map((d) => d.layer),
        rows.map((d) => d.mx_host),
        rows.map((d) => d.latency_ms),
        rows.map((d) => d.job_id),
        rows.map((d) => d.source),
        rows.map((d) => d.credits_charged),
        rows.map((d) => d.decided_at.toISOString()),
        rows.map((d) => emailKey(d.email_hash)),
      ],
    );
  }
}

const UNIQUE_VIOLATION = '23505';

/**
 * The ISO text of a decision time (~0.4 µs a call), the last one kept: decisions come in time
 * order, many of them within one millisecond under load.
 */
let lastMs = Number.NaN;
let lastIso = '';
function isoOf(at: Date): string {
  const ms = at.getTime();
  if (ms !== lastMs) {
    lastIso = at.toISOString();
    lastMs = ms;
  }
  return lastIso;
}

/** A decision's values in WRITTEN order (for Db.copyIn). */
const decisionValues = (d: Decision): Array<string | number | null> => [
  d.id,
  d.account_id,
  d.email_hash,
  d.domain,
  d.result,
  d.reason_code,
  d.layer,
  d.mx_host,
  d.latency_ms,
  d.job_id,
  d.source,
  d.credits_charged,
  isoOf(d.decided_at),
  emailKey(d.email_hash),
];

/** A row of validation_decisions: a Decision as the database gives it back. */
type DecisionRow = Decision & Record<string, unknown>;

/**
 * The embedded profile's adapter: the `validation_decisions` table (infra/migrations/
 * 007_analytics.sql) in the relational store, on PGlite or Postgres through the same SQL. It uses
 * the store's connection and does not close it.
 */
export class SqlAnalytics extends BufferedAnalytics {
  readonly #db: Queryable & Pick<Db, 'copyIn'>;

  constructor(db: Queryable & Pick<Db, 'copyIn'>, opts: AnalyticsOptions = {}) {
    super(opts);
    this.#db = db;
  }

  protected async write(batch: readonly Decision[]): Promise<void> {
    const copyIn = this.#db.copyIn?.bind(this.#db);
    if (!copyIn) return insertDecisionRows(this.#db, batch);
    for (let start = 0; start < batch.length; start += ROWS_PER_COPY) {
      const rows = batch.slice(start, start + ROWS_PER_COPY);
      try {
        await copyIn('validation_decisions', WRITTEN, rows.map(decisionValues), { background: true });
      } catch (err) {
        // A decision written before (a redelivery): COPY has no ON CONFLICT and wrote nothing of
        // these rows, so they go again through the INSERT that skips what is there.
        if ((err as { code?: unknown }).code !== UNIQUE_VIOLATION) throw err;
        await insertDecisionRows(this.#db, rows);
      }
    }
  }

  protected async closeBackend(): Promise<void> {
    // The connection is the store's.
  }

  async countByResult(q: Window): Promise<ResultCounts> {
    const { from, to } = checkWindow(q);
    const rows = await this.#db.query<{ result: ValidationResult; n: number }>(
      `SELECT result, count(*)::int AS n FROM validation_decisions
        WHERE account_id = $1 AND decided_at >= $2::timestamptz AND decided_at < $3::timestamptz
        GROUP BY result`,
      [q.account_id, new Date(from).toISOString(), new Date(to).toISOString()],
    );
    const out = zeroCounts();
    for (const r of rows) out[r.result] = r.n;
    return out;
  }

  async decisionsFor(q: { account_id: string; email_hash: string; limit?: number }): Promise<Decision[]> {
    const limit = checkLimit(q.limit, 20, 1000);
    if (typeof q.account_id !== 'string' || typeof q.email_hash !== 'string') throw new TypeError('account_id and email_hash must be strings');
    // Every stored hash is 64 lower-case hex digits (checkDecision): nothing else has decisions.
    if (!EMAIL_HASH.test(q.email_hash)) return [];
    const rows = await this.#db.query<DecisionRow>(
      `SELECT ${COLUMNS.join(', ')} FROM validation_decisions
        WHERE email_key = $4 AND account_id = $1 AND email_hash = $2
        ORDER BY decided_at DESC, id COLLATE "C" DESC
        LIMIT $3`,
      [q.account_id, q.email_hash, limit, emailKey(q.email_hash)],
    );
    return rows.map((r) => decisionFromRow(r, new Date(r.decided_at)));
  }

  async daily(q: Window): Promise<DailyCounts[]> {
    const { from, to } = checkWindow(q);
    const rows = await this.#db.query<{ d: number | string; result: ValidationResult; n: number }>(
      `SELECT floor(extract(epoch FROM decided_at) / 86400)::int AS d, result, count(*)::int AS n FROM validation_decisions
        WHERE account_id = $1 AND decided_at >= $2::timestamptz AND decided_at < $3::timestamptz
        GROUP BY 1, 2`,
      [q.account_id, new Date(from).toISOString(), new Date(to).toISOString()],
    );
    return dailyFrom(rows.map((r) => ({ d: Number(r.d), result: r.result, n: Number(r.n) })));
  }

  async domainSummary(q: Window & { limit?: number }): Promise<DomainSummaryRow[]> {
    const { from, to } = checkWindow(q);
    const limit = checkLimit(q.limit, 100, 10_000);
    const perResult = VALIDATION_RESULTS.map((r, k) => `count(*) FILTER (WHERE result = '${r}')::int AS r${k}`).join(', ');
    const rows = await this.#db.query<Record<string, number> & { domain: string; total: number; latency_sum: number }>(
      `SELECT domain, count(*)::int AS total, ${perResult}, sum(latency_ms)::bigint AS latency_sum
         FROM validation_decisions
        WHERE account_id = $1 AND decided_at >= $2::timestamptz AND decided_at < $3::timestamptz
        GROUP BY domain
        ORDER BY count(*) DESC, domain COLLATE "C" ASC
        LIMIT $4`,
      [q.account_id, new Date(from).toISOString(), new Date(to).toISOString(), limit],
    );
    return rows.map((r) => ({
      domain: r.domain,
      total: r.total,
      counts: Object.fromEntries(VALIDATION_RESULTS.map((res, k) => [res, Number(r[`r${k}`])])) as ResultCounts,
      mean_latency_ms: Number(r.latency_sum) / r.total,
    }));
  }

  protected async writeOutcomes(batch: readonly OutcomeFact[]): Promise<void> {
    // The columns as arrays: one short statement however many rows (a batch is at most batchSize).
    await this.#db.query(
      `INSERT INTO outcome_facts (id, account_id, email_hash, domain, outcome, label, signal, source, occurred_at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[])
       ON CONFLICT (id) DO NOTHING`,
      [
        batch.map((f) => f.id),
        batch.map((f) => f.account_id),
        batch.map((f) => f.email_hash),
        batch.map((f) => f.domain),
        batch.map((f) => f.outcome),
        batch.map((f) => f.label),
        batch.map((f) => f.signal),
        batch.map((f) => f.source),
        batch.map((f) => f.occurred_at.toISOString()),
      ],
    );
  }

  protected async matrixRows(q: Window, byDomain: boolean): Promise<MatrixRow[]> {
    const { from, to } = checkWindow(q);
    return this.#db.query<MatrixRow & Record<string, unknown>>(
      `SELECT ${byDomain ? 'f.domain, ' : ''}coalesce(d.result, 'not_validated') AS result, f.label, f.signal, count(*)::int AS n
         FROM outcome_facts f
         LEFT JOIN LATERAL (
           SELECT result FROM validation_decisions v
            WHERE v.email_key = ${emailKeyOf('f.email_hash')} AND v.account_id = f.account_id AND v.email_hash = f.email_hash AND v.decided_at <= f.occurred_at
            ORDER BY v.decided_at DESC, v.id COLLATE "C" DESC
            LIMIT 1
         ) d ON true
        WHERE f.account_id = $1 AND f.occurred_at >= $2::timestamptz AND f.occurred_at < $3::timestamptz
        GROUP BY ${byDomain ? 'f.domain, ' : ''}coalesce(d.result, 'not_validated'), f.label, f.signal`,
      [q.account_id, new Date(from).toISOString(), new Date(to).toISOString()],
    );
  }
}
