// The results CSV (csv/render.ts): exact header and lines, RFC 4180 quoting, formula escaping for
// every trigger character, the BOM rule, segments, and a round trip through the reader.

import t from 'tap';
import { readCsv } from '../src/csv/csv.ts';
import { parseSegments, renderHeader, renderRows, RESULT_COLUMNS, type RenderRow, type ResultCells } from '../src/csv/render.ts';

const valid: ResultCells = {
  result: 'valid',
  reason_code: 'accepted',
  reason: '',
  b2b_outbound_quality: 'high',
  is_role_based: false,
  role_type: undefined,
  is_free_provider: false,
  is_disposable: false,
  is_catchall: false,
  catchall_confidence: undefined,
  did_you_mean: undefined,
  credits_charged: 1,
  charge_reason: 'high_value_validation',
  validation_layer: 'smtp',
  smtp_response: '250 2.1.5 Ok',
};

const risky: ResultCells = {
  ...valid,
  result: 'risky',
  reason_code: 'catch_all',
  reason: 'Domain accepts all addresses, so this one, too',
  b2b_outbound_quality: 'low',
  is_role_based: true,
  role_type: 'sales',
  is_catchall: true,
  catchall_confidence: 'high',
  did_you_mean: null,
  credits_charged: 0,
  charge_reason: 'catchall_not_charged',
  validation_layer: 'catchall',
  smtp_response: '250 2.1.5 Ok\r\n250 "queued"',
};

t.test('header: input columns then the result columns (docs/api.md), CRLF; BOM only when asked', async (t) => {
  t.same(RESULT_COLUMNS, [
    'result', 'reason_code', 'reason', 'b2b_outbound_quality', 'is_role_based', 'role_type', 'is_free_provider', 'is_disposable',
    'is_catchall', 'catchall_confidence', 'did_you_mean', 'credits_charged', 'charge_reason', 'validation_layer', 'smtp_response',
  ]);
  const tail = RESULT_COLUMNS.join(',');
  t.equal(renderHeader(['name', 'e-mail, work']), `name,"e-mail, work",${tail}\r\n`);
  t.equal(renderHeader(['email'], { bom: true }), `\uFEFFemail,${tail}\r\n`);
  t.equal(renderHeader(['email'], { bom: false }), `email,${tail}\r\n`);
  t.equal(renderHeader([]), `${tail}\r\n`);
});

t.test('rows: exact lines, booleans, empty optionals, RFC 4180 quoting of the SMTP reply', async (t) => {
  const rows: RenderRow[] = [
    { fields: ['Doe, Jane', 'jane@x.io'], verdict: valid },
    { fields: ['Bo', 'sales@x.io'], verdict: risky },
  ];
  t.equal(
    renderRows(['name', 'email'], rows),
    '"Doe, Jane",jane@x.io,valid,accepted,,high,false,,false,false,false,,,1,high_value_validation,smtp,250 2.1.5 Ok\r\n' +
      'Bo,sales@x.io,risky,catch_all,"Domain accepts all addresses, so this one, too",low,true,sales,false,false,true,high,,0,catchall_not_charged,catchall,"250 2.1.5 Ok\r\n250 ""queued"""\r\n',
  );
});

t.test('rows always have the header width of input cells, so result columns stay under their names', async (t) => {
  t.equal(renderRows(['a', 'b', 'email'], [{ fields: ['x'], verdict: valid }]).split(',').slice(0, 4).join(','), 'x,,,valid');
  t.equal(renderRows(['email'], [{ fields: ['a@x.io', 'stray'], verdict: valid }]).split(',').slice(0, 2).join(','), 'a@x.io,valid');
});

