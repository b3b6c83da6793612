// The dashboard's Accuracy routes (/dashboard/api/accuracy/...) through HTTP, in the profile of
// TEST_PROFILE: the reports equal to what GET /v1/outcomes/email/reports/summary and /domains
// answer for the same window, the same report per day and week, what catch-all recoveries did
// (their records), the outcome CSV import answering row by row as POST /v1/outcomes/email/import
// does, and the connector's lifecycle through the REST routes' service; who may do what (owners
// manage the connector), sign-in and CSRF.

import t from 'tap';
import { createUser } from '@svc/accounts';
import { hashKey } from '@svc/store';
import { BOOTSTRAP_KEY, makeKey, startStack } from '../helpers/stack.ts';
import { browser, firstOwner, PASSWORD } from '../helpers/dashboard.ts';

t.setTimeout(240_000);

type Json = Record<string, any>;

const stack = await startStack();
t.teardown(() => stack.close());
const analytics = stack.svc.services.analytics;
const accountId = (await stack.store.keys.findByHash(hashKey(BOOTSTRAP_KEY)))!.account_id;

// The owner, from the first-run link; a member of the same account.
// (Set-up failures throw: no assertion runs outside a subtest.)
const owner = await firstOwner(stack);
const invited = await createUser(stack.store, { accountId, email: 'member@example.test', password: PASSWORD, role: 'member' });
if (!invited.ok) throw new Error(`member: ${JSON.stringify(invited)}`);
const member = browser(stack);
if ((await member.call('POST', '/sign-in', { email: 'member@example.test', password: PASSWORD })).status !== 200) throw new Error('the member could not sign in');

/** A REST import of a CSV body (text/csv). */
const restCsv = (key: string, csv: string) => stack.call('POST', '/v1/outcomes/email/import', { key, raw: csv, headers: { 'content-type': 'text/csv' } });
const withoutTime = (b: Json) => {
  const { imported_at, ...rest } = b;
  if (!/^\d{4}-\d{2}-\d{2}T/.test(imported_at)) throw new Error(`imported_at: ${imported_at}`);
  return rest;
};
const LABELS = ['delivered', 'bounced_hard', 'bounced_soft', 'blocked_policy', 'unknown'] as const;
const row = (counts: Partial<Record<(typeof LABELS)[number], number>> = {}): Json => Object.fromEntries(LABELS.map((l) => [l, counts[l] ?? 0]));

t.test('refusals: not signed in, no CSRF token, a foreign origin, a member changing the connector, bad windows', async (t) => {
  const anon = browser(stack);
  for (const path of ['/accuracy/summary', '/accuracy/domains', '/accuracy/trend', '/accuracy/recoveries', '/accuracy/connectors/emailbison']) {
    const r = await anon.call('GET', path);
    t.strictSame([r.status, r.body.code], [401, 'not_signed_in'], path);
  }
  let r = await anon.call('POST', '/accuracy/import', { csv: 'email,outcome\n' });
  t.strictSame([r.status, r.body.code], [401, 'not_signed_in']);
  const token = owner.csrf;
  owner.csrf = undefined;
  r = await owner.call('POST', '/accuracy/import', { csv: 'email,outcome\njane.doe@accept.test,delivered\n' });
  t.strictSame([r.status, r.body.code], [403, 'csrf_token_invalid'], 'the import is a change');
  r = await owner.call('POST', '/accuracy/connectors/emailbison');
  t.strictSame([r.status, r.body.code], [403, 'csrf_token_invalid'], 'creating the connector is a change');
  r = await owner.call('DELETE', '/accuracy/connectors/emailbison');
  t.strictSame([r.status, r.body.code], [403, 'csrf_token_invalid'], 'revoking it too');
  owner.csrf = token;
  r = await owner.call('POST', '/accuracy/connectors/emailbison', undefined, { origin: 'https://evil.example' });
  t.strictSame([r.status, r.body.code, r.body.message], [403, 'csrf_token_invalid', 'This request comes from another origin']);
  r = await member.call('POST', '/accuracy/connectors/emailbison');
  t.strictSame([r.status, r.body.code], [403, 'owner_role_required'], 'a member does not create the connector');
  r = await member.call('DELETE', '/accuracy/connectors/emailbison');
  t.strictSame([r.status, r.body.code], [403, 'owner_role_required'], 'nor revoke it');
  t.strictSame((await stack.call('GET', '/v1/outcomes/email/connectors/emailbison')).body.code, 'connector_not_found', 'no refused request made a connector');
  for (const q of ['days=14', 'days=abc', 'days=30&days=7']) {
    r = await owner.call('GET', `/accuracy/summary?${q}`);
    t.strictSame([r.status, r.body.code], [400, q.includes('&') ? 'invalid_request' : 'invalid_outcome_query'], q);
  }
  r = await owner.call('GET', '/accuracy/summary?days=14');
  t.equal(r.body.message, 'days must be one of 7, 30, 90');
  r = await owner.call('GET', '/accuracy/trend?days=90&bucket=day');
  t.strictSame([r.status, r.body.code, r.body.message], [400, 'invalid_outcome_query', 'bucket day reads at most 31 days; use week']);
  r = await owner.call('GET', '/accuracy/trend?days=30&bucket=month');
  t.strictSame([r.status, r.body.code], [400, 'invalid_outcome_query']);
  r = await owner.call('GET', '/accuracy/domains?limit=0');
  t.strictSame([r.status, r.body.code, r.body.message], [400, 'invalid_outcome_query', 'limit must be an integer from 1 to 10000']);
});

