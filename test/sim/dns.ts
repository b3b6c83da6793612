// The sim's authoritative DNS server: dns2 over UDP on 127.0.0.1. Answers are plain RFC 1035
// packets so Node's c-ares based `dns.Resolver` maps them to its usual error codes:
// NXDOMAIN (rcode 3) -> ENOTFOUND, SERVFAIL (rcode 2) -> ESERVFAIL, NOERROR without answers
// (NODATA) -> ENODATA, no reply at all -> ETIMEOUT.
//
// Besides SIM_DOMAINS the zone holds the sim's websites (websites.ts): A records of each site and
// its www name, the sites' MX and TXT records. A TXT record longer than 255 bytes goes out as
// several character-strings, which Node's resolveTxt returns as one array per record.

import { Packet, UDPServer, type Resource } from 'dns2';
import { SIM_DNS_IP, SIM_DOMAINS, SIM_TTL } from './domains.ts';
import { SIM_WEBSITES, type SimWebsite } from './websites.ts';

// dns2 exposes these as Packet.RCODE at run time, but its .d.ts does not declare it.
const RCODE = (Packet as unknown as { RCODE: { NOERROR: number; SERVFAIL: number; NXDOMAIN: number } }).RCODE;
const { TYPE, CLASS } = Packet;

interface ZoneName {
  mx?: { exchange: string; priority: number }[];
  a?: string[];
  /** TXT records, one string each; split into 255-byte character-strings when answered. */
  txt?: string[];
}

/** One lower-case name -> what exists there. Names absent from the map are NXDOMAIN. */
export interface Zone {
  names: Map<string, ZoneName>;
  servfail: Set<string>;
  timeout: Set<string>;
}

/** The zone of SIM_DOMAINS plus the websites' names (by default SIM_WEBSITES). */
export function buildZone(websites: readonly SimWebsite[] = SIM_WEBSITES): Zone {
  const names = new Map<string, ZoneName>();
  const servfail = new Set<string>();
  const timeout = new Set<string>();
  const entry = (name: string): ZoneName => {
    const key = name.toLowerCase();
    let e = names.get(key);
    if (!e) names.set(key, (e = {}));
    return e;
  };
  for (const d of SIM_DOMAINS) {
    switch (d.dns) {
      case 'mx':
        entry(d.domain).mx = d.mx.map(m => ({ exchange: m.exchange, priority: m.priority }));
        for (const m of d.mx) if (m.ip) entry(m.exchange).a = [m.ip];
        break;
      case 'null-mx':
        // RFC 7505: a single MX with preference 0 and the root as exchange.
        entry(d.domain).mx = [{ exchange: '.', priority: 0 }];
        break;
      case 'implicit-mx':
        entry(d.domain).a = d.mx.flatMap(m => (m.ip ? [m.ip] : []));
        break;
      case 'nodata':
        entry(d.domain);
        break;
      case 'nxdomain':
        break;
      case 'servfail':
        servfail.add(d.domain);
        break;
      case 'timeout':
        timeout.add(d.domain);
        break;
    }
  }
  // A website may only add to a name: a second, different A or MX list is a mistake in the data.
  const set = <K extends keyof ZoneName>(name: string, key: K, value: NonNullable<ZoneName[K]>): void => {
    const e = entry(name);
    const old = e[key];
    if (old !== undefined && JSON.stringify(old) !== JSON.stringify(value)) throw new Error(`sim zone: ${name} already has other ${key} records`);
    e[key] = value;
  };
  for (const w of websites) {
    entry(w.domain);
    if (w.ip) {
      set(w.domain, 'a', [w.ip]);
      set(`www.${w.domain}`, 'a', [w.ip]);
    }
    if (w.mx) set(w.domain, 'mx', w.mx.map(m => ({ exchange: m.exchange, priority: m.priority })));
    for (const m of w.mx ?? []) if (m.ip) set(m.exchange, 'a', [m.ip]);
    if (w.txt) set(w.domain, 'txt', [...w.txt]);
  }
  return { names, servfail, timeout };
}

