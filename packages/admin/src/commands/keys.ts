// API keys: create, list, and the state changes (activate, deactivate, revoke, expire).

import { isScope, SCOPES } from '@svc/contracts';
import { type Command, ISO_8601, cell, columns, iso, keyState, needAccount, usageError } from '../command.ts';

const keyStateCommand = (verb: 'activate' | 'deactivate' | 'revoke' | 'expire', about: string): Command => ({
  noun: 'key',
  verb,
  synopsis: 'KEY_ID_OR_KEY',
  about,
  options: [],
  arg: 'KEY_ID_OR_KEY',
  async run(store, _v, arg, onKeyChange) {
    if (!arg) return usageError('which key? give its id or the key itself', this);
    const id = await store.keys.resolveId(arg);
    const key = id ? await store.keys.get(id) : undefined;
    if (!id || !key) return { code: 1, out: 'no such key' };
    if (key.state === 'revoked' && verb !== 'revoke') return { code: 1, out: `key ${id} is revoked; revocation cannot be undone` };
    const expired = key.expires_at !== null && key.expires_at.getTime() <= Date.now();
    if (expired && verb === 'activate') return { code: 1, out: `key ${id} expired at ${iso(key.expires_at)}; an expired key cannot be activated: create a new key` };
    if (expired && verb === 'expire') return { code: 0, out: `key ${id} already expired at ${iso(key.expires_at)}` };
    const ok = verb === 'expire' ? await store.keys.expire(id) : await store.keys.setState(id, verb === 'deactivate' ? 'inactive' : verb === 'activate' ? 'active' : 'revoked');
    onKeyChange();
    if (!ok) return { code: 1, out: `key ${id} is revoked; revocation cannot be undone` };
    return { code: 0, out: `key ${id} ${verb === 'expire' ? 'expired' : `${verb}d`}` };
  },
});

export const keysCommands: Command[] = [
  {
    noun: 'key',
    verb: 'create',
    synopsis: '--account ACCOUNT_ID [--scopes a,b | --unrestricted] [--kind test|live] [--name NAME] [--expires ISO_DATE]',
    about: 'Creates an API key of an account and prints it once (only its SHA-256 is stored).',
    options: [
      ['--account ACCOUNT_ID', 'the account the key belongs to (required)'],
      ['--scopes a,b', `what the key may do, comma-separated: ${SCOPES.join(', ')}`],
      ['--unrestricted', 'every scope (the default without --scopes)'],
      ['--kind test|live', 'the key prefix, svc_test_ or svc_live_ (default live)'],
      ['--name NAME', 'a label for operators'],
      ['--expires ISO_DATE', 'when the key stops working, in the future: 2027-01-31 (midnight UTC) or 2027-01-31T12:00:00Z'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const kind = v.kind ?? 'live';
      if (kind !== 'test' && kind !== 'live') return usageError('--kind must be test or live', this);
      let scopes: string[] | null = null;
      if (v.scopes !== undefined && v.unrestricted) return usageError('give --scopes or --unrestricted, not both', this);
      if (v.scopes !== undefined) {
        scopes = v.scopes.split(',').map((s) => s.trim()).filter(Boolean);
        const bad = scopes.filter((s) => !isScope(s));
        if (bad.length > 0 || scopes.length === 0) return usageError(`unknown scope(s): ${bad.join(', ') || '(none given)'}`, this);
      }
      let expiresAt: Date | null = null;
      if (v.expires !== undefined) {
        expiresAt = new Date(v.expires);
        if (!ISO_8601.test(v.expires) || Number.isNaN(expiresAt.getTime())) return usageError(`--expires must be an ISO 8601 date or time, got ${JSON.stringify(v.expires)}`, this);
        // A key that is expired from birth is a mistake (a typo in the year), never what was meant.
        if (expiresAt.getTime() <= Date.now()) return usageError(`--expires must be in the future, got ${expiresAt.toISOString()}`, this);
      }
      const { id, key } = await store.keys.create({ accountId: account, kind, scopes, name: v.name ?? '', expiresAt });
      const what = [scopes ? scopes.join(',') : 'unrestricted', ...(expiresAt ? [`expires ${expiresAt.toISOString()}`] : [])].join(', ');
      return { code: 0, out: `key ${id} created (${what})\n${key}\nThis key is shown once; only its SHA-256 hash is stored.` };
    },
  },
  {
    noun: 'key',
    verb: 'list',
    synopsis: '--account ACCOUNT_ID',
    about:
      'Lists the keys of an account, oldest first: id, display prefix, kind, state (active, inactive, revoked, or expired once its expiry has passed), creation, last use (to about a minute), expiry, scopes, name. Never the key nor its hash.',
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const now = Date.now();
      const rows = (await store.keys.list(account)).map((k) => [
        k.id,
        k.display_prefix,
        k.kind,
        keyState(k, now),
        iso(k.created_at),
        iso(k.last_used_at),
        iso(k.expires_at),
        k.scopes === null ? 'unrestricted' : k.scopes.length === 0 ? 'none' : k.scopes.join(','),
        cell(k.name),
      ]);
      return { code: 0, out: columns(['ID', 'PREFIX', 'KIND', 'STATE', 'CREATED', 'LAST_USED', 'EXPIRES', 'SCOPES', 'NAME'], rows) };
    },
  },
  keyStateCommand('activate', 'Makes an inactive key work again. A revoked or expired key cannot be activated: create a new key.'),
  keyStateCommand('deactivate', 'Stops a key from working until it is activated again.'),
  keyStateCommand('revoke', 'Stops a key for good; revocation cannot be undone.'),
  keyStateCommand('expire', 'Expires a key now: from then on it is refused with api_key_expired.'),
];
