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

/**
 * The last answer for a message whose handler failed `maxAttempts` times (a poison message): it
 * answers the message's work another way (the job pipeline: its rows `unknown`, reason
 * `processing_failed`), so nothing waits for it any longer. A dead-letter handler that throws is
 * tried again after a back-off, for as long as it takes (its failure is an outage, not the
 * message), and the message stays parked meanwhile.
 */
export type DeadLetterHandler = (message: BusMessage, key: string, error: unknown) => Promise<void>;

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
  /** Answers a message that failed the bus's `maxAttempts` (without one, the message is parked and dropped). */
  deadLetter?: DeadLetterHandler;
}

export interface PublishOptions {
  /**
   * The message's fairness lane (default: its key). The embedded adapter takes the lanes of one
   * partition in turn, and a failing message holds only its own lane while it is retried: the job
   * pipeline gives each job its own lane, so a big or failing job cannot hold up another's work.
   * Order is kept per key within a lane. Kafka keeps its partitions' order and ignores lanes.
   */
  lane?: string;
  /**
   * The lane's fairness group (default: one group of its own). A partition takes its groups in
   * turn, and within a group its lanes in turn: the job pipeline groups a job's lane under its
   * account, so an account with ten jobs gets no more turns than an account with one.
   */
  group?: string;
}

export interface Bus {
  /** Queues `message` on `topic` under `key` (ordering is per key). */
  publish(topic: string, key: string, message: BusMessage, opts?: PublishOptions): Promise<void>;
  /**
   * Handles every message of `topic`. A handler that throws gets the same message again later
   * (at-least-once), after a back-off, up to the bus's `maxAttempts` deliveries in all; then the
   * message is parked (a dead letter: the in-process adapter writes it to a DeadLetterSink, Kafka
   * to the dead-letter topic) and answered by the subscription's `deadLetter` handler.
   */
  subscribe(topic: string, handler: BusHandler, opts?: SubscribeOptions): void;
  /** Stops delivering and waits for the handlers in progress; undelivered messages are dropped (their work is durable elsewhere). */
  close(): Promise<void>;
}

/** A message that failed every attempt, as it is parked. */
export interface DeadLetter {
  topic: string;
  key: string;
  /** The message as JSON text, as the bus held it. */
  message: string;
  /** The last failure's message. */
  error: string;
  attempts: number;
}

/** Where the embedded adapter parks dead letters (the store's dead_letters table). */
export interface DeadLetterSink {
  park(letter: DeadLetter): Promise<void>;
}

/** Deliveries of a failing message before it is dead-lettered (SVC_BUS_MAX_ATTEMPTS). */
export const DEFAULT_MAX_ATTEMPTS = 8;
/** The retry back-off's cap: a failure's delay doubles from retryDelayMs up to this. */
export const MAX_RETRY_DELAY_MS = 30_000;

/** The back-off before delivery `failures + 1` of a message that failed `failures` times. */
export function retryDelay(firstMs: number, failures: number): number {
  return Math.min(MAX_RETRY_DELAY_MS, firstMs * 2 ** Math.min(Math.max(failures - 1, 0), 10));
}

/**
 * Sleeps `ms` (at once when `closed`), the timer kept in `timers` with its wake-up, so a closing
 * bus can end every sleep at once (clear the timer, call the wake-up).
 */
export function wakeableSleep(timers: Map<NodeJS.Timeout, () => void>, closed: boolean, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (closed) return resolve();
    const timer = setTimeout(() => {
      timers.delete(timer);
      resolve();
    }, ms);
    timers.set(timer, resolve);
  });
}

/**
 * A dead letter's two steps, parking it (once) and answering it, tried until both succeeded, with
 * the bus's retry back-off between tries (a failure here is an outage, not the message). False:
 * `stopped()` came first (the bus closing, or, on Kafka, the partition moving).
 */
export async function buryUntilDone(
  steps: { park?: () => Promise<void>; answer: () => Promise<void> },
  o: { stopped: () => boolean; onError: (err: unknown) => void; sleep: (ms: number) => Promise<void>; firstDelayMs: number },
): Promise<boolean> {
  let parked = !steps.park;
  for (let failures = 0; !o.stopped(); ) {
    try {
      if (!parked) {
        await steps.park!();
        parked = true;
      }
      await steps.answer();
      return true;
    } catch (err) {
      failures++;
      o.onError(err);
      await o.sleep(retryDelay(o.firstDelayMs, failures));
    }
  }
  return false;
}

/** The text of a failure, for a dead letter. */
export const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err)).slice(0, 2000);

/** FNV-1a (32 bit): a stable hash for keys and buckets, the same in every process. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** A queued message, as a broker holds it: JSON text, parsed anew for every delivery. */
interface Entry {
  key: string;
  message: string;
  /** Deliveries that failed so far. */
  failures: number;
}

/** One fairness lane of a partition: its messages in order. */
interface Lane {
  id: string;
  group: Group;
  queue: Entry[];
  /** A failed message of this lane waits out its back-off (concurrency 1: the lane waits with it, to keep its order). */
  held: boolean;
  /** In the partition's ring of lanes to take from. */
  ready: boolean;
  /** Its messages being handled, in a back-off or being dead-lettered: the lane is kept while any is. */
  busy: number;
}

