// The cluster adapter of the Bus port (the job transport via Kafka, key = domain bucket, MX host or
// job id; docs/decisions/storage-and-cluster.md, "Kafka bus"), on kafkajs. It keeps the port's
// promises exactly as InProcessBus does; the choices:
//
// - Topics and groups. The topic of port topic `t` is `${topicPrefix}${t}`; it is created
//   explicitly (admin.createTopics, `partitions[t] ?? defaultPartitions` partitions,
//   `replicationFactor`) before the first publish or subscribe on it, because the broker runs with
//   auto.create.topics.enable=false. Creating a topic that exists is fine; an existing topic keeps
//   its partition count (growing it would move keys to other partitions and break per-key order,
//   so that is an operator's decision, never this adapter's). A subscribed topic's consumers are
//   members of group `${groupPrefix}.${port topic name}` (the deployment's prefix once: the
//   service passes its topic prefix as groupPrefix): every process that subscribes to the
//   topic joins that group, so each partition, and so each key, has one owner at a time.
// - Publish = key → partition (kafkajs' DefaultPartitioner: murmur2, as the Java client), the
//   message body JSON-serialised at the call (so mutating the object afterwards changes nothing;
//   plain data, its `v` included), awaited until the broker acknowledged it with acks=-1 (all
//   in-sync replicas).
// - Idempotent producer (idempotent: true, maxInFlightRequests: 1, which kafkajs 2.2.4 requires):
//   a produce retried after a lost ack is not written twice. kafkajs gives a failed produce only a
//   few retries (its client retry: it merges the producer's retry over the client's, so the
//   idempotent producer's "retry for ever" default never applies) and then rejects, having rolled
//   the partition's sequence number back; another send taking that number next would be dropped
//   by the broker as a duplicate if the failed one did land (its ack lost). So this adapter sends
//   through one queue per process: publish() calls are queued in call order, sent as batches (at
//   most MAX_BATCH_MESSAGES messages, MAX_BATCH_BYTES of values) one at a time, and a failed batch
//   is sent again, the same messages in the same order, before anything else, with a back-off
//   (100 ms doubling to 2 s), until it lands or the bus is closed: publish() waits out a broker
//   outage (the first failure of a batch goes to onError) instead of failing. Errors that no retry
//   can cure (a message too large, an invalid topic, no authorisation) reject at once, each
//   message of a failed batch tried alone so only the bad one fails. A producer whose idempotence
//   state the broker refuses (unknown producer id, out-of-order sequence, fenced epoch) is replaced
//   by a new one (a new producer id) before the retry: a duplicate is then possible, as always.
// - Broker outages. The producer and the consumers retry with a back-off capped at 2 s instead
//   of kafkajs' 30 s, so they reconnect within 2 s of the broker answering again; the consumers
//   patiently (CLIENT_RETRY: 30 retries, about a minute), so that a consumer rides out a
//   restart of the broker in its own runner, keeping its group membership (a consumer that
//   crashes, and every restart of one, joins as a new member, and the group then waits for the old
//   member's session to expire, SVC_KAFKA_SESSION_TIMEOUT_MS, before anyone consumes again). The
//   admin client (topics, readiness pings) keeps kafkajs' retry: a readiness ping should not hang.
//   A consumer that crashes anyway is recreated (see "Consumers run in the background").
// - One client per consumer. kafkajs keeps the committed offsets of a group in a map shared by
//   every consumer made from one Kafka client, and a consumer that joins with no partitions (a
//   lane beyond the partition count) clears the group's entry in it: a sibling lane of the same
//   group then fails its next fetch with a TypeError in OffsetManager.resolveOffsets, crashes
//   (non-retriable) and comes back as a new member, and its group stops for a session timeout.
//   Seen in every rebalance of test/e2e/cluster-kafka-restart.test.ts; each consumer is made
//   from a Kafka client of its own instead.
// - Delivery: at-least-once. A partition's messages are handled one at a time, in offset order,
//   so one key's messages are handled in order and never concurrently within the group (Kafka's
//   per-partition order). New groups start from the earliest offset (fromBeginning), so messages
//   published before the first subscribe are delivered.
// - Parallelism: subscribe(…, { partitions: n }) starts n kafkajs consumers (group members) in
//   this process, each handling one message at a time: n lanes, as InProcessBus has n serial
//   queues, and a slow message holds only its own lane. Not one consumer with
//   partitionsConsumedConcurrently = n: kafkajs fetches a broker's partitions together and fetches
//   again only when every batch of the last fetch is done, so one slow handler (an SMTP tarpit)
//   would hold every partition of the process (measured: a 9 s handler held all 8 partitions for
//   9 s; kafkajs issues #683, #1732). Handing batches to our own per-partition queues instead
//   would free the fetcher but let kafkajs rejoin a rebalance while handlers still run, so a
//   revoked partition's message could be handled by two processes at once. The price of n
//   members: n connections and heartbeats, and more members in each rebalance. Give a topic at
//   least as many partitions as all its processes have lanes together: members beyond that get
//   no partitions and stand by, and kafkajs' round-robin assigner hands partitions out in
//   member-id order (client id first), so the standbys may all be one process's.
// - Concurrency within a partition: subscribe(…, { concurrency: k }) lets a lane run up to k
//   messages of its batch at once (the MX stage: one owner per MX host, several of its messages in
//   flight). Offsets are resolved in order, each once it and every earlier message of the batch
//   finished; closing, a rebalance or a failure stops new starts and waits for the ones in flight
//   before the batch returns, so the partition still moves only after its owner is done. After a
//   failure, the messages behind it that finished are delivered again (at-least-once).
// - Logs: kafkajs logs every error response at ERROR, including the "rebalancing" heartbeat
//   answers that are how a member learns of a rebalance; route `logCreator` to the service's
//   logger and demote those (bus-kafka.test.ts drops them).
// - Offsets: a message's offset is resolved only after its handler resolved, and committed after
//   that (kafkajs auto-commit: every 5 s and at the end of each fetched batch, so on close too).
//   A handler that throws: its offset is not resolved, the rest of its batch is not handled, its
//   partition is paused for a back-off (retryDelayMs doubled per failure of the same message,
//   capped at 30 s, as InProcessBus) and resumed, and the next fetch starts at that same message.
//   This is done inside eachBatch rather than by letting the error reach kafkajs: kafkajs would
//   stop every partition's fetcher, retry the whole consumer a few times and then crash and
//   restart it (a group rebalance for every member) for what is one partition's problem.
//   Only that partition waits; the others go on. After maxAttempts deliveries (SVC_BUS_MAX_ATTEMPTS)
//   the message is a dead letter: parked on the topic DEAD_LETTER_TOPIC (`dead-letters`, prefixed),
//   answered by the subscription's dead-letter handler (each step tried until it succeeds, the
//   member heartbeating meanwhile), and its offset resolved, so a poison message holds its
//   partition for the retry back-offs only (8 attempts: about a minute). Fairness lanes
//   (PublishOptions.lane) are not kept here: a partition is handled in its order.
// - Heartbeats: kafkajs heartbeats only between messages, so while a handler runs the adapter
//   heartbeats itself, asking every half heartbeatInterval (kafkajs sends one only when
//   heartbeatInterval has passed since the last one's answer, so asking every heartbeatInterval
//   sent one every other time: every 2/3 of sessionTimeout, one slow event-loop turn from being
//   expelled from the group mid-job); a handler may run longer than sessionTimeout
//   (measured: a 9 s handler with sessionTimeout 6 s kept its partitions, no rebalance).
//   It should not run longer than rebalanceTimeout (default 60 s): in a rebalance the group waits
//   that long for this member to finish its messages in progress and rejoin.
// - Rebalances (kafkajs: eager protocol, every member gives up its partitions and rejoins). When
//   a heartbeat reports a rebalance, the member stops at its next message boundary (after the
//   handler in progress), commits what finished, and rejoins; the group waits for it (up to
//   rebalanceTimeout), so a partition's new owner starts after the old one finished. A message
//   whose handler finished but whose commit did not reach the broker, or whose owner died or was
//   expelled (a handler longer than rebalanceTimeout, a process killed), is delivered again to
//   the partition's next owner, possibly while the expelled one still runs it: allowed by the
//   port (at-least-once), so handlers must be idempotent, as they are (the store writes results
//   idempotently).
// - Consumers run in the background (subscribe() is synchronous, as the port declares);
//   connections are made lazily by the first publish or subscribe (connect() makes them eagerly,
//   to fail start-up fast). ready() resolves once every subscribed consumer has joined its group
//   and received its assignment (a member of a group with more members than partitions
//   legitimately gets none), and no partition is still claimed by two of its members (a member
//   that joined first keeps its old assignment until a heartbeat tells it of the rebalance). Start-up failures, consumer crashes and failed handlers go to
//   `onError`; a consumer that kafkajs does not restart by itself is recreated after a back-off.
// - close(): stops fetching, lets every handler in progress finish (a message not yet started is
//   left for the group's next owner), commits what finished, leaves the groups, then disconnects
//   the producer and admin client. Unlike InProcessBus, publish() keeps working while the
//   consumers drain, so a handler in progress can still publish its output (the worker publishes
//   results) rather than fail and have its work redone by the next owner; after close() it rejects.

