// The results CSV: the input columns, then the result columns, one
// line per input row in input order; `?segment=` keeps only some results. Pure string building:
// csv-pool.ts runs it on a worker thread for large jobs, and it runs inline for small ones.
//
// Output format (docs/decisions/jobs-and-csv.md, "CSV"): comma-delimited, CRLF line ends (RFC 4180
// 2.1), UTF-8, RFC 4180 quoting where a cell needs it, formula cells escaped with a leading `'`
// (csv.ts formatCell), and a UTF-8 BOM only when the uploaded file had one.

import { VALIDATION_RESULTS, type ValidationResult, type ValidationResultBody } from '@svc/contracts';
import { formatCell, serializeFields } from './csv.ts';

/** The result columns, in order, after the input columns. */
export const RESULT_COLUMNS = [
  'result',
  'reason_code',
  'reason',
  'b2b_outbound_quality',
  'is_role_based',
  'role_type',
  'is_free_provider',
  'is_disposable',
  'is_catchall',
  'catchall_confidence',
  'did_you_mean',
  'credits_charged',
  'charge_reason',
  'validation_layer',
  'smtp_response',
] as const;

type ResultColumn = (typeof RESULT_COLUMNS)[number];

/**
 * The verdict fields a results row shows: a ValidationResultBody fits, and so does a stored row
 * whose optional fields are null. Extra properties are ignored.
 */
export type ResultCells = {
  [K in ResultColumn as undefined extends ValidationResultBody[K] ? never : K]: ValidationResultBody[K];
} & {
  [K in ResultColumn as undefined extends ValidationResultBody[K] ? K : never]?: ValidationResultBody[K] | null;
};

export interface RenderRow {
  /** The input cells (csv.ts CsvRow.fields; a JSON job: `[email]`). */
  fields: readonly string[];
  verdict: ResultCells;
}

const UTF8_BOM = '\uFEFF';
const CRLF = '\r\n';

/** The header line (with CRLF), preceded by a UTF-8 BOM when `bom` is set. */
export function renderHeader(inputHeader: readonly string[], opts: { bom?: boolean } = {}): string {
  const input = serializeFields(inputHeader);
  return (opts.bom ? UTF8_BOM : '') + (inputHeader.length > 0 ? `${input},` : '') + RESULT_COLUMNS.join(',') + CRLF;
}

function cell(v: string | number | boolean | null | undefined): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return formatCell(v);
  return String(v);
}

/**
 * The lines (each ending CRLF) of `rows`, skipping those whose result is not in `segments`
 * (null: keep all). Each row shows exactly `inputHeader.length` input cells (missing cells
 * empty), so the result columns always sit under their names.
 */
export function renderRows(inputHeader: readonly string[], rows: readonly RenderRow[], segments: ReadonlySet<string> | null = null): string {
  const width = inputHeader.length;
  let out = '';
  for (const row of rows) {
    const v = row.verdict;
    if (segments !== null && !segments.has(v.result)) continue;
    let line = '';
    for (let i = 0; i < width; i++) line += formatCell(row.fields[i] ?? '') + ',';
    line +=
      cell(v.result) + ',' +
      cell(v.reason_code) + ',' +
      cell(v.reason) + ',' +
      cell(v.b2b_outbound_quality) + ',' +
      cell(v.is_role_based) + ',' +
      cell(v.role_type) + ',' +
      cell(v.is_free_provider) + ',' +
      cell(v.is_disposable) + ',' +
      cell(v.is_catchall) + ',' +
      cell(v.catchall_confidence) + ',' +
      cell(v.did_you_mean) + ',' +
      cell(v.credits_charged) + ',' +
      cell(v.charge_reason) + ',' +
      cell(v.validation_layer) + ',' +
      cell(v.smtp_response);
    out += line + CRLF;
  }
  return out;
}

export type SegmentsResult = { ok: true; segments: ReadonlySet<ValidationResult> | null } | { ok: false; code: 'invalid_request'; message: string };

/**
 * The download's `?segment=valid,risky`: a comma list of result values (repeated
 * `segment` parameters are joined); absent → every row. Names are the `result` values
 * (`valid`, `valid_role_based`, `risky`, `invalid`, `unknown`), exact and lower case; spaces
 * around the commas are allowed. Empty or unknown names → `invalid_request`, so a typo never
 * silently downloads an empty file.
 */
export function parseSegments(param: string | readonly string[] | undefined | null): SegmentsResult {
  if (param === undefined || param === null) return { ok: true, segments: null };
  const parts = (typeof param === 'string' ? [param] : param).flatMap((p) => p.split(',')).map((p) => p.trim());
  const known = new Set<string>(VALIDATION_RESULTS);
  const allowed = VALIDATION_RESULTS.join(', ');
  if (parts.length === 0 || parts.some((p) => p === '')) {
    return { ok: false, code: 'invalid_request', message: `segment must be a comma-separated list of: ${allowed}` };
  }
  const unknown = parts.filter((p) => !known.has(p));
  if (unknown.length > 0) {
    return { ok: false, code: 'invalid_request', message: `unknown segment ${unknown.map((u) => JSON.stringify(u.slice(0, 40))).join(', ')}; segments are: ${allowed}` };
  }
  return { ok: true, segments: new Set(parts as ValidationResult[]) };
}
