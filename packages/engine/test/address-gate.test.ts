// Sessions and connection limits per server ADDRESS: MX names that resolve to one address share
// its slots and its learnt limit; an idle warm session gives its slot to another name; a 421 at
// the banner is waited out within the deadline; a slot is free only once the server can have
// counted the session down; a host that is down makes its recipients wait for its window's end.
// The fake server counts connections per address (fakes.ts AddressCap); time is a ManualClock.

import t from 'tap';
import type { MxHost, ProbeOutcome } from '@svc/verifier';
import { ManualClock } from '../src/clock.ts';
import { Engine } from '../src/engine.ts';
import { MemoryMxThrottle } from '../src/throttle.ts';
import { ENGINE_DEFAULTS, type EngineConfig } from '../src/types.ts';
import { FakeDns, FakeSmtp, MemoryCache, PROBE_PREFIX, probeLocals, reply, testConfig, type AddressCap, type FakeServer } from './fakes.ts';

const CONFIG: EngineConfig = testConfig({ maxConnectionsPerMx: 5, idleMs: 2_000 });

/** Eight tenant names of one provider, all on one address. */
const SHARED_IP = '192.0.2.50';
const TENANTS = Array.from({ length: 8 }, (_, i) => `tenant${i}`);
const tenantMx = (tenant: string) => `${tenant}-test.mail.protection.example`;

function setup(o: { servers: Record<string, FakeServer>; addresses: Record<string, string[]>; caps?: Record<string, AddressCap>; config?: Partial<EngineConfig> }) {
  const clock = new ManualClock();
  const smtp = new FakeSmtp(o.servers, clock, o.caps ?? {});
  const engine = new Engine({ dns: new FakeDns(o.addresses), smtp, cache: new MemoryCache(), clock, config: { ...CONFIG, ...o.config }, randomLocal: probeLocals(), closeCheckMs: 600_000 });
  const check = (domain: string, local: string, hosts: MxHost[], deadlineMs?: number) => engine.check({ domain, hosts, local, utf8: false, retries: 0, ...(deadlineMs !== undefined ? { deadlineMs } : {}) });
  /** Answered-at times (clock ms since the start) of a check. */
  const t0 = clock.now();
  const timed = (p: Promise<ProbeOutcome>) => p.then((o) => ({ o, at: clock.now() - t0 }));
  const closed = async (t: Tap) => {
    await clock.run(engine.close(), 60_000);
    t.ok(engine.idle, 'closed: the engine is idle');
    t.equal(engine.counters.closeIdleByCheck, 0, 'closed: told by its actors');
    await clock.advance(1_000);
    t.equal(smtp.activeTotal, 0, 'closed: every session ended');
  };
  return { clock, smtp, engine, check, timed, closed, t0 };
}
type Tap = Pick<typeof t, 'ok' | 'equal'>;

const reply550 = reply('550 5.1.1 <x>: Recipient address rejected: User unknown in virtual mailbox table');
const cls = (o: ProbeOutcome) => (o.kind === 'answer' ? o.cls : o.kind === 'failure' ? `failure:${o.failure.phase}:${o.failure.kind}:${o.failure.reply?.code ?? ''}` : o.kind);

