// The client against the whole service (startStack: the embedded service on the simulated
// internet): every method once, with the exact answers, errors as typed errors with the
// service's request id, an Idempotency-Key that replays instead of charging twice, a JSON and
// a CSV job from creation to download, and the data endpoints (company data from the sim's
// websites, the finder on its mail servers; the vendor families answer 503, not retried).

import t from 'tap';
import { SvcApiError, SvcClient, type Job } from '../src/index.ts';
import { freePort } from '../../../test/helpers/private-infra.ts';
import { makeKey, startStack } from '../../../test/helpers/stack.ts';

// A fixed port, so the signed upload URLs the service makes (SVC_PUBLIC_URL) lead back to it.
const port = await freePort();
// Timeouts with room for a busy machine (an SMTP timeout would make an accepted mailbox `unknown`).
// The sim's websites (company data) live on loopback: the outbound guard lets that network through.
const stack = await startStack({
  env: {
    PORT: String(port),
    SVC_PUBLIC_URL: `http://127.0.0.1:${port}`,
    SVC_JOB_GREYLIST_DELAY_MS: '500',
    SVC_SECRET: 'client-e2e-secret-0123456789abcdef',
    SVC_SMTP_TIMEOUT_MS: '4000',
    SVC_DNS_TIMEOUT_MS: '2000',
    SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8',
  },
});
t.teardown(() => stack.close());

const REQUEST_ID = /^req_[0-9a-f]{32}$/;
const clientFor = (apiKey: string) => new SvcClient({ apiKey, baseUrl: stack.url, backoff: { baseMs: 50, capMs: 200 } });

async function rejection(p: Promise<unknown>): Promise<SvcApiError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof SvcApiError) return err;
    throw err;
  }
  throw new Error('the call did not fail');
}

t.test('validate, bulk and credits; a durable Idempotency-Key replays without a second charge', async (t) => {
  const { key } = await makeKey(stack, { credits: 10 });
  const svc = clientFor(key);
  const one = await svc.validate('jane.doe@accept.test', { idempotencyKey: 'lead-4711' });
  t.match(one, { email: 'jane.doe@accept.test', result: 'valid', reason_code: 'accepted', credits_charged: 1, charge_reason: 'high_value_validation' });
  const again = await svc.validate('jane.doe@accept.test', { idempotencyKey: 'lead-4711' });
  t.strictSame(again, one, 'the replay is the stored answer');
  t.match(await svc.getCredits(), { balance: 9, reserved: 0, available: 9 }, 'charged once');
  const conflict = await rejection(svc.validate('john.smith@accept.test', { idempotencyKey: 'lead-4711' }));
  t.strictSame([conflict.status, conflict.code, conflict.attempts, conflict.isRetryable], [409, 'idempotency_key_conflict', 1, false], 'the same key with another body: not retried');
  t.match(conflict.requestId, REQUEST_ID, 'the service’s request id');

  const bulk = await svc.validateBulk(['jane.doe@accept.test', 'info@accept.test', 'x@catchall.test', 'nobody@nxdomain.test']);
  t.strictSame(bulk.results.map((r) => `${r.result}/${r.reason_code}`), ['valid/accepted', 'valid_role_based/role_account', 'risky/catch_all', 'invalid/nxdomain']);
  t.strictSame(bulk.summary, { total: 4, valid: 1, valid_role_based: 1, risky: 1, invalid: 1, unknown: 0, credits_charged: 1 });
  t.match(await svc.getCredits(), { balance: 8, available: 8 });
});

