// The credit movements that are not a request's own: an operator's grant, and the holds a dead
// process left open. Money moves only here and in the other billing use cases; callers (the admin
// CLI, the server's start-up and its sweep) say when, billing says what moves.

import type { Store } from '@svc/store';

/** How long a sync validation's hold may stay open before a sweep takes it for orphaned. */
export const SYNC_HOLD_ORPHANED_MS = 10 * 60_000;

/** Adds `amount` (a positive whole number) to the account's balance, as a ledger row with `note`. */
export async function grantCredits(store: Pick<Store, 'ledger'>, accountId: string, amount: number, note: string): Promise<void> {
  if (!Number.isSafeInteger(amount) || amount <= 0) throw new RangeError(`a grant is a positive whole number of credits, got ${amount}`);
  await store.ledger.grant(accountId, amount, note);
}

/**
 * Releases the holds of sync validations, data requests and catch-all recoveries that a crash cut off: those
 * older than `olderThanMs` (0 when this process is the only one: every open one). A job's hold is
 * not among them: the job is resumed and settles it. Returns how many were released.
 */
export async function releaseOrphanedHolds(store: Pick<Store, 'ledger'>, olderThanMs: number): Promise<number> {
  const sync = await store.ledger.releaseStale('sync', olderThanMs);
  const recovery = await store.ledger.releaseStale('recovery', olderThanMs);
  const data = await store.ledger.releaseStale('data', olderThanMs);
  return sync + recovery + data;
}

/** The periodic sweep's part: sync and data holds left open by a failed settle or a dead process. */
export const releaseStaleSyncHolds = async (store: Pick<Store, 'ledger'>): Promise<number> =>
  (await store.ledger.releaseStale('sync', SYNC_HOLD_ORPHANED_MS)) + (await store.ledger.releaseStale('data', SYNC_HOLD_ORPHANED_MS));
