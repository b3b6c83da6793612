// The simulated internet: one DNS server and one SMTP server per live MX address, all on
// loopback, all SMTP servers on one shared port; plus the websites (websites.ts, web.ts), an HTTP
// and an HTTPS server per site address on two shared ports. See README.md for the domain tables.
//
//   const sim = await startSim();
//   t.teardown(() => sim.close());
//   env: SVC_DNS_SERVERS=sim.dnsServers, SVC_SMTP_PORT=String(sim.smtpPort)
//   websites: fetch on sim.webHttpPort / sim.webHttpsPort, trusting sim.webCaPem

import { domainToASCII } from 'node:url';
import { buildZone, startDns, type DnsServer } from './dns.ts';
import { SIM_DNS_IP, SIM_DOMAINS, SIM_GMAIL_MAILBOXES, SIM_PEOPLE_MAILBOXES, type SimDomain } from './domains.ts';
import { Timers, emptyStats, probeFree, startMx, type MxServerSpec, type MxStats, type RunningMx, type SmtpContext } from './smtp.ts';
import { startProviderMx, type ProviderId } from './providers.ts';
import { startWeb, type WebServer } from './web.ts';
import { SIM_WEBSITES } from './websites.ts';

export * from './domains.ts';
export * from './websites.ts';
export type { MxStats } from './smtp.ts';

export interface SimOptions {
  /** 0 or undefined: a free UDP port chosen by the OS. */
  dnsPort?: number;
  /** 0 or undefined: a random port in 20000-60000 free on every sim address (retried on EADDRINUSE). */
  smtpPort?: number;
  /** Default 300: a greylisted (sender, recipient) pair is accepted once this long has passed since its first attempt. */
  greylistMs?: number;
  /** Default 30000: delay before the tarpit server answers RCPT. */
  tarpitMs?: number;
  /** Default 400: delay before the slow server's 220 banner. */
  slowBannerMs?: number;
  /** Default 0: network latency added to every SMTP reply (banner included). Replies are delayed, commands are not held back: pipelined commands cost one round trip. */
  replyLatencyMs?: number;
  /** Default 'serial': how the raw Postfix-like servers spend replyLatencyMs (see SmtpContext.latencyModel in smtp.ts). */
  latencyModel?: 'serial' | 'network';
  /** Default 1000 (Postfix's smtpd_error_sleep_time): the wait before every reply of a `postfix-limits` session past its soft error limit. */
  errorSleepMs?: number;
  /** Default 1000 (Postfix's in_flow_delay): the wait before the first accepted RCPT of a transaction on a `postfix-limits` server with inFlowDelay. */
  inFlowDelayMs?: number;
  /** 0 or undefined: a free port, the same on every website address. */
  webHttpPort?: number;
  /** 0 or undefined: a free port, the same on every website address. */
  webHttpsPort?: number;
}

export interface Sim {
  /** Value for SVC_DNS_SERVERS, e.g. '127.0.0.1:53531'. */
  dnsServers: string;
  smtpPort: number;
  /** The port every website answers HTTP on. */
  webHttpPort: number;
  /** The port every website answers HTTPS on. */
  webHttpsPort: number;
  /** PEM of the CA, made at start, that signed the websites' certificates. */
  webCaPem: string;
  /** Web requests received, keyed host + path (e.g. `acme-robotics.test/`), HTTP and HTTPS together. */
  webRequests(): Record<string, number>;
  /** Counters per MX IP address (dead addresses included, always zero). */
  stats(): Record<string, MxStats>;
  /** Counters summed over the domain's MX addresses (ASCII or Unicode name; zeros for a domain without MX hosts). */
  statsFor(domain: string): MxStats;
  /** DNS queries received, keyed `name/TYPE` (e.g. `accept.test/MX`); for cache tests. */
  dnsQueries(): Record<string, number>;
  /** How often the `postfix-limits` servers' limits bit, keyed `<mx host> <event>` (error_sleep, hard_limit, banner_421, rcpt_cap, in_flow_delay, anvil_lag). */
  limitEvents(): Record<string, number>;
  /** Zeroes SMTP counters, DNS query counts and web request counts (greylist memory is kept). */
  resetStats(): void;
  /** Closes every server and socket at once, pending tarpits included. Safe to call twice. */
  close(): Promise<void>;
}

const SMTP_PORT_MIN = 20_000;
const SMTP_PORT_MAX = 60_000;
const SMTP_PORT_ATTEMPTS = 50;

type LiveSpec = MxServerSpec & { provider?: ProviderId };

function mxSpecs(): { live: LiveSpec[]; dead: string[] } {
  const live: LiveSpec[] = [];
  const dead: string[] = [];
  for (const d of SIM_DOMAINS) {
    for (const m of d.mx) {
      if (!m.ip || !m.smtp) continue;
      if (m.smtp === 'dead') dead.push(m.ip);
      else
        live.push({
          ip: m.ip,
          host: m.exchange,
          kind: m.smtp,
          ...(d.domain === 'gmail.com' ? { extraMailboxes: SIM_GMAIL_MAILBOXES } : d.domain === 'people.test' ? { extraMailboxes: SIM_PEOPLE_MAILBOXES } : {}),
          ...(m.limits ? { limits: m.limits } : {}),
          ...(m.provider ? { provider: m.provider } : {}),
        });
    }
  }
  return { live, dead };
}

