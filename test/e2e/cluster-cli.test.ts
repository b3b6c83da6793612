// `npm run cluster`: argument checks, and a real local cluster of one front and one worker on the
// servers of scripts/infra-up.sh (a fresh PostgreSQL schema, a topic prefix of its own): it says
// where the front listens, the front and the worker both answer, and SIGTERM stops both cleanly;
// killed with SIGKILL (it cannot pass anything on), its front still stops by itself.
// The servers missing: skipped, or a failure under CI_REQUIRE_SERVICES=1.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { clusterEnv, parseArgs } from '../../cluster/cluster.ts';
import { freshSchema, pgUnreachable } from '../helpers/postgres.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
t.setTimeout(180_000);

t.test('arguments', async (t) => {
  t.strictSame(parseArgs([]), { fronts: 1, workers: 1, port: 8080 });
  t.strictSame(parseArgs(['--fronts', '2', '--workers', '3']), { fronts: 2, workers: 3, port: 8080 });
  t.strictSame(parseArgs(['--workers', '0', '--port', '9000']), { fronts: 1, workers: 0, port: 9000 });
  for (const bad of [['--fronts'], ['--fronts', 'two'], ['--fronts', '0'], ['--workers', '65'], ['--nodes', '2'], ['--port', '65530', '--fronts', '2']]) {
    t.throws(() => parseArgs(bad), /^usage: npm run cluster -- --fronts N --workers M/, bad.join(' '));
  }
  t.strictSame(clusterEnv({ KAFKA_BROKERS: 'k:1' }), { KAFKA_BROKERS: 'k:1', DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/test', REDIS_URL: 'redis://127.0.0.1:6379' });
});

/** Whether nobody listens on 127.0.0.1:`port` now. */
const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
  });

/**
 * A first front port whose worker port (11 above it) is free too, below Linux's ephemeral range
 * (32768-60999), where the other tests' services (PORT=0) and every outgoing connection take theirs.
 */
async function freePort(): Promise<number> {
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * 20_000);
    if ((await portFree(port)) && (await portFree(port + 11))) return port;
  }
}

const kafkaUp = () =>
  new Promise<boolean>((resolve) => {
    const s = net.connect(9092, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });

/** Whether PostgreSQL or Kafka is missing: then the test is skipped, or failed under CI_REQUIRE_SERVICES=1. */
async function serversMissing(t: Test): Promise<boolean> {
  const why = (await pgUnreachable()) ?? ((await kafkaUp()) ? undefined : 'Kafka at 127.0.0.1:9092 is not listening');
  if (!why) return false;
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`${why} (CI_REQUIRE_SERVICES=1)`);
  else t.plan(0, `${why}: scripts/infra-up.sh starts the servers`);
  return true;
}

/** `npm run cluster -- --fronts 1 --workers <workers>` on a fresh schema, once it says where it listens. */
async function startCluster(t: Test, workers: number) {
  const schema = await freshSchema();
  t.teardown(() => schema.drop());
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'cluster/cluster.ts', '--fronts', '1', '--workers', String(workers), '--port', String(port)], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: schema.url, SVC_KAFKA_TOPIC_PREFIX: `cli${randomBytes(3).toString('hex')}.`, SVC_BOOTSTRAP_API_KEY: 'svc_test_clusterCliKey0000000001', SVC_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const io = { out: '', err: '' };
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (io.out += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (io.err += c));
  const deadline = Date.now() + 120_000;
  while (!io.err.includes('cluster: 1 front(s) at')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`cluster did not start: ${io.err}\n${io.out.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { child, port, exited, io };
}

t.test('one front and one worker: listening, answering, stopped by SIGTERM', async (t) => {
  if (await serversMissing(t)) return;
  const { child, port, exited, io } = await startCluster(t, 1);
  t.match(io.err, `cluster: 1 front(s) at http://localhost:${port}; 1 worker(s)`);
  const front = await fetch(`http://127.0.0.1:${port}/health`);
  t.equal(front.status, 200, 'the front answers');
  const worker = await fetch(`http://127.0.0.1:${port + 11}/health`);
  t.equal(worker.status, 200, 'the worker answers on the port after the fronts');
  const lines = io.out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { proc: string; msg: string; role?: string; bus?: string });
  const listening = lines.filter((l) => l.msg === 'email validation service listening');
  t.strictSame(listening.map((l) => [l.proc, l.role, l.bus]).sort(), [['front-1', 'front', 'kafka'], ['worker-1', 'worker', 'kafka']], 'each process says its role and its bus');
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM: every process drains and the cluster exits 0');
  t.ok(lines.length > 0 && io.out.includes('"proc":"front-1"') && io.out.includes('"proc":"worker-1"'), 'log lines are tagged with their process');
  const stopped = io.out.split('\n').filter((l) => l.includes('"msg":"stopped"')).length;
  t.equal(stopped, 2, 'both processes logged their stop');
});

t.test('the supervisor killed with SIGKILL: its front notices (the IPC channel closed), drains and stops', async (t) => {
  if (await serversMissing(t)) return;
  const { child, port, io } = await startCluster(t, 0);
  const frontPid = Number(/"proc":"front-1","level":30,"time":\d+,"pid":(\d+)/.exec(io.out)?.[1]);
  t.ok(frontPid > 0, 'the front logged its pid');
  t.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200, 'the front answers');
  child.kill('SIGKILL');
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  // It drains (nothing in flight here) and exits; 30 s is its own drain limit.
  const until = Date.now() + 45_000;
  while (alive(frontPid) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  t.notOk(alive(frontPid), 'the front exited by itself');
  t.ok(await portFree(port), 'its port is free');
});
