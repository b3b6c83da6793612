// What every group of dashboard routes shares: the guard (session, origin, CSRF, role), the body
// readers, and the route options. api.ts builds one DashboardContext; each routes file
// (keys.ts, jobs.ts, usage.ts, ...) registers its routes with it.

import { failingAs, ServiceError, type ErrorCode } from '@svc/contracts';
import { signInAddress } from '@svc/accounts';
import { subscriptionEnded } from '@svc/billing';
import type { FastifyRequest } from 'fastify';
import type { SessionRecord, Store } from '@svc/store';
import type { DashboardApiOptions } from './options.ts';

/** A signed-in request's session: its user (with account and role) and its hashed id. */
export type Session = SessionRecord & { idHash: string };

/** Who may use a route: anyone signed in, an account's owner, or a service operator. */
export type Need = 'session' | 'owner' | 'operator';

export interface DashboardContext {
  store: Store;
  opts: DashboardApiOptions;
  /**
   * The request's live session, or 401 not_signed_in; for a change (POST, PUT, PATCH, DELETE) also
   * the same origin and the CSRF token (403 csrf_token_invalid); then the role `need` asks for.
   */
  guard(req: FastifyRequest, need: Need): Promise<Session>;
}

/** Route options: kept out of the public API's OpenAPI document (no body, for a POST without one). */
export const hide = { schema: { hide: true } };
export const hideNoBody = { schema: { hide: true }, config: { noBody: true } };

export const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** A JSON object body, or an empty one; anything else is a 400. */
export function bodyOf(req: FastifyRequest): Record<string, unknown> {
  const b = req.body;
  if (b === undefined || b === null) return {};
  if (typeof b !== 'object' || Array.isArray(b)) throw new ServiceError('invalid_request', 'the body must be a JSON object');
  return b as Record<string, unknown>;
}

/** A required non-empty string field of at most `max` characters, else 400 invalid_request. */
export function text(body: Record<string, unknown>, field: string, max = 1024): string {
  const v = body[field];
  if (typeof v !== 'string' || v.length === 0) throw new ServiceError('invalid_request', `${field} is required`);
  if (v.length > max) throw new ServiceError('invalid_request', `${field} is too long`);
  return v;
}

/** The body's `email`, as a sign-in address (trimmed, domain lowercased), else 400 invalid_request. */
export function emailOf(body: Record<string, unknown>): string {
  text(body, 'email', 320);
  const email = signInAddress(body.email);
  if (!email) throw new ServiceError('invalid_request', 'email must be an email address');
  return email;
}

/**
 * The REST API's gate of its billable routes: an account whose subscription ended is refused
 * work that costs credits (402 subscription_inactive), in the dashboard as through a key.
 */
export async function requireBillable(store: Store, accountId: string): Promise<void> {
  if (subscriptionEnded((await store.ledger.balance(accountId))?.subscription_status)) throw new ServiceError('subscription_inactive');
}

/** A query parameter that is absent or a string (repeated parameters are a 400). */
export function query(req: FastifyRequest, name: string): string | undefined {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new ServiceError('invalid_request', `${name} must be given once`);
  return v;
}

export const DAY_MS = 86_400_000;
/** The windows the usage and accuracy pages offer, in days. */
export const WINDOW_DAYS = [7, 30, 90] as const;

/**
 * The query's window of `days` (7, 30 or 90; default 30), else 400 `code`: whole UTC days, today
 * the last of them, so its days and weeks are calendar ones; `from` <= t < `to`, as the REST
 * reports read a window.
 */
export function windowOf(req: FastifyRequest, code: ErrorCode, now = Date.now()): { from: Date; to: Date; days: number } {
  const raw = query(req, 'days') ?? '30';
  const days = Number(raw);
  if (!(WINDOW_DAYS as readonly number[]).includes(days) || !/^\d+$/.test(raw)) throw new ServiceError(code, `days must be one of ${WINDOW_DAYS.join(', ')}`);
  const to = new Date(Math.floor(now / DAY_MS) * DAY_MS + DAY_MS);
  return { from: new Date(to.getTime() - days * DAY_MS), to, days };
}

/** An analytics read: any failure is an outage of that store (503 service_unavailable), as on the REST reports. */
export const readAnalytics = <T>(p: Promise<T>): Promise<T> => failingAs(p, 'service_unavailable', 'The analytics store could not be read; retry later');
