// The Scheduler port and its embedded adapter: wake-ups for durable delayed work. The work itself
// lives in the store (job_results.next_attempt_at), so a restart loses nothing: start() asks the
// store when the next item is due and sleeps until then.

/** Durable delayed work, as the Scheduler sees it: when the next item is due, and running what is due. */
export interface DelayedWork {
  /** When the next item is due (undefined: nothing is waiting). */
  nextDue(): Promise<Date | undefined>;
  /** Starts every item due at `now`. */
  runDue(now: Date): Promise<void>;
}

export interface Scheduler {
  /** Reads when the next item is due from the durable store and arms a wake-up for it. */
  start(): Promise<void>;
  /** Something was scheduled for `at`: wake up then, unless a wake-up comes sooner. */
  wake(at: Date): void;
  /** No more wake-ups; waits for a run in progress. */
  stop(): Promise<void>;
}

/** The timers a TimerScheduler arms its wake-ups with: Node's by default, a test's manual clock. */
export interface SchedulerTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

const nodeTimers: SchedulerTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (timer: NodeJS.Timeout | undefined) => clearTimeout(timer),
};

export interface TimerSchedulerOptions {
  /** Look at the store at least this often, whatever was armed (default 60 s): work scheduled by another process is seen too. */
  pollMs?: number;
  /** A failed run is tried again after this long (default 5 s). */
  retryMs?: number;
  onError?: (err: unknown) => void;
  now?: () => number;
  /** Node's timers by default (unref'd: a wake-up keeps no process alive). */
  timers?: SchedulerTimers;
}

/** The embedded adapter: one timer for the earliest wake-up. */
export class TimerScheduler implements Scheduler {
  #timer: unknown;
  #armedAt = Infinity;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  readonly #pollMs: number;
  readonly #retryMs: number;
  readonly #onError: (err: unknown) => void;
  readonly #now: () => number;
  readonly #timers: SchedulerTimers;

  constructor(
    private readonly work: DelayedWork,
    opts: TimerSchedulerOptions = {},
  ) {
    this.#pollMs = opts.pollMs ?? 60_000;
    this.#retryMs = opts.retryMs ?? 5_000;
    this.#onError = opts.onError ?? (() => {});
    this.#now = opts.now ?? Date.now;
    this.#timers = opts.timers ?? nodeTimers;
  }

  #clear(): void {
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  async start(): Promise<void> {
    this.#stopped = false;
    await this.#rearm();
  }

  wake(at: Date): void {
    if (this.#stopped) return;
    this.#arm(at.getTime());
  }

  #arm(at: number): void {
    if (this.#stopped || at >= this.#armedAt) return;
    this.#clear();
    this.#armedAt = at;
    this.#timer = this.#timers.setTimeout(() => this.#fire(), Math.max(0, Math.min(at - this.#now(), 2 ** 31 - 1)));
  }

  async #rearm(): Promise<void> {
    this.#clear();
    this.#armedAt = Infinity;
    const next = await this.work.nextDue();
    this.#arm(Math.min(next ? next.getTime() : Infinity, this.#now() + this.#pollMs));
  }

  #fire(): void {
    this.#armedAt = Infinity;
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = (async () => {
      do {
        this.#again = false;
        try {
          await this.work.runDue(new Date(this.#now()));
          if (!this.#stopped) await this.#rearm();
        } catch (err) {
          this.#onError(err);
          this.#arm(this.#now() + this.#retryMs);
        }
      } while (this.#again && !this.#stopped);
    })().finally(() => (this.#running = undefined));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clear();
    this.#armedAt = Infinity;
    await this.#running;
  }
}
