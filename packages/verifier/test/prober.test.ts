// Domain actors over a scripted SMTP connector: one session per domain, many RCPT per
// transaction, RSET between, catch-all probe once, 4xx retries, MX failover, per-MX throttle.

import t from 'tap';
import { Prober, type ProbeOutcome, type ProberConfig } from '../src/prober.ts';
import type { MxHost } from '../src/types.ts';
import { FakeDns, FakeSmtp, MemoryCache, PROBE_PREFIX, probeLocals, reply, type FakeServer } from './fakes.ts';

const CONFIG: ProberConfig = {
  smtpPort: 25,
  heloName: 'verifier.test',
  mailFrom: 'probe@verifier.test',
  smtpTimeoutMs: 1000,
  smtpRetries: 2,
  smtpRetryDelayMs: 25,
  maxConnectionsPerMx: 2,
  maxRcptsPerTransaction: 30,
  catchallTtlMs: 86_400_000,
};

const MAIL_FROM = 'MAIL FROM:<probe@verifier.test>';
const ADDRESSES: Record<string, string[]> = {
  'mx1.alpha.test': ['192.0.2.1'],
  'mx2.alpha.test': ['192.0.2.2', '2001:db8::2'],
  'mx.beta.test': ['192.0.2.3'],
  'mx.shared.test': ['192.0.2.9'],
};
const ALPHA: MxHost[] = [{ exchange: 'mx1.alpha.test', priority: 10 }];
const ALPHA2: MxHost[] = [
  { exchange: 'mx1.alpha.test', priority: 10 },
  { exchange: 'mx2.alpha.test', priority: 20 },
];
const BETA: MxHost[] = [{ exchange: 'mx.beta.test', priority: 5 }];

function setup(servers: Record<string, FakeServer>, config: Partial<ProberConfig> = {}, cache = new MemoryCache()) {
  const smtp = new FakeSmtp(servers);
  const dns = new FakeDns(ADDRESSES);
  const prober = new Prober({ dns, smtp, cache, config: { ...CONFIG, ...config }, randomLocal: probeLocals() });
  return { smtp, dns, cache, prober };
}

const locals = (n: number, prefix = 'u') => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);
const rcptLine = (local: string, domain: string) => `RCPT TO:<${local}@${domain}>`;
/** Lets an actor finish what follows its last answer (QUIT, leaving the prober's table). */
const drain = () => new Promise<void>((r) => setImmediate(r));
const answer = (o: ProbeOutcome | undefined) => {
  if (o?.kind !== 'answer') throw new Error(`expected an answer, got ${JSON.stringify(o)}`);
  return o;
};

