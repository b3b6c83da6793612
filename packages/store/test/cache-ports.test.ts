// One conformance suite for the cache and rate-limit ports, run against the in-process adapters
// and against a real Redis (127.0.0.1:6379 or REDIS_URL). CI_REQUIRE_SERVICES=1 makes a missing
// Redis a failure instead of a skip.

import { randomBytes } from 'node:crypto';
import t from 'tap';
import type { CachePort } from '@svc/verifier';
import { connectRedis, MemoryCache, MemoryRateLimiter, RedisCache, RedisRateLimiter, type RateLimiterPort } from '../src/index.ts';
import { redisClockPasses } from '../../../test/helpers/until.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type TestT = Parameters<Parameters<typeof t.test>[0]>[0];

interface Adapters {
  cache: CachePort;
  limiter: RateLimiterPort;
  /**
   * Lets more than `ms` pass on the clock that expires the adapters' keys: the in-process
   * adapters' injected clock is moved forward; Redis expires keys on its own clock, so the wait
   * is for Redis's TIME to be more than `ms` past what it read at the call.
   */
  elapse(ms: number): Promise<void>;
}

/** Adapters on a clock of their own that moves only when the test says so. */
function inProcess(): Adapters {
  let now = 1_700_000_000_000;
  const clock = () => now;
  return {
    cache: new MemoryCache(undefined, clock),
    limiter: new MemoryRateLimiter(clock),
    elapse: async (ms) => void (now += ms + 1),
  };
}

function conformance(t: TestT, name: string, make: () => Adapters) {
  t.test(`${name}: cache`, async (t) => {
    const { cache, elapse } = make();
    t.equal(await cache.get('missing'), undefined);
    await cache.set('v:a@b.test', { result: 'valid', n: 1, flags: ['x'] }, 10_000);
    t.same(await cache.get('v:a@b.test'), { result: 'valid', n: 1, flags: ['x'] }, 'round-trips plain data');
    await cache.set('short', 1, 60);
    t.equal(await cache.get('short'), 1);
    await elapse(60);
    t.equal(await cache.get('short'), undefined, 'expires after its ttl');
    await cache.set('zero', 1, 0);
    t.equal(await cache.get('zero'), undefined, 'a zero ttl stores nothing');
    await cache.set('over', 1, 10_000);
    await cache.set('over', 2, 10_000);
    t.equal(await cache.get('over'), 2, 'set replaces');
    // A set that stores nothing leaves nothing, on both adapters (Redis kept the old value).
    await cache.set('gone', 1, 10_000);
    await cache.set('gone', 2, 0);
    t.equal(await cache.get('gone'), undefined, 'a zero ttl over an existing value removes it');
    await cache.set('gone2', 1, 10_000);
    await cache.set('gone2', undefined, 10_000);
    t.equal(await cache.get('gone2'), undefined, 'so does a value that serialises to nothing');
  });

  t.test(`${name}: cache hands out copies`, async (t) => {
    const { cache } = make();
    const stored = { result: 'valid', flags: ['implicit_mx'], smtp: { code: 250 } };
    const expected = { result: 'valid', flags: ['implicit_mx'], smtp: { code: 250 } };
    await cache.set('copy', stored, 10_000);
    stored.result = 'invalid';
    stored.flags.push('changed');
    stored.smtp.code = 550;
    t.strictSame(await cache.get('copy'), expected, 'mutating the object it stored changes nothing');
    const got = (await cache.get<typeof stored>('copy'))!;
    got.result = 'risky';
    got.flags.push('changed');
    got.smtp.code = 451;
    t.strictSame(await cache.get('copy'), expected, 'mutating an object it returned changes nothing');
    const [a, b] = [await cache.get('copy'), await cache.get('copy')];
    t.not(a, b, 'every get returns its own object');
    // What Redis does to a value (JSON), the in-process cache does too.
    await cache.set('json', { at: new Date(0), gone: undefined, n: 1 }, 10_000);
    t.strictSame(await cache.get('json'), { at: '1970-01-01T00:00:00.000Z', n: 1 }, 'a value comes back as JSON text would give it');
  });

  t.test(`${name}: rate limiter`, async (t) => {
    const { limiter, elapse } = make();
    const key = `k${randomBytes(4).toString('hex')}`;
    const first = await limiter.hit(key, 3, 60_000);
    t.same([first.allowed, first.limit, first.remaining], [true, 3, 2]);
    t.ok(first.resetSeconds >= 59 && first.resetSeconds <= 60);
    t.same((await limiter.hit(key, 3, 60_000)).remaining, 1);
    t.same((await limiter.hit(key, 3, 60_000)).allowed, true);
    const over = await limiter.hit(key, 3, 60_000);
    t.same([over.allowed, over.remaining, over.resetSeconds], [false, 0, 60], 'the crossing hit restarts the window: 60 s');
    t.equal((await limiter.hit(key, 3, 60_000)).allowed, false, 'still refused');
    t.equal((await limiter.hit(`${key}-other`, 3, 60_000)).allowed, true, 'keys are independent');
    const quick = `${key}-quick`;
    await limiter.hit(quick, 1, 100);
    t.equal((await limiter.hit(quick, 1, 100)).allowed, false);
    await elapse(100);
    t.equal((await limiter.hit(quick, 1, 100)).allowed, true, 'a new window after the old one ends');
    // Concurrent hits never let more than the limit through.
    const burstKey = `${key}-burst`;
    const results = await Promise.all(Array.from({ length: 200 }, () => limiter.hit(burstKey, 50, 60_000)));
    t.equal(results.filter((r) => r.allowed).length, 50);
  });
}

