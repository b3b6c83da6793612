// Signed URLs (the CSV upload and the results download are served by the service itself,
// authorised by the URL alone): HMAC-SHA256 with SVC_SECRET over the method, the path,
// the expiry and every other query parameter, so none of them can be changed without breaking
// the signature. Plain functions of (secret, request parts, clock): no state, no I/O.

import { createHmac, timingSafeEqual } from 'node:crypto';

/** The query parameters a signed URL carries besides its own. */
export type SignedQuery = Record<string, string>;

/** Unix seconds. */
const unix = (ms: number): number => Math.floor(ms / 1000);

/** What is signed: one line each for the method, the path, and the sorted parameters (with `expires`). */
function canonical(method: string, path: string, params: SignedQuery): string {
  const pairs = Object.keys(params)
    .filter((k) => k !== 'signature')
    .sort()
    .map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(params[k]!)}`);
  return `${method.toUpperCase()}\n${path}\n${pairs.join('&')}`;
}

const hmac = (secret: string, text: string): string => createHmac('sha256', secret).update(text).digest('hex');

/**
 * The query string of a signed URL for `method path` valid until `expiresAt`: the given
 * parameters plus `expires` (unix seconds) and `signature` (hex HMAC-SHA256). Append it to the
 * public URL of the path: `${publicUrl}${path}?${signQuery(...)}`.
 */
export function signQuery(secret: string, method: string, path: string, params: SignedQuery, expiresAt: Date): string {
  const all: SignedQuery = { ...params, expires: String(unix(expiresAt.getTime())) };
  const q = new URLSearchParams(all);
  q.set('signature', hmac(secret, canonical(method, path, all)));
  return q.toString();
}

export type SignatureCheck = 'ok' | 'expired' | 'invalid';

/**
 * Checks a request against its signature: `query` is the request's whole query (including
 * `expires` and `signature`; a repeated parameter is invalid). A valid signature whose expiry
 * has passed is `expired`; both `expired` and `invalid` answer 403 `invalid_signature`.
 */
export function verifyQuery(secret: string, method: string, path: string, query: Record<string, unknown>, now = Date.now()): SignatureCheck {
  const params: SignedQuery = {};
  for (const [k, v] of Object.entries(query)) {
    if (typeof v !== 'string') return 'invalid';
    params[k] = v;
  }
  const { signature, expires } = params;
  if (!signature || !expires || !/^\d{1,12}$/.test(expires) || !/^[0-9a-f]{64}$/.test(signature)) return 'invalid';
  const want = Buffer.from(hmac(secret, canonical(method, path, params)), 'hex');
  if (!timingSafeEqual(want, Buffer.from(signature, 'hex'))) return 'invalid';
  return Number(expires) < unix(now) ? 'expired' : 'ok';
}
