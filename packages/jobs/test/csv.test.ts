// The CSV reader (csv/csv.ts): exact rows, exact codes and messages for each rule of
// docs/decisions/jobs-and-csv.md, "CSV", and the same answer however the bytes arrive (one buffer,
// one byte at a time, tiny chunks of rows).

import t, { type Test } from 'tap';
import { formatCell, MAX_FIELD_CHARS, MAX_RECORD_BYTES, readCsv, serializeFields, type CsvChunk, type CsvFailure, type ReadCsvOptions } from '../src/csv/csv.ts';

interface Read {
  header?: string[];
  delimiter?: string;
  bom?: boolean;
  rows: string[][];
  emails: string[];
  indexes: number[];
  chunks: number;
  error?: CsvFailure;
}

/** Splits `bytes` into pieces of the given sizes (cycled), as a file stream would deliver them. */
function pieces(bytes: Buffer, sizes: number[]): Buffer[] {
  const out: Buffer[] = [];
  let k = 0;
  for (let i = 0; i < bytes.length; ) {
    const n = Math.max(1, sizes[k++ % sizes.length]!);
    out.push(bytes.subarray(i, i + n));
    i += n;
  }
  return out;
}

async function read(input: string | Buffer, opts: Partial<ReadCsvOptions> = {}, sizes?: number[]): Promise<Read> {
  const bytes = typeof input === 'string' ? Buffer.from(input, 'utf8') : input;
  const source = sizes ? pieces(bytes, sizes) : [bytes];
  const out: Read = { rows: [], emails: [], indexes: [], chunks: 0 };
  for await (const c of readCsv(source, { emailColumn: 'email', ...opts })) {
    if (!c.ok) {
      out.error = c;
      break;
    }
    const chunk: CsvChunk = c;
    out.chunks++;
    out.header = chunk.header;
    out.delimiter = chunk.delimiter;
    out.bom = chunk.bom;
    for (const r of chunk.rows) {
      out.rows.push(r.fields);
      out.emails.push(r.email);
      out.indexes.push(r.index);
    }
  }
  return out;
}

/** The same input read whole, a byte at a time, in odd pieces, and one row per chunk, must agree. */
async function readEveryWay(t: Test, input: string | Buffer, opts: Partial<ReadCsvOptions> = {}): Promise<Read> {
  const whole = await read(input, opts);
  for (const [sizes, chunkRows] of [[[1], undefined], [[3, 1, 7], 1], [[64], 2]] as const) {
    const other = await read(input, { ...opts, ...(chunkRows ? { chunkRows } : {}) }, [...sizes]);
    t.same({ ...other, chunks: 0 }, { ...whole, chunks: 0 }, `same result with pieces of ${sizes.join('/')} and chunkRows ${chunkRows ?? 'default'}`);
  }
  return whole;
}

t.test('RFC 4180: quoted fields with commas, embedded newlines and doubled quotes', async (t) => {
  const csv = 'name,email,note\r\n"Doe, Jane",jane@example.com,"line one\r\nline two"\r\n"Say ""hi""",bob@example.com,"a\nb"\r\n';
  const r = await readEveryWay(t, csv);
  t.same(r.header, ['name', 'email', 'note']);
  t.equal(r.delimiter, ',');
  t.same(r.rows, [
    ['Doe, Jane', 'jane@example.com', 'line one\r\nline two'],
    ['Say "hi"', 'bob@example.com', 'a\nb'],
  ]);
  t.same(r.emails, ['jane@example.com', 'bob@example.com']);
  t.same(r.indexes, [0, 1]);
  t.equal(r.error, undefined);
});

t.test('UTF-8 BOM is stripped and reported; CRLF and LF give the same rows; no final line end', async (t) => {
  const lf = 'Email,City\na@x.io,Zürich\nb@x.io,Kraków';
  const crlf = lf.replaceAll('\n', '\r\n');
  const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(crlf)]);
  const a = await readEveryWay(t, lf);
  const b = await readEveryWay(t, crlf);
  const c = await readEveryWay(t, withBom);
  const rows = [
    ['a@x.io', 'Zürich'],
    ['b@x.io', 'Kraków'],
  ];
  t.same(a.rows, rows);
  t.same(b.rows, rows);
  t.same(c.rows, rows);
  t.same(c.header, ['Email', 'City'], 'the BOM is not part of the first column name');
  t.equal(a.bom, false);
  t.equal(c.bom, true);
});