//
// The producer side is kafka/producer.ts, the topics and the readiness ping kafka/admin.ts, the
// options and fixed tunings kafka/options.ts, kafkajs' errors told apart in kafka/errors.ts.

import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import { buryUntilDone, DEFAULT_MAX_ATTEMPTS, errorText, retryDelay, wakeableSleep, type Bus, type BusHandler, type BusMessage, type DeadLetterHandler, type PublishOptions, type SubscribeOptions } from '../port.ts';
import { KafkaTopics } from './admin.ts';
import { isPermanentPublishError, isRebalance } from './errors.ts';
import { CLIENT_RETRY, CLOSE_JOIN_WAIT_MS, CLOSE_LEAVE_WAIT_MS, CLOSE_PUBLISH_WAIT_MS, CONSUMER_RESTART_MAX_MS, kafkaClient, PRODUCER_RETRY, settledWithin, type KafkaBusOptions } from './options.ts';
import { publishBackoff, PublishQueue } from './producer.ts';
import { DEAD_LETTER_TOPIC } from '../topics.ts';

/** One subscribed topic: its handler and its consumers (group members) in this process. */
interface Subscription {
  /** The port's topic name, and the broker's. */
  readonly topic: string;
  readonly name: string;
  readonly groupId: string;
  readonly handler: BusHandler;
  readonly deadLetter?: DeadLetterHandler;
  readonly members: Member[];
  /** Messages of one partition handled at once (SubscribeOptions.concurrency). */
  readonly concurrency: number;
}

