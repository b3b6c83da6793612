// CSV jobs end to end (docs/api.md "CSV jobs"; docs/decisions/jobs-and-csv.md), over HTTP against the embedded service and the
// simulated internet: prepare-upload, the signed PUT (with curl -T, as docs/api.md shows it, and
// with fetch), start-processing, polling, and the results CSV of a file with a BOM, `;`, CRLF,
// quoted fields with embedded newlines and delimiters, extra columns, duplicate rows and an
// empty email cell: its input columns round-trip cell for cell, each row has the sim's exact
// verdict, the 2.2 counters and the credits are exact. Then the bad-input table.

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { parse } from 'csv-parse/sync';
import { signQuery } from '@svc/jobs';
import { countersFrom, resultCells, shownCell } from '../helpers/jobs.ts';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';
import { SIM_DOMAINS, SIM_UNKNOWN_LOCAL } from '../sim/index.ts';

const run = promisify(execFile);
const MAX_BYTES = 8192;
// On the CSV pool (one worker thread): the examples of docs/api.md and the JSON job tests cover the inline path.
const stack: Stack = await startStack({ env: { SVC_CSV_MAX_BYTES: String(MAX_BYTES), SVC_JOB_GREYLIST_DELAY_MS: '500', SVC_CSV_POOL_THREADS: '1' } });
t.teardown(() => stack.close());
const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-csv-e2e-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

type Json = Record<string, any>;

const publicUrl = stack.svc.services.config.publicUrl;
/** A URL the service made (with SVC_PUBLIC_URL), pointed at the stack's real port. */
const local = (url: string): string => url.replace(publicUrl, stack.url);

