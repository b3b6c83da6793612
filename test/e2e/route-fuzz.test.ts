// Hostile strings into every field of every HTTP route: never a 5xx. Each answer is a 2xx/3xx, or
// a 4xx with the catalogue's body (docs/errors.md: a `code` of ERRORS with its status, `error` and
// `message`), and every answer carries an X-Request-ID. The routes come from the service's own
// GET /openapi.json (path, query and header parameters, the string properties of the JSON body,
// strings inside arrays included), so a route added later is fuzzed too; the routes the document
// hides (hosted MCP's OAuth endpoints, /mcp, the .well-known documents) and the bodies it does not
// describe (outcome import rows, JSON and CSV; the connector's inbound events; Stripe's events)
// are listed here. Each request is otherwise valid (a real job id, a fresh idempotency key, a
// fresh OAuth code, a correctly signed Stripe event…) so the hostile string is what reaches the
// deep code; first the valid request itself, then the string in each field in turn.
//
// Requests go over raw sockets: header values with controls or non-Latin-1 characters, invalid
// UTF-8 (a lone surrogate, percent-encoded or in a CSV body) and 1 MB request lines are exactly
// what an HTTP client library refuses to send.
//
// Where the protocol fixes another error body, that body is accepted instead of the catalogue's
// (and only on those routes): RFC 6749 §5.2 `{error, error_description}` on the OAuth endpoints,
// the HTML page of /oauth/authorize, a JSON-RPC error on /mcp. On /mcp a tool result is checked
// too: a JSON-RPC internal error or a tool error `internal_error` is the 500 of that transport.
// Runs in both profiles (TEST_PROFILE).

import { createHash, createHmac, randomBytes } from 'node:crypto';
import net from 'node:net';
import t, { type Test } from 'tap';
import { ERRORS } from '@svc/contracts';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';
import { startStripeStandin } from '../helpers/stripe-standin.ts';

// ------------------------------------------------------------------------------------------------
// The hostile strings

const MB = 1_048_576;
const HOSTILE: readonly string[] = [
  'a\u0000b', // NUL inside
  '\u0000', // NUL alone
  '\ud800x', // lone high surrogate
  '\udc00', // lone low surrogate
  '\u0001', // C0 control
  '\u001b[31m', // ANSI escape
  '\r\n', // line break
  '\u0085', // C1: next line
  '\u009b', // C1: control sequence introducer
  '\u202e', // bidi: right-to-left override
  '\u2066', // bidi: left-to-right isolate
  '\u200d', // zero-width joiner
  '\u2028', // line separator
  '\uffff', // noncharacter
  'x'.repeat(MB), // 1 MB
  `${'x'.repeat(MB - 10)}\u0000${'x'.repeat(9)}`, // 1 MB with a NUL near its end
];

/** A string for a message: shortened to about `max` characters, JSON-escaped, only printable ASCII (no raw bidi or controls). */
function show(s: string, max = 48): string {
  const long = s.length > max;
  const cut = long ? `${s.slice(0, Math.floor(max / 4))}...${s.slice(-Math.ceil((max * 3) / 4))}` : s;
  const escaped = JSON.stringify(cut).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return long ? `${escaped} (${s.length} chars)` : escaped;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** UTF-8 bytes, a lone surrogate as its three WTF-8 bytes (invalid UTF-8, as a hostile client sends it). */
function wtf8(s: string): Buffer {
  if (!LONE_SURROGATE.test(s)) return Buffer.from(s, 'utf8');
  const parts: Buffer[] = [];
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0xd800 || c > 0xdfff) continue;
    if (c <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      i++;
      continue;
    }
    parts.push(Buffer.from(s.slice(from, i), 'utf8'), Buffer.from([0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)]));
    from = i + 1;
  }
  parts.push(Buffer.from(s.slice(from), 'utf8'));
  return Buffer.concat(parts);
}

/** encodeURIComponent, and a lone surrogate percent-encoded as its WTF-8 bytes (where encodeURIComponent throws). */
function pct(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return [...wtf8(s)].map((b) => (/[A-Za-z0-9\-_.!~*'()]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
  }
}

// ------------------------------------------------------------------------------------------------
// A raw HTTP/1.1 client (one connection per request, `Connection: close`)

interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
  body: any;
}

type Sent = { answers: Answer[]; error?: string } | { answers: []; dropped: string };

function parseAnswers(data: Buffer): { answers: Answer[]; incomplete?: string } {
  const answers: Answer[] = [];
  let rest = data;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) return { answers, incomplete: `an incomplete response head: ${show(rest.subarray(0, 200).toString('latin1'))}` };
    const [statusLine, ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '');
    if (!m) return { answers, incomplete: `not a status line: ${show(statusLine ?? '')}` };
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const colon = l.indexOf(':');
      const name = l.slice(0, colon).trim().toLowerCase();
      headers[name] = headers[name] === undefined ? l.slice(colon + 1).trim() : `${headers[name]}, ${l.slice(colon + 1).trim()}`;
    }
    let body: Buffer;
    rest = rest.subarray(end + 4);
    if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const chunks: Buffer[] = [];
      for (;;) {
        const eol = rest.indexOf('\r\n');
        if (eol === -1) return { answers, incomplete: 'a chunked body cut short' };
        const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16);
        if (!Number.isFinite(size)) return { answers, incomplete: 'a bad chunk size' };
        if (rest.length < eol + 2 + size) return { answers, incomplete: 'a chunked body cut short' };
        chunks.push(rest.subarray(eol + 2, eol + 2 + size));
        rest = rest.subarray(eol + 2 + size + 2);
        if (size === 0) break;
      }
      body = Buffer.concat(chunks);
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      if (rest.length < n) return { answers, incomplete: `a body of ${rest.length} of ${n} bytes` };
      body = rest.subarray(0, n);
      rest = rest.subarray(n);
    } else {
      body = rest;
      rest = Buffer.alloc(0);
    }
    const text = body.toString('utf8');
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    answers.push({ status: Number(m[1]), headers, text, body: parsed });
  }
  return { answers };
}

