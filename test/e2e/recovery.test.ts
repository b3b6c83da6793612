// Catch-all recovery end to end (docs/decisions/outcomes.md), in the profile of TEST_PROFILE: a
// completed job's risky catch-all rows are upgraded or downgraded from the account's own outcome
// evidence and the domain's learned address pattern, each with its evidence; exactly the upgrades
// are charged and the rest refunded; the results CSV is rewritten; a second (or concurrent)
// request answers the same recovery and charges nothing; 404, 409 and 402 as specified.

import t from 'tap';
import { parse as parseCsv } from 'csv-parse/sync';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';

t.setTimeout(240_000);

type Json = Record<string, any>;

async function runJob(stack: Stack, key: string, emails: string[]): Promise<Json> {
  const created = await stack.call('POST', '/v1/validate/batch', { key, body: { emails } });
  if (created.status !== 202) throw new Error(`batch: ${created.status} ${created.text}`);
  const end = Date.now() + 60_000;
  for (;;) {
    const r = await stack.call('GET', `/v1/csv/jobs/${created.body.id}`, { key });
    if (['completed', 'failed', 'canceled'].includes(r.body.status)) return r.body;
    if (Date.now() > end) throw new Error('job did not finish');
    await new Promise((res) => setTimeout(res, 100));
  }
}

const balance = async (stack: Stack, key: string): Promise<number> => (await stack.call('GET', '/v1/credits', { key })).body.balance;