async function poll(key: string, id: string, until: (job: Json) => boolean = (j) => ['completed', 'failed', 'canceled'].includes(j.status), ms = 90_000): Promise<Json> {
  const end = Date.now() + ms;
  for (;;) {
    const r = await stack.call('GET', `/v1/csv/jobs/${id}`, { key });
    if (r.status !== 200) throw new Error(`GET job: ${r.status} ${r.text}`);
    if (until(r.body)) return r.body;
    if (Date.now() > end) throw new Error(`job ${id} still ${r.body.status} (${r.body.progress.processed}/${r.body.progress.total})`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** PUT a body to an upload URL with fetch. */
async function put(url: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<{ status: number; body: Json; headers: Headers }> {
  const res = await fetch(local(url), { method: 'PUT', body: typeof body === 'string' ? body : new Uint8Array(body), headers });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as Json, headers: res.headers };
}

/** `curl -s -T <file> <url>` (and extra curl arguments): status and body. */
async function curlT(file: string, url: string, ...args: string[]): Promise<{ status: number; body: Json }> {
  const { stdout } = await run('curl', ['-s', '-w', '\n%{http_code}', ...args, '-T', file, local(url)]);
  const nl = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(nl + 1)), body: JSON.parse(stdout.slice(0, nl)) as Json };
}

async function prepare(key: string, filename = 'leads.csv', extra: Json = {}): Promise<Json> {
  const r = await stack.call('POST', '/v1/csv/prepare-upload', { key, body: { filename, ...extra } });
  if (r.status !== 200) throw new Error(`prepare-upload: ${r.status} ${r.text}`);
  return r.body;
}

const RESULT_COLUMNS = ['result', 'reason_code', 'reason', 'b2b_outbound_quality', 'is_role_based', 'role_type', 'is_free_provider', 'is_disposable', 'is_catchall', 'catchall_confidence', 'did_you_mean', 'credits_charged', 'charge_reason', 'validation_layer', 'smtp_response'];

// The input file: a UTF-8 BOM, `;` delimited, CRLF line ends; a header with a quoted name
// holding the delimiter; notes with embedded CRLF and LF, quotes and `;`; a formula-looking
// cell; the known and unknown mailbox of a set of sim domains; a role address; bad syntax; an
// empty email cell; a repeated row, a repeated mailbox in another spelling; a blank line.
const BEHAVIOURS = ['accept', 'catchall', 'greylist', 'greylist-forever', 'policy-block', 'mailbox-full', 'nxdomain', 'null-mx', 'idn', 'free-provider', 'disposable', 'recipient-limit-452'];
const domains = SIM_DOMAINS.filter((d) => BEHAVIOURS.includes(d.behaviour));
const HEADER = ['First name', 'E-mail', 'Company; Ltd', 'Notes', 'Score'];
const rows: string[][] = [];
const expected: string[] = []; // result/reason_code per row
for (const [i, d] of domains.entries()) {
  const domain = d.unicode ?? d.domain;
  rows.push([`Jane ${i}`, `jane.doe@${domain}`, `Acme; ${d.behaviour}`, i % 2 ? 'one line' : 'two\r\nlines, "quoted"', String(i)]);
  expected.push(`${d.known.result}/${d.known.reason_code}`);
  rows.push([`Nobody ${i}`, `${SIM_UNKNOWN_LOCAL}@${domain}`, '', i % 3 ? '' : 'lf\nonly', '=1+1']);
  expected.push(`${d.unknown.result}/${d.unknown.reason_code}`);
}
rows.push(['Role', 'info@accept.test', 'Acme', '', '-3']);
expected.push('valid_role_based/role_account');
rows.push(['Broken', 'not-an-email', 'x', '', '']);
expected.push('invalid/invalid_syntax');
rows.push(['Empty', '', 'no email here', 'kept as a row', '']);
expected.push('invalid/invalid_syntax');
rows.push([...rows[0]!]); // a repeated row
expected.push(expected[0]!);
rows.push(['Jane again', ' jane.doe@ACCEPT.test ', 'Acme', 'same mailbox, other spelling', '']);
expected.push(expected[0]!);
if (!domains[0]!.domain.startsWith('accept')) throw new Error('the first domain must be accept.test');
const UNIQUE = domains.length * 2 + 3; // every domain's two mailboxes, info@, not-an-email, the empty cell

const cell = (s: string): string => (/[;"\r\n]/.test(s) || s === '' ? `"${s.replaceAll('"', '""')}"` : s);
const line = (r: string[]): string => r.map(cell).join(';');
const CSV = `\uFEFF${line(HEADER)}\r\n${rows.slice(0, 6).map(line).join('\r\n')}\r\n\r\n${rows.slice(6).map(line).join('\r\n')}\r\n`;

t.test('a CSV job: prepare, curl -T, start, poll, download; input columns round-trip with exact verdicts, counters and credits', async (t) => {
  const credits = 1000;
  const { key, accountId } = await makeKey(stack, { credits });

  const prepared = await stack.call('POST', '/v1/csv/prepare-upload', { key, body: { filename: 'Leads März.csv' } });
  t.equal(prepared.status, 200, prepared.text);
  const up = prepared.body;
  t.strictSame(Object.keys(up), ['batch_id', 'upload_url', 'method', 'headers', 'expires_at', 'max_bytes']);
  t.match(up.batch_id, /^job_[0-9a-f]{24}$/);
  t.strictSame([up.method, up.headers, up.max_bytes], ['PUT', { 'Content-Type': 'text/csv' }, MAX_BYTES]);
  t.ok(up.upload_url.startsWith(`${publicUrl}/v1/csv/uploads/${up.batch_id}?expires=`), up.upload_url);
  const ttl = Date.parse(up.expires_at) - Date.now();
  t.ok(ttl > 3_590_000 && ttl <= 3_600_000, `valid for an hour (${ttl} ms)`);
  const awaiting = await stack.call('GET', `/v1/csv/jobs/${up.batch_id}`, { key });
  t.match(awaiting.body, { id: up.batch_id, status: 'awaiting_upload', source: 'csv', filename: 'Leads März.csv', progress: { processed: 0, total: 0, percent: 0 }, download: { available: false } });
  t.equal(awaiting.body.results.credits_reserved, 0, 'nothing reserved before the start');

  // curl -T sends PUT with no Content-Type: accepted. Then again with one, replacing it.
  const file = path.join(tmp, 'leads.csv');
  writeFileSync(file, CSV);
  const size = Buffer.byteLength(CSV);
  t.ok(size < MAX_BYTES, `the file (${size} bytes) is under the limit`);
  const first = 'E-mail\r\nsomeone@accept.test\r\n';
  writeFileSync(path.join(tmp, 'first.csv'), first);
  t.strictSame(await curlT(path.join(tmp, 'first.csv'), up.upload_url), { status: 200, body: { batch_id: up.batch_id, bytes: Buffer.byteLength(first) } }, 'curl -T, no Content-Type');
  t.strictSame(await curlT(file, up.upload_url, '-H', 'Content-Type: text/csv'), { status: 200, body: { batch_id: up.batch_id, bytes: size } }, 'curl -T with the headers of prepare-upload: replaces the first upload');

  const started = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: up.batch_id, email_column: 'e-mail' }, headers: { 'idempotency-key': 'start-leads' } });
  t.equal(started.status, 202, started.text);
  t.strictSame(Object.keys(started.body).sort(), ['completed_at', 'created_at', 'credit_reservation', 'download', 'filename', 'id', 'progress', 'results', 'source', 'started_at', 'status', 'webhook_url'], 'the job status resource');
  t.match(started.body, { id: up.batch_id, status: 'queued', source: 'csv', filename: 'Leads März.csv', results: { total_rows: rows.length, unique_emails: UNIQUE, credits_reserved: UNIQUE } });
  const replay = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: up.batch_id, email_column: 'e-mail' }, headers: { 'idempotency-key': 'start-leads' } });
  t.strictSame([replay.status, replay.headers.get('idempotent-replayed'), replay.text], [202, 'true', started.text], 'the same Idempotency-Key replays the 202');
  const twice = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: up.batch_id, email_column: 'e-mail' } });
  t.strictSame([twice.status, twice.body.code], [409, 'invalid_job_state'], 'start twice');
  const late = await curlT(file, up.upload_url);
  t.strictSame([late.status, late.body.code], [409, 'invalid_job_state'], 'an upload after the start');
  const held = await stack.call('GET', '/v1/credits', { key });
  t.strictSame([held.body.balance, held.body.reserved], [credits, UNIQUE], 'one credit per unique email held');

  const job = await poll(key, up.batch_id);
  t.equal(job.status, 'completed');
  t.strictSame(job.progress, { processed: UNIQUE, total: UNIQUE, percent: 100 });

  const link = await stack.call('GET', `/v1/csv/jobs/${job.id}/download?mode=url`, { key });
  t.equal(link.status, 200);
  const res = await fetch(local(link.body.url));
  t.equal(res.status, 200);
  const text = Buffer.from(await res.arrayBuffer()).toString('utf8'); // (res.text() would drop the BOM)
  t.ok(text.startsWith('\uFEFF') && text.endsWith('\r\n'), 'a BOM like the upload, CRLF lines');
  const out = parse(text, { bom: true, relax_column_count: false }) as string[][];
  t.strictSame(out[0], [...HEADER, ...RESULT_COLUMNS], 'the input columns, then the result columns');
  const data = out.slice(1);
  t.equal(data.length, rows.length, 'one row per input row (the blank line is not a row)');
  t.strictSame(data.map((r) => r.slice(0, HEADER.length)), rows.map((r) => r.map(shownCell)), 'every input cell as uploaded, in input order (formula cells escaped)');
  const col = (name: string) => HEADER.length + RESULT_COLUMNS.indexOf(name);
  for (const [i, r] of data.entries()) t.equal(`${r[col('result')]}/${r[col('reason_code')]}`, expected[i], `row ${i + 1}: ${rows[i]![1]}`);
  const n = rows.length;
  t.strictSame(data.slice(n - 2).map((r) => [r[col('credits_charged')], r[col('charge_reason')]]), [['0', 'duplicate_in_job'], ['0', 'duplicate_in_job']], 'repeats cost nothing');

  // The 2.2 counters are the CSV counted over unique emails (first occurrences).
  const firsts = data.slice(0, n - 2);
  t.equal(firsts.length, UNIQUE);
  const counters = countersFrom(firsts.map((r) => resultCells(r, HEADER.length)), n);
  t.strictSame(job.results, counters);
  const charged = counters.credits_charged!;
  const validRows = expected.slice(0, n - 2).filter((e) => e === 'valid/accepted').length;
  t.equal(charged, validRows, 'exactly the valid results are charged');
  t.ok(charged >= 4 && job.results.unknown >= 1 && job.results.risky >= 1 && job.results.invalid >= 1, 'a mix of results');
  t.equal(job.results.credits_reserved, job.results.credits_charged + job.results.credits_refunded, 'reserved = charged + refunded');
  t.strictSame(job.credit_reservation, { reserved: true, reserved_credits: UNIQUE, credits_charged: charged, credits_consumed: charged, refunded_credits: UNIQUE - charged, credits_per_high_value_validation: 1, finalized: true });
  t.strictSame(await stack.store.ledger.totals(accountId), { balance: credits - charged, reserved: 0 }, 'the ledger paid exactly the charge');

  const listed = await stack.call('GET', '/v1/csv/jobs?status=completed', { key });
  t.strictSame(listed.body.jobs, [job], 'listed with the other jobs');
});

