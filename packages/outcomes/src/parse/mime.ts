// Finding the machine-readable part of a bounce: an RFC 6522 multipart/report holding an RFC 3464
// message/delivery-status part (or RFC 6533's message/global-delivery-status), at any depth of
// multipart nesting (multipart/report, multipart/mixed and other wrappers). Pure; never throws;
// bounded work: nesting depth and parts per multipart are capped, no pattern here backtracks
// (every regular expression is linear in its input), and a level only reads its own substring.
//
// Decisions:
// - Lines end at CRLF, LF or a bare CR (stored and classic-Mac messages are read too); the
//   parts keep their line breaks as they are, for the DSN parser to judge (it refuses bad folding).
// - Headers are unfolded (a line starting with SP or HTAB continues the one before); names are
//   case-insensitive; the first occurrence of a header wins.
// - A part whose text starts with a blank line has no headers (RFC 2046 5.1.1: text/plain).
// - Content-Type parameters may be quoted (with backslash escapes) or tokens; a `;` inside a quoted
//   value is part of the value.
// - A delimiter line is `--boundary` (or `--boundary--` to close) with optional trailing SP/HTAB;
//   the line break before it belongs to it (RFC 2046 5.1.1). A multipart with no closing
//   delimiter ends at the end of the text.
// - Parts are not looked for inside message/rfc822 or text/rfc822-headers parts: those hold the
//   returned original message, whose own reports (a bounce of a bounce) are not this bounce's.
// - Content-Transfer-Encoding base64 and quoted-printable are decoded (bytes read as UTF-8);
//   7bit, 8bit, binary and anything else leave the body as it is, line breaks untouched.

const MAX_DEPTH = 8;
const MAX_PARTS = 200;
const MAX_BOUNDARY = 200;

interface Part {
  headers: Map<string, string>;
  body: string;
}

/**
 * Walks the lines of a text: CRLF, LF and a bare CR each end a line (the MIME structure is read
 * whatever the line breaks; the parts keep theirs, and the DSN parser judges them). Linear: the
 * next CR and LF positions are cached while the walk moves forward.
 */
class Lines {
  private cr = -2;
  private lf = -2;
  constructor(private readonly text: string) {}
  /** The line starting at `pos`: where its content ends and where the next line starts. */
  at(pos: number): { end: number; next: number } {
    const t = this.text;
    if (this.cr !== -1 && this.cr < pos) this.cr = t.indexOf('\r', pos);
    if (this.lf !== -1 && this.lf < pos) this.lf = t.indexOf('\n', pos);
    const cr = this.cr;
    const lf = this.lf;
    if (cr < 0 && lf < 0) return { end: t.length, next: t.length };
    if (cr >= 0 && (lf < 0 || cr < lf)) return { end: cr, next: lf === cr + 1 ? cr + 2 : cr + 1 };
    return { end: lf, next: lf + 1 };
  }
}

/** Splits an entity into its unfolded headers (lower-case names; first value kept) and its body, at the first empty line. Line breaks of the body are kept as they are. */
function entity(text: string): Part {
  const headers = new Map<string, string>();
  const lines = new Lines(text);
  let last: string | undefined;
  let pos = 0;
  while (pos < text.length) {
    const { end, next } = lines.at(pos);
    if (end === pos) return { headers, body: text.slice(next) }; // the empty line: a part that starts with one has no headers
    const line = text.slice(pos, end);
    pos = next;
    if ((line.startsWith(' ') || line.startsWith('\t')) && last !== undefined) {
      headers.set(last, `${headers.get(last)} ${line.trim()}`);
      continue;
    }
    const c = line.indexOf(':');
    const name = c > 0 ? line.slice(0, c).trim().toLowerCase() : '';
    if (name === '' || !/^[!-9;-~]+$/.test(name) || headers.has(name)) {
      last = undefined;
      continue;
    }
    headers.set(name, line.slice(c + 1).trim());
    last = name;
  }
  return { headers, body: '' };
}

/** The media type (lower case) and the parameters (lower-case names) of a Content-Type value. Quoted values may hold `;` and backslash escapes. */
export function contentType(v: string | undefined): { type: string; params: Map<string, string> } {
  const params = new Map<string, string>();
  if (!v) return { type: 'text/plain', params };
  // Split on `;` outside quoted strings.
  const pieces: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < v.length; i++) {
    const ch = v.charCodeAt(i);
    if (quoted && ch === 92 /* \\ */) i++;
    else if (ch === 34 /* " */) quoted = !quoted;
    else if (ch === 59 /* ; */ && !quoted) {
      pieces.push(v.slice(start, i));
      start = i + 1;
    }
  }
  pieces.push(v.slice(start));
  const [type = '', ...rest] = pieces;
  for (const p of rest) {
    const eq = p.indexOf('=');
    if (eq <= 0) continue;
    const name = p.slice(0, eq).trim().toLowerCase();
    let val = p.slice(eq + 1).trim();
    if (val.startsWith('"')) {
      const chunks: string[] = [];
      let from = 1;
      let i = 1;
      for (; i < val.length; i++) {
        const ch = val.charCodeAt(i);
        if (ch === 92 /* \\ */ && i + 1 < val.length) {
          chunks.push(val.slice(from, i));
          from = i + 1;
          i++;
        } else if (ch === 34 /* " */) break;
      }
      chunks.push(val.slice(from, i));
      val = chunks.join('');
    } else {
      const sp = val.search(/[ \t(]/);
      if (sp >= 0) val = val.slice(0, sp);
    }
    if (name && !params.has(name)) params.set(name, val);
  }
  return { type: type.trim().toLowerCase(), params };
}

