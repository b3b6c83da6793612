// Benchmark: one 500,000-address job end to end (request → `completed`) in the embedded profile,
// with the service process's memory over the whole job (target: peak RSS under 512 MiB from the
// request through the ingest and the whole processing, whatever the speed of results).
//
// The service runs in a child process as `npm start` runs it (bench/jobs/ingest-child.ts:
// startService(loadConfig(env)), what cluster/embedded.ts does, under `node --import tsx`;
// SVC_ROLE=all, PGlite in a fresh data directory, in-process bus and caches). The world of
// bench/engine/world.ts (bench/engine/world-child.ts: DNS for its 204 domains, 10 Postfix-like MX
// hosts with their limits, 25 ms each way) runs in another process. The address mix:
// - WORLD_SHARE of the addresses are world addresses, probed over SMTP on the Postfix-like hosts
//   (valid, unknown mailboxes, role accounts, catch-all domains, as bench/engine/world.ts draws them);
// - the rest are unique mailboxes on 20,000 domains the world's DNS does not know: NXDOMAIN,
//   answered in microseconds once negative-cached. These are the fast results: they arrive faster
//   than the store writes them, which is what the memory bounds are for.
// Every row of the results CSV is checked against the world's truth.
//
// Sampled during the job: process.memoryUsage() of the service (rss, heapUsed, external,
// arrayBuffers) over IPC every SAMPLE_MS, its /proc VmRSS every 100 ms (the peak) and VmHWM at
// the end, and the job's progress (GET /v1/csv/jobs/:id every SAMPLE_MS). Reported: the peak, the
// RSS at the 202 (end of the ingest) and at 25/50/75/100% processed, request → 202 and →
// completed.
//
//   node --import tsx bench/jobs/big-job.ts               JSON to the end, CSV for its ingest and 60 s, 500,000 addresses each
//   BIG_JOB_N=100000 BIG_JOB_KINDS=json node --import tsx bench/jobs/big-job.ts
//   BIG_JOB_CSV_WINDOW_S=60        the CSV job is watched from its request through its ingest and this
//                                   many seconds of processing, then stopped (0: to the end); default 60
//   BIG_JOB_SNAPSHOTS=/tmp/snaps    heap snapshots of the service at the 202 and at 25/50/75% processed
//                                   (summarise them with bench/lib/heap-summary.ts)
//   BIG_JOB_SERIES=/tmp/series      the sampled series of each job as JSON
//   BIG_JOB_ENV='K=V K2=V2'         more environment for the service (e.g. a bound to compare)
//   BIG_JOB_NODE_ARGS='--a --b'     more node options for the service

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse } from 'csv-parse/sync';
import { startChild, type Child } from '../lib/children.ts';
import type { BenchResult, Row } from '../lib/result.ts';
import { fmt } from '../lib/stats.ts';
import { RTT_MS, worldAddresses, type WorldAddress } from '../engine/world.ts';
import { benchServiceEnv } from '../lib/service-env.ts';
import { procStatus } from '../lib/proc.ts';

export const NAME = 'jobs/big-job';
const KEY = 'svc_live_benchBigJobKey00000000000001';
const TARGET_RSS_MIB = 512;
/** World (SMTP-probed) addresses: 1% of the job. */
const WORLD_SHARE = 0.01;
const NX_DOMAINS = 20_000;
const SAMPLE_MS = 1_000;
const MiB = 2 ** 20;

type Kind = 'json' | 'csv';
type World = Child<{ dnsServers: string; smtpPort: number }>;
type Svc = Child<{ url: string; pid: number }>;

interface Sample {
  /** ms since the request started. */
  t: number;
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  processed: number;
  /** Messages queued or in hand on the in-process bus: work / mx / results. */
  bus?: string;
}

interface Outcome {
  kind: Kind;
  n: number;
  world: number;
  acceptedS: number;
  /** Request → completed; undefined when the job was watched only for `windowS` after its 202. */
  completedS: number | undefined;
  /** Watched for this many seconds of processing after the 202, then stopped (not completed, rows not checked). */
  windowS?: number;
  peakMiB: number;
  hwmMiB: number;
  idleMiB: number;
  series: Sample[];
  wrong: number;
  rows: number;
  wrongBy: string;
}

