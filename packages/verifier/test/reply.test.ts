// Byte-exact fixtures for the SMTP reply parser: RFC 5321 4.2 replies, RFC 3463
// enhanced codes, chunking, the byte cap, and the CR/LF lock on outgoing commands.

import t from 'tap';
import { isDeepStrictEqual } from 'node:util';
import { command, decodeReplyLine, ehloKeywords, formatReply, MAX_REPLY_BYTES, parseReply, ReplyReader, SmtpProtocolError } from '../src/smtp/reply.ts';
import { classifyRcpt } from '../src/smtp/classify.ts';
import type { SmtpReply } from '../src/types.ts';

/** Feeds `data` to a fresh reader in the given chunk sizes (cycled) and collects every reply. */
function feed(data: string, sizes: number[] = [data.length]): SmtpReply[] {
  const reader = new ReplyReader();
  const out: SmtpReply[] = [];
  let i = 0;
  let k = 0;
  while (i < data.length) {
    const n = Math.max(1, sizes[k++ % sizes.length] ?? 1);
    out.push(...reader.push(data.slice(i, i + n)));
    i += n;
  }
  return out;
}

const protocolError = (fn: () => unknown, message: string) => {
  try {
    fn();
  } catch (err) {
    return err instanceof SmtpProtocolError && err.message === message ? true : `threw ${String(err)}`;
  }
  return 'did not throw';
};

t.test('single-line replies', async (t) => {
  t.strictSame(parseReply(['220 mx.example.com ESMTP Postfix']), {
    code: 220,
    text: 'mx.example.com ESMTP Postfix',
    lines: ['220 mx.example.com ESMTP Postfix'],
  });
  t.strictSame(parseReply(['250 2.1.5 Ok']), { code: 250, enhanced: '2.1.5', text: 'Ok', lines: ['250 2.1.5 Ok'] });
  // A bare code with no text is a complete reply (RFC 5321 4.2: text is optional).
  t.strictSame(parseReply(['250']), { code: 250, text: '', lines: ['250'] });
  t.strictSame(parseReply(['221 ']), { code: 221, text: '', lines: ['221 '] });
  // An enhanced code alone, with no text after it.
  t.strictSame(parseReply(['550 5.1.1']), { code: 550, enhanced: '5.1.1', text: '', lines: ['550 5.1.1'] });
  // Three-digit enhanced detail (5.7.26 DMARC, 5.1.10 null MX).
  t.strictSame(parseReply(['550 5.7.26 Unauthenticated email is not accepted']), {
    code: 550,
    enhanced: '5.7.26',
    text: 'Unauthenticated email is not accepted',
    lines: ['550 5.7.26 Unauthenticated email is not accepted'],
  });
  t.equal(parseReply(['550 5.1.10 RESOLVER.ADR.RecipientNotFound; not found']).enhanced, '5.1.10');
  // The text keeps its own inner spacing; only the separator after the enhanced code goes.
  t.equal(parseReply(['550 5.1.1   <x@y.test>:  no  such user']).text, '<x@y.test>:  no  such user');
  t.equal(parseReply(['450 4.2.0 <a@b.test>: Recipient address rejected: Greylisted']).enhanced, '4.2.0');
});

t.test('enhanced codes only when the class digit agrees with the reply code', async (t) => {
  t.strictSame(parseReply(['550 4.1.1 odd server']), { code: 550, text: '4.1.1 odd server', lines: ['550 4.1.1 odd server'] });
  t.strictSame(parseReply(['250 5.0.0 not really']), { code: 250, text: '5.0.0 not really', lines: ['250 5.0.0 not really'] });
  t.strictSame(parseReply(['451 2.0.0 hmm']), { code: 451, text: '2.0.0 hmm', lines: ['451 2.0.0 hmm'] });
  // Not an enhanced code: a version number, an IP address, a code glued to text, a 3.x.x class.
  t.equal(parseReply(['550 5.1.1a mail']).enhanced, undefined);
  t.equal(parseReply(['220 smtp ready 2.0.0']).enhanced, undefined);
  t.equal(parseReply(['550 5.1.1.1 address']).enhanced, undefined);
  t.equal(parseReply(['354 3.0.0 go ahead']).enhanced, undefined);
  t.equal(parseReply(['354 3.0.0 go ahead']).text, '3.0.0 go ahead');
  t.equal(parseReply(['550 5.1234.1 x']).enhanced, undefined);
});

