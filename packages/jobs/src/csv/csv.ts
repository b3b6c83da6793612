// Reading an uploaded CSV: streamed, in chunks of rows, on csv-parse, with the choices written in
// docs/decisions/jobs-and-csv.md ("CSV").
//
// How the work is split so that it can run on a Piscina pool (csv-pool.ts) as well as inline:
//
//   bytes ─▶ preamble (main thread): magic numbers, UTF-8 BOM, blank lines, Excel's `sep=` line,
//            the header record, its delimiter (`,` `;` or tab, counted outside quotes) and line end
//         ─▶ Splitter (main thread): cuts the rest at record boundaries into chunks of at most
//            `chunkRows` records / about `chunkBytes`, tracking quotes with Buffer.indexOf (native)
//         ─▶ parseCsvChunk (chunk.ts; a pool thread, or inline): UTF-8 check, csv-parse (RFC
//            4180), the shape rules (ragged rows, field size); returns plain data
//         ─▶ readCsv (main thread): row numbers, the email cell, yields `{ header, rows }`.
//
// Why cutting outside the parser is safe: a chunk starts at a real record boundary (induction),
// and it ends at a line end where the number of quotes since that boundary is even. csv-parse in
// strict mode (relax_quotes false) only accepts a quote that opens a field, closes it or is
// doubled inside it, so when it parses a chunk without error its quote state is the parity we
// counted, and the chunk end is a real boundary too. A stray quote (`5" screen`) makes the parser
// fail on the chunk that contains it, so a miscounted parity never produces wrong rows; it can
// only make a chunk long, and a record longer than the cap is an error anyway.
//
// Every outcome is data: `{ ok: true, … }` or `{ ok: false, code, message, line }` with the
// catalogue's codes (`invalid_csv`, `email_column_not_found`, `too_many_emails`). Nothing here
// throws on what a user uploads; an exception is a bug.

import { setImmediate as turnOfTheLoop } from 'node:timers/promises';
import { formatCell } from '@svc/contracts';
import { CR, fail, invalid, LF, lineBreaks, MAX_RECORD_BYTES, parseCsvChunk, QUOTE, type CsvFailure, type LineEnd, type ParseResult, type ParseTask } from './chunk.ts';

export { MAX_FIELD_CHARS, MAX_RECORD_BYTES, parseCsvChunk, type CsvErrorCode, type CsvFailure, type LineEnd, type ParseResult, type ParseTask } from './chunk.ts';

export interface CsvRow {
  /** 0-based position among the data rows (the header is not a row; blank lines are skipped). */
  index: number;
  /** The row's cells, exactly `header.length` of them (short rows padded with ''). */
  fields: string[];
  /** The cell of the email column, trimmed. */
  email: string;
}

export interface CsvChunk {
  ok: true;
  header: string[];
  /** Index of the email column in `header`. */
  emailIndex: number;
  delimiter: string;
  /** Whether the file started with a UTF-8 BOM (render.ts writes one back when it did). */
  bom: boolean;
  rows: CsvRow[];
}

/** What parses a chunk: inline by default, or a pool (csv-pool.ts). */
export interface ChunkParser {
  parse(task: ParseTask): Promise<ParseResult>;
  /** Chunks kept in flight at once (pool: about twice its threads). */
  readonly inFlight: number;
}

export interface ReadCsvOptions {
  /** The `email_column` of start-processing: an exact header match first, then case-insensitive and trimmed. */
  emailColumn: string;
  /**
   * Records per chunk (default 1,000: inline, about 6 ms of parsing on the event loop for 5 short
   * columns; on a pool, the main thread's share per chunk, receiving the rows, stays as small,
   * at the same rate as larger chunks; bench/jobs/csv.ts).
   */
  chunkRows?: number;
  /** Bytes after which a chunk is cut at the next record end (default 1 MiB). */
  chunkBytes?: number;
  /** More data rows than this → `too_many_emails` (default: no limit). */
  maxRows?: number;
  /** Parse chunks on this pool instead of inline. */
  parser?: ChunkParser;
}

// ---------------------------------------------------------------------------------------------
// Preamble: everything before the first data row

interface Layout {
  header: string[];
  emailIndex: number;
  delimiter: string;
  lineEnd: LineEnd;
  bom: boolean;
  /** Physical line of the first byte after the header. */
  nextLine: number;
  /** The header's last byte is a CR. */
  afterCR: boolean;
}

