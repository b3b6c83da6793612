// The jobs repository (JobsRepo, migration 005) on both adapters: PGlite always, Postgres when it
// answers (TEST_DATABASE_URL; CI_REQUIRE_SERVICES=1 makes an unreachable server a failure).
// Credits and counters are asserted exactly, and checked against the ledger's own totals. The
// credit rules are @svc/billing's (jobCredits, handed to the repo as the services do).

import t from 'tap';
import { jobCredits } from '@svc/billing';
import type { ValidationResultBody } from '@svc/contracts';
import type { Db } from '../src/db/db.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { migrate, Store, type Decision, type JobDecisions, type JobRecord, type JobResultInput, type NewJob } from '../src/index.ts';
import { freshPglite } from '../../../test/helpers/pglite.ts';
import { databaseClockPasses, until } from '../../../test/helpers/until.ts';
import { freshSchema, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';
import type { Tap } from './conformance.ts';

interface Target {
  db: Db;
  another?: () => Promise<Db>;
}

/** A priced result of the given kind (only the fields the counters read matter here). */
function verdict(email: string, result: ValidationResultBody['result'], o: { role?: boolean; catchall?: boolean } = {}): ValidationResultBody {
  const charged = result === 'valid' && !o.role && !o.catchall ? 1 : 0;
  return {
    email,
    result,
    reason: '',
    reason_code: result === 'valid' ? 'accepted' : result === 'invalid' ? 'mailbox_not_found' : result === 'risky' ? 'catch_all' : result === 'unknown' ? 'smtp_tempfail' : 'role_account',
    syntax_valid: true,
    dns_valid: true,
    smtp_valid: result === 'valid' || result === 'valid_role_based',
    is_role_based: !!o.role,
    is_free_provider: false,
    is_disposable: false,
    is_catchall: !!o.catchall,
    b2b_outbound_quality: charged ? 'high' : 'none',
    b2b_quality: charged ? 'high' : 'none',
    credits_charged: charged as 0 | 1,
    charge_reason: charged ? 'high_value_validation' : 'invalid_not_charged',
    validation_layer: 'smtp',
    flags: [],
  };
}

function row(idx: number, result: ValidationResultBody['result'], o: { role?: boolean; catchall?: boolean; attempts?: number; deferredUntil?: Date } = {}): JobResultInput {
  const v = verdict(`u${idx}@example.test`, result, o);
  return {
    idx,
    email: v.email,
    verdict: v,
    chargeable: v.credits_charged === 1,
    attempts: o.attempts ?? 1,
    state: o.deferredUntil ? 'deferred' : 'done',
    ...(o.deferredUntil ? { nextAttemptAt: o.deferredUntil } : {}),
  };
}

let seq = 0;
const newJob = (accountId: string, over: Partial<NewJob> = {}): NewJob => ({
  id: `job_test${String(++seq).padStart(6, '0')}`,
  accountId,
  source: 'json',
  totalRows: 5,
  uniqueEmails: 4,
  inputKey: `jobs/x${seq}/rows.ndjson`,
  ...over,
});

const counters = (j: JobRecord) => ({
  processed: j.processed,
  valid: j.valid,
  valid_role_based: j.valid_role_based,
  invalid: j.invalid,
  risky: j.risky,
  unknown: j.unknown,
  role_based: j.role_based,
  high_value: j.high_value,
  catch_all: j.catch_all,
});


function suite(t: Tap, open: (t: Tap) => Promise<Target>): void {
  t.test('create holds the credits with the job, in one transaction; too few credits writes nothing', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 10 });
    const r = await store.jobs.create(newJob(acc, { uniqueEmails: 4, totalRows: 6, webhookUrl: 'https://example.test/hook' }), jobCredits);
    if (!r.ok) throw new Error('refused');
    t.strictSame([r.job.status, r.job.source, r.job.total_rows, r.job.unique_emails, r.job.credits_reserved, r.job.processed, r.job.finalized, r.job.webhook_url], ['queued', 'json', 6, 4, 4, 0, false, 'https://example.test/hook']);
    t.equal(await store.jobs.isProcessing(r.job.id), false, 'queued is not processing: only a claim starts it');
    t.ok(r.job.created_at instanceof Date && r.job.started_at === null && r.job.completed_at === null, 'dates');
    t.strictSame(await store.ledger.balance(acc).then((b) => [b!.balance, b!.reserved, b!.available]), [10, 4, 6]);
    const [res] = await db.query<{ purpose: string; amount: number; status: string }>('SELECT purpose, amount, status FROM credit_reservations WHERE id = $1', [r.job.reservation_id]);
    t.strictSame(res, { purpose: 'job', amount: 4, status: 'open' }, "the hold's purpose is 'job' (a restart releases only 'sync' holds)");

    const refused = await store.jobs.create(newJob(acc, { uniqueEmails: 7, totalRows: 7 }), jobCredits);
    t.strictSame(refused, { ok: false, available: 6 });
    t.equal((await db.query('SELECT id FROM jobs')).length, 1, 'no job row for the refusal');
    t.equal((await db.query('SELECT id FROM credit_reservations')).length, 1, 'and no reservation');
    t.strictSame(await store.ledger.totals(acc), { balance: 10, reserved: 4 }, 'ledger == columns');
  });

  t.test('create records an idempotent response in its transaction', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 10 });
    const claim = await store.idempotency.begin(acc, 'k1', 'POST /v1/validate/batch', 'h', 60_000, 60_000);
    if (claim.state !== 'new') throw new Error(`claim: ${claim.state}`);
    const r = await store.jobs.create(newJob(acc), jobCredits, (job) => ({ accountId: acc, key: 'k1', owner: claim.owner, status: 202, body: JSON.stringify({ id: job.id }) }));
    if (!r.ok) throw new Error('refused');
    t.strictSame(await store.idempotency.begin(acc, 'k1', 'POST /v1/validate/batch', 'h', 60_000, 60_000), { state: 'replay', status: 202, body: JSON.stringify({ id: r.job.id }) });
  });

  t.test('get is per account; byId is not', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const a = await store.accounts.create({ credits: 10 });
    const b = await store.accounts.create({ credits: 10 });
    const r = await store.jobs.create(newJob(a), jobCredits);
    if (!r.ok) throw new Error('refused');
    t.equal((await store.jobs.get(a, r.job.id))?.id, r.job.id);
    t.equal(await store.jobs.get(b, r.job.id), undefined, "another account's job is not found");
    t.equal(await store.jobs.get(a, 'job_nope'), undefined);
    t.equal((await store.jobs.byId(r.job.id))?.account_id, a);
  });

  t.test('recordResults: once per (job, idx), counters by the rows written, a deferred row moves on once', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 10 });
    const r = await store.jobs.create(newJob(acc, { uniqueEmails: 5, totalRows: 5 }), jobCredits);
    if (!r.ok) throw new Error('refused');
    const id = r.job.id;
    const later = new Date(Date.now() + 60_000);
    const first = await store.jobs.recordResults(id, [row(0, 'valid'), row(1, 'valid_role_based', { role: true }), row(2, 'unknown', { deferredUntil: later })]);
    t.strictSame([first.accepted, first.written, first.finished], [true, 3, 2]);
    t.strictSame(counters(first.job!), { processed: 2, valid: 1, valid_role_based: 1, invalid: 0, risky: 0, unknown: 0, role_based: 1, high_value: 1, catch_all: 0 });
    t.equal(first.job!.status, 'processing', 'the first results start the job');
    t.ok(first.job!.started_at instanceof Date);
    t.equal(await store.jobs.isProcessing(id), true, 'the probe stage sees it processing');

    const again = await store.jobs.recordResults(id, [row(0, 'valid'), row(1, 'valid_role_based', { role: true }), row(2, 'unknown', { deferredUntil: later })]);
    t.strictSame([again.accepted, again.written, again.finished], [true, 0, 0], 'a second delivery writes nothing');
    t.strictSame(counters(again.job!), counters(first.job!), 'and counts nothing');

    const stale = await store.jobs.recordResults(id, [row(0, 'invalid', { attempts: 2 })]);
    t.equal(stale.written, 0, 'a done row never changes, even for a later attempt');

    const retried = await store.jobs.recordResults(id, [row(2, 'unknown', { attempts: 2, deferredUntil: later }), row(3, 'risky', { catchall: true }), row(3, 'risky', { catchall: true })]);
    t.strictSame([retried.written, retried.finished], [2, 1], 'the deferred row takes attempt 2 (still deferred); idx 3 once though sent twice');
    const done = await store.jobs.recordResults(id, [row(2, 'valid', { attempts: 3 }), row(2, 'valid', { attempts: 3 }), row(4, 'invalid')]);
    t.strictSame([done.written, done.finished], [2, 2]);
    const dup = await store.jobs.recordResults(id, [row(2, 'valid', { attempts: 3 })]);
    t.equal(dup.written, 0, 'the same attempt again writes nothing');
    t.strictSame(counters(dup.job!), { processed: 5, valid: 2, valid_role_based: 1, invalid: 1, risky: 1, unknown: 0, role_based: 1, high_value: 2, catch_all: 1 });
    const stored = await store.jobs.results(id, -1, 10);
    t.strictSame(stored.map((s) => [s.idx, s.state, s.verdict.result]), [[0, 'done', 'valid'], [1, 'done', 'valid_role_based'], [2, 'done', 'valid'], [3, 'done', 'risky'], [4, 'done', 'invalid']]);
    t.strictSame((await store.jobs.results(id, 2, 1)).map((s) => s.idx), [3], 'paged by idx');
    t.strictSame((await store.jobs.resultIdxs(id)).sort(), [0, 1, 2, 3, 4]);
    const [{ attempts }] = (await db.query<{ attempts: number }>('SELECT attempts FROM job_results WHERE job_id = $1 AND idx = 2', [id])) as [{ attempts: number }];
    t.equal(attempts, 3);
  });

  t.test('the decision outbox: recordResults queues the decisions of the rows it made done, in its transaction; ship() sends them once', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 10 });
    const r = await store.jobs.create(newJob(acc, { uniqueEmails: 3, totalRows: 3 }), jobCredits);
    if (!r.ok) throw new Error('refused');
    const id = r.job.id;
    const asked: Array<[string, number[]]> = [];
    const decide: JobDecisions = (job, doneIdx) => {
      asked.push([job.account_id, [...doneIdx].sort()]);
      return doneIdx.map((idx) => ({
        id: `${id}:${idx}`,
        account_id: job.account_id,
        email_hash: 'a'.repeat(64),
        domain: 'example.test',
        result: 'valid' as const,
        reason_code: 'accepted' as const,
        layer: 'smtp' as const,
        mx_host: 'mx\u0000.example.test',
        latency_ms: 5,
        job_id: id,
        source: 'job' as const,
        credits_charged: 1,
        decided_at: new Date('2026-11-27T01:02:03.456Z'),
      }));
    };
    const later = new Date(Date.now() + 60_000);
    await store.jobs.recordResults(id, [row(0, 'valid'), row(1, 'unknown', { deferredUntil: later })], { decisions: decide });
    await store.jobs.recordResults(id, [row(0, 'valid'), row(1, 'unknown', { deferredUntil: later })], { decisions: decide });
    t.strictSame(asked, [[acc, [0]]], 'asked once, for the row made done (not the deferred one, not the redelivery)');
    t.equal(await store.decisionOutbox.size(), 1);
    // A write whose transaction fails queues nothing.
    await t.rejects(store.jobs.recordResults(id, [row(2, 'valid')], { decisions: () => { throw new Error('boom'); } }), /boom/);
    t.equal(await store.decisionOutbox.size(), 1, 'rolled back with the results');
    t.strictSame((await store.jobs.results(id, -1, 10)).map((x) => x.idx), [0, 1], 'the row was not written either');
    await store.jobs.recordResults(id, [row(1, 'invalid', { attempts: 2 }), row(2, 'valid')], { decisions: decide });
    t.equal(await store.decisionOutbox.size(), 3);

    // A send that fails leaves them queued (released at once); one that succeeds deletes them.
    await t.rejects(store.decisionOutbox.ship(2, async () => { throw new Error('analytics down'); }), /analytics down/);
    t.equal(await store.decisionOutbox.size(), 3, 'kept');
    const sent: string[][] = [];
    t.equal(await store.decisionOutbox.ship(2, async (ds) => void sent.push(ds.map((d) => d.id))), 2);
    t.equal(await store.decisionOutbox.ship(2, async (ds) => void sent.push(ds.map((d) => d.id))), 1);
    t.equal(await store.decisionOutbox.ship(2, async (ds) => void sent.push(ds.map((d) => d.id))), 0);
    t.strictSame(sent, [[`${id}:0`, `${id}:1`], [`${id}:2`]], 'oldest first, each once');
    t.equal(await store.decisionOutbox.size(), 0);

    // A relay that died mid-send: its lease keeps the rows from others until it runs out.
    const r2 = await store.jobs.create(newJob(acc, { uniqueEmails: 1, totalRows: 1 }), jobCredits);
    if (!r2.ok) throw new Error('refused');
    await store.jobs.recordResults(r2.job.id, [row(0, 'valid')], { decisions: (job) => decide(job, [7]) });
    let release!: () => void;
    const held = new Promise<void>((res) => (release = res));
    let got: Decision[] = [];
    const dying = store.decisionOutbox.ship(10, async (ds) => { got = ds; await held; throw new Error('killed'); }, 200);
    await until(() => got.length === 1, 5000, 'the dying relay to take the decision');
    t.strictSame(got[0], { ...(decide(r.job, [7])[0]!), mx_host: 'mx\uFFFD.example.test' }, 'the decision as queued (a NUL made storable), decided_at a Date again');
    t.equal(await store.decisionOutbox.ship(10, async () => void t.fail('leased rows are not taken')), 0, 'leased: not taken');
    await databaseClockPasses(db, 200, 'the 200 ms lease of the dying relay to run out');
    const taken: string[] = [];
    t.equal(await store.decisionOutbox.ship(10, async (ds) => void taken.push(...ds.map((d) => d.id))), 1, 'the lease ran out: taken');
    t.strictSame(taken, [`${id}:7`]);
    release();
    await t.rejects(dying, /killed/);
  });

  t.test('decisionsInTable: recordResults writes the decisions of the rows it made done to validation_decisions in its transaction, none to the outbox', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    store.jobs.decisionsInTable = true;
    const acc = await store.accounts.create({ credits: 10 });
    const r = await store.jobs.create(newJob(acc, { uniqueEmails: 3, totalRows: 3 }), jobCredits);
    if (!r.ok) throw new Error('refused');
    const id = r.job.id;
    const decide: JobDecisions = (job, doneIdx) =>
      doneIdx.map((idx) => ({
        id: `${id}:${idx}`,
        account_id: job.account_id,
        email_hash: 'b'.repeat(64),
        domain: 'example.test',
        result: 'valid' as const,
        reason_code: 'accepted' as const,
        layer: 'smtp' as const,
        mx_host: 'mx.example.test',
        latency_ms: 5,
        job_id: id,
        source: 'job' as const,
        credits_charged: 1,
        decided_at: new Date('2026-11-27T01:02:03.456Z'),
      }));
    const decisions = async () => (await db.query<{ id: string; job_id: string; credits_charged: number }>('SELECT id, job_id, credits_charged FROM validation_decisions WHERE job_id = $1 ORDER BY id', [id])).map((d) => [d.id, Number(d.credits_charged)]);
    const later = new Date(Date.now() + 60_000);
    await store.jobs.recordResults(id, [row(0, 'valid'), row(1, 'unknown', { deferredUntil: later })], { decisions: decide });
    await store.jobs.recordResults(id, [row(0, 'valid')], { decisions: decide });
    t.strictSame(await decisions(), [[`${id}:0`, 1]], 'the row made done, once (not the deferred one, not the redelivery)');
    await t.rejects(store.jobs.recordResults(id, [row(2, 'valid')], { decisions: () => [{ ...decide(r.job, [2])[0]!, email_hash: 'not a hash' }] }), /email_hash/);
    t.strictSame(await decisions(), [[`${id}:0`, 1]], 'a malformed decision rolls the write back');
    t.strictSame((await store.jobs.results(id, -1, 10)).map((x) => x.idx), [0, 1], 'its row too');
    await store.jobs.recordResults(id, [row(1, 'invalid', { attempts: 2 }), row(2, 'valid')], { decisions: decide });
    t.strictSame(await decisions(), [[`${id}:0`, 1], [`${id}:1`, 1], [`${id}:2`, 1]]);
    t.equal(await store.decisionOutbox.size(), 0, 'nothing for a relay to ship');
  });

  t.test('finalize: only when every unique email is done, exactly once, charged = chargeable results', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 10 });
    const r = await store.jobs.create(newJob(acc, { uniqueEmails: 3, totalRows: 4 }), jobCredits);
    if (!r.ok) throw new Error('refused');
    const id = r.job.id;
    let hooks = 0;
    const hook = async (tx: Parameters<NonNullable<Parameters<typeof store.jobs.finalize>[3]>>[0], job: JobRecord) => {
      hooks++;
      t.equal(job.status, 'completed', 'the hook sees the final job');
      await tx.query('SELECT 1');
    };
    await store.jobs.recordResults(id, [row(0, 'valid'), row(1, 'valid', { deferredUntil: new Date() })]);
    t.equal(await store.jobs.finalize(id, 'jobs/x/results.csv', jobCredits, hook), undefined, 'not finished: nothing happens');
    await store.jobs.recordResults(id, [row(1, 'valid', { attempts: 2 }), row(2, 'risky', { catchall: true })]);
    const fin = await store.jobs.finalize(id, 'jobs/x/results.csv', jobCredits, hook);
    t.ok(fin, 'this call finalized');
    t.strictSame([fin!.status, fin!.finalized, fin!.credits_reserved, fin!.credits_charged, fin!.credits_refunded, fin!.results_key], ['completed', true, 3, 2, 1, 'jobs/x/results.csv']);
    t.ok(fin!.completed_at instanceof Date);
    t.equal(await store.jobs.finalize(id, 'jobs/x/other.csv', jobCredits, hook), undefined, 'a second finalize does nothing');
    t.equal(hooks, 1, 'the in-transaction hook ran once');
    t.strictSame(await store.ledger.balance(acc).then((b) => [b!.balance, b!.reserved]), [8, 0]);
    t.strictSame(await store.ledger.totals(acc), { balance: 8, reserved: 0 });
    const late = await store.jobs.recordResults(id, [row(0, 'invalid', { attempts: 5 })]);
    t.strictSame([late.accepted, late.written], [false, 0], 'a completed job takes no more results');
    t.equal(await store.jobs.claimForWork(id), false, 'nor work');
    t.equal(await store.jobs.isProcessing(id), false, 'and the probe stage drops its MX work');
    t.strictSame(await store.jobs.cancel(acc, id, jobCredits).then((c) => [c.ok, !c.ok && c.reason]), [false, 'invalid_state'], 'nor a cancel');
    t.equal(await store.jobs.fail(id, 'x', jobCredits), undefined, 'nor a failure');
  });

  t.test('a failing hook rolls the finalization back', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 10 });
    const r = await store.jobs.create(newJob(acc, { uniqueEmails: 1, totalRows: 1 }), jobCredits);
    if (!r.ok) throw new Error('refused');
    await store.jobs.recordResults(r.job.id, [row(0, 'valid')]);
    await t.rejects(store.jobs.finalize(r.job.id, 'k', jobCredits, async () => {
      throw new Error('outbox down');
    }));
    const j = await store.jobs.byId(r.job.id);
    t.strictSame([j!.status, j!.finalized], ['processing', false]);
    t.strictSame(await store.ledger.balance(acc).then((b) => [b!.balance, b!.reserved]), [10, 1], 'the hold is still open');
    t.ok(await store.jobs.finalize(r.job.id, 'k', jobCredits), 'and a later finalize works');
  });

  t.test('cancel charges the High-Value results done and releases the rest; fail refunds everything', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 20 });
    const other = await store.accounts.create({ credits: 1 });
    const a = await store.jobs.create(newJob(acc, { uniqueEmails: 5, totalRows: 5 }), jobCredits);
    const b = await store.jobs.create(newJob(acc, { uniqueEmails: 6, totalRows: 6 }), jobCredits);
    if (!a.ok || !b.ok) throw new Error('refused');
    await store.jobs.recordResults(a.job.id, [row(0, 'valid'), row(1, 'valid'), row(2, 'invalid'), row(3, 'valid', { deferredUntil: new Date() })]);
    t.strictSame(await store.jobs.cancel(other, a.job.id, jobCredits), { ok: false, reason: 'not_found' }, "another account's job");
    const c = await store.jobs.cancel(acc, a.job.id, jobCredits);
    if (!c.ok) throw new Error('cancel refused');
    t.strictSame([c.job.status, c.job.finalized, c.job.credits_charged, c.job.credits_refunded], ['canceled', true, 2, 3], 'the deferred row is not charged');
    t.strictSame(await store.jobs.cancel(acc, a.job.id, jobCredits).then((x) => [x.ok, !x.ok && x.reason]), [false, 'invalid_state'], 'cancel twice');
    t.equal((await store.jobs.recordResults(a.job.id, [row(4, 'valid')])).accepted, false, 'results after a cancel are dropped');
    t.strictSame((await store.jobs.listCanceledUnrendered()).map((j) => j.id), [a.job.id], 'its partial results are still to render');
    await store.jobs.setResultsKey(a.job.id, 'jobs/a/results.csv');
    t.strictSame(await store.jobs.listCanceledUnrendered(), []);

    await store.jobs.recordResults(b.job.id, [row(0, 'valid')]);
    const f = await store.jobs.fail(b.job.id, 'input lost', jobCredits);
    t.strictSame([f!.status, f!.error, f!.credits_charged, f!.credits_refunded], ['failed', 'input lost', 0, 6]);
    t.equal(await store.jobs.fail(b.job.id, 'again', jobCredits), undefined, 'fail is idempotent');
    t.strictSame(await store.ledger.balance(acc).then((x) => [x!.balance, x!.reserved]), [18, 0]);
    t.strictSame(await store.ledger.totals(acc), { balance: 18, reserved: 0 });
  });

  t.test('a CSV job: awaiting its upload, then queued with its credits once', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 5 });
    const other = await store.accounts.create({ credits: 5 });
    const up = await store.jobs.createAwaitingUpload({ id: 'job_csv000001', accountId: acc, filename: 'leads.csv' });
    t.strictSame([up.status, up.source, up.filename, up.reservation_id, up.credits_reserved], ['awaiting_upload', 'csv', 'leads.csv', null, 0]);
    t.strictSame(await store.jobs.queue(other, up.id, { totalRows: 3, uniqueEmails: 2, inputKey: 'k' }, jobCredits), { ok: false, reason: 'not_found' });
    t.strictSame(await store.jobs.queue(acc, up.id, { totalRows: 9, uniqueEmails: 9, inputKey: 'k' }, jobCredits), { ok: false, available: 5 });
    const q = await store.jobs.queue(acc, up.id, { totalRows: 3, uniqueEmails: 2, inputKey: 'jobs/job_csv000001/rows.ndjson', emailColumn: 'Email' }, jobCredits);
    if (!q.ok) throw new Error('refused');
    t.strictSame([q.job.status, q.job.total_rows, q.job.unique_emails, q.job.credits_reserved, q.job.email_column], ['queued', 3, 2, 2, 'Email']);
    const twice = await store.jobs.queue(acc, up.id, { totalRows: 3, uniqueEmails: 2, inputKey: 'k' }, jobCredits);
    t.strictSame([twice.ok, !twice.ok && 'reason' in twice && twice.reason], [false, 'invalid_state'], 'started twice');
    t.strictSame(await store.ledger.balance(acc).then((x) => [x!.balance, x!.reserved]), [5, 2]);
  });

  t.test('start-processing claims a CSV batch once across handles; the claim expires, is renewed and given back', async (t) => {
    const target = await open(t);
    const store = new Store(target.db);
    const second = target.another ? new Store(await target.another()) : store;
    const acc = await store.accounts.create({ credits: 5 });
    const other = await store.accounts.create({ credits: 5 });
    const up = await store.jobs.createAwaitingUpload({ id: 'job_claim00001', accountId: acc, filename: 'leads.csv' });
    t.equal(await store.jobs.claimIntake(other, up.id, 60_000), false, "another account's batch");
    t.equal(await store.jobs.claimIntake(acc, 'job_nosuch00001', 60_000), false, 'an unknown batch');
    const both = await Promise.all([store.jobs.claimIntake(acc, up.id, 60_000), second.jobs.claimIntake(acc, up.id, 60_000)]);
    t.strictSame(both.sort(), [false, true], 'two claims at once (two processes where the adapter has them): exactly one wins');
    t.equal(await store.jobs.renewIntake(up.id, 60_000), true, 'the holder renews');
    await store.jobs.releaseIntake(up.id);
    t.equal(await second.jobs.claimIntake(acc, up.id, 1), true, 'given back: claimable at once');
    await databaseClockPasses(target.db, 1, 'the 1 ms intake lease to run out');
    t.equal(await store.jobs.claimIntake(acc, up.id, 60_000), true, 'a lease that ran out (a killed intake) is claimable');
    const q = await store.jobs.queue(acc, up.id, { totalRows: 3, uniqueEmails: 2, inputKey: 'jobs/job_claim00001/rows.ndjson' }, jobCredits);
    t.equal(q.ok, true);
    t.equal(await store.jobs.claimIntake(acc, up.id, 60_000), false, 'a queued job is never claimed again');
    t.equal(await store.jobs.renewIntake(up.id, 60_000), false, 'nor renewed');
  });

  t.test('list: newest first, keyset cursor, status filter', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 100 });
    const other = await store.accounts.create({ credits: 100 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await store.jobs.create(newJob(acc, { uniqueEmails: 1, totalRows: 1 }), jobCredits);
      if (!r.ok) throw new Error('refused');
      ids.push(r.job.id);
    }
    await store.jobs.create(newJob(other, { uniqueEmails: 1, totalRows: 1 }), jobCredits);
    // Two jobs with the very same created_at: the id orders them.
    await db.query('UPDATE jobs SET created_at = (SELECT created_at FROM jobs WHERE id = $1) WHERE id = $2', [ids[1], ids[2]]);
    const all = (await store.jobs.list(acc, { limit: 100 })).jobs.map((j) => j.id);
    t.equal(all.length, 5, "only the account's jobs");
    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const p = await store.jobs.list(acc, { limit: 2, ...(cursor ? { cursor } : {}) });
      pages.push(p.jobs.map((j) => j.id));
      cursor = p.next;
    } while (cursor);
    t.strictSame(pages.map((p) => p.length), [2, 2, 1], 'pages of 2');
    t.strictSame(pages.flat(), all, 'the pages together are the whole list, once each, in order');
    t.strictSame(new Set(all), new Set(ids));
    t.equal((await store.jobs.list(acc, { limit: 5 })).next, undefined, 'no cursor after the last page');
    await store.jobs.cancel(acc, ids[0]!, jobCredits);
    t.strictSame((await store.jobs.list(acc, { limit: 10, status: 'canceled' })).jobs.map((j) => j.id), [ids[0]]);
    t.equal((await store.jobs.list(undefined, { limit: 10 })).jobs.length, 6, 'operators list every account');
    await t.rejects(store.jobs.list(acc, { limit: 2, cursor: 'nonsense' }), RangeError);
  });

  t.test('deferred rows: claimed when due, leased, released; running jobs only', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ credits: 100 });
    const a = await store.jobs.create(newJob(acc, { uniqueEmails: 3, totalRows: 3 }), jobCredits);
    const b = await store.jobs.create(newJob(acc, { uniqueEmails: 1, totalRows: 1 }), jobCredits);
    const c = await store.jobs.create(newJob(acc, { uniqueEmails: 1, totalRows: 1 }), jobCredits);
    if (!a.ok || !b.ok || !c.ok) throw new Error('refused');
    const now = Date.now();
    t.equal(await store.jobs.nextDeferredAt(), undefined, 'nothing deferred');
    await store.jobs.recordResults(a.job.id, [row(0, 'unknown', { deferredUntil: new Date(now - 1000) }), row(1, 'unknown', { deferredUntil: new Date(now + 60_000) }), row(2, 'valid')]);
    await store.jobs.recordResults(b.job.id, [row(0, 'unknown', { deferredUntil: new Date(now - 2000) })]);
    await store.jobs.recordResults(c.job.id, [row(0, 'unknown', { deferredUntil: new Date(now - 3000) })]);
    await store.jobs.cancel(acc, c.job.id, jobCredits);
    t.equal((await store.jobs.nextDeferredAt())?.getTime(), now - 2000, "the soonest of running jobs (the canceled job's row does not count)");
    const claimed = await store.jobs.claimDue(new Date(now), 10, 30_000);
    t.strictSame(claimed, [
      { jobId: b.job.id, accountId: acc, idx: 0, email: 'u0@example.test', attempts: 1 },
      { jobId: a.job.id, accountId: acc, idx: 0, email: 'u0@example.test', attempts: 1 },
    ], 'due rows, soonest first');
    t.strictSame(await store.jobs.claimDue(new Date(now), 10, 30_000), [], 'leased: not claimed again');
    t.equal((await store.jobs.nextDeferredAt())?.getTime(), now + 30_000, 'the next due time counts the leases');
    t.strictSame((await store.jobs.claimDue(new Date(now + 30_000), 10, 30_000)).map((d) => d.jobId), [b.job.id, a.job.id], 'a lease that passed: due again');
    t.equal(await store.jobs.releaseLeases(), 2, 'released');
    t.strictSame((await store.jobs.claimDue(new Date(now), 1, 30_000)).map((d) => d.jobId), [b.job.id], 'limit');
    await store.jobs.recordResults(b.job.id, [row(0, 'valid', { attempts: 2 })]);
    t.strictSame((await store.jobs.claimDue(new Date(now + 120_000), 10, 30_000)).map((d) => [d.jobId, d.idx]), [[a.job.id, 0], [a.job.id, 1]], 'a result ends the row (and its lease)');
    t.strictSame((await store.jobs.listUnfinished()).map((j) => j.id).sort(), [a.job.id, b.job.id].sort());
  });

  t.test('settings: generated once, shared', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const first = await store.settings.generated('secret', () => 'aaa');
    t.equal(first, 'aaa');
    t.equal(await store.settings.generated('secret', () => 'bbb'), 'aaa', 'the first value stays');
  });

  t.test('two handles recording the same results concurrently count them once', async (t) => {
    const target = await open(t);
    if (!target.another) return t.pass('one handle per database on this adapter: nothing to race');
    const store = new Store(target.db);
    const second = new Store(await target.another());
    const acc = await store.accounts.create({ credits: 1000 });
    const r = await store.jobs.create(newJob(acc, { uniqueEmails: 200, totalRows: 200 }), jobCredits);
    if (!r.ok) throw new Error('refused');
    const rows = Array.from({ length: 200 }, (_, i) => row(i, i % 2 ? 'valid' : 'invalid'));
    const outcomes = await Promise.all([0, 1, 2, 3].map((k) => (k % 2 ? second : store).jobs.recordResults(r.job.id, k < 2 ? rows : [...rows].reverse())));
    t.equal(outcomes.reduce((n, o) => n + o.finished, 0), 200, 'every row counted by exactly one call');
    const j = await store.jobs.byId(r.job.id);
    t.strictSame([j!.processed, j!.valid, j!.invalid, j!.high_value], [200, 100, 100, 100]);
    const fins = await Promise.all([store.jobs.finalize(r.job.id, 'k', jobCredits), second.jobs.finalize(r.job.id, 'k', jobCredits)]);
    t.equal(fins.filter(Boolean).length, 1, 'one of two concurrent finalizes did it');
    t.strictSame(await store.ledger.totals(acc), { balance: 900, reserved: 0 });
  });
}

// One PGlite for the file (a fresh one costs a second or more on a busy machine): each test gets
// a schema of its own on it, first on the search path (the tests run one after another).
t.test('PGlite', async (t) => {
  const db = await freshPglite();
  t.teardown(() => db.close());
  let n = 0;
  suite(t, async () => {
    const schema = `t_${++n}`;
    await db.exec(`CREATE SCHEMA ${schema}; SET search_path TO ${schema};`);
    await migrate(db);
    return { db };
  });
});

const why = await pgUnreachable();
if (!why) {
  t.test('Postgres', async (t) => {
    suite(t, async (t) => {
      const { url, drop } = await freshSchema();
      const open = new Set<Db>();
      const connect = async () => {
        const db = await openPostgres(url);
        open.add(db);
        return db;
      };
      const db = await connect();
      await migrate(db);
      t.teardown(async () => {
        for (const d of open) await d.close().catch(() => {});
        await drop();
      });
      return { db, another: connect };
    });
  });
} else if (process.env.CI_REQUIRE_SERVICES === '1') {
  t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${PG_SHOWN} is unreachable: ${why}`);
} else {
  t.comment(`Postgres at ${PG_SHOWN} is unreachable (${why}): its half is skipped`);
}