/** A fairness group of a partition: its lanes, taken in turn. */
interface Group {
  id: string;
  lanes: Map<string, Lane>;
  /** Its lanes with messages to take, in turn. */
  ring: Lane[];
  /** In the partition's ring of groups. */
  ready: boolean;
}

interface Partition {
  groups: Map<string, Group>;
  /** Groups with a lane to take from, in turn. */
  ring: Group[];
  /** Messages being handled (at most the topic's concurrency). */
  running: number;
  /** Messages out of the queues: in a back-off or being dead-lettered. */
  waiting: number;
}

interface Topic {
  name: string;
  handler?: BusHandler;
  deadLetter?: DeadLetterHandler;
  partitions: Partition[];
  /** Messages of one partition handled at once. */
  concurrency: number;
  /** Published before anyone subscribed: delivered once a handler exists. */
  early: Array<{ key: string; message: string; lane: string; group: string }>;
}

export interface InProcessBusOptions {
  /** A handler failed; its message is retried after a back-off (default: ignored). */
  onError?: (err: unknown, topic: string, key: string) => void;
  /** First retry delay; doubled per failure of the same message, capped at 30 s (default 500 ms). */
  retryDelayMs?: number;
  /** Deliveries of a failing message before it is dead-lettered (default DEFAULT_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** Where dead letters are parked (default: nowhere; the dead-letter handler still answers them). */
  deadLetters?: DeadLetterSink;
}

/**
 * The embedded adapter: one process, queues in memory. Each topic has `partitions` queues; a key
 * always lands on the same one (fnv1a(key) mod partitions), as a Kafka consumer group handles a
 * partition. A partition's messages are kept in fairness lanes (PublishOptions.lane), taken in
 * turn: with `concurrency` 1 one message at a time, so a key's messages are handled one at a time
 * and in order. A failed message waits out its back-off outside the partition's slots: with
 * concurrency 1 its lane waits with it (its order kept), the other lanes go on.
 */
export class InProcessBus implements Bus {
  #topics = new Map<string, Topic>();
  #closed = false;
  #inFlight = new Set<Promise<void>>();
  #timers = new Map<NodeJS.Timeout, () => void>();
  readonly #onError: NonNullable<InProcessBusOptions['onError']>;
  readonly #retryDelayMs: number;
  readonly #maxAttempts: number;
  readonly #deadLetters: DeadLetterSink | undefined;

  constructor(opts: InProcessBusOptions = {}) {
    this.#onError = opts.onError ?? (() => {});
    this.#retryDelayMs = opts.retryDelayMs ?? 500;
    this.#maxAttempts = Math.max(1, Math.floor(opts.maxAttempts ?? DEFAULT_MAX_ATTEMPTS));
    this.#deadLetters = opts.deadLetters;
  }

