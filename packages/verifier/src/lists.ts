// Maintained domain and local-part lists (data/*.txt, data/roles.json), loaded once at module
// load. Pure lookups: no I/O after import.

import { readFileSync } from 'node:fs';

function readData(name: string): string {
  return readFileSync(new URL(`../data/${name}`, import.meta.url), 'utf8');
}

/** One lower-case domain per line; blank lines and `#` comments (whole-line or trailing) ignored. */
export function parseDomainList(text: string): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/#.*$/, '').trim().toLowerCase();
    if (line === '' || seen.has(line)) continue;
    seen.add(line);
    out.push(line);
  }
  return out;
}

function loadRoles(): Map<string, string> {
  const parsed: unknown = JSON.parse(readData('roles.json'));
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error('verifier data/roles.json must be an object of "local part": "category"');
  }
  const map = new Map<string, string>();
  for (const [key, value] of Object.entries(parsed)) {
    if (typeof value !== 'string' || value === '') {
      throw new Error(`verifier data/roles.json: category for "${key}" must be a non-empty string`);
    }
    map.set(key.toLowerCase(), value);
  }
  return map;
}

const ROLES = loadRoles();
/** Separator-free spelling → category, for variants like no_reply / no.reply / noreply. */
const ROLES_SQUASHED = new Map<string, string>();
for (const [key, category] of ROLES) {
  const squashed = squash(key);
  if (!ROLES_SQUASHED.has(squashed)) ROLES_SQUASHED.set(squashed, category);
}
/**
 * Separator variants are only matched when the squashed word is at least this long: `h.r` or
 * `i-t` are far more likely to be a person's initials than a role.
 */
const MIN_SQUASHED_MATCH = 4;

const FREE = new Set(parseDomainList(readData('free-providers.txt')));
const DISPOSABLE = new Set(parseDomainList(readData('disposable-domains.txt')));
const COMMON: readonly string[] = Object.freeze(parseDomainList(readData('common-domains.txt')));

function squash(s: string): string {
  return s.replace(/[-_.]/g, '');
}

/**
 * Role category of a local part (`info` → 'information'), or undefined for a personal mailbox.
 * Case-insensitive; a `+tag` sub-address is ignored; `-`, `_` and `.` spellings of the same word
 * match (`no_reply`, `no.reply`, `noreply`). A quoted local part is never a role.
 */
export function roleType(local: string): string | undefined {
  if (local.startsWith('"')) return undefined;
  const plus = local.indexOf('+');
  const base = (plus === -1 ? local : local.slice(0, plus)).toLowerCase();
  if (base === '') return undefined;
  const exact = ROLES.get(base);
  if (exact !== undefined) return exact;
  const squashed = squash(base);
  if (squashed.length < MIN_SQUASHED_MATCH) return undefined;
  return ROLES_SQUASHED.get(squashed);
}

/** Whether the (ASCII, lower-case) domain is a listed free/consumer mailbox provider. Exact match. */
export function isFreeProvider(asciiDomain: string): boolean {
  return FREE.has(asciiDomain.toLowerCase());
}

/** Whether the domain, or any parent domain of it, is a listed disposable mailbox domain. */
export function isDisposable(asciiDomain: string): boolean {
  let d = asciiDomain.toLowerCase();
  if (d.endsWith('.')) d = d.slice(0, -1);
  for (;;) {
    if (DISPOSABLE.has(d)) return true;
    const dot = d.indexOf('.');
    if (dot === -1) return false;
    d = d.slice(dot + 1);
  }
}

/** The most common mailbox domains, most common first (typo-correction targets). */
export function commonDomains(): readonly string[] {
  return COMMON;
}
