// The cluster's acceptance test: "End-to-end, cluster profile, 2 fronts and 3 workers: a 10,000-address job over the
// simulated internet gives the same per-row verdicts, counters and credits as the embedded
// profile."
//
// One job (test/helpers/jobs.ts everyBehaviourJob: every sim behaviour, 10,000 rows, repeats in
// other spellings; the seed printed, JOBS_SEED=<seed> replays it) runs twice, each profile on a
// simulated internet of its own, so both meet greylisting fresh and neither answers from a cache
// the other filled:
// - embedded: one process (PGlite in memory, the in-process bus, cache and session limit), in this
//   process;
// - cluster: `cluster/cluster.ts --fronts 2 --workers 3`, the real CLI as a child process, on the
//   servers of scripts/infra-up.sh with a corner of its own (a fresh PostgreSQL schema, a Kafka
//   topic prefix, a Redis key prefix and SVC_EGRESS_ID). The job is submitted to front 1, its
//   status polled on front 2, the results CSV downloaded from both.
// Both start at once; then the cluster's job runs, the cluster is stopped (SIGTERM), and the
// embedded job runs: each job alone on the machine, so neither profile's verdicts depend on the
// other's load (run together, while five processes still compiled their code, a 3 s SMTP timeout
// cut whole pipelined rounds: 1,900 rows smtp_timeout).
//
// Checked: the results CSV is the same text in both profiles (every row and column: the same
// verdicts), and every row has the sim's expected verdict; repeats are duplicate_in_job at 0
// credits; the 2.2 counters, the credit reservation and the balance are the same in both and are
// the CSV counted; the ledger of each has one reserve, one charge and one release adding up to
// exactly that; job_results holds one done row per unique address; SIGTERM stops every cluster
// process cleanly (each logs "stopped", none hits the 30 s drain limit).
//
// PostgreSQL, Redis or Kafka missing: skipped, or a failure under CI_REQUIRE_SERVICES=1.
// CLUSTER_KEEP_LOGS=1 writes the cluster's whole output to a file (its path printed) even when the test passes.
// A job that does not finish fails with where its work waits: the consumer groups' lag per partition
// (describeKafkaGroups), its rows by state, and the PostgreSQL sessions that are not idle.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { loadConfig, startService } from '@svc/runtime';
import { hashKey, openPostgres, Store, type Db } from '@svc/store';
import { startSim } from '../sim/index.ts';
import { BOOTSTRAP_KEY, stackEnv } from '../helpers/stack.ts';
import { BROKERS, REDIS_URL, callApi, clusterServersUnreachable, describeKafkaGroups, runUnlessMissing, dropKafkaPrefix, dropRedisPrefix } from '../helpers/cluster.ts';
import { freshSchema } from '../helpers/postgres.ts';
import { migratedPglite } from '../helpers/pglite.ts';
import { countersFrom, dedupeKeyOf, everyBehaviourJob, parseResults, seededRandom, seedFrom, shownCell, verdictKey, RESULT_COLUMNS, type ResultRow } from '../helpers/jobs.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
t.setTimeout(300_000);

const SEED = seedFrom(process.env.JOBS_SEED);
const { rows, emails, unique: UNIQUE } = everyBehaviourJob(seededRandom(SEED));
const TOTAL_ROWS = emails.length;
const CREDITS = 20_000;
/** Both profiles: the same settings (jobs-10k.test.ts's, with more room for timeouts), the same bootstrap account. */
const ENV = {
  SVC_JOB_GREYLIST_DELAY_MS: '500',
  SVC_JOB_GREYLIST_ATTEMPTS: '3',
  SVC_SECRET: 'cluster-10k-secret-0123456789abcdef',
  // Six processes and two simulated internets on two cores: room for a busy event loop, so a slow
  // turn is never taken for a timeout (the tarpit answers only after 8 s: smtp_timeout).
  SVC_SMTP_TIMEOUT_MS: '5000',
  SVC_DNS_TIMEOUT_MS: '2000',
  SVC_BOOTSTRAP_CREDITS: String(CREDITS),
};
const SIM = { tarpitMs: 8000, greylistMs: 300 };

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Whether nobody listens on `port` now. */
const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
  });

/**
 * A first front port P such that P, P+1 (the fronts) and P+12 … P+14 (the workers: cluster.ts puts
 * them 10 after the last front) are free, below Linux's ephemeral range (32768-60999).
 */
