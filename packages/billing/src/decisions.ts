// Validation decisions for analytics (every validation decision also goes to analytics:
// docs/decisions/storage-and-cluster.md). A decision row names the address only by the
// SHA-256 of its normalised form, never the address itself. Its id makes a redelivery count
// once: `<request id>:<index>` for a sync request, `<job id>:<row index>` for a job.
//
// Recording never fails or slows the work it describes: the Analytics port buffers (record()
// returns at once), and a refusal (a malformed row, a closed port) goes to the log.

import { createHash } from 'node:crypto';
import type { Analytics, Decision, DecisionSource } from '@svc/store';
import { parseAddress, verdictTrace, type VerdictTrace } from '@svc/verifier';
import type { ChargedResult } from './pricing.ts';

/** Where decisions go: the Analytics port (only its record() is used). */
export type DecisionSink = Pick<Analytics, 'record'>;

/** Where a refused record() is reported. */
export interface DecisionLog {
  warn(obj: object, msg: string): void;
}

/** What analytics knows an address by: the hex SHA-256 of its normalised form, and its domain. */
export interface AddressIdentity {
  email_hash: string;
  domain: string;
}

const MAX_DOMAIN = 255;
const sha256 = (s: string): string => createHash('sha256').update(s, 'utf8').digest('hex');

/**
 * The hashes of the mailboxes decided lately: cached validations repeat the same addresses, and
 * a SHA-256 (a hash object, a digest, a hex string) was more than half of what building and
 * buffering a decision cost on the request (CPU profile of bench/api/http-cached.ts). Bounded
 * like the verifier's parse cache, which holds the same addresses.
 */
const hashes = new Map<string, string>();
const MAX_HASHES = 10_000;
function mailboxHash(key: string): string {
  let h = hashes.get(key);
  if (h === undefined) {
    h = sha256(key);
    if (hashes.size >= MAX_HASHES) hashes.clear();
    hashes.set(key, h);
  }
  return h;
}

/**
 * The normalised address is the verifier's mailbox key (exact local part, lower-case ASCII
 * domain), so every spelling of one mailbox has one hash. An address that fails the syntax check
 * is hashed as written (trimmed, lower-cased), and its domain is what follows its last `@`
 * (`(none)` when nothing does).
 */
export function addressIdentity(email: string, trace?: VerdictTrace): AddressIdentity {
  if (trace?.key !== undefined && trace.domain !== undefined) return { email_hash: mailboxHash(trace.key), domain: trace.domain.slice(0, MAX_DOMAIN) };
  const written = email.trim();
  const parsed = parseAddress(written);
  if (parsed.ok) return { email_hash: sha256(`${parsed.local}@${parsed.asciiDomain}`), domain: parsed.asciiDomain.slice(0, MAX_DOMAIN) };
  const at = written.lastIndexOf('@');
  // Control characters (NUL among them) cannot be stored: they are dropped from the domain.
  // eslint-disable-next-line no-control-regex
  const domain = (at < 0 ? '' : written.slice(at + 1)).replace(/[\u0000-\u001f\u007f]/g, '').toLowerCase().slice(0, MAX_DOMAIN);
  return { email_hash: sha256(written.toLowerCase()), domain: domain || '(none)' };
}

export interface SyncDecisionContext {
  sink: DecisionSink;
  /** The request id (`req_…`): decision ids are `<requestId>:<index>`. */
  requestId: string;
  source: Extract<DecisionSource, 'single' | 'bulk' | 'mcp'>;
  log?: DecisionLog;
}

/** The decisions of one sync request's charged results, in input order (one per submitted string). */
export function syncDecisions(results: readonly ChargedResult[], accountId: string, requestId: string, source: DecisionSource, decidedAt = new Date()): Decision[] {
  return results.map((r, i) => {
    const trace = verdictTrace(r);
    const who = addressIdentity(r.email, trace);
    return {
      id: `${requestId}:${i}`,
      account_id: accountId,
      email_hash: who.email_hash,
      domain: who.domain,
      result: r.result,
      reason_code: r.reason_code,
      layer: r.validation_layer,
      mx_host: trace?.mx_host ?? null,
      latency_ms: trace?.latency_ms ?? 0,
      job_id: null,
      source,
      credits_charged: r.credits_charged,
      decided_at: decidedAt,
    };
  });
}

/** Hands decisions to the sink without waiting; a refusal (or a bug building them) is logged, never thrown. */
export function recordDecisions(sink: DecisionSink, build: () => Decision[], log: DecisionLog | undefined, context: object = {}): void {
  let rows: Decision[];
  try {
    rows = build();
  } catch (err) {
    log?.warn({ err, ...context }, 'validation decisions not recorded (analytics)');
    return;
  }
  if (rows.length === 0) return;
  sink.record(rows).catch((err: unknown) => log?.warn({ err, rows: rows.length, ...context }, 'validation decisions not recorded (analytics)'));
}
