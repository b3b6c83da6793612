// "Did you mean" for mistyped mailbox domains. Pure and deterministic.

import { commonDomains, isFreeProvider } from './lists.ts';

/**
 * Misspelt TLDs that are not delegated TLDs at all: safe to correct on any domain
 * (`acme.con` can never receive mail; `acme.com` is what was meant).
 */
const TLD_FIXES_ANY: Readonly<Record<string, string>> = {
  con: 'com',
  cmo: 'com',
  ocm: 'com',
  comm: 'com',
  coom: 'com',
  cpm: 'com',
  xom: 'com',
  vom: 'com',
  cim: 'com',
  nett: 'net',
  nte: 'net',
  ogr: 'org',
  orgg: 'org',
  rog: 'org',
};

/**
 * Misspellings that are real country-code TLDs (.co Colombia, .cm Cameroon, .om Oman, .ne Niger):
 * corrected only when the result is a listed provider (`gmail.co` → `gmail.com`).
 */
const TLD_FIXES_KNOWN: Readonly<Record<string, string>> = {
  co: 'com',
  cm: 'com',
  om: 'com',
  ne: 'net',
};

/**
 * Providers whose name (first label) is shorter than this are never fuzzy-matched: one edit
 * away from `aol`, `msn`, `gmx`, `me`, `live`, `mail` lies a host of unrelated real domains.
 */
const MIN_FUZZY_NAME = 5;
/** Names up to this length tolerate one edit; longer names two. */
const ONE_EDIT_MAX_NAME = 8;

const COMMON_SET = new Set(commonDomains());

function isKnown(domain: string): boolean {
  return COMMON_SET.has(domain) || isFreeProvider(domain);
}

/** Optimal string alignment distance (Damerau-Levenshtein with adjacent transpositions), capped. */
export function osaDistance(a: string, b: string, max = Infinity): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  const n = b.length;
  let prev2: number[] = [];
  let prev: number[] = Array.from({ length: n + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur: number[] = [i];
    let rowMin = i;
    for (let j = 1; j <= n; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        v = Math.min(v, (prev2[j - 2] ?? 0) + 1);
      }
      cur.push(v);
      if (v < rowMin) rowMin = v;
    }
    if (rowMin > max) return max + 1;
    prev2 = prev;
    prev = cur;
  }
  return prev[n] ?? 0;
}

/** Closest common domain within its edit threshold; ties go to the earlier list entry. */
function nearestCommon(domain: string): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of commonDomains()) {
    const name = candidate.split('.')[0] ?? '';
    if (name.length < MIN_FUZZY_NAME) continue;
    const threshold = name.length <= ONE_EDIT_MAX_NAME ? 1 : 2;
    const d = osaDistance(domain, candidate, threshold);
    if (d <= threshold && d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** Corrects a misspelt TLD, or undefined when the TLD needs no (safe) correction. */
function fixTld(domain: string): string | undefined {
  const dot = domain.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const name = domain.slice(0, dot);
  const tld = domain.slice(dot + 1);
  const any = TLD_FIXES_ANY[tld];
  if (any !== undefined) return `${name}.${any}`;
  const known = TLD_FIXES_KNOWN[tld];
  if (known !== undefined && isKnown(`${name}.${known}`)) return `${name}.${known}`;
  return undefined;
}

/**
 * A likely intended domain for a mistyped one (`gmial.com` → `gmail.com`, `gmail.con` →
 * `gmail.com`), or undefined. Never suggests for a listed common or free-provider domain.
 */
export function suggestDomain(asciiDomain: string): string | undefined {
  let domain = asciiDomain.toLowerCase();
  if (domain.endsWith('.')) domain = domain.slice(0, -1);
  if (domain === '' || isKnown(domain)) return undefined;

  const fixed = fixTld(domain);
  if (fixed !== undefined) {
    if (isKnown(fixed)) return fixed;
    return nearestCommon(fixed) ?? fixed;
  }
  return nearestCommon(domain);
}

/** `local@suggestion` when the domain looks mistyped, else undefined. */
export function didYouMean(local: string, asciiDomain: string): string | undefined {
  const suggestion = suggestDomain(asciiDomain);
  return suggestion === undefined ? undefined : `${local}@${suggestion}`;
}
