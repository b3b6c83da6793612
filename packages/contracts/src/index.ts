// @svc/contracts: the vocabulary every package shares. No dependencies, no I/O.
export { ERRORS, ERROR_CODES, isErrorCode, OperatorError, ServiceError, type ErrorBody, type ErrorCode, type ErrorSpec } from './errors.ts';
export {
  CHARGE_REASONS,
  CONFIDENCES,
  LAYERS,
  QUALITIES,
  REASON_CODES,
  VALIDATION_RESULTS,
  type ChargeReason,
  type Confidence,
  type Layer,
  type Quality,
  type ReasonCode,
  type ValidationResult,
} from './verdicts.ts';
export { API_KEY_FORMAT, SCOPES, isScope, type Scope } from './scopes.ts';
export { FINAL_JOB_STATES, JOB_STATES, JOB_TRANSITIONS, type JobState } from './jobs.ts';
export type { BulkSummary, CheckState, CreditBalance, ReadinessState, ValidationResultBody } from './wire.ts';
