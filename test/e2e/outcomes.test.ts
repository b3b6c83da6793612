// Delivery outcomes end to end over HTTP (docs/decisions/outcomes.md), in
// the profile of TEST_PROFILE: imports (JSON and CSV) with their exact counts, duplicates and
// identity conflicts, request errors, scopes, the events read, suppression's effect on later
// validations (sync and jobs: answered without probing, 0 credits; the shared verdict cache
// invalidated), the fail-closed suppression step (made to fail inside the real database), and
// the sender-platform connector's lifecycle and inbound events.

import t from 'tap';
import { parse as parseCsv } from 'csv-parse/sync';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';

t.setTimeout(240_000);

type Json = Record<string, any>;
const W = ['email:outcomes:write'];
const R = ['email:outcomes:read'];
const NOW = Date.now();
const iso = (msAgo: number): string => new Date(NOW - msAgo).toISOString();

/** The counters of an import response (errors and imported_at apart). */
const counts = (b: Json): Json => {
  const { errors: _e, imported_at: _i, ...rest } = b;
  return rest;
};

const ZERO = {
  received: 0,
  accepted: 0,
  skipped_invalid: 0,
  duplicates: 0,
  suppressed: 0,
  complaints_suppressed: 0,
  unsubscribed_suppressed: 0,
  stale_suppressions_skipped: 0,
  suppression_cache_invalidated: 0,
  credits_charged: 0,
};

