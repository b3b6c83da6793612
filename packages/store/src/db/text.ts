// Text as the database takes it. PostgreSQL (and PGlite) refuse U+0000 in a text value, and in
// jsonb the escapes \u0000 and a lone surrogate's \ud800 ("invalid byte sequence", "unsupported
// Unicode escape sequence", "invalid input syntax for type json"), so such a character that
// reaches a write, inside an address a job received or a reply a mail server sent, would fail the
// write every time it is retried. Strings that are data (not ids, which the edge checks by
// pattern) pass through these on their way in: a NUL or a lone surrogate becomes U+FFFD, the
// replacement character (as the driver's UTF-8 encoding makes of a lone surrogate in text anyway).

const NUL = /\u0000/g;
/** A UTF-16 surrogate not in a pair. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `s` with every NUL and lone surrogate replaced by U+FFFD. */
export function dbText(s: string): string {
  const out = s.includes('\u0000') ? s.replace(NUL, '\uFFFD') : s;
  // (No `u` flag: the expression looks at UTF-16 code units, where a lone surrogate is one.)
  return out.replace(LONE_SURROGATE, '\uFFFD');
}

/** JSON writes a NUL as `\u0000` and a lone surrogate as `\udXXX`: text without either needs no cleaning. */
const ESCAPE_TO_CLEAN = /\\u(?:0000|d[89a-f])/i;

/**
 * JSON text of `value` for a json/jsonb column: every string in it passed through dbText. The
 * plain serialisation first (a job's every row comes here); the replacer only when its text holds
 * an escape that may be one (a literal backslash-u in a string also matches: harmless).
 */
export function dbJson(value: unknown): string {
  const plain = JSON.stringify(value);
  return plain !== undefined && ESCAPE_TO_CLEAN.test(plain) ? JSON.stringify(value, (_k, v: unknown) => (typeof v === 'string' ? dbText(v) : v)) : plain;
}

/** JSON text of one string, passed through dbText (dbJson of a string, without the general walk). */
export function dbJsonString(s: string): string {
  const plain = JSON.stringify(s);
  // Only its quotes added: nothing was escaped, so nothing needs cleaning (nearly every text).
  return plain.length === s.length + 2 || !ESCAPE_TO_CLEAN.test(plain) ? plain : JSON.stringify(dbText(s));
}

/** What COPY's text format escapes in a value: the backslash, and the row and column separators. */
const COPY_SPECIAL = /[\\\n\r\t]/g;
/** The same, tested first: nearly no value holds one, and a test is a third of a replace's cost. */
const HAS_COPY_SPECIAL = /[\\\n\r\t]/;
const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * Rows in COPY's text format (PostgreSQL's "COPY ... FROM" with the default options): columns
 * separated by a tab, rows ended by a newline, NULL as `\N`, and a backslash, tab, newline or
 * carriage return inside a value escaped. Strings should have passed dbText (COPY refuses a NUL
 * as INSERT does).
 */
export function copyText(rows: ReadonlyArray<ReadonlyArray<string | number | null>>): string {
  let out = '';
  for (const row of rows) {
    for (let i = 0; i < row.length; i++) {
      const v = row[i];
      if (i > 0) out += '\t';
      if (v === null || v === undefined) out += '\\N';
      else if (typeof v === 'number') out += String(v);
      else out += HAS_COPY_SPECIAL.test(v) ? v.replace(COPY_SPECIAL, (c) => COPY_ESCAPES[c]!) : v;
    }
    out += '\n';
  }
  return out;
}