/** End (exclusive) of the first record in `b` from `from`, and its line end; null if not in `b` yet. */
function firstRecordEnd(b: Buffer, from: number, eof: boolean): { end: number; lineEnd: LineEnd; termLen: number } | null {
  let inQuote = false;
  for (let i = from; i < b.length; i++) {
    const c = b[i];
    if (c === QUOTE) inQuote = !inQuote;
    else if (!inQuote) {
      if (c === LF) return { end: i + 1, lineEnd: 'lf', termLen: 1 };
      if (c === CR) {
        if (i + 1 >= b.length) return eof ? { end: i + 1, lineEnd: 'cr', termLen: 1 } : null;
        return b[i + 1] === LF ? { end: i + 2, lineEnd: 'lf', termLen: 2 } : { end: i + 1, lineEnd: 'cr', termLen: 1 };
      }
    }
  }
  return eof ? { end: b.length, lineEnd: 'lf', termLen: 0 } : null;
}

/** The delimiter of a header record: the most frequent of `,` `;` tab outside quotes (ties in that order; none → `,`). */
export function detectDelimiter(headerBytes: Uint8Array): string {
  const counts = [0, 0, 0];
  let inQuote = false;
  for (const c of headerBytes) {
    if (c === QUOTE) inQuote = !inQuote;
    else if (!inQuote) {
      if (c === 0x2c) counts[0]!++;
      else if (c === 0x3b) counts[1]!++;
      else if (c === 0x09) counts[2]!++;
    }
  }
  const [comma, semi, tab] = counts as [number, number, number];
  if (semi > comma && semi >= tab) return ';';
  if (tab > comma && tab > semi) return '\t';
  return ',';
}

/** The email column: the first exact match, else the first case-insensitive match of the trimmed names. */
export function findEmailColumn(header: readonly string[], emailColumn: string): number {
  const exact = header.indexOf(emailColumn);
  if (exact !== -1 || emailColumn.trim() === '') return exact;
  const want = emailColumn.trim().toLowerCase();
  return header.findIndex((h) => h.trim().toLowerCase() === want);
}

const shown = (s: string) => JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s);

function columnNotFound(header: readonly string[], emailColumn: string): CsvFailure {
  const names = header.slice(0, 20).map(shown).join(', ') + (header.length > 20 ? `, … (${header.length} columns)` : '');
  return fail('email_column_not_found', `email_column ${shown(emailColumn)} is not a column of the CSV header (columns: ${names})`);
}

type PreambleResult = { ok: true; layout: Layout; rest: Buffer } | CsvFailure | null;

/**
 * Reads the preamble from the bytes received so far (`b`, from the start of the file). Null:
 * more bytes are needed. Checks, in order: not a spreadsheet or UTF-16 file; strips a UTF-8 BOM;
 * skips blank lines; takes an Excel `sep=X` line as the delimiter; reads the header record.
 */
