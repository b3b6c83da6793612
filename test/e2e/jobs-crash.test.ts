// kill -9 during a job (the acceptance test "kill -9 the process at 10 random moments of a job: it completes,
// no row twice, credits exact, one webhook event id"). The real service process (`npm start`'s
// entry point) runs a JSON job with a webhook_url on the simulated internet and is killed with
// SIGKILL at 10 moments drawn from a seeded random source, each time restarted on the same data
// directory:
//   - during intake: while the input is being written to the blob store, right after the POST
//     (the client retries with its Idempotency-Key when the 202 never came);
//   - during recovery: while a restarted process resumes the job, before it listens;
//   - while results come in, at a random fraction of the probes;
//   - while greylisted addresses wait for their durable re-probe;
//   - during finalization: while the results CSV is being rendered;
//   - right after the job completed (the webhook event just committed to the outbox).
// After the last restart the job completes. Then: every input row exactly once in the results CSV
// in input order with the sim's verdict, the exact 2.2 counters, reserved = charged + refunded,
// one reserve, one charge and one release in the ledger, the balance exact, one result row per
// unique email, one event in the outbox, and the receiver got `job.completed` under ONE
// X-Webhook-Id (perhaps more than once: delivery is at least once).
//
// Replay a run: CRASH_SEED=<seed printed by the test> npx tap test/e2e/jobs-crash.test.ts

import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { openStore } from '@svc/store';
import { startSim } from '../sim/index.ts';
import { BOOTSTRAP_KEY, stackEnv } from '../helpers/stack.ts';
import { migratedPglite } from '../helpers/pglite.ts';
import {
  BAD_SYNTAX,
  countersFrom,
  generatedAt,
  knownAt,
  parseResults,
  respelled,
  roleAt,
  seededRandom,
  seedFrom,
  shownCell,
  shuffle,
  simDomain,
  startWebhookReceiver,
  verdictKey,
  type InputEmail,
} from '../helpers/jobs.ts';

// Eleven starts of the service take most of the time (about 4 s each on a quiet 2-core machine:
// about 60 s in all; 7-10 s each when the machine is busy): the limit is generous.
t.setTimeout(240_000);

const SEED = seedFrom(process.env.CRASH_SEED);
// Two streams from the seed: the kill plan's, and the input's (so changing one leaves the other).
const rand = seededRandom(SEED);
const inputRand = seededRandom(SEED ^ 0x5eed);
const between = (lo: number, hi: number): number => lo + rand() * (hi - lo);
t.comment(`CRASH_SEED=${SEED} (replay: CRASH_SEED=${SEED} npx tap test/e2e/jobs-crash.test.ts)`);

const ROOT = path.resolve(import.meta.dirname, '../..');
const GREYLIST_DELAY_MS = 3000;
const GREYLIST_ATTEMPTS = 3;
const CREDITS = 5000;
// Every reply 50 ms late: the probing phase lasts long enough to be killed at several points.
const sim = await startSim({ tarpitMs: 5000, greylistMs: 300, replyLatencyMs: 50 });
t.teardown(() => sim.close());
const receiver = await startWebhookReceiver();
t.teardown(() => receiver.close());
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-jobs-crash-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = stackEnv(sim, dataDir, {
  SVC_LOG_LEVEL: 'info',
  SVC_BOOTSTRAP_CREDITS: String(CREDITS),
  SVC_JOB_GREYLIST_DELAY_MS: String(GREYLIST_DELAY_MS),
  SVC_JOB_GREYLIST_ATTEMPTS: String(GREYLIST_ATTEMPTS),
  SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
  SVC_SECRET: 'crash-test-secret-0123456789abcdef',
  // Room for a busy machine (CI runs another file beside this one, and each restart compiles its
  // code while probes are in flight): at the stack's 1.5 s, two CI runs on a slow hour had most
  // rows smtp_timeout. No address of this job is a tarpit's.
  SVC_SMTP_TIMEOUT_MS: '5000',
});
// The data directory made from the test template (initdb is what a first start would spend its
// seconds on; process.test.ts covers that start).
await (await migratedPglite(dataDir)).close();

