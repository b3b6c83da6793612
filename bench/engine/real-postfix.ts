// A by-hand check of bench/engine/throughput.ts against a REAL Postfix (Debian's package) behind a
// real 25 ms-each-way link. NOT part of `npm run bench`: it needs root, a local Postfix and the
// world's addresses on 127.0.31.x / 127.0.3.x, and it changes /etc/postfix.
//
// The world is bench/engine/world.ts's (10 postfix MX hosts × 20 domains, 4 catch-all domains on
// an 11th host, ~70% of the other addresses exist), served by ONE Postfix instance:
//
//   1. Postfix (Debian 12: postfix 3.7.11-0+deb12u1):
//        echo 'postfix postfix/main_mailer_type select No configuration' | debconf-set-selections
//        DEBIAN_FRONTEND=noninteractive apt-get install -y postfix
//        node --import tsx bench/engine/real-postfix.ts setup     (writes the files below, runs postmap)
//        postfix start
//      `setup` writes /etc/postfix/main.cf (MAIN_CF below: smtpd_client_connection_count_limit = 5,
//      smtpd_client_connection_rate_limit = 0, smtpd_client_event_limit_exceptions = (empty, or
//      $mynetworks = 127/8 would be exempt), soft/hard error limits, junk limit, in_flow_delay,
//      anvil_rate_time_unit at their defaults, virtual mailbox domains = the world's 204 domains,
//      smtpd_recipient_restrictions = reject_unauth_destination, smtpd_peername_lookup = no,
//      default_process_limit = 200, maillog_file = /var/log/postfix.log), edits master.cf with
//      postconf -M/-F (port 25 off, `127.0.0.1:2626 inet n - n - - smtpd`, no chroot anywhere), and
//      writes /etc/postfix/vdomains (the 204 domains), /etc/postfix/vmailbox (hash: every postfix
//      domain's SIM_KNOWN_MAILBOXES, i.e. jane.doe, john.smith and the 5 roles, as the sim's
//      servers know them; the 4 catch-all domains as `@domain catchall/`) and
//      /etc/postfix/vmailbox.regexp (`/^p[0-9]+\.smith@d[0-9]{3}\.bench\.test$/`: world.ts
//      existingLocal(k) on every postfix domain, as the sim's extraMailboxes), and checks every
//      address of the lists below against them (maps and world truth agree). Unknown users
//      then get `550 5.1.1 <x>: Recipient address rejected: User unknown in virtual mailbox table`.
//   2. The link: a child process of this script (`proxy`) listens on the 11 world MX IPs
//      (127.0.31.1-11) at one port; each accepted connection opens one to 127.0.0.1:2626 from
//      127.0.3.<i> (one client IP per MX host, so Postfix's anvil counts per host as the sim does),
//      75 ms after the accept (SYN, SYN-ACK, ACK: the server sees the client 1.5 round trips after
//      connect(), so the banner lands 100 ms after it, as in the sim's 'network' model), and
//      delays every chunk 25 ms in each direction (chunks delayed, not serialised; order kept), and
//      the FIN / reset likewise.
//   3. DNS: test/sim/dns.ts startDns with world-child.ts's zone, in this process, on a random port.
//   4. Run: node --import tsx bench/engine/real-postfix.ts [run]   (REAL_N=2000, REAL_BIG_N=10000
//      (0 skips), REAL_NAIVE_N=2000, REAL_RESTART=1: `postfix stop; postfix start` before each phase,
//      so each meets a fresh Postfix as the sim's phases meet fresh servers)
//      Phases: an unmeasured warm-up job (300 other addresses), (a) job mode, n addresses, one
//      Verifier (production ENGINE_DEFAULTS, as throughput.ts makeVerifier) with v.run(plan,
//      { smtpRetries: 0 }); (c) naive: one connection per address, 5 at a time per MX host, as
//      throughput.ts naivePhase; (a) again with bigN. Every verdict is checked against world truth;
//      /var/log/postfix.log is counted per phase (connections, anvil refusals, error-limit
//      disconnects, lost connections).
//   5. Afterwards: postfix stop.
//
// Measured once by hand (2 shared cores, load average 1-4.5 from other work; 0 wrong or unknown
// verdicts in every phase, no 421 at the banner, no `too many errors`, no lost connections):
//   REAL_RESTART=each: job 2,000 633/s, naive 50/s (12.6x), job 10,000 870/s
//   REAL_RESTART=once: job 2,000 784/s, naive 47/s (16.6x), job 10,000 685/s (flow tokens drained)
//   once, in_flow_delay = 0 (diagnostic): job 2,000 906/s, naive (500) 126/s, job 10,000 1,318/s
// Where the real Postfix differs from the sim's 'network' model: one Postfix's flow-token pool
// starts with ~200 tokens (measured; the sim gives each of its 10 servers 100) and is not refilled
// without deliveries, so past it every transaction with an accepted RCPT waits in_flow_delay (1 s,
// at that first accepted RCPT, as the sim has it); after 100 junk commands (RSET counts) each one
// more is an error, so 120 MAIL/RCPT/RSET rounds on one session end in `too many errors after RSET`;
// anvil counts the connection down before the client sees the 221.

