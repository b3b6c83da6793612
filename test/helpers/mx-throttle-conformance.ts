// The MxThrottle port's conformance suite (the port is in packages/contracts/src/throttle.ts):
// one function run on every adapter, the engine's in-process MemoryMxThrottle and the store's
// RedisMxThrottle. Permits are keyed by mail server address (IPv4 or IPv6), as the engine asks. What only a shared Redis adds (other instances, other processes, leases) stays
// in the Redis adapter's own test file.

import type tap from 'tap';
import type { MxThrottle } from '@svc/contracts';
import { track, within } from './until.ts';

export type Tap = Parameters<Parameters<typeof tap.test>[0]>[0];

/** One adapter under test, fresh per test (the adapter closes what it made at the test's end). */
export interface MxThrottleTarget<T extends MxThrottle> {
  /** A new throttle of `max` permits per host; throws RangeError unless max is a positive integer. */
  make(max: number): T;
  /** The permits held for `host` now. */
  active(th: T, host: string): number | Promise<number>;
  /** Resolves once `n` acquires of `th` have been queued to wait, since it was made. */
  waited(th: T, n: number): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `host` has `n` permits held (a give-back may land after the call returns). */
async function activeIs<T extends MxThrottle>(a: MxThrottleTarget<T>, th: T, host: string, n: number): Promise<void> {
  const end = Date.now() + 2000;
  while ((await a.active(th, host)) !== n) {
    if (Date.now() > end) throw new Error(`${host}: ${n} permits held: not within 2000 ms`);
    await sleep(5);
  }
}

export function mxThrottleConformance<T extends MxThrottle>(t: Tap, fresh: (t: Tap) => MxThrottleTarget<T>): void {
  t.test('max must be a positive integer', async (t) => {
    const a = fresh(t);
    t.type(a.make(1).acquire, 'function');
    t.throws(() => a.make(0), RangeError);
  });

  t.test('at most max permits at once; a release hands one over', async (t) => {
    const a = fresh(t);
    const th = a.make(2);
    const r1 = await th.acquire('192.0.2.1');
    const r2 = await th.acquire('192.0.2.1');
    const third = track(th.acquire('192.0.2.1'));
    await a.waited(th, 1);
    t.equal(await a.active(th, '192.0.2.1'), 2, 'two held');
    t.notOk(third.done(), 'the third waits');
    r1();
    const r3 = await within(third.p, 1000, 'the third gets the released permit');
    t.equal(await a.active(th, '192.0.2.1'), 2, 'still two held');
    r2();
    r3();
    await activeIs(a, th, '192.0.2.1', 0);
  });

  t.test('release is idempotent', async (t) => {
    const a = fresh(t);
    const th = a.make(1);
    const ra = await th.acquire('192.0.2.3');
    const b = track(th.acquire('192.0.2.3'));
    const c = track(th.acquire('192.0.2.3'));
    await a.waited(th, 2);
    ra();
    ra();
    const rb = await within(b.p, 1000, 'b gets a permit');
    ra();
    await sleep(200); // c must not get one: nothing to wait for but time
    t.notOk(c.done(), 'a second release of the same permit frees nothing');
    t.equal(await a.active(th, '192.0.2.3'), 1);
    rb();
    const rc = await within(c.p, 1000, 'c gets the permit b gave back');
    rb();
    t.equal(await a.active(th, '192.0.2.3'), 1);
    rc();
    rc();
    await activeIs(a, th, '192.0.2.3', 0);
  });

  t.test('addresses are independent (IPv4 and IPv6 alike)', async (t) => {
    const a = fresh(t);
    const th = a.make(1);
    const r1 = await th.acquire('192.0.2.4');
    const r2 = await within(th.acquire('2001:db8::4'), 1000, 'another address has its own permits');
    t.equal(await a.active(th, '192.0.2.4'), 1);
    t.equal(await a.active(th, '2001:db8::4'), 1);
    r1();
    r2();
  });

  t.test('permits go in arrival order', async (t) => {
    const a = fresh(t);
    const th = a.make(1);
    let release = await th.acquire('192.0.2.6');
    const order: number[] = [];
    const pending: Promise<void>[] = [];
    for (let i = 0; i < 3; i++) {
      pending.push(
        th.acquire('192.0.2.6').then((r) => {
          order.push(i);
          release = r;
        }),
      );
      await a.waited(th, i + 1);
    }
    for (let i = 0; i < 3; i++) {
      const before = order.length;
      release();
      await within(pending[i]!, 1000, `waiter ${i} is served`);
      t.equal(order.length, before + 1, 'one waiter per release');
    }
    t.same(order, [0, 1, 2]);
    release();
  });

  t.test('once the signal is aborted a free permit is still taken, a wait is withdrawn and rejects', async (t) => {
    const a = fresh(t);
    const th = a.make(1);
    const ac = new AbortController();
    const r1 = await th.acquire('192.0.2.7', ac.signal);
    const waiting = th.acquire('192.0.2.7', ac.signal);
    await a.waited(th, 1);
    const after = th.acquire('192.0.2.7');
    await a.waited(th, 2);
    ac.abort(new Error('closing'));
    await t.rejects(within(waiting, 1000, 'the withdrawn wait'), /no session permit free for 192\.0\.2\.7, and the wait was cancelled: closing/);
    await t.rejects(within(th.acquire('192.0.2.7', ac.signal), 1000, 'a refusal'), /wait was cancelled/, 'none free: no wait once aborted');
    r1();
    const r3 = await within(after, 1000, 'the permit passes to the next waiter, not to the withdrawn one');
    t.equal(await a.active(th, '192.0.2.7'), 1);
    r3();
    await activeIs(a, th, '192.0.2.7', 0);
    (await within(th.acquire('192.0.2.7', ac.signal), 1000, 'a free permit, signal aborted'))();
  });
}
