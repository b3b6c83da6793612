// The cluster fault test "restart the Kafka broker mid-job", on real processes of the cluster profile: one
// front and two workers (child processes of `cluster/embedded.ts`, test/helpers/cluster-procs.ts)
// on a fresh PostgreSQL schema, Redis, and a Kafka broker of this test's own
// (test/helpers/private-infra.ts: one KRaft node from infra-up.sh's jars on free ports; the shared
// broker on 9092 is never touched, other test files use it meanwhile). JSON jobs of about 900
// addresses over the sim's domains, each with a webhook_url, run while the broker is stopped
// (SIGTERM: a controlled shutdown; or SIGKILL, in a seeded order), kept down a seeded moment, and
// started again on the same ports and data: KAFKA_RESTARTS (10) restarts in all. Each restart
// hits a cluster at work: it waits until rows are processed again since the last restart (at most
// 12 s), then a seeded moment. A new job is posted every third restart and whenever every job has
// finished, always between restarts with the broker up (a job whose work the front could not
// publish waits for the unpublished-work sweep, another test's subject). After each job, exactly
// what cluster-crash checks (test/helpers/cluster-procs.ts checkClusterJob): it completes; every
// input row once in the results CSV with the sim's verdict; the 2.2 counters; reserved = charged +
// refunded; one reserve, charge and release in the ledger; one job_results row per unique email;
// job.completed under one X-Webhook-Id. No child may exit meanwhile.
//
// What a restart costs (printed per restart): the JVM's start (1-6 s), then the group's recovery:
// about 1-2 s when every consumer rode the outage out in kafkajs' runner, about a session timeout
// (SVC_KAFKA_SESSION_TIMEOUT_MS, 10 s) when kafkajs recreated some consumer as a new member (a
// consumer joining its group when the broker went, or fetching when no partition had a leader yet:
// kafkajs crashes those) and the group waited for the old member's session to expire.
//
// Replay a run: KAFKA_RESTART_SEED=<seed in the test name> npx tap test/e2e/cluster-kafka-restart.test.ts
// (the plan and the inputs follow the seed; the moments are times, so a busy machine moves them).
// Every child's output, and the broker's, is kept when a check fails (the paths are printed;
// CLUSTER_KEEP_LOGS=1 keeps the children's always). The servers missing: skipped, or a failure
// under CI_REQUIRE_SERVICES=1.

import t, { type Test as Tap } from 'tap';
import { clusterServersUnreachable, runUnlessMissing } from '../helpers/cluster.ts';
import { jobFinished, jobsState, pollJobs, startFaultRun, until } from '../helpers/cluster-procs.ts';
import { privateKafkaMissing, startPrivateKafka } from '../helpers/private-infra.ts';
import { seedFrom, shuffle } from '../helpers/jobs.ts';

t.setTimeout(300_000);

const SEED = seedFrom(process.env.KAFKA_RESTART_SEED);
/** Broker restarts over all jobs. */
const RESTARTS = Number(process.env.KAFKA_RESTARTS ?? 10);
/** Generated addresses per job (besides the sim table's and the repeats). */
const GENERATED = Number(process.env.KAFKA_RESTART_ADDRESSES ?? 800);
/** A new job every this many restarts (and whenever every job has finished). */
const JOB_EVERY = 3;
const MAX_JOBS = 8;
/** Before each restart, how long it waits at most for rows to be processed again since the last one. */
const PROGRESS_WAIT_MS = 12_000;

