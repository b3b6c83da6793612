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