// ------------------------------------------------------------------------------------------------
// The job: 360 unique addresses with the sim's verdict for each, repeated (another domain case,
// the IDN's ASCII form, the same string) into 15,360 rows in a seeded order: the results CSV takes
// long enough to render that a kill can land in it.

const d = simDomain;
const uniques: InputEmail[] = [
  ...knownAt(d('accept.test')),
  ...knownAt(d('slowmx.test')),
  ...knownAt(d('gmail.com')),
  ...knownAt(d('greylist.test')), // valid after the re-probe
  ...knownAt(d('bücher.test')),
  roleAt(d('accept.test'), 'info'),
  roleAt(d('slowmx.test'), 'support'),
  ...generatedAt(d('accept.test'), 120),
  ...generatedAt(d('slowmx.test'), 90),
  ...generatedAt(d('gmail.com'), 30),
  ...generatedAt(d('bücher.test'), 20),
  ...generatedAt(d('greylist.test'), 40), // deferred once, then invalid
  ...generatedAt(d('greylist-forever.test'), 8), // deferred twice, then unknown
  ...generatedAt(d('catchall.test'), 20),
  ...generatedAt(d('mailinator.com'), 10),
  ...generatedAt(d('nxdomain.test'), 5),
  ...BAD_SYNTAX.slice(0, 5).map((email) => ({ email, expect: 'invalid/invalid_syntax' })),
];
/** Addresses that wait for a re-probe (greylisting) before their verdict. */
const DEFERRED = uniques.filter((u) => /@greylist(-forever)?\.test$/.test(u.email)).length;
const UNIQUE = uniques.length;
const rows: InputEmail[] = [...uniques];
for (let i = 0; i < 15_000; i++) {
  const u = uniques[Math.floor(inputRand() * UNIQUE)]!;
  const r = inputRand();
  // A string that is not an address is deduplicated by its exact text: it only repeats as is.
  rows.push({ email: u.expect === 'invalid/invalid_syntax' || r < 0.3 ? u.email : respelled(u.email, inputRand), expect: u.expect! });
}
// The first occurrence of each unique address keeps its place ahead of its repeats.
const head = shuffle(rows.slice(0, UNIQUE), inputRand);
const tail = shuffle(rows.slice(UNIQUE), inputRand);
const ordered: InputEmail[] = [];
{
  const seen = new Set<string>();
  const pool = [...head];
  let ti = 0;
  while (pool.length > 0 || ti < tail.length) {
    const takeRepeat = ti < tail.length && seen.has(tail[ti]!.expect! + canonical(tail[ti]!.email)) && (pool.length === 0 || inputRand() < 0.85);
    if (takeRepeat) ordered.push(tail[ti++]!);
    else if (pool.length > 0) {
      const u = pool.shift()!;
      seen.add(u.expect! + canonical(u.email));
      ordered.push(u);
    } else ordered.push(tail[ti++]!); // unreachable: every repeat's first is in the pool
  }
}
const emails = ordered.map((r) => r.email);
const expectOf = ordered.map((r) => r.expect!);

function canonical(email: string): string {
  const at = email.lastIndexOf('@');
  if (at <= 0 || at === email.length - 1) return email;
  const dom = email.slice(at + 1).toLowerCase();
  return `${email.slice(0, at)}@${dom === 'xn--bcher-kva.test' ? 'bücher.test' : dom}`;
}

// ------------------------------------------------------------------------------------------------
// The service process

interface Proc {
  n: number;
  child: ChildProcess;
  startedAt: number;
  /** Parsed log lines so far. */
  lines: Array<Record<string, unknown>>;
  /** The API's URL once it listens; undefined if the process exited first. */
  ready: Promise<string | undefined>;
  url?: string;
  readyAt?: number;
  exited: Promise<void>;
  output: () => string;
  /** Called on every chunk of output and at exit. */
  listeners: Set<() => void>;
}

let spawned = 0;

