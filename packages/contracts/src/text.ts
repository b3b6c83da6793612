// What a string from outside must be before it is stored or used as an id (the edge checks it;
// docs/decisions/jobs-and-csv.md "Strings at the edge"): ids match their pattern, free text fields are
// printable and bounded. An address to validate is neither: it is data, answered `invalid` with
// its reason when it is not an address.

/** A job id as the service makes them: `job_` and 24 lowercase hex digits. */
export const JOB_ID_PATTERN = /^job_[0-9a-f]{24}$/;

export const isJobId = (s: unknown): s is string => typeof s === 'string' && JOB_ID_PATTERN.test(s);

/**
 * Characters a free-text field (a file name, a client name) may not hold: C0 and C1 controls and
 * DEL (NUL, CR/LF, terminal escapes), the bidirectional embeddings, overrides and isolates that
 * make text display in another order than it is stored (U+202A-U+202E, U+2066-U+2069), and lone
 * UTF-16 surrogates (not text at all).
 */
// eslint-disable-next-line no-control-regex
const NOT_PRINTABLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why `s` is not printable text (undefined: it is). */
export function notPrintable(s: string): string | undefined {
  const m = NOT_PRINTABLE.exec(s);
  if (!m) return undefined;
  const c = m[0].charCodeAt(0);
  if (c >= 0xd800 && c <= 0xdfff) return 'it is not valid Unicode text (a lone surrogate)';
  const u = `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;
  return c >= 0x202a ? `it holds a bidirectional control character (${u})` : `it holds a control character (${u})`;
}

/** A URL with its password hidden (messages may be printed to a shared terminal). */
export function hidePassword(raw: string): string {
  let u: URL | undefined;
  try {
    u = new URL(raw);
  } catch {
    // Not a URL: hide what follows the user name up to the last `@` (a password may hold `/`).
    return raw.replace(/\/\/([^:/@]*)(:.*)?@/, (_m, user: string, pw?: string) => `//${user}${pw ? ':***' : ''}@`);
  }
  if (!u.password) return raw;
  // The userinfo ends at the `@` before the host (a password may itself hold `@` or `/`).
  const at = raw.toLowerCase().lastIndexOf(`@${u.host.toLowerCase()}`);
  return at < 0 ? `${u.protocol}//${u.username}:***@${u.host}${u.pathname}` : `${raw.slice(0, raw.indexOf('//') + 2)}${u.username}:***${raw.slice(at)}`;
}
