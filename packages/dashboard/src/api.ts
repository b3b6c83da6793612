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

import { createHmac, timingSafeEqual } from 'node:crypto';
import cookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hashPassword, needsRehash, newToken, passwordProblem, verifyNobody, verifyPassword } from '@svc/accounts';
import { isConnectionFailure } from '@svc/billing';
import { SCOPES, ServiceError } from '@svc/contracts';
import { hashKey, type UserRecord } from '@svc/store';
import type { DashboardApiOptions } from './options.ts';
import { bodyOf, emailOf, hide, hideNoBody, text, type DashboardContext, type Need, type Session } from './context.ts';
import { jobRoutes } from './jobs.ts';
import { keyRoutes } from './keys.ts';
import { teamRoutes, userBody } from './team.ts';
import { usageRoutes } from './usage.ts';
import { accuracyRoutes } from './accuracy.ts';
import { accountRoutes } from './account.ts';
import { operatorRoutes } from './operator.ts';
import { dataRoutes } from './data.ts';

export const SESSION_COOKIE = 'svc_session';
const COOKIE_PATH = '/dashboard';
/** Sign-in attempts per window: per address, and per IP address. */
export const SIGN_IN_PER_EMAIL = 10;
export const SIGN_IN_PER_IP = 50;
export const SIGN_IN_WINDOW_MS = 15 * 60_000;
/** A session's idle clock is written at most this often. */
const TOUCH_EVERY_MS = 60_000;
const sha256 = hashKey;

/** The routes, registered with the prefix /dashboard/api (an encapsulated context: its hooks and cookie parser touch no other route). */
export async function dashboardApi(app: FastifyInstance, opts: DashboardApiOptions): Promise<void> {
  const { store, rateLimiter, secret } = opts;
  const idleMs = opts.sessionIdleS * 1000;
  const secureCookies = opts.publicUrl.startsWith('https:');
  await app.register(cookie);
  // A lost database answers as on the REST API: 503 validation_upstream_failed (the parent's
  // error handler then answers every error as the API does).
  app.setErrorHandler(async (err) => {
    if (!(err instanceof ServiceError) && isConnectionFailure(err)) throw new ServiceError('validation_upstream_failed', undefined, {}, {}, err);
    throw err;
  });

  const csrfOf = (idHash: string) => createHmac('sha256', secret).update(`dashboard-csrf:${idHash}`).digest('base64url');

  const setSession = (req: FastifyRequest, reply: FastifyReply, id: string) =>
    reply.setCookie(SESSION_COOKIE, id, { path: COOKIE_PATH, httpOnly: true, sameSite: 'lax', secure: secureCookies || req.protocol === 'https', maxAge: opts.sessionMaxS });
  const clearSession = (req: FastifyRequest, reply: FastifyReply) =>
    reply.clearCookie(SESSION_COOKIE, { path: COOKIE_PATH, httpOnly: true, sameSite: 'lax', secure: secureCookies || req.protocol === 'https' });

  /** The live session the request's cookie names, or null. */
  async function sessionOf(req: FastifyRequest): Promise<Session | null> {
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

  /** A change (POST, PUT, PATCH, DELETE) from another origin is refused, signed in or not. */
  function checkOrigin(req: FastifyRequest): void {
    if (CHANGES.has(req.method) && !sameOrigin(req)) throw new ServiceError('csrf_token_invalid', 'This request comes from another origin');
  }

  async function guard(req: FastifyRequest, need: Need): Promise<Session> {
    checkOrigin(req);
    const s = await sessionOf(req);
    if (!s) throw new ServiceError('not_signed_in');
    if (CHANGES.has(req.method)) {
      const sent = req.headers['x-csrf-token'];
      const want = Buffer.from(csrfOf(s.idHash));
      const got = Buffer.from(typeof sent === 'string' ? sent : '');
      if (got.length !== want.length || !timingSafeEqual(got, want)) throw new ServiceError('csrf_token_invalid');
    }
    if (need === 'owner' && s.user.role !== 'owner') throw new ServiceError('owner_role_required');
    if (need === 'operator' && !s.user.operator) throw new ServiceError('operator_required');
    return s;
  }

  /** Starts a session for `user`: a fresh id (whatever cookie came in, and its session ends). */
  async function signIn(req: FastifyRequest, reply: FastifyReply, user: UserRecord) {
    const previous = req.cookies[SESSION_COOKIE];
    if (previous && previous.length <= 100) await store.users.revokeSession(sha256(previous));
    const id = newToken();
    const idHash = sha256(id);
    await store.users.createSession(idHash, user.id, new Date(Date.now() + opts.sessionMaxS * 1000));
    setSession(req, reply, id);
    return { user: userBody(user), account_id: user.account_id, csrf_token: csrfOf(idHash) };
  }

  // Nothing of the dashboard's API is cached by a browser or a proxy.
  app.addHook('onSend', async (_req, reply) => {
    reply.header('Cache-Control', 'no-store');
  });

  app.get(`/session`, hide, async (req) => {
    const s = await guard(req, 'session');
    return { user: userBody(s.user), account_id: s.user.account_id, csrf_token: csrfOf(s.idHash), expires_at: s.expires_at.toISOString() };
  });

  app.get(`/scopes`, hide, async () => ({ scopes: SCOPES }));

  app.post(`/sign-in`, hide, async (req, reply) => {
    checkOrigin(req);
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

  app.post(`/setup`, hide, async (req, reply) => {
    checkOrigin(req);
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

  app.post(`/sign-out`, hideNoBody, async (req, reply) => {
    const s = await guard(req, 'session');
    await store.users.revokeSession(s.idHash);
    clearSession(req, reply);
    return reply.status(204).send();
  });

  
  const ctx: DashboardContext = { store, opts, guard };
  await jobRoutes(app, ctx);
  await keyRoutes(app, ctx);
  await teamRoutes(app, ctx);
  await usageRoutes(app, ctx);
  await accuracyRoutes(app, ctx);
  await accountRoutes(app, ctx);
  await operatorRoutes(app, ctx);
  await dataRoutes(app, ctx);
}
