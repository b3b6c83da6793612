// The versioned messages of the job pipeline (plain data, keyed for partitioning; a new field is
// optional, a new meaning is a new version). Topics and keys are @svc/bus's (topics.ts):
// - on `jobs.work`, a WorkMessageV1: unique emails of one job to route to their MX hosts;
// - on `jobs.mx`, the same shape (WorkMessageV1): the emails to probe, with the MX answers the
//   route stage found for their domains (`mx`), so the probe stage does not look them up again;
// - on `jobs.results`, a ResultsMessageV1: their priced results.
// Dates travel as ISO 8601 strings.

import type { ValidationResultBody } from './wire.ts';

/** [idx, email, probes made before this one] */
export type WorkItem = [idx: number, email: string, attempts: number];

export interface WorkMessageV1 {
  v: 1;
  job_id: string;
  /** The job's account (absent from older producers): the fairness group of the job's lane. */
  account_id?: string;
  items: WorkItem[];
  /**
   * On `jobs.mx` only: the MX answer of each item's domain (ASCII, lower case) as the route stage
   * found it, mail hosts by priority. A domain missing here (an older producer, a failed lookup)
   * is looked up again by the probe stage.
   */
  mx?: Record<string, RoutedMx>;
}

/** A domain's mail hosts as the route stage found them: its MX records, or the implicit MX (the domain itself). */
export interface RoutedMx {
  kind: 'mx' | 'implicit';
  hosts: Array<{ exchange: string; priority: number }>;
}

export interface ResultItem {
  idx: number;
  email: string;
  verdict: ValidationResultBody;
  chargeable: boolean;
  /** Probes made for this email, this one included. */
  attempts: number;
  state: 'done' | 'deferred';
  /** For a deferred email: when to probe it again (ISO 8601). */
  next_attempt_at?: string;
  /** For analytics (absent from older producers): the MX host whose SMTP answer decided it, null when none did. */
  mx_host?: string | null;
  /** For analytics: how long the verification took, in milliseconds. */
  latency_ms?: number;
}

export interface ResultsMessageV1 {
  v: 1;
  job_id: string;
  /** The job's account (absent from older producers): the fairness group of the job's lane. */
  account_id?: string;
  results: ResultItem[];
}

/** Whether a bus message is a work message this code understands. */
export function isWorkMessage(m: { v: number }): m is WorkMessageV1 {
  const w = m as Partial<WorkMessageV1>;
  return w.v === 1 && typeof w.job_id === 'string' && Array.isArray(w.items);
}

export function isResultsMessage(m: { v: number }): m is ResultsMessageV1 {
  const r = m as Partial<ResultsMessageV1>;
  return r.v === 1 && typeof r.job_id === 'string' && Array.isArray(r.results);
}
