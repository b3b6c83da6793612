// API keys: stored as SHA-256 hashes only, with a kind, scopes, a state and an
// optional expiry. The plain key exists once, in the return value of create().

import { createHash, randomBytes } from 'node:crypto';
import { API_KEY_FORMAT } from '@svc/contracts';
import type { Db, Queryable } from '../db/db.ts';
import { newId } from '../db/ids.ts';

export type KeyKind = 'test' | 'live';
export type KeyState = 'active' | 'inactive' | 'revoked';

export interface KeyRecord {
  id: string;
  account_id: string;
  display_prefix: string;
  kind: KeyKind;
  /** null: an unrestricted key. */
  scopes: string[] | null;
  state: KeyState;
  expires_at: Date | null;
  subscription_status: string;
  /** The account has the data product (the data endpoints). */
  data_product: boolean;
}

/** A key as operators see it (`admin key list`): never the key nor its hash. */
export interface KeyListing extends Omit<KeyRecord, 'subscription_status' | 'data_product'> {
  name: string;
  created_at: Date;
  revoked_at: Date | null;
  /** Approximate, to about a minute (see touch); null: not used since it was recorded. */
  last_used_at: Date | null;
}

export interface NewKey {
  accountId: string;
  kind: KeyKind;
  /** null: unrestricted. */
  scopes: string[] | null;
  name?: string;
  /** An operator-chosen key (must have the kind's prefix); generated when absent. */
  key?: string;
  expiresAt?: Date | null;
}

/** Stores a key (generated unless given) in `q` and returns it: the only time the plain key exists. */
export async function insertKeyIn(q: Queryable, opts: NewKey): Promise<{ id: string; key: string }> {
  const key = opts.key ?? generateKey(opts.kind);
  if (keyKindOf(key) !== opts.kind) throw new Error(`key must match ${KEY_PREFIX[opts.kind]}[A-Za-z0-9]{16,128}`);
  const id = newId('key');
  await q.query(
    'INSERT INTO api_keys (id, account_id, key_hash, display_prefix, kind, scopes, name, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
    [id, opts.accountId, hashKey(key), displayPrefix(key), opts.kind, opts.scopes ? opts.scopes.join(',') : null, opts.name ?? '', opts.expiresAt ?? null],
  );
  return { id, key };
}

/** How often one process records that a key was used, at most. */
const TOUCH_EVERY_MS = 60_000;

export const KEY_PREFIX: Record<KeyKind, string> = { test: 'svc_test_', live: 'svc_live_' };

export const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');

/**
 * Why a key may not be used at `now`, in the gates' order (revocation is final, then a
 * deactivation, then a passed expiry); undefined when it may. The REST gate and hosted MCP's
 * consent and tokens judge keys by this one rule.
 */
export function keyRefusal(key: { state: string; expires_at: Date | null }, now: number): 'api_key_revoked' | 'api_key_inactive' | 'api_key_expired' | undefined {
  if (key.state === 'revoked') return 'api_key_revoked';
  if (key.state !== 'active') return 'api_key_inactive';
  if (key.expires_at && key.expires_at.getTime() <= now) return 'api_key_expired';
  return undefined;
}

/** A new key: prefix plus 40 base62 characters (about 238 bits). */
export function generateKey(kind: KeyKind): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = randomBytes(64);
  let s = '';
  for (const b of bytes) {
    if (b < 248) s += alphabet[b % 62]; // 248 = 4 * 62: no modulo bias
    if (s.length === 40) break;
  }
  return KEY_PREFIX[kind] + s;
}

/**
 * What logs and lists show of a key: `svc_live_` plus 4 characters, or the first 4 characters of
 * an operator-chosen bootstrap key (a short key must not end up whole in a log line).
 */
export function displayPrefix(key: string): string {
  const kind = keyKindOf(key);
  return kind ? key.slice(0, KEY_PREFIX[kind].length + 4) : `${key.slice(0, Math.min(4, Math.floor(key.length / 3)))}…`;
}

