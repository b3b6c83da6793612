// CSV jobs over the real adapters (PGlite, a blob directory, the in-process bus) and a scripted
// verifier: prepare-upload, the signed upload (tampered, expired, too large, replaced, too
// late), start-processing (its refusals, in order, each leaving the batch startable again), and a
// CSV with a BOM, `;`, CRLF, quoted fields with embedded newlines, duplicates, an empty email
// cell and extra columns whose results CSV is its input columns, then the results, row for row.

import t from 'tap';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { ServiceError } from '@svc/contracts';
import { DirBlobStore, Store, type JobRecord } from '@svc/store';
import type { Verdict } from '@svc/verifier';
import { InProcessBus } from '@svc/bus';
import { createCsvPool, JobsService, RESULT_COLUMNS, signQuery, type JobVerifier } from '../src/index.ts';
import { CsvJobs, uploadKey, uploadPath, type CsvJobsOptions } from '../src/csv/csv-jobs.ts';
import { migratedPglite } from '../../../test/helpers/pglite.ts';
import { until } from '../../../test/helpers/until.ts';

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

const SECRET = 'a-test-secret-of-32-characters!!';
const PUBLIC = 'http://svc.test';

/** v.test accepts every mailbox (info@ is a role), x.test knows none; anything without `local@domain.tld` is bad syntax. */
function verdictOf(email: string): Verdict {
  const base = { email, reason: '', syntax_valid: true, dns_valid: true, smtp_valid: true, is_role_based: false, is_free_provider: false, is_disposable: false, is_catchall: false, flags: [] };
  const at = email.lastIndexOf('@');
  const domain = email.slice(at + 1).toLowerCase();
  if (at <= 0 || !domain.includes('.')) {
    return { ...base, result: 'invalid', reason: 'Invalid syntax', reason_code: 'invalid_syntax', syntax_valid: false, dns_valid: false, smtp_valid: false, b2b_outbound_quality: 'none', b2b_quality: 'none', validation_layer: 'syntax', chargeable: false };
  }
  if (domain === 'x.test') return { ...base, result: 'invalid', reason: 'No such user', reason_code: 'mailbox_not_found', smtp_valid: false, b2b_outbound_quality: 'none', b2b_quality: 'none', validation_layer: 'smtp', smtp_response: '550 5.1.1 no', chargeable: false };
  if (email.startsWith('info@')) return { ...base, result: 'valid_role_based', reason: 'Role account', reason_code: 'role_account', is_role_based: true, role_type: 'information', b2b_outbound_quality: 'low', b2b_quality: 'low', validation_layer: 'smtp', chargeable: false };
  return { ...base, result: 'valid', reason_code: 'accepted', b2b_outbound_quality: 'high', b2b_quality: 'high', validation_layer: 'smtp', smtp_response: '250 2.1.5 OK', chargeable: true };
}

const probed: string[] = [];
const verifier: JobVerifier = {
  async verify(emails) {
    probed.push(...emails);
    return emails.map(verdictOf);
  },
};

const dirs: string[] = [];
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const db = await migratedPglite();
t.teardown(() => db.close());
const store = new Store(db);
const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-csv-jobs-'));
dirs.push(dir);
const blobs = new DirBlobStore(path.join(dir, 'blobs'));

interface World {
  svc: JobsService;
  csv: CsvJobs;
  clock: { now: number };
}

async function world(t: Tap, opts: Partial<CsvJobsOptions> = {}): Promise<World> {
  const clock = { now: Date.now() };
  const bus = new InProcessBus({ retryDelayMs: 20 });
  const svc = new JobsService({ store, blobs, bus, verifier, publicUrl: PUBLIC, secret: SECRET, ownsAllWork: false });
  await svc.start();
  t.teardown(async () => {
    await svc.stop();
    await bus.close();
  });
  const csv = new CsvJobs({ jobs: svc, store, blobs, publicUrl: PUBLIC, secret: SECRET, maxBytes: 4096, now: () => clock.now, ...opts });
  return { svc, csv, clock };
}

/** The job once `pred` holds, polled in the store (a running job's counters have no event of their own); fails after `ms`. */
async function waitFor(id: string, pred: (j: JobRecord) => boolean, ms = 8000): Promise<JobRecord> {
  let j: JobRecord | undefined;
  await until(async () => !!(j = await store.jobs.byId(id)) && pred(j), ms, `job ${id}`).catch((err: Error) => {
    throw new Error(`${err.message}: ${JSON.stringify(j && { status: j.status, processed: j.processed, unique: j.unique_emails })}`);
  });
  return j!;
}

