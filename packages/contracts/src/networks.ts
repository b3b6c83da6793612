// IP networks in CIDR notation (`127.0.0.0/8`, `::1/128`): SVC_OUTBOUND_ALLOW_NETWORKS names the
// networks besides public addresses that the service's outbound HTTP requests may reach (the net
// guard of packages/egress/src/net-guard.ts). Pure parsing and matching: no DNS, no I/O.

import { isIP } from 'node:net';

export interface Network {
  family: 4 | 6;
  /** The network address's bytes (4 or 16), host bits cleared. */
  bytes: number[];
  /** Prefix length. */
  bits: number;
  /** As written, for messages. */
  text: string;
}

/** The 4 or 16 bytes of an IP address (IPv6 zone id ignored), or undefined if it is not one. */
export function ipBytes(ip: string): { family: 4 | 6; bytes: number[] } | undefined {
  const bare = ip.split('%')[0]!;
  const family = isIP(bare);
  if (family === 4) return { family, bytes: bare.split('.').map(Number) };
  if (family !== 6) return undefined;
  let s = bare;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number];
    s = `${s.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = s.includes('::') ? (s.split('::') as [string, string]) : [s, undefined];
  const groups = (part: string): number[] => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const h = groups(head);
  const t = tail === undefined ? [] : groups(tail);
  const all = tail === undefined ? h : [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t];
  return { family: 6, bytes: all.flatMap((g) => [g >> 8, g & 0xff]) };
}

/** Whether the first `bits` bits of `bytes` equal those of `prefix`. */
export function inPrefix(bytes: readonly number[], prefix: readonly number[], bits: number): boolean {
  for (let i = 0; i < bits; i += 8) {
    const want = prefix[i >> 3] ?? 0;
    const mask = bits - i >= 8 ? 0xff : (0xff << (8 - (bits - i))) & 0xff;
    if (((bytes[i >> 3] ?? 0) & mask) !== (want & mask)) return false;
  }
  return true;
}

/** `a.b.c.d/n` or `x::y/n` (a bare address is its /32 or /128), or undefined when it is not one. */
export function parseNetwork(text: string): Network | undefined {
  const m = /^([^/\s]+)(?:\/(\d{1,3}))?$/.exec(text.trim());
  if (!m) return undefined;
  const ip = ipBytes(m[1]!);
  if (!ip || m[1]!.includes('%')) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  const bits = m[2] === undefined ? max : Number(m[2]);
  if (!Number.isInteger(bits) || bits > max || (m[2] !== undefined && m[2].length > 1 && m[2].startsWith('0'))) return undefined;
  const bytes = ip.bytes.map((b, i) => {
    const left = bits - i * 8;
    return left >= 8 ? b : left <= 0 ? 0 : b & ((0xff << (8 - left)) & 0xff);
  });
  return { family: ip.family, bytes, bits, text: text.trim() };
}

/** Whether IP address `ip` lies in one of `networks` (an IPv4-mapped IPv6 address is matched as its IPv4 address too). */
export function inNetworks(ip: string, networks: readonly Network[]): boolean {
  const a = ipBytes(ip);
  if (!a) return false;
  const candidates = [a];
  if (a.family === 6 && inPrefix(a.bytes, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 96)) candidates.push({ family: 4, bytes: a.bytes.slice(12) });
  return networks.some((n) => candidates.some((c) => c.family === n.family && inPrefix(c.bytes, n.bytes, n.bits)));
}
