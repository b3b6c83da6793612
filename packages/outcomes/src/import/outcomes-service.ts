// The outcome use cases (docs/decisions/outcomes.md): import rows (JSON or CSV records),
// read an address's events, and the sender-platform connector (create, status, revoke, inbound
// events). The parser (parse/evidence.ts) labels each row; the store keeps the events and applies
// the suppressions in one transaction; analytics gets one fact per accepted event for the reports.
// Outcome operations charge 0 credits.

import { createHash, randomBytes } from 'node:crypto';
import { ServiceError, type ImportResponse, type OutcomeEvent, type OutcomeRowError, type OutcomeSource, type RowError, type SuppressionKind } from '@svc/contracts';
import { parseOutcomeRow } from '../parse/evidence.ts';
import { suppressionRules } from '../rules/suppression.ts';
import { OutcomeWriteError, type ConnectorRecord, type OutcomeFact, type StoredOutcomeEvent, type Store } from '@svc/store';
import { parse as parseCsvSync } from 'csv-parse/sync';
import { emailBisonEvents, type EmailBisonEvent } from './emailbison.ts';

/** Rows per import request. */
export const MAX_OUTCOME_ROWS = 10_000;
/** Import body limit (5 MB, taken as 5 MiB). */
export const OUTCOME_BODY_LIMIT = 5 * 1024 * 1024;
/** The platforms a connector serves (the first: `emailbison`). */
export const CONNECTOR_PLATFORMS = ['emailbison'] as const;
export type ConnectorPlatform = (typeof CONNECTOR_PLATFORMS)[number];

export type { ImportResponse, RowError } from '@svc/contracts';

/** An event as GET /v1/outcomes/email/events shows it. */
export interface EventView {
  email: string;
  outcome: string;
  label: string;
  source: string;
  external_id: string;
  occurred_at: string | null;
  action: string | null;
  smtp_enhanced_code: string | null;
  suppressed: boolean;
  imported_at: string;
}

export interface OutcomesDeps {
  store: Store;
  /** Where each accepted event goes for the reports (buffered, never failing the import). */
  analytics?: { recordOutcomes(facts: readonly OutcomeFact[]): Promise<void> };
  /** Drops cached verdicts of mailboxes (`v:<mailbox>` entries of the verifier's cache). Throws when the cache could not be reached. */
  invalidateVerdicts?: (mailboxes: string[]) => Promise<number>;
  log?: { warn(obj: object, msg: string): void };
  /** SVC_PUBLIC_URL: the base of connector webhook URLs. */
  publicUrl: string;
}

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

/** The path of a connector's inbound webhook, with its secret. */
export const connectorWebhookPath = (platform: string, secret: string): string => `/v1/outcomes/email/connectors/${platform}/events/${secret}`;

export class OutcomesService {
  constructor(private readonly deps: OutcomesDeps) {}

  /**
   * Imports rows (JSON objects or CSV records). Request-level checks (count, shape) are the
   * caller's; every row here gets a fate. Throws ServiceError outcome_import_failed or
   * outcome_suppression_failed when nothing could be kept.
   */
  async import(accountId: string, rows: readonly unknown[], opts: { defaultSource?: OutcomeSource; now?: Date } = {}): Promise<ImportResponse> {
    const now = opts.now ?? new Date();
    const errors: RowError[] = [];
    const parsed: OutcomeEvent[] = [];
    const positions: number[] = [];
    rows.forEach((row, index) => {
      const r = parseOutcomeRow(row, { now, ...(opts.defaultSource && { defaultSource: opts.defaultSource }) });
      if (r.ok) {
        parsed.push(r.event);
        positions.push(index);
      } else errors.push({ index, code: r.code, reason: r.reason });
    });
    let result;
    try {
      result = await this.deps.store.outcomes.importEvents(accountId, parsed, suppressionRules, { ...(this.deps.invalidateVerdicts && { invalidate: this.deps.invalidateVerdicts }) });
    } catch (err) {
      if (err instanceof OutcomeWriteError) {
        throw new ServiceError(err.step === 'suppression' ? 'outcome_suppression_failed' : 'outcome_import_failed', undefined, {}, {}, err.cause);
      }
      throw err;
    }
    const out: ImportResponse = {
      received: rows.length,
      accepted: 0,
      skipped_invalid: 0,
      duplicates: 0,
      suppressed: 0,
      complaints_suppressed: 0,
      unsubscribed_suppressed: 0,
      stale_suppressions_skipped: 0,
      suppression_cache_invalidated: result.invalidated,
      errors,
      credits_charged: 0,
      imported_at: now.toISOString(),
    };
    const stored: StoredOutcomeEvent[] = [];
    result.fates.forEach((fate, k) => {
      if (fate.kind === 'duplicate') out.duplicates++;
      else if (fate.kind === 'conflict') errors.push({ index: positions[k]!, code: 'event_identity_conflict', reason: 'This source and external_id were stored before with other content; the stored event is kept' });
      else {
        out.accepted++;
        stored.push(fate.event);
        const s: SuppressionKind | null = fate.event.suppressed;
        if (s) {
          out.suppressed++;
          if (s === 'complaint') out.complaints_suppressed++;
          if (s === 'unsubscribed') out.unsubscribed_suppressed++;
        }
        if (fate.staleSuppression) out.stale_suppressions_skipped++;
      }
    });
    out.skipped_invalid = errors.length;
    errors.sort((a, b) => a.index - b.index);
    this.#facts(accountId, stored);
    return out;
  }

