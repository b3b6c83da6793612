// Catch-all recovery (docs/decisions/outcomes.md, "Catch-all recovery"): an opt-in pass
// over a completed job's risky catch-all rows with the account's own evidence.
//
// Per catch-all row (result `risky`, reason_code `catch_all`), in order:
//  1. the account's newest decision-grade outcome for the mailbox: delivered (a delivery or a
//     reply) → `valid` (`recovered_delivery`); a confirmed hard bounce → `invalid`
//     (`recovered_hard_bounce`);
//  2. the domain's address pattern, learned from the account's confirmed-delivered mailboxes of
//     that domain: with at least PATTERN_MIN_CONFIRMED of them and one shape covering at least
//     PATTERN_SHARE of them, a row whose local part has that shape (and is not a role account) →
//     `valid` (`recovered_pattern`). Single-token local parts (`jsmith`, `john`) are never a
//     pattern: they cannot be told from role or shared inboxes.
//  Otherwise the row stays `risky`.
// Money: one credit per row is reserved first (`recovery_credits_per_row`, default 1); the rows
// upgraded to `valid` are charged, the rest released, in the transaction that rewrites the job's
// results. One recovery per job: a second request answers the first one's result and charges
// nothing.

import { RecoveryCharges } from '@svc/billing';
import { isJobId, ServiceError, type ValidationResultBody } from '@svc/contracts';
import type { BlobStore, RecoveredRow, RecoveryRecord, Store } from '@svc/store';
import { parseAddress } from '@svc/verifier';
import { resultsCsv, type RowRenderer } from './csv/results-csv.ts';

export const PATTERN_MIN_CONFIRMED = 3;
export const PATTERN_SHARE = 0.8;
/** How long a claim may run before another request may take it over. */
const CLAIM_LEASE_MS = 10 * 60_000;
/** Rows listed in the response (all are in the results CSV). */
export const RECOVERED_LISTED = 1000;

/** The shape of a local part (letters-only tokens), or undefined for anything else. */
export function localShape(local: string): string | undefined {
  const l = local.toLowerCase();
  if (/^[a-z]\.[a-z]{2,}$/.test(l)) return 'f.last';
  if (/^[a-z]{2,}\.[a-z]$/.test(l)) return 'first.l';
  if (/^[a-z]{2,}\.[a-z]{2,}$/.test(l)) return 'first.last';
  if (/^[a-z]{2,}_[a-z]{2,}$/.test(l)) return 'first_last';
  if (/^[a-z]{2,}-[a-z]{2,}$/.test(l)) return 'first-last';
  if (/^[a-z]+$/.test(l)) return 'single_token';
  return undefined;
}

/** The domain's dominant shape among confirmed local parts, when there is one worth using. */
export function learnPattern(locals: readonly string[]): { pattern: string; confirmed: number; matching: number } | undefined {
  if (locals.length < PATTERN_MIN_CONFIRMED) return undefined;
  const counts = new Map<string, number>();
  for (const l of locals) {
    const s = localShape(l);
    if (s) counts.set(s, (counts.get(s) ?? 0) + 1);
  }
  const [best] = [...counts].sort((a, b) => b[1] - a[1]);
  if (!best || best[0] === 'single_token' || best[1] / locals.length < PATTERN_SHARE) return undefined;
  return { pattern: best[0], confirmed: locals.length, matching: best[1] };
}

export interface RecoveryResponse {
  recovery_id: string;
  job_id: string;
  status: 'completed';
  rows: number;
  credits_reserved: number;
  upgraded: number;
  downgraded: number;
  unchanged: number;
  credits_charged: number;
  credits_refunded: number;
  recovered: Array<{ email: string; previous_result: string; result: string; reason_code: string; evidence: Record<string, unknown> }>;
  created_at: string;
  completed_at: string;
}

export interface RecoveryDeps {
  store: Store;
  blobs: BlobStore;
  renderer?: RowRenderer;
  /** Credits per catch-all row reserved, and per row upgraded to valid charged (default 1). */
  creditsPerRow?: number;
}

export class CatchallRecovery {
  constructor(private readonly deps: RecoveryDeps) {}

  async recover(accountId: string, jobId: string): Promise<RecoveryResponse> {
    const { store } = this.deps;
    const job = isJobId(jobId) ? await store.jobs.get(accountId, jobId) : undefined;
    if (!job) throw new ServiceError('job_not_found');
    if (job.status !== 'completed') throw new ServiceError('invalid_job_state', `The job is ${job.status}; catch-all recovery runs on a completed job`);
    const { claimed, record } = await store.recoveries.claim(job.id, accountId, CLAIM_LEASE_MS);
    if (!claimed) {
      if (record.status === 'completed') return this.#response(record);
      throw new ServiceError('invalid_job_state', 'A catch-all recovery of this job is running; ask again when it has finished');
    }
    try {
      return await this.#run(accountId, job.id, job.input_key, record);
    } catch (err) {
      await store.recoveries.release(record.id).catch(() => {});
      throw err;
    }
  }

