// The limit policies without sockets or timers: per server address, what a refused open means
// and how the session limit comes down and grows back; per MX name, whether the host is down and
// what the host-level signs of a conversation change.

import t from 'tap';
import { parseReply } from '@svc/verifier';
import { BACKOFF_FIRST_MS, BACKOFF_MAX_MS, HostPolicy, LimitPolicy, SERVER_WIDE_BACKOFF_MAX_MS, SERVER_WIDE_COOLDOWN_MS, STREAK_GAP_MS } from '../src/limit-policy.ts';
import { ENGINE_DEFAULTS, type EngineConfig, type EngineCounters } from '../src/types.ts';

const CONFIG: EngineConfig = { ...ENGINE_DEFAULTS, smtpPort: 25, heloName: 'v.test', mailFrom: 'p@v.test', maxConnectionsPerMx: 5 };
const counters = (): EngineCounters => ({ sessionsOpened: 0, transactions: 0, rcpts: 0, requeuedForCap: 0, requeuedForClosing: 0, throttled: 0, slowReplies: 0, bannerRefusals: 0, slotWaits: 0, idleYields: 0, closeIdleByCheck: 0 });
const banner = (text: string) => ({ phase: 'greeting' as const, kind: 'reply' as const, detail: 'server refused the session', reply: parseReply([text]) });
const REFUSED = { phase: 'connect' as const, kind: 'connection' as const, detail: 'ECONNREFUSED' };
const NONE = { open: 0, closing: 0, opening: 0 };
const T0 = 1_000_000;

t.test('a refusal while our sessions hold the address is the per-client cap: wait, limit down to what the server counts', async (t) => {
  const p = new LimitPolicy(CONFIG, counters());
  p.opened(1);
  p.opened(2);
  t.strictSame(p.refused(banner('421 4.3.2 The maximum number of concurrent server connections has exceeded a limit'), { open: 1, closing: 1, opening: 0 }, T0), { action: 'wait' });
  t.equal(p.limit, 2, 'one open and one still closing: the server counts both');
  t.strictSame(p.refused(REFUSED, { open: 1, closing: 0, opening: 0 }, T0), { action: 'wait' }, 'a refused connection too');
  t.equal(p.limit, 1);
  p.grow(T0 + CONFIG.throttleCooldownMs - 1);
  t.equal(p.limit, 1, 'not before the cool-down');
  p.grow(T0 + CONFIG.throttleCooldownMs);
  t.equal(p.limit, 2, 'one more after it');
  const q = new LimitPolicy(CONFIG, counters());
  t.strictSame(q.refused(banner('421 4.7.0 mx Error: too many connections from 192.0.2.1'), { open: 0, closing: 0, opening: 3 }, T0), { action: 'wait' }, 'others of ours still opening: their outcome decides');
  t.equal(q.limit, 1);
  q.opened(2);
  t.equal(q.limit, 2, 'a session opened past the limit raises it');
});

t.test('a 421 at the banner with nothing of ours there: back-off doubling from 250 ms to 8 s, reset by an open; never a failure', async (t) => {
  const p = new LimitPolicy(CONFIG, counters());
  const busy = banner('421 4.3.2 Service not available');
  const delays: number[] = [];
  for (let i = 0; i < 8; i++) {
    const d = p.refused(busy, NONE, T0);
    delays.push(d.action === 'backoff' ? d.delayMs : -1);
  }
  t.strictSame(delays, [250, 500, 1000, 2000, 4000, 8000, 8000, 8000]);
  t.equal(BACKOFF_FIRST_MS, 250);
  t.equal(BACKOFF_MAX_MS, 8000);
  t.equal(p.limit, 5, 'the limit stays: nothing of ours was there to count');
  p.opened(1);
  t.strictSame(p.refused(busy, NONE, T0), { action: 'backoff', delayMs: 250 }, 'an open starts the back-off over');
  t.strictSame(p.refused(busy, NONE, T0 + STREAK_GAP_MS), { action: 'backoff', delayMs: 500 }, 'refusals in a row double it');
  t.strictSame(p.refused(busy, NONE, T0 + 2 * STREAK_GAP_MS + 1), { action: 'backoff', delayMs: 250 }, 'so does a refusal long after the last one');
});

