// The blob port on the relational store: blobs as rows of chunks in the store's
// Db (Postgres in the cluster profile, so any front serves any upload and download; PGlite runs the
// same SQL). Tables: infra/migrations/008_blobs.sql.
//
// put streams: each chunk (chunkBytes, 1 MiB by default) is inserted as soon as it fills, under a
// 'staged' object of a fresh id, so no step holds more than a chunk of the body. The blob appears
// under its key whole or not at all: one transaction, under an advisory lock on the key, deletes
// the key's live object (its chunks by cascade) and turns the staged one live. A crash mid-put
// leaves a staged object that get/exists never see, removed by sweepPartials().
//
// get streams too: the Readable fetches `readChunks` chunks per query, only when the consumer
// wants more. A read that overlaps a replace or delete of the same key (whose old chunks go at
// once) fails with BlobGoneError; it never yields a mix of two blobs.

import { Readable } from 'node:stream';
import type { Db } from '../db/db.ts';
import { BlobTooLargeError, checkBlobKey, checkBlobPrefix, type BlobEntry, type BlobPutOptions, type BlobStore } from './blob.ts';
import { newId } from '../db/ids.ts';

/** pg_advisory_xact_lock(class, hashtext(key)): serialises the publishes of one key. */
const LOCK_CLASS = 727_275;

export interface PgBlobStoreOptions {
  /** Bytes per stored chunk (the last one may be shorter); default 1 MiB. */
  chunkBytes?: number;
  /** Chunks fetched per query by get()'s stream; default 4. */
  readChunks?: number;
}

/** The blob was replaced or deleted while a get() stream was reading it (the stream errors). */
export class BlobGoneError extends Error {
  readonly code = 'blob_gone';
  override readonly name = 'BlobGoneError';
  constructor(readonly key: string) {
    super(`the blob ${JSON.stringify(key)} was replaced or deleted while being read`);
  }
}

/** A put whose staged object was swept (sweepPartials) before it was published: nothing stored. */
export class BlobUploadLostError extends Error {
  readonly code = 'blob_upload_lost';
  override readonly name = 'BlobUploadLostError';
  constructor(readonly key: string) {
    super(`the upload of ${JSON.stringify(key)} was swept as abandoned before it was published`);
  }
}

const asBuffer = (v: unknown): Buffer => {
  if (Buffer.isBuffer(v)) return v;
  if (typeof v === 'string') return Buffer.from(v);
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw new TypeError(`a blob body yields strings or bytes, not ${typeof v}`);
};

export class PgBlobStore implements BlobStore {
  readonly chunkBytes: number;
  readonly readChunks: number;
  /**
   * PGlite converts bytea parameters and results in JavaScript a byte at a time (about 0.5 s per
   * MiB each way); hex text through encode()/decode() is ~20 times faster there. The pg adapter
   * sends Buffers as binary parameters and parses bytea results with Buffer's own hex decoder.
   */
  readonly #hex: boolean;

  constructor(
    readonly db: Db,
    opts: PgBlobStoreOptions = {},
  ) {
    this.chunkBytes = opts.chunkBytes ?? 1024 * 1024;
    this.readChunks = opts.readChunks ?? 4;
    this.#hex = db.kind === 'pglite';
    if (!Number.isSafeInteger(this.chunkBytes) || this.chunkBytes < 1) throw new RangeError(`bad chunkBytes ${this.chunkBytes}`);
    if (!Number.isSafeInteger(this.readChunks) || this.readChunks < 1) throw new RangeError(`bad readChunks ${this.readChunks}`);
  }

