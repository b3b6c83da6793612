// One conformance suite for the Bus port (every adapter keeps the same promises), run against both adapters: InProcessBus
// (bus-inprocess.test.ts) and KafkaBus on a real broker (bus-kafka.test.ts). Each adapter's test
// file supplies an `Adapter` that makes a fresh bus isolated from every other one (Kafka: its own
// topic prefix, so its own topics and consumer groups). Everything here is written once against
// `Bus` and the port's doc comments. Waits are on events with a timeout, never bare sleeps;
// handlers sleep only to stand for work that takes time.

import tap from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Bus, BusMessage, DeadLetter } from '../src/index.ts';
import { until } from '../../../test/helpers/until.ts';

export { until };

/** The type of a tap test object (the `t` of a subtest callback). */
export type Tap = Parameters<Parameters<typeof tap.test>[0]>[0];

export interface FreshOptions {
  /** Handler failures, as the adapter reports them. */
  onError?: (err: unknown, topic: string, key?: string) => void;
  /** First retry delay of a failed message. */
  retryDelayMs?: number;
  /** Deliveries of a failing message before it is dead-lettered. */
  maxAttempts?: number;
}

export interface Target {
  readonly bus: Bus;
  /** Resolves once every subscriber so far receives messages (Kafka: has joined its group). */
  ready(): Promise<void>;
  /** The dead letters parked so far (in-process: its sink; Kafka: the dead-letter topic, read back). */
  parked(): DeadLetter[];
}

export interface Adapter {
  readonly name: string;
  /** A fresh bus, isolated from every other one, with topics of at least 8 partitions; closed when `t` ends. */
  fresh(t: Tap, opts?: FreshOptions): Promise<Target>;
  /** How long a wait for deliveries may take before the test fails. */
  readonly waitMs: number;
  /** Known gaps of this adapter: test name → why (run as `todo`, so they show without failing). */
  readonly todo?: Readonly<Record<string, string>>;
  /**
   * Transport errors the adapter may report besides the handlers' own, for a condition it then
   * retried (Kafka: a topic's metadata just after the topic was created). A test about the
   * handlers' failures leaves these out.
   */
  readonly transient?: RegExp;
}


/** Publishes `count` messages (n = 0 … count-1) on each key: one key's in order, the keys at once. */
async function publishAll(bus: Bus, topic: string, keys: string[], count: number, extra: Record<string, unknown> = {}): Promise<void> {
  await Promise.all(
    keys.map(async (key) => {
      for (let n = 0; n < count; n++) await bus.publish(topic, key, { v: 1, key, n, ...extra });
    }),
  );
}

const keysOf = (k: number, prefix = 'k'): string[] => Array.from({ length: k }, (_, i) => `${prefix}${i}`);
const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

