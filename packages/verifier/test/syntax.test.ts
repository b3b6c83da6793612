import t from 'tap';
import { parseAddress } from '../src/syntax.ts';
import type { ParsedAddress } from '../src/types.ts';

const L63 = 'a'.repeat(63);
const L64 = 'a'.repeat(64);
const L65 = 'a'.repeat(65);
// 63 + 1 + 63 + 1 + 57 + 4 = 189-octet domain; with a 64-octet local part: 64 + 1 + 189 = 254.
const D189 = `${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(57)}.com`;
const D190 = `${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(58)}.com`;

function ok(local: string, domain: string, extra: Partial<Extract<ParsedAddress, { ok: true }>> = {}): ParsedAddress {
  return { ok: true, local, domain, asciiDomain: domain, quoted: false, utf8Local: false, idn: false, ...extra };
}
const bad = (reason: string): ParsedAddress => ({ ok: false, reason });

const cases: Array<[string, ParsedAddress]> = [
  // ---- valid -----------------------------------------------------------------------------
  ['john@example.com', ok('john', 'example.com')],
  ['John.Smith@Example.COM', ok('John.Smith', 'example.com')],
  ['john+newsletter@example.com', ok('john+newsletter', 'example.com')],
  ['a@b.co', ok('a', 'b.co')],
  ['first.middle.last@mail.example.co.uk', ok('first.middle.last', 'mail.example.co.uk')],
  ["o'brien@example.ie", ok("o'brien", 'example.ie')],
  ["!#$%&'*+-/=?^_`{|}~@example.com", ok("!#$%&'*+-/=?^_`{|}~", 'example.com')],
  ['user@sub-domain.example-site.com', ok('user', 'sub-domain.example-site.com')],
  ['user@123.example.com', ok('user', '123.example.com')],
  ['user@example.xn--p1ai', ok('user', 'example.xn--p1ai')],
  ['"john doe"@example.com', ok('"john doe"', 'example.com', { quoted: true })],
  ['"john..doe"@example.com', ok('"john..doe"', 'example.com', { quoted: true })],
  ['"a@b"@example.com', ok('"a@b"', 'example.com', { quoted: true })],
  ['"quote\\"inside"@example.com', ok('"quote\\"inside"', 'example.com', { quoted: true })],
  ['"back\\\\slash"@example.com', ok('"back\\\\slash"', 'example.com', { quoted: true })],
  ['"<angle>"@example.com', ok('"<angle>"', 'example.com', { quoted: true })],
  ['josé@example.com', ok('josé', 'example.com', { utf8Local: true })],
  ['用户@example.com', ok('用户', 'example.com', { utf8Local: true })],
  ['user@bücher.de', ok('user', 'bücher.de', { asciiDomain: 'xn--bcher-kva.de', idn: true })],
  ['user@BÜCHER.de', ok('user', 'bücher.de', { asciiDomain: 'xn--bcher-kva.de', idn: true })],
  ['user@xn--bcher-kva.de', ok('user', 'xn--bcher-kva.de')],
  ['θσερ@παράδειγμα.δοκιμή', ok('θσερ', 'παράδειγμα.δοκιμή', { asciiDomain: 'xn--hxajbheg2az3al.xn--jxalpdlp', utf8Local: true, idn: true })],
  ['user@ｇｍａｉｌ.com', ok('user', 'ｇｍａｉｌ.com', { asciiDomain: 'gmail.com', idn: true })],
  ['user@例え。テスト', ok('user', '例え.テスト', { asciiDomain: 'xn--r8jz45g.xn--zckzah', idn: true })],
  ['"josé"@example.com', ok('josé', 'example.com', { utf8Local: true })],
  // A quoted local part that can be a dot-atom is that dot-atom: one mailbox, one spelling.
  ['"jane.doe"@example.com', ok('jane.doe', 'example.com')],
  ['"ja\\ne.doe"@example.com', ok('jane.doe', 'example.com')],
  ['"info"@example.com', ok('info', 'example.com')],
  // One that needs its quotes keeps them, escaping only DQUOTE and backslash.
  ['"john\\ doe"@example.com', ok('"john doe"', 'example.com', { quoted: true })],
  ['"a\\@b"@example.com', ok('"a@b"', 'example.com', { quoted: true })],
  [`${L64}@example.com`, ok(L64, 'example.com')],
  [`user@${L63}.com`, ok('user', `${L63}.com`)],
  [`${L64}@${D189}`, ok(L64, D189)],
  // 31 two-octet characters + 'ab' = 64 octets (33 characters): fits.
  [`${'é'.repeat(31)}ab@example.com`, ok(`${'é'.repeat(31)}ab`, 'example.com', { utf8Local: true })],

  // ---- invalid: structure -----------------------------------------------------------------
  ['', bad('Empty address')],
  ['john.example.com', bad('Missing @')],
  ['john@doe@example.com', bad('More than one @')],
  ['@example.com', bad('Empty local part')],
  ['john@', bad('Empty domain')],
  ['"john"', bad('Missing @')],
  ['"john@example.com', bad('Unterminated quoted local part')],
  ['"john"doe@example.com', bad('Invalid character after quoted local part')],
  ['""@example.com', bad('Empty quoted local part')],
  ['"a"@b@example.com', bad('More than one @')],
  ['<a@b.com>', bad('Invalid character in local part')],
  ['a@b.com\r\nRCPT TO:<x@y.com>', bad('Control characters are not allowed')],
  ['a\u0000b@example.com', bad('Control characters are not allowed')],
  ['"a\nb"@example.com', bad('Control characters are not allowed')],
  ['a\u00a0b@example.com', bad('Invalid character in address')],
  ['a\u200bb@example.com', bad('Invalid character in address')],

  // ---- invalid: local part ----------------------------------------------------------------
  ['.john@example.com', bad('Local part starts with a dot')],
  ['john.@example.com', bad('Local part ends with a dot')],
  ['john..doe@example.com', bad('Consecutive dots in local part')],
  ['john doe@example.com', bad('Space in local part')],
  ['john(comment)@example.com', bad('Invalid character in local part')],
  ['john"doe"@example.com', bad('Invalid character in local part')],
  ['john\\doe@example.com', bad('Invalid character in local part')],
  ['a,b@example.com', bad('Invalid character in local part')],
  ['"a\\é"@example.com', bad('Invalid escape in quoted local part')],
  [`${L65}@example.com`, bad('Local part is longer than 64 octets')],
  // 32 two-octet characters + 'a' = 65 octets but only 33 characters.
  [`${'é'.repeat(32)}a@example.com`, bad('Local part is longer than 64 octets')],
  // quotes count: 63 characters + 2 quotes = 65 octets.
  // The limit applies to the canonical local part, the one sent in RCPT: 63 octets once unquoted.
  [`"${'a'.repeat(63)}"@example.com`, ok('a'.repeat(63), 'example.com')],
  [`"${'a '.repeat(32)}"@example.com`, bad('Local part is longer than 64 octets')],

  // ---- invalid: domain --------------------------------------------------------------------
  ['user@[192.168.0.1]', bad('Domain literals are not accepted')],
  ['user@[IPv6:2001:db8::1]', bad('Domain literals are not accepted')],
  ['user@example.com.', bad('Domain ends with a dot')],
  ['user@bücher.de。', bad('Domain ends with a dot')],
  ['user@.example.com', bad('Domain starts with a dot')],
  ['user@example..com', bad('Consecutive dots in domain')],
  ['user@localhost', bad('Domain must have at least two labels')],
  [`user@${'a'.repeat(64)}.com`, bad('Domain label is longer than 63 octets')],
  ['user@-example.com', bad('Domain label starts or ends with a hyphen')],
  ['user@example-.com', bad('Domain label starts or ends with a hyphen')],
  ['user@example.com-', bad('Domain label starts or ends with a hyphen')],
  ['user@example.123', bad('Top-level domain is numeric')],
  ['user@1.2.3.4', bad('Top-level domain is numeric')],
  ['user@example.c', bad('Top-level domain is too short')],
  ['user@exa_mple.com', bad('Invalid character in domain')],
  ['user@exa%41mple.com', bad('Invalid character in domain')],
  ['user@example.com>', bad('Invalid character in domain')],
  ['user@exam ple.com', bad('Invalid character in domain')],
  ['user@xn--zz.com', bad('Invalid domain')],
  [`user@${'a.'.repeat(126)}com`, bad('Domain is longer than 253 octets')],

  // ---- invalid: whole address -------------------------------------------------------------
  [`${L64}@${D190}`, bad('Address is longer than 254 octets')],
  [`${'a'.repeat(2000)}@example.com`, bad('Address is longer than 254 octets')],
];