t.test('8 MX names on one address with a cap of 2: one count, one learnt limit; all 16 recipients answered right, never more than 2 connections', async (t) => {
  const servers: Record<string, FakeServer> = {};
  const addresses: Record<string, string[]> = {};
  for (const tenant of TENANTS) {
    // Unknown mailboxes are 550 5.1.1 (the probe's too): real ones 250.
    servers[tenantMx(tenant)] = { latencyMs: 20, handle: (c) => (c.verb === 'RCPT' && (c.local?.startsWith('nobody') || c.local?.startsWith(PROBE_PREFIX)) ? reply550 : undefined) };
    addresses[tenantMx(tenant)] = [SHARED_IP];
  }
  const { clock, smtp, engine, check, closed, t0 } = setup({ servers, addresses, caps: { [SHARED_IP]: { maxSessions: 2, countDownLagMs: 30 } } });
  const jobs = TENANTS.flatMap((tenant) => [check(`${tenant}.test`, 'alice', [{ exchange: tenantMx(tenant), priority: 0 }]), check(`${tenant}.test`, 'nobody', [{ exchange: tenantMx(tenant), priority: 0 }])]);
  const outcomes = await clock.run(Promise.all(jobs));
  t.strictSame(outcomes.map(cls), TENANTS.flatMap(() => ['accepted', 'rejected']), 'every recipient answered, none unknown');
  t.equal(smtp.peakByIp.get(SHARED_IP), 2, 'the server never counted more than 2 connections (lag included)');
  t.equal(engine.gateState(SHARED_IP)?.limit, 2, 'the address learnt its cap once, for every name');
  for (const tenant of TENANTS) t.equal(engine.mxState(tenantMx(tenant))?.limit, 2, `${tenant} sees the address's limit`);
  t.equal(smtp.refusedByIp.get(SHARED_IP), 3, 'only the first burst ran into the cap: 5 opens (the configured limit), 3 refused at the banner');
  t.equal(engine.counters.bannerRefusals, 3);
  t.ok(engine.counters.slotWaits >= 6, `names waited for a slot (${engine.counters.slotWaits})`);
  t.ok(engine.counters.idleYields >= 1, `warm sessions gave their slots to waiting names (${engine.counters.idleYields})`);
  const took = clock.now() - t0;
  t.ok(took < CONFIG.idleMs, `done in ${took} ms: no warm session sat on a slot for its idleMs while another name waited`);
  await closed(t);
});

t.test('an idle warm session gives its slot up (QUIT) when another name on its address waits', async (t) => {
  const a = 'mx-a.example', b = 'mx-b.example';
  const { clock, smtp, engine, check, timed, closed } = setup({
    servers: { [a]: { latencyMs: 10 }, [b]: { latencyMs: 10 } },
    addresses: { [a]: [SHARED_IP], [b]: [SHARED_IP] },
    config: { maxConnectionsPerMx: 1, idleMs: 60_000 },
  });
  const first = await clock.run(timed(check('a.test', 'alice', [{ exchange: a, priority: 0 }])));
  t.equal(cls(first.o), 'accepted');
  t.equal(engine.gateState(SHARED_IP)?.open, 1, "a's session stays warm, holding the address's one slot");
  await clock.advance(1_000);
  t.equal(smtp.sessions[0]!.quits, 0, 'still warm a second later: nobody else wanted the slot');
  const second = await clock.run(timed(check('b.test', 'bob', [{ exchange: b, priority: 0 }])));
  t.equal(cls(second.o), 'accepted');
  t.equal(smtp.sessions[0]!.quits, 1, "a's idle session ended with QUIT");
  t.equal(engine.counters.idleYields, 1);
  t.ok(second.at - first.at < 2_000, `b was answered ${second.at - first.at - 1_000} ms after it asked, not after a's idleMs (60 s)`);
  t.equal(smtp.peakByIp.get(SHARED_IP), undefined, '(no cap at the fake: the engine kept to its limit of 1 by itself)');
  t.equal(Math.max(...smtp.sessions.map((s) => s.id)) + 1, 2, 'two sessions in all');
  await closed(t);
});

t.test('a 421 at the banner backs off (250 ms, doubling) and waits for a slot within the deadline, then succeeds', async (t) => {
  // Another client of ours (or anyone on our egress address) holds both slots of the address for 3 s.
  const host = 'mx.busy.example';
  const { clock, smtp, engine, check, timed, closed } = setup({
    servers: { [host]: {} },
    addresses: { [host]: [SHARED_IP] },
    caps: { [SHARED_IP]: { maxSessions: 2 } },
  });
  smtp.countedByIp.set(SHARED_IP, 2);
  clock.setTimeout(() => smtp.countedByIp.set(SHARED_IP, 0), 3_000);
  const r = await clock.run(timed(check('busy.test', 'carol', [{ exchange: host, priority: 0 }], 30_000)));
  t.equal(cls(r.o), 'accepted', 'the 421s cost no verdict');
  t.equal(r.at, 3_750, 'tried at 0, 250, 750, 1750 and 3750 ms: the fifth open got in');
  t.equal(smtp.refusedByIp.get(SHARED_IP), 4);
  t.equal(engine.counters.bannerRefusals, 4);
  t.equal(engine.gateState(SHARED_IP)?.limit, 5, 'nothing of ours was there: the limit did not come down');
  await closed(t);
});