function readPreamble(b: Buffer, eof: boolean, emailColumn: string): PreambleResult {
  if (b.length < 4 && !eof) return null;
  if (b[0] === 0x50 && b[1] === 0x4b && b[2] === 0x03 && b[3] === 0x04) return invalid('this is an Excel workbook (.xlsx) or another ZIP file, not a CSV; in Excel use File > Save As > "CSV UTF-8"', 1);
  if (b[0] === 0xd0 && b[1] === 0xcf && b[2] === 0x11 && b[3] === 0xe0) return invalid('this is an Excel 97-2003 workbook (.xls), not a CSV; in Excel use File > Save As > "CSV UTF-8"', 1);
  if ((b[0] === 0xff && b[1] === 0xfe) || (b[0] === 0xfe && b[1] === 0xff)) return invalid('the file is UTF-16 ("Unicode text"); save it as "CSV UTF-8"', 1);
  const bom = b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf;
  let pos = bom ? 3 : 0;
  let line = 1;
  // Blank lines before the header are skipped (they are skipped between rows too).
  while (pos < b.length && (b[pos] === LF || b[pos] === CR)) {
    if (b[pos] === CR && pos + 1 >= b.length && !eof) return null;
    if (b[pos] === LF || b[pos + 1] !== LF) line++;
    pos++;
  }
  if (pos >= b.length) return eof ? invalid('the file is empty: a header row naming the columns is required') : null;
  let rec = firstRecordEnd(b, pos, eof);
  if (rec === null) return b.length - pos > MAX_RECORD_BYTES ? invalid(`the header is longer than ${MAX_RECORD_BYTES} bytes (is a quote left open?)`, line) : null;
  let delimiter: string | undefined;
  // Excel's `sep=;` first line names the delimiter; the header follows it.
  const first = b.subarray(pos, rec.end - rec.termLen);
  const sep = first[4]!;
  if (first.length === 5 && first.subarray(0, 4).toString('latin1').toLowerCase() === 'sep=' && (sep === 0x09 || (sep > 0x20 && sep < 0x7f)) && sep !== QUOTE) {
    delimiter = String.fromCharCode(sep);
    pos = rec.end;
    line++;
    if (pos >= b.length) return eof ? invalid('the file has a sep= line but no header row', line) : null;
    rec = firstRecordEnd(b, pos, eof);
    if (rec === null) return b.length - pos > MAX_RECORD_BYTES ? invalid(`the header is longer than ${MAX_RECORD_BYTES} bytes (is a quote left open?)`, line) : null;
  }
  const headerBytes = b.subarray(pos, rec.end);
  delimiter ??= detectDelimiter(headerBytes.subarray(0, headerBytes.length - rec.termLen));
  const parsed = parseCsvChunk({ bytes: headerBytes, delimiter, lineEnd: rec.lineEnd, firstLine: line, afterCR: pos > 0 && b[pos - 1] === CR, width: 0 });
  if (!parsed.ok) return parsed;
  const header = parsed.records[0];
  if (header === undefined) return invalid('the file has no header row', line);
  const emailIndex = findEmailColumn(header, emailColumn);
  if (emailIndex === -1) return columnNotFound(header, emailColumn);
  return {
    ok: true,
    layout: { header, emailIndex, delimiter, lineEnd: rec.lineEnd, bom, nextLine: line + lineBreaks(headerBytes, 0, headerBytes.length, pos > 0 && b[pos - 1] === CR), afterCR: headerBytes[headerBytes.length - 1] === CR },
    rest: b.subarray(rec.end),
  };
}

// ---------------------------------------------------------------------------------------------
// Splitter: record-aligned chunks from a stream of buffers

interface RawChunk {
  bytes: Uint8Array;
  firstLine: number;
  afterCR: boolean;
}

/** Cuts bytes into chunks of whole records (see the file comment). Holds at most one chunk plus one record. */
class Splitter {
  private pieces: Buffer[] = [];
  /** Offset in pieces[0] where the pending chunk starts. */
  private head = 0;
  /** Pending bytes (from head to the end of the last piece). */
  private pending = 0;
  private inQuote = false;
  private records = 0;
  /** Pending-relative end of the last complete record (0: none yet). */
  private lastEnd = 0;
  private line: number;
  private afterCR: boolean;
  private readonly nl: number;

  constructor(
    lineEnd: LineEnd,
    firstLine: number,
    afterCR: boolean,
    private readonly chunkRows: number,
    private readonly chunkBytes: number,
  ) {
    this.nl = lineEnd === 'cr' ? CR : LF;
    this.line = firstLine;
    this.afterCR = afterCR;
  }

  /** Adds bytes; returns the chunks completed, and whether the unfinished record has grown past the cap. */
  push(buf: Buffer, out: RawChunk[]): boolean {
    if (buf.length === 0) return false;
    this.pieces.push(buf);
    let base = this.pending; // pending-relative offset of buf[0]
    this.pending += buf.length;
    const nl = this.nl;
    const len = buf.length;
    let pos = 0;
    let nextQuote = -2; // cached position of the next quote at or after pos (-1: none in buf)
    while (pos < len) {
      if (this.inQuote) {
        const q = buf.indexOf(QUOTE, pos);
        if (q === -1) break;
        this.inQuote = false;
        pos = q + 1;
        continue;
      }
      if (nextQuote !== -1 && nextQuote < pos) nextQuote = buf.indexOf(QUOTE, pos);
      const end = buf.indexOf(nl, pos);
      if (nextQuote !== -1 && (end === -1 || nextQuote < end)) {
        this.inQuote = true;
        pos = nextQuote + 1;
        continue;
      }
      if (end === -1) break;
      pos = end + 1;
      this.records++;
      this.lastEnd = base + pos;
      if (this.records >= this.chunkRows || this.lastEnd >= this.chunkBytes) {
        out.push(this.cut(pos));
        base = -pos;
      }
    }
    return this.pending - this.lastEnd > 2 * MAX_RECORD_BYTES + 16;
  }

