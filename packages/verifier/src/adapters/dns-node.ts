// DNS adapter on Node's c-ares resolver, which keeps the answers apart that matter here:
// NXDOMAIN (ENOTFOUND) is a fact about the domain, SERVFAIL and timeouts are not (DESIGN 5).

import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { DnsPort } from '../ports.ts';
import type { MxAnswer, MxHost } from '../types.ts';

export interface NodeDnsOptions {
  /** 'host:port' or 'host' entries; empty = the system resolvers. */
  servers: string[];
  timeoutMs: number;
  tries: number;
}

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
  const resolver = new Resolver({ timeout: opts.timeoutMs, tries: opts.tries });
  if (opts.servers.length > 0) resolver.setServers(opts.servers);

  async function addresses(host: string): Promise<{ ok: true; ips: string[] } | { ok: false; failure: Failure }> {
    const ips: string[] = [];
    let first: Failure | undefined;
    for (const family of [4, 6] as const) {
      try {
        ips.push(...(family === 4 ? await resolver.resolve4(host) : await resolver.resolve6(host)));
      } catch (err) {
        const f = failureOf(err);
        first ??= f;
        if (f.kind === 'nxdomain') break; // the name does not exist: no point asking for AAAA
      }
    }
    if (ips.length > 0) return { ok: true, ips };
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