t.test('a 421 at the banner past the deadline: answered with the refusal when the next try would come too late', async (t) => {
  const host = 'mx.busy.example';
  const { clock, smtp, check, timed, closed } = setup({ servers: { [host]: {} }, addresses: { [host]: [SHARED_IP] }, caps: { [SHARED_IP]: { maxSessions: 0, banner: '421 4.3.2 Service not available, closing transmission channel' } } });
  const mx = [{ exchange: host, priority: 0 }];
  const [sync, job, long] = await clock.run(Promise.all([timed(check('busy.test', 'dave', mx, 1_000)), timed(check('busy.test', 'erin', mx)), timed(check('busy.test', 'fred', mx, 30_000))]));
  t.equal(cls(sync.o), 'failure:greeting:reply:421', 'the sync request: the 421 itself');
  t.equal(sync.at, 750, 'after the try at 750 ms (the next, at 1750 ms, is past its 1 s deadline)');
  t.equal(cls(job.o), 'failure:greeting:reply:421', 'the job recipient (no deadline): the 421 too');
  t.strictSame([cls(long.o), long.at], ['failure:greeting:reply:421', 7_750], 'a sync request with a 30 s deadline: refusedWaitMs bounds it too');
  // One open at a time (four recipients with the probe: one session absorbs them, open-policy.ts),
  // each refusal backing off.
  const tries = [0, 250, 750, 1_750, 3_750, 7_750];
  t.equal(ENGINE_DEFAULTS.refusedWaitMs, 10_000);
  t.equal(job.at, 7_750, `tried at ${tries.join(', ')} ms: the next (15,750) is past refusedWaitMs (10 s) from its arrival`);
  t.equal(smtp.refusedByIp.get(SHARED_IP), tries.length);
  await closed(t);
});