t.test("qmail's enhanced code last, in brackets, when none starts the text", async (t) => {
  t.strictSame(parseReply(['511 sorry, no mailbox here by that name (#5.1.1 - chkuser)']), { code: 511, enhanced: '5.1.1', text: 'sorry, no mailbox here by that name (#5.1.1 - chkuser)', lines: ['511 sorry, no mailbox here by that name (#5.1.1 - chkuser)'] });
  t.equal(parseReply(["553 sorry, that domain isn't in my list of allowed rcpthosts (#5.7.1)"]).enhanced, '5.7.1');
  t.equal(parseReply(['451 qq temporary problem (#4.3.0)']).enhanced, '4.3.0');
  t.equal(parseReply(['550-first line', '550 sorry, no such user (#5.1.1)']).enhanced, '5.1.1', 'on the last line');
  // One at the start wins; the class digit must agree; only at the very end, in brackets with a '#'.
  t.equal(parseReply(['550 5.7.1 blocked (#5.1.1)']).enhanced, '5.7.1');
  t.equal(parseReply(['550 sorry (#4.1.1)']).enhanced, undefined);
  t.equal(parseReply(['550 sorry (#5.1.1) and more']).enhanced, undefined);
  t.equal(parseReply(['550 sorry (5.1.1)']).enhanced, undefined);
  t.equal(parseReply(['550 see #5.1.1']).enhanced, undefined);
});

t.test("Cisco's enhanced code with a leading '#'", async (t) => {
  t.strictSame(parseReply(['550 #5.1.0 Address rejected.']), { code: 550, enhanced: '5.1.0', text: 'Address rejected.', lines: ['550 #5.1.0 Address rejected.'] });
  t.strictSame(parseReply(['452 #4.3.0 Temporary failure']), { code: 452, enhanced: '4.3.0', text: 'Temporary failure', lines: ['452 #4.3.0 Temporary failure'] });
  t.equal(parseReply(['550-#5.1.0 Address', '550 #5.1.0 rejected.']).text, 'Address\nrejected.');
  t.equal(parseReply(['550 #5.1.0']).enhanced, '5.1.0');
  // Only one '#', only at the start, and the class digit must agree as for the plain form.
  t.equal(parseReply(['550 ##5.1.0 x']).enhanced, undefined);
  t.equal(parseReply(['550 # 5.1.0 x']).enhanced, undefined);
  t.equal(parseReply(['550 #4.1.0 x']).enhanced, undefined);
  t.equal(parseReply(['550 #4.1.0 x']).text, '#4.1.0 x');
  t.equal(parseReply(['550 #5.1.0x rejected']).enhanced, undefined);
});

t.test('multi-line replies', async (t) => {
  const ehlo = ['250-mx.example.com Hello client.test [192.0.2.1]', '250-SIZE 52428800', '250-8BITMIME', '250-PIPELINING', '250-STARTTLS', '250-ENHANCEDSTATUSCODES', '250 SMTPUTF8'];
  t.strictSame(parseReply(ehlo), {
    code: 250,
    text: 'mx.example.com Hello client.test [192.0.2.1]\nSIZE 52428800\n8BITMIME\nPIPELINING\nSTARTTLS\nENHANCEDSTATUSCODES\nSMTPUTF8',
    lines: ehlo,
  });
  // Gmail style: the enhanced code repeated on every line, stripped from every line, kept once.
  const gmail = [
    "550-5.1.1 The email account that you tried to reach does not exist. Please try",
    '550-5.1.1 double-checking the recipient\'s email address for typos or',
    '550 5.1.1 unnecessary spaces. https://support.google.com/mail/?p=NoSuchUser x1si.2 - gsmtp',
  ];
  t.strictSame(parseReply(gmail), {
    code: 550,
    enhanced: '5.1.1',
    text: "The email account that you tried to reach does not exist. Please try\ndouble-checking the recipient's email address for typos or\nunnecessary spaces. https://support.google.com/mail/?p=NoSuchUser x1si.2 - gsmtp",
    lines: gmail,
  });
  // The first enhanced code wins; lines without one keep their text.
  const mixed = ['421-4.7.0 Try again later,', '421-closing connection.', '421 4.7.1 bye'];
  t.strictSame(parseReply(mixed), { code: 421, enhanced: '4.7.0', text: 'Try again later,\nclosing connection.\nbye', lines: mixed });
  // A bare "250-" continuation line with no text.
  t.strictSame(parseReply(['250-', '250 ok']), { code: 250, text: '\nok', lines: ['250-', '250 ok'] });
  // The returned lines are a copy, not the caller's array.
  const input = ['250 ok'];
  const r = parseReply(input);
  input.push('mutated');
  t.strictSame(r.lines, ['250 ok']);
});

