// Signed URLs and webhook signatures (signed-urls.ts, webhooks/signature.ts): every tampered part is refused, expiry is
// exact, malformed input is `invalid` without a throw.

import { createHmac } from 'node:crypto';
import t from 'tap';
import { signQuery, verifyQuery } from '../src/signed-urls.ts';
import { verifyWebhookSignature, webhookSignature } from '../src/webhooks/signature.ts';

const SECRET = 'test-secret-0123456789';
const PATH = '/v1/csv/uploads/job_123';
const EXPIRES_AT = new Date('2030-01-01T00:00:00Z');
const EXP = String(EXPIRES_AT.getTime() / 1000); // 1893456000
const BEFORE = EXPIRES_AT.getTime() - 1000;

const query = (qs: string) => Object.fromEntries(new URLSearchParams(qs));

t.test('signQuery: expires in unix seconds and a 64-hex-digit HMAC-SHA256', async (t) => {
  const qs = signQuery(SECRET, 'PUT', PATH, {}, EXPIRES_AT);
  const q = query(qs);
  t.equal(q.expires, '1893456000');
  t.match(q.signature, /^[0-9a-f]{64}$/);
  const want = createHmac('sha256', SECRET).update(`PUT\n${PATH}\nexpires=1893456000`).digest('hex');
  t.equal(q.signature, want, 'the MAC covers method, path and the sorted parameters');
  t.equal(verifyQuery(SECRET, 'PUT', PATH, q, BEFORE), 'ok');
});

t.test('tampering with any part is invalid', async (t) => {
  const q = query(signQuery(SECRET, 'GET', PATH, { mode: 'url', segment: 'valid,risky' }, EXPIRES_AT));
  t.equal(verifyQuery(SECRET, 'GET', PATH, q, BEFORE), 'ok');
  t.equal(verifyQuery(SECRET, 'PUT', PATH, q, BEFORE), 'invalid', 'method');
  t.equal(verifyQuery(SECRET, 'GET', `${PATH}x`, q, BEFORE), 'invalid', 'path');
  t.equal(verifyQuery(SECRET, 'GET', '/v1/csv/uploads/job_124', q, BEFORE), 'invalid', 'another job');
  t.equal(verifyQuery(SECRET, 'GET', PATH, { ...q, expires: String(Number(EXP) + 3600) }, BEFORE), 'invalid', 'expiry extended');
  t.equal(verifyQuery(SECRET, 'GET', PATH, { ...q, segment: 'valid' }, BEFORE), 'invalid', 'a signed parameter changed');
  t.equal(verifyQuery(SECRET, 'GET', PATH, { ...q, extra: '1' }, BEFORE), 'invalid', 'a parameter added');
  const { segment: _dropped, ...without } = q;
  t.equal(verifyQuery(SECRET, 'GET', PATH, without, BEFORE), 'invalid', 'a parameter removed');
  const sig = q.signature!;
  const flipped = sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0');
  t.equal(verifyQuery(SECRET, 'GET', PATH, { ...q, signature: flipped }, BEFORE), 'invalid', 'one hex digit of the signature');
  t.equal(verifyQuery('another-secret', 'GET', PATH, q, BEFORE), 'invalid', 'another secret');
});

t.test('expiry: valid through the expiry second, expired after; a forged signature is invalid, not expired', async (t) => {
  const q = query(signQuery(SECRET, 'PUT', PATH, {}, EXPIRES_AT));
  t.equal(verifyQuery(SECRET, 'PUT', PATH, q, EXPIRES_AT.getTime()), 'ok');
  t.equal(verifyQuery(SECRET, 'PUT', PATH, q, EXPIRES_AT.getTime() + 999), 'ok');
  t.equal(verifyQuery(SECRET, 'PUT', PATH, q, EXPIRES_AT.getTime() + 1000), 'expired');
  t.equal(verifyQuery(SECRET, 'PUT', PATH, { ...q, signature: 'a'.repeat(64) }, EXPIRES_AT.getTime() + 86_400_000), 'invalid');
});

t.test('malformed values are invalid, never a throw', async (t) => {
  const q = query(signQuery(SECRET, 'PUT', PATH, {}, EXPIRES_AT));
  const cases: Array<[string, Record<string, unknown>]> = [
    ['no expires', { signature: q.signature }],
    ['no signature', { expires: q.expires }],
    ['non-numeric expiry', { ...q, expires: 'tomorrow' }],
    ['negative expiry', { ...q, expires: '-1' }],
    ['fractional expiry', { ...q, expires: '1893456000.5' }],
    ['hex expiry', { ...q, expires: '0x70DBD880' }],
    ['huge expiry', { ...q, expires: '9'.repeat(400) }],
    ['expiry with spaces', { ...q, expires: ` ${EXP}` }],
    ['short signature', { ...q, signature: q.signature!.slice(0, 63) }],
    ['long signature', { ...q, signature: `${q.signature}00` }],
    ['empty signature', { ...q, signature: '' }],
    ['non-hex signature', { ...q, signature: 'z'.repeat(64) }],
    ['upper-case signature', { ...q, signature: q.signature!.toUpperCase() }],
    ['repeated parameter', { ...q, expires: [q.expires, q.expires] }],
    ['object parameter', { ...q, signature: { x: 1 } }],
  ];
  for (const [name, bad] of cases) t.equal(verifyQuery(SECRET, 'PUT', PATH, bad, BEFORE), 'invalid', name);
});

t.test('webhookSignature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + body)>', async (t) => {
  const body = '{"event":"job.completed","job":{"id":"job_1"}}';
  const header = webhookSignature(SECRET, 1_700_000_000, body);
  const mac = createHmac('sha256', SECRET).update(`1700000000.${body}`).digest('hex');
  t.equal(header, `t=1700000000,v1=${mac}`);
  t.equal(webhookSignature(SECRET, 1_700_000_000, Buffer.from(body)), header, 'bytes and string sign alike');
  t.throws(() => webhookSignature(SECRET, 1.5, body), TypeError);
  const now = 1_700_000_000_000;
  t.equal(verifyWebhookSignature(SECRET, header, body, now), 'ok');
  t.equal(verifyWebhookSignature(SECRET, header, `${body} `, now), 'invalid', 'body changed');
  t.equal(verifyWebhookSignature(SECRET, header.replace('t=1700000000', 't=1700000001'), body, now), 'invalid', 'timestamp changed');
  t.equal(verifyWebhookSignature('other', header, body, now), 'invalid', 'other secret');
  t.equal(verifyWebhookSignature(SECRET, header, body, now + 301_000), 'expired', 'older than the tolerance');
  t.equal(verifyWebhookSignature(SECRET, `${header},v1=${'0'.repeat(64)}`, body, now), 'ok', 'any matching v1 (secret rotation)');
  for (const bad of [undefined, '', 'garbage', `t=abc,v1=${mac}`, 't=1700000000', `t=1700000000,v1=${mac.slice(2)}`, `t=1,t=1700000000,v1=${mac}`]) {
    t.equal(verifyWebhookSignature(SECRET, bad, body, now), 'invalid', JSON.stringify(bad));
  }
});
