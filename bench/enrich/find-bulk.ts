// Benchmark: the email finder (find/bulk) of 100 contacts on 10 MX hosts, against the naive way
// of proving candidates (one SMTP session per candidate address).
//
// The world of bench/engine/throughput.ts runs in a child process (bench/engine/world-child.ts):
// 10 MX hosts with Postfix's limits (error limits, in_flow_delay, 5 connections per client), 20
// domains each, every reply RTT_MS late (the `network` latency model). Contact k is "P<k> Smith"
// at domain d<k> (so the 100 contacts spread over the 10 hosts), and their mailbox p<k>.smith
// exists there. Both sides make the same candidates (the finder's patterns, SVC_FINDER_MAX_CANDIDATES
// of them) and must name the same address:
// - finder: @svc/enrich's NativeFinder on a Verifier with the production engine (ENGINE_DEFAULTS),
//   10 contacts at a time (find/bulk's largest max_concurrent); candidates of the contacts of one
//   host share its sessions and transactions;
// - naive: one connection per candidate (EHLO, STARTTLS, EHLO, MAIL, RCPT, QUIT), one host's
//   candidates after one another, the 10 hosts at once (the client's per-host limit stays at 1).
// Fresh MX servers (full flow-token pools) before each side. Sessions and RCPTs are the servers'
// counts.

import { pathToFileURL } from 'node:url';
import { MemoryCache } from '@svc/store';
import { Engine, ENGINE_DEFAULTS } from '@svc/engine';
import { Verifier, verifierConfig, Semaphore } from '@svc/verifier';
import { nodeDns, netSmtpConnector } from '@svc/verifier/adapters';
import { candidates, NativeFinder, type PatternEvidence } from '@svc/enrich';
import type { MxStats } from '../../test/sim/smtp.ts';
import { startChild, type Child } from '../lib/children.ts';
import type { BenchResult, Row } from '../lib/result.ts';
import { fmt, withTimeout } from '../lib/stats.ts';
import { POSTFIX_HOSTS, RTT_MS, worldHosts } from '../engine/world.ts';

export const NAME = 'enrich/find-bulk';
const HELO = 'verifier.bench.test';
const MAIL_FROM = 'probe@verifier.bench.test';
const CONTACTS = 100;
const MAX_CANDIDATES = 8;
const MAX_CONCURRENT = 10;
const TARGET_SPEEDUP = 5;

type WorldInfo = { dnsServers: string; smtpPort: number };

interface Contact {
  first: string;
  last: string;
  domain: string;
  host: string;
  /** The address that exists. */
  truth: string;
}

function contacts(): Contact[] {
  const hosts = worldHosts().filter((h) => h.kind === 'postfix-limits');
  return Array.from({ length: CONTACTS }, (_, k) => {
    const domain = `d${String(k).padStart(3, '0')}.bench.test`;
    const host = hosts.find((h) => h.domains.includes(domain))!.host;
    return { first: `P${k}`, last: 'Smith', domain, host, truth: `p${k}.smith@${domain}` };
  });
}

interface Side {
  wallMs: number;
  sessions: number;
  rcpts: number;
  right: number;
  wrong: number;
}

async function totals(world: Child<WorldInfo>): Promise<{ sessions: number; rcpts: number }> {
  const stats = await world.request<Record<string, MxStats>>('stats');
  let sessions = 0;
  let rcpts = 0;
  for (const s of Object.values(stats)) {
    sessions += s.connections;
    rcpts += s.rcpt;
  }
  return { sessions, rcpts };
}

/** No evidence at first; proven patterns are counted as the service's table would. */
function memoryEvidence(): PatternEvidence {
  const m = new Map<string, Record<string, number>>();
  return {
    counts: async (d) => ({ ...(m.get(d) ?? {}) }),
    confirm: async (d, p) => {
      const c = m.get(d) ?? {};
      c[p] = (c[p] ?? 0) + 1;
      m.set(d, c);
    },
  };
}

async function viaFinder(world: Child<WorldInfo>, list: Contact[]): Promise<Side> {
  await world.request('restart');
  const dns = nodeDns({ servers: [world.info.dnsServers], timeoutMs: 2_000, tries: 2 });
  const cache = new MemoryCache();
  const verifier = new Verifier({ dns, probe: new Engine({ dns, smtp: netSmtpConnector, cache, config: { ...ENGINE_DEFAULTS, smtpPort: world.info.smtpPort, heloName: HELO, mailFrom: MAIL_FROM } }), cache, config: verifierConfig() });
  const finder = new NativeFinder({ prober: verifier, evidence: memoryEvidence(), maxCandidates: MAX_CANDIDATES });
  const gate = new Semaphore(MAX_CONCURRENT);
  const t0 = performance.now();
  const answers = await withTimeout(
    Promise.all(list.map((c) => gate.run(() => finder.find({ first_name: c.first, last_name: c.last, domain: c.domain }, AbortSignal.timeout(300_000))))),
    600_000,
    'the finder',
  );
  const wallMs = performance.now() - t0;
  await withTimeout(verifier.close(), 20_000, 'closing the verifier');
  const right = answers.filter((a, i) => a.found && a.value.email === list[i]!.truth).length;
  return { wallMs, ...(await totals(world)), right, wrong: list.length - right };
}

