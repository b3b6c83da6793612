// Benchmark: one JSON job end to end, request to `completed`, in the embedded profile and
// in the cluster profile with 1, 2 and 3 workers, on the world of bench/engine/throughput.ts (10
// Postfix-like MX hosts, 5 connections per client each, 25 ms each way, 'network' latency model;
// bench/engine/world.ts), all in one run.
//
// Every service is a real process (bench/jobs/ingest-child.ts: startService(loadConfig(env))):
// - embedded: one process, SVC_ROLE=all, PGlite in a fresh data directory, everything in-process;
// - cluster: one front (SVC_ROLE=front) and N workers (SVC_ROLE=worker) on PostgreSQL (a fresh
//   schema), Redis and Kafka (topics of their own), as scripts/infra-up.sh runs them; every process
//   has the same SVC_EGRESS_ID, so they share one limit of 5 sessions per MX host (Redis): the
//   bound of the world does not grow with the workers, only the CPU to reach it does.
// The job is posted to the (front) process; its status is polled every 100 ms; the results CSV is
// downloaded from the front and every row checked against the world's truth. Fresh MX servers
// before each configuration (full flow-token pools, no connections).
//
//   node --import tsx bench/cluster/throughput.ts     (CLUSTER_BENCH_N, default 2,000;
//                                                       CLUSTER_BENCH_WORKERS, default 1,2,3;
//                                                       CLUSTER_BENCH_WORKER_POOL=<threads>: one more
//                                                       phase, the first worker count with the
//                                                       CSV pool on in the workers)
//
// CLUSTER_BENCH_BIG=500000: instead, the end-to-end time of one job that size in both profiles
// (embedded, and 1 front + CLUSTER_BENCH_BIG_WORKERS workers, default 2): 2,000 world addresses
// (SMTP on the Postfix-like hosts) and the rest unique mailboxes on 20,000 domains the world does
// not know (NXDOMAIN, negative-cached: as bench/jobs/ingest.ts's 500,000-address job), every row
// checked. Measures the pipeline (intake, bus, workers, aggregator, finalization, results CSV) at
// scale rather than the MX limits, and the peak memory of every process (CLUSTER_BENCH_BIG_EMBEDDED=0:
// the cluster profile only).

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { pathToFileURL } from 'node:url';
import { kafkaAdmin } from '@svc/bus';
import pg from 'pg';
import { parse } from 'csv-parse/sync';
import { startChild, type Child } from '../lib/children.ts';
import type { BenchResult, Row } from '../lib/result.ts';
import { fmt } from '../lib/stats.ts';
import { POSTFIX_HOSTS, LIMITS, RTT_MS, worldAddresses, type WorldAddress } from '../engine/world.ts';

export const NAME = 'cluster/throughput';
const KEY = 'svc_live_benchClusterKey0000000000001';
const BOUND = (POSTFIX_HOSTS * LIMITS.connectionsPerClient * 1000) / RTT_MS;
/** The engine target (bench/README.md): a job reaches at least this share of the bound. */
const TARGET_JOB = 0.8;
const PG_BASE = process.env.BENCH_DATABASE_URL || process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';

type World = Child<{ dnsServers: string; smtpPort: number }>;
type Svc = Child<{ url: string; pid: number }>;

interface Phase {
  label: string;
  workers: number | undefined;
  wallMs: number;
  wrong: number;
  unknown: number;
  rows: number;
}

async function pgAdmin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: PG_BASE });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

