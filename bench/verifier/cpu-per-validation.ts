// Benchmark 1: the verifier's own CPU per validation (syntax → DNS → SMTP, every time).
//
// The simulated internet runs in a child process (bench/sim-child.ts, replyLatencyMs 0), so the
// CPU counted here (process.cpuUsage(), user + system, around each validation) is the verifier's
// alone: parsing, caches, c-ares, the socket and TLS work of the SMTP session, classification.
// Validations run one at a time on distinct local parts of catchall.test, so each one is a full
// SMTP session with one RCPT (the catch-all probe happens once, in the warm-up, then is cached).
// Baselines in the same run, on the same sim: a hand-rolled client doing the same DNS lookups
// and the same SMTP dialogue (STARTTLS included), its parts (SMTP with/without TLS, DNS alone),
// and parseAddress alone.

import { Resolver } from 'node:dns/promises';
import { pathToFileURL } from 'node:url';
import { MemoryCache } from '@svc/store';
import { Engine, ENGINE_DEFAULTS } from '@svc/engine';
import { parseAddress, Verifier, verifierConfig } from '@svc/verifier';
import { nodeDns, netSmtpConnector } from '@svc/verifier/adapters';
import type { MxStats } from '../../test/sim/index.ts';
import { startChild } from '../lib/children.ts';
import type { BenchResult, Row } from '../lib/result.ts';
import { bareSmtpDialogue } from '../lib/smtp-client.ts';
import { fmt, measureSerial, summarize, withTimeout, type Sample, type Summary } from '../lib/stats.ts';

export const NAME = 'verifier/cpu-per-validation';
const DOMAIN = 'catchall.test';
const MX_HOST = 'mx1.catchall.test';
const HELO = 'verifier.bench.test';
const MAIL_FROM = 'probe@verifier.bench.test';
const TARGET_P50_MS = 2;

export interface CpuOptions {
  /** Measured validations per variant (default 2000). */
  n?: number;
  warmup?: number;
  /** Wall-time budget per variant (default 25 s). */
  budgetMs?: number;
}

function makeVerifier(sim: { dnsServers: string; smtpPort: number }, mxCacheTtlMs: number): Verifier {
  const simDns = nodeDns({ servers: [sim.dnsServers], timeoutMs: 2_000, tries: 2 });
  const cache = new MemoryCache();
  return new Verifier({
    dns: simDns,
    probe: new Engine({ dns: simDns, smtp: netSmtpConnector, cache, config: { ...ENGINE_DEFAULTS, smtpPort: sim.smtpPort, heloName: HELO, mailFrom: MAIL_FROM, smtpTimeoutMs: 5_000, smtpRetryDelayMs: 400, idleMs: 0 } }),
    cache,
    config: verifierConfig({
      resultCacheTtlMs: 0, // every validation goes all the way
      mxCacheTtlMs,
    }),
  });
}

const diff = (a: MxStats, b: MxStats): MxStats => Object.fromEntries(Object.keys(a).map((k) => [k, b[k as keyof MxStats] - a[k as keyof MxStats]])) as unknown as MxStats;