function spawnService(): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  let out = '';
  let partial = '';
  const lines: Array<Record<string, unknown>> = [];
  const listeners = new Set<() => void>();
  let resolveReady!: (url: string | undefined) => void;
  const ready = new Promise<string | undefined>((r) => (resolveReady = r));
  const p: Proc = { n: ++spawned, child, startedAt: Date.now(), lines, ready, exited: undefined as never, output: () => out, listeners };
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    out += chunk;
    partial += chunk;
    let nl: number;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      try {
        const obj = JSON.parse(line) as Record<string, unknown>;
        lines.push(obj);
        if (obj.msg === 'email validation service listening' && typeof obj.url === 'string') {
          p.url = obj.url;
          p.readyAt = Date.now();
          resolveReady(obj.url);
        }
      } catch {
        /* not a log line */
      }
    }
    for (const l of listeners) l();
  });
  child.stderr!.on('data', (d) => (out += d));
  p.exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolveReady(undefined);
      for (const l of listeners) l();
      resolve();
    }),
  );
  return p;
}

/** Resolves true once a log line matching `pred` was written (earlier ones count), false if the process exits or `ms` pass. */
function logLine(p: Proc, pred: (l: Record<string, unknown>) => boolean, ms: number): Promise<boolean> {
  const { listeners } = p;
  return new Promise<boolean>((resolve) => {
    const check = () => {
      if (p.lines.some(pred)) return done(true);
      if (p.child.exitCode !== null || p.child.signalCode !== null) return done(false);
    };
    const timer = setTimeout(() => done(false), ms);
    function done(v: boolean): void {
      clearTimeout(timer);
      listeners.delete(check);
      resolve(v);
    }
    listeners.add(check);
    check();
  });
}

/** SIGKILL; a process that ended on its own before that is a failure. */
async function kill9(p: Proc): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) throw new Error(`service ${p.n} exited by itself (${p.child.exitCode ?? p.child.signalCode}): ${p.output().slice(-4000)}`);
  p.child.kill('SIGKILL');
  await p.exited;
}