t.test('100 recipients of one domain: one session, one probe, RSET between transactions', async (t) => {
  for (const maxRcpts of [30, 7, 1, 100, 250]) {
    const { smtp, prober, cache } = setup(
      {
        'mx1.alpha.test': {
          handle: (cmd) => (cmd.verb === 'RCPT' && cmd.local?.endsWith('7') ? reply('550 5.1.1 <x@alpha.test>: Recipient address rejected: User unknown') : undefined),
        },
      },
      { maxRcptsPerTransaction: maxRcpts },
    );
    const users = locals(100);
    const outcomes = await Promise.all(users.map((u) => prober.check('alpha.test', ALPHA, u, false)));
    await drain();
    const tx = Math.ceil(100 / maxRcpts);
    t.equal(smtp.opens.length, 1, `${maxRcpts}: one session opened`);
    t.strictSame(smtp.opens[0], { host: '192.0.2.1', servername: 'mx1.alpha.test', port: 25, heloName: 'verifier.test', timeoutMs: 1000 });
    t.equal(prober.sessionsOpened, 1);
    t.equal(prober.sessionsQuit, 1);
    t.equal(smtp.rcpts().filter((c) => c.local?.startsWith(PROBE_PREFIX)).length, 1, 'one catch-all probe RCPT');
    t.equal(smtp.rcpts().filter((c) => !c.local?.startsWith(PROBE_PREFIX)).length, 100, '100 target RCPTs');
    t.equal(smtp.count('RSET'), tx - 1, `${maxRcpts}: RSETs = ceil(100/${maxRcpts}) - 1 = ${tx - 1}`);
    t.equal(smtp.count('MAIL'), tx);
    t.equal(smtp.count('QUIT'), 1);
    // The exact dialogue: MAIL, probe, batch, RSET, MAIL, batch, …, QUIT.
    const expected: string[] = [];
    for (let b = 0; b < tx; b++) {
      if (b > 0) expected.push('RSET');
      expected.push(MAIL_FROM);
      if (b === 0) expected.push(rcptLine(`${PROBE_PREFIX}1`, 'alpha.test'));
      for (const u of users.slice(b * maxRcpts, (b + 1) * maxRcpts)) expected.push(rcptLine(u, 'alpha.test'));
    }
    expected.push('QUIT');
    t.strictSame(smtp.lines(), expected, `${maxRcpts}: the exact command sequence`);
    t.equal(smtp.sessions[0]?.quits, 1);
    t.equal(smtp.sessions[0]?.destroys, 0);
    // Every outcome, in input order.
    outcomes.forEach((o, i) => {
      const a = answer(o);
      const cls = users[i]!.endsWith('7') ? 'rejected' : 'accepted';
      if (a.cls !== cls || a.attempts !== 1 || a.mxIndex !== 0 || a.catchall?.catchall !== false || a.catchall.mxIndex !== 0) {
        t.fail(`outcome ${i}: ${JSON.stringify(a)}`);
      }
    });
    t.equal(outcomes.filter((o) => answer(o).cls === 'rejected').length, 10);
    t.strictSame(answer(outcomes[0]).reply, reply('250 2.1.5 Ok'));
    t.strictSame(cache.sets, [{ key: 'ca:alpha.test', value: { catchall: false, mxIndex: 0 }, ttlMs: 86_400_000 }]);
    t.equal(prober.activeDomains, 0, 'the actor is gone once idle');
  }
});

t.test('two domains run their actors in parallel', async (t) => {
  const { smtp, prober } = setup({ 'mx1.alpha.test': { latencyMs: 2 }, 'mx.beta.test': { latencyMs: 2 } });
  const a = Promise.all(locals(15, 'a').map((u) => prober.check('alpha.test', ALPHA, u, false)));
  const b = Promise.all(locals(15, 'b').map((u) => prober.check('beta.test', BETA, u, false)));
  t.equal(prober.activeDomains, 2);
  const [ra, rb] = await Promise.all([a, b]);
  t.equal(smtp.opens.length, 2);
  t.equal(smtp.peakTotal, 2, 'both sessions were open at the same time');
  const alpha = smtp.log.filter((c) => c.server === 'mx1.alpha.test');
  const beta = smtp.log.filter((c) => c.server === 'mx.beta.test');
  t.ok(beta[0]!.at < alpha[alpha.length - 1]!.at && alpha[0]!.at < beta[beta.length - 1]!.at, 'the dialogues interleave in time');
  t.equal(smtp.rcpts('mx1.alpha.test').length, 16);
  t.equal(smtp.rcpts('mx.beta.test').length, 16);
  t.ok(ra.every((o) => answer(o).cls === 'accepted'));
  t.ok(rb.every((o) => answer(o).cls === 'accepted'));
  t.equal(ra.length + rb.length, 30);
});

t.test('the catch-all verdict is probed once and cached across calls', async (t) => {
  const cache = new MemoryCache();
  const { smtp, prober } = setup({ 'mx1.alpha.test': { catchAll: true } }, {}, cache);
  const first = await Promise.all(['ann', 'bob'].map((u) => prober.check('alpha.test', ALPHA, u, false)));
  t.strictSame(first.map((o) => answer(o).catchall), [{ catchall: true, mxIndex: 0 }, { catchall: true, mxIndex: 0 }]);
  t.strictSame(smtp.lines({ session: 0 }), [MAIL_FROM, rcptLine('zz-probe-1', 'alpha.test'), rcptLine('ann', 'alpha.test'), rcptLine('bob', 'alpha.test'), 'QUIT']);
  t.strictSame(cache.sets, [{ key: 'ca:alpha.test', value: { catchall: true, mxIndex: 0 }, ttlMs: 86_400_000 }]);
  await drain();
  t.equal(prober.activeDomains, 0);

  // A later batch: a new actor reads the cache and sends no probe.
  const second = await Promise.all(['cid', 'dee'].map((u) => prober.check('alpha.test', ALPHA, u, false)));
  t.equal(smtp.opens.length, 2);
  t.strictSame(smtp.lines({ session: 1 }), [MAIL_FROM, rcptLine('cid', 'alpha.test'), rcptLine('dee', 'alpha.test'), 'QUIT']);
  t.strictSame(second.map((o) => answer(o).catchall), [{ catchall: true, mxIndex: 0 }, { catchall: true, mxIndex: 0 }]);
  t.equal(cache.sets.length, 1, 'not written again');

  // Another prober (another worker) sharing the cache sends no probe either.
  const other = setup({ 'mx1.alpha.test': {} }, {}, cache);
  const third = answer(await other.prober.check('alpha.test', ALPHA, 'eve', false));
  t.strictSame(other.smtp.lines(), [MAIL_FROM, rcptLine('eve', 'alpha.test'), 'QUIT']);
  t.strictSame(third.catchall, { catchall: true, mxIndex: 0 });
});

