// The cluster fault test "kill -9 a front mid-ingest, then the client retries with the same Idempotency-Key and
// gets one job", on real processes of the cluster profile (test/helpers/cluster-procs.ts): two
// fronts and two workers of `cluster/embedded.ts` on the servers of scripts/infra-up.sh (a fresh
// PostgreSQL schema, Redis, a Kafka topic prefix of their own), SVC_CLAIM_LEASE_MS=3000.
//
// Each round posts a JSON job (about 1,000 addresses over the sim's domains, with a webhook_url)
// to one front with an Idempotency-Key, kills that front with SIGKILL at a seeded random moment
// within the time an ingest takes (measured on a first job that is not interrupted), and retries
// the same request with the same key on the other front until it answers 202: 409
// idempotency_request_in_progress while the dead front's claim lasts, then the job (a replay when
// the dead front had created it, a fresh intake when it died first). A replacement front starts
// after each kill. Depending on the moment, the dead front had not yet claimed the key, held the
// claim, stored the input, created the job (its 202 body recorded with it) without publishing its
// work (a worker's sweep publishes it when the publish claim runs out), or answered already.
//
// Checked: every retry got 202; when the first request had its 202, the retry replays that job;
// the account lists exactly one job per round, the retries' jobs; each job completes with every
// row once and the sim's verdicts, the 2.2 counters, reserved = charged + refunded, one reserve /
// charge / release in the ledger, one webhook event id (checkClusterJob); the balance moved by
// exactly what the jobs charged, nothing reserved, no idempotency claim left in progress.
//
// Replay a run: FRONT_KILL_SEED=<seed in the test name> npx tap test/e2e/cluster-front-kill.test.ts.
// FRONT_KILL_ROUNDS (default 10) rounds. The servers missing: skipped, or a failure under
// CI_REQUIRE_SERVICES=1.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { BOOTSTRAP_KEY } from '../helpers/stack.ts';
import { callApi, clusterServersUnreachable, runUnlessMissing } from '../helpers/cluster.ts';
import { canonicalEmail, clusterJobInput, jobFinished, jobsState, pollJobs, startFaultRun, until, type ClusterJob } from '../helpers/cluster-procs.ts';
import { seedFrom, type InputEmail } from '../helpers/jobs.ts';

t.setTimeout(420_000);

