import type { ValidationResult } from './verdicts.ts';

// Job states (docs/api.md): awaiting_upload → queued → processing → completed | failed;
// queued/processing → canceled (with a full refund of the unused reservation).
export const JOB_STATES = ['awaiting_upload', 'queued', 'processing', 'completed', 'failed', 'canceled'] as const;
export type JobState = (typeof JOB_STATES)[number];

/** The states a job never leaves. */
export const FINAL_JOB_STATES: readonly JobState[] = ['completed', 'failed', 'canceled'];

/** Allowed moves between states. */
export const JOB_TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  awaiting_upload: ['queued', 'failed'],
  queued: ['processing', 'canceled', 'failed'],
  processing: ['completed', 'failed', 'canceled'],
  completed: [],
  failed: [],
  canceled: [],
};

/**
 * What a job counts of its done emails: one counter per validation result, then the role-based,
 * High-Value (charged) and catch-all ones among them. Stored as columns of the job, shown in its
 * status resource, the API and MCP schemas and the admin CLI: all take them from here.
 */
export const JOB_COUNTERS = ['valid', 'valid_role_based', 'invalid', 'risky', 'unknown', 'role_based', 'high_value', 'catch_all'] as const;
export type JobCounter = (typeof JOB_COUNTERS)[number];
export type JobCounters = Record<JobCounter, number>;

/** Every counter at 0. */
export const emptyJobCounters = (): JobCounters => Object.fromEntries(JOB_COUNTERS.map((k) => [k, 0])) as JobCounters;

/** Counts one done email: its result, and whether it is role-based, High-Value (charged) and on a catch-all domain. */
export function countResult(c: JobCounters, r: { result: ValidationResult; is_role_based: boolean; is_catchall: boolean }, chargeable: boolean): void {
  c[r.result]++;
  if (r.is_role_based) c.role_based++;
  if (chargeable) c.high_value++;
  if (r.is_catchall) c.catch_all++;
}

/** The counters of a record that holds them (a job row), in their order. */
export const jobCounters = (from: JobCounters): JobCounters => Object.fromEntries(JOB_COUNTERS.map((k) => [k, from[k]])) as JobCounters;

/** The `results` fields of a job's status resource, in order: its input, its counters, its credits. */
export const JOB_RESULT_FIELDS = [
  'total_rows',
  'unique_emails',
  ...JOB_COUNTERS,
  'credits_reserved',
  'credits_charged',
  'credits_consumed',
  'credits_refunded',
  'credits_per_high_value_validation',
] as const;