t.test('an inconclusive probe (4xx, policy) is not cached and is tried again next session', async (t) => {
  let probes = 0;
  const { smtp, prober, cache } = setup({
    'mx1.alpha.test': {
      handle: (cmd) => {
        if (!cmd.local?.startsWith(PROBE_PREFIX)) return undefined;
        probes++;
        return probes === 1 ? reply('450 4.7.1 try later') : reply('550 5.7.1 blocked by policy');
      },
    },
  });
  const a = answer(await prober.check('alpha.test', ALPHA, 'ann', false));
  t.equal(a.catchall, undefined);
  const b = answer(await prober.check('alpha.test', ALPHA, 'bob', false));
  t.equal(b.catchall, undefined);
  t.equal(probes, 2);
  t.strictSame(cache.sets, []);
  t.equal(smtp.opens.length, 2);
});

t.test('failover: MX0 cannot be reached, MX1 answers', async (t) => {
  const connectFailure = { phase: 'connect' as const, kind: 'timeout' as const, detail: 'no connection within 1000 ms' };
  const { smtp, prober, cache } = setup({ 'mx1.alpha.test': { connectFailure }, 'mx2.alpha.test': {} });
  const out = await Promise.all(['ann', 'bob'].map((u) => prober.check('alpha.test', ALPHA2, u, false)));
  t.strictSame(
    smtp.opens.map((o) => [o.servername, o.host]),
    [
      ['mx1.alpha.test', '192.0.2.1'],
      ['mx2.alpha.test', '192.0.2.2'],
    ],
    'priority order, first address of each host',
  );
  t.strictSame(out.map((o) => [answer(o).cls, answer(o).mxIndex]), [
    ['accepted', 1],
    ['accepted', 1],
  ]);
  t.strictSame(cache.sets[0]?.value, { catchall: false, mxIndex: 1 });
  t.equal(prober.sessionsOpened, 1);
});

t.test('failover: an MX host without addresses is skipped without a connection attempt', async (t) => {
  const { smtp, prober, dns } = setup({ 'mx2.alpha.test': {} });
  const hosts: MxHost[] = [{ exchange: 'noaddr.alpha.test', priority: 1 }, ...ALPHA2.slice(1)];
  const o = answer(await prober.check('alpha.test', hosts, 'ann', false));
  t.equal(o.mxIndex, 1);
  t.strictSame(dns.addressLookups, ['noaddr.alpha.test', 'mx2.alpha.test']);
  t.strictSame(smtp.opens.map((x) => x.servername), ['mx2.alpha.test']);
});

t.test('every MX fails: each recipient gets the last failure', async (t) => {
  const banner = reply('421 4.3.2 Service not available, closing transmission channel');
  const { smtp, prober } = setup({
    'mx1.alpha.test': { connectFailure: { phase: 'connect', kind: 'connection', detail: 'ECONNREFUSED' } },
    'mx2.alpha.test': { connectFailure: { phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: banner } },
  });
  const out = await Promise.all(['ann', 'bob'].map((u) => prober.check('alpha.test', ALPHA2, u, false)));
  for (const o of out) t.strictSame(o, { kind: 'failure', failure: { phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: banner } });
  t.equal(smtp.opens.length, 2, 'one attempt per MX, no retry loop');
  t.equal(prober.activeDomains, 0);

  const none = setup({});
  const o = await none.prober.check('alpha.test', [{ exchange: 'noaddr.alpha.test', priority: 0 }], 'ann', false);
  t.strictSame(o, { kind: 'failure', failure: { phase: 'connect', kind: 'connection', detail: 'MX host noaddr.alpha.test has no address' } });
});

