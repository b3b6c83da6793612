// The email finder's per-domain evidence: patterns proven by name (infra/migrations/
// 022_finder_patterns.sql) and shapes of addresses known to exist (023_finder_shapes.sql).

import type { Db } from '../db/db.ts';

/** Addresses of a domain seen with a shape since the last write. */
export interface ShapeSighting {
  domain: string;
  shape: string;
  n: number;
}

export class FinderPatternsRepo {
  constructor(private readonly db: Db) {}

  /** How many proven addresses of the domain followed each pattern. */
  async counts(domain: string): Promise<Record<string, number>> {
    const rows = await this.db.query<{ pattern: string; confirmations: number }>('SELECT pattern, confirmations FROM finder_patterns WHERE domain = $1', [domain]);
    return Object.fromEntries(rows.map((r) => [r.pattern, Number(r.confirmations)]));
  }

  /** One more proven address of the domain followed `pattern`. */
  async confirm(domain: string, pattern: string): Promise<void> {
    await this.db.query(
      `INSERT INTO finder_patterns (domain, pattern, confirmations) VALUES ($1, $2, 1)
       ON CONFLICT (domain, pattern) DO UPDATE SET confirmations = finder_patterns.confirmations + 1, updated_at = now()`,
      [domain, pattern],
    );
  }

  /** How many existing addresses of the domain had each shape. */
  async shapeCounts(domain: string): Promise<Record<string, number>> {
    const rows = await this.db.query<{ shape: string; seen: number }>('SELECT shape, seen FROM finder_shapes WHERE domain = $1', [domain]);
    return Object.fromEntries(rows.map((r) => [r.shape, Number(r.seen)]));
  }

  /** Adds sightings in one statement (a (domain, shape) given twice adds both). */
  async addShapes(sightings: readonly ShapeSighting[]): Promise<void> {
    const summed = new Map<string, ShapeSighting>();
    for (const s of sightings) {
      if (!Number.isSafeInteger(s.n) || s.n <= 0) throw new RangeError('n must be a positive integer');
      const k = `${s.domain}\n${s.shape}`;
      const had = summed.get(k);
      summed.set(k, had ? { ...had, n: had.n + s.n } : { ...s });
    }
    if (summed.size === 0) return;
    const rows = [...summed.values()];
    await this.db.query(
      `INSERT INTO finder_shapes (domain, shape, seen)
       SELECT * FROM unnest($1::text[], $2::text[], $3::int[])
       ON CONFLICT (domain, shape) DO UPDATE SET seen = finder_shapes.seen + EXCLUDED.seen, updated_at = now()`,
      [rows.map((r) => r.domain), rows.map((r) => r.shape), rows.map((r) => r.n)],
    );
  }
}