import { execFileSync, fork } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { loadavg } from 'node:os';
import { MemoryCache } from '@svc/store';
import { Engine, ENGINE_DEFAULTS } from '@svc/engine';
import { Verifier, verifierConfig, type ProbePort, type Verdict } from '@svc/verifier';
import { nodeDns, netSmtpConnector } from '@svc/verifier/adapters';
import { startDns, type Zone } from '../../test/sim/dns.ts';
import { SIM_KNOWN_MAILBOXES } from '../../test/sim/domains.ts';
import { LIMITS, ONE_WAY_MS, POSTFIX_HOSTS, worldAddresses, worldHosts, type WorldAddress } from './world.ts';

const POSTFIX_PORT = 2626;
const LOG = '/var/log/postfix.log';
const HELO = 'verifier.bench.test';
const MAIL_FROM = 'probe@verifier.bench.test';
const CONNS = LIMITS.connectionsPerClient;
const N = Number(process.env.REAL_N ?? 2_000);
const BIG_N = Number(process.env.REAL_BIG_N ?? 10_000);
const NAIVE_N = Number(process.env.REAL_NAIVE_N ?? 2_000);
/** 'each': a fresh Postfix before every phase (as the sim's phases); 'once': before the warm-up only (warm smtpd processes, a shared flow-token pool); '0': never. */
const RESTART_MODE = process.env.REAL_RESTART ?? 'each';
const RESTART = RESTART_MODE === 'each' || RESTART_MODE === '1';
const SEED = 1;
const WARMUP_N = 300;
/** Source IP of the proxy's connections for world host i (0-based). */
const sourceIp = (i: number) => `127.0.3.${i + 1}`;

const lists = () => ({ warm: worldAddresses(WARMUP_N, SEED + 100), job: worldAddresses(N, SEED), big: BIG_N > 0 ? worldAddresses(BIG_N, SEED + 1) : [] });

const MAIN_CF = (domainsFile: string) => `# bench/engine/real-postfix.ts setup: one Postfix for the throughput world (by-hand check)
compatibility_level = 3.6
myhostname = mx.postfix-host.test
mydomain = postfix-host.test
myorigin = $myhostname
mydestination = localhost
mynetworks = 127.0.0.1/32
inet_interfaces = loopback-only
inet_protocols = ipv4
smtpd_banner = $myhostname ESMTP Postfix
biff = no
maillog_file = ${LOG}
smtpd_peername_lookup = no
default_process_limit = 200
smtpd_client_connection_count_limit = ${CONNS}
smtpd_client_connection_rate_limit = 0
smtpd_client_event_limit_exceptions =
smtpd_soft_error_limit = 10
smtpd_hard_error_limit = 20
smtpd_error_sleep_time = 1s
smtpd_junk_command_limit = 100
smtpd_recipient_limit = 1000
in_flow_delay = 1s
smtpd_relay_restrictions =
smtpd_recipient_restrictions = reject_unauth_destination
virtual_mailbox_domains = ${domainsFile}
virtual_mailbox_maps = hash:/etc/postfix/vmailbox, regexp:/etc/postfix/vmailbox.regexp
alias_maps =
alias_database =
virtual_mailbox_base = /var/mail/vhosts
virtual_uid_maps = static:5000
virtual_gid_maps = static:5000
`;

