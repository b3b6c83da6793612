// The Kafka adapter's producer side: one publish queue per process, sent in batches by an
// idempotent producer, a failed batch sent again before anything else (see "Idempotent producer"
// in bus.ts for why).

import { Partitioners, type Kafka, type Producer } from 'kafkajs';
import { chainHas, isPermanentPublishError, PRODUCER_STATE_ERRORS } from './errors.ts';

/** One send of the publish queue: at most this many messages, and this many bytes of values (a broker takes 1 MiB batches by default). */
const MAX_BATCH_MESSAGES = 200;
const MAX_BATCH_BYTES = 256 * 1024;
/** Back-off of a batch that failed to send: doubling from the first up to the last. */
const PUBLISH_RETRY_FIRST_MS = 100;
const PUBLISH_RETRY_MAX_MS = 2_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Waits out the back-off before try `attempt + 1` of a failed publish step. */
export const publishBackoff = (attempt: number): Promise<void> => sleep(Math.min(PUBLISH_RETRY_MAX_MS, PUBLISH_RETRY_FIRST_MS * 2 ** Math.min(attempt, 10)));

/** A message waiting in the publish queue. */
export interface Outgoing {
  readonly topic: string;
  readonly name: string;
  readonly key: string;
  readonly value: string;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

export interface PublishQueueOptions {
  idempotent: boolean;
  /** The first failure of a batch (the queue retries it). */
  onError: (err: unknown, topic: string, key?: string) => void;
  /** Whether a failed send is given up (the bus closed, or the error permanent) rather than retried. */
  givesUp: (err: unknown) => boolean;
}

/** The publish queue and its sender, in the order published. */
export class PublishQueue {
  #producer: Promise<Producer> | undefined;
  #outbox: Outgoing[] = [];
  #pumping: Promise<void> | undefined;

  constructor(
    private readonly kafka: Kafka,
    private readonly o: PublishQueueOptions,
  ) {}

  /** Queues a message; resolves once the broker acknowledged it. */
  push(m: Omit<Outgoing, 'resolve' | 'reject'>): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#outbox.push({ ...m, resolve, reject });
      this.#pump();
    });
  }

  /** Sends the queued messages, one batch at a time, in the order published (see "Idempotent producer"). */
  #pump(): void {
    if (this.#pumping) return;
    const run = (async () => {
      while (this.#outbox.length > 0) {
        let bytes = 0;
        let n = 0;
        while (n < this.#outbox.length && n < MAX_BATCH_MESSAGES && (n === 0 || bytes + this.#outbox[n]!.value.length <= MAX_BATCH_BYTES)) bytes += this.#outbox[n++]!.value.length;
        const batch = this.#outbox.splice(0, n);
        try {
          await this.#send(batch);
          for (const m of batch) m.resolve();
        } catch (err) {
          if (batch.length === 1 || !isPermanentPublishError(err)) {
            for (const m of batch) m.reject(err);
            continue;
          }
          // Refused for good (a message too large?): each message alone, so only the bad one fails.
          for (const m of batch) {
            try {
              await this.#send([m]);
              m.resolve();
            } catch (e) {
              m.reject(e);
            }
          }
        }
      }
    })();
    this.#pumping = run;
    void run.finally(() => {
      this.#pumping = undefined;
      if (this.#outbox.length > 0) this.#pump();
    });
  }


  /** Sends `batch` until it lands (see "Idempotent producer"); throws when the bus is closed or the error is permanent. */
  async #send(batch: readonly Outgoing[]): Promise<void> {
    const topicMessages: Array<{ topic: string; messages: Array<{ key: string; value: string }> }> = [];
    for (const m of batch) {
      let entry = topicMessages.find((x) => x.topic === m.name);
      if (!entry) topicMessages.push((entry = { topic: m.name, messages: [] }));
      entry.messages.push({ key: m.key, value: m.value });
    }
    for (let attempt = 0; ; attempt++) {
      try {
        const producer = await this.producer();
        await producer.sendBatch({ acks: -1, topicMessages });
        return;
      } catch (err) {
        if (this.o.givesUp(err)) throw err;
        if (attempt === 0) this.o.onError(err, batch[0]!.topic, batch[0]!.key);
        if (chainHas(err, PRODUCER_STATE_ERRORS)) {
          // The broker no longer takes this producer's sequence: a new producer (a new id) sends the retry.
          const old = this.#producer;
          this.#producer = undefined;
          void old?.then((p) => p.disconnect()).catch(() => {});
        }
        await publishBackoff(attempt);
      }
    }
  }

  /** The producer, connected (made on first use, and anew after its idempotence state was refused). */
  producer(): Promise<Producer> {
    if (!this.#producer) {
      const idempotent = this.o.idempotent;
      const producer = this.kafka.producer({
        idempotent,
        maxInFlightRequests: idempotent ? 1 : undefined,
        allowAutoTopicCreation: false,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      const p = producer.connect().then(() => producer);
      p.catch(() => {
        if (this.#producer === p) this.#producer = undefined;
      });
      this.#producer = p;
    }
    return this.#producer;
  }

  async disconnect(): Promise<void> {
    await (await this.#producer?.catch(() => undefined))?.disconnect();
  }
}