  async #run(accountId: string, jobId: string, inputKey: string | null, record: RecoveryRecord): Promise<RecoveryResponse> {
    const { store } = this.deps;
    const money = new RecoveryCharges(this.deps.creditsPerRow);
    const rows = await store.recoveries.catchallRows(jobId);
    const { reservationId, amount } = await money.reserve(store, accountId, rows.length);
    if (reservationId) await store.recoveries.setReservation(record.id, reservationId, amount, rows.length);
    try {
      return await this.#pass(accountId, jobId, inputKey, record, rows, reservationId, money);
    } catch (err) {
      // Nothing committed (or the commit happened and only the CSV failed: then these are no-ops).
      if (reservationId) await money.release(store, reservationId).catch(() => {});
      await store.recoveries.release(record.id).catch(() => {});
      throw err;
    }
  }

  async #pass(
    accountId: string,
    jobId: string,
    inputKey: string | null,
    record: RecoveryRecord,
    rows: Array<{ idx: number; email: string; verdict: ValidationResultBody }>,
    reservationId: string | null,
    money: RecoveryCharges,
  ): Promise<RecoveryResponse> {
    const { store } = this.deps;
    const keyed = rows.map((r) => {
      const p = parseAddress(r.email);
      return { ...r, mailbox: p.ok ? `${p.local}@${p.asciiDomain}` : undefined, domain: p.ok ? p.asciiDomain : undefined, local: p.ok ? p.local : undefined };
    });
    const evidence = await store.outcomes.evidenceFor(
      accountId,
      keyed.flatMap((r) => (r.mailbox ? [r.mailbox] : [])),
    );
    const patterns = new Map<string, ReturnType<typeof learnPattern>>();
    const changed: RecoveredRow[] = [];
    for (const r of keyed) {
      if (!r.mailbox || !r.domain) continue;
      const ev = evidence.get(r.mailbox);
      if (ev) {
        const valid = ev.label === 'delivered';
        changed.push(this.#row(r, valid ? 'valid' : 'invalid', valid ? 'recovered_delivery' : 'recovered_hard_bounce', { kind: 'outcome', label: ev.label, outcome: ev.outcome, event_id: ev.event_id, occurred_at: ev.occurred_at }, money));
        continue;
      }
      if (r.verdict.is_role_based) continue;
      if (!patterns.has(r.domain)) {
        const locals = (await store.outcomes.deliveredMailboxes(accountId, r.domain)).map((m) => m.slice(0, m.lastIndexOf('@')));
        patterns.set(r.domain, learnPattern(locals));
      }
      const pat = patterns.get(r.domain);
      if (pat && localShape(r.local!) === pat.pattern) changed.push(this.#row(r, 'valid', 'recovered_pattern', { kind: 'pattern', pattern: pat.pattern, confirmed: pat.confirmed, matching: pat.matching }, money));
    }
    const done = await store.recoveries.complete({ id: record.id, reservationId, rows: rows.length }, jobId, changed, money);
    if (!done) throw new ServiceError('invalid_job_state', 'This recovery was taken over by another request; ask again for its result');
    // The stored results CSV again, from the rewritten rows.
    if (changed.length > 0 && inputKey) {
      const key = `jobs/${jobId}/results-recovered.csv`;
      await this.deps.blobs.put(key, resultsCsv({ store, blobs: this.deps.blobs, ...(this.deps.renderer && { renderer: this.deps.renderer }) }, { id: jobId, input_key: inputKey }));
      await store.jobs.setResultsKey(jobId, key);
    }
    return this.#response(done);
  }

  #row(r: { idx: number; email: string; verdict: ValidationResultBody }, result: 'valid' | 'invalid', code: 'recovered_delivery' | 'recovered_pattern' | 'recovered_hard_bounce', evidence: Record<string, unknown>, money: RecoveryCharges): RecoveredRow {
    const reasons = {
      recovered_delivery: 'Recovered: the account reported a delivery or reply for this address',
      recovered_pattern: `Recovered: the address follows the domain's confirmed address pattern (${String(evidence.pattern)})`,
      recovered_hard_bounce: 'Recovered: the account reported a confirmed hard bounce for this address',
    } as const;
    const verdict: ValidationResultBody = {
      ...r.verdict,
      result,
      reason: reasons[code],
      reason_code: code,
      b2b_outbound_quality: result === 'valid' ? 'high' : 'none',
      b2b_quality: result === 'valid' ? 'high' : 'none',
      smtp_valid: result === 'valid',
      credits_charged: money.rowCharge(result) as 0 | 1,
      charge_reason: result === 'valid' ? 'high_value_validation' : 'invalid_not_charged',
    };
    return { idx: r.idx, email: r.email, previous_result: r.verdict.result, result, reason_code: code, evidence, verdict };
  }

  async #response(rec: RecoveryRecord): Promise<RecoveryResponse> {
    const listed = await this.deps.store.recoveries.rowsOf(rec.id, RECOVERED_LISTED);
    return {
      recovery_id: rec.id,
      job_id: rec.job_id,
      status: 'completed',
      rows: rec.rows,
      credits_reserved: rec.credits_reserved,
      upgraded: rec.upgraded,
      downgraded: rec.downgraded,
      unchanged: rec.rows - rec.upgraded - rec.downgraded,
      credits_charged: rec.credits_charged,
      credits_refunded: rec.credits_reserved - rec.credits_charged,
      recovered: listed.map((r) => ({ email: r.email, previous_result: r.previous_result, result: r.result, reason_code: r.reason_code, evidence: r.evidence })),
      created_at: rec.created_at.toISOString(),
      completed_at: (rec.completed_at ?? new Date()).toISOString(),
    };
  }
}
