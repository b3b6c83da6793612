// Per-MX connection throttle: a keyed counting semaphore.

import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { KeyedSemaphore } from '../src/throttle.ts';

const tick = () => new Promise<void>((r) => setImmediate(r));

t.test('rejects a max that is not a positive integer', async (t) => {
  for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
    t.throws(() => new KeyedSemaphore(bad), RangeError, String(bad));
  }
  t.equal(new KeyedSemaphore(3).max, 3);
});

t.test('never more than max holders per key, under random load', async (t) => {
  const sem = new KeyedSemaphore(3);
  let active = 0;
  let peak = 0;
  let done = 0;
  const worker = async (i: number) => {
    const release = await sem.acquire('mx.example.com');
    active++;
    peak = Math.max(peak, active);
    t.ok(sem.active('mx.example.com') <= 3);
    await sleep((i * 7) % 5);
    active--;
    release();
    done++;
  };
  await Promise.all(Array.from({ length: 40 }, (_, i) => worker(i)));
  t.equal(done, 40);
  t.equal(peak, 3, 'the limit is reached (not vacuous) and never passed');
  t.equal(sem.active('mx.example.com'), 0, 'every slot returned');
});

t.test('keys are independent', async (t) => {
  const sem = new KeyedSemaphore(1);
  const a = await sem.acquire('a');
  const b = await sem.acquire('b');
  t.equal(sem.active('a'), 1);
  t.equal(sem.active('b'), 1);
  let a2Got = false;
  const a2 = sem.acquire('a').then((r) => {
    a2Got = true;
    return r;
  });
  await tick();
  t.equal(a2Got, false, 'a second holder of "a" waits');
  // Releasing "b" does nothing for "a".
  b();
  await tick();
  t.equal(a2Got, false, 'releasing another key does not wake "a"');
  t.equal(sem.active('b'), 0);
  const c = await sem.acquire('c');
  t.equal(sem.active('c'), 1, 'a fresh key is not blocked by a full one');
  a();
  const a2r = await a2;
  t.equal(a2Got, true);
  t.equal(sem.active('a'), 1);
  a2r();
  c();
  t.equal(sem.active('a'), 0);
  t.equal(sem.active('c'), 0);
});

t.test('waiters are served first in, first out, and the slot is handed over', async (t) => {
  const sem = new KeyedSemaphore(1);
  const first = await sem.acquire('k');
  const order: number[] = [];
  const releases: Array<Promise<() => void>> = [];
  for (let i = 1; i <= 5; i++) {
    releases.push(
      sem.acquire('k').then((r) => {
        order.push(i);
        return r;
      }),
    );
  }
  await tick();
  t.strictSame(order, []);
  first();
  // Hand-over: the count never drops to 0 while someone waits, so a newcomer cannot jump the queue.
  t.equal(sem.active('k'), 1);
  let latecomer = false;
  const late = sem.acquire('k').then((r) => {
    latecomer = true;
    return r;
  });
  for (let i = 0; i < 5; i++) {
    const r = await releases[i]!;
    t.strictSame(order, [1, 2, 3, 4, 5].slice(0, i + 1));
    t.equal(latecomer, false, `the latecomer still waits behind waiter ${i + 1}`);
    t.equal(sem.active('k'), 1);
    r();
  }
  (await late)();
  t.equal(latecomer, true);
  t.equal(sem.active('k'), 0);
});

t.test('a double release is harmless', async (t) => {
  const sem = new KeyedSemaphore(2);
  const r1 = await sem.acquire('k');
  const r2 = await sem.acquire('k');
  t.equal(sem.active('k'), 2);
  r1();
  r1();
  r1();
  t.equal(sem.active('k'), 1, 'only one slot came back');
  const r3 = await sem.acquire('k');
  t.equal(sem.active('k'), 2);
  let waiting = true;
  const r4p = sem.acquire('k').then((r) => {
    waiting = false;
    return r;
  });
  await tick();
  t.equal(waiting, true, 'still full: the double release did not free a phantom slot');
  r2();
  const r4 = await r4p;
  t.equal(waiting, false);
  // Releasing twice while someone waits must not hand the slot over twice.
  let w5 = true;
  const r5p = sem.acquire('k').then((r) => {
    w5 = false;
    return r;
  });
  let w6 = true;
  const r6p = sem.acquire('k').then((r) => {
    w6 = false;
    return r;
  });
  r3();
  r3();
  await tick();
  t.equal(w5, false);
  t.equal(w6, true, 'the second release of r3 did not wake a second waiter');
  t.equal(sem.active('k'), 2);
  r4();
  (await r6p)();
  (await r5p)();
  t.equal(sem.active('k'), 0);
  r4();
  t.equal(sem.active('k'), 0, 'never goes negative');
});