t.test('the CSV import answers as POST /v1/outcomes/email/import does, row by row; members may import', async (t) => {
  const at = new Date(Date.now() - 60_000).toISOString();
  const csv = [
    'email,outcome,source,external_id,occurred_at,action,smtp_enhanced_code',
    `imp.one@accept.test,delivered,csv_import,i-1,${at},,`,
    `not an address,delivered,csv_import,i-2,${at},,`,
    `imp.two@accept.test,exploded,csv_import,i-3,${at},,`,
    `imp.three@accept.test,sent,csv_import,i-4,${at},,`,
    `imp.four@accept.test,replied,csv_import,,${at},,`,
  ].join('\n');
  const other = await makeKey(stack, { credits: 10 });
  const rest = await restCsv(other.key, csv);
  t.equal(rest.status, 200);
  const r = await member.call('POST', '/accuracy/import', { csv });
  t.equal(r.status, 200, JSON.stringify(r.body));
  t.strictSame(withoutTime(r.body), withoutTime(rest.body), 'the same answer as the REST import of the same file (another account)');
  t.match(r.body, { received: 5, accepted: 2, skipped_invalid: 3, duplicates: 0, credits_charged: 0 });
  t.strictSame(
    r.body.errors.map((e: Json) => [e.index, e.code]),
    rest.body.errors.map((e: Json) => [e.index, e.code]),
  );
  t.strictSame(
    r.body.errors.map((e: Json) => [e.index, e.code]),
    [
      [1, 'invalid_email'],
      [2, 'missing_outcome'],
      [4, 'missing_external_id'],
    ],
    'each rejected row with its index, code and reason',
  );
  t.equal(r.body.errors[2].reason, 'external_id is required (an immutable provider event id)');
  const again = await owner.call('POST', '/accuracy/import', { csv });
  const restAgain = await restCsv(other.key, csv);
  t.strictSame(withoutTime(again.body), withoutTime(restAgain.body), 'importing again: the same duplicates as REST');
  t.match(again.body, { accepted: 0, duplicates: 2 });
  // The whole-file refusals are the REST ones.
  for (const [body, code] of [
    [{ csv: 'email,outcome\n' }, 'missing_outcomes'],
    [{ csv: '' }, 'invalid_csv'],
    [{ csv: 'email,email\nx@accept.test,y@accept.test\n' }, 'invalid_csv'],
    [{ csv: `email,outcome\n${'imp@accept.test,sent\n'.repeat(10_001)}` }, 'too_many_outcomes'],
  ] as const) {
    const d = await owner.call('POST', '/accuracy/import', body);
    const a = await restCsv(other.key, body.csv);
    t.strictSame([d.status, d.body.code, d.body.message], [a.status, a.body.code, a.body.message], `${code}: as REST answers it`);
    t.equal(d.body.code, code);
  }
  const missing = await owner.call('POST', '/accuracy/import', { file: 'x' });
  t.strictSame([missing.status, missing.body.code], [400, 'invalid_request']);
  const huge = await owner.call('POST', '/accuracy/import', { csv: `email,outcome\n${'x'.repeat(5 * 1024 * 1024)}` });
  t.strictSame([huge.status, huge.body.code], [413, 'payload_too_large'], 'over 5 MiB, as the REST body limit');
});

