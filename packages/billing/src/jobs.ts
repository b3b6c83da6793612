// The money of jobs and catch-all recoveries: how many credits each holds, charges and gives
// back. The store's job and recovery repos run these hooks inside the transaction that changes
// the job's or the recovery's state (they declare JobCredits and RecoveryCredits), so a hold or a
// settlement commits with that change or not at all; the ledger's statements do the moving.

import { ServiceError } from '@svc/contracts';
import { reserveIn, settleIn, type JobCredits, type Queryable, type RecoveryCredits, type Store } from '@svc/store';

/**
 * A job holds one credit per unique email when it is queued. Completed or canceled, it is charged
 * one per High-Value Validation done (a canceled job's are delivered in its partial results) and
 * the rest is released; a failed job delivers no results and is charged nothing.
 */
export const jobCredits: JobCredits = {
  async reserve(tx, accountId, uniqueEmails) {
    const hold = await reserveIn(tx, accountId, uniqueEmails, 'job');
    return hold.ok ? { ok: true, reservationId: hold.reservationId, amount: uniqueEmails } : hold;
  },
  async settle(tx, end) {
    const charged = end.status === 'failed' ? 0 : await end.chargeable();
    if (end.reservationId) await settleIn(tx, end.reservationId, charged);
    return charged;
  },
};

/** The money of a catch-all recovery: `perRow` credits per catch-all row held, per row upgraded to valid charged. */
export class RecoveryCharges implements RecoveryCredits {
  constructor(readonly perRow = 1) {}

  /**
   * Holds `perRow` credits per catch-all row (no reservation when that is 0); too few credits is
   * `insufficient_credits`. Outside a transaction: the recovery records its reservation next.
   */
  async reserve(store: Pick<Store, 'ledger'>, accountId: string, rows: number): Promise<{ reservationId: string | null; amount: number }> {
    const amount = rows * this.perRow;
    if (amount <= 0) return { reservationId: null, amount };
    const r = await store.ledger.reserve(accountId, amount, 'recovery');
    if (!r.ok) throw new ServiceError('insufficient_credits', `Recovery holds ${amount} credits (one per catch-all row); ${r.available} available`, { required: amount, available: r.available });
    return { reservationId: r.reservationId, amount };
  }

  /** What one recovered row is charged. */
  rowCharge(result: 'valid' | 'invalid'): number {
    return result === 'valid' ? this.perRow : 0;
  }

  async settle(tx: Queryable, reservationId: string | null, upgraded: number): Promise<{ settled: boolean; charged: number }> {
    const charged = upgraded * this.perRow;
    return { settled: reservationId === null || (await settleIn(tx, reservationId, charged)), charged };
  }

  /** Gives the whole reservation back (the recovery failed before it committed; a no-op after). */
  async release(store: Pick<Store, 'ledger'>, reservationId: string): Promise<void> {
    await store.ledger.settle(reservationId, 0);
  }
}
