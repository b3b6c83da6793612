// The cluster fault test "stop ClickHouse for a minute (validation goes on, analytics catch up)", on real
// processes of the cluster profile: one front and two workers (child processes of
// `cluster/embedded.ts`, test/helpers/cluster-procs.ts) on a fresh PostgreSQL schema, Redis, the
// shared Kafka broker (a topic prefix of their own) and a ClickHouse server of this test's own
// (test/helpers/private-infra.ts: Debian's clickhouse-server with infra/clickhouse/config.xml on
// free ports, data in a temporary directory; the shared server on 8123 is never stopped), with a
// ClickHouse database of their own (SVC_CLICKHOUSE_DATABASE).
//
// While two loops send sync requests to the front (POST /v1/validate, and every eighth a
// /v1/validate/bulk of five) over sim addresses whose verdict the sim's table gives, and JSON
// jobs with a webhook_url run (one at the start, one as the long outage begins, one later), the
// server is stopped ten times at seeded moments, each time with SIGTERM (SIGKILL if it has not
// exited within 5 s) or SIGKILL (seeded):
// once for 60 s and nine times for 2-5 s (CH_OUTAGE_FULL=1: all ten for 60 s, a run by hand of
// about 11 minutes). Then:
//   - validation went on: every sync request was answered 200 with the sim's verdict, those made
//     while ClickHouse was down included (counted; some during the 60 s outage);
//   - every job completed with exactly what cluster-crash checks (checkClusterJob);
//   - /ready on the front stayed 200 (ready) through the 60 s outage with `clickhouse` reported
//     `failed` (readiness probes every 30 s): analytics alone does not take a front out of a load
//     balancer; `ok` again once ClickHouse was back;
//   - analytics caught up: within a bounded wait, the distinct decisions in ClickHouse (read with
//     @clickhouse/client, JSONEachRow, text queries: 18.16 has no query parameters) are exactly
//     the decisions the service made (docs/decisions/storage-and-cluster.md "Decision records"): one per unique
//     address of each job (source `job`, per job id), one per single validation answered 200
//     (`single`), one per string of each bulk answered 200 (`bulk`); none missing, none extra.
//
// Replay a run: CH_OUTAGE_SEED=<seed in the test name> npx tap test/e2e/cluster-clickhouse-outage.test.ts
// (the outage plan, the jobs' inputs and the addresses follow the seed; the moments are times).
// The children's logs and the server's directory are kept when a check fails. The servers
// missing: skipped, or a failure under CI_REQUIRE_SERVICES=1.

import { randomBytes } from 'node:crypto';
import { createClient } from '@clickhouse/client';
import t, { type Test as Tap } from 'tap';
import { SIM_UNKNOWN_LOCAL } from '../sim/index.ts';
import { clusterServersUnreachable, runUnlessMissing, type ApiAnswer } from '../helpers/cluster.ts';
import { jobFinished, jobsState, pollJobs, startFaultRun, until } from '../helpers/cluster-procs.ts';
import { privateClickhouseMissing, startPrivateClickhouse } from '../helpers/private-infra.ts';
import { seededRandom, seedFrom, shuffle, simDomain, typed, verdictKey } from '../helpers/jobs.ts';

const FULL = process.env.CH_OUTAGE_FULL === '1';
t.setTimeout(FULL ? 1_200_000 : 300_000);

const SEED = seedFrom(process.env.CH_OUTAGE_SEED);
const STOPS = 10;
const LONG_MS = 60_000;
/** Generated addresses per job (besides the sim table's and the repeats). */
const GENERATED = Number(process.env.CH_OUTAGE_ADDRESSES ?? 300);
/** Concurrent sync request loops, and the pause between two requests of one loop. */
const LOOPS = 2;
const PAUSE_MS = 50;
/** After the last outage: how long analytics may take to catch up, and /ready to say ready. */
const CATCH_UP_MS = 60_000;
const READY_AGAIN_MS = 45_000;
/**
 * A SIGTERM'd 18.16 server waits for its clients' keep-alive connections before it exits (up to
 * about 15 s measured, with the service's processes writing and probing): SIGKILL after this.
 */