t.test('a session dropped mid-transaction: one new session to MX0, and when that makes no progress the rest goes to MX1', async (t) => {
  const users = locals(10);
  const { smtp, prober } = setup({
    'mx1.alpha.test': { handle: (cmd) => (cmd.local === 'u005' ? 'drop' : undefined) },
    'mx2.alpha.test': {},
  });
  const out = await Promise.all(users.map((u) => prober.check('alpha.test', ALPHA2, u, false)));
  t.strictSame(
    out.map((o) => answer(o).mxIndex),
    [0, 0, 0, 0, 0, 1, 1, 1, 1, 1],
  );
  t.ok(out.every((o) => answer(o).cls === 'accepted' && answer(o).attempts === 1));
  t.strictSame(smtp.lines({ server: 'mx1.alpha.test' }), [
    MAIL_FROM,
    rcptLine('zz-probe-1', 'alpha.test'),
    ...users.slice(0, 6).map((u) => rcptLine(u, 'alpha.test')),
    // The first session answered five recipients before the drop: MX0 is asked again.
    MAIL_FROM,
    rcptLine('u005', 'alpha.test'),
  ]);
  // The probe answer from MX0 is kept: MX1 gets no second probe, only the recipients left over.
  t.strictSame(smtp.lines({ server: 'mx2.alpha.test' }), [MAIL_FROM, ...users.slice(5).map((u) => rcptLine(u, 'alpha.test')), 'QUIT']);
  t.strictSame(answer(out[9]).catchall, { catchall: false, mxIndex: 0 });
  t.equal(prober.sessionsOpened, 3);
  t.equal(prober.sessionsQuit, 1);
  t.equal(smtp.sessions[0]?.quits, 0, 'no QUIT on a dead line');
  t.equal(smtp.activeTotal, 0, 'nothing left open');
});

t.test('421 on RCPT: the session is closed at once, MX0 is asked once more, then the rest goes to MX1', async (t) => {
  const { smtp, prober } = setup({
    // Without PIPELINING: each RCPT waits for its reply, so nothing follows the 421.
    'mx1.alpha.test': { extensions: ['ENHANCEDSTATUSCODES'], handle: (cmd) => (cmd.local === 'u002' ? reply('421 4.7.0 Too many errors, closing connection') : undefined) },
    'mx2.alpha.test': {},
  });
  const out = await Promise.all(locals(4).map((u) => prober.check('alpha.test', ALPHA2, u, false)));
  t.strictSame(
    out.map((o) => answer(o).mxIndex),
    [0, 0, 1, 1],
  );
  t.equal(smtp.sessions[0]?.closed, true, 'closed without QUIT');
  t.equal(smtp.sessions[0]?.quits, 0);
  t.strictSame(smtp.lines({ server: 'mx1.alpha.test' }), [
    MAIL_FROM,
    rcptLine('zz-probe-1', 'alpha.test'),
    rcptLine('u000', 'alpha.test'),
    rcptLine('u001', 'alpha.test'),
    rcptLine('u002', 'alpha.test'),
    MAIL_FROM,
    rcptLine('u002', 'alpha.test'),
  ]);
  t.equal(smtp.activeTotal, 0);
  t.strictSame(smtp.rcpts('mx2.alpha.test').map((c) => c.local), ['u002', 'u003']);
});

