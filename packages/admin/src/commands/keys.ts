// API keys: create, list, and the state changes (activate, deactivate, revoke, expire).

import { changeKeyState, createKey, keyStateOf, type KeyVerb, type Refusal } from '@svc/accounts';
import { SCOPES } from '@svc/contracts';
import { type Command, ISO_8601, cell, columns, iso, needAccount, usageError } from '../command.ts';

const keyStateCommand = (verb: KeyVerb, about: string): Command => ({
  noun: 'key',
  verb,
  synopsis: 'KEY_ID_OR_KEY',
  about,
  options: [],
  arg: 'KEY_ID_OR_KEY',
  async run(store, _v, arg, onKeyChange) {
    if (!arg) return usageError('which key? give its id or the key itself', this);
    const id = await store.keys.resolveId(arg);
    if (!id) return { code: 1, out: 'no such key' };
    const r = await changeKeyState(store, id, verb);
    if (r.ok && r.changed) onKeyChange();
    return { code: r.ok ? 0 : 1, out: r.message };
  },
});

/** A refusal of createKey in the words of this command's flags. */
function inFlagWords(r: Refusal): string {
  if (r.code === 'invalid_key_kind') return '--kind must be test or live';
  if (r.code === 'invalid_scopes') return r.message.startsWith('unknown') ? r.message : 'unknown scope(s): (none given)';
  if (r.code === 'invalid_expiry') return `--expires ${r.message.replace(/^expiry /, '')}`;
  if (r.code === 'invalid_key_name') return `--name ${r.message.replace(/^name /, '')}`;
  return r.message;
}

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
      let scopes: string[] | null = null;
      if (v.scopes !== undefined && v.unrestricted) return usageError('give --scopes or --unrestricted, not both', this);
      if (v.scopes !== undefined) scopes = v.scopes.split(',').map((s) => s.trim()).filter(Boolean);
      let expiresAt: Date | null = null;
      if (v.expires !== undefined) {
        expiresAt = new Date(v.expires);
        if (!ISO_8601.test(v.expires) || Number.isNaN(expiresAt.getTime())) return usageError(`--expires must be an ISO 8601 date or time, got ${JSON.stringify(v.expires)}`, this);
      }
      const made = await createKey(store, { accountId: account, kind: v.kind ?? 'live', scopes, name: v.name ?? '', expiresAt });
      if (!made.ok) return usageError(inFlagWords(made), this);
      const { id, key } = made;
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
        keyStateOf(k, now),
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
