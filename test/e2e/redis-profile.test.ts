// REDIS_URL switches the cache and the rate limiter to Redis: the same API answers, the verdict
// cache and the counters live in Redis, and /ready checks Redis.

import t from 'tap';
import { Redis } from 'ioredis';
import { startStack } from '../helpers/stack.ts';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
redis.on('error', () => {});
const up = await redis.connect().then(() => true, () => false);
if (!up) {
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`Redis at ${url} is required (CI_REQUIRE_SERVICES=1)`);
  else t.plan(0, `Redis at ${url} did not answer`);
} else {
  t.teardown(() => redis.quit());
  // Keys of this run only (ioredis's keyPrefix from the URL): the rate-limit counters of
  // 127.0.0.1 and the bootstrap key would otherwise be shared with every other test on this Redis.
  const own = `rp${process.pid}x${Date.now().toString(36)}:`;
  const stack = await startStack({ env: { REDIS_URL: `${url}${url.includes('?') ? '&' : '?'}keyPrefix=${own}` } });
  t.teardown(() => stack.close());

  t.test('validation with the Redis cache and rate limiter', async (t) => {
    const local = `redis.${Date.now()}`;
    // Catch-all domain: every local part is accepted, so a fresh one is a fresh verdict.
    const email = `${local}@catchall.test`;
    const first = await stack.call('POST', '/v1/validate', { body: { email } });
    t.same([first.status, first.body.result, first.body.reason_code], [200, 'risky', 'catch_all']);
    t.ok(await redis.exists(`${own}svc:c:v:${email}`), 'the verdict is cached in Redis');
    t.ok(await redis.exists(`${own}svc:c:ca:catchall.test`), 'the catch-all verdict of the domain is cached in Redis');
    const rcptBefore = stack.sim.statsFor('catchall.test').rcpt;
    const again = await stack.call('POST', '/v1/validate', { body: { email } });
    t.equal(again.text.replace(/"email":"[^"]*"/, ''), first.text.replace(/"email":"[^"]*"/, ''), 'same verdict from the cache');
    t.equal(stack.sim.statsFor('catchall.test').rcpt, rcptBefore, 'no SMTP for a cached verdict');
    t.equal(again.headers.get('ratelimit-limit'), '1000');
    t.ok(Number(again.headers.get('ratelimit-remaining')) < 1000);
  });

  t.test('/ready checks Redis', async (t) => {
    await stack.svc.services.readiness.refresh();
    const r = await stack.call('GET', '/ready', { key: null });
    t.equal(r.status, 200);
    t.equal(r.body.checks.redis, 'ok');
  });
}
