// The blob port's conformance suite (BlobStore in packages/store/src/blob/blob.ts), one function run on
// every adapter: DirBlobStore (blob-conformance-dir.test.ts) and PgBlobStore on PGlite and
// Postgres (blob-pg.test.ts). Written against the port only; `chunkBytes` is the adapter's unit
// of storage (any size for the directory), so the sizes around it are the ones asserted.

import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { BlobTooLargeError, type BlobStore } from '../src/blob/blob.ts';
import type { Tap } from './conformance.ts';
import { until } from '../../../test/helpers/until.ts';

export type { Tap };

export interface BlobAdapter {
  readonly name: string;
  /** The adapter's chunk size (sizes chunk-1, chunk, chunk+1 and several chunks are tested). */
  readonly chunkBytes: number;
  /** A new, empty store isolated from every other one, cleaned up when `t` ends. */
  fresh(t: Tap): Promise<BlobStore>;
  /** Puts under way in `store` as the adapter holds them (a staged object, a partial file with bytes in it). */
  writing(store: BlobStore): Promise<number>;
}

/** All the bytes of a stream (undefined for undefined). */
export async function readAll(r: Readable | undefined): Promise<Buffer | undefined> {
  if (!r) return undefined;
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(Buffer.isBuffer(c) ? c : Buffer.from(c as string));
  return Buffer.concat(parts);
}

/** `buf` cut in pieces of pseudo-random sizes (1 .. maxPiece bytes), as an async body. */
async function* pieces(buf: Buffer, maxPiece: number, seed = 1): AsyncGenerator<Buffer> {
  let s = seed;
  for (let at = 0; at < buf.length; ) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    const n = 1 + (s % maxPiece);
    yield buf.subarray(at, at + n);
    at += n;
  }
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

