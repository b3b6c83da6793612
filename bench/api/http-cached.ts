// Benchmark 2: cached validations through the whole HTTP stack, against a bare Fastify route.
//
// The full service (startService: Fastify with its hooks, key lookup, rate limiter, PGlite store,
// credits, verifier) runs in a child process, the simulated internet in another; autocannon runs
// here. After one validation of each address has filled the verdict cache, autocannon posts
// (a) a role address (cached, never charged: no credit moves) and (b) a valid personal address
// (cached, charged: a debit of 1 credit per request, the debits of one account group-committed,
// packages/store/src/repos/ledger.ts) to /v1/validate. Each answer is also a decision for
// analytics (buffered, written in batches to the store's validation_decisions table).
// Baseline in the same run: a bare Fastify app (bench/api/bare-fastify-child.ts) in a child
// process with one POST route that parses the same body and answers an object of the same size.
// (c) is a data endpoint: a cached company/enrich (charged 1 credit, as (b)), against (b) in the
// same run: its target is half the requests/s of a cached validation.
// The four targets are loaded in alternation, round after round (bare, a, b, c, then c, b, a,
// bare, ...), and each one's figures are the medians of its rounds: this machine's speed drifts
// by a third within minutes, and one run per target, minutes apart, measured the drift as much as
// the code (bench/api/ab.ts measures two checkouts the same way).

import { pathToFileURL } from 'node:url';
import autocannon, { type AutocannonResult } from 'autocannon';
import { startChild, type Child } from '../lib/children.ts';
import type { BenchResult, Row } from '../lib/result.ts';
import { fmt, median, withTimeout } from '../lib/stats.ts';
import { benchServiceEnv } from '../lib/service-env.ts';

export const NAME = 'api/http-cached';
export const KEY = 'svc_live_benchBootstrapKey000000000001';
const CREDITS = 10_000_000;
export const ROLE = 'info@accept.test';
export const CHARGED = 'jane.doe@accept.test';
const TARGET_RATIO = 0.5;
const COMPANY = 'acme-robotics.test';

export interface HttpOptions {
  /** Seconds of measured load per target and round (default 4). */
  durationS?: number;
  /** Seconds of unmeasured load before each measured run (default 1; the first round's are doubled). */
  warmupS?: number;
  connections?: number;
  /** Rounds of the alternation (default 3). */
  rounds?: number;
}

export interface Load {
  label: string;
  reqPerS: number;
  p50: number;
  p90: number;
  p99: number;
  ok: number;
  other: number;
  errors: number;
  /** CPU of the server process per request, ms. */
  serverCpuMs: number;
  /** CPU of the server process as a share of one core over the run. */
  serverCores: number;
  /** CPU of the server's main thread (where requests are handled) per request, ms. */
  mainCpuMs: number;
  /** Ledger rows written during the measured run (a charged run: its debit batches); NaN from a bare route. */
  ledgerRows: number;
}

async function post(url: string, body: unknown): Promise<{ status: number; text: string; json: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: JSON.stringify(body), signal: AbortSignal.timeout(15_000) });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) as Record<string, unknown> };
}

