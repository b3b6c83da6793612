// The dashboard's people: create a sign-in (the password read from standard input), list, remove,
// make an operator, and issue a single-use set-up link.

import { createUser, isRole, issueLink } from '@svc/accounts';
import { type Command, cell, columns, iso, needAccount, usageError } from '../command.ts';

export const usersCommands: Command[] = [
  {
    noun: 'user',
    verb: 'create',
    synopsis: '--account ACCOUNT_ID --email EMAIL [--role owner|member] [--operator] --password-stdin',
    about: 'Creates a dashboard sign-in for an account, its password read from standard input (one line; at least 12 characters), so scripts can create one: `printf %s "$PW" | npm run admin -- user create ...`.',
    options: [
      ['--account ACCOUNT_ID', 'the account the user belongs to (required)'],
      ['--email EMAIL', 'the sign-in address (required)'],
      ['--role owner|member', 'owner (keys, team, billing) or member (default owner)'],
      ['--operator', "also an operator of this service (the operator console); only this command grants it"],
      ['--password-stdin', 'read the password from standard input (required)'],
    ],
    async run(store, v, _arg, _onKeyChange, ctx) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      if (!v.email) return usageError('--email is required', this);
      if (!v['password-stdin'] || ctx.password === undefined) return usageError('--password-stdin is required: the password is read from standard input', this);
      const made = await createUser(store, { accountId: account, email: v.email, password: ctx.password, role: v.role ?? 'owner', operator: v.operator === true });
      if (!made.ok) return made.code === 'email_taken' ? { code: 1, out: made.message } : usageError(made.message, this);
      return { code: 0, out: `user ${made.user.id} created: ${made.user.email}, ${made.user.role}${made.user.operator ? ', operator' : ''}` };
    },
  },
  {
    noun: 'user',
    verb: 'list',
    synopsis: '--account ACCOUNT_ID',
    about: 'Lists the current dashboard users of an account, oldest first: id, address, role, operator, creation.',
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const rows = (await store.users.list(account)).map((u) => [u.id, cell(u.email), u.role, u.operator ? 'yes' : 'no', iso(u.created_at)]);
      return { code: 0, out: columns(['ID', 'EMAIL', 'ROLE', 'OPERATOR', 'CREATED'], rows) };
    },
  },
  {
    noun: 'user',
    verb: 'remove',
    synopsis: 'USER_ID [--force]',
    about: "Removes a dashboard user, ends every session of theirs and expires the invitations they sent. An account's last owner is kept unless --force (then give the account a new owner with `user link --account ACCOUNT_ID`).",
    options: [['--force', "remove the account's last owner too"]],
    arg: 'USER_ID',
    async run(store, v, arg) {
      if (!arg) return usageError('which user? give their id', this);
      const r = await store.users.remove(arg, { allowLastOwner: v.force === true });
      if (r === 'user_not_found') return { code: 1, out: 'no such user' };
      if (r === 'last_owner') return { code: 1, out: `user ${arg} is the last owner of their account: give it another owner first (user link --account ACCOUNT_ID), or pass --force` };
      return { code: 0, out: `user ${arg} removed; their sessions ended` };
    },
  },
  {
    noun: 'user',
    verb: 'link',
    synopsis: '--account ACCOUNT_ID [--role owner|member]',
    about: 'Prints a single-use link that creates a dashboard sign-in for the account (24 hours): for a first owner whose first-run link expired, or a user to add without the dashboard.',
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--role owner|member', 'the role of the user the link creates (default owner)'],
    ],
    async run(store, v, _arg, _onKeyChange, ctx) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const role = v.role ?? 'owner';
      if (!isRole(role)) return usageError('--role must be owner or member', this);
      const link = await issueLink(store, ctx.publicUrl ?? 'http://localhost:8080', { kind: 'owner_setup', accountId: account, role });
      return { code: 0, out: `${link.url}\nSingle use, valid until ${link.expiresAt.toISOString()}; shown once (only its SHA-256 is stored).` };
    },
  },
];