t.test('421 on the catch-all probe: the session ends and the recipients go to MX1', async (t) => {
  const { smtp, prober } = setup({
    'mx1.alpha.test': { extensions: ['ENHANCEDSTATUSCODES'], handle: (cmd) => (cmd.local?.startsWith(PROBE_PREFIX) ? reply('421 4.7.0 closing connection') : undefined) },
    'mx2.alpha.test': {},
  });
  const out = await Promise.all(['ann', 'bob'].map((u) => prober.check('alpha.test', ALPHA2, u, false)));
  t.strictSame(smtp.lines({ server: 'mx1.alpha.test' }), [MAIL_FROM, rcptLine('zz-probe-1', 'alpha.test')], 'nothing more is sent after a 421');
  // The same probe local part again: a retried probe must be the pair greylisting remembers.
  t.strictSame(smtp.lines({ server: 'mx2.alpha.test' }), [MAIL_FROM, rcptLine('zz-probe-1', 'alpha.test'), rcptLine('ann', 'alpha.test'), rcptLine('bob', 'alpha.test'), 'QUIT']);
  t.strictSame(
    out.map((o) => answer(o).mxIndex),
    [1, 1],
  );
  t.equal(smtp.activeTotal, 0);
});

t.test('a session that fails on a send is destroyed, not leaked', async (t) => {
  const { smtp, prober } = setup({
    'mx1.alpha.test': { handle: (cmd) => (cmd.verb === 'MAIL' ? 'timeout' : undefined) },
    'mx2.alpha.test': {},
  });
  const o = answer(await prober.check('alpha.test', ALPHA2, 'ann', false));
  t.equal(o.mxIndex, 1);
  t.equal(smtp.sessions[0]?.destroys, 1);
  t.equal(smtp.activeTotal, 0);
});

t.test('4xx is retried after the delay on a later session, then accepted', async (t) => {
  let greylisted = 0;
  const { smtp, prober } = setup({
    'mx1.alpha.test': {
      handle: (cmd) => {
        if (cmd.local !== 'grey') return undefined;
        return greylisted++ === 0 ? reply('450 4.2.0 <grey@alpha.test>: Recipient address rejected: Greylisted') : undefined;
      },
    },
  });
  const settledAt = new Map<string, number>();
  const out = await Promise.all(
    ['ann', 'grey', 'bob'].map((u) =>
      prober.check('alpha.test', ALPHA, u, false).then((o) => {
        settledAt.set(u, performance.now());
        return o;
      }),
    ),
  );
  const grey = answer(out[1]);
  t.equal(grey.cls, 'accepted');
  t.equal(grey.attempts, 2);
  t.strictSame(grey.reply, reply('250 2.1.5 Ok'));
  t.equal(answer(out[0]).attempts, 1);
  t.equal(answer(out[2]).attempts, 1);
  const tries = smtp.rcpts().filter((c) => c.local === 'grey');
  t.equal(tries.length, 2);
  t.ok(tries[1]!.at - tries[0]!.at >= CONFIG.smtpRetryDelayMs - 2, `retried after the delay (${(tries[1]!.at - tries[0]!.at).toFixed(1)} ms)`);
  t.not(tries[0]!.session, tries[1]!.session, 'the retry runs on a later session');
  t.equal(prober.sessionsOpened, 2);
  t.equal(prober.sessionsQuit, 2);
  t.ok(settledAt.get('ann')! < tries[1]!.at && settledAt.get('bob')! < tries[1]!.at, 'the others do not wait for the retry');
  await drain();
  t.strictSame(smtp.lines({ session: 1 }), [MAIL_FROM, rcptLine('grey', 'alpha.test'), 'QUIT'], 'no second probe after the first was conclusive');
  t.equal(prober.activeDomains, 0);
});

t.test('4xx every time: tempfail after retries + 1 attempts', async (t) => {
  for (const retries of [0, 1, 3]) {
    const deferral = reply('451 4.7.1 Please try again later');
    const { smtp, prober } = setup({ 'mx1.alpha.test': { handle: (cmd) => (cmd.local === 'grey' ? deferral : undefined) } }, { smtpRetries: retries, smtpRetryDelayMs: 5 });
    const o = answer(await prober.check('alpha.test', ALPHA, 'grey', false));
    t.equal(o.cls, 'tempfail');
    t.equal(o.attempts, retries + 1, `retries ${retries}: ${retries + 1} attempts`);
    t.strictSame(o.reply, deferral);
    t.equal(smtp.rcpts().filter((c) => c.local === 'grey').length, retries + 1);
    t.equal(prober.sessionsOpened, retries + 1);
  }
});

