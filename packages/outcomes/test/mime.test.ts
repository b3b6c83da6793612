// MIME extraction of a bounce's delivery-status part (deliveryStatusOf) and of its human-readable
// text (textPartOf): exact outputs for boundaries (quoted, unquoted, folded, case), nesting,
// transfer encodings, global DSNs, what is not a DSN part, hostile input in bounded time, and a
// seeded fuzz test (never throws, always a string or null).

import t from 'tap';
import { contentType } from '../src/parse/mime.ts';
import { deliveryStatusOf, textPartOf } from '../src/index.ts';
import { seededRandom } from '../../../test/helpers/random.ts';

const crlf = (lines: string[]): string => lines.join('\r\n');

const DSN = crlf(['Reporting-MTA: dns; mx.example.net', '', 'Final-Recipient: rfc822; person1@example.com', 'Action: failed', 'Status: 5.1.1', 'Diagnostic-Code: smtp; 550 5.1.1 user unknown', '']);

/** A multipart/report bounce with the given Content-Type header line(s) and boundary. */
function report(contentTypeLines: string[], boundary: string, dsnPart = DSN, extraHeaders: string[] = []): string {
  return crlf([
    'From: Mail Delivery System <mailer-daemon@example.net>',
    'To: person2@example.org',
    'Subject: Undelivered Mail Returned to Sender',
    'MIME-Version: 1.0',
    ...contentTypeLines,
    '',
    'This is a MIME-encapsulated message.',
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'Your message could not be delivered.',
    '',
    `--${boundary}`,
    'Content-Type: message/delivery-status',
    ...extraHeaders,
    '',
    dsnPart,
    `--${boundary}`,
    'Content-Type: text/rfc822-headers',
    '',
    'From: person2@example.org',
    'To: person1@example.com',
    '',
    `--${boundary}--`,
    '',
  ]);
}

t.test('a multipart/report with a quoted boundary: the part body exactly, its last line break kept, the delimiter\'s own CRLF dropped', async (t) => {
  const msg = report(['Content-Type: multipart/report; report-type=delivery-status; boundary="B1.x/y"'], 'B1.x/y');
  t.equal(deliveryStatusOf(msg), DSN);
  t.equal(textPartOf(msg), 'Your message could not be delivered.\r\n');
});

t.test('an unquoted boundary, a Content-Type in another case, parameters in another order and case', async (t) => {
  const msg = report(['CONTENT-TYPE: Multipart/Report; BOUNDARY=abc123; Report-Type=delivery-status'], 'abc123').replace('Content-Type: message/delivery-status', 'content-type: Message/Delivery-Status');
  t.equal(deliveryStatusOf(msg), DSN);
});

t.test('a folded Content-Type (the boundary on a continuation line, with a tab)', async (t) => {
  const msg = report(['Content-Type: multipart/report;', '\treport-type=delivery-status;', '  boundary="=_folded_=1"'], '=_folded_=1');
  t.equal(deliveryStatusOf(msg), DSN);
});

t.test('a quoted boundary holding a ";", the RFC 2046 specials and an escaped quote; a comment after a token', async (t) => {
  t.strictSame(contentType('multipart/report; boundary="a;b\'()+_,-./:=?"; report-type=delivery-status'), { type: 'multipart/report', params: new Map([['boundary', "a;b'()+_,-./:=?"], ['report-type', 'delivery-status']]) });
  t.strictSame(contentType('multipart/mixed; boundary="x\\"y"'), { type: 'multipart/mixed', params: new Map([['boundary', 'x"y']]) });
  t.strictSame(contentType('multipart/mixed; boundary=abc (a comment)'), { type: 'multipart/mixed', params: new Map([['boundary', 'abc']]) });
  t.strictSame(contentType(undefined), { type: 'text/plain', params: new Map() });
  const msg = report(['Content-Type: multipart/report; boundary="a;b\'()+_,-./:=?"'], "a;b'()+_,-./:=?");
  t.equal(deliveryStatusOf(msg), DSN);
});

t.test('delimiter lines with transport padding; a line that only starts like the delimiter is content', async (t) => {
  const msg = crlf([
    'Content-Type: multipart/report; boundary="abc"',
    '',
    '--abcdef (not a delimiter)',
    '--abc \t',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.example.net',
    '--abcd is content too',
    '--abc--  ',
    'epilogue',
  ]);
  t.equal(deliveryStatusOf(msg), 'Reporting-MTA: dns; mx.example.net\r\n--abcd is content too');
});

