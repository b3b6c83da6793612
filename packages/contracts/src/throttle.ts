// The MxThrottle port: the most SMTP sessions one egress IP holds to one mail server ADDRESS at a
// time (a server counts its per-client connection limit per address, whichever MX names lead to
// it). The engine uses it and holds the in-process adapter; the store holds the Redis adapter that
// the cluster profile shares between processes. The port lives here, below both, so each adapter
// implements the one declaration without engine and store importing each other.

export interface MxThrottle {
  /**
   * Waits for a session permit for the server address `address` (an IP address, the key); the
   * returned function gives it back (idempotent). The engine gives a permit back only once the
   * server can have counted its session down (after the QUIT's reply, the close and a short
   * cool-down), so a permit given back is a connection the server no longer counts. Once `signal`
   * is aborted the call never waits: it takes a permit that is free at once, or rejects; a wait in
   * progress is withdrawn and rejects.
   */
  acquire(address: string, signal?: AbortSignal): Promise<() => void>;
}

/** The rejection of an acquire that would have had to wait after its signal was aborted. */
export function permitWaitCancelled(host: string, signal?: AbortSignal): Error {
  const why = signal?.reason instanceof Error ? `: ${signal.reason.message}` : '';
  return new Error(`no session permit free for ${host}, and the wait was cancelled${why}`);
}
