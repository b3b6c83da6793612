// The job pipeline in one process over its real adapters (PGlite, a blob directory, the
// in-process bus and timer scheduler) and a scripted verifier: dedupe, exact counters and credits,
// greylist re-probes, the results CSV byte for byte, cancel, signed downloads, and restart
// recovery (a second service on the same store finishes what the first left, nothing twice).
// Every test has a store of its own. Waits are on events (a job final, results published) or,
// where nothing emits one, on polled conditions (a counter in the store, the database's clock);
// each fails the test on timeout. What must not happen is checked after driving the step that
// would do it (a sweep, the bus drained on close), never after a bare sleep. Greylist re-probes
// run on a manual clock that jumps to each wake-up the scheduler arms (reprobeClock). The only
// timers left are a probe's work where the overlap it allows is the point, and the code's own
// claim leases (judged by the database's clock, waited for as such).

import t from 'tap';
import { EventEmitter, once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { jobCredits } from '@svc/billing';
import { ServiceError } from '@svc/contracts';
import { DirBlobStore, Store, type Db, type JobRecord } from '@svc/store';
import type { Verdict } from '@svc/verifier';
import { InProcessBus, MX_TOPIC, RESULTS_TOPIC, WORK_TOPIC, type BusMessage, type SchedulerTimers } from '@svc/bus';
import { ManualClock, type ClockTimer } from '@svc/engine';
import { JobWorker, JobsService, dedupeKey, intake, resultsPath, type JobsServiceOptions, type JobVerifier } from '../src/index.ts';
import { mxHostOf } from '../src/pipeline/worker.ts';
import { migratedPglite } from '../../../test/helpers/pglite.ts';
import { until } from '../../../test/helpers/until.ts';

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

/** A verdict as the verifier would give it, by domain: v.test valid (info@ role-based), c.test catch-all, x.test no such user, g.test greylists twice, gf.test greylists forever. */
function scripted(tries: Map<string, number>) {
  return (email: string): Verdict => {
    const base = {
      email,
      reason: '',
      syntax_valid: true,
      dns_valid: true,
      smtp_valid: true,
      is_role_based: false,
      is_free_provider: false,
      is_disposable: false,
      is_catchall: false,
      flags: [],
    };
    const at = email.lastIndexOf('@');
    const local = email.slice(0, at);
    const domain = email.slice(at + 1).toLowerCase();
    if (at <= 0 || !domain.includes('.')) {
      return { ...base, result: 'invalid', reason: 'Invalid syntax', reason_code: 'invalid_syntax', syntax_valid: false, dns_valid: false, smtp_valid: false, b2b_outbound_quality: 'none', b2b_quality: 'none', validation_layer: 'syntax', chargeable: false };
    }
    const n = (tries.get(email) ?? 0) + 1;
    tries.set(email, n);
    const tempfail: Verdict = { ...base, result: 'unknown', reason: 'Greylisted', reason_code: 'smtp_tempfail', smtp_valid: false, b2b_outbound_quality: 'unknown', b2b_quality: 'unknown', validation_layer: 'smtp', smtp_response: '450 4.7.1 try later', chargeable: false };
    switch (domain) {
      case 'c.test':
        return { ...base, result: 'risky', reason: 'Catch-all', reason_code: 'catch_all', smtp_valid: false, is_catchall: true, catchall_confidence: 'high', b2b_outbound_quality: 'none', b2b_quality: 'none', validation_layer: 'catchall', chargeable: false };
      case 'x.test':
        return { ...base, result: 'invalid', reason: 'No such user', reason_code: 'mailbox_not_found', smtp_valid: false, b2b_outbound_quality: 'none', b2b_quality: 'none', validation_layer: 'smtp', smtp_response: '550 5.1.1 no, "really"', chargeable: false };
      case 'gf.test':
        return tempfail;
      case 'dt.test': // the resolver timed out once
        if (n < 2) return { ...base, result: 'unknown', reason: 'DNS lookup timed out', reason_code: 'dns_timeout', dns_valid: false, smtp_valid: false, b2b_outbound_quality: 'unknown', b2b_quality: 'unknown', validation_layer: 'dns', chargeable: false };
        return { ...base, result: 'valid', reason_code: 'accepted', b2b_outbound_quality: 'high', b2b_quality: 'high', validation_layer: 'smtp', smtp_response: '250 2.1.5 OK', chargeable: true };
      case 'cf.test': // the mail server could not be reached the first time
        if (n < 2) return { ...base, result: 'unknown', reason: 'Could not connect to any mail server (connect ECONNREFUSED)', reason_code: 'smtp_connection_failed', smtp_valid: false, b2b_outbound_quality: 'unknown', b2b_quality: 'unknown', validation_layer: 'smtp', chargeable: false };
        return { ...base, result: 'valid', reason_code: 'accepted', b2b_outbound_quality: 'high', b2b_quality: 'high', validation_layer: 'smtp', smtp_response: '250 2.1.5 OK', chargeable: true };
      case 'cd.test': // a mail server that is down for good
        return { ...base, result: 'unknown', reason: 'Could not connect to any mail server (connect ECONNREFUSED)', reason_code: 'smtp_connection_failed', smtp_valid: false, b2b_outbound_quality: 'unknown', b2b_quality: 'unknown', validation_layer: 'smtp', chargeable: false };
      case 'sf.test': // SERVFAIL every time
        return { ...base, result: 'unknown', reason: 'DNS lookup failed (SERVFAIL)', reason_code: 'dns_servfail', dns_valid: false, smtp_valid: false, b2b_outbound_quality: 'unknown', b2b_quality: 'unknown', validation_layer: 'dns', chargeable: false };
      default:
        if (domain === 'g.test' && n < 3) return tempfail; // the third probe is accepted
        if (local === 'info') return { ...base, result: 'valid_role_based', reason: 'Role account', reason_code: 'role_account', is_role_based: true, role_type: 'information', b2b_outbound_quality: 'low', b2b_quality: 'low', validation_layer: 'smtp', chargeable: false };
        return { ...base, result: 'valid', reason_code: 'accepted', b2b_outbound_quality: 'high', b2b_quality: 'high', validation_layer: 'smtp', smtp_response: '250 2.1.5 OK', chargeable: true };
    }
  };
}

interface FakeVerifier extends JobVerifier {
  tries: Map<string, number>;
  calls: Array<{ emails: string[]; smtpRetries: number | undefined }>;
  /** Emails of these domains wait until release() (a probe in flight when the process dies). */
  hold: Set<string>;
  /** Lets the held probes go, and holds nothing more (a probe that starts later does not wait). */
  release(): void;
}

function fakeVerifier(): FakeVerifier {
  const tries = new Map<string, number>();
  const verdict = scripted(tries);
  let open!: () => void;
  let gate = new Promise<void>((r) => (open = r));
  const v: FakeVerifier = {
    tries,
    calls: [],
    hold: new Set(),
    release: () => {
      v.hold.clear();
      open();
      gate = new Promise<void>((r) => (open = r));
    },
    async verify(emails, opts) {
      v.calls.push({ emails: [...emails], smtpRetries: opts?.smtpRetries });
      if (emails.some((e) => v.hold.has(e.slice(e.lastIndexOf('@') + 1).toLowerCase()))) await gate;
      return emails.map(verdict);
    },
  };
  return v;
}

const dirs: string[] = [];
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

interface World {
  db: Db;
  store: Store;
  blobs: DirBlobStore;
  verifier: FakeVerifier;
  service(opts?: Partial<JobsServiceOptions>): Promise<{ svc: JobsService; bus: InProcessBus }>;
  /** The job once a service of this world reported it final (onFinal), read from the store; rejects unless it completed, or after `ms`. */
  completed(id: string, ms?: number): Promise<JobRecord>;
}

/**
 * The greylist re-probes' clock for a service (its `now` and its scheduler's `timers`): a manual
 * clock. With `follow`, time jumps to every wake-up the scheduler arms within `withinMs` (a
 * re-probe delay) as soon as it is armed, so a re-probe comes at once and nothing waits out the
 * delay; the scheduler's poll (a minute) is never reached. Without it time stands still: no
 * re-probe ever comes (a process that dies before its delay ends). `wakes` holds the delay of
 * every wake-up armed within `withinMs`.
 */
function reprobeClock(withinMs: number, follow = true): { clock: ManualClock; wakes: number[]; options: Pick<JobsServiceOptions, 'now' | 'timers'> } {
  const clock = new ManualClock(Date.now());
  const wakes: number[] = [];
  let moving = Promise.resolve();
  const timers: SchedulerTimers = {
    setTimeout(fn, ms) {
      const timer = clock.setTimeout(fn, ms);
      if (ms <= withinMs) {
        wakes.push(ms);
        // One move at a time, each to the wake-up's time (or on from later, never back).
        const at = clock.now() + ms;
        if (follow) moving = moving.then(() => clock.advance(Math.max(0, at - clock.now())));
      }
      return timer;
    },
    clearTimeout: (timer) => clock.clearTimeout(timer as ClockTimer | undefined),
  };
  return { clock, wakes, options: { now: () => clock.now(), timers } };
}

/** A test's own database (PGlite from a template: about 0.4 s), blob directory, verifier, buses and services, all stopped when it ends. */
async function world(t: Tap): Promise<World> {
  const db = await migratedPglite();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-jobs-'));
  dirs.push(dir);
  const store = new Store(db);
  const blobs = new DirBlobStore(path.join(dir, 'blobs'));
  const verifier = fakeVerifier();
  const stops: Array<() => Promise<void>> = [];
  const finals = new Set<string>();
  const finalEvents = new EventEmitter();
  t.teardown(async () => {
    verifier.release();
    for (const s of stops.reverse()) await s();
    await db.close();
  });
  return {
    db,
    store,
    blobs,
    verifier,
    async service(opts = {}) {
      const bus = new InProcessBus({ retryDelayMs: 20 });
      const onFinal = opts.onFinal;
      const svc = new JobsService({
        store,
        blobs,
        bus,
        verifier,
        publicUrl: 'http://svc.test',
        secret: 'a-test-secret-of-32-characters!!',
        greylistDelayMs: 40,
        greylistAttempts: 3,
        ownsAllWork: true,
        ...opts,
        onFinal: async (job) => {
          await onFinal?.(job);
          finals.add(job.id);
          finalEvents.emit(job.id);
        },
      });
      await svc.start();
      stops.push(async () => {
        await svc.stop();
        await bus.close();
      });
      return { svc, bus };
    },
    async completed(id, ms = 8000) {
      if (!finals.has(id)) {
        await once(finalEvents, id, { signal: AbortSignal.timeout(ms) }).catch(async () => {
          const j = await store.jobs.byId(id);
          throw new Error(`job ${id} not final within ${ms} ms: ${JSON.stringify(j && { status: j.status, processed: j.processed, unique: j.unique_emails })}`);
        });
      }
      const j = (await store.jobs.byId(id))!;
      if (j.status !== 'completed') throw new Error(`job ${id} ended ${j.status}, not completed`);
      return j;
    },
  };
}

/** The job once `pred` holds, polled in the store (counters and keys of a running job have no event of their own); fails after `ms`. */
async function waitFor(store: Store, id: string, pred: (j: JobRecord) => boolean, ms = 8000): Promise<JobRecord> {
  let j: JobRecord | undefined;
  await until(async () => !!(j = await store.jobs.byId(id)) && pred(j), ms, `job ${id}`).catch((err: Error) => {
    throw new Error(`${err.message}: it did not get there: ${JSON.stringify(j && { status: j.status, processed: j.processed, unique: j.unique_emails })}`);
  });
  return j!;
}

/** Collects the emails of the results messages published on `bus`; `all(n)` resolves once `n` have come, or fails after `ms`. */
function collectResults(bus: InProcessBus): { emails: string[]; all(n: number, ms?: number): Promise<void> } {
  const emails: string[] = [];
  const came = new EventEmitter();
  bus.subscribe(
    RESULTS_TOPIC,
    async (m) => {
      emails.push(...(m.results as Array<{ email: string }>).map((r) => r.email));
      came.emit('results');
    },
    { partitions: 1 },
  );
  return {
    emails,
    async all(n, ms = 5000) {
      const signal = AbortSignal.timeout(ms);
      while (emails.length < n) {
        await once(came, 'results', { signal }).catch(() => {
          throw new Error(`${emails.length} of ${n} results published within ${ms} ms`);
        });
      }
    },
  };
}

/** Whether the job's claim on publishing its work ran out (by the database's clock, as claimUnpublished judges it). */
async function claimRanOut(db: Db, jobId: string): Promise<boolean> {
  const r = await db.query<{ out: boolean }>(`SELECT publish_claimed_until IS NULL OR publish_claimed_until <= now() AS out FROM jobs WHERE id = $1`, [jobId]);
  return r[0]?.out === true;
}

async function text(body: AsyncIterable<unknown>): Promise<string> {
  let s = '';
  for await (const c of body) s += typeof c === 'string' ? c : Buffer.from(c as Buffer).toString('utf8');
  return s;
}

const HEADER = 'email,result,reason_code,reason,b2b_outbound_quality,is_role_based,role_type,is_free_provider,is_disposable,is_catchall,catchall_confidence,did_you_mean,credits_charged,charge_reason,validation_layer,smtp_response';

t.test('dedupe keys: exact local part, domain without case, canonical quoted forms; non-addresses by exact text', async (t) => {
  t.equal(dedupeKey('jane.doe@Accept.TEST'), dedupeKey('jane.doe@accept.test'));
  t.equal(dedupeKey('"jane.doe"@accept.test'), dedupeKey('jane.doe@accept.test'));
  t.not(dedupeKey('Jane.Doe@accept.test'), dedupeKey('jane.doe@accept.test'), 'the local part is exact');
  t.equal(dedupeKey('not an email'), dedupeKey('not an email'));
  t.not(dedupeKey('not an email'), dedupeKey('Not an email'));
});

t.test('a JSON job end to end: counters, credits, greylist re-probes, the results CSV', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 20 });
  const reprobes = reprobeClock(40);
  const start = reprobes.clock.now();
  const { svc } = await w.service(reprobes.options);
  const emails = [
    'jane@v.test',
    'info@v.test',
    'jane@V.Test', // same mailbox: the domain's case does not matter
    ' "jane"@v.test ', // same mailbox once trimmed and canonical; the input cell keeps the spaces
    'a@c.test',
    'b@x.test',
    'not-an-email',
    'not-an-email', // same string
    '=cmd@v.test', // formula characters: valid addresses, escaped cells
    '+1@v.test',
    '-x@v.test',
    '@lead',
    'g1@g.test', // greylisted twice, then accepted
    'gf@gf.test', // greylisted on every probe: unknown after 3
    'a@c.test',
  ];
  const job = await svc.createJsonJob(acc, emails, { webhookUrl: 'https://hooks.example.com/x' });
  t.strictSame([job.status, job.source, job.total_rows, job.unique_emails, job.credits_reserved, job.webhook_url], ['queued', 'json', 15, 11, 11, 'https://hooks.example.com/x']);
  t.strictSame(await w.store.ledger.balance(acc).then((b) => [b!.balance, b!.reserved]), [20, 11], 'unique emails reserved');

  const done = await w.completed(job.id);
  const status = svc.status(done);
  t.strictSame(status.progress, { processed: 11, total: 11, percent: 100 });
  t.strictSame(status.results, {
    total_rows: 15,
    unique_emails: 11,
    valid: 5, // jane, =cmd, +1, -x, g1
    valid_role_based: 1,
    invalid: 3, // b@x, not-an-email, @lead
    risky: 1,
    unknown: 1,
    role_based: 1,
    high_value: 5,
    catch_all: 1,
    credits_reserved: 11,
    credits_charged: 5,
    credits_consumed: 5,
    credits_refunded: 6,
    credits_per_high_value_validation: 1,
  });
  t.strictSame(status.credit_reservation, { reserved: true, reserved_credits: 11, credits_charged: 5, credits_consumed: 5, refunded_credits: 6, credits_per_high_value_validation: 1, finalized: true });
  t.strictSame(status.download, { available: true, url: `http://svc.test/v1/csv/jobs/${job.id}/download` });
  t.strictSame([status.source, status.filename, status.webhook_url], ['json', null, 'https://hooks.example.com/x']);
  t.ok(status.started_at && status.completed_at && status.created_at <= status.started_at && status.started_at <= status.completed_at, 'created ≤ started ≤ completed');
  t.strictSame(await w.store.ledger.balance(acc).then((b) => [b!.balance, b!.reserved]), [15, 0]);
  t.strictSame(await w.store.ledger.totals(acc), { balance: 15, reserved: 0 }, 'the ledger agrees');

  t.equal(w.verifier.tries.get('g1@g.test'), 3, 'the greylisted address was probed three times');
  t.ok(reprobes.wakes.length > 0 && reprobes.clock.now() - start >= 80, `its re-probes came the 40 ms delay apart on the re-probes' clock (${reprobes.clock.now() - start} ms)`);
  t.equal(w.verifier.tries.get('gf@gf.test'), 3, 'the one greylisted forever three times, then unknown');
  t.equal(w.verifier.tries.get('jane@v.test'), 1, 'each unique email once');
  t.ok(w.verifier.calls.every((c) => c.smtpRetries === 0), 'jobs ask for no in-session greylist retry');
  const attempts = await w.store.jobs.results(job.id, -1, 100);
  t.strictSame(attempts.map((r) => r.state), new Array(11).fill('done'));

  const link = await svc.downloadLink(acc, job.id);
  const q = Object.fromEntries(new URL(link.url).searchParams);
  t.ok(link.url.startsWith(`http://svc.test${resultsPath(job.id)}?`));
  const csv = await text((await svc.openResults(job.id, q)).body as AsyncIterable<unknown>);
  const lines = csv.split('\r\n');
  t.equal(lines.pop(), '', 'CRLF after every line');
  t.strictSame(lines, [
    HEADER,
    'jane@v.test,valid,accepted,,high,false,,false,false,false,,,1,high_value_validation,smtp,250 2.1.5 OK',
    'info@v.test,valid_role_based,role_account,Role account,low,true,information,false,false,false,,,0,role_based_not_charged,smtp,',
    'jane@V.Test,valid,accepted,,high,false,,false,false,false,,,0,duplicate_in_job,smtp,250 2.1.5 OK',
    ' "jane"@v.test ,valid,accepted,,high,false,,false,false,false,,,0,duplicate_in_job,smtp,250 2.1.5 OK'.replace(' "jane"@v.test ', '" ""jane""@v.test "'),
    'a@c.test,risky,catch_all,Catch-all,none,false,,false,false,true,high,,0,catchall_not_charged,catchall,',
    'b@x.test,invalid,mailbox_not_found,No such user,none,false,,false,false,false,,,0,invalid_not_charged,smtp,"550 5.1.1 no, ""really"""',
    'not-an-email,invalid,invalid_syntax,Invalid syntax,none,false,,false,false,false,,,0,invalid_not_charged,syntax,',
    'not-an-email,invalid,invalid_syntax,Invalid syntax,none,false,,false,false,false,,,0,duplicate_in_job,syntax,',
    "'=cmd@v.test,valid,accepted,,high,false,,false,false,false,,,1,high_value_validation,smtp,250 2.1.5 OK",
    "'+1@v.test,valid,accepted,,high,false,,false,false,false,,,1,high_value_validation,smtp,250 2.1.5 OK",
    "'-x@v.test,valid,accepted,,high,false,,false,false,false,,,1,high_value_validation,smtp,250 2.1.5 OK",
    "'@lead,invalid,invalid_syntax,Invalid syntax,none,false,,false,false,false,,,0,invalid_not_charged,syntax,",
    'g1@g.test,valid,accepted,,high,false,,false,false,false,,,1,high_value_validation,smtp,250 2.1.5 OK',
    'gf@gf.test,unknown,smtp_tempfail,Greylisted,unknown,false,,false,false,false,,,0,unknown_not_charged,smtp,450 4.7.1 try later',
    'a@c.test,risky,catch_all,Catch-all,none,false,,false,false,true,high,,0,duplicate_in_job,catchall,',
  ]);
  const charged = lines.slice(1).reduce((n, l) => n + Number(l.split(',').at(-4) === '1' || l.includes(',1,high_value_validation,')), 0);
  t.equal(charged, 5, 'the CSV charges what the ledger charged');

  const seg = await svc.downloadLink(acc, job.id, 'risky,unknown');
  const segCsv = await text((await svc.openResults(job.id, Object.fromEntries(new URL(seg.url).searchParams))).body as AsyncIterable<unknown>);
  t.strictSame(segCsv.split('\r\n').filter(Boolean).map((l) => l.split(',')[0]), ['email', 'a@c.test', 'gf@gf.test', 'a@c.test'], 'segment: only those results');
});