/**
 * One TXT record as DNS character-strings: at most 255 bytes each (RFC 1035 3.3.14), cut between
 * characters so every piece is valid UTF-8 on its own.
 */
export function txtChunks(text: string): string[] {
  const chunks: string[] = [];
  let current = '';
  let bytes = 0;
  for (const ch of text) {
    const n = Buffer.byteLength(ch, 'utf8');
    if (bytes + n > 255) {
      chunks.push(current);
      current = '';
      bytes = 0;
    }
    current += ch;
    bytes += n;
  }
  chunks.push(current);
  return chunks;
}

/** The name or one of its parent names is in the set (so mx1.servfail.test fails like servfail.test). */
function underAny(name: string, set: Set<string>): boolean {
  for (let n = name; n; n = n.includes('.') ? n.slice(n.indexOf('.') + 1) : '') if (set.has(n)) return true;
  return false;
}

export interface DnsServer {
  port: number;
  /** Queries received, keyed `name/TYPE` (lower-case name, e.g. `accept.test/MX`). */
  queries: Map<string, number>;
  close(): Promise<void>;
}

const TYPE_NAMES = new Map<number, string>(Object.entries(TYPE).map(([k, v]) => [v, k]));

export async function startDns(zone: Zone, port: number): Promise<DnsServer> {
  const queries = new Map<string, number>();
  const server = new UDPServer({ type: 'udp4' });

  server.on('request', (request, send) => {
    const [question] = request.questions;
    if (!question) return;
    const name = question.name.toLowerCase().replace(/\.$/, '');
    const key = `${name}/${TYPE_NAMES.get(question.type) ?? question.type}`;
    queries.set(key, (queries.get(key) ?? 0) + 1);

    // The "timeout" domain: never answer, the resolver runs into its own timeout.
    if (underAny(name, zone.timeout)) return;

    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    const entry = zone.names.get(name);
    if (underAny(name, zone.servfail)) {
      response.header.rcode = RCODE.SERVFAIL;
    } else if (!entry) {
      response.header.rcode = RCODE.NXDOMAIN;
    } else {
      // Answer with the question's own spelling of the name (c-ares compares it).
      const rr = (type: number, data: Record<string, unknown>): Resource =>
        Object.assign(new Packet.Resource(question.name, type, CLASS.IN, SIM_TTL), data);
      if (question.type === TYPE.MX || question.type === TYPE.ANY) {
        for (const m of entry.mx ?? []) response.answers.push(rr(TYPE.MX, { exchange: m.exchange, priority: m.priority }));
      }
      if (question.type === TYPE.A || question.type === TYPE.ANY) {
        for (const address of entry.a ?? []) response.answers.push(rr(TYPE.A, { address }));
      }
      if (question.type === TYPE.TXT || question.type === TYPE.ANY) {
        // dns2 writes each element of an array `data` as one length-prefixed character-string.
        for (const text of entry.txt ?? []) response.answers.push(rr(TYPE.TXT, { data: txtChunks(text) }));
      }
      // Everything else (AAAA included) exists but is empty: NOERROR, no answers (NODATA).
    }
    send(response).catch(() => {
      // The client went away or the socket closed while answering: nothing to do for UDP.
    });
  });
  server.on('requestError', () => {
    // A malformed packet: drop it, as a real server would.
  });
  server.on('error', () => {
    // Send errors after close; bind errors are reported by the bind promise below.
  });

  // bind() directly: dns2's createServer().listen() never settles when the port is taken.
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.bind(port, SIM_DNS_IP, () => {
      server.off('error', onError);
      resolve();
    });
  });

  return {
    port: server.address().port,
    queries,
    close: () =>
      new Promise<void>(resolve => {
        try {
          server.close(() => resolve());
        } catch {
          resolve(); // already closed
        }
      }),
  };
}
