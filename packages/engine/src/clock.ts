// The engine's time: readings and timers through one port, so tests move time forward instead of
// sleeping. The system clock is Node's; the manual clock only moves when a test says so.

/** A timer handle, opaque to the engine. */
export type ClockTimer = { readonly __timer: true } | NodeJS.Timeout;

export interface Clock {
  /** Wall-clock milliseconds since the epoch (Date.now()): cool-downs, TTLs, catch-all windows. */
  now(): number;
  /** Milliseconds on a monotonic scale (performance.now()): how late a reply is. */
  monotonic(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer | undefined): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};

interface ManualTimer {
  readonly __timer: true;
  readonly seq: number;
  at: number;
  fn: () => void;
}

/** Lets every promise callback queued so far run (and what they queue, two turns deep). */
const settle = async () => {
  for (let i = 0; i < 2; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

/**
 * A clock for tests: time stands still until `advance` or `run` moves it, firing the timers due
 * on the way in order (ties in the order they were set), with promise callbacks run in between.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Set<ManualTimer>();

  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  monotonic(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    const timer: ManualTimer = { __timer: true, seq: ++this.#seq, at: this.#now + Math.max(0, ms), fn };
    this.#timers.add(timer);
    return timer;
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    if (timer) this.#timers.delete(timer as ManualTimer);
  }

  /** Timers set and not yet fired or cleared. */
  get pending(): number {
    return this.#timers.size;
  }

  /** Promise sleep on this clock (fakes and tests). */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.setTimeout(resolve, ms));
  }

  #next(until: number): ManualTimer | undefined {
    let next: ManualTimer | undefined;
    for (const t of this.#timers) if (t.at <= until && (!next || t.at < next.at || (t.at === next.at && t.seq < next.seq))) next = t;
    return next;
  }

  #fire(timer: ManualTimer): void {
    this.#timers.delete(timer);
    this.#now = Math.max(this.#now, timer.at);
    timer.fn();
  }

  /** Moves time forward by `ms`, firing every timer due by then. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      await settle();
      const next = this.#next(target);
      if (!next) break;
      this.#fire(next);
    }
    this.#now = target;
    await settle();
  }

  /**
   * Runs time forward, timer by timer, until `p` settles; returns its value. Rejects when it
   * cannot settle: no timer is left to fire, or it would take more than `limitMs` of clock time.
   */
  async run<T>(p: Promise<T>, limitMs = 600_000): Promise<T> {
    let settled = false;
    p.then(
      () => (settled = true),
      () => (settled = true),
    );
    const until = this.#now + limitMs;
    for (;;) {
      await settle();
      if (settled) return p;
      const next = this.#next(until);
      if (!next) throw new Error(this.#next(Infinity) ? `not settled within ${limitMs} ms of clock time` : 'not settled, and no timer left to fire');
      this.#fire(next);
    }
  }
}
