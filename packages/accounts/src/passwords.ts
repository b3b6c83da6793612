// Passwords: scrypt from Node's own crypto (OpenSSL's implementation; nothing to install), at the
// parameters OWASP's Password Storage Cheat Sheet lists for scrypt (N=2^15, r=8, p=3: 32 MiB and
// ~100 ms of one core a check on this project's 2-core machine). The stored form names its
// parameters, so a later change of them verifies old hashes and rehashes at the next sign-in.
// docs/decisions/dashboard.md has the reasons.

import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from 'node:crypto';

export interface ScryptParams {
  N: number;
  r: number;
  p: number;
}

export const SCRYPT_PARAMS: ScryptParams = { N: 2 ** 15, r: 8, p: 3 };
const KEY_BYTES = 32;
const SALT_BYTES = 16;
/** Shortest and longest password accepted, in characters (NIST SP 800-63B: at least 8, allow 64 and more). */
export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 256;

const scrypt = (password: string, salt: Buffer, p: ScryptParams): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    // maxmem: 128 * N * r bytes are needed; twice that leaves room.
    const opts: ScryptOptions = { N: p.N, r: p.r, p: p.p, maxmem: 256 * p.N * p.r };
    scryptCb(password.normalize('NFKC'), salt, KEY_BYTES, opts, (err, key) => (err ? reject(err) : resolve(key)));
  });

/** Why a new password is refused, in words for the person choosing it; undefined when it is fine. */
export function passwordProblem(password: unknown): string | undefined {
  if (typeof password !== 'string') return 'password must be a string';
  const length = [...password].length;
  if (length < PASSWORD_MIN) return `password must be at least ${PASSWORD_MIN} characters`;
  if (length > PASSWORD_MAX) return `password must be at most ${PASSWORD_MAX} characters`;
  return undefined;
}

/** `scrypt$N$r$p$salt$hash`, salt and hash in base64url. */
export async function hashPassword(password: string, params: ScryptParams = SCRYPT_PARAMS): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await scrypt(password, salt, params);
  return ['scrypt', params.N, params.r, params.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Parses a stored hash; undefined when it is not one this module wrote. */
function parse(stored: string): { params: ScryptParams; salt: Buffer; key: Buffer } | undefined {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return undefined;
  const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![N, r, p].every((n) => Number.isInteger(n) && n > 0) || N > 2 ** 20 || r > 32 || p > 16) return undefined;
  return { params: { N, r, p }, salt: Buffer.from(parts[4]!, 'base64url'), key: Buffer.from(parts[5]!, 'base64url') };
}

/** Whether `password` is the one `stored` was made from (a comparison in constant time). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const h = parse(stored);
  if (!h || h.key.length !== KEY_BYTES) return false;
  const key = await scrypt(password, h.salt, h.params);
  return timingSafeEqual(key, h.key);
}

/** Whether a stored hash was made with other parameters than today's (rehash it at the next sign-in). */
export function needsRehash(stored: string, params: ScryptParams = SCRYPT_PARAMS): boolean {
  const h = parse(stored);
  return !h || h.params.N !== params.N || h.params.r !== params.r || h.params.p !== params.p;
}

let dummy: Promise<string> | undefined;
/**
 * Spends what a real check spends, for a sign-in whose address has no user: the answer takes as
 * long either way, so timing does not tell which addresses have a sign-in.
 */
export async function verifyNobody(password: string): Promise<false> {
  dummy ??= hashPassword('not a password of anyone');
  await verifyPassword(password, await dummy);
  return false;
}
