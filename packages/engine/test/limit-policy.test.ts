// The per-MX limit policy without sockets or timers: what a refused open means, how the session
// limit comes down and grows back, and what the host-level signs of a conversation change.

import t from 'tap';
import { parseReply } from '@svc/verifier';
import { LimitPolicy } from '../src/limit-policy.ts';
import { ENGINE_DEFAULTS, type EngineConfig, type EngineCounters } from '../src/types.ts';

const CONFIG: EngineConfig = { ...ENGINE_DEFAULTS, smtpPort: 25, heloName: 'v.test', mailFrom: 'p@v.test', maxConnectionsPerMx: 5 };
const counters = (): EngineCounters => ({ sessionsOpened: 0, transactions: 0, rcpts: 0, requeuedForCap: 0, requeuedForClosing: 0, throttled: 0, slowReplies: 0, closeIdleByCheck: 0 });
const banner = (text: string) => ({ phase: 'greeting' as const, kind: 'reply' as const, detail: 'server refused the session', reply: parseReply([text]) });
const REFUSED = { phase: 'connect' as const, kind: 'connection' as const, detail: 'ECONNREFUSED' };
const T0 = 1_000_000;

t.test('a refusal while our sessions are open is the per-client cap: wait, limit down to what was held', async (t) => {
  const p = new LimitPolicy(CONFIG, counters());
  p.opened(1);
  p.opened(2);
  t.strictSame(p.refused(banner('421 4.7.0 mx Error: too many connections from 192.0.2.1'), 2, false, T0), { action: 'wait' });
  t.equal(p.limit, 2);
  t.equal(p.capSeen, true, 'a banner naming the cap makes closing sessions count');
  t.equal(p.held(1, 0, 1), 2);
  p.grow(T0 + CONFIG.throttleCooldownMs - 1);
  t.equal(p.limit, 2, 'not before the cool-down');
  p.grow(T0 + CONFIG.throttleCooldownMs);
  t.equal(p.limit, 3, 'one more after it');
});

t.test('no session open: a banner 421 is asked again twice, then the host fails; a refused connection fails at once', async (t) => {
  const p = new LimitPolicy(CONFIG, counters());
  const busy = banner('421 4.3.2 Service not available');
  t.strictSame(p.refused(busy, 0, false, T0), { action: 'retry', delayMs: 200 });
  t.strictSame(p.refused(busy, 0, true, T0), { action: 'ignore' }, 'refusals of opens made together count once');
  t.strictSame(p.refused(busy, 0, false, T0), { action: 'retry', delayMs: 400 });
  t.strictSame(p.refused(busy, 0, false, T0), { action: 'fail' });
  t.strictSame(new LimitPolicy(CONFIG, counters()).refused(REFUSED, 0, false, T0), { action: 'fail' });
  const other = { phase: 'ehlo' as const, kind: 'timeout' as const, detail: 'no reply within 1000 ms' };
  t.strictSame(new LimitPolicy(CONFIG, counters()).refused(other, 3, false, T0), { action: 'fail' }, 'anything else fails the host');
});

t.test('right after our own sessions ended, or a banner naming the cap: waited out up to 8 times, back-off capped at 4 s', async (t) => {
  const p = new LimitPolicy(CONFIG, counters());
  p.sessionEnded(T0);
  const delays: number[] = [];
  for (let i = 0; i < 9; i++) {
    const d = p.refused(REFUSED, 0, false, T0 + 1_000);
    delays.push(d.action === 'retry' ? d.delayMs : -1);
  }
  t.strictSame(delays, [200, 400, 800, 1600, 3200, 4000, 4000, 4000, -1]);
  t.strictSame(p.refused(REFUSED, 0, false, T0 + 10_000), { action: 'fail' }, 'long after: a refusal fails the host');
});

t.test('host down, learnt budgets, rate signs', async (t) => {
  const c = counters();
  const p = new LimitPolicy(CONFIG, c);
  p.markDown(REFUSED, T0);
  t.strictSame(p.down(T0 + CONFIG.hostDownMs - 1), REFUSED);
  t.equal(p.down(T0 + CONFIG.hostDownMs), undefined);
  p.learn({ type: 'rcpt_cap', rcpts: 3 }, 1, T0);
  p.learn({ type: 'rcpt_cap', rcpts: 7 }, 1, T0);
  t.equal(p.budget.rcptsPerTransaction, 3, 'a cap only comes down');
  p.learn({ type: 'error_budget', errors: 3 }, 1, T0);
  p.learn({ type: 'error_budget', errors: 6 }, 1, T0);
  t.equal(p.budget.errors, 3);
  t.equal(c.slowReplies, 2);
  p.learn({ type: 'throttle', kind: 'rate' }, 1, T0);
  p.learn({ type: 'throttle', kind: 'rate' }, 1, T0);
  t.equal(p.limit, 3, 'one fewer per rate sign');
  t.equal(c.throttled, 2);
  p.opened(4);
  t.equal(p.limit, 4, 'a session opened past the limit raises it');
});