export async function load(label: string, child: Child<{ url: string }>, email: string, o: Omit<Required<HttpOptions>, 'rounds'>, route = '/v1/validate', body: unknown = { email }): Promise<Load> {
  const opts = {
    url: `${child.info.url}${route}`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json', 'x-api-key': KEY },
    body: JSON.stringify(body),
    connections: o.connections,
    pipelining: 1,
    timeout: 10,
    renderProgressBar: false,
    renderResultsTable: false,
  };
  const bounded = (r: PromiseLike<AutocannonResult>, s: number) => withTimeout(Promise.resolve(r), (s + 20) * 1000, `autocannon ${label}`);
  if (o.warmupS > 0) await bounded(autocannon({ ...opts, duration: o.warmupS }), o.warmupS);
  const c0 = await child.request<NodeJS.CpuUsage>('cpuUsage');
  // (NaN from a child that cannot say: a checkout older than this question, in bench/api/ab.ts.)
  const mainCpu = () => child.request<number>('mainCpuMs').catch(() => Number.NaN);
  const m0 = await mainCpu();
  const ledgerSeq = () => child.request<number>('ledgerSeq').catch(() => Number.NaN);
  const l0 = await ledgerSeq();
  const t0 = performance.now();
  const r = await bounded(autocannon({ ...opts, duration: o.durationS }), o.durationS);
  const wallMs = performance.now() - t0;
  const c1 = await child.request<NodeJS.CpuUsage>('cpuUsage');
  const m1 = await mainCpu();
  const l1 = await ledgerSeq();
  const cpuMs = (c1.user - c0.user + c1.system - c0.system) / 1000;
  return {
    label,
    reqPerS: r.requests.average,
    p50: r.latency.p50,
    p90: r.latency.p90,
    p99: r.latency.p99,
    ok: r['2xx'],
    other: r.non2xx,
    errors: r.errors + r.timeouts,
    serverCpuMs: r.requests.total > 0 ? cpuMs / r.requests.total : Number.NaN,
    serverCores: cpuMs / wallMs,
    mainCpuMs: r.requests.total > 0 ? (m1 - m0) / r.requests.total : Number.NaN,
    ledgerRows: l1 - l0,
  };
}

/** What the simulated internet's child reports: where its DNS, SMTP and web servers listen. */
export interface SimInfo {
  dnsServers: string;
  smtpPort: number;
  webHttpPort: number;
  webHttpsPort: number;
}

/** The environment of a service child (bench/api/service-child.ts) on the sim, as this benchmark runs it. */
export function serviceEnv(sim: SimInfo): Record<string, string> {
  return benchServiceEnv(sim, KEY, {
    SVC_WEB_HTTP_PORT: String(sim.webHttpPort),
    SVC_WEB_HTTPS_PORT: String(sim.webHttpsPort),
    // The sim's websites are on loopback.
    SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8',
    SVC_SMTP_TIMEOUT_MS: '5000',
    SVC_BOOTSTRAP_CREDITS: String(CREDITS),
  });
}

