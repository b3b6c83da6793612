// Fetching a company's home page on the customer's behalf, safely: the domain comes from an API
// caller, so every hop (the first URL and each redirect) goes through the SSRF guard the job
// webhooks use (public addresses only, unless the operator allows networks), and the connection
// is pinned to the addresses the guard checked (a DNS answer that changes between the check and
// the connect cannot reach anything else). Host names resolve through the service's own resolver
// (SVC_DNS_SERVERS). https first, then http; at most `maxRedirects` redirects; the whole fetch
// bounded in time and the body in bytes (a bigger body is cut there: the head of a page holds
// what we read). Only HTML is read.

import { Agent, request } from 'undici';
import { guardTarget, pinnedLookup, type GuardOptions, type Resolver } from '@svc/egress';

export interface FetchPageOptions {
  /** The whole fetch, redirects included (ms). */
  timeoutMs: number;
  maxBytes: number;
  maxRedirects?: number;
  /** Ports websites are fetched on (80 and 443; tests point them at the simulated internet). */
  httpPort?: number;
  httpsPort?: number;
  guard: Pick<GuardOptions, 'allowPrivate' | 'allowNetworks'>;
  resolve: Resolver;
  userAgent: string;
  signal?: AbortSignal;
}

export type PageResult =
  | { ok: true; url: string; status: number; html: string; headers: Record<string, string>; truncated: boolean }
  | { ok: false; reason: 'refused' | 'dns' | 'http_status' | 'not_html' | 'too_many_redirects' | 'network' | 'timeout'; detail: string };

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** The home page of `domain`: https://domain/, then http://domain/ when https fails. */
export async function fetchHomePage(domain: string, o: FetchPageOptions): Promise<PageResult> {
  const signal = o.signal ? AbortSignal.any([o.signal, AbortSignal.timeout(o.timeoutMs)]) : AbortSignal.timeout(o.timeoutMs);
  const https = await fetchFollowing(withPort(`https://${domain}/`, o), o, signal);
  if (https.ok || https.reason === 'timeout' || https.reason === 'refused' || signal.aborted) return https;
  const http = await fetchFollowing(withPort(`http://${domain}/`, o), o, signal);
  // Report the https failure when http fails the same way (e.g. no address at all).
  return http.ok ? http : http.reason === 'dns' && https.reason === 'dns' ? https : http;
}

function withPort(url: string, o: Pick<FetchPageOptions, 'httpPort' | 'httpsPort'>): string {
  const u = new URL(url);
  const port = u.protocol === 'https:' ? o.httpsPort : o.httpPort;
  if (port !== undefined && port !== (u.protocol === 'https:' ? 443 : 80)) u.port = String(port);
  return u.toString();
}

async function fetchFollowing(start: string, o: FetchPageOptions, signal: AbortSignal): Promise<PageResult> {
  let url = start;
  const max = o.maxRedirects ?? 5;
  for (let hop = 0; hop <= max; hop++) {
    const r = await fetchOnce(url, o, signal);
    if ('redirect' in r) {
      let next: URL;
      try {
        next = new URL(r.redirect, url);
      } catch {
        return { ok: false, reason: 'http_status', detail: `a redirect to an unusable location` };
      }
      if (next.protocol !== 'http:' && next.protocol !== 'https:') return { ok: false, reason: 'http_status', detail: `a redirect to a ${next.protocol} URL` };
      // A redirect to the same site keeps the configured ports (the simulated internet serves on others).
      url = next.port === '' ? withPort(next.toString(), o) : next.toString();
      continue;
    }
    return r;
  }
  return { ok: false, reason: 'too_many_redirects', detail: `more than ${max} redirects` };
}

async function fetchOnce(url: string, o: FetchPageOptions, signal: AbortSignal): Promise<PageResult | { redirect: string }> {
  const guard = await guardTarget(url, { ...o.guard, resolve: o.resolve, resolveTimeoutMs: o.timeoutMs });
  if (!guard.ok) return { ok: false, reason: guard.reason === 'dns' ? 'dns' : 'refused', detail: guard.message };
  const agent = new Agent({ connect: { lookup: pinnedLookup(guard.addresses) as never, timeout: o.timeoutMs }, headersTimeout: o.timeoutMs, bodyTimeout: o.timeoutMs, pipelining: 0 });
  try {
    const res = await request(url, {
      method: 'GET',
      headers: { 'user-agent': o.userAgent, accept: 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.1', 'accept-language': 'en' },
      dispatcher: agent,
      signal,
    });
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : String(v);
    if (REDIRECTS.has(res.statusCode)) {
      await res.body.dump().catch(() => {});
      const location = headers.location;
      if (!location) return { ok: false, reason: 'http_status', detail: `HTTP ${res.statusCode} without a Location` };
      return { redirect: location };
    }
    if (res.statusCode < 200 || res.statusCode >= 300) {
      await res.body.dump().catch(() => {});
      return { ok: false, reason: 'http_status', detail: `HTTP ${res.statusCode}` };
    }
    const type = headers['content-type'] ?? '';
    if (type && !/^(text\/html|application\/xhtml\+xml)\b/i.test(type)) {
      await res.body.dump().catch(() => {});
      return { ok: false, reason: 'not_html', detail: `content type ${type.split(';')[0]}` };
    }
    const { text, truncated } = await readCapped(res.body, o.maxBytes, charsetOf(type));
    return { ok: true, url, status: res.statusCode, html: text, headers, truncated };
  } catch (err) {
    if (signal.aborted) return { ok: false, reason: 'timeout', detail: `no page within ${o.timeoutMs} ms` };
    const e = err as { code?: string; message?: string };
    return { ok: false, reason: 'network', detail: e.code ?? e.message ?? String(err) };
  } finally {
    await agent.destroy().catch(() => {});
  }
}

function charsetOf(contentType: string): string {
  const m = /charset\s*=\s*"?([A-Za-z0-9._:-]+)/i.exec(contentType);
  return m ? m[1]!.toLowerCase() : 'utf-8';
}

/** The body's first `max` bytes, decoded; the rest is not read (the connection is destroyed). */
async function readCapped(body: AsyncIterable<Buffer> & { destroy?: () => void }, max: number, charset: string): Promise<{ text: string; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let n = 0;
  let truncated = false;
  for await (const chunk of body) {
    const room = max - n;
    if (chunk.length >= room) {
      chunks.push(chunk.subarray(0, room));
      n = max;
      truncated = true;
      break;
    }
    chunks.push(chunk);
    n += chunk.length;
  }
  if (truncated) body.destroy?.();
  const buf = Buffer.concat(chunks, n);
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset);
  } catch {
    decoder = new TextDecoder('utf-8');
  }
  return { text: decoder.decode(buf), truncated };
}