t.test("Exim's daemon-wide cap (smtp_accept_max): a short cool-down and a back-off of at most 1 s; its per-client cap keeps the long ones", async (t) => {
  const wide = banner('421 mx.example Too many concurrent SMTP connections; please try again later.');
  const perClient = banner('421 mx.example Too many concurrent SMTP connections from this IP address; please try again later.');
  const p = new LimitPolicy(CONFIG, counters());
  p.opened(1);
  p.opened(2);
  t.strictSame(p.refused(wide, { open: 2, closing: 0, opening: 0 }, T0), { action: 'wait' });
  t.equal(p.limit, 2);
  t.equal(SERVER_WIDE_COOLDOWN_MS, 1_000);
  p.grow(T0 + SERVER_WIDE_COOLDOWN_MS - 1);
  t.equal(p.limit, 2, 'not before its cool-down');
  p.grow(T0 + SERVER_WIDE_COOLDOWN_MS);
  t.equal(p.limit, 3, 'a second later: one more');
  const q = new LimitPolicy(CONFIG, counters());
  q.opened(1);
  q.opened(2);
  t.strictSame(q.refused(perClient, { open: 2, closing: 0, opening: 0 }, T0), { action: 'wait' });
  q.grow(T0 + SERVER_WIDE_COOLDOWN_MS);
  t.equal(q.limit, 2, 'the per-client cap: the configured cool-down');
  q.grow(T0 + CONFIG.throttleCooldownMs);
  t.equal(q.limit, 3);
  const r = new LimitPolicy(CONFIG, counters());
  const delays: number[] = [];
  for (let i = 0; i < 5; i++) {
    const d = r.refused(wide, NONE, T0);
    delays.push(d.action === 'backoff' ? d.delayMs : -1);
  }
  t.equal(SERVER_WIDE_BACKOFF_MAX_MS, 1_000);
  t.strictSame(delays, [250, 500, 1000, 1000, 1000], 'nothing of ours there: tried again within a second');
  t.equal(r.limit, 5);
});

t.test('a refused connection with nothing of ours there: the next address; anything else fails the host', async (t) => {
  const p = new LimitPolicy(CONFIG, counters());
  t.strictSame(p.refused(REFUSED, NONE, T0), { action: 'next' });
  t.strictSame(p.refused({ phase: 'connect', kind: 'timeout', detail: 'no connection within 1000 ms' }, NONE, T0), { action: 'next' });
  t.strictSame(p.refused({ phase: 'ehlo', kind: 'timeout', detail: 'no reply within 1000 ms' }, { open: 3, closing: 0, opening: 0 }, T0), { action: 'fail' });
  t.strictSame(p.refused(banner('554 5.7.1 Service unavailable; client host blocked'), NONE, T0), { action: 'fail' });
});

t.test('rate signs lower the address limit by one each', async (t) => {
  const c = counters();
  const p = new LimitPolicy(CONFIG, c);
  p.learn('rate', 2, T0);
  p.learn('rate', 2, T0);
  t.equal(p.limit, 3);
  p.learn('connections', 2, T0);
  t.equal(p.limit, 2, 'too many connections: what we hold');
  t.equal(c.throttled, 3);
});

t.test('host down (per name), learnt budgets', async (t) => {
  const c = counters();
  const p = new HostPolicy(CONFIG, c);
  t.equal(p.trial, false);
  p.markDown(REFUSED, T0);
  t.strictSame(p.down(T0 + CONFIG.hostDownMs - 1), REFUSED);
  t.equal(p.down(T0 + CONFIG.hostDownMs), undefined);
  t.equal(p.downUntil, T0 + CONFIG.hostDownMs);
  t.equal(p.trial, true, 'after the window: one connection at a time');
  p.opened();
  t.equal(p.trial, false);
  p.learn({ type: 'rcpt_cap', rcpts: 3 });
  p.learn({ type: 'rcpt_cap', rcpts: 7 });
  t.equal(p.budget.rcptsPerTransaction, 3, 'a cap only comes down');
  p.learn({ type: 'error_budget', errors: 3 });
  p.learn({ type: 'error_budget', errors: 6 });
  t.equal(p.budget.errors, 3);
  t.equal(c.slowReplies, 2);
});
