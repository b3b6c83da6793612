// The one-host tail, on the sim: ONE Postfix instance serving 10 MX hosts (one pool of flow
// tokens for all of them, as Debian's default instance with 10 listeners had in the by-hand check
// of bench/engine/real-postfix.ts), 5 connections per client, a shuffled job of 40 existing and
// 10 unknown mailboxes per domain, run through a Verifier on the production engine settings.
// Once the tokens are spent every new transaction waits in_flow_delay, so sessions are what the
// engine must spend sparingly: a host needs about ceil(rejections / 9) sessions (9 rejections
// per session, below Postfix's soft error limit), and the last host left must not run one
// session per rejection (the tail seen on the real Postfix: a session per one or two unknown
// recipients, each waiting for a flow token, while the other nine hosts were done).
//
// Scaled down from the real run (10,000 addresses, 100 tokens, 25 ms each way): 2,000 addresses,
// 20 tokens, 10 ms each way. in_flow_delay stays 1 s: longer than the engine's slow-reply
// threshold (800 ms beyond the round trip), so a first accepted RCPT's wait taken for Postfix's
// error sleep would show (it did: 225 sessions, most with 1-4 RCPTs, before that was fixed). The
// flow waits, anvil refusals and every session's recipients are counted at the sim. The second
// run has anvil count each connection 50 ms past its end (anvilLagMs).

import t, { type Test } from 'tap';
import { MemoryCache } from '@svc/store';
import { Engine, ENGINE_DEFAULTS } from '@svc/engine';
import { Verifier, verifierConfig } from '@svc/verifier';
import { nodeDns, netSmtpConnector } from '@svc/verifier/adapters';
import { startDns, type Zone } from '../sim/dns.ts';
import { PostfixInstance, Timers, startMx, type RunningMx, type SimSessionRecord, type SmtpContext } from '../sim/smtp.ts';
import { startOnOnePort } from '../helpers/mx-servers.ts';
import { seededRandom } from '../helpers/random.ts';
import { until } from '../helpers/until.ts';

t.setTimeout(120_000);

const HOSTS = 10;
const DOMAINS_PER_HOST = 4;
const EXISTING = 40;
const UNKNOWN = 10;
const TOKENS = 20;
const CONNECTIONS = 5;
const RTT_MS = 20;
const IN_FLOW_DELAY_MS = 1000;
/** The engine's errors per session (ENGINE_DEFAULTS.errorBudget). */
const BUDGET = ENGINE_DEFAULTS.errorBudget;
const mxIp = (h: number) => `127.0.50.${h + 1}`;

interface World {
  dnsServers: string;
  smtpPort: number;
  hosts: string[];
  emails: string[];
  /** The expected verdict of each address. */
  truth: Map<string, string>;
  instance: PostfixInstance;
  sessions: SimSessionRecord[];
  limitEvents(): Record<string, number>;
  close(): Promise<void>;
}

async function startWorld(anvilLagMs: number, seed: number): Promise<World> {
  const hosts = Array.from({ length: HOSTS }, (_, h) => `mx${h + 1}.tail.test`);
  const zone: Zone = { names: new Map(), servfail: new Set(), timeout: new Set() };
  const rnd = seededRandom(seed);
  const emails: string[] = [];
  const truth = new Map<string, string>();
  hosts.forEach((host, h) => {
    zone.names.set(host, { a: [mxIp(h)] });
    for (let j = 0; j < DOMAINS_PER_HOST; j++) {
      const domain = `d${h}-${j}.tail.test`;
      zone.names.set(domain, { mx: [{ exchange: host, priority: 10 }] });
      for (let k = 0; k < EXISTING + UNKNOWN; k++) {
        const email = k < EXISTING ? `p${k}.smith@${domain}` : `x${k}.gone@${domain}`;
        emails.push(email);
        truth.set(email, k < EXISTING ? 'valid/accepted' : 'invalid/mailbox_not_found');
      }
    }
  });
  for (let i = emails.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [emails[i], emails[j]] = [emails[j]!, emails[i]!];
  }
  const sessions: SimSessionRecord[] = [];
  const ctx: SmtpContext = {
    greylistMs: 300,
    tarpitMs: 30_000,
    slowBannerMs: 400,
    replyLatencyMs: RTT_MS,
    latencyModel: 'network',
    errorSleepMs: 1000,
    inFlowDelayMs: IN_FLOW_DELAY_MS,
    timers: new Timers(),
    limitEvents: new Map(),
    sessionLog: (r) => sessions.push(r),
  };
  const instance = new PostfixInstance({ flowTokens: TOKENS });
  const known = Array.from({ length: EXISTING }, (_, k) => `p${k}.smith`);
  const dns = await startDns(zone, 0);
  let servers: RunningMx[] = [];
  let smtpPort = 0;
  try {
      ({ servers, port: smtpPort } = await startOnOnePort((port) =>
        Promise.allSettled(
          hosts.map((host, h) => startMx({ ip: mxIp(h), host, kind: 'postfix-limits', extraMailboxes: known, limits: { connectionsPerClient: CONNECTIONS, inFlowDelay: true, anvilLagMs }, instance }, port, ctx)),
        ),
      ));
  } catch (err) {
    ctx.timers.clear();
    await dns.close();
    throw err;
  }
  return {
    dnsServers: `127.0.0.1:${dns.port}`,
    smtpPort,
    hosts,
    emails,
    truth,
    instance,
    sessions,
    limitEvents: () => Object.fromEntries(ctx.limitEvents),
    close: async () => {
      ctx.timers.clear();
      await Promise.all([...servers.map((s) => s.close()), dns.close()]);
    },
  };
}