t.test('anvil counts a session ended without a 221 down 80 ms after it closed: the slot cool-down keeps every open under the cap', async (t) => {
  // Sessions retire after 2 rejections each, so the engine reconnects all the time; the server
  // hangs up on QUIT without its 221.
  const run = async (slotCooldownMs: number, quitUnanswered = true) => {
    const host = 'mx.anvil.example';
    const s = setup({
      servers: { [host]: { latencyMs: 5, quitUnanswered, handle: (c) => (c.verb === 'RCPT' && (c.local?.startsWith('nobody') || c.local?.startsWith(PROBE_PREFIX)) ? reply550 : undefined) } },
      addresses: { [host]: [SHARED_IP] },
      caps: { [SHARED_IP]: { maxSessions: 2, countDownLagMs: 80 } },
      config: { maxConnectionsPerMx: 2, errorBudget: 2, idleMs: 0, slotCooldownMs },
    });
    const locals = Array.from({ length: 40 }, (_, i) => (i % 2 ? `nobody${i}` : `real${i}`));
    const outcomes = await s.clock.run(Promise.all(locals.map((l) => s.check('anvil.test', l, [{ exchange: host, priority: 0 }]))));
    return { s, locals, outcomes };
  };
  const { s, locals, outcomes } = await run(ENGINE_DEFAULTS.slotCooldownMs);
  t.equal(ENGINE_DEFAULTS.slotCooldownMs, 200);
  t.strictSame(outcomes.map(cls), locals.map((l) => (l.startsWith('nobody') ? 'rejected' : 'accepted')));
  t.ok(s.smtp.sessions.length >= 10, `${s.smtp.sessions.length} sessions, one after another on 2 slots`);
  t.equal(s.smtp.refusedByIp.get(SHARED_IP) ?? 0, 0, 'no 421 at the banner');
  t.equal(s.engine.counters.bannerRefusals, 0);
  t.equal(s.smtp.peakByIp.get(SHARED_IP), 2);
  await s.closed(t);
  // The control: without the cool-down the same run does hit the lag (so the test can fail).
  const control = await run(0);
  t.ok((control.s.smtp.refusedByIp.get(SHARED_IP) ?? 0) > 0, `without a cool-down: ${control.s.smtp.refusedByIp.get(SHARED_IP)} refusals`);
  t.strictSame(control.outcomes.map(cls), locals.map((l) => (l.startsWith('nobody') ? 'rejected' : 'accepted')), 'and still no verdict lost to them');
  await control.s.closed(t);
  // A session whose QUIT the server answered is counted down already: its slot is free at once,
  // whatever the cool-down (5 s here would show in the run's time: 10+ sessions on 2 slots).
  const answered = await run(200, false);
  t.strictSame(answered.outcomes.map(cls), locals.map((l) => (l.startsWith('nobody') ? 'rejected' : 'accepted')));
  t.equal(answered.s.smtp.refusedByIp.get(SHARED_IP) ?? 0, 0, 'no 421 at the banner');
  t.ok(answered.s.smtp.sessions.length >= 10, `${answered.s.smtp.sessions.length} sessions`);
  t.ok(answered.s.clock.now() - answered.s.t0 < 5_000, `no cool-down after a 221: done at ${answered.s.clock.now() - answered.s.t0} ms`);
  await answered.s.closed(t);
});

t.test('a host that is down: recipients routed to it meanwhile wait for the end of its window, then one connection is tried', async (t) => {
  const host = 'mx.down.example';
  const ip = '192.0.2.60';
  let up = false;
  const { clock, smtp, check, timed, closed } = setup({
    servers: { [host]: { get refuseIps() { return up ? [] : [ip]; } } as FakeServer, 'mx2.down.example': {} },
    addresses: { [host]: [ip], 'mx2.down.example': ['192.0.2.61'] },
    config: { hostDownMs: 10_000 },
  });
  const hosts = [{ exchange: host, priority: 0 }];
  const opens = () => smtp.opens.filter((o) => o.host === ip).length;
  const first = await clock.run(timed(check('down.test', 'frank', hosts)));
  t.equal(cls(first.o), 'failure:connect:connection:', 'the first recipient: the refused connection, at once');
  t.equal(first.at, 0);
  t.equal(opens(), 1);
  // Meanwhile, more recipients of the one-MX domain, and one of a domain with a second MX host.
  await clock.advance(1_000);
  const waiting = [timed(check('down.test', 'grace', hosts)), timed(check('down.test', 'heidi', hosts))];
  const failover = await clock.run(timed(check('two.test', 'ivan', [{ exchange: host, priority: 0 }, { exchange: 'mx2.down.example', priority: 10 }])));
  t.equal(cls(failover.o), 'accepted', 'a domain with another MX fails over at once');
  t.equal(failover.at, 1_000);
  const short = await clock.run(timed(check('down.test', 'hank', hosts, 5_000)));
  t.strictSame([cls(short.o), short.at], ['failure:connect:connection:', 1_000], 'one whose deadline comes before the window ends: at once');
  let answered = 0;
  for (const w of waiting) void w.then(() => answered++);
  await clock.advance(8_999);
  t.equal(answered, 0, 'nobody answered inside the window');
  t.equal(opens(), 1, 'and no connection tried');
  const late = await clock.run(Promise.all(waiting));
  t.strictSame(late.map((l) => [cls(l.o), l.at]), [['failure:connect:connection:', 10_000], ['failure:connect:connection:', 10_000]], 'one more try at the window\'s end, refused: answered then');
  t.equal(opens(), 2, 'one connection for both');
  // Down again: this time the server is back when the window ends.
  up = true;
  const back = await clock.run(timed(check('down.test', 'judy', hosts)));
  t.strictSame([cls(back.o), back.at], ['accepted', 20_000], 'the next window\'s end: the server answers');
  await closed(t);
});

