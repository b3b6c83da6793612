// The dashboard's people (migration 024): users of an account, their sessions and the single-use
// links that create a sign-in. Session ids and link tokens arrive here already hashed (SHA-256,
// see hashKey); passwords as the hash @svc/accounts made. The rules (who may do what, expiry
// lengths, password checks) are @svc/accounts'; this repository makes each step atomic: a link is
// redeemed once, with the user it creates, and removing a user ends every session of theirs.

import type { Db, Queryable } from '../db/db.ts';
import { newId } from '../db/ids.ts';

export type UserRole = 'owner' | 'member';
export type LinkKind = 'owner_setup' | 'invite';

export interface UserRecord {
  id: string;
  account_id: string;
  email: string;
  role: UserRole;
  operator: boolean;
  created_at: Date;
}

/** A user with their password hash: only for checking a sign-in. */
export interface UserCredentials extends UserRecord {
  password_hash: string;
}

/** A live session with its user, as every dashboard request checks it. */
export interface SessionRecord {
  user: UserRecord;
  created_at: Date;
  last_seen_at: Date;
  expires_at: Date;
}

export interface LinkRecord {
  kind: LinkKind;
  account_id: string;
  role: UserRole;
  expires_at: Date;
  used_at: Date | null;
}

/** Why a link could not be redeemed. */
export type RedeemRefusal = 'link_not_found' | 'link_used' | 'link_expired' | 'email_taken';

const USER_COLUMNS = 'u.id, u.account_id, u.email, u.role, u.operator, u.created_at';
const userOf = (r: Record<string, unknown>): UserRecord => ({
  id: r.id as string,
  account_id: r.account_id as string,
  email: r.email as string,
  role: r.role as UserRole,
  operator: r.operator === true,
  created_at: new Date(r.created_at as string),
});
const UNIQUE_VIOLATION = '23505';

/** Whether `userId` is a current (not removed) owner of `accountId`, read in the caller's transaction. */
async function currentOwner(tx: Queryable, accountId: string, userId: string): Promise<boolean> {
  return (await tx.query("SELECT 1 FROM users WHERE id = $1 AND account_id = $2 AND role = 'owner' AND removed_at IS NULL", [userId, accountId])).length > 0;
}

/**
 * Removes a current user of `accountId` in the caller's transaction, the account's row locked:
 * `user_not_found`, `last_owner` (the account's only current owner, unless `allowLastOwner`), else
 * their sessions end and the invitations they sent and nobody used expire (a removed owner's link
 * could otherwise bring them back).
 */
async function removeIn(tx: Queryable, accountId: string, id: string, allowLastOwner: boolean): Promise<'removed' | 'user_not_found' | 'last_owner'> {
  const found = (await tx.query('SELECT role FROM users WHERE id = $1 AND account_id = $2 AND removed_at IS NULL', [id, accountId]))[0] as { role: UserRole } | undefined;
  if (!found) return 'user_not_found';
  if (found.role === 'owner' && !allowLastOwner) {
    const others = await tx.query("SELECT 1 FROM users WHERE account_id = $1 AND role = 'owner' AND removed_at IS NULL AND id <> $2 LIMIT 1", [accountId, id]);
    if (others.length === 0) return 'last_owner';
  }
  await tx.query('UPDATE users SET removed_at = now() WHERE id = $1', [id]);
  await tx.query('UPDATE user_sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL', [id]);
  await tx.query('UPDATE user_links SET expires_at = now() WHERE created_by = $1 AND used_at IS NULL AND expires_at > now()', [id]);
  return 'removed';
}

export class UsersRepo {
  constructor(private readonly db: Db) {}

  /** A user created directly (the admin CLI). undefined: the address already has a sign-in. */
  async create(opts: { accountId: string; email: string; passwordHash: string; role: UserRole; operator?: boolean }): Promise<UserRecord | undefined> {
    try {
      const rows = await this.db.query(
        `INSERT INTO users AS u (id, account_id, email, password_hash, role, operator) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${USER_COLUMNS}`,
        [newId('usr'), opts.accountId, opts.email, opts.passwordHash, opts.role, opts.operator ?? false],
      );
      return userOf(rows[0]!);
    } catch (err) {
      if ((err as { code?: unknown }).code === UNIQUE_VIOLATION) return undefined;
      throw err;
    }
  }

  /** The current (not removed) user with this address, with their password hash. */
  async credentials(email: string): Promise<UserCredentials | undefined> {
    const rows = await this.db.query(`SELECT ${USER_COLUMNS}, u.password_hash FROM users u WHERE u.email = $1 AND u.removed_at IS NULL`, [email]);
    const r = rows[0];
    return r ? { ...userOf(r), password_hash: r.password_hash as string } : undefined;
  }

