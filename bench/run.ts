// `npm run bench`: runs every benchmark one after the other, prints a summary, and (on a full run
// without errors) rewrites bench/RESULTS.md with the date, the machine and the figures of this
// run, keeping one line per earlier run in its history table.
//
//   npm run bench                 all benchmarks
//   npm run bench -- cpu http     only those whose name contains one of the words (RESULTS.md untouched)

import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as httpCached from './api/http-cached.ts';
import * as clusterThroughput from './cluster/throughput.ts';
import * as engineThroughput from './engine/throughput.ts';
import * as bigJob from './jobs/big-job.ts';
import * as csv from './jobs/csv.ts';
import * as ingest from './jobs/ingest.ts';
import * as outcomesImport from './outcomes/import.ts';
import type { BenchResult, Row } from './lib/result.ts';
import { fmt } from './lib/stats.ts';
import * as connections from './verifier/connections-per-domain.ts';
import * as findBulk from './enrich/find-bulk.ts';
import * as cpu from './verifier/cpu-per-validation.ts';
import * as dashboardBundle from './dashboard/bundle.ts';

const BENCHES: { name: string; run: () => Promise<BenchResult> }[] = [
  { name: cpu.NAME, run: () => cpu.run() },
  { name: httpCached.NAME, run: () => httpCached.run() },
  { name: connections.NAME, run: () => connections.run() },
  { name: csv.NAME, run: () => csv.run() },
  { name: ingest.NAME, run: () => ingest.run() },
  { name: bigJob.NAME, run: () => bigJob.run() },
  { name: outcomesImport.NAME, run: () => outcomesImport.run() },
  { name: engineThroughput.NAME, run: () => engineThroughput.run() },
  { name: findBulk.NAME, run: () => findBulk.run() },
  { name: clusterThroughput.NAME, run: () => clusterThroughput.run() },
  { name: dashboardBundle.NAME, run: () => dashboardBundle.run() },
];

const RESULTS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'RESULTS.md');
const HISTORY_START = '<!-- history:start -->';
const HISTORY_END = '<!-- history:end -->';

function machine() {
  return {
    cpu: os.cpus()[0]?.model.trim() ?? 'unknown CPU',
    cores: os.cpus().length,
    memGiB: os.totalmem() / 2 ** 30,
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
  };
}

function gitRevision(): string {
  try {
    const rev = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
    return `${rev}${dirty ? ' (with uncommitted changes)' : ''}`;
  } catch {
    return 'unknown';
  }
}

const status = (r: Row) => (r.pass === undefined ? '' : r.pass ? 'PASS' : 'MISS');
const ratioText = (r: Row) => {
  if (r.ratio === undefined) return '';
  const label = r.ratioLabel ?? 'x';
  return `${fmt(r.ratio)}${label.startsWith('x') ? '' : ' '}${label}`;
};
const figure = (r: Row) => `${fmt(r.value)} ${r.unit}`;
const baselineText = (r: Row) => (r.baseline ? `${r.baseline.label}: ${fmt(r.baseline.value)}` : '');

