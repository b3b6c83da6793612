// Accounts: who owns keys and credits.

import type { Db } from './db.ts';
import { newId } from './ids.ts';
import { grantIn } from './ledger.ts';

export class AccountsRepo {
  constructor(private readonly db: Db) {}

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
}
