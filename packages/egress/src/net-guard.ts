// Where the service may send a request on a customer's behalf (docs/decisions/webhooks.md,
// "Private targets"): a job's webhook_url is chosen by the customer, and the service POSTs to it
// from inside the operator's network: without a guard it could be pointed at 127.0.0.1, a database
// on 10.x, or a cloud metadata service on 169.254.169.254 (server-side request forgery). So, unless
// the operator allows private targets (SVC_WEBHOOK_ALLOW_PRIVATE=true):
// Addresses in SVC_OUTBOUND_ALLOW_NETWORKS (e.g. 127.0.0.0/8,::1/128 for a receiver on the same
// machine) are allowed besides public ones, whatever range they are in.
// - validateWebhookUrl (at intake) refuses what can never be delivered: not http/https, no
//   parse, credentials, over 2,048 characters, and a host that is itself a refused IP address
//   or a localhost name (RFC 6761 6.3);
// - guardTarget (at delivery) resolves the host once, refuses if ANY of its addresses is in a
//   refused range, and returns the checked addresses; pinnedLookup then makes the connection use
//   exactly those, so a DNS answer that changes between the check and the connect (DNS rebinding)
//   cannot reach an address that was not checked.
// Results are plain data: a refusal is an answer, not an exception.

import { lookup as dnsLookup } from 'node:dns/promises';
import type { LookupAddress, LookupOneOptions } from 'node:dns';
import { isIP } from 'node:net';
import { inNetworks, inPrefix, ipBytes, type Network } from '@svc/contracts';

/** Why an address is refused; undefined from classifyAddress means a public (allowed) address. */
export type AddressClass = 'unspecified' | 'loopback' | 'private' | 'link_local' | 'shared' | 'multicast' | 'broadcast' | 'documentation' | 'reserved';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses (default: dns.lookup with all: true, what a connect would use). */
export type Resolver = (hostname: string) => Promise<ReadonlyArray<{ address: string; family: number }>>;

export const systemResolver: Resolver = (hostname) => dnsLookup(hostname, { all: true });

export type GuardRefusal =
  /** The host is, or resolves to, an address in a refused range. */
  | 'refused_address'
  /** The host did not resolve (no such name, no address, DNS timeout or failure). */
  | 'dns'
  /** The URL cannot be delivered at all (not http/https, unparseable). */
  | 'invalid_url';

export type GuardResult =
  | { ok: true; address: string; family: 4 | 6; addresses: ResolvedAddress[] }
  | {
      ok: false;
      reason: GuardRefusal;
      /** One line for logs and `last_error`: names the host's refused address, never the URL. */
      message: string;
      /**
       * Retrying cannot help: the URL names a refused IP address or a localhost name, or is not
       * deliverable. A name that resolves to a refused address may be fixed in DNS: not permanent.
       */
      permanent: boolean;
    };

export interface GuardOptions {
  /** SVC_WEBHOOK_ALLOW_PRIVATE: resolve and pin, but refuse nothing. */
  allowPrivate?: boolean;
  /** SVC_OUTBOUND_ALLOW_NETWORKS: networks that may be reached besides public addresses (e.g. a receiver on loopback). */
  allowNetworks?: readonly Network[];
  resolve?: Resolver;
  /** A resolution that takes longer fails (`dns`, retried later). Default 5 s. */
  resolveTimeoutMs?: number;
}

// ---------------------------------------------------------------------------------------------
// Address classification

type Range = readonly [prefix: number[], bits: number, cls: AddressClass | 'embedded_v4'];