  /** Emits the pending bytes up to `pos` in the last piece as one chunk. */
  private cut(pos: number): RawChunk {
    const last = this.pieces[this.pieces.length - 1]!;
    const size = this.pending - (last.length - pos);
    // A fresh, unpooled buffer: the pool transfers it to a worker thread.
    const bytes = Buffer.allocUnsafeSlow(size);
    let at = 0;
    for (let i = 0; i < this.pieces.length; i++) {
      const p = this.pieces[i]!;
      const from = i === 0 ? this.head : 0;
      const to = i === this.pieces.length - 1 ? pos : p.length;
      p.copy(bytes, at, from, to);
      at += to - from;
    }
    const chunk = { bytes, firstLine: this.line, afterCR: this.afterCR };
    this.line += lineBreaks(bytes, 0, bytes.length, this.afterCR);
    this.afterCR = size > 0 ? bytes[size - 1] === CR : this.afterCR;
    this.pieces = [last];
    this.head = pos;
    this.pending = last.length - pos;
    this.records = 0;
    this.lastEnd = 0;
    return chunk;
  }

  /** The rest, at the end of the input (null if nothing is left). */
  finish(): RawChunk | null {
    if (this.pending === 0) return null;
    const last = this.pieces[this.pieces.length - 1]!;
    return this.cut(last.length);
  }
}


// ---------------------------------------------------------------------------------------------
// The reader

const inline: ChunkParser = { parse: async (task) => parseCsvChunk(task), inFlight: 1 };

const toBuffer = (piece: Uint8Array | string): Buffer =>
  typeof piece === 'string' ? Buffer.from(piece, 'utf8') : Buffer.isBuffer(piece) ? piece : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);

/**
 * Reads a CSV from a stream of bytes (a file stream, a request body) and yields its data rows in
 * chunks, in input order: `{ ok: true, header, rows, … }` per chunk of at most `chunkRows`
 * rows. A problem is yielded as `{ ok: false, code, message, line }` and ends the iteration;
 * chunks yielded before it stay valid, but a caller that must accept all or nothing (a job's
 * intake) waits for the end before committing. At most `inFlight` chunks and one partial record
 * are held at a time, whatever the file's size.
 */
