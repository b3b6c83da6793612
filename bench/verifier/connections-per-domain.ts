// Benchmark 3: SMTP connections and wall time for 100 addresses of one domain.
//
// The sim runs in a child process with replyLatencyMs 20 (every SMTP reply, banner included,
// 20 ms late: a round trip to a real MX). One Verifier.verify call gets 100 distinct addresses
// of one domain; the engine should put them all on one session: the domain's MX actor takes
// them in pipelined rounds (many RCPT per transaction, RSET every maxRcptsPerTransaction). Baseline in the same run, same sim: a naive
// validator that opens one connection per address (netSmtpConnector.open, MAIL, RCPT, QUIT;
// 10 at a time). Connections and RCPTs are counted by the sim (statsFor(domain)).

import { pathToFileURL } from 'node:url';
import { MemoryCache } from '@svc/store';
import { Engine, ENGINE_DEFAULTS } from '@svc/engine';
import { Verifier, verifierConfig } from '@svc/verifier';
import { nodeDns, netSmtpConnector } from '@svc/verifier/adapters';
import { SIM_KNOWN_MAILBOXES, type MxStats } from '../../test/sim/index.ts';
import { startChild, type Child } from '../lib/children.ts';
import type { BenchResult, Row } from '../lib/result.ts';
import { fmt, withTimeout } from '../lib/stats.ts';

export const NAME = 'verifier/connections-per-domain';
const HELO = 'verifier.bench.test';
const MAIL_FROM = 'probe@verifier.bench.test';
const LATENCY_MS = 20;
const NAIVE_CONCURRENCY = 10;
const TARGET_SPEEDUP = 5;
const TARGET_MAX_CONNECTIONS = 2;

type SimInfo = { dnsServers: string; smtpPort: number };

interface Scenario {
  domain: string;
  label: string;
  emails: string[];
  /** Expected: does the mailbox exist (RCPT 250)? */
  exists: (email: string) => boolean;
}

interface Outcome {
  wallMs: number;
  smtp: MxStats;
  mxQueries: number;
  sessionsOpened?: number;
  wrong: number;
}

function scenarios(n: number, tag: string): Scenario[] {
  const known = SIM_KNOWN_MAILBOXES.filter((m) => !m.startsWith('"'));
  const mix = [...known.map((k) => `${k}@accept.test`), ...Array.from({ length: n - known.length }, (_, i) => `nobody.${tag}.${i}@accept.test`)];
  return [
    { domain: 'catchall.test', label: `${n} distinct addresses on catchall.test (every RCPT 250)`, emails: Array.from({ length: n }, (_, i) => `user.${tag}.${i}@catchall.test`), exists: () => true },
    { domain: 'accept.test', label: `${n} addresses on accept.test (${known.length} known, ${n - known.length} unknown)`, emails: mix, exists: (e) => !e.startsWith('nobody.') },
  ];
}

function makeVerifier(sim: SimInfo): Verifier {
  const simDns = nodeDns({ servers: [sim.dnsServers], timeoutMs: 2_000, tries: 2 });
  const cache = new MemoryCache();
  return new Verifier({
    dns: simDns,
    probe: new Engine({ dns: simDns, smtp: netSmtpConnector, cache, config: { ...ENGINE_DEFAULTS, smtpPort: sim.smtpPort, heloName: HELO, mailFrom: MAIL_FROM, smtpTimeoutMs: 5_000, smtpRetryDelayMs: 400, idleMs: 0 } }),
    cache,
    config: verifierConfig(),
  });
}

async function counters(sim: Child<SimInfo>, domain: string): Promise<{ smtp: MxStats; mxQueries: number }> {
  const smtp = await sim.request<MxStats>('statsFor', domain);
  const q = await sim.request<Record<string, number>>('dnsQueries');
  return { smtp, mxQueries: q[`${domain}/MX`] ?? 0 };
}

async function viaVerifier(sim: Child<SimInfo>, s: Scenario): Promise<Outcome> {
  await sim.request('resetStats');
  const verifier = makeVerifier(sim.info);
  const t0 = performance.now();
  const verdicts = await withTimeout(verifier.verify(s.emails), 60_000, `verifier on ${s.domain}`);
  const wallMs = performance.now() - t0;
  await withTimeout(verifier.close(), 10_000, 'closing the verifier');
  let wrong = 0;
  for (const v of verdicts) {
    const accepted = v.result === 'valid' || v.result === 'valid_role_based' || (v.result === 'risky' && v.reason_code === 'catch_all');
    if (accepted !== s.exists(v.email) || v.result === 'unknown') wrong++;
  }
  return { wallMs, ...(await counters(sim, s.domain)), sessionsOpened: (verifier.deps.probe as Engine).counters.sessionsOpened, wrong };
}