/** IPv4 special-purpose ranges (RFC 6890 and its updates) a webhook may not reach. Most specific first. */
const V4: Range[] = [
  [[0, 0, 0, 0], 8, 'unspecified'], // "this network" (RFC 1122 3.2.1.3); 0.0.0.0 reaches the local host
  [[10, 0, 0, 0], 8, 'private'], // RFC 1918
  [[100, 64, 0, 0], 10, 'shared'], // RFC 6598 carrier-grade NAT
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 0, 0], 16, 'link_local'], // RFC 3927; cloud metadata services live here
  [[172, 16, 0, 0], 12, 'private'], // RFC 1918
  [[192, 0, 0, 0], 24, 'reserved'], // IETF protocol assignments (RFC 6890)
  [[192, 0, 2, 0], 24, 'documentation'], // TEST-NET-1 (RFC 5737)
  [[192, 88, 99, 0], 24, 'reserved'], // 6to4 relay anycast, deprecated (RFC 7526)
  [[192, 168, 0, 0], 16, 'private'], // RFC 1918
  [[198, 18, 0, 0], 15, 'reserved'], // benchmarking (RFC 2544)
  [[198, 51, 100, 0], 24, 'documentation'], // TEST-NET-2
  [[203, 0, 113, 0], 24, 'documentation'], // TEST-NET-3
  [[224, 0, 0, 0], 4, 'multicast'],
  [[255, 255, 255, 255], 32, 'broadcast'], // limited broadcast (RFC 919), before 240/4 holding it
  [[240, 0, 0, 0], 4, 'reserved'], // RFC 1112 "future use"
];

/** IPv6 special-purpose ranges (RFC 6890, IANA registry). `embedded_v4`: judge the IPv4 address inside. */
const V6: Range[] = [
  [[], 128, 'unspecified'], // ::
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128, 'loopback'], // ::1
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 96, 'embedded_v4'], // IPv4-mapped ::ffff:a.b.c.d (RFC 4291 2.5.5.2)
  [[0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0], 96, 'reserved'], // IPv4-translated ::ffff:0:a.b.c.d (RFC 2765)
  [[], 96, 'reserved'], // IPv4-compatible ::a.b.c.d, deprecated (RFC 4291 2.5.5.1)
  [[0, 0x64, 0xff, 0x9b, 0, 1], 48, 'private'], // local-use NAT64 (RFC 8215)
  [[0, 0x64, 0xff, 0x9b], 96, 'embedded_v4'], // well-known NAT64 prefix (RFC 6052)
  [[1, 0], 64, 'reserved'], // discard-only (RFC 6666)
  [[0x20, 0x01, 0x0d, 0xb8], 32, 'documentation'], // RFC 3849
  [[0x20, 0x01, 0, 0], 32, 'reserved'], // Teredo (RFC 4380): tunnels to an IPv4 address we cannot see
  [[0x20, 0x02], 16, 'embedded_v4'], // 6to4 (RFC 3056): 2002:aabb:ccdd::
  [[0x3f, 0xff, 0], 20, 'documentation'], // RFC 9637
  [[0x5f, 0x00], 16, 'reserved'], // SRv6 SIDs (RFC 9602)
  [[0xfc], 7, 'private'], // unique local fc00::/7 (RFC 4193)
  [[0xfe, 0x80], 10, 'link_local'], // fe80::/10
  [[0xfe, 0xc0], 10, 'private'], // site-local, deprecated (RFC 3879)
  [[0xff], 8, 'multicast'],
];

/**
 * The class of a refused IP address, or undefined for a public one. IPv6 forms that carry an
 * IPv4 address (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by that
 * IPv4 address, so ::ffff:127.0.0.1 is loopback. Not an IP address: 'reserved' (refuse).
 */
export function classifyAddress(ip: string): AddressClass | undefined {
  const a = ipBytes(ip);
  if (!a) return 'reserved';
  const b = a.bytes;
  if (a.family === 4) return V4.find(([p, bits]) => inPrefix(b, p, bits))?.[2] as AddressClass | undefined;
  const hit = V6.find(([p, bits]) => inPrefix(b, p, bits));
  if (!hit) return undefined;
  if (hit[2] !== 'embedded_v4') return hit[2];
  const v4 = hit[0][0] === 0x20 ? b.slice(2, 6) : b.slice(12, 16);
  return classifyAddress(v4.join('.'));
}

