// Strings the service sends (job file names, messages, SMTP replies, codes, ids) reach a person's
// terminal only through `printable`: a C0 or C1 control (ESC starts the terminal's escape
// sequences; CR and LF fake or overwrite lines), DEL, a bidi control or mark (U+061C, U+200E/F,
// U+202A-U+202E, U+2066-U+2069: they reorder what follows), a line or paragraph separator
// (U+2028/9) or a lone surrogate is shown as a JSON-style escape (\n, \r, \t, \u001b, \u202e),
// so what the server sent is visible and nothing in it acts on the terminal. Everything else
// (any printable Unicode, backslashes included) is shown as is. --json output is JSON.stringify's,
// exact, and does not go through here.

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
/** The same, but line breaks (LF, CRLF) and tabs pass: for text that is made of lines (a CSV on a terminal). */
const UNSAFE_IN_LINES = /\r(?!\n)|[\u0000-\u0008\u000b-\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const SHORT: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const escape = (c: string): string => SHORT[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** `s` with every character that could act on a terminal escaped (see above). */
export function printable(s: string | number | null | undefined): string {
  return String(s ?? '').replace(UNSAFE, escape);
}

/** Like printable, but keeps LF, CRLF and tabs: many lines of text. */
export function printableLines(s: string): string {
  return s.replace(UNSAFE_IN_LINES, escape);
}