t.test('the shared throttle is asked per address, and its permit goes back with the slot: after the QUIT reply and the close', async (t) => {
  const clock = new ManualClock();
  const events: string[] = [];
  const inner = new MemoryMxThrottle(5);
  const throttle = {
    acquire: async (key: string, signal?: AbortSignal) => {
      const release = await inner.acquire(key, signal);
      events.push(`acquire ${key} @${clock.now() - t0}`);
      return () => {
        events.push(`release ${key} @${clock.now() - t0}`);
        release();
      };
    },
  };
  const t0 = clock.now();
  const names = ['mx-c.example', 'mx-d.example'];
  const smtp = new FakeSmtp(Object.fromEntries(names.map((n) => [n, { latencyMs: 10 }])), clock);
  const engine = new Engine({ dns: new FakeDns(Object.fromEntries(names.map((n) => [n, [SHARED_IP]]))), smtp, cache: new MemoryCache(), clock, throttle, config: { ...CONFIG, idleMs: 0 }, randomLocal: probeLocals(), closeCheckMs: 600_000 });
  const o = await clock.run(engine.check({ domain: 'c.test', hosts: [{ exchange: names[0]!, priority: 0 }], local: 'kim', utf8: false, retries: 0 }));
  t.equal(cls(o), 'accepted');
  await clock.advance(1_000);
  const quit = smtp.log.find((c) => c.verb === 'QUIT')!.at - t0;
  t.strictSame(events, [`acquire ${SHARED_IP} @0`, `release ${SHARED_IP} @${quit + 10}`], `QUIT written at ${quit} ms, released with its reply 10 ms later (a 221: no cool-down)`);
  t.equal(inner.active(SHARED_IP), 0);
  await clock.run(engine.close());
});

t.test('close() never waits for an address slot: a name waiting behind another name\'s busy session is answered', async (t) => {
  const a = 'mx-e.example', b = 'mx-f.example';
  const { clock, smtp, engine, check, closed } = setup({
    servers: { [a]: { delay: (c) => (c.verb === 'RCPT' ? 300 : 0) }, [b]: {} },
    addresses: { [a]: [SHARED_IP], [b]: [SHARED_IP] },
    config: { maxConnectionsPerMx: 1, idleMs: 0 },
  });
  const slow = check('e.test', 'liam', [{ exchange: a, priority: 0 }]);
  await clock.advance(10);
  const waiting = check('f.test', 'mia', [{ exchange: b, priority: 0 }]);
  await clock.advance(10);
  t.equal(engine.gateState(SHARED_IP)?.waiting, 1, "b waits for the address's one slot");
  await closed(t);
  const [o1, o2] = await clock.run(Promise.all([slow, waiting]));
  t.equal(cls(o1), 'accepted', 'the busy session finished its recipient');
  t.equal(cls(o2), 'failure:connect:connection:', 'the waiting one: a connection failure (unknown), not a hang');
  t.match((o2 as { failure: { detail: string } }).failure.detail, /no SMTP session permit for mx-f\.example: no session permit free for 192\.0\.2\.50/);
  t.equal(engine.gateState(SHARED_IP)?.waiting, 0);
  t.equal(smtp.opens.filter((o) => o.servername === b).length, 0, 'b never connected');
});

