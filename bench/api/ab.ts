// The cached HTTP path of several checkouts, measured side by side (not part of `npm run bench`).
//
// On a small shared machine whose speed drifts by a third within minutes, two runs of
// `npm run bench -- http` minutes apart cannot tell a 10% change from the drift. This runs one
// service child per checkout (bench/api/service-child.ts of that checkout, from its own directory
// and node_modules, on the same simulated internet), fills each one's verdict cache, then loads them
// in alternation, round after round (the order reversed every other round), with the same
// autocannon load as benchmark 2. The medians of the rounds are compared: requests/s, the
// server's CPU per request (its process, the PGlite thread included) and its main thread's alone.
//
//   node --import tsx bench/api/ab.ts [--address role|charged] [--rounds 6] [--seconds 4] DIR[@VAR=VALUE,...] DIR ... [BARE]
//
// DIR: a checkout with its dependencies installed (`git worktree add /tmp/old <rev> && (cd /tmp/old
// && npm install)`); `@VAR=VALUE,...` adds environment variables to that one service (the same DIR
// twice with and without a setting compares the setting). BARE: benchmark 2's baseline, the bare
// Fastify route of this checkout (bench/api/bare-fastify-child.ts) answering the first service's
// cached answer, loaded in the same alternation: the ratio a full run reports, with the baseline
// measured between the services' rounds instead of only before and after them.

import { parseArgs } from 'node:util';
import { startChild, type Child } from '../lib/children.ts';
import { fmt, median } from '../lib/stats.ts';
import { CHARGED, KEY, load, ROLE, serviceEnv, type Load, type SimInfo } from './http-cached.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { address: { type: 'string', default: 'role' }, rounds: { type: 'string', default: '6' }, seconds: { type: 'string', default: '4' } },
});
const email = values.address === 'charged' ? CHARGED : values.address === 'role' ? ROLE : undefined;
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
if (!email || !Number.isInteger(rounds) || rounds < 1 || !Number.isInteger(seconds) || seconds < 1 || positionals.length === 0) {
  console.error('usage: node --import tsx bench/api/ab.ts [--address role|charged] [--rounds N] [--seconds N] DIR[@VAR=VALUE,...] DIR ...');
  process.exit(2);
}

interface Target {
  spec: string;
  child: Child<{ url: string }>;
  runs: Load[];
}

const sim = await startChild<SimInfo>('sim-child.ts', { args: ['0'] });
const targets: Target[] = [];
try {
  let answer: string | undefined;
  for (const spec of positionals) {
    if (spec === 'BARE') continue;
    const [root, extra = ''] = spec.split('@');
    const env = Object.fromEntries(extra.split(',').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    const child = await startChild<{ url: string }>('api/service-child.ts', { root: root!, env: { ...serviceEnv(sim.info), ...env } });
    targets.push({ spec, child, runs: [] });
    // One real validation fills the verdict cache (and, for the charged address, spends a credit).
    const res = await fetch(`${child.info.url}/v1/validate`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: JSON.stringify({ email }), signal: AbortSignal.timeout(15_000) });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${spec}: the first validation answered ${res.status} ${text}`);
    answer ??= text;
  }
  // The bare route in its place among the targets (the first one is the ratios' base).
  const bareAt = positionals.indexOf('BARE');
  if (bareAt >= 0) {
    if (!answer) throw new Error('BARE needs a service to take its answer from');
    const child = await startChild<{ url: string }>('api/bare-fastify-child.ts', { args: [answer] });
    targets.splice(bareAt, 0, { spec: 'BARE', child, runs: [] });
  }
  for (let r = 0; r < rounds; r++) {
    for (const t of r % 2 === 0 ? targets : [...targets].reverse()) {
      t.runs.push(await load(t.spec, t.child, email, { durationS: seconds, warmupS: r === 0 ? 2 : 0, connections: 50 }));
    }
  }
  const base = targets[0]!;
  const baseRps = median(base.runs.map((l) => l.reqPerS));
  const baseCpu = median(base.runs.map((l) => l.serverCpuMs));
  console.log(`cached ${values.address} address (${email}), ${rounds} alternating rounds of ${seconds} s, 50 connections; medians, ratios to the first checkout\n`);
  const baseMain = median(base.runs.map((l) => l.mainCpuMs));
  console.log('| checkout | req/s | ratio | server CPU µs/req | ratio | main thread µs/req | ratio | answers per ledger row | failed answers | req/s by round |');
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const t of targets) {
    const rps = median(t.runs.map((l) => l.reqPerS));
    const cpu = median(t.runs.map((l) => l.serverCpuMs));
    const main = median(t.runs.map((l) => l.mainCpuMs));
    const failed = t.runs.reduce((n, l) => n + l.other + l.errors, 0);
    // A charged run's answers per debit statement (group commit); '-' where nothing was written.
    const perRow = median(t.runs.map((l) => l.ok / l.ledgerRows));
    console.log(`| ${t.spec} | ${fmt(rps)} | ${fmt(rps / baseRps)} | ${fmt(cpu * 1000)} | ${fmt(cpu / baseCpu)} | ${fmt(main * 1000)} | ${fmt(main / baseMain)} | ${Number.isFinite(perRow) ? fmt(perRow) : '-'} | ${failed} | ${t.runs.map((l) => fmt(l.reqPerS)).join(' ')} |`);
  }
} finally {
  await Promise.all([...targets.map((t) => t.child.stop()), sim.stop()]);
}
