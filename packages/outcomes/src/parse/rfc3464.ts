// RFC 3464 delivery-status fields: the field block of a message/delivery-status body split into
// its per-message and per-recipient groups, header folding checked, comments removed, and the
// typed values (address, MTA, status, diagnostic) parsed. Pure; never throws: problems come back as values.

/** Why structured evidence was refused (the parser maps these to row error codes). */
export type DsnProblem = { kind: 'folding'; reason: string } | { kind: 'comment'; reason: string };

export type FieldGroup = Map<string, string>;

/**
 * Splits a delivery-status body into field groups (blank-line separated), unfolding header
 * continuations (rule 4: only CRLF followed by SP or HTAB; each fold becomes one space). A bare LF
 * or CR, or an unindented line that is not a field, refuses the whole text. Field names are
 * lower-cased; a field repeated in one group keeps its first value.
 */
export function fieldGroups(text: string): { groups: FieldGroup[] } | { problem: DsnProblem } {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 && text.charCodeAt(i - 1) !== 13) return { problem: { kind: 'folding', reason: 'The DSN has a bare LF line break (only CRLF is allowed)' } };
    if (c === 13 && text.charCodeAt(i + 1) !== 10) return { problem: { kind: 'folding', reason: 'The DSN has a bare CR' } };
  }
  const groups: FieldGroup[] = [];
  let group: FieldGroup | undefined;
  let last: string | undefined;
  for (const line of text.split('\r\n')) {
    if (line.trim() === '') {
      group = undefined;
      last = undefined;
      continue;
    }
    if (line[0] === ' ' || line[0] === '\t') {
      if (!group || last === undefined) return { problem: { kind: 'folding', reason: 'The DSN has a continuation line without a field before it' } };
      group.set(last, `${group.get(last)} ${line.trim()}`.trim());
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon).trim().toLowerCase() : '';
    if (!/^[\x21-\x39\x3b-\x7e]+$/.test(name)) return { problem: { kind: 'folding', reason: 'The DSN has an unindented line that is not a field (a broken fold)' } };
    if (!group) {
      group = new Map();
      groups.push(group);
    }
    if (!group.has(name)) {
      group.set(name, line.slice(colon + 1).trim());
      last = name;
    } else last = undefined; // a repeated field's continuation lines are dropped with it
  }
  return { groups };
}

/**
 * Removes RFC 5322 comments (balanced parentheses, nested, `\` quoting the next character) and
 * collapses the white space left behind. Quoted strings are kept as they are. undefined when a
 * comment is malformed (unbalanced).
 */
export function stripComments(v: string): string | undefined {
  let out = '';
  let depth = 0;
  let quoted = false;
  for (let i = 0; i < v.length; i++) {
    const c = v[i]!;
    if (c === '\\' && (depth > 0 || quoted)) {
      if (depth === 0) out += v.slice(i, i + 2);
      i++;
      continue;
    }
    if (depth === 0 && c === '"') quoted = !quoted;
    if (!quoted && c === '(') {
      depth++;
      continue;
    }
    if (!quoted && c === ')') {
      if (depth === 0) return undefined;
      depth--;
      if (depth === 0) out += ' ';
      continue;
    }
    if (depth === 0) out += c;
  }
  if (depth !== 0 || quoted) return undefined;
  return out.replace(/\s+/g, ' ').trim();
}

/** `type; value` (address-type, MTA-name-type, diagnostic-type): the type lower-cased, the rest trimmed. */
export function typed(v: string): { type: string; value: string } | undefined {
  const m = /^([A-Za-z][A-Za-z0-9-]*)\s*;\s*(.*)$/s.exec(v);
  return m ? { type: m[1]!.toLowerCase(), value: m[2]!.trim() } : undefined;
}

/** A DSN status (rule 3): class 2, 4 or 5; subject and detail 1-3 digits without leading zeros. */
export const DSN_STATUS = /^([245])\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})$/;

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** A DNS host name: at least two labels, an alphabetic top-level label, 253 characters at most; no IP literal. */
export function hostName(v: string): string | undefined {
  const h = v.toLowerCase().replace(/\.$/, '');
  if (h.length === 0 || h.length > 253) return undefined;
  const labels = h.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l)) || !/^[a-z]{2,63}$/.test(labels[labels.length - 1]!)) return undefined;
  return h;
}

/**
 * Mailbox providers whose names are worth imitating, by their own domains: a host naming one of
 * the brands that is not under one of its domains is a lookalike and attributes nothing (rule 6).
 */
const PROVIDER_DOMAINS = [
  'google.com',
  'googlemail.com',
  'gmail.com',
  'outlook.com',
  'hotmail.com',
  'live.com',
  'microsoft.com',
  'office365.com',
  'yahoo.com',
  'yahoodns.net',
  'aol.com',
  'icloud.com',
  'me.com',
  'apple.com',
  'amazonses.com',
  'amazonaws.com',
  'protonmail.ch',
  'proton.me',
  'zoho.com',
  'mimecast.com',
  'pphosted.com',
  'messagelabs.com',
];
const BRANDS = /google|gmail|outlook|hotmail|microsoft|office365|yahoo|icloud|amazonses|protonmail|zoho|mimecast|messagelabs/;

export function isProviderLookalike(host: string): boolean {
  if (!BRANDS.test(host)) return false;
  return !PROVIDER_DOMAINS.some((d) => host === d || host.endsWith(`.${d}`));
}

/** An MTA field (`dns; host`): the host when it attributes (rule 6), else why not. */
export function mtaHost(v: string): { host: string } | { none: 'foreign' | 'malformed' | 'ip' | 'lookalike' } {
  const t = typed(v);
  if (!t || t.type !== 'dns') return { none: t ? 'foreign' : 'malformed' };
  const name = t.value.replace(/^\[(.*)\]$/, '$1');
  if (/^(\d{1,3}\.){3}\d{1,3}$/.test(name) || name.includes(':') || t.value.startsWith('[')) return { none: 'ip' };
  const h = hostName(name.split(/\s/)[0] ?? '');
  if (!h) return { none: 'malformed' };
  return isProviderLookalike(h) ? { none: 'lookalike' } : { host: h };
}

/** A recipient field (`rfc822; mailbox`, rule 5): the address (angle brackets tolerated), or why not. */
export function recipientAddress(v: string): { address: string } | { none: 'foreign' | 'malformed' } {
  const t = typed(v);
  if (!t) return { none: 'malformed' };
  if (t.type !== 'rfc822') return { none: 'foreign' };
  const a = t.value.replace(/^<(.*)>$/, '$1').trim();
  if (a === '' || /[\s<>]/.test(a) || a.indexOf('@') < 1 || a.endsWith('@')) return { none: 'malformed' };
  return { address: a };
}

/** A typed `smtp` diagnostic: the basic and enhanced codes at its start, and the text. */
export function smtpDiagnostic(v: string): { basic?: string; enhanced?: string; text: string } {
  const m = /^([245]\d\d)(?:[\s-]+([245]\.\d{1,3}\.\d{1,3}))?\b\s*(.*)$/s.exec(v);
  if (m) return { basic: m[1]!, ...(m[2] ? { enhanced: m[2] } : {}), text: m[3] ?? '' };
  const e = /^([245]\.\d{1,3}\.\d{1,3})\b\s*(.*)$/s.exec(v);
  if (e) return { enhanced: e[1]!, text: e[2] ?? '' };
  return { text: v };
}
