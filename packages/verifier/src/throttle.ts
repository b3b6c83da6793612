// Per-MX connection throttle: at most `max` open sessions per MX host, shared by every domain
// that uses that host (thousands of domains sit on the same Google or Microsoft MX).

export class KeyedSemaphore {
  #active = new Map<string, number>();
  #waiting = new Map<string, Array<() => void>>();

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError('max must be a positive integer');
  }

  async acquire(key: string): Promise<() => void> {
    const n = this.#active.get(key) ?? 0;
    if (n < this.max) {
      this.#active.set(key, n + 1);
    } else {
      await new Promise<void>((resolve) => {
        const q = this.#waiting.get(key) ?? [];
        q.push(resolve);
        this.#waiting.set(key, q);
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const q = this.#waiting.get(key);
      const next = q?.shift();
      if (q && q.length === 0) this.#waiting.delete(key);
      if (next) {
        next(); // hand the slot over: the count stays the same
      } else {
        const left = (this.#active.get(key) ?? 1) - 1;
        if (left === 0) this.#active.delete(key);
        else this.#active.set(key, left);
      }
    };
  }

  active(key: string): number {
    return this.#active.get(key) ?? 0;
  }
}
