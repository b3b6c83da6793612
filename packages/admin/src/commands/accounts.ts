// Accounts: create one, list them with their balances, whether one may use sender-platform
// connectors, and whether it has the data product (the data endpoints).

import { type Command, cell, columns, count, iso, needAccount, usageError } from '../command.ts';

export const accountsCommands: Command[] = [
  {
    noun: 'account',
    verb: 'create',
    synopsis: '[--credits N] [--name NAME]',
    about: 'Creates an account holding N credits and prints its id.',
    options: [
      ['--credits N', 'initial credits, a whole number (default 0)'],
      ['--name NAME', 'a label for operators'],
    ],
    async run(store, v) {
      const credits = count(v.credits ?? v.amount, 0);
      if (credits === undefined) return usageError('--credits must be a non-negative integer', this);
      const id = await store.accounts.create({ name: v.name ?? '', credits });
      return { code: 0, out: `account ${id} created with ${credits} credits` };
    },
  },
  {
    noun: 'account',
    verb: 'list',
    synopsis: '',
    about: 'Lists every account, oldest first: id, credits (balance, reserved, available), number of keys, creation time, name.',
    options: [],
    async run(store) {
      const rows = (await store.accounts.list()).map((a) => [a.id, String(a.balance), String(a.reserved), String(a.available), String(a.keys), iso(a.created_at), cell(a.name)]);
      return { code: 0, out: columns(['ID', 'BALANCE', 'RESERVED', 'AVAILABLE', 'KEYS', 'CREATED', 'NAME'], rows, new Set([1, 2, 3, 4])) };
    },
  },
  {
    noun: 'account',
    verb: 'connectors',
    synopsis: '--account ACCOUNT_ID [--enable | --disable]',
    about: 'Shows, or sets with --enable or --disable, whether an account may use sender-platform connectors (disabled: creating one answers 403 connector_unavailable).',
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--enable', 'allow connectors (the default of a new account)'],
      ['--disable', 'refuse connectors'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      if (v.enable && v.disable) return usageError('give --enable or --disable, not both', this);
      if (v.enable || v.disable) await store.outcomes.setConnectorsEnabled(account, v.enable === true);
      return { code: 0, out: `account ${account}: connectors ${(await store.outcomes.connectorsEnabled(account)) ? 'enabled' : 'disabled'}` };
    },
  },
  {
    noun: 'account',
    verb: 'data',
    synopsis: '--account ACCOUNT_ID [--enable | --disable]',
    about: 'Shows, or sets with --enable or --disable, whether an account has the data product: the data endpoints (company and people data, the email finder). Without it they answer 403 product_not_enabled.',
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--enable', 'give the account the data product'],
      ['--disable', 'take it away (the default of a new account)'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      if (v.enable && v.disable) return usageError('give --enable or --disable, not both', this);
      if (v.enable || v.disable) await store.accounts.setDataProduct(account, v.enable === true);
      return { code: 0, out: `account ${account}: data product ${(await store.accounts.dataProduct(account)) ? 'enabled' : 'disabled'}` };
    },
  },
];