function serviceEnv(world: World, extra: Record<string, string>): Record<string, string> {
  return {
    PORT: '0',
    HOST: '127.0.0.1',
    SVC_DNS_SERVERS: world.info.dnsServers,
    SVC_SMTP_PORT: String(world.info.smtpPort),
    SVC_READY_DOMAIN: 'gmail.com',
    SVC_HELO_NAME: 'verifier.bench.test',
    SVC_MAIL_FROM: 'probe@verifier.bench.test',
    SVC_LOG_LEVEL: 'silent',
    SVC_BOOTSTRAP_API_KEY: KEY,
    SVC_BOOTSTRAP_CREDITS: '10000000',
    SVC_RATE_LIMIT_PER_KEY: '10000000',
    SVC_RATE_LIMIT_PER_IP: '10000000',
    SVC_EGRESS_ID: 'bench-egress',
    SVC_SECRET: 'cluster-bench-secret-0123456789',
    DATABASE_URL: '',
    REDIS_URL: '',
    KAFKA_BROKERS: '',
    CLICKHOUSE_URL: '',
    // CLUSTER_BENCH_ENV='K=V K2=V2': more environment for every service process (a setting to compare).
    ...Object.fromEntries(
      (process.env.CLUSTER_BENCH_ENV ?? '')
        .split(/\s+/)
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    ),
    ...extra,
  };
}

