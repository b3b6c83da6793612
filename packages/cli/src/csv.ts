// Reading the address files `svc bulk` takes: one address per line, or a CSV with a header row
// (RFC 4180 quoting; `,` `;` or tab, guessed from the header as the service does). Only what
// the command needs: the addresses of one column, in order. And the tables `svc find` and
// `svc enrich` read and write back with columns added: written as the service writes a job's
// results (comma, CRLF, RFC 4180 quoting, a formula cell behind a `'`, a BOM when the input had
// one), so both kinds of results open the same way in a spreadsheet.

/** Splits CSV text into rows of cells (RFC 4180: quoted fields may hold the delimiter, quotes and line breaks). */
export function parseCsv(text: string, delimiter: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  for (; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i++;
        } else quoted = false;
      } else cell += c;
    } else if (c === '"' && cell === '') quoted = true;
    else if (c === delimiter) {
      row.push(cell);
      cell = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += c;
  }
  if (quoted) throw new Error('the CSV ends inside a quoted field');
  if (cell !== '' || row.length > 0) {
    row.push(cell);
    rows.push(row);
  }
  // Blank lines are not rows.
  return rows.filter((r) => !(r.length === 1 && r[0] === ''));
}

/** The delimiter of a CSV: whichever of `,` `;` tab appears most in the first line outside quotes. */
export function guessDelimiter(text: string): string {
  const end = text.search(/\r?\n/);
  const first = (end < 0 ? text : text.slice(0, end)).replace(/"[^"]*"/g, '');
  const counts = [',', ';', '\t'].map((d) => [d, first.split(d).length - 1] as const);
  const best = counts.reduce((a, b) => (b[1] > a[1] ? b : a));
  return best[1] > 0 ? best[0] : ',';
}

const EMAIL_HEADER = /^\s*e-?mail(\s*address)?\s*$/i;

/**
 * The addresses of an address file. With `column`, the file is a CSV and that header names the
 * column (exactly, else ignoring case and surrounding spaces). Without it, a first line that is a
 * header with an `email` column makes it a CSV; otherwise every non-blank line is one address.
 */
export function addressesOf(text: string, column?: string): string[] {
  const delimiter = guessDelimiter(text);
  const firstLine = text.replace(/^\uFEFF/, '').split(/\r?\n/, 1)[0] ?? '';
  const header = parseCsv(firstLine, delimiter)[0] ?? [];
  let index = -1;
  if (column !== undefined) {
    index = header.indexOf(column);
    if (index < 0) index = header.findIndex((h) => h.trim().toLowerCase() === column.trim().toLowerCase());
    if (index < 0) throw new Error(`no column ${JSON.stringify(column)} in the header (${header.map((h) => JSON.stringify(h)).join(', ')})`);
  } else if (!firstLine.includes('@')) index = header.findIndex((h) => EMAIL_HEADER.test(h));
  if (index < 0) {
    return text
      .replace(/^\uFEFF/, '')
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l !== '');
  }
  return parseCsv(text, delimiter)
    .slice(1)
    .map((r) => (r[index] ?? '').trim());
}

/** A CSV file read as a table: its header, and its data rows, each exactly as wide as the header. */
export interface Table {
  header: string[];
  rows: string[][];
  /** Whether the file started with a UTF-8 BOM (written back when it did). */
  bom: boolean;
}

/**
 * The table of a CSV text (the delimiter guessed from the header). A short row is padded with
 * empty cells; a long one loses its extra cells only when they are empty (a spreadsheet's
 * trailing commas), otherwise it is an error: its cells would land under the wrong names.
 */
export function readTable(text: string): Table {
  const bom = text.charCodeAt(0) === 0xfeff;
  const [header, ...rows] = parseCsv(text, guessDelimiter(text.replace(/^\uFEFF/, '')));
  if (!header) throw new Error('the file is empty (a header row is needed)');
  const width = header.length;
  return {
    header,
    bom,
    rows: rows.map((row, i) => {
      if (row.length > width && row.slice(width).some((c) => c.trim() !== '')) throw new Error(`row ${i + 1} has ${row.length} cells, the header ${width}`);
      return row.length >= width ? row.slice(0, width) : [...row, ...Array<string>(width - row.length).fill('')];
    }),
  };
}

/** The column named `name`: exactly, else ignoring case and surrounding spaces. */
export function columnIndex(header: readonly string[], name: string): number | undefined {
  const exact = header.indexOf(name);
  if (exact >= 0) return exact;
  const loose = header.findIndex((h) => h.trim().toLowerCase() === name.trim().toLowerCase());
  return loose >= 0 ? loose : undefined;
}

const squash = (s: string): string => s.toLowerCase().replace(/[\s_.-]+/g, '');

/**
 * The first column whose name is one of `aliases` once case, spaces, `_`, `-` and `.` are
 * ignored (`First Name`, `first_name` and `firstname` are one name); the aliases are tried in
 * order, so the first one the header has wins.
 */
export function guessColumn(header: readonly string[], aliases: readonly string[]): number | undefined {
  const names = header.map(squash);
  for (const alias of aliases) {
    const i = names.indexOf(squash(alias));
    if (i >= 0) return i;
  }
  return undefined;
}

export type Cell = string | number | boolean | null | undefined;

/**
 * One cell as a results CSV writes it: nothing for null; a string starting with `=`, `+`, `-`,
 * `@`, tab or CR behind a `'` (a spreadsheet would run it as a formula); quoted when it holds a
 * comma, a quote, CR or LF (quotes doubled). Numbers and booleans as they print.
 */
export function csvCell(value: Cell): string {
  if (value === null || value === undefined) return '';
  if (typeof value !== 'string') return String(value);
  const s = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** Lines (each ending CRLF) of cells, comma-delimited; a UTF-8 BOM first when `bom`. */
export function formatCsv(lines: ReadonlyArray<readonly Cell[]>, bom = false): string {
  return (bom ? '\uFEFF' : '') + lines.map((cells) => `${cells.map(csvCell).join(',')}\r\n`).join('');
}