t.test('a back-off timer that fires early by the clock the gate reads (Node fires by the loop\'s cached time) is armed again: the waiting recipient is still tried and answered', async (t) => {
  /** Every timer longer than 10 ms fires 3 ms early, as Node's can by Date.now() under load. */
  class EarlyClock extends ManualClock {
    override setTimeout(fn: () => void, ms: number) {
      return super.setTimeout(fn, ms > 10 ? ms - 3 : ms);
    }
  }
  const host = 'mx.busy.example';
  const clock = new EarlyClock();
  const smtp = new FakeSmtp({ [host]: {} }, clock, { [SHARED_IP]: { maxSessions: 0, banner: '421 4.3.2 Service not available, closing transmission channel' } });
  const engine = new Engine({ dns: new FakeDns({ [host]: [SHARED_IP] }), smtp, cache: new MemoryCache(), clock, config: CONFIG, randomLocal: probeLocals(), closeCheckMs: 600_000 });
  const t0 = clock.now();
  const o = await clock.run(engine.check({ domain: 'busy.test', hosts: [{ exchange: host, priority: 0 }], local: 'erin', utf8: false, retries: 0 }));
  t.strictSame([cls(o), clock.now() - t0], ['failure:greeting:reply:421', 7_750], 'tried at the back-off\'s end each time, not before, and answered');
  t.equal(smtp.refusedByIp.get(SHARED_IP), 6, 'at 0, 250, 750, 1,750, 3,750 and 7,750 ms');
  await clock.run(engine.close(), 60_000);
  t.ok(engine.idle);
});

t.test("Exim's daemon-wide cap shared by two MX hosts: every recipient answered, and sooner than when the same 421s name our own address", async (t) => {
  // Two hosts on two addresses, one server behind both that takes 3 sessions from everyone at
  // once. Its daemon-wide wording lowers an address's limit for 1 s; the per-client wording (the
  // same refusals otherwise) for the configured cool-down (10 s).
  const run = async (banner: string) => {
    const hosts = { 'mx.a.example': '192.0.2.60', 'mx.b.example': '192.0.2.61' };
    const servers: Record<string, FakeServer> = {};
    for (const h of Object.keys(hosts)) servers[h] = { latencyMs: 20, handle: (c) => (c.verb === 'RCPT' && (c.local?.startsWith('nobody') || c.local?.startsWith(PROBE_PREFIX)) ? reply550 : undefined) };
    const s = setup({ servers, addresses: Object.fromEntries(Object.entries(hosts).map(([h, ip]) => [h, [ip]])) });
    s.smtp.serverWide = { maxSessions: 3, banner };
    const checks = Object.keys(hosts).flatMap((h, k) => Array.from({ length: 150 }, (_, i) => s.check(`d${k}-${i % 15}.test`, i % 5 === 0 ? `nobody${i}` : `alice${i}`, [{ exchange: h, priority: 0 }])));
    const outcomes = await s.clock.run(Promise.all(checks.map((c) => s.timed(c))));
    const at = Math.max(...outcomes.map((o) => o.at));
    const classes = new Set(outcomes.map((o) => cls(o.o)));
    await s.closed(t);
    return { at, classes, refused: s.smtp.refusedServerWide };
  };
  const wide = await run('421 mx.example Too many concurrent SMTP connections; please try again later.');
  const perClient = await run('421 mx.example Too many concurrent SMTP connections from this IP address; please try again later.');
  t.strictSame([...wide.classes].sort(), ['accepted', 'rejected'], 'daemon-wide: every recipient answered, none failed');
  t.strictSame([...perClient.classes].sort(), ['accepted', 'rejected'], 'per-client: likewise');
  t.ok(wide.refused > 0 && perClient.refused > 0, `the cap bit in both (${wide.refused} / ${perClient.refused} refusals)`);
  t.ok(wide.at < perClient.at, `the daemon-wide wording finished sooner: ${wide.at} ms against ${perClient.at} ms`);
});

/** Two MX hosts on two addresses, served by one daemon that takes `maxSessions` sessions from everyone at once and refuses the next with `banner`. */
function oneDaemon(ips: [string, string], o: { maxSessions: number; banner: string; idleMs: number }) {
  const a = 'mx-a.example', b = 'mx-b.example';
  const s = setup({ servers: { [a]: { latencyMs: 10 }, [b]: { latencyMs: 10 } }, addresses: { [a]: [ips[0]], [b]: [ips[1]] }, config: { idleMs: o.idleMs } });
  s.smtp.serverWide = { maxSessions: o.maxSessions, banner: o.banner };
  return { ...s, a, b };
}

