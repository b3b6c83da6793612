// Delivery outcomes (migration 013): the append-only event log with its idempotency identity,
// the account's suppression list, and the sender-platform connector credentials.
//
// One import is one transaction: the events, the suppressions they apply and the verdict-cache
// invalidation either all happen or none does (suppression fails closed), so a failed
// import leaves nothing half-written and the same import again succeeds. Which suppressions apply
// is decided by the rules the caller hands in (SuppressionRules, @svc/outcomes' suppressionRules);
// this repository reads and writes the rows.

import type { OutcomeEvent, OutcomeLabel, OutcomeSignal, OutcomeSource, OutcomeValue, SuppressionKind } from '@svc/contracts';
import type { Db, Queryable } from '../db/db.ts';
import { newId } from '../db/ids.ts';

/** An event to store: what the parser (@svc/outcomes) made of one row. */
export type NewOutcomeEvent = OutcomeEvent;

/** A stored event, as the events route shows it. */
export interface StoredOutcomeEvent {
  id: string;
  email: string;
  mailbox: string;
  email_hash: string;
  domain: string;
  outcome: OutcomeValue;
  label: OutcomeLabel;
  signal: OutcomeSignal | null;
  source: OutcomeSource;
  external_id: string;
  occurred_at: string | null;
  occurred_at_us: number | null;
  action: string | null;
  smtp_enhanced_code: string | null;
  suppressed: SuppressionKind | null;
  imported_at: Date;
  seq: number;
}

/** What became of each submitted event (by its position in the array given to importEvents). */
export type EventFate =
  | { kind: 'accepted'; event: StoredOutcomeEvent; staleSuppression: boolean }
  | { kind: 'duplicate' }
  | { kind: 'conflict' };

export interface ImportResult {
  fates: EventFate[];
  /** Mailboxes whose verdict-cache entry was invalidated. */
  invalidated: number;
}