  /** One analytics fact per accepted event; a failure is logged, never the import's. */
  #facts(accountId: string, events: readonly StoredOutcomeEvent[]): void {
    const sink = this.deps.analytics;
    if (typeof sink?.recordOutcomes !== 'function' || events.length === 0) return;
    const facts: OutcomeFact[] = events.map((e) => ({
      id: e.id,
      account_id: accountId,
      email_hash: e.email_hash,
      domain: e.domain,
      outcome: e.outcome,
      label: e.label,
      signal: e.signal,
      source: e.source,
      occurred_at: e.occurred_at_us === null ? e.imported_at : new Date(Math.floor(e.occurred_at_us / 1000)),
    }));
    sink.recordOutcomes(facts).catch((err: unknown) => this.deps.log?.warn({ err }, 'outcome facts were not recorded for the reports'));
  }

  /** The account's events, newest first, optionally for one address (already checked by the caller). */
  async events(accountId: string, q: { mailbox?: string; limit: number; cursor?: string }): Promise<{ events: EventView[]; next_cursor: string | null }> {
    const before = q.cursor === undefined ? undefined : decodeEventCursor(q.cursor);
    const rows = await this.deps.store.outcomes.listEvents(accountId, { limit: q.limit + 1, ...(q.mailbox !== undefined && { mailbox: q.mailbox }), ...(before !== undefined && { before }) });
    const page = rows.slice(0, q.limit);
    return {
      events: page.map((e) => ({
        email: e.email,
        outcome: e.outcome,
        label: e.label,
        source: e.source,
        external_id: e.external_id,
        occurred_at: e.occurred_at,
        action: e.action,
        smtp_enhanced_code: e.smtp_enhanced_code,
        suppressed: e.suppressed !== null,
        imported_at: e.imported_at.toISOString(),
      })),
      next_cursor: rows.length > q.limit ? encodeEventCursor(page[page.length - 1]!.seq) : null,
    };
  }

  // --- the sender-platform connector ---------------------------------------------------------

  async createConnector(accountId: string, platform: ConnectorPlatform): Promise<{ platform: string; status: 'active'; webhook_url: string; created_at: string }> {
    await this.#mayUseConnectors(accountId, 'connector_create_failed');
    const secret = randomBytes(32).toString('base64url');
    let rec: ConnectorRecord;
    try {
      rec = await this.deps.store.outcomes.createConnector(accountId, platform, sha256(secret));
    } catch (err) {
      throw new ServiceError('connector_create_failed', undefined, {}, {}, err);
    }
    return { platform, status: 'active', webhook_url: `${this.deps.publicUrl.replace(/\/+$/, '')}${connectorWebhookPath(platform, secret)}`, created_at: rec.created_at.toISOString() };
  }

  async connectorStatus(accountId: string, platform: ConnectorPlatform) {
    await this.#mayUseConnectors(accountId, 'connector_status_failed');
    let rec: ConnectorRecord | undefined;
    try {
      rec = await this.deps.store.outcomes.getConnector(accountId, platform);
    } catch (err) {
      throw new ServiceError('connector_status_failed', undefined, {}, {}, err);
    }
    if (!rec) throw new ServiceError('connector_not_found');
    return {
      platform,
      status: rec.status,
      created_at: rec.created_at.toISOString(),
      last_event_at: rec.last_event_at?.toISOString() ?? null,
      events_received: rec.events_received,
      events_ignored: rec.events_ignored,
      denominator_status: rec.sent_events > 0 ? ('ok' as const) : ('sent_event_missing' as const),
    };
  }

  async revokeConnector(accountId: string, platform: ConnectorPlatform): Promise<{ platform: string; status: 'revoked' }> {
    await this.#mayUseConnectors(accountId, 'connector_revoke_failed');
    let revoked: boolean;
    try {
      revoked = await this.deps.store.outcomes.revokeConnector(accountId, platform);
    } catch (err) {
      throw new ServiceError('connector_revoke_failed', undefined, {}, {}, err);
    }
    if (!revoked) {
      const rec = await this.deps.store.outcomes.getConnector(accountId, platform).catch((err: unknown) => {
        throw new ServiceError('connector_revoke_failed', undefined, {}, {}, err);
      });
      if (!rec) throw new ServiceError('connector_not_found');
    }
    return { platform, status: 'revoked' };
  }

  async #mayUseConnectors(accountId: string, failure: 'connector_create_failed' | 'connector_status_failed' | 'connector_revoke_failed'): Promise<void> {
    let ok: boolean;
    try {
      ok = await this.deps.store.outcomes.connectorsEnabled(accountId);
    } catch (err) {
      throw new ServiceError(failure, undefined, {}, {}, err);
    }
    if (!ok) throw new ServiceError('connector_unavailable');
  }

  /** The account of an active connector's secret, or undefined. */
  async connectorAccount(platform: ConnectorPlatform, secret: string): Promise<string | undefined> {
    if (!/^[A-Za-z0-9_-]{20,100}$/.test(secret)) return undefined;
    return (await this.deps.store.outcomes.connectorBySecret(platform, sha256(secret)))?.account_id;
  }

  /**
   * One inbound webhook delivery of a connector: its events of the six kinds become rows of an
   * import (source `emailbison`), others are ignored and counted. Retries dedupe by the platform's
   * scheduled-email id (the rows' external ids); a retried event with other content (a second
   * reply to one email) is kept as first stored, like any identity conflict.
   */
  async inbound(accountId: string, platform: ConnectorPlatform, body: unknown): Promise<InboundSummary> {
    const events = emailBisonEvents(body);
    const rows: Array<Record<string, unknown>> = [];
    const kinds: EmailBisonEvent[] = [];
    let ignored = 0;
    let malformed = 0;
    for (const e of events) {
      if (e.kind === 'row') {
        rows.push(e.row);
        kinds.push(e.event);
      } else if (e.kind === 'ignored') ignored++;
      else malformed++;
    }
    const res = rows.length > 0 ? await this.import(accountId, rows, { defaultSource: 'emailbison' }) : undefined;
    const rejected = new Set(res?.errors.filter((x) => x.code !== 'event_identity_conflict').map((x) => x.index));
    const sent = kinds.filter((k, i) => k === 'email_sent' && !rejected.has(i)).length;
    await this.deps.store.outcomes.countInbound(accountId, platform, { received: rows.length, ignored, sent });
    return {
      received: events.length,
      accepted: res?.accepted ?? 0,
      duplicates: (res?.duplicates ?? 0) + (res?.errors.filter((x) => x.code === 'event_identity_conflict').length ?? 0),
      ignored,
      rejected: rejected.size + malformed,
      errors: res?.errors.filter((x) => x.code !== 'event_identity_conflict') ?? [],
    };
  }
}