t.test('bad input and refusals write nothing', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 2 });
  const other = await w.store.accounts.create({ credits: 100 });
  const { svc } = await w.service();
  const err = await svc.createJsonJob(acc, ['a@v.test', 'b@v.test', 'c@v.test', 'a@v.test']).catch((e: unknown) => e);
  t.ok(err instanceof ServiceError);
  t.strictSame((err as ServiceError).body(), { error: 'Payment Required', message: 'This job needs 3 credits (one per unique email); 2 available', code: 'insufficient_credits', required: 3, available: 2 });
  t.strictSame(await w.store.jobs.list(acc, { limit: 10 }), { jobs: [] }, 'no job');
  const { readdirSync } = await import('node:fs');
  const inputs = () => readdirSync(path.join(w.blobs.root, 'jobs'));
  const before = inputs().length;
  await svc.createJsonJob(acc, ['a@v.test', 'b@v.test', 'c@v.test']).catch(() => undefined);
  t.equal(inputs().length, before, 'no stored input left behind');
  t.strictSame(await w.store.ledger.balance(acc).then((b) => [b!.balance, b!.reserved]), [2, 0]);
  await t.rejects(svc.createJsonJob(acc, []), { code: 'emails_required' });
  await t.rejects(svc.createJsonJob(acc, new Array(500_001).fill('a@v.test')), { code: 'too_many_emails', message: 'maximum 500,000 emails per job' });
  await t.rejects(svc.createJsonJob(acc, ['a@v.test'], { webhookUrl: 'ftp://x.example.com/' }), { code: 'invalid_webhook_url' });
  await t.rejects(svc.createJsonJob(acc, ['a@v.test'], { webhookUrl: 'not a url' }), { code: 'invalid_webhook_url' });

  const job = await svc.createJsonJob(other, ['a@v.test']);
  await t.rejects(svc.get(acc, job.id), { code: 'job_not_found' }, "another account's job");
  await t.rejects(svc.cancel(acc, job.id), { code: 'job_not_found' });
  await t.rejects(svc.downloadLink(acc, job.id), { code: 'job_not_found' });
  await w.completed(job.id);
  await t.rejects(svc.cancel(other, job.id), { code: 'invalid_job_state' }, 'cancel a finished job');
  await t.rejects(svc.list(acc, { limit: 5, cursor: 'junk' }), { code: 'invalid_request' });
  await t.rejects(svc.downloadLink(other, job.id, 'valid,nope'), { code: 'invalid_request' });
});