function isAddrInUse(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'EADDRINUSE';
}

/** Starts every MX server on one port: the requested one, or a random one free on all sim addresses. */
async function startAllMx(
  live: LiveSpec[],
  dead: string[],
  requested: number | undefined,
  ctx: SmtpContext,
): Promise<{ port: number; servers: RunningMx[] }> {
  const fixed = requested !== undefined && requested !== 0;
  let lastError: unknown;
  for (let attempt = 0; attempt < (fixed ? 1 : SMTP_PORT_ATTEMPTS); attempt++) {
    const port = fixed ? requested : SMTP_PORT_MIN + Math.floor(Math.random() * (SMTP_PORT_MAX - SMTP_PORT_MIN + 1));
    try {
      // A dead address must stay dead: nothing (say a 0.0.0.0 listener) may answer on it.
      for (const ip of dead) await probeFree(ip, port);
    } catch (err) {
      lastError = err;
      if (isAddrInUse(err) && !fixed) continue;
      throw err;
    }
    const results = await Promise.allSettled(
      live.map(spec => (spec.kind === 'provider' && spec.provider ? startProviderMx({ ...spec, provider: spec.provider }, port, ctx) : startMx(spec, port, ctx))),
    );
    const servers = results.flatMap(r => (r.status === 'fulfilled' ? [r.value] : []));
    const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (!failure) return { port, servers };
    await Promise.all(servers.map(s => s.close()));
    lastError = failure.reason;
    if (!isAddrInUse(failure.reason) || fixed) throw failure.reason;
  }
  throw new Error(`sim: no free SMTP port after ${SMTP_PORT_ATTEMPTS} attempts`, { cause: lastError });
}

function findDomain(domain: string): SimDomain | undefined {
  const name = domain.trim().replace(/\.$/, '').toLowerCase();
  const ascii = domainToASCII(name) || name;
  return SIM_DOMAINS.find(d => d.domain === ascii);
}

export async function startSim(opts: SimOptions = {}): Promise<Sim> {
  const ctx: SmtpContext = {
    greylistMs: opts.greylistMs ?? 300,
    tarpitMs: opts.tarpitMs ?? 30_000,
    slowBannerMs: opts.slowBannerMs ?? 400,
    replyLatencyMs: opts.replyLatencyMs ?? 0,
    ...(opts.latencyModel ? { latencyModel: opts.latencyModel } : {}),
    errorSleepMs: opts.errorSleepMs ?? 1000,
    inFlowDelayMs: opts.inFlowDelayMs ?? 1000,
    timers: new Timers(),
    limitEvents: new Map<string, number>(),
  };
  const { live, dead } = mxSpecs();

  const dns: DnsServer = await startDns(buildZone(), opts.dnsPort ?? 0);
  let servers: RunningMx[];
  let smtpPort: number;
  try {
    ({ port: smtpPort, servers } = await startAllMx(live, dead, opts.smtpPort, ctx));
  } catch (err) {
    ctx.timers.clear();
    await dns.close();
    throw err;
  }
  let web: WebServer;
  try {
    web = await startWeb(SIM_WEBSITES, { http: opts.webHttpPort ?? 0, https: opts.webHttpsPort ?? 0 });
  } catch (err) {
    ctx.timers.clear();
    await Promise.all([...servers.map(s => s.close()), dns.close()]);
    throw err;
  }

  const statsByIp = new Map<string, MxStats>();
  for (const ip of dead) statsByIp.set(ip, emptyStats());
  for (const s of servers) statsByIp.set(s.ip, s.stats);

  let closing: Promise<void> | undefined;

  return {
    dnsServers: `${SIM_DNS_IP}:${dns.port}`,
    smtpPort,
    webHttpPort: web.httpPort,
    webHttpsPort: web.httpsPort,
    webCaPem: web.caPem,
    webRequests() {
      return Object.fromEntries(web.requests);
    },
    stats() {
      return Object.fromEntries([...statsByIp].map(([ip, s]) => [ip, { ...s }]));
    },
    statsFor(domain) {
      const total = emptyStats();
      const ips = new Set((findDomain(domain)?.mx ?? []).flatMap(m => (m.ip ? [m.ip] : [])));
      for (const ip of ips) {
        const s = statsByIp.get(ip);
        if (!s) continue;
        for (const key of Object.keys(total) as (keyof MxStats)[]) total[key] += s[key];
      }
      return total;
    },
    dnsQueries() {
      return Object.fromEntries(dns.queries);
    },
    limitEvents() {
      return Object.fromEntries(ctx.limitEvents);
    },
    resetStats() {
      for (const s of statsByIp.values()) Object.assign(s, emptyStats());
      ctx.limitEvents.clear();
      dns.queries.clear();
      web.requests.clear();
    },
    close() {
      closing ??= (async () => {
        ctx.timers.clear();
        await Promise.all([...servers.map(s => s.close()), dns.close(), web.close()]);
      })();
      return closing;
    },
  };
}
