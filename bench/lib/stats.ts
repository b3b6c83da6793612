// Small statistics and formatting helpers shared by the benchmarks.

/** Nearest-rank percentile of an unsorted sample (p in 0..100). NaN for an empty sample. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

/** The median of a sample (the mean of the middle two for an even count). NaN for an empty sample. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
}

export function summarize(values: readonly number[]): Summary {
  const mean = values.length ? values.reduce((a, b) => a + b, 0) / values.length : Number.NaN;
  return { n: values.length, p50: percentile(values, 50), p90: percentile(values, 90), p99: percentile(values, 99), mean };
}

/** Significant-ish rounding for tables: 3 decimals below 1, 2 below 100, else 0/1. */
export function fmt(v: number | undefined): string {
  if (v === undefined || Number.isNaN(v)) return '-';
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a < 0.01) return v.toFixed(4);
  if (a < 1) return v.toFixed(3);
  if (a < 100) return v.toFixed(2);
  if (a < 10_000) return v.toFixed(1);
  return Math.round(v).toString();
}

/** CPU time (user + system) in ms since `since` (a process.cpuUsage() value). */
export function cpuMsSince(since: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(since);
  return (d.user + d.system) / 1000;
}

export interface Sample {
  cpuMs: number[];
  wallMs: number[];
  /** Iterations cut short by the time budget (0 when all ran). */
  skipped: number;
  /** Warm-up calls made (not measured). */
  warmedUp: number;
}

/**
 * Runs `fn` one call at a time, `warmup` unmeasured calls then up to `n` measured ones, stopping
 * early when `budgetMs` of wall time is used up (every load loop is bounded in count and time).
 * CPU is the whole process's user+system time across each call.
 */
export async function measureSerial(opts: { n: number; warmup: number; budgetMs: number }, fn: (i: number) => Promise<void> | void): Promise<Sample> {
  const deadline = performance.now() + opts.budgetMs;
  let warmedUp = 0;
  for (; warmedUp < opts.warmup && performance.now() < deadline; warmedUp++) await fn(-1 - warmedUp);
  const cpuMs: number[] = [];
  const wallMs: number[] = [];
  let i = 0;
  for (; i < opts.n && performance.now() < deadline; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await fn(i);
    const t1 = performance.now();
    cpuMs.push(cpuMsSince(c0));
    wallMs.push(t1 - t0);
  }
  return { cpuMs, wallMs, skipped: opts.n - i, warmedUp };
}

/** Rejects after `ms` with a message naming what timed out (the timer does not hold the process). */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}