t.test('signed download URLs: tampered, expired, not yet available', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 10 });
  let now = Date.now();
  const { svc } = await w.service({ now: () => now });
  w.verifier.hold.add('v.test');
  const job = await svc.createJsonJob(acc, ['a@v.test', 'b@x.test']);
  await t.rejects(svc.downloadLink(acc, job.id), { code: 'invalid_job_state' }, 'before completion');
  w.verifier.release();
  await w.completed(job.id);
  const link = await svc.downloadLink(acc, job.id, 'valid');
  t.equal(link.expires_at, new Date(Math.floor((now + 3_600_000) / 1000) * 1000).toISOString(), 'valid for an hour');
  const q = Object.fromEntries(new URL(link.url).searchParams);
  t.equal(q.segment, 'valid');
  await t.rejects(svc.openResults(job.id, { ...q, segment: 'valid,invalid' }), { code: 'invalid_signature' }, 'a changed parameter');
  await t.rejects(svc.openResults(job.id, { ...q, signature: q.signature!.replace(/^./, (c) => (c === 'a' ? 'b' : 'a')) }), { code: 'invalid_signature' }, 'a changed signature');
  await t.rejects(svc.openResults('job_other', q), { code: 'invalid_signature' }, 'another job');
  const { signature: _s, ...unsigned } = q;
  await t.rejects(svc.openResults(job.id, unsigned), { code: 'invalid_signature' }, 'no signature');
  t.equal(await text((await svc.openResults(job.id, q)).body as AsyncIterable<unknown>), `${HEADER}\r\na@v.test,valid,accepted,,high,false,,false,false,false,,,1,high_value_validation,smtp,250 2.1.5 OK\r\n`);
  now += 3_601_000;
  await t.rejects(svc.openResults(job.id, q), { code: 'invalid_signature', message: 'The signed URL has expired; ask for a new one' });
});

