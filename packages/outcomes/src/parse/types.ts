// The parser's contract: one raw outcome row in (a JSON object or a CSV record, every value as
// the client sent it), one labelled event or one coded row error out. Never an exception.

import type { OutcomeEvent, OutcomeRowError, OutcomeSource } from '@svc/contracts';

export type { OutcomeEvent };

export type ParseResult = { ok: true; event: OutcomeEvent } | { ok: false; code: OutcomeRowError; reason: string };

export interface ParseOptions {
  /** "Now" for future-date checks (default: new Date()). */
  now?: Date;
  /** The source when the row names none (CSV imports: `csv_import`; the connector: `emailbison`). Without it a missing source is `invalid_source`. */
  defaultSource?: OutcomeSource;
}
