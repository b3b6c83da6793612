// The embedded profile's Analytics adapter: SQL tables in the relational store.

import { VALIDATION_RESULTS, type ValidationResult } from '@svc/contracts';
import type { Db, Queryable } from '../db/db.ts';
import { dbJsonString } from '../db/text.ts';
import { decisionFromRow, type AnalyticsOptions, type DailyCounts, type Decision, type DomainSummaryRow, type OutcomeFact, type ResultCounts, type Window } from './analytics.ts';
import { BufferedAnalytics } from './buffered.ts';
import { dailyFrom, zeroCounts, type MatrixRow } from './report.ts';
import { checkLimit, checkWindow, EMAIL_HASH } from './validate.ts';

/**
 * The first 64 bits of a hex SHA-256 as a signed bigint, in decimal: the key of one address's
 * decisions (infra/migrations/027_decision_email_key.sql, kept in a pack's `email_keys`), the
 * value of `('x' || left(email_hash, 16))::bit(64)::bigint` in SQL.
 */
export const emailKey = (emailHash: string): string => BigInt.asIntN(64, BigInt(`0x${emailHash.slice(0, 16)}`)).toString();
/** The same key computed in SQL from a hash column or parameter. */
const emailKeyOf = (hashSql: string): string => `('x' || left(${hashSql}, 16))::bit(64)::bigint`;

/**
 * Decisions per pack (infra/migrations/028_decision_packs.sql): one row of decision_packs, its
 * write ~1-2 ms of the store's one connection (on PGlite one statement at a time, in its own
 * thread, shared with the requests' debits and the jobs' results).
 */
const ROWS_PER_PACK = 100;
/** Packs a COPY writes at most: 1,000 decisions, ~6 ms of the store's thread on PGlite. */
const PACKS_PER_COPY = 10;
const PACK_COLUMNS = ['account_id', 'first_at', 'last_at', 'email_keys', 'body', 'heads', 'hashes'] as const;
/** A result as one letter in a pack's `heads` (the migration's table). */
const RESULT_LETTER: Record<ValidationResult, string> = { valid: 'v', valid_role_based: 'r', risky: 'k', invalid: 'i', unknown: 'u' };
/** Characters of one decision in `heads`: its time in ms (13 digits), its result's letter. */
const MS_DIGITS = 13;
const HEAD = MS_DIGITS + 1;

/**
 * The ISO text of a time in ms (~0.4 µs a call), the last one kept: packs come in time order,
 * many of them within one millisecond under load.
 */