function setup(): void {
  const hosts = worldHosts();
  const { warm, job, big } = lists();
  const lines: string[] = [];
  const domains: string[] = [];
  const known = SIM_KNOWN_MAILBOXES.filter((l) => !l.startsWith('"'));
  for (const h of hosts) {
    for (const d of h.domains) {
      domains.push(d);
      if (h.kind === 'catchall') lines.push(`@${d} catchall/`);
      else for (const l of known) lines.push(`${l}@${d} ${d}/${l}/`);
    }
  }
  // world.ts existingLocal(k) = p<k>.smith exists on every postfix host (the sim's extraMailboxes
  // knownLocals(maxN)): one regexp instead of 200 × maxN hash entries. Every address of the lists
  // must then get its truth from Postfix:
  const re = /^p[0-9]+\.smith@d[0-9]{3}\.bench\.test$/;
  const listed = new Set(lines.map((l) => l.split(' ')[0]));
  for (const a of [...warm, ...job, ...big]) {
    const exists = a.truth.result !== 'invalid';
    const served = a.truth.result === 'risky' || listed.has(a.email) || re.test(a.email);
    if (exists !== served) throw new Error(`setup: the maps disagree with world truth on ${a.email}`);
  }
  writeFileSync('/etc/postfix/vmailbox.regexp', `${re.toString()} pmailboxes/\n`);
  writeFileSync('/etc/postfix/vdomains', domains.join('\n') + '\n');
  writeFileSync('/etc/postfix/vmailbox', lines.join('\n') + '\n');
  writeFileSync('/etc/postfix/main.cf', MAIN_CF('/etc/postfix/vdomains'));
  const run = (...args: string[]) => execFileSync(args[0]!, args.slice(1), { stdio: 'inherit' });
  run('postconf', '-M#', 'smtp/inet');
  run('postconf', '-M', `127.0.0.1:${POSTFIX_PORT}/inet=127.0.0.1:${POSTFIX_PORT} inet n - n - - smtpd`);
  run('postconf', '-F', '*/*/chroot=n');
  run('postmap', '/etc/postfix/vmailbox');
  console.log(`wrote /etc/postfix/{main.cf,vdomains,vmailbox} (${domains.length} domains, ${lines.length} entries); now: postfix start`);
}

// ---------------------------------------------------------------------------------------------
// The link (child process)