t.test('cancel: work in flight is dropped, done High-Value results charged, the rest refunded, partial CSV', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 10 });
  const { svc } = await w.service();
  w.verifier.hold.add('slow.test');
  const job = await svc.createJsonJob(acc, ['a@v.test', 'c@slow.test', 'b@v.test', 'd@slow.test']);
  await waitFor(w.store, job.id, (j) => j.processed === 2);
  const canceled = await svc.cancel(acc, job.id);
  t.strictSame([canceled.status, canceled.credits_reserved, canceled.credits_charged, canceled.credits_refunded, canceled.finalized], ['canceled', 4, 2, 2, true]);
  await t.rejects(svc.cancel(acc, job.id), { code: 'invalid_job_state' }, 'cancel twice');
  w.verifier.release(); // the held probes finish after the cancel: their results are dropped
  const rendered = await waitFor(w.store, job.id, (j) => j.results_key !== null);
  t.equal(rendered.processed, 2, 'late results were not recorded');
  t.strictSame(await w.store.ledger.totals(acc), { balance: 8, reserved: 0 });
  const link = await svc.downloadLink(acc, job.id);
  const csv = await text((await svc.openResults(job.id, Object.fromEntries(new URL(link.url).searchParams))).body as AsyncIterable<unknown>);
  t.strictSame(csv.split('\r\n').slice(1, -1).map((l) => l.split(',').slice(0, 2).join(',')), ['a@v.test,valid', 'c@slow.test,', 'b@v.test,valid', 'd@slow.test,'], 'rows never validated keep their input, result cells empty');
  t.equal(csv.split('\r\n')[2], `c@slow.test${','.repeat(15)}`);
});