let requestsSent = 0;

function exchange(port: number, raw: Buffer, timeoutMs = 60_000): Promise<Sent> {
  requestsSent++;
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    let timedOut = false;
    const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write(raw));
    socket.setTimeout(timeoutMs, () => {
      timedOut = true;
      socket.destroy();
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code ?? err.message));
    socket.on('close', () => {
      const { answers, incomplete } = parseAnswers(Buffer.concat(chunks));
      const why = [timedOut && `no answer within ${timeoutMs / 1000} s`, error && `socket error ${error}`, incomplete].filter(Boolean).join('; ');
      if (answers.length === 0) resolve({ answers: [], dropped: why || 'the connection closed without an answer' });
      else resolve({ answers, ...(why ? { error: why } : {}) });
    });
  });
}

// ------------------------------------------------------------------------------------------------
// Requests, fields, and how a hostile string is put into a field

type Json = any;
type Body = { kind: 'json'; value: Json } | { kind: 'form'; pairs: Array<[string, string]> } | { kind: 'csv'; header: string[]; rows: string[][] } | { kind: 'raw'; value: string; type?: string };

interface Req {
  method: string;
  /** With `{name}` placeholders for `params`. */
  path: string;
  params: Record<string, string>;
  query: Array<[string, string]>;
  headers: Record<string, string>;
  body?: Body;
  /** Sign the body with Stripe's scheme (unless a Stripe-Signature header is set). */
  stripe?: boolean;
}

type Path = Array<string | number>;
type Slot =
  | { kind: 'path' | 'query' | 'header' | 'form' | 'csv' | 'bearer' | 'rawbody'; name: string }
  | { kind: 'json'; name: string; at: Path }
  | { kind: 'setup'; name: string; build: (s: string) => Promise<Req> };

/** Error bodies a route may answer besides the catalogue's. */
type Format = 'oauth' | 'html' | 'jsonrpc';

interface Route {
  label: string;
  /** A fresh request that is valid as it is. */
  build: () => Promise<Req>;
  slots: Slot[];
  formats?: Format[];
  /** Statuses the valid request may answer (so the fuzz is known to reach past the gates). */
  baseline?: number[];
  /** Run once before the route's requests. */
  before?: () => Promise<void>;
  /** Checks of a 2xx body (the tool results of /mcp). */
  inspect?: (a: Answer) => string[];
}

const slotName = (at: Path): string => at.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
const jsonSlot = (at: Path): Slot => ({ kind: 'json', name: slotName(at), at });

/** Every string leaf of a JSON value (array items included). */
function stringLeaves(v: Json, at: Path = []): Path[] {
  if (typeof v === 'string') return [at];
  if (Array.isArray(v)) return v.flatMap((x, i) => stringLeaves(x, [...at, i]));
  if (v && typeof v === 'object') return Object.entries(v).flatMap(([k, x]) => stringLeaves(x, [...at, k]));
  return [];
}

function setIn(root: Json, at: Path, value: unknown): Json {
  if (at.length === 0) return value;
  const copy = Array.isArray(root) ? [...root] : root && typeof root === 'object' ? { ...root } : typeof at[0] === 'number' ? [] : {};
  const [head, ...rest] = at;
  (copy as Record<string | number, unknown>)[head!] = setIn((copy as Record<string | number, unknown>)[head!], rest, value);
  return copy;
}

function apply(req: Req, slot: Slot, s: string): Req {
  const r: Req = { ...req, params: { ...req.params }, query: [...req.query], headers: { ...req.headers } };
  switch (slot.kind) {
    case 'path':
      r.params[slot.name] = s;
      break;
    case 'query': {
      const i = r.query.findIndex(([k]) => k === slot.name);
      if (i === -1) r.query.push([slot.name, s]);
      else r.query[i] = [slot.name, s];
      break;
    }
    case 'header':
      r.headers[slot.name] = s;
      break;
    case 'bearer':
      r.headers.authorization = `Bearer ${s}`;
      break;
    case 'json':
      if (req.body?.kind !== 'json') throw new Error(`${slot.name}: not a JSON body`);
      r.body = { kind: 'json', value: setIn(req.body.value, slot.at, s) };
      break;
    case 'form': {
      if (req.body?.kind !== 'form') throw new Error(`${slot.name}: not a form body`);
      const pairs = [...req.body.pairs];
      const i = pairs.findIndex(([k]) => k === slot.name);
      if (i === -1) pairs.push([slot.name, s]);
      else pairs[i] = [slot.name, s];
      r.body = { kind: 'form', pairs };
      break;
    }
    case 'csv': {
      if (req.body?.kind !== 'csv') throw new Error(`${slot.name}: not a CSV body`);
      const col = req.body.header.indexOf(slot.name);
      r.body = { ...req.body, rows: req.body.rows.map((row, i) => (i === 0 ? row.map((cell, j) => (j === col ? s : cell)) : row)) };
      break;
    }
    case 'rawbody':
      r.body = { kind: 'raw', value: s, type: 'application/json' };
      break;
    case 'setup':
      throw new Error('a setup slot builds its own request');
  }
  return r;
}

// ------------------------------------------------------------------------------------------------
// The stack