function proxy(): void {
  const hosts = worldHosts();
  const later = (f: () => void) => setTimeout(f, ONE_WAY_MS);
  const pipe = (from: net.Socket, to: () => net.Socket | undefined, queue: Buffer[] | null) => {
    from.on('data', (chunk) => later(() => {
      const t = to();
      if (t) t.write(chunk);
      else queue?.push(chunk);
    }));
    from.on('end', () => later(() => to()?.end()));
  };
  const onConnection = (i: number) => (client: net.Socket) => {
    let upstream: net.Socket | undefined;
    const pending: Buffer[] = [];
    let clientGone = false;
    client.setNoDelay(true);
    pipe(client, () => upstream, pending);
    client.on('error', () => {});
    client.on('close', () => {
      clientGone = true;
      later(() => upstream?.destroy());
    });
    // The server's accept 1.5 round trips after the client's connect() (SYN, SYN-ACK, ACK).
    setTimeout(() => {
      if (clientGone) return;
      const up = net.connect({ host: '127.0.0.1', port: POSTFIX_PORT, localAddress: sourceIp(i), allowHalfOpen: true });
      up.setNoDelay(true);
      upstream = up;
      for (const c of pending.splice(0)) up.write(c);
      pipe(up, () => (client.destroyed ? undefined : client), null);
      up.on('error', () => {});
      up.on('close', () => later(() => client.destroy()));
    }, 3 * ONE_WAY_MS);
  };
  const servers: net.Server[] = [];
  const listen = (port: number) =>
    Promise.all(
      hosts.map(
        (h, i) =>
          new Promise<void>((resolve, reject) => {
            const s = net.createServer({ allowHalfOpen: true }, onConnection(i));
            s.once('error', reject);
            s.listen({ host: h.ip, port, backlog: 1024 }, () => resolve());
            servers.push(s);
          }),
      ),
    );
  void (async () => {
    for (let attempt = 0; ; attempt++) {
      const port = 20_000 + Math.floor(Math.random() * 40_000);
      try {
        await listen(port);
        process.send!({ port });
        return;
      } catch (err) {
        for (const s of servers.splice(0)) s.close();
        if (attempt > 50) throw err;
      }
    }
  })();
  process.on('disconnect', () => process.exit(0));
}

// ---------------------------------------------------------------------------------------------
// The measurement

function zone(): Zone {
  const names = new Map<string, { mx?: { exchange: string; priority: number }[]; a?: string[] }>();
  for (const h of worldHosts()) {
    names.set(h.host, { a: [h.ip] });
    for (const d of h.domains) names.set(d, { mx: [{ exchange: h.host, priority: 10 }] });
  }
  return { names, servfail: new Set(), timeout: new Set() };
}

interface Ctx {
  dnsServers: string;
  smtpPort: number;
}

function makeVerifier(ctx: Ctx): { verifier: Verifier; engine: Engine } {
  const dns = nodeDns({ servers: [ctx.dnsServers], timeoutMs: 2_000, tries: 2 });
  const cache = new MemoryCache();
  const engine = new Engine({ dns, smtp: netSmtpConnector, cache, config: { ...ENGINE_DEFAULTS, smtpPort: ctx.smtpPort, heloName: HELO, mailFrom: MAIL_FROM } });
  const probe: ProbePort = { check: (req) => engine.check(req), close: () => engine.close() };
  return { verifier: new Verifier({ dns, probe, cache, config: verifierConfig() }), engine };
}

