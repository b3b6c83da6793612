// The Bus conformance suite (bus-conformance.ts) on the cluster adapter, KafkaBus, against a real
// broker (KAFKA_BROKERS, default 127.0.0.1:9092; scripts/infra-up.sh starts one), plus what only
// Kafka has: a second process's consumer joining the group mid-stream (rebalance), and close()
// committing what finished so the group's next member starts after it.
// Every bus gets its own topic prefix (so its own topics and groups), deleted at teardown.
// Consumers are tuned for tests (short heartbeats and long-poll); the broker runs with
// group.initial.rebalance.delay.ms=0. CI_REQUIRE_SERVICES=1 turns "unreachable" into a failure.
// The broker restart case runs on a private broker of its own (test/helpers/private-infra.ts, from
// infra-up.sh's jars), never on the shared one.

import t from 'tap';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { DEAD_LETTER_TOPIC, KafkaBus, type BusMessage, type DeadLetter, type KafkaBusOptions } from '../src/index.ts';
import { busConformance, until, type Adapter, type FreshOptions, type Tap } from './bus-conformance.ts';
import { privateKafkaMissing, startPrivateKafka } from '../../../test/helpers/private-infra.ts';

// tap's default of 120 s a file is too tight on a loaded 2-core machine: 78 s in a full CI run on a
// slow day, 114 s beside two cluster tests (the broker restarts are JVM starts of 9-13 s).
t.setTimeout(300_000);

const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',').map((b) => b.trim()).filter(Boolean);
const REQUIRED = process.env.CI_REQUIRE_SERVICES === '1';
const WAIT_MS = 20_000;

const kafka = new Kafka({ clientId: 'bus-test-admin', brokers: BROKERS, logLevel: logLevel.NOTHING, connectionTimeout: 1500, retry: { retries: 1, initialRetryTime: 200 } });
const admin = kafka.admin();

/** Why the broker cannot be used, or undefined if it answered a real request. */
async function kafkaUnreachable(): Promise<string | undefined> {
  try {
    await admin.connect();
    await admin.listTopics();
    return undefined;
  } catch (err) {
    await admin.disconnect().catch(() => {});
    return (err as Error).message;
  }
}

const newPrefix = (): string => `bt-${randomBytes(4).toString('hex')}.`;

/**
 * kafkajs' errors, printed, except the one it logs at ERROR level on every rebalance (its
 * Connection logs each error response, and a heartbeat answered "rebalancing" is how a member
 * learns of one).
 */
const testLog: KafkaBusOptions['logCreator'] = () => ({ namespace, log }) => {
  if (namespace === 'Connection' && /rebalancing/.test(String(log.error))) return;
  console.error(JSON.stringify({ namespace, ...log }));
};

/** A KafkaBus for tests: small timings, quiet logs, 8 partitions per topic. */
function testBus(prefix: string, clientId: string, opts: FreshOptions & Partial<KafkaBusOptions> = {}): KafkaBus {
  return new KafkaBus({
    brokers: BROKERS,
    clientId,
    // The test's own groups, as the service's are its deployment's: `bus-test.<prefix>.<topic>`.
    groupPrefix: `bus-test.${prefix.replace(/\.$/, '')}`,
    topicPrefix: prefix,
    defaultPartitions: 8,
    logLevel: logLevel.ERROR,
    logCreator: testLog,
    consumer: { sessionTimeout: 6000, heartbeatInterval: 300, rebalanceTimeout: 6000, maxWaitTimeInMs: 50 },
    ...opts,
  });
}

/** Closes the buses, then deletes the prefix's topics and groups. */
function cleanUp(t: Tap, prefix: string, buses: KafkaBus[]): void {
  t.teardown(async () => {
    await Promise.all(buses.map((b) => b.close()));
    const topics = (await admin.listTopics()).filter((name) => name.startsWith(prefix));
    if (topics.length > 0) await admin.deleteTopics({ topics }).catch(() => {});
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((id) => id.startsWith(`bus-test.${prefix}`));
    if (groups.length > 0) await admin.deleteGroups(groups).catch(() => {});
  });
}

