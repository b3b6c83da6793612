// The in-process adapters of the Bus and Scheduler ports: ordering per key, parallelism across
// partitions, at-least-once delivery of a message whose handler threw, plain-data copies, and a
// scheduler that takes its wake-ups from durable work (so a restart loses nothing). Waits are on
// events with a timeout, never bare sleeps; the scheduler runs on a manual clock.

import t from 'tap';
import { ManualClock } from '@svc/engine';
import { fnv1a, InProcessBus, isKafkaWarmup, TimerScheduler, type BusMessage } from '../src/index.ts';
import { track, until } from '../../../test/helpers/until.ts';


t.test('fnv1a is stable', async (t) => {
  t.equal(fnv1a(''), 0x811c9dc5);
  t.equal(fnv1a('a'), 0xe40c292c);
  t.equal(fnv1a('accept.test'), fnv1a('accept.test'));
});

t.test('bus: messages of one key in order, one at a time; other keys in parallel', async (t) => {
  const bus = new InProcessBus();
  const seen: string[] = [];
  let running = 0;
  let most = 0;
  bus.subscribe(
    'topic',
    async (m) => {
      running++;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 2));
      seen.push(`${String(m.key)}:${String(m.n)}`);
      running--;
    },
    { partitions: 8 },
  );
  for (let n = 0; n < 20; n++) for (const key of ['a', 'b', 'c', 'd']) await bus.publish('topic', key, { v: 1, key, n });
  await until(() => seen.length === 80, 3000, 'seen.length === 80');
  for (const key of ['a', 'b', 'c', 'd']) {
    t.strictSame(seen.filter((s) => s.startsWith(`${key}:`)).map((s) => Number(s.split(':')[1])), Array.from({ length: 20 }, (_, i) => i), `${key} in order`);
  }
  t.ok(most > 1, `keys on different partitions ran together (${most} at once)`);
  t.equal(bus.pending('topic'), 0);
  await bus.close();
});

t.test('bus: a handler that throws gets the same message again; later ones wait', async (t) => {
  const errors: unknown[] = [];
  const bus = new InProcessBus({ retryDelayMs: 5, onError: (err) => errors.push(err) });
  const got: number[] = [];
  let fail = 2;
  bus.subscribe('t', async (m) => {
    if (m.n === 1 && fail-- > 0) throw new Error('database down');
    got.push(m.n as number);
  });
  for (const n of [1, 2, 3]) await bus.publish('t', 'k', { v: 1, n });
  await until(() => got.length === 3, 3000, 'got.length === 3');
  t.strictSame(got, [1, 2, 3], 'delivered once each, in order, after two failures');
  t.equal(errors.length, 2);
  await bus.close();
});

t.test('bus: published before a subscriber, delivered after; copies, not the publisher’s object', async (t) => {
  const bus = new InProcessBus();
  const msg = { v: 1, items: [[0, 'a@b.test', 0]] } as BusMessage & { items: unknown[][] };
  await bus.publish('t', 'k', msg);
  msg.items[0]![1] = 'changed@b.test';
  t.equal(bus.pending('t'), 1);
  const got: BusMessage[] = [];
  bus.subscribe('t', async (m) => void got.push(m));
  await until(() => got.length === 1, 3000, 'got.length === 1');
  t.strictSame(got[0], { v: 1, items: [[0, 'a@b.test', 0]] });
  await bus.close();
  await t.rejects(bus.publish('t', 'k', { v: 1 }), /closed/, 'a closed bus takes nothing');
});

t.test('bus: close waits for the handler in progress and drops the rest', async (t) => {
  const bus = new InProcessBus();
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const done: number[] = [];
  bus.subscribe('t', async (m) => {
    await gate;
    done.push(m.n as number);
  });
  await bus.publish('t', 'k', { v: 1, n: 1 });
  await bus.publish('t', 'k', { v: 1, n: 2 });
  const closing = bus.close();
  release();
  await closing;
  t.strictSame(done, [1], 'the first finished; the second was not started');
});

t.test('bus maxQueued: a full topic makes publishers wait (in turn), nothing is dropped or delivered twice', async (t) => {
  const bus = new InProcessBus();
  const got: number[] = [];
  let release!: () => void;
  let held = new Promise<void>((r) => (release = r));
  bus.subscribe(
    't',
    async (m) => {
      await held;
      got.push(m.n as number);
    },
    { maxQueued: 3 },
  );
  // Message 0 is in the handler's hands; 1-3 fill the queue; 4-7 must wait.
  const sends = Array.from({ length: 8 }, (_, n) => track(bus.publish('t', 'k', { v: 1, n })));
  await until(() => sends.slice(0, 4).every((s) => s.done()), 3000, 'the first four published');
  t.equal(bus.pending('t'), 4, 'one in hand, three queued');
  t.strictSame(sends.map((s) => s.done()), [true, true, true, true, false, false, false, false], 'the publishers beyond the bound wait');
  // Each message taken lets one waiting publisher in, first come first served.
  release();
  await until(() => got.length === 8, 3000, 'got.length === 8');
  t.strictSame(got, [0, 1, 2, 3, 4, 5, 6, 7], 'every message once, in publishing order');
  await Promise.all(sends.map((s) => s.p));
  t.equal(bus.pending('t'), 0);
  // A publisher still waiting when the bus closes is told so (its message was not taken).
  held = new Promise<void>((r) => (release = r));
  const more = Array.from({ length: 6 }, (_, n) => track(bus.publish('t', 'k', { v: 1, n: 10 + n })));
  await until(() => more.slice(0, 4).every((s) => s.done()), 3000, 'four more published');
  t.strictSame(more.map((s) => s.done()), [true, true, true, true, false, false]);
  const closing = bus.close();
  release();
  await closing;
  await t.rejects(more[4]!.p, /closed/);
  await t.rejects(more[5]!.p, /closed/);
});

