// The vocabulary of a validation result (docs/api.md). Lists, not just types: the response
// schemas publish them as enums (so /openapi.json lists them) and a contract test checks that
// docs/decisions/verification.md and docs/decisions/credits-and-billing.md explain every value.
// Append only: clients branch on these strings.

export const VALIDATION_RESULTS = ['valid', 'valid_role_based', 'risky', 'invalid', 'unknown'] as const;
export type ValidationResult = (typeof VALIDATION_RESULTS)[number];

export const QUALITIES = ['high', 'low', 'none', 'unknown'] as const;
export type Quality = (typeof QUALITIES)[number];

export const LAYERS = ['syntax', 'dns', 'smtp', 'catchall', 'suppression', 'processing'] as const;
export type Layer = (typeof LAYERS)[number];

export const CONFIDENCES = ['high', 'medium', 'low'] as const;
export type Confidence = (typeof CONFIDENCES)[number];

/** Stable machine reason for a verdict (extra field `reason_code`); `reason` is the human text. */
export const REASON_CODES = [
  'accepted',
  'role_account',
  'catch_all',
  'catchall_unverified',
  'disposable_domain',
  'invalid_syntax',
  'nxdomain',
  'no_mail_records',
  'null_mx',
  'dns_servfail',
  'dns_timeout',
  'dns_error',
  'mailbox_not_found',
  'mailbox_disabled',
  'smtputf8_unsupported',
  'mailbox_full',
  'smtp_policy_block',
  'smtp_tempfail',
  'smtp_timeout',
  'smtp_connection_failed',
  'smtp_protocol_error',
  'smtp_unclassified',
  'address_malformed',
  'suppressed_hard_bounce',
  'suppressed_complaint',
  'suppressed_unsubscribed',
  'recovered_delivery',
  'recovered_pattern',
  'recovered_hard_bounce',
  'processing_failed',
] as const;
export type ReasonCode = (typeof REASON_CODES)[number];

/** Why a result was or was not charged (`charge_reason`). */
export const CHARGE_REASONS = [
  'high_value_validation',
  'role_based_not_charged',
  'catchall_not_charged',
  'disposable_not_charged',
  'invalid_not_charged',
  'unknown_not_charged',
  'duplicate_in_request',
  'duplicate_in_job',
  'suppressed_not_charged',
] as const;
export type ChargeReason = (typeof CHARGE_REASONS)[number];