  #topic(name: string): Topic {
    let t = this.#topics.get(name);
    if (!t) this.#topics.set(name, (t = { name, partitions: [], concurrency: 1, early: [] }));
    return t;
  }

  async publish(topic: string, key: string, message: BusMessage, opts: PublishOptions = {}): Promise<void> {
    if (this.#closed) throw new Error('bus closed');
    // Plain data across the port, serialised as the Kafka adapter does: nothing the publisher
    // keeps can change what the consumer sees, and a queued message costs its JSON text only (a
    // 500,000-address job's work waits here in full when nothing consumes it yet).
    const copy = JSON.stringify(message);
    const t = this.#topic(topic);
    const lane = opts.lane ?? key;
    // Without a group a lane is a group of its own (NUL cannot start a caller's group name).
    const group = opts.group ?? `\u0000${lane}`;
    if (!t.handler) {
      t.early.push({ key, message: copy, lane, group });
      return;
    }
    this.#enqueue(t, group, lane, { key, message: copy, failures: 0 });
  }

  subscribe(topic: string, handler: BusHandler, opts: SubscribeOptions = {}): void {
    const t = this.#topic(topic);
    if (t.handler) throw new Error(`topic ${topic} has a subscriber already`);
    t.handler = handler;
    t.deadLetter = opts.deadLetter;
    const n = Math.max(1, Math.floor(opts.partitions ?? 1));
    t.partitions = Array.from({ length: n }, () => ({ groups: new Map(), ring: [], running: 0, waiting: 0 }));
    t.concurrency = Math.max(1, Math.floor(opts.concurrency ?? 1));
    const early = t.early;
    t.early = [];
    for (const m of early) this.#enqueue(t, m.group, m.lane, { key: m.key, message: m.message, failures: 0 });
  }

  /** Messages waiting or in progress on `topic` (tests, metrics). */
  pending(topic: string): number {
    const t = this.#topics.get(topic);
    if (!t) return 0;
    let n = t.early.length;
    for (const p of t.partitions) {
      n += p.running + p.waiting;
      for (const g of p.groups.values()) for (const lane of g.lanes.values()) n += lane.queue.length;
    }
    return n;
  }

  #enqueue(t: Topic, groupId: string, laneId: string, entry: Entry, first = false): void {
    const p = t.partitions[fnv1a(entry.key) % t.partitions.length]!;
    let g = p.groups.get(groupId);
    if (!g) p.groups.set(groupId, (g = { id: groupId, lanes: new Map(), ring: [], ready: false }));
    let lane = g.lanes.get(laneId);
    if (!lane) g.lanes.set(laneId, (lane = { id: laneId, group: g, queue: [], held: false, ready: false, busy: 0 }));
    if (first) lane.queue.unshift(entry);
    else lane.queue.push(entry);
    this.#ready(p, lane);
    this.#drain(t, p);
  }

  /** Puts `lane` in its group's ring if it has messages to take (and is not held), and the group in the partition's. */
  #ready(p: Partition, lane: Lane): void {
    if (lane.ready || lane.held || lane.queue.length === 0) return;
    lane.ready = true;
    lane.group.ring.push(lane);
    this.#readyGroup(p, lane.group);
  }

  #readyGroup(p: Partition, g: Group): void {
    if (g.ready || g.ring.length === 0) return;
    g.ready = true;
    p.ring.push(g);
  }

  /** Starts messages while the partition has free slots: a group after another, within a group a lane after another. */
  #drain(t: Topic, p: Partition): void {
    while (!this.#closed && p.running < t.concurrency && p.ring.length > 0) {
      const g = p.ring.shift()!;
      g.ready = false;
      let lane: Lane | undefined;
      while (!lane && g.ring.length > 0) {
        const next = g.ring.shift()!;
        next.ready = false;
        if (!next.held) lane = next; // a held lane is made ready again when its failed message is back
      }
      if (!lane) continue;
      const entry = lane.queue.shift()!;
      lane.busy++;
      this.#ready(p, lane);
      this.#readyGroup(p, g);
      this.#track(this.#deliver(t, p, lane, entry));
    }
  }

  #track(run: Promise<void>): void {
    this.#inFlight.add(run);
    void run.finally(() => this.#inFlight.delete(run));
  }

  async #deliver(t: Topic, p: Partition, lane: Lane, entry: Entry): Promise<void> {
    p.running++;
    let failure: { err: unknown } | undefined;
    try {
      // Each delivery gets its own copy, as a broker's consumer decodes a new one: a retry never
      // sees what a failed handler changed.
      await t.handler!(JSON.parse(entry.message) as BusMessage, entry.key);
    } catch (err) {
      failure = { err };
    }
    p.running--;
    // Closing: a failed message is dropped (its work is durable elsewhere), no retry, no noise.
    if (failure && !this.#closed) {
      entry.failures++;
      this.#onError(failure.err, t.name, entry.key);
      // Concurrency 1: the lane waits with its failed message, so its order is kept.
      const hold = t.concurrency === 1;
      if (hold) lane.held = true;
      p.waiting++;
      this.#track(
        (async () => {
          if (entry.failures >= this.#maxAttempts) await this.#bury(t, entry, failure.err);
          else await this.#sleep(retryDelay(this.#retryDelayMs, entry.failures));
          p.waiting--;
          lane.busy--;
          if (hold) lane.held = false;
          if (this.#closed) return;
          if (entry.failures < this.#maxAttempts) this.#enqueue(t, lane.group.id, lane.id, entry, true);
          else this.#tidy(p, lane);
          this.#drain(t, p);
        })(),
      );
    } else {
      lane.busy--;
      this.#tidy(p, lane);
    }
    this.#drain(t, p);
  }

  /** Forgets a lane with nothing queued or in hand (and its group once it has no lane); else makes it ready again. */
  #tidy(p: Partition, lane: Lane): void {
    if (lane.queue.length > 0 || lane.held || lane.busy > 0) return this.#ready(p, lane);
    const g = lane.group;
    if (g.lanes.get(lane.id) === lane) g.lanes.delete(lane.id);
    if (g.lanes.size === 0 && p.groups.get(g.id) === g) p.groups.delete(g.id);
  }

  /** Parks a message that failed every attempt and answers it with the topic's dead-letter handler, each step tried until it succeeds (or the bus closes). */
  async #bury(t: Topic, entry: Entry, err: unknown): Promise<void> {
    const sink = this.#deadLetters;
    const letter: DeadLetter = { topic: t.name, key: entry.key, message: entry.message, error: errorText(err), attempts: entry.failures };
    await buryUntilDone(
      { ...(sink ? { park: () => sink.park(letter) } : {}), answer: async () => t.deadLetter?.(JSON.parse(entry.message) as BusMessage, entry.key, err) },
      { stopped: () => this.#closed, onError: (e) => this.#onError(e, t.name, entry.key), sleep: (ms) => this.#sleep(ms), firstDelayMs: this.#retryDelayMs },
    );
  }

  /** Sleeps `ms`, or less if the bus closes meanwhile. */
  #sleep(ms: number): Promise<void> {
    return wakeableSleep(this.#timers, this.#closed, ms);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const [timer, wake] of this.#timers) {
      clearTimeout(timer);
      wake();
    }
    this.#timers.clear();
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