t.test('malformed replies throw SmtpProtocolError', async (t) => {
  t.equal(protocolError(() => parseReply([]), 'empty reply'), true);
  t.equal(protocolError(() => parseReply(['hello']), 'malformed reply line'), true);
  t.equal(protocolError(() => parseReply(['25 ok']), 'malformed reply line'), true);
  t.equal(protocolError(() => parseReply(['']), 'malformed reply line'), true);
  t.equal(protocolError(() => parseReply(['2x0 ok']), 'malformed reply line'), true);
  t.equal(protocolError(() => parseReply(['250-first', '550 second']), 'reply code changed inside a multi-line reply'), true);
  t.equal(protocolError(() => parseReply(['250-first', 'oops']), 'malformed reply line'), true);
  // Continuation misuse: a '-' on the last line, or a ' ' before the last line.
  t.equal(protocolError(() => parseReply(['250-only']), 'multi-line reply continuation out of place'), true);
  t.equal(protocolError(() => parseReply(['250 first', '250 second']), 'multi-line reply continuation out of place'), true);
  t.equal(protocolError(() => parseReply(['250-a', '250 b', '250 c']), 'multi-line reply continuation out of place'), true);
  // Codes outside 2xx-5xx are not replies to anything we send.
  t.equal(protocolError(() => parseReply(['199 hm']), 'reply code out of range'), true);
  t.equal(protocolError(() => parseReply(['600 hm']), 'reply code out of range'), true);
  t.equal(protocolError(() => parseReply(['000']), 'reply code out of range'), true);
  // The detail is the offending line, cut at 200 characters.
  try {
    parseReply([`x${'y'.repeat(500)}`]);
    t.fail('should throw');
  } catch (err) {
    t.ok(err instanceof SmtpProtocolError);
    t.equal((err as SmtpProtocolError).detail, `x${'y'.repeat(199)}`);
  }
});

t.test('ReplyReader: byte-exact chunking', async (t) => {
  const wire =
    '220 mx.example.com ESMTP\r\n' +
    '250-mx.example.com\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250 ENHANCEDSTATUSCODES\r\n' +
    '250 2.1.0 Sender OK\r\n' +
    '550-5.1.1 No such\r\n550 5.1.1 user here\r\n' +
    '221 2.0.0 Bye\r\n';
  const expected: SmtpReply[] = [
    { code: 220, text: 'mx.example.com ESMTP', lines: ['220 mx.example.com ESMTP'] },
    { code: 250, text: 'mx.example.com\nPIPELINING\nSIZE 10240000\nENHANCEDSTATUSCODES', lines: ['250-mx.example.com', '250-PIPELINING', '250-SIZE 10240000', '250 ENHANCEDSTATUSCODES'] },
    { code: 250, enhanced: '2.1.0', text: 'Sender OK', lines: ['250 2.1.0 Sender OK'] },
    { code: 550, enhanced: '5.1.1', text: 'No such\nuser here', lines: ['550-5.1.1 No such', '550 5.1.1 user here'] },
    { code: 221, enhanced: '2.0.0', text: 'Bye', lines: ['221 2.0.0 Bye'] },
  ];
  // Several replies in one chunk.
  t.strictSame(feed(wire), expected);
  // One byte at a time: CR and LF split apart, codes split apart.
  t.strictSame(feed(wire, [1]), expected);
  // Arbitrary uneven chunk boundaries.
  for (const sizes of [[2], [3], [5, 1, 7], [13, 2], [31], [64, 1]]) t.strictSame(feed(wire, sizes), expected, `chunks ${sizes.join(',')}`);
  // Every split point in two.
  for (let cut = 1; cut < wire.length; cut++) {
    const reader = new ReplyReader();
    const got = [...reader.push(wire.slice(0, cut)), ...reader.push(wire.slice(cut))];
    if (!isDeepStrictEqual(got, expected)) {
      t.fail(`split at ${cut}`);
      break;
    }
  }
  t.pass('every two-way split parses identically');
});

