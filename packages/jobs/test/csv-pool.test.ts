// The CSV pool (csv/csv-pool.ts): real worker threads loading the TypeScript task file through tsx,
// giving the same rows and the same coded failures as inline parsing, plain data across the
// thread boundary, and rendering.

import t from 'tap';
import { createCsvPool, workerExecArgv } from '../src/csv/csv-pool.ts';
import { readCsv, type ReadCsvOptions } from '../src/csv/csv.ts';
import { renderRows, type ResultCells } from '../src/csv/render.ts';

async function collect(input: string, opts: ReadCsvOptions) {
  const rows: string[][] = [];
  const indexes: number[] = [];
  for await (const c of readCsv([Buffer.from(input)], opts)) {
    if (!c.ok) return { rows, indexes, error: c };
    for (const r of c.rows) {
      rows.push(r.fields);
      indexes.push(r.index);
    }
  }
  return { rows, indexes };
}

const verdict: ResultCells = {
  result: 'valid',
  reason_code: 'accepted',
  reason: '',
  b2b_outbound_quality: 'high',
  is_role_based: false,
  is_free_provider: false,
  is_disposable: false,
  is_catchall: false,
  credits_charged: 1,
  charge_reason: 'high_value_validation',
  validation_layer: 'smtp',
  smtp_response: '250 ok',
};

t.test('workerExecArgv: inherit when the process loads tsx, else tsx alone', async (t) => {
  t.equal(workerExecArgv(['--import=tsx']), undefined);
  t.equal(workerExecArgv(['--expose-gc', '--import', 'tsx']), undefined);
  t.equal(workerExecArgv(['--require', '/x/node_modules/tsx/dist/preflight.cjs', '--import', 'file:///x/node_modules/tsx/dist/loader.mjs']), undefined);
  const added = workerExecArgv(['--expose-gc']);
  t.equal(added?.length, 2, 'process-wide flags are not passed (a worker refuses them)');
  t.equal(added?.[0], '--import');
  t.match(added?.[1], /^file:\/\/.*\/tsx\//, 'an absolute URL, so the cwd does not matter');
});

t.test('a pool parses like inline, in order, with coded failures as plain data', async (t) => {
  const pool = createCsvPool({ threads: 2 });
  t.teardown(() => pool.close());
  const lines = Array.from({ length: 5_000 }, (_, i) => (i % 7 === 0 ? `"Doe, ${i}";u${i}@x.io;"multi\nline"` : `n${i};u${i}@x.io;`));
  const csv = `\uFEFFname;Email;note\r\n${lines.join('\r\n')}\r\n`;
  const inline = await collect(csv, { emailColumn: 'email', chunkRows: 300 });
  const pooled = await collect(csv, { emailColumn: 'email', chunkRows: 300, parser: pool });
  t.equal(inline.rows.length, 5_000);
  t.same(pooled, inline);
  t.same(pooled.indexes, Array.from({ length: 5_000 }, (_, i) => i));

  const broken = `email,n\n${Array.from({ length: 3_000 }, (_, i) => `u${i}@x.io,${i}`).join('\n')}\nbad@x.io,"x"y\n`;
  const failure = await collect(broken, { emailColumn: 'email', chunkRows: 100, parser: pool });
  t.same(failure.error, {
    ok: false,
    code: 'invalid_csv',
    message: 'line 3002: a quoted field is followed by other characters before the next delimiter (write " inside a quoted field as "")',
    line: 3002,
  });
  t.equal(Object.getPrototypeOf(failure.error), Object.prototype, 'a plain object crossed the thread boundary');

  // An early problem in a chunk still in flight wins over a later record that outgrows the cap.
  // (The first piece's chunks are queued on the pool when the second piece overflows.)
  const early = [Buffer.from('email,n\na@x.io,1\nb@x.io,2,extra\n'), Buffer.from(`c@x.io,3\nd@x.io,"${'x'.repeat(3 * 1024 * 1024)}`)];
  for (const parser of [pool, undefined]) {
    let error: unknown;
    for await (const c of readCsv(early, parser ? { emailColumn: 'email', chunkRows: 2, parser } : { emailColumn: 'email', chunkRows: 2 })) if (!c.ok) error = c;
    t.same(error, { ok: false, code: 'invalid_csv', message: 'line 3: the row has 3 fields but the header has 2 (a comma or semicolon in an unquoted value? quote the value)', line: 3 }, parser ? 'pool' : 'inline');
  }
  const late = await collect(`email,n\na@x.io,1\nd@x.io,"${'x'.repeat(3 * 1024 * 1024)}`, { emailColumn: 'email', parser: pool });
  t.same(late.error, { ok: false, code: 'invalid_csv', message: 'line 3: a quoted field starting on this line runs past 1048576 bytes (is its closing quote missing?)', line: 3 });

  const task = await pool.parse({ bytes: Buffer.from('a@x.io,1\n'), delimiter: ',', lineEnd: 'lf', firstLine: 2, width: 2 });
  t.same(task, { ok: true, records: [['a@x.io', '1']] }, 'a pooled (shared) buffer is copied, not detached');
});

t.test('render on the pool equals render inline', async (t) => {
  const pool = createCsvPool({ threads: 1 });
  t.teardown(() => pool.close());
  const header = ['name', 'email'];
  const rows = [
    { fields: ['=x', 'a@x.io'], verdict },
    { fields: ['b', 'b@x.io'], verdict: { ...verdict, result: 'risky' as const } },
  ];
  t.same(await pool.render({ header, rows, segments: null }), { ok: true, text: renderRows(header, rows), rows: 2 });
  t.same(await pool.render({ header, rows, segments: ['risky'] }), { ok: true, text: renderRows(header, [rows[1]!]), rows: 2 });
});

t.test('close() is idempotent', async (t) => {
  const pool = createCsvPool({ threads: 1 });
  const first = pool.close();
  const second = pool.close();
  t.equal(second, first, 'a second close() is the first one, not another shutdown');
  await t.resolves(Promise.all([first, second]), 'both resolve once the pool is closed');
  t.equal(pool.close(), first, 'and so is a close() after it ended');
});
