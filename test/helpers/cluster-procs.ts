// Real processes of the cluster profile for end-to-end tests: fronts (SVC_ROLE=front) and workers
// (SVC_ROLE=worker) as child processes of `cluster/embedded.ts`, as cluster/cluster.ts starts
// them, on the servers the test names (a PostgreSQL schema, Redis, Kafka brokers and a topic
// prefix of the run's own) and the test's simulated internet.
//
//   const run = startClusterRun(t, { sim, schemaUrl, prefix, logName: 'cluster-crash', env: { … } });
//   const front = run.spawn('front');           // the front alone first: it migrates, makes the account
//   await run.listening(front);                 // its API's URL (front.url) once it logs "listening"
//   const w = run.spawn('worker', { EXTRA: 'x' });
//   run.signal(w, 'SIGKILL');                   // an expected end; any other end of a child fails `t`
//   t.teardown(async () => { await run.stopAll(); …; await run.cleanup(); });
//
// Each child's stdout and stderr go to <logDir>/<name>.log (logDir a temporary directory, removed
// by cleanup() when `t` passed, kept and named when it failed or CLUSTER_KEEP_LOGS=1). A child that exits while the test
// did not expect it to (signal() not called, stopAll() not begun) fails `t` with the tail of its
// output. A child stopped with SIGTERM must drain and exit 0; exiting 1 because embedded.ts's 30 s
// drain limit ran out (a worker stopped while its group rebalances) is noted in `forcedDrains`
// and commented, not failed.
//
// The second half is for JSON jobs over such a run: clusterJobInput (inputs with the sim's
// verdicts), submitClusterJob, pollJobs, and checkClusterJob (the invariants after each job).

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync, type WriteStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test as Tap } from 'tap';
import pg from 'pg';
import { SIM_DOMAINS, SIM_UNKNOWN_LOCAL, startSim, type Sim, type SimOptions } from '../sim/index.ts';
import { stackEnv } from './stack.ts';
import { BROKERS, CLICKHOUSE_URL, REDIS_URL, callApi, dropClickHouseDatabase, dropKafkaPrefix, dropRedisPrefix, type ApiAnswer } from './cluster.ts';
import { freshSchema } from './postgres.ts';
import { countersFrom, generatedAt, parseResults, respelled, seededRandom, shuffle, simDomain, startWebhookReceiver, typed, verdictKey, type InputEmail, type WebhookReceiver } from './jobs.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

export type Role = 'front' | 'worker';

/** One child process of `cluster/embedded.ts`. */
export interface ClusterProc {
  /** `front-1`, `worker-3`, …: the name of its log file too. */
  name: string;
  role: Role;
  child: ChildProcess;
  startedAt: number;
  /** The API's URL once it listens (every role listens: workers answer /health and /ready). */
  url?: string;
  readyAt?: number;
  /** The API's URL once it listens; undefined if the process exited first. */
  ready: Promise<string | undefined>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Set (by signal()) before the test ends the process: anything else ending it is a failure. */
  expectedEnd?: 'SIGKILL' | 'SIGTERM';
  /** The last 4,000 characters of its output. */
  tail: () => string;
}

export interface ClusterRunOptions {
  sim: Sim;
  /** DATABASE_URL of every child (a fresh schema: test/helpers/postgres.ts freshSchema). */
  schemaUrl: string;
  /** SVC_KAFKA_TOPIC_PREFIX (topics and groups of the run's own). */
  prefix: string;
  /** KAFKA_BROKERS (default: the infra-up.sh broker, test/helpers/cluster.ts BROKERS). */
  brokers?: readonly string[];
  /** REDIS_URL (default test/helpers/cluster.ts REDIS_URL). */
  redisUrl?: string;
  /** Further variables of every child (after the defaults above, so they may override them). */
  env?: Record<string, string>;
  /** Names the temporary directories: `svc-<logName>-…`. */
  logName: string;
}

