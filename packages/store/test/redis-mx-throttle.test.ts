// RedisMxThrottle against a real Redis (127.0.0.1:6379 or REDIS_URL): the MxThrottle conformance
// suite (test/helpers/mx-throttle-conformance.ts, also run on MemoryMxThrottle), then what only a
// shared Redis adds (its stats, waking other instances, arrival order across them, the limit
// across processes, the permits of a process killed with -9). Every test has its own key prefix;
// the keys are deleted at teardown. CI_REQUIRE_SERVICES=1 makes a missing Redis a failure instead
// of a skip.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { createInterface } from 'node:readline';
import t from 'tap';
import { connectRedis } from '../src/index.ts';
import { RedisMxThrottle, type RedisMxThrottleOptions } from '../src/cache/redis-mx-throttle.ts';
import { mxThrottleConformance } from '../../../test/helpers/mx-throttle-conformance.ts';
import { redisClockPasses, track, until, within } from '../../../test/helpers/until.ts';

type TestT = Parameters<Parameters<typeof t.test>[0]>[0];

const ROOT = path.resolve(import.meta.dirname, '../../..');
const CHILD = path.join(import.meta.dirname, 'fixtures/mx-throttle-child.ts');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = connectRedis(url);
const up = await Promise.race([redis.ping().then(() => true, () => false), sleep(2000).then(() => false)]);