t.test('ReplyReader: a reply is returned only once its last line is complete', async (t) => {
  const reader = new ReplyReader();
  t.strictSame(reader.push('250-first\r\n'), []);
  t.strictSame(reader.push('250 last'), []);
  t.strictSame(reader.push('\r'), []);
  t.strictSame(reader.push('\n'), [{ code: 250, text: 'first\nlast', lines: ['250-first', '250 last'] }]);
  t.strictSame(reader.push(''), []);
  t.strictSame(reader.push('354 go\r\n'.slice(0, 0)), []);
});

t.test('ReplyReader: bare LF endings and mixed endings', async (t) => {
  t.strictSame(feed('250-a\n250 b\n220 c\r\n'), [
    { code: 250, text: 'a\nb', lines: ['250-a', '250 b'] },
    { code: 220, text: 'c', lines: ['220 c'] },
  ]);
  t.strictSame(feed('250-a\n250 b\n', [1]), [{ code: 250, text: 'a\nb', lines: ['250-a', '250 b'] }]);
  // Only one trailing CR is part of the line ending.
  t.equal(protocolError(() => feed('250 ok\r\r\n'), 'malformed reply line'), true);
});

t.test('ReplyReader: malformed input throws', async (t) => {
  t.equal(protocolError(() => feed('hello there\r\n'), 'malformed reply line'), true);
  t.equal(protocolError(() => feed('250-one\r\n550 two\r\n'), 'reply code changed inside a multi-line reply'), true);
  t.equal(protocolError(() => feed('250-one\r\n550 two\r\n', [1]), 'reply code changed inside a multi-line reply'), true);
  t.equal(protocolError(() => feed('\r\n'), 'malformed reply line'), true);
  t.equal(protocolError(() => feed('600 nope\r\n'), 'reply code out of range'), true);
  // A good reply before the bad one in the same chunk does not hide the error.
  t.equal(protocolError(() => feed('250 ok\r\nbad\r\n'), 'malformed reply line'), true);
  // A reply whose continuation is "garbage-" keeps going; the terminating line exposes it.
  t.equal(protocolError(() => feed('abc-def\r\n250 ok\r\n'), 'malformed reply line'), true);
});

t.test('ReplyReader: MAX_REPLY_BYTES cap', async (t) => {
  t.equal(MAX_REPLY_BYTES, 16384);
  // Exactly at the cap: accepted.
  const filler = 'x'.repeat(MAX_REPLY_BYTES - '250 \r\n'.length);
  const atCap = `250 ${filler}\r\n`;
  t.equal(atCap.length, MAX_REPLY_BYTES);
  const ok = feed(atCap);
  t.equal(ok.length, 1);
  t.equal(ok[0]?.text.length, filler.length);
  t.equal(feed(atCap, [1000]).length, 1);
  // One byte over: refused, whether in one chunk or many.
  const over = `250 x${filler}\r\n`;
  t.equal(protocolError(() => feed(over), 'reply too long'), true);
  t.equal(protocolError(() => feed(over, [1000]), 'reply too long'), true);
  // A line that never ends is refused as soon as it passes the cap, before any newline arrives.
  const reader = new ReplyReader();
  t.strictSame(reader.push(`250 ${'y'.repeat(MAX_REPLY_BYTES - 4)}`), []);
  t.equal(protocolError(() => reader.push('y'), 'reply too long'), true);
  // A multi-line reply is capped as a whole, not per line.
  const manyLines = Array.from({ length: 400 }, (_, i) => `250-${'k'.repeat(40)}${i}\r\n`).join('') + '250 end\r\n';
  t.ok(manyLines.length > MAX_REPLY_BYTES);
  t.equal(protocolError(() => feed(manyLines, [512]), 'reply too long'), true);
  // The cap is per reply: many large replies in a row are fine, in separate chunks or in one.
  const big = `250 ${'z'.repeat(10_000)}\r\n`;
  const r2 = new ReplyReader();
  let n = 0;
  for (let i = 0; i < 5; i++) n += r2.push(big).length;
  t.equal(n, 5);
  t.equal(feed(big + big + big).length, 3);
  t.equal(feed(big + big, [7000]).length, 2);
});

