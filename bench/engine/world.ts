// The world of bench/engine/throughput.ts, as data shared by the bench (the truth each verdict is
// checked against, the bound) and its sim child (the DNS zone and the SMTP servers it starts).
// Deterministic: the same (n, seed) gives the same addresses in the same order.
//
// Like the real-Postfix measurement: 10 Postfix MX hosts with Postfix's defaults for a
// client that never sends DATA (soft/hard error limits 10/20 with the 1 s error sleep, junk
// commands 100, in_flow_delay with a pool of 100 flow tokens, recipient limit 1000) and 5
// connections allowed per client; 200 domains, 20 per host; plus a few catch-all domains on one
// more host. About 70% of the addresses exist (a few of them role mailboxes), 30% are unknown.

import type { DnsPort } from '@svc/verifier';
import type { MxLimits } from '../../test/sim/domains.ts';
import { seededRandom as prng } from '../../test/helpers/random.ts';

/** One-way network latency the world models. */
export const ONE_WAY_MS = 25;
/**
 * What the sim injects per reply: the whole round trip. The sim delays replies, not commands, so
 * a command written at once and answered `replyLatencyMs` later is one round trip of 2 × 25 ms.
 * The raw (`postfix-limits`) servers take one command at a time, each `replyLatencyMs` after the
 * previous reply: a pipelined batch of RCPTs still costs one round trip per RCPT, the issue's
 * "one RCPT per 50 ms round trip".
 */
export const RTT_MS = 2 * ONE_WAY_MS;
export const POSTFIX_HOSTS = 10;
export const DOMAINS_PER_HOST = 20;
export const CATCHALL_DOMAINS = 4;
/** Share of the addresses on the catch-all domains. */
export const CATCHALL_SHARE = 0.03;
/** Share of the other addresses whose mailbox exists. */
export const EXISTING_SHARE = 0.7;
/** Share of the existing addresses that are role mailboxes (at most one of each role per domain). */
export const ROLE_SHARE = 0.04;
const ROLES = ['info', 'support', 'sales', 'admin', 'postmaster'] as const;

/** Postfix's defaults (postconf(5)), with the per-client connection cap of the world. */
export const LIMITS: Required<Omit<MxLimits, 'recipientLimitCode'>> = {
  softErrors: 10,
  hardErrors: 20,
  junkCommands: 100,
  recipientsPerTransaction: 1000,
  connectionsPerClient: 5,
  inFlowDelay: true,
  flowTokens: 100,
  anvilLagMs: 0,
};
/** Postfix's smtpd_error_sleep_time and in_flow_delay. */
export const ERROR_SLEEP_MS = 1000;
export const IN_FLOW_DELAY_MS = 1000;

export interface WorldHost {
  host: string;
  ip: string;
  kind: 'postfix-limits' | 'catchall';
  limits?: MxLimits;
  domains: string[];
}

export type Truth = { result: 'valid'; reason_code: 'accepted' } | { result: 'valid_role_based'; reason_code: 'role_account' } | { result: 'invalid'; reason_code: 'mailbox_not_found' } | { result: 'risky'; reason_code: 'catch_all' } | { result: 'invalid'; reason_code: 'nxdomain' };

export interface WorldAddress {
  email: string;
  domain: string;
  host: string;
  truth: Truth;
}

const ip = (n: number) => `127.0.31.${n}`;
const pad = (n: number) => String(n).padStart(3, '0');

export function worldHosts(): WorldHost[] {
  const hosts: WorldHost[] = [];
  for (let h = 0; h < POSTFIX_HOSTS; h++) {
    hosts.push({
      host: `mx${h + 1}.postfix-host.test`,
      ip: ip(h + 1),
      kind: 'postfix-limits',
      limits: { ...LIMITS },
      // Domains d000..d199: domain i on host i % 10, so every host has 20.
      domains: Array.from({ length: DOMAINS_PER_HOST }, (_, j) => `d${pad(j * POSTFIX_HOSTS + h)}.bench.test`),
    });
  }
  hosts.push({
    host: 'mx.catchall-host.test',
    ip: ip(POSTFIX_HOSTS + 1),
    kind: 'catchall',
    domains: Array.from({ length: CATCHALL_DOMAINS }, (_, i) => `catchall${i}.bench.test`),
  });
  return hosts;
}

