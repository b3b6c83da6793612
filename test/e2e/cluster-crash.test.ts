// Issue 7's "kill -9 a worker mid-job" and "add and remove a worker mid-job (rebalance)", on real
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

import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import t, { type Test as Tap } from 'tap';
import pg from 'pg';
import { startSim, SIM_DOMAINS, SIM_UNKNOWN_LOCAL } from '../sim/index.ts';
import { stackEnv } from '../helpers/stack.ts';
import { BROKERS, REDIS_URL, callApi, clusterServersUnreachable, dropKafkaPrefix } from '../helpers/cluster.ts';
import { freshSchema } from '../helpers/postgres.ts';
import { countersFrom, generatedAt, parseResults, respelled, seededRandom, seedFrom, shuffle, simDomain, startWebhookReceiver, typed, verdictKey, type InputEmail } from '../helpers/jobs.ts';

t.setTimeout(420_000);

const ROOT = path.resolve(import.meta.dirname, '../..');
const SEED = seedFrom(process.env.CRASH_SEED);
/** Events (kill -9 + replacement, add, SIGTERM) over all jobs. */
const EVENTS = Number(process.env.CLUSTER_CRASH_EVENTS ?? 10);
/** Generated addresses per job (besides the sim table's jane.doe / no.such.user and the repeats). */
const GENERATED = Number(process.env.CLUSTER_CRASH_ADDRESSES ?? 1500);
const MAX_JOBS = 4;
const MAX_WORKERS = 4;

// ------------------------------------------------------------------------------------------------
// Child processes

interface Proc {
  name: string;
  role: 'front' | 'worker';
  child: ChildProcess;
  startedAt: number;
  url?: string;
  readyAt?: number;
  /** The API's URL once it listens; undefined if the process exited first. */
  ready: Promise<string | undefined>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Set by the test before it signals the process (anything else ending it is a failure). */
  expectedEnd?: 'SIGKILL' | 'SIGTERM';
  tail: () => string;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves when `pred` holds (polled every `everyMs`), or false after `ms`. */
async function until(pred: () => boolean | Promise<boolean>, ms: number, everyMs: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return true;
    if (Date.now() >= end) return false;
    await sleep(everyMs);
  }
}