const WHSEC = 'whsec_routeFuzzSecret0ForTests';
const standin = await startStripeStandin(WHSEC);
const stack: Stack = await startStack({
  env: {
    SVC_RATE_LIMIT_PER_IP: '10000000',
    SVC_RATE_LIMIT_PER_KEY: '10000000',
    // JSON bodies of 4 MiB: a 1 MB string reaches the handlers rather than the body limit.
    SVC_BODY_LIMIT_BYTES: String(4 * MB),
    SVC_PAYMENT_PROCESSOR: 'stripe',
    SVC_STRIPE_SECRET_KEY: 'sk_test_routeFuzzKey',
    SVC_STRIPE_WEBHOOK_SECRET: WHSEC,
    SVC_STRIPE_API_URL: standin.url,
  },
});
t.teardown(async () => {
  await stack.close();
  await standin.close();
});
const port = Number(new URL(stack.url).port);
const publicUrl = stack.svc.services.config.publicUrl;

let counter = 0;
const unique = (prefix: string): string => `${prefix}${Date.now().toString(36)}${(++counter).toString(36)}`;

function encodeBody(req: Req): { bytes: Buffer; type?: string } | undefined {
  const b = req.body;
  if (!b) return undefined;
  switch (b.kind) {
    case 'json':
      return { bytes: Buffer.from(JSON.stringify(b.value), 'utf8'), type: 'application/json' };
    case 'form':
      return { bytes: Buffer.from(b.pairs.map(([k, v]) => `${pct(k)}=${pct(v)}`).join('&'), 'latin1'), type: 'application/x-www-form-urlencoded' };
    case 'csv':
      return { bytes: wtf8([b.header, ...b.rows].map((r) => r.join(',')).join('\r\n')), type: 'text/csv' };
    case 'raw':
      return { bytes: wtf8(b.value), ...(b.type ? { type: b.type } : {}) };
  }
}

function stripeSignature(payload: Buffer): string {
  const ts = Math.floor(Date.now() / 1000);
  return `t=${ts},v1=${createHmac('sha256', WHSEC).update(Buffer.concat([Buffer.from(`${ts}.`), payload])).digest('hex')}`;
}

/** The request's bytes: the fuzzed headers come last, as they are (UTF-8, invalid UTF-8 included). */
function requestBytes(req: Req): Buffer {
  const path = req.path.replace(/\{([^}]+)\}/g, (_m, name: string) => pct(req.params[name] ?? ''));
  const query = req.query.map(([k, v]) => `${pct(k)}=${pct(v)}`).join('&');
  const body = encodeBody(req);
  const fixed: Array<[string, string]> = [
    ['Host', `127.0.0.1:${port}`],
    ['Connection', 'close'],
  ];
  if (body) {
    if (body.type && req.headers['content-type'] === undefined) fixed.push(['Content-Type', body.type]);
    fixed.push(['Content-Length', String(body.bytes.length)]);
    if (req.stripe && req.headers['stripe-signature'] === undefined) fixed.push(['Stripe-Signature', stripeSignature(body.bytes)]);
  }
  const head = Buffer.concat([
    Buffer.from(`${req.method} ${path}${query ? `?${query}` : ''} HTTP/1.1\r\n`, 'latin1'),
    ...fixed.map(([k, v]) => Buffer.from(`${k}: ${v}\r\n`, 'latin1')),
    ...Object.entries(req.headers).map(([k, v]) => Buffer.concat([Buffer.from(`${k}: `, 'latin1'), wtf8(v), Buffer.from('\r\n', 'latin1')])),
    Buffer.from('\r\n', 'latin1'),
  ]);
  return body ? Buffer.concat([head, body.bytes]) : head;
}

const send = (req: Req): Promise<Sent> => exchange(port, requestBytes(req));

/** A request whose answer the set-up needs: it must succeed with `status`. */
async function must(req: Req, status: number | number[], what: string): Promise<Answer> {
  const r = await send(req);
  const a = r.answers[0];
  const ok = ([] as number[]).concat(status);
  if (!a || !ok.includes(a.status)) throw new Error(`set-up ${what}: ${a ? `${a.status} ${a.text.slice(0, 300)}` : 'dropped' in r ? r.dropped : 'no answer'}`);
  return a;
}

const fuzzer = await makeKey(stack, { credits: 1_000_000 });
const KEY = fuzzer.key;
const req = (method: string, path: string, o: Partial<Req> = {}): Req => ({ method, path, params: {}, query: [], headers: {}, ...o });
const keyed = (method: string, path: string, o: Partial<Req> = {}): Req => req(method, path, { ...o, headers: { 'x-api-key': KEY, ...o.headers } });
const json = (value: Json): Body => ({ kind: 'json', value });

// ------------------------------------------------------------------------------------------------
// Set-up: a completed job, its signed results URL, a prepared upload, a connector, an OAuth client
// and tokens

async function completedJob(): Promise<string> {
  const created = await must(keyed('POST', '/v1/validate/batch', { body: json({ emails: ['jane.doe@accept.test', 'info@accept.test', 'not-an-address'] }) }), 202, 'a batch job');
  const id = created.body.id as string;
  const end = Date.now() + 90_000;
  for (;;) {
    const r = await must(keyed('GET', '/v1/csv/jobs/{id}', { params: { id } }), 200, 'the job status');
    if (r.body.status === 'completed') return id;
    if (['failed', 'canceled'].includes(r.body.status)) throw new Error(`set-up: the job ended ${r.body.status}`);
    if (Date.now() > end) throw new Error(`set-up: the job is still ${r.body.status} after 90 s`);
    await new Promise((res) => setTimeout(res, 100));
  }
}
const JOB = await completedJob();
const link = (await must(keyed('GET', '/v1/csv/jobs/{id}/download', { params: { id: JOB }, query: [['mode', 'url']] }), 200, 'the download link')).body.url as string;
const signed = new URL(link);