async function run(): Promise<void> {
  const broker = await startPrivateKafka({ name: 'kafka-restart' });
  const fault = await startFaultRun(t, {
    name: 'cluster-kafka-restart',
    seed: SEED,
    prefix: 'krestart',
    brokers: broker.brokers,
    note: `broker ${broker.brokers[0]}`,
    teardown: async () => {
      // The broker's data and logs go with it (its topics and groups too), kept when a check failed.
      await broker.close(!t.passing());
      if (!t.passing()) t.comment(`the private broker's data and logs kept in ${broker.dir}`);
    },
  });
  const { rand, at, cluster, call, jobs } = fault;

  // ----------------------------------------------------------------------------------------------
  // The plan: RESTARTS restarts, half SIGKILL and half SIGTERM in a seeded order, each after a
  // seeded wait (the broker up) and with a seeded time down (on top of the JVM's start).

  interface Restart {
    signal: 'SIGKILL' | 'SIGTERM';
    waitMs: number;
    downMs: number;
  }
  const signals = shuffle(
    Array.from({ length: RESTARTS }, (_, i) => (i % 2 === 0 ? 'SIGKILL' : 'SIGTERM') as Restart['signal']),
    rand,
  );
  const plan: Restart[] = signals.map((signal) => ({ signal, waitMs: Math.round(100 + rand() * 1400), downMs: Math.round(rand() * 1000) }));

  const submit = (t: Tap) => fault.submit(t, GENERATED);
  const pollAll = () => pollJobs(jobs, call, at);

  let fired = 0;
  let movedAfter = 0;
  const timeline: string[] = [];
  /** Rows processed over all jobs (as last read). */
  const processed = () => jobs.reduce((n, r) => n + (r.job.progress?.processed ?? 0), 0);
  t.comment(`KAFKA_RESTART_SEED=${SEED}: plan ${plan.map((e) => `${e.signal}+${e.waitMs}ms/${e.downMs}ms`).join(' ')}`);
  await t.test(`jobs while the Kafka broker is restarted (KAFKA_RESTART_SEED=${SEED})`, async (t) => {
    await submit(t);
    let upAt = Date.now();
    for (const [i, e] of plan.entries()) {
      if (i > 0 && i % JOB_EVERY === 0 && jobs.length < MAX_JOBS) await submit(t);
      await pollAll();
      if (jobs.every(jobFinished) && jobs.length < MAX_JOBS) await submit(t);
      // Each restart hits a cluster at work: it waits until rows are processed again since the
      // broker came back (at most PROGRESS_WAIT_MS), then the seeded moment.
      const base = processed();
      const moved = await until(async () => (await pollAll(), processed() > base || jobs.every(jobFinished)), PROGRESS_WAIT_MS, 100);
      const movedMs = Date.now() - upAt;
      if (moved && processed() > base) movedAfter++;
      const end = Date.now() + e.waitMs;
      await until(async () => (await pollAll(), Date.now() >= end), e.waitMs + 1000, 100);
      const state = jobsState(jobs);
      const stopped = await broker.stop(e.signal);
      const downAt = Date.now();
      await new Promise((r) => setTimeout(r, e.downMs));
      const startMs = await broker.start();
      upAt = Date.now();
      fired++;
      const line =
        `restart ${fired} at ${at()} (${state}; ` +
        `${moved ? `work moved ${(movedMs / 1000).toFixed(1)} s after the last restart` : `no work moved within ${PROGRESS_WAIT_MS / 1000} s`}): ` +
        `${e.signal}${stopped.forced ? ' (SIGKILL after 30 s)' : ''}, exited in ${stopped.ms} ms, down ${Date.now() - downAt} ms (the JVM's start ${startMs} ms)`;
      timeline.push(line);
      t.comment(line);
    }
    t.ok(await until(async () => (await pollAll(), jobs.every(jobFinished)), 120_000, 250), `every job finished (${jobsState(jobs)})`);
    t.comment(`every job finished at ${at()}, ${((Date.now() - upAt) / 1000).toFixed(1)} s after the last restart`);
  });

  await fault.checkJobs((r) => `job ${r.n} through broker restarts (KAFKA_RESTART_SEED=${SEED})`);

  t.test('credits', (t) => fault.checkCredits(t));
  t.test('the restarts', async (t) => {
    t.equal(fired, RESTARTS, `${fired} broker restarts while jobs ran`);
    t.strictSame(
      cluster.procs.filter((p) => !cluster.running(p)).map((p) => p.name),
      [],
      'every child still running',
    );
    t.comment(`wall time ${at()}; ${jobs.length} jobs; work moved again before ${movedAfter} of ${fired} restarts; timeline:\n${timeline.join('\n')}`);
  });
}

await runUnlessMissing((await clusterServersUnreachable()) ?? privateKafkaMissing(), run);
