// The job status resource: id, status, progress, results and credit_reservation, plus
// created_at, started_at, completed_at, source, filename, webhook_url and download. GET /v1/csv/jobs/{id}, the list items, the cancel response
// and the webhook body all show this shape.

import { jobCounters, type JobCounters, type JobState } from '@svc/contracts';
import type { JobRecord, JobSource } from '@svc/store';

/** One credit per High-Value Validation. */
export const CREDITS_PER_HIGH_VALUE_VALIDATION = 1;

export interface JobStatus {
  id: string;
  status: JobState;
  progress: { processed: number; total: number; percent: number };
  /** The input, the counters (JOB_COUNTERS, in their order), the credits. */
  results: {
    total_rows: number;
    unique_emails: number;
  } & JobCounters & {
    credits_reserved: number;
    credits_charged: number;
    credits_consumed: number;
    credits_refunded: number;
    credits_per_high_value_validation: number;
  };
  credit_reservation: {
    reserved: boolean;
    reserved_credits: number;
    credits_charged: number;
    credits_consumed: number;
    refunded_credits: number;
    credits_per_high_value_validation: number;
    finalized: boolean;
  };
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  source: JobSource;
  filename: string | null;
  webhook_url: string | null;
  download: { available: boolean; url: string };
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

/** Whether a job's results CSV can be downloaded: completed (or canceled, with what it had) and rendered. */
export const downloadable = (job: Pick<JobRecord, 'status' | 'results_key'>): boolean => (job.status === 'completed' || job.status === 'canceled') && job.results_key !== null;

/**
 * The status resource of a job. Credits: until the job is finalized nothing is charged yet, so
 * `credits_charged` (= `credits_consumed`) counts the High-Value Validations found so far and
 * `credits_refunded` is 0; once finalized they are what the settlement charged and released, and
 * `credits_reserved = credits_charged + credits_refunded`.
 */
export function jobStatus(job: JobRecord, publicUrl: string): JobStatus {
  const charged = job.finalized ? job.credits_charged : job.high_value;
  const refunded = job.finalized ? job.credits_refunded : 0;
  const total = job.unique_emails;
  const percent = total > 0 ? Math.floor((job.processed / total) * 10_000) / 100 : job.status === 'completed' ? 100 : 0;
  return {
    id: job.id,
    status: job.status,
    progress: { processed: job.processed, total, percent },
    results: {
      total_rows: job.total_rows,
      unique_emails: job.unique_emails,
      ...jobCounters(job),
      credits_reserved: job.credits_reserved,
      credits_charged: charged,
      credits_consumed: charged,
      credits_refunded: refunded,
      credits_per_high_value_validation: CREDITS_PER_HIGH_VALUE_VALIDATION,
    },
    credit_reservation: {
      reserved: job.reservation_id !== null,
      reserved_credits: job.credits_reserved,
      credits_charged: charged,
      credits_consumed: charged,
      refunded_credits: refunded,
      credits_per_high_value_validation: CREDITS_PER_HIGH_VALUE_VALIDATION,
      finalized: job.finalized,
    },
    created_at: job.created_at.toISOString(),
    started_at: iso(job.started_at),
    completed_at: iso(job.completed_at),
    source: job.source,
    filename: job.filename,
    webhook_url: job.webhook_url,
    download: { available: downloadable(job), url: `${publicUrl}/v1/csv/jobs/${job.id}/download` },
  };
}