t.test('reports: the summary and the domains equal the REST reports of the same window; per day and week', async (t) => {
  const emails = ['jane.doe@accept.test', 'john.smith@accept.test', 'no.such.user@accept.test', 'info@accept.test', 'someone@catchall.test'];
  const v = await stack.call('POST', '/v1/validate/bulk', { body: { emails } });
  t.strictSame(
    v.body.results.map((x: Json) => x.result),
    ['valid', 'valid', 'invalid', 'valid_role_based', 'risky'],
  );
  await analytics.flush();
  await new Promise((r) => setTimeout(r, 20)); // outcomes strictly after the decisions
  const at = new Date(Date.now() + 1000).toISOString();
  const csv = [
    'email,outcome,source,external_id,occurred_at,action,smtp_enhanced_code',
    `jane.doe@accept.test,replied,api,o-1,${at},,`,
    `john.smith@accept.test,bounced,api,o-2,${at},failed,5.1.1`,
    `no.such.user@accept.test,bounced,api,o-3,${at},failed,5.1.1`,
    `info@accept.test,delivered,api,o-4,${at},,`,
    `someone@catchall.test,bounced,api,o-5,${at},delayed,4.2.2`,
    ...emails.map((e, i) => `${e},sent,api,s-${i},${at},,`),
  ].join('\n');
  const imp = await owner.call('POST', '/accuracy/import', { csv });
  t.match(imp.body, { accepted: 10, skipped_invalid: 0 });
  await analytics.flush();

  const summary = await member.call('GET', '/accuracy/summary?days=30');
  t.equal(summary.status, 200, JSON.stringify(summary.body));
  const { from, to } = summary.body;
  t.equal(Date.parse(to) % 86_400_000, 0, 'the window ends at a UTC midnight');
  t.equal(Date.parse(to) - Date.parse(from), 30 * 86_400_000, '30 whole days');
  t.ok(Date.parse(to) > Date.now() && Date.parse(to) - Date.now() <= 86_400_000 + 5000, 'today is its last day');
  const q = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
  const rest = await stack.call('GET', `/v1/outcomes/email/reports/summary?${q}`);
  t.equal(rest.status, 200);
  t.strictSame(summary.body, rest.body, 'the REST summary of the same window, figure for figure');
  t.match(summary.body.by_result.valid, { sent: 2, bounced_hard: 1, hard_bounce_rate: 0.5 });
  t.strictSame(summary.body.by_result.valid.hard_bounce_rate_ci95, [0.094531, 0.905469], 'the Wilson 95% interval of 1 in 2');
  t.match(summary.body.by_result.invalid, { sent: 1, bounced_hard: 1, hard_bounce_rate: 1 });
  t.strictSame(summary.body.matrix.valid, row({ delivered: 1, bounced_hard: 1 }));
  t.strictSame(summary.body.matrix.risky, row({ bounced_soft: 1 }));

  const domains = await member.call('GET', '/accuracy/domains?days=30');
  const restDomains = await stack.call('GET', `/v1/outcomes/email/reports/domains?${q}`);
  t.equal(domains.status, 200);
  t.strictSame(domains.body, restDomains.body, 'the REST domains report of the same window');
  t.ok(domains.body.domains.some((d: Json) => d.domain === 'catchall.test'));
  const two = await member.call('GET', '/accuracy/domains?days=30&limit=1');
  t.strictSame(two.body, (await stack.call('GET', `/v1/outcomes/email/reports/domains?${q}&limit=1`)).body, 'with a limit too');

  const days = await member.call('GET', '/accuracy/trend?days=7');
  t.equal(days.status, 200);
  t.equal(days.body.bucket, 'day', 'a week of days by default');
  t.equal(days.body.buckets.length, 7);
  t.strictSame([days.body.from, days.body.to], [new Date(Date.parse(to) - 7 * 86_400_000).toISOString(), to]);
  const today = days.body.buckets[6];
  t.strictSame([today.from, today.to], [new Date(Date.parse(to) - 86_400_000).toISOString(), to]);
  t.strictSame(today, (await stack.call('GET', `/v1/outcomes/email/reports/summary?from=${encodeURIComponent(today.from)}&to=${encodeURIComponent(today.to)}`)).body, 'each bucket is the REST summary of its own window');
  t.same(
    days.body.buckets.slice(0, 6).map((b: Json) => b.totals.outcomes),
    [0, 0, 0, 0, 0, 0],
    'nothing on the days before',
  );
  const weeks = await member.call('GET', '/accuracy/trend?days=90');
  t.equal(weeks.body.bucket, 'week');
  t.equal(weeks.body.buckets.length, 13, '12 weeks and the 6 oldest days');
  t.equal(Date.parse(weeks.body.buckets[0].to) - Date.parse(weeks.body.buckets[0].from), 6 * 86_400_000);
  t.equal(weeks.body.buckets[0].from, weeks.body.from);
  const lastWeek = weeks.body.buckets[12];
  t.strictSame(lastWeek.by_result, summary.body.by_result, 'the newest week holds every outcome');
  const monthByDay = await member.call('GET', '/accuracy/trend?days=30&bucket=day');
  t.equal(monthByDay.body.buckets.length, 30);
  t.equal(
    monthByDay.body.buckets.reduce((n: number, b: Json) => n + b.totals.sent, 0),
    summary.body.totals.sent,
    'the days add up to the window',
  );
});

