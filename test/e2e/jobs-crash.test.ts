// kill -9 during a job (issue 6: "a kill -9 at any moment loses nothing"): the real service
// process (`npm start`'s entry point) runs a JSON job on the simulated internet and is killed
// right after the 202, while results are coming in, and while greylisted addresses wait for their
// re-probe; each restart resumes the job from the store. At the end the job is completed with
// every input row once in its results CSV, the exact 2.2 counters, and exact credits: one charge
// and one release for the job's reservation, the balance down by the High-Value Validations only.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { openStore } from '@svc/store';
import { startSim } from '../sim/index.ts';
import { BOOTSTRAP_KEY, stackEnv } from '../helpers/stack.ts';
import { migratedPglite } from '../helpers/pglite.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const sim = await startSim({ tarpitMs: 5000 });
t.teardown(() => sim.close());
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-jobs-crash-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const env = stackEnv(sim, dataDir, { SVC_LOG_LEVEL: 'info', SVC_JOB_GREYLIST_DELAY_MS: '1200', SVC_BOOTSTRAP_CREDITS: '1000' });
// The data directory made from the test template (initdb is what a first start would spend its
// seconds on; process.test.ts covers that start).
await (await migratedPglite(dataDir)).close();

interface Proc {
  child: ChildProcess;
  url: string;
  exited: Promise<void>;
}

async function start(): Promise<Proc> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const m = /"url":"(http:\/\/[^"]+)"/.exec(out);
    if (m) return { child, url: m[1]!, exited };
    if (child.exitCode !== null) throw new Error(`service exited: ${out}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  child.kill('SIGKILL');
  throw new Error(`service did not start: ${out}`);
}

async function kill9(p: Proc): Promise<void> {
  p.child.kill('SIGKILL');
  await p.exited;
}

async function call(p: Proc, method: string, route: string, body?: unknown): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(p.url + route, { method, headers: { 'x-api-key': BOOTSTRAP_KEY, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* CSV */
  }
  return { status: res.status, body: parsed, text };
}

/** Polls the job until `until` holds; undefined if the job finished first (or time ran out). */
async function waitJob(p: Proc, id: string, until: (j: any) => boolean, ms: number): Promise<any> {
  const end = Date.now() + ms;
  for (;;) {
    const j = (await call(p, 'GET', `/v1/csv/jobs/${id}`)).body;
    if (until(j)) return j;
    if (j.status === 'completed' || Date.now() > end) return undefined;
    await new Promise((r) => setTimeout(r, 20));
  }
}

// 167 unique emails, 187 rows: 4 valid (2 of them behind 150 ms replies), 140 unknown users, 20
// greylisted unknown users (deferred, re-probed 1.2 s later: invalid), 3 bad strings, 20 repeats.
const known = ['jane.doe@accept.test', 'john.smith@accept.test', 'jane.doe@slowmx.test', 'john.smith@slowmx.test'];
const emails = [
  ...known,
  ...Array.from({ length: 100 }, (_, i) => `user${i}@accept.test`),
  ...Array.from({ length: 40 }, (_, i) => `user${i}@slowmx.test`),
  ...Array.from({ length: 20 }, (_, i) => `user${i}@greylist.test`),
  'not-an-email',
  '@lead',
  'x@',
];
const unique = emails.length;
emails.push(...Array.from({ length: 10 }, (_, i) => `user${i}@ACCEPT.test`), ...Array.from({ length: 10 }, (_, i) => `user${i}@slowmx.test`));

t.test('kill -9 right after the 202, mid-results and during greylist deferral: the job completes once, exactly', async (t) => {
  const t0 = Date.now();
  const at = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  let p = await start();
  const created = await call(p, 'POST', '/v1/validate/batch', { emails });
  t.equal(created.status, 202, 'POST /v1/validate/batch answers 202');
  const id: string = created.body.id;
  t.strictSame([created.body.total_rows, created.body.unique_emails, created.body.credits_reserved], [emails.length, unique, unique]);
  const kills: string[] = [];

  // 1. At once: the work may not even be published yet.
  await kill9(p);
  kills.push(`after the 202 (${at()})`);

  // 2. While results come in.
  p = await start();
  if (await waitJob(p, id, (j) => j.progress.processed > 0 && j.progress.processed < unique - 20, 20_000)) {
    await kill9(p);
    kills.push(`mid-results (${at()})`);
    p = await start();
  }

  // 3. While greylisted addresses wait for their re-probe (their schedule is in the store).
  if (await waitJob(p, id, (j) => j.progress.processed >= unique - 20 && j.status !== 'completed', 20_000)) {
    await kill9(p);
    kills.push(`greylisted rows deferred (${at()})`);
    p = await start();
  }
  t.comment(`killed: ${kills.join(', ')}`);
  t.ok(kills.length >= 2, 'killed at least twice during the job');

  const job = await waitJob(p, id, (j) => j.status === 'completed', 40_000);
  t.ok(job, `the job completed after the restarts (${at()})`);
  t.strictSame(job.progress, { processed: unique, total: unique, percent: 100 });
  t.strictSame(job.results, {
    total_rows: emails.length,
    unique_emails: unique,
    valid: 4,
    valid_role_based: 0,
    invalid: unique - 4,
    risky: 0,
    unknown: 0,
    role_based: 0,
    high_value: 4,
    catch_all: 0,
    credits_reserved: unique,
    credits_charged: 4,
    credits_consumed: 4,
    credits_refunded: unique - 4,
    credits_per_high_value_validation: 1,
  });
  const credits = (await call(p, 'GET', '/v1/credits')).body;
  t.strictSame([credits.balance, credits.reserved], [1000 - 4, 0], 'charged exactly the four High-Value Validations');

  const link = (await call(p, 'GET', `/v1/csv/jobs/${id}/download?mode=url`)).body;
  const csv = await (await fetch(link.url.replace(/^http:\/\/[^/]+/, p.url))).text();
  const lines = csv.split('\r\n').slice(1, -1);
  t.equal(lines.length, emails.length, 'every input row once');
  t.strictSame(lines.map((l) => l.split(',')[0]), emails.map((e) => (/^[=+\-@]/.test(e) ? `'${e}` : e)), 'in input order');
  t.equal(lines.filter((l) => l.includes(',high_value_validation,')).length, 4);
  t.equal(lines.filter((l) => l.includes(',duplicate_in_job,')).length, 20);

  // The ledger, read from the store once the service has stopped.
  p.child.kill('SIGTERM');
  await p.exited;
  const store = await openStore({ dataDir });
  t.teardown(() => store.close());
  const accountId = (await store.jobs.byId(id))!.account_id;
  const entries = (await store.ledger.entries(accountId, 100)).filter((e) => e.reservation_id !== null).map((e) => [e.kind, e.amount]);
  t.strictSame(entries, [['release', unique - 4], ['charge', 4], ['reserve', unique]], 'one reserve, one charge, one release');
  t.strictSame(await store.ledger.totals(accountId), { balance: 996, reserved: 0 });
  t.equal((await store.jobs.results(id, -1, 1000)).length, unique, 'one result row per unique email');
});