t.test('restart recovery: a second process finishes the job, every row once, credits exact', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 100 });
  // The first process's clock stands still: it "dies" before the greylist delay of its deferred
  // address ends, so it never probes it again.
  const first = await w.service(reprobeClock(40, false).options);
  // The first process gets the v.test and x.test answers; the h.test probes hang, and the g.test
  // address is greylisted (deferred) when the process "dies".
  w.verifier.hold.add('h.test');
  const emails = ['a@v.test', 'b@v.test', 'c@h.test', 'd@h.test', 'e@x.test', 'g1@g.test', 'a@v.test', 'c@h.test'];
  const job = await first.svc.createJsonJob(acc, emails);
  await waitFor(w.store, job.id, (j) => j.processed === 3);
  await until(async () => (await w.store.jobs.results(job.id, -1, 100)).some((r) => r.state === 'deferred'), 3000, 'the greylisted address deferred');
  // The crash: the first service is never asked again (its bus and scheduler are stopped). Its
  // bus closes once the probes it has in flight (held) finish.
  await first.svc.stop();
  const firstClosed = first.bus.close();
  w.verifier.hold.clear();
  const second = await w.service(reprobeClock(40).options);
  const done = await w.completed(job.id);
  t.strictSame([done.total_rows, done.unique_emails, done.processed, done.valid, done.invalid, done.high_value, done.credits_charged, done.credits_refunded], [8, 6, 6, 5, 1, 5, 5, 1]);
  t.equal(w.verifier.tries.get('g1@g.test'), 3, 'the greylisted address kept its attempts across the restart');
  // The probes the first process had in flight finish now: their results change nothing.
  w.verifier.release();
  await firstClosed;
  const after = await w.store.jobs.byId(job.id);
  t.strictSame([after!.processed, after!.valid, after!.credits_charged], [6, 5, 5], 'no row counted twice');
  t.strictSame(await w.store.ledger.totals(acc), { balance: 95, reserved: 0 });
  const rows = await w.store.jobs.results(job.id, -1, 100);
  t.strictSame(rows.map((r) => r.idx), [0, 1, 2, 3, 4, 5], 'one result row per unique email');
  const link = await second.svc.downloadLink(acc, job.id);
  const csv = await text((await second.svc.openResults(job.id, Object.fromEntries(new URL(link.url).searchParams))).body as AsyncIterable<unknown>);
  t.equal(csv.split('\r\n').length - 2, 8, 'one line per input row');
});

t.test('a durable bus: a starting process publishes again only the work of jobs whose work was never published', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 100 });
  const first = await w.service();
  w.verifier.hold.add('p.test');
  w.verifier.hold.add('u.test');
  const published = await first.svc.createJsonJob(acc, ['a@p.test', 'b@p.test']);
  t.equal(await w.store.jobs.workPublished(published.id), true, "the intake notes that the job's work is on the bus");
  // An intake whose publishing failed (or died) after its job row: the work was never published.
  const refusing = { publish: async () => Promise.reject(new Error('broker down')), subscribe: () => {}, close: async () => {} };
  // Its process died (a 1 ms claim: already run out when the next process starts).
  const unpublished = await intake({ store: w.store, blobs: w.blobs, bus: refusing, claimLeaseMs: 1, onPublishError: () => {} }, { accountId: acc, source: 'json', columns: ['email'], emailIndex: 0, rows: [[{ fields: ['c@u.test'], email: 'c@u.test' }]] });
  t.equal(await w.store.jobs.workPublished(unpublished.id), false);
  await until(() => claimRanOut(w.db, unpublished.id), 8000, 'the dead intake’s claim ran out');
  await first.svc.stop();
  void first.bus.close();
  // A second process on a bus that kept its messages (Kafka): count what it publishes.
  const sent: Array<{ job: string; items: number }> = [];
  class CountingBus extends InProcessBus {
    override async publish(topic: string, key: string, message: BusMessage): Promise<void> {
      if (topic === WORK_TOPIC) sent.push({ job: String(message.job_id), items: (message.items as unknown[]).length });
      return super.publish(topic, key, message);
    }
  }
  const bus = new CountingBus({ retryDelayMs: 20 });
  const second = new JobsService({ store: w.store, blobs: w.blobs, bus, verifier: w.verifier, publicUrl: 'http://svc.test', secret: 'a-test-secret-of-32-characters!!', ownsAllWork: true, durableBus: true });
  await second.start();
  t.teardown(async () => {
    w.verifier.release(); // the held probes end, so the bus can close
    await second.stop();
    await bus.close();
  });
  t.strictSame(sent, [{ job: unpublished.id, items: 1 }], 'only the unpublished job is published again');
  t.equal(await w.store.jobs.workPublished(unpublished.id), true, 'and is noted as published');
});