const adapter: Adapter = {
  name: 'kafka',
  waitMs: WAIT_MS,
  // A publish to a topic created a moment before (the dead-letter topic) may meet a broker that
  // has no metadata for it yet: kafkajs retries, and the bus reports the batch's first failure.
  transient: /^This server does not host this topic-partition$|^There is no leader for this topic-partition/,
  async fresh(t, opts = {}) {
    const prefix = newPrefix();
    const bus = testBus(prefix, 'bus-test', opts);
    cleanUp(t, prefix, [bus]);
    // The dead-letter topic read back, where a test can make dead letters.
    const letters: DeadLetter[] = [];
    if (opts.maxAttempts !== undefined)
      bus.subscribe(DEAD_LETTER_TOPIC, async (m) => {
        const { topic, key, message, error, attempts } = m as unknown as DeadLetter;
        letters.push({ topic, key, message, error, attempts });
      });
    return { bus, ready: () => bus.ready(WAIT_MS), parked: () => letters };
  },
};

/**
 * Handlers for two processes A and B of one group that record, per key, what each handled (in
 * order), how many of a key one process ran at once, and how often a key ran in both at once.
 */
function ownership(workMs: (m: BusMessage) => number) {
  const o = {
    log: { a: new Map<string, number[]>(), b: new Map<string, number[]>() },
    handled: new Set<string>(),
    count: { a: 0, b: 0 },
    mostPerKeyInOne: 0,
    acrossBoth: 0,
    handler: (who: 'a' | 'b') => async (m: BusMessage, key: string) => {
      const mine = running[who];
      const other = running[who === 'a' ? 'b' : 'a'];
      mine.set(key, (mine.get(key) ?? 0) + 1);
      o.mostPerKeyInOne = Math.max(o.mostPerKeyInOne, mine.get(key)!);
      if ((other.get(key) ?? 0) > 0) o.acrossBoth++;
      await sleep(workMs(m)); // the work
      if ((other.get(key) ?? 0) > 0) o.acrossBoth++;
      const seq = o.log[who].get(key) ?? [];
      seq.push(m.n as number);
      o.log[who].set(key, seq);
      o.handled.add(`${key}:${String(m.n)}`);
      o.count[who]++;
      mine.set(key, mine.get(key)! - 1);
    },
  };
  const running = { a: new Map<string, number>(), b: new Map<string, number>() };
  return o;
}