t.test('bus maxQueued: a retried message goes back to its lane without waiting for a slot', async (t) => {
  const bus = new InProcessBus({ retryDelayMs: 5 });
  const got: number[] = [];
  let fail = 1;
  bus.subscribe(
    't',
    async (m) => {
      if (m.n === 0 && fail-- > 0) throw new Error('database down');
      got.push(m.n as number);
    },
    { maxQueued: 1 },
  );
  for (const n of [0, 1, 2]) await bus.publish('t', 'k', { v: 1, n });
  await until(() => got.length === 3, 3000, 'got.length === 3');
  t.strictSame(got, [0, 1, 2], 'the failed message once more, then the others, in order');
  await bus.close();
});

t.test('bus maxRunning: at most that many messages in hand across the partitions; the others wait their turn', async (t) => {
  const bus = new InProcessBus();
  let running = 0;
  let most = 0;
  const got: string[] = [];
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  bus.subscribe(
    't',
    async (m) => {
      running++;
      most = Math.max(most, running);
      await held;
      got.push(String(m.key));
      running--;
    },
    { partitions: 4, concurrency: 4, maxRunning: 3 },
  );
  const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
  for (const key of keys) await bus.publish('t', key, { v: 1, key });
  await until(() => running === 3, 3000, 'three in hand');
  t.equal(bus.pending('t'), 12, 'the rest wait, none lost');
  release();
  await until(() => got.length === 12, 3000, 'got.length === 12');
  t.equal(most, 3, 'never more than maxRunning at once (16 slots without it)');
  t.strictSame([...got].sort(), [...keys].sort(), 'each message once');
  await bus.close();
});

t.test('scheduler: wakes at the durable due time, and again for what is scheduled later', async (t) => {
  const clock = new ManualClock();
  const start = clock.now();
  let due: number[] = [start + 30];
  const ran: number[] = [];
  const s = new TimerScheduler(
    {
      nextDue: async () => (due.length ? new Date(Math.min(...due)) : undefined),
      runDue: async (now) => {
        ran.push(now.getTime());
        due = due.filter((d) => d > now.getTime());
      },
    },
    { now: () => clock.now(), timers: clock },
  );
  await s.start();
  await clock.advance(29);
  t.strictSame(ran, [], 'nothing before the due time');
  await clock.advance(1);
  t.strictSame(ran, [start + 30], 'the due item ran at its time');
  t.strictSame(due, []);
  due.push(clock.now() + 20);
  s.wake(new Date(due[0]!));
  await clock.advance(20);
  t.strictSame(ran, [start + 30, start + 50], 'the item scheduled later ran at its time');
  s.wake(new Date(clock.now() + 60_000));
  await s.stop();
  await clock.advance(120_000);
  t.strictSame(ran, [start + 30, start + 50], 'nothing runs after stop');
  t.equal(clock.pending, 0, 'no timer left armed');
});

t.test('scheduler: a failed run is tried again', async (t) => {
  const clock = new ManualClock();
  let calls = 0;
  const errors: unknown[] = [];
  const s = new TimerScheduler(
    {
      nextDue: async () => (calls < 2 ? new Date(clock.now()) : undefined),
      runDue: async () => {
        calls++;
        if (calls === 1) throw new Error('db down');
      },
    },
    { retryMs: 10, onError: (e) => errors.push(e), now: () => clock.now(), timers: clock },
  );
  await s.start();
  await clock.advance(0);
  t.equal(calls, 1, 'the due run, which fails');
  await clock.advance(9);
  t.equal(calls, 1, 'not tried again before retryMs');
  await clock.advance(1);
  t.equal(calls, 2, 'tried again after retryMs');
  t.equal(errors.length, 1);
  await s.stop();
});

t.test('bus lanes: one partition takes its lanes in turn, so a later job is not queued behind an earlier one', async (t) => {
  const bus = new InProcessBus();
  // Job A's 6 messages are queued (published before anyone consumes), then job B's 2, on one key.
  for (let n = 0; n < 6; n++) await bus.publish('lanes-x', 'host', { v: 1, job: 'A', n }, { lane: 'A' });
  const seen: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  bus.subscribe(
    'lanes-x',
    async (m) => {
      if (m.job === 'A' && m.n === 0) await gate; // A's first message is in hand while the rest queue
      seen.push(`${String(m.job)}${String(m.n)}`);
    },
    { partitions: 1 },
  );
  for (let n = 0; n < 2; n++) await bus.publish('lanes-x', 'host', { v: 1, job: 'B', n }, { lane: 'B' });
  release();
  await until(() => seen.length === 8, 3000, 'seen.length === 8');
  // A's lane went back into the ring when A0 was taken, B's joined behind it: A1, then in turn.
  t.strictSame(seen, ['A0', 'A1', 'B0', 'A2', 'B1', 'A3', 'A4', 'A5'], 'A and B in turn; each lane in its own order');
  await bus.close();
});