async function run(): Promise<void> {
  const rand = seededRandom(SEED);
  const inputRand = seededRandom(SEED ^ 0x5eed);
  const t0 = Date.now();
  const at = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const tag = randomBytes(3).toString('hex'); // addresses of their own: no verdict cached in Redis by an earlier run
  const prefix = `crash${randomBytes(4).toString('hex')}.`;
  const logDir = mkdtempSync(path.join(os.tmpdir(), `svc-cluster-crash-${SEED}-`));

  const sim = await startSim({ tarpitMs: 5000, greylistMs: 300, replyLatencyMs: 20 });
  t.teardown(() => sim.close());
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  const schema = await freshSchema();
  const procs: Proc[] = [];
  const dirs: string[] = [];
  const logs: WriteStream[] = [];
  const db = new pg.Client({ connectionString: schema.url });

  let tearingDown = false;
  t.teardown(async () => {
    tearingDown = true;
    // Every child down: SIGTERM first (their Kafka members leave the groups), SIGKILL after 30 s.
    const alive = procs.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
    for (const p of alive) p.child.kill('SIGTERM');
    const timer = setTimeout(() => alive.forEach((p) => p.child.kill('SIGKILL')), 30_000);
    await Promise.all(alive.map((p) => p.exited));
    clearTimeout(timer);
    await db.end().catch(() => {});
    await schema.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await Promise.all(logs.map((s) => new Promise<void>((r) => s.end(r))));
    if (t.passing()) rmSync(logDir, { recursive: true, force: true });
    else t.comment(`children's logs kept in ${logDir}`);
    await dropKafkaPrefix(prefix);
  });

  const spawned = { front: 0, worker: 0 };
  const forcedDrains: string[] = [];
  const spawnService = (role: 'front' | 'worker'): Proc => {
    const name = `${role}-${++spawned[role]}`;
    const dir = mkdtempSync(path.join(os.tmpdir(), `svc-cluster-crash-${role}-`));
    dirs.push(dir);
    const env = stackEnv(sim, dir, {
      DATABASE_URL: schema.url,
      REDIS_URL,
      KAFKA_BROKERS: BROKERS.join(','),
      SVC_KAFKA_TOPIC_PREFIX: prefix,
      SVC_KAFKA_PARTITIONS: '6',
      SVC_ROLE: role,
      SVC_LOG_LEVEL: 'info',
      // The shared per-MX session limit of this run only (other tests on the machine have theirs).
      SVC_EGRESS_ID: `cluster-crash-${prefix}`,
      SVC_BOOTSTRAP_CREDITS: '100000',
      SVC_JOB_GREYLIST_DELAY_MS: '500',
      SVC_JOB_GREYLIST_ATTEMPTS: '3',
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
      SVC_SECRET: 'cluster-crash-secret-0123456789abcdef',
    });
    const child = spawn(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const log = createWriteStream(path.join(logDir, `${name}.log`));
    logs.push(log);
    let last = '';
    let partial = '';
    let resolveReady!: (url: string | undefined) => void;
    const p: Proc = {
      name,
      role,
      child,
      startedAt: Date.now(),
      ready: new Promise((r) => (resolveReady = r)),
      exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
      tail: () => last,
    };
    const keep = (s: string) => {
      log.write(s);
      last = (last + s).slice(-4000);
    };
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      keep(chunk);
      partial += chunk;
      let nl: number;
      while ((nl = partial.indexOf('\n')) >= 0) {
        const line = partial.slice(0, nl);
        partial = partial.slice(nl + 1);
        if (!line.includes('"msg":"email validation service listening"')) continue;
        try {
          const url = (JSON.parse(line) as { url?: string }).url;
          p.url = url;
          p.readyAt = Date.now();
          resolveReady(url);
        } catch {
          /* not a log line */
        }
      }
    });
    child.stderr!.setEncoding('utf8').on('data', keep);
    void p.exited.then(({ code, signal }) => {
      resolveReady(undefined);
      log.write(`\n[test] exited: ${signal ?? code}\n`);
      if (tearingDown) return;
      if (!p.expectedEnd) t.fail(`${name} exited by itself (${signal ?? code}): ${p.tail()}`);
      else if (p.expectedEnd === 'SIGTERM' && code !== 0) {
        // embedded.ts gives a drain 30 s, then exits 1. A worker stopped while its group rebalances
        // (its consumers waiting in JoinGroup for a killed member's session to expire, or for a
        // member in a long handler) can take longer than that: noted, not failed; any other end is.
        if (code === 1 && p.tail().includes('drain took longer than 30 s')) {
          forcedDrains.push(name);
          t.comment(`${name}, stopped with SIGTERM, did not drain within 30 s and exited 1`);
        } else t.fail(`${name}, stopped with SIGTERM, exited with ${signal ?? code} (a drain should end 0): ${p.tail()}`);
      }
    });
    procs.push(p);
    return p;
  };
  /** Waits until the process listens (90 s at most: a start under load takes 5-15 s). */
  const listening = async (p: Proc): Promise<void> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const url = await Promise.race([p.ready, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 90_000)))]);
    clearTimeout(timer);
    if (!url) throw new Error(`${p.name} did not start: ${p.tail()}`);
  };
  const running = (p: Proc) => p.child.exitCode === null && p.child.signalCode === null && !p.expectedEnd;

  // The front alone first (migrations, the bootstrap account), then the two workers.
  const front = spawnService('front');
  await listening(front);
  await Promise.all([spawnService('worker'), spawnService('worker')].map(listening));
  await db.connect();
  t.comment(`front and 2 workers listening at ${at()}; logs in ${logDir}`);

  const call = (method: string, route: string, body?: unknown) => callApi(front.url!, method, route, body);

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
  // The inputs: per job, the sim table's known and unknown mailbox on every domain, generated
  // mailboxes on the domains with a prompt answer (a few greylisted), and some repeats.

  const d = simDomain;
  const inputOf = (j: number): InputEmail[] => {
    const table: InputEmail[] = SIM_DOMAINS.flatMap((x) => [
      { email: `jane.doe@${typed(x)}`, expect: verdictKey(x.known) },
      { email: `${SIM_UNKNOWN_LOCAL}@${typed(x)}`, expect: verdictKey(x.unknown) },
    ]);
    const share = (f: number) => Math.round(GENERATED * f);
    const local = `c${tag}j${j}u`;
    const generated = [
      ...generatedAt(d('accept.test'), share(0.35), local),
      ...generatedAt(d('catchall.test'), share(0.15), local),
      ...generatedAt(d('gmail.com'), share(0.15), local),
      ...generatedAt(d('slowmx.test'), share(0.1), local),
      ...generatedAt(d('mailinator.com'), share(0.08), local),
      ...generatedAt(d('bücher.test'), share(0.07), local),
      ...generatedAt(d('multimx.test'), share(0.05), local),
      ...generatedAt(d('postfix.test'), share(0.02), local),
      ...generatedAt(d('greylist.test'), share(0.01), local),
      ...generatedAt(d('nxdomain.test'), share(0.02), local),
    ];
    const firsts = shuffle([...table, ...generated], inputRand);
    // Repeats (the domain's case changed) of ASCII-domain addresses, after their first spelling.
    const out = [...firsts];
    const ascii = generated.filter((g) => !g.email.includes('bücher'));
    for (let i = 0; i < 60; i++) {
      const u = ascii[Math.floor(inputRand() * ascii.length)]!;
      const pos = out.findIndex((r) => r.email === u.email) + 1 + Math.floor(inputRand() * 50);
      out.splice(Math.min(pos, out.length), 0, { email: respelled(u.email, inputRand), expect: u.expect! });
    }
    return out;
  };
  const canonical = (email: string): string => {
    const a = email.lastIndexOf('@');
    return a <= 0 ? email : `${email.slice(0, a)}@${email.slice(a + 1).toLowerCase()}`;
  };

  // ----------------------------------------------------------------------------------------------
  // Events

  let fired = 0;
  const timeline: string[] = [];
  const workers = () => procs.filter((p) => p.role === 'worker' && running(p));
  const fire = async (e: Event, state: string): Promise<void> => {
    // Processes started by an earlier event listen before the next one (a start under load takes seconds).
    for (const p of workers()) await listening(p);
    const live = workers();
    const target = live[Math.floor(e.pick * live.length)]!;
    let what: string;
    if (e.kind === 'kill') {
      target.expectedEnd = 'SIGKILL';
      target.child.kill('SIGKILL');
      await target.exited;
      const next = spawnService('worker');
      what = `kill -9 ${target.name} (up ${((Date.now() - target.startedAt) / 1000).toFixed(1)} s), started ${next.name}`;
    } else if (e.kind === 'add') {
      what = `added ${spawnService('worker').name}`;
    } else {
      target.expectedEnd = 'SIGTERM';
      target.child.kill('SIGTERM');
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

  interface Running {
    n: number;
    id: string;
    input: InputEmail[];
    emails: string[];
    isRepeat: boolean[];
    unique: number;
    postedAt: number;
    job: any;
    trace: string[];
  }
  const jobs: Running[] = [];
  const charges: number[] = [];
  const before = (await call('GET', '/v1/credits')).body;
  const submit = async (t: Tap): Promise<void> => {
    const n = jobs.length + 1;
    const input = inputOf(n);
    const emails = input.map((r) => r.email);
    const seen = new Set<string>();
    const isRepeat = emails.map((e) => (seen.has(canonical(e)) ? true : (seen.add(canonical(e)), false)));
    const created = await call('POST', '/v1/validate/batch', { emails, webhook_url: receiver.url });
    if (created.status !== 202) throw new Error(`POST job ${n}: ${created.status} ${created.text}`);
    t.match(created.body, { status: 'queued', total_rows: emails.length, unique_emails: seen.size, credits_reserved: seen.size }, `job ${n} accepted`);
    jobs.push({ n, id: created.body.id, input, emails, isRepeat, unique: seen.size, postedAt: Date.now(), job: created.body, trace: [] });
  };
  const finished = (r: Running) => !['queued', 'processing'].includes(r.job.status);
  const pollAll = async (): Promise<void> => {
    for (const r of jobs) {
      if (finished(r)) continue;
      r.job = (await call('GET', `/v1/csv/jobs/${r.id}`)).body;
      const p = `${r.job.progress?.processed ?? 0}`;
      if (!r.trace.at(-1)?.endsWith(` ${p}`)) r.trace.push(`${at()} ${p}`);
    }
  };
  const state = () => jobs.map((r) => `job ${r.n} ${r.job.status} ${r.job.progress?.processed ?? 0}/${r.unique}`).join(', ');

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

  for (const r of jobs) {
    await t.test(`job ${r.n} through kill -9, added and stopped workers (CRASH_SEED=${SEED})`, async (t) => {
      const { id, input, emails, isRepeat, unique, job } = r;
      t.comment(`job ${r.n} progress (time, processed): ${r.trace.join(', ')}`);
      t.equal(job.status, 'completed');
      t.strictSame(job.progress, { processed: unique, total: unique, percent: 100 });

      // The results CSV from the front: every row once, in input order, the sim's verdicts.
      const link = (await call('GET', `/v1/csv/jobs/${id}/download?mode=url`)).body;
      const csv = await (await fetch(String(link.url).replace(/^https?:\/\/[^/]+/, front.url!))).text();
      const rows = parseResults(csv);
      t.equal(rows.length, emails.length, 'one row per input row');
      t.strictSame(rows.map((x) => x.email), emails, 'every input row once, in input order');
      const wrong = rows.flatMap((x, i) => (verdictKey(x) === input[i]!.expect ? [] : [`${emails[i]}: ${verdictKey(x)}, expected ${input[i]!.expect}`]));
      t.strictSame(wrong.slice(0, 20), [], `every row has the verdict the sim gives it (${wrong.length} differ)`);
      const badCharge = rows.flatMap((x, i) => (isRepeat[i] === (x.charge_reason === 'duplicate_in_job') && (!isRepeat[i] || x.credits_charged === '0') ? [] : [`row ${i} ${emails[i]}: ${x.charge_reason} ${x.credits_charged}`]));
      t.strictSame(badCharge.slice(0, 20), [], 'repeats are duplicate_in_job at 0 credits, first occurrences are not');

      // Counters and credits.
      const firsts = rows.filter((_, i) => !isRepeat[i]);
      const charged = firsts.reduce((s, x) => s + Number(x.credits_charged), 0);
      charges.push(charged);
      t.strictSame(job.results, countersFrom(firsts, emails.length), 'the 2.2 counters are the rows counted');
      t.match(job.credit_reservation, { reserved_credits: unique, credits_charged: charged, refunded_credits: unique - charged, finalized: true }, 'reserved = charged + refunded, finalized');

      // The database: one result row per unique email, none twice; one reserve, charge, release.
      const dup = await db.query('SELECT idx, count(*)::int AS n FROM job_results WHERE job_id = $1 GROUP BY idx HAVING count(*) > 1', [id]);
      t.strictSame(dup.rows, [], 'no (job, idx) twice in job_results');
      const res = await db.query("SELECT count(*)::int AS n, count(*) FILTER (WHERE state = 'done')::int AS done, min(idx)::int AS lo, max(idx)::int AS hi FROM job_results WHERE job_id = $1", [id]);
      t.strictSame(res.rows[0], { n: unique, done: unique, lo: 0, hi: unique - 1 }, 'one done result row per unique email');
      const ledger = await db.query('SELECT l.kind, l.amount::int AS amount FROM credit_ledger l JOIN jobs j ON j.reservation_id = l.reservation_id WHERE j.id = $1 ORDER BY l.id', [id]);
      t.strictSame(
        ledger.rows,
        [{ kind: 'reserve', amount: unique }, ...(charged > 0 ? [{ kind: 'charge', amount: charged }] : []), ...(charged < unique ? [{ kind: 'release', amount: unique - charged }] : [])],
        'one reserve, one charge, one release',
      );

      // The webhook: job.completed under one event id. A worker killed between sending and
      // recording it leaves the event leased (60 s), then sent again with the same id.
      const forJob = () => receiver.received.filter((x) => (JSON.parse(x.body) as { job?: { id?: string } }).job?.id === id);
      t.ok(await until(() => forJob().length > 0, 90_000, 100), 'the webhook came');
      await sleep(1500); // a moment for a second delivery, should one be on its way
      const hooks = forJob();
      const ids = new Set(hooks.map((x) => String(x.headers['x-webhook-id'])));
      t.equal(ids.size, 1, `one X-Webhook-Id for the job (${hooks.length} request(s))`);
      t.ok(hooks.every((x) => JSON.parse(x.body).event === 'job.completed'), 'job.completed');
      const outbox = await db.query('SELECT id, status FROM webhook_events WHERE job_id = $1', [id]);
      t.strictSame(outbox.rows.map((x) => x.id), [...ids], 'one event in the outbox, the one received');
      t.comment(`job ${r.n}: ${emails.length} rows, ${unique} unique, ${charged} charged, completed ${((Date.parse(job.completed_at) - r.postedAt) / 1000).toFixed(1)} s after the POST; webhook requests ${hooks.length}`);
    });
  }

  t.test('credits', async (t) => {
    // The jobs overlapped: the account's balance moved by exactly what they charged together.
    const after = (await call('GET', '/v1/credits')).body;
    const total = charges.reduce((a, b) => a + b, 0);
    t.equal(charges.length, jobs.length, 'every job counted');
    t.strictSame([after.balance, after.reserved], [before.balance - total, 0], `the balance went down by exactly the ${total} credits the jobs charged; nothing left reserved`);
  });
  t.test('the events', async (t) => {
    t.ok(fired >= EVENTS, `${fired} events fired during jobs (wanted ${EVENTS})`);
    // The workers stopped with SIGTERM drained and exited 0 (checked as they exit): wait for them.
    const draining = procs.filter((p) => p.expectedEnd === 'SIGTERM');
    t.ok(await until(() => draining.every((p) => p.child.exitCode !== null || p.child.signalCode !== null), 60_000, 100), 'every stopped worker exited');
    t.comment(`wall time ${at()}; ${spawned.worker} worker processes; ${forcedDrains.length} stopped worker(s) exited 1 after the 30 s drain limit (${forcedDrains.join(', ') || 'none'}); timeline:\n${timeline.join('\n')}`);
  });
}

const why = await clusterServersUnreachable();
if (why) {
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`${why} (CI_REQUIRE_SERVICES=1: start them with scripts/infra-up.sh)`);
  else t.plan(0, `${why}: skipping; scripts/infra-up.sh starts them`);
} else {
  await run();
}