function kafkaOnly(t: Tap): void {
  t.test('a handler still running after slowHandlerMs is reported once, with its partition and offset; a quick one is not', async (t) => {
    const prefix = newPrefix();
    const slow: Array<{ topic: string; partition: number; offset: string; key: string; ms: number }> = [];
    const bus = testBus(prefix, 'bus-test-slow', { slowHandlerMs: 300, onSlow: (at) => slow.push(at) });
    cleanUp(t, prefix, [bus]);
    const done: string[] = [];
    bus.subscribe('slow', async (m, key) => {
      await sleep(m.ms as number);
      done.push(key);
    });
    await bus.ready(WAIT_MS);
    await bus.publish('slow', 'quick', { v: 1, ms: 10 });
    await until(() => done.includes('quick'), WAIT_MS, 'the quick message');
    await bus.publish('slow', 'long', { v: 1, ms: 1_000 });
    await until(() => done.includes('long'), WAIT_MS, 'the long message');
    t.equal(slow.length, 1, 'one report');
    t.match(slow[0], { topic: `${prefix}slow`, key: 'long', ms: 300 });
    t.ok(Number.isInteger(slow[0]?.partition) && /^\d+$/.test(slow[0]?.offset ?? ''), `where it was: ${JSON.stringify(slow[0])}`);
  });

  t.test('a topic is `<topic prefix><topic>` and its group `<group prefix>.<topic>`: the prefix is not repeated', async (t) => {
    const prefix = newPrefix();
    const bus = new KafkaBus({ brokers: BROKERS, clientId: 'bus-test-names', groupPrefix: prefix.replace(/\.$/, ''), topicPrefix: prefix, defaultPartitions: 2, logLevel: logLevel.ERROR, logCreator: testLog, consumer: { sessionTimeout: 6000, heartbeatInterval: 300, maxWaitTimeInMs: 50 } });
    t.teardown(async () => {
      await bus.close();
      await admin.deleteTopics({ topics: [`${prefix}jobs.work`] }).catch(() => {});
      await admin.deleteGroups([`${prefix}jobs.work`]).catch(() => {});
    });
    bus.subscribe('jobs.work', async () => {});
    await bus.ready(WAIT_MS);
    t.ok((await admin.listTopics()).includes(`${prefix}jobs.work`), 'the topic');
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.includes(prefix.replace(/\.$/, '')));
    t.strictSame(groups, [`${prefix}jobs.work`], `the group: ${prefix}jobs.work`);
  });

  t.test('a second process joining the group mid-stream: every message handled, per-key order kept by each', async (t) => {
    const prefix = newPrefix();
    const a = testBus(prefix, 'bus-test-a');
    const b = testBus(prefix, 'bus-test-b');
    cleanUp(t, prefix, [a, b]);
    const keys = Array.from({ length: 16 }, (_, i) => `k${i}`);
    const ROUNDS = 30;
    const own = ownership(() => 3);
    const { log, handled, handler } = own;
    // 4 lanes (consumers) each: 8 members for the 8 partitions once B is in.
    a.subscribe('work', handler('a'), { partitions: 4 });
    await a.ready(WAIT_MS);
    t.equal(a.assigned('work').length, 8, 'alone, A owns all 8 partitions');

    const publishRound = (r: number) => Promise.all(keys.map((key) => a.publish('work', key, { v: 1, n: r })));
    let bJoined: Promise<number> | undefined;
    for (let r = 0; r < ROUNDS; r++) {
      await publishRound(r);
      if (r === 10) {
        // Mid-stream: A has messages in hand when B's consumer joins and the group rebalances.
        await until(() => handled.size >= 60, WAIT_MS, 'A to handle some');
        const bStarted = Date.now();
        b.subscribe('work', handler('b'), { partitions: 4 });
        bJoined = b.ready(WAIT_MS).then(() => Date.now() - bStarted);
        bJoined.catch(() => {});
      }
    }
    const joinMs = await bJoined!;
    // After the rebalance, more work: B must get its share of it.
    await publishRound(ROUNDS);
    await until(() => handled.size === keys.length * (ROUNDS + 1), WAIT_MS, 'every message handled');
    await until(() => a.assigned('work').length + b.assigned('work').length === 8, WAIT_MS, 'A to settle on its new assignment');

    const all = Array.from({ length: ROUNDS + 1 }, (_, i) => i);
    for (const key of keys) {
      const got = new Set([...(log.a.get(key) ?? []), ...(log.b.get(key) ?? [])]);
      if (all.some((n) => !got.has(n))) t.fail(`${key}: messages lost: ${all.filter((n) => !got.has(n)).join(', ')}`);
      for (const who of ['a', 'b'] as const) {
        const seq = log[who].get(key) ?? [];
        // In order: each next message is the following one, or an earlier one again (a redelivery
        // starts over from the last commit); never a later one before an earlier one.
        const skips = seq.filter((n, i) => i > 0 && n > seq[i - 1]! + 1);
        if (skips.length > 0) t.fail(`${key} in ${who}: out of order: ${seq.join(',')}`);
      }
    }
    t.pass(`every one of ${keys.length * (ROUNDS + 1)} messages handled, each key in order in each process`);
    t.equal(own.mostPerKeyInOne, 1, 'never two messages of one key at once in one process');
    const handledA = own.count.a;
    const handledB = own.count.b;
    t.ok(handledB > 0, `B handled ${handledB} messages`);
    t.ok(a.assigned('work').length > 0 && b.assigned('work').length > 0, `partitions split: A ${a.assigned('work').join(',')} / B ${b.assigned('work').join(',')}`);
    t.comment(
      `rebalance: B joined in ${joinMs} ms; A handled ${handledA}, B ${handledB}; ` +
        `redelivered ${handledA + handledB - handled.size}; a key in both processes at once: ${own.acrossBoth} times`,
    );
  });

  t.test('concurrency 4, a second process joining mid-stream: a partition moves only after its messages in flight finished', async (t) => {
    const prefix = newPrefix();
    const a = testBus(prefix, 'bus-test-ca');
    const b = testBus(prefix, 'bus-test-cb');
    cleanUp(t, prefix, [a, b]);
    const keys = Array.from({ length: 8 }, (_, i) => `host${i}`);
    const ROUNDS = 24;
    // The work, finishing out of order.
    const own = ownership((m) => 5 + ((m.n as number) % 3) * 5);
    const { handled, handler, count } = own;
    a.subscribe('mx', handler('a'), { partitions: 2, concurrency: 4 });
    await a.ready(WAIT_MS);
    const publishRound = (r: number) => Promise.all(keys.map((key) => a.publish('mx', key, { v: 1, n: r })));
    let bJoined: Promise<void> | undefined;
    for (let r = 0; r < ROUNDS; r++) {
      await publishRound(r);
      if (r === 8) {
        await until(() => handled.size >= 40, WAIT_MS, 'A to handle some');
        b.subscribe('mx', handler('b'), { partitions: 2, concurrency: 4 });
        bJoined = b.ready(WAIT_MS);
      }
    }
    await bJoined;
    await publishRound(ROUNDS);
    await until(() => handled.size === keys.length * (ROUNDS + 1), WAIT_MS, 'every message handled');
    t.equal(handled.size, keys.length * (ROUNDS + 1), 'every message handled');
    t.ok(own.mostPerKeyInOne > 1, `several messages of one key at once in one process (${own.mostPerKeyInOne})`);
    t.ok(own.mostPerKeyInOne <= 4, 'never more than the concurrency');
    t.equal(own.acrossBoth, 0, 'a key never in both processes at once: the new owner started after the old one finished');
    t.ok(count.b > 0, `B handled ${count.b} after joining (A ${count.a}; redelivered ${count.a + count.b - handled.size})`);
  });

  t.test('close commits what finished: the group’s next member starts after it', async (t) => {
    const prefix = newPrefix();
    const first = testBus(prefix, 'bus-test-first');
    const next = testBus(prefix, 'bus-test-next');
    cleanUp(t, prefix, [first, next]);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const started: number[] = [];
    first.subscribe('handoff', async (m) => {
      started.push(m.n as number);
      await gate;
    });
    await first.ready(WAIT_MS);
    for (const n of [1, 2, 3]) await first.publish('handoff', 'k', { v: 1, n });
    await until(() => started.length === 1, WAIT_MS, 'the first handler to start');
    const closing = first.close();
    release();
    await closing;
    t.strictSame(started, [1], 'the first bus handled one message');
    const got: number[] = [];
    next.subscribe('handoff', async (m) => void got.push(m.n as number));
    await next.ready(WAIT_MS);
    await until(() => got.length >= 2, WAIT_MS, 'the rest');
    t.strictSame(got, [2, 3], 'the next member starts after the committed message, and misses none');
  });
}

