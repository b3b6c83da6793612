// The engine over a scripted SMTP connector: sessions shared by every domain of an MX host,
// pipelined rounds in one transaction, error budgets, recipient caps, connection caps, 421,
// catch-all probes, greylisting retries, failover, deadlines and close(). Time is a ManualClock:
// the tests move it forward (run, advance), nothing sleeps.

import t, { type Test } from 'tap';
import type { MxHost, ProbeOutcome } from '@svc/verifier';
import { ManualClock } from '../src/clock.ts';
import { Engine } from '../src/engine.ts';
import type { EngineConfig } from '../src/types.ts';
import { FakeDns, FakeSmtp, MemoryCache, PROBE_PREFIX, probeLocals, reply, testConfig, type FakeServer } from './fakes.ts';

const CONFIG: EngineConfig = testConfig({ maxConnectionsPerMx: 2, idleMs: 0 });

const ADDRESSES: Record<string, string[]> = {
  'mx1.alpha.test': ['192.0.2.1'],
  'mx2.alpha.test': ['192.0.2.2', '2001:db8::2'],
  'mx.shared.test': ['192.0.2.9'],
};
const SHARED: MxHost[] = [{ exchange: 'mx.shared.test', priority: 10 }];
const ALPHA2: MxHost[] = [
  { exchange: 'mx1.alpha.test', priority: 10 },
  { exchange: 'mx2.alpha.test', priority: 20 },
];

/** The part of a tap test the helpers need. */
type T = Pick<Test, 'ok' | 'equal'>;

/** What every engine test gets: the fakes, the engine on a ManualClock, and ways to wait on that clock. */
function harness(clock: ManualClock, smtp: FakeSmtp, engine: Engine) {
  return {
    /** Runs the clock until every promise settles. */
    all: <V>(ps: Promise<V>[]) => clock.run(Promise.all(ps)),
    /**
     * close(), with the clock run until it returns (never past `limitMs` of clock time: a close
     * that waits for nothing fails the test); the engine is then idle, and every session ends.
     */
    closed: async (t: T, limitMs = 60_000) => {
      await clock.run(engine.close(), limitMs);
      t.ok(engine.idle, 'closed: the engine is idle');
      t.equal(engine.counters.closeIdleByCheck, 0, 'closed: told by its actors, not found by its own check');
      // close() does not wait for the QUITs' replies: a second later every line is closed.
      await clock.advance(1_000);
      t.equal(smtp.activeTotal, 0, 'closed: every session ended');
    },
  };
}

function setup(servers: Record<string, FakeServer>, config: Partial<EngineConfig> = {}) {
  const clock = new ManualClock();
  const smtp = new FakeSmtp(servers, clock);
  const dns = new FakeDns(ADDRESSES);
  const cache = new MemoryCache();
  // close()'s own periodic idle check out of reach: every test sees the actors' reports alone.
  const engine = new Engine({ dns, smtp, cache, clock, config: { ...CONFIG, ...config }, randomLocal: probeLocals(), closeCheckMs: 600_000 });
  const check = (domain: string, local: string, o: { hosts?: MxHost[]; retries?: number; utf8?: boolean; deadlineMs?: number } = {}) =>
    engine.check({ domain, hosts: o.hosts ?? SHARED, local, utf8: o.utf8 ?? false, retries: o.retries ?? 0, ...(o.deadlineMs !== undefined ? { deadlineMs: o.deadlineMs } : {}) });
  /** One check, the clock run until it is answered. */
  const one = (...args: Parameters<typeof check>) => clock.run(check(...args));
  return { clock, smtp, dns, cache, engine, check, one, ...harness(clock, smtp, engine) };
}

const UNKNOWN = reply('550 5.1.1 <x>: Recipient address rejected: User unknown in virtual mailbox table');
const answer = (o: ProbeOutcome) => {
  if (o.kind !== 'answer') throw new Error(`expected an answer, got ${JSON.stringify(o)}`);
  return o;
};
const classes = (os: ProbeOutcome[]) => os.map((o) => (o.kind === 'answer' ? o.cls : o.kind === 'failure' ? `failure:${o.failure.kind}` : o.kind));