conformance(t as unknown as TestT, 'in-process', inProcess);

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const probe = connectRedis(url);
const up = await Promise.race([probe.ping().then(() => true, () => false), sleep(2000).then(() => false)]);
if (!up) {
  probe.disconnect();
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`Redis at ${url} is required (CI_REQUIRE_SERVICES=1) but did not answer`);
  else t.test("redis adapters", { skip: `Redis at ${url} did not answer` }, async () => {});
} else {
  const prefix = `svc-test-${randomBytes(4).toString('hex')}:`;
  t.teardown(async () => {
    const keys = await probe.keys(`${prefix}*`);
    if (keys.length) await probe.del(...keys);
    await probe.quit();
  });
  conformance(t as unknown as TestT, 'redis', () => ({
    cache: new RedisCache(probe, `${prefix}c:`),
    limiter: new RedisRateLimiter(probe, `${prefix}rl:`),
    elapse: (ms) => redisClockPasses(probe, ms, `Redis's clock ${ms} ms on`),
  }));
  t.test('redis: readiness ping', async (t) => {
    t.equal(await new RedisCache(probe, prefix).ping(), true);
  });
  t.test('redis: SVC_REDIS_KEY_PREFIX puts every key of a deployment under its prefix, script keys included', async (t) => {
    const a = connectRedis(url, `${prefix}deploy-a:`);
    const b = connectRedis(url, `${prefix}deploy-b:`);
    t.teardown(async () => {
      await a.quit();
      await b.quit();
    });
    await new RedisCache(a).set('verdict', { result: 'valid' }, 60_000);
    t.strictSame(await new RedisCache(b).get('verdict'), undefined, 'deployment b does not see a\'s cache');
    t.strictSame(await new RedisCache(a).get('verdict'), { result: 'valid' });
    const limitA = new RedisRateLimiter(a);
    const limitB = new RedisRateLimiter(b);
    t.equal((await limitA.hit('key-1', 1, 60_000)).allowed, true);
    t.equal((await limitA.hit('key-1', 1, 60_000)).allowed, false, 'a counts its own requests');
    t.equal((await limitB.hit('key-1', 1, 60_000)).allowed, true, 'b has counters of its own');
    const keys = (await probe.keys(`${prefix}deploy-*`)).sort();
    t.ok(keys.length >= 3 && keys.every((k) => k.startsWith(`${prefix}deploy-a:svc:`) || k.startsWith(`${prefix}deploy-b:svc:`)), `every key under a deployment's prefix: ${keys.join(', ')}`);
  });
}
