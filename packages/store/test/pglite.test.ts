// The store conformance suite on the embedded adapter (PGlite). In-memory databases, or a
// temporary data directory when the test needs to survive a restart.

import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { CopyValue, Db } from '../src/db/db.ts';
import { openPglite } from '../src/db/pglite.ts';
import { storeConformance, type Adapter } from './conformance.ts';
import { freshPglite } from '../../../test/helpers/pglite.ts';

// tap's default of 120 s a file is too tight on a loaded 2-core machine: 53 s in a full CI run on a
// slow day.
t.setTimeout(240_000);

const adapter: Adapter = {
  kind: 'pglite',
  parallel: false,
  async fresh(t, opts = {}) {
    const dir = opts.persistent ? mkdtempSync(path.join(tmpdir(), 'svc-store-pglite-')) : undefined;
    // A fresh database starts from the dump of an initialised one (initdb once per machine).
    let db: Db | undefined = await freshPglite(dir);
    t.teardown(async () => {
      await db?.close();
      db = undefined;
      if (dir) rmSync(dir, { recursive: true, force: true });
    });
    return {
      get db() {
        if (!db) throw new Error('closed');
        return db;
      },
      async restart() {
        if (!dir) throw new Error('an in-memory PGlite cannot restart: ask for { persistent: true }');
        await db?.close();
        db = undefined;
        db = await openPglite(dir);
        return db;
      },
      // One process per data directory: no second handle.
    };
  },
};

storeConformance(t, adapter);

// PGlite runs each statement synchronously in the thread that owns it; the adapter gives it a
// thread of its own, so a long statement never holds the caller's event loop (HTTP requests, SMTP
// sessions) the way it did when PGlite lived in the service's thread.
t.test('a long statement runs off the event loop', async (t) => {
  const db = await freshPglite();
  t.teardown(() => db.close());
  let gap = 0;
  let last = performance.now();
  const tick = setInterval(() => {
    const now = performance.now();
    gap = Math.max(gap, now - last);
    last = now;
  }, 5);
  const t0 = performance.now();
  const [row] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM generate_series(1, 4000000)');
  const took = performance.now() - t0;
  clearInterval(tick);
  t.equal(row?.n, 4_000_000);
  t.ok(took > 150, `the statement took ${took.toFixed(0)} ms (long enough to show a blocked loop)`);
  t.ok(gap < took / 2, `longest pause of a 5 ms timer: ${gap.toFixed(0)} ms while the statement ran ${took.toFixed(0)} ms`);
});

