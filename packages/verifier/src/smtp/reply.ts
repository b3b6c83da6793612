// SMTP reply parsing, apart from any decision. RFC 5321 4.2: a reply is one or more
// lines "NNN-text" ending with a line "NNN text" (or bare "NNN"); RFC 3463 enhanced status codes
// ("5.1.1") may start the text when the server advertises ENHANCEDSTATUSCODES (RFC 2034).
// Cisco Secure Email (IronPort) writes the code with a leading '#': "550 #5.1.0 Address rejected.".
// qmail and its recipient checks (chkuser, validrcptto) put it last, in brackets: "511 sorry, no
// mailbox here by that name (#5.1.1 - chkuser)", "553 sorry, that domain isn't in my list of
// allowed rcpthosts (#5.7.1)": read when the text starts with none (the text is kept as it is).

import { Buffer, isUtf8 } from 'node:buffer';
import type { SmtpReply } from '../types.ts';

const LINE = /^(\d{3})([ -]?)(.*)$/;
const ENHANCED = /^#?([245])\.(\d{1,3})\.(\d{1,3})(?:\s+|$)/;
const QMAIL_ENHANCED = /\(#([245])\.(\d{1,3})\.(\d{1,3})(?:\s[^()]*)?\)\s*$/;

/** Byte cap on a single reply: a hostile or broken server cannot make us buffer without end. */
export const MAX_REPLY_BYTES = 16 * 1024;

export class SmtpProtocolError extends Error {
  constructor(
    message: string,
    readonly detail: string,
  ) {
    super(message);
  }
}

/** Parses the complete lines of one reply. Throws SmtpProtocolError on a malformed reply. */
export function parseReply(lines: readonly string[]): SmtpReply {
  if (lines.length === 0) throw new SmtpProtocolError('empty reply', '');
  let code = 0;
  const texts: string[] = [];
  let enhanced: string | undefined;
  lines.forEach((line, i) => {
    const m = LINE.exec(line);
    if (!m) throw new SmtpProtocolError('malformed reply line', line.slice(0, 200));
    const lineCode = Number(m[1]);
    if (i === 0) code = lineCode;
    else if (lineCode !== code) throw new SmtpProtocolError('reply code changed inside a multi-line reply', line.slice(0, 200));
    const last = i === lines.length - 1;
    if (last === (m[2] === '-')) throw new SmtpProtocolError('multi-line reply continuation out of place', line.slice(0, 200));
    let text = m[3] ?? '';
    const e = ENHANCED.exec(text);
    if (e && e[1] === String(code)[0]) {
      enhanced ??= `${e[1]}.${e[2]}.${e[3]}`;
      text = text.slice(e[0].length);
    }
    texts.push(text);
  });
  if (!enhanced) {
    const q = QMAIL_ENHANCED.exec(texts[texts.length - 1]!);
    if (q && q[1] === String(code)[0]) enhanced = `${q[1]}.${q[2]}.${q[3]}`;
  }
  if (code < 200 || code > 599) throw new SmtpProtocolError('reply code out of range', String(code));
  const reply: SmtpReply = { code, text: texts.join('\n'), lines: [...lines] };
  if (enhanced) reply.enhanced = enhanced;
  return reply;
}

/**
 * Windows-1252's printable characters at 0x80-0x9F, where Latin-1 has C1 controls (0x81, 0x8D,
 * 0x8F, 0x90 and 0x9D are unassigned and stay controls). Node's TextDecoder('windows-1252')
 * decodes this range as Latin-1 does, so it is mapped here.
 */
const CP1252_C1 = '€\u0081‚ƒ„…†‡ˆ‰Š‹Œ\u008dŽ\u008f\u0090‘’“”•–—˜™š›œ\u009džŸ';

/**
 * One reply line from its bytes (without the line ending). RFC 5321 replies are ASCII, RFC 6531
 * allows UTF-8, and real servers also send their own language in Latin-1 or Windows-1252 ("550
 * Benutzer unbekannt" with a single byte for each umlaut). Each line is decoded on its own: as
 * UTF-8 when it is valid UTF-8 (ASCII is), otherwise as Windows-1252, which maps every byte to one
 * character (Latin-1's where they agree), so no reply is dropped or mangled.
 */
export function decodeReplyLine(bytes: Uint8Array): string {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (isUtf8(b)) return b.toString('utf8');
  return b.toString('latin1').replace(/[\u0080-\u009f]/g, (c) => CP1252_C1.charAt(c.charCodeAt(0) - 0x80));
}

/**
 * Incremental reader: feed it raw chunks (bytes off the socket; a string is taken as its UTF-8
 * bytes), get complete replies. Only complete CRLF (or bare LF, which real servers send)
 * terminated lines are considered, and each is decoded once complete (decodeReplyLine), so a
 * character split across chunks is never cut; a reply ends at a line whose fourth character is
 * not '-'. The cap counts bytes.
 */
export class ReplyReader {
  #buffer: Uint8Array = new Uint8Array(0);
  #lines: string[] = [];
  #bytes = 0;

  /** Returns the replies completed by this chunk. Throws SmtpProtocolError when over the cap. */
  push(chunk: Uint8Array | string): SmtpReply[] {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    if (this.#buffer.length === 0) this.#buffer = bytes;
    else if (bytes.length > 0) {
      const joined = new Uint8Array(this.#buffer.length + bytes.length);
      joined.set(this.#buffer);
      joined.set(bytes, this.#buffer.length);
      this.#buffer = joined;
    }
    const out: SmtpReply[] = [];
    let start = 0;
    let nl: number;
    while ((nl = this.#buffer.indexOf(0x0a, start)) >= 0) {
      // Count each reply on its own: several small replies in one chunk are not one long reply.
      this.#bytes += nl + 1 - start;
      if (this.#bytes > MAX_REPLY_BYTES) throw new SmtpProtocolError('reply too long', `${this.#bytes} bytes`);
      const end = nl > start && this.#buffer[nl - 1] === 0x0d ? nl - 1 : nl;
      const line = decodeReplyLine(this.#buffer.subarray(start, end));
      start = nl + 1;
      this.#lines.push(line);
      if (line.charAt(3) !== '-') {
        out.push(parseReply(this.#lines));
        this.#lines = [];
        this.#bytes = 0;
      }
    }
    // Keep only the unterminated rest (a copy, so the caller's chunk is not held on to).
    this.#buffer = start === 0 ? this.#buffer : this.#buffer.slice(start);
    // The unterminated rest counts too: a line that never ends is refused once past the cap.
    const pending = this.#bytes + this.#buffer.length;
    if (pending > MAX_REPLY_BYTES) throw new SmtpProtocolError('reply too long', `${pending} bytes`);
    return out;
  }
}

/** Renders a reply as one line for `smtp_response`: "550 5.1.1 text line one text line two". */
export function formatReply(reply: SmtpReply): string {
  const text = reply.text.split('\n').map((s) => s.trim()).filter(Boolean).join(' ');
  return [String(reply.code), reply.enhanced, text].filter(Boolean).join(' ');
}

/** EHLO keywords (RFC 5321 4.1.1.1): the first line is the greeting, each later line a keyword. */
export function ehloKeywords(reply: SmtpReply): Set<string> {
  const set = new Set<string>();
  reply.text.split('\n').slice(1).forEach((line) => {
    const kw = line.trim().split(/\s+/)[0];
    if (kw) set.add(kw.toUpperCase());
  });
  return set;
}

/**
 * Formats an SMTP command. Refuses CR, LF and NUL anywhere (never write line breaks from user
 * input into a command): the syntax layer already rejects them, this is the second lock.
 */
export function command(verb: string, arg?: string): string {
  const line = arg === undefined ? verb : `${verb}${arg}`;
  if (/[\r\n\0]/.test(line)) throw new SmtpProtocolError('refusing to send a command with a line break', verb);
  return `${line}\r\n`;
}
