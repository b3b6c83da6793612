// Credits: grant, the balance, the ledger entries.

import { grantCredits } from '@svc/billing';
import type { Store } from '@svc/store';
import { type AdminResult, type Command, LEDGER_LIMIT, cell, columns, count, iso, needAccount, usageError } from '../command.ts';

async function showBalance(store: Store, account: string): Promise<AdminResult> {
  const b = await store.ledger.balance(account);
  return { code: 0, out: `account ${account}: balance ${b!.balance}, reserved ${b!.reserved}, available ${b!.available}` };
}

export const creditsCommands: Command[] = [
  {
    noun: 'credits',
    verb: 'grant',
    synopsis: '--account ACCOUNT_ID --credits N',
    about: "Adds N credits to an account's balance (a ledger row `admin grant`) and shows the balance.",
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--credits N', 'how many, a positive whole number (required)'],
    ],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const n = count(v.credits ?? v.amount);
      if (!n) return usageError('--credits must be a positive integer', this);
      await grantCredits(store, account, n, 'admin grant');
      return showBalance(store, account);
    },
  },
  {
    noun: 'credits',
    verb: 'show',
    synopsis: '--account ACCOUNT_ID',
    about: "Shows an account's balance, reserved and available credits.",
    options: [['--account ACCOUNT_ID', 'the account (required)']],
    async run(store, v) {
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      return showBalance(store, account);
    },
  },
  {
    noun: 'credits',
    verb: 'ledger',
    synopsis: '--account ACCOUNT_ID [--limit N]',
    about: "Shows an account's newest credit ledger rows, newest first: id, time, kind (grant, reserve, charge, release, debit, expire), amount, reservation, note.",
    options: [
      ['--account ACCOUNT_ID', 'the account (required)'],
      ['--limit N', `how many rows, 1-${LEDGER_LIMIT.max} (default ${LEDGER_LIMIT.dflt})`],
    ],
    async run(store, v) {
      const limit = count(v.limit, LEDGER_LIMIT.dflt);
      if (limit === undefined || limit < 1 || limit > LEDGER_LIMIT.max) return usageError(`--limit must be an integer from 1 to ${LEDGER_LIMIT.max}, got ${JSON.stringify(v.limit)}`, this);
      const account = await needAccount(store, this, v);
      if (typeof account !== 'string') return account;
      const rows = (await store.ledger.entries(account, limit)).map((e) => [String(e.id), iso(e.created_at), e.kind, String(e.amount), cell(e.reservation_id), cell(e.note)]);
      return { code: 0, out: columns(['ID', 'TIME', 'KIND', 'AMOUNT', 'RESERVATION', 'NOTE'], rows, new Set([0, 3])) };
    },
  },
];