const UPLOAD_CSV = 'email,name\r\njane.doe@accept.test,Jane\r\ninfo@accept.test,Info\r\n';
async function prepared(csv = UPLOAD_CSV): Promise<string> {
  const p = await must(keyed('POST', '/v1/csv/prepare-upload', { headers: { 'idempotency-key': unique('fz-setup-') }, body: json({ filename: 'leads.csv' }) }), 200, 'prepare-upload');
  const u = new URL(p.body.upload_url as string);
  const id = u.pathname.split('/').pop()!;
  await must(req('PUT', '/v1/csv/uploads/{id}', { params: { id }, query: [...u.searchParams], body: { kind: 'raw', value: csv, type: 'text/csv' } }), 200, 'the upload');
  return p.body.batch_id as string;
}
const UPLOAD = new URL((await must(keyed('POST', '/v1/csv/prepare-upload', { headers: { 'idempotency-key': unique('fz-setup-') }, body: json({ filename: 'put.csv' }) }), 200, 'prepare-upload')).body.upload_url as string);

const inboundOwner = await makeKey(stack, { credits: 0 });
const connector = await must(req('POST', '/v1/outcomes/email/connectors/emailbison', { headers: { 'x-api-key': inboundOwner.key } }), 201, 'a connector');
const INBOUND_SECRET = new URL(connector.body.webhook_url as string).pathname.split('/').pop()!;

const REDIRECT = 'http://127.0.0.1:33418/callback';
const RESOURCE = `${publicUrl}/mcp`;
const SCOPES = 'credits:read email:validate:single email:validate:bulk';
const CLIENT = (await must(req('POST', '/oauth/register', { body: json({ client_name: 'route fuzz', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) }), 201, 'an OAuth client')).body.client_id as string;

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}
const authorizeQuery = (challenge: string): Array<[string, string]> => [
  ['response_type', 'code'],
  ['client_id', CLIENT],
  ['redirect_uri', REDIRECT],
  ['code_challenge', challenge],
  ['code_challenge_method', 'S256'],
  ['state', 'fuzz-state'],
  ['scope', SCOPES],
  ['resource', RESOURCE],
];
const consentForm = (challenge: string): Array<[string, string]> => [...authorizeQuery(challenge), ['api_key', KEY], ['decision', 'allow'], ['scopes', 'credits:read'], ['scopes', 'email:validate:single'], ['scopes', 'email:validate:bulk']];

/** A fresh authorization code through the consent form. */
async function freshCode(): Promise<{ code: string; verifier: string }> {
  const p = pkce();
  const r = await must(req('POST', '/oauth/authorize', { body: { kind: 'form', pairs: consentForm(p.challenge) } }), 302, 'the consent');
  const code = new URL(r.headers.location!).searchParams.get('code');
  if (!code) throw new Error(`set-up: no code in ${r.headers.location}`);
  return { code, verifier: p.verifier };
}
const tokenForm = (code: string, verifier: string): Array<[string, string]> => [
  ['grant_type', 'authorization_code'],
  ['code', code],
  ['code_verifier', verifier],
  ['client_id', CLIENT],
  ['redirect_uri', REDIRECT],
  ['resource', RESOURCE],
];
/** A fresh access and refresh token. */
async function freshTokens(): Promise<{ access: string; refresh: string }> {
  const { code, verifier } = await freshCode();
  const r = await must(req('POST', '/oauth/token', { body: { kind: 'form', pairs: tokenForm(code, verifier) } }), 200, 'the token exchange');
  return { access: r.body.access_token, refresh: r.body.refresh_token };
}
const ACCESS = (await freshTokens()).access;

// ------------------------------------------------------------------------------------------------
// Valid values of the documented routes' fields (a route not listed gets 'x' everywhere)

const now = Date.now();
const iso = (ms: number): string => new Date(ms).toISOString();
const outcomeRow = (): Json => ({
  email: 'jane.doe@accept.test',
  outcome: 'bounced',
  source: 'api',
  external_id: unique('fz-'),
  occurred_at: iso(now - 60_000),
  action: 'failed',
  smtp_enhanced_code: '5.1.1',
  diagnostic_code: 'smtp; 550 5.1.1 user unknown',
});
const inboundEvent = (): Json => ({
  event: { type: 'EMAIL_BOUNCED', name: 'Email Bounced', workspace_id: 1 },
  data: {
    scheduled_email: { id: ++counter, email_body: 'Hello there', sent_at: iso(now - 5000) },
    lead: { id: 900 + counter, email: 'eb.bounce@accept.test', first_name: 'Sim' },
    campaign_event: { created_at: iso(now - 4000) },
    bounce: { smtp_enhanced_code: '5.1.1', action: 'failed', diagnostic_code: 'smtp; 550 5.1.1 no such user' },
  },
});
async function stripeEvent(): Promise<Json> {
  const { accountId } = await makeKey(stack, { credits: 0 });
  const sub = unique('sub_fz');
  const secs = Math.floor(Date.now() / 1000);
  return {
    id: unique('evt_fz'),
    object: 'event',
    api_version: '2026-10-28.endive',
    created: secs,
    livemode: false,
    type: 'customer.subscription.created',
    data: {
      object: {
        id: sub,
        object: 'subscription',
        status: 'active',
        cancel_at_period_end: false,
        metadata: { account_id: accountId, plan: 'starter' },
        items: { object: 'list', data: [{ id: `si_${sub}`, object: 'subscription_item', current_period_start: secs, current_period_end: secs + 30 * 86_400 }] },
      },
    },
  };
}