export function blobConformance(t: Tap, adapter: BlobAdapter): void {
  const C = adapter.chunkBytes;

  t.test('byte-for-byte round trips of random binary data around the chunk size', async (t) => {
    const b = await adapter.fresh(t);
    const sizes = [0, 1, C - 1, C, C + 1, 3 * C + C / 2, 5 * C].map(Math.floor);
    for (const [i, n] of sizes.entries()) {
      const data = randomBytes(n);
      const key = `sizes/${i}-${n}.bin`;
      // Bodies of every shape: one Buffer, an async body of odd pieces, a Readable.
      const shape = i % 3;
      const body = shape === 0 ? [data] : shape === 1 ? pieces(data, Math.max(1, Math.floor(C / 3) + 7), n) : Readable.from(pieces(data, 4096, n));
      t.strictSame(await b.put(key, body), { bytes: n }, `${n} bytes: put reports the size`);
      t.equal(await b.exists(key), true, `${n} bytes: exists`);
      const back = await readAll(await b.get(key));
      t.equal(back?.length, n, `${n} bytes: as many back`);
      t.ok(back && back.equals(data), `${n} bytes: the same bytes back`);
      const again = await readAll(await b.get(key));
      t.ok(again && again.equals(data), `${n} bytes: a second get reads the same`);
    }
  });

  t.test('strings are stored as UTF-8 and counted in bytes', async (t) => {
    const b = await adapter.fresh(t);
    t.strictSame(await b.put('jobs/j1/rows.ndjson', ['a,b\n', Buffer.from('é\n'), '€']), { bytes: 10 });
    t.equal((await readAll(await b.get('jobs/j1/rows.ndjson')))?.toString('utf8'), 'a,b\né\n€');
  });

  t.test('a put replaces the blob under the same key', async (t) => {
    const b = await adapter.fresh(t);
    const first = randomBytes(2 * C + 5);
    const second = randomBytes(Math.max(1, Math.floor(C / 2)));
    await b.put('k', [first]);
    await b.put('other', ['untouched']);
    t.strictSame(await b.put('k', [second]), { bytes: second.length });
    t.ok((await readAll(await b.get('k')))?.equals(second), 'the second blob, nothing of the first');
    const third = randomBytes(3 * C);
    await b.put('k', pieces(third, C + 3));
    t.ok((await readAll(await b.get('k')))?.equals(third), 'a longer one replaces a shorter one');
    await b.put('k', []);
    t.equal((await readAll(await b.get('k')))?.length, 0, 'an empty one replaces it too');
    t.equal((await readAll(await b.get('other')))?.toString(), 'untouched', 'other keys are left alone');
  });

  t.test('maxBytes: exactly the limit is stored, one byte more is refused and stores nothing', async (t) => {
    const b = await adapter.fresh(t);
    for (const max of [0, 1, C - 1, C, C + 1, 2 * C].map(Math.floor)) {
      const data = randomBytes(max);
      t.strictSame(await b.put(`ok/${max}`, pieces(data, 997, max)), { bytes: max }, `${max} bytes under maxBytes ${max}`);
      t.ok((await readAll(await b.get(`ok/${max}`)))?.equals(data), `${max}: stored`);

      const over = randomBytes(max + 1);
      const err = await b.put(`over/${max}`, pieces(over, 997, max), { maxBytes: max }).then(
        () => undefined,
        (e: unknown) => e,
      );
      t.ok(err instanceof BlobTooLargeError, `${max + 1} bytes under maxBytes ${max}: BlobTooLargeError`);
      t.match(err, { code: 'blob_too_large', maxBytes: max });
      t.equal(await b.exists(`over/${max}`), false, `${max}: nothing stored`);
      t.equal(await b.get(`over/${max}`), undefined);

      const old = randomBytes(C + 2);
      await b.put(`keep/${max}`, [old]);
      await t.rejects(b.put(`keep/${max}`, [over], { maxBytes: max }), BlobTooLargeError);
      t.ok((await readAll(await b.get(`keep/${max}`)))?.equals(old), `${max}: the older blob under the key is untouched`);
    }
  });

  t.test('a body far over maxBytes is refused without being read to its end', async (t) => {
    const b = await adapter.fresh(t);
    let pulled = 0;
    async function* endless() {
      for (;;) {
        pulled++;
        yield Buffer.alloc(1024, 7);
      }
    }
    await t.rejects(b.put('endless', endless(), { maxBytes: 10 * 1024 }), BlobTooLargeError);
    t.ok(pulled <= 16, `stopped reading soon after the limit (${pulled} pieces of 1 KiB)`);
    t.equal(await b.exists('endless'), false);
  });

  t.test('bad keys are refused by every operation', async (t) => {
    const b = await adapter.fresh(t);
    const bad = ['../x', 'a/../../x', '/etc/passwd', '', 'a//b', 'a/.', 'a/..', 'a b', 'k.partial-123', 'a/b/c/d/e/f/g/h/i', 'x'.repeat(129), 'ü', 'a\\b', 'a/'];
    for (const k of bad) {
      await t.rejects(b.put(k, ['x']), RangeError, `put ${JSON.stringify(k)}`);
      await t.rejects(b.get(k), RangeError, `get ${JSON.stringify(k)}`);
      await t.rejects(b.exists(k), RangeError, `exists ${JSON.stringify(k)}`);
      await t.rejects(b.delete(k), RangeError, `delete ${JSON.stringify(k)}`);
    }
    // (No key that is a prefix segment of another: the directory adapter cannot hold both `a` and `a/b`.)
    for (const k of ['a', 'jobs/j_1/input.csv', 'A-Z.0_9', 'x'.repeat(128), 'p/b/c/d/e/f/g/h', '.hidden', '...']) {
      await b.put(k, [k]);
      t.equal((await readAll(await b.get(k)))?.toString(), k, `good key ${JSON.stringify(k)}`);
    }
  });

  t.test('get, exists and delete of a missing key', async (t) => {
    const b = await adapter.fresh(t);
    t.equal(await b.get('nope'), undefined, 'get: undefined');
    t.equal(await b.get('jobs/nope/rows.ndjson'), undefined);
    t.equal(await b.exists('nope'), false, 'exists: false');
    await b.delete('nope');
    t.pass('delete: nothing happens');
  });

  t.test('delete removes the blob and is idempotent', async (t) => {
    const b = await adapter.fresh(t);
    await b.put('jobs/j/a.csv', [randomBytes(2 * C + 1)]);
    await b.put('jobs/j/b.csv', ['b']);
    await b.delete('jobs/j/a.csv');
    t.equal(await b.exists('jobs/j/a.csv'), false);
    t.equal(await b.get('jobs/j/a.csv'), undefined);
    await b.delete('jobs/j/a.csv');
    t.pass('deleting twice is fine');
    t.equal((await readAll(await b.get('jobs/j/b.csv')))?.toString(), 'b', 'its neighbour stays');
    await b.put('jobs/j/a.csv', ['again']);
    t.equal((await readAll(await b.get('jobs/j/a.csv')))?.toString(), 'again', 'the key can be used again');
  });

  t.test('list: the stored blobs under a prefix, in key order, with when they were stored', async (t) => {
    const b = await adapter.fresh(t);
    t.strictSame(await b.list('jobs/'), [], 'nothing yet');
    const before = Date.now() - 1000;
    await b.put('jobs/j2/rows.ndjson', ['r']);
    await b.put('jobs/j1/upload.csv', [randomBytes(C + 1)]);
    await b.put('jobs/j1/dups.bin', ['d']);
    await b.put('other/x.bin', ['x']);
    await b.put('jobsx/y.bin', ['y']);
    const listed = await b.list('jobs/');
    t.strictSame(listed.map((e) => e.key), ['jobs/j1/dups.bin', 'jobs/j1/upload.csv', 'jobs/j2/rows.ndjson'], 'only keys under jobs/ (not jobsx/), sorted');
    t.ok(listed.every((e) => e.storedAt instanceof Date && e.storedAt.getTime() >= before && e.storedAt.getTime() <= Date.now() + 1000), 'each with when it was stored');
    t.strictSame((await b.list('jobs/j1/')).map((e) => e.key), ['jobs/j1/dups.bin', 'jobs/j1/upload.csv'], 'a deeper prefix');
    t.strictSame((await b.list('')).map((e) => e.key), ['jobs/j1/dups.bin', 'jobs/j1/upload.csv', 'jobs/j2/rows.ndjson', 'jobsx/y.bin', 'other/x.bin'], 'everything');
    t.strictSame(await b.list('none/'), [], 'an unknown prefix: nothing');
    await b.delete('jobs/j1/dups.bin');
    t.strictSame((await b.list('jobs/')).map((e) => e.key), ['jobs/j1/upload.csv', 'jobs/j2/rows.ndjson'], 'a deleted blob is gone from the list');
    for (const bad of ['jobs', '/jobs/', '../', 'jobs//', 'a b/']) await t.rejects(b.list(bad), RangeError, `bad prefix ${JSON.stringify(bad)}`);
    // A put in progress is not listed.
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let waiting = false;
    const slow = b.put('jobs/j3/rows.ndjson', (async function* () {
      yield Buffer.from('first');
      waiting = true;
      await gate;
      yield Buffer.from('last');
    })());
    // Under way: its first piece taken, and held by the adapter where list could see it.
    await until(async () => waiting && (await adapter.writing(b)) === 1, 5000, 'the put to be under way');
    t.notOk((await b.list('jobs/')).some((e) => e.key.startsWith('jobs/j3/')), 'a blob being written is not listed');
    release();
    await slow;
    t.ok((await b.list('jobs/')).some((e) => e.key === 'jobs/j3/rows.ndjson'), 'once stored, it is');
  });

  t.test('concurrent puts to one key end with one whole blob, never a mix', async (t) => {
    const b = await adapter.fresh(t);
    for (let round = 0; round < 3; round++) {
      const bodies = Array.from({ length: 6 }, (_, i) => randomBytes(2 * C + 1 + i * Math.floor(C / 4)));
      const results = await Promise.allSettled(bodies.map((body, i) => b.put('race', pieces(body, Math.floor(C / 2) + 1, i + 1))));
      t.strictSame(
        results.map((r) => r.status),
        bodies.map(() => 'fulfilled'),
        `round ${round}: every put succeeds`,
      );
      const back = await readAll(await b.get('race'));
      const which = bodies.findIndex((x) => back && x.equals(back));
      t.ok(which >= 0, `round ${round}: the blob is exactly one of the bodies (${back?.length} bytes, ${back && sha(back).slice(0, 8)})`);
    }
  });

  t.test('a get overlapping puts to its key reads one whole blob, or fails; never a mix', async (t) => {
    const b = await adapter.fresh(t);
    const bodies = Array.from({ length: 4 }, () => randomBytes(4 * C + 3));
    await b.put('busy', [bodies[0]!]);
    const reads: Promise<Buffer | Error | undefined>[] = [];
    const puts: Promise<unknown>[] = [];
    for (let i = 1; i < bodies.length; i++) {
      puts.push(b.put('busy', pieces(bodies[i]!, Math.floor(C / 2) + 1, i)));
      reads.push(b.get('busy').then(readAll).catch((e: Error) => e));
    }
    await Promise.all(puts);
    for (const r of await Promise.all(reads)) {
      if (r instanceof Error) t.pass(`a read failed (${r.message})`);
      else t.ok(r && bodies.some((x) => x.equals(r)), 'a read yielded one whole blob');
    }
  });

  t.test('a body that fails midway stores nothing (and an older blob stays)', async (t) => {
    const b = await adapter.fresh(t);
    const half = randomBytes(2 * C + 17);
    async function* broken() {
      yield* pieces(half, C, 3);
      throw new Error('client went away');
    }
    await t.rejects(b.put('k', broken()), /client went away/);
    t.equal(await b.exists('k'), false, 'nothing under the key');
    t.equal(await b.get('k'), undefined);

    const old = randomBytes(C + 1);
    await b.put('k', [old]);
    await t.rejects(b.put('k', broken()), /client went away/);
    t.ok((await readAll(await b.get('k')))?.equals(old), 'the older blob is untouched');

    const stream = new Readable({ read() {} });
    // The put may not be reading yet when the stream fails (an adapter that first writes to its
    // database): the failure must still reach the put, not the process as an uncaught error.
    stream.on('error', () => {});
    const p = b.put('s', stream);
    stream.push(randomBytes(C + 1));
    setTimeout(() => stream.destroy(new Error('socket reset')), 20);
    await t.rejects(p, /socket reset/);
    t.equal(await b.exists('s'), false, 'a Readable destroyed midway stores nothing');
  });

  t.test('a get stream can be abandoned early', async (t) => {
    const b = await adapter.fresh(t);
    const data = randomBytes(6 * C);
    await b.put('big', [data]);
    const r = (await b.get('big'))!;
    for await (const c of r) {
      t.ok((c as Buffer).length > 0);
      break;
    }
    t.ok(r.destroyed, 'the stream is destroyed');
    t.ok((await readAll(await b.get('big')))?.equals(data), 'the blob is still whole');
    await b.delete('big');
    t.equal(await b.exists('big'), false);
  });
}
