// The data endpoints' cache (infra/migrations/021_data_product.sql): one row per (endpoint,
// normalised input) with the answer, whether it was found, who found it and when. A read takes a
// row only while it is younger than the caller's time-to-live; a write replaces the row (a forced
// refresh rewrites it, a miss is remembered like a find).

import type { Db } from '../db/db.ts';

export interface CachedAnswer {
  found: boolean;
  /** The answer as the endpoint stores it (JSON). */
  value: unknown;
  source_provider: string | null;
  fetched_at: Date;
}

export class EnrichCacheRepo {
  constructor(private readonly db: Db) {}

  async get(endpoint: string, key: string, ttlMs: number): Promise<CachedAnswer | undefined> {
    const rows = await this.db.query<{ found: boolean; value: string; source_provider: string | null; fetched_at: Date }>(
      `SELECT found, value, source_provider, fetched_at FROM enrich_cache
        WHERE endpoint = $1 AND key = $2 AND fetched_at > now() - ($3::bigint * interval '1 millisecond')`,
      [endpoint, key, ttlMs],
    );
    const r = rows[0];
    if (!r) return undefined;
    return { found: r.found, value: JSON.parse(r.value) as unknown, source_provider: r.source_provider, fetched_at: new Date(r.fetched_at) };
  }

  async put(endpoint: string, key: string, answer: { found: boolean; value: unknown; source_provider?: string | null }): Promise<void> {
    await this.db.query(
      `INSERT INTO enrich_cache (endpoint, key, found, value, source_provider, fetched_at) VALUES ($1, $2, $3, $4, $5, now())
       ON CONFLICT (endpoint, key) DO UPDATE SET found = EXCLUDED.found, value = EXCLUDED.value, source_provider = EXCLUDED.source_provider, fetched_at = EXCLUDED.fetched_at`,
      [endpoint, key, answer.found, JSON.stringify(answer.value ?? null), answer.source_provider ?? null],
    );
  }

  /** Removes rows older than `olderThanMs` (the longest time-to-live): the periodic sweep. */
  async prune(olderThanMs: number): Promise<number> {
    const rows = await this.db.query("DELETE FROM enrich_cache WHERE fetched_at < now() - ($1::bigint * interval '1 millisecond') RETURNING 1", [olderThanMs]);
    return rows.length;
  }

  /**
   * The domain of a company found by name before (the company cache, exact name without regard
   * to case): how the finder turns a contact's `company` into a domain without a vendor.
   */
  async domainOfCompany(name: string, ttlMs: number): Promise<string | undefined> {
    const rows = await this.db.query<{ key: string }>(
      `SELECT key FROM enrich_cache
        WHERE endpoint = 'company' AND found AND fetched_at > now() - ($2::bigint * interval '1 millisecond')
          AND (lower(value::json->>'company_name') = lower($1) OR lower(value::json->>'display_name') = lower($1))
        ORDER BY fetched_at DESC LIMIT 1`,
      [name, ttlMs],
    );
    return rows[0]?.key;
  }
}
