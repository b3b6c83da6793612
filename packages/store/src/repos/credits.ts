// The money hooks of the job and recovery repos. How many credits a job or a catch-all recovery
// holds, charges and gives back is @svc/billing's to decide: billing implements these hooks and
// the callers hand them in. A repo runs its hook inside the transaction that changes the job's or
// the recovery's state, so the hold or the settlement commits with that change or not at all. The
// repos supply the facts (which rows were delivered); the ledger's statements (reserveIn,
// settleIn) do the moving.

import type { Queryable } from '../db/db.ts';

/** A job's hold: the reservation and what it holds, or a refusal with the credits available. */
export type JobHold = { ok: true; reservationId: string; amount: number } | { ok: false; available: number };

/** A job becoming final, as its settlement sees it. */
export interface JobEnd {
  jobId: string;
  accountId: string;
  /** Null for a job that never held credits (it failed awaiting its upload). */
  reservationId: string | null;
  status: 'completed' | 'failed' | 'canceled';
  /** How many of the job's results are done and chargeable (High-Value Validations); read on demand. */
  chargeable: () => Promise<number>;
}

export interface JobCredits {
  /** Holds what a job of `uniqueEmails` may cost, in the transaction that queues it. */
  reserve(tx: Queryable, accountId: string, uniqueEmails: number): Promise<JobHold>;
  /** Settles the job's reservation in the transaction that makes it final; returns the credits charged. */
  settle(tx: Queryable, end: JobEnd): Promise<number>;
}

export interface RecoveryCredits {
  /**
   * Settles a recovery's reservation in the transaction that commits it, `upgraded` rows having
   * become valid. `settled` false: the reservation was no longer open (nothing changed).
   */
  settle(tx: Queryable, reservationId: string | null, upgraded: number): Promise<{ settled: boolean; charged: number }>;
}