interface Known {
  params?: () => Promise<Record<string, string>> | Record<string, string>;
  query?: () => Array<[string, string]>;
  body?: () => Promise<Body> | Body;
  /** Fields the document does not describe. */
  slots?: Slot[];
  baseline?: number[];
  before?: () => Promise<void>;
  stripe?: boolean;
  noKey?: boolean;
}

const jobId = { params: () => ({ id: JOB }) };
const KNOWN: Record<string, Known> = {
  'GET /health': { baseline: [200] },
  'GET /live': { baseline: [200] },
  'GET /ready': { baseline: [200] },
  'POST /v1/validate': { body: () => json({ email: 'jane.doe@accept.test' }), baseline: [200] },
  'POST /v1/validate/bulk': { body: () => json({ emails: ['jane.doe@accept.test', 'info@accept.test'] }), baseline: [200] },
  'GET /v1/credits': { baseline: [200] },
  'POST /v1/validate/batch': { body: () => json({ emails: ['jane.doe@accept.test', 'info@accept.test'] }), baseline: [202] },
  'GET /v1/csv/jobs': { query: () => [['limit', '5'], ['status', 'completed']], baseline: [200] },
  'GET /v1/csv/jobs/{id}': { ...jobId, baseline: [200] },
  // The job is completed: a cancel is refused (409), past the lookup of the id.
  'DELETE /v1/csv/jobs/{id}': { ...jobId, baseline: [409] },
  'GET /v1/csv/jobs/{id}/download': { ...jobId, query: () => [['mode', 'url'], ['segment', 'valid,invalid']], baseline: [200] },
  'GET /v1/csv/jobs/{id}/results.csv': { ...jobId, query: () => [...signed.searchParams] as Array<[string, string]>, baseline: [200], noKey: true },
  'POST /v1/csv/jobs/{id}/recover-catchalls': { ...jobId, baseline: [202] },
  'POST /v1/csv/prepare-upload': { body: () => json({ filename: 'leads.csv' }), baseline: [200] },
  'POST /v1/csv/start-processing': {
    body: async () => json({ batch_id: await prepared(), email_column: 'email' }),
    slots: [
      {
        kind: 'setup',
        name: 'uploaded CSV email cell',
        build: async (s) => keyed('POST', '/v1/csv/start-processing', { headers: { 'idempotency-key': unique('fz-') }, body: json({ batch_id: await prepared(`email,name\r\n${s},Jane\r\n`), email_column: 'email' }) }),
      },
    ],
    baseline: [202],
  },
  'PUT /v1/csv/uploads/{id}': {
    params: () => ({ id: UPLOAD.pathname.split('/').pop()! }),
    query: () => [...UPLOAD.searchParams] as Array<[string, string]>,
    body: () => ({ kind: 'raw', value: UPLOAD_CSV, type: 'text/csv' }),
    baseline: [200],
    noKey: true,
  },
  'POST /v1/outcomes/email/import': { body: () => json({ outcomes: [outcomeRow()] }), baseline: [200] },
  'GET /v1/outcomes/email/events': { query: () => [['email', 'jane.doe@accept.test'], ['limit', '10']], baseline: [200] },
  'POST /v1/outcomes/email/connectors/{platform}': { params: () => ({ platform: 'emailbison' }), baseline: [201] },
  'GET /v1/outcomes/email/connectors/{platform}': {
    params: () => ({ platform: 'emailbison' }),
    before: async () => void (await must(keyed('POST', '/v1/outcomes/email/connectors/emailbison'), 201, 'a connector')),
    baseline: [200],
  },
  'DELETE /v1/outcomes/email/connectors/{platform}': {
    params: () => ({ platform: 'emailbison' }),
    before: async () => void (await must(keyed('POST', '/v1/outcomes/email/connectors/emailbison'), 201, 'a connector')),
    baseline: [200],
  },
  'POST /v1/outcomes/email/connectors/{platform}/events/{secret}': { params: () => ({ platform: 'emailbison', secret: INBOUND_SECRET }), body: () => json(inboundEvent()), baseline: [200], noKey: true },
  'GET /v1/outcomes/email/reports/summary': { query: () => [['from', iso(now - 7 * 86_400_000)], ['to', iso(now)]], baseline: [200] },
  'GET /v1/outcomes/email/reports/domains': { query: () => [['from', iso(now - 7 * 86_400_000)], ['to', iso(now)], ['limit', '10']], baseline: [200] },
  // No subscription at the (stand-in) processor: refused after the gates.
  'POST /v1/subscriptions/cancel': { baseline: [404] },
  'POST /v1/subscriptions/reactivate': { baseline: [404] },
  'POST /v1/webhooks/stripe': {
    body: async () => json(await stripeEvent()),
    stripe: true,
    slots: [
      { kind: 'header', name: 'stripe-signature' },
      { kind: 'rawbody', name: 'the whole body (signed)' },
    ],
    baseline: [200],
    noKey: true,
  },
};

// ------------------------------------------------------------------------------------------------
// The routes: from /openapi.json, then those it hides

type Schema = Record<string, any>;
const openapi = (await must(req('GET', '/openapi.json'), 200, 'GET /openapi.json')).body as Schema;

/** A JSON schema with its `$ref`s resolved against the document. */
function resolve(s: Schema | undefined): Schema | undefined {
  if (!s?.$ref) return s;
  const name = String(s.$ref).split('/').pop()!;
  return openapi.components?.schemas?.[name];
}

