// The cluster's per-MX limit test: "The per-MX limit: 2 fronts and 3 workers on one machine, sync and job traffic
// together, against a sim MX that refuses a sixth concurrent connection: no refusal ever logged."
//
// A world of its own (test/sim's DNS server and raw `postfix-limits` MX servers, started the way
// bench/engine/world-child.ts does): 2 MX hosts, 8 domains each, every host allowing 5
// connections per client (Postfix's smtpd_client_connection_count_limit: a sixth gets 421 at the
// banner) and answering behind a 40 ms round trip ('network' latency), so sessions overlap.
// Five in-process services, 2 fronts (SVC_ROLE=front) and 3 workers (SVC_ROLE=worker), share
// PostgreSQL (a fresh schema), Kafka (a topic prefix of their own), one SVC_EGRESS_ID and
// SVC_SMTP_MAX_CONNECTIONS_PER_MX=5. Traffic at once: a JSON job through a front (probed by the
// workers) and waves of sync /v1/validate/bulk requests of 100 to both fronts, all on the limited
// hosts, until the job completes.
//
// - With REDIS_URL (the shared limit, RedisMxThrottle): no banner 421 on any host, every verdict
//   the expected one, the job completes with every row once, and the hosts did see 5 sessions at
//   once (a counter kept here beside the sim's servers), so the test cannot pass by being serial.
// - Without REDIS_URL (each process its own limit of 5; the negative control): the same traffic
//   draws banner 421s, counted at the sim whatever the engine's back-off makes of them.
// - Either way, the five services are then closed all at once (as SIGTERM to `npm run cluster`
//   does) and every close ends within 60 s: a front's close used to hang here (an MX actor whose
//   Redis permit came after its work had gone elsewhere never told the engine it was idle).
//
// PostgreSQL, Redis or Kafka missing: skipped, or a failure under CI_REQUIRE_SERVICES=1.

import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { loadConfig, startService, type RunningService } from '@svc/runtime';
import { startDns, type Zone } from '../sim/dns.ts';
import { Timers, startMx, type RunningMx, type SmtpContext } from '../sim/smtp.ts';
import { startOnOnePort } from '../helpers/mx-servers.ts';
import { BOOTSTRAP_KEY } from '../helpers/stack.ts';
import { BROKERS, REDIS_URL, callApi, clusterServersUnreachable, dropKafkaPrefix, dropRedisPrefix } from '../helpers/cluster.ts';
import { freshSchema } from '../helpers/postgres.ts';
import { parseResults, verdictKey } from '../helpers/jobs.ts';

t.setTimeout(300_000);


/** The sim MX hosts' smtpd_client_connection_count_limit, and the engine's per-MX session limit. */
const LIMIT = 5;
const HOSTS = 2;
const DOMAINS_PER_HOST = 8;
const REPLY_LATENCY_MS = 40;
const JOB_SIZE = 600;
const BULK_SIZE = 100;
/** Bulk requests in flight per front in each wave. */
const BULK_PER_FRONT = 2;
const MIN_WAVES = 2;
const MAX_WAVES = 8;
/** How long the services' closes, started all at once, may take together. */
const CLOSE_MS = 60_000;
/** Loopback addresses of this file's MX hosts (test/sim uses 127.0.10.x, the bench 127.0.31.x). */
const mxIp = (h: number) => `127.0.47.${h + 1}`;

// ------------------------------------------------------------------------------------------------
// The world: DNS plus LIMIT-capped Postfix-like MX hosts, and a counter of their open sessions

interface World {
  dnsServers: string;
  smtpPort: number;
  hosts: string[];
  domains: string[];
  /** Local parts the MX servers know (the rest are unknown users). */
  known: (i: number) => boolean;
  limitEvents(): Record<string, number>;
  /** Per host: the most sessions the servers held open for the client at once. */
  peaks(): Record<string, number>;
  /** Connections accepted per host. */
  connections(): Record<string, number>;
  /** Per host: sessions by the client's EHLO/HELO name (each process of the cluster has its own). */
  sessionsByClient(): Record<string, Record<string, number>>;
  close(): Promise<void>;
}

/**
 * Wraps net.createServer while the MX servers start so each server's sessions can be counted as
 * Postfix's anvil counts them: from the 220 banner until the server's 221/421 or the close. The
 * sim writes both through the same half-round-trip delay ('network' model), so this is anvil's
 * count shifted by that delay. A connection refused at the banner (421) is never counted in.
 */
