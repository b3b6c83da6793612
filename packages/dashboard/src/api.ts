// The dashboard's own API, under /dashboard/api (docs/decisions/dashboard.md): sign-in with server-side
// sessions, and the account's keys and team, through the same use cases as the admin CLI
// (@svc/accounts). The public API stays X-API-Key only; here a session cookie identifies a person.
//
// - Sessions: a random 256-bit id in an httpOnly, SameSite=Lax cookie (Secure behind TLS), stored
//   as its SHA-256; a new id at every sign-in (a cookie set before it is never adopted, and its
//   session, if any, ends); ended at sign-out, after SVC_SESSION_IDLE_S without a request, after
//   SVC_SESSION_MAX_S, or when the user is removed.
// - CSRF: every change (POST, PUT, PATCH, DELETE) of a signed-in session carries X-CSRF-Token, an
//   HMAC of the session id (answered by GET /session, never stored in the browser beyond the
//   page); every change also refuses a foreign Origin, and bodies are JSON only (a cross-site form
//   cannot send one), which covers sign-in and set-up before a session exists.
// - Sign-in is throttled per address and per IP (the rate-limit port: in-process or Redis).

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import cookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { changeKeyState, createKey, hashPassword, listKeys, needsRehash, passwordProblem, rotateKey, signInAddress, verifyNobody, verifyPassword, issueLink, type Refusal } from '@svc/accounts';
import { JOB_STATES, SCOPES, ServiceError, type ErrorCode, type JobState } from '@svc/contracts';
import { hashKey, type JobRecord, type RateLimiterPort, type SessionRecord, type Store, type UserRecord } from '@svc/store';

export interface DashboardApiOptions {
  store: Store;
  rateLimiter: RateLimiterPort;
  /** The service's HMAC secret (SVC_SECRET or the stored one): CSRF tokens are derived from it. */
  secret: string;
  /** SVC_PUBLIC_URL: the base of sign-in links, and whether cookies are Secure (https). */
  publicUrl: string;
  sessionIdleS: number;
  sessionMaxS: number;
  /** Called after a key changed state (the API's short key cache forgets it). */
  onKeyChange?: () => void;
  /**
   * One address validated and charged to the account, exactly as `POST /v1/validate` does it (the
   * composition root passes billing's validateAndCharge); the answer is the API's result object.
   */
  validate?: (accountId: string, email: string, requestId: string) => Promise<unknown>;
  /** The account's jobs, through the jobs service the REST routes use (absent on a process without jobs). */
  jobs?: DashboardJobs;
  /** CSV batches, through the service of POST /v1/csv/prepare-upload and start-processing. */
  csv?: DashboardCsv;
}

/** What the dashboard asks of @svc/jobs' CsvJobs (it is one). */
export interface DashboardCsv {
  prepare(accountId: string, input: { filename: string; webhookUrl?: string | null }): Promise<{ job: JobRecord; upload: { batch_id: string; upload_url: string; expires_at: string; max_bytes: number } }>;
  start(accountId: string, batchId: string, emailColumn: string): Promise<JobRecord>;
}

/** What the dashboard asks of @svc/jobs' JobsService (it is one). */
export interface DashboardJobs {
  get(accountId: string, id: string): Promise<JobRecord>;
  list(accountId: string, opts: { limit: number; cursor?: string; status?: JobState }): Promise<{ jobs: JobRecord[]; next_cursor: string | null }>;
  status(job: JobRecord): unknown;
  cancel(accountId: string, id: string): Promise<JobRecord>;
  downloadLink(accountId: string, id: string, segment?: string): Promise<{ url: string; expires_at: string }>;
}

export const SESSION_COOKIE = 'svc_session';
const COOKIE_PATH = '/dashboard';
/** Sign-in attempts per window: per address, and per IP address. */
export const SIGN_IN_PER_EMAIL = 10;
export const SIGN_IN_PER_IP = 50;
export const SIGN_IN_WINDOW_MS = 15 * 60_000;
/** A session's idle clock is written at most this often. */
const TOUCH_EVERY_MS = 60_000;
const sha256 = hashKey;
const newSecret = (): string => randomBytes(32).toString('base64url');