t.test('mixed LF and CRLF in one file, and classic Mac CR line ends', async (t) => {
  const mixed = await readEveryWay(t, 'email,n\r\na@x.io,1\nb@x.io,2\r\n');
  t.same(mixed.rows, [['a@x.io', '1'], ['b@x.io', '2']]);
  const cr = await readEveryWay(t, 'email,n\ra@x.io,1\r"b@x.io","x\ry"\r');
  t.same(cr.rows, [['a@x.io', '1'], ['b@x.io', 'x\ry']]);
});

t.test('delimiter detection from the header, outside quotes: semicolon, tab, comma, sep= line', async (t) => {
  const semi = await readEveryWay(t, 'Name;"E-mail, work";email\n"Doe; J";x;a@x.io\n');
  t.equal(semi.delimiter, ';', 'two semicolons outside quotes beat the comma inside them');
  t.same(semi.rows, [['Doe; J', 'x', 'a@x.io']]);
  const tab = await readEveryWay(t, 'email\tname, first\tcity\na@x.io\tJo, Al\tRome\n');
  t.equal(tab.delimiter, '\t');
  t.same(tab.rows, [['a@x.io', 'Jo, Al', 'Rome']]);
  const single = await readEveryWay(t, 'email\na@x.io\n');
  t.equal(single.delimiter, ',', 'one column: comma');
  t.same(single.rows, [['a@x.io']]);
  const excel = await readEveryWay(t, 'sep=;\r\nemail;name\r\na@x.io;Jo, Al\r\n');
  t.equal(excel.delimiter, ';');
  t.same(excel.header, ['email', 'name']);
  t.same(excel.rows, [['a@x.io', 'Jo, Al']]);
});

t.test('email column: exact match first, then case-insensitive and trimmed; the email cell is trimmed', async (t) => {
  const ci = await read('Name, E-Mail ,x\nJo,  a@x.io \t,1\n', { emailColumn: 'e-mail' });
  t.same(ci.emails, ['a@x.io']);
  t.same(ci.rows, [['Jo', '  a@x.io \t', '1']], 'the input cell itself is kept as it was');
  const exact = await read('EMAIL,email\nA@x.io,b@x.io\n', { emailColumn: 'email' });
  t.same(exact.emails, ['b@x.io'], 'the exact match wins over an earlier case-insensitive one');
  const first = await read('EMAIL,Email\nA@x.io,b@x.io\n', { emailColumn: 'email' });
  t.same(first.emails, ['A@x.io'], 'several case-insensitive matches: the first');
});

t.test('email column not found: a coded error listing the columns', async (t) => {
  const r = await read('name,mail\nJo,a@x.io\n', { emailColumn: 'email' });
  t.same(r.error, { ok: false, code: 'email_column_not_found', message: 'email_column "email" is not a column of the CSV header (columns: "name", "mail")' });
  t.equal(r.chunks, 0);
});

t.test('empty file, blank lines only, header only → invalid_csv', async (t) => {
  const empty = { ok: false, code: 'invalid_csv', message: 'the file is empty: a header row naming the columns is required' };
  t.same((await read('')).error, empty);
  t.same((await read(Buffer.from([0xef, 0xbb, 0xbf]))).error, empty);
  t.same((await read('\r\n\n\r\n')).error, empty);
  t.same((await read('email,name\r\n')).error, { ok: false, code: 'invalid_csv', message: 'the CSV has a header row but no data rows' });
  t.same((await read('email,name')).error, { ok: false, code: 'invalid_csv', message: 'the CSV has a header row but no data rows' });
  t.same((await read('email,name\n\n\r\n')).error, { ok: false, code: 'invalid_csv', message: 'the CSV has a header row but no data rows' }, 'blank lines are not rows');
});

t.test('blank lines before the header and between rows are skipped; a row of empty cells is a row', async (t) => {
  const r = await readEveryWay(t, '\n\r\nemail,n\n\na@x.io,1\n\n,\nb@x.io,2\n');
  t.same(r.rows, [['a@x.io', '1'], ['', ''], ['b@x.io', '2']]);
  t.same(r.indexes, [0, 1, 2]);
});