async function text(body: AsyncIterable<unknown>): Promise<string> {
  let s = '';
  for await (const c of body) s += typeof c === 'string' ? c : Buffer.from(c as Buffer).toString('utf8');
  return s;
}

/** The query of a signed URL, as a route hands it over. */
const queryOf = (url: string): Record<string, string> => Object.fromEntries(new URL(url).searchParams);

async function prepared(w: World, accountId: string, filename = 'leads.csv') {
  const { job, upload } = await w.csv.prepare(accountId, { filename });
  return { job, upload, q: queryOf(upload.upload_url) };
}

// The input: a UTF-8 BOM, `;` delimited, CRLF; quoted fields holding `;`, `"` and line breaks;
// an extra column; a repeated mailbox (other domain case); a repeated row; an empty email cell;
// a role address, an unknown user, a formula-looking cell.
const ROWS: string[][] = [
  ['Name', 'Email', 'Company; Inc', 'Notes'],
  ['Jane Doe', 'jane@v.test', 'Acme; Corp', 'line one\r\nline two'],
  ['"Quoted" Joe', 'joe@x.test', 'Beta', ''],
  ['Info', 'info@v.test', '', '=SUM(A1)'],
  ['No Email', '', 'Gamma', 'the cell is empty'],
  ['Jane Again', 'JANE@V.TEST', 'Acme', 'a different mailbox: local parts are exact'],
  ['Jane Doe', 'jane@V.Test', 'Acme; Corp', 'the domain case does not matter'],
  ['Spaces', '  bob@v.test  ', 'x', 'trimmed for validation, kept in the cell'],
  ['Also Empty', '   ', '', ''],
];
const quote = (cell: string) => (/[;"\r\n]/.test(cell) || cell === '' ? `"${cell.replaceAll('"', '""')}"` : cell);
const SOURCE = `\uFEFF${ROWS.map((r) => r.map(quote).join(';')).join('\r\n')}\r\n`;

t.test('prepare-upload: a batch awaiting its upload and a signed PUT URL', async (t) => {
  const w = await world(t);
  const acc = await store.accounts.create({ credits: 10 });
  const { job, upload, q } = await prepared(w, acc, 'März leads.csv');
  t.match(upload.batch_id, /^job_[0-9a-f]{24}$/);
  t.strictSame(Object.keys(upload), ['batch_id', 'upload_url', 'method', 'headers', 'expires_at', 'max_bytes']);
  t.strictSame([upload.method, upload.headers, upload.max_bytes], ['PUT', { 'Content-Type': 'text/csv' }, 4096]);
  t.ok(upload.upload_url.startsWith(`${PUBLIC}${uploadPath(job.id)}?`), upload.upload_url);
  t.strictSame(Object.keys(q).sort(), ['expires', 'signature']);
  t.equal(upload.expires_at, new Date(Math.floor((w.clock.now + 3_600_000) / 1000) * 1000).toISOString(), 'valid for an hour');
  t.strictSame([job.status, job.source, job.filename, job.credits_reserved, job.reservation_id, job.webhook_url], ['awaiting_upload', 'csv', 'März leads.csv', 0, null, null]);
  t.strictSame(await store.ledger.totals(acc), { balance: 10, reserved: 0 }, 'nothing held yet');
  const status = w.svc.status(job);
  t.strictSame([status.status, status.progress, status.download.available], ['awaiting_upload', { processed: 0, total: 0, percent: 0 }, false]);

  for (const bad of ['', '   ', 'x'.repeat(256)]) {
    await t.rejects(w.csv.prepare(acc, { filename: bad }), { code: 'invalid_request', message: 'filename is required: a string of 1 to 255 characters' }, JSON.stringify(bad).slice(0, 20));
  }
  t.equal((await w.csv.prepare(acc, { filename: 'y'.repeat(255) })).job.filename, 'y'.repeat(255));
  await t.rejects(w.csv.prepare(acc, { filename: 'a.csv', webhookUrl: 'ftp://hooks.example.com/' }), { code: 'invalid_webhook_url' });
  const hooked = await w.csv.prepare(acc, { filename: 'a.csv', webhookUrl: 'https://hooks.example.com/csv' });
  t.equal(hooked.job.webhook_url, 'https://hooks.example.com/csv');
});

t.test('the signed upload: stored, replaced, and every refusal', async (t) => {
  const w = await world(t);
  const acc = await store.accounts.create({ credits: 10 });
  const { job, q } = await prepared(w, acc);
  const stored = async () => {
    const s = await blobs.get(uploadKey(job.id));
    return s ? text(s) : undefined;
  };

  t.strictSame(await w.csv.upload(job.id, q, Readable.from([Buffer.from('email\r\n'), Buffer.from('a@v.test\r\n')])), { batch_id: job.id, bytes: 17 });
  t.equal(await stored(), 'email\r\na@v.test\r\n');
  t.strictSame(await w.csv.upload(job.id, q, Readable.from([Buffer.from('email\nb@v.test\n')])), { batch_id: job.id, bytes: 15 }, 'a second upload');
  t.equal(await stored(), 'email\nb@v.test\n', 'replaces the first');

  const flip = (s: string) => s.replace(/^./, (c) => (c === 'a' ? 'b' : 'a'));
  const body = () => Readable.from([Buffer.from('email\nc@v.test\n')]);
  await t.rejects(w.csv.upload(job.id, { ...q, signature: flip(q.signature!) }, body()), { code: 'invalid_signature', message: 'The signed URL is invalid or has expired' }, 'a changed signature');
  await t.rejects(w.csv.upload(job.id, { ...q, expires: String(Number(q.expires) + 3600) }, body()), { code: 'invalid_signature' }, 'a later expiry');
  await t.rejects(w.csv.upload(job.id, { ...q, extra: '1' }, body()), { code: 'invalid_signature' }, 'an added parameter');
  await t.rejects(w.csv.upload(job.id, { expires: q.expires }, body()), { code: 'invalid_signature' }, 'no signature');
  await t.rejects(w.csv.upload(job.id, { ...q, signature: [q.signature, q.signature] }, body()), { code: 'invalid_signature' }, 'a repeated parameter');
  const other = await prepared(w, acc);
  await t.rejects(w.csv.upload(other.job.id, q, body()), { code: 'invalid_signature' }, "another batch's URL");
  const get = signQuery(SECRET, 'GET', uploadPath(job.id), {}, new Date(w.clock.now + 60_000));
  await t.rejects(w.csv.upload(job.id, queryOf(`${PUBLIC}/?${get}`), body()), { code: 'invalid_signature' }, 'signed for another method');
  const wrongKey = signQuery('another-secret-of-32-characters!', 'PUT', uploadPath(job.id), {}, new Date(w.clock.now + 60_000));
  await t.rejects(w.csv.upload(job.id, queryOf(`${PUBLIC}/?${wrongKey}`), body()), { code: 'invalid_signature' }, 'signed with another secret');
  const unknown = signQuery(SECRET, 'PUT', uploadPath('job_000000000000000000000000'), {}, new Date(w.clock.now + 60_000));
  await t.rejects(w.csv.upload('job_000000000000000000000000', queryOf(`${PUBLIC}/?${unknown}`), body()), { code: 'job_not_found' }, 'a well-signed URL of no job');
  t.equal(await stored(), 'email\nb@v.test\n', 'no refused upload touched the stored one');

  // Over the limit, announced or counted: nothing stored, the earlier upload kept.
  await t.rejects(w.csv.upload(job.id, q, Readable.from([]), 4097), { code: 'payload_too_large', message: 'The CSV is larger than the upload limit of 4096 bytes (max_bytes); split it into several batches' });
  const big = Readable.from((function* () {
    for (let i = 0; i < 100; i++) yield Buffer.from(`user${String(i).padStart(4, '0')}@v.test.........................\n`);
  })());
  await t.rejects(w.csv.upload(job.id, q, big), { code: 'payload_too_large' }, 'streamed past the limit');
  t.equal(await stored(), 'email\nb@v.test\n');
  t.strictSame(await w.csv.upload(job.id, q, Readable.from([Buffer.alloc(4096, 0x61)])), { batch_id: job.id, bytes: 4096 }, 'exactly max_bytes is accepted');
  t.strictSame(readdirSync(path.join(blobs.root, 'jobs', job.id)), ['upload.csv'], 'no partial file left behind');

  // Expired: a valid signature whose time has passed.
  w.clock.now += 3_601_000;
  await t.rejects(w.csv.upload(job.id, q, body()), { code: 'invalid_signature', message: 'The upload URL has expired; prepare a new upload with POST /v1/csv/prepare-upload' });
  const past = w.csv.uploadLink(job.id, new Date(w.clock.now - 1000));
  await t.rejects(w.csv.upload(job.id, queryOf(past.upload_url), body()), { code: 'invalid_signature' }, 'a URL made with a past expiry');
});

t.test('start-processing: refusals in order, each leaving the batch startable', async (t) => {
  const w = await world(t);
  const acc = await store.accounts.create({ credits: 2 });
  const other = await store.accounts.create({ credits: 100 });
  const { job, q } = await prepared(w, acc);

  await t.rejects(w.csv.start(acc, 'job_000000000000000000000000', 'email'), { code: 'job_not_found' }, 'unknown batch');
  await t.rejects(w.csv.start(other, job.id, 'email'), { code: 'job_not_found' }, "another account's batch");
  await t.rejects(w.csv.start(acc, job.id, 'email'), { code: 'upload_missing', message: `No CSV has been uploaded for ${job.id}: PUT the file to the upload_url of prepare-upload first` });

  const put = (s: string) => w.csv.upload(job.id, q, Readable.from([Buffer.from(s)]));
  await put('name,e-mail\nJane,a@v.test\n');
  await t.rejects(w.csv.start(acc, job.id, 'email'), { code: 'email_column_not_found', message: 'email_column "email" is not a column of the CSV header (columns: "name", "e-mail")' });
  await put('email,name\na@v.test,"Jane\nb@v.test,Joe\n');
  const broken = await w.csv.start(acc, job.id, 'email').catch((e: unknown) => e);
  t.ok(broken instanceof ServiceError);
  t.strictSame((broken as ServiceError).body(), {
    error: 'Bad Request',
    message: 'line 2: a quoted field is never closed (a field that starts with " must end with "; a " inside it is written "")',
    code: 'invalid_csv',
  }, 'broken quoting names its line');
  await put('email\n');
  await t.rejects(w.csv.start(acc, job.id, 'email'), { code: 'invalid_csv', message: 'the CSV has a header row but no data rows' });
  await put('');
  await t.rejects(w.csv.start(acc, job.id, 'email'), { code: 'invalid_csv', message: 'the file is empty: a header row naming the columns is required' });
  await put('email\na@v.test\nb@v.test\nc@v.test\na@v.test\n');
  const short = await w.csv.start(acc, job.id, 'Email').catch((e: unknown) => e);
  t.strictSame((short as ServiceError).body(), { error: 'Payment Required', message: 'This job needs 3 credits (one per unique email); 2 available', code: 'insufficient_credits', required: 3, available: 2 }, 'column names match without case');

  // A late problem (past the first chunks) also refuses the whole file.
  const lateJob = await prepared(w, other);
  const rows = Array.from({ length: 50 }, (_, i) => `u${i}@v.test,x`).join('\n');
  await w.csv.upload(lateJob.job.id, lateJob.q, Readable.from([Buffer.from(`email,n\n${rows}\nz@v.test,"bad"x\n`)]));
  const small = new CsvJobs({ jobs: w.svc, store, blobs, publicUrl: PUBLIC, secret: SECRET, maxBytes: 4096, chunkRows: 7 });
  await t.rejects(small.start(other, lateJob.job.id, 'email'), { code: 'invalid_csv', message: /^line 52: / }, 'an error in the 8th chunk');
  const tooMany = new CsvJobs({ jobs: w.svc, store, blobs, publicUrl: PUBLIC, secret: SECRET, maxBytes: 4096, chunkRows: 7, maxRows: 20 });
  await t.rejects(tooMany.start(other, lateJob.job.id, 'email'), { code: 'too_many_emails', message: 'the CSV has more than 20 data rows' });

  for (const id of [job.id, lateJob.job.id]) {
    const j = await store.jobs.byId(id);
    t.strictSame([j?.status, j?.credits_reserved, j?.input_key], ['awaiting_upload', 0, null], `${id}: still awaiting its upload`);
    t.strictSame(readdirSync(path.join(blobs.root, 'jobs', id)), ['upload.csv'], 'the upload kept, no rows stored');
  }
  t.strictSame(await store.ledger.totals(acc), { balance: 2, reserved: 0 });
  t.strictSame(await store.ledger.totals(other), { balance: 100, reserved: 0 });

  // Fixed (a smaller file to the same URL): it starts.
  await put('email\na@v.test\nb@v.test\na@v.test\n');
  const started = await w.csv.start(acc, job.id, 'email');
  t.strictSame([started.status, started.total_rows, started.unique_emails, started.credits_reserved, started.email_column], ['queued', 3, 2, 2, 'email']);
  t.equal(await blobs.exists(uploadKey(job.id)), false, 'the raw upload is deleted once the rows are stored');
  await t.rejects(w.csv.start(acc, job.id, 'email'), { code: 'invalid_job_state', message: /^The batch is (queued|processing); start-processing runs once per batch$/ }, 'start twice');
  await t.rejects(w.csv.upload(job.id, q, Readable.from([Buffer.from('email\nc@v.test\n')])), { code: 'invalid_job_state' }, 'an upload after the start');
  const done = await waitFor(job.id, (j) => j.status === 'completed');
  await t.rejects(w.csv.start(acc, job.id, 'email'), { code: 'invalid_job_state', message: 'The batch is completed; start-processing runs once per batch' });
  t.strictSame([done.credits_charged, done.credits_refunded], [2, 0]);
});

t.test('two starts at once: one queues the job, the other is 409, the input is intact', async (t) => {
  const w = await world(t, { maxBytes: 1_048_576 });
  const acc = await store.accounts.create({ credits: 5000 });
  const { job, q } = await prepared(w, acc);
  const rows = Array.from({ length: 3000 }, (_, i) => `u${i}@v.test`).join('\n');
  await w.csv.upload(job.id, q, Readable.from([Buffer.from(`email\n${rows}\n`)]));
  const [a, b] = await Promise.allSettled([w.csv.start(acc, job.id, 'email'), w.csv.start(acc, job.id, 'email')]);
  t.equal(a.status, 'fulfilled');
  t.match(b, { status: 'rejected', reason: { code: 'invalid_job_state', message: 'The batch is being started; start-processing runs once per batch' } });
  const done = await waitFor(job.id, (j) => j.status === 'completed');
  t.strictSame([done.total_rows, done.unique_emails, done.processed, done.credits_charged], [3000, 3000, 3000, 3000]);
});

t.test('two fronts (two CsvJobs sharing the store) start one batch at once, with different columns: one queues it, the other is 409 and touches nothing', async (t) => {
  const w = await world(t, { maxBytes: 1_048_576 });
  const otherFront = new CsvJobs({ jobs: w.svc, store, blobs, publicUrl: PUBLIC, secret: SECRET, maxBytes: 1_048_576 });
  const acc = await store.accounts.create({ credits: 5000 });
  const { job, q } = await prepared(w, acc);
  const rows = Array.from({ length: 3000 }, (_, i) => `u${i}@v.test,x${i}@w.test`).join('\n');
  await w.csv.upload(job.id, q, Readable.from([Buffer.from(`email,other\n${rows}\n`)]));
  const results = await Promise.allSettled([w.csv.start(acc, job.id, 'email'), otherFront.start(acc, job.id, 'other')]);
  const won = results.filter((r) => r.status === 'fulfilled');
  t.equal(won.length, 1, 'one start queues the job');
  t.match(results.find((r) => r.status === 'rejected'), { reason: { code: 'invalid_job_state', message: 'The batch is being started; start-processing runs once per batch' } });
  const column = (won[0] as PromiseFulfilledResult<JobRecord>).value.email_column!;
  const done = await waitFor(job.id, (j) => j.status === 'completed');
  t.strictSame([done.total_rows, done.unique_emails, done.processed, done.email_column], [3000, 3000, 3000, column]);
  const csv = await text((await blobs.get(done.results_key!))!);
  const lines = csv.trim().split('\r\n');
  t.equal(lines.length, 3001, 'every row in the results');
  const first = lines[1]!.split(',');
  t.strictSame(first.slice(0, 2), ['u0@v.test', 'x0@w.test'], 'the input columns as uploaded');
  t.equal(await store.jobs.claimIntake(acc, job.id, 60_000), false, 'queued: no claim left to take');
});

async function roundTrip(t: Tap, w: World) {
  const acc = await store.accounts.create({ credits: 20 });
  const { job, q } = await prepared(w, acc, 'leads.csv');
  // Uploaded in small pieces, cut anywhere (inside the BOM, quotes and CRLFs).
  const bytes = Buffer.from(SOURCE);
  const pieces: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 5) pieces.push(bytes.subarray(i, i + 5));
  t.strictSame(await w.csv.upload(job.id, q, Readable.from(pieces)), { batch_id: job.id, bytes: bytes.length });
  const started = await w.csv.start(acc, job.id, ' email ');
  t.strictSame([started.status, started.source, started.filename, started.email_column], ['queued', 'csv', 'leads.csv', 'Email']);
  // Unique: jane@v.test (3 rows, one JANE@V.TEST being another mailbox), joe, info, '' (2 empty cells), JANE, bob.
  t.strictSame([started.total_rows, started.unique_emails, started.credits_reserved], [8, 6, 6]);
  const done = await waitFor(job.id, (j) => j.status === 'completed');
  const st = w.svc.status(done);
  t.strictSame(st.results, {
    total_rows: 8,
    unique_emails: 6,
    valid: 3, // jane, JANE, bob
    valid_role_based: 1,
    invalid: 2, // joe@x.test, the empty cell
    risky: 0,
    unknown: 0,
    role_based: 1,
    high_value: 3,
    catch_all: 0,
    credits_reserved: 6,
    credits_charged: 3,
    credits_consumed: 3,
    credits_refunded: 3,
    credits_per_high_value_validation: 1,
  });
  t.equal(st.results.credits_reserved, st.results.credits_charged + st.results.credits_refunded);
  t.strictSame(await store.ledger.totals(acc), { balance: 17, reserved: 0 });

  const csv = await text((await blobs.get(done.results_key!))!);
  t.ok(csv.startsWith('\uFEFF'), 'a BOM, like the upload');
  t.ok(csv.endsWith('\r\n'));
  const out = parse(csv, { bom: true, relax_column_count: false }) as string[][];
  t.strictSame(out[0], [...ROWS[0]!, ...RESULT_COLUMNS], 'the input columns, then the result columns');
  t.equal(out.length, ROWS.length, 'one row per input row');
  const escaped = (s: string) => (/^[=+\-@\t\r]/.test(s) ? `'${s}` : s);
  t.strictSame(out.slice(1).map((r) => r.slice(0, 4)), ROWS.slice(1).map((r) => r.map(escaped)), 'every input cell as uploaded, in input order (formula cells escaped)');
  const col = (name: string) => ROWS[0]!.length + RESULT_COLUMNS.indexOf(name as (typeof RESULT_COLUMNS)[number]);
  t.strictSame(out.slice(1).map((r) => [r[col('result')], r[col('reason_code')], r[col('credits_charged')], r[col('charge_reason')]]), [
    ['valid', 'accepted', '1', 'high_value_validation'],
    ['invalid', 'mailbox_not_found', '0', 'invalid_not_charged'],
    ['valid_role_based', 'role_account', '0', 'role_based_not_charged'],
    ['invalid', 'invalid_syntax', '0', 'invalid_not_charged'],
    ['valid', 'accepted', '1', 'high_value_validation'],
    ['valid', 'accepted', '0', 'duplicate_in_job'],
    ['valid', 'accepted', '1', 'high_value_validation'],
    ['invalid', 'invalid_syntax', '0', 'duplicate_in_job'],
  ]);
  return { acc, job: done };
}

t.test('a CSV job round-trips its input columns: BOM, `;`, CRLF, quotes, newlines, duplicates, empty cells', async (t) => {
  const w = await world(t);
  probed.length = 0;
  await roundTrip(t, w);
  t.strictSame([...probed].sort(), ['', 'JANE@V.TEST', 'bob@v.test', 'info@v.test', 'jane@v.test', 'joe@x.test'], 'each unique email probed once, trimmed');
});

t.test('the same on the CSV pool, in chunks of 2 rows', async (t) => {
  const pool = createCsvPool({ threads: 1 });
  t.teardown(() => pool.close());
  const w = await world(t, { parser: pool, chunkRows: 2 });
  await roundTrip(t, w);
});