t.test('decoding: UTF-8 when valid, else Windows-1252 (Latin-1), per line, never lost', async (t) => {
  const bytes = (...parts: Array<string | number[]>): Buffer => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));
  // "550 Benutzer unbekannt / Empfänger unbekannt" as a German server sends it in Latin-1: ä is 0xE4.
  const latin1 = bytes('550 Empf', [0xe4], 'nger unbekannt\r\n');
  t.strictSame(new ReplyReader().push(latin1), [{ code: 550, text: 'Empfänger unbekannt', lines: ['550 Empfänger unbekannt'] }]);
  // The same in UTF-8: ä is 0xC3 0xA4.
  const utf8 = bytes('550 Empf', [0xc3, 0xa4], 'nger unbekannt\r\n');
  t.strictSame(new ReplyReader().push(utf8), [{ code: 550, text: 'Empfänger unbekannt', lines: ['550 Empfänger unbekannt'] }]);
  // Split inside the two UTF-8 bytes, and byte by byte: the line is decoded only once complete.
  for (let cut = 1; cut < utf8.length; cut++) {
    const r = new ReplyReader();
    const got = [...r.push(utf8.subarray(0, cut)), ...r.push(utf8.subarray(cut))];
    if (got[0]?.text !== 'Empfänger unbekannt') t.fail(`split at ${cut}: ${got[0]?.text}`);
  }
  const one = new ReplyReader();
  const got = [...utf8].flatMap((b) => one.push(Uint8Array.of(b)));
  t.equal(got[0]?.text, 'Empfänger unbekannt');
  // Windows-1252 beyond Latin-1: the curly apostrophe 0x92 of "n’existe pas", é 0xE9.
  const cp1252 = bytes('550 5.1.1 L', [0x92], 'utilisateur n', [0x92], 'existe pas (d', [0xe9], 'sol', [0xe9], ')\r\n');
  t.equal(new ReplyReader().push(cp1252)[0]?.text, 'L’utilisateur n’existe pas (désolé)');
  t.equal(decodeReplyLine(bytes('550 ', [0x80, 0x93], 'x', [0x94, 0x96, 0x9f])), '550 €“x”–Ÿ');
  // Each line on its own: a UTF-8 first line and a Latin-1 second line in one reply.
  const mixed = bytes('550-5.1.1 Usu', [0xc3, 0xa1], 'rio desconhecido\r\n', '550 5.1.1 Utilisateur inconnu (d', [0xe9], 'sol', [0xe9], ')\r\n');
  t.strictSame(new ReplyReader().push(mixed)[0]?.lines, ['550-5.1.1 Usuário desconhecido', '550 5.1.1 Utilisateur inconnu (désolé)']);
  // Real multi-byte scripts in UTF-8.
  t.equal(new ReplyReader().push(Buffer.from('550 Пользователь не найден\r\n', 'utf8'))[0]?.text, 'Пользователь не найден');
  t.equal(new ReplyReader().push(Buffer.from('550 5.1.1 用户不存在\r\n', 'utf8'))[0]?.text, '用户不存在');
  // Invalid UTF-8 (a lone continuation byte, a truncated sequence, an overlong form) never throws
  // and keeps one character per byte: nothing is dropped or replaced by U+FFFD.
  for (const bad of [[0x80], [0xc3], [0xe6, 0x88], [0xc0, 0xaf], [0xff, 0xfe], [0x81, 0x8d, 0x8f, 0x90, 0x9d]]) {
    const line = bytes('550 x', bad, 'y');
    const text = decodeReplyLine(line);
    t.equal(text.length, line.length, `one character per byte: ${bad.join(',')}`);
    t.notOk(text.includes('\ufffd'), `no replacement character: ${bad.join(',')}`);
    t.ok(text.startsWith('550 x') && text.endsWith('y'));
  }
  // Every byte value from 0x20 to 0xFF decodes (Latin-1's printable range maps to itself).
  const all = Buffer.from(Array.from({ length: 0xe0 }, (_, i) => i + 0x20));
  const text = decodeReplyLine(all);
  t.equal(text.length, all.length);
  for (let b = 0xa0; b <= 0xff; b++) if (text.charCodeAt(b - 0x20) !== b) t.fail(`byte ${b.toString(16)} is not U+00${b.toString(16)}`);
  // ASCII stays ASCII; a string pushed in is taken as its UTF-8 bytes.
  t.equal(decodeReplyLine(Buffer.from('250 2.1.5 Ok')), '250 2.1.5 Ok');
  t.equal(new ReplyReader().push('550 Empfänger unbekannt\r\n')[0]?.text, 'Empfänger unbekannt');
  // The decoded text is what the classifier reads: the Latin-1 reply is a rejection.
  t.equal(classifyRcpt(new ReplyReader().push(bytes('550 Benutzer unbekannt: Empf', [0xe4], 'nger existiert nicht\r\n'))[0]!), 'rejected');
});