export async function* readCsv(source: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>, opts: ReadCsvOptions): AsyncGenerator<CsvChunk | CsvFailure, void, undefined> {
  const parser = opts.parser ?? inline;
  const chunkRows = Math.max(1, opts.chunkRows ?? 1_000);
  const chunkBytes = Math.max(1, opts.chunkBytes ?? 1_048_576);
  const maxInFlight = Math.max(1, parser.inFlight);
  let preamble: Buffer[] | null = [];
  let preambleBytes = 0;
  let layout: Layout | undefined;
  let splitter: Splitter | undefined;
  let rows = 0;
  const queue: Array<{ task: ParseTask; result: Promise<ParseResult> | null }> = [];
  const raw: RawChunk[] = [];

  const submit = () => {
    for (const c of raw) {
      const task: ParseTask = { bytes: c.bytes, delimiter: layout!.delimiter, lineEnd: layout!.lineEnd, firstLine: c.firstLine, afterCR: c.afterCR, width: layout!.header.length };
      // Inline parsing waits until the chunk is taken (one chunk of rows alive at a time); a pool starts at once.
      let result: Promise<ParseResult> | null = null;
      if (parser !== inline) {
        result = parser.parse(task);
        result.catch(() => {}); // awaited in order below; this only stops an early return from leaving it unhandled
      }
      queue.push({ task, result });
    }
    raw.length = 0;
  };

  /** The next chunk's rows, or a failure. */
  const take = async (): Promise<CsvChunk | CsvFailure | null> => {
    const next = queue.shift()!;
    // Inline, let the event loop run before each chunk: an async generator hands chunks over in
    // microtasks, so without this every chunk cut from one source buffer would parse in one block.
    if (next.result === null) await turnOfTheLoop();
    const res = await (next.result ?? parser.parse(next.task));
    if (!res.ok) return res;
    const l = layout!;
    const out: CsvRow[] = new Array(res.records.length);
    for (let i = 0; i < res.records.length; i++) {
      const fields = res.records[i]!;
      out[i] = { index: rows++, fields, email: fields[l.emailIndex]!.trim() };
    }
    if (opts.maxRows !== undefined && rows > opts.maxRows) return fail('too_many_emails', `the CSV has more than ${opts.maxRows} data rows`);
    if (out.length === 0) return null;
    return { ok: true, header: l.header, emailIndex: l.emailIndex, delimiter: l.delimiter, bom: l.bom, rows: out };
  };

  /**
   * Yields the chunks still queued (they come first in the file, so an error in them comes
   * first), then `last`; at the very end (`last` null), the "no data rows" check.
   */
  async function* drainThen(last: CsvFailure | null): AsyncGenerator<CsvChunk | CsvFailure, void, undefined> {
    while (queue.length > 0) {
      const r = await take();
      if (r === null) continue;
      yield r;
      if (!r.ok) return;
    }
    if (last) yield last;
    else if (rows === 0) yield invalid('the CSV has a header row but no data rows');
  }

  for await (const piece of source) {
    const buf = toBuffer(piece);
    if (preamble !== null) {
      preamble.push(buf);
      preambleBytes += buf.length;
      const all: Buffer = preamble.length === 1 ? preamble[0]! : Buffer.concat(preamble, preambleBytes);
      preamble = [all];
      const pre = readPreamble(all, false, opts.emailColumn);
      if (pre === null) continue;
      if (!pre.ok) return void (yield pre);
      preamble = null;
      layout = pre.layout;
      splitter = new Splitter(layout.lineEnd, layout.nextLine, layout.afterCR, chunkRows, chunkBytes);
      if (splitter.push(pre.rest, raw)) return yield* drainThen(overflowError(splitter, raw, layout));
    } else if (splitter!.push(buf, raw)) {
      return yield* drainThen(overflowError(splitter!, raw, layout!));
    }
    submit();
    while (queue.length >= maxInFlight) {
      const r = await take();
      if (r === null) continue;
      yield r;
      if (!r.ok) return;
    }
  }
  if (preamble !== null) {
    const pre = readPreamble(preamble.length === 1 ? preamble[0]! : Buffer.concat(preamble, preambleBytes), true, opts.emailColumn);
    if (pre === null || !pre.ok) return void (yield pre ?? invalid('the file is empty: a header row naming the columns is required'));
    layout = pre.layout;
    splitter = new Splitter(layout.lineEnd, layout.nextLine, layout.afterCR, chunkRows, chunkBytes);
    if (splitter.push(pre.rest, raw)) return yield* drainThen(overflowError(splitter, raw, layout));
  }
  const rest = splitter!.finish();
  if (rest) raw.push(rest);
  submit();
  yield* drainThen(null);
}

/**
 * An unfinished record grew past the cap (an error path, parsed inline): parsing what is pending
 * names the problem (an unclosed quote, a record too long) and its line; chunks completed before
 * it go first, since their errors are on earlier lines (and the caller yields the chunks already
 * queued before this failure).
 */
function overflowError(splitter: Splitter, raw: RawChunk[], layout: Layout): CsvFailure {
  const rest = splitter.finish();
  const chunks = rest ? [...raw, rest] : [...raw];
  raw.length = 0;
  for (const c of chunks) {
    const r = parseCsvChunk({ bytes: c.bytes, delimiter: layout.delimiter, lineEnd: layout.lineEnd, firstLine: c.firstLine, afterCR: c.afterCR, width: layout.header.length });
    if (!r.ok) return r;
  }
  return invalid(`a record is longer than ${MAX_RECORD_BYTES} bytes (is a quote left open?)`);
}

// ---------------------------------------------------------------------------------------------
// Writing cells back (results CSV: the input columns, then the result columns)

/** One cell as the results CSV writes it (formula cells escaped, RFC 4180 quoting): contracts' formatCell. */
export { formatCell };

/**
 * A row's input cells as one line of the results CSV (comma-delimited, no line end): the same
 * values the user uploaded, whatever their delimiter and quoting were, except that formula cells
 * gain the leading `'` of formatCell.
 */
export function serializeFields(fields: readonly string[]): string {
  let line = '';
  for (let i = 0; i < fields.length; i++) line += (i === 0 ? '' : ',') + formatCell(fields[i]!);
  return line;
}