export function busConformance(t: Tap, adapter: Adapter): void {
  const test = (name: string, fn: (t: Tap) => Promise<void>): void => {
    const todo = adapter.todo?.[name];
    void t.test(name, todo ? { todo } : {}, fn);
  };

  test('one key: in order, one at a time; keys on other partitions in parallel', async (t) => {
    const { bus, ready } = await adapter.fresh(t);
    const keys = keysOf(8);
    const seen = new Map<string, number[]>(keys.map((k) => [k, []]));
    const running = new Map<string, number>();
    let now = 0;
    let most = 0;
    let mostPerKey = 0;
    let total = 0;
    bus.subscribe(
      'order',
      async (m, key) => {
        const r = (running.get(key) ?? 0) + 1;
        running.set(key, r);
        mostPerKey = Math.max(mostPerKey, r);
        most = Math.max(most, ++now);
        await sleep(10); // the work
        seen.get(key)!.push(m.n as number);
        running.set(key, running.get(key)! - 1);
        now--;
        total++;
      },
      { partitions: 8 },
    );
    await ready();
    await publishAll(bus, 'order', keys, 15);
    await until(() => total >= 120, adapter.waitMs, '120 deliveries');
    for (const key of keys) t.strictSame(seen.get(key), range(15), `${key}: every message once, in order`);
    t.equal(mostPerKey, 1, 'never two messages of one key at once');
    t.ok(most > 1, `keys on different partitions ran together (${most} at once)`);
  });

  // Regression: one kafkajs consumer with partitionsConsumedConcurrently fetches again only when
  // every batch of its last fetch is done, so one slow handler held every partition.
  test('a slow handler holds only its own partition: other keys go on meanwhile', async (t) => {
    const { bus, ready } = await adapter.fresh(t);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let slowStarted = false;
    const others = new Set<string>();
    bus.subscribe(
      'slow',
      async (_m, key) => {
        if (key === 'slow') {
          slowStarted = true;
          await gate;
        } else others.add(key);
      },
      { partitions: 8 },
    );
    try {
      await ready();
      await bus.publish('slow', 'slow', { v: 1 });
      await until(() => slowStarted, adapter.waitMs, 'the slow handler to start');
      const keys = keysOf(16, 'o');
      await Promise.all(keys.map((key) => bus.publish('slow', key, { v: 1 })));
      // Keys hashed to the slow key's partition wait behind it; with 8 partitions most do not.
      await until(() => others.size >= 8, adapter.waitMs, 'most other keys handled while the slow one runs');
      t.ok(others.size >= 8, `${others.size} of 16 other keys handled meanwhile`);
    } finally {
      release(); // else close() at teardown would wait for the held handler for ever
    }
    await until(() => others.size === 16, adapter.waitMs, 'every other key');
  });

  test('every message delivered exactly once across many keys', async (t) => {
    const { bus, ready } = await adapter.fresh(t);
    const keys = keysOf(40);
    const counts = new Map<string, number>();
    const ends = new Set<string>();
    bus.subscribe(
      'count',
      async (m, key) => {
        if (m.end) ends.add(key);
        else counts.set(`${key}:${String(m.n)}`, (counts.get(`${key}:${String(m.n)}`) ?? 0) + 1);
      },
      { partitions: 4 },
    );
    await ready();
    await publishAll(bus, 'count', keys, 10);
    // A last message per key: it comes after every earlier one of its key, redeliveries included,
    // so once all have arrived the counts are final.
    await Promise.all(keys.map((key) => bus.publish('count', key, { v: 1, end: true })));
    await until(() => ends.size === keys.length, adapter.waitMs, 'every end marker');
    t.equal(counts.size, 400, '400 distinct messages');
    t.strictSame([...counts.values()].filter((c) => c !== 1), [], 'each exactly once');
  });

  test('a handler that throws gets the same message again; later ones of its key wait', async (t) => {
    const errors: Array<{ err: unknown; topic: string; key: string | undefined }> = [];
    const { bus, ready } = await adapter.fresh(t, { retryDelayMs: 20, onError: (err, topic, key) => void errors.push({ err, topic, key }) });
    const got: number[] = [];
    const firsts: BusMessage[] = [];
    let fail = 2;
    bus.subscribe('retry', async (m, key) => {
      if (key !== 'k') return;
      if (m.n === 1) {
        firsts.push(m);
        if (fail-- > 0) throw new Error('database down');
      }
      got.push(m.n as number);
    });
    await ready();
    for (const n of [1, 2, 3]) await bus.publish('retry', 'k', { v: 1, n, items: [[n, `${n}@a.test`, 0]] });
    await until(() => got.length >= 3, adapter.waitMs, '3 deliveries');
    t.strictSame(got, [1, 2, 3], 'each handled once, in order, the failed one first');
    t.equal(firsts.length, 3, 'the failing message came three times');
    for (const m of firsts) t.strictSame(m, { v: 1, n: 1, items: [[1, '1@a.test', 0]] }, 'the same message each time');
    t.equal(errors.length, 2, 'both failures reported');
    t.strictSame(
      errors.map((e) => [(e.err as Error).message, e.topic, e.key]),
      [
        ['database down', 'retry', 'k'],
        ['database down', 'retry', 'k'],
      ],
      'with their topic and key',
    );
  });

  test('a message that fails every attempt is parked once, answered by the dead-letter handler, and its key goes on', async (t) => {
    const errors: string[] = [];
    const { bus, ready, parked } = await adapter.fresh(t, { retryDelayMs: 20, maxAttempts: 3, onError: (err) => void errors.push((err as Error).message) });
    const got: number[] = [];
    const tries = new Map<number, number>();
    const buried: Array<{ m: BusMessage; key: string; err: string }> = [];
    let answerFailures = 1;
    bus.subscribe(
      'poison',
      async (m) => {
        tries.set(m.n as number, (tries.get(m.n as number) ?? 0) + 1);
        if (m.n === 1) throw new Error('invalid byte sequence for encoding "UTF8": 0x00');
        got.push(m.n as number);
      },
      {
        deadLetter: async (m, key, err) => {
          // The answer's first try fails too (an outage): it is tried again, the message stays parked once.
          if (answerFailures-- > 0) throw new Error('store down');
          buried.push({ m, key, err: (err as Error).message });
        },
      },
    );
    await ready();
    for (const n of [0, 1, 2]) await bus.publish('poison', 'job-a', { v: 1, n, email: n === 1 ? 'a\u0000@x.test' : `${n}@x.test` });
    await until(() => got.length === 2 && buried.length === 1, adapter.waitMs, 'messages 0 and 2 handled and 1 answered');
    t.strictSame(got, [0, 2], 'the messages around the poison one handled, in order');
    t.equal(tries.get(1), 3, 'the poison message delivered maxAttempts times, no more');
    t.strictSame(buried, [{ m: { v: 1, n: 1, email: 'a\u0000@x.test' }, key: 'job-a', err: 'invalid byte sequence for encoding "UTF8": 0x00' }], 'answered once, with the message, its key and the last error');
    await until(() => parked().length >= 1, adapter.waitMs, 'the dead letter');
    const letters = parked().filter((l) => l.topic === 'poison');
    t.equal(letters.length, 1, 'parked once');
    t.strictSame(
      letters.map((l) => ({ ...l, message: JSON.parse(l.message) })),
      [{ topic: 'poison', key: 'job-a', message: { v: 1, n: 1, email: 'a\u0000@x.test' }, error: 'invalid byte sequence for encoding "UTF8": 0x00', attempts: 3 }],
    );
    const own = adapter.transient ? errors.filter((e) => !adapter.transient!.test(e)) : errors;
    t.strictSame(own, ['invalid byte sequence for encoding "UTF8": 0x00', 'invalid byte sequence for encoding "UTF8": 0x00', 'invalid byte sequence for encoding "UTF8": 0x00', 'store down'], 'each failure reported');
  });

  test('concurrency: up to k messages of one partition at once, all in one lane, each once', async (t) => {
    const { bus, ready } = await adapter.fresh(t);
    let now = 0;
    let most = 0;
    const done = new Map<string, number>();
    bus.subscribe(
      'window',
      async (m, key) => {
        most = Math.max(most, ++now);
        await sleep(m.n === 0 ? 150 : 20); // the first is slow: the later ones pass it
        now--;
        done.set(`${key}:${String(m.n)}`, (done.get(`${key}:${String(m.n)}`) ?? 0) + 1);
      },
      { partitions: 1, concurrency: 4 },
    );
    await ready();
    await publishAll(bus, 'window', ['host-a'], 24);
    await until(() => done.size >= 24, adapter.waitMs, '24 deliveries');
    t.equal(most, 4, 'one key, one partition: 4 of its messages at once, never more');
    t.strictSame(
      [...done.entries()].filter(([, c]) => c !== 1),
      [],
      'each handled exactly once',
    );
  });

  test('concurrency: a failed message is retried while the others of its partition go on', async (t) => {
    const errors: unknown[] = [];
    const { bus, ready } = await adapter.fresh(t, { retryDelayMs: 20, onError: (err) => void errors.push(err) });
    const ok = new Set<number>();
    let failures = 2;
    bus.subscribe(
      'window-retry',
      async (m) => {
        if (m.n === 3 && failures > 0) {
          failures--;
          throw new Error('smtp host down');
        }
        ok.add(m.n as number);
      },
      { partitions: 1, concurrency: 3 },
    );
    await ready();
    await publishAll(bus, 'window-retry', ['host-b'], 10);
    await until(() => ok.size === 10, adapter.waitMs, 'all 10 handled');
    t.strictSame([...ok].sort((a, b) => a - b), range(10), 'every message handled, the failed one too');
    t.equal(failures, 0, 'the failing message came back until it succeeded');
    t.strictSame(
      errors.map((e) => (e as Error).message),
      ['smtp host down', 'smtp host down'],
      'both failures reported',
    );
  });

  test('messages are copies: changing the published object afterwards changes nothing', async (t) => {
    const { bus, ready } = await adapter.fresh(t);
    const msg = { v: 1, items: [[0, 'a@b.test', 0]], meta: { tries: 1 } } as BusMessage & { items: unknown[][]; meta: { tries: number } };
    const sending = bus.publish('copy', 'k', msg);
    msg.items[0]![1] = 'changed-before-ack@b.test';
    await sending;
    msg.items.push([1, 'more@b.test', 0]);
    msg.meta.tries = 9;
    const got: BusMessage[] = [];
    bus.subscribe('copy', async (m) => void got.push(m));
    await ready();
    await until(() => got.length === 1, adapter.waitMs, 'the message');
    t.strictSame(got[0], { v: 1, items: [[0, 'a@b.test', 0]], meta: { tries: 1 } }, 'as it was when published');
    t.not(got[0], msg, 'not the publisher’s object');
  });

  test('a redelivered message is a fresh copy: what the failed handler changed is not seen', async (t) => {
    const { bus, ready } = await adapter.fresh(t, { retryDelayMs: 20 });
    const got: BusMessage[] = [];
    let failed = false;
    bus.subscribe('recopy', async (m) => {
      if (!failed) {
        failed = true;
        (m.items as unknown[][]).push(['half-done']);
        throw new Error('failed after changing its message');
      }
      got.push(m);
    });
    await ready();
    await bus.publish('recopy', 'k', { v: 1, items: [[0, 'a@b.test', 0]] });
    await until(() => got.length === 1, adapter.waitMs, 'the redelivery');
    t.strictSame(got[0], { v: 1, items: [[0, 'a@b.test', 0]] });
  });

  test('published before anyone subscribed, delivered once subscribed, in order', async (t) => {
    const { bus, ready } = await adapter.fresh(t);
    await publishAll(bus, 'early', ['a', 'b'], 5);
    const got: string[] = [];
    bus.subscribe('early', async (m, key) => void got.push(`${key}${String(m.n)}`), { partitions: 2 });
    await ready();
    await until(() => got.length >= 10, adapter.waitMs, '10 deliveries');
    t.strictSame(
      got.filter((s) => s.startsWith('a')),
      range(5).map((n) => `a${n}`),
    );
    t.strictSame(
      got.filter((s) => s.startsWith('b')),
      range(5).map((n) => `b${n}`),
    );
    t.equal(got.length, 10);
  });

  test('one subscriber per topic', async (t) => {
    const { bus } = await adapter.fresh(t);
    bus.subscribe('one', async () => {});
    t.throws(() => bus.subscribe('one', async () => {}), /subscriber already/);
  });

  test('close waits for the handler in progress, starts nothing more, then refuses publishes', async (t) => {
    const { bus, ready } = await adapter.fresh(t);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const started: number[] = [];
    const done: number[] = [];
    bus.subscribe('close', async (m) => {
      started.push(m.n as number);
      await gate;
      done.push(m.n as number);
    });
    await ready();
    await bus.publish('close', 'k', { v: 1, n: 1 });
    await bus.publish('close', 'k', { v: 1, n: 2 });
    await until(() => started.length === 1, adapter.waitMs, 'the first handler to start');
    let closed = false;
    const closing = bus.close().then(() => (closed = true));
    // A negative: give close() time it would need to finish if it did not wait (it must not).
    await Promise.race([closing, sleep(300)]);
    t.equal(closed, false, 'close() is still waiting for the handler');
    release();
    await closing;
    t.strictSame(done, [1], 'the handler in progress finished');
    t.strictSame(started, [1], 'the next message was not started');
    await t.rejects(bus.publish('close', 'k', { v: 1, n: 3 }), /closed/, 'a closed bus takes nothing');
  });
}
