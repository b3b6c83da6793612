// The blob port: job inputs, uploaded CSVs and results CSVs, written and read as streams so no
// step holds a whole file. Two adapters: a directory here (the embedded profile keeps it under
// SVC_DATA_DIR/blobs) and the relational store's tables (blob-pg.ts, the cluster profile).
//
// A blob appears under its key whole or not at all: it is written to a temporary file beside
// its place and renamed over it once complete and flushed, so a crash mid-write never leaves
// half a blob under the key (at worst a `.partial-*` file, removed by sweepPartials()).

import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, open, readdir, rename, rm, rmdir, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';

export interface BlobPutOptions {
  /** Refuse (BlobTooLargeError, nothing stored) a body longer than this many bytes. */
  maxBytes?: number;
}

export interface BlobStore {
  /** Stores the bytes of `body` under `key`, replacing any blob there; resolves with its size once it is durable. */
  put(key: string, body: Readable | AsyncIterable<Buffer | string> | Iterable<Buffer | string>, opts?: BlobPutOptions): Promise<{ bytes: number }>;
  /** A stream of the blob, or undefined when there is none under `key`. */
  get(key: string): Promise<Readable | undefined>;
  exists(key: string): Promise<boolean>;
  /** Deletes the blob (nothing happens when there is none). */
  delete(key: string): Promise<void>;
  /**
   * Every blob whose key starts with `prefix` (whole segments: `jobs/` or `jobs/<id>/`), with when
   * it was stored, in key order. Blobs being written are not listed.
   */
  list(prefix: string): Promise<BlobEntry[]>;
}

/** A stored blob, as list() gives it. */
export interface BlobEntry {
  key: string;
  /** When it was stored (its last put). */
  storedAt: Date;
}

/** A list() prefix: empty, or key segments each followed by `/`. */
export function checkBlobPrefix(prefix: string): void {
  if (prefix === '') return;
  if (!prefix.endsWith('/')) throw new RangeError(`bad blob prefix ${JSON.stringify(prefix)}: it ends with '/'`);
  checkBlobKey(prefix.slice(0, -1));
}

/** A body longer than `maxBytes`: nothing was stored (the API answers 413 payload_too_large). */
export class BlobTooLargeError extends Error {
  readonly code = 'blob_too_large';
  override readonly name = 'BlobTooLargeError';
  constructor(readonly maxBytes: number) {
    super(`the body is larger than ${maxBytes} bytes`);
  }
}

/** Keys are `/`-separated segments of letters, digits, `.`, `_` and `-` (no `..`, no absolute paths). */
const SEGMENT = /^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$/;

export function checkBlobKey(key: string): void {
  const parts = key.split('/');
  if (parts.length > 8 || !parts.every((p) => SEGMENT.test(p)) || parts.some((p) => p.includes('.partial-'))) throw new RangeError(`bad blob key ${JSON.stringify(key)}`);
}

/** Counts bytes and fails the pipeline once there are more than `max`. */
class Limit extends Transform {
  bytes = 0;
  constructor(readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer | string, _enc: BufferEncoding, done: TransformCallback): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.bytes += buf.length;
    if (this.bytes > this.max) return done(new BlobTooLargeError(this.max));
    done(null, buf);
  }
}

/**
 * Blobs as files under `root` (created owner-only, 0700, like the PGlite directory; files 0600).
 * Keys map to paths below it.
 */
export class DirBlobStore implements BlobStore {
  readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  #path(key: string): string {
    checkBlobKey(key);
    return path.join(this.root, ...key.split('/'));
  }

  async #dirFor(file: string): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    // mkdir's mode is filtered by the umask; the root must be owner-only whatever it is.
    await chmod(this.root, 0o700);
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  }

  async put(key: string, body: Readable | AsyncIterable<Buffer | string> | Iterable<Buffer | string>, opts: BlobPutOptions = {}): Promise<{ bytes: number }> {
    const file = this.#path(key);
    await this.#dirFor(file);
    const tmp = `${file}.partial-${randomBytes(6).toString('hex')}`;
    const limit = new Limit(opts.maxBytes ?? Number.MAX_SAFE_INTEGER);
    try {
      await pipeline(body instanceof Readable ? body : Readable.from(body), limit, createWriteStream(tmp, { mode: 0o600, flags: 'wx' }));
      // Flushed before the rename: the name never points at bytes still in the page cache only.
      const fh = await open(tmp, 'r');
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, file);
    } catch (err) {
      await unlink(tmp).catch(() => {});
      throw err;
    }
    return { bytes: limit.bytes };
  }

  async get(key: string): Promise<Readable | undefined> {
    const file = this.#path(key);
    try {
      const fh = await open(file, 'r');
      return fh.createReadStream();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  async exists(key: string): Promise<boolean> {
    try {
      return (await stat(this.#path(key))).isFile();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    const file = this.#path(key);
    await rm(file, { force: true });
    // A directory the deleted blob leaves empty goes too (one level: `jobs/<id>/`).
    const dir = path.dirname(file);
    if (dir !== this.root) await rmdir(dir).catch(() => {});
  }

  async list(prefix: string): Promise<BlobEntry[]> {
    checkBlobPrefix(prefix);
    const out: BlobEntry[] = [];
    const walk = async (dir: string, keyPrefix: string): Promise<void> => {
      let names: string[];
      try {
        names = await readdir(dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return;
        throw err;
      }
      for (const name of names) {
        if (name.includes('.partial-')) continue; // a put in progress (or a crash's leftover)
        const full = path.join(dir, name);
        const st = await stat(full).catch(() => undefined);
        if (!st) continue;
        if (st.isDirectory()) await walk(full, `${keyPrefix}${name}/`);
        else if (st.isFile()) out.push({ key: `${keyPrefix}${name}`, storedAt: st.mtime });
      }
    };
    await walk(prefix === '' ? this.root : path.join(this.root, ...prefix.slice(0, -1).split('/')), prefix);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** Removes temporary files a crash left behind (call at start-up, before any put). Returns how many. */
  async sweepPartials(): Promise<number> {
    let n = 0;
    const walk = async (dir: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw err;
      }
      for (const e of entries) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) await walk(p);
        else if (e.name.includes('.partial-')) {
          await unlink(p).catch(() => {});
          n++;
        }
      }
    };
    await walk(this.root);
    return n;
  }
}
