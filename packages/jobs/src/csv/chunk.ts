// Parsing one chunk of an uploaded CSV: whole records only, cut by the reader (csv.ts), parsed
// by csv-parse (RFC 4180) with the shape rules (ragged rows, field size). Pure, and plain data in
// and out, so that it runs on a Piscina pool thread (csv-task.ts) as well as inline.

import { isUtf8 } from 'node:buffer';
import { CsvError, parse } from 'csv-parse/sync';

/** Longest field accepted (UTF-16 code units, i.e. characters for everything but emoji and CJK extensions). */
export const MAX_FIELD_CHARS = 65_536;
/** Longest record accepted, in bytes (also bounds what the splitter buffers before a line end). */
export const MAX_RECORD_BYTES = 1_048_576;

export type CsvErrorCode = 'invalid_csv' | 'email_column_not_found' | 'too_many_emails';

export interface CsvFailure {
  ok: false;
  code: CsvErrorCode;
  message: string;
  /** Physical line (1-based, counting the header and any `sep=` line) where the problem is, when known. */
  line?: number;
}

/** `lf`: records end with LF or CRLF (both accepted in one file); `cr`: classic Mac CR. */
export type LineEnd = 'lf' | 'cr';

/** One chunk of CSV text for csv-parse: whole records only (see the splitter). Plain data. */
export interface ParseTask {
  bytes: Uint8Array;
  delimiter: string;
  lineEnd: LineEnd;
  /** Physical line number of the chunk's first byte, for messages. */
  firstLine: number;
  /** The byte before the chunk was a CR (so a leading LF completes a CRLF already counted). */
  afterCR?: boolean;
  /** Number of header columns; 0 parses the header itself (no shape rules). */
  width: number;
}

export type ParseResult = { ok: true; records: string[][] } | CsvFailure;

export const LF = 0x0a;
export const CR = 0x0d;
export const QUOTE = 0x22;

export const fail = (code: CsvErrorCode, message: string, line?: number): CsvFailure =>
  line === undefined ? { ok: false, code, message } : { ok: false, code, message: `line ${line}: ${message}`, line };

export const invalid = (message: string, line?: number) => fail('invalid_csv', message, line);

/**
 * Line breaks in `b[from, to)`: LF, CRLF and a lone CR each end a line, as text editors count
 * them (a CR counts, an LF counts unless a CR is just before it; `afterCR`: the byte before
 * `b[0]` was a CR). Every line number in a message is counted this way from byte offsets, never
 * with csv-parse's own counter, so a message does not depend on how the file was cut into chunks.
 */
export function lineBreaks(b: Uint8Array, from = 0, to = b.length, afterCR = false): number {
  let n = 0;
  for (let i = b.indexOf(CR, from); i !== -1 && i < to; i = b.indexOf(CR, i + 1)) n++;
  for (let i = b.indexOf(LF, from); i !== -1 && i < to; i = b.indexOf(LF, i + 1)) if (i > 0 ? b[i - 1] !== CR : !afterCR) n++;
  return n;
}

