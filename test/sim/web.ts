// The sim's web servers: for every distinct website address (websites.ts) one node:http and one
// node:https server, bound to that loopback address only, all on one shared HTTP port and one
// shared HTTPS port (the service under test fetches every site on the same two ports, as it sends
// all SMTP to one port). Requests are dispatched by their Host header (port ignored), so several
// sites could share an address.
//
// HTTPS: Node 20 cannot create X.509 certificates and no package here does, so this file builds
// them itself: a small DER writer assembles the certificate fields, node:crypto makes the P-256
// keys and the ECDSA signatures. Each start makes a fresh CA ("sim web CA") and, signed by it, one
// certificate for all sites without `certNames` (their names and www names as subject alternative
// names) plus one per distinct `certNames` list. A client that trusts `caPem` verifies the normal
// sites and gets ERR_TLS_CERT_ALTNAME_INVALID for broken-tls.test; a client that trusts nothing
// extra gets UNABLE_TO_VERIFY_LEAF_SIGNATURE everywhere (the servers send the leaf only). The
// certificate is chosen by SNI; without SNI a client gets the shared one. Keys and certificates
// live in memory only and die with the process.

import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import type { SimPage, SimWebsite } from './websites.ts';

export interface WebPorts {
  /** 0: any free port (the same one on every site address). */
  http: number;
  /** 0: any free port (the same one on every site address). */
  https: number;
}

export interface WebServer {
  httpPort: number;
  httpsPort: number;
  /** PEM of the CA that signed every certificate the HTTPS servers present (trust it to verify them). */
  caPem: string;
  /** Requests received, keyed host + path as the client sent them (lower-case host, no port), e.g. `acme-robotics.test/`; both schemes count. */
  requests: Map<string, number>;
  /** Closes every server and open connection at once (pending slow answers included). Safe to call twice. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Certificates: just enough DER to write an X.509 v3 certificate.

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}
const tlv = (tag: number, ...parts: Buffer[]): Buffer => {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
};
const seq = (...parts: Buffer[]): Buffer => tlv(0x30, ...parts);
const set = (...parts: Buffer[]): Buffer => tlv(0x31, ...parts);
const bool = (v: boolean): Buffer => tlv(0x01, Buffer.from([v ? 0xff : 0x00]));
const octets = (b: Buffer): Buffer => tlv(0x04, b);
const utf8 = (s: string): Buffer => tlv(0x0c, Buffer.from(s, 'utf8'));
const bits = (b: Buffer, unusedBits = 0): Buffer => tlv(0x03, Buffer.from([unusedBits]), b);
const explicit = (n: number, inner: Buffer): Buffer => tlv(0xa0 + n, inner);
/** A non-negative INTEGER from big-endian bytes (a leading 0 keeps the sign bit clear). */
const integer = (b: Buffer): Buffer => tlv(0x02, (b[0] ?? 0) & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
const utcTime = (d: Date): Buffer => tlv(0x17, Buffer.from(`${d.toISOString().replace(/[-:T]/g, '').slice(2, 14)}Z`, 'ascii'));

function oid(dotted: string): Buffer {
  const [first = 0, second = 0, ...rest] = dotted.split('.').map(Number);
  const out = [first * 40 + second];
  for (const v of rest) {
    const enc = [v & 0x7f];
    for (let x = Math.floor(v / 128); x > 0; x = Math.floor(x / 128)) enc.unshift(0x80 | (x & 0x7f));
    out.push(...enc);
  }
  return tlv(0x06, Buffer.from(out));
}

const ECDSA_WITH_SHA256 = seq(oid('1.2.840.10045.4.3.2'));
const extension = (id: string, critical: boolean, value: Buffer): Buffer => seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));
const name = (commonName: string): Buffer => seq(set(seq(oid('2.5.4.10'), utf8('test/sim'))), set(seq(oid('2.5.4.3'), utf8(commonName))));

interface Issuer {
  name: Buffer;
  key: KeyObject;
  keyId: Buffer;
}

interface Issued {
  keyPem: string;
  certPem: string;
  issuer: Issuer;
}

function pem(der: Buffer): string {
  const lines = der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}

