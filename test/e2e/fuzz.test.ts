// Fuzzing the front door and the parsers: random bodies, headers and addresses never produce a
// 500 or an unhandled error; every rejection carries a code from the catalogue.

import t from 'tap';
import { ERRORS } from '@svc/contracts';
import { parseAddress, ReplyReader, SmtpProtocolError } from '@svc/verifier';
import { startStack } from '../helpers/stack.ts';

// A small deterministic PRNG so a failure can be replayed (FUZZ_SEED).
let seed = Number(process.env.FUZZ_SEED ?? 20261121);
const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
const ALPHABET = ['a', 'b', '@', '.', '"', '\\', ' ', '-', '+', 'é', '\u0000', '\r', '\n', '{', '}', '[', ']', ':', ',', '1', 'xn--', '..', '@@', '\u200b', '\ud800', '𝔘'];
const junk = (n: number) => Array.from({ length: n }, () => pick(ALPHABET)).join('');

t.test('parseAddress never throws and always answers ok or a reason', async (t) => {
  let checked = 0;
  for (let i = 0; i < 20_000; i++) {
    const s = junk(Math.floor(rnd() * 40));
    const r = parseAddress(s);
    if (r.ok) {
      if (/[\r\n\0]/.test(r.local + r.asciiDomain)) t.fail(`line break or NUL accepted in ${JSON.stringify(s)}`);
    } else if (typeof r.reason !== 'string' || r.reason === '') t.fail(`no reason for ${JSON.stringify(s)}`);
    checked++;
  }
  t.equal(checked, 20_000);
});

t.test('ReplyReader only ever throws SmtpProtocolError', async (t) => {
  const pieces = ['250', '-', ' ', 'OK', '\r\n', '\n', '550', '5.1.1', 'x', '2', '99', '\r', '-250 ', '\u00ff'];
  let other = 0;
  for (let i = 0; i < 5_000; i++) {
    const r = new ReplyReader();
    try {
      for (let j = 0; j < 20; j++) r.push(Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => pick(pieces)).join(''));
    } catch (err) {
      if (!(err instanceof SmtpProtocolError)) other++;
    }
  }
  t.equal(other, 0);
});

t.test('random requests through HTTP: never a 500, always a catalogued code', async (t) => {
  const stack = await startStack();
  t.teardown(() => stack.close());
  const routes = ['/v1/validate', '/v1/validate/bulk', '/v1/credits'];
  const types = ['application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'application/octet-stream', ''];
  const bodies = [
    () => JSON.stringify({ email: junk(Math.floor(rnd() * 30)) }),
    () => JSON.stringify({ emails: Array.from({ length: Math.floor(rnd() * 5) }, () => (rnd() < 0.8 ? junk(10) : rnd())) }),
    () => JSON.stringify({ email: rnd() < 0.5 ? null : [junk(3)], extra: junk(5) }),
    () => junk(Math.floor(rnd() * 50)),
    () => '{"email":"' + junk(8),
    () => JSON.stringify(junk(12)),
    () => '',
  ];
  let n = 0;
  const seen = new Set<number>();
  for (let i = 0; i < 300; i++) {
    const headers: Record<string, string> = {};
    const ct = pick(types);
    if (ct) headers['content-type'] = ct;
    if (rnd() < 0.2) headers['idempotency-key'] = `fz-${i}-${Math.floor(rnd() * 3)}`;
    const method = rnd() < 0.85 ? 'POST' : pick(['GET', 'PUT', 'DELETE']);
    const key = rnd() < 0.85 ? stack.env.SVC_BOOTSTRAP_API_KEY! : pick([null, 'svc_live_nope', junk(6).replace(/[^\x21-\x7e]/g, 'x') || 'x']);
    const opts: Parameters<typeof stack.call>[2] = { key, headers };
    if (method !== 'GET') opts.raw = pick(bodies)();
    const res = await stack.call(method, pick(routes), opts);
    n++;
    seen.add(res.status);
    if (res.status >= 500) t.fail(`${res.status} for ${method} ${JSON.stringify(opts)}: ${res.text}`);
    if (res.status >= 400) {
      if (!(res.body?.code in ERRORS)) t.fail(`uncatalogued code ${res.body?.code} (${res.status})`);
    } else if (res.status !== 200) t.fail(`unexpected status ${res.status}`);
  }
  t.equal(n, 300);
  for (const status of [200, 400, 401, 404, 415]) t.ok(seen.has(status), `the fuzzer reached a ${status}`);
});
