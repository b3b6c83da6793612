// The provider chain: order, not-found hand-over, retries with back-off on retryable failures
// only, timeouts, the circuit breaker (open, half-open trial, closed again), and the verdicts
// when every provider failed or some said not found.

import t from 'tap';
import { CircuitBreaker, ProviderChain, ProviderError, type ProviderAnswer } from '../src/chain.ts';

interface P {
  name: string;
  answer: (n: number) => Promise<ProviderAnswer<string>>;
  calls: number;
}

const provider = (name: string, answer: (n: number) => Promise<ProviderAnswer<string>>): P => ({ name, answer, calls: 0 });
const call = (p: P) => p.answer(++p.calls);
const noSleep = async () => {};

t.test('the first found answer wins; not found hands over; the tried list names each provider asked', async (t) => {
  const a = provider('native', async () => ({ found: false, error: 'no website' }));
  const b = provider('pdl', async () => ({ found: true, value: 'Acme' }));
  const c = provider('other', async () => ({ found: true, value: 'never asked' }));
  const chain = new ProviderChain([a, b, c], { sleep: noSleep });
  t.strictSame(await chain.run(call), { found: true, value: 'Acme', provider: 'pdl', tried: ['native', 'pdl'] });
  t.equal(c.calls, 0);
});

t.test('all not found: not found with the first reason; an empty chain is not configured', async (t) => {
  const chain = new ProviderChain([provider('a', async () => ({ found: false, error: 'first' })), provider('b', async () => ({ found: false, error: 'second' }))], { sleep: noSleep });
  t.strictSame(await chain.run(call), { found: false, error: 'first', tried: ['a', 'b'], failures: [] });
  t.equal(new ProviderChain([]).configured, false);
  t.equal(chain.configured, true);
});

t.test('a retryable failure is retried with back-off (the hint wins when longer); a final one is not', async (t) => {
  const sleeps: number[] = [];
  const flaky = provider('flaky', async (n) => {
    if (n < 3) throw new ProviderError('HTTP 429', true, 700);
    return { found: true, value: 'third time' };
  });
  const chain = new ProviderChain([flaky], { attempts: 3, backoffMs: 100, maxBackoffMs: 2000, sleep: async (ms) => void sleeps.push(ms) });
  t.strictSame(await chain.run(call), { found: true, value: 'third time', provider: 'flaky', tried: ['flaky'] });
  t.strictSame(sleeps, [700, 700], 'the 429 hint (700 ms) is longer than 100 and 200 ms');
  const bad = provider('bad', async () => {
    throw new ProviderError('HTTP 401', false);
  });
  const c2 = new ProviderChain([bad], { attempts: 3, sleep: noSleep });
  t.strictSame(await c2.run(call), { failed: true, tried: ['bad'], errors: ['bad: HTTP 401'] });
  t.equal(bad.calls, 1, 'a final failure is not retried');
});

t.test('a provider that never answers loses at its timeout and the next is asked', async (t) => {
  const hang = provider('hang', () => new Promise(() => {}));
  const ok = provider('ok', async () => ({ found: true, value: 'v' }));
  const chain = new ProviderChain([hang, ok], { timeoutMs: 30, attempts: 1, sleep: noSleep });
  const t0 = performance.now();
  const r = await chain.run(call);
  t.strictSame(r, { found: true, value: 'v', provider: 'ok', tried: ['hang', 'ok'] });
  t.ok(performance.now() - t0 < 1000, 'well before any default timeout');
});

t.test('every provider failed: failed, with each error', async (t) => {
  const chain = new ProviderChain([provider('a', async () => Promise.reject(new ProviderError('HTTP 500', true))), provider('b', async () => Promise.reject(new ProviderError('HTTP 503', true)))], { attempts: 2, sleep: noSleep });
  t.strictSame(await chain.run(call), { failed: true, tried: ['a', 'b'], errors: ['a: HTTP 500', 'b: HTTP 503'] });
});