let lastMs = Number.NaN;
let lastIso = '';
function isoOf(ms: number): string {
  if (ms !== lastMs) {
    lastIso = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastIso;
}
/** emailKey of the last hash asked (a BigInt parse and print, ~1 µs), kept: one address is often decided many times in a row. */
let lastHash = '';
let lastKey = '';
function keyOf(hash: string): string {
  if (hash !== lastHash) {
    lastKey = emailKey(hash);
    lastHash = hash;
  }
  return lastKey;
}

/**
 * One checked decision as a pack's body holds it, a JSON array of its fields but the account, in
 * the migration's order: what dbJson would make of that array, written out. (The checks leave
 * nothing to escape in the hash, the codes and the integers; the texts go through dbJsonString.
 * dbJson's general walk of the same array cost ~2.5x this.)
 */
const packed = (d: Decision): string =>
  `[${dbJsonString(d.id)},"${d.email_hash}",${dbJsonString(d.domain)},"${d.result}","${d.reason_code}","${d.layer}",${d.mx_host === null ? 'null' : dbJsonString(d.mx_host)},${d.latency_ms},${d.job_id === null ? 'null' : dbJsonString(d.job_id)},"${d.source}",${d.credits_charged},${d.decided_at.getTime()}]`;

/**
 * Checked decisions as the rows of decision_packs, in PACK_COLUMNS order: grouped by account (in
 * the order each account first appears), up to ROWS_PER_PACK a pack, `email_keys` as an array
 * literal (the same text for COPY and for a parameter on either driver), `hashes` as hex digits.
 */
function packsOf(batch: readonly Decision[]): string[][] {
  const byAccount = new Map<string, Decision[]>();
  for (const d of batch) {
    const list = byAccount.get(d.account_id);
    if (list) list.push(d);
    else byAccount.set(d.account_id, [d]);
  }
  const packs: string[][] = [];
  for (const [account, list] of byAccount) {
    for (let start = 0; start < list.length; start += ROWS_PER_PACK) {
      const part = list.length <= ROWS_PER_PACK ? list : list.slice(start, start + ROWS_PER_PACK);
      let first = Infinity;
      let last = -Infinity;
      let keys = '';
      let heads = '';
      let hashes = '';
      for (const d of part) {
        const ms = d.decided_at.getTime();
        if (ms < first) first = ms;
        if (ms > last) last = ms;
        keys += keys === '' ? keyOf(d.email_hash) : `,${keyOf(d.email_hash)}`;
        heads += String(ms).padStart(MS_DIGITS, '0') + RESULT_LETTER[d.result];
        hashes += d.email_hash;
      }
      packs.push([account, isoOf(first), isoOf(last), `{${keys}}`, `[${part.map(packed).join(',')}]`, heads, hashes]);
    }
  }
  return packs;
}

/**
 * Writes checked decisions to decision_packs on `db` (a connection or a transaction), a statement
 * a pack. A decision delivered again is written again and counted once by every read. The jobs
 * repository uses it in the transaction of a job's results when analytics is this store
 * (JobsRepo.decisionsInTable).
 */
export async function insertDecisionPacks(db: Queryable, batch: readonly Decision[]): Promise<void> {
  for (const pack of packsOf(batch)) {
    await db.query(`INSERT INTO decision_packs (${PACK_COLUMNS.join(', ')}) VALUES ($1, $2::timestamptz, $3::timestamptz, $4::bigint[], $5, $6, decode($7, 'hex'))`, pack);
  }
}

/**
 * The decisions of the packs `p` one row each (the body's elements `e`), as SQL expressions by
 * column; `at_ms` is decided_at, in ms since the epoch.
 */
const E = {
  id: `(e->>0)`,
  email_hash: `(e->>1)`,
  domain: `(e->>2)`,
  result: `(e->>3)`,
  reason_code: `(e->>4)`,
  layer: `(e->>5)`,
  mx_host: `(e->>6)`,
  latency_ms: `(e->>7)::int`,
  job_id: `(e->>8)`,
  source: `(e->>9)`,
  credits_charged: `(e->>10)::int`,
  at_ms: `(e->>11)::bigint`,
} as const;
const UNPACKED = 'decision_packs p CROSS JOIN LATERAL jsonb_array_elements(p.body::jsonb) e';
/**
 * An account's decisions in [$2, $3) ($2 and $3 timestamptz, $4 and $5 the same in ms): the packs
 * that can hold one through their index, then each decision's own time.
 */
const IN_WINDOW = `p.account_id = $1 AND p.last_at >= $2::timestamptz AND p.first_at < $3::timestamptz AND ${E.at_ms} >= $4 AND ${E.at_ms} < $5`;
const windowParams = (q: Window, from: number, to: number): unknown[] => [q.account_id, new Date(from).toISOString(), new Date(to).toISOString(), from, to];

/**
 * The pack's account compared on the rows the address's key found, never through the account's
 * time index: the store has no statistics (PGlite runs no ANALYZE), and on default estimates the
 * planner ANDed the GIN lookup (a row or two) with a scan of every pack of the account in the
 * time index (2,700 of them for a 270,000-decision account: 0.14 ms a lookup, an outcome report's
 * 2,000 facts 0.3 s). `IS TRUE` keeps the comparison out of any index condition.
 */
const ACCOUNT_RECHECK = (account: string): string => `(p.account_id = ${account}) IS TRUE`;

/** A decision as decisionsFor reads it back. */
type DecisionRow = Omit<Decision, 'decided_at'> & { at_ms: number | string } & Record<string, unknown>;

/**
 * The embedded profile's adapter: decisions in packs (decision_packs, infra/migrations/
 * 028_decision_packs.sql; the view validation_decisions shows them a row each) and outcome facts
 * (outcome_facts) in the relational store, on PGlite or Postgres through the same SQL. It uses
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
    if (!copyIn) return insertDecisionPacks(this.#db, batch);
    // The packs of PACKS_PER_COPY at a time in one COPY (hashes in bytea's hex input form, which
    // COPY reads): a statement costs the store's thread ~0.5 ms whatever it holds, about what 100
    // decisions cost, so a COPY a pack doubled the thread's work; a debit waiting behind one goes
    // first all the same.
    const packs = packsOf(batch);
    for (let at = 0; at < packs.length; at += PACKS_PER_COPY) {
      await copyIn('decision_packs', PACK_COLUMNS, packs.slice(at, at + PACKS_PER_COPY).map((p) => [...p.slice(0, 6), `\\x${p[6]}`]), { background: true });
    }
  }

  protected async closeBackend(): Promise<void> {
    // The connection is the store's.
  }

  // Every read counts a decision once however often it was delivered: distinct ids.

  async countByResult(q: Window): Promise<ResultCounts> {
    const { from, to } = checkWindow(q);
    const rows = await this.#db.query<{ result: ValidationResult; n: number }>(
      `SELECT ${E.result} AS result, count(DISTINCT ${E.id})::int AS n FROM ${UNPACKED} WHERE ${IN_WINDOW} GROUP BY 1`,
      windowParams(q, from, to),
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
    const columns = Object.entries(E).map(([name, sql]) => `${sql} AS ${name}`).join(', ');
    const rows = await this.#db.query<DecisionRow>(
      `SELECT * FROM (
         SELECT DISTINCT ON (${E.id}) p.account_id, ${columns} FROM ${UNPACKED}
          WHERE p.email_keys @> ARRAY[$4::bigint] AND ${ACCOUNT_RECHECK('$1')} AND ${E.email_hash} = $2
       ) d
       ORDER BY at_ms DESC, id COLLATE "C" DESC
       LIMIT $3`,
      [q.account_id, q.email_hash, limit, emailKey(q.email_hash)],
    );
    return rows.map((r) => decisionFromRow(r, new Date(Number(r.at_ms))));
  }

  async daily(q: Window): Promise<DailyCounts[]> {
    const { from, to } = checkWindow(q);
    const rows = await this.#db.query<{ d: number | string; result: ValidationResult; n: number }>(
      `SELECT floor(${E.at_ms} / 86400000)::int AS d, ${E.result} AS result, count(DISTINCT ${E.id})::int AS n FROM ${UNPACKED}
        WHERE ${IN_WINDOW}
        GROUP BY 1, 2`,
      windowParams(q, from, to),
    );
    return dailyFrom(rows.map((r) => ({ d: Number(r.d), result: r.result, n: Number(r.n) })));
  }

  async domainSummary(q: Window & { limit?: number }): Promise<DomainSummaryRow[]> {
    const { from, to } = checkWindow(q);
    const limit = checkLimit(q.limit, 100, 10_000);
    const perResult = VALIDATION_RESULTS.map((r, k) => `count(*) FILTER (WHERE result = '${r}')::int AS r${k}`).join(', ');
    const rows = await this.#db.query<Record<string, number> & { domain: string; total: number; latency_sum: number }>(
      `SELECT domain, count(*)::int AS total, ${perResult}, sum(latency_ms)::bigint AS latency_sum
         FROM (SELECT DISTINCT ON (${E.id}) ${E.domain} AS domain, ${E.result} AS result, ${E.latency_ms} AS latency_ms FROM ${UNPACKED} WHERE ${IN_WINDOW}) d
        GROUP BY domain
        ORDER BY count(*) DESC, domain COLLATE "C" ASC
        LIMIT $6`,
      [...windowParams(q, from, to), limit],
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

  /**
   * Each fact against its address's latest decision at or before it, read from the packs' `heads`
   * at the positions of its address's key (no body parsed: an outcome report reads one decision
   * per fact). Decisions of one address within one millisecond: the one written last.
   */
  protected async matrixRows(q: Window, byDomain: boolean): Promise<MatrixRow[]> {
    const { from, to } = checkWindow(q);
    const key = emailKeyOf('f.email_hash');
    const headMs = `substr(p.heads, (i - 1) * ${HEAD} + 1, ${MS_DIGITS})::bigint`;
    const headResult = `CASE substr(p.heads, (i - 1) * ${HEAD} + ${MS_DIGITS + 1}, 1) ${Object.entries(RESULT_LETTER)
      .map(([result, letter]) => `WHEN '${letter}' THEN '${result}'`)
      .join(' ')} END`;
    return this.#db.query<MatrixRow & Record<string, unknown>>(
      `SELECT ${byDomain ? 'f.domain, ' : ''}coalesce(d.result, 'not_validated') AS result, f.label, f.signal, count(*)::int AS n
         FROM outcome_facts f
         LEFT JOIN LATERAL (
           SELECT ${headResult} AS result
             FROM decision_packs p CROSS JOIN LATERAL unnest(array_positions(p.email_keys, ${key})) AS i
            WHERE p.email_keys @> ARRAY[${key}] AND ${ACCOUNT_RECHECK('f.account_id')} AND p.first_at <= f.occurred_at
              AND substring(p.hashes FROM (i - 1) * 32 + 1 FOR 32) = decode(f.email_hash, 'hex')
              AND ${headMs} <= floor(extract(epoch FROM f.occurred_at) * 1000)::bigint
            ORDER BY ${headMs} DESC, p.last_at DESC, p.ctid DESC, i DESC
            LIMIT 1
         ) d ON true
        WHERE f.account_id = $1 AND f.occurred_at >= $2::timestamptz AND f.occurred_at < $3::timestamptz
        GROUP BY ${byDomain ? 'f.domain, ' : ''}coalesce(d.result, 'not_validated'), f.label, f.signal`,
      [q.account_id, new Date(from).toISOString(), new Date(to).toISOString()],
    );
  }
}