if (!up) {
  redis.disconnect();
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`Redis at ${url} is required (CI_REQUIRE_SERVICES=1) but did not answer`);
  else t.test('RedisMxThrottle', { skip: `Redis at ${url} did not answer` }, async () => {});
} else {
  const prefixes: string[] = [];
  t.teardown(async () => {
    for (const p of prefixes) {
      const keys = await redis.keys(`${p}*`);
      if (keys.length) await redis.del(...keys);
    }
    await redis.quit();
  });

  /** A fresh key prefix for one test, and a factory of throttles on it that close at the test's end. */
  function setup(t: TestT) {
    const keyPrefix = `svc-test-mx-${randomBytes(4).toString('hex')}:`;
    prefixes.push(keyPrefix);
    const made: RedisMxThrottle[] = [];
    t.teardown(async () => {
      await Promise.all(made.map((m) => m.close()));
    });
    const make = (o: Partial<RedisMxThrottleOptions> = {}) => {
      const m = new RedisMxThrottle({ redis, egressId: 'egress-a', max: 2, keyPrefix, ...o });
      made.push(m);
      return m;
    };
    return { keyPrefix, make };
  }

  mxThrottleConformance(t, (t) => {
    const { make } = setup(t as unknown as TestT);
    return {
      make: (max) => make({ max, pollMs: 60_000 }), // no poll: every hand-over is a release's or a message's doing
      active: (th, host) => th.active(host),
      waited: (th, n) => until(() => th.stats.waited >= n, 2000, `${n} acquire(s) wait`),
    };
  });

  t.test('stats count the grants and the waits', async (t) => {
    const { make } = setup(t as unknown as TestT);
    const th = make({ max: 2, pollMs: 60_000 });
    const r1 = await th.acquire('mx.a.test');
    const r2 = await th.acquire('mx.a.test');
    const third = th.acquire('mx.a.test');
    await until(() => th.stats.waited === 1, 2000, 'the third acquire waits');
    const t0 = performance.now();
    r1();
    const r3 = await within(third, 1000, 'the third gets the released permit');
    t.comment(`hand-over in one instance: ${(performance.now() - t0).toFixed(1)} ms`);
    r2();
    r3();
    await until(async () => (await th.active('mx.a.test')) === 0, 2000, 'all given back');
    t.same(th.stats, { granted: 3, waited: 1, leasesLost: 0, errors: 0 });
  });

  t.test('a release wakes a waiter of another instance by message, not by poll', async (t) => {
    const { keyPrefix, make } = setup(t as unknown as TestT);
    const a = make({ max: 1, pollMs: 60_000 });
    const b = make({ max: 1, pollMs: 60_000 });
    const ra = await a.acquire('mx.b.test');
    const wb = track(b.acquire('MX.B.test'));
    await until(() => b.stats.waited === 1, 2000, 'b waits');
    // b's subscription stands: Redis lists its channel (only b waits, so only b subscribes).
    await until(async () => (await redis.pubsub('CHANNELS', `${keyPrefix}*`)).length === 1, 2000, "b's subscription");
    t.notOk(wb.done(), 'b waits while a holds (host names are case-insensitive)');
    const t0 = performance.now();
    ra();
    const rb = await within(wb.p, 1000, 'b is woken');
    const ms = performance.now() - t0;
    t.comment(`hand-over across instances (pub/sub): ${ms.toFixed(1)} ms`);
    t.ok(ms < 500, 'well before any poll');
    rb();
  });

  t.test('egress ids are independent; the same egress id is one limit across instances', async (t) => {
    const { make } = setup(t as unknown as TestT);
    const a1 = make({ max: 1, egressId: 'egress-a' });
    const a2 = make({ max: 1, egressId: 'egress-a' });
    const b = make({ max: 1, egressId: 'egress-b' });
    const ra = await a1.acquire('mx.e.test');
    const rb = await within(b.acquire('mx.e.test'), 1000, 'another egress id has its own permits');
    const w = track(a2.acquire('mx.e.test'));
    await until(() => a2.stats.waited === 1, 2000, 'the same egress id waits');
    t.notOk(w.done());
    ra();
    (await within(w.p, 1000, 'the same egress id gets it back'))();
    rb();
  });

  t.test('permits go in arrival order across instances', async (t) => {
    const { make } = setup(t as unknown as TestT);
    const holder = make({ max: 1 });
    const ws = [make({ max: 1 }), make({ max: 1 }), make({ max: 1 })];
    let release = await holder.acquire('mx.f.test');
    const order: number[] = [];
    const pending: Promise<void>[] = [];
    for (const [i, w] of ws.entries()) {
      pending.push(
        w.acquire('mx.f.test').then((r) => {
          order.push(i);
          release = r;
        }),
      );
      await until(() => w.stats.waited === 1, 2000, `waiter ${i} is queued`);
    }
    for (let i = 0; i < ws.length; i++) {
      const before = order.length;
      release();
      await within(pending[i]!, 1000, `waiter ${i} is served`);
      t.equal(order.length, before + 1, 'one waiter per release');
    }
    t.same(order, [0, 1, 2]);
    release();
  });

  t.test('no waiter starves under steady load', async (t) => {
    const { make } = setup(t as unknown as TestT);
    const busy = make({ max: 2, pollMs: 50 });
    let stop = false;
    const loops = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const r = await busy.acquire('mx.g.test');
        await sleep(5); // the session's work: holds overlap, so the permits are contended
        r();
      }
    });
    await until(() => busy.stats.waited > 10, 2000, 'the load is contended');
    const late = make({ max: 2, pollMs: 50 });
    const t0 = performance.now();
    const r = await within(late.acquire('mx.g.test'), 2000, 'a late waiter is served');
    const ms = performance.now() - t0;
    t.comment(`late waiter behind 8 busy loops (max 2, 5 ms holds): ${ms.toFixed(1)} ms`);
    r();
    stop = true;
    await within(Promise.all(loops), 2000, 'the loops stop');
  });

  t.test('a lost message costs a poll, not the permit', async (t) => {
    const { make, keyPrefix } = setup(t as unknown as TestT);
    const a = make({ max: 1 });
    const b = make({ max: 1, pollMs: 100 });
    await a.acquire('mx.h.test');
    const w = track(b.acquire('mx.h.test'));
    await until(() => b.stats.waited === 1, 2000, 'b waits');
    // The permit disappears without a message (as if the message were lost).
    t.equal(await redis.del(`${keyPrefix}{egress-a|mx.h.test}:held`), 1);
    const t0 = performance.now();
    const rb = await within(w.p, 1000, 'b finds it by polling');
    t.comment(`found by poll (pollMs 100): ${(performance.now() - t0).toFixed(1)} ms`);
    rb();
  });

  t.test('close gives back permits, rejects waiters, and stops', async (t) => {
    const { make, keyPrefix } = setup(t as unknown as TestT);
    const a = make({ max: 1 });
    const b = make({ max: 1, pollMs: 60_000 });
    const c = make({ max: 1, pollMs: 60_000 });
    await a.acquire('mx.i.test');
    const wb = b.acquire('mx.i.test');
    const wc = track(c.acquire('mx.i.test'));
    await until(() => b.stats.waited === 1 && c.stats.waited === 1, 2000, 'b and c wait');
    const bRejected = t.rejects(wb, /closed/, "b's waiter is rejected");
    await b.close();
    await bRejected;
    await a.close();
    const rc = await within(wc.p, 1000, "c gets a's permit, as b withdrew");
    await t.rejects(a.acquire('mx.i.test'), /closed/, 'acquire after close');
    rc();
    await c.close();
    await until(async () => (await redis.zcard(`${keyPrefix}{egress-a|mx.i.test}:held`)) === 0, 2000, 'nothing held');
    t.equal(await redis.zcard(`${keyPrefix}{egress-a|mx.i.test}:queue`), 0, 'nobody queued');
  });

  t.test('a waiter whose signal is aborted is withdrawn from the queue and rejects; the next one is served in its place', async (t) => {
    const { make, keyPrefix } = setup(t as unknown as TestT);
    const a = make({ max: 1 });
    const b = make({ max: 1, pollMs: 60_000 });
    const c = make({ max: 1, pollMs: 60_000 });
    const ra = await a.acquire('mx.m.test');
    const ac = new AbortController();
    const wb = b.acquire('mx.m.test', ac.signal);
    await until(() => b.stats.waited === 1, 2000, 'b waits');
    const wc = track(c.acquire('mx.m.test'));
    await until(() => c.stats.waited === 1, 2000, 'c waits, behind b');
    const queue = `${keyPrefix}{egress-a|mx.m.test}:queue`;
    t.equal(await redis.zcard(queue), 2);
    const bRejected = t.rejects(within(wb, 1000, "b's acquire"), /cancelled/, "b's acquire rejects once its signal is aborted");
    ac.abort(new Error('the engine is closing'));
    await bRejected;
    await until(async () => (await redis.zcard(queue)) === 1, 2000, "b's place in the queue is withdrawn");
    ra();
    const rc = await within(wc.p, 1000, 'c gets the permit (b, ahead of it, is gone)');
    t.equal(await b.active('mx.m.test'), 1);
    rc();
    await until(async () => (await a.active('mx.m.test')) === 0, 2000, 'all given back');
    t.equal(await redis.zcard(queue), 0, 'nobody queued');
  });

  t.test('an acquire whose signal is aborted already never waits: a free permit is taken, none free rejects at once and leaves nothing queued', async (t) => {
    const { make, keyPrefix } = setup(t as unknown as TestT);
    const a = make({ max: 1 });
    const b = make({ max: 1, pollMs: 60_000 });
    const ac = new AbortController();
    ac.abort();
    const rb = await within(b.acquire('mx.n.test', ac.signal), 1000, 'a free permit');
    t.equal(await a.active('mx.n.test'), 1, 'taken');
    await t.rejects(within(a.acquire('mx.n.test', ac.signal), 1000, 'a refusal'), /cancelled/, 'none free: rejected, not queued');
    t.equal(await redis.zcard(`${keyPrefix}{egress-a|mx.n.test}:queue`), 0, 'nothing left in the queue');
    t.equal(a.stats.waited, 0);
    rb();
  });

  t.test('close() while an acquire is still asking Redis: its place in the queue (or its permit) is given back before close() returns', async (t) => {
    const { make, keyPrefix } = setup(t as unknown as TestT);
    const a = make({ max: 1 });
    await a.acquire('mx.o.test');
    for (let i = 0; i < 5; i++) {
      const b = make({ max: 1, pollMs: 60_000 });
      const wb = b.acquire('mx.o.test'); // its first script is out now
      const rejected = t.rejects(wb, /closed/, 'the acquire rejects');
      await b.close();
      t.equal(await redis.zcard(`${keyPrefix}{egress-a|mx.o.test}:queue`), 0, `nothing left queued (${i})`);
      t.equal(await redis.zcard(`${keyPrefix}{egress-a|mx.o.test}:qexp`), 0);
      await rejected;
    }
    t.equal(await a.active('mx.o.test'), 1, 'only a holds a permit');
  });

  t.test('uncontended acquire + release latency', async (t) => {
    const { make } = setup(t as unknown as TestT);
    const th = make({ max: 5 });
    for (let i = 0; i < 50; i++) (await th.acquire('mx.j.test'))(); // warm (script load)
    const n = 1000;
    const acq: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const a0 = performance.now();
      const r = await th.acquire('mx.j.test');
      acq.push(performance.now() - a0);
      r();
    }
    await redis.ping(); // the last release has landed
    const total = performance.now() - t0;
    acq.sort((x, y) => x - y);
    t.comment(`uncontended: acquire p50 ${acq[n / 2]!.toFixed(3)} ms, p99 ${acq[Math.floor(n * 0.99)]!.toFixed(3)} ms; acquire+release ${(total / n).toFixed(3)} ms each over ${n}`);
    t.ok(total / n < 20, 'well under a round trip to an MX');
  });

  function child(env: Record<string, string | number>): { proc: ChildProcess; lines: AsyncIterableIterator<string>; exit: Promise<number | null> } {
    const proc = spawn(process.execPath, ['--import', 'tsx', CHILD], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: url, ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exit = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
    return { proc, lines: createInterface({ input: proc.stdout! })[Symbol.asyncIterator](), exit };
  }

  t.test('three processes hammering one host never hold more than max', async (t) => {
    const { keyPrefix } = setup(t as unknown as TestT);
    const [LOOPS, ITER, MAX] = [4, 25, 5];
    const t0 = performance.now();
    const kids = Array.from({ length: 3 }, () => child({ MODE: 'hammer', PREFIX: keyPrefix, HOST: 'mx.k.test', MAX, LOOPS, ITER, HOLD_MS: 3 }));
    t.teardown(() => kids.forEach((k) => k.proc.exitCode === null && k.proc.kill('SIGKILL')));
    const results = await within(
      Promise.all(
        kids.map(async (k) => {
          const line = await k.lines.next();
          t.equal(await k.exit, 0, 'the child exits cleanly');
          return JSON.parse(line.value as string) as { acquired: number; ms: number };
        }),
      ),
      30_000,
      'the children finish',
    );
    const total = results.reduce((s, r) => s + r.acquired, 0);
    t.equal(total, 3 * LOOPS * ITER, 'every acquisition completed');
    const peak = Number(await redis.get(`${keyPrefix}peak`));
    const work = Math.max(...results.map((r) => r.ms));
    t.comment(`3 processes × ${LOOPS} loops × ${ITER} × 3 ms holds: peak ${peak} of max ${MAX}; loops ${work} ms (ideal ${(3 * LOOPS * ITER * 3) / MAX} ms), ${(performance.now() - t0).toFixed(0)} ms with process start`);
    t.ok(peak <= MAX, `never more than ${MAX} at once (peak ${peak})`);
    t.ok(peak >= 2, 'the processes did overlap');
    t.equal(Number(await redis.get(`${keyPrefix}cur`)), 0);
  });

  t.test('the permits of a process killed with -9 come back within leaseMs', async (t) => {
    const { keyPrefix, make } = setup(t as unknown as TestT);
    const LEASE = 1_000;
    const k = child({ MODE: 'hold', PREFIX: keyPrefix, HOST: 'mx.l.test', MAX: 3, HOLD: 3, LEASE_MS: LEASE });
    t.teardown(() => k.proc.exitCode === null && k.proc.kill('SIGKILL'));
    t.equal((await within(k.lines.next(), 15_000, 'the child holds its permits')).value, 'held');
    const th = make({ max: 3, leaseMs: LEASE, pollMs: 60_000 }); // no poll: woken at the lease's expiry
    t.equal(await th.active('mx.l.test'), 3, 'the child holds all three');
    const w = track(th.acquire('mx.l.test'));
    await until(() => th.stats.waited === 1, 2000, 'the parent waits');
    await redisClockPasses(redis, LEASE, 'a lease on Redis'); // a lease outlives its first expiry while the child's heartbeat runs
    t.notOk(w.done(), 'the live child keeps its permits past one lease');
    const t0 = performance.now();
    k.proc.kill('SIGKILL');
    await within(k.exit, 5000, 'the child dies');
    const r = await within(w.p, LEASE + 3000, 'the parent gets a permit');
    const ms = performance.now() - t0;
    t.comment(`permit back ${ms.toFixed(0)} ms after kill -9 (leaseMs ${LEASE})`);
    // The lease, plus the wake-up and what a loaded 2-core CI machine adds to timers and to the
    // child's exit (measured 855-962 ms when quiet; one CI run under load: past LEASE + 100).
    t.ok(ms <= LEASE + 1000, 'within leaseMs (plus the wake-up and scheduling)');
    r();
  });
}