export async function run(opts: CpuOptions = {}): Promise<BenchResult> {
  const n = opts.n ?? 2_000;
  const warmup = opts.warmup ?? 200;
  const budgetMs = opts.budgetMs ?? 25_000;
  const warnings: string[] = [];
  const sim = await startChild<{ dnsServers: string; smtpPort: number }>('sim-child.ts', { args: ['0'] });
  try {
    const tag = Date.now().toString(36);
    const results: Record<string, { sample: Sample; cpu: Summary; wall: Summary; smtp: MxStats }> = {};
    /** Measures one variant and merges it into what earlier rounds measured for it. */
    const record = async (key: string, fn: (i: number) => Promise<void> | void, o: { n: number; warmup: number; budgetMs: number }) => {
      const before = await sim.request<MxStats>('statsFor', DOMAIN);
      const sample = await measureSerial(o, fn);
      const after = await sim.request<MxStats>('statsFor', DOMAIN);
      if (sample.skipped > 0) warnings.push(`${key}: time budget hit, ${sample.cpuMs.length} of ${o.n} measured in one round`);
      const prev = results[key];
      const merged: Sample = prev
        ? { cpuMs: [...prev.sample.cpuMs, ...sample.cpuMs], wallMs: [...prev.sample.wallMs, ...sample.wallMs], skipped: prev.sample.skipped + sample.skipped, warmedUp: prev.sample.warmedUp + sample.warmedUp }
        : sample;
      const smtp = diff(before, after);
      if (prev) for (const k of Object.keys(smtp) as (keyof MxStats)[]) smtp[k] += prev.smtp[k];
      results[key] = { sample: merged, cpu: summarize(merged.cpuMs), wall: summarize(merged.wallMs), smtp };
    };

    const resolver = new Resolver({ timeout: 2_000, tries: 2 });
    resolver.setServers([sim.info.dnsServers]);
    const [mxIp] = await resolver.resolve4(MX_HOST);
    if (!mxIp) throw new Error(`${MX_HOST} has no A record in the sim`);
    const addrs = async () => {
      await resolver.resolve4(MX_HOST);
      await resolver.resolve6(MX_HOST).catch(() => []); // the sim answers AAAA with NODATA, as the verifier sees it
    };

    let unexpected = 0;
    let badRcpt = 0;
    const warm = makeVerifier(sim.info, 300_000); // production MX TTL
    const cold = makeVerifier(sim.info, 0); // every validation asks DNS for the MX too
    const verifyOne = (v: Verifier, prefix: string) => async (i: number) => {
      const [r] = await v.verify([`${prefix}.${tag}.${i < 0 ? `w${-i}` : i}@${DOMAIN}`]);
      if (r?.result !== 'risky' || r.reason_code !== 'catch_all') unexpected++;
    };
    const dialogue = (starttls: boolean, prefix: string) => async (i: number) => {
      const code = await bareSmtpDialogue({ host: mxIp, port: sim.info.smtpPort, servername: MX_HOST, helo: HELO, mailFrom: MAIL_FROM, rcpt: `${prefix}.${tag}.${i < 0 ? `w${-i}` : i}@${DOMAIN}`, starttls, timeoutMs: 5_000 });
      if (code !== 250) badRcpt++;
    };
    const main = { n: Math.ceil(n / 2), warmup: Math.ceil(warmup / 2), budgetMs: budgetMs / 2 };
    const part = { n: Math.ceil(n / 4), warmup: Math.ceil(warmup / 4), budgetMs: budgetMs / 4 };
    type Variant = [key: string, make: (round: number) => (i: number) => Promise<void>, o: typeof main];
    const variants: Variant[] = [
      ['verifier, MX cache warm', (r) => verifyOne(warm, `bench.warm${r}`), main],
      ['verifier, MX cache cold', (r) => verifyOne(cold, `bench.cold${r}`), main],
      [
        'bare: DNS A+AAAA + SMTP with STARTTLS',
        (r) => {
          const d = dialogue(true, `bare.warm${r}`);
          return async (i) => {
            await addrs();
            await d(i);
          };
        },
        main,
      ],
      [
        'bare: DNS MX+A+AAAA + SMTP with STARTTLS',
        (r) => {
          const d = dialogue(true, `bare.cold${r}`);
          return async (i) => {
            await resolver.resolveMx(DOMAIN);
            await addrs();
            await d(i);
          };
        },
        main,
      ],
      ['bare: SMTP with STARTTLS only', (r) => dialogue(true, `bare.tls${r}`), part],
      ['bare: SMTP plain (no STARTTLS)', (r) => dialogue(false, `bare.plain${r}`), part],
      ['bare: DNS A+AAAA only', () => addrs, part],
    ];
    // Two rounds, the second in reverse order (A B C … C B A): a slow drift of the machine
    // (frequency, heap growth, the sim warming up) weighs on every variant alike.
    for (const [round, order] of [variants, [...variants].reverse()].entries()) {
      for (const [key, make, o] of order) await record(key, make(round), o);
    }
    await withTimeout(Promise.all([warm.close(), cold.close()]), 10_000, 'closing verifiers');
    if (unexpected > 0) warnings.push(`${unexpected} validations did not come back risky/catch_all`);
    if (badRcpt > 0) warnings.push(`${badRcpt} bare RCPTs were not answered 250`);

    // parseAddress alone: too fast for one cpuUsage() per call, so 1000 calls per sample.
    const BATCH = 1_000;
    let sink = 0;
    await record(
      'parseAddress alone',
      (i) => {
        for (let j = 0; j < BATCH; j++) if (parseAddress(`parse.${tag}.${i}.${j}@${DOMAIN}`).ok) sink++;
      },
      { n: 200, warmup: 20, budgetMs: 5_000 },
    );
    const parse = results['parseAddress alone']!;
    parse.cpu = summarize(parse.sample.cpuMs.map((c) => c / BATCH));
    parse.wall = summarize(parse.sample.wallMs.map((c) => c / BATCH));
    if (sink === 0) warnings.push('parseAddress accepted nothing');

    // --- report ------------------------------------------------------------------------------------
    const vw = results['verifier, MX cache warm']!;
    const vc = results['verifier, MX cache cold']!;
    const bw = results['bare: DNS A+AAAA + SMTP with STARTTLS']!;
    const bc = results['bare: DNS MX+A+AAAA + SMTP with STARTTLS']!;
    const rows: Row[] = [
      {
        bench: NAME,
        metric: 'CPU per validation p50, MX cache warm',
        value: vw.cpu.p50,
        unit: 'ms',
        baseline: { label: 'bare client, same DNS + SMTP work', value: bw.cpu.p50 },
        ratio: vw.cpu.p50 / bw.cpu.p50,
        ratioLabel: 'x bare',
        target: `< ${TARGET_P50_MS} ms`,
        pass: vw.cpu.p50 < TARGET_P50_MS,
      },
      {
        bench: NAME,
        metric: 'CPU per validation p50, MX cache cold',
        value: vc.cpu.p50,
        unit: 'ms',
        baseline: { label: 'bare client, same DNS + SMTP work', value: bc.cpu.p50 },
        ratio: vc.cpu.p50 / bc.cpu.p50,
        ratioLabel: 'x bare',
        target: `< ${TARGET_P50_MS} ms`,
        pass: vc.cpu.p50 < TARGET_P50_MS,
      },
      {
        bench: NAME,
        metric: 'CPU per validation p99, MX cache warm',
        value: vw.cpu.p99,
        unit: 'ms',
        baseline: { label: 'bare client, same DNS + SMTP work', value: bw.cpu.p99 },
        ratio: vw.cpu.p99 / bw.cpu.p99,
        ratioLabel: 'x bare',
      },
      {
        bench: NAME,
        metric: 'wall per validation p50, MX cache warm',
        value: vw.wall.p50,
        unit: 'ms',
        baseline: { label: 'bare client, same DNS + SMTP work', value: bw.wall.p50 },
        ratio: vw.wall.p50 / bw.wall.p50,
        ratioLabel: 'x bare',
      },
    ];
    const details = [
      `Sim in a child process (replyLatencyMs 0). ${DOMAIN}, one validation at a time, distinct local parts, resultCacheTtlMs 0. ` +
        `Two rounds (A…G then G…A); per variant in all: ${2 * main.warmup} warm-up calls, then up to ${2 * main.n} measured (the bare parts: ${2 * part.n}); CPU = process.cpuUsage() user+system across each call.`,
      '',
      '| variant | n | CPU p50 ms | CPU p90 ms | CPU p99 ms | CPU mean ms | wall p50 ms | wall p90 ms | wall p99 ms | SMTP conns/call | STARTTLS/call | RCPT/call |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|',
      ...Object.entries(results).map(([k, r]) => {
        // The sim's counters cover the warm-up calls too.
        const per = (x: number | undefined) => (x === undefined || k === 'parseAddress alone' ? '-' : fmt(x / (r.sample.cpuMs.length + r.sample.warmedUp)));
        return `| ${k} | ${r.cpu.n} | ${fmt(r.cpu.p50)} | ${fmt(r.cpu.p90)} | ${fmt(r.cpu.p99)} | ${fmt(r.cpu.mean)} | ${fmt(r.wall.p50)} | ${fmt(r.wall.p90)} | ${fmt(r.wall.p99)} | ${per(r.smtp?.connections)} | ${per(r.smtp?.starttls)} | ${per(r.smtp?.rcpt)} |`;
      }),
      '',
      `Ratios (CPU p50): verifier warm / bare same work = ${fmt(vw.cpu.p50 / bw.cpu.p50)}x; verifier cold / bare same work = ${fmt(vc.cpu.p50 / bc.cpu.p50)}x; ` +
        `verifier warm / bare SMTP plain = ${fmt(vw.cpu.p50 / results['bare: SMTP plain (no STARTTLS)']!.cpu.p50)}x; ` +
        `verifier warm / parseAddress = ${fmt(vw.cpu.p50 / parse.cpu.p50)}x.`,
    ];
    return { name: NAME, rows, details, warnings };
  } finally {
    await sim.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const r = await run();
  for (const row of r.rows) console.log(`${row.metric}: ${fmt(row.value)} ${row.unit}${row.ratio !== undefined ? ` (${fmt(row.ratio)}${row.ratioLabel ?? 'x'})` : ''}${row.target ? ` target ${row.target}: ${row.pass ? 'PASS' : 'MISS'}` : ''}`);
  console.log(r.details.join('\n'));
  for (const w of r.warnings) console.log(`WARNING: ${w}`);
}