/** One kafkajs consumer: a lane that handles one batch at a time, `concurrency` of its messages at once. */
interface Member {
  readonly sub: Subscription;
  consumer?: Consumer;
  /** The background start-up in progress (awaited by close()). */
  starting?: Promise<void>;
  readonly joined: Promise<void>;
  readonly markJoined: () => void;
  readonly failJoined: (err: Error) => void;
  hasJoined: boolean;
  /** Partitions assigned at the last join. */
  assignment: number[];
  /** A heartbeat reported a rebalance: stop at the next message boundary and let kafkajs rejoin (cleared by the next join). */
  rebalance?: unknown;
  /** Failures of the message at the head of each partition (partition → offset, count). */
  readonly failures: Map<number, { offset: string; count: number }>;
}

/** The cluster adapter of the Bus port: see the header comment for its semantics. */
export class KafkaBus implements Bus {
  /** The producer's publish queue (client retry PRODUCER_RETRY); the admin client's topics (kafkajs' retry), unless opts.retry sets both. */
  readonly #queue: PublishQueue;
  readonly #topics: KafkaTopics;
  /** A client for one consumer (see "One client per consumer" in the header). */
  readonly #consumerClient: () => Kafka;
  readonly #opts: KafkaBusOptions;
  readonly #prefix: string;
  readonly #onError: NonNullable<KafkaBusOptions['onError']>;
  readonly #retryDelayMs: number;
  readonly #maxAttempts: number;
  /** How often a running handler asks kafkajs for a heartbeat: half the heartbeat interval. */
  readonly #heartbeatMs: number;
  readonly #slowMs: number;
  #subs = new Map<string, Subscription>();
  #publishing = new Set<Promise<unknown>>();
  #handling = new Set<Promise<unknown>>();
  /** Resume timers of paused partitions and back-off sleeps, cut short by close(). */
  #timers = new Map<NodeJS.Timeout, () => void>();
  #closing = false;
  #closingAt = 0;
  #closed = false;
  #closeP: Promise<void> | undefined;

