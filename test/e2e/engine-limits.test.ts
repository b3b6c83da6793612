// The engine against Postfix's limits for a client that never sends DATA: recipient
// caps (452 and 451 4.5.3), a per-client connection cap (421 at the banner) and the soft/hard
// error limits never cost a verdict, and the error limit never bites (no reply a second late).

import t from 'tap';
import { startStack } from '../helpers/stack.ts';
import { SIM_KNOWN_MAILBOXES } from '../sim/domains.ts';

const KNOWN = SIM_KNOWN_MAILBOXES.filter((m) => !m.startsWith('"'));
const ROLE = new Set(['info', 'support', 'sales', 'admin', 'postmaster']);

const stack = await startStack();
t.teardown(() => stack.close());

function expected(email: string): [string, string] {
  const local = email.slice(0, email.lastIndexOf('@'));
  if (!KNOWN.includes(local)) return ['invalid', 'mailbox_not_found'];
  return ROLE.has(local) ? ['valid_role_based', 'role_account'] : ['valid', 'accepted'];
}

async function bulk(emails: string[]) {
  const r = await stack.call('POST', '/v1/validate/bulk', { body: { emails } });
  if (r.status !== 200) throw new Error(`bulk: ${r.status} ${r.text}`);
  return r.body.results as Array<{ email: string; result: string; reason_code: string }>;
}

for (const domain of ['rcptlimit.test', 'rcptlimit451.test']) {
  t.test(`${domain}: 3 recipients per transaction, every verdict exact`, async (t) => {
    const emails = [...KNOWN.map((k) => `${k}@${domain}`), ...Array.from({ length: 10 }, (_, i) => `nobody.${i}@${domain}`)];
    const results = await bulk(emails);
    t.strictSame(
      results.map((r) => [r.email, r.result, r.reason_code]),
      emails.map((e) => [e, ...expected(e)]),
    );
    t.ok((stack.sim.limitEvents()[`mx1.${domain} rcpt_cap`] ?? 0) >= 1, 'the cap was hit and handled');
  });
}

t.test('connlimit.test: 2 connections per client, parallel requests, every verdict exact', async (t) => {
  const batches = Array.from({ length: 4 }, (_, b) => [...KNOWN.map((k) => `${k}@connlimit.test`), ...Array.from({ length: 6 }, (_, i) => `nobody.${b}.${i}@connlimit.test`)]);
  const all = await Promise.all(batches.map((emails) => bulk(emails)));
  all.forEach((results, b) =>
    t.strictSame(
      results.map((r) => [r.email, r.result, r.reason_code]),
      batches[b]!.map((e) => [e, ...expected(e)]),
    ),
  );
});

t.test('postfix.test: 60 addresses, 40 unknown users, no reply slept and no 421', async (t) => {
  const emails = [...KNOWN.map((k) => `${k}@postfix.test`), ...Array.from({ length: 40 }, (_, i) => `ghost.${i}@postfix.test`), ...KNOWN.map((k) => `${k}@postfix.test`)].slice(0, 60);
  const results = await bulk(emails);
  t.strictSame(
    results.map((r) => [r.email, r.result, r.reason_code]),
    emails.map((e) => [e, ...expected(e)]),
  );
  const events = stack.sim.limitEvents();
  t.equal(events['mx1.postfix.test error_sleep'] ?? 0, 0, 'the soft error limit never bit');
  t.equal(events['mx1.postfix.test hard_limit'] ?? 0, 0, 'the hard error limit never bit');
});