/** What an inbound webhook delivery did. */
export interface InboundSummary {
  /** Events in the body. */
  received: number;
  accepted: number;
  /** Retries of stored events (the same scheduled email and event kind). */
  duplicates: number;
  /** Events of other types (answered 2xx, counted on the connector). */
  ignored: number;
  /** Events of the six types that could not be used (no address, no id, a row error). */
  rejected: number;
  errors: RowError[];
}

/** Cursor of the events list: the last event's sequence number, opaque to clients. */
export const encodeEventCursor = (seq: number): string => Buffer.from(`e:${seq}`).toString('base64url');

export function decodeEventCursor(cursor: string): number {
  const m = /^e:([0-9]{1,18})$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  if (!m || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw new ServiceError('invalid_outcome_query', 'cursor is not a next_cursor of this list');
  return Number(m[1]);
}

/**
 * A CSV import body → records keyed by the header's column names (trimmed, lower-cased), every
 * value a string. Throws ServiceError invalid_csv (malformed) or missing_outcomes (no data rows),
 * too_many_outcomes (over the limit).
 */
export function outcomeCsvRows(text: string): Array<Record<string, string>> {
  let records: string[][];
  try {
    records = parseCsvSync(text, { bom: true, skip_empty_lines: true, relax_column_count: false, max_record_size: 1 << 20 }) as string[][];
  } catch (err) {
    throw new ServiceError('invalid_csv', `The CSV could not be parsed: ${(err as Error).message.split('\n')[0]!.slice(0, 200)}`);
  }
  const header = records[0];
  if (!header || header.every((h) => h.trim() === '')) throw new ServiceError('invalid_csv', 'The CSV has no header row');
  const names = header.map((h) => h.trim().toLowerCase());
  const seen = new Set<string>();
  for (const n of names) {
    if (n !== '' && seen.has(n)) throw new ServiceError('invalid_csv', `The CSV header names the column "${n.slice(0, 64)}" twice`);
    seen.add(n);
  }
  const data = records.length - 1;
  if (data === 0) throw new ServiceError('missing_outcomes', 'The CSV has a header and no rows');
  if (data > MAX_OUTCOME_ROWS) throw new ServiceError('too_many_outcomes', `maximum ${MAX_OUTCOME_ROWS.toLocaleString('en-US')} outcomes per request; got ${data.toLocaleString('en-US')}`);
  const rows: Array<Record<string, string>> = new Array(data);
  for (let i = 1; i < records.length; i++) {
    const rec = records[i]!;
    const row: Record<string, string> = {};
    names.forEach((n, k) => {
      if (n !== '') row[n] = rec[k] ?? '';
    });
    rows[i - 1] = row;
  }
  return rows;
}