async function clusterPorts(): Promise<number> {
  for (;;) {
    const p = 10_000 + Math.floor(Math.random() * 20_000);
    let free = true;
    for (const port of [p, p + 1, p + 12, p + 13, p + 14]) if (!(free = await portFree(port))) break;
    if (free) return p;
  }
}

/** What one profile made of the job. */
interface Run {
  profile: 'embedded' | 'cluster';
  /** The final GET /v1/csv/jobs/{id}. */
  job: any;
  csv: string;
  results: ResultRow[];
  credits: { balance: number; reserved: number };
  ledgerTotals: { balance: number; reserved: number };
  /** [kind, amount] of the job's reservation, newest first. */
  ledger: Array<[string, number]>;
  jobResults: { n: number; done: number; idxs: number; emails: number; min: number; max: number };
  seconds: number;
}

/** Submits the job to `submit`, polls `poll` until it is final, downloads the CSV from `download`, reads the ledger and job_results from the profile's database. */
async function runJob(profile: Run['profile'], submit: string, poll: string, download: string, db: Db): Promise<Run> {
  const store = new Store(db);
  const t0 = Date.now();
  const created = await callApi(submit, 'POST', '/v1/validate/batch', { emails });
  if (created.status !== 202) throw new Error(`${profile}: POST /v1/validate/batch: ${created.status} ${created.text.slice(0, 300)}`);
  const id: string = created.body.id;
  if (created.body.unique_emails !== UNIQUE || created.body.total_rows !== TOTAL_ROWS) throw new Error(`${profile}: ${JSON.stringify(created.body)}`);
  let job: any;
  // Rows processed every 10 s: a failure says whether the job was slow throughout or stalled.
  const progress: string[] = [];
  for (;;) {
    const r = await callApi(poll, 'GET', `/v1/csv/jobs/${id}`);
    if (r.status !== 200) throw new Error(`${profile}: GET /v1/csv/jobs/${id}: ${r.status} ${r.text.slice(0, 300)}`);
    job = r.body;
    if (!['queued', 'processing'].includes(job.status)) break;
    const s = Math.floor((Date.now() - t0) / 10_000) * 10;
    if (!progress.at(-1)?.startsWith(`${s} s:`)) progress.push(`${s} s: ${job.progress?.processed}`);
    if (Date.now() - t0 > 200_000) throw new Error(`${profile}: job still ${job.status} (${JSON.stringify(job.progress)}; processed by then: ${progress.join(', ')})`);
    await sleep(250);
  }
  const seconds = (Date.now() - t0) / 1000;
  const file = await callApi(download, 'GET', `/v1/csv/jobs/${id}/download`);
  if (file.status !== 200) throw new Error(`${profile}: download: ${file.status} ${file.text.slice(0, 300)}`);
  const credits = (await callApi(poll, 'GET', '/v1/credits')).body;
  const accountId = (await store.keys.findByHash(hashKey(BOOTSTRAP_KEY)))!.account_id;
  const ledger = (await store.ledger.entries(accountId, 100)).filter((e) => e.reservation_id !== null).map((e): [string, number] => [e.kind, Number(e.amount)]);
  const [jr] = await db.query<Run['jobResults']>(
    `SELECT count(*)::int AS n, count(*) FILTER (WHERE state = 'done')::int AS done, count(DISTINCT idx)::int AS idxs,
            count(DISTINCT email)::int AS emails, min(idx)::int AS min, max(idx)::int AS max
       FROM job_results WHERE job_id = $1`,
    [id],
  );
  return { profile, job, csv: file.text, results: parseResults(file.text), credits: { balance: credits.balance, reserved: credits.reserved }, ledgerTotals: await store.ledger.totals(accountId), ledger, jobResults: jr!, seconds };
}

await runUnlessMissing(await clusterServersUnreachable(), main);