t.test('three domains on one MX host share its sessions: one transaction each, pipelined, no RSET', async (t) => {
  const { smtp, engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': {} });
  const domains = ['a.test', 'b.test', 'c.test'];
  const outcomes = await all(domains.flatMap((d) => Array.from({ length: 20 }, (_, i) => check(d, `u${i}`))));
  t.strictSame(new Set(classes(outcomes)), new Set(['accepted']));
  t.ok(outcomes.every((o) => answer(o).catchall?.catchall === false), 'every answer carries its domain catch-all evidence');
  t.ok(smtp.sessions.length <= 2, `at most the MX limit of sessions (${smtp.sessions.length})`);
  t.equal(smtp.peak.get('mx.shared.test'), smtp.sessions.length <= 2 ? smtp.peak.get('mx.shared.test') : -1);
  t.ok((smtp.peak.get('mx.shared.test') ?? 0) <= 2);
  t.equal(smtp.count('MAIL'), smtp.sessions.length, 'one MAIL transaction per session');
  t.equal(smtp.count('RSET'), 0, 'no RSET: later rounds join the open transaction');
  const probes = smtp.rcpts().filter((c) => c.local?.startsWith(PROBE_PREFIX));
  t.strictSame(probes.map((c) => c.domain).sort(), domains, 'one catch-all probe per domain');
  t.equal(smtp.rcpts().length, 63);
  // Sessions served more than one domain each.
  const domainsPerSession = smtp.sessions.map((s) => new Set(s.commands.filter((c) => c.domain).map((c) => c.domain)).size);
  t.ok(domainsPerSession.some((n) => n > 1), `a session served several domains (${domainsPerSession})`);
  t.ok(smtp.sessions.every((s) => s.pipelined[0]! >= 2 && s.commands[0]!.verb === 'MAIL'), 'MAIL FROM goes out with the first RCPT batch');
  await closed(t);
  t.equal(smtp.activeTotal, 0, 'every session ended');
});

t.test('rejections stay below the error budget: sessions retire before the soft limit', async (t) => {
  const { smtp, engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': { handle: (c) => (c.verb === 'RCPT' && c.local?.startsWith('nobody') ? UNKNOWN : undefined) } }, { maxConnectionsPerMx: 1, errorBudget: 9 });
  const locals = [...Array.from({ length: 30 }, (_, i) => `nobody${i}`), ...Array.from({ length: 10 }, (_, i) => `real${i}`)];
  const outcomes = await all(locals.map((l) => check('a.test', l)));
  t.strictSame(classes(outcomes), [...Array(30).fill('rejected'), ...Array(10).fill('accepted')]);
  for (const s of smtp.sessions) {
    const rejected = s.commands.filter((c) => c.verb === 'RCPT' && (c.local?.startsWith('nobody') || c.local?.startsWith(PROBE_PREFIX))).length;
    t.ok(rejected <= 9, `session ${s.id}: ${rejected} rejections`);
  }
  t.equal(smtp.sessions.length, 4, '31 rejections (with the probe) need 4 sessions of 9');
  await closed(t);
});

t.test('replies a second late after N rejections lower the budget for the host', async (t) => {
  // A server whose soft error limit is 4: every reply after the 4th error sleeps.
  const errors = new Map<number, number>();
  const { smtp, engine, check, all, one, closed, clock } = setup(
    {
      'mx.shared.test': {
        delay: (c, s) => ((errors.get(s.id) ?? 0) >= 4 ? 900 : 0),
        handle: (c, s) => {
          if (c.verb === 'RCPT' && (c.local?.startsWith('nobody') || c.local?.startsWith(PROBE_PREFIX))) {
            errors.set(s.id, (errors.get(s.id) ?? 0) + 1);
            return UNKNOWN;
          }
          return undefined;
        },
      },
    },
    { maxConnectionsPerMx: 1, pipelineDepth: 1 },
  );
  const outcomes = await all(Array.from({ length: 16 }, (_, i) => check('a.test', `nobody${i}`)));
  t.strictSame(new Set(classes(outcomes)), new Set(['rejected']));
  t.equal(engine.mxState('mx.shared.test')?.budget.errors, 3, 'learnt: stay at 3 rejections per session');
  t.ok(engine.counters.slowReplies >= 1);
  const later = smtp.sessions.slice(1);
  t.ok(later.length >= 3);
  for (const s of later) t.ok((errors.get(s.id) ?? 0) <= 3, `session ${s.id} kept below the limit (${errors.get(s.id)})`);
  await closed(t);
});

for (const capReply of ['452 4.5.3 Error: too many recipients', '451 4.5.3 Too many recipients, try again later']) {
  t.test(`a recipient cap (${capReply.slice(0, 9)}) continues in a new transaction, never costs a verdict`, async (t) => {
    const { smtp, engine, check, all, one, closed, clock } = setup(
      {
        'mx.shared.test': {
          handle: (c, s) => {
            if (c.verb !== 'RCPT') return undefined;
            // Like Postfix's smtpd_recipient_limit: recipients accepted since the last MAIL (the probe is rejected).
            const sinceMail = s.commands.slice(s.commands.map((x) => x.verb).lastIndexOf('MAIL') + 1).filter((x) => x.verb === 'RCPT' && !x.local?.startsWith(PROBE_PREFIX)).length;
            if (sinceMail > 3 && !c.local?.startsWith(PROBE_PREFIX)) return reply(capReply);
            return c.local?.startsWith(PROBE_PREFIX) ? UNKNOWN : undefined;
          },
        },
      },
      { maxConnectionsPerMx: 1 },
    );
    const outcomes = await all(Array.from({ length: 20 }, (_, i) => check('a.test', `u${i}`)));
    t.strictSame(new Set(classes(outcomes)), new Set(['accepted']));
    t.ok(outcomes.every((o) => answer(o).attempts === 1), 'no attempt counted for a cap');
    t.equal(engine.mxState('mx.shared.test')?.budget.rcptsPerTransaction, 3, 'cap learnt');
    t.ok(smtp.count('RSET') >= 6, 'RSET + MAIL between transactions');
    t.ok(engine.counters.requeuedForCap >= 1);
    await closed(t);
  });
}

t.test('a per-client connection cap (421 at the banner) lowers the session limit; nobody gets unknown', async (t) => {
  const { smtp, engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': { maxSessions: 2, latencyMs: 5 } }, { maxConnectionsPerMx: 5 });
  // Enough recipients that the engine wants all 5 sessions (open-policy.ts: more than 4 sessions' error budgets absorb).
  const outcomes = await all(Array.from({ length: 200 }, (_, i) => check(`d${i % 6}.test`, `u${i}`)));
  t.strictSame(new Set(classes(outcomes)), new Set(['accepted']));
  t.ok(smtp.refusedAtBanner >= 1, 'the server refused some connections');
  t.equal(engine.mxState('mx.shared.test')?.limit, 2, `the limit came down to what the server allows (${JSON.stringify(engine.mxState('mx.shared.test'))}, peak ${smtp.peak.get('mx.shared.test')})`);
  t.ok((smtp.peak.get('mx.shared.test') ?? 0) <= 2);
  await closed(t);
});

t.test('two opens waiting at an address whose limit came down: the slot freed later still opens a session for their recipients', async (t) => {
  // Two MX names on one address that takes one connection per client; two sessions allowed at
  // first. mx.b.test's recipients take both slots; mx.a.test's arrive meanwhile, and its two opens
  // wait at the address. B's second open is refused at the banner (421): the limit comes down to
  // 1. When B's session ends, the gate asks A's waiting opens in turn whether each is still
  // wanted, and each counted the other as held: both were refused, and nothing ever opened a
  // session for A's queue (a job's recipients have no deadline: "not settled, and no timer left").
  const clock = new ManualClock();
  const addresses = { 'mx.a.test': ['192.0.2.30'], 'mx.b.test': ['192.0.2.30'] };
  const smtp = new FakeSmtp({ 'mx.a.test': { latencyMs: 20 }, 'mx.b.test': { latencyMs: 20 } }, clock, { '192.0.2.30': { maxSessions: 1 } });
  const engine = new Engine({ dns: new FakeDns(addresses), smtp, cache: new MemoryCache(), clock, config: { ...CONFIG, maxConnectionsPerMx: 2 }, randomLocal: probeLocals(), closeCheckMs: 600_000 });
  const { closed } = harness(clock, smtp, engine);
  const check = (host: string, domain: string, local: string) => engine.check({ domain, hosts: [{ exchange: host, priority: 10 }], local, utf8: false, retries: 0 });
  // 40 recipients each: enough that each host wants two sessions (open-policy.ts).
  const b = Array.from({ length: 40 }, (_, i) => check('mx.b.test', 'b.test', `u${i}`));
  await clock.advance(5);
  const a = Array.from({ length: 40 }, (_, i) => check('mx.a.test', 'a.test', `u${i}`));
  const outcomes = await clock.run(Promise.all([...b, ...a]));
  t.strictSame(classes(outcomes), Array(80).fill('accepted'));
  t.equal(smtp.refusedAtBanner, 1, "B's second open was refused at the banner");
  t.equal(engine.mxState('mx.a.test')?.limit, 1, 'the limit of the address came down to 1');
  t.equal(smtp.peakByIp.get('192.0.2.30'), 1, 'never more than the one connection the address allows');
  t.equal(smtp.sessions.filter((s) => s.server === 'mx.a.test').length, 1, "one session took A's 40 recipients");
  await closed(t);
});

t.test('421 in the middle of a round: the unanswered recipients go to a new session without an attempt', async (t) => {
  const { smtp, engine, check, all, one, closed, clock } = setup({
    'mx.shared.test': {
      handle: (c, s) => {
        if (c.verb !== 'RCPT') return undefined;
        if (s.commands.filter((x) => x.verb === 'RCPT').length > 5) return reply('421 4.4.2 mx Error: timeout exceeded');
        return c.local?.startsWith(PROBE_PREFIX) ? UNKNOWN : undefined;
      },
    },
  });
  const outcomes = await all(Array.from({ length: 30 }, (_, i) => check('a.test', `u${i}`)));
  t.strictSame(new Set(classes(outcomes)), new Set(['accepted']));
  t.ok(outcomes.every((o) => answer(o).attempts === 1));
  t.ok(smtp.sessions.length >= 6);
  await closed(t);
});

t.test('the catch-all probe: accepted means catch-all evidence on every answer, cached once', async (t) => {
  const { smtp, engine, check, cache, all, one, closed, clock } = setup({ 'mx.shared.test': { catchAll: true } });
  const outcomes = await all(Array.from({ length: 5 }, (_, i) => check('ca.test', `u${i}`)));
  t.ok(outcomes.every((o) => answer(o).catchall?.catchall === true && answer(o).catchall?.mxIndex === 0));
  t.strictSame(cache.sets.map((s) => [s.key, s.value]), [['ca:ca.test', { catchall: true, mxIndex: 0 }]]);
  const again = await one('ca.test', 'later');
  t.equal(answer(again).catchall?.catchall, true);
  t.equal(smtp.rcpts().filter((c) => c.local?.startsWith(PROBE_PREFIX)).length, 1, 'one probe per TTL');
  await closed(t);
});

t.test('failover: MX0 refuses connections, MX1 answers; the host is skipped for a while', async (t) => {
  const { smtp, engine, check, all, one, closed, clock } = setup({ 'mx1.alpha.test': { refuseIps: ['192.0.2.1'] }, 'mx2.alpha.test': {} });
  const o = await one('alpha.test', 'jane', { hosts: ALPHA2 });
  t.equal(answer(o).mxIndex, 1);
  t.equal(answer(o).cls, 'accepted');
  const opensBefore = smtp.opens.filter((x) => x.servername === 'mx1.alpha.test').length;
  const o2 = await one('alpha.test', 'john', { hosts: ALPHA2 });
  t.equal(answer(o2).mxIndex, 1);
  t.equal(smtp.opens.filter((x) => x.servername === 'mx1.alpha.test').length, opensBefore, 'a down host is not asked again at once');
  await closed(t);
});

t.test('every MX fails: the recipient gets the last failure', async (t) => {
  const { engine, check, all, one, closed, clock } = setup({});
  const o = await one('alpha.test', 'jane', { hosts: ALPHA2 });
  t.equal(o.kind, 'failure');
  if (o.kind === 'failure') t.strictSame([o.failure.phase, o.failure.kind, o.failure.detail], ['connect', 'connection', 'ECONNREFUSED']);
  await closed(t);
});

t.test('greylisting: a sync retry goes to a new session and is accepted', async (t) => {
  const seen = new Set<string>();
  const { smtp, engine, check, all, one, closed, clock } = setup({
    'mx.shared.test': {
      handle: (c) => {
        if (c.verb !== 'RCPT') return undefined;
        const key = `${c.local}@${c.domain}`;
        if (!seen.has(key)) {
          seen.add(key);
          return reply('450 4.2.0 <x>: Recipient address rejected: Greylisted, see http://postgrey.schweikert.ch/');
        }
        return c.local?.startsWith(PROBE_PREFIX) ? UNKNOWN : undefined;
      },
    },
  });
  const o = answer(await one('grey.test', 'jane', { retries: 1 }));
  t.equal(o.cls, 'accepted');
  t.equal(o.attempts, 2);
  t.equal(o.catchall?.catchall, false, 'the probe was asked again with the same local part');
  const janes = smtp.rcpts().filter((c) => c.local === 'jane');
  t.equal(janes.length, 2);
  t.not(janes[0]!.session, janes[1]!.session, 'the retry used a new session');
  t.equal(new Set(smtp.rcpts().filter((c) => c.local?.startsWith(PROBE_PREFIX)).map((c) => c.local)).size, 1);
  await closed(t);
});

t.test('greylisting for a job (retries 0): the 4xx is the answer at once', async (t) => {
  const { engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': { handle: (c) => (c.verb === 'RCPT' ? reply('451 4.7.1 Greylisting in action, please come back later') : undefined) } });
  const o = answer(await one('grey.test', 'jane', { retries: 0 }));
  t.equal(o.cls, 'tempfail');
  t.equal(o.attempts, 1);
  await closed(t);
});

t.test('SMTPUTF8 needed but not offered: answered without a RCPT', async (t) => {
  const { smtp, engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': {} });
  const o = await one('a.test', 'ñandú', { utf8: true });
  t.equal(o.kind, 'smtputf8_unsupported');
  t.equal(smtp.rcpts().filter((c) => c.local === 'ñandú').length, 0);
  await closed(t);
});

t.test('MAIL FROM refused: the recipients behind it are never rejected', async (t) => {
  const { engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': { handle: (c) => (c.verb === 'MAIL' ? reply('550 5.1.0 <probe@verifier.test>: Sender address rejected: User unknown') : undefined) } });
  const outcomes = await all([check('a.test', 'x'), check('a.test', 'y')]);
  t.strictSame(classes(outcomes), ['unclassified', 'unclassified']);
  await closed(t);
});

t.test('a deadline answers a recipient stuck behind a silent server', async (t) => {
  const { engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': { delay: (c) => (c.verb === 'RCPT' ? 400 : 0) } }, { smtpTimeoutMs: 5000 });
  const t0 = clock.now();
  const o = await one('slow.test', 'x', { deadlineMs: 100 });
  t.equal(clock.now() - t0, 100, 'answered at its deadline, not when the server would have');
  t.equal(o.kind, 'failure');
  if (o.kind === 'failure') t.strictSame([o.failure.kind, o.failure.detail, o.failure.deadlineMs], ['timeout', 'deadline', 100]);
  await closed(t);
});

t.test('a warm session serves later requests; close() ends it with QUIT', async (t) => {
  const { smtp, engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': {} }, { idleMs: 5_000 });
  t.equal(answer(await one('a.test', 'one')).cls, 'accepted');
  t.equal(answer(await one('b.test', 'two')).cls, 'accepted');
  t.equal(smtp.sessions.length, 1, 'the second request reused the warm session');
  t.equal(smtp.count('MAIL'), 1, 'and its open transaction');
  await closed(t);
  t.equal(smtp.sessions[0]!.quits, 1);
  t.equal(smtp.activeTotal, 0);
});

t.test('a dropped line: the recipients are asked again on a new session', async (t) => {
  let drops = 0;
  const { engine, check, all, one, closed, clock } = setup({
    'mx.shared.test': {
      handle: (c) => {
        if (c.verb === 'RCPT' && c.local === 'u3' && drops < 1) {
          drops++;
          return 'drop';
        }
        return c.local?.startsWith(PROBE_PREFIX) ? UNKNOWN : undefined;
      },
    },
  });
  const outcomes = await all(Array.from({ length: 8 }, (_, i) => check('a.test', `u${i}`)));
  t.strictSame(new Set(classes(outcomes)), new Set(['accepted']));
  await closed(t);
});

t.test('the catch-all probe local part is the same for a domain through its TTL window, keyed by the salt', async (t) => {
  const { probeLocalFor } = await import('../src/engine.ts');
  const a = probeLocalFor('salt-one', 'grey.test', 3_600_000, 7_200_000);
  t.match(a, /^svc-[0-9a-f]{16}$/);
  t.equal(probeLocalFor('salt-one', 'grey.test', 3_600_000, 7_200_000 + 3_599_999), a, 'same window, same local part');
  t.not(probeLocalFor('salt-one', 'grey.test', 3_600_000, 7_200_000 + 3_600_000), a, 'next window, a new one');
  t.not(probeLocalFor('salt-two', 'grey.test', 3_600_000, 7_200_000), a, 'another salt, another local part');
  t.not(probeLocalFor('salt-one', 'other.test', 3_600_000, 7_200_000), a);
  // Two actors of the same domain (the first went idle in between) ask the same probe address.
  const clock = new ManualClock(7_200_000);
  const smtp = new FakeSmtp({ 'mx.shared.test': { handle: (c) => (c.verb === 'RCPT' && c.local?.startsWith('svc-') ? reply('450 4.2.0 Greylisted') : undefined) } }, clock);
  const engine = new Engine({ dns: new FakeDns(ADDRESSES), smtp, cache: new MemoryCache(), clock, config: CONFIG, probeSalt: 'salt-one' });
  const { closed } = harness(clock, smtp, engine);
  await clock.run(engine.check({ domain: 'grey.test', hosts: SHARED, local: 'a', utf8: false, retries: 0 }));
  t.equal(engine.activeDomains, 0);
  await clock.run(engine.check({ domain: 'grey.test', hosts: SHARED, local: 'b', utf8: false, retries: 0 }));
  const probes = smtp.rcpts().filter((c) => c.local?.startsWith('svc-')).map((c) => c.local);
  t.equal(probes.length, 2);
  t.equal(probes[0], probes[1]);
  t.equal(probes[0], a, 'the probe local part of the clock\'s window');
  await closed(t);
});

t.test('a probe refused as a bad address (553 5.1.3) or a disabled mailbox is catch-all evidence: not catch-all', async (t) => {
  for (const refusal of ['553 5.1.3 <x>: Bad recipient address syntax', '550 5.2.1 Mailbox disabled']) {
    const { engine, check, all, one, closed, clock } = setup({ 'mx.shared.test': { handle: (c) => (c.verb === 'RCPT' && c.local?.startsWith(PROBE_PREFIX) ? reply(refusal) : undefined) } });
    const o = answer(await one('bad.test', 'jane'));
    t.equal(o.cls, 'accepted');
    t.strictSame(o.catchall, { catchall: false, mxIndex: 0 }, refusal);
    await closed(t);
  }
});

t.test('an acceptance whose catch-all probe was deferred or refused on policy: no evidence, and only the deferral says a later probe may settle it', async (t) => {
  for (const [refusal, deferred] of [
    ['450 4.2.0 <x>: Recipient address rejected: Greylisted', true],
    ['550 5.7.1 <x>: Recipient address rejected: Access denied', false],
  ] as const) {
    const { one, closed } = setup({ 'mx.shared.test': { handle: (c) => (c.verb === 'RCPT' && c.local?.startsWith(PROBE_PREFIX) ? reply(refusal) : undefined) } });
    const o = answer(await one('grey.test', 'jane', { retries: 0 }));
    t.equal(o.cls, 'accepted', refusal);
    t.equal(o.catchall, undefined, 'no catch-all evidence');
    t.equal(o.catchallDeferred, deferred ? true : undefined, deferred ? 'deferred: ask later' : 'refused on policy: asking later changes nothing');
    await closed(t);
  }
});

t.test('sessions retiring under a connection cap: reconnects refused while the old sockets close never fail the host', async (t) => {
  // The server counts a session until its QUIT lands (latency), allows 1, and every session
  // retires after 2 rejections: new connections race the closing ones.
  const { smtp, engine, check, all, one, closed, clock } = setup(
    { 'mx.shared.test': { maxSessions: 1, latencyMs: 15, handle: (c) => (c.verb === 'RCPT' && (c.local?.startsWith('nobody') || c.local?.startsWith(PROBE_PREFIX)) ? UNKNOWN : undefined) } },
    { maxConnectionsPerMx: 5, errorBudget: 2 },
  );
  const locals = Array.from({ length: 40 }, (_, i) => (i % 2 ? `nobody${i}` : `real${i}`));
  const outcomes = await all(locals.map((l) => check('cap.test', l)));
  t.strictSame(classes(outcomes), locals.map((l) => (l.startsWith('nobody') ? 'rejected' : 'accepted')));
  t.ok(smtp.refusedAtBanner >= 1, `the race happened (${smtp.refusedAtBanner} refusals at the banner)`);
  t.ok((smtp.peak.get('mx.shared.test') ?? 0) <= 1);
  await closed(t);
});

// ------------------------------------------------------------------------------------------------
// close() with a shared session limit (a front's close once hung with REDIS_URL set). The
// Redis throttle can make an open wait for a permit that another process holds, which the
// in-process one never does (an actor never asks it for more than its own limit).


/**
 * A session limit shared with other processes, as RedisMxThrottle is: `free` permits per server
 * address are left for this engine. A waiter learns of a permit given back a few milliseconds later (a
 * round trip to Redis and a message). A wait is cancelled by the signal unless `ignoreSignal`.
 */
class SharedThrottle {
  readonly free = new Map<string, number>();
  readonly waiting: Array<{ host: string; grant: () => void }> = [];
  granted = 0;
  cancelled = 0;
  constructor(
    readonly clock: ManualClock,
    free: Record<string, number>,
    readonly ignoreSignal = false,
  ) {
    for (const [h, n] of Object.entries(free)) this.free.set(h, n);
  }
  held = 0;
  acquire(host: string, signal?: AbortSignal): Promise<() => void> {
    const permit = () => {
      this.granted++;
      this.held++;
      let done = false;
      return () => {
        if (done) return;
        done = true;
        this.held--;
        const i = this.waiting.findIndex((w) => w.host === host);
        if (i >= 0) this.waiting.splice(i, 1)[0]!.grant();
        else this.free.set(host, (this.free.get(host) ?? 0) + 1);
      };
    };
    const n = this.free.get(host) ?? 0;
    if (n > 0) {
      this.free.set(host, n - 1);
      return Promise.resolve(permit());
    }
    if (signal?.aborted && !this.ignoreSignal) {
      this.cancelled++;
      return Promise.reject(new Error('no permit free; not waiting'));
    }
    return new Promise((resolve, reject) => {
      const w = { host, grant: () => void this.clock.setTimeout(() => resolve(permit()), 5) };
      this.waiting.push(w);
      if (!this.ignoreSignal)
        signal?.addEventListener('abort', () => {
          const i = this.waiting.indexOf(w);
          if (i < 0) return;
          this.waiting.splice(i, 1);
          this.cancelled++;
          reject(new Error('wait cancelled'));
        });
    });
  }
}

function setupShared(free: Record<string, number>, ignoreSignal: boolean, servers: Record<string, FakeServer>, config: Partial<EngineConfig> = {}) {
  const clock = new ManualClock();
  const throttle = new SharedThrottle(clock, free, ignoreSignal);
  const smtp = new FakeSmtp(servers, clock);
  const engine = new Engine({ dns: new FakeDns(ADDRESSES), smtp, cache: new MemoryCache(), clock, throttle, config: { ...CONFIG, ...config }, randomLocal: probeLocals(), closeCheckMs: 600_000 });
  const check = (domain: string, local: string, o: { hosts?: MxHost[]; retries?: number; deadlineMs?: number } = {}) =>
    engine.check({ domain, hosts: o.hosts ?? SHARED, local, utf8: false, retries: o.retries ?? 0, ...(o.deadlineMs !== undefined ? { deadlineMs: o.deadlineMs } : {}) });
  /** Moves the clock on in 5 ms steps until an open waits for a permit (at most 250 ms). */
  const untilWaiting = async () => {
    for (let i = 0; i < 50 && throttle.waiting.length === 0; i++) await clock.advance(5);
  };
  return { clock, throttle, smtp, engine, check, untilWaiting, ...harness(clock, smtp, engine) };
}

t.test('close(): an open whose permit comes after its work went to another session still lets the engine go idle', async (t) => {
  // Two sessions wanted (more recipients than one session's error budget absorbs, open-policy.ts),
  // one permit left here: the second open waits; the first session answers everything and stays
  // warm. close() ends it, its permit goes to the waiting open, which finds no work: the actor is
  // idle, and close() must hear of it. (The throttle ignores the signal, so the permit really comes.)
  const { throttle, smtp, engine, check, all, closed } = setupShared({ '192.0.2.9': 1 }, true, { 'mx.shared.test': {} }, { idleMs: 60_000 });
  const outcomes = await all(Array.from({ length: 40 }, (_, i) => check('a.test', `u${i}`)));
  t.strictSame(new Set(classes(outcomes)), new Set(['accepted']));
  t.equal(throttle.waiting.length, 1, 'a second open waits for a permit');
  await closed(t, 3000);
  t.equal(throttle.granted, 2, 'the waiting open got the permit after all');
  t.equal(throttle.held, 0, 'and gave it back');
  t.equal(smtp.sessions.length, 1, 'without opening a session for nothing');
  t.ok(engine.idle);
});

t.test('close() never waits for a permit: the wait is cancelled and the recipients no session can take are answered', async (t) => {
  // Every permit of the host is held by other processes (free 0), for as long as they like.
  const { clock, throttle, smtp, engine, check, closed, untilWaiting } = setupShared({ '192.0.2.9': 0 }, false, { 'mx.shared.test': {} });
  const pending = Promise.all([check('a.test', 'x'), check('b.test', 'y')]);
  await untilWaiting();
  t.ok(throttle.waiting.length >= 1, 'an open waits for a permit');
  await closed(t, 3000);
  const outcomes = await clock.run(pending, 1000);
  t.strictSame(classes(outcomes), ['failure:connection', 'failure:connection'], 'as a connection failure (unknown), not left hanging');
  t.match((outcomes[0] as { failure: { detail: string } }).failure.detail, /permit/);
  t.equal(throttle.waiting.length, 0, 'no wait is left behind');
  t.ok(throttle.cancelled >= 1);
  t.equal(throttle.held, 0);
  t.equal(smtp.sessions.length, 0);
});

t.test('close() after a permit wait was cancelled: a free permit is still used, the sessions still open take the queue', async (t) => {
  // One permit here, the actor wants two sessions (more than 4 rounds of 2 RCPTs queued): one
  // waits. close() while the recipients are in flight (each RCPT takes 30 ms): the wait is
  // cancelled, the open session answers everyone.
  const { clock, throttle, smtp, engine, check, closed, untilWaiting } = setupShared({ '192.0.2.9': 1 }, false, { 'mx.shared.test': { latencyMs: 30 } }, { pipelineDepth: 2 });
  const pending = Promise.all(Array.from({ length: 10 }, (_, i) => check('a.test', `u${i}`)));
  await untilWaiting();
  t.equal(throttle.waiting.length, 1, 'a second open waits');
  await closed(t, 5000);
  t.strictSame(classes(await clock.run(pending, 3000)), Array.from({ length: 10 }, () => 'accepted'));
  t.equal(smtp.sessions.length, 1);
  t.equal(throttle.held, 0);
});

t.test('close(): a greylist retry whose recipient ran out of time does not keep its domain open', async (t) => {
  const { clock, engine, one, closed } = setup({ 'mx.shared.test': { handle: (c) => (c.verb === 'RCPT' && !c.local?.startsWith(PROBE_PREFIX) ? reply('450 4.2.0 <x>: Recipient address rejected: Greylisted') : undefined) } }, { smtpRetryDelayMs: 150 });
  const o = await one('grey.test', 'jane', { retries: 1, deadlineMs: 60 });
  t.equal(o.kind, 'failure', 'the deadline answered before the retry');
  t.equal(engine.activeDomains, 1, 'its retry timer still holds the domain actor');
  await clock.advance(250); // the retry timer fires on a recipient that is done
  t.equal(engine.activeDomains, 0, 'the domain actor is gone');
  await closed(t, 3000);
});

t.test("a synchronous request's recipient is taken before a job's queued recipients on the same host", async (t) => {
  // One session at a time, 5 RCPTs per round, 10 ms per reply: 200 job recipients take ~40 rounds.
  const { clock, smtp, check, closed } = setup({ 'mx.shared.test': { latencyMs: 10 } }, { maxConnectionsPerMx: 1, pipelineDepth: 5 });
  const answeredAt = new Map<string, number>();
  const t0 = clock.now();
  const job = Array.from({ length: 200 }, (_, i) => check('job.test', `j${i}`).then((o) => (answeredAt.set(`j${i}`, clock.now() - t0), o)));
  await clock.advance(50); // the job's session is under way
  const sync = check('sync.test', 'carol', { deadlineMs: 30_000 }).then((o) => (answeredAt.set('carol', clock.now() - t0), o));
  const [outcomes, syncOutcome] = await clock.run(Promise.all([Promise.all(job), sync]));
  t.strictSame(new Set(classes(outcomes)), new Set(['accepted']));
  t.equal(classes([syncOutcome])[0], 'accepted');
  const before = [...answeredAt.entries()].filter(([k, at]) => k !== 'carol' && at < answeredAt.get('carol')!).length;
  t.ok(before < 40, `answered after ${before} of the job's 200 (its round and the next), not after all of them`);
  const carolRcpt = smtp.rcpts('mx.shared.test').findIndex((c) => c.local === 'carol');
  t.ok(carolRcpt >= 0 && carolRcpt < 40, `its RCPT was the ${carolRcpt + 1}th written`);
  await closed(t);
});