/** `n` addresses: WORLD_SHARE of them world addresses spread evenly through NXDOMAIN mailboxes. */
function mix(n: number): { addrs: WorldAddress[]; world: number } {
  const world = Math.round(n * WORLD_SHARE);
  const smtp = worldAddresses(world, 7);
  const every = Math.max(1, Math.floor(n / Math.max(1, world)));
  const addrs: WorldAddress[] = [];
  let w = 0;
  for (let i = 0; addrs.length < n; i++) {
    if (i % every === 0 && w < smtp.length) addrs.push(smtp[w++]!);
    else {
      const d = `company${i % NX_DOMAINS}.example`;
      addrs.push({ email: `user${i}@${d}`, domain: d, host: '', truth: { result: 'invalid', reason_code: 'nxdomain' } });
    }
  }
  return { addrs, world: w };
}

function csvBody(addrs: readonly WorldAddress[]): Buffer {
  const parts: string[] = ['first_name,email,company\r\n'];
  for (let i = 0; i < addrs.length; i++) parts.push(`${i % 7 === 0 ? '"Doe, Jane"' : 'Jane'},${addrs[i]!.email},Company ${i % 1000}\r\n`);
  return Buffer.from(parts.join(''));
}


async function api(base: string, method: string, route: string, body?: Buffer | string, type = 'application/json'): Promise<{ status: number; text: string; json: any }> {
  const res = await fetch(base + route, { method, headers: { 'x-api-key': KEY, ...(body !== undefined ? { 'content-type': type } : {}) }, ...(body !== undefined ? { body: typeof body === 'string' ? body : new Uint8Array(body) } : {}) });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json };
}