function check(addrs: readonly WorldAddress[], verdicts: readonly Verdict[]): { wrong: string[]; unknown: number } {
  const truth = new Map(addrs.map((a) => [a.email, a.truth]));
  const wrong: string[] = [];
  let unknown = 0;
  for (const v of verdicts) {
    const t = truth.get(v.email);
    if (v.result === 'unknown') unknown++;
    if (!t || v.result !== t.result || v.reason_code !== t.reason_code) wrong.push(`${v.email}: ${v.result}/${v.reason_code}, expected ${t ? `${t.result}/${t.reason_code}` : '?'}`);
  }
  if (verdicts.length !== addrs.length) wrong.push(`${verdicts.length} verdicts for ${addrs.length} addresses`);
  return { wrong, unknown };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function restartPostfix(): void {
  try {
    execFileSync('postfix', ['stop'], { stdio: 'ignore' });
  } catch {
    /* not running */
  }
  for (let i = 0; i < 50; i++) {
    try {
      execFileSync('postfix', ['status'], { stdio: 'ignore' });
      execFileSync('sleep', ['0.1']);
    } catch {
      break;
    }
  }
  execFileSync('postfix', ['start'], { stdio: 'ignore' });
}

/** Counts in the part of the Postfix log written since `from`. */
function logCounts(from: number): Record<string, number> {
  const size = existsSync(LOG) ? statSync(LOG).size : 0;
  const text = size > from ? readFileSync(LOG).subarray(from).toString('utf8') : '';
  const count = (re: RegExp) => (text.match(re) ?? []).length;
  return {
    connect: count(/smtpd\[\d+\]: connect from /g),
    disconnect: count(/smtpd\[\d+\]: disconnect from /g),
    concurrencyExceeded: count(/Connection concurrency limit exceeded/g),
    tooManyErrors: count(/too many errors after/g),
    lostConnection: count(/lost connection after/g),
    timeout: count(/timeout after/g),
    rejectUnknown: count(/User unknown in virtual mailbox table/g),
    statistics: count(/statistics: max connection count/g),
    warnings: count(/warning:/g),
  };
}
const logSize = () => (existsSync(LOG) ? statSync(LOG).size : 0);

interface PhaseResult {
  label: string;
  n: number;
  wallMs: number;
  rate: number;
  wrong: string[];
  unknown: number;
  log: Record<string, number>;
  extra: Record<string, number | string>;
}

async function jobPhase(ctx: Ctx, label: string, addrs: WorldAddress[]): Promise<PhaseResult> {
  if (RESTART) restartPostfix();
  await sleep(500);
  const from = logSize();
  const { verifier, engine } = makeVerifier(ctx);
  const emails = addrs.map((a) => a.email);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const plan = await verifier.plan(emails);
  const verdicts = await verifier.run(plan, { smtpRetries: 0 });
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const c = engine.counters;
  await verifier.close();
  await sleep(1500);
  return {
    label,
    n: addrs.length,
    wallMs,
    rate: (addrs.length * 1000) / wallMs,
    ...check(addrs, verdicts),
    log: logCounts(from),
    extra: { sessionsOpened: c.sessionsOpened, transactions: c.transactions, rcpts: c.rcpts, requeuedForCap: c.requeuedForCap, requeuedForClosing: c.requeuedForClosing, throttled: c.throttled, slowReplies: c.slowReplies, cpuMs: Math.round((cpu.user + cpu.system) / 1000) },
  };
}

async function naivePhase(ctx: Ctx, addrs: WorldAddress[]): Promise<PhaseResult> {
  if (RESTART) restartPostfix();
  await sleep(500);
  const from = logSize();
  const dns = nodeDns({ servers: [ctx.dnsServers], timeoutMs: 2_000, tries: 2 });
  let wrongN = 0;
  let refusedAtBanner = 0;
  let failures = 0;
  const refusalTexts = new Map<string, number>();
  const t0 = performance.now();
  const route = new Map<string, { host: string; ip: string }>();
  const ipOf = new Map<string, Promise<string>>();
  await Promise.all(
    [...new Set(addrs.map((a) => a.domain))].map(async (domain) => {
      const mx = await dns.resolveMail(domain);
      if (mx.kind !== 'mx') throw new Error(`${domain}: no MX (${mx.kind})`);
      const host = mx.hosts[0]!.exchange.toLowerCase();
      let ip = ipOf.get(host);
      if (!ip) ipOf.set(host, (ip = dns.resolveAddresses(host).then((ips) => ips[0] ?? Promise.reject(new Error(`${host}: no address`)))));
      route.set(domain, { host, ip: await ip });
    }),
  );
  const byHost = new Map<string, WorldAddress[]>();
  for (const a of addrs) {
    const h = route.get(a.domain)!.host;
    let l = byHost.get(h);
    if (!l) byHost.set(h, (l = []));
    l.push(a);
  }
  const wrongList: string[] = [];
  await Promise.all(
    [...byHost].map(async ([host, list]) => {
      let next = 0;
      const worker = async () => {
        while (next < list.length) {
          const a = list[next++]!;
          const { ip } = route.get(a.domain)!;
          let code = 0;
          for (let attempt = 0; attempt < 20; attempt++) {
            const open = await netSmtpConnector.open({ host: ip, servername: host, port: ctx.smtpPort, heloName: HELO, timeoutMs: 10_000 });
            if (!open.ok) {
              if (open.failure.phase === 'greeting' && open.failure.reply?.code === 421) {
                refusedAtBanner++;
                const text = open.failure.reply.lines?.join(' ') ?? '';
                const key = text.replace(/127\.0\.3\.\d+/g, '<ip>');
                refusalTexts.set(key, (refusalTexts.get(key) ?? 0) + 1);
                await sleep(20);
                continue;
              }
              failures++;
              break;
            }
            const mail = await open.session.send('mail', `MAIL FROM:<${MAIL_FROM}>`);
            const rcpt = mail.ok && mail.reply.code === 250 ? await open.session.send('rcpt', `RCPT TO:<${a.email}>`) : undefined;
            await open.session.quit();
            await sleep(5);
            code = rcpt?.ok ? rcpt.reply.code : 0;
            break;
          }
          // The catch-all host accepts everything: a naive validator calls those addresses valid.
          const exists = a.truth.result !== 'invalid';
          if ((code === 250) !== exists || (code !== 250 && code !== 550)) {
            wrongN++;
            if (wrongList.length < 5) wrongList.push(`${a.email}: ${code}`);
          }
        }
      };
      await Promise.all(Array.from({ length: CONNS }, worker));
    }),
  );
  const wallMs = performance.now() - t0;
  await sleep(1500);
  return {
    label: `(c) naive, one connection per address, ${CONNS}/host`,
    n: addrs.length,
    wallMs,
    rate: (addrs.length * 1000) / wallMs,
    wrong: wrongList.concat(wrongN > wrongList.length ? [`… ${wrongN} in all`] : []),
    unknown: 0,
    log: logCounts(from),
    extra: { wrongAnswers: wrongN, refusedAtBanner, failures, refusalTexts: [...refusalTexts].map(([t, k]) => `${k}× "${t}"`).join('; ') },
  };
}

async function main(): Promise<void> {
  const dns = await startDns(zone(), 0);
  const child = fork(new URL(import.meta.url).pathname, ['proxy'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const smtpPort = await new Promise<number>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`proxy exited ${code}`)));
  });
  const ctx: Ctx = { dnsServers: `127.0.0.1:${dns.port}`, smtpPort };
  const { warm, job, big } = lists();
  const version = execFileSync('postconf', ['-h', 'mail_version']).toString().trim();
  console.log(`postfix ${version}; proxy port ${smtpPort}; DNS ${ctx.dnsServers}; load average before: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const results: PhaseResult[] = [];
  const show = (r: PhaseResult) => {
    console.log(`\n${r.label}: ${r.n} addresses in ${r.wallMs.toFixed(0)} ms = ${r.rate.toFixed(0)}/s; wrong ${r.wrong.length}, unknown ${r.unknown}; load ${loadavg()[0]!.toFixed(2)}`);
    console.log(`  engine/client: ${JSON.stringify(r.extra)}`);
    console.log(`  postfix log: ${JSON.stringify(r.log)}`);
    if (r.wrong.length) console.log(`  wrong: ${r.wrong.slice(0, 5).join('; ')}`);
  };
  try {
    if (RESTART_MODE === 'once') restartPostfix();
    show(await jobPhase(ctx, 'warm-up (not measured)', warm));
    const a = await jobPhase(ctx, `(a) job mode, ${job.length} addresses`, job);
    results.push(a);
    show(a);
    if (NAIVE_N > 0) {
      const c = await naivePhase(ctx, job.slice(0, NAIVE_N));
      results.push(c);
      show(c);
      console.log(`\njob mode / naive: ${(a.rate / c.rate).toFixed(2)}x`);
    }
    if (big.length) {
      const b = await jobPhase(ctx, `(a) job mode, ${big.length} addresses`, big);
      results.push(b);
      show(b);
    }
  } finally {
    child.kill();
    await dns.close();
  }
  console.log(`\nload average after: ${loadavg().map((x) => x.toFixed(2)).join(' ')}; ${POSTFIX_HOSTS} postfix hosts behind one Postfix`);
}

const mode = process.argv[2] ?? 'run';
if (mode === 'setup') setup();
else if (mode === 'proxy') proxy();
else await main();