t.test('nesting: multipart/mixed around multipart/report, the DSN part third', async (t) => {
  const inner = report(['Content-Type: multipart/report; report-type=delivery-status; boundary="inner"'], 'inner');
  const innerBody = inner.slice(inner.indexOf('\r\n\r\n') + 4);
  const msg = crlf([
    'From: postmaster@example.net',
    'Content-Type: multipart/mixed; boundary="outer"',
    '',
    '--outer',
    'Content-Type: text/plain',
    '',
    'A wrapper from a gateway.',
    '--outer',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="inner"',
    '',
    innerBody,
    '--outer--',
  ]);
  t.equal(deliveryStatusOf(msg), DSN);
  t.equal(textPartOf(msg), 'A wrapper from a gateway.', 'the first text/plain part in document order');
});

t.test('nesting depth is capped: found at 6 levels, not at 12', async (t) => {
  const nest = (levels: number): string => {
    let body = crlf(['Content-Type: message/delivery-status', '', 'Action: failed', 'Status: 5.1.1']);
    for (let i = levels; i >= 1; i--) body = crlf([`Content-Type: multipart/mixed; boundary="b${i}"`, '', `--b${i}`, body, `--b${i}--`]);
    return body;
  };
  t.equal(deliveryStatusOf(nest(6)), 'Action: failed\r\nStatus: 5.1.1');
  t.equal(deliveryStatusOf(nest(12)), null);
});

t.test('message/global-delivery-status (RFC 6533), UTF-8 kept', async (t) => {
  const g = crlf(['Reporting-MTA: dns; mx.example.net', '', 'Final-Recipient: utf-8; δοκιμή@example.com', 'Action: failed', 'Status: 5.1.1', '']);
  const msg = report(['Content-Type: multipart/report; report-type=global-delivery-status; boundary=g'], 'g', g).replace('message/delivery-status', 'message/global-delivery-status');
  t.equal(deliveryStatusOf(msg), g);
});

t.test('base64: decoded to text, the decoded line breaks as they are', async (t) => {
  const b64 = Buffer.from(DSN, 'utf8').toString('base64').replace(/(.{76})/g, '$1\r\n');
  const msg = report(['Content-Type: multipart/report; boundary=b'], 'b', `${b64}\r\n`, ['Content-Transfer-Encoding: BASE64']);
  t.equal(deliveryStatusOf(msg), DSN);
  const lf = Buffer.from('Action: failed\nStatus: 5.1.1\n').toString('base64');
  t.equal(deliveryStatusOf(report(['Content-Type: multipart/report; boundary=b'], 'b', `${lf}\r\n`, ['Content-Transfer-Encoding: base64'])), 'Action: failed\nStatus: 5.1.1\n', 'bare LF stays bare LF: the DSN parser decides about it');
});

t.test('quoted-printable: soft line breaks removed, =XX decoded (UTF-8), hard line breaks kept, a stray = kept', async (t) => {
  const qp = crlf(['Reporting-MTA: dns; mx.example.net', '', 'Final-Recipient: rfc822; person1@example.com', 'Action: failed', 'Status: 5.1.1', 'Diagnostic-Code: smtp; 550 5.1.1 user unknown, caf=C3=A9 =3D a very long li=', 'ne and 5=25 =ZZ', '']);
  const msg = report(['Content-Type: multipart/report; boundary=q'], 'q', qp, ['Content-Transfer-Encoding: quoted-printable (a comment)']);
  t.equal(deliveryStatusOf(msg), crlf(['Reporting-MTA: dns; mx.example.net', '', 'Final-Recipient: rfc822; person1@example.com', 'Action: failed', 'Status: 5.1.1', 'Diagnostic-Code: smtp; 550 5.1.1 user unknown, café = a very long line and 5% =ZZ', '']));
});

t.test('7bit, 8bit and unknown encodings: the body as it is, line breaks untouched (a bare LF too)', async (t) => {
  const body = 'Action: failed\r\nStatus: 5.1.1\nDiagnostic-Code: smtp; 550 caf\u00e9\r\n';
  for (const cte of ['7bit', '8bit', 'binary', 'x-unknown']) t.equal(deliveryStatusOf(report(['Content-Type: multipart/report; boundary=b'], 'b', body, [`Content-Transfer-Encoding: ${cte}`])), body, cte);
});

t.test('a whole message whose own Content-Type is message/delivery-status', async (t) => {
  t.equal(deliveryStatusOf(crlf(['From: postmaster@example.net', 'Content-Type: message/delivery-status', '', 'Action: failed', 'Status: 4.4.7', ''])), 'Action: failed\r\nStatus: 4.4.7\r\n');
});

t.test('LF-only messages are read too (their line breaks stay LF)', async (t) => {
  const msg = report(['Content-Type: multipart/report; boundary=lf'], 'lf').replace(/\r\n/g, '\n');
  t.equal(deliveryStatusOf(msg), DSN.replace(/\r\n/g, '\n'));
});

