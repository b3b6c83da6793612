// The signature of a job webhook (`X-Signature`), and its check as a receiver makes it.

import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SignatureCheck } from '../signed-urls.ts';

/** Unix seconds. */
const unix = (ms: number): number => Math.floor(ms / 1000);

/**
 * The `X-Signature` header of a job webhook (docs/decisions/webhooks.md): `t=<unix>,v1=<hex
 * HMAC-SHA256(secret, t + "." + body)>`, over the exact bytes sent as the body, with one `v1` per
 * secret given (an account's secrets during a rotation's grace period, newest first). The MAC
 * input starts with digits and a URL's with a method name, so one can never stand for the other.
 */
export function webhookSignature(secret: string | readonly string[], unixTs: number, body: string | Uint8Array): string {
  if (!Number.isSafeInteger(unixTs) || unixTs < 0) throw new TypeError('webhookSignature: unixTs must be a non-negative integer');
  const secrets = typeof secret === 'string' ? [secret] : secret;
  if (secrets.length === 0) throw new TypeError('webhookSignature: no secret');
  // One v1 per secret (a rotation's grace period: the new secret's first), on the same t.
  return `t=${unixTs},${secrets.map((s) => `v1=${createHmac('sha256', s).update(`${unixTs}.`).update(body).digest('hex')}`).join(',')}`;
}

/**
 * What a receiver does with `X-Signature` (for our tests and the README's receiver example): the
 * header parses, one `v1` matches in constant time, and `t` is within `toleranceS` of `now`, so
 * a captured delivery cannot be replayed much later. Never throws on what a sender sends.
 */
export function verifyWebhookSignature(secret: string, header: unknown, body: string | Uint8Array, now = Date.now(), toleranceS = 300): SignatureCheck {
  if (typeof header !== 'string') return 'invalid';
  let t: number | undefined;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) return 'invalid';
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === 't') {
      if (t !== undefined || !/^\d{1,12}$/.test(value)) return 'invalid';
      t = Number(value);
    } else if (name === 'v1') v1.push(value);
  }
  if (t === undefined) return 'invalid';
  const want = Buffer.from(webhookSignature(secret, t, body).slice(`t=${t},v1=`.length), 'hex');
  // Only 64-hex-digit candidates are compared, so timingSafeEqual always gets 32 bytes each side.
  if (!v1.some((s) => /^[0-9a-f]{64}$/.test(s) && timingSafeEqual(want, Buffer.from(s, 'hex')))) return 'invalid';
  return Math.abs(unix(now) - t) > toleranceS ? 'expired' : 'ok';
}