// A statement with parameters runs through a prepared statement the thread keeps by its text
// (pglite-thread.cjs, MAX_PREPARED): the same rows as PGlite's own query(), and never a stale one.
t.test('kept prepared statements: the rows query() gives, errors with their fields, a schema change or a DEALLOCATE seen, at most 256 kept', async (t) => {
  const db = await freshPglite();
  t.teardown(() => db.close());
  const kept = async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements'))[0]!.n;
  const at = new Date('2026-01-02T03:04:05.678Z');
  const sql = `SELECT $1::bigint AS big, $2::numeric AS num, $3::timestamptz AS at, $4::jsonb AS j, $5::bigint[] AS arr,
                      $6::text[] AS texts, $7::boolean AS yes, $8::text AS nothing, $9::bytea AS bin, $10::int AS small`;
  const params = [9_007_199_254_740_991, 12.5, at, { a: [1, 'x'] }, [1, 2, 3], ['a,b', 'c"d', ''], true, null, new Uint8Array([0, 255]), -7];
  const want = { big: 9_007_199_254_740_991, num: 12.5, at, j: { a: [1, 'x'] }, arr: [1, 2, 3], texts: ['a,b', 'c"d', ''], yes: true, nothing: null, bin: new Uint8Array([0, 255]), small: -7 };
  t.same(await db.query(sql, params), [want], 'first use: prepared, then run');
  t.same(await db.query(sql, params), [want], 'second use: the kept statement');
  t.equal(await kept(), 1, 'this one kept (the counting statement has no parameters: not prepared)');

  // A failure keeps the Postgres fields, and the statement stays usable.
  await db.exec('CREATE TABLE p (k int PRIMARY KEY, v text)');
  await db.query('INSERT INTO p VALUES ($1, $2)', [1, 'one']);
  await t.rejects(db.query('INSERT INTO p VALUES ($1, $2)', [1, 'again']), { code: '23505', constraint: 'p_pkey' });
  await db.query('INSERT INTO p VALUES ($1, $2)', [2, 'two']);
  t.same(await db.query('SELECT * FROM p WHERE k >= $1 ORDER BY k', [1]), [{ k: 1, v: 'one' }, { k: 2, v: 'two' }]);
  // A failed statement of a transaction still rolls the whole transaction back.
  await t.rejects(
    db.transaction(async (tx) => {
      await tx.query('INSERT INTO p VALUES ($1, $2)', [3, 'three']);
      await tx.query('INSERT INTO p VALUES ($1, $2)', [1, 'dup']);
    }),
    { code: '23505' },
  );
  t.same(await db.query('SELECT k FROM p WHERE k >= $1 ORDER BY k', [0]), [{ k: 1 }, { k: 2 }]);

  // A column added (by a script, or by a statement without parameters): `SELECT *` shows it.
  await db.exec('ALTER TABLE p ADD COLUMN w int DEFAULT 5');
  t.same(await db.query('SELECT * FROM p WHERE k >= $1 ORDER BY k', [1]), [{ k: 1, v: 'one', w: 5 }, { k: 2, v: 'two', w: 5 }]);
  await db.query('ALTER TABLE p DROP COLUMN v');
  t.same(await db.query('SELECT * FROM p WHERE k >= $1 ORDER BY k', [1]), [{ k: 1, w: 5 }, { k: 2, w: 5 }]);
  await db.query('DEALLOCATE ALL');
  t.same(await db.query('SELECT * FROM p WHERE k = $1', [2]), [{ k: 2, w: 5 }], 'prepared again after a DEALLOCATE');

  // Many distinct texts: the least recently used are closed, at most 256 are kept.
  for (let i = 0; i < 300; i++) t.equal((await db.query<{ x: number }>(`SELECT $1::int + ${i} AS x`, [1]))[0]!.x, i + 1);
  const n = await kept();
  t.ok(n <= 256 && n >= 250, `${n} statements kept after 300 distinct ones`);
});

t.test('errors cross the thread with their Postgres fields; a closed database refuses', async (t) => {
  const db = await freshPglite();
  await db.exec('CREATE TABLE u (k int PRIMARY KEY)');
  await db.query('INSERT INTO u VALUES (1)');
  const err = await db.query('INSERT INTO u VALUES (1)').then(
    () => undefined,
    (e: unknown) => e as Error & { code?: string; constraint?: string; table?: string },
  );
  t.ok(err instanceof Error, 'an Error of this thread');
  t.equal(err?.code, '23505');
  t.equal(err?.constraint, 'u_pkey');
  t.equal(err?.table, 'u');
  t.match(err?.message, /duplicate key value violates unique constraint "u_pkey"/);
  // A failed transaction rolls back everything in it, and the connection is usable after it.
  await t.rejects(
    db.transaction(async (tx) => {
      await tx.query('INSERT INTO u VALUES (2)');
      await tx.query('INSERT INTO u VALUES (1)');
    }),
    { code: '23505' },
  );
  t.same(await db.query('SELECT k FROM u ORDER BY k'), [{ k: 1 }]);
  await db.close();
  await t.rejects(db.query('SELECT 1'), /^PGlite is closed/);
  await db.close(); // a second close is a no-op
});

t.test('copyIn: every value back exactly as written (escapes, NULL, numbers, Unicode); a duplicate key writes nothing', async (t) => {
  const db = await freshPglite();
  t.teardown(() => db.close());
  await db.exec('CREATE TABLE c (k text PRIMARY KEY, v text, n integer, at timestamptz)');
  const values = ['plain', 'back\\slash', 'tab\there', 'new\nline', 'cr\rhere', '\\N', '\\.', 'ünïcödé 名前 🙂', '', 'end\\'];
  const rows: CopyValue[][] = values.map((v, i) => [`k${i}`, v, i * 1000 - 3, new Date(Date.UTC(2026, 10, 27, 12, 0, i)).toISOString()]);
  rows.push(['null', null, null, null]);
  await db.copyIn!('c', ['k', 'v', 'n', 'at'], rows);
  const got = await db.query<{ k: string; v: string | null; n: number | null; at: Date | null }>('SELECT k, v, n, at FROM c ORDER BY k COLLATE "C"');
  const want = rows.map(([k, v, n, at]) => ({ k, v, n, at: at === null ? null : new Date(at as string) })).sort((a, b) => ((a.k as string) < (b.k as string) ? -1 : 1));
  t.same(got, want);
  // One duplicate in a COPY: the statement fails with 23505 and none of its rows lands.
  await t.rejects(db.copyIn!('c', ['k', 'v'], [['new1', 'x'], ['k0', 'again']]), { code: '23505' });
  t.same(await db.query("SELECT count(*)::int AS n FROM c WHERE k = 'new1' OR v = 'again'"), [{ n: 0 }]);
  t.same(await db.query('SELECT count(*)::int AS n FROM c'), [{ n: rows.length }]);
});

