// Hosted MCP's OAuth records (migration 016): registered clients, grants, authorization codes and
// tokens. Codes and tokens arrive here already hashed (SHA-256, see hashKey): the plain values
// never reach the database. The rules (PKCE, redirect URI, expiry, scopes) are @svc/mcp's; this
// repository makes each step atomic: a code is redeemed once, a refresh token rotated once, and a
// second attempt revokes the grant in the same transaction.

import type { Db, Queryable } from '../db/db.ts';

export interface OAuthClientRecord {
  id: string;
  client_name: string;
  redirect_uris: string[];
  /** The registration response, as answered. */
  metadata: Record<string, unknown>;
  created_at: Date;
}

export interface NewOAuthGrant {
  id: string;
  clientId: string;
  accountId: string;
  keyId: string;
  scopes: string[];
  resource: string | null;
}

/** A code with its grant, as the token endpoint checks it. */
export interface OAuthCodeRecord {
  grant_id: string;
  client_id: string;
  account_id: string;
  key_id: string;
  scopes: string[];
  resource: string | null;
  redirect_uri: string;
  code_challenge: string;
  expires_at: Date;
  used_at: Date | null;
  grant_revoked: boolean;
}

/** A token with its grant, its key and its account: everything a request or a refresh checks. */
export interface OAuthTokenRecord {
  grant_id: string;
  kind: 'access' | 'refresh';
  client_id: string;
  account_id: string;
  key_id: string;
  key_prefix: string;
  /** This token's scopes. */
  scopes: string[];
  /** The grant's scopes (a refresh may ask for these or fewer). */
  grant_scopes: string[];
  resource: string | null;
  expires_at: Date;
  used_at: Date | null;
  grant_revoked: boolean;
  key_state: string;
  key_expires_at: Date | null;
  subscription_status: string;
}

/** A grant as its account's owner sees it: the app, what it may do, the key it acts through. */
export interface OAuthGrantListing {
  id: string;
  client_id: string;
  client_name: string;
  scopes: string[];
  resource: string | null;
  created_at: Date;
  revoked_at: Date | null;
  /** When it last got tokens (its consent or a refresh); requests with an access token are not recorded. */
  last_token_at: Date | null;
  key_id: string;
  key_prefix: string;
  key_name: string;
  key_state: string;
}

/** Tokens to store: hashes and expiry times. */
export interface NewTokenPair {
  access: { hash: string; expiresAt: Date };
  refresh: { hash: string; expiresAt: Date };
  scopes: string[];
}

/**
 * What became of a redemption: `issued` (the tokens are stored), `refused` by the caller's check
 * (nothing changed), `unknown`, or `replayed` (used before: the grant is now revoked).
 */
export type RedeemResult<R> = { kind: 'issued'; record: R } | { kind: 'refused'; reason: string } | { kind: 'unknown' } | { kind: 'replayed'; record: R };

const list = (s: string): string[] => s.split(',').filter(Boolean);
const date = (d: Date | string | null): Date | null => (d === null ? null : new Date(d));

const CODE_COLUMNS = `g.id AS grant_id, g.client_id, g.account_id, g.key_id, g.scopes, g.resource, c.redirect_uri, c.code_challenge, c.expires_at, c.used_at, g.revoked_at IS NOT NULL AS grant_revoked`;
const TOKEN_COLUMNS = `t.grant_id, t.kind, g.client_id, g.account_id, g.key_id, k.display_prefix AS key_prefix, t.scopes, g.scopes AS grant_scopes, g.resource,
  t.expires_at, t.used_at, g.revoked_at IS NOT NULL AS grant_revoked, k.state AS key_state, k.expires_at AS key_expires_at, a.subscription_status`;
const TOKEN_FROM = `oauth_tokens t JOIN oauth_grants g ON g.id = t.grant_id JOIN api_keys k ON k.id = g.key_id JOIN accounts a ON a.id = g.account_id`;

type RawCode = Omit<OAuthCodeRecord, 'scopes' | 'expires_at' | 'used_at'> & { scopes: string; expires_at: Date | string; used_at: Date | string | null };
type RawToken = Omit<OAuthTokenRecord, 'scopes' | 'grant_scopes' | 'expires_at' | 'used_at' | 'key_expires_at'> & {
  scopes: string;
  grant_scopes: string;
  expires_at: Date | string;
  used_at: Date | string | null;
  key_expires_at: Date | string | null;
};

