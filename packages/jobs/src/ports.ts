// The ports the job pipeline is written against (DESIGN 3: each port has an embedded and a
// cluster adapter; business code never asks which one it got), with their in-process adapters:
// - Bus: versioned plain-data messages on topics, ordered per key (Kafka: key → partition);
// - Scheduler: wake-ups for durable delayed work. The work itself lives in the store
//   (job_results.next_attempt_at), so a restart loses nothing: start() asks the store when the
//   next item is due and sleeps until then.

/** A message on the bus: plain JSON data (serialised on publish, as a broker would), versioned. */
export interface BusMessage {
  readonly v: number;
  readonly [field: string]: unknown;
}

export type BusHandler = (message: BusMessage, key: string) => Promise<void>;

export interface SubscribeOptions {
  /** Partitions consumed at once (Kafka: consumers in this process). With `concurrency` 1, messages of one key are never handled concurrently, and keep their order. */
  partitions?: number;
  /**
   * Messages of one partition handled at once (default 1). Above 1, messages of one key may run
   * concurrently and finish in any order, but still only in the process that owns the partition
   * (the MX stage: one owner per MX host, several of its messages in flight). A failed message is
   * retried; with Kafka the messages after it in its partition may be delivered again too.
   */
  concurrency?: number;
}

export interface Bus {
  /** Queues `message` on `topic` under `key` (ordering is per key). */
  publish(topic: string, key: string, message: BusMessage): Promise<void>;
  /** Handles every message of `topic`. A handler that throws gets the same message again later (at-least-once). */
  subscribe(topic: string, handler: BusHandler, opts?: SubscribeOptions): void;
  /** Stops delivering and waits for the handlers in progress; undelivered messages are dropped (their work is durable elsewhere). */
  close(): Promise<void>;
}

/** FNV-1a (32 bit): a stable hash for keys and buckets, the same in every process. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

interface Partition {
  /** Messages as JSON text, as a broker holds them: compact, and parsed anew for every delivery. */
  queue: Array<{ key: string; message: string }>;
  /** Messages being handled (at most the topic's concurrency). */
  running: number;
}

interface Topic {
  name: string;
  handler?: BusHandler;
  partitions: Partition[];
  /** Messages of one partition handled at once. */
  concurrency: number;
  /** Published before anyone subscribed: delivered once a handler exists. */
  early: Array<{ key: string; message: string }>;
}

export interface InProcessBusOptions {
  /** A handler failed; its message is retried after a back-off (default: ignored). */
  onError?: (err: unknown, topic: string, key: string) => void;
  /** First retry delay; doubled per failure of the same message, capped at 30 s (default 500 ms). */
  retryDelayMs?: number;
}

/**
 * The embedded adapter: one process, queues in memory. Each topic has `partitions` serial queues;
 * a key always lands on the same one (fnv1a(key) mod partitions), so its messages are handled one
 * at a time, in order, as a Kafka consumer group handles a partition.
 */
export class InProcessBus implements Bus {
  #topics = new Map<string, Topic>();
  #closed = false;
  #inFlight = new Set<Promise<void>>();
  #timers = new Set<NodeJS.Timeout>();
  readonly #onError: NonNullable<InProcessBusOptions['onError']>;
  readonly #retryDelayMs: number;

  constructor(opts: InProcessBusOptions = {}) {
    this.#onError = opts.onError ?? (() => {});
    this.#retryDelayMs = opts.retryDelayMs ?? 500;
  }