t.test('a CSV of one column, comma-delimited, LF, uploaded with fetch as application/octet-stream', async (t) => {
  const { key } = await makeKey(stack, { credits: 10 });
  const up = await prepare(key, 'plain.csv', { webhook_url: 'https://hooks.example.com/csv' });
  const plain = 'email\njane.doe@accept.test\nno.such.user@accept.test\n';
  t.strictSame(await put(up.upload_url, plain, { 'content-type': 'application/octet-stream' }).then((r) => [r.status, r.body]), [200, { batch_id: up.batch_id, bytes: plain.length }]);
  const started = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: up.batch_id, email_column: 'email' } });
  t.equal(started.status, 202);
  t.equal(started.body.webhook_url, 'https://hooks.example.com/csv', 'the webhook_url of prepare-upload');
  const job = await poll(key, up.batch_id);
  const link = await stack.call('GET', `/v1/csv/jobs/${job.id}/download?mode=url`, { key });
  const text = await (await fetch(local(link.body.url))).text();
  t.equal(text.split('\r\n').map((l) => l.split(',').slice(0, 3).join(',')).join('|'), `email,result,reason_code|jane.doe@accept.test,valid,accepted|no.such.user@accept.test,invalid,mailbox_not_found|`, 'no BOM, one input column');
});