declare module 'fastify' {
  interface FastifyRequest {
    dashboardSession: (SessionRecord & { idHash: string }) | null;
  }
}

const KEY_REFUSAL_CODES: Record<Refusal['code'], ErrorCode> = {
  key_not_found: 'key_not_found',
  key_revoked: 'key_revoked',
  key_expired: 'key_expired',
  invalid_key_kind: 'invalid_request',
  invalid_scopes: 'invalid_request',
  invalid_expiry: 'invalid_request',
  invalid_key_name: 'invalid_request',
};
const refused = (r: Refusal): ServiceError => new ServiceError(KEY_REFUSAL_CODES[r.code], r.message);

const userBody = (u: UserRecord) => ({ id: u.id, email: u.email, role: u.role, operator: u.operator, created_at: u.created_at.toISOString() });
const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A JSON object body, or an empty one; anything else is a 400. */
function bodyOf(req: FastifyRequest): Record<string, unknown> {
  const b = req.body;
  if (b === undefined || b === null) return {};
  if (typeof b !== 'object' || Array.isArray(b)) throw new ServiceError('invalid_request', 'the body must be a JSON object');
  return b as Record<string, unknown>;
}

function text(body: Record<string, unknown>, field: string, max = 1024): string {
  const v = body[field];
  if (typeof v !== 'string' || v.length === 0) throw new ServiceError('invalid_request', `${field} is required`);
  if (v.length > max) throw new ServiceError('invalid_request', `${field} is too long`);
  return v;
}

function emailOf(body: Record<string, unknown>): string {
  text(body, 'email', 320);
  const email = signInAddress(body.email);
  if (!email) throw new ServiceError('invalid_request', 'email must be an email address');
  return email;
}

