// Reading the address files `svc bulk` takes: one address per line, or a CSV with a header row
// (RFC 4180 quoting; `,` `;` or tab, guessed from the header as the service does). Only what
// the command needs: the addresses of one column, in order.

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