/** Local part of the k-th address when its mailbox exists (every postfix host knows all of them). */
export const existingLocal = (k: number) => `p${k}.smith`;
const unknownLocal = (k: number) => `x${k}.gone`;

/** The extra mailboxes of every postfix host for lists of up to `maxN` addresses. */
export function knownLocals(maxN: number): string[] {
  return Array.from({ length: maxN }, (_, k) => existingLocal(k));
}

/**
 * `n` distinct addresses, shuffled. The non-catch-all ones go round-robin over the 200 domains,
 * so every postfix host gets the same share (±1).
 */
export function worldAddresses(n: number, seed = 1): WorldAddress[] {
  const rnd = prng(seed);
  const hosts = worldHosts();
  const postfix = hosts.filter((h) => h.kind === 'postfix-limits');
  const catchall = hosts.find((h) => h.kind === 'catchall')!;
  const byDomain = postfix.flatMap((h) => h.domains.map((d) => ({ domain: d, host: h.host }))).sort((a, b) => a.domain.localeCompare(b.domain));
  const rolesUsed = new Map<string, number>();
  const out: WorldAddress[] = [];
  const nCatchall = Math.round(n * CATCHALL_SHARE);
  for (let k = 0; k < n; k++) {
    if (k < nCatchall) {
      const domain = catchall.domains[k % catchall.domains.length]!;
      out.push({ email: `${rnd() < EXISTING_SHARE ? existingLocal(k) : unknownLocal(k)}@${domain}`, domain, host: catchall.host, truth: { result: 'risky', reason_code: 'catch_all' } });
      continue;
    }
    const { domain, host } = byDomain[(k - nCatchall) % byDomain.length]!;
    if (rnd() >= EXISTING_SHARE) {
      out.push({ email: `${unknownLocal(k)}@${domain}`, domain, host, truth: { result: 'invalid', reason_code: 'mailbox_not_found' } });
      continue;
    }
    const used = rolesUsed.get(domain) ?? 0;
    if (rnd() < ROLE_SHARE && used < ROLES.length) {
      rolesUsed.set(domain, used + 1);
      out.push({ email: `${ROLES[used]}@${domain}`, domain, host, truth: { result: 'valid_role_based', reason_code: 'role_account' } });
      continue;
    }
    out.push({ email: `${existingLocal(k)}@${domain}`, domain, host, truth: { result: 'valid', reason_code: 'accepted' } });
  }
  // Fisher-Yates with the same generator.
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

export interface HostLoad {
  host: string;
  addresses: number;
  domains: number;
  /** RCPTs a correct validator must see rejected: unknown mailboxes + one catch-all probe per domain. */
  rejections: number;
}

/** Work per host for a list: what the bound is computed from. */
export function hostLoads(addrs: readonly WorldAddress[]): HostLoad[] {
  const hosts = worldHosts();
  const loads = new Map(hosts.map((h) => [h.host, { host: h.host, addresses: 0, domains: 0, rejections: 0, seen: new Set<string>() }]));
  for (const a of addrs) {
    const l = loads.get(a.host)!;
    l.addresses++;
    if (a.truth.result === 'invalid') l.rejections++;
    if (!l.seen.has(a.domain)) {
      l.seen.add(a.domain);
      l.domains++;
      if (hosts.find((h) => h.host === a.host)!.kind === 'postfix-limits') l.rejections++; // the catch-all probe
    }
  }
  return [...loads.values()].map(({ seen: _s, ...l }) => l);
}

/**
 * What a naive validator with a DNS cache asks before it connects: one MX per domain, one address
 * per MX host. The first MX and its address for each domain, and the addresses grouped by that host.
 */
export async function routeByMx(
  dns: Pick<DnsPort, 'resolveMail' | 'resolveAddresses'>,
  addrs: readonly WorldAddress[],
): Promise<{ route: Map<string, { host: string; ip: string }>; byHost: Map<string, WorldAddress[]> }> {
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
  return { route, byHost };
}