t.test('the gates answer typed errors, not retried', async (t) => {
  const bad = await rejection(clientFor('svc_test_noSuchKey00000000000000').getCredits());
  t.strictSame([bad.status, bad.code, bad.message, bad.attempts], [401, 'invalid_api_key', 'Invalid API key', 1]);
  t.match(bad.requestId, REQUEST_ID);
  const { key: narrow } = await makeKey(stack, { credits: 10, scopes: ['credits:read'] });
  const scope = await rejection(clientFor(narrow).validate('jane.doe@accept.test'));
  t.strictSame([scope.status, scope.code, scope.requiredScope, scope.attempts], [403, 'insufficient_scope', 'email:validate:single', 1]);
  const { key: poor } = await makeKey(stack, { credits: 1 });
  const credits = await rejection(clientFor(poor).createJob(['a1@accept.test', 'a2@accept.test', 'a3@accept.test']));
  t.strictSame([credits.status, credits.code, credits.required, credits.available, credits.attempts], [402, 'insufficient_credits', 3, 1, 1]);
  const svc = clientFor(poor);
  const missing = await rejection(svc.getJob('job_000000000000000000000000'));
  t.strictSame([missing.status, missing.code], [404, 'job_not_found']);
  const input = await rejection(svc.validate(''));
  t.strictSame([input.status, input.code], [400, 'email_required']);
});

t.test('a JSON job: create, wait with progress, list, download', async (t) => {
  const { key } = await makeKey(stack, { credits: 100 });
  const svc = clientFor(key);
  const emails = ['jane.doe@accept.test', 'info@accept.test', 'jane.doe@ACCEPT.test', 'no.such.user@accept.test', 'x@catchall.test'];
  const created = await svc.createJob(emails);
  t.match(created, { status: 'queued', total_rows: 5, unique_emails: 4, credits_reserved: 4 });
  const seen: Job[] = [];
  const done = await svc.waitForJob(created.id, { intervalMs: 100, timeoutMs: 30_000, onProgress: (j) => seen.push(j) });
  t.equal(done.status, 'completed');
  t.ok(seen.length >= 1 && seen.at(-1) === done, `onProgress saw every status read (${seen.length})`);
  t.strictSame(done.progress, { processed: 4, total: 4, percent: 100 });
  t.match(done.results, { total_rows: 5, unique_emails: 4, valid: 1, valid_role_based: 1, invalid: 1, risky: 1, unknown: 0, credits_charged: 1, credits_refunded: 3 });
  const csv = await svc.download(created.id);
  const lines = csv.trim().split('\n');
  t.equal(lines.length, 6, 'a header and one row per input row');
  t.match(lines[1], /^jane\.doe@accept\.test,valid,accepted,/);
  t.match(lines[3], /^jane\.doe@ACCEPT\.test,valid,accepted,.*,0,duplicate_in_job,/);
  const valid = await svc.download(created.id, { segment: ['valid'] });
  t.equal(valid.trim().split('\n').length, 3, 'segment=valid: the header and the two valid rows');
  const link = await svc.getDownloadUrl(created.id);
  t.match(link.url, new RegExp(`^http://127\\.0\\.0\\.1:${port}/v1/csv/jobs/${created.id}/results\\.csv\\?`));
  t.equal(await (await fetch(link.url)).text(), csv, 'the signed URL serves the same CSV without a key');

  const second = await svc.createJob(['john.smith@accept.test']);
  await svc.waitForJob(second.id, { intervalMs: 100 });
  const page = await svc.listJobs({ limit: 1 });
  t.strictSame([page.jobs.map((j) => j.id), typeof page.next_cursor], [[second.id], 'string'], 'newest first, one per page');
  const all: string[] = [];
  for await (const job of svc.iterateJobs({ limit: 1 })) all.push(job.id);
  t.strictSame(all, [second.id, created.id], 'the paging helper walks every page');
});

