// The manual clock the engine tests run on: timers fire in time order (ties in the order set),
// promise callbacks run between them, and run() refuses to wait for what cannot come.

import t from 'tap';
import { ManualClock } from '../src/clock.ts';

t.test('advance fires the timers due, in order, with promise callbacks in between', async (t) => {
  const clock = new ManualClock(1000);
  const fired: string[] = [];
  clock.setTimeout(() => fired.push('b@20'), 20);
  clock.setTimeout(() => fired.push('a@10'), 10);
  clock.setTimeout(() => fired.push('c@20'), 20);
  const cleared = clock.setTimeout(() => fired.push('cleared'), 5);
  clock.clearTimeout(cleared);
  // A timer set by a promise callback of a fired timer still fires in the same advance.
  clock.setTimeout(() => void Promise.resolve().then(() => clock.setTimeout(() => fired.push('d@25'), 15)), 10);
  await clock.advance(25);
  t.strictSame(fired, ['a@10', 'b@20', 'c@20', 'd@25']);
  t.equal(clock.now(), 1025);
  t.equal(clock.monotonic(), 1025);
  t.equal(clock.pending, 0);
});

t.test('run: time jumps timer by timer until the promise settles, and no further', async (t) => {
  const clock = new ManualClock(0);
  clock.setTimeout(() => {}, 10_000);
  t.equal(await clock.run(clock.sleep(250).then(() => 'done')), 'done');
  t.equal(clock.now(), 250, 'stopped where it settled');
  await t.rejects(clock.run(new Promise(() => {}), 1_000), /not settled within 1000 ms of clock time/);
  const bare = new ManualClock(0);
  await t.rejects(bare.run(new Promise(() => {})), /no timer left to fire/);
});
