// The find/bulk endpoint's own rate (10,000 requests a minute per key, the data contract) through
// HTTP, in a service whose general limits are set far above it, so that the 429 is the endpoint's
// own and not the per-IP or per-key gate's. Each request is refused 400 after the rate gate (no
// contacts): the count is of requests, whatever their body.

import t from 'tap';
import { DATA_LIMITS } from '@svc/contracts';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';

const stack: Stack = await startStack({ env: { SVC_RATE_LIMIT_PER_IP: '10000000', SVC_RATE_LIMIT_PER_KEY: '10000000' } });
t.teardown(() => stack.close());

t.test('find/bulk: 10,000 requests a minute per key, then 429; another key and another endpoint are not held', async (t) => {
  const limit = DATA_LIMITS.findBulkPerMinute;
  t.equal(limit, 10_000);
  const { key, accountId } = await makeKey(stack, { credits: 10, scopes: null });
  await stack.store.accounts.setDataProduct(accountId, true);
  const statuses = new Map<string, number>();
  let next = 0;
  // 50 clients at once, each taking the next request until the limit is spent.
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < limit) {
        next++;
        const r = await stack.call('POST', '/v1/find/bulk', { key, body: {} });
        const k = `${r.status} ${r.body.code}`;
        statuses.set(k, (statuses.get(k) ?? 0) + 1);
      }
    }),
  );
  t.strictSame(Object.fromEntries(statuses), { '400 contacts_required': limit }, 'every request within the limit reaches the body check');
  const over = await stack.call('POST', '/v1/find/bulk', { key, body: {} });
  t.strictSame([over.status, over.body.code, over.body.retry_after, over.headers.get('retry-after'), over.headers.get('ratelimit-remaining')], [429, 'rate_limited', 60, '60', '0']);
  const single = await stack.call('POST', '/v1/company/enrich', { key, body: {} });
  t.strictSame([single.status, single.body.code], [400, 'domain_required'], 'another endpoint of the same key is not held');
  const other = await makeKey(stack, { credits: 10, scopes: null });
  await stack.store.accounts.setDataProduct(other.accountId, true);
  const fresh = await stack.call('POST', '/v1/find/bulk', { key: other.key, body: {} });
  t.strictSame([fresh.status, fresh.body.code], [400, 'contacts_required'], 'another key has its own count');
});
