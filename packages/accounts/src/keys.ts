// API keys as account holders and operators manage them: one set of rules for the admin CLI and
// the dashboard (the REST gate judges a key by @svc/store's keyRefusal, the same state).

import { isScope, SCOPES } from '@svc/contracts';
import type { KeyKind, KeyListing, Store } from '@svc/store';

/** A refused change: a stable code and a sentence for a person. */
export interface Refusal {
  ok: false;
  code: 'key_not_found' | 'key_revoked' | 'key_expired' | 'invalid_key_kind' | 'invalid_scopes' | 'invalid_expiry' | 'invalid_key_name';
  message: string;
}

const refuse = (code: Refusal['code'], message: string): Refusal => ({ ok: false, code, message });

/** Longest key name, in characters. */
export const KEY_NAME_MAX = 100;

export type KeyStateOf = 'active' | 'inactive' | 'revoked' | 'expired';

/** A key's state as people read it: `expired` once its expiry has passed (stored state otherwise). */
export function keyStateOf(k: { state: string; expires_at: Date | null }, now = Date.now()): KeyStateOf {
  if (k.state === 'revoked') return 'revoked';
  if (k.expires_at && k.expires_at.getTime() <= now) return 'expired';
  return k.state as KeyStateOf;
}

export interface NewKeyRequest {
  accountId: string;
  kind: unknown;
  /** null: every scope (an unrestricted key). */
  scopes: unknown;
  name?: unknown;
  /** null or absent: no expiry. */
  expiresAt?: Date | null;
}

export interface CreatedKey {
  ok: true;
  id: string;
  /** The plain key: shown once, never stored. */
  key: string;
  kind: KeyKind;
  scopes: string[] | null;
  expiresAt: Date | null;
}

/** Creates a key after checking what it asks for: kind, known scopes, a name, an expiry in the future. */
export async function createKey(store: Store, req: NewKeyRequest, now = Date.now()): Promise<CreatedKey | Refusal> {
  if (req.kind !== 'test' && req.kind !== 'live') return refuse('invalid_key_kind', 'kind must be test or live');
  let scopes: string[] | null = null;
  if (req.scopes !== null && req.scopes !== undefined) {
    if (!Array.isArray(req.scopes) || req.scopes.length === 0) return refuse('invalid_scopes', `scopes must be a non-empty list of: ${SCOPES.join(', ')}`);
    const bad = req.scopes.filter((s) => typeof s !== 'string' || !isScope(s));
    if (bad.length > 0) return refuse('invalid_scopes', `unknown scope(s): ${bad.map((s) => String(s)).join(', ')}`);
    scopes = [...new Set(req.scopes as string[])];
  }
  const name = req.name ?? '';
  if (typeof name !== 'string' || [...name].length > KEY_NAME_MAX) return refuse('invalid_key_name', `name must be text of at most ${KEY_NAME_MAX} characters`);
  const expiresAt = req.expiresAt ?? null;
  if (expiresAt !== null) {
    if (!(expiresAt instanceof Date) || Number.isNaN(expiresAt.getTime())) return refuse('invalid_expiry', 'expiry must be a date');
    // A key that is expired from birth is a mistake (a typo in the year), never what was meant.
    if (expiresAt.getTime() <= now) return refuse('invalid_expiry', `expiry must be in the future, got ${expiresAt.toISOString()}`);
  }
  const { id, key } = await store.keys.create({ accountId: req.accountId, kind: req.kind, scopes, name, expiresAt });
  return { ok: true, id, key, kind: req.kind, scopes, expiresAt };
}

export type KeyVerb = 'activate' | 'deactivate' | 'revoke' | 'expire';

export interface KeyChanged {
  ok: true;
  /** False when nothing had to change (expiring a key already expired). */
  changed: boolean;
  message: string;
}

/**
 * Activates, deactivates, revokes or expires a key. `accountId`, when given, is the only account
 * whose keys may change (the dashboard's); another account's key is "not found", as if absent.
 * Revocation is final; an expired key cannot be activated.
 */
export async function changeKeyState(store: Store, keyId: string, verb: KeyVerb, opts: { accountId?: string; now?: number } = {}): Promise<KeyChanged | Refusal> {
  const now = opts.now ?? Date.now();
  const key = await store.keys.get(keyId);
  if (!key || (opts.accountId !== undefined && key.account_id !== opts.accountId)) return refuse('key_not_found', 'no such key');
  const revoked = refuse('key_revoked', `key ${keyId} is revoked; revocation cannot be undone`);
  if (key.state === 'revoked' && verb !== 'revoke') return revoked;
  const expired = key.expires_at !== null && key.expires_at.getTime() <= now;
  if (expired && verb === 'activate') return refuse('key_expired', `key ${keyId} expired at ${key.expires_at!.toISOString()}; an expired key cannot be activated: create a new key`);
  if (expired && verb === 'expire') return { ok: true, changed: false, message: `key ${keyId} already expired at ${key.expires_at!.toISOString()}` };
  const ok = verb === 'expire' ? await store.keys.expire(keyId, new Date(now)) : await store.keys.setState(keyId, verb === 'deactivate' ? 'inactive' : verb === 'activate' ? 'active' : 'revoked');
  if (!ok) return revoked;
  return { ok: true, changed: true, message: `key ${keyId} ${verb === 'expire' ? 'expired' : `${verb}d`}` };
}

/** How long a rotated key keeps working beside its replacement, at most (the default is a day). */
export const ROTATE_GRACE_MAX_S = 7 * 24 * 3600;
export const ROTATE_GRACE_DEFAULT_S = 24 * 3600;

/**
 * Rotates a key: a new key with the same kind, scopes and name, and the old one set to expire
 * after `graceS` seconds (0: now), so clients can move over without an outage. The old key's own
 * earlier expiry, if sooner, stands.
 */
export async function rotateKey(store: Store, keyId: string, opts: { accountId?: string; graceS?: number; now?: number } = {}): Promise<(CreatedKey & { oldKeyExpiresAt: Date }) | Refusal> {
  const now = opts.now ?? Date.now();
  const graceS = opts.graceS ?? ROTATE_GRACE_DEFAULT_S;
  const old = await store.keys.get(keyId);
  if (!old || (opts.accountId !== undefined && old.account_id !== opts.accountId)) return refuse('key_not_found', 'no such key');
  const state = keyStateOf(old, now);
  if (state === 'revoked') return refuse('key_revoked', `key ${keyId} is revoked; revocation cannot be undone`);
  if (state === 'expired') return refuse('key_expired', `key ${keyId} expired at ${old.expires_at!.toISOString()}; create a new key`);
  if (!Number.isInteger(graceS) || graceS < 0 || graceS > ROTATE_GRACE_MAX_S) return refuse('invalid_expiry', `grace must be whole seconds from 0 to ${ROTATE_GRACE_MAX_S}`);
  const created = await createKey(store, { accountId: old.account_id, kind: old.kind, scopes: old.scopes, name: old.name, expiresAt: old.expires_at }, now);
  if (!created.ok) return created;
  const until = new Date(Math.min(now + graceS * 1000, old.expires_at?.getTime() ?? Infinity));
  await store.keys.expire(keyId, until);
  return { ...created, oldKeyExpiresAt: until };
}

/** The keys of an account as people see them: never the key nor its hash. */
export async function listKeys(store: Store, accountId: string, now = Date.now()): Promise<Array<KeyListing & { shown_state: KeyStateOf }>> {
  return (await store.keys.list(accountId)).map((k) => ({ ...k, shown_state: keyStateOf(k, now) }));
}