/** Offset of the first byte that is not part of well-formed UTF-8 (RFC 3629), or -1. */
export function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  const n = b.length;
  while (i < n) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let min: number;
    if (c >= 0xc2 && c <= 0xdf) (need = 1), (min = 0x80);
    else if (c >= 0xe0 && c <= 0xef) (need = 2), (min = 0x800);
    else if (c >= 0xf0 && c <= 0xf4) (need = 3), (min = 0x10000);
    else return i;
    if (i + need >= n) return i; // truncated sequence
    let cp = c & (need === 1 ? 0x1f : need === 2 ? 0x0f : 0x07);
    for (let k = 1; k <= need; k++) {
      const cc = b[i + k]!;
      if ((cc & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += need + 1;
  }
  return -1;
}

/** Where the quote still open at the end of `bytes` was opened (counting parity), or -1. */
function openQuoteAt(bytes: Uint8Array): number {
  let open = -1;
  for (let i = bytes.indexOf(QUOTE); i !== -1; i = bytes.indexOf(QUOTE, i + 1)) open = open === -1 ? i : -1;
  return open;
}

function csvParseOptions(task: ParseTask) {
  return {
    delimiter: task.delimiter,
    record_delimiter: task.lineEnd === 'cr' ? ['\r'] : ['\r\n', '\n'],
    quote: '"',
    escape: '"',
    bom: false, // stripped by the preamble: a BOM anywhere else is data
    relax_quotes: false, // strict RFC 4180: see the file comment for why the splitter relies on it
    relax_column_count: true, // ragged rows are judged in on_record, with a message that names the line
    skip_empty_lines: true,
    max_record_size: MAX_RECORD_BYTES,
  };
}

/** Thrown from on_record to stop csv-parse at the first problem (the problem itself is kept aside). */
const STOP = Symbol('stop');

/**
 * Parses whole records of CSV text (strict RFC 4180, csv-parse) and applies the shape rules of
 * docs/decisions/jobs-and-csv.md, "CSV":
 * - NUL bytes and invalid UTF-8 are rejected (at the record that holds them);
 * - a row with fewer cells than the header is padded with '';
 * - a row with more is accepted only if the extra cells are empty (they are dropped);
 * - no cell may be longer than MAX_FIELD_CHARS.
 * Rows come back as arrays of exactly `width` cells (`width` 0: as parsed, for the header). The
 * first problem in file order is the one reported, whichever way the file was cut into chunks.
 *
 * Two passes: the fast one parses and checks the shapes afterwards; only when it meets a problem
 * does the exact one (exactChunk) run to find which problem comes first and on which line. The
 * exact pass needs csv-parse's on_record, whose per-record context costs about 2.5x the parse.
 */
export function parseCsvChunk(task: ParseTask): ParseResult {
  const bytes = Buffer.from(task.bytes.buffer, task.bytes.byteOffset, task.bytes.byteLength);
  if (bytes.indexOf(0) !== -1 || !isUtf8(bytes)) return exactChunk(task, bytes);
  let records: string[][];
  try {
    records = parse(bytes, csvParseOptions(task)) as string[][];
  } catch (err) {
    if (err instanceof CsvError) return exactChunk(task, bytes);
    throw err;
  }
  const width = task.width;
  for (let i = 0; i < records.length; i++) {
    const rec = records[i]!;
    for (let j = 0; j < rec.length; j++) if (rec[j]!.length > MAX_FIELD_CHARS) return exactChunk(task, bytes);
    if (width === 0) continue;
    if (rec.length < width) {
      for (let j = rec.length; j < width; j++) rec.push('');
    } else if (rec.length > width) {
      for (let j = width; j < rec.length; j++) if (rec[j] !== '') return exactChunk(task, bytes);
      rec.length = width;
    }
  }
  return { ok: true, records };
}

/** The exact pass of parseCsvChunk: the same rules, checked as each record comes out of csv-parse, with byte offsets for the lines. */
function exactChunk(task: ParseTask, bytes: Buffer): ParseResult {
  const lineOf = (offset: number) => task.firstLine + lineBreaks(bytes, 0, offset, task.afterCR);
  /** Line of the record that starts at or after `offset` (blank lines before it skipped). */
  const recordLineFrom = (offset: number) => {
    let i = offset;
    while (i < bytes.length && (bytes[i] === LF || bytes[i] === CR)) i++;
    return lineOf(Math.min(i, bytes.length));
  };
  // The first byte that makes the chunk unreadable as UTF-8 text, if any.
  const nul = bytes.indexOf(0);
  const badUtf8 = isUtf8(bytes) ? -1 : firstInvalidUtf8(bytes);
  const bad = nul === -1 ? badUtf8 : badUtf8 === -1 ? nul : Math.min(nul, badUtf8);
  const badFailure = () =>
    nul === bad
      ? invalid('the file contains NUL bytes: it is not a text CSV (UTF-16 without a byte order mark, or a binary file?); save it as "CSV UTF-8"', lineOf(bad))
      : invalid('the file is not valid UTF-8; save it as "CSV UTF-8"', lineOf(bad));

  const width = task.width;
  let recordStart = 0; // offset where the record being parsed starts (after the previous one's line end)
  let problem: CsvFailure | undefined;
  const onRecord = (rec: string[], ctx: { bytes: number }): string[] => {
    const start = recordStart;
    recordStart = ctx.bytes; // csv-parse: bytes consumed through this record's line end
    if (bad !== -1 && ctx.bytes > bad) {
      problem = badFailure();
      throw STOP;
    }
    for (let j = 0; j < rec.length; j++) {
      if (rec[j]!.length > MAX_FIELD_CHARS) {
        problem = invalid(`a field is longer than ${MAX_FIELD_CHARS} characters`, recordLineFrom(start));
        throw STOP;
      }
    }
    if (width === 0) return rec;
    if (rec.length < width) {
      for (let j = rec.length; j < width; j++) rec.push('');
    } else if (rec.length > width) {
      for (let j = width; j < rec.length; j++) {
        if (rec[j] !== '') {
          problem = invalid(`the row has ${rec.length} fields but the header has ${width} (a comma or semicolon in an unquoted value? quote the value)`, recordLineFrom(start));
          throw STOP;
        }
      }
      rec.length = width;
    }
    return rec;
  };

  let records: string[][];
  try {
    records = parse(bytes, { ...csvParseOptions(task), on_record: onRecord }) as string[][];
  } catch (err) {
    if (problem) return problem;
    if (!(err instanceof CsvError)) throw err;
    return describeParseError(err, bytes, recordLineFrom(recordStart), lineOf);
  }
  // A bad byte after the last record can only be in a record csv-parse dropped; be safe anyway.
  if (bad !== -1) return badFailure();
  return { ok: true, records };
}

function describeParseError(err: CsvError, bytes: Buffer, line: number, lineOf: (offset: number) => number): CsvFailure {
  switch (err.code) {
    case 'CSV_QUOTE_NOT_CLOSED': {
      const open = openQuoteAt(bytes);
      return invalid('a quoted field is never closed (a field that starts with " must end with "; a " inside it is written "")', open === -1 ? line : lineOf(open));
    }
    case 'CSV_INVALID_CLOSING_QUOTE':
      return invalid('a quoted field is followed by other characters before the next delimiter (write " inside a quoted field as "")', line);
    case 'INVALID_OPENING_QUOTE':
      return invalid('a " inside an unquoted field (quote the whole field and double the quote: "5"" screen")', line);
    case 'CSV_MAX_RECORD_SIZE': {
      // Usually a quote left open that swallowed the rest of the file: name the line where it opened.
      const open = openQuoteAt(bytes);
      if (open !== -1) return invalid(`a quoted field starting on this line runs past ${MAX_RECORD_BYTES} bytes (is its closing quote missing?)`, lineOf(open));
      return invalid(`a record is longer than ${MAX_RECORD_BYTES} bytes`, line);
    }
    default:
      return invalid(`the CSV could not be parsed (${err.code}: ${err.message})`, line);
  }
}
