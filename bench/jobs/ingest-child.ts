// The full embedded service for bench/jobs/ingest.ts, in its own process: what
// bench/api/service-child.ts runs (startService(loadConfig(env)), a fresh temporary SVC_DATA_DIR
// removed on exit), plus a perf_hooks event-loop delay histogram of this process (1 ms
// resolution), so the bench can read the server's own event-loop delay during an ingest, not only
// the latency its clients see. The histogram is bench-only: the service does not expose one.
// Prints {"url","pid"} as one JSON line on stdout; IPC:
//   eldReset()  clears the histogram, the GC log and the stall log (call right before the measured window)
//   eld()       {p50, p99, max, mean, count} in ms since the last reset
//   stalls()    {gc: [{at, ms, kind}] of every GC pause ≥ 5 ms, stalls: [{at, ms}] of every event-loop
//               stall ≥ 30 ms, with the process's CPU time over it} since the last reset; `at` = ms
//               since the reset, when the pause or stall ended; originMonoUs = the reset on the
//               monotonic clock in µs, to find a stall in a --cpu-prof profile (its startTime)
//   cpuUsage()  process.cpuUsage()
//   memory()    process.memoryUsage()
//   busPending()   messages waiting or in hand on each job topic of the in-process bus (work, mx, results)
//   snapshot(file) v8.writeHeapSnapshot(file) (bench/jobs/big-job.ts, BIG_JOB_SNAPSHOTS): its path

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import v8 from 'node:v8';
import { loadConfig, startService } from '@svc/runtime';
import { serveParent } from '../lib/children.ts';

const ownDir = process.env.SVC_DATA_DIR ? undefined : mkdtempSync(path.join(os.tmpdir(), 'svc-ingest-bench-'));
const env = { ...process.env, ...(ownDir ? { SVC_DATA_DIR: ownDir } : {}) };
const svc = await startService(loadConfig(env));
await svc.services.readiness.refresh();
const h = monitorEventLoopDelay({ resolution: 1 });
h.enable();
const ms = (ns: number) => ns / 1e6;

// Where the long pauses are: GC pauses (a PerformanceObserver) and event-loop stalls (a 5 ms
// timer that notes when it fires late), both timed from the last reset.
let origin = performance.now();
/** The same instant on the monotonic clock, µs (a --cpu-prof profile's startTime uses this clock). */
let originMonoUs = Number(process.hrtime.bigint() / 1000n);
const GC_KINDS: Record<number, string> = { [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major', [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor', [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental', [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb' };
let gcLog: { at: number; ms: number; kind: string }[] = [];
let stallLog: { at: number; ms: number; cpuMs: number }[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    if (e.duration >= 5) gcLog.push({ at: e.startTime + e.duration - origin, ms: e.duration, kind: GC_KINDS[((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? -1)] ?? '?' });
  }
}).observe({ entryTypes: ['gc'] });
// A stall's `cpuMs` is this process's CPU time (all threads) over it: about its length when the
// main thread was working, much less when the process was waiting for a core (a busy machine).
let last = performance.now();
let lastCpu = process.cpuUsage();
setInterval(() => {
  const now = performance.now();
  const cpu = process.cpuUsage();
  if (now - last - 5 >= 30) stallLog.push({ at: now - origin, ms: now - last - 5, cpuMs: (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000 });
  last = now;
  lastCpu = cpu;
}, 5).unref();
serveParent(
  {
    eldReset: () => {
      h.reset();
      origin = performance.now();
      originMonoUs = Number(process.hrtime.bigint() / 1000n);
      gcLog = [];
      stallLog = [];
      return true;
    },
    stalls: () => ({ gc: gcLog, stalls: stallLog, originMonoUs }),
    // The histogram's values include the 1 ms sampling resolution itself.
    eld: () => ({ p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max), mean: ms(h.mean), count: h.count }),
    cpuUsage: () => process.cpuUsage(),
    memory: () => process.memoryUsage(),
    busPending: () => {
      const bus = svc.services.bus as { pending?: (topic: string) => number };
      return Object.fromEntries(['jobs.work', 'jobs.mx', 'jobs.results'].map((t) => [t, bus.pending?.(t) ?? -1]));
    },
    snapshot: (file) => v8.writeHeapSnapshot(String(file)),
  },
  async () => {
    h.disable();
    await svc.close();
    if (ownDir) rmSync(ownDir, { recursive: true, force: true });
  },
);
process.stdout.write(`${JSON.stringify({ url: svc.url, pid: process.pid })}\n`);
