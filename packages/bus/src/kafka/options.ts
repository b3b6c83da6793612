// The Kafka adapter's options, its fixed tunings, and the kafkajs clients it makes from them.

import { Kafka, logLevel as LogLevel, type ConsumerConfig, type KafkaConfig } from 'kafkajs';

/** kafkajs' log levels (KafkaBusOptions.logLevel). */
export { LogLevel as kafkaLogLevel };

export interface KafkaBusOptions {
  brokers: string[];
  clientId: string;
  /** Consumer group id = `${groupPrefix}.${topic}` (the port's topic name, unprefixed): a prefix of the deployment's own. */
  groupPrefix: string;
  /** Prepended to every topic name (tests isolate themselves with a unique one). Default ''. */
  topicPrefix?: string;
  /** Partition count per port topic (unprefixed name), for topics this adapter creates. */
  partitions?: Record<string, number>;
  /** Partition count of a topic not in `partitions` (default 16). */
  defaultPartitions?: number;
  /** Replication factor of created topics (default 1: kafkajs' CreateTopics v3 cannot ask for the broker's default; set 3 on a real cluster). */
  replicationFactor?: number;
  /** A handler failed (its message is retried after a back-off), or a consumer failed to start or crashed. */
  onError?: (err: unknown, topic: string, key?: string) => void;
  /**
   * A handler still running after `slowHandlerMs` (default 120 s) is reported once, with where its
   * message is: its partition waits behind it (nothing else on that partition starts). A handler
   * that never ends holds its partition for good, silently but for this line.
   */
  onSlow?: (info: { topic: string; partition: number; offset: string; key: string; ms: number }) => void;
  slowHandlerMs?: number;
  /** First retry delay of a failed message; doubled per failure of the same message, capped at 30 s (default 500 ms). */
  retryDelayMs?: number;
  /** Deliveries of a failing message before it is dead-lettered (default DEFAULT_MAX_ATTEMPTS). */
  maxAttempts?: number;
  /** Consumer tuning (kafkajs defaults: sessionTimeout 30 s, heartbeatInterval 3 s, rebalanceTimeout 60 s, maxWaitTimeInMs 5 s). */
  consumer?: Pick<ConsumerConfig, 'sessionTimeout' | 'heartbeatInterval' | 'rebalanceTimeout' | 'maxWaitTimeInMs' | 'maxBytesPerPartition'>;
  /** kafkajs log level (default WARN) or a log creator of its own. */
  logLevel?: LogLevel;
  logCreator?: KafkaConfig['logCreator'];
  /** Client-level retry of kafkajs (connections, metadata, admin); default kafkajs' (5 retries from 300 ms). */
  retry?: KafkaConfig['retry'];
  /** The idempotent producer (default true). */
  idempotent?: boolean;
}

/** The consumers' kafkajs client retry: see "Broker outages" in bus.ts. */
export const CLIENT_RETRY = { initialRetryTime: 250, maxRetryTime: 2_000, retries: 30 } as const;
/**
 * The producer's: the same back-off but 5 retries (about 6 s), after which a send returns to the
 * publish queue, which sends the batch again (so a bus closing during an outage stops retrying
 * within CLOSE_PUBLISH_WAIT_MS plus about 6 s).
 */
export const PRODUCER_RETRY = { initialRetryTime: 250, maxRetryTime: 2_000, retries: 5 } as const;
/** A recreated consumer's back-off between failed starts: doubling from 1 s up to this. */
export const CONSUMER_RESTART_MAX_MS = 5_000;
/** close(): how long it waits for a member still joining its group, then for the members to leave. */
export const CLOSE_JOIN_WAIT_MS = 5_000;
export const CLOSE_LEAVE_WAIT_MS = 10_000;
/** close(): how long after it began a publish that keeps failing (a broker outage) is still retried. */
export const CLOSE_PUBLISH_WAIT_MS = 5_000;

/** Waits until every promise settled, or `ms` passed. */
export async function settledWithin(ps: ReadonlyArray<Promise<unknown> | undefined>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled(ps), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

/**
 * A kafkajs client of the bus's brokers and logs, with the retry given. kafkajs warns that the
 * idempotent producer's retries are limited: they are, on purpose (the publish queue retries the
 * batch itself, see "Idempotent producer" in bus.ts); that line is dropped.
 */
export function kafkaClient(opts: KafkaBusOptions, retry: KafkaConfig['retry'] | undefined): Kafka {
  const given = opts.logCreator;
  const logCreator: KafkaConfig['logCreator'] | undefined =
    given &&
    ((level) => {
      const log = given(level);
      return (entry) => {
        if (entry.namespace === 'Producer' && String(entry.log.message).startsWith('Limiting retries for the idempotent producer')) return;
        log(entry);
      };
    });
  return new Kafka({
    clientId: opts.clientId,
    brokers: opts.brokers,
    logLevel: opts.logLevel ?? LogLevel.WARN,
    ...(logCreator ? { logCreator } : {}),
    ...(retry ? { retry } : {}),
  });
}