t.test('catch-all recovery: what the records keep, for the window', async (t) => {
  // An account of its own, with its own owner: the numbers are its recovery's only.
  const acct = await makeKey(stack, { credits: 100 });
  t.match(await createUser(stack.store, { accountId: acct.accountId, email: 'recovery.owner@example.test', password: PASSWORD, role: 'owner' }), { ok: true });
  const b = browser(stack);
  t.equal((await b.call('POST', '/sign-in', { email: 'recovery.owner@example.test', password: PASSWORD })).status, 200);
  let r = await b.call('GET', '/accuracy/recoveries?days=7');
  t.strictSame([r.status, r.body.recoveries, r.body.rows, r.body.upgraded, r.body.by_reason, r.body.latest], [200, 0, 0, 0, {}, []], 'none yet');
  const created = await stack.call('POST', '/v1/validate/batch', {
    key: acct.key,
    body: { emails: ['jane.doe@catchall.test', 'gone.person@catchall.test', 'mary.major@catchall.test', 'info@catchall.test', 'x9@catchall.test', 'jane.doe@accept.test'] },
  });
  t.equal(created.status, 202);
  let job: Json = {};
  for (let i = 0; i < 600 && job.status !== 'completed'; i++) {
    job = (await stack.call('GET', `/v1/csv/jobs/${created.body.id}`, { key: acct.key })).body;
    if (job.status !== 'completed') await new Promise((res) => setTimeout(res, 100));
  }
  t.match(job.results, { risky: 5, valid: 1 });
  const at = new Date(Date.now() - 60_000).toISOString();
  const csv = [
    'email,outcome,source,external_id,occurred_at,action,smtp_enhanced_code',
    `jane.doe@catchall.test,replied,api,r1,${at},,`,
    `gone.person@catchall.test,bounced,api,b1,${at},failed,5.1.1`,
    ...['anna.berg', 'lars.ulrich', 'tom.hardy'].map((l, i) => `${l}@catchall.test,delivered,api,d${i},${at},,`),
  ].join('\n');
  t.match((await b.call('POST', '/accuracy/import', { csv })).body, { accepted: 5 });
  const rec = await stack.call('POST', `/v1/csv/jobs/${job.id}/recover-catchalls`, { key: acct.key, body: {} });
  t.equal(rec.status, 202);
  r = await b.call('GET', '/accuracy/recoveries?days=7');
  t.equal(r.status, 200);
  t.match(r.body, { recoveries: 1, rows: rec.body.rows, upgraded: rec.body.upgraded, downgraded: rec.body.downgraded, unchanged: rec.body.unchanged, credits_charged: rec.body.credits_charged });
  t.match(r.body, { rows: 5, upgraded: 2, downgraded: 1, unchanged: 2, credits_charged: 2 });
  t.strictSame(r.body.by_reason, { recovered_delivery: 1, recovered_hard_bounce: 1, recovered_pattern: 1 });
  t.strictSame(r.body.latest, [{ recovery_id: rec.body.recovery_id, job_id: job.id, rows: 5, upgraded: 2, downgraded: 1, unchanged: 2, credits_charged: 2, completed_at: rec.body.completed_at }]);
  const bootstrapOwner = await owner.call('GET', '/accuracy/recoveries?days=7');
  t.equal(bootstrapOwner.body.recoveries, 0, "another account's recoveries are not counted");
});