t.test('one failed and one not found: not found (a failure does not hide an answer), naming the failure', async (t) => {
  const chain = new ProviderChain([provider('a', async () => Promise.reject(new ProviderError('HTTP 500', false))), provider('b', async () => ({ found: false }))], { sleep: noSleep });
  t.strictSame(await chain.run(call), { found: false, tried: ['a', 'b'], failures: ['a: HTTP 500'] });
});

t.test("perProvider: a provider's own attempts and time cap, the others keep the chain's", async (t) => {
  const site = provider('native', async () => Promise.reject(new ProviderError('HTTP 503', true)));
  const vendor = provider('pdl', async (n) => {
    if (n < 3) throw new ProviderError('HTTP 500', true);
    return { found: true, value: 'from the vendor' };
  });
  const chain = new ProviderChain([site, vendor], { attempts: 3, perProvider: { native: { attempts: 1 } }, sleep: noSleep });
  t.strictSame(await chain.run(call), { found: true, value: 'from the vendor', provider: 'pdl', tried: ['native', 'pdl'] });
  t.strictSame([site.calls, vendor.calls], [1, 3], 'the site asked once, the vendor three times');
  const hang = provider('hang', () => new Promise(() => {}));
  const capped = new ProviderChain([hang], { timeoutMs: 60_000, attempts: 1, perProvider: { hang: { timeoutMs: 30 } }, sleep: noSleep });
  const t0 = performance.now();
  t.strictSame(await capped.run(call), { failed: true, tried: ['hang'], errors: ['hang: no answer within 30 ms'] });
  t.ok(performance.now() - t0 < 5_000, "the provider's own cap, not the chain's minute");
});

t.test('accepts: a refused find asks the next provider and is the fallback', async (t) => {
  const low = provider('low', async () => ({ found: true, value: 'weak' }));
  const none = provider('none', async () => ({ found: false }));
  const chain = new ProviderChain([low, none], { sleep: noSleep });
  t.strictSame(await chain.run(call, { accepts: (v) => v !== 'weak' }), { found: true, value: 'weak', provider: 'low', tried: ['low', 'none'] });
});

t.test('the circuit opens after failures in a row, lets one trial through after openMs, closes on success', async (t) => {
  let now = 0;
  const dead = provider('dead', async (n) => {
    if (n <= 3) throw new ProviderError('connection refused', false);
    return { found: true, value: 'back' };
  });
  const chain = new ProviderChain([dead], { attempts: 1, breaker: { failuresToOpen: 3, openMs: 1000 }, now: () => now, sleep: noSleep });
  for (let i = 0; i < 3; i++) await chain.run(call);
  t.equal(dead.calls, 3);
  t.equal(chain.breaker('dead')!.state, 'open');
  t.strictSame(await chain.run(call), { failed: true, tried: ['dead'], errors: ['dead: circuit open'] });
  t.equal(dead.calls, 3, 'an open circuit costs no call');
  now = 1000;
  t.equal(chain.breaker('dead')!.state, 'half_open');
  t.strictSame(await chain.run(call), { found: true, value: 'back', provider: 'dead', tried: ['dead'] });
  t.equal(chain.breaker('dead')!.state, 'closed');
});

t.test('CircuitBreaker: half-open lets exactly one trial out; its failure opens again', async (t) => {
  let now = 0;
  const b = new CircuitBreaker({ failuresToOpen: 2, openMs: 100, now: () => now });
  b.failure();
  t.equal(b.allow(), true);
  b.failure();
  t.equal(b.allow(), false);
  now = 100;
  t.equal(b.allow(), true, 'the trial');
  t.equal(b.allow(), false, 'no second call while the trial runs');
  b.failure();
  t.equal(b.state, 'open');
  t.equal(b.allow(), false);
  now = 200;
  t.equal(b.allow(), true);
  b.success();
  t.equal(b.state, 'closed');
  t.equal(b.allow(), true);
});
