// The vocabulary of delivery outcomes (docs/decisions/outcomes.md): what a client may send,
// the labels the evidence maps to, the row error codes. Lists, not just types: schemas publish
// them and tests pin them. Append only.

/** `outcome` values a row may carry (docs/decisions/outcomes.md). */
export const OUTCOME_VALUES = ['delivered', 'replied', 'bounced', 'bounced_hard', 'bounced_soft', 'blocked', 'complaint', 'unsubscribed', 'opened', 'clicked', 'sent', 'deferred'] as const;
export type OutcomeValue = (typeof OUTCOME_VALUES)[number];

/** `source` values (docs/decisions/outcomes.md). */
export const OUTCOME_SOURCES = ['api', 'csv_import', 'esp_webhook', 'smtp_log', 'emailbison'] as const;
export type OutcomeSource = (typeof OUTCOME_SOURCES)[number];

/** Sources that are webhooks: their rows need an event time (`occurred_at` or `last_attempt_date`). */
export const WEBHOOK_SOURCES: readonly OutcomeSource[] = ['esp_webhook', 'emailbison'];

/** The DSN and diagnostic keys an outcome row may carry (docs/decisions/outcomes.md), besides its identity and time. */
export const OUTCOME_EVIDENCE_FIELDS = [
  'action',
  'status',
  'smtp_code',
  'smtp_enhanced_code',
  'enhanced_status',
  'diagnostic_code',
  'diagnostic',
  'bounce_type',
  'bounce_reason',
  'dsn_message',
  'dsn_subject',
  'arrival_date',
  'last_attempt_date',
  'will_retry_until',
  'original_recipient',
  'final_recipient',
  'remote_mta',
  'reporting_mta',
  'dsn_gateway',
  'received_from_mta',
] as const;

/** Calibration labels (docs/decisions/outcomes.md). Only `delivered` and `bounced_hard` are decision-grade. */
export const OUTCOME_LABELS = ['delivered', 'bounced_hard', 'bounced_soft', 'blocked_policy', 'unknown'] as const;
export type OutcomeLabel = (typeof OUTCOME_LABELS)[number];

/** What an accepted event does to the address's suppression (docs/decisions/outcomes.md). */
export const SUPPRESSION_KINDS = ['hard_bounce', 'complaint', 'unsubscribed'] as const;
export type SuppressionKind = (typeof SUPPRESSION_KINDS)[number];

/** Weaker, non-claim signals kept beside the label (docs/decisions/outcomes.md). */
export const OUTCOME_SIGNALS = ['open', 'sent'] as const;
export type OutcomeSignal = (typeof OUTCOME_SIGNALS)[number];

/** Row error codes (docs/decisions/outcomes.md). Clients branch on these and keep unknown ones. */
export const OUTCOME_ROW_ERRORS = [
  'invalid_email',
  'missing_outcome',
  'invalid_source',
  'invalid_timestamp',
  'missing_event_timestamp',
  'invalid_dsn_semantics',
  'invalid_external_id',
  'missing_external_id',
  'invalid_metadata',
  'invalid_recipient_identity',
  'invalid_classification_evidence',
  'event_identity_conflict',
  'invalid_row',
] as const;
export type OutcomeRowError = (typeof OUTCOME_ROW_ERRORS)[number];

/** The result an outcome is compared with: the account's decision for the address made before it, or none. */
export type PredictedResult = 'valid' | 'valid_role_based' | 'risky' | 'invalid' | 'unknown' | 'not_validated';
export const PREDICTED_RESULTS: readonly PredictedResult[] = ['valid', 'valid_role_based', 'risky', 'invalid', 'unknown', 'not_validated'];

/**
 * What the reports are computed from (the Analytics port's outcomeMatrix): per predicted result,
 * the claim outcomes (no signal) per label, and the `sent` and `open` signals. Every key present.
 */
export interface OutcomeMatrix {
  claims: Record<PredictedResult, Record<OutcomeLabel, number>>;
  sent: Record<PredictedResult, number>;
  opens: Record<PredictedResult, number>;
}

/** One domain's matrix (outcomeDomains), with its number of facts. */
export interface DomainOutcomeMatrix extends OutcomeMatrix {
  domain: string;
  total: number;
}