t.test('bad input: exact statuses and codes', async (t) => {
  const { key } = await makeKey(stack, { credits: 3 });
  const other = await makeKey(stack, { credits: 100 });
  const readOnly = await makeKey(stack, { credits: 100, scopes: ['credits:read'] });
  const secret = stack.svc.services.secret;

  const up = await prepare(key);
  const id = up.batch_id as string;
  const otherUp = await prepare(other.key);
  const url = new URL(up.upload_url);
  const sig = url.searchParams.get('signature')!;
  const withQuery = (q: string) => `${publicUrl}/v1/csv/uploads/${id}?${q}`;
  const body = 'email\njane.doe@accept.test\n';
  const upload = async (u: string, b: string | Uint8Array = body, headers: Record<string, string> = {}) => {
    const r = await put(u, b, headers);
    return [r.status, r.body.code] as const;
  };
  const start = async (batch: string, column: string, k = key) => {
    const r = await stack.call('POST', '/v1/csv/start-processing', { key: k, body: { batch_id: batch, email_column: column } });
    return [r.status, r.body.code] as const;
  };

  // The upload URL.
  t.strictSame(await upload(withQuery(`expires=${url.searchParams.get('expires')}&signature=${sig.slice(0, -1)}${sig.endsWith('0') ? '1' : '0'}`)), [403, 'invalid_signature'], 'a tampered signature');
  t.strictSame(await upload(withQuery(`expires=${Number(url.searchParams.get('expires')) + 60}&signature=${sig}`)), [403, 'invalid_signature'], 'a tampered expiry');
  t.strictSame(await upload(otherUp.upload_url.replace(otherUp.batch_id, id)), [403, 'invalid_signature'], "another batch's signature");
  t.strictSame(await upload(withQuery('')), [403, 'invalid_signature'], 'no signature');
  t.strictSame(await upload(`${up.upload_url}&signature=${sig}`), [403, 'invalid_signature'], 'a repeated parameter');
  const expired = `${publicUrl}/v1/csv/uploads/${id}?${signQuery(secret, 'PUT', `/v1/csv/uploads/${id}`, {}, new Date(Date.now() - 1000))}`;
  const exp = await put(expired, body);
  t.strictSame([exp.status, exp.body.code, exp.body.message], [403, 'invalid_signature', 'The upload URL has expired; prepare a new upload with POST /v1/csv/prepare-upload'], 'an expired signature');
  t.ok(exp.headers.get('x-request-id'), 'the upload answers with a request id');

  // Over the limit: with a Content-Length, and streamed without one (chunked, by curl from a pipe).
  const big = Buffer.alloc(MAX_BYTES + 1, 'a');
  const tooBig = await put(up.upload_url, big);
  t.strictSame([tooBig.status, tooBig.body.code], [413, 'payload_too_large'], 'a body over max_bytes');
  const { stdout } = await run('bash', ['-c', `head -c ${MAX_BYTES * 4} /dev/zero | tr '\\0' a | curl -s -T - "${local(up.upload_url)}"`]);
  t.equal(JSON.parse(stdout).code, 'payload_too_large', 'streamed (chunked) over max_bytes');
  t.strictSame(await start(id, 'email'), [409, 'upload_missing'], 'nothing was stored: start before (a successful) upload');

  // Starting.
  t.strictSame(await start('job_000000000000000000000000', 'email'), [404, 'job_not_found'], 'an unknown batch');
  t.strictSame(await start(otherUp.batch_id, 'email'), [404, 'job_not_found'], "another account's batch");
  t.strictSame(await upload(up.upload_url, 'name,mail\nJane,jane.doe@accept.test\n'), [200, undefined]);
  const col = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: id, email_column: 'email' } });
  t.strictSame([col.status, col.body.code, col.body.message], [400, 'email_column_not_found', 'email_column "email" is not a column of the CSV header (columns: "name", "mail")'], 'an unknown column');
  t.strictSame(await upload(up.upload_url, 'email,name\njane.doe@accept.test,"Jane\nx@accept.test,Joe\n'), [200, undefined]);
  const broken = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: id, email_column: 'email' } });
  t.strictSame([broken.status, broken.body.code, broken.body.message], [400, 'invalid_csv', 'line 2: a quoted field is never closed (a field that starts with " must end with "; a " inside it is written "")'], 'broken quoting');
  t.strictSame(await upload(up.upload_url, Buffer.from([0xff, 0xfe, 0x65, 0x00])), [200, undefined]);
  t.strictSame(await start(id, 'email'), [400, 'invalid_csv'], 'UTF-16');
  t.strictSame(await upload(up.upload_url, 'email\na@accept.test\nb@accept.test\nc@accept.test\nd@accept.test\n'), [200, undefined]);
  const poor = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: id, email_column: 'email' } });
  t.strictSame([poor.status, poor.body.code, poor.body.required, poor.body.available], [402, 'insufficient_credits', 4, 3], 'too few credits');
  t.equal((await stack.call('GET', `/v1/csv/jobs/${id}`, { key })).body.status, 'awaiting_upload', 'each refusal leaves the batch awaiting its upload');

  // Request shapes and gates.
  const cases: Array<[string, string, unknown, string | null, number, string]> = [
    ['prepare: no filename', '/v1/csv/prepare-upload', {}, key, 400, 'invalid_request'],
    ['prepare: empty filename', '/v1/csv/prepare-upload', { filename: '' }, key, 400, 'invalid_request'],
    ['prepare: blank filename', '/v1/csv/prepare-upload', { filename: '   ' }, key, 400, 'invalid_request'],
    ['prepare: filename of 256 characters', '/v1/csv/prepare-upload', { filename: 'x'.repeat(256) }, key, 400, 'invalid_request'],
    ['prepare: filename not a string', '/v1/csv/prepare-upload', { filename: 7 }, key, 400, 'invalid_request'],
    ['prepare: bad webhook_url', '/v1/csv/prepare-upload', { filename: 'a.csv', webhook_url: 'ftp://x.example.com/' }, key, 400, 'invalid_webhook_url'],
    ['prepare: no key', '/v1/csv/prepare-upload', { filename: 'a.csv' }, null, 401, 'api_key_required'],
    ['prepare: wrong scope', '/v1/csv/prepare-upload', { filename: 'a.csv' }, readOnly.key, 403, 'insufficient_scope'],
    ['start: no batch_id', '/v1/csv/start-processing', { email_column: 'email' }, key, 400, 'invalid_request'],
    ['start: no email_column', '/v1/csv/start-processing', { batch_id: id }, key, 400, 'invalid_request'],
    ['start: empty email_column', '/v1/csv/start-processing', { batch_id: id, email_column: '' }, key, 400, 'invalid_request'],
    ['start: wrong scope', '/v1/csv/start-processing', { batch_id: id, email_column: 'email' }, readOnly.key, 403, 'insufficient_scope'],
  ];
  for (const [name, route, b, k, status, code] of cases) {
    const r = await stack.call('POST', route, { key: k, body: b });
    t.strictSame([r.status, r.body?.code], [status, code], name);
  }
  const text = await stack.call('POST', '/v1/csv/prepare-upload', { key, raw: 'filename=a.csv', headers: { 'content-type': 'text/csv' } });
  t.strictSame([text.status, text.body.code], [415, 'unsupported_media_type'], 'prepare-upload takes JSON only');

  // Fixed, it starts once.
  t.strictSame(await upload(up.upload_url, 'email\na@accept.test\nb@accept.test\na@accept.test\n'), [200, undefined]);
  const ok = await stack.call('POST', '/v1/csv/start-processing', { key, body: { batch_id: id, email_column: 'email' } });
  t.strictSame([ok.status, ok.body.results.total_rows, ok.body.results.unique_emails], [202, 3, 2]);
  t.strictSame(await start(id, 'email'), [409, 'invalid_job_state'], 'start twice');
  t.strictSame(await upload(up.upload_url), [409, 'invalid_job_state'], 'upload after the start');
  await poll(key, id);
});