  constructor(opts: KafkaBusOptions) {
    if (opts.brokers.length === 0) throw new Error('KafkaBus: brokers is empty');
    this.#opts = opts;
    this.#prefix = opts.topicPrefix ?? '';
    this.#onError = opts.onError ?? (() => {});
    this.#retryDelayMs = opts.retryDelayMs ?? 500;
    this.#maxAttempts = Math.max(1, Math.floor(opts.maxAttempts ?? DEFAULT_MAX_ATTEMPTS));
    // Half the interval: see "Heartbeats" in the header.
    this.#heartbeatMs = Math.max(50, Math.floor((opts.consumer?.heartbeatInterval ?? 3000) / 2));
    this.#slowMs = opts.slowHandlerMs ?? 120_000;
    this.#queue = new PublishQueue(kafkaClient(opts, opts.retry ?? PRODUCER_RETRY), { idempotent: opts.idempotent ?? true, onError: this.#onError, givesUp: (err) => this.#givesUp(err) });
    this.#topics = new KafkaTopics(kafkaClient(opts, opts.retry), opts, (topic) => this.topicName(topic));
    this.#consumerClient = () => kafkaClient(opts, opts.retry ?? CLIENT_RETRY);
  }

  /** The broker's name of port topic `topic`. */
  topicName(topic: string): string {
    return this.#prefix + topic;
  }

