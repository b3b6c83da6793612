// Accounts, API keys, credits and idempotency records over the relational port. One code path for
// money: reserve() what the work could cost, settle() with what it did cost (the rest released).
// Sync validation uses it today; jobs reuse it (reserve at intake, settle at completion).

import { createHash, randomBytes } from 'node:crypto';
import type { Db, Queryable } from './db.ts';

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
}

export interface Balance {
  balance: number;
  reserved: number;
  available: number;
  subscription_status: string;
  current_period_end: string | null;
  cancel_at_period_end: boolean;
}

export type DebitResult = { ok: true } | { ok: false; available: number };

interface PendingDebit {
  amount: number;
  note: string;
  resolve: (r: DebitResult) => void;
  reject: (err: unknown) => void;
}

export type ReserveResult = { ok: true; reservationId: string } | { ok: false; available: number };

export type IdempotencyBegin =
  | { state: 'new' }
  | { state: 'replay'; status: number; body: string }
  | { state: 'conflict' }
  | { state: 'in_progress' };

export const KEY_PREFIX: Record<KeyKind, string> = { test: 'svc_test_', live: 'svc_live_' };
const KEY_FORMAT = /^svc_(test|live)_[A-Za-z0-9]{16,128}$/;

export const hashKey = (key: string): string => createHash('sha256').update(key).digest('hex');
const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

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
  const m = KEY_FORMAT.exec(key);
  return m ? (m[1] as KeyKind) : undefined;
}

export class Store {
  constructor(readonly db: Db) {}

  // ---- accounts and keys -------------------------------------------------------------------