async function naive(world: Child<WorldInfo>, list: Contact[]): Promise<Side> {
  await world.request('restart');
  const dns = nodeDns({ servers: [world.info.dnsServers], timeoutMs: 2_000, tries: 2 });
  const byHost = new Map<string, Contact[]>();
  for (const c of list) byHost.set(c.host, [...(byHost.get(c.host) ?? []), c]);
  const found = new Map<Contact, string | undefined>();
  const t0 = performance.now();
  await withTimeout(
    Promise.all(
      [...byHost.entries()].map(async ([host, cs]) => {
        const [ip] = await dns.resolveAddresses(host);
        if (!ip) throw new Error(`${host}: no address`);
        for (const c of cs) {
          let answer: string | undefined;
          for (const cand of candidates(c.first, c.last, c.domain, { max: MAX_CANDIDATES })) {
            const open = await netSmtpConnector.open({ host: ip, servername: host, port: world.info.smtpPort, heloName: HELO, timeoutMs: 10_000 });
            if (!open.ok) continue;
            const mail = await open.session.send('mail', `MAIL FROM:<${MAIL_FROM}>`);
            const rcpt = mail.ok && mail.reply.code === 250 ? await open.session.send('rcpt', `RCPT TO:<${cand.email}>`) : undefined;
            await open.session.quit();
            if (rcpt?.ok && rcpt.reply.code === 250 && answer === undefined) answer = cand.email;
          }
          found.set(c, answer);
        }
      }),
    ),
    900_000,
    'the naive finder',
  );
  const wallMs = performance.now() - t0;
  const right = list.filter((c) => found.get(c) === c.truth).length;
  return { wallMs, ...(await totals(world)), right, wrong: list.length - right };
}

export async function run(): Promise<BenchResult> {
  const warnings: string[] = [];
  const world = await startChild<WorldInfo>('engine/world-child.ts', { args: [String(RTT_MS), String(CONTACTS), 'network'] });
  try {
    const list = contacts();
    const finder = await viaFinder(world, list);
    const base = await naive(world, list);
    for (const [label, s] of [['finder', finder], ['naive', base]] as const) if (s.wrong > 0) warnings.push(`${label}: ${s.wrong} of ${CONTACTS} contacts not answered with their address`);
    const speedup = base.wallMs / finder.wallMs;
    const rows: Row[] = [
      {
        bench: NAME,
        metric: `find/bulk, ${CONTACTS} contacts on ${POSTFIX_HOSTS} MX hosts`,
        value: finder.wallMs / 1000,
        unit: 's',
        baseline: { label: 'one session per candidate', value: base.wallMs / 1000 },
        ratio: speedup,
        ratioLabel: 'x faster',
        target: `≥ ${TARGET_SPEEDUP}x faster`,
        pass: speedup >= TARGET_SPEEDUP && finder.wrong === 0,
      },
      { bench: NAME, metric: 'SMTP sessions, finder', value: finder.sessions, unit: 'sessions', baseline: { label: 'naive', value: base.sessions }, ratio: base.sessions / Math.max(1, finder.sessions), ratioLabel: 'x fewer' },
    ];
    const details = [
      `World of bench/engine/world.ts in a child process (${POSTFIX_HOSTS} MX hosts with Postfix's limits, every reply ${RTT_MS} ms late, network model); contact k is "P<k> Smith" at d<k>.bench.test (10 per host), whose p<k>.smith exists. Up to ${MAX_CANDIDATES} candidates per contact on both sides; the finder runs ${MAX_CONCURRENT} contacts at a time on the production engine, the naive side one session per candidate (one at a time per host, the hosts at once). Fresh MX servers before each side.`,
      '',
      '| side | wall s | SMTP sessions | RCPTs | right | wrong |',
      '|---|---|---|---|---|---|',
      `| finder (NativeFinder on the engine) | ${fmt(finder.wallMs / 1000)} | ${finder.sessions} | ${finder.rcpts} | ${finder.right} | ${finder.wrong} |`,
      `| naive (one session per candidate) | ${fmt(base.wallMs / 1000)} | ${base.sessions} | ${base.rcpts} | ${base.right} | ${base.wrong} |`,
      '',
      `Speed-up ${fmt(speedup)}x; ${fmt(base.sessions / Math.max(1, finder.sessions))}x fewer sessions.`,
    ];
    return { name: NAME, rows, details, warnings };
  } finally {
    await world.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run();
  console.log(r.details.join('\n'));
  for (const w of r.warnings) console.log(`WARNING: ${w}`);
}
