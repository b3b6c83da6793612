// The MxThrottle port: the most SMTP sessions one egress IP holds to one MX host at a time. The
// engine uses it and holds the in-process adapter; the store holds the Redis adapter that the
// cluster profile shares between processes. The port lives here, below both, so each adapter
// implements the one declaration without engine and store importing each other.

export interface MxThrottle {
  /**
   * Waits for a session permit for `host`; the returned function gives it back (idempotent).
   * Once `signal` is aborted the call never waits: it takes a permit that is free at once, or
   * rejects; a wait in progress is withdrawn and rejects.
   */
  acquire(host: string, signal?: AbortSignal): Promise<() => void>;
}

/** The rejection of an acquire that would have had to wait after its signal was aborted. */
export function permitWaitCancelled(host: string, signal?: AbortSignal): Error {
  const why = signal?.reason instanceof Error ? `: ${signal.reason.message}` : '';
  return new Error(`no session permit free for ${host}, and the wait was cancelled${why}`);
}