t.test('parseAddress table', async (t) => {
  t.ok(cases.length >= 40, `at least 40 cases (${cases.length})`);
  for (const [input, expected] of cases) {
    t.same(parseAddress(input), expected, JSON.stringify(input).slice(0, 80));
  }
});

t.test('length boundaries are in octets', async (t) => {
  t.equal(D189.length, 189);
  t.equal(`${L64}@${D189}`.length, 254);
  t.equal(`${L64}@${D190}`.length, 255);
  t.equal(Buffer.byteLength(`${'é'.repeat(31)}ab`), 64);
  t.equal(Buffer.byteLength(`${'é'.repeat(32)}a`), 65);
  t.equal(`${'a.'.repeat(126)}com`.length, 255);
});

t.test('IDN length is counted on the ASCII form', async (t) => {
  // 'ü' label: 'xn--tda' style A-labels are longer than the U-label.
  const label = 'ü'.repeat(20); // A-label is much longer than 20
  const r = parseAddress(`user@${label}.de`);
  t.equal(r.ok, true);
  if (r.ok) {
    t.ok(r.asciiDomain.startsWith('xn--'));
    t.equal(r.idn, true);
  }
});

t.test('never throws on junk', async (t) => {
  const junk = ['@', '@@', '"', '""', '"\\', '"\\"@a.com', 'a@[', '.@.', 'a@.', '\ud800@example.com', 'a@\ud800.com', 'a@b.c.'];
  for (const j of junk) {
    const r = parseAddress(j);
    t.equal(r.ok, false, JSON.stringify(j));
  }
});