/** Which step of an import failed: the event log, or the fail-closed suppression step. */
export class OutcomeWriteError extends Error {
  constructor(
    readonly step: 'events' | 'suppression',
    cause: unknown,
  ) {
    super(`outcome import failed at the ${step} step: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

export interface ImportOptions {
  /**
   * Called inside the transaction, after the suppressions are written and before COMMIT, with
   * the newly suppressed mailboxes: invalidates their cached verdicts. Returns how many entries it
   * invalidated. A throw fails the import as a suppression failure (nothing is kept).
   */
  invalidate?: (mailboxes: string[]) => Promise<number>;
  /** Test hook: runs inside the transaction between the two steps. */
  afterEvents?: (tx: Queryable) => Promise<void>;
}

/**
 * The suppression rules an import runs (the pure rules live in @svc/outcomes, which the store
 * does not import: the importer hands them in).
 */
export interface SuppressionRules {
  /** Suppression kinds from weakest to strongest: a mailbox keeps the strongest it was given. */
  readonly strength: readonly SuppressionKind[];
  /** Whether suppression `a` replaces `b`. */
  outranks(a: SuppressionKind, b: SuppressionKind): boolean;
  /**
   * Of the new events (`fresh`: indexes into `events`), the suppressions that apply and the stale
   * ones, given the newest stored delivery evidence per mailbox (microseconds).
   */
  decide(events: readonly NewOutcomeEvent[], fresh: readonly number[], storedDelivery: ReadonlyMap<string, number>, nowUs: number): { applies: Map<number, SuppressionKind>; stale: Set<number> };
}

export interface ConnectorRecord {
  account_id: string;
  platform: string;
  status: 'active' | 'revoked';
  created_at: Date;
  revoked_at: Date | null;
  last_event_at: Date | null;
  events_received: number;
  events_ignored: number;
  sent_events: number;
}

const EVENT_COLUMNS =
  'id, seq, email, mailbox, email_hash, domain, outcome, label, signal, source, external_id, occurred_at, occurred_at_us, action, smtp_enhanced_code, suppressed, imported_at';

type RawEvent = Omit<StoredOutcomeEvent, 'imported_at' | 'seq' | 'occurred_at_us'> & { imported_at: Date | string; seq: number | string; occurred_at_us: number | string | null };

const toEvent = (r: RawEvent): StoredOutcomeEvent => ({
  ...r,
  seq: Number(r.seq),
  occurred_at_us: r.occurred_at_us === null ? null : Number(r.occurred_at_us),
  imported_at: new Date(r.imported_at),
});

/** Rows per INSERT statement (its columns are arrays). */
const ROWS_PER_INSERT = 5000;

const identity = (source: string, externalId: string): string => `${source}\n${externalId}`;

/** How long this process trusts what it read about an account having suppressions (other processes' imports show after at most this). */
export const SUPPRESSION_FLAG_TTL_MS = 1000;

export class OutcomesRepo {
  /** Per account: whether it has any suppression, and until when that reading is trusted. */
  readonly #flags = new Map<string, { has: boolean; until: number }>();
  /** The flag queries under way, by account. */
  readonly #refreshing = new Map<string, Promise<boolean>>();

  constructor(
    private readonly db: Db,
    /** The clock the suppression flag's reading is trusted by (Date.now by default). */
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Whether the account may have suppressions: read from the database at most once a second per
   * account (SUPPRESSION_FLAG_TTL_MS); an import through this process sets it at once. Validation
   * skips the per-address lookup when it is false: one indexed query per request cost the cached
   * sync path 85% of its throughput on PGlite. A fresh reading is answered at once (no promise);
   * a stale one once the query is back.
   */
  mayHaveSuppressions(accountId: string): boolean | Promise<boolean> {
    const now = this.now();
    const f = this.#flags.get(accountId);
    if (f && (f.has || f.until > now)) return f.has;
    // Requests that find the flag stale together share one query (not one each).
    let refresh = this.#refreshing.get(accountId);
    if (!refresh) {
      refresh = this.hasSuppressions(accountId).then(
        (has) => {
          this.#refreshing.delete(accountId);
          if (this.#flags.size >= 100_000) this.#flags.clear();
          // An import that set the flag meanwhile wins (it is newer than this query's answer).
          if (!this.#flags.get(accountId)?.has) this.#flags.set(accountId, { has, until: now + SUPPRESSION_FLAG_TTL_MS });
          return has || this.#flags.get(accountId)!.has;
        },
        (err: unknown) => {
          this.#refreshing.delete(accountId);
          throw err;
        },
      );
      this.#refreshing.set(accountId, refresh);
    }
    return refresh;
  }

  /**
   * Stores a batch of parsed events for an account in one transaction. Per event: `duplicate`
   * when its (source, external_id) is stored (or came earlier in the batch) with the same
   * fingerprint, `conflict` when with another (the stored or first event wins), else `accepted`.
   * Accepted events that ask for a suppression apply it as `rules` decide (not when older than the
   * newest delivery evidence for the mailbox: `staleSuppression`). Throws OutcomeWriteError
   * (nothing kept).
   */
  async importEvents(accountId: string, events: readonly NewOutcomeEvent[], rules: SuppressionRules, opts: ImportOptions = {}): Promise<ImportResult> {
    const fates: Array<EventFate | undefined> = new Array(events.length);
    const nowUs = Date.now() * 1000;
    let step: 'events' | 'suppression' = 'events';
    try {
      return await this.db.transaction(async (tx) => {
        // An identity stored before is compared with the stored event; one new in this batch with
        // its first row, which is the one stored (fresh).
        const stored = await this.#storedFingerprints(tx, accountId, events);
        const firstOf = new Map<string, number>();
        const fresh: number[] = [];
        events.forEach((e, i) => {
          const id = identity(e.source, e.external_id);
          const ref = stored.get(id) ?? (firstOf.has(id) ? events[firstOf.get(id)!]!.fingerprint : undefined);
          if (ref === undefined) {
            firstOf.set(id, i);
            fresh.push(i);
          } else fates[i] = ref === e.fingerprint ? { kind: 'duplicate' } : { kind: 'conflict' };
        });
        // The newest stored delivery evidence of the mailboxes asking for a suppression.
        const storedDelivery = await this.#newestDelivery(tx, accountId, [...new Set(fresh.filter((i) => events[i]!.suppresses).map((i) => events[i]!.mailbox))]);
        const { applies, stale } = rules.decide(events, fresh, storedDelivery, nowUs);
        const inserted = await this.#insertEvents(tx, accountId, fresh.map((i) => ({ e: events[i]!, suppressed: applies.get(i) ?? null })));
        fresh.forEach((i, k) => {
          const row = inserted[k];
          // Another import stored this identity between our read and our insert (it committed
          // first): compare with what it stored, as with any stored event.
          fates[i] = row ? { kind: 'accepted', event: row, staleSuppression: stale.has(i) } : { kind: 'conflict' };
        });
        const late = fresh.filter((i, k) => !inserted[k]);
        if (late.length > 0) {
          const now = await this.#storedFingerprints(tx, accountId, late.map((i) => events[i]!));
          for (const i of late) fates[i] = now.get(identity(events[i]!.source, events[i]!.external_id)) === events[i]!.fingerprint ? { kind: 'duplicate' } : { kind: 'conflict' };
        }
        await opts.afterEvents?.(tx);
        step = 'suppression';
        // The strongest suppression per mailbox among the accepted events, then one upsert each.
        const perMailbox = new Map<string, { kind: SuppressionKind; eventId: string }>();
        for (const [i, kind] of applies) {
          const f = fates[i];
          if (f?.kind !== 'accepted') continue;
          const m = events[i]!.mailbox;
          const had = perMailbox.get(m);
          if (!had || rules.outranks(kind, had.kind)) perMailbox.set(m, { kind, eventId: f.event.id });
        }
        let invalidated = 0;
        if (perMailbox.size > 0) {
          await this.#suppress(tx, accountId, perMailbox, rules.strength);
          invalidated = (await opts.invalidate?.([...perMailbox.keys()])) ?? 0;
          // Before COMMIT: a validation of this process that reads the flag after the commit
          // looks the addresses up (a rollback leaves a flag that only costs lookups).
          this.#flags.set(accountId, { has: true, until: Infinity });
        }
        return { fates: fates as EventFate[], invalidated };
      });
    } catch (err) {
      if (err instanceof OutcomeWriteError) throw err;
      throw new OutcomeWriteError(step, err);
    }
  }

  async #storedFingerprints(tx: Queryable, accountId: string, events: readonly NewOutcomeEvent[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (let at = 0; at < events.length; at += 5000) {
      const slice = events.slice(at, at + 5000);
      const rows = await tx.query<{ source: string; external_id: string; fingerprint: string }>(
        `SELECT e.source, e.external_id, e.fingerprint
           FROM unnest($2::text[], $3::text[]) AS k(source, external_id)
           JOIN outcome_events e ON e.account_id = $1 AND e.source = k.source AND e.external_id = k.external_id`,
        [accountId, slice.map((e) => e.source), slice.map((e) => e.external_id)],
      );
      for (const r of rows) out.set(identity(r.source, r.external_id), r.fingerprint);
    }
    return out;
  }

  async #newestDelivery(tx: Queryable, accountId: string, mailboxes: string[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (mailboxes.length === 0) return out;
    const rows = await tx.query<{ mailbox: string; t: number | string }>(
      `SELECT mailbox, max(coalesce(occurred_at_us, (extract(epoch from imported_at) * 1000000)::bigint)) AS t
         FROM outcome_events
        WHERE account_id = $1 AND label = 'delivered' AND mailbox = ANY($2::text[])
        GROUP BY mailbox`,
      [accountId, mailboxes],
    );
    for (const r of rows) out.set(r.mailbox, Number(r.t));
    return out;
  }

  /**
   * Inserts the events (one statement per 5,000, the columns as arrays: unnest is far cheaper to
   * plan than 20 parameters a row); returns the stored row per input, or undefined where the
   * identity was taken meanwhile.
   */
  async #insertEvents(tx: Queryable, accountId: string, rows: ReadonlyArray<{ e: NewOutcomeEvent; suppressed: SuppressionKind | null }>): Promise<Array<StoredOutcomeEvent | undefined>> {
    const out: Array<StoredOutcomeEvent | undefined> = [];
    for (let at = 0; at < rows.length; at += ROWS_PER_INSERT) {
      const slice = rows.slice(at, at + ROWS_PER_INSERT);
      const ids = slice.map(() => newId('oev'));
      const col = <T>(f: (r: { e: NewOutcomeEvent; suppressed: SuppressionKind | null }) => T): T[] => slice.map(f);
      const inserted = await tx.query<{ id: string; seq: number | string; imported_at: Date | string }>(
        `INSERT INTO outcome_events (id, account_id, source, external_id, fingerprint, email, mailbox, email_hash, domain, outcome, label, signal, action,
                                     smtp_enhanced_code, issuer, evidence, occurred_at, occurred_at_us, local_zone_unknown, suppressed)
         SELECT x.id, $1, x.source, x.external_id, x.fingerprint, x.email, x.mailbox, x.email_hash, x.domain, x.outcome, x.label, x.signal, x.action,
                x.code, x.issuer, x.evidence, x.occurred_at, x.occurred_us, x.zone_unknown, x.suppressed
           FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
                       $13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::bigint[], $19::boolean[], $20::text[])
             AS x(id, source, external_id, fingerprint, email, mailbox, email_hash, domain, outcome, label, signal, action, code, issuer, evidence,
                  occurred_at, occurred_us, zone_unknown, suppressed)
         ON CONFLICT (account_id, source, external_id) DO NOTHING
         RETURNING id, seq, imported_at`,
        [
          accountId,
          ids,
          col((r) => r.e.source),
          col((r) => r.e.external_id),
          col((r) => r.e.fingerprint),
          col((r) => r.e.email),
          col((r) => r.e.mailbox),
          col((r) => r.e.email_hash),
          col((r) => r.e.domain),
          col((r) => r.e.outcome),
          col((r) => r.e.label),
          col((r) => r.e.signal),
          col((r) => r.e.action),
          col((r) => r.e.smtp_enhanced_code),
          col((r) => r.e.issuer),
          col((r) => r.e.evidence),
          col((r) => r.e.occurred_at),
          col((r) => r.e.occurred_at_us),
          col((r) => r.e.local_zone_unknown),
          col((r) => r.suppressed),
        ],
      );
      const byId = new Map(inserted.map((r) => [r.id, r]));
      slice.forEach(({ e, suppressed }, k) => {
        const r = byId.get(ids[k]!);
        out.push(
          r && {
            id: r.id,
            seq: Number(r.seq),
            imported_at: new Date(r.imported_at),
            email: e.email,
            mailbox: e.mailbox,
            email_hash: e.email_hash,
            domain: e.domain,
            outcome: e.outcome,
            label: e.label,
            signal: e.signal,
            source: e.source,
            external_id: e.external_id,
            occurred_at: e.occurred_at,
            occurred_at_us: e.occurred_at_us,
            action: e.action,
            smtp_enhanced_code: e.smtp_enhanced_code,
            suppressed,
          },
        );
      });
    }
    return out;
  }

  /** Upserts one suppression per mailbox; a stored one is replaced only by a stronger kind (`strength`: weakest first). */
  async #suppress(tx: Queryable, accountId: string, perMailbox: Map<string, { kind: SuppressionKind; eventId: string }>, strength: readonly SuppressionKind[]): Promise<void> {
    const entries = [...perMailbox];
    await tx.query(
      `INSERT INTO suppressions (account_id, mailbox, kind, event_id)
       SELECT $1, m, k, e FROM unnest($2::text[], $3::text[], $4::text[]) AS x(m, k, e)
       ON CONFLICT (account_id, mailbox) DO UPDATE SET kind = EXCLUDED.kind, event_id = EXCLUDED.event_id, suppressed_at = now()
        WHERE coalesce(array_position($5::text[], suppressions.kind), 0) < coalesce(array_position($5::text[], EXCLUDED.kind), 0)`,
      [accountId, entries.map(([m]) => m), entries.map(([, s]) => s.kind), entries.map(([, s]) => s.eventId), strength],
    );
  }

  /** The account's suppressions among these mailboxes. */
  async suppressedAmong(accountId: string, mailboxes: readonly string[]): Promise<Map<string, SuppressionKind>> {
    const out = new Map<string, SuppressionKind>();
    if (mailboxes.length === 0) return out;
    const rows = await this.db.query<{ mailbox: string; kind: SuppressionKind }>(
      'SELECT mailbox, kind FROM suppressions WHERE account_id = $1 AND mailbox = ANY($2::text[])',
      [accountId, [...new Set(mailboxes)]],
    );
    for (const r of rows) out.set(r.mailbox, r.kind);
    return out;
  }

  /** The suppressions among these mailboxes of the account that owns a job (the job worker's lookup). */
  async suppressedForJob(jobId: string, mailboxes: readonly string[]): Promise<Map<string, SuppressionKind>> {
    const out = new Map<string, SuppressionKind>();
    if (mailboxes.length === 0) return out;
    const rows = await this.db.query<{ mailbox: string; kind: SuppressionKind }>(
      'SELECT s.mailbox, s.kind FROM jobs j JOIN suppressions s ON s.account_id = j.account_id WHERE j.id = $1 AND s.mailbox = ANY($2::text[])',
      [jobId, [...new Set(mailboxes)]],
    );
    for (const r of rows) out.set(r.mailbox, r.kind);
    return out;
  }

  /** Whether the account has any suppression (a cheap gate before per-address lookups). */
  async hasSuppressions(accountId: string): Promise<boolean> {
    return (await this.db.query('SELECT 1 FROM suppressions WHERE account_id = $1 LIMIT 1', [accountId])).length > 0;
  }

  /**
   * The account's events, newest first (by import order), optionally for one mailbox; `before`
   * is the cursor (the seq of the last event of the previous page).
   */
  async listEvents(accountId: string, q: { mailbox?: string; limit: number; before?: number }): Promise<StoredOutcomeEvent[]> {
    const params: unknown[] = [accountId, q.limit];
    let where = 'account_id = $1';
    if (q.mailbox !== undefined) {
      params.push(q.mailbox);
      where += ` AND mailbox = $${params.length}`;
    }
    if (q.before !== undefined) {
      params.push(q.before);
      where += ` AND seq < $${params.length}`;
    }
    const rows = await this.db.query<RawEvent>(`SELECT ${EVENT_COLUMNS} FROM outcome_events WHERE ${where} ORDER BY seq DESC LIMIT $2`, params);
    return rows.map(toEvent);
  }

  /**
   * The account's decision-grade evidence for these mailboxes: per mailbox, whether a `delivered`
   * event exists and whether a confirmed `bounced_hard` one does, with the newest such event
   * (catch-all recovery).
   */
  async evidenceFor(accountId: string, mailboxes: readonly string[]): Promise<Map<string, { label: 'delivered' | 'bounced_hard'; event_id: string; outcome: OutcomeValue; occurred_at: string | null }>> {
    const out = new Map<string, { label: 'delivered' | 'bounced_hard'; event_id: string; outcome: OutcomeValue; occurred_at: string | null }>();
    if (mailboxes.length === 0) return out;
    const rows = await this.db.query<{ mailbox: string; label: 'delivered' | 'bounced_hard'; id: string; outcome: OutcomeValue; occurred_at: string | null }>(
      `SELECT DISTINCT ON (mailbox) mailbox, label, id, outcome, occurred_at
         FROM outcome_events
        WHERE account_id = $1 AND mailbox = ANY($2::text[]) AND label IN ('delivered', 'bounced_hard')
        ORDER BY mailbox, coalesce(occurred_at_us, (extract(epoch from imported_at) * 1000000)::bigint) DESC, seq DESC`,
      [accountId, [...new Set(mailboxes)]],
    );
    for (const r of rows) out.set(r.mailbox, { label: r.label, event_id: r.id, outcome: r.outcome, occurred_at: r.occurred_at });
    return out;
  }

  /** Mailboxes of one domain with confirmed delivery evidence for the account (address-pattern learning). */
  async deliveredMailboxes(accountId: string, domain: string, limit = 1000): Promise<string[]> {
    const rows = await this.db.query<{ mailbox: string }>(
      `SELECT DISTINCT mailbox FROM outcome_events WHERE account_id = $1 AND domain = $2 AND label = 'delivered' ORDER BY mailbox LIMIT $3`,
      [accountId, domain, limit],
    );
    return rows.map((r) => r.mailbox);
  }

  // --- connectors ---------------------------------------------------------------------------

  async connectorsEnabled(accountId: string): Promise<boolean> {
    const rows = await this.db.query<{ connectors_enabled: boolean }>('SELECT connectors_enabled FROM accounts WHERE id = $1', [accountId]);
    return rows[0]?.connectors_enabled === true;
  }

  async setConnectorsEnabled(accountId: string, enabled: boolean): Promise<void> {
    await this.db.query('UPDATE accounts SET connectors_enabled = $2 WHERE id = $1', [accountId, enabled]);
  }

  /**
   * Creates (or re-creates) the account's connector for a platform with a new secret hash: the
   * previous secret stops matching in the same statement. Counters start again at 0.
   */
  async createConnector(accountId: string, platform: string, secretHash: string): Promise<ConnectorRecord> {
    const rows = await this.db.query<ConnectorRecord & Record<string, unknown>>(
      `INSERT INTO outcome_connectors (account_id, platform, secret_hash, status, created_at)
       VALUES ($1, $2, $3, 'active', now())
       ON CONFLICT (account_id, platform) DO UPDATE
         SET secret_hash = EXCLUDED.secret_hash, status = 'active', created_at = EXCLUDED.created_at, revoked_at = NULL,
             last_event_at = NULL, events_received = 0, events_ignored = 0, sent_events = 0
       RETURNING account_id, platform, status, created_at, revoked_at, last_event_at, events_received, events_ignored, sent_events`,
      [accountId, platform, secretHash],
    );
    return connector(rows[0]!);
  }

  async getConnector(accountId: string, platform: string): Promise<ConnectorRecord | undefined> {
    const rows = await this.db.query<ConnectorRecord & Record<string, unknown>>(
      `SELECT account_id, platform, status, created_at, revoked_at, last_event_at, events_received, events_ignored, sent_events
         FROM outcome_connectors WHERE account_id = $1 AND platform = $2`,
      [accountId, platform],
    );
    return rows[0] && connector(rows[0]);
  }

  /** Revokes: the secret is cleared, so the URL stops working. Returns false when there was no active connector. */
  async revokeConnector(accountId: string, platform: string): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE outcome_connectors SET status = 'revoked', secret_hash = NULL, revoked_at = now()
        WHERE account_id = $1 AND platform = $2 AND status = 'active' RETURNING platform`,
      [accountId, platform],
    );
    return rows.length === 1;
  }

  /** The active connector a secret hash belongs to. */
  async connectorBySecret(platform: string, secretHash: string): Promise<{ account_id: string } | undefined> {
    const rows = await this.db.query<{ account_id: string }>(
      `SELECT account_id FROM outcome_connectors WHERE secret_hash = $1 AND platform = $2 AND status = 'active'`,
      [secretHash, platform],
    );
    return rows[0];
  }

  /** Counts an inbound delivery of the connector's webhook. */
  async countInbound(accountId: string, platform: string, c: { received: number; ignored: number; sent: number }): Promise<void> {
    await this.db.query(
      `UPDATE outcome_connectors
          SET events_received = events_received + $3, events_ignored = events_ignored + $4, sent_events = sent_events + $5, last_event_at = now()
        WHERE account_id = $1 AND platform = $2`,
      [accountId, platform, c.received, c.ignored, c.sent],
    );
  }
}

function connector(r: ConnectorRecord): ConnectorRecord {
  return {
    account_id: r.account_id,
    platform: r.platform,
    status: r.status,
    created_at: new Date(r.created_at),
    revoked_at: r.revoked_at === null ? null : new Date(r.revoked_at),
    last_event_at: r.last_event_at === null ? null : new Date(r.last_event_at),
    events_received: Number(r.events_received),
    events_ignored: Number(r.events_ignored),
    sent_events: Number(r.sent_events),
  };
}