export async function run(opts: HttpOptions = {}): Promise<BenchResult> {
  const o: Required<HttpOptions> = { durationS: opts.durationS ?? 4, warmupS: opts.warmupS ?? 1, connections: opts.connections ?? 50, rounds: opts.rounds ?? 3 };
  const warnings: string[] = [];
  const details: string[] = [];
  const loads: Load[] = [];
  const sim = await startChild<SimInfo>('sim-child.ts', { args: ['0'] });
  let svc: Child<{ url: string }> | undefined;
  let bare: Child<{ url: string }> | undefined;
  try {
    // HTTP_BENCH_CPU_PROF=<dir>: the service child writes a V8 CPU profile there when it stops,
    // the bare child in <dir>/bare (profiling slows both: the figures of such a run are not the
    // benchmark's).
    const profDir = process.env.HTTP_BENCH_CPU_PROF;
    svc = await startChild<{ url: string }>('api/service-child.ts', {
      ...(profDir ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profDir}`] } : {}),
      env: serviceEnv(sim.info),
    });
    // Fill the verdict cache: one real validation (DNS + SMTP against the sim) of each address.
    const role = await post(`${svc.info.url}/v1/validate`, { email: ROLE });
    const charged = await post(`${svc.info.url}/v1/validate`, { email: CHARGED });
    if (role.status !== 200 || role.json.result !== 'valid_role_based' || role.json.credits_charged !== 0) throw new Error(`warm-up ${ROLE}: ${role.status} ${role.text}`);
    if (charged.status !== 200 || charged.json.result !== 'valid' || charged.json.credits_charged !== 1) throw new Error(`warm-up ${CHARGED}: ${charged.status} ${charged.text}`);
    // The data product, and one real company/enrich (the website and DNS of the sim) to fill its cache.
    await svc.request('enableDataProduct');
    const company = await post(`${svc.info.url}/v1/company/enrich`, { domain: COMPANY });
    if (company.status !== 200 || company.json.found !== true || company.json.credits_charged !== 1 || company.json.cache_hit !== false) throw new Error(`warm-up ${COMPANY}: ${company.status} ${company.text}`);

    bare = await startChild<{ url: string }>('api/bare-fastify-child.ts', { args: [role.text], ...(profDir ? { nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profDir}/bare`] } : {}) });
    const probe = await post(`${bare.info.url}/v1/validate`, { email: ROLE });
    if (probe.status !== 200) throw new Error(`bare route: ${probe.status} ${probe.text}`);

    // Every target once a round, the order reversed every other round (the bare route is loaded
    // first, then last, then first...); all children stay up, the idle ones cost nothing. Credits
    // are read around each chargeable run (warm-up included).
    const credits = () => fetch(`${svc!.info.url}/v1/credits`, { headers: { 'x-api-key': KEY }, signal: AbortSignal.timeout(10_000) }).then((r) => r.json() as Promise<{ balance: number }>);
    const targets: Array<{ label: string; child: Child<{ url: string }>; email: string; route?: string; body?: unknown; charged?: boolean; runs: Load[]; spent: number }> = [
      { label: 'bare Fastify route', child: bare, email: ROLE, runs: [], spent: 0 },
      { label: `service, cached role address (${ROLE}, not charged)`, child: svc, email: ROLE, runs: [], spent: 0 },
      { label: `service, cached chargeable address (${CHARGED}, 1 credit each)`, child: svc, email: CHARGED, charged: true, runs: [], spent: 0 },
      { label: `service, cached company/enrich (${COMPANY}, 1 credit each)`, child: svc, email: CHARGED, route: '/v1/company/enrich', body: { domain: COMPANY }, charged: true, runs: [], spent: 0 },
    ];
    for (let round = 0; round < o.rounds; round++) {
      const ro = { ...o, warmupS: round === 0 ? 2 * o.warmupS : o.warmupS };
      for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
        const before = t.charged ? (await credits()).balance : 0;
        t.runs.push(await load(t.label, t.child, t.email, ro, t.route, t.body));
        if (t.charged) t.spent += before - (await credits()).balance;
      }
    }
    /** A target's medians over its rounds (counts summed). */
    const med = (t: (typeof targets)[number]): Load => {
      const m = (f: (l: Load) => number) => median(t.runs.map(f));
      const sum = (f: (l: Load) => number) => t.runs.reduce((n, l) => n + f(l), 0);
      return {
        label: t.label,
        reqPerS: m((l) => l.reqPerS),
        p50: m((l) => l.p50),
        p90: m((l) => l.p90),
        p99: m((l) => l.p99),
        ok: sum((l) => l.ok),
        other: sum((l) => l.other),
        errors: sum((l) => l.errors),
        serverCpuMs: m((l) => l.serverCpuMs),
        serverCores: m((l) => l.serverCores),
        mainCpuMs: m((l) => l.mainCpuMs),
        ledgerRows: sum((l) => l.ledgerRows),
      };
    };
    const [base, a, b, c] = targets.map(med) as [Load, Load, Load, Load];
    loads.push(base, a, b, c);
    const [, , tb, tc] = targets;
    const spent = tb!.spent;
    if (spent < b.ok) warnings.push(`only ${spent} credits were charged for ${b.ok} chargeable answers`);
    const spentC = tc!.spent;
    if (spentC < c.ok) warnings.push(`only ${spentC} credits were charged for ${c.ok} company answers`);
    const byRound = new Map(targets.map((t, i) => [loads[i]!, t.runs.map((l) => fmt(l.reqPerS)).join(' ')]));

    for (const l of loads) if (l.other > 0 || l.errors > 0) warnings.push(`${l.label}: ${l.other} non-2xx answers, ${l.errors} errors/timeouts`);
    details.push(
      `autocannon in the bench process, ${o.connections} connections, pipelining 1; ${o.rounds} rounds, each target once a round (order reversed every other round), ${o.warmupS} s warm-up (the first round ${2 * o.warmupS} s) then ${o.durationS} s measured; servers in child processes. ` +
        'Server CPU per request = user+system CPU of the server process over the measured run / requests completed (its main thread alone, where requests are handled, beside it: the thread that saturates first); "cores busy" = that CPU / wall time. ' +
        'Each figure is the median of the target\'s rounds (2xx, non-2xx and errors: their sums); the baseline is the bare route\'s.',
      '',
      '| target | req/s | p50 ms | p90 ms | p99 ms | 2xx | non-2xx | errors | server CPU ms/req | of it, main thread | server cores busy | req/s ratio to bare | req/s by round |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...loads.map((l) => `| ${l.label} | ${fmt(l.reqPerS)} | ${l.p50} | ${l.p90} | ${l.p99} | ${l.ok} | ${l.other} | ${l.errors} | ${fmt(l.serverCpuMs)} | ${fmt(l.mainCpuMs)} | ${fmt(l.serverCores)} | ${fmt(l.reqPerS / base.reqPerS)} | ${byRound.get(l)} |`),
      '',
      `Credits spent during the chargeable runs (warm-ups + measured): (b) ${spent}, 2xx answers in its measured runs ${b.ok}; (c) ${spentC}, 2xx answers ${c.ok}.`,
      `Debit statements (ledger rows written, one a group-committed batch) in the measured runs: (b) ${b.ledgerRows}, ${fmt(b.ok / b.ledgerRows)} answers each; (c) ${c.ledgerRows}, ${fmt(c.ok / c.ledgerRows)} each.`,
      `Answer sizes: service role ${role.text.length} B, service chargeable ${charged.text.length} B, bare ${probe.text.length} B.`,
      `CPU per request, bare / service: (a) ${fmt(base.serverCpuMs / a.serverCpuMs)}x, (b) ${fmt(base.serverCpuMs / b.serverCpuMs)}x, (c) ${fmt(base.serverCpuMs / c.serverCpuMs)}x (what the req/s ratio would be if both sides were CPU-bound on one core each).`,
      `(c) against (b), both one credit per answer: ${fmt(c.reqPerS / b.reqPerS)}x the requests/s, ${fmt(b.serverCpuMs / c.serverCpuMs)}x (b)'s CPU per request / (c)'s.`,
    );
    const ratioRow = (metric: string, l: Load): Row => ({
      bench: NAME,
      metric,
      value: l.reqPerS,
      unit: 'req/s',
      baseline: { label: 'bare Fastify route', value: base.reqPerS },
      ratio: l.reqPerS / base.reqPerS,
      ratioLabel: 'x bare',
      target: `≥ ${TARGET_RATIO}x bare`,
      pass: l.reqPerS / base.reqPerS >= TARGET_RATIO,
    });
    const latencyRow = (metric: string, l: { p50: number; p99: number }, withBase = true): Row => ({
      bench: NAME,
      metric,
      value: l.p50,
      unit: `ms (p99 ${fmt(l.p99)} ms)`,
      ...(withBase ? { baseline: { label: 'bare p50', value: base.p50 } } : {}),
    });
    const cpuRow = (metric: string, l: Load): Row => ({
      bench: NAME,
      metric,
      value: l.serverCpuMs,
      unit: 'ms',
      baseline: { label: 'bare', value: base.serverCpuMs },
      ratio: base.serverCpuMs / l.serverCpuMs,
      ratioLabel: 'x (bare CPU / service CPU)',
    });
    const rows: Row[] = [
      ratioRow('req/s, cached role address (a)', a),
      ratioRow('req/s, cached chargeable address (b)', b),
      latencyRow('latency p50, (a)', a),
      latencyRow('latency p50, (b)', b),
      latencyRow('latency p50, bare', base, false),
      cpuRow('server CPU per request, (a)', a),
      cpuRow('server CPU per request, (b)', b),
      {
        bench: NAME,
        metric: 'req/s, cached company/enrich (c)',
        value: c.reqPerS,
        unit: 'req/s',
        baseline: { label: 'cached validation (b)', value: b.reqPerS },
        ratio: c.reqPerS / b.reqPerS,
        ratioLabel: 'x (b)',
        target: `≥ ${TARGET_RATIO}x (b)`,
        pass: c.reqPerS / b.reqPerS >= TARGET_RATIO,
      },
      latencyRow('latency p50, (c)', c),
    ];
    return { name: NAME, rows, details, warnings };
  } finally {
    await Promise.all([svc?.stop(), bare?.stop(), sim.stop()]);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run();
  console.log(r.details.join('\n'));
  for (const w of r.warnings) console.log(`WARNING: ${w}`);
}