/** Waits until the process listens (120 s at most: a first start initialises the data directory, a minute and more on a loaded machine). */
async function listening(p: Proc): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const url = await Promise.race([p.ready, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 120_000)))]);
  clearTimeout(timer);
  if (!url) throw new Error(`service ${p.n} did not start: ${p.output().slice(-4000)}`);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function call(p: Proc, method: string, route: string, opts: { body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(p.url + route, {
    method,
    headers: { 'x-api-key': BOOTSTRAP_KEY, ...(opts.body ? { 'content-type': 'application/json' } : {}), ...opts.headers },
    ...(opts.body ? { body: JSON.stringify(opts.body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* CSV */
  }
  return { status: res.status, body: parsed, text };
}

// ------------------------------------------------------------------------------------------------
// The kill moments

type Moment =
  | { kind: 'intake'; jitterMs: number }
  | { kind: 'recovery'; jitterMs: number; key: number }
  | { kind: 'probing'; fraction: number; jitterMs: number; key: number }
  | { kind: 'deferred'; jitterMs: number; key: number }
  | { kind: 'render'; jitterMs: number }
  | { kind: 'completed' };

function plan(): Moment[] {
  const middle: Array<Extract<Moment, { key: number }>> = [];
  for (let i = 0; i < 7; i++) {
    const r = rand();
    if (r < 0.2) middle.push({ kind: 'recovery', jitterMs: Math.round(between(0, 400)), key: rand() });
    else if (r < 0.75) {
      const fraction = between(0.02, 0.98);
      middle.push({ kind: 'probing', fraction, jitterMs: Math.round(between(0, 60)), key: fraction });
    } else middle.push({ kind: 'deferred', jitterMs: Math.round(between(0, 400)), key: 1 + rand() }); // well inside a re-probe's delay
  }
  middle.sort((a, b) => a.key - b.key);
  return [{ kind: 'intake', jitterMs: Math.round(between(0, 600)) }, ...middle, { kind: 'render', jitterMs: Math.round(between(0, 20)) }, { kind: 'completed' }];
}

const describe = (m: Moment): string =>
  m.kind === 'probing' ? `probing ${(m.fraction * 100).toFixed(0)}% +${m.jitterMs} ms` : m.kind === 'completed' ? 'completed' : `${m.kind} +${m.jitterMs} ms`;

const blobsDir = path.join(dataDir, 'blobs', 'jobs');
function blobFiles(jobId?: string): string[] {
  try {
    const dirs = jobId ? [jobId] : readdirSync(blobsDir);
    return dirs.flatMap((dir) => {
      try {
        return readdirSync(path.join(blobsDir, dir));
      } catch {
        return [];
      }
    });
  } catch {
    return [];
  }
}

/** Resolves when `pred` holds (polled every `everyMs`), or false after `ms`. */
async function until(pred: () => boolean | Promise<boolean>, ms: number, everyMs: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await pred()) return true;
    await sleep(everyMs);
  }
  return false;
}

const RUNNING = new Set(['queued', 'processing']);
/** The account's webhook signing secret (rotated before the job is posted). */
let webhookSecret: string | undefined;

t.test(`kill -9 at 10 random moments of a job with a webhook (CRASH_SEED=${SEED}): it completes once, exactly`, async (t) => {
  const t0 = Date.now();
  const at = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const moments = plan();
  t.comment(`${UNIQUE} unique addresses (${DEFERRED} greylisted), ${emails.length} rows; kill plan: ${moments.map(describe).join(' | ')}`);
  const request = { emails, webhook_url: receiver.url };
  const idemKey = `crash-${SEED}`;
  let jobId: string | undefined;
  let last: any; // the job as last seen

  const post = async (p: Proc): Promise<void> => {
    // The account's webhook signing secret, shown once: the receiver verifies with it.
    if (webhookSecret === undefined) {
      const s = await call(p, 'POST', '/v1/webhooks/secret/rotate');
      if (s.status !== 201) throw new Error(`POST /v1/webhooks/secret/rotate: ${s.status} ${s.text}`);
      webhookSecret = s.body.secret as string;
    }
    const r = await call(p, 'POST', '/v1/validate/batch', { body: request, headers: { 'idempotency-key': idemKey } });
    if (r.status !== 202) throw new Error(`POST /v1/validate/batch: ${r.status} ${r.text}`);
    if (jobId !== undefined && r.body.id !== jobId) throw new Error(`the retried POST made another job: ${r.body.id} after ${jobId}`);
    jobId = r.body.id;
    t.strictSame([r.body.total_rows, r.body.unique_emails, r.body.credits_reserved], [emails.length, UNIQUE, UNIQUE], 'the 202 counts the rows, unique emails and credits held');
  };
  const poll = async (p: Proc): Promise<any> => {
    const r = await call(p, 'GET', `/v1/csv/jobs/${jobId}`);
    if (r.status !== 200) throw new Error(`GET job: ${r.status} ${r.text}`);
    return (last = r.body);
  };
  // A kill after the receiver got the event may have come before the delivery was recorded: the
  // event then stays leased, and is sent again (same id) once the lease passes.
  let killedAfterDelivery = false;
  const state = () => (last ? `${last.status} ${last.progress.processed}/${UNIQUE}` : 'no job yet');

  for (const [i, m] of moments.entries()) {
    // Temporary files a killed process left (the next start sweeps them) are not this one's.
    const stale = new Set(blobFiles());
    const fresh = (prefix: string) => blobFiles(jobId).some((f) => f.startsWith(prefix) && !stale.has(f));
    const p = spawnService();
    let note = '';
    if (m.kind === 'intake') {
      await listening(p);
      // The POST, and the kill while its input is written (or as soon as it answered).
      const answer = post(p).then(
        () => 'answered',
        (err: unknown) => `no answer (${(err as Error).message.slice(0, 60)})`,
      );
      let answered: string | undefined;
      void answer.then((a) => (answered = a));
      await until(() => answered !== undefined || fresh('rows.ndjson.partial-'), 20_000, 1);
      await sleep(m.jitterMs);
      await kill9(p);
      note = `POST ${answered ?? 'in flight'}; ${await answer}`;
    } else {
      if (jobId === undefined) {
        // The first POST never got its 202: the client tries again with the same Idempotency-Key.
        await listening(p);
        await post(p);
        note = 'POST retried; ';
      }
      if (m.kind === 'recovery') {
        // A restart resumes unfinished jobs before it listens: no such line by then, nothing to resume.
        const resuming = (l: Record<string, unknown>) => typeof l.msg === 'string' && l.msg.startsWith('resuming job');
        await Promise.race([logLine(p, resuming, 60_000), p.ready]);
        const resumed = p.lines.some(resuming);
        await sleep(m.jitterMs);
        note += resumed ? `resuming, ${p.url ? 'after' : 'before'} listening` : 'nothing to resume';
        await kill9(p);
      } else if (m.kind === 'probing' || m.kind === 'deferred') {
        await listening(p);
        const target = m.kind === 'probing' ? Math.ceil(m.fraction * (UNIQUE - DEFERRED)) : UNIQUE - DEFERRED;
        const hit = await until(async () => {
          const j = await poll(p);
          return j.progress.processed >= target || !RUNNING.has(j.status);
        }, 30_000, 15);
        await sleep(m.jitterMs);
        note += `${hit ? '' : 'timed out; '}seen ${state()}`;
        await kill9(p);
      } else if (m.kind === 'render') {
        // The directory is looked at every millisecond, the job's status (an HTTP request) every 50.
        let final = false;
        let polling: Promise<unknown> | undefined;
        const hit = await until(() => {
          if (fresh('results.csv.partial-')) return true;
          if (p.url && !polling) polling = poll(p).then((j) => (final = !RUNNING.has(j.status)), () => {}).finally(() => sleep(50).then(() => (polling = undefined)));
          return final;
        }, 60_000, 1);
        const seen = fresh('results.csv.partial-');
        await sleep(m.jitterMs);
        note += `${hit ? (seen ? 'results CSV being written' : `missed: ${state()}`) : 'timed out'}`;
        await kill9(p);
      } else {
        const completed = (l: Record<string, unknown>) => l.msg === 'job completed';
        await Promise.race([logLine(p, completed, 60_000), p.ready]);
        // Listening and not completed in this process: completed before, or still to come.
        if (!p.lines.some(completed) && p.url && RUNNING.has((await poll(p)).status)) await logLine(p, completed, 60_000);
        const done = p.lines.some(completed);
        note += done ? `"job completed" logged; webhook requests so far ${receiver.received.length}` : `already ${state()}`;
        await kill9(p);
      }
    }
    if (receiver.received.length > 0) killedAfterDelivery = true;
    const line = `kill #${i + 1} ${describe(m)} at ${at()} (process up ${((Date.now() - p.startedAt) / 1000).toFixed(1)} s, listening after ${p.readyAt ? `${((p.readyAt - p.startedAt) / 1000).toFixed(1)} s` : '-'}): ${note}`;
    t.comment(line);
  }

  // The last start: the job completes and its webhook is delivered.
  const p = spawnService();
  await listening(p);
  if (jobId === undefined) await post(p);
  const id = jobId!;
  t.ok(await until(async () => (await poll(p)).status === 'completed', 60_000, 100), `the job completed after the restarts (${at()}; ${state()})`);
  const job = last;
  t.strictSame(job.progress, { processed: UNIQUE, total: UNIQUE, percent: 100 });
  await receiver.waitFor(1, 20_000).catch((err: Error) => t.fail(err.message));
  // A moment for a second delivery, should one be on its way.
  await sleep(1500);

  // The results CSV: every input row once, in input order, with the sim's verdict.
  const link = (await call(p, 'GET', `/v1/csv/jobs/${id}/download?mode=url`)).body;
  const csv = await (await fetch(link.url.replace(/^http:\/\/[^/]+/, p.url!))).text();
  const results = parseResults(csv);
  t.equal(results.length, emails.length, 'every input row once');
  t.strictSame(results.map((r) => r.email), emails.map(shownCell), 'in input order');
  const wrong = results.flatMap((r, i) => (verdictKey(r) === expectOf[i] ? [] : [`${emails[i]}: ${verdictKey(r)}, expected ${expectOf[i]}`]));
  t.strictSame(wrong.slice(0, 20), [], `every row has the verdict the sim expects (${wrong.length} differ)`);
  const firsts: typeof results = [];
  const seen = new Set<string>();
  const badCharge: string[] = [];
  for (const [i, r] of results.entries()) {
    const key = canonical(emails[i]!);
    const repeat = seen.has(key);
    seen.add(key);
    if (!repeat) firsts.push(r);
    if (repeat !== (r.charge_reason === 'duplicate_in_job') || (repeat && r.credits_charged !== '0')) badCharge.push(`row ${i} (${emails[i]}${repeat ? ', a repeat' : ''}): ${r.charge_reason}, ${r.credits_charged} credits`);
  }
  t.strictSame(badCharge.slice(0, 20), [], `repeats are duplicate_in_job at 0 credits, first occurrences are not (${badCharge.length} wrong)`);
  t.equal(firsts.length, UNIQUE, 'one first occurrence per unique address');

  // The 2.2 counters, exact; credits reserved = charged + refunded.
  const expected = countersFrom(firsts, emails.length);
  t.strictSame(job.results, expected, 'the 2.2 counters are the CSV counted');
  const highValue = uniques.filter((u) => u.expect === 'valid/accepted').length;
  t.equal(job.results.credits_charged, highValue, 'charged one credit per High-Value Validation');
  t.equal(job.results.credits_reserved, job.results.credits_charged + job.results.credits_refunded, 'reserved = charged + refunded');
  t.equal(job.credit_reservation.finalized, true);
  const credits = (await call(p, 'GET', '/v1/credits')).body;
  t.strictSame([credits.balance, credits.reserved], [CREDITS - highValue, 0], 'the balance paid the High-Value Validations only');
  const list = (await call(p, 'GET', '/v1/csv/jobs')).body;
  t.strictSame(list.jobs.map((j: any) => j.id), [id], 'one job, however often the POST was sent');
  const status = (await call(p, 'GET', `/v1/csv/jobs/${id}`)).body;

  // The webhook: job.completed under one event id, the body the status resource.
  const ids = new Set(receiver.received.map((r) => String(r.headers['x-webhook-id'])));
  t.equal(ids.size, 1, `one X-Webhook-Id (${receiver.received.length} request(s))`);
  for (const r of receiver.received) {
    const event = JSON.parse(r.body);
    t.strictSame([event.id, event.event, event.job.id], [r.headers['x-webhook-id'], 'job.completed', id], 'job.completed, the header names the body');
    t.strictSame(event.job, status, 'the event carries the completed job as GET shows it');
    const sig = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(r.headers['x-signature']));
    t.equal(sig?.[2], sig && createHmac('sha256', webhookSecret!).update(`${sig[1]}.${r.body}`).digest('hex'), "signed with the account's secret");
  }

  // The ledger, the result rows and the outbox, read from the store once the service stopped.
  p.child.kill('SIGTERM');
  await p.exited;
  const store = await openStore({ dataDir });
  t.teardown(() => store.close());
  const accountId = (await store.jobs.byId(id))!.account_id;
  const entries = (await store.ledger.entries(accountId, 100)).filter((e) => e.reservation_id !== null).map((e) => [e.kind, e.amount]);
  t.strictSame(entries, [['release', UNIQUE - highValue], ['charge', highValue], ['reserve', UNIQUE]], 'one reserve, one charge, one release');
  t.strictSame(await store.ledger.totals(accountId), { balance: CREDITS - highValue, reserved: 0 }, 'the ledger agrees');
  const stored = await store.jobs.results(id, -1, 100_000);
  t.strictSame(stored.map((r) => r.idx), Array.from({ length: UNIQUE }, (_, i) => i), 'one result row per unique email');
  t.ok(stored.every((r) => r.state === 'done'), 'every one done');
  const outbox = await store.webhooks.listForJob(id);
  t.strictSame(outbox.map((e) => [e.id, e.event]), [[[...ids][0], 'job.completed']], 'one event in the outbox, the one received');
  if (killedAfterDelivery && outbox[0]?.status === 'pending') t.comment('the event is still pending: a kill came between its delivery and the record of it (it is sent again, same id, when its lease passes)');
  else t.equal(outbox[0]?.status, 'delivered', `delivered (after ${outbox[0]?.attempts} attempt(s))`);
  t.comment(`wall time ${at()}; ${spawned} processes`);
});