const DESCRIBED: Record<AddressClass, string> = {
  unspecified: 'an unspecified',
  loopback: 'a loopback',
  private: 'a private',
  link_local: 'a link-local',
  shared: 'a shared (carrier-grade NAT)',
  multicast: 'a multicast',
  broadcast: 'a broadcast',
  documentation: 'a documentation',
  reserved: 'a reserved',
};

/** The class that refuses `ip` for a request with these allowances (undefined: allowed). */
function refusedClass(ip: string, opts: Pick<GuardOptions, 'allowPrivate' | 'allowNetworks'>): AddressClass | undefined {
  if (opts.allowPrivate) return undefined;
  const cls = classifyAddress(ip);
  return cls && opts.allowNetworks?.length && inNetworks(ip, opts.allowNetworks) ? undefined : cls;
}

/** 'a loopback', 'an unspecified' …: for messages. */
const describe = (cls: AddressClass): string => DESCRIBED[cls];

// ---------------------------------------------------------------------------------------------
// URLs

/** The host of a URL as an address or a name: brackets off an IPv6 literal, one trailing dot off a name. */
function hostOf(u: URL): string {
  const h = u.hostname;
  if (h.startsWith('[') && h.endsWith(']')) return h.slice(1, -1);
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

/** RFC 6761 6.3: `localhost` and names under it are the loopback interface, whatever DNS says. */
const isLocalhostName = (host: string): boolean => host === 'localhost' || host.endsWith('.localhost');

/** A localhost name may be called: private targets are allowed, or an allowed network holds a loopback address (its addresses are checked at delivery). */
const localhostAllowed = (opts: Pick<GuardOptions, 'allowPrivate' | 'allowNetworks'>): boolean =>
  !!opts.allowPrivate || inNetworks('127.0.0.1', opts.allowNetworks ?? []) || inNetworks('::1', opts.allowNetworks ?? []);

export const MAX_WEBHOOK_URL_LENGTH = 2048;

export type WebhookUrlProblem = 'not_a_string' | 'too_long' | 'malformed' | 'scheme' | 'credentials' | 'refused_address';

export type WebhookUrlCheck = { ok: true; url: string } | { ok: false; reason: WebhookUrlProblem; message: string };

/**
 * Checks a job's `webhook_url` at intake (the API answers 400 `invalid_webhook_url` with the
 * message). `url` on success is the URL as given: it is what the job shows and what is called.
 * Unless `allowPrivate`, a host that is a refused IP address or a localhost name is refused here
 * already (no DNS: a name is judged at delivery, when it is resolved).
 */
export function validateWebhookUrl(value: unknown, opts: Pick<GuardOptions, 'allowPrivate' | 'allowNetworks'> = {}): WebhookUrlCheck {
  if (typeof value !== 'string') return { ok: false, reason: 'not_a_string', message: 'webhook_url must be a string' };
  if (value.length > MAX_WEBHOOK_URL_LENGTH) return { ok: false, reason: 'too_long', message: `webhook_url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters` };
  // The URL parser quietly drops surrounding spaces and inner tabs and newlines; the URL we call
  // must be the one the customer sees, so refuse them rather than repair them.
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x20\x7f]/.test(value)) return { ok: false, reason: 'malformed', message: 'webhook_url must not contain spaces or control characters' };
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return { ok: false, reason: 'malformed', message: 'webhook_url is not a valid absolute URL' };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return { ok: false, reason: 'scheme', message: 'webhook_url must be an http or https URL' };
  if (u.username !== '' || u.password !== '') return { ok: false, reason: 'credentials', message: 'webhook_url must not contain credentials' };
  if (u.hostname === '') return { ok: false, reason: 'malformed', message: 'webhook_url has no host' };
  const host = hostOf(u);
  const cls = isIP(host) ? refusedClass(host, opts) : isLocalhostName(host.toLowerCase()) && !localhostAllowed(opts) ? 'loopback' : undefined;
  if (cls) return { ok: false, reason: 'refused_address', message: `webhook_url points to ${describe(cls)} address` };
  return { ok: true, url: value };
}