t.test("Exim's daemon-wide cap full of our idle sessions: its 421 ends the warm sessions of every address, the refused host gets in at its next try", async (t) => {
  // One server behind two addresses that takes 1 session from everyone at once. a's session
  // answers and stays warm (idleMs 60 s) on the server's only slot; b's open is refused.
  const run = async (banner: string) => {
    const s = oneDaemon(['192.0.2.70', '192.0.2.71'], { maxSessions: 1, banner, idleMs: 60_000 });
    const { a, b } = s;
    const first = await s.clock.run(s.timed(s.check('a.test', 'alice', [{ exchange: a, priority: 0 }])));
    const second = await s.clock.run(s.timed(s.check('b.test', 'bob', [{ exchange: b, priority: 0 }], 120_000)), 120_000);
    const out = { first: cls(first.o), second: cls(second.o), waited: second.at - first.at, aQuits: s.smtp.sessions[0]!.quits, yields: s.engine.counters.idleYields, refused: s.smtp.refusedServerWide };
    await s.closed(t);
    return out;
  };
  const wide = await run('421 mx.example Too many concurrent SMTP connections; please try again later.');
  t.strictSame([wide.first, wide.second], ['accepted', 'accepted']);
  t.equal(wide.aQuits, 1, "a's idle session ended with QUIT when the server said it was full");
  t.equal(wide.yields, 1);
  t.equal(wide.refused, 1, 'one refusal: b got in at its next try');
  t.ok(wide.waited < 1_000, `b answered ${wide.waited} ms after a, within its first back-off`);
  // The per-client wording speaks of our sessions on b's own address (none): a's warm session is
  // left alone, and b waits its refusals out (refusedWaitMs) and is answered with the 421.
  const perClient = await run('421 mx.example Too many concurrent SMTP connections from this IP address; please try again later.');
  t.strictSame([perClient.first, perClient.second], ['accepted', 'failure:greeting:reply:421']);
  t.equal(perClient.yields, 0, 'no idle session released');
  t.equal(perClient.aQuits, 0, "a's session still warm");
});

t.test("a host backing off Exim's daemon-wide 421 tries again as soon as a session of ours ends anywhere, not at its back-off's end", async (t) => {
  // One server slot for everyone, behind two addresses. a's session holds it for its one
  // recipient (no idle wait); b's open is refused, backs off 250 ms, and gets in when a's ends.
  const run = async (banner: string) => {
    const s = oneDaemon(['192.0.2.72', '192.0.2.73'], { maxSessions: 1, banner, idleMs: 0 });
    const { a, b } = s;
    const [first, second] = await s.clock.run(Promise.all([s.timed(s.check('a.test', 'alice', [{ exchange: a, priority: 0 }])), s.timed(s.check('b.test', 'bob', [{ exchange: b, priority: 0 }], 60_000))]));
    const out = { classes: [cls(first.o), cls(second.o)], aAt: first.at, bAt: second.at, refused: s.smtp.refusedServerWide };
    await s.closed(t);
    return out;
  };
  const wide = await run('421 mx.example Too many concurrent SMTP connections; please try again later.');
  t.strictSame(wide.classes, ['accepted', 'accepted']);
  t.equal(wide.refused, 1, 'b refused once, then in at its next try');
  t.ok(wide.bAt < 250, `b answered at ${wide.bAt} ms (a at ${wide.aAt}): its retry came with the end of a's session, before its 250 ms back-off`);
  const perClient = await run('421 mx.example Too many concurrent SMTP connections from this IP address; please try again later.');
  t.strictSame(perClient.classes, ['accepted', 'accepted']);
  t.ok(perClient.bAt >= 250, `per-client wording: b waited its back-off out (${perClient.bAt} ms)`);
});

