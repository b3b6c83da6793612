// JSON batch jobs end to end (docs/api.md; docs/decisions/credits-and-billing.md), over HTTP against the embedded
// service and the simulated internet: a job of a few hundred addresses mixing every sim
// behaviour with duplicates and bad syntax runs to `completed`; every 2.2 counter and the credits
// are checked exactly against the results CSV and the ledger; the CSV is one row per input row,
// in order, with duplicates and formula cells handled; the verdicts equal the sync bulk
// endpoint's; then the list, cancel, downloads and the bad-input table.

import t from 'tap';
import { parse } from 'csv-parse/sync';
import { netSmtpConnector } from '@svc/verifier/adapters';
import { countersFrom, resultCells, shownCell } from '../helpers/jobs.ts';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';
import { SIM_DOMAINS, SIM_UNKNOWN_LOCAL } from '../sim/index.ts';

const stack: Stack = await startStack({ env: { SVC_JOB_GREYLIST_DELAY_MS: '500', SVC_JOB_GREYLIST_ATTEMPTS: '3' } });
t.teardown(() => stack.close());

type Json = Record<string, any>;

async function poll(key: string, id: string, until: (job: Json) => boolean = (j) => ['completed', 'failed', 'canceled'].includes(j.status), ms = 90_000, on: Stack = stack): Promise<Json> {
  const end = Date.now() + ms;
  for (;;) {
    const r = await on.call('GET', `/v1/csv/jobs/${id}`, { key });
    if (r.status !== 200) throw new Error(`GET job: ${r.status} ${r.text}`);
    if (until(r.body)) return r.body;
    if (Date.now() > end) throw new Error(`job ${id} still ${r.body.status} (${r.body.progress.processed}/${r.body.progress.total})`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function download(url: string): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url);
  return { status: res.status, text: await res.text(), headers: res.headers };
}

const RESULT_COLUMNS = ['result', 'reason_code', 'reason', 'b2b_outbound_quality', 'is_role_based', 'role_type', 'is_free_provider', 'is_disposable', 'is_catchall', 'catchall_confidence', 'did_you_mean', 'credits_charged', 'charge_reason', 'validation_layer', 'smtp_response'];

// The input: every sim domain's known and unknown mailbox, more unknown users, a role address,
// repeats (same string, other domain case, quoted form), bad syntax, formula-looking addresses.
const addresses: string[] = [];
for (const d of SIM_DOMAINS) {
  const domain = d.unicode ?? d.domain;
  addresses.push(`jane.doe@${domain}`, `${SIM_UNKNOWN_LOCAL}@${domain}`);
}
for (let i = 0; i < 60; i++) addresses.push(`user${i}@accept.test`);
addresses.push('info@accept.test', 'john.smith@accept.test', '=cmd@accept.test', '+1@accept.test', '-x@accept.test', '@lead', 'not-an-email', 'also bad', 'x@');
const repeats = ['jane.doe@ACCEPT.test', '"jane.doe"@accept.test', 'not-an-email', 'user3@accept.test', 'jane.doe@catchall.test', ' jane.doe@greylist.test ', `${SIM_UNKNOWN_LOCAL}@nxdomain.test`];
const emails = [...addresses, ...repeats];

const ACCOUNT_CREDITS = 1000;

t.test('a JSON job of sim behaviours, duplicates and bad syntax: counters, credits, CSV, and the sync verdicts', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: ACCOUNT_CREDITS });
  const created = await stack.call('POST', '/v1/validate/batch', { key, body: { emails } });
  t.equal(created.status, 202, 'POST /v1/validate/batch answers 202');
  const unique = addresses.length; // every repeat is a spelling of an address already listed
  t.strictSame(Object.keys(created.body).sort(), ['created_at', 'credits_reserved', 'id', 'status', 'total_rows', 'unique_emails']);
  t.match(created.body, { status: 'queued', total_rows: emails.length, unique_emails: unique, credits_reserved: unique });
  t.match(created.body.id, /^job_[0-9a-f]{24}$/);
  t.equal(created.headers.get('x-request-id')?.startsWith('req_'), true);
  const balance = await stack.call('GET', '/v1/credits', { key });
  t.strictSame([balance.body.balance, balance.body.reserved, balance.body.available], [ACCOUNT_CREDITS, unique, ACCOUNT_CREDITS - unique], 'one credit per unique email held');

  const job = await poll(key, created.body.id);
  t.equal(job.status, 'completed');
  t.strictSame(Object.keys(job).sort(), ['completed_at', 'created_at', 'credit_reservation', 'download', 'filename', 'id', 'progress', 'results', 'source', 'started_at', 'status', 'webhook_url'], 'exactly the documented job resource (docs/api.md)');
  t.strictSame([job.source, job.filename, job.webhook_url], ['json', null, null]);
  t.ok(job.created_at <= job.started_at && job.started_at <= job.completed_at, 'created ≤ started ≤ completed');
  t.strictSame(job.progress, { processed: unique, total: unique, percent: 100 });

  // The results CSV: one row per input row, in input order.
  const link = await stack.call('GET', `/v1/csv/jobs/${job.id}/download?mode=url`, { key });
  t.equal(link.status, 200);
  t.strictSame(Object.keys(link.body).sort(), ['expires_at', 'url']);
  t.ok(link.body.url.startsWith(`${stack.svc.services.config.publicUrl}/v1/csv/jobs/${job.id}/results.csv?`), link.body.url);
  const signedUrl = link.body.url.replace(stack.svc.services.config.publicUrl, stack.url);
  const file = await download(signedUrl);
  t.equal(file.status, 200, 'the signed URL needs no key');
  t.equal(file.headers.get('content-type'), 'text/csv; charset=utf-8');
  t.match(file.headers.get('content-disposition'), `attachment; filename="${job.id}-results.csv"`);
  t.ok(file.text.endsWith('\r\n') && !file.text.startsWith('\uFEFF'), 'CRLF lines, no BOM for a JSON job');
  const rows = parse(file.text, { relax_column_count: false }) as string[][];
  t.strictSame(rows[0], ['email', ...RESULT_COLUMNS], 'header');
  const data = rows.slice(1);
  t.equal(data.length, emails.length, 'one row per input row');
  const col = (name: string) => RESULT_COLUMNS.indexOf(name) + 1;
  t.strictSame(data.map((r) => r[0]), emails.map(shownCell), 'input order, the cells as sent (formula cells escaped)');
  t.equal(data.find((r) => r[0] === "'=cmd@accept.test")?.[col('result')], 'invalid', 'a formula-looking address is still validated');

  // Per unique email, the first row's verdict; repeats say so and cost nothing.
  const firstRow = new Map<number, string[]>();
  for (let i = 0; i < addresses.length; i++) firstRow.set(i, data[i]!);
  for (let i = addresses.length; i < data.length; i++) {
    const r = data[i]!;
    t.equal(r[col('charge_reason')], 'duplicate_in_job', `${emails[i]}: a repeat`);
    t.equal(r[col('credits_charged')], '0');
  }
  const firsts = [...firstRow.values()];
  t.equal(firsts.length, unique);
  const counters = countersFrom(firsts.map((r) => resultCells(r, 1)), emails.length);
  t.ok(counters.valid! > 0 && counters.invalid! > 0 && counters.risky! > 0 && counters.unknown! > 0 && counters.valid_role_based! > 0, 'every result occurs');
  t.strictSame(job.results, counters, 'the 2.2 counters are the CSV counted');
  const charged = counters.credits_charged!;
  t.equal(charged, counters.valid, 'exactly the valid (personal, non-catch-all) results are charged');
  t.equal(job.results.credits_reserved, job.results.credits_charged + job.results.credits_refunded, 'reserved = charged + refunded');
  t.strictSame(job.credit_reservation, { reserved: true, reserved_credits: unique, credits_charged: charged, credits_consumed: charged, refunded_credits: unique - charged, credits_per_high_value_validation: 1, finalized: true });
  const after = await stack.call('GET', '/v1/credits', { key });
  t.strictSame([after.body.balance, after.body.reserved], [ACCOUNT_CREDITS - charged, 0], 'the balance paid exactly the charge');
  t.strictSame(await stack.store.ledger.totals(accountId), { balance: ACCOUNT_CREDITS - charged, reserved: 0 }, 'the ledger agrees');
  const ledger = (await stack.store.ledger.entries(accountId, 10)).map((e) => [e.kind, e.amount]);
  t.strictSame(ledger.slice(0, 3), [['release', unique - charged], ['charge', charged], ['reserve', unique]], 'reserve, then one charge and one release');

  // The simulated internet's expected verdicts, for every domain's known and unknown mailbox.
  const verdictOf = new Map(data.map((r, i) => [emails[i]!.trim(), `${r[col('result')]}/${r[col('reason_code')]}`]));
  // Every domain's known and unknown mailbox, greylisting included (the re-probe minutes later
  // asks the same catch-all probe address, so greylisting lets it through too).
  for (const d of SIM_DOMAINS) {
    const domain = d.unicode ?? d.domain;
    t.equal(verdictOf.get(`jane.doe@${domain}`), `${d.known.result}/${d.known.reason_code}`, `jane.doe@${domain} (${d.behaviour})`);
    t.equal(verdictOf.get(`${SIM_UNKNOWN_LOCAL}@${domain}`), `${d.unknown.result}/${d.unknown.reason_code}`, `${SIM_UNKNOWN_LOCAL}@${domain} (${d.behaviour})`);
  }
  t.equal(verdictOf.get('info@accept.test'), 'valid_role_based/role_account');
  t.equal(verdictOf.get('not-an-email'), 'invalid/invalid_syntax');

  // The sync bulk endpoint gives every unique address the same verdict.
  const { key: syncKey } = await makeKey(stack, { credits: 1000 });
  for (let i = 0; i < addresses.length; i += 100) {
    const batch = addresses.slice(i, i + 100);
    const r = await stack.call('POST', '/v1/validate/bulk', { key: syncKey, body: { emails: batch } });
    t.equal(r.status, 200);
    for (const [j, res] of (r.body.results as Json[]).entries()) {
      t.equal(`${res.result}/${res.reason_code}`, verdictOf.get(batch[j]!.trim()), `sync and job agree on ${batch[j]}`);
    }
  }

  // Segments and the redirect.
  const risky = await stack.call('GET', `/v1/csv/jobs/${job.id}/download?mode=url&segment=risky,unknown`, { key });
  const seg = parse((await download(risky.body.url.replace(stack.svc.services.config.publicUrl, stack.url))).text) as string[][];
  t.ok(seg.length > 1 && seg.slice(1).every((r) => ['risky', 'unknown'].includes(r[col('result')]!)), 'segment keeps only those results');
  t.equal(seg.length - 1, data.filter((r) => ['risky', 'unknown'].includes(r[col('result')]!)).length, 'and every one of them');
  const redirect = await fetch(`${stack.url}/v1/csv/jobs/${job.id}/download`, { headers: { 'x-api-key': key }, redirect: 'manual' });
  t.equal(redirect.status, 302);
  const location = redirect.headers.get('location')!;
  t.ok(location.startsWith(`/v1/csv/jobs/${job.id}/results.csv?expires=`), `a relative Location: ${location}`);
  t.equal((await download(`${stack.url}${location}`)).text, file.text, 'the redirect leads to the same file');
  const tampered = await download(signedUrl.replace(/signature=([0-9a-f])/, (_m: string, c: string) => `signature=${c === '0' ? '1' : '0'}`));
  t.strictSame([tampered.status, JSON.parse(tampered.text).code], [403, 'invalid_signature']);
  const otherSegment = await download(`${risky.body.url.replace(stack.svc.services.config.publicUrl, stack.url).replace('segment=risky%2Cunknown', 'segment=valid')}`);
  t.strictSame([otherSegment.status, JSON.parse(otherSegment.text).code], [403, 'invalid_signature'], 'the segment is signed too');
});

