// The ports the job pipeline is written against. Each has an embedded and a cluster adapter, and
// business code never asks which one it got (docs/decisions/storage-and-cluster.md, "Kafka bus"):
// - Bus: versioned plain-data messages on topics, ordered per key (Kafka: key → partition);
// - Scheduler (scheduler.ts): wake-ups for durable delayed work.
// Beside the port, the pieces both bus adapters share: the retry back-off, the dead-letter loop
// and the key hash.

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
  /**
   * Back-pressure (the in-process adapter): once this many messages of the topic wait in its
   * queues, a publish waits until one is taken, first come first served; nothing is dropped. The
   * default is no bound. A handler of the topic must not publish on it (it would wait for itself).
   * Kafka ignores it: the broker keeps the messages on disk, and a consumer fetches what it handles.
   */
  maxQueued?: number;
  /**
   * Messages of the topic handled at once across all of its partitions in this process (the
   * in-process adapter; default partitions × concurrency). A message is parsed when it is handed
   * over: messages waiting for a slot stay compact JSON text. Kafka ignores it.
   */
  maxRunning?: number;
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
