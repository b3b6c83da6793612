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