async function pollJob(stack: Stack, key: string, id: string): Promise<Json> {
  const end = Date.now() + 60_000;
  for (;;) {
    const r = await stack.call('GET', `/v1/csv/jobs/${id}`, { key });
    if (['completed', 'failed', 'canceled'].includes(r.body.status)) return r.body;
    if (Date.now() > end) throw new Error(`job ${id} still ${r.body.status}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function csvText(stack: Stack, key: string, id: string): Promise<string> {
  const link = await stack.call('GET', `/v1/csv/jobs/${id}/download?mode=url`, { key });
  const res = await fetch(String(link.body.url).replace(stack.svc.services.config.publicUrl, stack.url));
  return res.text();
}

t.test('outcomes over HTTP', async (t) => {
  const stack = await startStack();
  t.teardown(() => stack.close());
  const writer = await makeKey(stack, { scopes: W, credits: 0 });
  const reader = await makeKey(stack, { scopes: R, credits: 0 });
  // The reader's key belongs to its own account: give it the writer's account for reads.
  const readKey = (await stack.store.keys.create({ accountId: writer.accountId, kind: 'test', scopes: R })).key;
  const both = await makeKey(stack, { scopes: null, credits: 100 });

  await t.test('scopes: write cannot read, read cannot import', async (t) => {
    const imp = await stack.call('POST', '/v1/outcomes/email/import', { key: reader.key, body: { outcomes: [{}] } });
    t.equal(imp.status, 403);
    t.equal(imp.body.code, 'insufficient_scope');
    t.equal(imp.body.required_scope, 'email:outcomes:write');
    const ev = await stack.call('GET', '/v1/outcomes/email/events', { key: writer.key });
    t.equal(ev.status, 403);
    t.equal(ev.body.required_scope, 'email:outcomes:read');
    const rep = await stack.call('GET', '/v1/outcomes/email/reports/summary', { key: writer.key });
    t.equal(rep.status, 403);
    t.equal(rep.body.required_scope, 'email:outcomes:read');
  });

  await t.test('a JSON import: labels, suppressions, row errors, exact counts', async (t) => {
    const rows = [
      { email: 'hard.one@accept.test', outcome: 'bounced', source: 'api', external_id: 'j-1', occurred_at: iso(60_000), action: 'failed', smtp_enhanced_code: '5.1.1', diagnostic_code: 'smtp; 550 5.1.1 user unknown' },
      { email: 'soft.one@accept.test', outcome: 'bounced', source: 'api', external_id: 'j-2', occurred_at: iso(60_000), action: 'delayed', smtp_enhanced_code: '4.2.2' },
      { email: 'policy.one@accept.test', outcome: 'bounced', source: 'api', external_id: 'j-3', occurred_at: iso(60_000), action: 'failed', smtp_enhanced_code: '5.7.1' },
      { email: 'happy.one@accept.test', outcome: 'replied', source: 'api', external_id: 'j-4', occurred_at: iso(60_000) },
      { email: 'angry.one@accept.test', outcome: 'complaint', source: 'api', external_id: 'j-5', occurred_at: iso(60_000) },
      { email: 'gone.one@accept.test', outcome: 'unsubscribed', source: 'api', external_id: 'j-6', occurred_at: iso(60_000) },
      { email: 'not an address', outcome: 'bounced', source: 'api', external_id: 'j-7' },
      { email: 'x@accept.test', outcome: 'exploded', source: 'api', external_id: 'j-8' },
      { email: 'x@accept.test', outcome: 'bounced', source: 'carrier-pigeon', external_id: 'j-9' },
      { email: 'x@accept.test', outcome: 'bounced', source: 'esp_webhook', external_id: 'j-10' },
      { email: 'x@accept.test', outcome: 'bounced', source: 'api' },
      { email: 'x@accept.test', outcome: 'bounced', source: 'api', external_id: 'j-12', action: 'exploded' },
      'not an object',
      { email: 'hard.one@accept.test', outcome: 'bounced', source: 'api', external_id: 'j-1', occurred_at: iso(60_000), action: 'failed', smtp_enhanced_code: '5.1.1', diagnostic_code: 'smtp; 550 5.1.1 user unknown' },
    ];
    const r = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, body: { outcomes: rows } });
    t.equal(r.status, 200, r.text);
    t.strictSame(counts(r.body), { ...ZERO, received: 14, accepted: 6, skipped_invalid: 7, duplicates: 1, suppressed: 3, complaints_suppressed: 1, unsubscribed_suppressed: 1, suppression_cache_invalidated: 3 });
    t.strictSame(
      r.body.errors.map((e: Json) => [e.index, e.code]),
      [
        [6, 'invalid_email'],
        [7, 'missing_outcome'],
        [8, 'invalid_source'],
        [9, 'missing_event_timestamp'],
        [10, 'missing_external_id'],
        [11, 'invalid_dsn_semantics'],
        [12, 'invalid_row'],
      ],
    );
    for (const e of r.body.errors) {
      const email = (rows[e.index] as { email?: string }).email;
      if (typeof email === 'string') t.notOk(e.reason.includes(email), 'a row error never repeats the address');
    }
    t.match(r.body.imported_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  await t.test('the events read shows labels and suppression; newest first; paged', async (t) => {
    const one = await stack.call('GET', '/v1/outcomes/email/events?email=hard.one@accept.test', { key: readKey });
    t.equal(one.status, 200, one.text);
    t.equal(one.body.events.length, 1);
    t.match(one.body.events[0], { email: 'hard.one@accept.test', outcome: 'bounced', label: 'bounced_hard', source: 'api', external_id: 'j-1', action: 'failed', smtp_enhanced_code: '5.1.1', suppressed: true });
    t.equal(one.body.next_cursor, null);
    const labels = async (email: string) => (await stack.call('GET', `/v1/outcomes/email/events?email=${encodeURIComponent(email)}`, { key: readKey })).body.events.map((e: Json) => [e.label, e.suppressed]);
    t.strictSame(await labels('soft.one@accept.test'), [['bounced_soft', false]]);
    t.strictSame(await labels('policy.one@accept.test'), [['blocked_policy', false]]);
    t.strictSame(await labels('happy.one@accept.test'), [['delivered', false]]);
    t.strictSame(await labels('angry.one@accept.test'), [['unknown', true]]);
    t.strictSame(await labels('gone.one@accept.test'), [['unknown', true]]);
    t.strictSame(await labels('x@accept.test'), [], 'rejected rows store nothing');
    const p1 = await stack.call('GET', '/v1/outcomes/email/events?limit=4', { key: readKey });
    t.equal(p1.body.events.length, 4);
    t.strictSame(p1.body.events.map((e: Json) => e.external_id), ['j-6', 'j-5', 'j-4', 'j-3']);
    const p2 = await stack.call('GET', `/v1/outcomes/email/events?limit=4&cursor=${p1.body.next_cursor}`, { key: readKey });
    t.strictSame(p2.body.events.map((e: Json) => e.external_id), ['j-2', 'j-1']);
    t.equal(p2.body.next_cursor, null);
    for (const q of ['limit=0', 'limit=101', 'limit=x', 'cursor=bogus', 'email=not-an-address']) {
      const bad = await stack.call('GET', `/v1/outcomes/email/events?${q}`, { key: readKey });
      t.equal(bad.status, 400, q);
      t.equal(bad.body.code, 'invalid_outcome_query', q);
    }
    // Another account sees none of it.
    const other = await stack.call('GET', '/v1/outcomes/email/events', { key: reader.key });
    t.strictSame(other.body.events, []);
  });

  await t.test('a retried import is all duplicates; other content under a stored identity is a conflict', async (t) => {
    const row = { email: 'soft.one@accept.test', outcome: 'bounced', source: 'api', external_id: 'j-2', occurred_at: iso(60_000), action: 'delayed', smtp_enhanced_code: '4.2.2' };
    const same = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, body: { outcomes: [row] } });
    t.strictSame(counts(same.body), { ...ZERO, received: 1, duplicates: 1 });
    const changed = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, body: { outcomes: [{ ...row, smtp_enhanced_code: '4.4.1' }] } });
    t.strictSame(counts(changed.body), { ...ZERO, received: 1, skipped_invalid: 1 });
    t.strictSame(changed.body.errors.map((e: Json) => [e.index, e.code]), [[0, 'event_identity_conflict']]);
    const ev = await stack.call('GET', '/v1/outcomes/email/events?email=soft.one@accept.test', { key: readKey });
    t.equal(ev.body.events.length, 1, 'the stored event wins');
    t.equal(ev.body.events[0].smtp_enhanced_code, '4.2.2');
  });

  await t.test('a CSV import (source csv_import by default), and the same CSV again', async (t) => {
    const csv = [
      'email,outcome,external_id,action,smtp_enhanced_code,occurred_at',
      `csv.hard@accept.test,bounced,c-1,failed,5.1.1,${iso(30_000)}`,
      `csv.ok@accept.test,delivered,c-2,,,${iso(30_000)}`,
      'csv.bad@accept.test,bounced,c-3,failed,5.01.1,',
      'csv.open@accept.test,opened,c-4,,,',
    ].join('\r\n');
    const r = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, raw: csv, headers: { 'content-type': 'text/csv' } });
    t.equal(r.status, 200, r.text);
    t.strictSame(counts(r.body), { ...ZERO, received: 4, accepted: 3, skipped_invalid: 1, suppressed: 1, suppression_cache_invalidated: 1 });
    t.strictSame(r.body.errors.map((e: Json) => [e.index, e.code]), [[2, 'invalid_dsn_semantics']]);
    const ev = await stack.call('GET', '/v1/outcomes/email/events?email=csv.open@accept.test', { key: readKey });
    t.match(ev.body.events[0], { source: 'csv_import', label: 'unknown', outcome: 'opened' });
    const again = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, raw: csv, headers: { 'content-type': 'text/csv; charset=utf-8' } });
    t.strictSame(counts(again.body), { ...ZERO, received: 4, duplicates: 3, skipped_invalid: 1 });
  });

  await t.test('whole-request errors', async (t) => {
    const cases: Array<[string, Parameters<Stack['call']>[2], number, string]> = [
      ['broken JSON', { raw: '{"outcomes": [', headers: { 'content-type': 'application/json' } }, 400, 'invalid_json'],
      ['no outcomes key', { body: {} }, 400, 'missing_outcomes'],
      ['empty outcomes', { body: { outcomes: [] } }, 400, 'missing_outcomes'],
      ['outcomes not an array', { body: { outcomes: 'x' } }, 400, 'missing_outcomes'],
      ['a bare array of rows', { body: [{ email: 'a@accept.test', outcome: 'bounced', external_id: 'x1' }] }, 400, 'missing_outcomes'],
      ['a JSON string', { raw: '"outcomes"', headers: { 'content-type': 'application/json' } }, 400, 'missing_outcomes'],
      ['JSON null', { raw: 'null', headers: { 'content-type': 'application/json' } }, 400, 'missing_outcomes'],
      ['10,001 rows', { body: { outcomes: Array.from({ length: 10_001 }, () => ({})) } }, 400, 'too_many_outcomes'],
      ['a header-only CSV', { raw: 'email,outcome,external_id\r\n', headers: { 'content-type': 'text/csv' } }, 400, 'missing_outcomes'],
      ['a malformed CSV', { raw: 'email,outcome\r\n"unterminated,bounced\r\n', headers: { 'content-type': 'text/csv' } }, 400, 'invalid_csv'],
      ['a CSV of 10,001 rows', { raw: `email,outcome\r\n${'a@b.test,bounced\r\n'.repeat(10_001)}`, headers: { 'content-type': 'text/csv' } }, 400, 'too_many_outcomes'],
      ['over 5 MiB', { raw: JSON.stringify({ outcomes: [{ pad: 'x'.repeat(5 * 1024 * 1024) }] }), headers: { 'content-type': 'application/json' } }, 413, 'payload_too_large'],
      ['text/plain', { raw: 'hello', headers: { 'content-type': 'text/plain' } }, 415, 'unsupported_media_type'],
    ];
    for (const [name, opts, status, code] of cases) {
      const r = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, ...opts });
      t.equal(r.status, status, `${name}: status`);
      t.equal(r.body.code, code, `${name}: code`);
    }
  });

  await t.test('suppression answers later validations without probing and charges 0; the shared cache is invalidated', async (t) => {
    // Another account validates (and caches) the address first.
    const first = await stack.call('POST', '/v1/validate', { key: both.key, body: { email: 'john.smith@accept.test' } });
    t.equal(first.body.result, 'valid');
    t.equal(first.body.credits_charged, 1);
    // The validating account imports a hard bounce for it.
    const keyW = (await stack.store.keys.create({ accountId: both.accountId, kind: 'test', scopes: W })).key;
    const imp = await stack.call('POST', '/v1/outcomes/email/import', {
      key: keyW,
      body: { outcomes: [{ email: 'john.smith@accept.test', outcome: 'bounced', source: 'smtp_log', external_id: 's-1', action: 'failed', smtp_enhanced_code: '5.1.1', occurred_at: iso(1000) }] },
    });
    t.strictSame(counts(imp.body), { ...ZERO, received: 1, accepted: 1, suppressed: 1, suppression_cache_invalidated: 1 });
    stack.sim.resetStats();
    const before = (await stack.call('GET', '/v1/credits', { key: both.key })).body.balance;
    const again = await stack.call('POST', '/v1/validate', { key: both.key, body: { email: 'john.smith@accept.test' } });
    t.match(again.body, { result: 'invalid', reason_code: 'suppressed_hard_bounce', validation_layer: 'suppression', credits_charged: 0, charge_reason: 'suppressed_not_charged' });
    t.ok(again.body.flags.includes('suppressed'));
    t.strictSame([stack.sim.statsFor('accept.test').connections, stack.sim.statsFor('accept.test').rcpt], [0, 0], 'answered without probing');
    const bulk = await stack.call('POST', '/v1/validate/bulk', { key: both.key, body: { emails: ['john.smith@accept.test', 'jane.doe@accept.test'] } });
    t.strictSame(bulk.body.results.map((x: Json) => [x.result, x.reason_code, x.credits_charged]), [
      ['invalid', 'suppressed_hard_bounce', 0],
      ['valid', 'accepted', 1],
    ]);
    t.equal((await stack.call('GET', '/v1/credits', { key: both.key })).body.balance, before - 1, 'only the unsuppressed address was charged');
    // The first account's cached verdict was dropped: another account probes again and is charged.
    const other = await makeKey(stack, { credits: 10 });
    stack.sim.resetStats();
    const fresh = await stack.call('POST', '/v1/validate', { key: other.key, body: { email: 'john.smith@accept.test' } });
    t.match(fresh.body, { result: 'valid', credits_charged: 1 });
    t.ok(stack.sim.statsFor('accept.test').rcpt >= 1, 'probed again: the shared cache entry was invalidated');
    // Complaint and unsubscribe: risky with their own reason codes.
    const w2 = (await stack.store.keys.create({ accountId: other.accountId, kind: 'test', scopes: W })).key;
    await stack.call('POST', '/v1/outcomes/email/import', {
      key: w2,
      body: {
        outcomes: [
          { email: 'jane.doe@accept.test', outcome: 'complaint', source: 'api', external_id: 'k-1' },
          { email: 'john.smith@accept.test', outcome: 'unsubscribed', source: 'api', external_id: 'k-2' },
        ],
      },
    });
    const s2 = await stack.call('POST', '/v1/validate/bulk', { key: other.key, body: { emails: ['jane.doe@accept.test', 'john.smith@accept.test'] } });
    t.strictSame(s2.body.results.map((x: Json) => [x.result, x.reason_code, x.credits_charged, x.charge_reason]), [
      ['risky', 'suppressed_complaint', 0, 'suppressed_not_charged'],
      ['risky', 'suppressed_unsubscribed', 0, 'suppressed_not_charged'],
    ]);
  });

  await t.test('a job answers suppressed addresses without probing and charges 0 for them', async (t) => {
    const job = await stack.call('POST', '/v1/validate/batch', { key: both.key, body: { emails: ['john.smith@accept.test', 'jane.doe@accept.test', 'no.such.user@accept.test'] } });
    t.equal(job.status, 202, job.text);
    const done = await pollJob(stack, both.key, job.body.id);
    t.equal(done.status, 'completed');
    const csv = await csvText(stack, both.key, job.body.id);
    const records = parseCsv(csv, { columns: true }) as Array<Record<string, string>>;
    t.strictSame(
      records.map((l) => [l.email, l.result, l.reason_code, l.credits_charged, l.charge_reason]),
      [
        ['john.smith@accept.test', 'invalid', 'suppressed_hard_bounce', '0', 'suppressed_not_charged'],
        ['jane.doe@accept.test', 'valid', 'accepted', '1', 'high_value_validation'],
        ['no.such.user@accept.test', 'invalid', 'mailbox_not_found', '0', 'invalid_not_charged'],
      ],
    );
  });

  await t.test('fail-closed: a failed suppression step keeps nothing; the same import then succeeds', async (t) => {
    const body = { outcomes: [{ email: 'fc.one@accept.test', outcome: 'bounced', source: 'api', external_id: 'fc-1', action: 'failed', smtp_enhanced_code: '5.1.10', occurred_at: iso(1000) }] };
    await stack.db.exec(`CREATE OR REPLACE FUNCTION svc_e2e_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused (test)'; END $$;
      CREATE TRIGGER svc_e2e_fail BEFORE INSERT ON suppressions FOR EACH ROW EXECUTE FUNCTION svc_e2e_fail();`);
    const failed = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, body });
    t.equal(failed.status, 503);
    t.equal(failed.body.code, 'outcome_suppression_failed');
    t.strictSame((await stack.call('GET', '/v1/outcomes/email/events?email=fc.one@accept.test', { key: readKey })).body.events, [], 'no event kept');
    await stack.db.exec('DROP TRIGGER svc_e2e_fail ON suppressions; CREATE TRIGGER svc_e2e_fail BEFORE INSERT ON outcome_events FOR EACH ROW EXECUTE FUNCTION svc_e2e_fail();');
    const failed2 = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, body });
    t.equal(failed2.status, 503);
    t.equal(failed2.body.code, 'outcome_import_failed');
    await stack.db.exec('DROP TRIGGER svc_e2e_fail ON outcome_events');
    const ok = await stack.call('POST', '/v1/outcomes/email/import', { key: writer.key, body });
    t.strictSame(counts(ok.body), { ...ZERO, received: 1, accepted: 1, suppressed: 1, suppression_cache_invalidated: 1 });
  });

  await t.test('the connector: lifecycle, inbound events, retries, denominator', async (t) => {
    const create = await stack.call('POST', '/v1/outcomes/email/connectors/emailbison', { key: writer.key });
    t.equal(create.status, 201, create.text);
    t.match(create.body, { platform: 'emailbison', status: 'active' });
    const url = new URL(create.body.webhook_url);
    t.match(url.pathname, /^\/v1\/outcomes\/email\/connectors\/emailbison\/events\/[A-Za-z0-9_-]{43}$/);
    const hook = (body: unknown, path = url.pathname) => stack.call('POST', path, { key: null, body });
    let st = await stack.call('GET', '/v1/outcomes/email/connectors/emailbison', { key: writer.key });
    t.match(st.body, { platform: 'emailbison', status: 'active', events_received: 0, events_ignored: 0, last_event_at: null, denominator_status: 'sent_event_missing' });
    t.notOk('webhook_url' in st.body, 'the secret URL cannot be recovered');
    const ev = (type: string, id: number, email: string, extra: Json = {}) => ({
      event: { type, name: type, workspace_id: 1 },
      data: { scheduled_email: { id, email_body: 'Hello there, long campaign body', sent_at: iso(5000) }, lead: { id: 900 + id, email, first_name: 'Sim' }, campaign_event: { created_at: iso(4000) }, ...extra },
    });
    // A bounce before any email_sent: accepted, denominator still missing.
    const b1 = await hook(ev('EMAIL_BOUNCED', 1, 'eb.bounce@accept.test', { bounce: { smtp_enhanced_code: '5.1.1', action: 'failed', diagnostic_code: 'smtp; 550 5.1.1 no such user' } }));
    t.equal(b1.status, 200, b1.text);
    t.strictSame(b1.body, { received: 1, accepted: 1, duplicates: 0, ignored: 0, rejected: 0, errors: [] });
    st = await stack.call('GET', '/v1/outcomes/email/connectors/emailbison', { key: writer.key });
    t.equal(st.body.denominator_status, 'sent_event_missing');
    // The six events (one array body), an unknown one, and a retry of the bounce.
    const all = await hook([
      ev('EMAIL_SENT', 2, 'eb.sent@accept.test'),
      ev('EMAIL_OPENED', 2, 'eb.sent@accept.test'),
      ev('LEAD_REPLIED', 3, 'eb.reply@accept.test'),
      ev('LEAD_INTERESTED', 3, 'eb.reply@accept.test'),
      ev('LEAD_UNSUBSCRIBED', 4, 'eb.unsub@accept.test'),
      ev('EMAIL_ACCOUNT_ADDED', 5, 'eb.other@accept.test'),
      ev('EMAIL_BOUNCED', 1, 'eb.bounce@accept.test', { bounce: { smtp_enhanced_code: '5.1.1', action: 'failed', diagnostic_code: 'smtp; 550 5.1.1 no such user' } }),
    ]);
    t.equal(all.status, 200, all.text);
    t.strictSame(all.body, { received: 7, accepted: 5, duplicates: 1, ignored: 1, rejected: 0, errors: [] });
    st = await stack.call('GET', '/v1/outcomes/email/connectors/emailbison', { key: writer.key });
    t.match(st.body, { events_received: 7, events_ignored: 1, denominator_status: 'ok' });
    const labels = async (email: string) => (await stack.call('GET', `/v1/outcomes/email/events?email=${email}`, { key: readKey })).body.events.map((e: Json) => [e.outcome, e.label, e.source, e.suppressed]);
    t.strictSame(await labels('eb.bounce@accept.test'), [['bounced', 'bounced_hard', 'emailbison', true]]);
    t.strictSame(await labels('eb.reply@accept.test'), [
      ['replied', 'delivered', 'emailbison', false],
      ['replied', 'delivered', 'emailbison', false],
    ]);
    t.strictSame(await labels('eb.sent@accept.test'), [
      ['opened', 'unknown', 'emailbison', false],
      ['sent', 'unknown', 'emailbison', false],
    ]);
    t.strictSame(await labels('eb.unsub@accept.test'), [['unsubscribed', 'unknown', 'emailbison', true]]);
    // No body or metadata is stored: the events carry only what the events route shows.
    const raw = await stack.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outcome_events WHERE account_id = $1 AND (email LIKE '%campaign%' OR evidence LIKE '%Hello%')`, [writer.accountId]);
    t.equal(raw[0]!.n, 0);
    // A malformed event is rejected, not an error of the delivery.
    const bad = await hook({ event: { type: 'EMAIL_SENT' }, data: { lead: { email: 'eb.x@accept.test' } } });
    t.strictSame(bad.body, { received: 1, accepted: 0, duplicates: 0, ignored: 0, rejected: 1, errors: [] });
    // Re-create: the old URL stops at once.
    const again = await stack.call('POST', '/v1/outcomes/email/connectors/emailbison', { key: writer.key });
    t.equal(again.status, 201);
    t.not(again.body.webhook_url, create.body.webhook_url);
    const old = await hook(ev('EMAIL_SENT', 9, 'eb.late@accept.test'));
    t.equal(old.status, 404);
    t.equal(old.body.code, 'invalid_connector_secret');
    const fresh = await hook(ev('EMAIL_SENT', 9, 'eb.late@accept.test'), new URL(again.body.webhook_url).pathname);
    t.equal(fresh.status, 200);
    // A body over the bound is refused before anything is read.
    const big = await hook({ event: { type: 'EMAIL_SENT' }, data: { pad: 'x'.repeat(1024 * 1024) } }, new URL(again.body.webhook_url).pathname);
    t.strictSame([big.status, big.body.code], [413, 'payload_too_large']);
    // A revoke that cannot be stored fails with connector_revoke_failed and leaves the URL live.
    await stack.db.exec(`CREATE OR REPLACE FUNCTION svc_e2e_norevoke() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.status = 'revoked' THEN RAISE EXCEPTION 'refused (test)'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER svc_e2e_norevoke BEFORE UPDATE ON outcome_connectors FOR EACH ROW EXECUTE FUNCTION svc_e2e_norevoke();`);
    const failedRevoke = await stack.call('DELETE', '/v1/outcomes/email/connectors/emailbison', { key: writer.key });
    t.strictSame([failedRevoke.status, failedRevoke.body.code], [503, 'connector_revoke_failed']);
    const stillLive = await hook(ev('EMAIL_SENT', 11, 'eb.late@accept.test'), new URL(again.body.webhook_url).pathname);
    t.equal(stillLive.status, 200, 'the credential stays live until a revoke succeeds');
    await stack.db.exec('DROP TRIGGER svc_e2e_norevoke ON outcome_connectors');
    // Revoke: the URL is no longer accepted; status says revoked.
    const rev = await stack.call('DELETE', '/v1/outcomes/email/connectors/emailbison', { key: writer.key });
    t.strictSame([rev.status, rev.body], [200, { platform: 'emailbison', status: 'revoked' }]);
    const after = await hook(ev('EMAIL_SENT', 10, 'eb.late@accept.test'), new URL(again.body.webhook_url).pathname);
    t.equal(after.status, 404);
    st = await stack.call('GET', '/v1/outcomes/email/connectors/emailbison', { key: writer.key });
    t.equal(st.body.status, 'revoked');
    // Errors: an unsupported platform, an account that may not use connectors, no connector yet.
    const unknownPlatform = await stack.call('POST', '/v1/outcomes/email/connectors/other', { key: writer.key });
    t.strictSame([unknownPlatform.status, unknownPlatform.body.code], [403, 'connector_unavailable']);
    const none = await stack.call('GET', '/v1/outcomes/email/connectors/emailbison', { key: (await stack.store.keys.create({ accountId: reader.accountId, kind: 'test', scopes: W })).key });
    t.strictSame([none.status, none.body.code], [404, 'connector_not_found']);
    await stack.store.outcomes.setConnectorsEnabled(reader.accountId, false);
    const denied = await stack.call('POST', '/v1/outcomes/email/connectors/emailbison', { key: (await stack.store.keys.create({ accountId: reader.accountId, kind: 'test', scopes: W })).key });
    t.strictSame([denied.status, denied.body.code], [403, 'connector_unavailable']);
  });
});
