// Fuzz tests for the CSV reader (seeded, so a failure names a reproducible seed):
//  1. random bytes never throw: the reader yields ok chunks and at most one coded failure, last;
//  2. random CSV text gives the same rows, or the same error, however it is cut into pieces and
//     chunks (the splitter must never change what csv-parse sees as records);
//  3. random records written with RFC 4180 quoting (any delimiter, any line end, BOM or not)
//     read back exactly.

import t, { type Test } from 'tap';
import { readCsv, type CsvFailure } from '../src/csv/csv.ts';
import { seededRandom as rng } from '../../../test/helpers/random.ts';


const CODES = new Set(['invalid_csv', 'email_column_not_found', 'too_many_emails']);

interface Outcome {
  rows: string[][];
  error?: CsvFailure;
}

function split(bytes: Buffer, rand: () => number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; ) {
    const n = 1 + Math.floor(rand() * 40);
    out.push(bytes.subarray(i, i + n));
    i += n;
  }
  return out;
}

/** Reads, checking the invariants every outcome must satisfy. */
async function readChecked(t: Test, source: Buffer[], chunkRows: number, what: string): Promise<Outcome> {
  const out: Outcome = { rows: [] };
  let next = 0;
  let ended = false;
  for await (const c of readCsv(source, { emailColumn: 'email', chunkRows })) {
    if (ended) t.fail(`${what}: an item after a failure`);
    if (!c.ok) {
      if (!CODES.has(c.code) || typeof c.message !== 'string' || c.message === '') t.fail(`${what}: bad failure ${JSON.stringify(c)}`);
      out.error = c;
      ended = true;
      continue;
    }
    if (c.rows.length === 0 || c.rows.length > chunkRows) t.fail(`${what}: chunk of ${c.rows.length} rows`);
    for (const r of c.rows) {
      if (r.index !== next++) t.fail(`${what}: index ${r.index}`);
      if (r.fields.length !== c.header.length) t.fail(`${what}: ${r.fields.length} fields for ${c.header.length} columns`);
      if (r.email !== r.fields[c.emailIndex]!.trim()) t.fail(`${what}: email cell`);
      out.rows.push(r.fields);
    }
  }
  return out;
}

t.test('random bytes: never a throw, always rows or one coded failure', async (t) => {
  const seed = 0x5eed;
  const rand = rng(seed);
  const alphabet = [0x22, 0x22, 0x2c, 0x2c, 0x3b, 0x09, 0x0d, 0x0a, 0x0a, 0x20, 0x40, 0x61, 0x65, 0x6d, 0x69, 0x6c, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xef, 0xbb, 0xbf, 0x00, 0xff];
  for (let i = 0; i < 1500; i++) {
    const len = Math.floor(rand() * 120);
    const b = Buffer.alloc(len);
    const fromAlphabet = rand() < 0.7;
    for (let k = 0; k < len; k++) b[k] = fromAlphabet ? alphabet[Math.floor(rand() * alphabet.length)]! : Math.floor(rand() * 256);
    // Half the cases start with a header that has the email column, so the data rules run too.
    const input = rand() < 0.5 ? Buffer.concat([Buffer.from('email,x\n'), b]) : b;
    await readChecked(t, split(input, rand), 1 + Math.floor(rand() * 4), `seed ${seed} case ${i}`);
  }
  t.pass('1500 random inputs');
});

t.test('random CSV text: the same outcome however it is cut', async (t) => {
  const seed = 0xc5f;
  const rand = rng(seed);
  const tokens = ['a', 'b@x.io', 'é', '€', ',', ',', ';', '\t', '"', '""', '"', '\n', '\r\n', '\r', ' ', '=1', 'email'];
  for (let i = 0; i < 1500; i++) {
    let text = rand() < 0.8 ? 'email,x,y\n' : '';
    const n = Math.floor(rand() * 60);
    for (let k = 0; k < n; k++) text += tokens[Math.floor(rand() * tokens.length)];
    const bytes = Buffer.from(text, 'utf8');
    const what = `seed ${seed} case ${i} ${JSON.stringify(text)}`;
    const whole = await readChecked(t, [bytes], 1_000_000, what);
    const cut = await readChecked(t, split(bytes, rand), 1 + Math.floor(rand() * 3), what);
    const key = (o: Outcome) => (o.error ? { error: o.error } : { rows: o.rows });
    if (JSON.stringify(key(whole)) !== JSON.stringify(key(cut))) {
      t.same(key(cut), key(whole), what);
      return;
    }
  }
  t.pass('1500 random texts agree');
});

t.test('random records written with RFC 4180 quoting read back exactly', async (t) => {
  const seed = 0x4180;
  const rand = rng(seed);
  const chars = ['a', 'Z', '0', ' ', ',', ';', '\t', '"', '\n', '\r\n', 'ü', '€', '😀', '@', '='];
  const cell = () => {
    let s = '';
    const n = Math.floor(rand() * 8);
    for (let k = 0; k < n; k++) s += chars[Math.floor(rand() * chars.length)];
    return s;
  };
  for (let i = 0; i < 500; i++) {
    const delimiter = [',', ';', '\t'][Math.floor(rand() * 3)]!;
    const lineEnd = ['\n', '\r\n', '\r'][Math.floor(rand() * 3)]!;
    const width = 1 + Math.floor(rand() * 4);
    // The header decides the delimiter: give it one delimiter per column gap, nothing ambiguous.
    const header = Array.from({ length: width }, (_, j) => (j === 0 ? 'email' : `c${j}`));
    const rows = Array.from({ length: 1 + Math.floor(rand() * 6) }, () => Array.from({ length: width }, cell));
    const kept = rows; // empty cells are always quoted below, so no row is a blank line
    const quote = (s: string) => (s === '' || /[",;\t\r\n]/.test(s) || rand() < 0.2 ? `"${s.replaceAll('"', '""')}"` : s);
    const text = (rand() < 0.3 ? '\uFEFF' : '') + [header, ...rows].map((r) => r.map(quote).join(delimiter)).join(lineEnd) + (rand() < 0.5 ? lineEnd : '');
    const what = `seed ${seed} case ${i} ${JSON.stringify(text)}`;
    const got = await readChecked(t, split(Buffer.from(text, 'utf8'), rand), 1 + Math.floor(rand() * 3), what);
    if (got.error || JSON.stringify(got.rows) !== JSON.stringify(kept)) {
      t.same(got, { rows: kept }, what);
      return;
    }
  }
  t.pass('500 random files round-trip');
});