function serviceEnv(world: World, dataDir: string): Record<string, string> {
  const extra = Object.fromEntries(
    (process.env.BIG_JOB_ENV ?? '')
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  return benchServiceEnv(world.info, KEY, {
    SVC_DATA_DIR: dataDir,
    SVC_ROLE: 'all',
    SVC_BOOTSTRAP_CREDITS: '10000000',
    ...extra,
  });
}

async function oneJob(kind: Kind, world: World, addrs: readonly WorldAddress[], nWorld: number, limitMs: number, windowS?: number): Promise<Outcome> {
  await world.request('restart');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-big-job-'));
  const nodeArgs = (process.env.BIG_JOB_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  // A first start initialises the PGlite data directory: tens of seconds on a loaded machine.
  const svc: Svc = await startChild('jobs/ingest-child.ts', { env: serviceEnv(world, dataDir), nodeArgs, readyTimeoutMs: 240_000 });
  const snapDir = process.env.BIG_JOB_SNAPSHOTS;
  if (snapDir) mkdirSync(snapDir, { recursive: true });
  try {
    const base = svc.info.url;
    const body = kind === 'json' ? Buffer.from(JSON.stringify({ emails: addrs.map((a) => a.email) })) : csvBody(addrs);
    const idleMiB = procStatus(svc.info.pid, 'VmRSS');
    const series: Sample[] = [];
    let peak = idleMiB;
    let processed = 0;
    const t0 = performance.now();
    const rssTimer = setInterval(() => {
      try {
        peak = Math.max(peak, procStatus(svc.info.pid, 'VmRSS'));
      } catch {
        /* gone */
      }
    }, 100);
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const m = await svc.request<NodeJS.MemoryUsage>('memory').catch(() => undefined);
        const b = await svc.request<Record<string, number>>('busPending').catch(() => undefined);
        if (m) series.push({ t: performance.now() - t0, rss: m.rss / MiB, heapTotal: m.heapTotal / MiB, heapUsed: m.heapUsed / MiB, external: m.external / MiB, arrayBuffers: m.arrayBuffers / MiB, processed, ...(b ? { bus: Object.values(b).join('/') } : {}) });
        // Written as it goes: a run cut short still leaves its series.
        if (process.env.BIG_JOB_SERIES) {
          mkdirSync(process.env.BIG_JOB_SERIES, { recursive: true });
          writeFileSync(path.join(process.env.BIG_JOB_SERIES, `${kind}-partial.json`), JSON.stringify(series));
        }
        await new Promise((r) => setTimeout(r, SAMPLE_MS));
      }
    })();
    let jobId: string;
    let acceptedMs: number;
    try {
      if (kind === 'json') {
        const r = await api(base, 'POST', '/v1/validate/batch', body);
        if (r.status !== 202) throw new Error(`batch: ${r.status} ${r.text.slice(0, 300)}`);
        jobId = r.json.id;
      } else {
        const prep = await api(base, 'POST', '/v1/csv/prepare-upload', JSON.stringify({ filename: 'big.csv' }));
        if (prep.status !== 200) throw new Error(`prepare-upload: ${prep.status} ${prep.text}`);
        const u = new URL(String(prep.json.upload_url));
        const put = await api(base, 'PUT', `${u.pathname}${u.search}`, body, 'text/csv');
        if (put.status !== 200) throw new Error(`upload: ${put.status} ${put.text}`);
        const start = await api(base, 'POST', '/v1/csv/start-processing', JSON.stringify({ batch_id: prep.json.batch_id, email_column: 'email' }));
        if (start.status !== 202) throw new Error(`start-processing: ${start.status} ${start.text.slice(0, 300)}`);
        jobId = String(start.json.id ?? start.json.batch_id);
      }
      acceptedMs = performance.now() - t0;
      const snapped = new Set<number>();
      const snap = async (label: string) => {
        if (snapDir) await svc.request('snapshot', path.join(snapDir, `${kind}-${label}.heapsnapshot`), 120_000).catch((e) => console.error(`snapshot ${label}: ${String(e)}`));
      };
      await snap('202');
      for (;;) {
        const s = await api(base, 'GET', `/v1/csv/jobs/${jobId}`);
        processed = s.json?.progress?.processed ?? processed;
        if (s.json?.status === 'completed') break;
        if (windowS !== undefined && performance.now() - t0 - acceptedMs > windowS * 1000) break;
        if (s.json?.status === 'failed' || s.json?.status === 'canceled') throw new Error(`job ${s.json.status}`);
        if (performance.now() - t0 > limitMs) throw new Error(`job still ${s.json?.status} after ${limitMs / 1000} s: ${JSON.stringify(s.json?.progress)}`);
        for (const q of [25, 50, 75])
          if (!snapped.has(q) && processed >= (addrs.length * q) / 100) {
            snapped.add(q);
            await snap(`${q}pct`);
          }
        await new Promise((r) => setTimeout(r, SAMPLE_MS));
      }
    } finally {
      sampling = false;
      await sampler;
      clearInterval(rssTimer);
    }
    const completedMs = performance.now() - t0;
    if (windowS === undefined) processed = addrs.length;
    const m = await svc.request<NodeJS.MemoryUsage>('memory');
    series.push({ t: completedMs, rss: m.rss / MiB, heapTotal: m.heapTotal / MiB, heapUsed: m.heapUsed / MiB, external: m.external / MiB, arrayBuffers: m.arrayBuffers / MiB, processed });
    peak = Math.max(peak, procStatus(svc.info.pid, 'VmRSS'));
    const hwmMiB = procStatus(svc.info.pid, 'VmHWM');
    if (windowS !== undefined) return { kind, n: addrs.length, world: nWorld, acceptedS: acceptedMs / 1000, completedS: undefined, windowS, peakMiB: peak, hwmMiB, idleMiB, series, wrong: 0, rows: processed, wrongBy: '' };
    // Every row checked against the world's truth.
    const csv = await api(base, 'GET', `/v1/csv/jobs/${jobId}/download`);
    const rows = parse(csv.text) as string[][];
    const header = rows[0]!;
    const emailAt = header.indexOf('email');
    const at = (name: string) => header.indexOf(name);
    const truth = new Map(addrs.map((a) => [a.email, a.truth]));
    let wrong = 0;
    const wrongBy = new Map<string, number>();
    for (const r of rows.slice(1)) {
      const t = truth.get(r[emailAt]!);
      if (!t || r[at('result')] !== t.result || r[at('reason_code')] !== t.reason_code) {
        wrong++;
        const k = `${t ? `${t.result}/${t.reason_code}` : '?'} → ${r[at('result')]}/${r[at('reason_code')]}`;
        wrongBy.set(k, (wrongBy.get(k) ?? 0) + 1);
      }
    }
    if (process.env.BIG_JOB_SERIES) {
      mkdirSync(process.env.BIG_JOB_SERIES, { recursive: true });
      writeFileSync(path.join(process.env.BIG_JOB_SERIES, `${kind}.json`), JSON.stringify({ acceptedMs, completedMs, peak, hwmMiB, series }, null, 1));
    }
    return { kind, n: addrs.length, world: nWorld, acceptedS: acceptedMs / 1000, completedS: completedMs / 1000, peakMiB: peak, hwmMiB, idleMiB, series, wrong, rows: rows.length - 1, wrongBy: [...wrongBy].map(([k, v]) => `${k}: ${v}`).join('; ') };
  } finally {
    await svc.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The sample nearest after `t` ms, or after `share` of the job processed. */
const atTime = (o: Outcome, t: number) => o.series.find((s) => s.t >= t) ?? o.series.at(-1)!;
const atShare = (o: Outcome, share: number) => o.series.find((s) => s.processed >= o.n * share) ?? o.series.at(-1)!;
const mem = (s: Sample) => `${fmt(s.rss)} / ${fmt(s.heapUsed)} / ${fmt(s.external)}`;
/** The sample at `share` processed, or '-' when a watched window ended before it. */
const shareMem = (o: Outcome, share: number) => (o.series.some((s) => s.processed >= o.n * share) ? mem(atShare(o, share)) : '-');

export async function run(opts: { n?: number; kinds?: Kind[]; csvWindowS?: number } = {}): Promise<BenchResult> {
  const n = opts.n ?? Number(process.env.BIG_JOB_N ?? 500_000);
  const kinds = opts.kinds ?? ((process.env.BIG_JOB_KINDS ?? 'json,csv').split(',') as Kind[]);
  const csvWindowS = opts.csvWindowS ?? Number(process.env.BIG_JOB_CSV_WINDOW_S ?? 60);
  const { addrs, world: nWorld } = mix(n);
  const loadStart = os.loadavg().map((l) => l.toFixed(2)).join(' / ');
  const world: World = await startChild('engine/world-child.ts', { args: [String(RTT_MS), String(nWorld), 'network'] });
  const outcomes: Outcome[] = [];
  const warnings: string[] = [];
  try {
    for (const kind of kinds) outcomes.push(await oneJob(kind, world, addrs, nWorld, 1_800_000, kind === 'csv' && csvWindowS > 0 ? csvWindowS : undefined));
  } finally {
    await world.stop();
  }
  const rows: Row[] = outcomes.flatMap((o) => [
    { bench: NAME, metric: `peak RSS of the service, ${o.kind.toUpperCase()} job of ${o.n} addresses, ${o.windowS === undefined ? 'request → completed' : `request → ${o.windowS} s of processing`}, embedded`, value: o.peakMiB, unit: 'MiB', baseline: { label: 'RSS idle, before the request', value: o.idleMiB }, ratio: o.peakMiB / o.idleMiB, target: `< ${TARGET_RSS_MIB} MiB`, pass: o.peakMiB < TARGET_RSS_MIB },
    o.completedS !== undefined
      ? { bench: NAME, metric: `${o.kind.toUpperCase()} job of ${o.n} addresses, request → completed, embedded`, value: o.completedS, unit: 's' }
      : { bench: NAME, metric: `${o.kind.toUpperCase()} job of ${o.n} addresses, request → 202, embedded`, value: o.acceptedS, unit: 's' },
  ]);
  for (const o of outcomes) if (o.windowS === undefined && (o.wrong > 0 || o.rows !== o.n)) warnings.push(`${o.kind}: ${o.wrong} wrong verdicts (${o.wrongBy}), ${o.rows} rows for ${o.n}`);
  const details = [
    `One job of ${n} addresses per line, in a fresh embedded service process (SVC_ROLE=all, PGlite, in-process bus; bench/jobs/ingest-child.ts, started as \`npm start\` starts cluster/embedded.ts). Mix: ${nWorld} world addresses (${fmt(WORLD_SHARE * 100)}%: SMTP on 10 Postfix-like hosts with their limits, 25 ms each way, bench/engine/world.ts) spread through ${n - nWorld} unique mailboxes on ${NX_DOMAINS} domains the world's DNS does not know (NXDOMAIN: results as fast as the process makes them). Every row of a completed job checked against the truth${outcomes.some((o) => o.windowS !== undefined) ? `; the CSV job watched through its ingest and ${csvWindowS} s of processing, then stopped (the full bench's time)` : ''}. Memory: process.memoryUsage() over IPC every ${SAMPLE_MS / 1000} s, /proc VmRSS every 100 ms for the peak, VmHWM at the end. Load average at start ${loadStart}, at end ${os.loadavg().map((l) => l.toFixed(2)).join(' / ')}.`,
    '',
    '| job | request → 202 (s) | request → completed (s) | addresses/s | RSS idle | peak RSS (VmHWM) | wrong | rows |',
    '|---|---|---|---|---|---|---|---|',
    ...outcomes.map((o) =>
      o.completedS !== undefined
        ? `| ${o.kind.toUpperCase()} | ${fmt(o.acceptedS)} | ${fmt(o.completedS)} | ${fmt(o.n / o.completedS)} | ${fmt(o.idleMiB)} | ${fmt(o.peakMiB)} (${fmt(o.hwmMiB)}) | ${o.wrong} | ${o.rows} |`
        : `| ${o.kind.toUpperCase()} | ${fmt(o.acceptedS)} | stopped ${o.windowS} s after the 202, ${o.rows} processed | ${fmt(o.rows / o.windowS!)} | ${fmt(o.idleMiB)} | ${fmt(o.peakMiB)} (${fmt(o.hwmMiB)}) | - | - |`,
    ),
    '',
    'Memory of the service (MiB, rss / heapUsed / external; external includes the WebAssembly memory of PGlite) at the points of the job:',
    '',
    '| job | at the 202 (ingest end) | 25% processed | 50% | 75% | 100% (completed) | max heapUsed | max external |',
    '|---|---|---|---|---|---|---|---|',
    ...outcomes.map((o) => `| ${o.kind.toUpperCase()} | ${mem(atTime(o, o.acceptedS * 1000))} | ${shareMem(o, 0.25)} | ${shareMem(o, 0.5)} | ${shareMem(o, 0.75)} | ${o.completedS !== undefined ? mem(o.series.at(-1)!) : '-'} | ${fmt(Math.max(...o.series.map((s) => s.heapUsed)))} | ${fmt(Math.max(...o.series.map((s) => s.external)))} |`),
    '',
    'RSS series (MiB, one sample every ~10 s: t s → rss):',
    '',
    ...outcomes.map((o) => `- ${o.kind.toUpperCase()}: ${o.series.filter((_, i) => i % 10 === 0 || i === o.series.length - 1).map((s) => `${fmt(s.t / 1000)}→${Math.round(s.rss)}`).join(', ')}`),
  ];
  return { name: NAME, rows, details, warnings };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run();
  for (const row of r.rows) console.log(`${row.metric}: ${fmt(row.value)} ${row.unit}${row.target ? ` target ${row.target}: ${row.pass ? 'PASS' : 'MISS'}` : ''}`);
  console.log(r.details.join('\n'));
  for (const w of r.warnings) console.log(`WARNING: ${w}`);
}