t.test("the connector: created once with its URL, status, revoked; through the REST routes' service", async (t) => {
  let r = await owner.call('GET', '/accuracy/connectors/emailbison');
  t.strictSame([r.status, r.body.code], [404, 'connector_not_found']);
  r = await owner.call('POST', '/accuracy/connectors/emailbison');
  t.equal(r.status, 201);
  t.match(r.body, { platform: 'emailbison', status: 'active' });
  t.strictSame(Object.keys(r.body).sort(), ['created_at', 'platform', 'status', 'webhook_url']);
  t.equal(r.headers.get('cache-control'), 'no-store');
  const url = new URL(r.body.webhook_url);
  t.match(url.pathname, /^\/v1\/outcomes\/email\/connectors\/emailbison\/events\/[A-Za-z0-9_-]{43}$/);
  // The URL works: an EmailBison event through it.
  const sentAt = new Date(Date.now() - 5000).toISOString();
  const hook = await stack.call('POST', url.pathname, {
    key: null,
    body: { event: { type: 'EMAIL_SENT', name: 'EMAIL_SENT', workspace_id: 1 }, data: { scheduled_email: { id: 77, email_body: 'Hello', sent_at: sentAt }, lead: { id: 977, email: 'eb.lead@accept.test', first_name: 'Sim' }, campaign_event: { created_at: sentAt } } },
  });
  t.strictSame(hook.body, { received: 1, accepted: 1, duplicates: 0, ignored: 0, rejected: 0, errors: [] });
  r = await member.call('GET', '/accuracy/connectors/emailbison');
  t.equal(r.status, 200, 'a member reads the status');
  t.strictSame(r.body, (await stack.call('GET', '/v1/outcomes/email/connectors/emailbison')).body, 'the REST status');
  t.match(r.body, { status: 'active', events_received: 1, denominator_status: 'ok' });
  t.match(r.body.last_event_at, /^\d{4}-\d{2}-\d{2}T/);
  t.notOk('webhook_url' in r.body, 'the URL is shown once');
  r = await owner.call('GET', '/accuracy/connectors/mailchimp');
  t.strictSame([r.status, r.body.code, r.body.message], [403, 'connector_unavailable', 'No connector for the platform "mailchimp"; supported: emailbison']);
  r = await owner.call('DELETE', '/accuracy/connectors/emailbison');
  t.strictSame([r.status, r.body], [200, { platform: 'emailbison', status: 'revoked' }]);
  const dead = await stack.call('POST', url.pathname, { key: null, body: { event: { type: 'EMAIL_SENT' }, data: {} } });
  t.strictSame([dead.status, dead.body.code], [404, 'invalid_connector_secret'], 'the revoked URL is refused');
  r = await owner.call('GET', '/accuracy/connectors/emailbison');
  t.equal(r.body.status, 'revoked');
  await stack.store.outcomes.setConnectorsEnabled(accountId, false);
  r = await owner.call('POST', '/accuracy/connectors/emailbison');
  t.strictSame([r.status, r.body.code], [403, 'connector_unavailable'], "an account without connectors: the service's refusal");
  await stack.store.outcomes.setConnectorsEnabled(accountId, true);
});
