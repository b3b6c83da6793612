// Credits over the relational port. One code path for money: reserve() what the work could cost,
// settle() with what it did cost (the rest released), or debit() an exact cost known up front.
// `accounts.balance/reserved` are the running totals of the append-only `credit_ledger`.

import type { CreditBalance } from '@svc/contracts';
import type { Db, Queryable } from '../db/db.ts';
import { completeIn, type IdempotentCompletion } from './idempotency.ts';
import { newId } from '../db/ids.ts';

/** The credit balance of an account (the wire shape of GET /v1/credits). */
export type Balance = CreditBalance;

export type DebitResult = { ok: true } | { ok: false; available: number };

interface PendingDebit {
  amount: number;
  note: string;
  resolve: (r: DebitResult) => void;
  reject: (err: unknown) => void;
}

/** One row of the append-only ledger (`admin credits ledger`). */
export type LedgerEntry = {
  id: number;
  created_at: Date;
  kind: 'grant' | 'reserve' | 'charge' | 'release' | 'debit' | 'expire';
  amount: number;
  note: string;
  reservation_id: string | null;
};

export type ReserveResult = { ok: true; reservationId: string } | { ok: false; available: number };

/**
 * The least time between the starts of two debit batches of one account (group commit). A lone
 * debit is written at once; under load each batch carries what arrived in the last interval.
 */
const DEBIT_BATCH_GAP_MS = 2;
/** Debit batches of one account being written at once (see #drainDebits). */
const DEBIT_BATCHES_IN_FLIGHT = 2;

export class LedgerRepo {
  constructor(private readonly db: Db) {}

  async grant(accountId: string, amount: number, note = 'grant'): Promise<void> {
    if (!Number.isSafeInteger(amount) || amount <= 0) throw new RangeError('amount must be a positive integer');
    await this.db.transaction((tx) => grantIn(tx, accountId, amount, note));
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
      account_id: accountId,
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
    return this.db.transaction((tx) => reserveIn(tx, accountId, amount, purpose));
  }