export interface ClusterRun {
  /** Where each child's output is written (`<name>.log`). */
  readonly logDir: string;
  /** Every child spawned, in order. */
  readonly procs: readonly ClusterProc[];
  /** How many of each role were spawned. */
  readonly spawned: Readonly<Record<Role, number>>;
  /** Children stopped with SIGTERM that exited 1 after embedded.ts's 30 s drain limit. */
  readonly forcedDrains: readonly string[];
  /** Starts a child of `role` (its own data directory); `env` adds or overrides variables for it alone. */
  spawn(role: Role, env?: Record<string, string>): ClusterProc;
  /** Waits until the child listens (`ms`, default 90 s: a start under load takes 5-15 s); its URL. Throws if it exited or took longer. */
  listening(p: ClusterProc, ms?: number): Promise<string>;
  /** Ends the child with `sig` as an expected end (SIGTERM: it must drain and exit 0). */
  signal(p: ClusterProc, sig: 'SIGKILL' | 'SIGTERM'): void;
  /** The child is running and no end was asked of it. */
  running(p: ClusterProc): boolean;
  /** Children of `role` running, no end asked (spawned ones may not listen yet). */
  live(role: Role): ClusterProc[];
  /** Waits until every live child of `role` listens (a start under load takes seconds); the live ones then. */
  liveListening(role: Role): Promise<ClusterProc[]>;
  /** Every child down: SIGTERM first (Kafka members leave their groups), SIGKILL after `killAfterMs` (30 s). Exits from here on are not failures. */
  stopAll(killAfterMs?: number): Promise<void>;
  /** After stopAll(): removes the data directories, closes the logs, removes the log directory if `t` passed (else names it in a comment). */
  cleanup(): Promise<void>;
}