function codeRecord(r: RawCode): OAuthCodeRecord {
  return { ...r, scopes: list(r.scopes), expires_at: new Date(r.expires_at), used_at: date(r.used_at) };
}

function tokenRecord(r: RawToken): OAuthTokenRecord {
  return { ...r, scopes: list(r.scopes), grant_scopes: list(r.grant_scopes), expires_at: new Date(r.expires_at), used_at: date(r.used_at), key_expires_at: date(r.key_expires_at) };
}

async function insertTokens(tx: Queryable, grantId: string, t: NewTokenPair): Promise<void> {
  await tx.query(
    `INSERT INTO oauth_tokens (token_hash, grant_id, kind, scopes, expires_at) VALUES ($1, $2, 'access', $3, $4), ($5, $2, 'refresh', $3, $6)`,
    [t.access.hash, grantId, t.scopes.join(','), t.access.expiresAt, t.refresh.hash, t.refresh.expiresAt],
  );
}

const revokeGrantIn = (tx: Queryable, grantId: string): Promise<unknown> => tx.query('UPDATE oauth_grants SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [grantId]);

export class OAuthRepo {
  constructor(private readonly db: Db) {}

  async createClient(c: { id: string; clientName: string; redirectUris: string[]; metadata: Record<string, unknown> }): Promise<void> {
    await this.db.query('INSERT INTO oauth_clients (id, client_name, redirect_uris, metadata) VALUES ($1, $2, $3, $4)', [c.id, c.clientName, JSON.stringify(c.redirectUris), JSON.stringify(c.metadata)]);
  }

  async getClient(id: string): Promise<OAuthClientRecord | undefined> {
    const r = (await this.db.query<{ id: string; client_name: string; redirect_uris: string; metadata: string; created_at: Date }>('SELECT id, client_name, redirect_uris, metadata, created_at FROM oauth_clients WHERE id = $1', [id]))[0];
    if (!r) return undefined;
    return { id: r.id, client_name: r.client_name, redirect_uris: JSON.parse(r.redirect_uris) as string[], metadata: JSON.parse(r.metadata) as Record<string, unknown>, created_at: new Date(r.created_at) };
  }

  /** A consent: the grant and its one code, together. */
  async createGrant(grant: NewOAuthGrant, code: { hash: string; redirectUri: string; codeChallenge: string; expiresAt: Date }): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query('INSERT INTO oauth_grants (id, client_id, account_id, key_id, scopes, resource) VALUES ($1, $2, $3, $4, $5, $6)', [grant.id, grant.clientId, grant.accountId, grant.keyId, grant.scopes.join(','), grant.resource]);
      await tx.query('INSERT INTO oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at) VALUES ($1, $2, $3, $4, $5)', [code.hash, grant.id, code.redirectUri, code.codeChallenge, code.expiresAt]);
    });
  }

  /**
   * Exchanges a code for tokens, once. `check` (pure) refuses a code with a reason (a wrong
   * verifier, client or redirect URI, an expired code): nothing changes then. A code used before
   * revokes its grant, so the tokens issued from it stop working (OAuth 2.1 §4.1.3).
   */
  async redeemCode(codeHash: string, check: (c: OAuthCodeRecord) => string | undefined, tokens: (c: OAuthCodeRecord) => NewTokenPair): Promise<RedeemResult<OAuthCodeRecord>> {
    return this.db.transaction(async (tx) => {
      const raw = (await tx.query<RawCode>(`SELECT ${CODE_COLUMNS} FROM oauth_codes c JOIN oauth_grants g ON g.id = c.grant_id WHERE c.code_hash = $1 FOR UPDATE OF c, g`, [codeHash]))[0];
      if (!raw) return { kind: 'unknown' as const };
      const code = codeRecord(raw);
      if (code.used_at) {
        await revokeGrantIn(tx, code.grant_id);
        return { kind: 'replayed' as const, record: code };
      }
      const reason = check(code);
      // A refused redemption (a wrong PKCE verifier, another client, another redirect URI) spends
      // the code too: whoever holds it gets one try, and a second is a replay.
      await tx.query('UPDATE oauth_codes SET used_at = now() WHERE code_hash = $1', [codeHash]);
      if (reason) return { kind: 'refused' as const, reason };
      await insertTokens(tx, code.grant_id, tokens(code));
      return { kind: 'issued' as const, record: code };
    });
  }

  /**
   * Rotates a refresh token: the presented one is spent and a new pair issued under the same
   * grant. One presented again after its rotation revokes the grant (OAuth 2.1 §4.3.1: a replayed
   * refresh token means one of the two holders is not the client).
   */
  async rotateRefresh(hash: string, check: (t: OAuthTokenRecord) => string | undefined, tokens: (t: OAuthTokenRecord) => NewTokenPair): Promise<RedeemResult<OAuthTokenRecord>> {
    return this.db.transaction(async (tx) => {
      const raw = (await tx.query<RawToken>(`SELECT ${TOKEN_COLUMNS} FROM ${TOKEN_FROM} WHERE t.token_hash = $1 AND t.kind = 'refresh' FOR UPDATE OF t, g`, [hash]))[0];
      if (!raw) return { kind: 'unknown' as const };
      const token = tokenRecord(raw);
      if (token.used_at) {
        await revokeGrantIn(tx, token.grant_id);
        return { kind: 'replayed' as const, record: token };
      }
      const reason = check(token);
      if (reason) return { kind: 'refused' as const, reason };
      await tx.query('UPDATE oauth_tokens SET used_at = now() WHERE token_hash = $1', [hash]);
      await insertTokens(tx, token.grant_id, tokens(token));
      return { kind: 'issued' as const, record: token };
    });
  }

  /** An access or refresh token with its grant, key and account (one query per MCP request). */
  async findToken(hash: string): Promise<OAuthTokenRecord | undefined> {
    const raw = (await this.db.query<RawToken>(`SELECT ${TOKEN_COLUMNS} FROM ${TOKEN_FROM} WHERE t.token_hash = $1`, [hash]))[0];
    return raw ? tokenRecord(raw) : undefined;
  }

  /**
   * Deletes codes and tokens past their expiry by more than `graceMs` (a day): an expired one is
   * refused anyway, and a spent refresh token is kept until then to catch its replay.
   */
  async sweepExpired(graceMs = 86_400_000): Promise<number> {
    const before = new Date(Date.now() - graceMs);
    const codes = await this.db.query('DELETE FROM oauth_codes WHERE expires_at < $1 RETURNING grant_id', [before]);
    const tokens = await this.db.query('DELETE FROM oauth_tokens WHERE expires_at < $1 RETURNING grant_id', [before]);
    return codes.length + tokens.length;
  }

  /**
   * The account's grants, newest first: live ones only unless `withRevoked`. `grantId` narrows it
   * to that one grant (empty when it is not this account's).
   */
  async grants(accountId: string, opts: { grantId?: string; withRevoked?: boolean } = {}): Promise<OAuthGrantListing[]> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT g.id, g.client_id, c.client_name, g.scopes, g.resource, g.created_at, g.revoked_at,
              (SELECT max(t.created_at) FROM oauth_tokens t WHERE t.grant_id = g.id) AS last_token_at,
              g.key_id, k.display_prefix AS key_prefix, k.name AS key_name, k.state AS key_state
         FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id JOIN api_keys k ON k.id = g.key_id
        WHERE g.account_id = $1 AND ($2::text IS NULL OR g.id = $2) AND ($3 OR g.revoked_at IS NULL)
        ORDER BY g.created_at DESC, g.id DESC`,
      [accountId, opts.grantId ?? null, opts.withRevoked === true],
    );
    return rows.map((r) => ({
      id: r.id as string,
      client_id: r.client_id as string,
      client_name: r.client_name as string,
      scopes: list(r.scopes as string),
      resource: (r.resource as string | null) ?? null,
      created_at: new Date(r.created_at as string),
      revoked_at: date(r.revoked_at as string | null),
      last_token_at: date((r.last_token_at as string | null) ?? null),
      key_id: r.key_id as string,
      key_prefix: r.key_prefix as string,
      key_name: (r.key_name as string | null) ?? '',
      key_state: r.key_state as string,
    }));
  }

  /** Ends a grant: every token issued under it is refused from now on. False: it had ended already. */
  async revokeGrant(grantId: string): Promise<boolean> {
    return (await this.db.query('UPDATE oauth_grants SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id', [grantId])).length > 0;
  }
}