// Every operation is posted to the PGlite thread at once and waits there for the one connection
// (pglite-thread.cjs): the caller never holds the next statement back for a turn of its own loop.
t.test('operations wait in the thread: in the order sent, a transaction whole, background rows after the foreground', async (t) => {
  // A background operation may be overtaken for a minute here, so that no delay of a loaded
  // machine can age it past its limit while the test runs.
  const db = await freshPglite(undefined, { backgroundMaxWaitMs: 60_000 });
  t.teardown(() => db.close());
  await db.exec('CREATE TABLE o (k text PRIMARY KEY)');
  const done: string[] = [];
  const note = (label: string) => <T>(v: T): T => (done.push(label), v);

  // A plain statement sent while another caller's transaction is open runs after it commits,
  // never inside it: it sees the transaction's rows, and ends after the transaction does.
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let opened!: () => void;
  const isOpen = new Promise<void>((r) => (opened = r));
  const tx = db.transaction(async (q) => {
    await q.query("INSERT INTO o VALUES ('in-tx')");
    opened();
    await held;
    await q.query("INSERT INTO o VALUES ('in-tx-2')");
  });
  await isOpen;
  const outside = db.query<{ n: number }>('SELECT count(*)::int AS n FROM o').then(note('outside'));
  await new Promise((r) => setTimeout(r, 20));
  t.same(done, [], 'the plain statement waits while the transaction is open');
  release();
  await tx.then(note('tx'));
  t.same(await outside, [{ n: 2 }], 'it ran after the commit: both rows');
  t.same(done, ['tx', 'outside']);

  // Behind a long statement: a background COPY sent first lets the foreground statements sent
  // after it go first; among themselves, each kind keeps its order.
  done.length = 0;
  const long = db.query('SELECT pg_sleep(0.05)').then(note('long'));
  const bg = db.copyIn!('o', ['k'], [['bg-1']], { background: true }).then(note('bg'));
  const fg1 = db.query("INSERT INTO o VALUES ('fg-1')").then(note('fg-1'));
  const fg2 = db.query<{ k: string }>("SELECT k FROM o WHERE k LIKE 'bg-%' OR k LIKE 'fg-%' ORDER BY k").then(note('fg-2'));
  await Promise.all([long, bg, fg1]);
  t.same(await fg2, [{ k: 'fg-1' }], 'the foreground read ran before the background rows landed');
  t.same(done, ['long', 'fg-1', 'fg-2', 'bg']);
  t.same(await db.query("SELECT k FROM o WHERE k = 'bg-1'"), [{ k: 'bg-1' }], 'and the background rows did land');

  // close() is never overtaken: a background COPY sent before it, behind a long statement, is
  // written first (its promise would fail with "PGlite is closed" otherwise).
  const long3 = db.query('SELECT pg_sleep(0.05)');
  const last = db.copyIn!('o', ['k'], [['bg-last']], { background: true });
  const closing = db.close();
  await long3;
  await last;
  await closing;
  t.pass('the COPY sent before close() was written, then the database closed');
});

t.test('a background operation older than its limit (100 ms by default) waits no longer', async (t) => {
  const db = await freshPglite();
  t.teardown(() => db.close());
  await db.exec('CREATE TABLE o (k text PRIMARY KEY)');
  const done: string[] = [];
  const note = (label: string) => <T>(v: T): T => (done.push(label), v);
  // The COPY is sent at once, behind a statement of 300 ms; the foreground statement 150 ms later
  // (or, on a slow machine, after the long one ended: the COPY has started by then either way).
  const long = db.query('SELECT pg_sleep(0.3)').then(note('long'));
  const bg = db.copyIn!('o', ['k'], [['bg']], { background: true }).then(note('bg'));
  await new Promise((r) => setTimeout(r, 150));
  const fg = db.query("INSERT INTO o VALUES ('fg')").then(note('fg'));
  await Promise.all([long, bg, fg]);
  t.same(done, ['long', 'bg', 'fg']);
});
