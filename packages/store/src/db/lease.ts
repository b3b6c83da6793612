// Claims held across a request or a job's intake are leases (migration 011): the holder renews
// them every third of the lease, and another process takes over one that ran out.

/** How long a claim outlives the process holding it unless renewed: SVC_CLAIM_LEASE_MS's default. */
export const DEFAULT_CLAIM_LEASE_MS = 15_000;

/**
 * Calls `renew` every third of `leaseMs` (at least 100 ms apart) until the returned function is
 * called. A failed renewal goes to `onError` (ignored by default); the next one tries again. The
 * timer never keeps the process alive.
 */
export function keepRenewing(leaseMs: number, renew: () => Promise<unknown>, onError: (err: unknown) => void = () => {}): () => void {
  const timer = setInterval(() => void renew().catch(onError), Math.max(100, Math.floor(leaseMs / 3)));
  timer.unref();
  return () => clearInterval(timer);
}