t.test('broken quoting → invalid_csv with the line', async (t) => {
  t.same((await read('email,n\na@x.io,"open\nb@x.io,2\n')).error, {
    ok: false,
    code: 'invalid_csv',
    message: 'line 2: a quoted field is never closed (a field that starts with " must end with "; a " inside it is written "")',
    line: 2,
  });
  t.same((await read('email,n\na@x.io,1\nb@x.io,"x"y\n')).error, {
    ok: false,
    code: 'invalid_csv',
    message: 'line 3: a quoted field is followed by other characters before the next delimiter (write " inside a quoted field as "")',
    line: 3,
  });
  t.same((await read('email,n\na@x.io,1\nb@x.io,1\nc@x.io,5" screen\n')).error, {
    ok: false,
    code: 'invalid_csv',
    message: 'line 4: a " inside an unquoted field (quote the whole field and double the quote: "5"" screen")',
    line: 4,
  });
  // The same errors whatever the chunking (the splitter miscounts quotes past a stray one).
  for (const chunkRows of [1, 2]) {
    const r = await read('email,n\na@x.io,1\nb@x.io,1\nc@x.io,5" screen\nd@x.io,"x\ny"\n', { chunkRows }, [5]);
    t.equal(r.error?.line, 4, `stray quote found at line 4 with chunkRows ${chunkRows}`);
  }
});

t.test('an unclosed quote in a large file is found without holding the rest of the file', async (t) => {
  const rows = Array.from({ length: 20_000 }, (_, i) => `u${i}@x.io,${'y'.repeat(100)}`);
  rows[10] = 'bad@x.io,"never closed';
  const r = await read(`email,n\n${rows.join('\n')}\n`, { chunkRows: 100 }, [65_536]);
  t.same(r.error, { ok: false, code: 'invalid_csv', message: 'line 12: a quoted field starting on this line runs past 1048576 bytes (is its closing quote missing?)', line: 12 });
});