t.test('a CSV job in one call, and a cancel', async (t) => {
  const { key } = await makeKey(stack, { credits: 100 });
  const svc = clientFor(key);
  const csv = 'name;Email\r\nJane;jane.doe@accept.test\r\nNobody;no.such.user@accept.test\r\nInfo;info@accept.test\r\n';
  const started = await svc.createCsvJob(csv, { emailColumn: 'email', filename: 'leads.csv', idempotencyKey: 'csv-e2e-1' });
  t.match(started, { status: 'queued', source: 'csv', filename: 'leads.csv', results: { total_rows: 3, unique_emails: 3, credits_reserved: 3 } });
  const again = await svc.createCsvJob(csv, { emailColumn: 'email', filename: 'leads.csv', idempotencyKey: 'csv-e2e-1' });
  t.equal(again.id, started.id, 'the same durable key finds the same job');
  const done = await svc.waitForJob(started.id, { intervalMs: 100, timeoutMs: 30_000 });
  t.match(done.results, { valid: 1, valid_role_based: 1, invalid: 1, credits_charged: 1, credits_refunded: 2 });
  const out = (await svc.download(started.id)).split('\r\n').join('\n').trim().split('\n');
  t.equal(out[0], 'name,Email,result,reason_code,reason,b2b_outbound_quality,is_role_based,role_type,is_free_provider,is_disposable,is_catchall,catchall_confidence,did_you_mean,credits_charged,charge_reason,validation_layer,smtp_response');
  t.match(out[1], /^Jane,jane\.doe@accept\.test,valid,accepted,/);
  t.match(await svc.getCredits(), { balance: 99, reserved: 0 });

  // Tarpitted addresses keep a job running long enough to cancel it.
  const slow = await svc.createJob(Array.from({ length: 20 }, (_, i) => `user${i}@tarpit.test`));
  const canceled = await svc.cancelJob(slow.id);
  t.equal(canceled.status, 'canceled');
  const twice = await rejection(svc.cancelJob(slow.id));
  t.strictSame([twice.status, twice.code], [409, 'invalid_job_state'], 'a finished job cannot be canceled');
});

t.test('outcome imports (JSON and CSV) and catch-all recovery', async (t) => {
  const { key } = await makeKey(stack, { credits: 100 });
  const svc = clientFor(key);
  const json = await svc.importOutcomes([
    { email: 'john.smith@catchall.test', outcome: 'replied', source: 'api', external_id: 'r-2', occurred_at: '2026-01-08T09:00:00Z' },
    { email: 'jane.doe@accept.test', outcome: 'bounced', source: 'api' },
  ]);
  t.match(json, { received: 2, accepted: 1, skipped_invalid: 1, duplicates: 0, credits_charged: 0, errors: [{ index: 1, code: 'missing_external_id' }] });
  const csv = await svc.importOutcomes({ csv: 'email,outcome,external_id,occurred_at\ninfo@accept.test,delivered,v-1,2026-01-06T12:05:00Z\ninfo@accept.test,delivered,v-1,2026-01-06T12:05:00Z\n' });
  t.match(csv, { received: 2, accepted: 1, duplicates: 1, errors: [] });

  const job = await svc.createJob(['john.smith@catchall.test']);
  await svc.waitForJob(job.id, { intervalMs: 100, timeoutMs: 30_000 });
  const recovery = await svc.recoverCatchalls(job.id);
  t.match(recovery, { job_id: job.id, status: 'completed', rows: 1, upgraded: 1, credits_charged: 1, recovered: [{ email: 'john.smith@catchall.test', previous_result: 'risky', result: 'valid', reason_code: 'recovered_delivery' }] });
});

/** A key of a new account with the data product turned on. */
async function dataKey(credits: number): Promise<{ key: string; accountId: string }> {
  const k = await makeKey(stack, { credits });
  await stack.store.accounts.setDataProduct(k.accountId, true);
  return k;
}