t.test('catch-all recovery', async (t) => {
  const stack = await startStack();
  t.teardown(() => stack.close());
  const acct = await makeKey(stack, { scopes: null, credits: 100 });
  const emails = ['jane.doe@catchall.test', 'gone.person@catchall.test', 'mary.major@catchall.test', 'info@catchall.test', 'x9@catchall.test', 'jane.doe@accept.test'];
  const job = await runJob(stack, acct.key, emails);
  t.equal(job.status, 'completed');
  t.match(job.results, { risky: 5, valid: 1 });
  // The account's evidence: a reply, a hard bounce, and three confirmed first.last addresses.
  const at = new Date(Date.now() - 60_000).toISOString();
  const imp = await stack.call('POST', '/v1/outcomes/email/import', {
    key: acct.key,
    body: {
      outcomes: [
        { email: 'jane.doe@catchall.test', outcome: 'replied', source: 'api', external_id: 'r1', occurred_at: at },
        { email: 'gone.person@catchall.test', outcome: 'bounced', source: 'api', external_id: 'b1', occurred_at: at, action: 'failed', smtp_enhanced_code: '5.1.1' },
        ...['anna.berg', 'lars.ulrich', 'tom.hardy'].map((l, i) => ({ email: `${l}@catchall.test`, outcome: 'delivered', source: 'api', external_id: `d${i}`, occurred_at: at })),
      ],
    },
  });
  t.equal(imp.body.accepted, 5, imp.text);
  const before = await balance(stack, acct.key);

  const r = await stack.call('POST', `/v1/csv/jobs/${job.id}/recover-catchalls`, { key: acct.key, body: {} });
  t.equal(r.status, 202, r.text);
  t.match(r.body, { job_id: job.id, status: 'completed', rows: 5, credits_reserved: 5, upgraded: 2, downgraded: 1, unchanged: 2, credits_charged: 2, credits_refunded: 3 });
  t.match(r.body.recovery_id, /^rec_[0-9a-f]{24}$/);
  t.strictSame(
    r.body.recovered.map((x: Json) => [x.email, x.previous_result, x.result, x.reason_code, x.evidence.kind]),
    [
      ['jane.doe@catchall.test', 'risky', 'valid', 'recovered_delivery', 'outcome'],
      ['gone.person@catchall.test', 'risky', 'invalid', 'recovered_hard_bounce', 'outcome'],
      ['mary.major@catchall.test', 'risky', 'valid', 'recovered_pattern', 'pattern'],
    ],
  );
  t.match(r.body.recovered[0].evidence, { label: 'delivered', outcome: 'replied' });
  t.match(r.body.recovered[2].evidence, { pattern: 'first.last', confirmed: 4, matching: 4 }); // jane.doe's reply counts too
  t.equal(await balance(stack, acct.key), before - 2, 'exactly the two upgrades are charged');

  // The results CSV shows the recovered rows.
  const link = await stack.call('GET', `/v1/csv/jobs/${job.id}/download?mode=url`, { key: acct.key });
  const csv = await (await fetch(String(link.body.url).replace(stack.svc.services.config.publicUrl, stack.url))).text();
  const rows = parseCsv(csv, { columns: true, bom: true }) as Array<Record<string, string>>;
  t.strictSame(
    rows.map((x) => [x.email, x.result, x.reason_code, x.credits_charged]),
    [
      ['jane.doe@catchall.test', 'valid', 'recovered_delivery', '1'],
      ['gone.person@catchall.test', 'invalid', 'recovered_hard_bounce', '0'],
      ['mary.major@catchall.test', 'valid', 'recovered_pattern', '1'],
      ['info@catchall.test', 'risky', 'catch_all', '0'],
      ['x9@catchall.test', 'risky', 'catch_all', '0'],
      ['jane.doe@accept.test', 'valid', 'accepted', '1'],
    ],
  );

  // Asking again answers the same recovery and charges nothing.
  const again = await stack.call('POST', `/v1/csv/jobs/${job.id}/recover-catchalls`, { key: acct.key, body: {} });
  t.equal(again.status, 202);
  t.equal(again.body.recovery_id, r.body.recovery_id);
  t.equal(await balance(stack, acct.key), before - 2);

  await t.test('concurrent requests on a fresh job charge once', async (t) => {
    const job2 = await runJob(stack, acct.key, ['jane.doe@catchall.test', 'lena.smith@catchall.test']);
    const b0 = await balance(stack, acct.key);
    const both = await Promise.all([1, 2, 3].map(() => stack.call('POST', `/v1/csv/jobs/${job2.id}/recover-catchalls`, { key: acct.key, body: {} })));
    const ok = both.filter((x) => x.status === 202);
    t.ok(ok.length >= 1, 'at least one answer');
    for (const x of both) t.ok(x.status === 202 || (x.status === 409 && x.body.code === 'invalid_job_state'), `202 or 409 while the first runs (${x.status})`);
    t.equal(new Set(ok.map((x) => x.body.recovery_id)).size, 1, 'one recovery');
    t.equal(await balance(stack, acct.key), b0 - 2, 'charged once: both rows upgraded (delivery, pattern)');
  });

  await t.test('errors: unknown job 404, unfinished job 409, too few credits 402', async (t) => {
    const unknown = await stack.call('POST', '/v1/csv/jobs/job_000000000000000000000000/recover-catchalls', { key: acct.key, body: {} });
    t.strictSame([unknown.status, unknown.body.code], [404, 'job_not_found']);
    const other = await makeKey(stack, { credits: 10 });
    const foreign = await stack.call('POST', `/v1/csv/jobs/${job.id}/recover-catchalls`, { key: other.key, body: {} });
    t.strictSame([foreign.status, foreign.body.code], [404, 'job_not_found'], "another account's job");
    const slow = await stack.call('POST', '/v1/validate/batch', { key: other.key, body: { emails: ['someone@tarpit.test'] } });
    const early = await stack.call('POST', `/v1/csv/jobs/${slow.body.id}/recover-catchalls`, { key: other.key, body: {} });
    t.strictSame([early.status, early.body.code], [409, 'invalid_job_state']);
    await stack.call('DELETE', `/v1/csv/jobs/${slow.body.id}`, { key: other.key });
    const poor = await makeKey(stack, { credits: 3 });
    const job3 = await runJob(stack, poor.key, ['a.one@catchall.test', 'b.two@catchall.test', 'c.three@catchall.test']);
    t.equal(job3.status, 'completed');
    await stack.store.ledger.debit(poor.accountId, 2, 'test');
    const refused = await stack.call('POST', `/v1/csv/jobs/${job3.id}/recover-catchalls`, { key: poor.key, body: {} });
    t.strictSame([refused.status, refused.body.code, refused.body.required, refused.body.available], [402, 'insufficient_credits', 3, 1]);
    // The refusal left no claim: with credits it runs.
    await stack.store.ledger.grant(poor.accountId, 5, 'test');
    const later = await stack.call('POST', `/v1/csv/jobs/${job3.id}/recover-catchalls`, { key: poor.key, body: {} });
    t.equal(later.status, 202, later.text);
    const bad = await stack.call('POST', `/v1/csv/jobs/${job3.id}/recover-catchalls`, { key: poor.key, raw: '[1]', headers: { 'content-type': 'application/json' } });
    t.strictSame([bad.status, bad.body.code], [400, 'invalid_request']);
  });
});
