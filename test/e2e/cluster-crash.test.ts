// The cluster fault tests "kill -9 a worker mid-job" and "add and remove a worker mid-job (rebalance)", on real
// processes of the cluster profile: the sim and a webhook receiver run in this process; one front
// (SVC_ROLE=front) and two workers (SVC_ROLE=worker) run as child processes of
// `cluster/embedded.ts` on the servers of scripts/infra-up.sh (a fresh PostgreSQL schema, Redis, a
// Kafka topic prefix of their own), started as cluster/cluster.ts starts them (the front first: it
// migrates and creates the bootstrap account). Two JSON jobs of about 1,600 addresses over the
// sim's domains, each with a webhook_url (the second posted halfway through the events, so the two
// overlap), run while at seeded random moments a worker is killed with SIGKILL and a replacement
// started, a worker is added, or a worker is stopped with SIGTERM (it drains): 10 such events
// (a third job if both finished first). After each job:
//   - it completes; the results CSV (from the front) has every input row once, in input order,
//     each with the verdict the sim's table gives (repeats: duplicate_in_job at 0 credits);
//   - the 2.2 counters are the rows counted; reserved = charged + refunded, finalized;
//   - the ledger holds one reserve, one charge, one release for the job's hold, and the balance
//     went down by exactly what the jobs charged together;
//   - job_results (read with pg from the schema) has one row per unique email, none twice;
//   - the receiver got `job.completed` under exactly one X-Webhook-Id (the same id more than once is
//     allowed: delivery is at least once; the count is printed).
// A killed worker's Kafka partitions wait for its session to expire (kafkajs' sessionTimeout,
// 30 s) before the group hands them on, so a kill -9 stalls the job for up to that long: most of
// this test's wall time.
//
// Replay a run: CRASH_SEED=<seed in the test name> npx tap test/e2e/cluster-crash.test.ts (the
// event plan and the inputs follow the seed; the moments are times, so a busy machine moves them
// somewhat). Every child's output is written to a log directory, kept and named when a check fails.
// The servers missing: skipped, or a failure under CI_REQUIRE_SERVICES=1.

import t, { type Test as Tap } from 'tap';
import { clusterServersUnreachable, runUnlessMissing } from '../helpers/cluster.ts';
import { jobFinished, jobsState, pollJobs, startFaultRun, until } from '../helpers/cluster-procs.ts';
import { seedFrom, shuffle } from '../helpers/jobs.ts';

t.setTimeout(420_000);

const SEED = seedFrom(process.env.CRASH_SEED);
/** Events (kill -9 + replacement, add, SIGTERM) over all jobs. */
const EVENTS = Number(process.env.CLUSTER_CRASH_EVENTS ?? 10);
/** Generated addresses per job (besides the sim table's jane.doe / no.such.user and the repeats). */
const GENERATED = Number(process.env.CLUSTER_CRASH_ADDRESSES ?? 1500);
const MAX_JOBS = 4;
const MAX_WORKERS = 4;

