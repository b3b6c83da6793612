// The cluster profile's Analytics adapter: ClickHouse through @clickhouse/client, over HTTP
// (CLICKHOUSE_URL, default http://127.0.0.1:8123). Written for the oldest server we run, Debian's
// clickhouse-server 18.16: rows go in as JSONEachRow, queries are built as text (no query
// parameters: the server predates them) with the quoting helpers below, and the table uses only
// what 18.16 has (no LowCardinality, no DateTime64, no JSON type, no window functions).
//
// Idempotency: the table is a ReplacingMergeTree whose sorting key ends with the decision id, so
// background merges fold a redelivered decision; until they do, every query reads through a
// `GROUP BY id` subquery, so a decision inserted twice is counted once, exactly.
//
// Time: DateTime has second resolution, so the exact instant is `decided_at_ms` (epoch ms) and
// `decided_at` (DateTime) is computed from it on insert, for partitioning and the sorting key.
//
// The database and table are created on first use (CREATE ... IF NOT EXISTS), and again after a
// failure, so a process can start while ClickHouse is down: rows wait in the buffer.

import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';
import { VALIDATION_RESULTS, type Layer, type ReasonCode, type ValidationResult } from '@svc/contracts';
import { decisionFromRow, type AnalyticsOptions, type DailyCounts, type Decision, type DecisionSource, type DomainSummaryRow, type OutcomeFact, type ResultCounts, type Window } from './analytics.ts';
import { BufferedAnalytics } from './buffered.ts';
import { dailyFrom, zeroCounts, type MatrixRow } from './report.ts';
import { checkLimit, checkWindow } from './validate.ts';

export const DEFAULT_CLICKHOUSE_URL = 'http://127.0.0.1:8123';
export const DEFAULT_CLICKHOUSE_DATABASE = 'svc';
const TABLE = 'validation_decisions';
const FACTS_TABLE = 'outcome_facts';

/**
 * A ClickHouse string literal for `s`. Printable ASCII other than `'` and `\` is kept; every other
 * byte of the UTF-8 encoding (quotes, backslashes, control characters, NUL, non-ASCII) becomes a
 * `\xHH` escape, so nothing in `s` can end the literal or be read as syntax. (A lone UTF-16
 * surrogate is encoded as U+FFFD, as Buffer.from does.)
 */
export function chString(s: string): string {
  if (typeof s !== 'string') throw new TypeError('chString: not a string');
  let out = "'";
  for (const byte of Buffer.from(s, 'utf8')) {
    out += byte >= 0x20 && byte < 0x7f && byte !== 0x27 && byte !== 0x5c ? String.fromCharCode(byte) : `\\x${byte.toString(16).padStart(2, '0')}`;
  }
  return `${out}'`;
}

/** A non-negative safe integer as ClickHouse text; anything else throws. */
export function chUInt(n: number): string {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw new RangeError(`chUInt: ${String(n)} is not a non-negative safe integer`);
  return String(n);
}

/** A database or table name: letters, digits, underscore, not starting with a digit; back-quoted. */
export function chIdent(name: string): string {
  if (typeof name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) throw new RangeError(`chIdent: ${JSON.stringify(name)} is not a plain identifier`);
  return `\`${name}\``;
}

export interface ClickHouseAnalyticsOptions extends AnalyticsOptions {
  /** Default http://127.0.0.1:8123 (the runtime passes CLICKHOUSE_URL). Credentials may be in the URL. */
  url?: string;
  /** Default 'svc'; tests use one of their own. */
  database?: string;
  /** Per request (default 10,000 ms): a stalled server fails the write, which is then retried. */
  requestTimeoutMs?: number;
}

/** A row as ClickHouse's JSON formats give it back: 64-bit numbers as strings, the time in ms. */
type ChRow = Omit<Decision, 'latency_ms' | 'credits_charged' | 'decided_at'> & {
  latency_ms: number | string;
  credits_charged: number | string;
  decided_at_ms: number | string;
};

export class ClickHouseAnalytics extends BufferedAnalytics {
  readonly database: string;
  readonly #client: ClickHouseClient;
  readonly #table: string;
  readonly #facts: string;
  #schema: Promise<void> | undefined;