const SIGTERM_GRACE_MS = 5_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function run(): Promise<void> {
  const database = `svc_outage_${randomBytes(4).toString('hex')}`;
  const ch = await startPrivateClickhouse({ name: 'clickhouse-outage' });
  const chClient = createClient({ url: ch.url, request_timeout: 10_000, compression: { request: false, response: false } });
  const fault = await startFaultRun(t, {
    name: 'cluster-clickhouse-outage',
    seed: SEED,
    prefix: 'chout',
    env: { CLICKHOUSE_URL: ch.url, SVC_CLICKHOUSE_DATABASE: database, SVC_BOOTSTRAP_CREDITS: '1000000' },
    note: `ClickHouse ${ch.url} (database ${database})`,
    teardown: async () => {
      await chClient.close().catch(() => {});
      await ch.close(!t.passing() || process.env.CLUSTER_KEEP_LOGS === '1');
      if (!t.passing()) t.comment(`the private ClickHouse server's data and logs kept in ${ch.dir}`);
    },
  });
  const { rand, t0, at, tag, front, call, jobs } = fault;

  // ----------------------------------------------------------------------------------------------
  // The plan: STOPS stops, the long one at a seeded place (all long with CH_OUTAGE_FULL=1), each
  // after a seeded gap, by SIGTERM or SIGKILL (half each, seeded order).

  interface Stop {
    signal: 'SIGTERM' | 'SIGKILL';
    gapMs: number;
    downMs: number;
  }
  const longAt = Math.floor(rand() * STOPS);
  const signals = shuffle(
    Array.from({ length: STOPS }, (_, i) => (i % 2 === 0 ? 'SIGKILL' : 'SIGTERM') as Stop['signal']),
    rand,
  );
  const plan: Stop[] = signals.map((signal, i) => ({ signal, gapMs: Math.round(200 + rand() * 800), downMs: FULL || i === longAt ? LONG_MS : Math.round(2000 + rand() * 3000) }));
  t.comment(`CH_OUTAGE_SEED=${SEED}${FULL ? ' CH_OUTAGE_FULL=1' : ''}: plan ${plan.map((s) => `${s.signal}+${s.gapMs}ms/${s.downMs}ms`).join(' ')}`);

  /** ClickHouse down: from the stop's signal until the restarted server answers. */
  const outages: Array<{ from: number; to: number; long: boolean }> = [];
  let downSince: number | undefined;
  let currentLong = false;
  const downDuring = (from: number, to: number) => downSince !== undefined || outages.some((o) => o.from < to && from < o.to);

  // ----------------------------------------------------------------------------------------------
  // Sync load: LOOPS loops until told to stop, each request checked against the sim's table.

  const domains = ['accept.test', 'catchall.test', 'gmail.com', 'mailinator.com', 'nxdomain.test', 'multimx.test', 'postfix.test', 'bücher.test', 'nullmx.test'].map(simDomain);
  let fresh = 0;
  /** One address and its verdict: the table's known or unknown mailbox, or a new unknown one (a fresh SMTP probe). */
  const pickAddress = (r: () => number): { email: string; expect: string } => {
    const d = domains[Math.floor(r() * domains.length)]!;
    const k = r();
    if (k < 0.4) return { email: `jane.doe@${typed(d)}`, expect: verdictKey(d.known) };
    if (k < 0.7) return { email: `${SIM_UNKNOWN_LOCAL}@${typed(d)}`, expect: verdictKey(d.unknown) };
    return { email: `s${tag}n${++fresh}@${typed(d)}`, expect: verdictKey(d.unknown) };
  };
  const sync = { single: 0, bulk: 0, bulkRows: 0, credits: 0, duringOutage: 0, duringLong: 0, wrong: [] as string[], failed: [] as string[] };
  let loadOn = true;
  /** The request [from, to] fell wholly within a 60 s outage (over, or in progress). */
  const withinLong = (from: number, to: number) => outages.some((o) => o.long && o.from <= from && to <= o.to) || (currentLong && downSince !== undefined && downSince <= from);
  const loop = async (n: number): Promise<void> => {
    const r = seededRandom(SEED ^ (0x1000 + n));
    for (let i = 0; loadOn; i++) {
      const bulk = i % 8 === 7;
      const picks = Array.from({ length: bulk ? 5 : 1 }, () => pickAddress(r));
      const started = Date.now();
      let res: ApiAnswer;
      try {
        res = bulk ? await call('POST', '/v1/validate/bulk', { emails: picks.map((p) => p.email) }) : await call('POST', '/v1/validate', { email: picks[0]!.email });
      } catch (err) {
        sync.failed.push(`${at()} ${picks[0]!.email}: ${(err as Error).message}`);
        continue;
      }
      const ended = Date.now();
      if (res.status !== 200) {
        sync.failed.push(`${at()} ${bulk ? 'bulk' : picks[0]!.email}: ${res.status} ${res.text.slice(0, 200)}`);
        continue;
      }
      const results: Array<{ result: string; reason_code: string }> = bulk ? res.body.results : [res.body];
      results.forEach((x, k) => {
        if (verdictKey(x) !== picks[k]!.expect) sync.wrong.push(`${picks[k]!.email}: ${verdictKey(x)}, expected ${picks[k]!.expect}`);
      });
      if (bulk) {
        sync.bulk++;
        sync.bulkRows += picks.length;
        sync.credits += Number(res.body.summary.credits_charged);
      } else {
        sync.single++;
        sync.credits += Number(res.body.credits_charged);
      }
      if (downDuring(started, ended)) sync.duringOutage++;
      if (withinLong(started, ended)) sync.duringLong++;
      await sleep(PAUSE_MS);
    }
  };

  // /ready on the front, every second: what it said, and when.
  const readyLog: Array<{ at: number; status: number; clickhouse: string | undefined }> = [];
  let watchOn = true;
  const watch = (async () => {
    while (watchOn) {
      try {
        const r = await fetch(`${front.url}/ready`);
        const body = (await r.json().catch(() => ({}))) as { checks?: Record<string, string> };
        readyLog.push({ at: Date.now(), status: r.status, clickhouse: body.checks?.clickhouse });
      } catch (err) {
        readyLog.push({ at: Date.now(), status: 0, clickhouse: (err as Error).message });
      }
      await sleep(1000);
    }
  })();

  // ----------------------------------------------------------------------------------------------
  // The jobs and the outages.

  const submit = (t: Tap) => fault.submit(t, GENERATED);
  const timeline: string[] = [];
  const loops = Array.from({ length: LOOPS }, (_, n) => loop(n));

  await t.test(`validation and jobs while ClickHouse is stopped (CH_OUTAGE_SEED=${SEED})`, async (t) => {
    // Job 1 at once, one as the (first) 60 s outage begins, one before the eighth stop.
    await submit(t);
    let postedForLong = false;
    for (const [i, s] of plan.entries()) {
      if (i === 7) await submit(t);
      const end = Date.now() + s.gapMs;
      await until(async () => (await pollJobs(jobs, call, at), Date.now() >= end), s.gapMs + 1000, 100);
      const state = `${jobsState(jobs)}; sync ${sync.single} single, ${sync.bulk} bulk`;
      const from = Date.now();
      currentLong = s.downMs === LONG_MS;
      downSince = from;
      const stopped = await ch.stop(s.signal, SIGTERM_GRACE_MS);
      if (currentLong && !postedForLong) {
        postedForLong = true;
        await submit(t);
      }
      await until(async () => (await pollJobs(jobs, call, at), Date.now() >= from + s.downMs), s.downMs + 1000, 250);
      const startMs = await ch.start();
      outages.push({ from, to: Date.now(), long: currentLong });
      downSince = undefined;
      currentLong = false;
      const line = `stop ${i + 1} at ${at()} (${state}): ${s.signal}${stopped.forced ? ` (SIGKILL after ${SIGTERM_GRACE_MS / 1000} s)` : ''}, exited in ${stopped.ms} ms, down ${((Date.now() - from) / 1000).toFixed(1)} s (start ${startMs} ms)`;
      timeline.push(line);
      t.comment(line);
    }
    t.ok(await until(async () => (await pollJobs(jobs, call, at), jobs.every(jobFinished)), 120_000, 250), `every job finished (${jobsState(jobs)})`);
    loadOn = false;
    await Promise.all(loops);
    t.comment(`every job finished and the sync load stopped at ${at()}`);
  });
  const lastUp = outages.at(-1)?.to ?? Date.now();

  await t.test('validation went on: every sync request answered 200 with the sim’s verdict', async (t) => {
    t.strictSame(sync.failed.slice(0, 10), [], `no sync request failed (${sync.failed.length})`);
    t.strictSame(sync.wrong.slice(0, 10), [], `every verdict the sim's (${sync.wrong.length} differ)`);
    t.ok(sync.duringOutage > 0, `${sync.duringOutage} sync requests answered while ClickHouse was down`);
    t.ok(sync.duringLong > 0, `${sync.duringLong} of them during a 60 s outage`);
    t.comment(`sync: ${sync.single} single, ${sync.bulk} bulk of 5`);
  });

  await fault.checkJobs((r) => `job ${r.n} through ClickHouse outages (CH_OUTAGE_SEED=${SEED})`);

  t.test('credits', (t) => fault.checkCredits(t, { syncCredits: sync.credits }));

  await t.test('analytics caught up: the decisions in ClickHouse are exactly the ones made', async (t) => {
    const table = `${database}.validation_decisions`;
    const rows = async <T>(query: string): Promise<T[]> => (await (await chClient.query({ query, format: 'JSONEachRow' })).json()) as T[];
    const expected: Record<string, number> = { job: jobs.reduce((n, r) => n + r.unique, 0), single: sync.single, bulk: sync.bulkRows };
    const total = expected.job! + expected.single! + expected.bulk!;
    const bySource = async (): Promise<Record<string, number>> => {
      const out: Record<string, number> = {};
      for (const r of await rows<{ s: string; n: string | number }>(`SELECT s, count() AS n FROM (SELECT id, any(source) AS s FROM ${table} GROUP BY id) GROUP BY s`)) out[r.s] = Number(r.n);
      return out;
    };
    let got: Record<string, number> = {};
    const caughtUp = await until(
      async () => {
        got = await bySource().catch(() => ({}));
        return Object.values(got).reduce((a, b) => a + b, 0) >= total;
      },
      CATCH_UP_MS,
      500,
    );
    t.ok(caughtUp, `caught up ${((Date.now() - lastUp) / 1000).toFixed(1)} s after ClickHouse came back`);
    await sleep(2000); // anything beyond the expected count would show now
    got = await bySource();
    t.strictSame(got, expected, `${total} distinct decisions in ClickHouse by source (job = the jobs' unique addresses, single and bulk = the strings of the sync requests answered 200)`);
    const perJob: Record<string, number> = {};
    for (const r of await rows<{ j: string; n: string | number }>(`SELECT j, count() AS n FROM (SELECT id, any(job_id) AS j FROM ${table} WHERE source = 'job' GROUP BY id) GROUP BY j`)) perJob[r.j] = Number(r.n);
    t.strictSame(perJob, Object.fromEntries(jobs.map((r) => [r.id, r.unique])), 'per job: one decision per unique address');
    const [raw] = await rows<{ n: string | number }>(`SELECT count() AS n FROM ${table}`);
    t.comment(`decisions: ${JSON.stringify(got)} (${total}); rows stored ${raw?.n} (a retried write that had landed stores a row twice; it counts once)`);
  });

  await t.test('/ready: the front stays ready through the 60 s outage, clickhouse reported failed; ok again after', async (t) => {
    const long = outages.filter((o) => o.long);
    for (const o of long) {
      const seen = readyLog.filter((x) => x.at >= o.from && x.at <= o.to);
      const reported = seen.filter((x) => x.status === 200 && x.clickhouse === 'failed');
      t.ok(reported.length > 0, `during the outage at ${((o.from - t0) / 1000).toFixed(1)} s: ${reported.length} of ${seen.length} /ready answers were 200 with clickhouse failed`);
      t.ok(seen.every((x) => x.status === 200), 'the front answered /ready 200 throughout');
    }
    // Readiness probes every 30 s: clickhouse ok again within READY_AGAIN_MS of the last outage.
    const ok = await until(() => readyLog.some((x) => x.at > lastUp && x.status === 200 && x.clickhouse === 'ok'), Math.max(0, lastUp + READY_AGAIN_MS - Date.now()), 250);
    const first = readyLog.find((x) => x.at > lastUp && x.clickhouse === 'ok');
    t.ok(ok, `clickhouse ok again ${first ? `${((first.at - lastUp) / 1000).toFixed(1)} s` : 'not'} after it came back`);
  });

  watchOn = false;
  await watch;
  t.comment(`wall time ${at()}; outages: ${outages.map((o) => `${((o.to - o.from) / 1000).toFixed(1)} s`).join(', ')}; timeline:\n${timeline.join('\n')}`);
}

await runUnlessMissing((await clusterServersUnreachable()) ?? privateClickhouseMissing(), run);
