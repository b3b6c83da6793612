// The embedded adapter of the Bus port: one process, queues in memory.

import { buryUntilDone, DEFAULT_MAX_ATTEMPTS, errorText, fnv1a, retryDelay, wakeableSleep, type Bus, type BusHandler, type BusMessage, type DeadLetter, type DeadLetterHandler, type DeadLetterSink, type PublishOptions, type SubscribeOptions } from './port.ts';

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
  /** SubscribeOptions.maxQueued (Infinity: no bound). */
  maxQueued: number;
  /** SubscribeOptions.maxRunning (Infinity: partitions × concurrency). */
  maxRunning: number;
  /** Messages being handled, across the partitions. */
  running: number;
  /** Messages in the partitions' lanes, not yet handed to the handler. */
  queued: number;
  /** Slots granted to waiting publishers that have not queued their message yet. */
  granted: number;
  /** Publishers waiting for a slot, first come first served. */
  waiters: Array<() => void>;
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
 * concurrency 1 its lane waits with it (its order kept), the other lanes go on. A topic subscribed
 * with `maxQueued` holds at most that many waiting messages: a publisher beyond waits for one to be
 * taken (back-pressure, not loss); a retried message goes back to its lane without waiting. With
 * `maxRunning`, at most that many messages of the topic are in handlers' hands at once, across its
 * partitions: the rest wait as JSON text, not as parsed objects.
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
    if (!t) this.#topics.set(name, (t = { name, partitions: [], concurrency: 1, early: [], maxQueued: Infinity, maxRunning: Infinity, running: 0, queued: 0, granted: 0, waiters: [] }));
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
    // Back-pressure: a full topic makes the publisher wait for a slot (granted by #taken), and so
    // does a topic with publishers waiting already, so that none of them is overtaken for ever.
    if (t.waiters.length > 0 || t.queued + t.granted >= t.maxQueued) {
      await new Promise<void>((go) => t.waiters.push(go));
      t.granted--;
      if (this.#closed) throw new Error('bus closed');
    }
    this.#enqueue(t, group, lane, { key, message: copy, failures: 0 });
  }

  /** A message left the topic's queues: grants freed slots to waiting publishers. */
  #taken(t: Topic): void {
    t.queued--;
    while (t.waiters.length > 0 && t.queued + t.granted < t.maxQueued) {
      t.granted++;
      t.waiters.shift()!();
    }
  }

  subscribe(topic: string, handler: BusHandler, opts: SubscribeOptions = {}): void {
    const t = this.#topic(topic);
    if (t.handler) throw new Error(`topic ${topic} has a subscriber already`);
    t.handler = handler;
    t.deadLetter = opts.deadLetter;
    const n = Math.max(1, Math.floor(opts.partitions ?? 1));
    t.partitions = Array.from({ length: n }, () => ({ groups: new Map(), ring: [], running: 0, waiting: 0 }));
    t.concurrency = Math.max(1, Math.floor(opts.concurrency ?? 1));
    t.maxQueued = opts.maxQueued === undefined ? Infinity : Math.max(1, Math.floor(opts.maxQueued));
    t.maxRunning = opts.maxRunning === undefined ? Infinity : Math.max(1, Math.floor(opts.maxRunning));
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
    t.queued++;
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
    while (!this.#closed && p.running < t.concurrency && t.running < t.maxRunning && p.ring.length > 0) {
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
      this.#taken(t);
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
    t.running++;
    let failure: { err: unknown } | undefined;
    try {
      // Each delivery gets its own copy, as a broker's consumer decodes a new one: a retry never
      // sees what a failed handler changed.
      await t.handler!(JSON.parse(entry.message) as BusMessage, entry.key);
    } catch (err) {
      failure = { err };
    }
    p.running--;
    t.running--;
    // A slot of the topic's maxRunning is free: another partition may have been waiting for it.
    if (t.maxRunning !== Infinity) for (const other of t.partitions) if (other !== p) this.#drain(t, other);
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
    for (const t of this.#topics.values()) {
      t.granted += t.waiters.length;
      for (const go of t.waiters.splice(0)) go(); // each throws 'bus closed'
    }
    await Promise.allSettled([...this.#inFlight]);
  }
}