t.test('formula injection: every trigger character is escaped, in input and result cells', async (t) => {
  const cells: Array<[string, string]> = [
    ['=SUM(A1:A2)', "'=SUM(A1:A2)"],
    ['+1 555 0100', "'+1 555 0100"],
    ['-5', "'-5"],
    ['@SUM(1)', "'@SUM(1)"],
    ['\tx', "'\tx"],
    ['\rx', `"'\rx"`],
    ['=HYPERLINK("http://evil","a,b")', `"'=HYPERLINK(""http://evil"",""a,b"")"`],
    ['a=b', 'a=b'],
    ["'already", "'already"],
    ['', ''],
  ];
  for (const [input, want] of cells) {
    const line = renderRows(['c'], [{ fields: [input], verdict: valid }]);
    t.equal(line.slice(0, want.length + 1), `${want},`, JSON.stringify(input));
  }
  const evilReply = renderRows(['email'], [{ fields: ['a@x.io'], verdict: { ...valid, smtp_response: '=cmd|"/C calc"!A0', reason: '-bad' } }]);
  t.equal(evilReply, `a@x.io,valid,accepted,'-bad,high,false,,false,false,false,,,1,high_value_validation,smtp,"'=cmd|""/C calc""!A0"\r\n`);
});

t.test('segments: parse and filter', async (t) => {
  t.same(parseSegments(undefined), { ok: true, segments: null });
  const vr = parseSegments('valid, risky');
  t.ok(vr.ok);
  if (vr.ok) t.same([...vr.segments!], ['valid', 'risky']);
  const repeated = parseSegments(['valid', 'unknown,invalid']);
  t.ok(repeated.ok && repeated.segments!.size === 3);
  t.same(parseSegments('valid,bogus'), { ok: false, code: 'invalid_request', message: 'unknown segment "bogus"; segments are: valid, valid_role_based, risky, invalid, unknown' });
  t.same(parseSegments('Valid'), { ok: false, code: 'invalid_request', message: 'unknown segment "Valid"; segments are: valid, valid_role_based, risky, invalid, unknown' });
  t.same(parseSegments(''), { ok: false, code: 'invalid_request', message: 'segment must be a comma-separated list of: valid, valid_role_based, risky, invalid, unknown' });
  t.same(parseSegments('valid,'), { ok: false, code: 'invalid_request', message: 'segment must be a comma-separated list of: valid, valid_role_based, risky, invalid, unknown' });
  const rows: RenderRow[] = [
    { fields: ['a@x.io'], verdict: valid },
    { fields: ['b@x.io'], verdict: { ...valid, result: 'risky' } },
    { fields: ['c@x.io'], verdict: { ...valid, result: 'invalid' } },
  ];
  const only = parseSegments('risky,invalid');
  if (!only.ok) throw new Error('expected ok');
  t.same(renderRows(['email'], rows, only.segments).split('\r\n').filter(Boolean).map((l) => l.split(',')[0]), ['b@x.io', 'c@x.io']);
  t.equal(renderRows(['email'], rows, new Set()).length, 0);
});

t.test('round trip: parse → render → parse keeps every input cell (formula cells gain their quote)', async (t) => {
  const input = '\uFEFFName;Email;Note\r\n"Doe; Jane";jane@x.io;"two\nlines, ""quoted"""\r\nBo;bo@x.io;\r\n"=1+2";c@x.io;@home\r\n';
  const parsed: RenderRow[] = [];
  let header: string[] = [];
  let bom = false;
  for await (const c of readCsv([input], { emailColumn: 'email' })) {
    if (!c.ok) throw new Error(c.message);
    header = c.header;
    bom = c.bom;
    for (const r of c.rows) parsed.push({ fields: r.fields, verdict: valid });
  }
  const out = renderHeader(header, { bom }) + renderRows(header, parsed);
  t.ok(out.startsWith('\uFEFFName,Email,Note,result,'), 'BOM written back because the upload had one; comma-delimited');
  const back: string[][] = [];
  let backHeader: string[] = [];
  for await (const c of readCsv([out], { emailColumn: 'Email' })) {
    if (!c.ok) throw new Error(c.message);
    backHeader = c.header;
    for (const r of c.rows) back.push(r.fields);
  }
  t.same(backHeader, [...header, ...RESULT_COLUMNS]);
  t.same(
    back.map((r) => r.slice(0, 3)),
    [
      ['Doe; Jane', 'jane@x.io', 'two\nlines, "quoted"'],
      ['Bo', 'bo@x.io', ''],
      ["'=1+2", 'c@x.io', "'@home"],
    ],
  );
  t.same(back[0]!.slice(3), ['valid', 'accepted', '', 'high', 'false', '', 'false', 'false', 'false', '', '', '1', 'high_value_validation', 'smtp', '250 2.1.5 Ok']);
});