t.test('bus lanes: a failing message holds only its own lane (concurrency 1), then is dead-lettered; the other lanes go on', async (t) => {
  const parked: string[] = [];
  const bus = new InProcessBus({ retryDelayMs: 40, maxAttempts: 3, deadLetters: { park: async (l) => void parked.push(l.message) } });
  const seen: string[] = [];
  const answered: string[] = [];
  let tries = 0;
  bus.subscribe(
    'poison',
    async (m) => {
      if (m.job === 'A' && m.n === 0) {
        tries++;
        throw new Error('refused by the database');
      }
      seen.push(`${String(m.job)}${String(m.n)}`);
    },
    { partitions: 1, deadLetter: async (m) => void answered.push(`${String(m.job)}${String(m.n)}`) },
  );
  for (let n = 0; n < 3; n++) await bus.publish('poison', 'job-a', { v: 1, job: 'A', n });
  for (let n = 0; n < 3; n++) await bus.publish('poison', 'job-b', { v: 1, job: 'B', n });
  await until(() => seen.includes('B2'), 3000, "seen.includes('B2')");
  t.strictSame(
    seen.filter((s) => s.startsWith('A')),
    [],
    'while A0 is retried, A1 and A2 wait (its lane keeps its order)',
  );
  t.strictSame(seen, ['B0', 'B1', 'B2'], 'B, on the same partition, went on meanwhile');
  t.equal(bus.pending('poison') > 0, true, 'A is still pending');
  await until(() => seen.length === 5, 3000, 'seen.length === 5');
  t.equal(tries, 3, 'A0 delivered 3 times (maxAttempts)');
  t.strictSame(answered, ['A0'], 'then answered by the dead-letter handler');
  t.strictSame(parked, [JSON.stringify({ v: 1, job: 'A', n: 0 })], 'and parked once');
  t.strictSame(seen.slice(3), ['A1', 'A2'], 'and A went on in order');
  await until(() => bus.pending('poison') === 0, 3000, "bus.pending('poison') === 0");
  await bus.close();
});

t.test('isKafkaWarmup: a cluster still settling is told from a failure', async (t) => {
  const protocol = (type: string, message: string) => Object.assign(new Error(message), { name: 'KafkaJSProtocolError', type });
  const wrapped = (cause: Error) => Object.assign(new Error('Number of retries exceeded'), { name: 'KafkaJSNumberOfRetriesExceeded', cause });
  t.equal(isKafkaWarmup(protocol('UNKNOWN_TOPIC_OR_PARTITION', 'This server does not host this topic-partition')), true, 'a topic being created');
  t.equal(isKafkaWarmup(wrapped(protocol('LEADER_NOT_AVAILABLE', 'There is no leader for this topic-partition'))), true, 'a leader being elected, behind kafkajs’ retry wrapper');
  t.equal(isKafkaWarmup(protocol('REBALANCE_IN_PROGRESS', 'The group is rebalancing, so a rejoin is needed')), true, 'a rebalance');
  t.equal(isKafkaWarmup(protocol('TOPIC_AUTHORIZATION_FAILED', 'Not authorized to access topics')), false, 'a refusal is not');
  t.equal(isKafkaWarmup(new Error('connect ECONNREFUSED 127.0.0.1:9092')), false, 'a broker out of reach is not');
  t.equal(isKafkaWarmup(undefined), false);
});

t.test('bus groups: a partition takes its groups (accounts) in turn, then their lanes (jobs) in turn', async (t) => {
  const bus = new InProcessBus();
  const publish = async (account: string, job: string, n: number) => {
    for (let i = 0; i < n; i++) await bus.publish('fair', 'host', { v: 1, m: `${job}-${i}` }, { lane: job, group: account });
  };
  // Account A has two jobs of four messages, account B one of two, all queued on one key.
  await publish('A', 'A1', 4);
  await publish('A', 'A2', 4);
  await publish('B', 'B1', 2);
  const seen: string[] = [];
  bus.subscribe('fair', async (m) => void seen.push(String(m.m)), { partitions: 1 });
  await until(() => seen.length === 10, 3000, 'seen.length === 10');
  // (The queued messages are handed over one by one at subscribe: A1-0 starts before the rest are
  // there, A1-1 is next in the ring by then.) Then B's one job is not queued behind A's two: the
  // accounts alternate, and A's jobs alternate within A's turns.
  t.strictSame(seen, ['A1-0', 'A1-1', 'B1-0', 'A2-0', 'B1-1', 'A1-2', 'A2-1', 'A1-3', 'A2-2', 'A2-3']);
  await bus.close();
});
