// Progress of a job while `svc` waits for it: on a terminal a bar redrawn in place, with the
// rate and an ETA (or, while no progress is made, how long it has been still); elsewhere (a pipe, a CI log) a plain line now and then. Rendering is a pure
// function of what was observed, so it is tested without a terminal.

import type { Job } from '@svc/client';
import { printable } from './text.ts';

export interface Sample {
  at: number;
  processed: number;
}

/** The window the rate is measured over: the last 30 s of status reads. */
export const RATE_WINDOW_MS = 30_000;
/** No progress for this long (after some) is a stall: no ETA is claimed. */
export const STALL_MS = 5_000;

export interface Estimate {
  /** Addresses per second over the last RATE_WINDOW_MS (the reads since the first one with progress, if later); undefined without progress in it. */
  rate: number | undefined;
  /** Seconds left; 0 once everything is processed; undefined without a rate, or while stalled. */
  etaSeconds: number | undefined;
  /** While stalled: seconds since the count last moved. */
  stalledSeconds: number | undefined;
}

/**
 * The rate and the ETA from the status reads so far (oldest first). The rule (docs/decisions/clients.md,
 * "Client and CLI"): the rate is the progress over the last 30 s (from the first read with
 * progress if that is later: a queued job's wait is not counted), up to the last read, so time
 * without progress lowers it and the ETA grows instead of counting down to a promise. Once the
 * count has not moved for STALL_MS (5 s) after some progress, as when the last addresses of a job
 * wait for their greylisting re-probe, no ETA is given at all: the display says how long the
 * count has been still (`idle 0:12`) instead of an "ETA 0:01" that holds for 12 s. A finished
 * count (processed = total) is ETA 0.
 */
export function estimate(samples: readonly Sample[], total: number): Estimate {
  const last = samples.at(-1);
  if (!last) return { rate: undefined, etaSeconds: undefined, stalledSeconds: undefined };
  const end = samples.length - 1;
  // Where the rate is measured from: the last read at or before the window's start, or the first read with progress (not the last read itself), whichever is later.
  let from = 0;
  for (let i = end - 1; i >= 0; i--) {
    if (samples[i]!.at <= last.at - RATE_WINDOW_MS) {
      from = i;
      break;
    }
  }
  const firstProgress = samples.findIndex((s, i) => i < end && s.processed > 0 && s.at < last.at);
  const base = samples[Math.max(from, firstProgress)]!;
  const rate = last.at > base.at && last.processed > base.processed ? ((last.processed - base.processed) * 1000) / (last.at - base.at) : undefined;
  if (last.processed >= total) return { rate, etaSeconds: 0, stalledSeconds: undefined };
  // When the count last moved: the first read of the run of reads that ends the list with the same count.
  let still = end;
  while (still > 0 && samples[still - 1]!.processed === last.processed) still--;
  const idleMs = last.at - samples[still]!.at;
  if (last.processed > 0 && idleMs >= STALL_MS) return { rate, etaSeconds: undefined, stalledSeconds: idleMs / 1000 };
  return { rate, etaSeconds: rate === undefined ? undefined : (total - last.processed) / rate, stalledSeconds: undefined };
}

/** Keeps what estimate() needs of a growing list: the window (and the read before it) and the read where the count last moved; drops the rest, oldest first. */
export function trimSamples(samples: Sample[]): void {
  const last = samples.at(-1);
  if (!last) return;
  while (samples.length > 2 && samples[1]!.at <= last.at - RATE_WINDOW_MS) {
    // samples[1] is old enough to anchor the window alone; samples[0] goes, unless it is where the current count was first seen (then the reads after it, as old and with the same count, go).
    samples.splice(samples[0]!.processed === last.processed ? 1 : 0, 1);
  }
}

/** The ETA part of a line: `ETA 0:05`, `ETA -:--` (no rate yet), or `idle 0:12` (stalled). */
function etaText({ etaSeconds, stalledSeconds }: Estimate): string {
  if (stalledSeconds !== undefined) return `idle ${clock(stalledSeconds)}`;
  return `ETA ${etaSeconds === undefined ? '-:--' : clock(etaSeconds)}`;
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US');

/** m:ss (h:mm:ss past an hour). */
export function clock(seconds: number): string {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** One line: `[#######.......]  45.2%  4,520/10,000  1,130/s  ETA 0:05  processing` (`idle 0:12` in place of the ETA while stalled), fitted to `width` columns. */
export function renderBar(job: Pick<Job, 'status' | 'progress'>, samples: readonly Sample[], width: number): string {
  const { processed, total, percent } = job.progress;
  const e = estimate(samples, total);
  const tail = `${percent.toFixed(1).padStart(5)}%  ${int(processed)}/${int(total)}  ${e.rate === undefined ? '-' : `${int(e.rate)}/s`}  ${etaText(e)}  ${printable(job.status)}`;
  // A steady width (the tail's length varies as the numbers grow): 30, less on a narrow terminal.
  const barWidth = Math.max(10, Math.min(30, width - 60));
  const filled = Math.min(barWidth, Math.floor((barWidth * percent) / 100));
  return `[${'#'.repeat(filled)}${'.'.repeat(barWidth - filled)}]  ${tail}`;
}

/** A plain progress line for logs. */
export function renderLine(job: Pick<Job, 'id' | 'status' | 'progress'>, samples: readonly Sample[]): string {
  const { processed, total, percent } = job.progress;
  const { etaSeconds, stalledSeconds } = estimate(samples, total);
  const eta = stalledSeconds !== undefined ? ` no progress for ${clock(stalledSeconds)}` : etaSeconds === undefined ? '' : ` ETA ${clock(etaSeconds)}`;
  return `${printable(job.id)} ${printable(job.status)} ${int(processed)}/${int(total)} (${percent.toFixed(1)}%)${eta}`;
}

export interface ProgressOut {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** Reports each status read to `out`: a redrawn bar on a TTY, else a line per 10% step or 10 s. */
export class ProgressReporter {
  readonly #samples: Sample[] = [];
  #lastLine = { at: 0, decile: -1 };
  #drawn = false;

  constructor(
    readonly out: ProgressOut,
    readonly now: () => number = Date.now,
  ) {}

  /** A job's status read, or the same shape for other work counted in items (`svc find --file`). */
  update(job: Pick<Job, 'id' | 'status' | 'progress'>): void {
    this.#samples.push({ at: this.now(), processed: job.progress.processed });
    trimSamples(this.#samples);
    if (this.out.isTTY) {
      this.out.write(`\r${renderBar(job, this.#samples, this.out.columns ?? 80)}\x1b[K`);
      this.#drawn = true;
      return;
    }
    const decile = Math.floor(job.progress.percent / 10);
    const at = this.now();
    if (decile !== this.#lastLine.decile || at - this.#lastLine.at >= 10_000) {
      this.#lastLine = { at, decile };
      this.out.write(`${renderLine(job, this.#samples)}\n`);
    }
  }

  /** Ends the bar's line. */
  done(): void {
    if (this.#drawn) this.out.write('\n');
    this.#drawn = false;
  }
}