t.test('a front that dies mid-publish: a running worker takes its job over once the claim runs out, not before, and publishes it once', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 100 });
  const sent: string[] = [];
  class CountingBus extends InProcessBus {
    override async publish(topic: string, key: string, message: BusMessage): Promise<void> {
      if (topic === WORK_TOPIC) sent.push(`${String(message.job_id)}:${(message.items as unknown[]).length}`);
      return super.publish(topic, key, message);
    }
  }
  const bus = new CountingBus({ retryDelayMs: 20 });
  // A worker (durable bus: Kafka) sweeping every 100 ms for jobs whose publish claim ran out.
  const worker = new JobsService({ store: w.store, blobs: w.blobs, bus, verifier: w.verifier, publicUrl: 'http://svc.test', secret: 'a-test-secret-of-32-characters!!', durableBus: true, claimLeaseMs: 300 });
  await worker.start();
  t.teardown(async () => {
    await worker.stop();
    await bus.close();
  });
  const rows = (emails: string[]) => [emails.map((e) => ({ fields: [e], email: e }))];

  // The front's publish fails for good (its process is gone) with a 600 ms claim on the job.
  const refusing = { publish: async () => Promise.reject(new Error('front killed')), subscribe: () => {}, close: async () => {} };
  const orphan = await intake({ store: w.store, blobs: w.blobs, bus: refusing, claimLeaseMs: 600, onPublishError: () => {} }, { accountId: acc, source: 'json', columns: ['email'], emailIndex: 0, rows: rows(['a@v.test', 'b@x.test', 'c@c.test', 'a@v.test']) });
  // Two sweeps of the worker while the claim runs (its own timer sweeps too): neither takes it.
  await worker.sweepUnpublished();
  await worker.sweepUnpublished();
  t.notOk(await claimRanOut(w.db, orphan.id), 'the sweeps ran while the claim held');
  t.strictSame(sent, [], 'while its claim runs, nobody takes the job over');
  t.equal(await w.store.jobs.workPublished(orphan.id), false);
  const done = await waitFor(w.store, orphan.id, (j) => j.status === 'completed');
  t.strictSame(sent, [`${orphan.id}:1`, `${orphan.id}:1`, `${orphan.id}:1`], 'then the worker published its 3 unique emails (one message per domain), once');
  t.strictSame([done.processed, done.unique_emails, done.credits_reserved, done.credits_charged + done.credits_refunded], [3, 3, 3, 3], 'and the job completed with exact credits');
  t.equal(await w.store.jobs.workPublished(orphan.id), true);

  // A slow front publishing for longer than the lease renews its claim: never taken over. Its
  // publish ends only after its first claim would have run out and a sweep ran since.
  sent.length = 0;
  const slow = {
    publish: async (topic: string, key: string, m: BusMessage) => {
      const jobId = String(m.job_id);
      const claimEnd = (await w.db.query<{ claim_end: Date }>(`SELECT publish_claimed_until AS claim_end FROM jobs WHERE id = $1`, [jobId]))[0]!.claim_end;
      await until(async () => (await w.db.query<{ past: boolean }>(`SELECT now() > $1::timestamptz AS past`, [claimEnd]))[0]!.past === true, 5000, 'the first claim’s end');
      await worker.sweepUnpublished();
      return bus.publish(topic, key, m);
    },
    subscribe: () => {},
    close: async () => {},
  };
  const slowJob = await intake({ store: w.store, blobs: w.blobs, bus: slow, claimLeaseMs: 300 }, { accountId: acc, source: 'json', columns: ['email'], emailIndex: 0, rows: rows(['d@v.test']) });
  await waitFor(w.store, slowJob.id, (j) => j.status === 'completed');
  t.strictSame(sent, [`${slowJob.id}:1`], 'a renewed claim holds: published by its intake only');

  // Two sweeps racing for one job whose claim ran out: one gets it.
  // The worker stops first: its own sweep must not take the job over (a 1 ms claim runs out
  // while the intake is still failing to publish) before the two claims below race for it.
  await worker.stop();
  const third = await intake({ store: w.store, blobs: w.blobs, bus: refusing, claimLeaseMs: 1, onPublishError: () => {} }, { accountId: acc, source: 'json', columns: ['email'], emailIndex: 0, rows: rows(['e@x.test']) });
  await until(() => claimRanOut(w.db, third.id), 8000, 'the claim ran out');
  const claims = await Promise.all([w.store.jobs.claimUnpublished(60_000, 20), w.store.jobs.claimUnpublished(60_000, 20)]);
  t.strictSame(claims.map((c) => c.filter((j) => j.id === third.id).length).sort(), [0, 1], 'exactly one of two concurrent claims gets it');
});

t.test('back-pressure (busMaxQueued): with the MX and results topics bounded to one waiting message, a job of 3,000 emails completes, every row once, credits exact', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 5_000 });
  const bus = new InProcessBus({ retryDelayMs: 20 });
  t.teardown(() => bus.close());
  const bounds = new Map<string, number | undefined>();
  const subscribe = bus.subscribe.bind(bus);
  bus.subscribe = (topic, handler, opts) => {
    bounds.set(topic, opts?.maxQueued);
    subscribe(topic, handler, opts);
  };
  const { svc } = await w.service({ bus, busMaxQueued: 1 });
  t.strictSame(Object.fromEntries(bounds), { [WORK_TOPIC]: undefined, [MX_TOPIC]: 1, [RESULTS_TOPIC]: 1 }, 'the work topic is not bounded (an intake publishes it all before probing starts)');
  // In hand (at most the 2 results partitions, one message each) plus at most one waiting.
  let most = 0;
  const sampler = setInterval(() => (most = Math.max(most, bus.pending(RESULTS_TOPIC))), 1);
  const emails = Array.from({ length: 3_000 }, (_, i) => `u${i}@d${i % 300}.test`);
  const job = await svc.createJsonJob(acc, emails);
  const done = await w.completed(job.id, 30_000);
  clearInterval(sampler);
  t.strictSame([done.total_rows, done.unique_emails, done.processed, done.valid, done.credits_charged, done.credits_refunded], [3_000, 3_000, 3_000, 3_000, 3_000, 0]);
  t.ok(most <= 3, `results messages in hand or waiting at most 3 (seen ${most})`);
  const rows = await w.store.jobs.results(job.id, -1, 5_000);
  t.strictSame(rows.map((r) => r.idx), Array.from({ length: 3_000 }, (_, i) => i), 'one result row per unique email');
  t.strictSame(await w.store.ledger.totals(acc), { balance: 2_000, reserved: 0 });
});

t.test('a DNS timeout or SERVFAIL in a job is probed again later, like greylisting, within the same attempts', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 10 });
  const { svc } = await w.service({ greylistDelayMs: 40, greylistAttempts: 3, ...reprobeClock(40).options });
  const job = await svc.createJsonJob(acc, ['a@dt.test', 'b@sf.test']);
  const done = await w.completed(job.id);
  const rows = await w.store.jobs.results(job.id, -1, 10);
  t.strictSame(rows.map((r) => [r.email, r.verdict.result, r.verdict.reason_code, r.state]), [
    ['a@dt.test', 'valid', 'accepted', 'done'],
    ['b@sf.test', 'unknown', 'dns_servfail', 'done'],
  ], 'the timeout was probed again and answered; SERVFAIL three times, then its unknown stands');
  t.strictSame([w.verifier.tries.get('a@dt.test'), w.verifier.tries.get('b@sf.test')], [2, 3], 'probes: 2 and 3');
  t.strictSame([done.credits_charged, done.credits_refunded], [1, 1]);
});

t.test('a mail server that could not be reached in a job is probed again later, within the same attempts, after the connection delay', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 10 });
  // Wake-ups up to the connection delay are followed (not the scheduler's minute poll, nor the greylist delay).
  const clock = reprobeClock(45_000);
  const { svc } = await w.service({ greylistDelayMs: 120_000, greylistAttempts: 3, ...clock.options });
  const job = await svc.createJsonJob(acc, ['a@cf.test', 'b@cd.test']);
  const done = await w.completed(job.id);
  const rows = await w.store.jobs.results(job.id, -1, 10);
  t.strictSame(rows.map((r) => [r.email, r.verdict.result, r.verdict.reason_code, r.state]), [
    ['a@cf.test', 'valid', 'accepted', 'done'],
    ['b@cd.test', 'unknown', 'smtp_connection_failed', 'done'],
  ], 'the refused connection was probed again and answered; the dead server three times, then its unknown stands');
  t.strictSame([w.verifier.tries.get('a@cf.test'), w.verifier.tries.get('b@cd.test')], [2, 3], 'probes: 2 and 3');
  t.ok(clock.wakes.includes(45_000), `a re-probe was armed for the connection delay (45 s, shorter than the greylist delay): ${clock.wakes.join(', ')}`);
  t.strictSame([done.credits_charged, done.credits_refunded], [1, 1]);
});

