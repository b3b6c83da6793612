// Accounts: who owns keys and credits.

import type { Db } from '../db/db.ts';
import { newId } from '../db/ids.ts';
import { insertKeyIn, type NewKey } from './keys.ts';
import { grantIn } from './ledger.ts';

/** An account as operators see it (`admin account list`). */
export interface AccountListing {
  id: string;
  name: string;
  balance: number;
  reserved: number;
  available: number;
  created_at: Date;
  /** How many API keys the account has, in any state. */
  keys: number;
  /** Whether it has the data product (the data endpoints). */
  data_product: boolean;
  /** The subscription as the account mirrors it (what the gates and GET /v1/credits read). */
  subscription_status: string;
  subscription_id: string | null;
  current_period_end: Date | null;
  cancel_at_period_end: boolean;
}

export class AccountsRepo {
  constructor(private readonly db: Db) {}

  /**
   * The first account and its key, only while the store has no account (first start): one
   * transaction under an advisory lock, so a crash never leaves the account without its key, and
   * processes starting together on one empty database create one account between them.
   * undefined: an account exists already.
   */
  async createFirst(opts: { name: string; credits: number; key: Omit<NewKey, 'accountId'> }): Promise<{ accountId: string; keyId: string; key: string } | undefined> {
    return this.db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock(727275)');
      // READ COMMITTED: this statement sees what a process that held the lock before committed.
      if ((await tx.query('SELECT 1 FROM accounts LIMIT 1')).length > 0) return undefined;
      const accountId = newId('acc');
      await tx.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [accountId, opts.name]);
      if (opts.credits) await grantIn(tx, accountId, opts.credits, 'initial credits');
      const { id, key } = await insertKeyIn(tx, { ...opts.key, accountId });
      return { accountId, keyId: id, key };
    });
  }

  async create(opts: { name?: string; credits?: number } = {}): Promise<string> {
    const id = newId('acc');
    await this.db.transaction(async (tx) => {
      await tx.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [id, opts.name ?? '']);
      if (opts.credits) await grantIn(tx, id, opts.credits, 'initial credits');
    });
    return id;
  }

  async exists(id: string): Promise<boolean> {
    return (await this.db.query('SELECT 1 FROM accounts WHERE id = $1', [id])).length > 0;
  }

  async count(): Promise<number> {
    return (await this.db.query<{ n: number }>('SELECT count(*)::int AS n FROM accounts'))[0]!.n;
  }

  /** Every account (or the one `id` names), oldest first, with its credits and how many keys it has. */
  async list(opts: { id?: string } = {}): Promise<AccountListing[]> {
    const rows = await this.db.query<Omit<AccountListing, 'available'>>(
      `SELECT a.id, a.name, a.balance, a.reserved, a.created_at, (SELECT count(*) FROM api_keys k WHERE k.account_id = a.id)::int AS keys,
              a.data_product, a.subscription_status, a.subscription_id, a.current_period_end, a.cancel_at_period_end
         FROM accounts a WHERE ($1::text IS NULL OR a.id = $1) ORDER BY date_trunc('milliseconds', a.created_at), a.id`,
      [opts.id ?? null],
    );
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      balance: r.balance,
      reserved: r.reserved,
      available: r.balance - r.reserved,
      created_at: new Date(r.created_at),
      keys: r.keys,
      data_product: r.data_product === true,
      subscription_status: r.subscription_status,
      subscription_id: r.subscription_id ?? null,
      current_period_end: r.current_period_end ? new Date(r.current_period_end) : null,
      cancel_at_period_end: r.cancel_at_period_end === true,
    }));
  }

  /** Whether the account has the data product (the data endpoints). */
  async dataProduct(id: string): Promise<boolean> {
    const rows = await this.db.query<{ data_product: boolean }>('SELECT data_product FROM accounts WHERE id = $1', [id]);
    return rows[0]?.data_product === true;
  }

  /** Turns the data product on or off for an account (operators only: the admin CLI). */
  async setDataProduct(id: string, enabled: boolean): Promise<void> {
    await this.db.query('UPDATE accounts SET data_product = $2 WHERE id = $1', [id, enabled]);
  }
}