/** A matrix of zeros. */
export function emptyOutcomeMatrix(): OutcomeMatrix {
  const labels = (): Record<OutcomeLabel, number> => Object.fromEntries(OUTCOME_LABELS.map((l) => [l, 0])) as Record<OutcomeLabel, number>;
  const per = <T>(f: () => T): Record<PredictedResult, T> => Object.fromEntries(PREDICTED_RESULTS.map((r) => [r, f()])) as Record<PredictedResult, T>;
  return { claims: per(labels), sent: per(() => 0), opens: per(() => 0) };
}

/** A labelled, normalised outcome event (what @svc/outcomes' parser makes of a row, and the store keeps): never the raw diagnostic text. */
export interface OutcomeEvent {
  /** The address as given (trimmed). Only for the account's own reads (events route); never logged. */
  email: string;
  /** The verifier's mailbox key: exact local part, lower-case ASCII domain (`local@ascii.domain`). */
  mailbox: string;
  /** Hex SHA-256 of `mailbox`: how analytics knows the address (the same hash as validation decisions). */
  email_hash: string;
  /** Lower-case ASCII domain. */
  domain: string;
  outcome: OutcomeValue;
  source: OutcomeSource;
  external_id: string;
  /**
   * The event time, RFC 3339 normalised: upper-case `T` and `Z`, a UTC offset of `+00:00` or
   * `-00:00` written `Z`, other offsets kept, up to six fractional digits kept as given (no
   * trailing-zero padding). From `occurred_at`, else from `Last-Attempt-Date` (converted to UTC,
   * `Z`). null when neither was given (allowed for non-webhook sources).
   */
  occurred_at: string | null;
  /** The same instant in epoch microseconds (null with occurred_at), for ordering. */
  occurred_at_us: number | null;
  /** `-00:00` (RFC 3339) or `-0000` (RFC 822): the local zone is unknown. */
  local_zone_unknown: boolean;
  /** The DSN action, lower-case, when one was given (`failed`, `delayed`, ...). */
  action: string | null;
  /** The enhanced status code that decided (or was given), `X.Y.Z`; null when none. */
  smtp_enhanced_code: string | null;
  label: OutcomeLabel;
  /** The suppression this event asks for (before the stale-evidence check), or null. */
  suppresses: SuppressionKind | null;
  /** A weaker non-claim signal (open, sent-without-bounce), or null. */
  signal: OutcomeSignal | null;
  /** The DSN issuer hostname (rule 6), lower-case, or null. Metadata, not the diagnostic text. */
  issuer: string | null;
  /** Which evidence decided the label, e.g. `dsn_status`, `enhanced_code`, `diagnostic_text`, `outcome`. */
  evidence: string;
  /**
   * Hex SHA-256 of the event's normalised content (everything above except `external_id`, plus
   * the classification inputs): two rows with one (source, external_id) are duplicates when their
   * fingerprints are equal and an `event_identity_conflict` otherwise.
   */
  fingerprint: string;
}


// ---- The wire shapes of the outcome reports and of an import's answer (GET /v1/outcomes/email/reports/*,
// POST /v1/outcomes/email/import; the dashboard's accuracy page reads the same).

export interface ResultFigures {
  sent: number;
  /** Claim outcomes (every label) for this predicted result. */
  outcomes: number;
  delivered: number;
  bounced_hard: number;
  hard_bounce_rate: number | null;
  hard_bounce_rate_ci95: [number, number] | null;
}

export interface Precision {
  value: number | null;
  delivered: number;
  bounced_hard: number;
  ci95: [number, number] | null;
}

export interface AccuracyFigures {
  denominator_status: 'ok' | 'sent_event_missing';
  totals: { outcomes: number; claims: number; sent: number; opens: number; not_validated: number };
  matrix: Record<PredictedResult, Record<OutcomeLabel, number>>;
  by_result: Record<PredictedResult, ResultFigures>;
  precision: { valid: Precision; invalid: Precision };
}

export interface SummaryReport extends AccuracyFigures {
  from: string;
  to: string;
}

export interface DomainsReport {
  from: string;
  to: string;
  domains: Array<AccuracyFigures & { domain: string }>;
}

/** One row error of the import response: never the address. */
export interface RowError {
  index: number;
  code: OutcomeRowError;
  reason: string;
}

/** The import response. */
export interface ImportResponse {
  received: number;
  accepted: number;
  skipped_invalid: number;
  duplicates: number;
  suppressed: number;
  complaints_suppressed: number;
  unsubscribed_suppressed: number;
  stale_suppressions_skipped: number;
  suppression_cache_invalidated: number;
  errors: RowError[];
  credits_charged: 0;
  imported_at: string;
}