t.test('the orphan sweep deletes stored input whose intake died before creating its job, once it is old enough; nothing of a job', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 10 });
  const { svc } = await w.service();
  const job = await svc.createJsonJob(acc, ['a@v.test']);
  await w.completed(job.id);
  // What a front killed between storing a job's input and creating the job leaves behind.
  const dead = 'job_0000000000000000000000aa';
  await w.blobs.put(`jobs/${dead}/rows.ndjson`, ['{"v":1}\n']);
  await w.blobs.put(`jobs/${dead}/dups.bin`, [Buffer.from([0])]);
  const mine = async () => (await w.blobs.list('jobs/')).map((e) => e.key).filter((k) => k.includes(dead) || k.includes(job.id)).sort();
  t.equal(await svc.sweepOrphanBlobs(), 0, 'younger than an hour: kept (an intake may still be on its way to creating the job)');
  t.strictSame(await mine(), [`jobs/${dead}/dups.bin`, `jobs/${dead}/rows.ndjson`, `jobs/${job.id}/dups.bin`, `jobs/${job.id}/results.csv`, `jobs/${job.id}/rows.ndjson`].sort());
  t.equal(await svc.sweepOrphanBlobs(0), 2, 'old enough: the two blobs without a job go');
  t.strictSame(await mine(), [`jobs/${job.id}/dups.bin`, `jobs/${job.id}/results.csv`, `jobs/${job.id}/rows.ndjson`].sort(), "the job's blobs stay");
  t.equal(await svc.sweepOrphanBlobs(0), 0, 'again: nothing');
});

t.test('restart recovery: a job whose results are all stored but that was not finalized is finalized', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 10 });
  // Intake with nobody consuming the bus (the process dies right after the 202).
  const dead = new InProcessBus();
  const job = await intake({ store: w.store, blobs: w.blobs, bus: dead }, { accountId: acc, source: 'json', columns: ['email'], emailIndex: 0, rows: [[{ fields: ['a@v.test'], email: 'a@v.test' }, { fields: ['b@x.test'], email: 'b@x.test' }]] });
  await dead.close();
  const v = scripted(new Map());
  const { priceVerdict } = await import('../src/index.ts');
  for (const [idx, email] of [[0, 'a@v.test'], [1, 'b@x.test']] as const) {
    const verdict = v(email);
    await w.store.jobs.recordResults(job.id, [{ idx, email, verdict: priceVerdict(verdict), chargeable: verdict.chargeable, attempts: 1, state: 'done' }]);
  }
  t.equal((await w.store.jobs.byId(job.id))!.status, 'processing');
  await w.service();
  const done = await w.completed(job.id);
  t.strictSame([done.credits_charged, done.credits_refunded, done.results_key], [1, 1, `jobs/${job.id}/results.csv`]);
  t.equal(w.verifier.calls.length, 0, 'nothing was probed again');
});

t.test('onFinal and onFinalTx run once per job', async (t) => {
  const w = await world(t);
  const acc = await w.store.accounts.create({ credits: 10 });
  const finals: string[] = [];
  const inTx: string[] = [];
  const { svc, bus } = await w.service({
    onFinal: (job) => void finals.push(`${job.id}:${job.status}`),
    onFinalTx: async (tx, job) => {
      await tx.query('SELECT 1');
      inTx.push(`${job.id}:${job.status}`);
    },
  });
  const job = await svc.createJsonJob(acc, ['a@v.test', 'b@v.test']);
  await w.completed(job.id);
  // Stopped and drained: every handler that could call a hook again has finished.
  await svc.stop();
  await bus.close();
  t.strictSame(finals, [`${job.id}:completed`]);
  t.strictSame(inTx, [`${job.id}:completed`]);
});

t.test('the worker probes at most maxInFlight addresses at once across its lanes, in arrival order', async (t) => {
  let inFlight = 0;
  let most = 0;
  const probed: string[] = [];
  const verifier: JobVerifier = {
    // One MX host per message (u0-u2 on h0, u3-u5 on h1 …): each stays an MX message of 3.
    async routes(emails) {
      return emails.map((e) => {
        const host = `h${Math.floor(Number(/^u(\d+)@/.exec(e)![1]) / 3)}.test`;
        return { domain: 'v.test', host, mx: { kind: 'mx' as const, hosts: [{ exchange: host, priority: 10 }] } };
      });
    },
    async verify(emails) {
      inFlight += emails.length;
      most = Math.max(most, inFlight);
      probed.push(...emails);
      await new Promise((r) => setTimeout(r, 20)); // the probe's work: long enough for others to overlap if allowed
      inFlight -= emails.length;
      return emails.map((e) => scripted(new Map())(e));
    },
  };
  const bus = new InProcessBus({ retryDelayMs: 20 });
  t.teardown(() => bus.close());
  const { emails: results, all } = collectResults(bus);
  const store = { jobs: { claimForWork: async () => true, isProcessing: async () => true } } as unknown as ConstructorParameters<typeof JobWorker>[0]['store'];
  const worker = new JobWorker({ store, verifier, bus, greylistDelayMs: 10, greylistAttempts: 1, maxInFlight: 5, smtpInFlight: 5 });
  worker.start(16);
  const sent: string[] = [];
  for (let i = 0; i < 8; i++) {
    const items = [0, 1, 2].map((k) => [i * 3 + k, `u${i * 3 + k}@v.test`, 0] as [number, string, number]);
    sent.push(...items.map((x) => x[1]));
    await bus.publish(WORK_TOPIC, `d${i}`, { v: 1, job_id: 'job_x', items } as unknown as BusMessage);
  }
  await all(sent.length);
  t.strictSame(results.sort(), [...sent].sort(), 'every address probed and its result published');
  t.equal(most, 3, '8 messages of 3 on 16 lanes with room for 5: one message at a time');
  t.strictSame(probed, sent, 'in the order they came');
  t.throws(() => new JobWorker({ store, verifier, bus, greylistDelayMs: 10, greylistAttempts: 1, maxInFlight: 0 }), RangeError);
});

