// Phone numbers with exact answers: E.164, country, validity and line type from the full
// metadata, tel: URIs and punctuation, national numbers read with a default country, the 00
// international prefix, and text that is no phone number. Every number is from a range reserved
// for fiction (Ofcom's drama numbers: 020 7946 0xxx, 0113 496 0xxx, 07700 900xxx; the North
// American 555-01xx; ACMA's 0491 570 156 and 02 5550 xxxx; ARCEP's 01 99 00 xx xx) or is
// plainly example data (1234 5678).

import t from 'tap';
import { normalisePhone } from '../src/phone.ts';

t.test('landlines, mobiles and VoIP numbers', async (t) => {
  t.strictSame(normalisePhone('020 7946 0958', 'GB'), { e164: '+442079460958', raw: '020 7946 0958', valid: true, country_code: 'GB', line_type: 'landline' });
  t.strictSame(normalisePhone('0113 496 0000', 'GB'), { e164: '+441134960000', raw: '0113 496 0000', valid: true, country_code: 'GB', line_type: 'landline' });
  t.strictSame(normalisePhone('+61 491 570 156'), { e164: '+61491570156', raw: '+61 491 570 156', valid: true, country_code: 'AU', line_type: 'mobile' });
  t.strictSame(normalisePhone('(02) 5550 1234', 'AU'), { e164: '+61255501234', raw: '(02) 5550 1234', valid: true, country_code: 'AU', line_type: 'landline' });
  t.strictSame(normalisePhone('01 99 00 12 34', 'FR'), { e164: '+33199001234', raw: '01 99 00 12 34', valid: true, country_code: 'FR', line_type: 'landline' });
  t.strictSame(normalisePhone('+44 56 1234 5678'), { e164: '+445612345678', raw: '+44 56 1234 5678', valid: true, country_code: 'GB', line_type: 'voip' });
});

t.test('line types that are not certain stay unknown', async (t) => {
  // North American numbers: mobile and fixed lines share ranges (FIXED_LINE_OR_MOBILE).
  t.strictSame(normalisePhone('+1 202-555-0123'), { e164: '+12025550123', raw: '+1 202-555-0123', valid: true, country_code: 'US' });
  // Toll-free.
  t.strictSame(normalisePhone('1-800-555-0199', 'US'), { e164: '+18005550199', raw: '1-800-555-0199', valid: true, country_code: 'US' });
  // International freephone: no country at all.
  t.strictSame(normalisePhone('+800 1234 5678'), { e164: '+80012345678', raw: '+800 1234 5678', valid: true });
});

t.test('possible numbers outside every allocated range are returned as not valid', async (t) => {
  // Ofcom's drama mobile range is kept out of the allocated ranges.
  t.strictSame(normalisePhone('+44 7700 900123'), { e164: '+447700900123', raw: '+44 7700 900123', valid: false });
  t.strictSame(normalisePhone('07700 900123', 'GB'), { e164: '+447700900123', raw: '07700 900123', valid: false, country_code: 'GB' });
  // 555 is not an area code.
  t.strictSame(normalisePhone('+1 (555) 010-0199'), { e164: '+15550100199', raw: '+1 (555) 010-0199', valid: false });
});

t.test('tel: URIs, punctuation, the national prefix in brackets, spaces around', async (t) => {
  const london = { e164: '+442079460958', valid: true, country_code: 'GB', line_type: 'landline' };
  t.strictSame(normalisePhone('tel:+44-20-7946-0958'), { ...london, raw: 'tel:+44-20-7946-0958' });
  t.strictSame(normalisePhone('TEL:+44.20.7946.0958'), { ...london, raw: 'TEL:+44.20.7946.0958' });
  t.strictSame(normalisePhone('tel:%2B44%2020%207946%200958'), { ...london, raw: 'tel:%2B44%2020%207946%200958' });
  t.strictSame(normalisePhone('tel:+442079460958;ext=12'), { ...london, raw: 'tel:+442079460958;ext=12' });
  t.strictSame(normalisePhone('+44 (0)20 7946 0958'), { ...london, raw: '+44 (0)20 7946 0958' });
  t.strictSame(normalisePhone('  +44 20 7946 0958\n'), { ...london, raw: '+44 20 7946 0958' });
  t.strictSame(normalisePhone('Tel: +44 20 7946 0958'), { ...london, raw: 'Tel: +44 20 7946 0958' });
});

t.test('the default country: any case, ignored when unknown, never over an international number', async (t) => {
  t.strictSame(normalisePhone('(202) 555-0142', 'us'), { e164: '+12025550142', raw: '(202) 555-0142', valid: true, country_code: 'US' });
  t.strictSame(normalisePhone('+44 20 7946 0958', 'US'), { e164: '+442079460958', raw: '+44 20 7946 0958', valid: true, country_code: 'GB', line_type: 'landline' });
  t.strictSame(normalisePhone('+44 20 7946 0958', 'ZZ'), { e164: '+442079460958', raw: '+44 20 7946 0958', valid: true, country_code: 'GB', line_type: 'landline' });
  t.equal(normalisePhone('020 7946 0958', 'ZZ'), undefined);
  t.equal(normalisePhone('020 7946 0958'), undefined);
});

t.test('00 as the international prefix', async (t) => {
  const london = { e164: '+442079460958', valid: true, country_code: 'GB', line_type: 'landline' };
  t.strictSame(normalisePhone('00 44 20 7946 0958'), { ...london, raw: '00 44 20 7946 0958' });
  t.strictSame(normalisePhone('0044 20 7946 0958', 'FR'), { ...london, raw: '0044 20 7946 0958' });
  t.strictSame(normalisePhone('00 44 20 7946 0958', 'US'), { ...london, raw: '00 44 20 7946 0958' });
});

t.test('text that is no phone number gives undefined', async (t) => {
  const none = ['', '   ', 'hello', 'acme.test', 'tel:', 'tel:%ZZ', '+44', '12', '123', '+44 7700 9001234567890', '+1 800 FLOWERS', `+44 20 7946 0958 ${'x'.repeat(300)}`];
  for (const raw of none) t.equal(normalisePhone(raw, raw === '12' ? 'US' : undefined), undefined, JSON.stringify(raw.slice(0, 40)));
  for (const raw of [undefined, null, 442079460958, {}]) t.equal(normalisePhone(raw as unknown as string), undefined, String(raw));
});