  async get(id: string): Promise<UserRecord | undefined> {
    const rows = await this.db.query(`SELECT ${USER_COLUMNS} FROM users u WHERE u.id = $1 AND u.removed_at IS NULL`, [id]);
    return rows[0] ? userOf(rows[0]) : undefined;
  }

  /** The account's current users, oldest first. */
  async list(accountId: string): Promise<UserRecord[]> {
    const rows = await this.db.query(`SELECT ${USER_COLUMNS} FROM users u WHERE u.account_id = $1 AND u.removed_at IS NULL ORDER BY u.created_at, u.id`, [accountId]);
    return rows.map(userOf);
  }

  async setPassword(id: string, passwordHash: string): Promise<boolean> {
    return (await this.db.query('UPDATE users SET password_hash = $2 WHERE id = $1 AND removed_at IS NULL RETURNING id', [id, passwordHash])).length > 0;
  }

  async setRole(id: string, role: UserRole): Promise<boolean> {
    return (await this.db.query('UPDATE users SET role = $2 WHERE id = $1 AND removed_at IS NULL RETURNING id', [id, role])).length > 0;
  }

  /**
   * Sets the role of one of the account's current users, by `actorId` (an owner of the account)
   * unless that leaves the account without an owner: `owner_role_required` (the actor is no longer
   * a current owner: removed or demoted since their request was let in), `user_not_found` (no such
   * current user in this account), `last_owner` (they are its only owner and the new role is
   * member), else the user after the change (`changed` false when they had that role already). A
   * demoted owner's unused owner invitations expire with the change (they could otherwise make
   * their sender owner again). One transaction with the account's row locked first, so two owners
   * demoting each other at once leave one owner.
   */
  async changeRole(accountId: string, id: string, role: UserRole, actorId: string): Promise<{ user: UserRecord; changed: boolean } | 'owner_role_required' | 'user_not_found' | 'last_owner'> {
    return this.db.transaction(async (tx) => {
      await tx.query('SELECT id FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
      if (!(await currentOwner(tx, accountId, actorId))) return 'owner_role_required';
      const found = (await tx.query(`SELECT ${USER_COLUMNS} FROM users u WHERE u.id = $1 AND u.account_id = $2 AND u.removed_at IS NULL`, [id, accountId]))[0];
      if (!found) return 'user_not_found';
      const user = userOf(found);
      if (user.role === role) return { user, changed: false };
      if (role !== 'owner') {
        const others = await tx.query("SELECT 1 FROM users WHERE account_id = $1 AND role = 'owner' AND removed_at IS NULL AND id <> $2 LIMIT 1", [accountId, id]);
        if (others.length === 0) return 'last_owner';
        await tx.query("UPDATE user_links SET expires_at = now() WHERE created_by = $1 AND used_at IS NULL AND role = 'owner' AND expires_at > now()", [id]);
      }
      await tx.query('UPDATE users SET role = $2 WHERE id = $1', [id, role]);
      return { user: { ...user, role }, changed: true };
    });
  }

  /**
   * Removes one of the account's current users on behalf of `actorId` (an owner of the account),
   * ending every session of theirs and expiring the invitations they sent and nobody used:
   * `owner_role_required` (the actor is no longer a current owner), `user_not_found` (no such
   * current user in this account), `last_owner` (the account would be left without an owner).
   * One transaction with the account's row locked first, so two owners removing each other at once
   * leave one of them.
   */
  async removeFromAccount(accountId: string, id: string, actorId: string): Promise<'removed' | 'owner_role_required' | 'user_not_found' | 'last_owner'> {
    return this.db.transaction(async (tx) => {
      await tx.query('SELECT id FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
      if (!(await currentOwner(tx, accountId, actorId))) return 'owner_role_required';
      return removeIn(tx, accountId, id, false);
    });
  }

  async setOperator(id: string, operator: boolean): Promise<boolean> {
    return (await this.db.query('UPDATE users SET operator = $2 WHERE id = $1 AND removed_at IS NULL RETURNING id', [id, operator])).length > 0;
  }

  /**
   * Removes a user for the operator (`admin user remove`), as an owner's removal does (sessions
   * ended, unused invitations they sent expired): `user_not_found` (no such current user),
   * `last_owner` (their account's only current owner) unless `allowLastOwner`. The account's row
   * is locked first, as in removeFromAccount.
   */
  async remove(id: string, opts: { allowLastOwner?: boolean } = {}): Promise<'removed' | 'user_not_found' | 'last_owner'> {
    return this.db.transaction(async (tx) => {
      const found = (await tx.query('SELECT account_id FROM users WHERE id = $1 AND removed_at IS NULL', [id]))[0] as { account_id: string } | undefined;
      if (!found) return 'user_not_found';
      await tx.query('SELECT id FROM accounts WHERE id = $1 FOR UPDATE', [found.account_id]);
      return removeIn(tx, found.account_id, id, opts.allowLastOwner === true);
    });
  }

  // ---- Sessions

  async createSession(idHash: string, userId: string, expiresAt: Date): Promise<void> {
    await this.db.query('INSERT INTO user_sessions (id_hash, user_id, expires_at) VALUES ($1, $2, $3)', [idHash, userId, expiresAt]);
  }

  /**
   * The session and its user when the session is live at `now`: not revoked, before its absolute
   * expiry, seen within `idleMs`, and its user not removed.
   */
  async session(idHash: string, idleMs: number, now: Date = new Date()): Promise<SessionRecord | undefined> {
    const rows = await this.db.query(
      `SELECT ${USER_COLUMNS}, s.created_at AS s_created_at, s.last_seen_at, s.expires_at
         FROM user_sessions s JOIN users u ON u.id = s.user_id
        WHERE s.id_hash = $1 AND s.revoked_at IS NULL AND u.removed_at IS NULL
          AND s.expires_at > $2 AND s.last_seen_at > $2::timestamptz - make_interval(secs => $3::float8 / 1000)`,
      [idHash, now, idleMs],
    );
    const r = rows[0];
    if (!r) return undefined;
    return { user: userOf(r), created_at: new Date(r.s_created_at as string), last_seen_at: new Date(r.last_seen_at as string), expires_at: new Date(r.expires_at as string) };
  }

  /** Records a request on a session: its idle time starts again. */
  async touchSession(idHash: string): Promise<void> {
    await this.db.query('UPDATE user_sessions SET last_seen_at = now() WHERE id_hash = $1 AND revoked_at IS NULL', [idHash]);
  }

  async revokeSession(idHash: string): Promise<boolean> {
    return (await this.db.query('UPDATE user_sessions SET revoked_at = now() WHERE id_hash = $1 AND revoked_at IS NULL RETURNING id_hash', [idHash])).length > 0;
  }

  /** Sessions past their absolute expiry, or revoked, are never read again. */
  async sweepSessions(): Promise<number> {
    return (await this.db.query("DELETE FROM user_sessions WHERE expires_at < now() OR revoked_at < now() - interval '1 day' RETURNING id_hash")).length;
  }

  // ---- Single-use links

  async createLink(opts: { tokenHash: string; kind: LinkKind; accountId: string; role: UserRole; createdBy?: string | null; expiresAt: Date }): Promise<void> {
    await this.db.query('INSERT INTO user_links (token_hash, kind, account_id, role, created_by, expires_at) VALUES ($1, $2, $3, $4, $5, $6)', [
      opts.tokenHash,
      opts.kind,
      opts.accountId,
      opts.role,
      opts.createdBy ?? null,
      opts.expiresAt,
    ]);
  }

  async link(tokenHash: string): Promise<LinkRecord | undefined> {
    const rows = await this.db.query<LinkRecord & Record<string, unknown>>('SELECT kind, account_id, role, expires_at, used_at FROM user_links WHERE token_hash = $1', [tokenHash]);
    const r = rows[0];
    return r ? { ...r, expires_at: new Date(r.expires_at), used_at: r.used_at ? new Date(r.used_at) : null } : undefined;
  }

  /**
   * Redeems a link: creates its user (the link's account and role) and marks the link used, in one
   * transaction, so two redemptions at once create one user. The link row is locked first.
   */
  async redeemLink(tokenHash: string, user: { email: string; passwordHash: string }, now: Date = new Date()): Promise<UserRecord | RedeemRefusal> {
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<LinkRecord & Record<string, unknown>>('SELECT kind, account_id, role, expires_at, used_at FROM user_links WHERE token_hash = $1 FOR UPDATE', [tokenHash]);
      const link = rows[0];
      if (!link) return 'link_not_found';
      if (link.used_at) return 'link_used';
      if (new Date(link.expires_at).getTime() <= now.getTime()) return 'link_expired';
      if ((await tx.query('SELECT 1 FROM users WHERE email = $1 AND removed_at IS NULL', [user.email])).length > 0) return 'email_taken';
      const created = await tx.query(
        `INSERT INTO users AS u (id, account_id, email, password_hash, role) VALUES ($1, $2, $3, $4, $5) RETURNING ${USER_COLUMNS}`,
        [newId('usr'), link.account_id, user.email, user.passwordHash, link.role],
      );
      const made = userOf(created[0]!);
      await tx.query('UPDATE user_links SET used_at = now(), used_by = $2 WHERE token_hash = $1', [tokenHash, made.id]);
      return made;
    });
  }
}