async function run(): Promise<void> {
  const fault = await startFaultRun(t, { name: 'cluster-crash', seed: SEED, prefix: 'crash' });
  const { rand, at, cluster, call, jobs } = fault;
  const { procs, spawned, forcedDrains } = cluster;
  const spawnService = (role: 'front' | 'worker') => cluster.spawn(role);
  const running = cluster.running;

  // ----------------------------------------------------------------------------------------------
  // The event plan: EVENTS events (about 4 in 10 kill -9 + replacement, 3 adds, 3 SIGTERMs), each
  // a seeded wait after the last one and a seeded choice of worker; reordered where needed so that
  // at least one and at most MAX_WORKERS workers are meant to be up.

  type Kind = 'kill' | 'add' | 'stop';
  interface Event {
    kind: Kind;
    waitMs: number;
    pick: number;
  }
  const kinds: Kind[] = Array.from({ length: EVENTS }, (_, i) => (i < Math.ceil(EVENTS * 0.4) ? 'kill' : i < Math.ceil(EVENTS * 0.7) ? 'add' : 'stop'));
  shuffle(kinds, rand);
  {
    let n = 2;
    const ok = (k: Kind) => (k === 'add' ? n < MAX_WORKERS : k === 'stop' ? n > 1 : true);
    for (let i = 0; i < kinds.length; i++) {
      if (!ok(kinds[i]!)) {
        const j = kinds.findIndex((k, x) => x > i && ok(k));
        if (j < 0) kinds[i] = n > 1 ? 'stop' : 'add';
        else [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
      }
      n += kinds[i] === 'add' ? 1 : kinds[i] === 'stop' ? -1 : 0;
    }
  }
  const plan: Event[] = kinds.map((kind) => ({ kind, waitMs: Math.round(300 + rand() * 2200), pick: rand() }));

  // ----------------------------------------------------------------------------------------------
  // Events

  let fired = 0;
  const timeline: string[] = [];
  const workers = () => procs.filter((p) => p.role === 'worker' && running(p));
  const fire = async (e: Event, state: string): Promise<void> => {
    // Processes started by an earlier event listen before the next one (a start under load takes seconds).
    const live = await cluster.liveListening('worker');
    const target = live[Math.floor(e.pick * live.length)]!;
    let what: string;
    if (e.kind === 'kill') {
      cluster.signal(target, 'SIGKILL');
      await target.exited;
      const next = spawnService('worker');
      what = `kill -9 ${target.name} (up ${((Date.now() - target.startedAt) / 1000).toFixed(1)} s), started ${next.name}`;
    } else if (e.kind === 'add') {
      what = `added ${spawnService('worker').name}`;
    } else {
      cluster.signal(target, 'SIGTERM');
      what = `SIGTERM ${target.name} (draining)`;
    }
    fired++;
    const line = `event ${fired} at ${at()} (${state}): ${what}; workers now ${workers().map((p) => p.name).join(', ')}`;
    timeline.push(line);
    t.comment(line);
  };

  // ----------------------------------------------------------------------------------------------
  // The jobs: job 1 at once, job 2 once half the events have fired (both then run through the rest:
  // a kill -9 stalls the group for a session timeout, so overlapping the jobs keeps the wall time
  // down); another job if both finished before every event fired (MAX_JOBS at most).

  const submit = (t: Tap) => fault.submit(t, GENERATED);
  const finished = jobFinished;
  const pollAll = () => pollJobs(jobs, call, at);
  const state = () => jobsState(jobs);

  t.comment(`CRASH_SEED=${SEED}: plan ${plan.map((e) => `${e.kind}+${e.waitMs}ms`).join(' ')}`);
  await t.test(`jobs while workers are killed, added and stopped (CRASH_SEED=${SEED})`, async (t) => {
  await submit(t);
  for (const [i, e] of plan.entries()) {
    if (i === Math.ceil(EVENTS / 2) && jobs.length < 2) await submit(t);
    const end = Date.now() + e.waitMs;
    await until(async () => (await pollAll(), Date.now() >= end), e.waitMs + 1000, 100);
    if (jobs.every(finished)) {
      if (jobs.length >= MAX_JOBS) break;
      await submit(t);
    }
    await fire(e, state());
  }
  t.ok(await until(async () => (await pollAll(), jobs.every(finished)), 300_000, 250), `every job finished (${state()})`);
  t.comment(`every job finished at ${at()}`);
  });

  await fault.checkJobs((r) => `job ${r.n} through kill -9, added and stopped workers (CRASH_SEED=${SEED})`);

  // The jobs overlapped: the account's balance moved by exactly what they charged together.
  t.test('credits', (t) => fault.checkCredits(t));
  t.test('the events', async (t) => {
    t.ok(fired >= EVENTS, `${fired} events fired during jobs (wanted ${EVENTS})`);
    // The workers stopped with SIGTERM drained and exited 0 (checked as they exit): wait for them.
    const draining = procs.filter((p) => p.expectedEnd === 'SIGTERM');
    t.ok(await until(() => draining.every((p) => p.child.exitCode !== null || p.child.signalCode !== null), 60_000, 100), 'every stopped worker exited');
    t.comment(`wall time ${at()}; ${spawned.worker} worker processes; ${forcedDrains.length} stopped worker(s) exited 1 after the 30 s drain limit (${forcedDrains.join(', ') || 'none'}); timeline:\n${timeline.join('\n')}`);
  });
}

await runUnlessMissing(await clusterServersUnreachable(), run);
