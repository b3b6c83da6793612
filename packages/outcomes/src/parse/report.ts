// The accuracy report arithmetic (the report routes of the API): from the counts of the Analytics
// port (each outcome joined to the validation decision made before it) to the report the API
// answers. Pure.
//
// - matrix: claim outcomes (not the `sent`/`open` signals) per predicted result × label;
//   `not_validated` holds outcomes of addresses the account never validated before them.
// - by_result: per predicted result, the `sent` events (the denominator), the hard bounces among
//   the claims, `hard_bounce_rate` = bounced_hard / sent, and its 95% Wilson score interval.
// - precision: of `valid`, delivered / (delivered + bounced_hard) among the addresses predicted
//   valid; of `invalid`, bounced_hard / (delivered + bounced_hard) among those predicted invalid:
//   only the decision-grade labels count. With its Wilson interval.
// - denominator_status `sent_event_missing` while the window has no `sent` event: then every
//   accuracy figure (rates, precisions, intervals) is null and the counts stay.
// Figures are rounded to 6 decimals.

import { OUTCOME_LABELS, PREDICTED_RESULTS, type AccuracyFigures, type DomainOutcomeMatrix, type DomainsReport, type OutcomeLabel, type OutcomeMatrix, type Precision, type PredictedResult, type ResultFigures, type SummaryReport } from '@svc/contracts';

/** z for a two-sided 95% interval. */
const Z = 1.959964;

const round = (x: number): number => Math.round(x * 1e6) / 1e6;

/** The Wilson score interval of k successes in n trials (95%); null when n is 0. */
export function wilson(k: number, n: number): [number, number] | null {
  if (n <= 0) return null;
  const p = k / n;
  const z2 = Z * Z;
  const denom = 1 + z2 / n;
  const centre = (p + z2 / (2 * n)) / denom;
  const half = (Z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / denom;
  return [round(Math.max(0, centre - half)), round(Math.min(1, centre + half))];
}

export type { AccuracyFigures, DomainsReport, Precision, ResultFigures, SummaryReport } from '@svc/contracts';

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

/** The figures of one matrix. */
export function accuracy(m: OutcomeMatrix): AccuracyFigures {
  const sent = sum(PREDICTED_RESULTS.map((r) => m.sent[r]));
  const opens = sum(PREDICTED_RESULTS.map((r) => m.opens[r]));
  const claimsOf = (r: PredictedResult) => sum(OUTCOME_LABELS.map((l) => m.claims[r][l]));
  const claims = sum(PREDICTED_RESULTS.map(claimsOf));
  const ok = sent > 0;
  const by_result = Object.fromEntries(
    PREDICTED_RESULTS.map((r) => {
      const s = m.sent[r];
      const hard = m.claims[r].bounced_hard;
      const rated = ok && s > 0;
      return [
        r,
        {
          sent: s,
          outcomes: claimsOf(r),
          delivered: m.claims[r].delivered,
          bounced_hard: hard,
          hard_bounce_rate: rated ? round(Math.min(1, hard / s)) : null,
          hard_bounce_rate_ci95: rated ? wilson(Math.min(hard, s), s) : null,
        } satisfies ResultFigures,
      ];
    }),
  ) as Record<PredictedResult, ResultFigures>;
  const precision = (r: 'valid' | 'invalid'): Precision => {
    const delivered = m.claims[r].delivered;
    const hard = m.claims[r].bounced_hard;
    const n = delivered + hard;
    const right = r === 'valid' ? delivered : hard;
    return { value: ok && n > 0 ? round(right / n) : null, delivered, bounced_hard: hard, ci95: ok ? wilson(right, n) : null };
  };
  return {
    denominator_status: ok ? 'ok' : 'sent_event_missing',
    totals: { outcomes: claims + sent + opens, claims, sent, opens, not_validated: claimsOf('not_validated') },
    matrix: Object.fromEntries(PREDICTED_RESULTS.map((r) => [r, { ...m.claims[r] }])) as Record<PredictedResult, Record<OutcomeLabel, number>>,
    by_result,
    precision: { valid: precision('valid'), invalid: precision('invalid') },
  };
}

export function summaryReport(m: OutcomeMatrix, w: { from: Date; to: Date }): SummaryReport {
  return { from: w.from.toISOString(), to: w.to.toISOString(), ...accuracy(m) };
}

export function domainsReport(rows: readonly DomainOutcomeMatrix[], w: { from: Date; to: Date }): DomainsReport {
  return { from: w.from.toISOString(), to: w.to.toISOString(), domains: rows.map((r) => ({ domain: r.domain, ...accuracy(r) })) };
}
