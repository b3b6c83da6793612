// The two date-time syntaxes of outcome rows: RFC 3339 for `occurred_at`, and the RFC 5322 (822)
// date-time of DSN fields (Last-Attempt-Date, Arrival-Date, Will-Retry-Until). Pure; never throws.

export interface Instant {
  /** Epoch microseconds. */
  us: number;
  /** The normalised text (RFC 3339). */
  text: string;
  /** `-00:00` / `-0000`: the local zone is unknown. */
  zoneUnknown: boolean;
}

const DAYS_IN = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const leap = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
const validDate = (y: number, m: number, d: number): boolean => m >= 1 && m <= 12 && d >= 1 && d <= (m === 2 && leap(y) ? 29 : DAYS_IN[m - 1]!);

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})([Tt])(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,32}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * RFC 3339 (rule 8): lower-case `t` and `z` accepted and normalised; `Z`, `+00:00` and `-00:00`
 * are UTC (written `Z`; `-00:00` marks the local zone unknown); up to six fractional digits kept
 * as given, zeros beyond six dropped, non-zero digits beyond six refused; second 60 (a leap
 * second) refused; a space for `T` refused. Returns undefined when refused.
 */
export function parseRfc3339(s: string): Instant | undefined {
  const m = RFC3339.exec(s);
  if (!m) return undefined;
  const [, ys, mos, ds, , hs, mis, ss, frac = '', z, sign, ohs, oms] = m;
  const y = Number(ys);
  const mo = Number(mos);
  const d = Number(ds);
  const h = Number(hs);
  const mi = Number(mis);
  const sec = Number(ss);
  if (!validDate(y, mo, d) || h > 23 || mi > 59 || sec > 59) return undefined;
  if (frac.length > 6 && /[1-9]/.test(frac.slice(6))) return undefined;
  const kept = frac.slice(0, 6);
  let offsetMin = 0;
  let zone = 'Z';
  let zoneUnknown = false;
  if (!z) {
    const oh = Number(ohs);
    const om = Number(oms);
    if (oh > 23 || om > 59) return undefined;
    offsetMin = (sign === '-' ? -1 : 1) * (oh * 60 + om);
    if (offsetMin === 0) zoneUnknown = sign === '-';
    else zone = `${sign}${ohs}:${oms}`;
  }
  const ms = Date.UTC(y, mo - 1, d, h, mi, sec) - offsetMin * 60_000;
  const us = ms * 1000 + (kept === '' ? 0 : Number(kept.padEnd(6, '0')));
  return { us, text: `${ys}-${mos}-${ds}T${hs}:${mis}:${ss}${kept ? `.${kept}` : ''}${zone}`, zoneUnknown };
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const RFC822 = /^(?:([A-Za-z]{3})\s*,\s*)?(\d{1,2})\s+([A-Za-z]{3})\s+(\d{2}|\d{4})\s+(\d{2}):(\d{2})(?::(\d{2}))?\s+([+-])(\d{2})(\d{2})$/;

/**
 * An RFC 5322 date-time (rule 9), comments already removed: optional weekday (which must match
 * the date as written), day, month name, year (two-digit years per RFC 5322's obsolete syntax),
 * time with optional seconds, and a numeric `+HHMM`/`-HHMM` zone only (`GMT` and other names are
 * refused). `+0000` and `-0000` are UTC, `-0000` marking the local zone unknown. The text given
 * back is the instant in RFC 3339 UTC.
 */
export function parseRfc822(raw: string): Instant | undefined {
  const m = RFC822.exec(raw.trim().replace(/\s+/g, ' '));
  if (!m) return undefined;
  const [, wd, ds, mons, ys, hs, mis, ss = '00', sign, ohs, oms] = m;
  const mo = MONTHS.indexOf(mons!.toLowerCase()) + 1;
  if (mo === 0) return undefined;
  let y = Number(ys);
  if (ys!.length === 2) y += y < 50 ? 2000 : 1900;
  const d = Number(ds);
  const h = Number(hs);
  const mi = Number(mis);
  const sec = Number(ss);
  if (!validDate(y, mo, d) || h > 23 || mi > 59 || sec > 59) return undefined;
  if (wd !== undefined) {
    const dow = new Date(Date.UTC(y, mo - 1, d)).getUTCDay();
    if (WEEKDAYS[dow] !== wd.toLowerCase()) return undefined;
  }
  const oh = Number(ohs);
  const om = Number(oms);
  if (oh > 23 || om > 59) return undefined;
  const offsetMin = (sign === '-' ? -1 : 1) * (oh * 60 + om);
  const ms = Date.UTC(y, mo - 1, d, h, mi, sec) - offsetMin * 60_000;
  return { us: ms * 1000, text: new Date(ms).toISOString().replace('.000Z', 'Z'), zoneUnknown: offsetMin === 0 && sign === '-' };
}
