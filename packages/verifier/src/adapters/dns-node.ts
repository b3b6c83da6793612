// DNS adapter on Node's c-ares resolver, which keeps the answers apart that matter here:
// NXDOMAIN (ENOTFOUND) is a fact about the domain, SERVFAIL and timeouts are not.

import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { DnsPort } from '../ports.ts';
import { Semaphore } from '../semaphore.ts';
import type { MxAnswer, MxHost } from '../types.ts';

export interface NodeDnsOptions {
  /** 'host:port' or 'host' entries; empty = the system resolvers. */
  servers: string[];
  timeoutMs: number;
  tries: number;
  /**
   * Queries on the wire at once (SVC_DNS_CONCURRENCY, default 64); the rest wait their turn here.
   * A job over tens of thousands of domains otherwise sends them all at once, and a resolver
   * drops what overflows its queue: 20,000 new domains at once made 20-40% of them `dns_timeout`
   * on the simulated resolver (bench/cluster/throughput.ts, CLUSTER_BENCH_BIG).
   */
  maxInFlight?: number;
}

export const DEFAULT_DNS_IN_FLIGHT = 64;

/** A failed lookup, already in the MX answer's terms (ENODATA is "no records" of that type). */
type Failure = Extract<MxAnswer, { kind: 'nxdomain' | 'no_records' | 'servfail' | 'timeout' | 'error' }>;

function failureOf(err: unknown): Failure {
  const code = (err as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOTFOUND':
      return { kind: 'nxdomain' };
    case 'ENODATA':
      return { kind: 'no_records' };
    case 'ESERVFAIL':
      return { kind: 'servfail' };
    case 'ETIMEOUT':
      return { kind: 'timeout' };
    default:
      return { kind: 'error', detail: code ?? String(err) };
  }
}

export function nodeDns(opts: NodeDnsOptions): DnsPort {
  const raw = new Resolver({ timeout: opts.timeoutMs, tries: opts.tries });
  if (opts.servers.length > 0) raw.setServers(opts.servers);
  const gate = new Semaphore(opts.maxInFlight ?? DEFAULT_DNS_IN_FLIGHT);
  const resolver = {
    resolveMx: (name: string) => gate.run(() => raw.resolveMx(name)),
    resolve4: (name: string) => gate.run(() => raw.resolve4(name)),
    resolve6: (name: string) => gate.run(() => raw.resolve6(name)),
  };

  async function addresses(host: string): Promise<{ ok: true; ips: string[] } | { ok: false; failure: Failure }> {
    // A and AAAA at once: one round trip to the resolver, not two (a job's first sessions to a
    // host wait for this).
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const ips = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    if (ips.length > 0) return { ok: true, ips };
    const first = v4.status === 'rejected' ? failureOf(v4.reason) : v6.status === 'rejected' ? failureOf(v6.reason) : undefined;
    return { ok: false, failure: first ?? { kind: 'no_records' } };
  }

  return {
    async resolveMail(domain) {
      let records: { exchange: string; priority: number }[];
      try {
        records = await resolver.resolveMx(domain);
      } catch (err) {
        const f = failureOf(err);
        if (f.kind !== 'no_records') return f;
        // RFC 5321 5.1: no MX records, so the domain's own A/AAAA is the implicit MX.
        const a = await addresses(domain);
        if (a.ok) return { kind: 'implicit', hosts: [{ exchange: domain, priority: 0 }] };
        return a.failure;
      }
      // RFC 7505: a single MX of "." (c-ares gives exchange '') with preference 0 means "no mail".
      const isNull = (r: { exchange: string }) => r.exchange === '' || r.exchange === '.';
      const hosts: MxHost[] = records
        .filter((r) => !isNull(r))
        .map((r) => ({ exchange: r.exchange.toLowerCase().replace(/\.$/, ''), priority: r.priority }))
        .sort((x, y) => x.priority - y.priority || x.exchange.localeCompare(y.exchange));
      if (hosts.length === 0) return records.length > 0 ? { kind: 'null_mx' } : { kind: 'no_records' };
      return { kind: 'mx', hosts };
    },
    async resolveAddresses(host) {
      // An MX that names an address instead of a host (RFC 5321 5.1 forbids it, some zones do it anyway).
      if (isIP(host)) return [host];
      const a = await addresses(host);
      return a.ok ? a.ips : [];
    },
  };
}