t.test('company data: one domain, a replayed Idempotency-Key, a bulk in order, the LinkedIn page both ways', async (t) => {
  const { key } = await dataKey(20);
  const svc = clientFor(key);
  const acme = await svc.enrichCompany('https://www.Acme-Robotics.test/about', { companyName: 'Acme Robotics', idempotencyKey: 'acme-1' });
  t.match(acme, {
    domain: 'acme-robotics.test',
    company_name: 'Acme Robotics',
    description: 'Acme Robotics designs autonomous picking robots for mid-sized warehouses.',
    website: 'https://acme-robotics.test',
    employee_count: 120,
    employee_range: '51-200',
    founded_year: 2011,
    location: { city: 'Austin', region: 'TX', country: 'United States', country_code: 'US' },
    linkedin_url: 'https://www.linkedin.com/company/acme-robotics',
    twitter_url: 'https://twitter.com/acmerobotics',
    facebook_url: null,
    phone: '+15125550142',
    found: true,
    credits_charged: 1,
    source_provider: 'website',
  });
  for (const tech of ['Google Workspace', 'SendGrid', 'Google Search Console', 'Atlassian']) t.ok(acme.technologies.includes(tech), `technologies name ${tech}`);
  t.strictSame(await svc.enrichCompany('https://www.Acme-Robotics.test/about', { companyName: 'Acme Robotics', idempotencyKey: 'acme-1' }), acme, 'the replay is the stored answer');
  t.match(await svc.getCredits(), { balance: 19 }, 'charged once');
  const fresh = await svc.enrichCompany('acme-robotics.test', { forceRefresh: true });
  t.strictSame([fresh.found, fresh.cache_hit, fresh.credits_charged], [true, false, 1], 'forceRefresh fetches again');

  const bulk = await svc.enrichCompanies(['acme-robotics.test', { domain: 'error-site.test' }, { company_name: 'No Domain Inc' }, 'globex-meta.test'], { maxConcurrent: 2 });
  t.match(bulk.id, /^enr_[0-9a-f]{24}$/);
  t.strictSame(
    bulk.results?.map((r) => [r.domain, r.company_name, r.found, r.credits_charged, r.error === undefined]),
    [
      ['acme-robotics.test', 'Acme Robotics', true, 1, true],
      ['error-site.test', null, false, 0, false],
      ['', null, false, 0, false],
      ['globex-meta.test', 'Globex Meta', true, 1, true],
    ],
    'a result per company, in order; the unusable one says why',
  );
  t.equal(bulk.results?.[2]?.error, 'domain is required');
  t.match(bulk.summary, { total: 4, found: 2, not_found: 1, errors: 1, credits_charged: 2 });

  t.strictSame(await svc.domainToLinkedIn('acme-robotics.test'), { linkedin_url: 'https://www.linkedin.com/company/acme-robotics', found: true, credits_charged: 1 });
  const byUrl = await svc.companyByLinkedIn('linkedin.com/company/Acme-Robotics/');
  t.match(byUrl, { found: true, credits_charged: 1, company: { name: 'Acme Robotics', domain: 'acme-robotics.test', hq_city: 'Austin' } });
  t.match(await svc.getCredits(), { balance: 14, reserved: 0 }, '1 + 1 + 2 + 1 + 1 more');
});

