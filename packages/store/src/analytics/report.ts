// The outcome reports' arithmetic, shared by both adapters: an adapter's query gives counts per
// (predicted result, label, signal[, domain]); these fold them into matrices.

import { emptyOutcomeMatrix, OUTCOME_LABELS, PREDICTED_RESULTS, VALIDATION_RESULTS, type DomainOutcomeMatrix, type OutcomeLabel, type OutcomeMatrix, type PredictedResult, type ValidationResult } from '@svc/contracts';
import type { DailyCounts, ResultCounts } from './analytics.ts';

/** One count of an adapter's matrix query: facts per (predicted result, label, signal[, domain]). */
export interface MatrixRow {
  domain?: string;
  result: string;
  label: string;
  signal: string | null;
  n: number;
}

/** Adds one (result, label, signal) count to a matrix. */
export function addToMatrix(m: OutcomeMatrix, result: string, label: string, signal: string | null, n: number): void {
  const r = ((PREDICTED_RESULTS as readonly string[]).includes(result) ? result : 'not_validated') as PredictedResult;
  if (signal === 'sent') m.sent[r] += n;
  else if (signal === 'open') m.opens[r] += n;
  else if ((OUTCOME_LABELS as readonly string[]).includes(label)) m.claims[r][label as OutcomeLabel] += n;
}

/** Every result at 0. */
export const zeroCounts = (): ResultCounts => Object.fromEntries(VALIDATION_RESULTS.map((r) => [r, 0])) as ResultCounts;

/** daily()'s answer from (day since 1970-01-01, result, count) rows, in any order: oldest day first. */
export function dailyFrom(rows: ReadonlyArray<{ d: number; result: ValidationResult; n: number }>): DailyCounts[] {
  const days = new Map<number, DailyCounts>();
  for (const { d, result, n } of rows) {
    let day = days.get(d);
    if (!day) days.set(d, (day = { day: new Date(d * 86_400_000).toISOString().slice(0, 10), total: 0, counts: zeroCounts() }));
    day.counts[result] += n;
    day.total += n;
  }
  return [...days.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v);
}

/** Per-domain matrices from (domain, result, label, signal, n) rows: most facts first, then domain (byte order). */
export function domainMatrices(rows: readonly MatrixRow[], limit: number): DomainOutcomeMatrix[] {
  const by = new Map<string, DomainOutcomeMatrix>();
  for (const r of rows) {
    const d = r.domain ?? '';
    let m = by.get(d);
    if (!m) by.set(d, (m = { domain: d, total: 0, ...emptyOutcomeMatrix() }));
    addToMatrix(m, r.result, r.label, r.signal, r.n);
    m.total += r.n;
  }
  return [...by.values()].sort((a, b) => b.total - a.total || (a.domain < b.domain ? -1 : a.domain > b.domain ? 1 : 0)).slice(0, limit);
}