t.test('invalid UTF-8, NUL bytes, UTF-16 and spreadsheets → invalid_csv', async (t) => {
  const latin1 = Buffer.concat([Buffer.from('email,name\na@x.io,ok\nb@x.io,M'), Buffer.from([0xfc]), Buffer.from('ller\n')]);
  t.same((await read(latin1)).error, { ok: false, code: 'invalid_csv', message: 'line 3: the file is not valid UTF-8; save it as "CSV UTF-8"', line: 3 });
  const overlong = Buffer.concat([Buffer.from('email\n'), Buffer.from([0xc0, 0xaf]), Buffer.from('@x.io\n')]);
  t.equal((await read(overlong)).error?.code, 'invalid_csv', 'overlong encodings are not UTF-8');
  const surrogate = Buffer.concat([Buffer.from('email\n'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('@x.io\n')]);
  t.equal((await read(surrogate)).error?.code, 'invalid_csv', 'encoded surrogates are not UTF-8');
  const split = Buffer.from('email,name\na@x.io,Zürich\n');
  const r = await read(split, {}, [1]);
  t.same(r.rows, [['a@x.io', 'Zürich']], 'a multi-byte character split across pieces is fine');
  t.same((await read('email\na@x.io\n\0\n')).error?.line, 3);
  t.match((await read(Buffer.from('\xff\xfee\0m\0', 'latin1'))).error, { code: 'invalid_csv', message: 'line 1: the file is UTF-16 ("Unicode text"); save it as "CSV UTF-8"' });
  t.match((await read(Buffer.from('PK\x03\x04rest', 'latin1'))).error, { code: 'invalid_csv', line: 1 });
  t.match((await read(Buffer.from('\xd0\xcf\x11\xe0rest', 'latin1'))).error, { code: 'invalid_csv', line: 1 });
});

t.test('ragged rows: short rows padded, empty extra cells dropped, non-empty extra cells rejected', async (t) => {
  const r = await readEveryWay(t, 'name,email,city\nJo,a@x.io\nAl\nBo,b@x.io,Rome,,\n');
  t.same(r.rows, [
    ['Jo', 'a@x.io', ''],
    ['Al', '', ''],
    ['Bo', 'b@x.io', 'Rome'],
  ]);
  t.same(r.emails, ['a@x.io', '', 'b@x.io']);
  t.same((await read('name,email\nJo,a@x.io\nDoe, Jr.,b@x.io\n')).error, {
    ok: false,
    code: 'invalid_csv',
    message: 'line 3: the row has 3 fields but the header has 2 (a comma or semicolon in an unquoted value? quote the value)',
    line: 3,
  });
});

t.test('field and record size caps', async (t) => {
  const ok = await read(`email,big\na@x.io,${'x'.repeat(MAX_FIELD_CHARS)}\n`);
  t.equal(ok.rows[0]?.[1]?.length, MAX_FIELD_CHARS, 'a field of exactly the cap is accepted');
  t.same((await read(`email,big\na@x.io,1\nb@x.io,"${'x'.repeat(MAX_FIELD_CHARS + 1)}"\n`)).error, {
    ok: false,
    code: 'invalid_csv',
    message: `line 3: a field is longer than ${MAX_FIELD_CHARS} characters`,
    line: 3,
  });
  const huge = await read(`email,big\na@x.io,${'x'.repeat(MAX_RECORD_BYTES + 10)}\n`, {}, [65_536]);
  t.equal(huge.error?.code, 'invalid_csv');
  t.equal(huge.error?.message, 'line 2: a record is longer than 1048576 bytes');
});

t.test('chunks: at most chunkRows rows each, indexes continue across chunks, maxRows', async (t) => {
  const csv = `email\n${Array.from({ length: 23 }, (_, i) => `u${i}@x.io`).join('\n')}\n`;
  const sizes: number[] = [];
  for await (const c of readCsv([csv], { emailColumn: 'email', chunkRows: 5 })) {
    if (c.ok) sizes.push(c.rows.length);
  }
  t.same(sizes, [5, 5, 5, 5, 3]);
  const r = await read(csv, { chunkRows: 5 });
  t.same(r.indexes, Array.from({ length: 23 }, (_, i) => i));
  t.same((await read(csv, { maxRows: 22 })).error, { ok: false, code: 'too_many_emails', message: 'the CSV has more than 22 data rows' });
  t.equal((await read(csv, { maxRows: 23 })).error, undefined);
});

t.test('stopping early ends the source (a file stream is closed)', async (t) => {
  let closed = false;
  async function* source() {
    try {
      yield Buffer.from('email\n');
      for (let i = 0; ; i++) yield Buffer.from(`u${i}@x.io\n`);
    } finally {
      closed = true;
    }
  }
  for await (const c of readCsv(source(), { emailColumn: 'email', chunkRows: 3 })) {
    t.equal(c.ok, true);
    break;
  }
  t.equal(closed, true);
});

t.test('serializeFields: comma-delimited RFC 4180, formula cells escaped', async (t) => {
  t.equal(serializeFields(['plain', 'a,b', 'say "hi"', 'two\nlines', 'cr\rx', '', ' spaced ']), 'plain,"a,b","say ""hi""","two\nlines","cr\rx",, spaced ');
  t.equal(formatCell('=1+1'), "'=1+1");
  t.equal(formatCell('=HYPERLINK("http://x","y")'), `"'=HYPERLINK(""http://x"",""y"")"`);
});

t.test('round trip: every input cell comes back from the serialized line', async (t) => {
  const csv = '\uFEFFname;email;note\r\n"Doe; Jane";jane@x.io;"multi\r\nline, with ""quotes"""\r\nBo;bo@x.io;\r\n"=cmd|\' /C calc\'!A0";x@x.io;-5\r\n';
  const first = await read(csv);
  const lines = [serializeFields(first.header!), ...first.rows.map(serializeFields)].join('\r\n') + '\r\n';
  const again = await read(lines);
  t.same(again.header, first.header);
  t.equal(again.delimiter, ',');
  const unescape = (s: string) => (/^'[=+\-@\t\r]/.test(s) ? s.slice(1) : s);
  t.same(again.rows.map((r) => r.map(unescape)), first.rows, 'same cells, formula cells aside from their leading quote');
  t.same(again.rows[2], ["'=cmd|' /C calc'!A0", 'x@x.io', "'-5"]);
});