  async put(key: string, body: Readable | AsyncIterable<Buffer | string> | Iterable<Buffer | string>, opts: BlobPutOptions = {}): Promise<{ bytes: number }> {
    checkBlobKey(key);
    const max = opts.maxBytes ?? Number.MAX_SAFE_INTEGER;
    const id = newId('blob');
    let bytes = 0;
    let seq = 0;
    const hex = this.#hex;
    const insert = async (data: Buffer): Promise<void> => {
      // Bumps touched_at (an upload in progress is not abandoned) and inserts nothing once the
      // staged object is gone (swept).
      const rows = await this.db.query(
        `WITH o AS (UPDATE blob_objects SET touched_at = now() WHERE id = $1 AND state = 'staged' RETURNING id)
         INSERT INTO blob_chunks (object_id, seq, data) SELECT o.id, $2, ${hex ? `decode($3, 'hex')` : '$3::bytea'} FROM o RETURNING seq`,
        [id, seq, hex ? data.toString('hex') : data],
      );
      if (rows.length !== 1) throw new BlobUploadLostError(key);
      seq++;
    };
    try {
      await this.db.query(`INSERT INTO blob_objects (id, key, state) VALUES ($1, $2, 'staged')`, [id, key]);
      let pending: Buffer[] = [];
      let pendingLen = 0;
      for await (const piece of body as AsyncIterable<unknown>) {
        let buf = asBuffer(piece);
        bytes += buf.length;
        if (bytes > max) throw new BlobTooLargeError(max);
        while (pendingLen + buf.length >= this.chunkBytes) {
          const take = this.chunkBytes - pendingLen;
          pending.push(buf.subarray(0, take));
          await insert(pending.length === 1 ? pending[0]! : Buffer.concat(pending, this.chunkBytes));
          pending = [];
          pendingLen = 0;
          buf = buf.subarray(take);
        }
        if (buf.length > 0) {
          pending.push(buf);
          pendingLen += buf.length;
        }
      }
      if (pendingLen > 0) await insert(Buffer.concat(pending, pendingLen));
      await this.db.transaction(async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_CLASS, key]);
        await tx.query(`DELETE FROM blob_objects WHERE key = $1 AND state = 'live'`, [key]);
        const rows = await tx.query(`UPDATE blob_objects SET state = 'live', bytes = $2, chunks = $3, touched_at = now() WHERE id = $1 AND state = 'staged' RETURNING id`, [id, bytes, seq]);
        if (rows.length !== 1) throw new BlobUploadLostError(key);
      });
    } catch (err) {
      // Best effort: what a failed cleanup leaves is staged, invisible, and swept later.
      await this.db.query(`DELETE FROM blob_objects WHERE id = $1 AND state = 'staged'`, [id]).catch(() => {});
      throw err;
    }
    return { bytes };
  }

  async get(key: string): Promise<Readable | undefined> {
    checkBlobKey(key);
    const [row] = await this.db.query<{ id: string; chunks: number }>(`SELECT id, chunks FROM blob_objects WHERE key = $1 AND state = 'live'`, [key]);
    if (!row) return undefined;
    const { db, readChunks } = this;
    const hex = this.#hex;
    const { id, chunks } = row;
    async function* read(): AsyncGenerator<Buffer> {
      for (let from = 0; from < chunks; from += readChunks) {
        const to = Math.min(from + readChunks, chunks);
        const rows = await db.query<{ data: unknown }>(`SELECT ${hex ? `encode(data, 'hex') AS data` : 'data'} FROM blob_chunks WHERE object_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq`, [id, from, to]);
        // The object's chunks all exist until the object is deleted (cascade): a short batch means it was.
        if (rows.length !== to - from) throw new BlobGoneError(key);
        for (let i = 0; i < rows.length; i++) {
          const v = rows[i]!.data;
          const data = hex && typeof v === 'string' ? Buffer.from(v, 'hex') : asBuffer(v);
          rows[i] = { data: undefined }; // not kept once handed on
          yield data;
        }
      }
    }
    return Readable.from(read(), { objectMode: false });
  }

  async exists(key: string): Promise<boolean> {
    checkBlobKey(key);
    return (await this.db.query(`SELECT 1 FROM blob_objects WHERE key = $1 AND state = 'live'`, [key])).length > 0;
  }

  async delete(key: string): Promise<void> {
    checkBlobKey(key);
    await this.db.query(`DELETE FROM blob_objects WHERE key = $1 AND state = 'live'`, [key]);
  }

  async list(prefix: string): Promise<BlobEntry[]> {
    checkBlobPrefix(prefix);
    const rows = await this.db.query<{ key: string; created_at: Date | string }>(
      `SELECT key, created_at FROM blob_objects WHERE state = 'live' AND left(key, length($1)) = $1 ORDER BY key COLLATE "C"`,
      [prefix],
    );
    return rows.map((r) => ({ key: r.key, storedAt: new Date(r.created_at) }));
  }

  /**
   * Deletes staged uploads (and their chunks) untouched for `olderThanMs`: what crashed puts left.
   * An upload still in progress touches its object with every chunk; one swept anyway (a body
   * stalled longer than that) fails with BlobUploadLostError and stores nothing. Returns how many.
   */
  async sweepPartials(olderThanMs: number): Promise<number> {
    if (!(olderThanMs >= 0)) throw new RangeError(`bad olderThanMs ${olderThanMs}`);
    const rows = await this.db.query(`DELETE FROM blob_objects WHERE state = 'staged' AND touched_at < now() - $1::double precision * interval '1 millisecond' RETURNING id`, [olderThanMs]);
    return rows.length;
  }
}
