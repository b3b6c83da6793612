// Each account's webhook signing secrets (migration 019). Deliveries of an account's job webhooks
// are signed with every secret of the account that is current (X-Signature carries one `v1` per
// secret, newest first), so a rotation with a grace period lets receivers switch without missing
// a delivery. An account that never asked for one gets one made at its first delivery; that one
// is never shown, and a rotation is how its owner gets a secret to verify with.

import { randomBytes } from 'node:crypto';
import type { Db, Queryable } from '../db/db.ts';

/** How a secret starts: `whsec_` and 43 base64url characters (32 random bytes). */
export const WEBHOOK_SECRET_PATTERN = /^whsec_[A-Za-z0-9_-]{43}$/;
/** Characters of a secret shown after it was made (`whsec_` and 4). */
export const SECRET_SHOWN_CHARS = 10;
/** The longest grace period a rotation may give the secrets it replaces (7 days). */
export const MAX_GRACE_MS = 7 * 24 * 3_600_000;

export interface WebhookSecretInfo {
  id: string;
  /** The first SECRET_SHOWN_CHARS characters, then `…`. */
  secret_prefix: string;
  created_at: Date;
  /** null: the newest, current until the next rotation. */
  expires_at: Date | null;
}

export interface RotatedSecret {
  id: string;
  /** The plain secret: shown this once. */
  secret: string;
  created_at: Date;
  /** The secrets that were current: each signs until its expires_at. */
  previous: Array<{ id: string; expires_at: Date }>;
}

const newSecret = (): string => `whsec_${randomBytes(32).toString('base64url')}`;
const newId = (): string => `whs_${randomBytes(12).toString('hex')}`;
const CURRENT = '(expires_at IS NULL OR expires_at > now())';

async function lockAccount(tx: Queryable, accountId: string): Promise<boolean> {
  return (await tx.query('SELECT id FROM accounts WHERE id = $1 FOR UPDATE', [accountId])).length === 1;
}

export class WebhookSecretsRepo {
  constructor(private readonly db: Db) {}

  /**
   * Makes a new secret for the account and lets each current one sign for `graceMs` more (0: it
   * stops now), in one transaction (two rotations at once run one after the other). Undefined: no
   * such account.
   */
  async rotate(accountId: string, graceMs: number): Promise<RotatedSecret | undefined> {
    if (!Number.isSafeInteger(graceMs) || graceMs < 0 || graceMs > MAX_GRACE_MS) throw new RangeError(`graceMs must be 0-${MAX_GRACE_MS}`);
    return this.db.transaction(async (tx) => {
      if (!(await lockAccount(tx, accountId))) return undefined;
      const previous = await tx.query<{ id: string; expires_at: Date | string }>(
        `UPDATE webhook_secrets SET expires_at = LEAST(COALESCE(expires_at, 'infinity'::timestamptz), now() + make_interval(secs => $2::double precision / 1000))
          WHERE account_id = $1 AND ${CURRENT} RETURNING id, expires_at`,
        [accountId, graceMs],
      );
      const secret = newSecret();
      const row = (await tx.query<{ id: string; created_at: Date | string }>('INSERT INTO webhook_secrets (id, account_id, secret) VALUES ($1, $2, $3) RETURNING id, created_at', [newId(), accountId, secret]))[0]!;
      return {
        id: row.id,
        secret,
        created_at: new Date(row.created_at),
        previous: previous.map((p) => ({ id: p.id, expires_at: new Date(p.expires_at) })).sort((a, b) => a.expires_at.getTime() - b.expires_at.getTime() || a.id.localeCompare(b.id)),
      };
    });
  }

  /** The account's current secrets, newest first; one is made (and never shown) if it has none. Empty: no such account. */
  async signing(accountId: string): Promise<string[]> {
    const current = async (q: Queryable) => (await q.query<{ secret: string }>(`SELECT secret FROM webhook_secrets WHERE account_id = $1 AND ${CURRENT} ORDER BY created_at DESC, id DESC`, [accountId])).map((r) => r.secret);
    const found = await current(this.db);
    if (found.length > 0) return found;
    return this.db.transaction(async (tx) => {
      if (!(await lockAccount(tx, accountId))) return [];
      const again = await current(tx);
      if (again.length > 0) return again;
      const secret = newSecret();
      await tx.query('INSERT INTO webhook_secrets (id, account_id, secret) VALUES ($1, $2, $3)', [newId(), accountId, secret]);
      return [secret];
    });
  }

  /** The account's current secrets, newest first, without the secrets themselves. */
  async list(accountId: string): Promise<WebhookSecretInfo[]> {
    const rows = await this.db.query<{ id: string; secret: string; created_at: Date | string; expires_at: Date | string | null }>(
      `SELECT id, secret, created_at, expires_at FROM webhook_secrets WHERE account_id = $1 AND ${CURRENT} ORDER BY created_at DESC, id DESC`,
      [accountId],
    );
    return rows.map((r) => ({ id: r.id, secret_prefix: `${r.secret.slice(0, SECRET_SHOWN_CHARS)}…`, created_at: new Date(r.created_at), expires_at: r.expires_at === null ? null : new Date(r.expires_at) }));
  }
}
