// Address patterns for the email finder.
//
// Given a person's first and last name and their company's domain, the finder has to guess which
// mailbox the company gave them. Companies pick one naming convention and apply it to most staff,
// so a guess is "a pattern applied to the name". This module owns that part and nothing else: it
// is pure (no network, no database, no environment), so the probing code that asks mail servers
// which guess exists, and the store that remembers what each domain turned out to use, both live
// elsewhere and call in here.
//
// - PATTERNS is the vocabulary of conventions, most common first.
// - normaliseName turns a human name into the forms a mail administrator would have typed.
// - candidates renders the patterns into addresses, learnt patterns for the domain first.
// - patternOf works backwards from a confirmed mailbox to the convention it follows.
// - rankPatterns and patternConfidence turn the per-domain tallies of those conventions into an
//   order to try and into a score usable when the server accepts every address (catch-all).

import { domainToASCII } from 'node:url';

/** One guessed address: `local@domain`, and the pattern that produced the local part. */
export type Candidate = { email: string; local: string; pattern: string };

export interface CandidateOptions {
  /** Patterns to try first, best first (usually `rankPatterns` of the domain's evidence). */
  order?: readonly string[];
  /** At most this many candidates (default 8). */
  max?: number;
  /**
   * Also combine the secondary name forms (`jean-luc`, `berg`, `mueller`...) after every pattern
   * has been tried with the best forms. Off by default: each extra form multiplies the guesses.
   */
  allForms?: boolean;
}

/** Confirmations per pattern for one domain. Non-positive, non-finite and unknown entries are ignored. */
export type PatternCounts = ReadonlyMap<string, number> | Readonly<Record<string, number>>;

/**
 * The conventions, in the order they are met in business mail. Placeholders: `{first}`, `{last}`,
 * `{f}` (first initial), `{l}` (last initial); between them the literal separators `.`, `_`, `-`.
 */
export const PATTERNS: readonly string[] = Object.freeze([
  '{first}.{last}',
  '{f}{last}',
  '{first}',
  '{first}{last}',
  '{first}_{last}',
  '{last}.{first}',
  '{f}.{last}',
  '{first}{l}',
  '{last}',
  '{first}-{last}',
  '{last}{f}',
  '{first}.{l}',
  '{last}{first}',
  '{f}{l}',
  '{last}_{first}',
]);

const DEFAULT_MAX = 8;
const MAX_LOCAL = 64; // RFC 5321 limit on the local part
const MAX_ADDRESS = 254; // RFC 5321 path limit less the angle brackets

// ---------------------------------------------------------------------------------------------
// Names

// Letters that Unicode decomposition leaves alone but which every mail system spells in ASCII.
const TRANSLITERATE: Readonly<Record<string, string>> = {
  ß: 'ss',
  æ: 'ae',
  œ: 'oe',
  ø: 'o',
  ł: 'l',
  đ: 'd',
  ð: 'd',
  þ: 'th',
  ı: 'i',
  ħ: 'h',
  ŧ: 't',
};
const TRANSLITERATE_RE = /[ßæœøłđðþıħŧ]/g;

// The German and Scandinavian habit of writing an umlaut or a slashed o as two letters.
const DIGRAPHS: Readonly<Record<string, string>> = { ä: 'ae', ö: 'oe', ü: 'ue', ø: 'oe', å: 'aa' };
const DIGRAPHS_RE = /[äöüøå]/g;