async function main(): Promise<void> {
  const began = Date.now();
  const at = () => `${((Date.now() - began) / 1000).toFixed(1)} s`;
  t.comment(`JOBS_SEED=${SEED} (${TOTAL_ROWS} rows, ${UNIQUE} unique)`);
  const [embeddedSim, clusterSim] = await Promise.all([startSim(SIM), startSim(SIM)]);
  t.teardown(() => Promise.all([embeddedSim.close(), clusterSim.close()]));

  // ---- The cluster profile: `npm run cluster -- --fronts 2 --workers 3`, its own corner of each server.
  const schema = await freshSchema();
  const id = `c10k${randomBytes(4).toString('hex')}`;
  const kafkaPrefix = `${id}.`;
  const redisPrefix = `${id}:`;
  const clusterDir = mkdtempSync(path.join(os.tmpdir(), 'svc-10k-cluster-'));
  const port = await clusterPorts();
  const fronts = [`http://127.0.0.1:${port}`, `http://127.0.0.1:${port + 1}`];
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...stackEnv(clusterSim, clusterDir, ENV),
    SVC_LOG_LEVEL: 'info', // cluster.ts learns that a process listens from its log line
    DATABASE_URL: schema.url,
    REDIS_URL: `${REDIS_URL}${REDIS_URL.includes('?') ? '&' : '?'}keyPrefix=${redisPrefix}`,
    KAFKA_BROKERS: BROKERS.join(','),
    SVC_KAFKA_TOPIC_PREFIX: kafkaPrefix,
    SVC_EGRESS_ID: id,
  };
  // Analytics go to the schema's own table (this test is not about ClickHouse).
  delete env.CLICKHOUSE_URL;
  delete env.PORT;
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'cluster/cluster.ts', '--fronts', '2', '--workers', '3', '--port', String(port)], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  /** Writes the cluster's whole output so far to a file; returns its path. */
  const saveLogs = (): string => {
    const logs = path.join(os.tmpdir(), `svc-10k-cluster-${id}.log`);
    writeFileSync(logs, `${out}\n----- stderr -----\n${err}`);
    return logs;
  };
  let clusterDb: Db | undefined;
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    if (process.env.CLUSTER_KEEP_LOGS === '1') t.comment(`the cluster's whole output: ${saveLogs()}`);
    await clusterDb?.close();
    await schema.drop();
    rmSync(clusterDir, { recursive: true, force: true });
    await dropKafkaPrefix(kafkaPrefix);
    await dropRedisPrefix(redisPrefix);
  });
  const clusterUp = (async () => {
    const deadline = Date.now() + 150_000;
    while (!err.includes('cluster: 2 front(s) at')) {
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the cluster did not start: ${err.slice(-2000)}\n${out.slice(-3000)}`);
      await sleep(100);
    }
    return at();
  })();
  clusterUp.catch(() => {}); // awaited below

  // ---- The embedded profile, in this process (started while the cluster starts).
  const embeddedDir = mkdtempSync(path.join(os.tmpdir(), 'svc-10k-embedded-'));
  const embeddedDb = await migratedPglite();
  const embeddedStore = new Store(embeddedDb);
  const embedded = await startService(loadConfig(stackEnv(embeddedSim, embeddedDir, ENV)), { store: embeddedStore });
  t.teardown(async () => {
    await embedded.close();
    await embeddedStore.close();
    rmSync(embeddedDir, { recursive: true, force: true });
  });

  t.comment(`cluster: 2 fronts and 3 workers listening at ${await clusterUp}`);

  // ---- The cluster's job: submitted to front 1, polled on front 2, downloaded from both.
  clusterDb = await openPostgres(schema.url, 2);
  const clusterRun = await runJob('cluster', fronts[0]!, fronts[1]!, fronts[1]!, clusterDb).catch(async (e: Error) => {
    // What the cluster's processes said last: the reason a job stalls is in their logs.
    const logs = saveLogs();
    // And where its work waits (a stall has logged nothing: seen twice in full CI runs, never
    // alone): the consumer groups' lag per partition, the job's rows by state, and what the
    // cluster's PostgreSQL sessions are doing.
    const where = await Promise.all([
      describeKafkaGroups(id).catch((x: unknown) => `groups: ${String(x)}`),
      clusterDb!.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM job_results GROUP BY state ORDER BY state').then(
        (r) => `job_results: ${r.map((x) => `${x.state} ${x.n}`).join(', ')}`,
        (x: unknown) => `job_results: ${String(x)}`,
      ),
      clusterDb!
        .query<{ pid: number; state: string; wait: string | null; age: string; query: string }>(
          `SELECT pid, state, wait_event_type || ':' || wait_event AS wait, (now() - xact_start)::text AS age, left(query, 120) AS query
             FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' ORDER BY xact_start`,
        )
        .then(
          (r) => `PostgreSQL sessions not idle: ${r.length ? r.map((x) => `${x.pid} ${x.state} ${x.wait ?? '-'} ${x.age ?? '-'} ${x.query}`).join(' | ') : 'none'}`,
          (x: unknown) => `pg_stat_activity: ${String(x)}`,
        ),
    ]);
    throw new Error(`${e.message}\n${where.join('\n')}\n(at ${at()}; the cluster's whole output: ${logs}; its last errors:\n${err.slice(-1500)}\n${out.split('\n').filter((l) => /"level":(40|50|60)/.test(l)).slice(-15).join('\n')})`);
  });
  t.comment(`cluster: job done in ${clusterRun.seconds.toFixed(1)} s (at ${at()})`);
  const again = await callApi(fronts[0]!, 'GET', `/v1/csv/jobs/${clusterRun.job.id}/download`);

  // ---- SIGTERM: every process drains and stops (all at once, as cluster.ts passes it on).
  const stopAt = Date.now();
  child.kill('SIGTERM');
  let stopTimer: NodeJS.Timeout | undefined;
  const code = await Promise.race([exited, new Promise<string>((r) => (stopTimer = setTimeout(() => r('not within 90 s'), 90_000)))]);
  clearTimeout(stopTimer);
  const stopSeconds = ((Date.now() - stopAt) / 1000).toFixed(1);
  t.comment(`cluster: stopped in ${stopSeconds} s (at ${at()})`);

  // ---- Then the embedded job, alone.
  const embeddedRun = await runJob('embedded', embedded.url, embedded.url, embedded.url, embeddedDb);
  t.comment(`embedded: job done in ${embeddedRun.seconds.toFixed(1)} s (at ${at()})`);

  t.test('the cluster: 2 fronts and 3 workers on Kafka, stopped cleanly by SIGTERM', async (t) => {
    const lines = out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { proc: string; msg: string; role?: string; bus?: string });
    const listening = lines.filter((l) => l.msg === 'email validation service listening');
    t.strictSame(
      listening.map((l) => [l.proc, l.role, l.bus]).sort(),
      [
        ['front-1', 'front', 'kafka'],
        ['front-2', 'front', 'kafka'],
        ['worker-1', 'worker', 'kafka'],
        ['worker-2', 'worker', 'kafka'],
        ['worker-3', 'worker', 'kafka'],
      ],
      'each process says its role and its bus',
    );
    t.equal(code, 0, `SIGTERM: the cluster exits 0 (in ${stopSeconds} s)`);
    t.strictSame(lines.filter((l) => l.msg === 'stopped').map((l) => l.proc).sort(), ['front-1', 'front-2', 'worker-1', 'worker-2', 'worker-3'], 'every process drained and logged its stop');
    t.strictSame(lines.filter((l) => /drain took longer/.test(l.msg)).map((l) => l.proc), [], 'none hit the 30 s drain limit');
  });

  t.test(`per row: the same verdicts in both profiles, and the sim's (JOBS_SEED=${SEED})`, async (t) => {
    for (const run of [embeddedRun, clusterRun]) {
      t.equal(run.job.status, 'completed', `${run.profile}: the job completed`);
      t.strictSame(run.job.progress, { processed: UNIQUE, total: UNIQUE, percent: 100 }, `${run.profile}: every unique address processed`);
      t.equal(run.results.length, TOTAL_ROWS, `${run.profile}: one row per input row`);
      t.ok(
        run.results.every((r, i) => r.email === shownCell(emails[i]!)),
        `${run.profile}: in input order`,
      );
    }
    t.equal(again.text, clusterRun.csv, 'both cluster fronts serve the same results CSV');

    // Every row and every column the same; differences summed up by domain and verdicts.
    const differ = new Map<string, string[]>();
    const unexpected = new Map<string, string[]>();
    const note = (m: Map<string, string[]>, k: string, email: string) => m.set(k, [...(m.get(k) ?? []), email]);
    const domainOf = (e: string) => (e.includes('@') ? e.slice(e.lastIndexOf('@') + 1).toLowerCase() : '(no domain)');
    const cells = (r: ResultRow) => RESULT_COLUMNS.map((c) => r[c]).join('|');
    for (let i = 0; i < TOTAL_ROWS; i++) {
      const e = emails[i]!;
      const [a, b] = [embeddedRun.results[i], clusterRun.results[i]];
      if (!a || !b) break;
      if (cells(a) !== cells(b)) note(differ, `${domainOf(e)}: embedded ${verdictKey(a)}, cluster ${verdictKey(b)}${verdictKey(a) === verdictKey(b) ? ` (${RESULT_COLUMNS.filter((c) => a[c] !== b[c]).join(', ')} differ)` : ''}`, e);
      for (const r of [a, b]) if (verdictKey(r) !== rows[i]!.expect) note(unexpected, `${domainOf(e)}: ${r === a ? 'embedded' : 'cluster'} ${verdictKey(r)}, the sim says ${rows[i]!.expect}`, e);
    }
    const summary = (m: Map<string, string[]>) => [...m].map(([k, l]) => `${k} (${l.length} rows: ${l.slice(0, 3).join(' ')}${l.length > 3 ? ' …' : ''})`);
    t.strictSame(summary(differ), [], 'every row: the same result columns in both profiles');
    t.strictSame(summary(unexpected), [], "every row: the sim's verdict");
    t.ok(embeddedRun.csv === clusterRun.csv, 'the results CSVs are the same text');
    const kinds = new Set(clusterRun.results.map(verdictKey));
    t.comment(`${kinds.size} distinct verdicts: ${[...kinds].sort().join(', ')}`);
  });

  t.test('the 2.2 counters and the credits: the same in both profiles, and exactly the CSV counted', async (t) => {
    for (const run of [embeddedRun, clusterRun]) {
      // First occurrences carry the charge; repeats say duplicate_in_job and cost nothing.
      const firsts: ResultRow[] = [];
      const seen = new Set<string>();
      let badDup = 0;
      for (const [i, r] of run.results.entries()) {
        const k = dedupeKeyOf(rows[i]!);
        if (seen.has(k)) {
          if (r.charge_reason !== 'duplicate_in_job' || r.credits_charged !== '0') badDup++;
        } else {
          seen.add(k);
          firsts.push(r);
          if (r.charge_reason === 'duplicate_in_job') badDup++;
        }
      }
      t.equal(badDup, 0, `${run.profile}: repeats are duplicate_in_job at 0 credits, first occurrences are not`);
      t.equal(firsts.length, UNIQUE, `${run.profile}: one first occurrence per unique address`);
      const expected = countersFrom(firsts, TOTAL_ROWS);
      const charged = expected.credits_charged!;
      t.strictSame(run.job.results, expected, `${run.profile}: the 2.2 counters are the CSV counted`);
      t.equal(charged, firsts.filter((r) => r.result === 'valid').length, `${run.profile}: one credit per valid (High-Value) result`);
      t.strictSame(
        run.job.credit_reservation,
        { reserved: true, reserved_credits: UNIQUE, credits_charged: charged, credits_consumed: charged, refunded_credits: UNIQUE - charged, credits_per_high_value_validation: 1, finalized: true },
        `${run.profile}: reserved ${UNIQUE} = charged ${charged} + refunded ${UNIQUE - charged}, finalized`,
      );
      t.strictSame(run.credits, { balance: CREDITS - charged, reserved: 0 }, `${run.profile}: the balance paid exactly the charge`);
      t.strictSame(run.ledgerTotals, { balance: CREDITS - charged, reserved: 0 }, `${run.profile}: the ledger sums to the same`);
      t.strictSame(
        run.ledger,
        [
          ['release', UNIQUE - charged],
          ['charge', charged],
          ['reserve', UNIQUE],
        ],
        `${run.profile}: one reserve, one charge, one release`,
      );
      t.strictSame(run.jobResults, { n: UNIQUE, done: UNIQUE, idxs: UNIQUE, emails: UNIQUE, min: 0, max: UNIQUE - 1 }, `${run.profile}: job_results holds one done row per unique address`);
    }
    t.strictSame(clusterRun.job.results, embeddedRun.job.results, 'the same 2.2 counters in both profiles');
    t.strictSame(clusterRun.job.credit_reservation, embeddedRun.job.credit_reservation, 'the same credit reservation');
    t.strictSame([clusterRun.credits, clusterRun.ledger], [embeddedRun.credits, embeddedRun.ledger], 'the same balance and ledger');
    t.comment(`wall time ${at()}`);
  });
}
