// SMTP reply parsing, apart from any decision. RFC 5321 4.2: a reply is one or more
// lines "NNN-text" ending with a line "NNN text" (or bare "NNN"); RFC 3463 enhanced status codes
// ("5.1.1") may start the text when the server advertises ENHANCEDSTATUSCODES (RFC 2034).

import type { SmtpReply } from '../types.ts';

const LINE = /^(\d{3})([ -]?)(.*)$/;
const ENHANCED = /^([245])\.(\d{1,3})\.(\d{1,3})(?:\s+|$)/;

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
  if (code < 200 || code > 599) throw new SmtpProtocolError('reply code out of range', String(code));
  const reply: SmtpReply = { code, text: texts.join('\n'), lines: [...lines] };
  if (enhanced) reply.enhanced = enhanced;
  return reply;
}

/**
 * Incremental reader: feed it raw chunks, get complete replies. Only complete CRLF (or bare LF,
 * which real servers send) terminated lines are considered; a reply ends at a line whose fourth
 * character is not '-'.
 */
export class ReplyReader {
  #buffer = '';
  #lines: string[] = [];
  #bytes = 0;

  /** Returns the replies completed by this chunk. Throws SmtpProtocolError when over the cap. */
  push(chunk: string): SmtpReply[] {
    this.#buffer += chunk;
    const out: SmtpReply[] = [];
    let nl: number;
    while ((nl = this.#buffer.indexOf('\n')) >= 0) {
      // Count each reply on its own: several small replies in one chunk are not one long reply.
      this.#bytes += nl + 1;
      if (this.#bytes > MAX_REPLY_BYTES) throw new SmtpProtocolError('reply too long', `${this.#bytes} bytes`);
      const line = this.#buffer.slice(0, nl).replace(/\r$/, '');
      this.#buffer = this.#buffer.slice(nl + 1);
      this.#lines.push(line);
      if (line.charAt(3) !== '-') {
        out.push(parseReply(this.#lines));
        this.#lines = [];
        this.#bytes = 0;
      }
    }
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