/** A certificate for a new P-256 key: a CA when `dnsNames` is null (self-signed unless `issuer`), else a TLS server certificate for those names. */
function issue(commonName: string, dnsNames: string[] | null, issuer?: Issuer): Issued {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const keyId = createHash('sha1').update(spki).digest();
  const subject = name(commonName);
  const self: Issuer = { name: subject, key: privateKey, keyId };
  const signer = issuer ?? self;
  const serial = randomBytes(16);
  serial[0] = ((serial[0] ?? 0) & 0x7f) | 0x01;
  const now = Date.now();
  const ca = dnsNames === null;
  const extensions = [
    extension('2.5.29.19', true, ca ? seq(bool(true)) : seq()), // basicConstraints
    extension('2.5.29.15', true, ca ? bits(Buffer.from([0x06]), 1) : bits(Buffer.from([0x80]), 7)), // keyUsage: keyCertSign+cRLSign / digitalSignature
    extension('2.5.29.14', false, octets(keyId)), // subjectKeyIdentifier
    extension('2.5.29.35', false, seq(tlv(0x80, signer.keyId))), // authorityKeyIdentifier
    ...(ca
      ? []
      : [
          extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1'))), // extKeyUsage: serverAuth
          extension('2.5.29.17', false, seq(...dnsNames.map(n => tlv(0x82, Buffer.from(n, 'ascii'))))), // subjectAltName: dNSName
        ]),
  ];
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))), // v3
    integer(serial),
    ECDSA_WITH_SHA256,
    signer.name,
    seq(utcTime(new Date(now - 86_400_000)), utcTime(new Date(now + 365 * 86_400_000))),
    subject,
    spki,
    explicit(3, seq(...extensions)),
  );
  const signature = sign('sha256', tbs, signer.key); // DER-encoded ECDSA signature
  return {
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    certPem: pem(seq(tbs, ECDSA_WITH_SHA256, bits(signature))),
    issuer: self,
  };
}

interface Certificates {
  caPem: string;
  /** Certificate for a site host (lower-case); the default one for any other name. */
  contextFor(servername: string): tls.SecureContext;
  defaultKeyPem: string;
  defaultCertPem: string;
}

function makeCertificates(sites: readonly SimWebsite[]): Certificates {
  const ca = issue('sim web CA', null);
  const defaultNames = sites.filter(s => !s.certNames && s.ip).flatMap(s => [s.domain, `www.${s.domain}`]);
  const shared = issue('sim websites', defaultNames.length ? defaultNames : ['sim-web.test'], ca.issuer);
  const sharedContext = tls.createSecureContext({ key: shared.keyPem, cert: shared.certPem });
  const byList = new Map<string, tls.SecureContext>();
  const byHost = new Map<string, tls.SecureContext>();
  for (const s of sites) {
    if (!s.certNames || !s.ip) continue;
    const listKey = s.certNames.join(' ');
    let context = byList.get(listKey);
    if (!context) {
      const own = issue(s.certNames[0] ?? s.domain, s.certNames, ca.issuer);
      context = tls.createSecureContext({ key: own.keyPem, cert: own.certPem });
      byList.set(listKey, context);
    }
    byHost.set(s.domain, context);
    byHost.set(`www.${s.domain}`, context);
  }
  return {
    caPem: ca.certPem,
    contextFor: servername => byHost.get(servername.toLowerCase().replace(/\.$/, '')) ?? sharedContext,
    defaultKeyPem: shared.keyPem,
    defaultCertPem: shared.certPem,
  };
}

// ---------------------------------------------------------------------------------------------
// Requests.

const HTML = 'text/html; charset=utf-8';
const NOT_FOUND_PAGE = '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n';
const STREAM_HEAD = '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Huge Site</title><meta property="og:site_name" content="Huge Site"></head><body>\n';
const STREAM_TAIL = '</body></html>\n';
// 64 KiB of filler: 1024 lines of 64 bytes, reused for every chunk.
const FILLER = Buffer.from(`${'<p>Huge Site repeats this line until the page is 20 MiB.</p>'.padEnd(63, ' ')}\n`.repeat(1024));

interface Lookup {
  site: SimWebsite;
  which: 'apex' | 'www';
}

/** `Host` header -> lower-case host name without port or final dot ('' when missing). */
function hostOf(header: string | undefined): string {
  if (!header) return '';
  const h = header.trim().toLowerCase();
  const bare = h.startsWith('[') ? h.slice(0, h.indexOf(']') + 1) : h.replace(/:\d*$/, '');
  return bare.replace(/\.$/, '');
}

function routeFor(l: Lookup, pathname: string): SimPage | undefined {
  return l.site.pages.find(r => (r.host === 'any' || r.host === l.which) && (r.path === '*' || r.path === pathname))?.page;
}