function brokerRestarts(t: Tap): void {
  t.test('the broker restarted mid-stream (kill -9, SIGTERM): publish() waits instead of failing, every message handled, each key in order', async (t) => {
    const missing = privateKafkaMissing();
    if (missing) {
      if (REQUIRED) t.fail(`CI_REQUIRE_SERVICES=1 but no private broker: ${missing}`);
      else t.comment(`skipped: no private broker: ${missing}`);
      return;
    }
    const broker = await startPrivateKafka({ name: 'bus-test' });
    const errors: string[] = [];
    // Sends of the publishing bus that failed after kafkajs' own retries (the publish queue then
    // retries them itself): how the test sees that an outage outlasted those retries.
    let failedSends = 0;
    const bus = (clientId: string) =>
      new KafkaBus({
        brokers: broker.brokers,
        clientId,
        groupPrefix: 'bus-test',
        topicPrefix: 'restart.',
        defaultPartitions: 4,
        logLevel: logLevel.NOTHING,
        // The service's session timeout (SVC_KAFKA_SESSION_TIMEOUT_MS): a member that had to join
        // again as a new one would stall the group about this long.
        consumer: { sessionTimeout: 10_000, heartbeatInterval: 1000, maxWaitTimeInMs: 100 },
        onError: (err, _topic, key) => {
          errors.push(String((err as Error).message));
          if (clientId === 'bus-test-pub' && key !== undefined) failedSends++;
        },
      });
    const pub = bus('bus-test-pub');
    const sub = bus('bus-test-sub');
    let stop = false;
    let publishers: Promise<void>[] = [];
    t.teardown(async () => {
      stop = true;
      await Promise.all(publishers);
      await Promise.all([pub.close(), sub.close()]);
      await broker.close(!t.passing());
    });
    const keys = Array.from({ length: 7 }, (_, i) => `k${i}`);
    const seen = new Map<string, number[]>();
    sub.subscribe(
      'stream',
      async (m, key) => {
        const seq = seen.get(key) ?? [];
        seq.push(m.n as number);
        seen.set(key, seq);
        await sleep(5);
      },
      { partitions: 2 },
    );
    await sub.ready(WAIT_MS);
    // One publisher per key, each publishing its next message when the last one resolved.
    const rejected: string[] = [];
    const sent = new Map<string, number>(keys.map((k) => [k, 0]));
    /** The keys with a publish in progress. */
    const publishing = new Set<string>();
    publishers = keys.map(async (key) => {
      while (!stop) {
        const n = sent.get(key)!;
        try {
          publishing.add(key);
          await pub.publish('stream', key, { v: 1, n }).finally(() => publishing.delete(key));
          sent.set(key, n + 1);
        } catch (err) {
          rejected.push(`${key}:${n}: ${(err as Error).message}`);
          await sleep(200);
        }
        await sleep(50);
      }
    });
    const total = () => [...sent.values()].reduce((a, b) => a + b, 0);
    const handled = () => new Set([...seen].flatMap(([k, ns]) => ns.map((n) => `${k}:${n}`))).size;
    const stalls: string[] = [];
    // The broker stays down until every publisher waits on it; after the kill, also until a send
    // failed after kafkajs' own retries of a produce (5, about 6 s), which used to reject publish().
    for (const [signal, outlastRetries] of [['SIGKILL', true], ['SIGTERM', false]] as const) {
      // Messages flowing: three more per key published and handled since the last restart.
      const flowing = handled() + 3 * keys.length;
      await until(() => handled() >= flowing, WAIT_MS, 'messages flowing');
      const before = total();
      const sendsFailed = failedSends;
      await broker.stop(signal);
      const downAt = Date.now();
      // stop() returns once the broker exited: a publish still in progress now waits on it.
      await until(() => keys.every((k) => publishing.has(k)), WAIT_MS, `every publisher waiting on the stopped broker (${signal})`);
      if (outlastRetries) await until(() => failedSends > sendsFailed, 60_000, 'a send failed after kafkajs’ own retries');
      const downMs = Date.now() - downAt;
      const startMs = await broker.start();
      // Publishing and handling resume: new messages are published and handled.
      const up = Date.now();
      await until(() => total() >= before + 2 * keys.length, 60_000, `publishing after the ${signal} restart`);
      const target = total();
      await until(() => handled() >= target, 60_000, `handling after the ${signal} restart`);
      stalls.push(`${signal}, down ${downMs} ms: broker started in ${startMs} ms, ${before} → ${target} published and handled ${Date.now() - up} ms after`);
    }
    stop = true;
    await Promise.all(publishers);
    await until(() => handled() === total(), 60_000, 'every message handled');
    t.strictSame(rejected, [], 'no publish() rejected during the outages');
    for (const key of keys) {
      const ns = seen.get(key) ?? [];
      const n = sent.get(key)!;
      const got = new Set(ns);
      const lost = Array.from({ length: n }, (_, i) => i).filter((i) => !got.has(i));
      t.strictSame(lost, [], `${key}: every one of ${n} messages handled`);
      const skips = ns.filter((x, i) => i > 0 && x > ns[i - 1]! + 1);
      t.strictSame(skips, [], `${key}: in order (a redelivery starts over, never skips ahead)`);
    }
    t.comment(`${total()} messages, ${[...seen.values()].reduce((a, s) => a + s.length, 0) - total()} redelivered; ${stalls.join('; ')}; ${errors.length} errors reported, e.g. ${errors.slice(0, 3).join(' | ')}`);

    // A bus closed while the broker is down: a publish waiting out the outage gives up, and close() ends.
    await broker.stop('SIGKILL');
    const waiting = pub.publish('stream', 'k0', { v: 1, n: -1 }).then(
      () => 'published',
      (err: Error) => `rejected: ${err.message}`,
    );
    const sendsFailed = failedSends;
    await until(() => failedSends > sendsFailed, 60_000, 'the publish waiting out the outage');
    const closeStart = Date.now();
    await pub.close();
    const closeMs = Date.now() - closeStart;
    t.match(await waiting, /^rejected: /, 'the waiting publish rejects once the bus closes');
    t.ok(closeMs < 20_000, `close() with the broker down took ${closeMs} ms (under 20 s)`);
  });
}

const why = await kafkaUnreachable();
if (!why) {
  t.teardown(() => admin.disconnect());
  busConformance(t, adapter);
  kafkaOnly(t);
  brokerRestarts(t);
} else if (REQUIRED) {
  t.fail(`CI_REQUIRE_SERVICES=1 but Kafka at ${BROKERS.join(',')} is unreachable: ${why}`);
} else {
  t.plan(0, `Kafka at ${BROKERS.join(',')} is unreachable (${why}): skipping; start it with scripts/infra-up.sh, or set KAFKA_BROKERS; CI_REQUIRE_SERVICES=1 makes this a failure`);
}