interface HostRun {
  sessions: SimSessionRecord[];
  /** Recipients the host must reject: its unknown mailboxes and one catch-all probe per domain. */
  rejections: number;
  /** When its last session ended (ms since the run began). */
  doneMs: number;
}

async function runJob(t: Test, anvilLagMs: number, seed: number) {
  const world = await startWorld(anvilLagMs, seed);
  t.teardown(() => world.close());
  const dns = nodeDns({ servers: [world.dnsServers], timeoutMs: 2_000, tries: 2 });
  const cache = new MemoryCache();
  const engine = new Engine({ dns, smtp: netSmtpConnector, cache, config: { ...ENGINE_DEFAULTS, smtpPort: world.smtpPort, heloName: 'verifier.tail.test', mailFrom: 'probe@verifier.tail.test' } });
  const verifier = new Verifier({ dns, probe: engine, cache, config: verifierConfig() });
  const t0 = Date.now();
  const verdicts = await verifier.run(await verifier.plan(world.emails), { smtpRetries: 0 });
  const wallMs = Date.now() - t0;
  const counters = { ...engine.counters };
  await verifier.close();
  await until(() => world.sessions.filter((s) => !s.refused).length >= counters.sessionsOpened, 5_000, 'every session logged by the sim');
  // Every verdict exact.
  t.strictSame(
    verdicts.filter((v) => `${v.result}/${v.reason_code}` !== world.truth.get(v.email)).map((v) => `${v.email} ${v.result}/${v.reason_code}`),
    [],
    'every verdict the expected one',
  );
  const byHost = new Map<string, HostRun>(world.hosts.map((h) => [h, { sessions: [], rejections: DOMAINS_PER_HOST * (UNKNOWN + 1), doneMs: 0 }]));
  for (const s of world.sessions) {
    const run = byHost.get(s.host)!;
    if (!s.refused) run.sessions.push(s);
    run.doneMs = Math.max(run.doneMs, s.lastRcptMs - t0);
  }
  return { world, t0, wallMs, counters, byHost, events: world.limitEvents() };
}

/** Sessions a host needs at least: its rejections, 9 per session. */
const needed = (run: HostRun) => Math.ceil(run.rejections / BUDGET);

for (const [anvilLagMs, seed] of [
  [0, 1],
  [50, 2],
] as const) {
  t.test(`one instance for 10 hosts, its tokens spent, anvil lag ${anvilLagMs} ms: sessions and transactions near what the error budgets force, none for one or two recipients at the end`, async (t) => {
    const r = await runJob(t, anvilLagMs, seed);
    const lines = [...r.byHost].map(([h, run]) => {
      const s = [...run.sessions].sort((a, b) => a.startMs - b.startMs);
      return `${h}: ${s.length} sessions (at least ${needed(run)}), last RCPT at ${run.doneMs} ms; per session, from its start: accepted/RCPTs (* waited for a flow token) ${s.map((x) => `${x.startMs - r.t0} ms ${x.accepted}/${x.accepted + x.rejected}${x.flowWaits ? '*' : ''}`).join(', ')}`;
    });
    t.comment(`wall ${r.wallMs} ms, engine ${JSON.stringify(r.counters)}, sim events ${JSON.stringify(r.events)}, flow waits ${r.world.instance.flowWaits}\n${lines.join('\n')}`);
    t.equal(r.events['error_sleep'] ?? 0, 0);
    t.notOk(Object.keys(r.events).some((k) => k.endsWith(' error_sleep') || k.endsWith(' hard_limit')), 'the error limits never bit');
    const floor = [...r.byHost.values()].reduce((n, run) => n + needed(run), 0);
    // Each host may end with sessions whose budgets were not spent (the queue ran out under
    // them): one or two per host. Measured: 60-63 transactions, 67-68 on a machine at load 19;
    // the old rule (a session whenever the queue held more than twice the sessions) 70-72, too
    // close to tell apart here (open-policy.test.ts pins the rule itself); the tail this guards
    // against, 225.
    const ceiling = floor + 2 * HOSTS;
    t.ok(r.counters.transactions >= floor && r.counters.transactions <= ceiling, `transactions ${r.counters.transactions} within [${floor}, ${ceiling}]`);
    t.equal(r.world.instance.tokens, 0, 'the flow tokens were spent');
    t.ok(r.world.instance.flowWaits <= ceiling - TOKENS, `flow waits ${r.world.instance.flowWaits} ≤ ${ceiling - TOKENS}`);
    // A session opened just as the last recipients went to the others costs a connection, not a
    // transaction: a few in a run (more under load, when rounds end late), not one per host.
    const empty = [...r.byHost.values()].flatMap((run) => run.sessions.filter((x) => x.accepted + x.rejected === 0));
    t.ok(empty.length <= HOSTS / 2, `${empty.length} sessions without a RCPT`);
    for (const [host, run] of r.byHost) {
      const s = [...run.sessions].sort((a, b) => a.startMs - b.startMs);
      t.ok(s.length >= needed(run) && s.length <= needed(run) + 3, `${host}: ${s.length} sessions, at least ${needed(run)} and at most 3 more`);
      // Past the first wave (the engine's 5 sessions), a session carries at least a budget's worth
      // of recipients; only the last to open may take a smaller remainder.
      const small = s.slice(CONNECTIONS, -1).filter((x) => x.accepted + x.rejected < BUDGET);
      t.strictSame(small.map((x) => `${x.startMs - r.t0} ms: ${x.accepted + x.rejected} RCPTs`), [], `${host}: no small session in the tail`);
    }
  });
}