async function withSessionCounter<T>(onSocket: (socket: net.Socket) => void, fn: () => Promise<T>): Promise<T> {
  const original = net.createServer;
  (net as { createServer: unknown }).createServer = ((...args: unknown[]) => {
    const listener = args.find((a): a is (s: net.Socket) => void => typeof a === 'function');
    const rest = args.filter((a) => a !== listener);
    return (original as (...a: unknown[]) => net.Server)(...rest, (socket: net.Socket) => {
      onSocket(socket);
      listener?.(socket);
    });
  }) as typeof net.createServer;
  try {
    return await fn();
  } finally {
    (net as { createServer: unknown }).createServer = original;
  }
}

async function startWorld(tag: string): Promise<World> {
  const hosts = Array.from({ length: HOSTS }, (_, h) => `mx${h + 1}.${tag}.mxlimit.test`);
  const byHost = hosts.map((_, h) => Array.from({ length: DOMAINS_PER_HOST }, (_, j) => `d${h}${j}.${tag}.mxlimit.test`));
  const domains = byHost.flat();
  const zone: Zone = { names: new Map(), servfail: new Set(), timeout: new Set() };
  hosts.forEach((host, h) => {
    zone.names.set(host, { a: [mxIp(h)] });
    for (const d of byHost[h]!) zone.names.set(d, { mx: [{ exchange: host, priority: 10 }] });
  });
  const knownLocals = Array.from({ length: 20_000 }, (_, i) => `p${i}`);

  const ctx: SmtpContext = {
    greylistMs: 300,
    tarpitMs: 30_000,
    slowBannerMs: 400,
    replyLatencyMs: REPLY_LATENCY_MS,
    latencyModel: 'network',
    errorSleepMs: 1000,
    inFlowDelayMs: 1000,
    timers: new Timers(),
    limitEvents: new Map(),
  };
  const open = new Map<string, number>(); // by server IP
  const peak = new Map<string, number>();
  const accepted = new Map<string, number>();
  const byClient = new Map<string, Map<string, number>>(); // server IP → EHLO name → sessions
  const onSocket = (socket: net.Socket): void => {
    const ip = socket.localAddress ?? '';
    accepted.set(ip, (accepted.get(ip) ?? 0) + 1);
    // The client's name, from its first EHLO or HELO (read beside the sim's own reader).
    let named = false;
    let head = '';
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1');
      const m = /^(?:EHLO|HELO) (\S+)\r?$/im.exec(head);
      if (!m && head.length < 4096) return;
      socket.off('data', onData);
      if (!m || named) return;
      named = true;
      const names = byClient.get(ip) ?? new Map<string, number>();
      byClient.set(ip, names);
      names.set(m[1]!.toLowerCase(), (names.get(m[1]!.toLowerCase()) ?? 0) + 1);
    };
    socket.on('data', onData);
    let counted = false;
    const out = (): void => {
      if (!counted) return;
      counted = false;
      open.set(ip, (open.get(ip) ?? 1) - 1);
    };
    const write = socket.write;
    socket.write = function (this: net.Socket, chunk: unknown, ...rest: unknown[]): boolean {
      const text = typeof chunk === 'string' ? chunk : '';
      if (!counted && text.startsWith('220')) {
        counted = true;
        const n = (open.get(ip) ?? 0) + 1;
        open.set(ip, n);
        if (n > (peak.get(ip) ?? 0)) peak.set(ip, n);
      } else if (/^(221|421) /m.test(text)) out();
      return (write as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
    } as typeof socket.write;
    socket.once('close', out);
  };

  const dns = await startDns(zone, 0);
  let servers: RunningMx[] = [];
  let smtpPort = 0;
  try {
      ({ servers, port: smtpPort } = await startOnOnePort((port) =>
        withSessionCounter(onSocket, () =>
          Promise.allSettled(hosts.map((host, h) => startMx({ ip: mxIp(h), host, kind: 'postfix-limits', extraMailboxes: knownLocals, limits: { connectionsPerClient: LIMIT } }, port, ctx))),
        ),
      ));
  } catch (err) {
    ctx.timers.clear();
    await dns.close();
    throw err;
  }
  const byIp = <T>(m: Map<string, T>, zero: T): Record<string, T> => Object.fromEntries(hosts.map((host, h) => [host, m.get(mxIp(h)) ?? zero]));
  let closing: Promise<void> | undefined;
  return {
    dnsServers: `127.0.0.1:${dns.port}`,
    smtpPort,
    hosts,
    domains,
    known: (i) => i % 5 !== 0,
    limitEvents: () => Object.fromEntries(ctx.limitEvents),
    peaks: () => byIp(peak, 0),
    connections: () => byIp(accepted, 0),
    sessionsByClient: () => Object.fromEntries(hosts.map((host, h) => [host, Object.fromEntries(byClient.get(mxIp(h)) ?? [])])),
    close() {
      closing ??= (async () => {
        ctx.timers.clear();
        await Promise.all([...servers.map((s) => s.close()), dns.close()]);
      })();
      return closing;
    },
  };
}