/** The line without trailing SP/HTAB (no regular expression: a long run of blanks must not cost quadratic time). */
function trimBlanks(line: string): string {
  let end = line.length;
  while (end > 0 && (line.charCodeAt(end - 1) === 32 || line.charCodeAt(end - 1) === 9)) end--;
  return line.slice(0, end);
}

/** The parts of a multipart body, by its boundary (the preamble and epilogue dropped). */
function parts(body: string, boundary: string): string[] {
  const out: string[] = [];
  const delim = `--${boundary}`;
  const lines = new Lines(body);
  let current: number | undefined; // start index of the current part
  let pos = 0;
  while (pos < body.length) {
    const { end, next } = lines.at(pos);
    // Only lines that start with the delimiter are looked at closely.
    if (body.startsWith(delim, pos)) {
      const bare = trimBlanks(body.slice(pos, end));
      if (bare === delim || bare === `${delim}--`) {
        if (current !== undefined) {
          // The line break before a delimiter belongs to the delimiter (RFC 2046 5.1.1).
          let stop = pos;
          if (stop > current && body.charCodeAt(stop - 1) === 10) stop--;
          if (stop > current && body.charCodeAt(stop - 1) === 13) stop--;
          out.push(body.slice(current, stop));
          if (out.length >= MAX_PARTS) return out;
        }
        if (bare.length > delim.length) return out;
        current = next;
      }
    }
    pos = next;
  }
  if (current !== undefined && current < body.length) out.push(body.slice(current));
  return out;
}

function qpDecode(body: string): string {
  const bytes: number[] = [];
  const hex = (c: number) => (c >= 48 && c <= 57 ? c - 48 : c >= 65 && c <= 70 ? c - 55 : c >= 97 && c <= 102 ? c - 87 : -1);
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    if (c === 61 /* = */) {
      // Soft line break: `=` then optional blanks then CRLF or LF.
      let j = i + 1;
      while (j < body.length && (body.charCodeAt(j) === 32 || body.charCodeAt(j) === 9)) j++;
      if (body.charCodeAt(j) === 13 && body.charCodeAt(j + 1) === 10) {
        i = j + 1;
        continue;
      }
      if (body.charCodeAt(j) === 10) {
        i = j;
        continue;
      }
      const h = hex(body.charCodeAt(i + 1));
      const l = hex(body.charCodeAt(i + 2));
      if (h >= 0 && l >= 0) {
        bytes.push(h * 16 + l);
        i += 2;
        continue;
      }
      bytes.push(c);
    } else if (c < 128) bytes.push(c);
    else for (const b of Buffer.from(body[i]!, 'utf8')) bytes.push(b);
  }
  return Buffer.from(bytes).toString('utf8');
}

function decode(body: string, cte: string | undefined): string {
  const raw = cte ?? '';
  const paren = raw.indexOf('(');
  const enc = (paren >= 0 ? raw.slice(0, paren) : raw).trim().toLowerCase();
  if (enc === 'base64') return Buffer.from(body.replace(/[^A-Za-z0-9+/]/g, ''), 'base64').toString('utf8');
  if (enc === 'quoted-printable') return qpDecode(body);
  return body;
}

function find(text: string, depth: number, want: (type: string) => boolean): Part | undefined {
  if (depth > MAX_DEPTH) return undefined;
  const e = entity(text);
  const ct = contentType(e.headers.get('content-type'));
  if (want(ct.type)) return { headers: e.headers, body: decode(e.body, e.headers.get('content-transfer-encoding')) };
  if (ct.type.startsWith('multipart/')) {
    const boundary = ct.params.get('boundary');
    if (!boundary || boundary.length > MAX_BOUNDARY) return undefined;
    for (const p of parts(e.body, boundary)) {
      const found = find(p, depth + 1, want);
      if (found) return found;
    }
  }
  return undefined;
}

const isDeliveryStatus = (t: string): boolean => t === 'message/delivery-status' || t === 'message/global-delivery-status';

/**
 * When `text` is a whole MIME message (headers, then a body) holding a message/delivery-status
 * part (at any depth of multipart nesting), returns that part's body as it is in the message
 * (decoded when base64 or quoted-printable; line breaks untouched: the DSN parser checks them).
 * Otherwise null. Never throws.
 */
export function deliveryStatusOf(text: string): string | null {
  try {
    if (typeof text !== 'string') return null;
    const e = entity(text);
    if (!e.headers.has('content-type')) return null;
    return find(text, 0, isDeliveryStatus)?.body ?? null;
  } catch {
    return null;
  }
}

/**
 * The first text/plain part of a message (decoded like the delivery-status part), or the whole
 * body of a message that is not multipart (qmail's and others' plain-text bounces): the human
 * readable text a legacy diagnostic can be taken from. '' when there is none. Never throws.
 */
export function textPartOf(text: string): string {
  try {
    if (typeof text !== 'string') return '';
    const e = entity(text);
    const ct = contentType(e.headers.get('content-type'));
    if (!ct.type.startsWith('multipart/')) return ct.type.startsWith('text/') ? decode(e.body, e.headers.get('content-transfer-encoding')) : '';
    return find(text, 0, (t) => t === 'text/plain')?.body ?? '';
  } catch {
    return '';
  }
}