t.test("a daemon-wide 421 while we hold sessions on the address: the limit it lowered comes back when a session of ours ends anywhere", async (t) => {
  // Two server slots for everyone. a holds one for a single recipient; b, with 60 recipients,
  // holds the other and is refused a second. When a's session ends, b opens its second at once
  // instead of after the 1 s cool-down (the per-client wording: 10 s, so b finishes with one).
  const run = async (banner: string) => {
    const s = oneDaemon(['192.0.2.74', '192.0.2.75'], { maxSessions: 2, banner, idleMs: 0 });
    const { a, b } = s;
    const checks = [s.check('a.test', 'alice', [{ exchange: a, priority: 0 }]), ...Array.from({ length: 60 }, (_, i) => s.check('b.test', `bob${i}`, [{ exchange: b, priority: 0 }], 60_000))];
    const outcomes = await s.clock.run(Promise.all(checks));
    const bStarts = s.smtp.sessions.filter((x) => x.server === b).map((x) => (x.commands[0]?.at ?? Infinity) - s.t0).sort((x, y) => x - y);
    const out = { classes: [...new Set(outcomes.map(cls))], bStarts, refused: s.smtp.refusedServerWide };
    await s.closed(t);
    return out;
  };
  const wide = await run('421 mx.example Too many concurrent SMTP connections; please try again later.');
  t.strictSame(wide.classes, ['accepted']);
  t.ok(wide.refused >= 1, `b was refused (${wide.refused})`);
  t.ok(wide.bStarts.length >= 2 && wide.bStarts[1]! - wide.bStarts[0]! < 200, `b's second session began ${wide.bStarts[1]! - wide.bStarts[0]!} ms after its first (sessions began at ${wide.bStarts.join(', ')} ms)`);
  const perClient = await run('421 mx.example Too many concurrent SMTP connections from this IP address; please try again later.');
  t.strictSame(perClient.classes, ['accepted']);
  t.equal(perClient.bStarts.filter((at) => at < 1_000).length, 1, `per-client wording: one session of b's in its first second (began at ${perClient.bStarts.join(', ')} ms)`);
});

t.test('an address that refused every open for refusedWaitMs: later arrivals get its 421 at once (one waits for the next try), until a session opens again', async (t) => {
  const host = 'mx.busy.example';
  const { clock, smtp, check, timed, closed } = setup({ servers: { [host]: {} }, addresses: { [host]: [SHARED_IP] }, caps: { [SHARED_IP]: { maxSessions: 0, banner: '421 4.3.2 Service not available, closing transmission channel' } } });
  const mx = [{ exchange: host, priority: 0 }];
  const first = await clock.run(timed(check('busy.test', 'alice', mx, 60_000)));
  t.strictSame([cls(first.o), first.at], ['failure:greeting:reply:421', 7_750], 'the first waits the back-off out (refusedWaitMs)');
  await clock.advance(3_000); // 10,750 ms: the streak is older than refusedWaitMs
  const tries = smtp.refusedByIp.get(SHARED_IP);
  // The domain's catch-all probe goes first and waits for the gate's next try; the recipients behind it get the refusal at once.
  const later = await clock.run(Promise.all(['bob', 'carol', 'dave'].map((l) => timed(check('busy.test', l, mx, 60_000)))));
  t.strictSame(later.map((l) => [cls(l.o), l.at]), [['failure:greeting:reply:421', 10_750], ['failure:greeting:reply:421', 10_750], ['failure:greeting:reply:421', 10_750]], 'later arrivals: the refusal at once');
  t.equal(smtp.refusedByIp.get(SHARED_IP), tries, 'without a connection of their own');
  // The server takes sessions again: the gate's next try (for the probe, which waits) opens one, the streak ends.
  smtp.addressCaps[SHARED_IP]!.maxSessions = 5;
  await clock.advance(10_000);
  t.equal(smtp.refusedByIp.get(SHARED_IP), tries, 'the next try got in');
  const after = await clock.run(timed(check('busy.test', 'erin', mx, 60_000)));
  t.strictSame([cls(after.o), after.at], ['accepted', 20_750], 'and the streak is over: accepted at once');
  await closed(t);
});
