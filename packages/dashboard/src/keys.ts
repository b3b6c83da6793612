// The account's API keys (owners only): the admin CLI's rules, through @svc/accounts.

import type { FastifyInstance } from 'fastify';
import { changeKeyState, createKey, listKeys, rotateKey, type Refusal } from '@svc/accounts';
import { ServiceError, type ErrorCode } from '@svc/contracts';
import { bodyOf, hide, hideNoBody, iso, type DashboardContext } from './context.ts';

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

export async function keyRoutes(app: FastifyInstance, { store, opts, guard }: DashboardContext): Promise<void> {

  app.get(`/keys`, hide, async (req) => {
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

  app.post(`/keys`, hide, async (req, reply) => {
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
    app.post<{ Params: { id: string } }>(`/keys/:id/${verb}`, hideNoBody, async (req) => {
      const s = await guard(req, 'owner');
      const r = await changeKeyState(store, req.params.id, verb, { accountId: s.user.account_id });
      if (!r.ok) throw refused(r);
      if (r.changed) opts.onKeyChange?.();
      return { id: req.params.id, changed: r.changed, message: r.message };
    });
  }

  app.post<{ Params: { id: string } }>(`/keys/:id/rotate`, hide, async (req, reply) => {
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
}