t.test('a 4xx to MAIL FROM is retried too', async (t) => {
  let mails = 0;
  const { prober, smtp } = setup({ 'mx1.alpha.test': { handle: (cmd) => (cmd.verb === 'MAIL' && mails++ === 0 ? reply('451 4.3.0 Temporary lookup failure') : undefined) } });
  const o = answer(await prober.check('alpha.test', ALPHA, 'ann', false));
  t.equal(o.cls, 'accepted');
  t.equal(o.attempts, 2);
  t.strictSame(smtp.lines({ session: 0 }), ['MAIL FROM:<probe@verifier.test>', 'QUIT']);
});

t.test('SMTPUTF8: refused without RCPT when the server does not offer it', async (t) => {
  const cache = new MemoryCache();
  await cache.set('ca:alpha.test', { catchall: false, mxIndex: 0 }, 1000);
  const { smtp, prober } = setup({ 'mx1.alpha.test': { extensions: ['PIPELINING', '8BITMIME'] } }, {}, cache);
  const utf8 = await prober.check('alpha.test', ALPHA, 'josé', true);
  t.strictSame(utf8, { kind: 'smtputf8_unsupported', mxIndex: 0 });
  t.equal(smtp.count('RCPT'), 0, 'no RCPT at all');
  await new Promise((r) => setImmediate(r)); // the QUIT follows the verdict by a tick
  t.strictSame(smtp.lines(), [MAIL_FROM, 'QUIT']);

  // Mixed batch: the ASCII recipient is still checked.
  const [u, a] = await Promise.all([prober.check('alpha.test', ALPHA, 'müller', true), prober.check('alpha.test', ALPHA, 'ann', false)]);
  t.strictSame(u, { kind: 'smtputf8_unsupported', mxIndex: 0 });
  t.equal(answer(a).cls, 'accepted');
  t.strictSame(smtp.rcpts().map((c) => c.local), ['ann']);

  // A server that offers SMTPUTF8: MAIL FROM carries the parameter, the RCPT goes out.
  const ok = setup({ 'mx1.alpha.test': { extensions: ['SMTPUTF8'] } }, {}, cache);
  const o = answer(await ok.prober.check('alpha.test', ALPHA, 'josé', true));
  t.equal(o.cls, 'accepted');
  t.strictSame(ok.smtp.lines(), ['MAIL FROM:<probe@verifier.test> SMTPUTF8', rcptLine('josé', 'alpha.test'), 'QUIT']);
});

t.test('MAIL FROM refused: never a verdict of rejected on the recipients', async (t) => {
  const policy = reply('550 5.7.1 Sender address rejected: Access denied');
  const { smtp, prober } = setup({ 'mx1.alpha.test': { handle: (cmd) => (cmd.verb === 'MAIL' ? policy : undefined) } });
  const out = await Promise.all(locals(5).map((u) => prober.check('alpha.test', ALPHA, u, false)));
  for (const o of out) t.strictSame(o, { kind: 'answer', cls: 'policy', reply: policy, mxIndex: 0, attempts: 1 });
  t.equal(smtp.count('RCPT'), 0);
  t.strictSame(smtp.lines(), [MAIL_FROM, 'QUIT']);

  // Even a sender refusal worded like an unknown user is not a 'rejected' on the recipients.
  const unknown = reply('550 5.1.1 <probe@verifier.test>: User unknown');
  const s2 = setup({ 'mx1.alpha.test': { handle: (cmd) => (cmd.verb === 'MAIL' ? unknown : undefined) } });
  const o2 = answer(await s2.prober.check('alpha.test', ALPHA, 'ann', false));
  t.equal(o2.cls, 'unclassified');
  t.strictSame(o2.reply, unknown);
  t.equal(s2.smtp.count('RCPT'), 0);

  // Nor is a malformed-sender reply (501 5.1.3 to MAIL FROM) a malformed recipient.
  const badSender = reply('501 5.1.3 Bad sender address syntax');
  const s4 = setup({ 'mx1.alpha.test': { handle: (cmd) => (cmd.verb === 'MAIL' ? badSender : undefined) } });
  const o4 = answer(await s4.prober.check('alpha.test', ALPHA, 'ann', false));
  t.equal(o4.cls, 'unclassified');
  t.equal(s4.smtp.count('RCPT'), 0);

  // Each transaction sends its own MAIL FROM: with maxRcpts 2, five recipients are three refusals.
  const s3 = setup({ 'mx1.alpha.test': { handle: (cmd) => (cmd.verb === 'MAIL' ? policy : undefined) } }, { maxRcptsPerTransaction: 2 });
  const out3 = await Promise.all(locals(5).map((u) => s3.prober.check('alpha.test', ALPHA, u, false)));
  t.ok(out3.every((o) => answer(o).cls === 'policy'));
  t.strictSame(s3.smtp.lines(), [MAIL_FROM, 'RSET', MAIL_FROM, 'RSET', MAIL_FROM, 'QUIT']);
});

