// The email finder's per-domain pattern evidence (infra/migrations/022_finder_patterns.sql).

import type { Db } from '../db/db.ts';

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
}