const types = (s: Schema): string[] => ([] as string[]).concat(s.type ?? []);

/** The paths of a JSON body's string fields (an array's items at index 0). */
function schemaStrings(s: Schema | undefined, at: Path = [], depth = 0): Path[] {
  const r = resolve(s);
  if (!r || depth > 6) return [];
  const ty = types(r);
  const out: Path[] = [];
  if (ty.includes('string')) out.push(at);
  if (ty.includes('array')) out.push(...schemaStrings(r.items, [...at, 0], depth + 1));
  if (ty.includes('object') || r.properties) for (const [k, v] of Object.entries<Schema>(r.properties ?? {})) out.push(...schemaStrings(v, [...at, k], depth + 1));
  for (const alt of [...(r.anyOf ?? []), ...(r.oneOf ?? []), ...(r.allOf ?? [])]) out.push(...schemaStrings(alt, at, depth + 1));
  return out;
}

/** A value of a schema with its required fields ('x' for a string) for a route this file does not know. */
function example(s: Schema | undefined, depth = 0): Json {
  const r = resolve(s);
  if (!r || depth > 6) return null;
  if (r.enum) return r.enum[0];
  const ty = types(r);
  if (ty.includes('object') || r.properties) return Object.fromEntries((r.required ?? []).map((k: string) => [k, example(r.properties?.[k], depth + 1)]));
  if (ty.includes('array')) return [example(r.items, depth + 1)];
  if (ty.includes('string')) return 'x';
  if (ty.includes('integer') || ty.includes('number')) return 1;
  if (ty.includes('boolean')) return true;
  return null;
}

const routes: Route[] = [];
const unknownRoutes: string[] = [];
const documented = new Set<string>();

for (const [path, ops] of Object.entries<Schema>(openapi.paths ?? {})) {
  for (const [m, op] of Object.entries<Schema>(ops)) {
    if (!['get', 'post', 'put', 'patch', 'delete'].includes(m)) continue;
    const method = m.toUpperCase();
    const label = `${method} ${path}`;
    documented.add(label);
    const known = KNOWN[label];
    if (!known) unknownRoutes.push(label);
    const parameters = ((op.parameters ?? []) as Schema[]).map((p) => (p.$ref ? openapi.components?.parameters?.[String(p.$ref).split('/').pop()!] : p)) as Schema[];
    const secured = ((op.security ?? openapi.security ?? []) as Schema[]).some((s) => 'apiKey' in s);
    const headerParams = parameters.filter((p) => p.in === 'header').map((p) => String(p.name).toLowerCase());
    const bodySchema = op.requestBody?.content?.['application/json']?.schema as Schema | undefined;
    const build = async (): Promise<Req> => {
      const params: Record<string, string> = Object.fromEntries(parameters.filter((p) => p.in === 'path').map((p) => [p.name, 'x']));
      Object.assign(params, await known?.params?.());
      const headers: Record<string, string> = {};
      if (secured && !known?.noKey) headers['x-api-key'] = KEY;
      // A fresh, valid Idempotency-Key each time: every request is a new one, not a replay or a conflict.
      if (headerParams.includes('idempotency-key')) headers['idempotency-key'] = unique('fz-');
      const body = known?.body ? await known.body() : bodySchema ? json(example(bodySchema)) : undefined;
      return { method, path, params, query: known?.query?.() ?? [], headers, ...(body ? { body } : {}), ...(known?.stripe ? { stripe: true } : {}) };
    };
    const slots: Slot[] = [];
    for (const p of parameters) if (p.in === 'path' || p.in === 'query' || p.in === 'header') slots.push({ kind: p.in, name: p.in === 'header' ? String(p.name).toLowerCase() : String(p.name) });
    // The credential is a field too (the gates run before every secured route).
    if (secured) slots.push({ kind: 'header', name: 'x-api-key' });
    const jsonPaths = new Map<string, Path>();
    for (const at of schemaStrings(bodySchema)) jsonPaths.set(slotName(at), at);
    const sample = (await build()).body;
    if (sample?.kind === 'json') for (const at of stringLeaves(sample.value)) jsonPaths.set(slotName(at), at);
    for (const at of jsonPaths.values()) if (at.length > 0) slots.push(jsonSlot(at));
    slots.push(...(known?.slots ?? []));
    routes.push({ label, build, slots, ...(known?.baseline ? { baseline: known.baseline } : {}), ...(known?.before ? { before: known.before } : {}) });
  }
}

// The routes the document hides, and the bodies it does not describe.

routes.push({
  label: 'POST /v1/outcomes/email/import (CSV)',
  build: async () => {
    const row = outcomeRow();
    const header = Object.keys(row);
    return keyed('POST', '/v1/outcomes/email/import', { body: { kind: 'csv', header, rows: [header.map((h) => row[h])] } });
  },
  slots: Object.keys(outcomeRow()).map((name) => ({ kind: 'csv', name })),
  baseline: [200],
});

for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
  routes.push({ label: `GET ${path}`, build: async () => req('GET', path), slots: [], baseline: [200] });
}

const registration = (): Json => ({
  client_name: 'route fuzz agent',
  redirect_uris: [REDIRECT],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
  scope: 'credits:read email:validate:single',
  client_uri: 'https://agent.example.com',
});
routes.push({
  label: 'POST /oauth/register',
  build: async () => req('POST', '/oauth/register', { body: json(registration()) }),
  slots: stringLeaves(registration()).map(jsonSlot),
  formats: ['oauth'],
  baseline: [201],
});