/** Writes exactly `total` bytes of HTML, respecting back-pressure, and stops when the client goes away. */
function stream(res: http.ServerResponse, total: number): void {
  const head = Buffer.from(STREAM_HEAD);
  const tail = Buffer.from(STREAM_TAIL);
  let filler = Math.max(0, total - head.length - tail.length);
  let gone = false;
  res.on('close', () => (gone = true));
  res.writeHead(200, { 'content-type': HTML });
  res.write(head);
  const pump = (): void => {
    while (!gone && filler > 0) {
      const n = Math.min(FILLER.length, filler);
      filler -= n;
      if (!res.write(n === FILLER.length ? FILLER : FILLER.subarray(0, n))) {
        res.once('drain', pump);
        return;
      }
    }
    if (!gone) res.end(tail);
  };
  pump();
}

function isAddrInUse(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'EADDRINUSE';
}

type AnyServer = http.Server | https.Server;

function listen(server: AnyServer, ip: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(port, ip, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function closeServer(server: AnyServer): Promise<void> {
  return new Promise(resolve => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

const PORT_ATTEMPTS = 20;

/** Listens one new server per address on one port: `requested`, or (0) a free one the OS picks on the first address and every other address has free too. */
async function listenAll(ips: string[], requested: number, create: () => AnyServer): Promise<{ port: number; servers: AnyServer[] }> {
  let lastError: unknown;
  for (let attempt = 0; attempt < (requested === 0 ? PORT_ATTEMPTS : 1); attempt++) {
    const servers: AnyServer[] = [];
    let port = requested;
    try {
      for (const ip of ips) {
        const server = create();
        servers.push(server);
        port = await listen(server, ip, port);
      }
      return { port, servers };
    } catch (err) {
      lastError = err;
      await Promise.all(servers.map(closeServer));
      if (!isAddrInUse(err) || requested !== 0) throw err;
    }
  }
  throw new Error(`sim web: no port free on every website address after ${PORT_ATTEMPTS} attempts`, { cause: lastError });
}

export async function startWeb(sites: readonly SimWebsite[], ports: WebPorts): Promise<WebServer> {
  const hosts = new Map<string, Lookup>();
  for (const site of sites) {
    if (!site.ip) continue;
    if (!site.ip.startsWith('127.')) throw new Error(`sim web: ${site.domain} must be on a loopback address, not ${site.ip}`);
    hosts.set(site.domain.toLowerCase(), { site, which: 'apex' });
    hosts.set(`www.${site.domain.toLowerCase()}`, { site, which: 'www' });
  }
  const ips = [...new Set(sites.flatMap(s => (s.ip ? [s.ip] : [])))];
  const requests = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  const certs = makeCertificates(sites);

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const host = hostOf(req.headers.host);
    const target = req.url ?? '/';
    const key = `${host}${target}`;
    requests.set(key, (requests.get(key) ?? 0) + 1);
    res.setHeader('server', 'sim-web');
    const found = hosts.get(host);
    const page = found && routeFor(found, target.split('?')[0] ?? '/');
    if (!page) {
      res.writeHead(404, { 'content-type': HTML, 'content-length': Buffer.byteLength(NOT_FOUND_PAGE) });
      res.end(NOT_FOUND_PAGE);
      return;
    }
    switch (page.kind) {
      case 'redirect':
        res.writeHead(page.status, { location: page.location, 'content-length': 0 });
        res.end();
        return;
      case 'stream':
        stream(res, page.bytes);
        return;
      case 'html': {
        const send = (): void => {
          res.writeHead(page.status, { ...page.headers, 'content-type': HTML, 'content-length': Buffer.byteLength(page.html) });
          res.end(page.html);
        };
        if (!page.delayMs) return send();
        const timer = setTimeout(() => {
          timers.delete(timer);
          if (!res.destroyed) send();
        }, page.delayMs);
        timers.add(timer);
        res.on('close', () => {
          clearTimeout(timer);
          timers.delete(timer);
        });
        return;
      }
    }
  };

  const plain = await listenAll(ips, ports.http, () => http.createServer(onRequest));
  let secure: { port: number; servers: AnyServer[] };
  try {
    secure = await listenAll(ips, ports.https, () =>
      https.createServer(
        {
          key: certs.defaultKeyPem,
          cert: certs.defaultCertPem,
          SNICallback: (servername, cb) => cb(null, certs.contextFor(servername)),
        },
        onRequest,
      ),
    );
  } catch (err) {
    await Promise.all(plain.servers.map(closeServer));
    throw err;
  }

  let closing: Promise<void> | undefined;
  return {
    httpPort: plain.port,
    httpsPort: secure.port,
    caPem: certs.caPem,
    requests,
    close() {
      closing ??= (async () => {
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        await Promise.all([...plain.servers, ...secure.servers].map(closeServer));
      })();
      return closing;
    },
  };
}