  /**
   * Charges `charged` of a reservation and releases the rest, exactly once: a second settle of
   * the same reservation changes nothing and returns false.
   */
  async settle(reservationId: string, charged: number, completes?: IdempotentCompletion): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const done = await settleIn(tx, reservationId, charged);
      if (done && completes) await completeIn(tx, completes);
      return done;
    });
  }

  /**
   * Takes `amount` credits at once, without a reservation, if that many are available: for work
   * whose cost is known before it starts. Debits of one account that arrive while an earlier
   * batch is being written are written together (group commit): one statement takes their sum
   * and writes one ledger row per note (the sum of that note's debits, notes in arrival order),
   * or, when the sum is not available, each is tried alone in arrival order, one row each.
   * Either way every debit is all-or-nothing and the balance never goes negative.
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
    // Batches overlap (at most DEBIT_BATCHES_IN_FLIGHT): the next one starts DEBIT_BATCH_GAP_MS
    // after the one before began even if that one is still waiting for the store's connection
    // (on PGlite, behind a statement of analytics rows). Waiting for each batch to end made every
    // request of a busy account wait for the slowest statement ahead of its batch: the charged
    // cached validation was bound by that wait, not by CPU.
    const inFlight = new Set<Promise<void>>();
    try {
      for (let started = 0; ; ) {
        // A batch that follows another straight away waits until DEBIT_BATCH_GAP_MS after the
        // one before began: the store answers a batch in a fraction of a millisecond, so without
        // the wait a busy account's batches would hold a few debits each, one statement apiece.
        const wait = started + DEBIT_BATCH_GAP_MS - performance.now();
        if (started > 0 && wait > 0) await new Promise((r) => setTimeout(r, wait));
        while (inFlight.size >= DEBIT_BATCHES_IN_FLIGHT) await Promise.race(inFlight);
        const batch = this.#debits.get(accountId);
        if (!batch || batch.length === 0) {
          if (inFlight.size === 0) break;
          // Debits that arrive meanwhile wait for this drain (it still owns the account).
          await Promise.race(inFlight);
          continue;
        }
        started = performance.now();
        this.#debits.delete(accountId);
        const written: Promise<void> = this.#writeBatch(accountId, batch).finally(() => inFlight.delete(written));
        inFlight.add(written);
      }
    } finally {
      this.#debiting.delete(accountId);
    }
  }

  /** Settles every debit of a batch (never throws: each debit is resolved or rejected). */
  async #writeBatch(accountId: string, batch: PendingDebit[]): Promise<void> {
    try {
      if (batch.length > 1 && (await this.#debitAll(accountId, batch))) {
        for (const d of batch) d.resolve({ ok: true });
        return;
      }
      for (const d of batch) d.resolve(await debitOne(this.db, accountId, d.amount, d.note));
    } catch (err) {
      for (const d of batch) d.reject(err);
    }
  }

  /**
   * The whole batch in one statement, or nothing (false) when its sum is not available. Debits
   * of the batch with the same note are one ledger row, of their sum: the batch is taken in one
   * statement at one instant, so those rows said nothing more than their sum does, and each row
   * cost Postgres-in-WASM ~50 µs (its foreign key, the sequence, two indexes), more than the
   * rest of a cached validation's request (docs/decisions/credits-and-billing.md, "Group commit").
   */
  async #debitAll(accountId: string, batch: PendingDebit[]): Promise<boolean> {
    const byNote = new Map<string, number>();
    let total = 0;
    for (const d of batch) {
      total += d.amount;
      byNote.set(d.note, (byNote.get(d.note) ?? 0) + d.amount);
    }
    return debitIn(this.db, accountId, total, [...byNote.values()], [...byNote.keys()]);
  }

  /**
   * Releases open reservations of `purpose` (or `purpose:…`, e.g. `data` takes `data:company/enrich`)
   * older than `olderThanMs` (a crash left them open).
   * Returns how many were released. Sync validations never outlive their process.
   */
  async releaseStale(purpose: string, olderThanMs: number): Promise<number> {
    const rows = await this.db.query<{ id: string }>(
      "SELECT id FROM credit_reservations WHERE status = 'open' AND (purpose = $1 OR starts_with(purpose, $1 || ':')) AND created_at < now() - ($2::bigint * interval '1 millisecond')",
      [purpose, olderThanMs],
    );
    let n = 0;
    for (const { id } of rows) if (await this.settle(id, 0)) n++;
    return n;
  }

  /** The newest `limit` ledger rows of an account, newest first. */
  async entries(accountId: string, limit: number): Promise<LedgerEntry[]> {
    return (await this.page(accountId, { limit })).entries;
  }

  /**
   * A page of the account's ledger, newest first: `limit` rows with id below `before` (the
   * previous page's last id; none for the first page), and the cursor of the next page (null at
   * the end).
   */
  async page(accountId: string, opts: { limit: number; before?: number }): Promise<{ entries: LedgerEntry[]; next: number | null }> {
    const { limit, before } = opts;
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new RangeError('limit must be a positive integer');
    if (before !== undefined && (!Number.isSafeInteger(before) || before <= 0)) throw new RangeError('before must be a positive integer');
    const rows = await this.db.query<LedgerEntry>(
      `SELECT id, created_at, kind, amount, note, reservation_id FROM credit_ledger
        WHERE account_id = $1 AND ($2::bigint IS NULL OR id < $2::bigint) ORDER BY id DESC LIMIT $3`,
      [accountId, before ?? null, limit + 1],
    );
    const entries = rows.slice(0, limit).map((r) => ({ ...r, id: Number(r.id), amount: Number(r.amount), created_at: new Date(r.created_at) }));
    return { entries, next: rows.length > limit ? entries[entries.length - 1]!.id : null };
  }

  /**
   * Credits spent per UTC day (charges of settled holds plus exact debits) with from <= created_at
   * < to, oldest day first; days with nothing spent are left out.
   */
  async spentPerDay(accountId: string, from: Date, to: Date): Promise<Array<{ day: string; credits: number }>> {
    const rows = await this.db.query<{ day: string; credits: number | string }>(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, SUM(amount)::bigint AS credits FROM credit_ledger
        WHERE account_id = $1 AND kind IN ('charge', 'debit') AND created_at >= $2::timestamptz AND created_at < $3::timestamptz
        GROUP BY 1 ORDER BY 1`,
      [accountId, from.toISOString(), to.toISOString()],
    );
    return rows.map((r) => ({ day: r.day, credits: Number(r.credits) }));
  }

  /** Balance and reserved recomputed from the ledger alone (for audits and tests). */
  async totals(accountId: string): Promise<{ balance: number; reserved: number }> {
    const r = (
      await this.db.query<{ balance: number; reserved: number }>(
        `SELECT COALESCE(SUM(CASE kind WHEN 'grant' THEN amount WHEN 'charge' THEN -amount WHEN 'debit' THEN -amount WHEN 'expire' THEN -amount ELSE 0 END), 0)::bigint AS balance,
                COALESCE(SUM(CASE kind WHEN 'reserve' THEN amount WHEN 'charge' THEN -amount WHEN 'release' THEN -amount ELSE 0 END), 0)::bigint AS reserved
           FROM credit_ledger WHERE account_id = $1`,
        [accountId],
      )
    )[0]!;
    return { balance: Number(r.balance), reserved: Number(r.reserved) };
  }
}

/**
 * reserve() inside the caller's transaction (a job's hold commits with the job row, or neither
 * does). One conditional UPDATE does the check and the hold, so concurrent callers can never take
 * more than the balance (READ COMMITTED re-checks the WHERE after waiting for the row lock; PGlite
 * runs one transaction at a time).
 */
export async function reserveIn(tx: Queryable, accountId: string, amount: number, purpose: string): Promise<ReserveResult> {
  if (!Number.isSafeInteger(amount) || amount <= 0) throw new RangeError('amount must be a positive integer');
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
}

/**
 * settle() inside the caller's transaction: charges `charged` of an open reservation and releases
 * the rest, exactly once (false: it was settled already, nothing changed).
 */
export async function settleIn(tx: Queryable, reservationId: string, charged: number): Promise<boolean> {
  if (!Number.isSafeInteger(charged) || charged < 0) throw new RangeError('charged must be a non-negative integer');
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
  const [acct] = await tx.query<{ subscription_status: string }>('UPDATE accounts SET reserved = reserved - $2, balance = balance - $3 WHERE id = $1 RETURNING subscription_status', [r.account_id, r.amount, charged]);
  if (charged > 0) await tx.query("INSERT INTO credit_ledger (account_id, kind, amount, reservation_id) VALUES ($1, 'charge', $2, $3)", [r.account_id, charged, reservationId]);
  if (r.amount > charged) {
    await tx.query("INSERT INTO credit_ledger (account_id, kind, amount, reservation_id) VALUES ($1, 'release', $2, $3)", [r.account_id, r.amount - charged, reservationId]);
    // Credits held by work that outlived the subscription come back released, and expire like
    // the rest did at its end (an ended subscription's credits go to 0).
    if (acct?.subscription_status === 'canceled') await expireIn(tx, r.account_id, `subscription ended: released by ${reservationId}`);
  }
  return true;
}

/**
 * Takes `total` from the balance if that much is available, with one `debit` ledger row per
 * amount (their notes, in order), in one call of the credit_debit function
 * (infra/migrations/025_debit_function.sql): false, and nothing written, when it is not.
 */
async function debitIn(q: Queryable, accountId: string, total: number, amounts: number[], notes: string[]): Promise<boolean> {
  const [r] = await q.query<{ ok: boolean }>('SELECT credit_debit($1, $2, $3::bigint[], $4::text[]) AS ok', [accountId, total, amounts, notes]);
  return r?.ok === true;
}

/** One debit in one statement: the balance's condition and the ledger row together. */
async function debitOne(q: Queryable, accountId: string, amount: number, note: string): Promise<DebitResult> {
  return (await debitIn(q, accountId, amount, [amount], [note])) ? { ok: true } : { ok: false, available: await availableIn(q, accountId) };
}

/** Credits an account can still hold or spend (0 for an unknown account); `lock` takes the row. */
async function availableIn(q: Queryable, accountId: string, lock = false): Promise<number> {
  const r = await q.query<{ available: number }>(`SELECT balance - reserved AS available FROM accounts WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [accountId]);
  return r[0]?.available ?? 0;
}

/**
 * Sets the account's available credits to 0 with one `expire` ledger row (none when nothing is
 * available). Credits held by open reservations stay held: they are charged or, released, expire
 * then. Returns how many expired.
 */
export async function expireIn(tx: Queryable, accountId: string, note: string): Promise<number> {
  const n = await availableIn(tx, accountId, true);
  if (n <= 0) return 0;
  await tx.query('UPDATE accounts SET balance = balance - $2 WHERE id = $1', [accountId, n]);
  await tx.query("INSERT INTO credit_ledger (account_id, kind, amount, note) VALUES ($1, 'expire', $2, $3)", [accountId, n, note]);
  return n;
}

export async function grantIn(tx: Queryable, accountId: string, amount: number, note: string): Promise<void> {
  const r = await tx.query('UPDATE accounts SET balance = balance + $2 WHERE id = $1 RETURNING id', [accountId, amount]);
  if (r.length === 0) throw new Error(`no account ${accountId}`);
  await tx.query("INSERT INTO credit_ledger (account_id, kind, amount, note) VALUES ($1, 'grant', $2, $3)", [accountId, amount, note]);
}
