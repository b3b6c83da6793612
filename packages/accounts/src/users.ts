// The people of an account: their sign-in address and password, checked and stored the same way
// whoever creates them (the admin CLI, a dashboard set-up link).

import type { Store, UserRecord, UserRole } from '@svc/store';
import { hashPassword, passwordProblem } from './passwords.ts';

export interface UserRefusal {
  ok: false;
  code: 'invalid_email' | 'invalid_password' | 'invalid_role' | 'email_taken' | 'account_not_found';
  message: string;
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,253}$/;

/** A sign-in address as stored and compared: trimmed, lower-cased; undefined when it is not an address. */
export function signInAddress(email: unknown): string | undefined {
  if (typeof email !== 'string' || email.length > 320) return undefined;
  const e = email.trim().toLowerCase();
  return EMAIL.test(e) ? e : undefined;
}

export const isRole = (r: unknown): r is UserRole => r === 'owner' || r === 'member';

/** Creates a user of an account with a password (the admin CLI's `user create`). */
export async function createUser(
  store: Store,
  req: { accountId: string; email: unknown; password: unknown; role: unknown; operator?: boolean },
): Promise<{ ok: true; user: UserRecord } | UserRefusal> {
  const email = signInAddress(req.email);
  if (!email) return { ok: false, code: 'invalid_email', message: 'email must be an email address' };
  if (!isRole(req.role)) return { ok: false, code: 'invalid_role', message: 'role must be owner or member' };
  const weak = passwordProblem(req.password);
  if (weak) return { ok: false, code: 'invalid_password', message: weak };
  if (!(await store.accounts.exists(req.accountId))) return { ok: false, code: 'account_not_found', message: `no account ${req.accountId}` };
  const user = await store.users.create({ accountId: req.accountId, email, passwordHash: await hashPassword(req.password as string), role: req.role, operator: req.operator ?? false });
  if (!user) return { ok: false, code: 'email_taken', message: `${email} already has a sign-in` };
  return { ok: true, user };
}
