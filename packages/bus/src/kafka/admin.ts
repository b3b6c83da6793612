// The Kafka adapter's admin side: creating the bus's topics (the broker runs with
// auto.create.topics.enable=false) and the readiness ping. The admin client keeps kafkajs' own
// retry: a readiness ping should not hang.

import { Kafka, logLevel as LogLevel, type Admin, type KafkaConfig } from 'kafkajs';
import type { KafkaBusOptions } from './options.ts';

/**
 * A kafkajs admin client of its own (not connected; silent unless given a log level), for the
 * tooling around a deployment: tests and benchmarks probe brokers, count dead letters and delete
 * their topics with it, so that kafkajs is spoken in this package only.
 */
export function kafkaAdmin(config: KafkaConfig): Admin {
  return new Kafka({ logLevel: LogLevel.NOTHING, ...config }).admin();
}

export class KafkaTopics {
  #admin: Promise<Admin> | undefined;
  #topics = new Map<string, Promise<void>>();

  constructor(
    private readonly kafka: Kafka,
    private readonly opts: Pick<KafkaBusOptions, 'partitions' | 'defaultPartitions' | 'replicationFactor'>,
    /** The broker's name of a port topic (prefixed). */
    private readonly topicName: (topic: string) => string,
  ) {}

  #partitionsOf(topic: string): number {
    return this.opts.partitions?.[topic] ?? this.opts.defaultPartitions ?? 16;
  }

  /** The admin client, connected (made on first use, and anew after a failed connect). */
  admin(): Promise<Admin> {
    if (!this.#admin) {
      const admin = this.kafka.admin();
      const p = admin.connect().then(() => admin);
      p.catch(() => {
        if (this.#admin === p) this.#admin = undefined;
      });
      this.#admin = p;
    }
    return this.#admin;
  }

  /** Creates the topic once per process (an existing topic is left as it is). */
  ensure(topic: string): Promise<void> {
    const name = this.topicName(topic);
    let p = this.#topics.get(name);
    if (!p) {
      p = (async () => {
        const admin = await this.admin();
        // Asked first: kafkajs logs a CreateTopics answered "already exists" as an ERROR.
        if ((await admin.listTopics()).includes(name)) return;
        await admin.createTopics({
          waitForLeaders: true,
          topics: [{ topic: name, numPartitions: this.#partitionsOf(topic), replicationFactor: this.opts.replicationFactor ?? 1 }],
        });
      })();
      const created = p;
      created.catch(() => {
        if (this.#topics.get(name) === created) this.#topics.delete(name);
      });
      this.#topics.set(name, p);
    }
    return p;
  }

  /** One metadata request (describeCluster): true when the cluster names at least one broker; throws when it cannot be reached. */
  async ping(): Promise<boolean> {
    const admin = await this.admin();
    return (await admin.describeCluster()).brokers.length > 0;
  }

  async disconnect(): Promise<void> {
    await (await this.#admin?.catch(() => undefined))?.disconnect();
  }
}