const authorizeFields = authorizeQuery('c').map(([k]) => k);
routes.push({
  label: 'GET /oauth/authorize',
  build: async () => req('GET', '/oauth/authorize', { query: authorizeQuery(pkce().challenge) }),
  slots: authorizeFields.map((name) => ({ kind: 'query', name })),
  formats: ['html'],
  baseline: [200],
});
routes.push({
  label: 'POST /oauth/authorize',
  build: async () => req('POST', '/oauth/authorize', { body: { kind: 'form', pairs: consentForm(pkce().challenge) } }),
  slots: [...authorizeFields, 'api_key', 'decision', 'scopes'].map((name) => ({ kind: 'form', name })),
  formats: ['html'],
  baseline: [302],
});
routes.push({
  label: 'POST /oauth/token (authorization_code)',
  build: async () => {
    const { code, verifier } = await freshCode();
    return req('POST', '/oauth/token', { body: { kind: 'form', pairs: tokenForm(code, verifier) } });
  },
  slots: ['grant_type', 'code', 'code_verifier', 'client_id', 'redirect_uri', 'resource'].map((name) => ({ kind: 'form', name })),
  formats: ['oauth'],
  baseline: [200],
});
routes.push({
  label: 'POST /oauth/token (refresh_token)',
  build: async () => {
    const { refresh } = await freshTokens();
    return req('POST', '/oauth/token', {
      body: {
        kind: 'form',
        pairs: [
          ['grant_type', 'refresh_token'],
          ['refresh_token', refresh],
          ['client_id', CLIENT],
          ['scope', 'credits:read'],
          ['resource', RESOURCE],
        ],
      },
    });
  },
  slots: ['grant_type', 'refresh_token', 'client_id', 'scope', 'resource'].map((name) => ({ kind: 'form', name })),
  formats: ['oauth'],
  baseline: [200],
});
routes.push({
  label: 'POST /oauth/revoke',
  build: async () => {
    const { access } = await freshTokens();
    return req('POST', '/oauth/revoke', {
      body: {
        kind: 'form',
        pairs: [
          ['token', access],
          ['client_id', CLIENT],
          ['token_type_hint', 'access_token'],
        ],
      },
    });
  },
  slots: ['token', 'client_id', 'token_type_hint'].map((name) => ({ kind: 'form', name })),
  formats: ['oauth'],
  baseline: [200],
});

/** A tool result of /mcp: a JSON-RPC internal error or a tool error `internal_error` is this transport's 500. */
function toolProblems(a: Answer): string[] {
  const b = a.body;
  if (!b || typeof b !== 'object') return [`a ${a.status} that is not JSON-RPC: ${show(a.text, 300)}`];
  if (b.error) return b.error.code === -32603 ? [`a JSON-RPC internal error: ${show(a.text, 300)}`] : [];
  const r = b.result;
  if (r?.isError !== true) return [];
  const text = String(r.content?.[0]?.text ?? '');
  let e: any;
  try {
    e = JSON.parse(text);
  } catch {
    return []; // the SDK's own protocol errors (an unknown tool) are text
  }
  if (e?.code === 'internal_error') return [`the tool answered internal_error: ${show(text, 300)}`];
  if (typeof e?.code !== 'string' || !(e.code in ERRORS)) return [`a tool error without a catalogued code: ${show(text, 300)}`];
  return [];
}