  /** Partitions of `topic` this process owns since its consumers' last joins (tests, metrics). */
  assigned(topic: string): number[] {
    return (this.#subs.get(topic)?.members ?? []).flatMap((m) => m.assignment).sort((a, b) => a - b);
  }

  /** Connects the producer and the admin client now instead of at the first publish or subscribe. */
  async connect(): Promise<void> {
    await Promise.all([this.#queue.producer(), this.#topics.admin()]);
  }

  /**
   * One metadata request (describeCluster) through the admin client, for readiness: true when the
   * cluster names at least one broker; throws when it cannot be reached.
   */
  async ping(): Promise<boolean> {
    if (this.#closing) throw new Error('bus closed');
    return this.#topics.ping();
  }

  /** Resolves once every consumer subscribed so far has joined its group and got its assignment. */
  async ready(timeoutMs = 30_000): Promise<void> {
    const members = [...this.#subs.values()].flatMap((s) => s.members);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const waiting = members.filter((m) => !m.hasJoined).map((m) => m.sub.groupId);
        reject(
          new Error(
            waiting.length > 0
              ? `KafkaBus not ready after ${timeoutMs} ms: ${waiting.length} consumer(s) of ${[...new Set(waiting)].join(', ')} not joined`
              : `KafkaBus not ready after ${timeoutMs} ms: its consumers' assignments have not settled (a partition claimed twice)`,
          ),
        );
      }, timeoutMs);
    });
    try {
      await Promise.race([Promise.all(members.map((m) => m.joined)), timeout]);
      // A member that joined first learns of the rebalance its siblings' joins began only at its
      // next heartbeat: until then it still shows its old assignment beside theirs. Settled means
      // no partition of a topic claimed by two of this process's members.
      while (!this.#settled()) await Promise.race([new Promise((r) => setTimeout(r, 25)), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether this process's members of each topic hold distinct partitions (no stale assignment left). */
  #settled(): boolean {
    for (const sub of this.#subs.values()) {
      const all = sub.members.flatMap((m) => m.assignment);
      if (new Set(all).size !== all.length) return false;
    }
    return true;
  }

  // Lanes (PublishOptions.lane) are the embedded adapter's: a partition here keeps its order.
  async publish(topic: string, key: string, message: BusMessage, _opts?: PublishOptions): Promise<void> {
    if (this.#closed) throw new Error('bus closed');
    // Serialised now: nothing the publisher changes afterwards reaches the consumer.
    const value = JSON.stringify(message);
    const name = this.topicName(topic);
    const sending = (async () => {
      // The topic exists before its first message is queued (an outage: tried again until it does).
      for (let attempt = 0; ; attempt++) {
        try {
          await this.#topics.ensure(topic);
          break;
        } catch (err) {
          if (this.#givesUp(err)) throw err;
          if (attempt === 0) this.#onError(err, topic, key);
          await publishBackoff(attempt);
        }
      }
      await this.#queue.push({ topic, name, key, value });
    })();
    this.#publishing.add(sending);
    const untrack = () => void this.#publishing.delete(sending);
    sending.then(untrack, untrack);
    await sending;
  }

  /** A failed publish is not retried: the bus is closed (or closing for CLOSE_PUBLISH_WAIT_MS already: a handler draining must end), or the error is permanent. */
  #givesUp(err: unknown): boolean {
    return this.#closed || (this.#closing && Date.now() - this.#closingAt >= CLOSE_PUBLISH_WAIT_MS) || isPermanentPublishError(err);
  }

  subscribe(topic: string, handler: BusHandler, opts: SubscribeOptions = {}): void {
    if (this.#closing) throw new Error('bus closed');
    if (this.#subs.has(topic)) throw new Error(`topic ${topic} has a subscriber already`);
    const name = this.topicName(topic);
    const sub: Subscription = {
      topic,
      name,
      groupId: `${this.#opts.groupPrefix}.${topic}`,
      handler,
      ...(opts.deadLetter ? { deadLetter: opts.deadLetter } : {}),
      members: [],
      concurrency: Math.max(1, Math.floor(opts.concurrency ?? 1)),
    };
    const lanes = Math.max(1, Math.floor(opts.partitions ?? 1));
    for (let i = 0; i < lanes; i++) {
      let markJoined!: () => void;
      let failJoined!: (err: Error) => void;
      const joined = new Promise<void>((resolve, reject) => {
        markJoined = resolve;
        failJoined = reject;
      });
      joined.catch(() => {}); // only ready() cares
      sub.members.push({ sub, joined, markJoined, failJoined, hasJoined: false, assignment: [], failures: new Map() });
    }
    this.#subs.set(topic, sub);
    for (const member of sub.members) this.#start(member);
  }

  async close(): Promise<void> {
    this.#closeP ??= this.#close();
    return this.#closeP;
  }

  async #close(): Promise<void> {
    this.#closing = true;
    this.#closingAt = Date.now();
    // Paused partitions stay paused: nothing more is fetched. Back-off sleeps end now.
    for (const [timer, wake] of this.#timers) {
      clearTimeout(timer);
      wake();
    }
    this.#timers.clear();
    const members = [...this.#subs.values()].flatMap((s) => s.members);
    for (const m of members) if (!m.hasJoined) m.failJoined(new Error('bus closed'));
    // A member still joining its group may be held by the broker until a rebalance ends (until a
    // killed member's session times out): the wait for it, and for leaving the group, is bounded,
    // so a process told to stop during a rebalance still stops in time (its handlers in progress
    // are always waited for: they are the work). A member that could not leave is expelled by the
    // broker after its session timeout, as a killed one is.
    await settledWithin(members.map((m) => m.starting), CLOSE_JOIN_WAIT_MS);
    // Stops fetching, waits for the batch in progress (it stops after its handler in progress),
    // commits its resolved offsets, leaves the group.
    const leaving = members.map((m) => m.consumer?.disconnect());
    await Promise.allSettled([...this.#handling]);
    await settledWithin(leaving, CLOSE_LEAVE_WAIT_MS);
    this.#closed = true;
    await Promise.allSettled([...this.#publishing]);
    await Promise.allSettled([this.#queue.disconnect(), this.#topics.disconnect()]);
  }

  /** Sleeps `ms`, or less if the bus closes meanwhile. */
  #sleep(ms: number): Promise<void> {
    return wakeableSleep(this.#timers, this.#closing, ms);
  }

  #start(member: Member, afterMs = 0): void {
    const run = (async () => {
      if (afterMs > 0) await this.#sleep(afterMs);
      for (let attempt = 0; !this.#closing; attempt++) {
        try {
          await this.#run(member);
          return;
        } catch (err) {
          if (this.#closing) return;
          this.#onError(err, member.sub.topic);
          await member.consumer?.disconnect().catch(() => {});
          member.consumer = undefined;
          await this.#sleep(Math.min(CONSUMER_RESTART_MAX_MS, 1000 * 2 ** Math.min(attempt, 5)));
        }
      }
    })();
    member.starting = run;
    void run.finally(() => {
      if (member.starting === run) member.starting = undefined;
    });
  }

  async #run(member: Member): Promise<void> {
    const { sub } = member;
    await this.#topics.ensure(sub.topic);
    if (this.#closing) return;
    const consumer = this.#consumerClient().consumer({
      groupId: sub.groupId,
      ...this.#opts.consumer,
      allowAutoTopicCreation: false,
      retry: {
        // A crash kafkajs deems retriable restarts the consumer unless we are closing; one it does
        // not restart (non-retriable) is recreated by the CRASH listener below.
        restartOnFailure: async () => !this.#closing,
      },
    });
    member.consumer = consumer;
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      member.assignment = [...(e.payload.memberAssignment[sub.name] ?? [])].sort((a, b) => a - b);
      member.rebalance = undefined;
      if (!member.hasJoined) {
        member.hasJoined = true;
        member.markJoined();
      }
      // A kafkajs restart that was joining while close() ran: stop it once it is running.
      if (this.#closing) setTimeout(() => void consumer.disconnect().catch(() => {}), 0);
    });
    consumer.on(consumer.events.CRASH, (e) => {
      if (this.#closing) return;
      this.#onError(e.payload.error, sub.topic);
      if (!e.payload.restart && member.consumer === consumer) {
        member.consumer = undefined;
        member.assignment = [];
        this.#start(member, this.#retryDelayMs);
      }
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [sub.name], fromBeginning: true });
    if (this.#closing) return;
    await consumer.run({
      // One batch at a time per consumer: see "Parallelism" in the header comment.
      partitionsConsumedConcurrently: 1,
      autoCommit: true,
      // Besides at the end of every fetched batch: a long batch does not hold its commits.
      autoCommitInterval: 5000,
      eachBatchAutoResolve: false,
      eachBatch: (payload) => this.#eachBatch(member, payload),
    });
  }

  async #eachBatch(member: Member, p: EachBatchPayload): Promise<void> {
    const { batch } = p;
    const { sub } = member;
    const heartbeat = async (): Promise<void> => {
      try {
        await p.heartbeat();
      } catch (err) {
        if (isRebalance(err)) member.rebalance = err;
        throw err;
      }
    };
    // Up to sub.concurrency messages of the batch in flight; offsets are resolved in order, each
    // once it and every earlier one finished (with concurrency 1: one message at a time, resolved
    // and committed as it finishes).
    const msgs = batch.messages;
    const finished: boolean[] = [];
    const running = new Set<Promise<void>>();
    let resolved = 0;
    let failed: { index: number; err: unknown } | undefined;
    const advance = async (): Promise<void> => {
      const from = resolved;
      while (resolved < msgs.length && finished[resolved]) resolved++;
      if (resolved > from) {
        p.resolveOffset(msgs[resolved - 1]!.offset);
        await p.commitOffsetsIfNecessary();
      }
    };
    // A commit between messages that fails (the group moved on: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID)
    // stops the batch like a heartbeat's rebalance answer; thrown at once, it would hand the
    // partition to kafkajs's rejoin while this member's handlers still run (two owners at once).
    let commitFailed: { err: unknown } | undefined;
    const advanceBetween = async (): Promise<void> => {
      try {
        await advance();
      } catch (err) {
        if (isRebalance(err)) member.rebalance ??= err;
        else commitFailed ??= { err };
      }
    };
    const stopping = (): boolean => this.#closing || !p.isRunning() || p.isStale() || member.rebalance !== undefined || failed !== undefined || commitFailed !== undefined;
    for (let i = 0; i < msgs.length; i++) {
      while (running.size >= sub.concurrency) await Promise.race(running);
      await advanceBetween();
      // Between messages as kafkajs would: a rebalance answer sets member.rebalance (thrown below,
      // once the messages in flight finished); any other heartbeat error is thrown there too.
      if (i > 0) await heartbeat().catch(() => {});
      // Closing, a rebalance seen by a heartbeat, or a failed message: start nothing more (what
      // is not resolved stays uncommitted for the next fetch or the next owner).
      if (stopping()) break;
      const m = msgs[i]!;
      const key = m.key?.toString('utf8') ?? '';
      let message: BusMessage;
      try {
        message = JSON.parse(m.value?.toString('utf8') ?? 'null') as BusMessage;
        if (message === null || typeof message !== 'object' || Array.isArray(message)) throw new Error('not a JSON object');
      } catch (err) {
        // Not something any publisher of this bus wrote: retrying would block the partition for
        // ever, so it is reported and skipped.
        this.#onError(new Error(`unreadable message at ${batch.topic}/${batch.partition}@${m.offset}: ${(err as Error).message}`), sub.topic, key);
        finished[i] = true;
        continue;
      }
      const index = i;
      const run = this.#handle(sub, message, key, heartbeat, { topic: batch.topic, partition: batch.partition, offset: m.offset }).then((f) => {
        if (!f) {
          finished[index] = true;
          if (member.failures.get(batch.partition)?.offset === m.offset) member.failures.delete(batch.partition);
        } else if (!failed || index < failed.index) failed = { index, err: f.err };
      });
      running.add(run);
      void run.finally(() => running.delete(run));
    }
    // The group waits for this member's messages in flight before it moves the partition.
    await Promise.all(running);
    if (commitFailed) throw commitFailed.err;
    await advance();
    if (failed) {
      const m = msgs[failed.index]!;
      const key = m.key?.toString('utf8') ?? '';
      if (this.#closing) return; // dropped here (not committed): no retry, no noise, as InProcessBus
      this.#onError(failed.err, sub.topic, key);
      const prev = member.failures.get(batch.partition);
      const again = prev && prev.offset === m.offset;
      const failure = { offset: m.offset, count: again ? prev.count + 1 : 1 };
      member.failures.set(batch.partition, failure);
      // The last attempt: parked on the dead-letter topic, answered by the dead-letter handler
      // (each step tried until it succeeds: its failure is an outage, not the message), passed.
      if (failure.count >= this.#maxAttempts) {
        // Stopped early (closing, a rebalance, a stale batch): not resolved; its next owner takes it again.
        const buried = await this.#bury(sub, m.value?.toString('utf8') ?? '', key, failed.err, failure.count, heartbeat, () => !p.isRunning() || p.isStale() || member.rebalance !== undefined);
        if (!buried) return;
        member.failures.delete(batch.partition);
        p.resolveOffset(m.offset);
        await p.commitOffsetsIfNecessary();
        return;
      }
      const delay = retryDelay(this.#retryDelayMs, failure.count);
      // Not resolved: the next fetch of this partition starts at this message again.
      const resume = p.pause();
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        resume();
      }, delay);
      this.#timers.set(timer, () => {});
      return;
    }
    if (this.#closing || !p.isRunning() || p.isStale()) return;
    // A heartbeat in a handler saw a rebalance: let kafkajs rejoin.
    if (member.rebalance) throw member.rebalance;
    await heartbeat();
  }

  /**
   * Parks a message that failed every attempt on the dead-letter topic and answers it with the
   * subscription's dead-letter handler, each step tried until it succeeds, heartbeating meanwhile.
   * False: it stopped first (the bus closing, or `stop()`: the member lost or is losing the partition).
   */
  async #bury(sub: Subscription, value: string, key: string, err: unknown, attempts: number, heartbeat: () => Promise<void>, stop: () => boolean): Promise<boolean> {
    const beat = setInterval(() => void heartbeat().catch(() => {}), this.#heartbeatMs);
    try {
      const letter = { v: 1, topic: sub.topic, key, message: value, error: errorText(err), attempts, at: new Date().toISOString() };
      return await buryUntilDone(
        { park: () => this.publish(DEAD_LETTER_TOPIC, key, letter), answer: async () => sub.deadLetter?.(JSON.parse(value) as BusMessage, key, err) },
        { stopped: () => this.#closing || stop(), onError: (e) => this.#onError(e, sub.topic, key), sleep: (ms) => this.#sleep(ms), firstDelayMs: this.#retryDelayMs },
      );
    } finally {
      clearInterval(beat);
    }
  }

  /** Runs the handler, heartbeating meanwhile (and reporting it once if it runs past slowHandlerMs). Returns the failure, if any. */
  async #handle(sub: Subscription, message: BusMessage, key: string, heartbeat: () => Promise<void>, at: { topic: string; partition: number; offset: string }): Promise<{ err: unknown } | undefined> {
    const beat = setInterval(() => void heartbeat().catch(() => {}), this.#heartbeatMs);
    const onSlow = this.#opts.onSlow;
    const slow = onSlow && setTimeout(() => onSlow({ ...at, key, ms: this.#slowMs }), this.#slowMs);
    const run = (async () => {
      try {
        await sub.handler(message, key);
        return undefined;
      } catch (err) {
        return { err };
      }
    })();
    this.#handling.add(run);
    try {
      return await run;
    } finally {
      clearInterval(beat);
      if (slow) clearTimeout(slow);
      this.#handling.delete(run);
    }
  }
}