function printSummary(results: BenchResult[]): void {
  const rows = results.flatMap((b) => b.rows);
  const cols = [
    ['benchmark', ...rows.map((r) => r.bench)],
    ['metric', ...rows.map((r) => r.metric)],
    ['figure', ...rows.map(figure)],
    ['baseline (same run)', ...rows.map(baselineText)],
    ['ratio', ...rows.map(ratioText)],
    ['target', ...rows.map((r) => r.target ?? '')],
    ['status', ...rows.map(status)],
  ];
  const widths = cols.map((c) => Math.max(...c.map((s) => s.length)));
  for (let i = 0; i <= rows.length; i++) {
    console.log(cols.map((c, j) => c[i]!.padEnd(widths[j]!)).join('  ').trimEnd());
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
}

function oldHistory(): string[] {
  if (!existsSync(RESULTS)) return [];
  const text = readFileSync(RESULTS, 'utf8');
  const a = text.indexOf(HISTORY_START);
  const b = text.indexOf(HISTORY_END);
  if (a < 0 || b < a) return [];
  return text
    .slice(a + HISTORY_START.length, b)
    .split('\n')
    .filter((l) => l.startsWith('| 2')); // data rows start with the date
}

const BY_HAND_START = '<!-- by-hand:start -->';
const BY_HAND_END = '<!-- by-hand:end -->';

/**
 * The section of by-hand measurements (benchmarks that need root or a real mail server, outside
 * this runner: bench/engine/real-postfix-job.ts), written by whoever ran them; kept as it is by
 * every full run, between its markers.
 */
function byHand(): string[] {
  const empty = [BY_HAND_START, '(none recorded)', BY_HAND_END];
  if (!existsSync(RESULTS)) return empty;
  const text = readFileSync(RESULTS, 'utf8');
  const a = text.indexOf(BY_HAND_START);
  const b = text.indexOf(BY_HAND_END);
  if (a < 0 || b < a) return empty;
  return text.slice(a, b + BY_HAND_END.length).split('\n');
}

const loadavg = () => os.loadavg().map((l) => l.toFixed(2)).join(' / ');

function writeResults(results: BenchResult[], startedAt: Date, totalS: number, load: { start: string; end: string }): void {
  const m = machine();
  const date = startedAt.toISOString().replace(/\.\d{3}Z$/, 'Z');
  const rows = results.flatMap((b) => b.rows);
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const targeted = rows.filter((r) => r.target);
  const historyRow = `| ${date} | ${esc(m.cpu)} | ${m.cores} | ${m.node} | ${load.start} | ${targeted.map((r) => `${esc(r.metric)}: ${figure(r)}${r.ratio !== undefined ? ` (${ratioText(r)})` : ''} ${status(r)}`).join('; ')} |`;
  const lines = [
    '# Benchmark results',
    '',
    'Written by `npm run bench` ([run.ts](run.ts)); every full run replaces this file and adds a line to the history at the end. What each benchmark measures and how: [README.md](README.md).',
    '',
    `- Date: ${date}`,
    `- Machine: ${m.cpu}, ${m.cores} cores (os.cpus()), ${fmt(m.memGiB)} GiB RAM, ${m.platform}`,
    `- Node: ${m.node}`,
    `- Revision: ${gitRevision()}`,
    `- Run time: ${fmt(totalS)} s`,
    `- Load average (1 / 5 / 15 min) at start: ${load.start}; at end: ${load.end}. The machine is shared: anything above 0 here ran next to the benchmarks and competed for the ${m.cores} cores.`,
    '',
    '## Summary',
    '',
    '| benchmark | metric | figure | baseline (same run) | ratio | target | status |',
    '|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.bench} | ${esc(r.metric)} | ${esc(figure(r))} | ${esc(baselineText(r))} | ${esc(ratioText(r))} | ${esc(r.target ?? '')} | ${status(r)} |`),
    '',
    '## Details',
    '',
    ...results.flatMap((b) => [`### ${b.name}`, '', ...b.details, ...(b.warnings.length ? ['', ...b.warnings.map((w) => `- WARNING: ${w}`)] : []), '']),
    '## By hand',
    '',
    'Measured outside `npm run bench` (root, a real mail server), each with its date and revision; a full run keeps this section as it is.',
    '',
    ...byHand(),
    '',
    '## History',
    '',
    HISTORY_START,
    '| date | CPU | cores | Node | load at start | targeted figures |',
    '|---|---|---|---|---|---|',
    historyRow,
    ...oldHistory(),
    HISTORY_END,
    '',
  ];
  writeFileSync(RESULTS, lines.join('\n'));
}

const filters = process.argv.slice(2);
const selected = filters.length ? BENCHES.filter((b) => filters.some((f) => b.name.includes(f))) : BENCHES;
if (selected.length === 0) {
  console.error(`no benchmark matches ${filters.join(' ')}; have: ${BENCHES.map((b) => b.name).join(', ')}`);
  process.exit(2);
}

const m = machine();
const loadAtStart = loadavg();
console.log(`bench: ${m.cpu}, ${m.cores} cores, Node ${m.node}, load average ${loadAtStart}`);
const startedAt = new Date();
const t0 = performance.now();
const results: BenchResult[] = [];
let failed = 0;
for (const b of selected) {
  const tb = performance.now();
  console.log(`\n== ${b.name}`);
  try {
    const r = await b.run();
    results.push(r);
    console.log(r.details.join('\n'));
    for (const w of r.warnings) console.log(`WARNING: ${w}`);
    console.log(`(${fmt((performance.now() - tb) / 1000)} s)`);
  } catch (err) {
    failed++;
    console.error(`${b.name} failed:`, err);
  }
}
const totalS = (performance.now() - t0) / 1000;
console.log(`\n== Summary (${fmt(totalS)} s)\n`);
printSummary(results);

if (failed > 0) {
  console.error(`\n${failed} benchmark(s) failed; ${path.relative(process.cwd(), RESULTS)} not written`);
  process.exitCode = 1;
} else if (filters.length) {
  console.log(`\npartial run: ${path.relative(process.cwd(), RESULTS)} not written`);
} else {
  writeResults(results, startedAt, totalS, { start: loadAtStart, end: loadavg() });
  console.log(`\nwritten: ${path.relative(process.cwd(), RESULTS)}`);
}
