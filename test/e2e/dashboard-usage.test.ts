// The dashboard's usage and credits (/dashboard/api/usage*) through HTTP, in both profiles: the
// balance equal to GET /v1/credits, validations per UTC day by verdict equal to what was
// validated, credits spent per day equal to what was charged, the ledger paged newest first and
// exported as CSV (formula cells defused), and who may read them.

import t from 'tap';
import { createUser } from '@svc/accounts';
import { startStack } from '../helpers/stack.ts';
import { browser, firstOwner, PASSWORD } from '../helpers/dashboard.ts';

const stack = await startStack();
t.teardown(() => stack.close());
const owner = await firstOwner(stack);
const accountId = (await owner.call('GET', '/session')).body.account_id as string;
const today = new Date().toISOString().slice(0, 10);

t.test('balance, validations per day by verdict and credits spent, equal to the API and the ledger', async (t) => {
  const before = (await owner.call('GET', '/usage?days=7')).body;
  const emails = ['jane.doe@accept.test', 'john.smith@accept.test', 'info@accept.test', 'anyone@catchall.test', 'x@nxdomain.test'];
  let charged = 0;
  for (const email of emails) {
    const r = await stack.call('POST', '/v1/validate', { body: { email } });
    t.equal(r.status, 200, email);
    charged += r.body.credits_charged;
  }
  t.equal(charged, 2, 'two personal valid addresses charged (the role, catch-all and NXDOMAIN ones free)');
  await stack.svc.services.analytics.flush();
  const r = await owner.call('GET', '/usage?days=7');
  t.equal(r.status, 200);
  t.equal(r.headers.get('cache-control'), 'no-store');
  const credits = (await stack.call('GET', '/v1/credits')).body;
  t.strictSame(r.body.balance, { balance: credits.balance, reserved: credits.reserved, available: credits.available, subscription_status: credits.subscription_status, current_period_end: credits.current_period_end, cancel_at_period_end: credits.cancel_at_period_end }, 'the balance is GET /v1/credits');
  t.equal(r.body.days.length, 7, 'one entry per day of the window');
  t.equal(r.body.days[6].day, today, 'the last day is today (UTC)');
  t.equal(r.body.days[0].day, new Date(Date.now() - 6 * 86_400_000).toISOString().slice(0, 10), 'the first day is six days ago');
  t.equal(r.body.analytics, true);
  // By day, not by position: a run that crosses midnight (UTC) compares today with nothing.
  type Day = { day: string; validations: number; by_result: Record<string, number>; credits_spent: number };
  const now = r.body.days[6] as Day;
  const was = (before.days as Day[]).find((d) => d.day === now.day) ?? { day: now.day, validations: 0, by_result: { valid: 0, valid_role_based: 0, risky: 0, invalid: 0, unknown: 0 }, credits_spent: 0 };
  t.equal(now.validations - was.validations, 5, 'five validations today');
  t.strictSame(
    Object.fromEntries(Object.entries(now.by_result).map(([k, v]) => [k, v - was.by_result[k]!])),
    { valid: 2, valid_role_based: 1, risky: 1, invalid: 1, unknown: 0 },
    'by verdict',
  );
  t.equal(now.credits_spent - was.credits_spent, 2, 'credits spent today: what was charged');
  t.equal(r.body.days.slice(0, 6).reduce((a: number, d: { validations: number }) => a + d.validations, 0), 0, 'nothing on the days before');
  const month = await owner.call('GET', '/usage?days=30');
  t.equal(month.body.days.length, 30);
  for (const bad of ['5', '30.0', '', 'x', '-7']) {
    const b = await owner.call('GET', `/usage?days=${encodeURIComponent(bad)}`);
    t.strictSame([b.status, b.body.code, b.body.message], [400, 'invalid_request', 'days must be one of 7, 30, 90'], `days=${bad}`);
  }
  const twice = await owner.call('GET', '/usage?days=7&days=30');
  t.strictSame([twice.status, twice.body.code], [400, 'invalid_request'], 'a repeated parameter');
});

t.test('the ledger: paged newest first, and as CSV with formula cells defused', async (t) => {
  await stack.store.ledger.grant(accountId, 7, '=HYPERLINK("http://evil.example","click")');
  await stack.store.ledger.grant(accountId, 3, 'top-up, march');
  const all = await stack.store.ledger.entries(accountId, 10_000);
  t.ok(all.length >= 6, `${all.length} ledger rows`);
  const seen: number[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r = await owner.call('GET', `/usage/ledger?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(r.status, 200);
    t.ok(r.body.entries.length <= 2);
    seen.push(...r.body.entries.map((e: { id: number }) => e.id));
    cursor = r.body.next_cursor;
    pages++;
  } while (cursor !== null && pages < 100);
  t.strictSame(seen, all.map((e) => e.id), 'every row once, newest first, across pages');
  const first = (await owner.call('GET', '/usage/ledger?limit=1')).body;
  t.strictSame(first.entries, [{ id: all[0]!.id, created_at: all[0]!.created_at.toISOString(), kind: 'grant', amount: 3, note: 'top-up, march', reservation_id: null }], 'the newest row, every field');
  for (const [q, message] of [
    ['limit=0', 'limit must be an integer from 1 to 200'],
    ['limit=201', 'limit must be an integer from 1 to 200'],
    ['cursor=abc', 'cursor is not a cursor of this list'],
    ['cursor=0', 'cursor is not a cursor of this list'],
  ] as const) {
    const r = await owner.call('GET', `/usage/ledger?${q}`);
    t.strictSame([r.status, r.body.code, r.body.message], [400, 'invalid_request', message], q);
  }
  const csv = await owner.call('GET', '/usage/ledger.csv');
  t.equal(csv.status, 200);
  t.equal(csv.headers.get('content-type'), 'text/csv; charset=utf-8');
  t.match(csv.headers.get('content-disposition'), /^attachment; filename="ledger-\d{4}-\d{2}-\d{2}\.csv"$/);
  const lines = csv.text.split('\r\n');
  t.equal(lines.pop(), '', 'every line ends CRLF');
  t.equal(lines[0], 'id,created_at,kind,amount,note,reservation_id');
  t.equal(lines.length - 1, all.length, 'one line per ledger row');
  t.equal(lines[1], `${all[0]!.id},${all[0]!.created_at.toISOString()},grant,3,"top-up, march",`, 'a comma in a note is quoted');
  t.equal(lines[2], `${all[1]!.id},${all[1]!.created_at.toISOString()},grant,7,"'=HYPERLINK(""http://evil.example"",""click"")",`, 'a formula note is defused and quoted');
});

t.test('members read usage; nobody else does', async (t) => {
  await createUser(stack.store, { accountId, email: 'member.usage@example.test', role: 'member', password: PASSWORD });
  const member = browser(stack);
  t.equal((await member.call('POST', '/sign-in', { email: 'member.usage@example.test', password: PASSWORD })).status, 200);
  t.equal((await member.call('GET', '/usage?days=7')).status, 200, 'a member sees usage');
  t.equal((await member.call('GET', '/usage/ledger')).status, 200, 'and the ledger');
  const stranger = browser(stack);
  for (const route of ['/usage', '/usage/ledger', '/usage/ledger.csv']) {
    const r = await stranger.call('GET', route);
    t.strictSame([r.status, r.body.code], [401, 'not_signed_in'], route);
  }
});