  constructor(opts: ClickHouseAnalyticsOptions = {}) {
    super(opts);
    this.database = opts.database ?? DEFAULT_CLICKHOUSE_DATABASE;
    this.#table = `${chIdent(this.database)}.${chIdent(TABLE)}`;
    this.#facts = `${chIdent(this.database)}.${chIdent(FACTS_TABLE)}`;
    this.#client = createClient({
      url: opts.url ?? DEFAULT_CLICKHOUSE_URL,
      request_timeout: opts.requestTimeoutMs ?? 10_000,
      // The database may not exist yet: every statement names it (no `database` here).
      compression: { request: false, response: false },
      // While the server is down every retry fails: the client would log each one. Failures are
      // reported through 'write_failed' events and stats(); the caller decides what to log.
      log: { level: ClickHouseLogLevel.OFF },
    });
  }

  /** Creates the database and the table if missing; throws when ClickHouse cannot be reached. */
  ready(): Promise<void> {
    this.#schema ??= this.#createSchema().catch((err: unknown) => {
      this.#schema = undefined; // try again next time
      throw err;
    });
    return this.#schema;
  }

  async #createSchema(): Promise<void> {
    await this.#client.command({ query: `CREATE DATABASE IF NOT EXISTS ${chIdent(this.database)}` });
    await this.#client.command({
      query: `CREATE TABLE IF NOT EXISTS ${this.#facts} (
        id String,
        account_id String,
        email_hash String,
        domain String,
        outcome String,
        label String,
        signal String,
        source String,
        occurred_at_ms UInt64,
        occurred_at DateTime MATERIALIZED toDateTime(intDiv(occurred_at_ms, 1000)),
        recorded_at DateTime MATERIALIZED now()
      ) ENGINE = ReplacingMergeTree()
      PARTITION BY toYYYYMM(occurred_at)
      ORDER BY (account_id, occurred_at, id)`,
    });
    // MATERIALIZED columns are computed by the server on every insert and never sent (18.16's
    // JSONEachRow does not fill DEFAULT expressions for omitted fields).
    await this.#client.command({
      query: `CREATE TABLE IF NOT EXISTS ${this.#table} (
        id String,
        account_id String,
        email_hash String,
        domain String,
        result String,
        reason_code String,
        layer String,
        mx_host Nullable(String),
        latency_ms UInt32,
        job_id Nullable(String),
        source String,
        credits_charged UInt32,
        decided_at_ms UInt64,
        decided_at DateTime MATERIALIZED toDateTime(intDiv(decided_at_ms, 1000)),
        recorded_at DateTime MATERIALIZED now()
      ) ENGINE = ReplacingMergeTree()
      PARTITION BY toYYYYMM(decided_at)
      ORDER BY (account_id, decided_at, id)`,
    });
  }

  protected async writeOutcomes(batch: readonly OutcomeFact[]): Promise<void> {
    await this.ready();
    await this.#client.insert({
      table: this.#facts,
      format: 'JSONEachRow',
      values: batch.map((f) => ({
        id: f.id,
        account_id: f.account_id,
        email_hash: f.email_hash,
        domain: f.domain,
        outcome: f.outcome,
        label: f.label,
        signal: f.signal ?? '',
        source: f.source,
        occurred_at_ms: f.occurred_at.getTime(),
      })),
    });
  }

  /**
   * (result, label, signal[, domain]) counts of the window's facts. One row per fact (a
   * redelivered fact is in the table twice until a merge), joined to every decision of its
   * address: the latest decision at or before the fact's time wins (argMaxIf); a fact with none
   * keeps the empty result, which is `not_validated`.
   */
  protected async matrixRows(q: Window, byDomain: boolean): Promise<MatrixRow[]> {
    const { from, to } = checkWindow(q);
    const rows = await this.#rows<{ dom: string; res: string; lab: string; sig: string; n: string | number }>(
      `SELECT ${byDomain ? 'dom, ' : ''}res, lab, sig, count() AS n FROM (
         SELECT fid, any(fdomain) AS dom, any(flabel) AS lab, any(fsignal) AS sig,
                argMaxIf(result, decided_at_ms * 1000000 + cityHash64(did) % 1000000, decided_at_ms <= focc AND did != '') AS res
           FROM (
             SELECT id AS fid, account_id, email_hash, domain AS fdomain, label AS flabel, signal AS fsignal, occurred_at_ms AS focc
               FROM ${this.#facts}
              WHERE account_id = ${chString(q.account_id)} AND occurred_at_ms >= ${chUInt(from)} AND occurred_at_ms < ${chUInt(to)}
           ) ALL LEFT JOIN (
             SELECT account_id, email_hash, id AS did, result, decided_at_ms FROM ${this.#table} WHERE account_id = ${chString(q.account_id)}
           ) USING (account_id, email_hash)
          GROUP BY fid
       ) GROUP BY ${byDomain ? 'dom, ' : ''}res, lab, sig`,
    );
    return rows.map((r) => ({ ...(byDomain ? { domain: r.dom } : {}), result: r.res === '' ? 'not_validated' : r.res, label: r.lab, signal: r.sig === '' ? null : r.sig, n: Number(r.n) }));
  }


  protected async write(batch: readonly Decision[]): Promise<void> {
    await this.ready();
    await this.#client.insert({
      table: this.#table,
      format: 'JSONEachRow',
      values: batch.map((d) => ({
        id: d.id,
        account_id: d.account_id,
        email_hash: d.email_hash,
        domain: d.domain,
        result: d.result,
        reason_code: d.reason_code,
        layer: d.layer,
        mx_host: d.mx_host,
        latency_ms: d.latency_ms,
        job_id: d.job_id,
        source: d.source,
        credits_charged: d.credits_charged,
        decided_at_ms: d.decided_at.getTime(),
      })),
    });
  }

  protected async closeBackend(): Promise<void> {
    await this.#client.close();
  }

  async #rows<T>(query: string): Promise<T[]> {
    await this.ready();
    const rs = await this.#client.query({ query, format: 'JSONEachRow' });
    return (await rs.json()) as T[];
  }

  /**
   * The WHERE of a window: the second-resolution `decided_at` narrows the read by the sorting key
   * (seconds rounded outwards), `decided_at_ms` decides exactly: from <= t < to.
   */
  #window(q: Window): string {
    const { from, to } = checkWindow(q); // within [0, 2^32 s]: toDateTime would wrap beyond
    const sec = (ms: number): string => chUInt(Math.min(Math.floor(ms / 1000), 4_294_967_295));
    return `account_id = ${chString(q.account_id)}
      AND decided_at >= toDateTime(${sec(from)}) AND decided_at <= toDateTime(${sec(to)})
      AND decided_at_ms >= ${chUInt(from)} AND decided_at_ms < ${chUInt(to)}`;
  }

  async countByResult(q: Window): Promise<ResultCounts> {
    // Aliases differ from column names: old servers substitute an alias inside its own expression.
    const rows = await this.#rows<{ r: string; n: string | number }>(
      `SELECT r, count() AS n FROM (
         SELECT id, any(result) AS r FROM ${this.#table} WHERE ${this.#window(q)} GROUP BY id
       ) GROUP BY r`,
    );
    const out = zeroCounts();
    for (const row of rows) if ((VALIDATION_RESULTS as readonly string[]).includes(row.r)) out[row.r as ValidationResult] = Number(row.n);
    return out;
  }

  async decisionsFor(q: { account_id: string; email_hash: string; limit?: number }): Promise<Decision[]> {
    const limit = checkLimit(q.limit, 20, 1000);
    if (typeof q.account_id !== 'string' || typeof q.email_hash !== 'string') throw new TypeError('account_id and email_hash must be strings');
    // LIMIT 1 BY id: one row per decision however many times it was inserted.
    const rows = await this.#rows<ChRow>(
      `SELECT id, account_id, email_hash, domain, result, reason_code, layer, mx_host, latency_ms, job_id, source, credits_charged, decided_at_ms
         FROM ${this.#table}
        WHERE account_id = ${chString(q.account_id)} AND email_hash = ${chString(q.email_hash)}
        ORDER BY decided_at_ms DESC, id DESC
        LIMIT 1 BY id
        LIMIT ${chUInt(limit)}`,
    );
    return rows.map((r) => decisionFromRow(r, new Date(Number(r.decided_at_ms))));
  }

  async daily(q: Window): Promise<DailyCounts[]> {
    // The day from the exact instant (epoch ms), so the server's time zone plays no part.
    const rows = await this.#rows<{ dd: string | number; r: string; n: string | number }>(
      `SELECT dd, r, count() AS n FROM (
         SELECT id, any(intDiv(decided_at_ms, 86400000)) AS dd, any(result) AS r FROM ${this.#table} WHERE ${this.#window(q)} GROUP BY id
       ) GROUP BY dd, r`,
    );
    return dailyFrom(rows.filter((row) => (VALIDATION_RESULTS as readonly string[]).includes(row.r)).map((row) => ({ d: Number(row.dd), result: row.r as ValidationResult, n: Number(row.n) })));
  }

  async domainSummary(q: Window & { limit?: number }): Promise<DomainSummaryRow[]> {
    const limit = checkLimit(q.limit, 100, 10_000);
    const perResult = VALIDATION_RESULTS.map((r, k) => `countIf(r = ${chString(r)}) AS r${k}`).join(', ');
    const rows = await this.#rows<Record<string, string | number> & { d: string; total: string | number; latency_sum: string | number }>(
      `SELECT d, count() AS total, ${perResult}, sum(l) AS latency_sum FROM (
         SELECT id, any(domain) AS d, any(result) AS r, any(latency_ms) AS l FROM ${this.#table} WHERE ${this.#window(q)} GROUP BY id
       ) GROUP BY d
       ORDER BY total DESC, d ASC
       LIMIT ${chUInt(limit)}`,
    );
    return rows.map((r) => {
      const total = Number(r.total);
      return {
        domain: r.d,
        total,
        counts: Object.fromEntries(VALIDATION_RESULTS.map((res, k) => [res, Number(r[`r${k}`])])) as ResultCounts,
        mean_latency_ms: Number(r.latency_sum) / total,
      };
    });
  }
}

/** A ClickHouseAnalytics with its schema created (throws when ClickHouse is unreachable). */
export async function openClickHouseAnalytics(opts: ClickHouseAnalyticsOptions = {}): Promise<ClickHouseAnalytics> {
  const a = new ClickHouseAnalytics(opts);
  try {
    await a.ready();
  } catch (err) {
    await a.close().catch(() => {});
    throw err;
  }
  return a;
}
