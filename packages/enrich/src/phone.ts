// Telephone numbers as websites and vendors write them ("+44 (0)20 7946 0958", "tel:+1-202-555-0123",
// "020 7946 0958" with the country known from elsewhere) turned into E.164 with what the
// numbering plan says about them: the country, whether the number is valid, and its line type.
// The full ("max") metadata is used because the smaller sets cannot tell mobile from landline.
//
// Text with no phone number in it at all (or with too few or too many digits to be one) gives
// undefined; a number that has a possible length but falls outside every allocated range is
// returned with valid: false, so the caller decides what to keep.

import parsePhoneNumber, { isSupportedCountry, type CountryCode, type PhoneNumber, type PhoneNumberType } from 'libphonenumber-js/max';
import type { LineType } from '@svc/contracts';

export interface PhoneInfo {
  /** E.164: `+` and the digits. */
  e164: string;
  /** The text as given, trimmed. */
  raw: string;
  /** ISO 3166-1 alpha-2 of the number's country, when the numbering plan names one. */
  country_code?: string;
  line_type?: LineType;
  /** Whether the number is in a range the numbering plan allocates. */
  valid: boolean;
}

/** Longer text is not a phone number (libphonenumber itself gives up at 250 characters). */
const MAX_INPUT = 256;

/**
 * Line types that are certain. FIXED_LINE_OR_MOBILE (the whole of the North American plan, where
 * mobile and fixed numbers share ranges) says nothing about the line, so it stays unknown, as do
 * toll-free, premium, shared-cost, pager, UAN and personal numbers.
 */
const LINE_TYPES: Partial<Record<PhoneNumberType, LineType>> = {
  MOBILE: 'mobile',
  FIXED_LINE: 'landline',
  VOIP: 'voip',
};

/**
 * The number in `raw` in E.164 with its country, validity and line type, or undefined when `raw`
 * holds no phone number. `defaultCountry` (ISO alpha-2, any case) reads national numbers; an
 * unknown one is ignored.
 */
export function normalisePhone(raw: string, defaultCountry?: string): PhoneInfo | undefined {
  if (typeof raw !== 'string' || raw.length > MAX_INPUT) return undefined;
  const trimmed = raw.trim();
  const text = stripTelScheme(trimmed);
  if (!/\d/.test(text)) return undefined;
  const country = supportedCountry(defaultCountry);
  const phone = parsePossible(text, country) ?? parseWithDoubleZero(text, country);
  if (!phone) return undefined;
  const info: PhoneInfo = { e164: phone.number, raw: trimmed, valid: phone.isValid() };
  if (phone.country) info.country_code = phone.country;
  const type = phone.getType();
  const lineType = type === undefined ? undefined : LINE_TYPES[type];
  if (lineType) info.line_type = lineType;
  return info;
}

/** `tel:` URIs: the scheme dropped and percent-escapes decoded (`tel:%2B44...`). */
function stripTelScheme(text: string): string {
  if (!/^tel:/i.test(text)) return text;
  const rest = text.slice(4);
  try {
    return decodeURIComponent(rest).trim();
  } catch {
    return rest.trim();
  }
}

function supportedCountry(code: string | undefined): CountryCode | undefined {
  if (typeof code !== 'string') return undefined;
  const upper = code.trim().toUpperCase();
  return isSupportedCountry(upper) ? upper : undefined;
}

/** The parsed number when it has a possible length for its country; otherwise undefined. */
function parsePossible(text: string, country: CountryCode | undefined): PhoneNumber | undefined {
  let phone: PhoneNumber | undefined;
  try {
    phone = parsePhoneNumber(text, country);
  } catch {
    return undefined;
  }
  return phone?.isPossible() ? phone : undefined;
}

/**
 * "00 44 20 ..." without a country to say which international prefix applies: 00 is the prefix in
 * most of the world, so read it as "+".
 */
function parseWithDoubleZero(text: string, country: CountryCode | undefined): PhoneNumber | undefined {
  const m = /^\(?00\)?[\s.-]*(?=[1-9])/.exec(text);
  return m ? parsePossible(`+${text.slice(m[0].length)}`, country) : undefined;
}
