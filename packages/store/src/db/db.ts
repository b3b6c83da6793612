// The relational store port. Business code writes SQL once; it runs on PGlite (embedded profile)
// and on Postgres through `pg` (cluster profile). Both adapters return rows with int8 and numeric
// columns as JS numbers (PGlite does so natively; the pg adapter is told to), so callers never ask
// which adapter they got.

export type Row = Record<string, unknown>;

export interface Queryable {
  query<T extends Row = Row>(sql: string, params?: unknown[]): Promise<T[]>;
}

/** A value of a row given to Db.copyIn. */
export type CopyValue = string | number | null;

export interface Db extends Queryable {
  /** Runs fn in one transaction: COMMIT when it resolves, ROLLBACK when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Appends rows to `table` with one COPY (no ON CONFLICT: a duplicate key fails the whole
   * statement and nothing of it is written). PGlite only: it costs about half of an INSERT of the
   * same rows there. Callers check for it and fall back to INSERT where it is absent.
   * `background`: rows nobody waits for (analytics); statements that are waiting for the one
   * connection when it would start go first (for at most 100 ms).
   */
  copyIn?(table: string, columns: readonly string[], rows: ReadonlyArray<readonly CopyValue[]>, opts?: { background?: boolean }): Promise<void>;
  /** Runs a script of several statements (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
  readonly kind: 'pglite' | 'postgres';
}