/** One connection per address: open (EHLO, STARTTLS, EHLO), MAIL, RCPT, QUIT; `concurrency` at a time. */
async function naive(sim: Child<SimInfo>, s: Scenario, concurrency: number): Promise<Outcome> {
  await sim.request('resetStats');
  const dns = nodeDns({ servers: [sim.info.dnsServers], timeoutMs: 2_000, tries: 2 });
  let wrong = 0;
  const t0 = performance.now();
  const work = (async () => {
    const mx = await dns.resolveMail(s.domain);
    if (mx.kind !== 'mx') throw new Error(`${s.domain}: no MX (${mx.kind})`);
    const host = mx.hosts[0]!.exchange;
    const [ip] = await dns.resolveAddresses(host);
    if (!ip) throw new Error(`${host}: no address`);
    let next = 0;
    const worker = async () => {
      while (next < s.emails.length) {
        const email = s.emails[next++]!;
        const open = await netSmtpConnector.open({ host: ip, servername: host, port: sim.info.smtpPort, heloName: HELO, timeoutMs: 5_000 });
        if (!open.ok) {
          wrong++;
          continue;
        }
        const mail = await open.session.send('mail', `MAIL FROM:<${MAIL_FROM}>`);
        const rcpt = mail.ok && mail.reply.code === 250 ? await open.session.send('rcpt', `RCPT TO:<${email}>`) : undefined;
        await open.session.quit();
        const code = rcpt?.ok ? rcpt.reply.code : 0;
        if ((code === 250) !== s.exists(email) || (code !== 250 && code !== 550)) wrong++;
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  })();
  await withTimeout(work, 60_000, `naive validator on ${s.domain}`);
  const wallMs = performance.now() - t0;
  return { wallMs, ...(await counters(sim, s.domain)), wrong };
}

export async function run(opts: { n?: number } = {}): Promise<BenchResult> {
  const n = opts.n ?? 100;
  const warnings: string[] = [];
  const rows: Row[] = [];
  const table: string[] = [];
  const notes: string[] = [];
  const sim = await startChild<SimInfo>('sim-child.ts', { args: [String(LATENCY_MS)] });
  try {
    const tag = Date.now().toString(36);
    for (const s of scenarios(n, tag)) {
      const v = await viaVerifier(sim, s);
      const b = await naive(sim, s, NAIVE_CONCURRENCY);
      const speedup = b.wallMs / v.wallMs;
      notes.push(
        `${s.domain}: the verifier's wall time is ${fmt(v.wallMs / LATENCY_MS)} reply latencies end to end (${v.smtp.mail + v.smtp.rcpt + v.smtp.rset} MAIL/RCPT/RSET on its session); ` +
          `the naive validator's is ${fmt(b.wallMs / LATENCY_MS)} (${n} sessions of ~${fmt((b.wallMs / LATENCY_MS) / (n / NAIVE_CONCURRENCY))} latencies each, ${NAIVE_CONCURRENCY} at a time).`,
      );
      if (v.wrong > 0) warnings.push(`${s.domain}: ${v.wrong} verifier verdicts not as expected`);
      if (b.wrong > 0) warnings.push(`${s.domain}: ${b.wrong} naive answers not as expected`);
      for (const [who, o] of [['Verifier.verify (one call)', v], [`naive, 1 connection/address, ${NAIVE_CONCURRENCY} at a time`, b]] as const) {
        table.push(`| ${s.domain} | ${who} | ${o.smtp.connections} | ${o.smtp.starttls} | ${o.smtp.mail} | ${o.smtp.rcpt} | ${o.smtp.rset} | ${o.smtp.quit} | ${o.mxQueries} | ${o.sessionsOpened ?? '-'} | ${fmt(o.wallMs)} | ${o.wrong} |`);
      }
      rows.push(
        { bench: NAME, metric: `SMTP connections, ${n} addresses, ${s.domain}`, value: v.smtp.connections, unit: 'conns', baseline: { label: 'naive', value: b.smtp.connections }, target: `1-${TARGET_MAX_CONNECTIONS}`, pass: v.smtp.connections >= 1 && v.smtp.connections <= TARGET_MAX_CONNECTIONS },
        { bench: NAME, metric: `RCPT commands, ${s.domain}`, value: v.smtp.rcpt, unit: 'RCPT', baseline: { label: 'naive', value: b.smtp.rcpt } },
        { bench: NAME, metric: `wall time, ${n} addresses, ${s.domain}`, value: v.wallMs, unit: 'ms', baseline: { label: `naive (${NAIVE_CONCURRENCY} parallel conns)`, value: b.wallMs }, ratio: speedup, ratioLabel: 'x faster than naive', target: `≥ ${TARGET_SPEEDUP}x faster`, pass: speedup >= TARGET_SPEEDUP },
      );
    }
    const details = [
      `Sim in a child process, replyLatencyMs ${LATENCY_MS} (every SMTP reply and banner). Fresh Verifier (cold caches, the engine's defaults: maxConnectionsPerMx ${ENGINE_DEFAULTS.maxConnectionsPerMx}, maxRcptsPerTransaction ${ENGINE_DEFAULTS.maxRcptsPerTransaction}); counts from the sim's statsFor(domain) and dnsQueries().`,
      '',
      '| domain | validator | connections | STARTTLS | MAIL | RCPT | RSET | QUIT | MX queries | engine sessions opened | wall ms | unexpected |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...table,
      '',
      ...notes,
    ];
    return { name: NAME, rows, details, warnings };
  } finally {
    await sim.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run();
  console.log(r.details.join('\n'));
  for (const w of r.warnings) console.log(`WARNING: ${w}`);
}
