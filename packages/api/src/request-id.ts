// Request ids (`X-Request-ID`, spec core 4): `req_` + 32 hex digits, all of them random, so an id
// says nothing about the process, the time or how many requests came before it (a counter
// would). The random bytes come from a pool refilled 256 ids at a time: one CSPRNG call per
// 256 requests instead of one per request.

import { randomFillSync } from 'node:crypto';

const ID_BYTES = 16;
const POOL_IDS = 256;
// allocUnsafeSlow: a buffer of its own, never a slice of Node's shared pool.
const pool = Buffer.allocUnsafeSlow(ID_BYTES * POOL_IDS);
let offset = pool.length;

export function nextRequestId(): string {
  if (offset === pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const id = `req_${pool.toString('hex', offset, offset + ID_BYTES)}`;
  offset += ID_BYTES;
  return id;
}