t.test('per-MX throttle: two domains on one MX host never hold two sessions at once', async (t) => {
  const SHARED: MxHost[] = [{ exchange: 'mx.shared.test', priority: 10 }];
  for (const max of [1, 2]) {
    const { smtp, prober } = setup({ 'mx.shared.test': { latencyMs: 2 } }, { maxConnectionsPerMx: max });
    const out = await Promise.all([...locals(8, 'a').map((u) => prober.check('alpha.test', SHARED, u, false)), ...locals(8, 'b').map((u) => prober.check('beta.test', SHARED, u, false))]);
    t.ok(out.every((o) => answer(o).cls === 'accepted'));
    t.equal(out.length, 16);
    t.equal(smtp.opens.length, 2, `max ${max}: one session per domain`);
    t.equal(smtp.peak.get('mx.shared.test'), max, `max ${max}: peak concurrent sessions on the MX`);
    if (max === 1) {
      // The second domain's session starts only after the first one QUIT.
      const [s0, s1] = smtp.sessions;
      const lastOfFirst = s0!.commands[s0!.commands.length - 1]!;
      t.equal(lastOfFirst.line, 'QUIT');
      t.ok(s1!.commands[0]!.at >= lastOfFirst.at);
    }
  }
});

t.test('close() resolves only after every session has sent QUIT', async (t) => {
  const { smtp, prober } = setup({ 'mx1.alpha.test': { latencyMs: 2 }, 'mx.beta.test': { latencyMs: 2 } });
  let settled = 0;
  const all = [...locals(12, 'a').map((u) => prober.check('alpha.test', ALPHA, u, false)), ...locals(12, 'b').map((u) => prober.check('beta.test', BETA, u, false))].map((p) => p.then((o) => (settled++, o)));
  while (smtp.sessions.length < 2) await new Promise((r) => setTimeout(r, 1));
  t.equal(prober.activeDomains, 2, 'work is under way when close() is called');
  t.equal(prober.sessionsQuit, 0);
  t.ok(settled < 24);
  await prober.close();
  t.equal(settled, 24, 'every check answered before close() resolved');
  t.equal(prober.sessionsOpened, 2);
  t.equal(prober.sessionsQuit, 2);
  t.strictSame(
    smtp.sessions.map((s) => [s.quits, s.commands[s.commands.length - 1]?.line]),
    [
      [1, 'QUIT'],
      [1, 'QUIT'],
    ],
  );
  t.equal(smtp.activeTotal, 0);
  t.equal(prober.activeDomains, 0);
  t.ok((await Promise.all(all)).every((o) => answer(o).cls === 'accepted'));
});

t.test('close() stops further retries but waits for the one already scheduled', async (t) => {
  const deferral = reply('450 4.2.0 Greylisted');
  const { smtp, prober } = setup({ 'mx1.alpha.test': { handle: (cmd) => (cmd.local === 'grey' ? deferral : undefined) } }, { smtpRetries: 5, smtpRetryDelayMs: 20 });
  const p = prober.check('alpha.test', ALPHA, 'grey', false);
  while (smtp.count('QUIT') === 0) await new Promise((r) => setTimeout(r, 1));
  await prober.close();
  const o = answer(await p);
  t.equal(o.cls, 'tempfail');
  t.equal(o.attempts, 2, 'the pending retry ran, no further one was scheduled');
  t.equal(smtp.rcpts().filter((c) => c.local === 'grey').length, 2);
  t.equal(prober.sessionsQuit, 2);
  t.equal(prober.activeDomains, 0);
});

t.test('close() with nothing to do resolves at once', async (t) => {
  const { prober, smtp } = setup({});
  await prober.close();
  t.equal(prober.closing, true);
  t.equal(smtp.opens.length, 0);
});