t.test('CR-only (classic Mac) messages are read too (their line breaks stay CR); mixed line breaks', async (t) => {
  const msg = report(['Content-Type: multipart/report; boundary=cr'], 'cr').replace(/\r\n/g, '\r');
  t.equal(deliveryStatusOf(msg), DSN.replace(/\r\n/g, '\r'));
  const mixed = 'Content-Type: multipart/report;\n boundary=m\r\n\r--m\rContent-Type: message/delivery-status\n\r\nAction: failed\rStatus: 5.1.1\n--m--\r\n';
  t.equal(deliveryStatusOf(mixed), 'Action: failed\rStatus: 5.1.1');
});

t.test('no closing delimiter: the last part runs to the end', async (t) => {
  t.equal(deliveryStatusOf(crlf(['Content-Type: multipart/report; boundary=x', '', '--x', 'Content-Type: message/delivery-status', '', 'Action: failed', 'Status: 5.1.1'])), 'Action: failed\r\nStatus: 5.1.1');
});

t.test('null: not a MIME message, no such part, a DSN only inside the returned message, a bad multipart', async (t) => {
  t.equal(deliveryStatusOf(''), null);
  t.equal(deliveryStatusOf(DSN), null, 'a bare delivery-status body is not a whole message');
  t.equal(deliveryStatusOf(crlf(['From: MAILER-DAEMON@example.net', 'Subject: failure notice', '', 'Hi. This is the qmail-send program.', ''])), null, 'a plain-text bounce');
  t.equal(deliveryStatusOf(crlf(['Content-Type: multipart/mixed; boundary=m', '', '--m', 'Content-Type: text/plain', '', 'only text', '--m--'])), null);
  t.equal(deliveryStatusOf(crlf(['Content-Type: multipart/report', '', '--m', 'Content-Type: message/delivery-status', '', 'Action: failed', '--m--'])), null, 'no boundary parameter');
  t.equal(deliveryStatusOf(crlf(['Content-Type: multipart/report; boundary=""', '', '--', 'Content-Type: message/delivery-status', '', 'Action: failed', '----'])), null, 'an empty boundary');
  t.equal(deliveryStatusOf(crlf(['Content-Type: multipart/report; boundary=m', '', 'preamble only, no delimiter'])), null);
  const bounceOfBounce = crlf([
    'Content-Type: multipart/mixed; boundary=o',
    '',
    '--o',
    'Content-Type: text/plain',
    '',
    'Returned mail.',
    '--o',
    'Content-Type: message/rfc822',
    '',
    'Content-Type: multipart/report; boundary=i',
    '',
    '--i',
    'Content-Type: message/delivery-status',
    '',
    'Action: failed',
    '--i--',
    '--o--',
  ]);
  t.equal(deliveryStatusOf(bounceOfBounce), null, 'a report inside the returned original message is not this bounce\'s');
  for (const v of [undefined, null, 42, {}, ['x']]) t.equal(deliveryStatusOf(v as unknown as string), null, `not a string: ${JSON.stringify(v)}`);
});

t.test('textPartOf: a plain-text bounce\'s body, a headerless first part (qmail), a quoted-printable text part, none', async (t) => {
  t.equal(textPartOf(crlf(['From: MAILER-DAEMON@example.net', 'Subject: failure notice', '', '<person1@example.com>:', 'Sorry, no mailbox here by that name. (#5.1.1)', ''])), '<person1@example.com>:\r\nSorry, no mailbox here by that name. (#5.1.1)\r\n');
  const qmail = crlf([
    'From: MAILER-DAEMON@example.net',
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="1719382432example.net671472"',
    '',
    '--1719382432example.net671472',
    '',
    'Hi. This is the qmail-send program at example.net.',
    '',
    '<person1@example.com>:',
    'Sorry, no mailbox here by that name. (#5.1.1)',
    '',
    '--1719382432example.net671472',
    'Content-Type: message/rfc822',
    '',
    'From: person2@example.org',
    '',
    '--1719382432example.net671472--',
  ]);
  t.equal(textPartOf(qmail), 'Hi. This is the qmail-send program at example.net.\r\n\r\n<person1@example.com>:\r\nSorry, no mailbox here by that name. (#5.1.1)\r\n', 'a part without headers is text/plain, its first paragraph is not taken for headers');
  t.equal(deliveryStatusOf(qmail), null);
  t.equal(textPartOf(crlf(['Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: quoted-printable', '', 'Remote host said: 550 5.1.1 caf=C3=A9 us=', 'er unknown'])), 'Remote host said: 550 5.1.1 café user unknown');
  t.equal(textPartOf(crlf(['Content-Type: multipart/alternative; boundary=a', '', '--a', 'Content-Type: text/html', '', '<p>x</p>', '--a--'])), '');
  t.equal(textPartOf(crlf(['Content-Type: application/json', '', '{"bounce":1}'])), '', 'not text');
  t.equal(textPartOf(''), '');
  t.equal(textPartOf(7 as unknown as string), '');
});