t.test("MX-host messages have budgets of their own: every host's first message is probed at once, a host's next waits for its share", async (t) => {
  // 10 MX hosts, two messages of 4 emails each (u0-u3 and u40-u43 on h0 …), probes held until released.
  let inFlight = 0;
  let most = 0;
  const byHost = new Map<string, number>();
  let mostOnOneHost = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const hostOfEmail = (e: string) => `h${Math.floor(Number(/^u(\d+)@/.exec(e)![1]) / 4) % 10}.test`;
  const verifier: JobVerifier = {
    async routes(emails) {
      return emails.map((e) => ({ domain: 'v.test', host: hostOfEmail(e), mx: { kind: 'mx' as const, hosts: [{ exchange: hostOfEmail(e), priority: 10 }] } }));
    },
    async verify(emails) {
      const host = hostOfEmail(emails[0]!);
      inFlight += emails.length;
      byHost.set(host, (byHost.get(host) ?? 0) + emails.length);
      most = Math.max(most, inFlight);
      mostOnOneHost = Math.max(mostOnOneHost, byHost.get(host)!);
      await gate;
      inFlight -= emails.length;
      byHost.set(host, byHost.get(host)! - emails.length);
      return emails.map((e) => scripted(new Map())(e));
    },
  };
  const bus = new InProcessBus({ retryDelayMs: 20 });
  t.teardown(() => bus.close());
  const { emails: results, all } = collectResults(bus);
  const store = { jobs: { claimForWork: async () => true, isProcessing: async () => true } } as unknown as ConstructorParameters<typeof JobWorker>[0]['store'];
  // The general budget (maxInFlight) has room for one message: MX-host messages do not use it.
  const worker = new JobWorker({ store, verifier, bus, greylistDelayMs: 10, greylistAttempts: 1, maxInFlight: 4, hostInFlight: 4, smtpInFlight: 1000 });
  worker.start(16);
  const sent: string[] = [];
  for (let i = 0; i < 20; i++) {
    const items = [0, 1, 2, 3].map((k) => [i * 4 + k, `u${i * 4 + k}@v.test`, 0] as [number, string, number]);
    sent.push(...items.map((x) => x[1]));
    await bus.publish(WORK_TOPIC, `d${i}`, { v: 1, job_id: 'job_x', items } as unknown as BusMessage);
  }
  await until(() => inFlight === 40, 5000, 'the first message of each of the 10 hosts in probes');
  t.equal(mostOnOneHost, 4, "a host's second message waits for its share (hostInFlight 4)");
  release();
  await all(sent.length);
  t.strictSame(results.sort(), [...sent].sort(), 'every address probed and its result published');
  t.equal(most, 40, 'ten hosts at once, never more than one message each');
  t.strictSame(mxHostOf({ v: 1, job_id: 'j', items: [], mx: { 'a.test': { kind: 'mx', hosts: [{ exchange: 'B.example', priority: 20 }, { exchange: 'A.example', priority: 10 }] } } }), 'a.example', 'the first MX host by priority');
  t.equal(mxHostOf({ v: 1, job_id: 'j', items: [] }), undefined, 'work that needs no SMTP session');
  t.throws(() => new JobWorker({ store, verifier, bus, greylistDelayMs: 10, greylistAttempts: 1, hostInFlight: 0 }), RangeError);
});

t.test('the route stage keys MX work by the first MX host of each domain, with the MX answers; what needs no SMTP by its domain bucket', async (t) => {
  const hostOf: Record<string, string | null> = { 'a.test': 'mx1.shared.test', 'b.test': 'mx1.shared.test', 'c.test': 'mx2.other.test', 'gone.test': null };
  const answer = (host: string) => ({ kind: 'mx' as const, hosts: [{ exchange: host, priority: 10 }, { exchange: `backup.${host}`, priority: 20 }] });
  const lookups: string[] = [];
  const probedWith: Array<{ emails: string[]; mx: Record<string, unknown> }> = [];
  const verifier: JobVerifier = {
    async routes(emails) {
      return emails.map((e) => {
        const domain = e.slice(e.indexOf('@') + 1);
        if (!(domain in hostOf)) return null; // not an address
        lookups.push(domain);
        const host = hostOf[domain]!;
        return { domain, host, mx: host ? answer(host) : { kind: 'nxdomain' as const } };
      });
    },
    async verify() {
      throw new Error('the probe stage looked the MX up again');
    },
    async verifyRouted(emails, mx) {
      probedWith.push({ emails: [...emails], mx: { ...mx } });
      return emails.map((e) => scripted(new Map())(e));
    },
  };
  const bus = new InProcessBus({ retryDelayMs: 20 });
  t.teardown(() => bus.close());
  const mxMessages: Array<{ key: string; emails: string[] }> = [];
  const publish = bus.publish.bind(bus);
  bus.publish = async (topic, key, message) => {
    if (topic === MX_TOPIC) mxMessages.push({ key, emails: (message.items as Array<[number, string, number]>).map((i) => i[1]) });
    return publish(topic, key, message);
  };
  const { emails: results, all } = collectResults(bus);
  const store = { jobs: { claimForWork: async () => true, isProcessing: async () => true } } as unknown as ConstructorParameters<typeof JobWorker>[0]['store'];
  new JobWorker({ store, verifier, bus, greylistDelayMs: 10, greylistAttempts: 1 }).start(4);
  const emails = ['x1@a.test', 'x2@b.test', 'x3@c.test', 'x4@gone.test', 'x5@a.test', 'not-an-address', 'x6@b.test'];
  // Two work messages (two domain buckets) routed together: their emails for one host go as one MX message.
  await bus.publish(WORK_TOPIC, 'd1', { v: 1, job_id: 'job_r', items: emails.slice(0, 6).map((e, i) => [i, e, 0]) } as unknown as BusMessage);
  await bus.publish(WORK_TOPIC, 'd2', { v: 1, job_id: 'job_r', items: [[6, emails[6], 0]] } as unknown as BusMessage);
  await all(emails.length);
  t.strictSame(results.sort(), [...emails].sort(), 'every address probed once and its result published');
  const byKey = Object.fromEntries(mxMessages.map((m) => [m.key, m.emails]));
  t.strictSame(byKey['mx:mx1.shared.test'], ['x1@a.test', 'x2@b.test', 'x5@a.test', 'x6@b.test'], 'two domains on one host, from two work messages: one key, one message');
  t.strictSame(byKey['mx:mx2.other.test'], ['x3@c.test']);
  const rest = mxMessages.filter((m) => !m.key.startsWith('mx:'));
  t.ok(rest.every((m) => /^d\d+$/.test(m.key)), `no MX: keyed by domain bucket (${rest.map((m) => m.key).join(', ')})`);
  t.strictSame(rest.flatMap((m) => m.emails).sort(), ['not-an-address', 'x4@gone.test']);
  t.equal(mxMessages.length, 2 + rest.length, 'one message per key');
  t.strictSame(lookups.sort(), ['a.test', 'a.test', 'b.test', 'b.test', 'c.test', 'gone.test'], 'one route per email, in the route stage only');
  const shared = probedWith.find((p) => p.emails.includes('x1@a.test'))!;
  t.strictSame(shared.mx, { 'a.test': answer('mx1.shared.test'), 'b.test': answer('mx1.shared.test') }, 'the MX message carries the answers of its domains, every host');
  t.strictSame(probedWith.find((p) => p.emails.includes('x3@c.test'))!.mx, { 'c.test': answer('mx2.other.test') });
  t.strictSame(probedWith.find((p) => p.emails.includes('x4@gone.test'))!.mx, {}, 'a domain without mail hosts carries none: the probe stage answers it from DNS again');
});
