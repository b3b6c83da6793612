// A job's input as stored in the blob store, written once by the intake and read by recovery and
// by the results CSV, both streaming:
//
//   jobs/<id>/rows.ndjson   line 1: {"v":1,"columns":[…],"email_index":i,"bom":false}
//                           then one line per input row, in input order: [idx, cell, cell, …]
//                           where idx is the index of the row's unique email (first-occurrence
//                           order: the first row with a new email has the next idx)
//   jobs/<id>/dups.bin      one bit per unique email (idx): set when a later row repeats it
//
// JSON jobs have one column, `email`. Because unique emails are numbered in order of first
// occurrence, a pass over the rows meets each idx first in increasing order: the results CSV
// merges the rows with the results read in idx order, and keeps in memory only the results of
// emails that are repeated later (dups.bin).

import { createInterface } from 'node:readline';
import type { BlobStore } from '@svc/store';

export interface RowsHeader {
  v: 1;
  columns: string[];
  email_index: number;
  /** The uploaded CSV started with a UTF-8 BOM (the results CSV writes one back). */
  bom: boolean;
}

export interface StoredRow {
  idx: number;
  fields: string[];
}

export const rowsKey = (jobId: string): string => `jobs/${jobId}/rows.ndjson`;
export const dupsKey = (jobId: string): string => `jobs/${jobId}/dups.bin`;
export const resultsKey = (jobId: string): string => `jobs/${jobId}/results.csv`;

/** Rows read back in batches of this many. */
export const ROW_BATCH = 1000;

/** One stored line of a row. */
export const rowLine = (idx: number, fields: readonly string[]): string => JSON.stringify([idx, ...fields]);

export interface StoredRows {
  header: RowsHeader;
  /** The rows in input order, in batches; each call starts a new pass over the blob. */
  batches(): AsyncGenerator<StoredRow[], void, undefined>;
}

/** The stored input of a job, or undefined when its blob is missing. */
export async function openRows(blobs: BlobStore, key: string): Promise<StoredRows | undefined> {
  const first = await blobs.get(key);
  if (!first) return undefined;
  const lines = createInterface({ input: first, crlfDelay: Infinity });
  let headerLine: string | undefined;
  for await (const line of lines) {
    headerLine = line;
    break;
  }
  lines.close();
  first.destroy();
  if (headerLine === undefined) throw new Error(`${key}: empty rows blob`);
  const header = JSON.parse(headerLine) as RowsHeader;
  if (header.v !== 1 || !Array.isArray(header.columns)) throw new Error(`${key}: unknown rows format`);
  return {
    header,
    async *batches() {
      const input = await blobs.get(key);
      if (!input) throw new Error(`${key}: the rows blob disappeared`);
      const rl = createInterface({ input, crlfDelay: Infinity });
      let skipHeader = true;
      let batch: StoredRow[] = [];
      try {
        for await (const line of rl) {
          if (skipHeader) {
            skipHeader = false;
            continue;
          }
          if (line === '') continue;
          const [idx, ...fields] = JSON.parse(line) as [number, ...string[]];
          batch.push({ idx, fields });
          if (batch.length >= ROW_BATCH) {
            yield batch;
            batch = [];
          }
        }
        if (batch.length > 0) yield batch;
      } finally {
        rl.close();
        input.destroy();
      }
    },
  };
}

/** The "repeated later" bits of a job's unique emails (all clear when the blob is missing: no duplicates). */
export async function readDups(blobs: BlobStore, key: string): Promise<Uint8Array> {
  const s = await blobs.get(key);
  if (!s) return new Uint8Array(0);
  const parts: Buffer[] = [];
  for await (const c of s) parts.push(c as Buffer);
  return new Uint8Array(Buffer.concat(parts));
}

export const hasBit = (bits: Uint8Array, i: number): boolean => ((bits[i >> 3] ?? 0) & (1 << (i & 7))) !== 0;

/** A growable bit set (the dups of a job while its input is read). */
export class BitSet {
  bytes = new Uint8Array(1024);
  set(i: number): void {
    const b = i >> 3;
    if (b >= this.bytes.length) {
      const grown = new Uint8Array(Math.max(b + 1, this.bytes.length * 2));
      grown.set(this.bytes);
      this.bytes = grown;
    }
    this.bytes[b]! |= 1 << (i & 7);
  }
  /** The bytes covering `n` bits. */
  slice(n: number): Uint8Array {
    const out = new Uint8Array(Math.ceil(n / 8));
    out.set(this.bytes.subarray(0, out.length));
    return out;
  }
}