t.test('hostile input in bounded time: long blank runs, many delimiters, many parts, deep nesting, huge headers', async (t) => {
  const MiB = 1024 * 1024;
  const cases: [string, string][] = [
    ['a 1 MiB run of blanks before a non-blank on a delimiter-like line', crlf(['Content-Type: multipart/report; boundary=b', '', `--b${' '.repeat(MiB)}x`, '--b--'])],
    ['a 1 MiB header of ( and ;', crlf([`Content-Type: multipart/report; boundary="${'(;'.repeat(MiB / 2)}`, `Content-Transfer-Encoding: ${'('.repeat(MiB)}`, '', 'x'])],
    ['100,000 empty parts', crlf(['Content-Type: multipart/mixed; boundary=b', '', ...Array.from({ length: 100_000 }, () => '--b'), '--b--'])],
    ['a nesting 10,000 deep', `${'Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n'.repeat(10_000)}Content-Type: message/delivery-status\r\n\r\nAction: failed`],
    ['1 MiB of = in a quoted-printable part', report(['Content-Type: multipart/report; boundary=q'], 'q', '='.repeat(MiB), ['Content-Transfer-Encoding: quoted-printable'])],
    ['1 MiB of LF', `Content-Type: multipart/report; boundary=b${'\n'.repeat(MiB)}`],
    ['1 MiB of CR', `Content-Type: multipart/report; boundary=b\r\n\r\n${'\r'.repeat(MiB)}`],
    ['100,000 LF-only lines (no CR anywhere)', `Content-Type: multipart/report; boundary=b\n\n${'--c\n'.repeat(100_000)}`],
    ['100,000 CR-only lines (no LF after the head)', `Content-Type: multipart/report; boundary=b\n\n${'--c\r'.repeat(100_000)}`],
  ];
  for (const [name, text] of cases) {
    const start = process.hrtime.bigint();
    const d = deliveryStatusOf(text);
    const s = textPartOf(text);
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    t.ok(d === null || typeof d === 'string', `${name}: a string or null`);
    t.type(s, 'string', `${name}: textPartOf a string`);
    t.ok(ms < 2000, `${name}: ${ms.toFixed(0)} ms`);
  }
  t.equal(deliveryStatusOf(cases[3]![1]), null, 'beyond the depth cap nothing is found');
});


t.test('fuzz: mutated bounces never throw and give a string or null; an untouched one gives its DSN', async (t) => {
  const base = [
    report(['Content-Type: multipart/report; report-type=delivery-status; boundary="B1"'], 'B1'),
    report(['Content-Type: multipart/report; boundary=q'], 'q', 'Action: fai=\r\nled\r\nStatus: 5.1.1=0D=0A', ['Content-Transfer-Encoding: quoted-printable']),
    report(['Content-Type: multipart/report; boundary=b'], 'b', `${Buffer.from(DSN).toString('base64')}\r\n`, ['Content-Transfer-Encoding: base64']),
  ];
  t.equal(deliveryStatusOf(base[0]!), DSN);
  const tokens = ['\r\n', '\n', '\r', ' ', '\t', '--', '--B1', '--q', '--b', '"', ';', ':', '=', '\\', 'boundary=', 'Content-Type: ', 'multipart/', 'message/delivery-status', '\r\n\r\n', '(', ')', '\u0000', '\u00e9', '\ud800', '=\r\n', '=0'];
  let runs = 0;
  for (let seed = 1; seed <= 300; seed++) {
    const r = seededRandom(seed);
    let s = base[seed % base.length]!;
    const edits = 1 + Math.floor(r() * 12);
    for (let k = 0; k < edits; k++) {
      const at = Math.floor(r() * (s.length + 1));
      const op = r();
      if (op < 0.4) s = s.slice(0, at) + tokens[Math.floor(r() * tokens.length)]! + s.slice(at);
      else if (op < 0.7) s = s.slice(0, at) + s.slice(at + 1 + Math.floor(r() * 20));
      else if (op < 0.85) s = s.slice(0, at) + s.slice(Math.floor(r() * s.length));
      else s = s.slice(0, at) + String.fromCharCode(Math.floor(r() * 0x10000)) + s.slice(at + 1);
    }
    let d: unknown;
    let p: unknown;
    try {
      d = deliveryStatusOf(s);
      p = textPartOf(s);
    } catch (e) {
      t.fail(`seed ${seed} threw ${String(e)}`);
      continue;
    }
    if (!(d === null || typeof d === 'string') || typeof p !== 'string') t.fail(`seed ${seed}: ${typeof d} ${typeof p}`);
    runs++;
  }
  t.equal(runs, 300);
});
