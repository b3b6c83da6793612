// The blob port's conformance cases, run against each adapter (one so far: a directory). Written
// against BlobStore only, so the Postgres blob adapter of the cluster profile runs the same file.

import t from 'tap';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { BlobTooLargeError, DirBlobStore, type BlobStore } from '../src/index.ts';
import type { Tap } from './conformance.ts';

async function text(r: Readable | undefined): Promise<string | undefined> {
  if (!r) return undefined;
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(Buffer.from(c as Buffer));
  return Buffer.concat(parts).toString('utf8');
}

export function blobConformance(t: Tap, fresh: (t: Tap) => BlobStore): void {
  t.test('put, get, exists, delete', async (t) => {
    const b = fresh(t);
    t.equal(await b.exists('jobs/j1/rows.ndjson'), false);
    t.equal(await b.get('jobs/j1/rows.ndjson'), undefined, 'get of nothing is undefined');
    t.strictSame(await b.put('jobs/j1/rows.ndjson', ['a,b\n', Buffer.from('é\n')]), { bytes: 7 }, 'strings and buffers, counted in bytes');
    t.equal(await b.exists('jobs/j1/rows.ndjson'), true);
    t.equal(await text(await b.get('jobs/j1/rows.ndjson')), 'a,b\né\n');
    await b.put('jobs/j1/rows.ndjson', Readable.from(['replaced']));
    t.equal(await text(await b.get('jobs/j1/rows.ndjson')), 'replaced', 'a put replaces');
    await b.delete('jobs/j1/rows.ndjson');
    t.equal(await b.exists('jobs/j1/rows.ndjson'), false);
    await b.delete('jobs/j1/rows.ndjson');
    t.pass('deleting nothing is fine');
  });

  t.test('a large body streams through', async (t) => {
    const b = fresh(t);
    async function* chunks() {
      for (let i = 0; i < 200; i++) yield Buffer.alloc(64 * 1024, i % 251);
    }
    t.strictSame(await b.put('big', chunks()), { bytes: 200 * 64 * 1024 });
    let n = 0;
    for await (const c of (await b.get('big'))!) n += (c as Buffer).length;
    t.equal(n, 200 * 64 * 1024);
  });

  t.test('over maxBytes: BlobTooLargeError and nothing stored (an older blob stays)', async (t) => {
    const b = fresh(t);
    await b.put('k', ['old']);
    const err = await b.put('k', ['12345', '6789'], { maxBytes: 8 }).then(() => undefined, (e: unknown) => e);
    t.ok(err instanceof BlobTooLargeError, 'BlobTooLargeError');
    t.match(err, { code: 'blob_too_large', maxBytes: 8 });
    t.equal(await text(await b.get('k')), 'old');
    t.strictSame(await b.put('k2', ['12345678'], { maxBytes: 8 }), { bytes: 8 }, 'exactly the limit is fine');
  });

  t.test('a body that fails midway stores nothing', async (t) => {
    const b = fresh(t);
    async function* broken() {
      yield 'half of it';
      throw new Error('client went away');
    }
    await t.rejects(b.put('k', broken()), /client went away/);
    t.equal(await b.exists('k'), false);
  });

  t.test('keys cannot leave the store', async (t) => {
    const b = fresh(t);
    for (const k of ['../x', 'a/../../x', '/etc/passwd', '', 'a//b', 'a/.', 'a b', 'k.partial-123']) await t.rejects(b.put(k, ['x']), RangeError, JSON.stringify(k));
  });
}

t.test('DirBlobStore', async (t) => {
  const dirs: string[] = [];
  t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  const fresh = (): DirBlobStore => {
    const d = mkdtempSync(path.join(os.tmpdir(), 'svc-blob-'));
    dirs.push(d);
    return new DirBlobStore(path.join(d, 'blobs'));
  };
  blobConformance(t, fresh);

  t.test('owner-only directory and files; no partial file left', async (t) => {
    const b = fresh();
    const old = process.umask(0o000);
    try {
      await b.put('jobs/j/rows.ndjson', ['x']);
    } finally {
      process.umask(old);
    }
    t.equal(statSync(b.root).mode & 0o777, 0o700, 'root 0700 even under umask 000');
    t.equal(statSync(path.join(b.root, 'jobs', 'j')).mode & 0o077, 0, 'sub-directories not open to others');
    t.equal(statSync(path.join(b.root, 'jobs', 'j', 'rows.ndjson')).mode & 0o777, 0o600, 'files 0600');
    t.strictSame(readdirSync(path.join(b.root, 'jobs', 'j')), ['rows.ndjson'], 'the temporary file was renamed');
  });

  t.test('sweepPartials removes what a crash left', async (t) => {
    const b = fresh();
    await b.put('jobs/j/rows.ndjson', ['x']);
    const { writeFileSync } = await import('node:fs');
    writeFileSync(path.join(b.root, 'jobs', 'j', 'rows.ndjson.partial-abc'), 'half');
    t.equal(await b.sweepPartials(), 1);
    t.strictSame(readdirSync(path.join(b.root, 'jobs', 'j')), ['rows.ndjson']);
    t.equal(await new DirBlobStore(path.join(b.root, 'nope')).sweepPartials(), 0, 'no directory yet: nothing to do');
  });
});
