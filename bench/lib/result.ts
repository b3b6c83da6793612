// What a benchmark hands back to bench/run.ts: rows for the summary table, plus free-form detail.

export interface Row {
  /** Short benchmark id, e.g. 'verifier/cpu-per-validation'. */
  bench: string;
  metric: string;
  value: number;
  unit: string;
  /** Baseline measured in the same run, when the row compares against one. */
  baseline?: { label: string; value: number };
  /** value / baseline (or the inverse, as `ratioLabel` says). */
  ratio?: number;
  ratioLabel?: string;
  /** Human-readable target, e.g. '< 2 ms'. */
  target?: string;
  pass?: boolean;
}

export interface BenchResult {
  name: string;
  rows: Row[];
  /** Markdown lines with the detail of the run (method, extra figures, observations). */
  details: string[];
  /** Non-fatal problems seen while measuring. */
  warnings: string[];
}