t.test('PIPELINING: the RCPTs of a transaction go out in one write; a 421 inside fails the rest over', async (t) => {
  const { smtp, prober } = setup({ 'mx1.alpha.test': {}, 'mx2.alpha.test': {} }, { maxRcptsPerTransaction: 50 });
  const out = await Promise.all(locals(120).map((u) => prober.check('alpha.test', ALPHA2, u, false)));
  t.ok(out.every((o) => answer(o).cls === 'rejected' || answer(o).cls === 'accepted'));
  t.strictSame(smtp.sessions[0]?.pipelined, [51, 50, 20], 'probe + 50, then 50, then 20: one batch per transaction');
  t.equal(smtp.count('RSET'), 2);

  const two = setup({ 'mx1.alpha.test': { handle: (cmd) => (cmd.local === 'u002' ? reply('421 4.7.0 closing') : undefined) }, 'mx2.alpha.test': {} });
  const res = await Promise.all(locals(4).map((u) => two.prober.check('alpha.test', ALPHA2, u, false)));
  t.strictSame(res.map((o) => answer(o).mxIndex), [0, 0, 1, 1], 'answers before the 421 stand; the rest go to MX1');
  t.strictSame(two.smtp.rcpts('mx2.alpha.test').map((c) => c.local), ['u002', 'u003']);
});

t.test('a probe deferred by greylisting is retried with the same local part alongside the address', async (t) => {
  const seen = new Map<string, number>();
  // Greylisting server that is also catch-all: first try of each pair 450, then 250.
  const { smtp, prober } = setup({
    'mx1.alpha.test': {
      handle: (cmd) => {
        if (cmd.verb !== 'RCPT') return undefined;
        const n = (seen.get(cmd.local!) ?? 0) + 1;
        seen.set(cmd.local!, n);
        return n === 1 ? reply('450 4.7.1 Greylisted') : reply('250 2.1.5 Ok');
      },
    },
  });
  const o = answer(await prober.check('alpha.test', ALPHA, 'anyone', false));
  t.equal(o.cls, 'accepted');
  t.strictSame(o.catchall, { catchall: true, mxIndex: 0 }, 'the retried probe saw the catch-all');
  t.strictSame(smtp.rcpts().map((c) => c.local), ['zz-probe-1', 'anyone', 'zz-probe-1', 'anyone']);
});

t.test('every address of an MX host is tried while the connection itself fails', async (t) => {
  // mx2.alpha.test has 192.0.2.2 and 2001:db8::2; nothing listens on the first.
  const { smtp, prober } = setup({ 'mx2.alpha.test': { refuseIps: ['192.0.2.2'] } });
  const o = answer(await prober.check('alpha.test', [{ exchange: 'mx2.alpha.test', priority: 10 }], 'ann', false));
  t.equal(o.cls, 'accepted');
  t.equal(o.mxIndex, 0, 'still the first MX host');
  t.strictSame(smtp.opens.map((x) => x.host), ['192.0.2.2', '2001:db8::2']);
});

t.test("a server's per-session error limit (421 after N rejections) costs new sessions, not answers", async (t) => {
  // Postfix-like: smtpd_hard_error_limit of 3 rejected recipients per session, then 421.
  const errors = new Map<number, number>();
  const { smtp, prober } = setup({
    'mx1.alpha.test': {
      extensions: ['ENHANCEDSTATUSCODES'],
      handle: (cmd, session) => {
        if (cmd.verb !== 'RCPT') return undefined;
        if (cmd.local === 'ann') return reply('250 2.1.5 Ok');
        const n = (errors.get(session.id) ?? 0) + 1;
        errors.set(session.id, n);
        return n > 3 ? reply('421 4.7.0 Error: too many errors') : reply('550 5.1.1 User unknown');
      },
    },
  });
  const users = [...locals(9), 'ann'];
  const out = await Promise.all(users.map((u) => prober.check('alpha.test', ALPHA, u, false)));
  t.strictSame(out.map((o) => answer(o).cls), [...Array(9).fill('rejected'), 'accepted'], 'every recipient answered');
  t.ok(prober.sessionsOpened >= 3 && prober.sessionsOpened <= 5, `${prober.sessionsOpened} sessions`);
  void smtp;
});