  async createAccount(opts: { name?: string; credits?: number } = {}): Promise<string> {
    const id = newId('acc');
    await this.db.transaction(async (tx) => {
      await tx.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [id, opts.name ?? '']);
      if (opts.credits) await grant(tx, id, opts.credits, 'initial credits');
    });
    return id;
  }

  async accountExists(id: string): Promise<boolean> {
    return (await this.db.query('SELECT 1 FROM accounts WHERE id = $1', [id])).length > 0;
  }

  /** Stores a key (generated unless given) and returns it: the only time the plain key exists. */
  /** `lenient`: accept an operator-chosen key without the svc_ prefix (the bootstrap key). */
  async createKey(opts: { accountId: string; kind: KeyKind; scopes: string[] | null; name?: string; key?: string; expiresAt?: Date | null; lenient?: boolean }): Promise<{ id: string; key: string }> {
    const key = opts.key ?? generateKey(opts.kind);
    if (!opts.lenient && keyKindOf(key) !== opts.kind) throw new Error(`key must match ${KEY_PREFIX[opts.kind]}[A-Za-z0-9]{16,128}`);
    const id = newId('key');
    await this.db.query(
      'INSERT INTO api_keys (id, account_id, key_hash, display_prefix, kind, scopes, name, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
      [id, opts.accountId, hashKey(key), displayPrefix(key), opts.kind, opts.scopes ? opts.scopes.join(',') : null, opts.name ?? '', opts.expiresAt ?? null],
    );
    return { id, key };
  }

  async findKeyByHash(hash: string): Promise<KeyRecord | undefined> {
    const rows = await this.db.query<Omit<KeyRecord, 'scopes'> & { scopes: string | null }>(
      `SELECT k.id, k.account_id, k.display_prefix, k.kind, k.scopes, k.state, k.expires_at, a.subscription_status
         FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1`,
      [hash],
    );
    const r = rows[0];
    if (!r) return undefined;
    return { ...r, scopes: r.scopes === null ? null : r.scopes.split(',').filter(Boolean), expires_at: r.expires_at ? new Date(r.expires_at) : null };
  }

  /** Finds a key id from an id or a full key. */
  async resolveKeyId(idOrKey: string): Promise<string | undefined> {
    const rows = await this.db.query<{ id: string }>('SELECT id FROM api_keys WHERE id = $1 OR key_hash = $2', [idOrKey, hashKey(idOrKey)]);
    return rows[0]?.id;
  }

  /** Changes a key's state. Revocation is final: a revoked key never comes back. */
  async setKeyState(id: string, state: KeyState): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE api_keys SET state = $2, revoked_at = CASE WHEN $2 = 'revoked' THEN now() ELSE revoked_at END
        WHERE id = $1 AND state <> 'revoked' RETURNING id`,
      [id, state],
    );
    return rows.length > 0;
  }

  async expireKey(id: string, at: Date = new Date()): Promise<boolean> {
    return (await this.db.query('UPDATE api_keys SET expires_at = $2 WHERE id = $1 RETURNING id', [id, at])).length > 0;
  }

  async countKeys(): Promise<number> {
    return (await this.db.query<{ n: number }>('SELECT count(*)::int AS n FROM api_keys'))[0]!.n;
  }

  // ---- credits -------------------------------------------------------------------------------

  async grant(accountId: string, amount: number, note = 'grant'): Promise<void> {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new RangeError('amount must be a positive integer');
    await this.db.transaction((tx) => grant(tx, accountId, amount, note));
  }

  async balance(accountId: string): Promise<Balance | undefined> {
    const r = (
      await this.db.query<{ balance: number; reserved: number; subscription_status: string; current_period_end: Date | null; cancel_at_period_end: boolean }>(
        'SELECT balance, reserved, subscription_status, current_period_end, cancel_at_period_end FROM accounts WHERE id = $1',
        [accountId],
      )
    )[0];
    if (!r) return undefined;
    return {
      balance: r.balance,
      reserved: r.reserved,
      available: r.balance - r.reserved,
      subscription_status: r.subscription_status,
      current_period_end: r.current_period_end ? new Date(r.current_period_end).toISOString() : null,
      cancel_at_period_end: r.cancel_at_period_end,
    };
  }

  /**
   * Holds `amount` credits if that many are available. One conditional UPDATE does the check and
   * the hold, so concurrent callers can never take more than the balance (READ COMMITTED
   * re-checks the WHERE after waiting for the row lock; PGlite runs one transaction at a time).
   */
  async reserve(accountId: string, amount: number, purpose: string): Promise<ReserveResult> {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new RangeError('amount must be a positive integer');
    return this.db.transaction(async (tx) => {
      const hold = 'UPDATE accounts SET reserved = reserved + $2 WHERE id = $1 AND balance - reserved >= $2 RETURNING id';
      if ((await tx.query(hold, [accountId, amount])).length === 0) {
        // Refused: lock the row and look again. A settle may have released credits between the
        // two statements; a refusal must never report `available >= amount`, so hold them then.
        const available = await availableIn(tx, accountId, true);
        if (available < amount) return { ok: false as const, available };
        if ((await tx.query(hold, [accountId, amount])).length === 0) throw new Error('reserve: row changed under its lock');
      }
      const id = newId('res');
      await tx.query('INSERT INTO credit_reservations (id, account_id, amount, purpose) VALUES ($1, $2, $3, $4)', [id, accountId, amount, purpose]);
      await tx.query("INSERT INTO credit_ledger (account_id, kind, amount, reservation_id) VALUES ($1, 'reserve', $2, $3)", [accountId, amount, id]);
      return { ok: true as const, reservationId: id };
    });
  }

  /**
   * Charges `charged` of a reservation and releases the rest, exactly once: a second settle of
   * the same reservation changes nothing and returns false.
   */
  async settle(reservationId: string, charged: number, completes?: IdempotentCompletion): Promise<boolean> {
    if (!Number.isSafeInteger(charged) || charged < 0) throw new RangeError('charged must be a non-negative integer');
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<{ account_id: string; amount: number }>(
        "UPDATE credit_reservations SET status = 'settled', charged = $2, settled_at = now() WHERE id = $1 AND status = 'open' AND amount >= $2 RETURNING account_id, amount",
        [reservationId, charged],
      );
      const r = rows[0];
      if (!r) {
        const exists = await tx.query<{ amount: number; status: string }>('SELECT amount, status FROM credit_reservations WHERE id = $1', [reservationId]);
        if (exists[0]?.status === 'open') throw new RangeError(`cannot charge ${charged} of a reservation of ${exists[0].amount}`);
        return false;
      }
      await tx.query('UPDATE accounts SET reserved = reserved - $2, balance = balance - $3 WHERE id = $1', [r.account_id, r.amount, charged]);
      if (charged > 0) await tx.query("INSERT INTO credit_ledger (account_id, kind, amount, reservation_id) VALUES ($1, 'charge', $2, $3)", [r.account_id, charged, reservationId]);
      if (r.amount > charged) await tx.query("INSERT INTO credit_ledger (account_id, kind, amount, reservation_id) VALUES ($1, 'release', $2, $3)", [r.account_id, r.amount - charged, reservationId]);
      if (completes) await completeIn(tx, completes);
      return true;
    });
  }

  /**
   * Takes `amount` credits at once, without a reservation, if that many are available: for work
   * whose cost is known before it starts. Debits of one account that arrive while an earlier
   * batch is being written are written together (group commit): one statement takes their sum
   * and writes one ledger row each, or, when the sum is not available, each is tried alone in
   * arrival order. Either way every debit is all-or-nothing and the balance never goes negative.
   */
  debit(accountId: string, amount: number, note: string, completes?: IdempotentCompletion): Promise<DebitResult> {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new RangeError('amount must be a positive integer');
    if (completes) {
      // With an idempotency record to complete, the debit and the record commit together (no
      // group commit): a crash can never leave a charge whose response was not recorded.
      return this.db.transaction(async (tx) => {
        const r = await debitOne(tx, accountId, amount, note);
        if (r.ok) await completeIn(tx, completes);
        return r;
      });
    }
    return new Promise((resolve, reject) => {
      let q = this.#debits.get(accountId);
      if (!q) this.#debits.set(accountId, (q = []));
      q.push({ amount, note, resolve, reject });
      if (!this.#debiting.has(accountId)) {
        this.#debiting.add(accountId);
        // After the I/O of this event-loop turn: the requests read in it join the batch.
        setImmediate(() => void this.#drainDebits(accountId));
      }
    });
  }

  #debits = new Map<string, PendingDebit[]>();
  #debiting = new Set<string>();

  async #drainDebits(accountId: string): Promise<void> {
    try {
      for (;;) {
        const batch = this.#debits.get(accountId);
        if (!batch || batch.length === 0) break;
        this.#debits.delete(accountId);
        try {
          if (batch.length > 1 && (await this.#debitAll(accountId, batch))) {
            for (const d of batch) d.resolve({ ok: true });
            continue;
          }
          for (const d of batch) d.resolve(await debitOne(this.db, accountId, d.amount, d.note));
        } catch (err) {
          for (const d of batch) d.reject(err);
        }
      }
    } finally {
      this.#debiting.delete(accountId);
    }
  }

  /** The whole batch in one statement, or nothing (false) when its sum is not available. */
  async #debitAll(accountId: string, batch: PendingDebit[]): Promise<boolean> {
    const total = batch.reduce((n, d) => n + d.amount, 0);
    const rows = await this.db.query(
      `WITH taken AS (UPDATE accounts SET balance = balance - $2 WHERE id = $1 AND balance - reserved >= $2 RETURNING id)
       INSERT INTO credit_ledger (account_id, kind, amount, note)
       SELECT taken.id, 'debit', d.amount, d.note FROM taken, unnest($3::bigint[], $4::text[]) AS d(amount, note) RETURNING id`,
      [accountId, total, batch.map((d) => d.amount), batch.map((d) => d.note)],
    );
    return rows.length === batch.length;
  }


  /**
   * Releases open reservations of `purpose` older than `olderThanMs` (a crash left them open).
   * Returns how many were released. Sync validations never outlive their process.
   */
  async releaseStale(purpose: string, olderThanMs: number): Promise<number> {
    const rows = await this.db.query<{ id: string }>(
      "SELECT id FROM credit_reservations WHERE status = 'open' AND purpose = $1 AND created_at < now() - ($2::bigint * interval '1 millisecond')",
      [purpose, olderThanMs],
    );
    let n = 0;
    for (const { id } of rows) if (await this.settle(id, 0)) n++;
    return n;
  }

  /** Balance and reserved recomputed from the ledger alone (for audits and tests). */
  async ledgerTotals(accountId: string): Promise<{ balance: number; reserved: number }> {
    const r = (
      await this.db.query<{ balance: number; reserved: number }>(
        `SELECT COALESCE(SUM(CASE kind WHEN 'grant' THEN amount WHEN 'charge' THEN -amount WHEN 'debit' THEN -amount ELSE 0 END), 0)::bigint AS balance,
                COALESCE(SUM(CASE kind WHEN 'reserve' THEN amount WHEN 'charge' THEN -amount WHEN 'release' THEN -amount ELSE 0 END), 0)::bigint AS reserved
           FROM credit_ledger WHERE account_id = $1`,
        [accountId],
      )
    )[0]!;
    return { balance: Number(r.balance), reserved: Number(r.reserved) };
  }

  // ---- idempotency ---------------------------------------------------------------------------

  /**
   * Claims an idempotency key for a request. `new`: go ahead, then complete() or abandon().
   * A claim left in progress longer than `staleMs` (its process died) may be taken over.
   */
  async beginIdempotent(accountId: string, key: string, route: string, requestHash: string, ttlMs: number, staleMs: number): Promise<IdempotencyBegin> {
    return this.db.transaction(async (tx) => {
      await tx.query(
        `DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2
            AND (expires_at < now() OR (status = 'in_progress' AND created_at < now() - ($3::bigint * interval '1 millisecond')))`,
        [accountId, key, staleMs],
      );
      const inserted = await tx.query(
        `INSERT INTO idempotency_keys (account_id, key, route, request_hash, status, expires_at)
         VALUES ($1, $2, $3, $4, 'in_progress', now() + ($5::bigint * interval '1 millisecond'))
         ON CONFLICT (account_id, key) DO NOTHING RETURNING key`,
        [accountId, key, route, requestHash, ttlMs],
      );
      if (inserted.length > 0) return { state: 'new' as const };
      const row = (
        await tx.query<{ route: string; request_hash: string; status: string; response_status: number | null; response_body: string | null }>(
          'SELECT route, request_hash, status, response_status, response_body FROM idempotency_keys WHERE account_id = $1 AND key = $2',
          [accountId, key],
        )
      )[0];
      if (!row) return { state: 'in_progress' as const }; // deleted between our statements: treat as busy, the client retries
      if (row.route !== route || row.request_hash !== requestHash) return { state: 'conflict' as const };
      if (row.status === 'in_progress') return { state: 'in_progress' as const };
      return { state: 'replay' as const, status: row.response_status ?? 200, body: row.response_body ?? '' };
    });
  }

  async completeIdempotent(accountId: string, key: string, status: number, body: string): Promise<void> {
    await completeIn(this.db, { accountId, key, status, body });
  }

  async abandonIdempotent(accountId: string, key: string): Promise<void> {
    await this.db.query("DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND status = 'in_progress'", [accountId, key]);
  }
}

/** The response of an idempotent request, recorded in the same transaction as its charge. */
export interface IdempotentCompletion {
  accountId: string;
  key: string;
  status: number;
  body: string;
}

async function completeIn(q: Queryable, c: IdempotentCompletion): Promise<void> {
  await q.query("UPDATE idempotency_keys SET status = 'done', response_status = $3, response_body = $4 WHERE account_id = $1 AND key = $2", [c.accountId, c.key, c.status, c.body]);
}

/** One debit in one statement: the UPDATE's condition and the ledger row together. */
async function debitOne(q: Queryable, accountId: string, amount: number, note: string): Promise<DebitResult> {
  const rows = await q.query(
    `WITH taken AS (UPDATE accounts SET balance = balance - $2 WHERE id = $1 AND balance - reserved >= $2 RETURNING id)
     INSERT INTO credit_ledger (account_id, kind, amount, note) SELECT id, 'debit', $2, $3 FROM taken RETURNING id`,
    [accountId, amount, note],
  );
  return rows.length > 0 ? { ok: true } : { ok: false, available: await availableIn(q, accountId) };
}

/** Credits an account can still hold or spend (0 for an unknown account); `lock` takes the row. */
async function availableIn(q: Queryable, accountId: string, lock = false): Promise<number> {
  const r = await q.query<{ available: number }>(`SELECT balance - reserved AS available FROM accounts WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [accountId]);
  return r[0]?.available ?? 0;
}

async function grant(tx: Queryable, accountId: string, amount: number, note: string): Promise<void> {
  const r = await tx.query('UPDATE accounts SET balance = balance + $2 WHERE id = $1 RETURNING id', [accountId, amount]);
  if (r.length === 0) throw new Error(`no account ${accountId}`);
  await tx.query("INSERT INTO credit_ledger (account_id, kind, amount, note) VALUES ($1, 'grant', $2, $3)", [accountId, amount, note]);
}
