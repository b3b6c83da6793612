// @svc/contracts: the vocabulary every package shares. No dependencies, no I/O.
export { ERRORS, ERROR_CODES, failingAs, isErrorCode, OperatorError, ServiceError, type ErrorBody, type ErrorCode, type ErrorSpec } from './errors.ts';
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
export { formatCell } from './csv.ts';
export { FINAL_JOB_STATES, JOB_COUNTERS, JOB_RESULT_FIELDS, JOB_STATES, JOB_TRANSITIONS, countResult, emptyJobCounters, jobCounters, type JobCounter, type JobCounters, type JobState } from './jobs.ts';
export type { BulkSummary, CheckState, CreditBalance, ReadinessState, SubscriptionPlan, ValidationResultBody } from './wire.ts';
export { isResultsMessage, isWorkMessage, type ResultItem, type ResultsMessageV1, type RoutedMx, type WorkItem, type WorkMessageV1 } from './messages.ts';
export {
  OUTCOME_EVIDENCE_FIELDS,
  OUTCOME_LABELS,
  OUTCOME_ROW_ERRORS,
  PREDICTED_RESULTS,
  emptyOutcomeMatrix,
  type PredictedResult,
  type OutcomeMatrix,
  type OutcomeEvent,
  type DomainOutcomeMatrix,
  OUTCOME_SIGNALS,
  OUTCOME_SOURCES,
  OUTCOME_VALUES,
  SUPPRESSION_KINDS,
  WEBHOOK_SOURCES,
  type OutcomeLabel,
  type OutcomeRowError,
  type OutcomeSignal,
  type OutcomeSource,
  type OutcomeValue,
  type SuppressionKind,
  type AccuracyFigures,
  type DomainsReport,
  type ImportResponse,
  type Precision,
  type ResultFigures,
  type RowError,
  type SummaryReport,
} from './outcomes.ts';
export { JOB_ID_PATTERN, hidePassword, isJobId, notPrintable } from './text.ts';
export { inNetworks, inPrefix, ipBytes, parseNetwork, type Network } from './networks.ts';
export { permitWaitCancelled, type MxThrottle } from './throttle.ts';
export {
  COMPANY_TYPES,
  DATA_ENDPOINTS,
  DATA_FAMILIES,
  DATA_LIMITS,
  DEPARTMENTS,
  EMPLOYEE_RANGES,
  FINDER_CHARGE_CONFIDENCE,
  LINE_TYPES,
  NOT_CONFIGURED,
  NOT_CONFIGURED_PERSON_LOOKUP,
  NOT_CONFIGURED_ROLE_LOOKUP,
  PROFILE_SENIORITIES,
  SENIORITIES,
  type CompanyType,
  type DataEndpoint,
  type DataFamily,
  type Department,
  type EmployeeRange,
  type LineType,
  type Seniority,
} from './data.ts';
