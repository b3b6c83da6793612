// Single-use sign-in links: the owner's first-run link and invitations. The plain token exists
// once, in the URL handed out; the store keeps its SHA-256 (@svc/store's hashKey).

import { randomBytes } from 'node:crypto';
import { hashKey, type Store, type UserRole } from '@svc/store';

/** How long a link lives: the owner's set-up link (first run, or `admin user link`) and an invitation. */
export const OWNER_LINK_MS = 24 * 3600_000;
export const INVITE_LINK_MS = 7 * 24 * 3600_000;

/** A fresh 256-bit secret, base64url: a link's token, a session's id. */
export const newToken = (): string => randomBytes(32).toString('base64url');

/** A link's URL: the token in the fragment, which a browser never sends to a server (no Referer, no access log). */
export function setupUrl(publicUrl: string, token: string): string {
  return `${publicUrl.replace(/\/$/, '')}/dashboard/setup#token=${token}`;
}

/** Issues a single-use link that creates a user of `accountId` with `role`; returns its URL (shown once). */
export async function issueLink(
  store: Store,
  publicUrl: string,
  opts: { kind: 'owner_setup' | 'invite'; accountId: string; role: UserRole; createdBy?: string; now?: number },
): Promise<{ url: string; expiresAt: Date }> {
  const token = newToken();
  const expiresAt = new Date((opts.now ?? Date.now()) + (opts.kind === 'owner_setup' ? OWNER_LINK_MS : INVITE_LINK_MS));
  await store.users.createLink({ tokenHash: hashKey(token), kind: opts.kind, accountId: opts.accountId, role: opts.role, createdBy: opts.createdBy ?? null, expiresAt });
  return { url: setupUrl(publicUrl, token), expiresAt };
}