const api = async (base: string, method: string, route: string, body?: unknown) => {
  const res = await fetch(base + route, { method, headers: { 'x-api-key': KEY, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
};

/** Posts the job to `front`, waits for `completed`, checks every row against the world. */
async function runJob(front: string, addrs: readonly WorldAddress[], limitMs = 300_000): Promise<Omit<Phase, 'label' | 'workers'>> {
  const t0 = performance.now();
  const created = await api(front, 'POST', '/v1/validate/batch', { emails: addrs.map((a) => a.email) });
  if (created.status !== 202) throw new Error(`job refused: ${created.status} ${created.text}`);
  const id = created.json.id as string;
  const acceptedMs = performance.now() - t0;
  for (;;) {
    const s = await api(front, 'GET', `/v1/csv/jobs/${id}`);
    if (s.json?.status === 'completed') break;
    if (s.json?.status === 'failed' || s.json?.status === 'canceled') throw new Error(`job ${s.json.status}`);
    if (performance.now() - t0 > limitMs) throw new Error(`job still ${s.json?.status} after ${limitMs / 1000} s: ${JSON.stringify(s.json?.progress)}`);
    await new Promise((r) => setTimeout(r, addrs.length > 100_000 ? 1000 : 100));
  }
  const wallMs = performance.now() - t0;
  accepted = acceptedMs;
  const csv = await api(front, 'GET', `/v1/csv/jobs/${id}/download`);
  const rows = parse(csv.text) as string[][];
  const header = rows[0]!;
  const at = (name: string) => header.indexOf(name);
  const truth = new Map(addrs.map((a) => [a.email, a.truth]));
  let wrong = 0;
  let unknown = 0;
  const wrongBy = new Map<string, number>();
  /** The first reason text of each kind of wrong verdict. */
  const wrongWhy = new Map<string, string>();
  for (const r of rows.slice(1)) {
    const t = truth.get(r[0]!);
    if (r[at('result')] === 'unknown') unknown++;
    if (!t || r[at('result')] !== t.result || r[at('reason_code')] !== t.reason_code) {
      wrong++;
      const k = `${t ? `${t.result}/${t.reason_code}` : '?'} → ${r[at('result')]}/${r[at('reason_code')]}`;
      wrongBy.set(k, (wrongBy.get(k) ?? 0) + 1);
      if (!wrongWhy.has(k)) wrongWhy.set(k, `${r[0]}: ${r[at('reason')] ?? ''}`);
    }
  }
  if (wrong > 0) console.error(`wrong verdicts (expected → got): ${[...wrongBy].map(([k, n]) => `${k}: ${n} (first: ${wrongWhy.get(k)})`).join('; ')}`);
  return { wallMs, wrong, unknown, rows: rows.length - 1 };
}

/** Request → 202 of the last runJob (ms). */
let accepted = 0;

/** Peak RSS (MiB, /proc VmRSS every 250 ms) and peak heapUsed / external (process.memoryUsage() every 2 s) of each process of the last phase. */
let lastMemory: Array<{ role: string; rssMiB: number; heapMiB: number; externalMiB: number }> = [];

function watchMemory(procs: Array<{ role: string; svc: Svc }>): () => typeof lastMemory {
  const peaks = procs.map((p) => ({ role: p.role, rssMiB: 0, heapMiB: 0, externalMiB: 0 }));
  const rss = setInterval(() => {
    procs.forEach((p, i) => {
      try {
        const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${p.svc.info.pid}/status`, 'utf8'));
        if (m) peaks[i]!.rssMiB = Math.max(peaks[i]!.rssMiB, Number(m[1]) / 1024);
      } catch {
        /* gone */
      }
    });
  }, 250);
  const heap = setInterval(() => {
    procs.forEach((p, i) => {
      void p.svc.request<NodeJS.MemoryUsage>('memory').then(
        (m) => {
          peaks[i]!.heapMiB = Math.max(peaks[i]!.heapMiB, m.heapUsed / 2 ** 20);
          peaks[i]!.externalMiB = Math.max(peaks[i]!.externalMiB, m.external / 2 ** 20);
        },
        () => {},
      );
    });
  }, 2000);
  return () => {
    clearInterval(rss);
    clearInterval(heap);
    return peaks;
  };
}

async function embeddedPhase(world: World, addrs: readonly WorldAddress[], limitMs?: number): Promise<Phase> {
  await world.request('restart');
  const svc: Svc = await startChild('jobs/ingest-child.ts', { env: serviceEnv(world, { SVC_ROLE: 'all' }) });
  const stopWatching = watchMemory([{ role: 'embedded', svc }]);
  try {
    return { label: 'embedded (one process, PGlite, in-process bus)', workers: undefined, ...(await runJob(svc.info.url, addrs, limitMs)) };
  } finally {
    lastMemory = stopWatching();
    await svc.stop();
  }
}

async function clusterPhase(world: World, addrs: readonly WorldAddress[], workers: number, limitMs?: number, poolThreads = 0): Promise<Phase> {
  await world.request('restart');
  const schema = `bench_cluster_${process.pid}_${Date.now().toString(36)}`;
  await pgAdmin(`CREATE SCHEMA ${schema}`);
  const prefix = `bc${randomBytes(4).toString('hex')}.`;
  const env = serviceEnv(world, {
    DATABASE_URL: `${PG_BASE}${PG_BASE.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    REDIS_URL,
    KAFKA_BROKERS: BROKERS,
    SVC_KAFKA_TOPIC_PREFIX: prefix,
    SVC_KAFKA_PARTITIONS: '12',
  });
  const procs: Svc[] = [];
  try {
    const front: Svc = await startChild('jobs/ingest-child.ts', { env: { ...env, SVC_ROLE: 'front' } });
    procs.push(front);
    procs.push(...(await Promise.all(Array.from({ length: workers }, () => startChild<{ url: string; pid: number }>('jobs/ingest-child.ts', { env: { ...env, SVC_ROLE: 'worker', SVC_CSV_POOL_THREADS: String(poolThreads) } })))));
    const pool = poolThreads > 0 ? `, results CSV rendered on a Piscina pool of ${poolThreads} thread${poolThreads > 1 ? 's' : ''} in each worker` : '';
    const stopWatching = watchMemory(procs.map((svc, i) => ({ role: i === 0 ? 'front' : `worker ${i}`, svc })));
    try {
      return { label: `cluster: 1 front + ${workers} worker${workers > 1 ? 's' : ''} (PostgreSQL, Redis, Kafka)${pool}`, workers, ...(await runJob(front.info.url, addrs, limitMs)) };
    } finally {
      lastMemory = stopWatching();
    }
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
    await pgAdmin(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => {});
    const admin = kafkaAdmin({ clientId: 'cluster-bench-cleanup', brokers: BROKERS.split(',') });
    await admin.connect();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    if (topics.length) await admin.deleteTopics({ topics }).catch(() => {});
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.includes(prefix));
    if (groups.length) await admin.deleteGroups(groups).catch(() => {});
    await admin.disconnect();
  }
}

/** CLUSTER_BENCH_BIG's addresses: `world` world addresses spread through `n - world` NXDOMAIN mailboxes on 20,000 domains. */
function bigJob(n: number, world: number): WorldAddress[] {
  const smtp = worldAddresses(world, 7);
  const out: WorldAddress[] = [];
  const every = Math.max(1, Math.floor(n / world));
  let w = 0;
  for (let i = 0; out.length < n; i++) {
    if (i % every === 0 && w < smtp.length) out.push(smtp[w++]!);
    else {
      const d = `company${i % 20_000}.example`;
      out.push({ email: `user${i}@${d}`, domain: d, host: '', truth: { result: 'invalid', reason_code: 'nxdomain' } });
    }
  }
  return out;
}

async function runBig(n: number, workers: number): Promise<BenchResult> {
  const addrs = bigJob(n, 2_000);
  const loadStart = os.loadavg().map((l) => l.toFixed(2)).join(' / ');
  const world: World = await startChild('engine/world-child.ts', { args: [String(RTT_MS), '2000', 'network'] });
  const phases: Array<Phase & { acceptedMs: number; memory: typeof lastMemory }> = [];
  try {
    await embeddedPhase(world, worldAddresses(200, 8)); // warm-up
    // CLUSTER_BENCH_BIG_EMBEDDED=0: the cluster profile only (bench/jobs/big-job.ts measures the embedded one).
    if (process.env.CLUSTER_BENCH_BIG_EMBEDDED !== '0') {
      const e = await embeddedPhase(world, addrs, 3_600_000);
      phases.push({ ...e, acceptedMs: accepted, memory: lastMemory });
    }
    // CLUSTER_BENCH_BIG_WORKERS=0: the embedded profile only.
    if (workers > 0) {
      const c = await clusterPhase(world, addrs, workers, 3_600_000);
      phases.push({ ...c, acceptedMs: accepted, memory: lastMemory });
    }
  } finally {
    await world.stop();
  }
  const rows: Row[] = phases.map((p) => ({ bench: NAME, metric: `job end to end, ${n} addresses, ${p.label}`, value: p.wallMs / 1000, unit: 's', baseline: { label: 'embedded', value: phases[0]!.wallMs / 1000 }, ratio: phases[0]!.wallMs / p.wallMs, ratioLabel: 'x embedded speed' }));
  const details = [
    `One job of ${n} addresses (2,000 world addresses on the Postfix-like hosts, the rest unique mailboxes on 20,000 domains the world does not know: NXDOMAIN), request → \`completed\`, every row checked. Load average at start ${loadStart}, at end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}.`,
    '',
    '| configuration | request → 202 (s) | request → completed (s) | addresses/s end to end | wrong | unknown | rows |',
    '|---|---|---|---|---|---|---|',
    ...phases.map((p) => `| ${p.label} | ${fmt(p.acceptedMs / 1000)} | ${fmt(p.wallMs / 1000)} | ${fmt((n * 1000) / p.wallMs)} | ${p.wrong} | ${p.unknown} | ${p.rows} |`),
    '',
    'Memory of each process over the job (MiB): peak RSS (/proc VmRSS every 250 ms), peak heapUsed and external (process.memoryUsage() every 2 s):',
    '',
    '| configuration | process | peak RSS | peak heapUsed | peak external |',
    '|---|---|---|---|---|',
    ...phases.flatMap((p) => p.memory.map((m) => `| ${p.label} | ${m.role} | ${fmt(m.rssMiB)} | ${fmt(m.heapMiB)} | ${fmt(m.externalMiB)} |`)),
  ];
  const warnings = phases.filter((p) => p.wrong > 0 || p.rows !== n).map((p) => `${p.label}: ${p.wrong} wrong, ${p.rows} rows for ${n}`);
  return { name: NAME, rows, details, warnings };
}

export async function run(opts: { n?: number; workers?: number[] } = {}): Promise<BenchResult> {
  const big = Number(process.env.CLUSTER_BENCH_BIG ?? 0);
  if (big > 0) return runBig(big, Number(process.env.CLUSTER_BENCH_BIG_WORKERS ?? 2));
  const n = opts.n ?? Number(process.env.CLUSTER_BENCH_N ?? 2_000);
  const workerCounts = (opts.workers ?? (process.env.CLUSTER_BENCH_WORKERS ?? '1,2,3').split(',').map(Number)).filter((w) => w > 0);
  const addrs = worldAddresses(n, 7);
  const loadStart = os.loadavg().map((l) => l.toFixed(2)).join(' / ');
  const world: World = await startChild('engine/world-child.ts', { args: [String(RTT_MS), String(n), 'network'] });
  const phases: Phase[] = [];
  const warnings: string[] = [];
  try {
    // Warm-up (not measured): JIT and the first DNS answers of this machine.
    await embeddedPhase(world, worldAddresses(200, 8));
    phases.push(await embeddedPhase(world, addrs));
    for (const w of workerCounts) phases.push(await clusterPhase(world, addrs, w));
    // Piscina in the workers (SVC_CSV_POOL_THREADS), against the same worker count inline.
    const poolThreads = Number(process.env.CLUSTER_BENCH_WORKER_POOL ?? 0);
    if (poolThreads > 0 && workerCounts.length > 0) phases.push(await clusterPhase(world, addrs, workerCounts[0]!, undefined, poolThreads));
  } finally {
    await world.stop();
  }
  const rate = (p: Phase) => (n * 1000) / p.wallMs;
  const embedded = phases[0]!;
  const rows: Row[] = phases.map((p) => ({
    bench: NAME,
    metric: `job end to end, ${n} addresses, ${p.label}`,
    value: rate(p),
    unit: 'addr/s',
    baseline: { label: `bound ${POSTFIX_HOSTS} hosts × ${LIMITS.connectionsPerClient} conns × 1 RCPT/${RTT_MS} ms`, value: BOUND },
    ratio: rate(p) / BOUND,
    ratioLabel: 'of bound',
    // The job target, read on the whole embedded pipeline (intake, bus, worker, aggregator,
    // finalization, results CSV), not only on the engine (bench/engine/throughput.ts).
    ...(p === phases[0] ? { target: `>= ${TARGET_JOB} of bound`, pass: rate(p) / BOUND >= TARGET_JOB } : {}),
  }));
  for (const p of phases) if (p.wrong > 0 || p.rows !== n) warnings.push(`${p.label}: ${p.wrong} wrong verdicts (${p.unknown} unknown), ${p.rows} rows for ${n} addresses`);
  const details = [
    `${n} world addresses (bench/engine/world.ts, seed 7) as one JSON job; world: ${POSTFIX_HOSTS} Postfix-like MX hosts, ${LIMITS.connectionsPerClient} connections per client, 25 ms each way ('network' model). Every service a process of its own (bench/jobs/ingest-child.ts); cluster processes share SVC_EGRESS_ID, hence one limit of ${LIMITS.connectionsPerClient} sessions per MX host through Redis. Load average at start ${loadStart}, at end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')} (2 cores, shared with the world, Kafka, PostgreSQL and Redis).`,
    '',
    '| configuration | wall s (request → completed) | addresses/s | / bound | / embedded | wrong | unknown |',
    '|---|---|---|---|---|---|---|',
    ...phases.map((p) => `| ${p.label} | ${fmt(p.wallMs / 1000)} | ${fmt(rate(p))} | ${fmt(rate(p) / BOUND)} | ${fmt(rate(p) / rate(embedded))} | ${p.wrong} | ${p.unknown} |`),
  ];
  return { name: NAME, rows, details, warnings };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run();
  console.log(r.details.join('\n'));
  for (const w of r.warnings) console.log(`WARNING: ${w}`);
}