// ---------------------------------------------------------------------------------------------
// Delivery

const DEFAULT_RESOLVE_TIMEOUT_MS = 5_000;

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer in ${ms} ms`), { code: 'ETIMEOUT' })), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Resolves the host of `url` once and decides whether it may be called. On success the result
 * holds every address (each checked unless `allowPrivate`); connect with pinnedLookup(addresses)
 * so the connection cannot go anywhere else. An IP literal is checked as it is, without DNS.
 */
export async function guardTarget(url: string | URL, opts: GuardOptions = {}): Promise<GuardResult> {
  let u: URL;
  try {
    u = typeof url === 'string' ? new URL(url) : url;
  } catch {
    return { ok: false, reason: 'invalid_url', message: 'the URL does not parse', permanent: true };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return { ok: false, reason: 'invalid_url', message: `scheme ${u.protocol} is not http or https`, permanent: true };
  const host = hostOf(u);
  const literal = isIP(host);
  if (literal) {
    const cls = refusedClass(host, opts);
    if (cls) return { ok: false, reason: 'refused_address', message: `${host} is ${describe(cls)} address`, permanent: true };
    return { ok: true, address: host, family: literal as 4 | 6, addresses: [{ address: host, family: literal as 4 | 6 }] };
  }
  if (isLocalhostName(host.toLowerCase()) && !localhostAllowed(opts)) return { ok: false, reason: 'refused_address', message: `${host} is a loopback name`, permanent: true };

  let answers: ReadonlyArray<{ address: string; family: number }>;
  try {
    answers = await withTimeout((opts.resolve ?? systemResolver)(host), opts.resolveTimeoutMs ?? DEFAULT_RESOLVE_TIMEOUT_MS);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException)?.code;
    return { ok: false, reason: 'dns', message: `${host} did not resolve${code ? ` (${code})` : ''}`, permanent: false };
  }
  const addresses: ResolvedAddress[] = [];
  for (const a of answers) {
    const family = isIP(a.address.split('%')[0]!);
    if (family !== 4 && family !== 6) return { ok: false, reason: 'dns', message: `${host} resolved to something that is not an address`, permanent: false };
    const cls = refusedClass(a.address, opts);
    // Any refused address refuses the host: a connect (or a later retry) could pick that one.
    if (cls) return { ok: false, reason: 'refused_address', message: `${host} resolves to ${a.address}, ${describe(cls)} address`, permanent: false };
    addresses.push({ address: a.address, family });
  }
  const first = addresses[0];
  if (!first) return { ok: false, reason: 'dns', message: `${host} has no address`, permanent: false };
  return { ok: true, address: first.address, family: first.family, addresses };
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls.connect (undici's Agent `connect.lookup`) that answers with the checked
 * addresses only, whatever name it is asked for: the connection goes where the guard looked.
 * Answers both forms Node asks for (`all: true` with happy eyeballs, one address otherwise).
 */
export function pinnedLookup(addresses: readonly ResolvedAddress[]): (hostname: string, options: LookupOneOptions | { all?: boolean; family?: number | string }, callback: LookupCallback) => void {
  if (addresses.length === 0) throw new RangeError('pinnedLookup needs at least one address');
  return (_hostname, options, callback) => {
    const fam = options?.family === 'IPv4' ? 4 : options?.family === 'IPv6' ? 6 : Number(options?.family ?? 0);
    const usable = fam === 4 || fam === 6 ? addresses.filter((a) => a.family === fam) : addresses;
    if (usable.length === 0) {
      callback(Object.assign(new Error(`no pinned IPv${fam} address`), { code: 'ENOTFOUND' }), '', undefined);
      return;
    }
    if ((options as { all?: boolean })?.all) callback(null, usable.map((a) => ({ address: a.address, family: a.family })));
    else callback(null, usable[0]!.address, usable[0]!.family);
  };
}