// ------------------------------------------------------------------------------------------------
// One run: the world, five services, the traffic, what the sim saw

interface Outcome {
  refusals: Record<string, number>;
  events: Record<string, number>;
  peaks: Record<string, number>;
  connections: Record<string, number>;
  /** Sessions each process opened (fronts first). */
  sessionsByProcess: number[];
  /** Per host: sessions by client name (front1, front2, worker1 … worker3). */
  sessionsByClient: Record<string, Record<string, number>>;
  syncChecked: number;
  /** Sync answers that were not the expected verdict for the address (first 10). */
  syncWrong: string[];
  syncWrongCount: number;
  jobStatus: string;
  jobProgress: unknown;
  /** The results CSV's emails equal the input, in order (every row once). */
  rowsExact: boolean;
  /** Job rows whose verdict was not the expected one (first 10). */
  jobWrong: string[];
  jobWrongCount: number;
  waves: number;
  overlapped: boolean;
  /** Each service's close, all started at once, in ms (fronts first); 'pending' if not within CLOSE_MS. */
  closeMs: Array<number | 'pending'>;
  /** Per process: close() found its engine idle by its own periodic check, not by an actor's report (should be 0). */
  closeIdleByCheck: number[];
  wallMs: number;
}

async function runCluster(t: { teardown: (fn: () => unknown) => void }, shared: boolean): Promise<Outcome> {
  const began = Date.now();
  const tag = `m${randomBytes(4).toString('hex')}`;
  const world = await startWorld(tag);
  t.teardown(() => world.close());
  const schema = await freshSchema();
  const prefix = `t${randomBytes(4).toString('hex')}.`;
  const egressId = `mxlimit-${tag}`;
  const dirs: string[] = [];
  const started: RunningService[] = [];
  /** Closes every service at once, each bounded (CLOSE_MS): how long each took, or 'pending'. */
  const closeAll = async (): Promise<Array<number | 'pending'>> => {
    const t0 = Date.now();
    const took: Array<number | 'pending'> = started.map(() => 'pending');
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(started.map((s, i) => s.close().then(() => void (took[i] = Date.now() - t0), () => void (took[i] = Date.now() - t0)))),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_MS))),
    ]);
    clearTimeout(timer);
    return took;
  };
  t.teardown(async () => {
    // Closed by the run already (close() is idempotent); here too if the run failed before that.
    await closeAll();
    await schema.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await dropKafkaPrefix(prefix);
    // The throttle's keys expire by themselves (4 leases); this run's are gone at once.
    if (shared) await dropRedisPrefix(`${prefix.replace(/\.$/, '')}:`).catch(() => {});
  });

  const named = { front: 0, worker: 0 };
  const start = async (role: 'front' | 'worker'): Promise<RunningService> => {
    const name = `${role}${++named[role]}`;
    const dir = mkdtempSync(path.join(os.tmpdir(), `svc-mxlimit-${role}-`));
    dirs.push(dir);
    const env: Record<string, string> = {
      PORT: '0',
      HOST: '127.0.0.1',
      SVC_DATA_DIR: dir,
      SVC_DNS_SERVERS: world.dnsServers,
      SVC_SMTP_PORT: String(world.smtpPort),
      SVC_BOOTSTRAP_API_KEY: BOOTSTRAP_KEY,
      SVC_BOOTSTRAP_CREDITS: '100000',
      // Generous: the machine is loaded, and no phase should time out for it.
      SVC_SMTP_TIMEOUT_MS: '8000',
      SVC_DNS_TIMEOUT_MS: '2000',
      SVC_SMTP_RETRY_DELAY_MS: '400',
      // Each process its own name, so the sim can tell whose sessions it holds.
      SVC_HELO_NAME: `${name}.verifier.sim.test`,
      SVC_MAIL_FROM: 'probe@verifier.sim.test',
      SVC_LOG_LEVEL: 'silent',
      DATABASE_URL: schema.url,
      KAFKA_BROKERS: BROKERS.join(','),
      SVC_KAFKA_TOPIC_PREFIX: prefix,
      SVC_KAFKA_PARTITIONS: '6',
      SVC_ROLE: role,
      SVC_EGRESS_ID: egressId,
      SVC_SMTP_MAX_CONNECTIONS_PER_MX: String(LIMIT),
      SVC_RATE_LIMIT_PER_KEY: '1000000',
      SVC_RATE_LIMIT_PER_IP: '1000000',
      SVC_SECRET: 'cluster-mx-limit-secret-0123456789',
      // Keys of this run only (ioredis's keyPrefix): its throttle, and rate-limit counters no other
      // test on this Redis shares.
      ...(shared ? { REDIS_URL: `${REDIS_URL}${REDIS_URL.includes('?') ? '&' : '?'}keyPrefix=${prefix.replace(/\.$/, '')}:` } : {}),
    };
    const svc = await startService(loadConfig(env));
    started.push(svc);
    return svc;
  };
  // The first front alone (migrations, bootstrap account), then the rest.
  const fronts = [await start('front')];
  const rest = [await start('front'), ...(await Promise.all([start('worker'), start('worker'), start('worker')]))];
  fronts.push(rest[0]!);
  const processes = [...fronts, ...rest.slice(1)];
  // Every consumer in its group with its partitions, so each worker gets a share of the job.
  await Promise.all(processes.map((s) => (s.services.bus as { ready?: (timeoutMs?: number) => Promise<void> }).ready?.(60_000)));

  const call = callApi;

  // Addresses: a running counter, spread over every domain; 4 in 5 are mailboxes the hosts know.
  let next = 0;
  const expected = new Map<string, string>();
  const addresses = (n: number): string[] =>
    Array.from({ length: n }, () => {
      const i = next++;
      const domain = world.domains[i % world.domains.length]!;
      const email = world.known(i) ? `p${i}@${domain}` : `nobody${i}@${domain}`;
      expected.set(email, world.known(i) ? 'valid/accepted' : 'invalid/mailbox_not_found');
      return email;
    });

  const jobEmails = addresses(JOB_SIZE);
  const created = await call(fronts[0]!.url, 'POST', '/v1/validate/batch', { emails: jobEmails });
  if (created.status !== 202) throw new Error(`batch: ${created.status} ${created.text}`);

  // The job's progress, polled until it is done; sync waves run meanwhile.
  const progress: Array<{ at: number; processed: number; status: string }> = [];
  let job: any;
  const jobDone = (async () => {
    const deadline = Date.now() + 180_000;
    for (;;) {
      job = (await call(fronts[1]!.url, 'GET', `/v1/csv/jobs/${created.body.id}`)).body;
      progress.push({ at: Date.now(), processed: job.progress?.processed ?? 0, status: job.status });
      if (['completed', 'failed', 'canceled'].includes(job.status)) return;
      if (Date.now() > deadline) throw new Error(`job still ${job.status}: ${JSON.stringify(job.progress)}`);
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
  let finished = false;
  void jobDone.then(
    () => (finished = true),
    () => (finished = true),
  );

  const waves: Array<{ from: number; to: number }> = [];
  let syncChecked = 0;
  const syncWrong: string[] = [];
  for (let w = 0; w < MAX_WAVES && (w < MIN_WAVES || !finished); w++) {
    const from = Date.now();
    const batches = fronts.flatMap((f) => Array.from({ length: BULK_PER_FRONT }, () => ({ url: f.url, emails: addresses(BULK_SIZE) })));
    const answers = await Promise.all(batches.map((b) => call(b.url, 'POST', '/v1/validate/bulk', { emails: b.emails })));
    waves.push({ from, to: Date.now() });
    answers.forEach((a, i) => {
      if (a.status !== 200) throw new Error(`bulk: ${a.status} ${a.text}`);
      const results = a.body.results as Array<{ email: string; result: string; reason_code: string }>;
      if (results.length !== BULK_SIZE) syncWrong.push(`a bulk answer of ${results.length} results`);
      results.forEach((r, k) => {
        syncChecked++;
        const email = batches[i]!.emails[k]!;
        if (r.email !== email || verdictKey(r) !== expected.get(email)) syncWrong.push(`${email}: ${r.email} ${verdictKey(r)}, expected ${expected.get(email)}`);
      });
    });
  }
  await jobDone;

  const file = await call(fronts[0]!.url, 'GET', `/v1/csv/jobs/${created.body.id}/download`);
  const rows = file.status === 200 ? parseResults(file.text) : [];
  const rowsExact = rows.length === jobEmails.length && rows.every((r, i) => r.email === jobEmails[i]);
  const jobWrong = rows.filter((r) => verdictKey(r) !== expected.get(r.email)).map((r) => `${r.email}: ${verdictKey(r)}`);

  // Sync and job traffic overlapped: the job was part done while a wave was in flight.
  const overlapped = progress.some((p) => p.processed > 0 && p.processed < JOB_SIZE && waves.some((w) => p.at >= w.from && p.at <= w.to));

  const events = world.limitEvents();
  const refusals = Object.fromEntries(world.hosts.map((h) => [h, events[`${h} banner_421`] ?? 0]));
  const sessionsByProcess = processes.map((s) => (s.services.verifier.deps.probe as unknown as { counters?: { sessionsOpened: number } }).counters?.sessionsOpened ?? -1);
  // All five closed at once, as SIGTERM to `npm run cluster` closes them (started: the processes in order, fronts first).
  const closeMs = await closeAll();
  const closeIdleByCheck = processes.map((s) => (s.services.verifier.deps.probe as unknown as { counters: { closeIdleByCheck: number } }).counters.closeIdleByCheck);
  return {
    refusals,
    events,
    peaks: world.peaks(),
    connections: world.connections(),
    sessionsByProcess,
    sessionsByClient: world.sessionsByClient(),
    syncChecked,
    syncWrong: syncWrong.slice(0, 10),
    syncWrongCount: syncWrong.length,
    jobStatus: job.status,
    jobProgress: job.progress,
    rowsExact,
    jobWrong: jobWrong.slice(0, 10),
    jobWrongCount: jobWrong.length,
    waves: waves.length,
    overlapped,
    closeMs,
    closeIdleByCheck,
    wallMs: Date.now() - began,
  };
}

// ------------------------------------------------------------------------------------------------

const why = await clusterServersUnreachable();
if (why) {
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`${why} (CI_REQUIRE_SERVICES=1: start them with scripts/infra-up.sh)`);
  else t.plan(0, `${why}: skipping; scripts/infra-up.sh starts them`);
} else {
  t.test('2 fronts and 3 workers sharing one per-MX limit through Redis, sync and job traffic at once: no refusal ever', async (t) => {
    const o = await runCluster(t, true);
    t.comment(JSON.stringify(o));
    t.strictSame(o.syncWrong, [], `every sync verdict the expected one (${o.syncChecked} addresses over ${o.waves} waves)`);
    t.equal(o.jobStatus, 'completed');
    t.strictSame(o.jobProgress, { processed: JOB_SIZE, total: JOB_SIZE, percent: 100 });
    t.ok(o.rowsExact, 'the results CSV: every row once, in input order');
    t.strictSame(o.jobWrong, [], 'every job verdict the expected one (no unknown)');
    for (const [host, n] of Object.entries(o.refusals)) t.equal(n, 0, `${host}: no 421 at the banner`);
    for (const [host, n] of Object.entries(o.peaks)) t.equal(n, LIMIT, `${host}: ${LIMIT} sessions open at once at its peak (the limit was used, not just respected)`);
    t.ok(o.overlapped, 'the job was being probed while sync requests were in flight');
    // Fronts first: both probed (sync requests probe in the front that takes them).
    t.ok(o.sessionsByProcess[0]! > 0 && o.sessionsByProcess[1]! > 0, `both fronts opened sessions (${o.sessionsByProcess.join(', ')})`);
    // The job's MX work is keyed by MX host: one worker owns each host's sessions.
    for (const [host, clients] of Object.entries(o.sessionsByClient)) {
      const workers = Object.keys(clients).filter((c) => c.startsWith('worker'));
      t.equal(workers.length, 1, `${host}: the job's sessions all came from one worker (${JSON.stringify(clients)})`);
      t.ok(Object.keys(clients).some((c) => c.startsWith('front')), `${host}: and the fronts' sync sessions beside them`);
    }
    t.ok(o.closeMs.every((ms) => ms !== 'pending'), `closed all at once, every close ended (ms, fronts first: ${o.closeMs.join(', ')})`);
  });

  t.test('negative control: the same cluster without REDIS_URL (a limit per process) is refused at the banner', async (t) => {
    const o = await runCluster(t, false);
    t.comment(JSON.stringify(o));
    const total = Object.values(o.refusals).reduce((a, b) => a + b, 0);
    t.ok(total > 0, `banner 421s counted at the sim: ${JSON.stringify(o.refusals)}`);
    t.comment(`without the shared limit: ${o.syncWrongCount} sync and ${o.jobWrongCount} job verdicts off the expected one, job ${o.jobStatus}`);
    t.ok(o.closeMs.every((ms) => ms !== 'pending'), `closed all at once, every close ended (ms, fronts first: ${o.closeMs.join(', ')})`);
  });
}