t.test('the finder: addresses proven on the mail server, in order, with their validation', async (t) => {
  const { key } = await dataKey(20);
  const svc = clientFor(key);
  const r = await svc.findEmails(
    [
      { first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' },
      { id: 'crm-42', first_name: 'Maria', last_name: 'Garcia', domain: 'people.test' },
      { first_name: 'Nobody', last_name: 'Here', domain: 'people.test' },
      { first_name: 'Jane', domain: 'people.test' },
    ],
    { validate: true, maxConcurrent: 4 },
  );
  t.match(r.id, /^find_[0-9a-f]{24}$/);
  t.strictSame(
    r.results?.map((x) => [x.id, x.email, x.pattern, x.confidence, x.source_provider, x.not_found, x.credits_charged, x.validation?.result ?? null]),
    [
      ['0', 'jane.doe@accept.test', '{first}.{last}', 95, 'smtp', false, 2, 'valid'],
      ['crm-42', 'mgarcia@people.test', '{f}{last}', 95, 'smtp', false, 2, 'valid'],
      ['2', null, null, 0, null, true, 0, null],
      ['3', null, null, 0, null, false, 0, null],
    ],
    'found (1 credit, and 1 for the High-Value Validation), not found, unusable',
  );
  t.equal(r.results?.[3]?.error, 'last_name is required');
  t.match(r.summary, { total: 4, found: 2, not_found: 1, errors: 1, credits_charged: 4 });
  t.match(await svc.getCredits(), { balance: 16 });
});

t.test('data calls: the product gate, unconfigured vendor families (503, not retried), the limits', async (t) => {
  const { key: plain } = await makeKey(stack, { credits: 10 });
  const gate = await rejection(clientFor(plain).enrichCompany('acme-robotics.test'));
  t.strictSame([gate.status, gate.code, gate.attempts], [403, 'product_not_enabled', 1], 'no data product: 403');
  const { key } = await dataKey(10);
  const svc = clientFor(key);
  const calls: Array<[string, () => Promise<unknown>, string]> = [
    ['linkedInCompany', () => svc.linkedInCompany({ domain: 'acme-robotics.test' }), 'LinkedIn company data not configured'],
    ['linkedInHires', () => svc.linkedInHires({ linkedinUrl: 'https://www.linkedin.com/company/acme-robotics', daysBack: 30 }), 'LinkedIn company data not configured'],
    ['searchPeople', () => svc.searchPeople({ domain: 'acme-robotics.test', seniority: ['VP'] }), 'employee search not configured'],
    ['lookupPerson', () => svc.lookupPerson({ firstName: 'Jane', lastName: 'Doe', companyDomain: 'acme-robotics.test' }), 'person lookup not configured'],
    ['lookupRole', () => svc.lookupRole({ role: 'CFO', companyName: 'Acme Robotics' }), 'role lookup not configured'],
    ['enrichProfile', () => svc.enrichProfile({ email: 'jane.doe@acme-robotics.test' }), 'profile enrichment not configured'],
    ['findMobile', () => svc.findMobile({ firstName: 'Jane', lastName: 'Doe', domain: 'acme-robotics.test' }), 'mobile finder not configured'],
    ['emailToPerson', () => svc.emailToPerson('jane.doe@acme-robotics.test'), 'profile enrichment not configured'],
  ];
  for (const [name, call, message] of calls) {
    const err = await rejection(call());
    t.strictSame([err.status, err.code, err.message, err.attempts, err.isRetryable], [503, 'feature_not_configured', message, 1, false], `${name}: 503 with the family's message, one attempt`);
    t.match(err.requestId, REQUEST_ID);
  }
  const input = await rejection(svc.enrichCompany('not a domain'));
  t.strictSame([input.status, input.code], [400, 'invalid_domain']);
  await t.rejects(svc.enrichCompanies(Array(26).fill('acme-robotics.test')), { name: 'RangeError' }, 'more than 25 companies: refused before sending');
  await t.rejects(svc.findEmails(Array(101).fill({ first_name: 'a', last_name: 'b', domain: 'accept.test' })), { name: 'RangeError' }, 'more than 100 contacts');
  t.match(await svc.getCredits(), { balance: 10 }, 'nothing charged');
});

const served = ((await (await fetch(`${stack.url}/openapi.json`)).json()) as { paths: Record<string, unknown> }).paths;
const subscriptionsServed = Boolean(served['/v1/subscriptions/cancel'] && served['/v1/subscriptions/reactivate']);
t.test('subscriptions: cancel and reactivate without a subscription', { skip: subscriptionsServed ? false : 'POST /v1/subscriptions/cancel is not served yet (being built); the fault-server test covers the client side' }, async (t) => {
  const { key } = await makeKey(stack, { credits: 10 });
  const cancel = await rejection(clientFor(key).cancelSubscription());
  t.strictSame([cancel.status, cancel.code], [404, 'subscription_not_found'], 'an account without a subscription');
  const reactivate = await rejection(clientFor(key).reactivateSubscription());
  t.strictSame([reactivate.status, reactivate.code], [404, 'subscription_not_found']);
});
