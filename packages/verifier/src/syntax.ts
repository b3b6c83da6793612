// Syntax layer: RFC 5321/5322 addr-spec as real mailbox providers accept it, plus RFC 6531
// (UTF-8 local parts) and IDNA domains. Pure: no I/O, no network.

import { domainToASCII } from 'node:url';
import type { ParsedAddress } from './types.ts';

const MAX_LOCAL_OCTETS = 64;
const MAX_ADDRESS_OCTETS = 254;
const MAX_DOMAIN_OCTETS = 253;
const MAX_LABEL_OCTETS = 63;
/** Inputs longer than this (UTF-16 units) are rejected before any IDNA work. */
const MAX_INPUT_CHARS = 1024;

/** RFC 5322 atext (ASCII part). */
const ATEXT = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]$/;
/** ASCII control characters (C0 and DEL). CR, LF, NUL and TAB are all in here. */
const ASCII_CONTROL = /[\u0000-\u001f\u007f]/;
/**
 * Non-ASCII code points never accepted in an address: C1 controls, lone surrogates (not
 * encodable as UTF-8), Unicode separators (NBSP, ideographic space, line/paragraph separators)
 * and invisible format characters (BOM, zero-width space, bidi controls). ZWNJ/ZWJ (U+200C,
 * U+200D) are kept: some scripts need them.
 */
const BAD_UNICODE = /[\p{Cc}\p{Cs}\p{Z}]|(?![\u200c\u200d])\p{Cf}/u;

const fail = (reason: string): ParsedAddress => ({ ok: false, reason });

/** Length in UTF-8 octets. Lone surrogates never reach this point (rejected as BAD_UNICODE). */
export function utf8Length(s: string): number {
  let n = 0;
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0;
    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return n;
}

const isAscii = (s: string): boolean => /^[\u0000-\u007f]*$/.test(s);

/**
 * Splits a quoted local part off the front of `input` (which starts with a DQUOTE).
 * Returns the index of the closing DQUOTE, or a failure reason.
 */
function scanQuoted(input: string): number | string {
  for (let i = 1; i < input.length; i++) {
    const c = input[i];
    if (c === '\\') {
      i++; // the escaped character is validated later
      continue;
    }
    if (c === '"') return i;
  }
  return 'Unterminated quoted local part';
}

function checkQuotedLocal(local: string): string | undefined {
  const inner = local.slice(1, -1);
  if (inner.length === 0) return 'Empty quoted local part';
  for (let i = 0; i < inner.length; i++) {
    const c = inner[i] as string;
    if (c === '\\') {
      const next = inner[i + 1];
      // quoted-pair = "\" (VCHAR / SP); controls were rejected already.
      if (next === undefined || !/^[\u0020-\u007e]$/.test(next)) return 'Invalid escape in quoted local part';
      i++;
      continue;
    }
    if (c === '"') return 'Unescaped quote in quoted local part';
  }
  return undefined;
}

/** The canonical form of a valid quoted local part: a dot-atom when it can be one, else minimally quoted. */
function canonicalQuoted(local: string): string {
  const inner = local.slice(1, -1).replace(/\\(.)/g, '$1');
  if (checkDotAtomLocal(inner) === undefined) return inner;
  return `"${inner.replace(/["\\]/g, '\\$&')}"`;
}

function checkDotAtomLocal(local: string): string | undefined {
  if (local.startsWith('.')) return 'Local part starts with a dot';
  if (local.endsWith('.')) return 'Local part ends with a dot';
  if (local.includes('..')) return 'Consecutive dots in local part';
  for (const ch of local) {
    if (ch === '.') continue;
    const cp = ch.codePointAt(0) ?? 0;
    if (cp >= 0x80) continue; // RFC 6531 UTF8-non-ascii (bad code points rejected earlier)
    if (ch === ' ') return 'Space in local part';
    if (!ATEXT.test(ch)) return 'Invalid character in local part';
  }
  return undefined;
}