/** The routes, registered with the prefix /dashboard/api (an encapsulated context: its hooks and cookie parser touch no other route). */
export async function dashboardApi(app: FastifyInstance, opts: DashboardApiOptions): Promise<void> {
  const { store, rateLimiter, secret } = opts;
  const idleMs = opts.sessionIdleS * 1000;
  const secureCookies = opts.publicUrl.startsWith('https:');
  await app.register(cookie);
  app.decorateRequest('dashboardSession', null);

  const csrfOf = (idHash: string) => createHmac('sha256', secret).update(`dashboard-csrf:${idHash}`).digest('base64url');

  const setSession = (req: FastifyRequest, reply: FastifyReply, id: string) =>
    reply.setCookie(SESSION_COOKIE, id, { path: COOKIE_PATH, httpOnly: true, sameSite: 'lax', secure: secureCookies || req.protocol === 'https', maxAge: opts.sessionMaxS });
  const clearSession = (req: FastifyRequest, reply: FastifyReply) =>
    reply.clearCookie(SESSION_COOKIE, { path: COOKIE_PATH, httpOnly: true, sameSite: 'lax', secure: secureCookies || req.protocol === 'https' });

  /** The live session the request's cookie names, or null. */
  async function sessionOf(req: FastifyRequest): Promise<(SessionRecord & { idHash: string }) | null> {
    const id = req.cookies[SESSION_COOKIE];
    if (!id || id.length > 100) return null;
    const idHash = sha256(id);
    const s = await store.users.session(idHash, idleMs);
    if (!s) return null;
    if (Date.now() - s.last_seen_at.getTime() >= TOUCH_EVERY_MS) await store.users.touchSession(idHash);
    return { ...s, idHash };
  }

  /** A change must come from this origin: a browser always sends Origin on a cross-site POST. */
  function sameOrigin(req: FastifyRequest): boolean {
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    const host = req.headers.host;
    try {
      const o = new URL(origin);
      return o.host === host || o.origin === new URL(opts.publicUrl).origin;
    } catch {
      return false;
    }
  }

  const CHANGES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

  /** Every /dashboard/api request: the session (when signed in) and, for a change, the origin and CSRF checks. */
  async function guard(req: FastifyRequest, need: 'none' | 'session' | 'owner'): Promise<SessionRecord & { idHash: string }> {
    const change = CHANGES.has(req.method);
    if (change && !sameOrigin(req)) throw new ServiceError('csrf_token_invalid', 'This request comes from another origin');
    if (need === 'none') return null as never;
    const s = await sessionOf(req);
    if (!s) throw new ServiceError('not_signed_in');
    if (change) {
      const sent = req.headers['x-csrf-token'];
      const want = Buffer.from(csrfOf(s.idHash));
      const got = Buffer.from(typeof sent === 'string' ? sent : '');
      if (got.length !== want.length || !timingSafeEqual(got, want)) throw new ServiceError('csrf_token_invalid');
    }
    if (need === 'owner' && s.user.role !== 'owner') throw new ServiceError('owner_role_required');
    req.dashboardSession = s;
    return s;
  }

  /** Starts a session for `user`: a fresh id (whatever cookie came in, and its session ends). */
  async function signIn(req: FastifyRequest, reply: FastifyReply, user: UserRecord) {
    const previous = req.cookies[SESSION_COOKIE];
    if (previous && previous.length <= 100) await store.users.revokeSession(sha256(previous));
    const id = newSecret();
    const idHash = sha256(id);
    await store.users.createSession(idHash, user.id, new Date(Date.now() + opts.sessionMaxS * 1000));
    setSession(req, reply, id);
    return { user: userBody(user), account_id: user.account_id, csrf_token: csrfOf(idHash) };
  }

  const base = '';
  const hide = { schema: { hide: true } };
  const hideNoBody = { schema: { hide: true }, config: { noBody: true } };

  // Nothing of the dashboard's API is cached by a browser or a proxy.
  app.addHook('onSend', async (_req, reply) => {
    reply.header('Cache-Control', 'no-store');
  });

  app.get(`${base}/session`, hide, async (req) => {
    const s = await guard(req, 'session');
    return { user: userBody(s.user), account_id: s.user.account_id, csrf_token: csrfOf(s.idHash), expires_at: s.expires_at.toISOString() };
  });

  app.get(`${base}/scopes`, hide, async () => ({ scopes: SCOPES }));

  app.post(`${base}/sign-in`, hide, async (req, reply) => {
    await guard(req, 'none');
    const body = bodyOf(req);
    const email = emailOf(body);
    const password = text(body, 'password', 1024);
    for (const [key, limit] of [
      [`signin:ip:${req.ip}`, SIGN_IN_PER_IP],
      [`signin:email:${sha256(email)}`, SIGN_IN_PER_EMAIL],
    ] as const) {
      const d = await rateLimiter.hit(key, limit, SIGN_IN_WINDOW_MS);
      if (!d.allowed) throw new ServiceError('sign_in_throttled', `Too many sign-in attempts; try again in ${Math.ceil(d.resetSeconds / 60)} minute(s)`, { retry_after: d.resetSeconds }, { 'Retry-After': d.resetSeconds });
    }
    const found = await store.users.credentials(email);
    const ok = found ? await verifyPassword(password, found.password_hash) : await verifyNobody(password);
    if (!found || !ok) throw new ServiceError('invalid_credentials');
    if (needsRehash(found.password_hash)) await store.users.setPassword(found.id, await hashPassword(password));
    return signIn(req, reply, found);
  });

  app.post(`${base}/setup`, hide, async (req, reply) => {
    await guard(req, 'none');
    const body = bodyOf(req);
    const token = text(body, 'token', 100);
    const email = emailOf(body);
    const password = body.password;
    const weak = passwordProblem(password);
    if (weak) throw new ServiceError('invalid_password', weak);
    const made = await store.users.redeemLink(sha256(token), { email, passwordHash: await hashPassword(password as string) });
    if (typeof made === 'string') throw new ServiceError(made === 'link_not_found' ? 'sign_in_link_not_found' : made === 'link_used' ? 'sign_in_link_used' : made === 'link_expired' ? 'sign_in_link_expired' : 'email_taken');
    reply.status(201);
    return signIn(req, reply, made);
  });

  app.post(`${base}/sign-out`, hideNoBody, async (req, reply) => {
    const s = await guard(req, 'session');
    await store.users.revokeSession(s.idHash);
    clearSession(req, reply);
    return reply.status(204).send();
  });

  // ---- One address, for anyone signed in: the API's own use case and answer, charged the same.

if (opts.validate) {
  const validate = opts.validate;
  // The API's response schema (shared by the app): the same fields, serialized the same way.
  app.post(`${base}/validate`, { schema: { hide: true, response: { 200: { $ref: 'ValidationResult#' } } } }, async (req) => {
    const s = await guard(req, 'session');
    const raw = bodyOf(req).email;
    if (raw !== undefined && typeof raw !== 'string') throw new ServiceError('invalid_email_type');
    const email = (raw ?? '').trim();
    if (!email) throw new ServiceError('email_required');
    return validate(s.user.account_id, email, String(req.id));
  });
}

// ---- Jobs, for anyone signed in: the REST routes' use cases (list, cancel, a signed download URL).

if (opts.jobs) {
  const jobs = opts.jobs;
  app.get<{ Querystring: { limit?: string; cursor?: string; status?: string } }>(`${base}/jobs`, hide, async (req) => {
    const s = await guard(req, 'session');
    const { limit: rawLimit, cursor, status } = req.query;
    const limit = rawLimit === undefined ? 20 : Number(rawLimit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new ServiceError('invalid_request', 'limit must be an integer from 1 to 100');
    if (status !== undefined && !(JOB_STATES as readonly string[]).includes(status)) throw new ServiceError('invalid_request', `status must be one of ${JOB_STATES.join(', ')}`);
    if (cursor !== undefined && (typeof cursor !== 'string' || cursor.length > 200)) throw new ServiceError('invalid_request', 'cursor is not a cursor of this list');
    const page = await jobs.list(s.user.account_id, { limit, ...(cursor !== undefined && { cursor }), ...(status !== undefined && { status: status as JobState }) });
    return { jobs: page.jobs.map((j) => jobs.status(j)), next_cursor: page.next_cursor };
  });
  app.get<{ Params: { id: string } }>(`${base}/jobs/:id`, hide, async (req) => {
    const s = await guard(req, 'session');
    return jobs.status(await jobs.get(s.user.account_id, req.params.id));
  });
  app.post<{ Params: { id: string } }>(`${base}/jobs/:id/cancel`, hideNoBody, async (req) => {
    const s = await guard(req, 'session');
    return jobs.status(await jobs.cancel(s.user.account_id, req.params.id));
  });
  app.get<{ Params: { id: string }; Querystring: { segment?: string } }>(`${base}/jobs/:id/download`, hide, async (req) => {
    const s = await guard(req, 'session');
    const segment = typeof req.query.segment === 'string' ? req.query.segment : undefined;
    return jobs.downloadLink(s.user.account_id, req.params.id, segment);
  });
}

// ---- A list: the CSV batch of the REST API (prepare, the page PUTs the file to the signed URL, start).

if (opts.csv && opts.jobs) {
  const { csv, jobs } = opts;
  app.post(`${base}/csv/prepare`, hide, async (req, reply) => {
    const s = await guard(req, 'session');
    const body = bodyOf(req);
    const webhook = body.webhook_url;
    if (webhook !== undefined && webhook !== null && typeof webhook !== 'string') throw new ServiceError('invalid_webhook_url', 'webhook_url must be a URL');
    const { upload } = await csv.prepare(s.user.account_id, { filename: body.filename as string, webhookUrl: webhook === '' ? null : ((webhook as string | null | undefined) ?? null) });
    reply.status(201);
    // The signed URL's path and query: the page PUTs to its own origin (SVC_PUBLIC_URL may name another).
    const u = new URL(upload.upload_url);
    return { batch_id: upload.batch_id, upload_path: `${u.pathname}${u.search}`, expires_at: upload.expires_at, max_bytes: upload.max_bytes };
  });
  app.post(`${base}/csv/start`, hide, async (req, reply) => {
    const s = await guard(req, 'session');
    const body = bodyOf(req);
    const batch = text(body, 'batch_id', 100);
    const column = text(body, 'email_column', 1024);
    const job = await csv.start(s.user.account_id, batch, column);
    reply.status(202);
    return jobs.status(job);
  });
}

// ---- Keys (owners only): the admin CLI's rules, through @svc/accounts.

  app.get(`${base}/keys`, hide, async (req) => {
    const s = await guard(req, 'owner');
    const keys = await listKeys(store, s.user.account_id);
    return {
      keys: keys.map((k) => ({
        id: k.id,
        prefix: k.display_prefix,
        name: k.name,
        kind: k.kind,
        scopes: k.scopes,
        state: k.shown_state,
        created_at: iso(k.created_at),
        last_used_at: iso(k.last_used_at),
        expires_at: iso(k.expires_at),
        revoked_at: iso(k.revoked_at),
      })),
    };
  });

  app.post(`${base}/keys`, hide, async (req, reply) => {
    const s = await guard(req, 'owner');
    const body = bodyOf(req);
    let expiresAt: Date | null = null;
    if (body.expires_at !== undefined && body.expires_at !== null) {
      if (typeof body.expires_at !== 'string' || Number.isNaN(Date.parse(body.expires_at))) throw new ServiceError('invalid_request', 'expires_at must be an ISO 8601 date or time');
      expiresAt = new Date(body.expires_at);
    }
    const made = await createKey(store, { accountId: s.user.account_id, kind: body.kind ?? 'live', scopes: body.scopes ?? null, name: body.name ?? '', expiresAt });
    if (!made.ok) throw refused(made);
    reply.status(201);
    return { id: made.id, key: made.key, kind: made.kind, scopes: made.scopes, expires_at: iso(made.expiresAt) };
  });

  for (const verb of ['activate', 'deactivate', 'revoke'] as const) {
    app.post<{ Params: { id: string } }>(`${base}/keys/:id/${verb}`, hideNoBody, async (req) => {
      const s = await guard(req, 'owner');
      const r = await changeKeyState(store, req.params.id, verb, { accountId: s.user.account_id });
      if (!r.ok) throw refused(r);
      if (r.changed) opts.onKeyChange?.();
      return { id: req.params.id, changed: r.changed, message: r.message };
    });
  }

  app.post<{ Params: { id: string } }>(`${base}/keys/:id/rotate`, hide, async (req, reply) => {
    const s = await guard(req, 'owner');
    const body = bodyOf(req);
    const grace = body.grace_seconds;
    if (grace !== undefined && typeof grace !== 'number') throw new ServiceError('invalid_request', 'grace_seconds must be a whole number of seconds');
    const r = await rotateKey(store, req.params.id, { accountId: s.user.account_id, ...(grace !== undefined && { graceS: grace }) });
    if (!r.ok) throw refused(r);
    opts.onKeyChange?.();
    reply.status(201);
    return { id: r.id, key: r.key, kind: r.kind, scopes: r.scopes, expires_at: iso(r.expiresAt), old_key: { id: req.params.id, expires_at: r.oldKeyExpiresAt.toISOString() } };
  });

  // ---- The team (owners only).

  app.get(`${base}/users`, hide, async (req) => {
    const s = await guard(req, 'owner');
    return { users: (await store.users.list(s.user.account_id)).map(userBody) };
  });

  app.post(`${base}/invitations`, hide, async (req, reply) => {
    const s = await guard(req, 'owner');
    const role = bodyOf(req).role ?? 'member';
    if (role !== 'owner' && role !== 'member') throw new ServiceError('invalid_request', 'role must be owner or member');
    const link = await issueLink(store, opts.publicUrl, { kind: 'invite', accountId: s.user.account_id, role, createdBy: s.user.id });
    reply.status(201);
    return { url: link.url, role, expires_at: link.expiresAt.toISOString() };
  });

  app.delete<{ Params: { id: string } }>(`${base}/users/:id`, hide, async (req, reply) => {
    const s = await guard(req, 'owner');
    const target = await store.users.get(req.params.id);
    if (!target || target.account_id !== s.user.account_id) throw new ServiceError('user_not_found');
    if (target.id === s.user.id) throw new ServiceError('invalid_request', 'you cannot remove yourself; another owner can');
    await store.users.remove(target.id);
    return reply.status(204).send();
  });
}
