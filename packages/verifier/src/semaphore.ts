// A counting semaphore: at most `max` units held at once, waiters served in arrival order (a
// large request at the head is not overtaken by smaller ones behind it).

export class Semaphore {
  #free: number;
  readonly #waiting: Array<{ n: number; go: () => void }> = [];

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxInFlight must be a positive integer, got ${max}`);
    this.#free = max;
  }

  /** Resolves once `n` units (at most `max`) are held by the caller. */
  acquire(n = 1): Promise<void> {
    if (this.#waiting.length === 0 && this.#free >= n) {
      this.#free -= n;
      return Promise.resolve();
    }
    return new Promise((go) => this.#waiting.push({ n, go }));
  }

  release(n = 1): void {
    this.#free += n;
    while (this.#waiting.length > 0 && this.#free >= this.#waiting[0]!.n) {
      const w = this.#waiting.shift()!;
      this.#free -= w.n;
      w.go();
    }
  }

  /** Runs `fn` holding `n` units. */
  async run<T>(fn: () => Promise<T>, n = 1): Promise<T> {
    await this.acquire(n);
    try {
      return await fn();
    } finally {
      this.release(n);
    }
  }
}
