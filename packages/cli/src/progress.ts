// Progress of a job while `svc` waits for it: on a terminal a bar redrawn in place, with the
// rate and an ETA; elsewhere (a pipe, a CI log) a plain line now and then. Rendering is a pure
// function of what was observed, so it is tested without a terminal.

import type { Job } from '@svc/client';
import { printable } from './text.ts';

export interface Sample {
  at: number;
  processed: number;
}

/** Addresses per second and seconds left, from the first sample with progress to the last. */
export function estimate(samples: readonly Sample[], total: number): { rate: number | undefined; etaSeconds: number | undefined } {
  const last = samples.at(-1);
  const first = samples.find((s) => s.processed > 0 && last && s.at < last.at) ?? samples[0];
  if (!first || !last || last.at <= first.at || last.processed <= first.processed) return { rate: undefined, etaSeconds: undefined };
  const rate = ((last.processed - first.processed) * 1000) / (last.at - first.at);
  return { rate, etaSeconds: Math.max(0, (total - last.processed) / rate) };
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

/** One line: `[#######.......]  45.2%  4,520/10,000  1,130/s  ETA 0:05`, fitted to `width` columns. */
export function renderBar(job: Pick<Job, 'status' | 'progress'>, samples: readonly Sample[], width: number): string {
  const { processed, total, percent } = job.progress;
  const { rate, etaSeconds } = estimate(samples, total);
  const tail = `${percent.toFixed(1).padStart(5)}%  ${int(processed)}/${int(total)}  ${rate === undefined ? '-' : `${int(rate)}/s`}  ETA ${etaSeconds === undefined ? '-:--' : clock(etaSeconds)}  ${printable(job.status)}`;
  // A steady width (the tail's length varies as the numbers grow): 30, less on a narrow terminal.
  const barWidth = Math.max(10, Math.min(30, width - 60));
  const filled = Math.min(barWidth, Math.floor((barWidth * percent) / 100));
  return `[${'#'.repeat(filled)}${'.'.repeat(barWidth - filled)}]  ${tail}`;
}

/** A plain progress line for logs. */
export function renderLine(job: Pick<Job, 'id' | 'status' | 'progress'>, samples: readonly Sample[]): string {
  const { processed, total, percent } = job.progress;
  const { etaSeconds } = estimate(samples, total);
  return `${printable(job.id)} ${printable(job.status)} ${int(processed)}/${int(total)} (${percent.toFixed(1)}%)${etaSeconds === undefined ? '' : ` ETA ${clock(etaSeconds)}`}`;
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

  update(job: Job): void {
    this.#samples.push({ at: this.now(), processed: job.progress.processed });
    if (this.#samples.length > 600) this.#samples.splice(1, 1); // the first sample anchors the rate
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