export function keyKindOf(key: string): KeyKind | undefined {
  const m = API_KEY_FORMAT.exec(key);
  return m ? (m[1] as KeyKind) : undefined;
}

export class KeysRepo {
  constructor(private readonly db: Db) {}

  /** When this process last recorded each key's use: at most one write per key per minute. */
  #touched = new Map<string, number>();

  /** Stores a key (generated unless given) and returns it: the only time the plain key exists. */
  async create(opts: NewKey): Promise<{ id: string; key: string }> {
    return insertKeyIn(this.db, opts);
  }

  async findByHash(hash: string): Promise<KeyRecord | undefined> {
    const rows = await this.db.query<Omit<KeyRecord, 'scopes'> & { scopes: string | null }>(
      `SELECT k.id, k.account_id, k.display_prefix, k.kind, k.scopes, k.state, k.expires_at, a.subscription_status, a.data_product
         FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1`,
      [hash],
    );
    const r = rows[0];
    if (!r) return undefined;
    return { ...r, scopes: r.scopes === null ? null : r.scopes.split(',').filter(Boolean), expires_at: r.expires_at ? new Date(r.expires_at) : null };
  }

  /** Finds a key id from an id or a full key. */
  async resolveId(idOrKey: string): Promise<string | undefined> {
    const rows = await this.db.query<{ id: string }>('SELECT id FROM api_keys WHERE id = $1 OR key_hash = $2', [idOrKey, hashKey(idOrKey)]);
    return rows[0]?.id;
  }

  /** Changes a key's state. Revocation is final: a revoked key never comes back. */
  async setState(id: string, state: KeyState): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE api_keys SET state = $2, revoked_at = CASE WHEN $2 = 'revoked' THEN now() ELSE revoked_at END
        WHERE id = $1 AND state <> 'revoked' RETURNING id`,
      [id, state],
    );
    return rows.length > 0;
  }

  async expire(id: string, at: Date = new Date()): Promise<boolean> {
    return (await this.db.query('UPDATE api_keys SET expires_at = $2 WHERE id = $1 RETURNING id', [id, at])).length > 0;
  }

  async count(): Promise<number> {
    return (await this.db.query<{ n: number }>('SELECT count(*)::int AS n FROM api_keys'))[0]!.n;
  }

  /**
   * The keys of an account, oldest first by their creation time as shown (milliseconds), ties by
   * id: two keys made in the same millisecond list by id, as anyone reading the times would expect.
   */
  async list(accountId: string): Promise<KeyListing[]> {
    return this.#listings("account_id = $1 ORDER BY date_trunc('milliseconds', created_at), id", [accountId]);
  }

  /** One key by id. */
  async get(id: string): Promise<KeyListing | undefined> {
    return (await this.#listings('id = $1', [id]))[0];
  }

  async #listings(where: string, params: unknown[]): Promise<KeyListing[]> {
    const rows = await this.db.query<Omit<KeyListing, 'scopes'> & { scopes: string | null }>(
      `SELECT id, account_id, display_prefix, kind, scopes, state, name, created_at, expires_at, revoked_at, last_used_at FROM api_keys WHERE ${where}`,
      params,
    );
    const date = (d: Date | null): Date | null => (d ? new Date(d) : null);
    return rows.map((r) => ({
      ...r,
      scopes: r.scopes === null ? null : r.scopes.split(',').filter(Boolean),
      created_at: new Date(r.created_at),
      expires_at: date(r.expires_at),
      revoked_at: date(r.revoked_at),
      last_used_at: date(r.last_used_at),
    }));
  }

  /**
   * Records that a key was used: at most once a minute per key from this process (skipped without
   * a query otherwise), and the row only changes when its last_used_at is a minute old, so many
   * processes do not write it many times either. Callers need not wait for it.
   */
  async touch(id: string): Promise<void> {
    const now = Date.now();
    const last = this.#touched.get(id);
    if (last !== undefined && now - last < TOUCH_EVERY_MS) return;
    if (this.#touched.size >= 10_000) this.#touched.clear();
    this.#touched.set(id, now);
    await this.db.query("UPDATE api_keys SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')", [id]);
  }
}