t.test('Idempotency-Key: the same job once, the 202 replayed', async (t) => {
  const { key } = await makeKey(stack, { credits: 10 });
  const body = { emails: ['jane.doe@accept.test', 'john.smith@accept.test'] };
  const first = await stack.call('POST', '/v1/validate/batch', { key, body, headers: { 'idempotency-key': 'batch-1' } });
  const again = await stack.call('POST', '/v1/validate/batch', { key, body, headers: { 'idempotency-key': 'batch-1' } });
  t.strictSame([first.status, again.status, again.headers.get('idempotent-replayed'), again.text], [202, 202, 'true', first.text]);
  const list = await stack.call('GET', '/v1/csv/jobs', { key });
  t.equal(list.body.jobs.length, 1, 'one job');
  const conflict = await stack.call('POST', '/v1/validate/batch', { key, body: { emails: ['x@accept.test'] }, headers: { 'idempotency-key': 'batch-1' } });
  t.strictSame([conflict.status, conflict.body.code], [409, 'idempotency_key_conflict']);
  await poll(key, first.body.id);
});

t.test('list: newest first, cursor pages, status filter', async (t) => {
  const { key } = await makeKey(stack, { credits: 100 });
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const r = await stack.call('POST', '/v1/validate/batch', { key, body: { emails: [`user${i}@accept.test`] } });
    ids.push(r.body.id);
  }
  for (const id of ids) await poll(key, id);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const r: { status: number; body: Json } = await stack.call('GET', `/v1/csv/jobs?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { key });
    t.equal(r.status, 200);
    t.strictSame(Object.keys(r.body).sort(), ['jobs', 'next_cursor']);
    seen.push(...r.body.jobs.map((j: Json) => j.id));
    cursor = r.body.next_cursor;
    pages++;
  } while (cursor);
  t.equal(pages, 3);
  t.strictSame(seen, [...ids].reverse(), 'every job once, newest first');
  const first = await stack.call('GET', '/v1/csv/jobs', { key });
  t.equal(first.body.jobs.length, 5, 'default limit 20');
  t.equal(first.body.next_cursor, null);
  t.strictSame(first.body.jobs[0], await stack.call('GET', `/v1/csv/jobs/${ids[4]}`, { key }).then((r) => r.body), 'list items are status resources');
  t.strictSame((await stack.call('GET', '/v1/csv/jobs?status=completed&limit=100', { key })).body.jobs.length, 5);
  t.strictSame((await stack.call('GET', '/v1/csv/jobs?status=queued', { key })).body.jobs, []);
});

t.test('cancel: 200 with the canceled job, charged for what was done, refunded the rest; partial results', async (t) => {
  // A stack whose greylisted addresses wait 10 minutes for their second probe: the job stays
  // running, with one row done, until the DELETE, however late it comes. (A clock is no good: the
  // tarpit's 40 RCPTs time out together, in one pipelined session, 1.5 s after the first row, and a
  // loaded CI machine twice saw that job completed before its DELETE.)
  const stack = await startStack({ env: { SVC_JOB_GREYLIST_DELAY_MS: '600000', SVC_JOB_GREYLIST_ATTEMPTS: '3' } });
  t.teardown(() => stack.close());
  const poll = async (key: string, id: string, until: (job: Json) => boolean, ms: number): Promise<Json> => {
    const end = Date.now() + ms;
    for (;;) {
      const r = await stack.call('GET', `/v1/csv/jobs/${id}`, { key });
      if (until(r.body)) return r.body;
      if (Date.now() > end) throw new Error(`job ${id} still ${r.body.status} (${r.body.progress.processed}/${r.body.progress.total})`);
      await new Promise((res) => setTimeout(res, 100));
    }
  };
  const { key, accountId } = await makeKey(stack, { credits: 100 });
  const slow = Array.from({ length: 40 }, (_, i) => `user${i}@greylist.test`);
  const created = await stack.call('POST', '/v1/validate/batch', { key, body: { emails: ['jane.doe@accept.test', ...slow] } });
  // jane.doe is done and the 40 greylisted rows are deferred (not processed) for 10 minutes.
  await poll(key, created.body.id, (j) => j.progress.processed >= 1, 30_000);
  const deferred = async (): Promise<number> => (await stack.db.query<{ n: number }>("SELECT count(*)::int AS n FROM job_results WHERE job_id = $1 AND state = 'deferred'", [created.body.id]))[0]!.n;
  for (const end = Date.now() + 30_000; (await deferred()) < 40 && Date.now() < end; ) await new Promise((res) => setTimeout(res, 100));
  t.equal(await deferred(), 40, 'the 40 greylisted rows wait for their second probe');
  const canceled = await stack.call('DELETE', `/v1/csv/jobs/${created.body.id}`, { key });
  t.equal(canceled.status, 200, `DELETE answers 200 (${canceled.text})`);
  t.equal(canceled.body.status, 'canceled');
  const r = canceled.body.results;
  t.equal(r.credits_reserved, 41);
  t.equal(r.credits_charged, canceled.body.results.high_value, 'the High-Value Validations done are charged');
  t.equal(r.credits_reserved, r.credits_charged + r.credits_refunded);
  t.equal(canceled.body.credit_reservation.finalized, true);
  const again = await stack.call('DELETE', `/v1/csv/jobs/${created.body.id}`, { key });
  t.strictSame([again.status, again.body.code], [409, 'invalid_job_state'], 'cancel twice');
  const later = await poll(key, created.body.id, (j) => j.download.available, 15_000);
  t.equal(later.progress.processed, canceled.body.progress.processed, 'results after the cancel are dropped');
  t.strictSame(await stack.store.ledger.totals(accountId), { balance: 100 - r.credits_charged, reserved: 0 });
  const link = await stack.call('GET', `/v1/csv/jobs/${created.body.id}/download?mode=url`, { key });
  t.equal(link.status, 200, 'a canceled job has its partial results');
  const rows = parse((await download(link.body.url.replace(stack.svc.services.config.publicUrl, stack.url))).text) as string[][];
  t.equal(rows.length, 42, 'every input row');
  t.equal(rows[1]![1], 'valid', 'the row validated before the cancel');
});

/** One RCPT of `mailFrom` to `rcpt` on the sim's MX at `ip` (the service's own SMTP client, one session); the RCPT reply's first line. */
async function rcptOnce(ip: string, port: number, mailFrom: string, rcpt: string): Promise<string> {
  const open = await netSmtpConnector.open({ host: ip, servername: ip, port, heloName: 'client.sim.test', timeoutMs: 5_000 });
  if (!open.ok) throw new Error(`no session: ${open.failure.detail}`);
  try {
    const mail = await open.session.send('mail', `MAIL FROM:<${mailFrom}>`);
    if (!mail.ok) throw new Error(`MAIL FROM: ${mail.failure.detail}`);
    const answer = await open.session.send('rcpt', `RCPT TO:<${rcpt}>`);
    if (!answer.ok) throw new Error(`RCPT TO: ${answer.failure.detail}`);
    return answer.reply.lines[0]!;
  } finally {
    await open.session.quit();
  }
}

t.test('an address accepted while its catch-all probe is greylisted waits for the probe: valid after the re-probe, not catchall_unverified', async (t) => {
  // The address's (sender, recipient) pair is past greylisting before the job starts; the domain's
  // catch-all probe address is new to the server, so the first probe's answer is 450. Only the
  // re-probe (SVC_JOB_GREYLIST_DELAY_MS later, past the sim's 300 ms window) settles it.
  const stack = await startStack({ env: { SVC_JOB_GREYLIST_DELAY_MS: '800', SVC_JOB_GREYLIST_ATTEMPTS: '3' } });
  t.teardown(() => stack.close());
  const greylistIp = SIM_DOMAINS.find((d) => d.domain === 'greylist.test')!.mx[0]!.ip!;
  const mailFrom = stack.env.SVC_MAIL_FROM!;
  t.match(await rcptOnce(greylistIp, stack.sim.smtpPort, mailFrom, 'jane.doe@greylist.test'), /^450 4\.7\.1 /, 'the pair is greylisted once');
  await new Promise((res) => setTimeout(res, 400));
  const { key, accountId } = await makeKey(stack, { credits: 10 });
  const created = await stack.call('POST', '/v1/validate/batch', { key, body: { emails: ['jane.doe@greylist.test'] } });
  t.equal(created.status, 202, created.text);
  const job = await poll(key, created.body.id, undefined, 30_000, stack);
  t.equal(job.status, 'completed');
  const rows = await stack.db.query<{ attempts: number; state: string }>('SELECT attempts, state FROM job_results WHERE job_id = $1', [created.body.id]);
  t.strictSame(rows.map((r) => [r.attempts, r.state]), [[2, 'done']], 'probed twice: the first answer waited for the catch-all probe');
  const link = await stack.call('GET', `/v1/csv/jobs/${created.body.id}/download?mode=url`, { key });
  const cells = parse((await download(link.body.url.replace(stack.svc.services.config.publicUrl, stack.url))).text) as string[][];
  const head = cells[0]!;
  const row = cells[1]!;
  t.strictSame([row[head.indexOf('result')], row[head.indexOf('reason_code')], row[head.indexOf('is_catchall')], row[head.indexOf('credits_charged')]], ['valid', 'accepted', 'false', '1']);
  t.strictSame(await stack.store.ledger.totals(accountId), { balance: 9, reserved: 0 }, 'one High-Value Validation charged');
});

t.test('bad input and refused operations: exact statuses and codes', async (t) => {
  const { key } = await makeKey(stack, { credits: 2 });
  const other = await makeKey(stack, { credits: 100 });
  const readOnly = await makeKey(stack, { credits: 100, scopes: ['credits:read'] });
  const otherJob = await stack.call('POST', '/v1/validate/batch', { key: other.key, body: { emails: ['jane.doe@accept.test'] } });
  await poll(other.key, otherJob.body.id);
  // Asked at once: the tarpit answers RCPT only after the SMTP timeout (1.5 s), so this job cannot
  // have finished yet (after the cases below it may have, on a loaded machine).
  const running = await stack.call('POST', '/v1/validate/batch', { key: other.key, body: { emails: ['user1@tarpit.test', 'user2@tarpit.test'] } });
  const unfinished = await stack.call('GET', `/v1/csv/jobs/${running.body.id}/download?mode=url`, { key: other.key });
  t.strictSame([unfinished.status, unfinished.body?.code], [409, 'invalid_job_state'], 'download unfinished');

  const big = { emails: new Array(500_001).fill('a@accept.test') };
  const cases: Array<[string, string, string, { body?: unknown; raw?: string; key?: string | null; headers?: Record<string, string> }, number, string]> = [
    ['empty list', 'POST', '/v1/validate/batch', { body: { emails: [] } }, 400, 'emails_required'],
    ['no emails field', 'POST', '/v1/validate/batch', { body: { webhook_url: 'https://x.example.com' } }, 400, 'emails_required'],
    ['500,001 emails', 'POST', '/v1/validate/batch', { body: big }, 400, 'too_many_emails'],
    ['a non-string', 'POST', '/v1/validate/batch', { body: { emails: ['a@accept.test', 42] } }, 400, 'invalid_emails'],
    ['a null', 'POST', '/v1/validate/batch', { body: { emails: [null] } }, 400, 'invalid_emails'],
    ['emails not a list', 'POST', '/v1/validate/batch', { body: { emails: 'a@accept.test' } }, 400, 'invalid_request'],
    ['webhook_url not http(s)', 'POST', '/v1/validate/batch', { body: { emails: ['a@accept.test'], webhook_url: 'ftp://x.example.com/hook' } }, 400, 'invalid_webhook_url'],
    ['webhook_url unparsable', 'POST', '/v1/validate/batch', { body: { emails: ['a@accept.test'], webhook_url: 'not a url' } }, 400, 'invalid_webhook_url'],
    ['webhook_url on loopback', 'POST', '/v1/validate/batch', { body: { emails: ['a@accept.test'], webhook_url: 'http://127.0.0.1:9/hook' } }, 400, 'invalid_webhook_url'],
    ['webhook_url on a private address', 'POST', '/v1/validate/batch', { body: { emails: ['a@accept.test'], webhook_url: 'https://10.1.2.3/hook' } }, 400, 'invalid_webhook_url'],
    ['webhook_url not a string', 'POST', '/v1/validate/batch', { body: { emails: ['a@accept.test'], webhook_url: 7 } }, 400, 'invalid_webhook_url'],
    ['malformed JSON', 'POST', '/v1/validate/batch', { raw: '{"emails": [', headers: { 'content-type': 'application/json' } }, 400, 'invalid_json'],
    ['too few credits', 'POST', '/v1/validate/batch', { body: { emails: ['a@accept.test', 'b@accept.test', 'c@accept.test'] } }, 402, 'insufficient_credits'],
    ['no key', 'POST', '/v1/validate/batch', { key: null, body: { emails: ['a@accept.test'] } }, 401, 'api_key_required'],
    ['wrong scope', 'GET', '/v1/csv/jobs', { key: readOnly.key }, 403, 'insufficient_scope'],
    ["another account's job", 'GET', `/v1/csv/jobs/${otherJob.body.id}`, {}, 404, 'job_not_found'],
    ["another account's job: download", 'GET', `/v1/csv/jobs/${otherJob.body.id}/download`, {}, 404, 'job_not_found'],
    ["another account's job: cancel", 'DELETE', `/v1/csv/jobs/${otherJob.body.id}`, {}, 404, 'job_not_found'],
    ['unknown job', 'GET', '/v1/csv/jobs/job_000000000000000000000000', {}, 404, 'job_not_found'],
    ['cancel finished', 'DELETE', `/v1/csv/jobs/${otherJob.body.id}`, { key: other.key }, 409, 'invalid_job_state'],
    ['download mode not url', 'GET', `/v1/csv/jobs/${otherJob.body.id}/download?mode=zip`, { key: other.key }, 400, 'invalid_request'],
    ['unknown segment', 'GET', `/v1/csv/jobs/${otherJob.body.id}/download?segment=good`, { key: other.key }, 400, 'invalid_request'],
    ['limit 0', 'GET', '/v1/csv/jobs?limit=0', {}, 400, 'invalid_request'],
    ['limit 101', 'GET', '/v1/csv/jobs?limit=101', {}, 400, 'invalid_request'],
    ['limit not a number', 'GET', '/v1/csv/jobs?limit=ten', {}, 400, 'invalid_request'],
    ['bad cursor', 'GET', '/v1/csv/jobs?cursor=abc', {}, 400, 'invalid_request'],
    ['bad status', 'GET', '/v1/csv/jobs?status=done', {}, 400, 'invalid_request'],
    ['results without a signature', 'GET', `/v1/csv/jobs/${otherJob.body.id}/results.csv`, { key: null }, 400, 'invalid_request'],
    ['results with a made-up signature', 'GET', `/v1/csv/jobs/${otherJob.body.id}/results.csv?expires=9999999999&signature=${'0'.repeat(64)}`, { key: null }, 403, 'invalid_signature'],
  ];
  for (const [name, method, route, opts, status, code] of cases) {
    const r = await stack.call(method, route, { key, ...opts });
    t.strictSame([r.status, r.body?.code], [status, code], name);
  }
  const refused = await stack.call('POST', '/v1/validate/batch', { key, body: { emails: ['a@accept.test', 'b@accept.test', 'c@accept.test', 'a@accept.test'] } });
  t.strictSame([refused.body.required, refused.body.available], [3, 2], 'insufficient_credits names the unique emails and the available credits');
  t.equal((await stack.call('GET', '/v1/csv/jobs', { key })).body.jobs.length, 0, 'no refused request made a job');
  await stack.call('DELETE', `/v1/csv/jobs/${running.body.id}`, { key: other.key });
});

t.test('OpenAPI documents the job routes', async (t) => {
  const doc = (await stack.call('GET', '/openapi.json', { key: null })).body;
  for (const p of ['/v1/validate/batch', '/v1/csv/jobs', '/v1/csv/jobs/{id}', '/v1/csv/jobs/{id}/download', '/v1/csv/jobs/{id}/results.csv']) t.ok(doc.paths[p], p);
  t.strictSame(doc.paths['/v1/validate/batch'].post.responses['400'].content['application/json'].schema.properties.code.enum.sort(), ['emails_required', 'invalid_emails', 'invalid_idempotency_key', 'invalid_json', 'invalid_request', 'invalid_webhook_url', 'too_many_emails']);
  t.ok(doc.paths['/v1/csv/jobs/{id}'].delete, 'cancel');
});