const APOSTROPHES_RE = /['\u2018\u2019\u201B\u02BB\u02BC\u02BD\u0060\u00B4\u2032]/g;
const DASHES_RE = /[\u2010-\u2015\u2212\uFE58\uFE63]/g;
// Between the words of a name: blanks, dashes, dots, commas, underscores, slashes, middle dots.
const WORD_BREAK_RE = /[\s\-.,_/\u00B7]+/u;

// Lower-case name particles that are dropped when a many-word name is cut down to its core word.
const PARTICLES = new Set([
  'van', 'von', 'der', 'den', 'de', 'del', 'della', 'dei', 'di', 'da', 'das', 'dos', 'do', 'du',
  'la', 'le', 'les', 'ter', 'ten', 'te', 'zu', 'zum', 'zur', 'af', 'av', 'al', 'el', 'bin', 'ibn',
]);

/** Lower-case, fold the name to ASCII letters (keeping the separators), drop apostrophes. */
function fold(raw: string, digraphs: boolean): string {
  let s = raw.normalize('NFC').toLowerCase();
  if (digraphs) s = s.replace(DIGRAPHS_RE, (c) => DIGRAPHS[c] ?? c);
  s = s.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase();
  s = s.replace(TRANSLITERATE_RE, (c) => TRANSLITERATE[c] ?? c);
  return s.replace(APOSTROPHES_RE, '').replace(DASHES_RE, '-');
}

const onlyAlnum = (s: string): string => s.replace(/[^a-z0-9]/g, '');

/**
 * The mailbox-safe spellings of a name, best first; every form matches `[a-z0-9]+(-[a-z0-9]+)*`.
 *
 * 1. Everything joined: `Jean-Luc` → `jeanluc`, `van der Berg` → `vanderberg`, `O'Neil` → `oneil`.
 * 2. With its hyphens kept, when it had any: `jean-luc`.
 * 3. With umlauts and ø/å spelt as two letters, when that differs: `Müller` → `mueller`.
 * 4. For a name of several words, each word that is not a particle: `jean`, `luc`; `berg`.
 *
 * Empty when nothing usable is left, e.g. a name written only in CJK, Cyrillic or Greek script:
 * their romanisation is a choice the person made (and not one we can derive), so the finder cannot
 * guess such a person's address from patterns and must rely on other sources.
 */
export function normaliseName(raw: string): string[] {
  const folded = fold(raw, false);
  const joined = onlyAlnum(folded);
  if (joined === '') return [];
  const forms = [joined];
  if (folded.includes('-')) {
    const hyphened = folded
      .replace(/[^a-z0-9-]/g, '')
      .replace(/-{2,}/g, '-')
      .replace(/^-+|-+$/g, '');
    forms.push(hyphened);
  }
  forms.push(onlyAlnum(fold(raw, true)));
  const words = folded.split(WORD_BREAK_RE).map(onlyAlnum).filter((w) => w !== '');
  if (words.length > 1) forms.push(...words.filter((w) => !PARTICLES.has(w)));
  return [...new Set(forms)].filter((f) => f !== '');
}

// ---------------------------------------------------------------------------------------------
// Patterns

type Slot = 'first' | 'last' | 'f' | 'l';
type Token = { slot: Slot } | { sep: string };

const TOKEN_RE = /\{(first|last|f|l)\}|([._-])/y;

/**
 * A pattern's tokens, or undefined when it is not in the vocabulary: only placeholders and single
 * separators, at least one placeholder, no separator at either end or next to another separator.
 */
function parsePattern(pattern: string): Token[] | undefined {
  const tokens: Token[] = [];
  TOKEN_RE.lastIndex = 0;
  while (TOKEN_RE.lastIndex < pattern.length) {
    const at = TOKEN_RE.lastIndex;
    const m = TOKEN_RE.exec(pattern);
    if (m === null || TOKEN_RE.lastIndex === at) return undefined;
    if (m[1] !== undefined) tokens.push({ slot: m[1] as Slot });
    else {
      const prev = tokens[tokens.length - 1];
      if (prev === undefined || 'sep' in prev) return undefined;
      tokens.push({ sep: m[2] ?? '' });
    }
  }
  const lastToken = tokens[tokens.length - 1];
  if (lastToken === undefined || 'sep' in lastToken) return undefined;
  return tokens;
}

/** Whether a string is a pattern of the vocabulary (see PATTERNS). */
export function isPattern(pattern: string): boolean {
  return parsePattern(pattern) !== undefined;
}

/** The local part for one first/last form, or undefined when the pattern needs a missing name. */
function render(tokens: readonly Token[], first: string | undefined, last: string | undefined): string | undefined {
  let out = '';
  for (const t of tokens) {
    if ('sep' in t) {
      out += t.sep;
      continue;
    }
    const name = t.slot === 'first' || t.slot === 'f' ? first : last;
    if (name === undefined || name === '') return undefined;
    out += t.slot === 'f' || t.slot === 'l' ? name.charAt(0) : name;
  }
  return out;
}

/** A dot-atom local part SMTP accepts unquoted: 1..64 characters, dots only between other characters. */
function validLocal(local: string): boolean {
  return (
    local.length >= 1 &&
    local.length <= MAX_LOCAL &&
    !local.startsWith('.') &&
    !local.endsWith('.') &&
    !local.includes('..') &&
    /^[a-z0-9._-]+$/.test(local)
  );
}

/** The domain in lower-case ASCII (IDNA), or undefined when it cannot be a mail domain. */
function asciiDomain(domain: string): string | undefined {
  const trimmed = domain.trim().replace(/\.$/, '');
  if (trimmed === '') return undefined;
  const ascii = domainToASCII(trimmed.toLowerCase());
  if (ascii === '' || ascii.length > 253) return undefined;
  const labels = ascii.split('.');
  if (labels.length < 2) return undefined;
  for (const label of labels) {
    if (!/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(label)) return undefined;
  }
  // A numeric top label means an IP address (domainToASCII accepts those): not a company domain.
  if (/^[0-9]+$/.test(labels[labels.length - 1] ?? '')) return undefined;
  return ascii;
}

/**
 * Pairs of (first form, last form), best first: by the sum of the two ranks, then by the first
 * name's rank. A side with no form contributes `undefined` so patterns needing it are skipped.
 */
function formPairs(firsts: readonly string[], lasts: readonly string[]): Array<[string | undefined, string | undefined]> {
  const fs: Array<string | undefined> = firsts.length > 0 ? [...firsts] : [undefined];
  const ls: Array<string | undefined> = lasts.length > 0 ? [...lasts] : [undefined];
  const pairs: Array<{ i: number; j: number }> = [];
  for (let i = 0; i < fs.length; i++) for (let j = 0; j < ls.length; j++) pairs.push({ i, j });
  pairs.sort((a, b) => a.i + a.j - (b.i + b.j) || a.i - b.i);
  return pairs.map(({ i, j }) => [fs[i], ls[j]]);
}

/**
 * The addresses to try for a person at a domain, best first and without repeats.
 *
 * Patterns come from `opts.order` (the domain's learnt ranking), then the remaining PATTERNS in
 * default order; strings outside the vocabulary are skipped. A pattern needing a name the person
 * lacks (after normalising) is skipped too, so someone known only by a first name gets `{first}`
 * alone. Local parts longer than 64 characters are dropped, and a local part already produced by
 * an earlier pattern is not repeated. An invalid domain gives no candidates.
 */
export function candidates(first: string, last: string, domain: string, opts: CandidateOptions = {}): Candidate[] {
  const host = asciiDomain(domain);
  if (host === undefined) return [];
  const max = opts.max === undefined ? DEFAULT_MAX : Math.floor(opts.max);
  if (!(max > 0)) return [];

  const firsts = normaliseName(first);
  const lasts = normaliseName(last);
  const pairs = formPairs(firsts, lasts);
  const usedPairs = opts.allForms === true ? pairs : pairs.slice(0, 1);

  const order = [...new Set([...(opts.order ?? PATTERNS), ...PATTERNS])];
  const parsed = order.flatMap((pattern) => {
    const tokens = parsePattern(pattern);
    return tokens === undefined ? [] : [{ pattern, tokens }];
  });

  const seen = new Set<string>();
  const out: Candidate[] = [];
  for (const [f, l] of usedPairs) {
    for (const { pattern, tokens } of parsed) {
      const local = render(tokens, f, l);
      if (local === undefined || seen.has(local) || !validLocal(local)) continue;
      const email = `${local}@${host}`;
      if (email.length > MAX_ADDRESS) continue;
      seen.add(local);
      out.push({ email, local, pattern });
      if (out.length >= max) return out;
    }
  }
  return out;
}

/**
 * The pattern a known mailbox follows for this person, trying every form of both names (best forms
 * first, PATTERNS in default order within a pair of forms); undefined when none produces it. The
 * comparison ignores case, and a full address is cut down to its local part.
 */
export function patternOf(local: string, first: string, last: string): string | undefined {
  let want = local.trim().toLowerCase();
  const at = want.lastIndexOf('@');
  if (at >= 0) want = want.slice(0, at);
  if (want === '') return undefined;
  const parsed = PATTERNS.map((pattern) => ({ pattern, tokens: parsePattern(pattern) ?? [] }));
  for (const [f, l] of formPairs(normaliseName(first), normaliseName(last))) {
    for (const { pattern, tokens } of parsed) {
      if (render(tokens, f, l) === want) return pattern;
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Evidence

/** The usable tallies: patterns of the vocabulary with a positive finite count. */
function evidence(counts: PatternCounts): Map<string, number> {
  const entries: Iterable<[string, number]> = counts instanceof Map ? counts.entries() : Object.entries(counts);
  const out = new Map<string, number>();
  for (const [pattern, n] of entries) {
    if (typeof n === 'number' && Number.isFinite(n) && n > 0 && isPattern(pattern)) out.set(pattern, n);
  }
  return out;
}

function defaultRank(pattern: string): number {
  const i = PATTERNS.indexOf(pattern);
  return i < 0 ? PATTERNS.length : i;
}

/**
 * The order to try patterns at a domain: those with confirmations, most confirmed first (ties in
 * default order, patterns outside PATTERNS after those in it, then by spelling), then the other
 * PATTERNS in default order.
 */
export function rankPatterns(counts: PatternCounts): string[] {
  const ev = evidence(counts);
  const learnt = [...ev.keys()].sort(
    (a, b) =>
      (ev.get(b) ?? 0) - (ev.get(a) ?? 0) ||
      defaultRank(a) - defaultRank(b) ||
      (a < b ? -1 : a > b ? 1 : 0),
  );
  return [...learnt, ...PATTERNS.filter((p) => !ev.has(p))];
}

/**
 * How far a domain's evidence supports an address built with `pattern`, 0..100, for when SMTP
 * cannot tell (the server accepts every address). 70 is the level at which a result may be charged.
 *
 * With n the confirmations of this pattern, o those of every other pattern, share s = n / (n + o):
 *
 *   prior    = 50 for PATTERNS[0], 30 for the other PATTERNS, 10 for other vocabulary patterns
 *   weakened = prior / (1 + o)                                  (other patterns' evidence counts against)
 *   support  = n > 0 ? 95 × min(1, s / 0.8) × n / (n + 0.3) : 0
 *   score    = round(max(weakened, support))
 *
 * So no evidence at all gives the prior (at most 50, below 70); one confirmation with the whole
 * share gives 73; 3 with the whole share 86; 4 out of 5 (80 %) 88; the score approaches 95 and
 * never reaches 100, since a catch-all server proves nothing. A share of 80 % or more counts as
 * the whole share (the rest are usually role or legacy mailboxes); below it the score falls in
 * proportion. Both terms rise with n (s rises with it) and with s at a fixed n, so the score is
 * monotonic in the count and in the share. A string outside the vocabulary scores 0.
 */
export function patternConfidence(counts: PatternCounts, pattern: string): number {
  if (!isPattern(pattern)) return 0;
  const ev = evidence(counts);
  const n = ev.get(pattern) ?? 0;
  let total = 0;
  for (const c of ev.values()) total += c;
  const others = total - n;
  const prior = pattern === PATTERNS[0] ? 50 : PATTERNS.includes(pattern) ? 30 : 10;
  const weakened = prior / (1 + others);
  const share = total > 0 ? n / total : 0;
  const support = n > 0 ? 95 * Math.min(1, share / 0.8) * (n / (n + 0.3)) : 0;
  return Math.min(100, Math.max(0, Math.round(Math.max(weakened, support))));
}
