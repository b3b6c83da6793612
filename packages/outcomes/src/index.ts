// @svc/outcomes: delivery-outcome evidence, pure (no I/O).
export type { OutcomeEvent, ParseOptions, ParseResult } from './types.ts';
export { parseOutcomeRow } from './evidence.ts';
export { parseRfc3339, parseRfc822, type Instant } from './datetime.ts';
export { accuracy, domainsReport, summaryReport, wilson, type AccuracyFigures, type DomainsReport, type Precision, type ResultFigures, type SummaryReport } from './report.ts';
export { deliveryStatusOf, textPartOf } from './mime.ts';
export { SUPPRESSION_STRENGTH, decideSuppressions, outranks, suppressionRules } from './rules/suppression.ts';