/** A run of cluster children reporting to `t`: see the header comment. */
export function startClusterRun(t: Tap, opts: ClusterRunOptions): ClusterRun {
  const logDir = mkdtempSync(path.join(os.tmpdir(), `svc-${opts.logName}-`));
  const procs: ClusterProc[] = [];
  const dirs: string[] = [];
  const logs: WriteStream[] = [];
  const spawned: Record<Role, number> = { front: 0, worker: 0 };
  const forcedDrains: string[] = [];
  let tearingDown = false;

  const spawnService = (role: Role, extra: Record<string, string> = {}): ClusterProc => {
    const name = `${role}-${++spawned[role]}`;
    const dir = mkdtempSync(path.join(os.tmpdir(), `svc-${opts.logName}-${role}-`));
    dirs.push(dir);
    const env = stackEnv(opts.sim, dir, {
      DATABASE_URL: opts.schemaUrl,
      // Keys of this run only (ioredis's keyPrefix from the URL): caches, rate-limit counters and
      // the MX throttle are shared by the run's processes and by no other test on this Redis.
      REDIS_URL: opts.redisUrl ?? `${REDIS_URL}${REDIS_URL.includes('?') ? '&' : '?'}keyPrefix=${opts.prefix.replace(/\.$/, '')}:`,
      KAFKA_BROKERS: (opts.brokers ?? BROKERS).join(','),
      SVC_KAFKA_TOPIC_PREFIX: opts.prefix,
      SVC_ROLE: role,
      SVC_LOG_LEVEL: 'info',
      // A test polling ten jobs at 4/s from 127.0.0.1 with one key passes 1,000 requests a minute
      // by itself (429s, read as failed checks).
      SVC_RATE_LIMIT_PER_IP: '10000000',
      SVC_RATE_LIMIT_PER_KEY: '10000000',
      ...opts.env,
      ...extra,
    });
    const child = spawn(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    const log = createWriteStream(path.join(logDir, `${name}.log`));
    logs.push(log);
    let last = '';
    let partial = '';
    let resolveReady!: (url: string | undefined) => void;
    const p: ClusterProc = {
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

  const running = (p: ClusterProc) => p.child.exitCode === null && p.child.signalCode === null && !p.expectedEnd;
  const live = (role: Role) => procs.filter((p) => p.role === role && running(p));
  const listening = async (p: ClusterProc, ms = 90_000): Promise<string> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const url = await Promise.race([p.ready, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
    clearTimeout(timer);
    if (!url) throw new Error(`${p.name} did not start: ${p.tail()}`);
    return url;
  };

  return {
    logDir,
    procs,
    spawned,
    forcedDrains,
    spawn: spawnService,
    listening,
    signal(p, sig) {
      p.expectedEnd = sig;
      p.child.kill(sig);
    },
    running,
    live,
    async liveListening(role) {
      for (const p of live(role)) await listening(p);
      return live(role);
    },
    async stopAll(killAfterMs = 30_000) {
      tearingDown = true;
      const alive = procs.filter((p) => p.child.exitCode === null && p.child.signalCode === null);
      for (const p of alive) p.child.kill('SIGTERM');
      const timer = setTimeout(() => alive.forEach((p) => p.child.kill('SIGKILL')), killAfterMs);
      await Promise.all(alive.map((p) => p.exited));
      clearTimeout(timer);
    },
    async cleanup() {
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
      if (!opts.redisUrl) await dropRedisPrefix(`${opts.prefix.replace(/\.$/, '')}:`).catch(() => {});
      await Promise.all(logs.map((s) => new Promise<void>((r) => s.end(r))));
      if (t.passing() && process.env.CLUSTER_KEEP_LOGS !== '1') rmSync(logDir, { recursive: true, force: true });
      else t.comment(`children's logs kept in ${logDir}`);
    },
  };
}

// ------------------------------------------------------------------------------------------------
// The per-run setup of the fault tests (cluster-crash, cluster-front-kill, cluster-kafka-restart,
// cluster-clickhouse-outage): the seeded randomness, the sim, a webhook receiver, a fresh schema
// and a pg client on it, a cluster run (the first front alone, then the other fronts and two
// workers), the teardown, the balance before, and the jobs and credits checked after.

export interface FaultRunOptions {
  /** The test's name: the log directory `svc-<name>-<seed>-…`, SVC_EGRESS_ID `<name>-<prefix>`, SVC_SECRET. */
  name: string;
  /** The run's seed: `rand` is seededRandom(seed), `inputRand` seededRandom(seed ^ 0x5eed). */
  seed: number;
  /** The Kafka topic prefix: `<prefix><8 hex>.`. */
  prefix: string;
  /** SVC_KAFKA_PARTITIONS (default 6). */
  partitions?: number;
  /** Fronts started (default 1; two workers always). */
  fronts?: number;
  /** KAFKA_BROKERS of a private broker (the topics go with it: no dropKafkaPrefix). Default: the shared broker. */
  brokers?: readonly string[];
  /** Further variables of every child (after the defaults, so they may override them). */
  env?: Record<string, string>;
  /** The sim's options, over { tarpitMs: 5000, greylistMs: 300, replyLatencyMs: 20 }. */
  sim?: SimOptions;
  /** Before the comment that the children listen (`<note>; front and 2 workers listening at …`). */
  note?: string;
  /** Run last in the teardown (a private server's close). */
  teardown?: () => Promise<void>;
}

export interface FaultRun {
  rand: () => number;
  inputRand: () => number;
  t0: number;
  /** Seconds since t0, `12.3 s`. */
  at: () => string;
  /** Addresses of the run's own: no verdict cached in Redis by an earlier run. */
  tag: string;
  prefix: string;
  sim: Sim;
  receiver: WebhookReceiver;
  schema: { schema: string; url: string; drop: () => Promise<void> };
  db: pg.Client;
  cluster: ClusterRun;
  /** The first front. */
  front: ClusterProc;
  /** The API of the first front. */
  call: Call;
  /** GET /v1/credits before any job. */
  before: { balance: number; reserved: number };
  /** Jobs submitted (submit() adds; a test may push its own), and what each charged (checkJobs()). */
  jobs: ClusterJob[];
  charges: number[];
  /** Submits job jobs.length + 1: clusterJobInput(n, { tag, generated, rand: inputRand }) with the receiver's URL. */
  submit(t: Tap, generated: number): Promise<void>;
  /** One subtest per job, `title(r)`: checkClusterJob, its charge recorded. */
  checkJobs(title: (r: ClusterJob) => string, ctx?: { call: Call; frontUrl: string }): Promise<void>;
  /** On `t`: every job counted, the balance down by exactly what the jobs charged (and `syncCredits`), nothing left reserved; the balance read with `call` (default the first front's). */
  checkCredits(t: Tap, opts?: { syncCredits?: number; call?: Call }): Promise<void>;
}

/** The setup of a fault test on `t` (see above); the children listen and the pg client is connected. */
export async function startFaultRun(t: Tap, opts: FaultRunOptions): Promise<FaultRun> {
  const rand = seededRandom(opts.seed);
  const inputRand = seededRandom(opts.seed ^ 0x5eed);
  const t0 = Date.now();
  const at = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const tag = randomBytes(3).toString('hex');
  const prefix = `${opts.prefix}${randomBytes(4).toString('hex')}.`;

  const [sim, receiver, schema] = await Promise.all([startSim({ tarpitMs: 5000, greylistMs: 300, replyLatencyMs: 20, ...opts.sim }), startWebhookReceiver(), freshSchema()]);
  t.teardown(() => sim.close());
  t.teardown(() => receiver.close());
  const db = new pg.Client({ connectionString: schema.url });
  // Analytics on ClickHouse, a database of the run's own (unless the test brings its own server).
  const clickhouse = { url: opts.env?.CLICKHOUSE_URL ?? CLICKHOUSE_URL, database: opts.env?.SVC_CLICKHOUSE_DATABASE ?? `${opts.prefix}_${randomBytes(4).toString('hex')}` };
  const cluster = startClusterRun(t, {
    sim,
    schemaUrl: schema.url,
    prefix,
    brokers: opts.brokers,
    logName: `${opts.name}-${opts.seed}`,
    env: {
      SVC_KAFKA_PARTITIONS: String(opts.partitions ?? 6),
      // The shared per-MX session limit of this run only (other tests on the machine have theirs).
      SVC_EGRESS_ID: `${opts.name}-${prefix}`,
      SVC_BOOTSTRAP_CREDITS: '100000',
      SVC_JOB_GREYLIST_DELAY_MS: '500',
      SVC_JOB_GREYLIST_ATTEMPTS: '3',
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
      SVC_SECRET: `${opts.name}-secret-0123456789abcdef`,
      CLICKHOUSE_URL: clickhouse.url,
      SVC_CLICKHOUSE_DATABASE: clickhouse.database,
      ...opts.env,
    },
  });
  t.teardown(async () => {
    // Every child down: SIGTERM first (their Kafka members leave the groups), SIGKILL after 30 s.
    await cluster.stopAll();
    await db.end().catch(() => {});
    await schema.drop();
    await cluster.cleanup();
    if (!opts.brokers) await dropKafkaPrefix(prefix);
    if (!opts.env?.CLICKHOUSE_URL) await dropClickHouseDatabase(clickhouse.database).catch(() => {});
    await opts.teardown?.();
  });

  // The first front alone (migrations, the bootstrap account), then the other fronts and two workers.
  const fronts = opts.fronts ?? 1;
  const front = cluster.spawn('front');
  await cluster.listening(front);
  const rest = [...Array.from({ length: fronts - 1 }, () => cluster.spawn('front')), cluster.spawn('worker'), cluster.spawn('worker')];
  await Promise.all(rest.map((p) => cluster.listening(p)));
  await db.connect();
  t.comment(`${opts.note ? `${opts.note}; ` : ''}${fronts === 1 ? 'front' : `${fronts} fronts`} and 2 workers listening at ${at()}; logs in ${cluster.logDir}`);

  const call: Call = (method, route, body) => callApi(front.url!, method, route, body);
  const before = (await call('GET', '/v1/credits')).body;
  const jobs: ClusterJob[] = [];
  const charges: number[] = [];
  return {
    rand,
    inputRand,
    t0,
    at,
    tag,
    prefix,
    sim,
    receiver,
    schema,
    db,
    cluster,
    front,
    call,
    before,
    jobs,
    charges,
    async submit(t, generated) {
      const n = jobs.length + 1;
      jobs.push(await submitClusterJob(t, call, n, clusterJobInput(n, { tag, generated, rand: inputRand }), receiver.url));
    },
    async checkJobs(title, ctx = { call, frontUrl: front.url! }) {
      for (const r of jobs) {
        await t.test(title(r), async (t) => {
          charges.push(await checkClusterJob(t, r, { ...ctx, db, receiver, clickhouse }));
        });
      }
    },
    async checkCredits(t, { syncCredits, call: read = call } = {}) {
      const after = (await read('GET', '/v1/credits')).body;
      const total = charges.reduce((a, b) => a + b, 0);
      t.equal(charges.length, jobs.length, 'every job counted');
      t.strictSame(
        [after.balance, after.reserved],
        [before.balance - total - (syncCredits ?? 0), 0],
        `the balance went down by exactly the ${syncCredits === undefined ? `${total} credits the jobs charged` : `${total} job credits and the ${syncCredits} the sync answers charged`}; nothing left reserved`,
      );
    },
  };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves true when `pred` holds (polled every `everyMs`), or false after `ms`. */
export async function until(pred: () => boolean | Promise<boolean>, ms: number, everyMs: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (await pred()) return true;
    if (Date.now() >= end) return false;
    await sleep(everyMs);
  }
}

// ------------------------------------------------------------------------------------------------
// JSON jobs over a cluster run: the inputs (the sim's table and generated mailboxes, with the
// verdict the sim gives each, and repeats), and the invariants checked after each job.

/** A job submitted to a front, and what the test saw of it. */
export interface ClusterJob {
  /** 1, 2, … in the order submitted. */
  n: number;
  id: string;
  input: InputEmail[];
  emails: string[];
  /** Row i is a repeat (another spelling) of an earlier row. */
  isRepeat: boolean[];
  unique: number;
  postedAt: number;
  /** The last status read (GET /v1/csv/jobs/:id). */
  job: any;
  /** `<time> <processed>` whenever progress moved. */
  trace: string[];
}

/**
 * Job `j`'s input: the sim table's known and unknown mailbox on every domain, `generated`
 * mailboxes (local parts `c<tag>j<j>u<i>`) on the domains with a prompt answer (a few
 * greylisted), shuffled, and 60 repeats (the domain's case changed) of ASCII-domain addresses
 * after their first spelling. `rand` is consumed (seeded: the same seed, the same inputs).
 */
export function clusterJobInput(j: number, opts: { tag: string; generated: number; rand: () => number }): InputEmail[] {
  const { tag, generated: n, rand } = opts;
  const d = simDomain;
  const table: InputEmail[] = SIM_DOMAINS.flatMap((x) => [
    { email: `jane.doe@${typed(x)}`, expect: verdictKey(x.known) },
    { email: `${SIM_UNKNOWN_LOCAL}@${typed(x)}`, expect: verdictKey(x.unknown) },
  ]);
  const share = (f: number) => Math.round(n * f);
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
  const firsts = shuffle([...table, ...generated], rand);
  const out = [...firsts];
  const ascii = generated.filter((g) => !g.email.includes('bücher'));
  for (let i = 0; i < 60; i++) {
    const u = ascii[Math.floor(rand() * ascii.length)]!;
    const pos = out.findIndex((r) => r.email === u.email) + 1 + Math.floor(rand() * 50);
    out.splice(Math.min(pos, out.length), 0, { email: respelled(u.email, rand), expect: u.expect! });
  }
  return out;
}

/** The address as intake dedupes it (the domain lower-cased; the local part as written). */
export function canonicalEmail(email: string): string {
  const a = email.lastIndexOf('@');
  return a <= 0 ? email : `${email.slice(0, a)}@${email.slice(a + 1).toLowerCase()}`;
}

type Call = (method: string, route: string, body?: unknown) => Promise<ApiAnswer>;

/** POSTs job `n` (JSON, with `webhookUrl`), checks the 202's counts on `t`; throws unless 202. */
export async function submitClusterJob(t: Tap, call: Call, n: number, input: InputEmail[], webhookUrl: string): Promise<ClusterJob> {
  const emails = input.map((r) => r.email);
  const seen = new Set<string>();
  const isRepeat = emails.map((e) => (seen.has(canonicalEmail(e)) ? true : (seen.add(canonicalEmail(e)), false)));
  const created = await call('POST', '/v1/validate/batch', { emails, webhook_url: webhookUrl });
  if (created.status !== 202) throw new Error(`POST job ${n}: ${created.status} ${created.text}`);
  t.match(created.body, { status: 'queued', total_rows: emails.length, unique_emails: seen.size, credits_reserved: seen.size }, `job ${n} accepted`);
  return { n, id: created.body.id, input, emails, isRepeat, unique: seen.size, postedAt: Date.now(), job: created.body, trace: [] };
}

/** The job is no longer queued or processing (as last read). */
export const jobFinished = (r: ClusterJob): boolean => !['queued', 'processing'].includes(r.job.status);

/**
 * Reads the status of every unfinished job, noting progress moves in its trace (`at()` the time
 * shown). An answer other than 200 (a 429 from a per-IP limit other tests share, say) is not a
 * status: the last one stands.
 */
export async function pollJobs(jobs: readonly ClusterJob[], call: Call, at: () => string): Promise<void> {
  for (const r of jobs) {
    if (jobFinished(r)) continue;
    const res = await call('GET', `/v1/csv/jobs/${r.id}`);
    if (res.status !== 200) continue;
    r.job = res.body;
    const p = `${r.job.progress?.processed ?? 0}`;
    if (!r.trace.at(-1)?.endsWith(` ${p}`)) r.trace.push(`${at()} ${p}`);
  }
}

/** `job 1 processing 40/700, job 2 …` */
export const jobsState = (jobs: readonly ClusterJob[]): string => jobs.map((r) => `job ${r.n} ${r.job.status} ${r.job.progress?.processed ?? 0}/${r.unique}`).join(', ');

/**
 * The invariants of a finished job, on `t`: it completed; the results CSV (from the front) has
 * every input row once, in input order, each with the sim's verdict (repeats duplicate_in_job at 0
 * credits); the 2.2 counters are the rows counted; reserved = charged + refunded, finalized;
 * job_results has one done row per unique email and no (job, idx) twice; the ledger holds one
 * reserve, one charge, one release; the receiver got job.completed under exactly one X-Webhook-Id,
 * the one event in the outbox. Returns the credits the job charged.
 */
export async function checkClusterJob(t: Tap, r: ClusterJob, ctx: { call: Call; frontUrl: string; db: pg.Client; receiver: WebhookReceiver; clickhouse?: { url: string; database: string } }): Promise<number> {
  const { call, frontUrl, db, receiver } = ctx;
  const { id, input, emails, isRepeat, unique, job } = r;
  t.comment(`job ${r.n} progress (time, processed): ${r.trace.join(', ')}`);
  t.equal(job.status, 'completed');
  t.strictSame(job.progress, { processed: unique, total: unique, percent: 100 });

  // The results CSV from the front: every row once, in input order, the sim's verdicts.
  const link = (await call('GET', `/v1/csv/jobs/${id}/download?mode=url`)).body;
  const csv = await (await fetch(String(link.url).replace(/^https?:\/\/[^/]+/, frontUrl))).text();
  const rows = parseResults(csv);
  t.equal(rows.length, emails.length, 'one row per input row');
  t.strictSame(
    rows.map((x) => x.email),
    emails,
    'every input row once, in input order',
  );
  const wrong = rows.flatMap((x, i) => (verdictKey(x) === input[i]!.expect ? [] : [`${emails[i]}: ${verdictKey(x)}, expected ${input[i]!.expect}`]));
  t.strictSame(wrong.slice(0, 20), [], `every row has the verdict the sim gives it (${wrong.length} differ)`);
  const badCharge = rows.flatMap((x, i) => (isRepeat[i] === (x.charge_reason === 'duplicate_in_job') && (!isRepeat[i] || x.credits_charged === '0') ? [] : [`row ${i} ${emails[i]}: ${x.charge_reason} ${x.credits_charged}`]));
  t.strictSame(badCharge.slice(0, 20), [], 'repeats are duplicate_in_job at 0 credits, first occurrences are not');

  // Counters and credits.
  const firsts = rows.filter((_, i) => !isRepeat[i]);
  const charged = firsts.reduce((s, x) => s + Number(x.credits_charged), 0);
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
  t.ok(
    hooks.every((x) => JSON.parse(x.body).event === 'job.completed'),
    'job.completed',
  );
  const outbox = await db.query('SELECT id, status FROM webhook_events WHERE job_id = $1', [id]);
  t.strictSame(
    outbox.rows.map((x) => x.id),
    [...ids],
    'one event in the outbox, the one received',
  );
  // Analytics: one decision per unique email, each counted once, whatever worker died when (the
  // decision outbox ships them at least once; ClickHouse folds a resend by id).
  if (ctx.clickhouse) {
    const { url, database } = ctx.clickhouse;
    const count = async (): Promise<{ decisions: number; rows: number; outbox: number }> => {
      const res = await fetch(`${url}/`, { method: 'POST', body: `SELECT uniqExact(id) AS decisions, count() AS rows FROM ${database}.validation_decisions WHERE job_id = '${id}' FORMAT JSONEachRow` });
      const got = res.ok ? (JSON.parse((await res.text()) || '{}') as { decisions?: string | number; rows?: string | number }) : {};
      const outbox = (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM decision_outbox WHERE id LIKE $1 || ':%'", [id])).rows[0]!.n;
      return { decisions: Number(got.decisions ?? 0), rows: Number(got.rows ?? 0), outbox };
    };
    let seen = await count();
    await until(async () => (seen = await count()).decisions >= unique && seen.outbox === 0, 90_000, 250);
    t.strictSame([seen.decisions, seen.outbox], [unique, 0], `ClickHouse holds one decision per unique email (${unique}), the outbox is empty (rows written: ${seen.rows})`);
  }
  t.comment(`job ${r.n}: ${emails.length} rows, ${unique} unique, ${charged} charged, completed ${((Date.parse(job.completed_at) - r.postedAt) / 1000).toFixed(1)} s after the POST; webhook requests ${hooks.length}`);
  return charged;
}