const SEED = seedFrom(process.env.FRONT_KILL_SEED);
const ROUNDS = Number(process.env.FRONT_KILL_ROUNDS ?? 10);
/** Generated addresses per job (besides the sim table's and the repeats). */
const GENERATED = Number(process.env.FRONT_KILL_ADDRESSES ?? 900);
const LEASE_MS = 3000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** One POST /v1/validate/batch with an Idempotency-Key: the answer, or the network error when the front died under it. */
async function post(base: string, idemKey: string, body: unknown): Promise<{ status: number; replayed: boolean; body: any; text: string } | { error: string }> {
  try {
    const res = await fetch(`${base}/v1/validate/batch`, {
      method: 'POST',
      headers: { 'x-api-key': BOOTSTRAP_KEY, 'content-type': 'application/json', 'idempotency-key': idemKey },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    let json: unknown = text;
    try {
      json = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, replayed: res.headers.get('idempotent-replayed') === 'true', body: json, text };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    return { error: e.cause?.code ?? e.cause?.message ?? e.message };
  }
}

async function run(): Promise<void> {
  const fault = await startFaultRun(t, {
    name: 'cluster-front-kill',
    seed: SEED,
    prefix: 'fkill',
    partitions: 4,
    fronts: 2,
    note: `FRONT_KILL_SEED=${SEED}`,
    env: { SVC_CLAIM_LEASE_MS: String(LEASE_MS) },
  });
  const { rand, inputRand, at, tag, receiver, db, cluster, jobs } = fault;

  const fronts = () => cluster.liveListening('front');
  const anyFront = async () => (await fronts())[0]!.url!;
  const call = async (method: string, route: string, body?: unknown) => callApi(await anyFront(), method, route, body);

  const record = (n: number, input: InputEmail[], id: string, body: any): ClusterJob => {
    const emails = input.map((r) => r.email);
    const seen = new Set<string>();
    const isRepeat = emails.map((e) => (seen.has(canonicalEmail(e)) ? true : (seen.add(canonicalEmail(e)), false)));
    const r: ClusterJob = { n, id, input, emails, isRepeat, unique: seen.size, postedAt: Date.now(), job: body, trace: [] };
    jobs.push(r);
    return r;
  };

  // Round 0: the same kind of job, not interrupted: how long an ingest takes here and now.
  const calibration = clusterJobInput(0, { tag, generated: GENERATED, rand: inputRand });
  const started = Date.now();
  const c = await post(await anyFront(), `fk-${tag}-0`, { emails: calibration.map((r) => r.email), webhook_url: receiver.url });
  const ingestMs = Date.now() - started;
  if (!('status' in c) || c.status !== 202) throw new Error(`calibration job: ${JSON.stringify(c)}`);
  record(0, calibration, c.body.id, c.body);
  t.comment(`an uninterrupted ingest of ${calibration.length} rows took ${ingestMs} ms; kills fall in 0-${ingestMs} ms after the POST`);

  const outcomes: string[] = [];
  await t.test(`fronts killed mid-ingest, each request retried with its Idempotency-Key (FRONT_KILL_SEED=${SEED})`, async (t) => {
    for (let n = 1; n <= ROUNDS; n++) {
      const input = clusterJobInput(n, { tag, generated: GENERATED, rand: inputRand });
      const body = { emails: input.map((r) => r.email), webhook_url: receiver.url };
      const key = `fk-${tag}-${n}`;
      const live = await fronts();
      const victim = live[Math.floor(rand() * live.length)]!;
      const other = live.find((p) => p !== victim)!;
      const killAfter = Math.round(rand() * ingestMs);
      const firstTry = post(victim.url!, key, body);
      await sleep(killAfter);
      cluster.signal(victim, 'SIGKILL');
      await victim.exited;
      const firstAnswer = await firstTry;
      const replacement = cluster.spawn('front');

      // The retry, on the other front, until it answers 202 (409 while the dead front's claim lasts).
      const retryStart = Date.now();
      let retry = await post(other.url!, key, body);
      let busy = 0;
      while ('status' in retry && retry.status === 409 && retry.body?.code === 'idempotency_request_in_progress' && Date.now() - retryStart < 60_000) {
        busy++;
        await sleep(250);
        retry = await post(other.url!, key, body);
      }
      if (!('status' in retry) || retry.status !== 202) {
        t.fail(`round ${n}: the retry did not get its job: ${JSON.stringify(retry).slice(0, 300)}`);
        continue;
      }
      const got = 'status' in firstAnswer ? `${firstAnswer.status}` : `no answer (${firstAnswer.error})`;
      if ('status' in firstAnswer && firstAnswer.status === 202) {
        t.equal(retry.body.id, firstAnswer.body.id, `round ${n}: the first request had its 202: the retry names the same job`);
        t.equal(retry.replayed, true, `round ${n}: as a replay`);
      } else t.notOk('status' in firstAnswer, `round ${n}: the first request got no other answer than 202 or none (${got})`);
      const what = `round ${n}: ${victim.name} killed ${killAfter} ms after the POST; first request: ${got}; retry on ${other.name}: 202${retry.replayed ? ' (replayed: the dead front had created the job)' : ' (a fresh intake)'} after ${busy} × 409, ${((Date.now() - retryStart) / 1000).toFixed(1)} s`;
      outcomes.push(what);
      t.comment(what);
      record(n, input, retry.body.id, retry.body);
      await cluster.listening(replacement);
    }
  });

  await t.test('one job per request', async (t) => {
    const listed = (await call('GET', '/v1/csv/jobs?limit=100')).body;
    const ids = (listed.jobs ?? listed.data ?? []).map((j: { id: string }) => j.id).sort();
    t.strictSame(ids, jobs.map((r) => r.id).sort(), `the account has exactly the ${jobs.length} jobs the client was given, no other`);
    t.equal(new Set(jobs.map((r) => r.id)).size, jobs.length, 'a different job for every request');
  });

  await t.test('every job completes', async (t) => {
    t.ok(await until(async () => (await pollJobs(jobs, call, at), jobs.every(jobFinished)), 240_000, 250), `every job finished (${jobsState(jobs)})`);
  });

  await fault.checkJobs((r) => `job ${r.n}`, { call, frontUrl: await anyFront() });

  await t.test('credits and claims', async (t) => {
    await fault.checkCredits(t, { call });
    const open = await db.query("SELECT key FROM idempotency_keys WHERE status = 'in_progress'");
    t.strictSame(open.rows, [], 'no idempotency claim left in progress');
    const keys = await db.query("SELECT key, status FROM idempotency_keys ORDER BY key");
    t.equal(keys.rows.length, jobs.length, 'one idempotency record per request, each done');
    t.ok(keys.rows.every((r) => r.status === 'done'));
    // How many jobs a worker took over because their dead front had not published their work.
    const takeovers = readdirSync(cluster.logDir)
      .filter((f) => f.startsWith('worker-'))
      .reduce((sum, f) => sum + readFileSync(path.join(cluster.logDir, f), 'utf8').split('taking over a job whose work was not published').length - 1, 0);
    t.comment(`wall time ${at()}; ${takeovers} job(s) taken over by a worker's sweep (work not published by the dead front):\n${outcomes.join('\n')}`);
  });
}

await runUnlessMissing(await clusterServersUnreachable(), run);