t.test('decoding: the cap counts bytes, not characters', async (t) => {
  // 5,461 three-byte characters (16,383 bytes + '550 ' + CRLF) is over the cap though it is
  // far fewer characters.
  const line = `550 ${'不'.repeat(5461)}\r\n`;
  t.ok(line.length < MAX_REPLY_BYTES);
  t.ok(Buffer.byteLength(line) > MAX_REPLY_BYTES);
  t.equal(protocolError(() => new ReplyReader().push(Buffer.from(line, 'utf8')), 'reply too long'), true);
  // At the cap exactly, in Latin-1 bytes: accepted.
  const filler = Buffer.alloc(MAX_REPLY_BYTES - '550 \r\n'.length, 0xe4);
  const atCap = Buffer.concat([Buffer.from('550 '), filler, Buffer.from('\r\n')]);
  t.equal(atCap.length, MAX_REPLY_BYTES);
  const r = new ReplyReader().push(atCap);
  t.equal(r[0]?.text, 'ä'.repeat(filler.length));
});

t.test('formatReply', async (t) => {
  t.equal(formatReply(parseReply(['250 2.1.5 Ok'])), '250 2.1.5 Ok');
  t.equal(formatReply(parseReply(['250 Ok'])), '250 Ok');
  t.equal(formatReply(parseReply(['250'])), '250');
  t.equal(formatReply(parseReply(['550 5.1.1'])), '550 5.1.1');
  t.equal(
    formatReply(parseReply(['550-5.1.1 The email account that you tried to reach', '550-5.1.1   does not exist.  ', '550 5.1.1 gsmtp'])),
    '550 5.1.1 The email account that you tried to reach does not exist. gsmtp',
  );
  // Empty lines are dropped, not rendered as double spaces.
  t.equal(formatReply(parseReply(['421-', '421-4.7.0 closing', '421 '])), '421 4.7.0 closing');
  t.equal(formatReply({ code: 554, text: 'a\n\n b \nc', lines: [] }), '554 a b c');
});

t.test('ehloKeywords', async (t) => {
  const reply = parseReply(['250-mx.example.com at your service', '250-SIZE 35882577', '250-8BITMIME', '250-starttls', '250-AUTH LOGIN PLAIN', '250-ENHANCEDSTATUSCODES', '250-PIPELINING', '250-CHUNKING', '250 SMTPUTF8']);
  t.strictSame([...ehloKeywords(reply)], ['SIZE', '8BITMIME', 'STARTTLS', 'AUTH', 'ENHANCEDSTATUSCODES', 'PIPELINING', 'CHUNKING', 'SMTPUTF8']);
  // The greeting line is never a keyword, even when it looks like one.
  t.strictSame([...ehloKeywords(parseReply(['250 STARTTLS']))], []);
  t.strictSame([...ehloKeywords(parseReply(['250-hi', '250-', '250   PIPELINING  ']))], ['PIPELINING']);
  t.equal(ehloKeywords(parseReply(['250-hi', '250 SMTPUTF8'])).has('SMTPUTF8'), true);
  t.equal(ehloKeywords(parseReply(['250-hi', '250 SMTPUTF8'])).has('STARTTLS'), false);
});

t.test('command', async (t) => {
  t.equal(command('QUIT'), 'QUIT\r\n');
  t.equal(command('RCPT TO:', '<a@b.test>'), 'RCPT TO:<a@b.test>\r\n');
  t.equal(command('MAIL FROM:<probe@verifier.test> SMTPUTF8'), 'MAIL FROM:<probe@verifier.test> SMTPUTF8\r\n');
  t.equal(command('RCPT TO:', '<josé@b.test>'), 'RCPT TO:<josé@b.test>\r\n');
  for (const bad of ['<a@b.test>\r\nDATA', '<a@b.test>\nRSET', '<a@b.test>\r', 'a\0b@b.test']) {
    t.equal(protocolError(() => command('RCPT TO:', bad), 'refusing to send a command with a line break'), true, JSON.stringify(bad));
  }
  t.equal(protocolError(() => command('RCPT TO:<a@b.test>\r\nDATA'), 'refusing to send a command with a line break'), true);
  t.equal(protocolError(() => command('\n'), 'refusing to send a command with a line break'), true);
  try {
    command('RCPT TO:', 'x\r\n');
  } catch (err) {
    t.equal((err as SmtpProtocolError).detail, 'RCPT TO:');
  }
});
