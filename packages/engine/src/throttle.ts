// The in-process adapter of the MxThrottle port (declared in @svc/contracts, which the store's
// Redis adapter implements too), keyed by server address. In the embedded profile one process is
// the only client, so an in-process semaphore is the whole truth (the address gates keep below
// it); the cluster profile puts the same port on Redis so every process sharing an egress IP
// counts against one limit per server address.

import { permitWaitCancelled, type MxThrottle } from '@svc/contracts';

// Re-exported so the engine's files keep importing the port from here.
export { permitWaitCancelled, type MxThrottle };

/** In-process adapter: at most `max` permits per key (a server address), handed over in arrival order. */
export class MemoryMxThrottle implements MxThrottle {
  #active = new Map<string, number>();
  #waiting = new Map<string, Array<() => void>>();

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError('max must be a positive integer');
  }

  async acquire(address: string, signal?: AbortSignal): Promise<() => void> {
    const host = address;
    const n = this.#active.get(host) ?? 0;
    if (n < this.max) this.#active.set(host, n + 1);
    else {
      if (signal?.aborted) throw permitWaitCancelled(host, signal);
      await new Promise<void>((resolve, reject) => {
        const q = this.#waiting.get(host) ?? [];
        const onAbort = () => {
          const i = q.indexOf(waiter);
          if (i < 0) return;
          q.splice(i, 1);
          if (q.length === 0 && this.#waiting.get(host) === q) this.#waiting.delete(host);
          reject(permitWaitCancelled(host, signal));
        };
        const waiter = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        q.push(waiter);
        this.#waiting.set(host, q);
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const q = this.#waiting.get(host);
      const next = q?.shift();
      if (q && q.length === 0) this.#waiting.delete(host);
      if (next) next(); // the permit passes on: the count stays
      else {
        const left = (this.#active.get(host) ?? 1) - 1;
        if (left === 0) this.#active.delete(host);
        else this.#active.set(host, left);
      }
    };
  }

  active(host: string): number {
    return this.#active.get(host) ?? 0;
  }
}
