// PgBlobStore (the blob port on the store's Db): the blob conformance suite (blob-conformance.ts)
// on PGlite and on the real Postgres (TEST_DATABASE_URL or postgres://postgres@127.0.0.1:5432/test,
// a schema per test dropped at teardown; skipped when it does not answer, a failure then under
// CI_REQUIRE_SERVICES=1), with the default 1 MiB chunks and with small odd ones; then what only
// this adapter has: chunks inserted as the body arrives, chunks fetched as the reader wants them,
// staged uploads invisible and swept, no chunk left behind.

import t from 'tap';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { PGlite } from '@electric-sql/pglite';
import type { Db, Queryable, Row } from '../src/db/db.ts';
import { migrate } from '../src/db/migrate.ts';
import { openPglite } from '../src/db/pglite.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { BlobTooLargeError } from '../src/blob/blob.ts';
import { BlobGoneError, BlobUploadLostError, PgBlobStore, type PgBlobStoreOptions } from '../src/blob/blob-pg.ts';
import { blobConformance, readAll, type Tap } from './blob-conformance.ts';
import { pgliteTemplate } from '../../../test/helpers/pglite.ts';
import { freshSchema, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';
import { until } from '../../../test/helpers/until.ts';

const REQUIRED = process.env.CI_REQUIRE_SERVICES === '1';
const MiB = 1024 * 1024;

type FreshDb = (t: Tap) => Promise<Db>;

/** A Db whose queries are seen by `spy` first (transactions pass through unseen), and counted while they run. */
function spied(db: Db, spy: (sql: string, params: unknown[]) => void): Db & { readonly inFlight: number } {
  let inFlight = 0;
  return {
    kind: db.kind,
    query: <T extends Row = Row>(sql: string, params: unknown[] = []) => {
      spy(sql, params);
      inFlight++;
      return db.query<T>(sql, params).finally(() => inFlight--);
    },
    transaction: (fn) => db.transaction(fn),
    exec: (sql) => db.exec(sql),
    close: () => db.close(),
    get inFlight() {
      return inFlight;
    },
  };
}

/**
 * Waits until a stream reading through `db` has fetched all it fetches on its own: no query in
 * flight after a turn of the event loop (a stream asks for more within the turn it got its last
 * answer in, so a fetch it would make has started by then).
 */
async function fetchesDone(db: { readonly inFlight: number }): Promise<void> {
  await until(async () => (await new Promise((ok) => setImmediate(ok)), db.inFlight === 0), 5000, 'the stream to stop fetching');
}

/** Waits until the database's clock is more than `ms` past the last touch of the staged uploads (what sweepPartials(ms) compares with). */
async function stagedOlderThan(db: Queryable, ms: number): Promise<void> {
  const [row] = await db.query<{ touched: string }>(`SELECT max(touched_at)::text AS touched FROM blob_objects WHERE state = 'staged'`);
  const past = async () => (await db.query<{ past: boolean }>(`SELECT now() - $1::timestamptz > $2::double precision * interval '1 millisecond' AS past`, [row!.touched, ms]))[0]!.past === true;
  await until(past, 5000, `the database's clock ${ms} ms past the staged upload's last touch`);
}

async function counts(db: Queryable): Promise<{ objects: number; staged: number; chunks: number }> {
  const [r] = await db.query<{ objects: number; staged: number; chunks: number }>(
    `SELECT (SELECT count(*)::int FROM blob_objects) AS objects, (SELECT count(*)::int FROM blob_objects WHERE state = 'staged') AS staged, (SELECT count(*)::int FROM blob_chunks) AS chunks`,
  );
  return r!;
}

function suites(t: Tap, freshDb: FreshDb): void {
  for (const opts of [{}, { chunkBytes: 1000, readChunks: 3 }] as PgBlobStoreOptions[]) {
    const chunkBytes = opts.chunkBytes ?? MiB;
    t.test(`conformance, ${chunkBytes}-byte chunks`, async (t) => {
      blobConformance(t, { name: 'pg', chunkBytes, fresh: async (t) => new PgBlobStore(await freshDb(t), opts), writing: async (b) => (await counts((b as PgBlobStore).db)).staged });
    });
  }

  t.test('chunks of chunkBytes, the last one shorter; replace and delete leave no chunk behind', async (t) => {
    const db = await freshDb(t);
    const b = new PgBlobStore(db);
    t.equal(b.chunkBytes, MiB, '1 MiB by default');
    const data = randomBytes(2 * MiB + MiB / 2);
    await b.put('jobs/j/results.csv', Readable.from([data.subarray(0, 100), data.subarray(100, MiB + 7), data.subarray(MiB + 7)]));
    const rows = await db.query<{ seq: number; n: number }>(`SELECT seq, length(data) AS n FROM blob_chunks ORDER BY seq`);
    t.strictSame(rows, [
      { seq: 0, n: MiB },
      { seq: 1, n: MiB },
      { seq: 2, n: MiB / 2 },
    ]);
    t.strictSame(await db.query(`SELECT key, state, bytes, chunks FROM blob_objects`), [{ key: 'jobs/j/results.csv', state: 'live', bytes: data.length, chunks: 3 }]);
    await b.put('jobs/j/results.csv', ['short']);
    t.strictSame(await counts(db), { objects: 1, staged: 0, chunks: 1 }, 'a replace deletes the old chunks');
    await t.rejects(b.put('jobs/j/results.csv', [randomBytes(3000)], { maxBytes: 2999 }), BlobTooLargeError);
    await t.rejects(
      b.put(
        'jobs/j/other.csv',
        (async function* () {
          yield randomBytes(MiB + 1);
          throw new Error('gone');
        })(),
      ),
      /gone/,
    );
    t.strictSame(await counts(db), { objects: 1, staged: 0, chunks: 1 }, 'a refused or failed put leaves no staged chunk');
    await b.delete('jobs/j/results.csv');
    t.strictSame(await counts(db), { objects: 0, staged: 0, chunks: 0 }, 'delete removes the row and its chunks');
    t.throws(() => new PgBlobStore(db, { chunkBytes: 0 }), RangeError);
  });

  t.test('put inserts each chunk as soon as it fills (never the whole body in memory)', async (t) => {
    let inserted = 0;
    const db = spied(await freshDb(t), (sql) => {
      if (sql.includes('INSERT INTO blob_chunks')) inserted++;
    });
    const C = 64 * 1024;
    const b = new PgBlobStore(db, { chunkBytes: C });
    let yielded = 0;
    let worst = 0;
    async function* body() {
      for (let i = 0; i < 40; i++) {
        // What has arrived but is not in the database yet.
        worst = Math.max(worst, yielded - inserted * C);
        const piece = randomBytes(5000 + ((i * 7919) % 20000));
        yielded += piece.length;
        yield piece;
      }
    }
    const { bytes } = await b.put('streamed', body());
    t.equal(bytes, yielded);
    t.equal(inserted, Math.ceil(yielded / C), 'one insert per chunk');
    t.ok(worst < C, `at most one chunk pending at any time (worst ${worst} bytes, chunk ${C})`);
  });

  t.test('get fetches chunks a few at a time, as the reader wants them', async (t) => {
    let fetched = 0;
    let queries = 0;
    const db = spied(await freshDb(t), (sql, params) => {
      if (sql.includes('FROM blob_chunks WHERE object_id')) {
        queries++;
        fetched += (params[2] as number) - (params[1] as number);
      }
    });
    const C = 16 * 1024;
    const b = new PgBlobStore(db, { chunkBytes: C, readChunks: 2 });
    const data = randomBytes(40 * C + 5);
    await b.put('csv', [data]);
    const r = (await b.get('csv'))!;
    await fetchesDone(db);
    t.ok(fetched <= 2, `before reading: at most one batch fetched (${fetched} chunks)`);
    const it = r[Symbol.asyncIterator]();
    const first = await it.next();
    t.ok(Buffer.isBuffer(first.value) && first.value.length > 0, 'a first piece');
    await fetchesDone(db);
    t.ok(fetched <= 6, `after the first piece: a few chunks fetched (${fetched} of 41)`);
    const parts = [first.value as Buffer];
    for (let n = await it.next(); !n.done; n = await it.next()) parts.push(n.value as Buffer);
    t.ok(Buffer.concat(parts).equals(data), 'the whole blob');
    t.equal(fetched, 41, 'every chunk fetched once');
    t.equal(queries, 21, 'two chunks per query');
  });

  t.test('a read overlapping a replace of its key fails with BlobGoneError, never mixes', async (t) => {
    const db = await freshDb(t);
    const b = new PgBlobStore(db, { chunkBytes: 1000, readChunks: 1 });
    const old = randomBytes(10_000);
    await b.put('k', [old]);
    const r = (await b.get('k'))!;
    const it = r[Symbol.asyncIterator]();
    const first = (await it.next()).value as Buffer;
    t.ok(old.subarray(0, first.length).equals(first));
    await b.put('k', [randomBytes(10_000)]);
    const err = await (async () => {
      for (let n = await it.next(); !n.done; n = await it.next());
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof BlobGoneError, 'BlobGoneError');
    t.match(err, { code: 'blob_gone', key: 'k' });
  });

  t.test('a crashed put leaves only staged chunks: invisible, and swept', async (t) => {
    const real = await freshDb(t);
    // The "crash": publishing and the cleanup after it both fail, as if the process died there.
    const dying: Db = {
      ...spied(real, () => {}),
      query: (sql, params) => (sql.startsWith('DELETE') ? Promise.reject(new Error('process died')) : real.query(sql, params)),
      transaction: () => Promise.reject(new Error('process died')),
    };
    await t.rejects(new PgBlobStore(dying, { chunkBytes: 1000 }).put('k', [randomBytes(2500)]), /process died/);
    const b = new PgBlobStore(real, { chunkBytes: 1000 });
    t.strictSame(await counts(real), { objects: 1, staged: 1, chunks: 3 }, 'the staged object and its chunks are there');
    t.equal(await b.exists('k'), false, 'exists does not see it');
    t.equal(await b.get('k'), undefined, 'get does not see it');
    await b.delete('k');
    t.strictSame(await counts(real), { objects: 1, staged: 1, chunks: 3 }, 'delete of the key leaves it (it is no blob)');
    t.equal(await b.sweepPartials(60_000), 0, 'not swept while younger than olderThanMs');
    await stagedOlderThan(real, 10);
    t.equal(await b.sweepPartials(10), 1, 'swept once older');
    t.strictSame(await counts(real), { objects: 0, staged: 0, chunks: 0 }, 'no chunk left');
    await t.rejects(b.sweepPartials(-1), RangeError);
  });

  t.test('an upload in progress is kept by a sweep while it is touched, and fails cleanly once swept', async (t) => {
    const db = await freshDb(t);
    const b = new PgBlobStore(db, { chunkBytes: 1000 });
    await b.put('k', ['old']);
    let release!: () => void;
    const held = new Promise<void>((ok) => (release = ok));
    let staged!: () => void;
    const reachedStaging = new Promise<void>((ok) => (staged = ok));
    async function* slow() {
      yield randomBytes(2500);
      yield randomBytes(10);
      staged();
      await held;
      yield randomBytes(3000);
    }
    const p = b.put('k', slow()).then(
      () => undefined,
      (e: unknown) => e,
    );
    await reachedStaging;
    t.equal(await b.sweepPartials(60_000), 0, 'a recently touched upload is left alone');
    t.strictSame(await counts(db), { objects: 2, staged: 1, chunks: 3 }, 'the live blob and the staged upload');
    t.equal((await readAll(await b.get('k')))?.toString(), 'old', 'readers see the old blob meanwhile');
    await stagedOlderThan(db, 5);
    t.equal(await b.sweepPartials(5), 1, 'a sweep with a short horizon takes it');
    release();
    const err = await p;
    t.ok(err instanceof BlobUploadLostError, 'the put fails with BlobUploadLostError');
    t.equal((await readAll(await b.get('k')))?.toString(), 'old', 'the old blob is untouched');
    t.strictSame(await counts(db), { objects: 1, staged: 0, chunks: 1 }, 'nothing of the upload is left');
  });

  t.test('two stores on one database (two fronts) see each other’s blobs', async (t) => {
    const db = await freshDb(t);
    const a = new PgBlobStore(db, { chunkBytes: 4096 });
    const b = new PgBlobStore(db, { chunkBytes: 1000 });
    const data = randomBytes(20_000);
    await a.put('up', [data]);
    t.ok((await readAll(await b.get('up')))?.equals(data), 'a reader with another chunk size reads it whole');
    await b.delete('up');
    t.equal(await a.exists('up'), false);
  });
}

t.test('pglite', async (t) => {
  // Every fresh database starts from the dump of one migrated database.
  const pg = new PGlite({ loadDataDir: await pgliteTemplate() });
  const unused = () => Promise.reject(new Error('migrate() only runs scripts'));
  await migrate({ kind: 'pglite', exec: async (sql) => void (await pg.exec(sql)), query: unused, transaction: unused, close: () => pg.close() });
  const template = await pg.dumpDataDir('none');
  await pg.close();
  // One database for the whole PGlite run (opening one costs 1-2 s): the subtests run one after
  // another, and each starts from empty blob tables.
  const db = await openPglite(undefined, { template });
  t.teardown(() => db.close());
  suites(t, async () => {
    await db.query('DELETE FROM blob_objects');
    return db;
  });
});

const why = await pgUnreachable();
t.test('postgres', async (t) => {
  if (why) {
    if (REQUIRED) t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${PG_SHOWN} is unreachable: ${why}`);
    else t.plan(0, `Postgres at ${PG_SHOWN} is unreachable (${why}): skipping; start it, or set TEST_DATABASE_URL; CI_REQUIRE_SERVICES=1 makes this a failure`);
    return;
  }
  suites(t, async (t) => {
    const { url, drop } = await freshSchema();
    const db = await openPostgres(url);
    t.teardown(async () => {
      await db.close().catch(() => {});
      await drop();
    });
    await migrate(db);
    return db;
  });
});