function checkAsciiDomain(ascii: string): string | undefined {
  if (ascii.endsWith('.')) return 'Domain ends with a dot';
  if (ascii.length > MAX_DOMAIN_OCTETS) return 'Domain is longer than 253 octets';
  const labels = ascii.split('.');
  if (labels.length < 2) return 'Domain must have at least two labels';
  for (const label of labels) {
    if (label.length === 0) return 'Invalid domain';
    if (label.length > MAX_LABEL_OCTETS) return 'Domain label is longer than 63 octets';
    if (!/^[a-z0-9-]+$/.test(label)) return 'Invalid character in domain';
    if (label.startsWith('-') || label.endsWith('-')) return 'Domain label starts or ends with a hyphen';
  }
  const tld = labels[labels.length - 1] as string;
  if (/^[0-9]+$/.test(tld)) return 'Top-level domain is numeric';
  if (tld.length < 2) return 'Top-level domain is too short';
  return undefined;
}

/** Parses an already-trimmed address. Never throws. */
export function parseAddress(input: string): ParsedAddress {
  if (input.length === 0) return fail('Empty address');
  if (input.length > MAX_INPUT_CHARS) return fail('Address is longer than 254 octets');
  if (ASCII_CONTROL.test(input)) return fail('Control characters are not allowed');
  if (BAD_UNICODE.test(input.replace(/ /g, ''))) return fail('Invalid character in address');

  // --- split on the last @ outside a quoted local part -------------------------------------
  let local: string;
  let domain: string;
  let quoted = false;
  if (input.startsWith('"')) {
    const close = scanQuoted(input);
    if (typeof close === 'string') return fail(close);
    if (close + 1 >= input.length) return fail('Missing @');
    if (input[close + 1] !== '@') return fail('Invalid character after quoted local part');
    local = input.slice(0, close + 1);
    domain = input.slice(close + 2);
    quoted = true;
    if (domain.includes('@')) return fail('More than one @');
  } else {
    const at = input.lastIndexOf('@');
    if (at === -1) return fail('Missing @');
    if (input.indexOf('@') !== at) return fail('More than one @');
    local = input.slice(0, at);
    domain = input.slice(at + 1);
  }
  if (local.length === 0) return fail('Empty local part');
  if (domain.length === 0) return fail('Empty domain');

  // --- local part ---------------------------------------------------------------------------
  const localError = quoted ? checkQuotedLocal(local) : checkDotAtomLocal(local);
  if (localError !== undefined) return fail(localError);
  if (quoted) {
    // One mailbox, one spelling (RFC 5321 4.1.2: a quoted string that can be a dot-string is sent
    // as one): "jane.doe" and "ja\ne.doe" are jane.doe; a string that needs its quotes keeps them,
    // with only DQUOTE and backslash escaped. Dedupe, the cache, charging and RCPT use this form.
    local = canonicalQuoted(local);
    quoted = local.startsWith('"');
  }
  const localOctets = utf8Length(local);
  if (localOctets > MAX_LOCAL_OCTETS) return fail('Local part is longer than 64 octets');
  const utf8Local = !isAscii(local);

  // --- domain -------------------------------------------------------------------------------
  if (domain.startsWith('[')) return fail('Domain literals are not accepted');
  // IDNA treats the ideographic and full-width full stops as label separators: spell them '.'.
  const lowered = domain.toLowerCase().normalize('NFC').replace(/[\u3002\uff0e\uff61]/g, '.');
  if (lowered.endsWith('.')) return fail('Domain ends with a dot');
  if (lowered.startsWith('.')) return fail('Domain starts with a dot');
  if (lowered.includes('..')) return fail('Consecutive dots in domain');
  // Only letters, digits, hyphens and dots in ASCII; anything else (_, %, /, :, space, <, >…)
  // would be silently rewritten or accepted by the WHATWG host parser behind domainToASCII.
  if (/[\u0000-\u007f]/.test(lowered.replace(/[a-z0-9.-]/g, ''))) return fail('Invalid character in domain');
  // The WHATWG host parser behind domainToASCII reads a numeric last label as an IPv4 address.
  if (/(^|\.)[0-9]+$/.test(lowered)) return fail('Top-level domain is numeric');
  const idn = !isAscii(lowered);
  const ascii = domainToASCII(lowered).toLowerCase();
  if (ascii === '') return fail('Invalid domain');
  const domainError = checkAsciiDomain(ascii);
  if (domainError !== undefined) return fail(domainError);

  // --- whole address ------------------------------------------------------------------------
  if (localOctets + 1 + ascii.length > MAX_ADDRESS_OCTETS) return fail('Address is longer than 254 octets');

  return { ok: true, local, domain: lowered, asciiDomain: ascii, quoted, utf8Local, idn };
}