const mcpHeaders = (token: string) => ({ accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` });
const rpcBody = (name: string, args: Json): Json => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
const TOOLS: Array<[string, Json, Path[]]> = [
  // The envelope's own strings, once.
  ['svc_get_credits', {}, [['jsonrpc'], ['method'], ['params', 'name']]],
  ['svc_validate_email', { email: 'jane.doe@accept.test' }, []],
  ['svc_validate_bulk', { emails: ['jane.doe@accept.test', 'info@accept.test'] }, []],
  ['svc_create_validation_job', { emails: ['jane.doe@accept.test'] }, [['params', 'arguments', 'webhook_url']]],
  ['svc_get_job', { job_id: JOB }, []],
  ['svc_list_jobs', { limit: 5, status: 'completed' }, [['params', 'arguments', 'cursor']]],
  ['svc_get_job_download_url', { job_id: JOB, segment: 'valid' }, []],
];
for (const [tool, args, extra] of TOOLS) {
  const argPaths = stringLeaves(args).map((at) => ['params', 'arguments', ...at]);
  routes.push({
    label: `POST /mcp tools/call ${tool}`,
    build: async () => req('POST', '/mcp', { headers: mcpHeaders(ACCESS), body: json(rpcBody(tool, args)) }),
    slots: [...(tool === 'svc_get_credits' ? [{ kind: 'bearer', name: 'Authorization: Bearer …' } as Slot] : []), ...[...argPaths, ...extra].map(jsonSlot)],
    formats: ['jsonrpc'],
    baseline: [200],
    inspect: toolProblems,
  });
}
for (const method of ['GET', 'DELETE']) {
  routes.push({
    label: `${method} /mcp`,
    build: async () => req(method, '/mcp', { headers: mcpHeaders(ACCESS) }),
    slots: [{ kind: 'bearer', name: 'Authorization: Bearer …' }],
    formats: ['jsonrpc'],
    baseline: [405],
  });
}

// ------------------------------------------------------------------------------------------------
// The checks

const REQUEST_ID = /^req_[0-9a-f]{32}$/;
/** RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1, RFC 8707 §2. */
const OAUTH_ERRORS = new Set(['invalid_request', 'invalid_client', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope', 'invalid_target', 'invalid_redirect_uri', 'invalid_client_metadata', 'unsupported_token_type']);

function problems(a: Answer, route: Route): string[] {
  const out: string[] = [];
  const excerpt = show(a.text, 400);
  if (!REQUEST_ID.test(a.headers['x-request-id'] ?? '')) out.push(`no X-Request-ID (${show(a.headers['x-request-id'] ?? 'absent')})`);
  if (a.status >= 500) out.push(`answered ${a.status}: ${excerpt}`);
  else if (a.status >= 400) {
    const b = a.body && typeof a.body === 'object' && !Array.isArray(a.body) ? a.body : undefined;
    const formats = route.formats ?? [];
    if (b && b.code !== undefined) {
      if (typeof b.code !== 'string' || !(b.code in ERRORS)) out.push(`a ${a.status} whose code is not in ERRORS: ${excerpt}`);
      else if (ERRORS[b.code as keyof typeof ERRORS].status !== a.status) out.push(`a ${a.status} with code ${b.code}, whose status is ${ERRORS[b.code as keyof typeof ERRORS].status}`);
      if (typeof b.error !== 'string' || typeof b.message !== 'string') out.push(`a ${a.status} without error and message strings: ${excerpt}`);
    } else if (formats.includes('oauth') && b && OAUTH_ERRORS.has(b.error) && typeof b.error_description === 'string') {
      /* an OAuth error body */
    } else if (formats.includes('html') && /^text\/html/.test(a.headers['content-type'] ?? '')) {
      /* the consent page's error page */
    } else if (formats.includes('jsonrpc') && b && b.jsonrpc === '2.0' && typeof b.error?.code === 'number' && typeof b.error?.message === 'string') {
      /* a JSON-RPC error */
    } else out.push(`a ${a.status} without a catalogued code: ${excerpt}`);
  } else if (a.status >= 300) {
    if (!a.headers.location) out.push(`a ${a.status} without a Location`);
  } else if (a.status >= 200) {
    out.push(...(route.inspect?.(a) ?? []));
  } else out.push(`an unexpected status ${a.status}`);
  return out;
}

interface Finding {
  route: string;
  field: string;
  string: string;
  status: number | null;
  problems: string[];
}
const findings: Finding[] = [];
const started = Date.now();

async function stillServing(): Promise<boolean> {
  const r = await send(req('GET', '/health'));
  return r.answers[0]?.status === 200;
}

/** One request and its checks: one assertion, named by route, field and string. */
async function attempt(tt: Test, route: Route, field: string, s: string | undefined, r: Req): Promise<Answer | undefined> {
  const what = s === undefined ? `${route.label} · the valid request` : `${route.label} · ${field} = ${show(s)}`;
  const sent = await send(r);
  const huge = s !== undefined && s.length >= MB;
  if ('dropped' in sent) {
    // Accepted only for a 1 MB string in the request line or a header, and only if the service still answers.
    const inHead = huge && (Object.values(r.params).includes(s) || r.query.some(([, v]) => v === s) || Object.values(r.headers).some((v) => v === s || v === `Bearer ${s}`));
    const alive = await stillServing();
    const why = `the connection was dropped without an answer (${sent.dropped}); GET /health afterwards: ${alive ? '200' : 'no answer'}`;
    if (!(inHead && alive)) findings.push({ route: route.label, field, string: s === undefined ? '(valid)' : show(s), status: null, problems: [why] });
    tt.ok(inHead && alive, `${what}: ${why}`);
    return undefined;
  }
  const list = sent.answers.flatMap((a, i) => problems(a, route).map((p) => (i === 0 ? p : `answer ${i + 1} on the connection: ${p}`)));
  const first = sent.answers[0]!;
  if (list.length) findings.push({ route: route.label, field, string: s === undefined ? '(valid)' : show(s), status: first.status, problems: list });
  tt.ok(list.length === 0, `${what}: ${first.status}${first.body?.code ? ` ${first.body.code}` : first.body?.error ? ` ${first.body.error}` : ''}${list.length ? ` — ${list.join('; ')}` : ''}`);
  return first;
}

t.test('the document lists the routes this file gives valid requests for', async (t) => {
  t.ok(routes.length >= 40, `${routes.length} routes to fuzz`);
  const missing = Object.keys(KNOWN).filter((l) => !documented.has(l));
  t.strictSame(missing, [], 'every route with known valid values is in /openapi.json');
  if (unknownRoutes.length) t.comment(`routes fuzzed with placeholder values (add valid ones to KNOWN): ${unknownRoutes.join(', ')}`);
});

for (const route of routes) {
  t.test(route.label, async (t) => {
    await route.before?.();
    const base = await attempt(t, route, '(none)', undefined, await route.build());
    if (route.baseline) {
      const reached = base !== undefined && route.baseline.includes(base.status);
      t.ok(reached, `${route.label}: the valid request answers ${route.baseline.join(' or ')}${reached ? '' : ` (got ${base ? `${base.status}: ${show(base.text, 300)}` : 'no answer'})`}`);
    }
    for (const slot of route.slots) {
      for (const s of HOSTILE) {
        const r = slot.kind === 'setup' ? await slot.build(s) : apply(await route.build(), slot, s);
        await attempt(t, route, slot.name, s, r);
      }
    }
  });
}

t.test('summary', async (t) => {
  t.comment(`${requestsSent} requests (set-up included) over ${routes.length} routes, ${routes.reduce((n, r) => n + r.slots.length, 0)} fields × ${HOSTILE.length} strings, in ${((Date.now() - started) / 1000).toFixed(1)} s (${stack.profile})`);
  for (const f of findings) t.comment(`FINDING ${JSON.stringify(f)}`);
  t.ok(await stillServing(), 'the service still answers GET /health');
});