  #topic(name: string): Topic {
    let t = this.#topics.get(name);
    if (!t) this.#topics.set(name, (t = { name, partitions: [], concurrency: 1, early: [] }));
    return t;
  }

  async publish(topic: string, key: string, message: BusMessage): Promise<void> {
    if (this.#closed) throw new Error('bus closed');
    // Plain data across the port, serialised as the Kafka adapter does: nothing the publisher
    // keeps can change what the consumer sees, and a queued message costs its JSON text only (a
    // 500,000-address job's work waits here in full when nothing consumes it yet).
    const copy = JSON.stringify(message);
    const t = this.#topic(topic);
    if (!t.handler) {
      t.early.push({ key, message: copy });
      return;
    }
    this.#enqueue(t, key, copy);
  }

  subscribe(topic: string, handler: BusHandler, opts: SubscribeOptions = {}): void {
    const t = this.#topic(topic);
    if (t.handler) throw new Error(`topic ${topic} has a subscriber already`);
    t.handler = handler;
    const n = Math.max(1, Math.floor(opts.partitions ?? 1));
    t.partitions = Array.from({ length: n }, () => ({ queue: [], running: 0 }));
    t.concurrency = Math.max(1, Math.floor(opts.concurrency ?? 1));
    const early = t.early;
    t.early = [];
    for (const m of early) this.#enqueue(t, m.key, m.message);
  }

  /** Messages waiting or in progress on `topic` (tests, metrics). */
  pending(topic: string): number {
    const t = this.#topics.get(topic);
    if (!t) return 0;
    return t.early.length + t.partitions.reduce((n, p) => n + p.queue.length + p.running, 0);
  }

  #enqueue(t: Topic, key: string, message: string): void {
    const p = t.partitions[fnv1a(key) % t.partitions.length]!;
    p.queue.push({ key, message });
    if (p.running < t.concurrency) this.#drain(t, p);
  }

  /**
   * One of a partition's `concurrency` slots: takes the next message, handles it until it
   * succeeds (a failure is retried after a back-off while the partition's other slots go on;
   * with concurrency 1 the messages after it wait), then the next.
   */
  #drain(t: Topic, p: Partition): void {
    p.running++;
    const run = (async () => {
      while (!this.#closed && p.queue.length > 0) {
        const head = p.queue.shift()!;
        for (let failures = 0; ; ) {
          try {
            // Each delivery gets its own copy, as a broker's consumer decodes a new one: a retry
            // never sees what a failed handler changed.
            await t.handler!(JSON.parse(head.message) as BusMessage, head.key);
            break;
          } catch (err) {
            // Closing: the message is dropped (its work is durable elsewhere), no retry, no noise.
            if (this.#closed) break;
            failures++;
            this.#onError(err, t.name, head.key);
            const delay = Math.min(30_000, this.#retryDelayMs * 2 ** Math.min(failures - 1, 10));
            await new Promise<void>((resolve) => {
              const timer = setTimeout(() => {
                this.#timers.delete(timer);
                resolve();
              }, delay);
              this.#timers.add(timer);
            });
          }
        }
      }
      p.running--;
    })();
    this.#inFlight.add(run);
    void run.finally(() => this.#inFlight.delete(run));
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#timers) timer.unref();
    await Promise.allSettled([...this.#inFlight]);
  }
}

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

export interface TimerSchedulerOptions {
  /** Look at the store at least this often, whatever was armed (default 60 s): work scheduled by another process is seen too. */
  pollMs?: number;
  /** A failed run is tried again after this long (default 5 s). */
  retryMs?: number;
  onError?: (err: unknown) => void;
  now?: () => number;
}

/** The embedded adapter: one timer for the earliest wake-up. */
export class TimerScheduler implements Scheduler {
  #timer: NodeJS.Timeout | undefined;
  #armedAt = Infinity;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = true;
  readonly #pollMs: number;
  readonly #retryMs: number;
  readonly #onError: (err: unknown) => void;
  readonly #now: () => number;

  constructor(
    private readonly work: DelayedWork,
    opts: TimerSchedulerOptions = {},
  ) {
    this.#pollMs = opts.pollMs ?? 60_000;
    this.#retryMs = opts.retryMs ?? 5_000;
    this.#onError = opts.onError ?? (() => {});
    this.#now = opts.now ?? Date.now;
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
    clearTimeout(this.#timer);
    this.#armedAt = at;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, Math.min(at - this.#now(), 2 ** 31 - 1)));
    this.#timer.unref();
  }

  async #rearm(): Promise<void> {
    clearTimeout(this.#timer);
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
    clearTimeout(this.#timer);
    this.#armedAt = Infinity;
    await this.#running;
  }
}
