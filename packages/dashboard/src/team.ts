// The account's people (owners only): invitations (single-use links shown once), role changes (an
// account keeps at least one owner: store.users.changeRole checks it atomically) and removal.

import type { FastifyInstance } from 'fastify';
import { issueLink } from '@svc/accounts';
import { ServiceError } from '@svc/contracts';
import type { UserRecord } from '@svc/store';
import { bodyOf, hide, type DashboardContext } from './context.ts';

export const userBody = (u: UserRecord) => ({ id: u.id, email: u.email, role: u.role, operator: u.operator, created_at: u.created_at.toISOString() });

export async function teamRoutes(app: FastifyInstance, { store, opts, guard }: DashboardContext): Promise<void> {

  app.get(`/users`, hide, async (req) => {
    const s = await guard(req, 'owner');
    return { users: (await store.users.list(s.user.account_id)).map(userBody) };
  });

  app.post(`/invitations`, hide, async (req, reply) => {
    const s = await guard(req, 'owner');
    const role = bodyOf(req).role ?? 'member';
    if (role !== 'owner' && role !== 'member') throw new ServiceError('invalid_request', 'role must be owner or member');
    const link = await issueLink(store, opts.publicUrl, { kind: 'invite', accountId: s.user.account_id, role, createdBy: s.user.id });
    reply.status(201);
    return { url: link.url, role, expires_at: link.expiresAt.toISOString() };
  });

  app.post<{ Params: { id: string } }>(`/users/:id/role`, hide, async (req) => {
    const s = await guard(req, 'owner');
    const role = bodyOf(req).role;
    if (role !== 'owner' && role !== 'member') throw new ServiceError('invalid_request', 'role must be owner or member');
    const r = await store.users.changeRole(s.user.account_id, req.params.id, role, s.user.id);
    if (r === 'owner_role_required' || r === 'user_not_found') throw new ServiceError(r);
    if (r === 'last_owner') throw new ServiceError('last_owner', req.params.id === s.user.id ? 'You are the only owner of this account: make someone else an owner first' : 'This is the only owner of the account: make someone else an owner first');
    return { user: userBody(r.user), changed: r.changed };
  });

  app.delete<{ Params: { id: string } }>(`/users/:id`, hide, async (req, reply) => {
    const s = await guard(req, 'owner');
    if (req.params.id === s.user.id) throw new ServiceError('invalid_request', 'you cannot remove yourself; another owner can');
    const r = await store.users.removeFromAccount(s.user.account_id, req.params.id, s.user.id);
    if (r === 'owner_role_required' || r === 'user_not_found') throw new ServiceError(r);
    if (r === 'last_owner') throw new ServiceError('last_owner', 'This is the only owner of the account: make someone else an owner first');
    return reply.status(204).send();
  });
}
