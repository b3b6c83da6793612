// @svc/outcomes: delivery-outcome evidence: the pure parsing and report arithmetic (parse/), the
// pure suppression rules the store runs in an import's transaction (rules/), and the import and
// connector use cases on the store (import/).
export type { OutcomeEvent, ParseOptions, ParseResult } from './parse/types.ts';
export { parseOutcomeRow } from './parse/evidence.ts';
export { parseRfc3339, parseRfc822, type Instant } from './parse/datetime.ts';
export { accuracy, domainsReport, summaryReport, wilson, type AccuracyFigures, type DomainsReport, type Precision, type ResultFigures, type SummaryReport } from './parse/report.ts';
export { deliveryStatusOf, textPartOf } from './parse/mime.ts';
export { OutcomesService, outcomeCsvRows, connectorWebhookPath, encodeEventCursor, decodeEventCursor, MAX_OUTCOME_ROWS, OUTCOME_BODY_LIMIT, CONNECTOR_PLATFORMS, type ConnectorPlatform, type ImportResponse, type RowError, type EventView, type OutcomesDeps, type InboundSummary } from './import/outcomes-service.ts';
export { emailBisonEvents, EMAILBISON_EVENTS, type EmailBisonEvent, type InboundEvent } from './import/emailbison.ts';
export { SUPPRESSION_STRENGTH, decideSuppressions, outranks, suppressionRules } from './rules/suppression.ts';
