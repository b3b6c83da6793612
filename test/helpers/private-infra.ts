// Private servers for fault tests: a Kafka broker and a ClickHouse server of the test's own, on
// free ports with data in a temporary directory, that the test may stop (SIGTERM or SIGKILL) and
// start again on the same ports and data, without touching the shared servers of
// scripts/infra-up.sh that other test files use at the same time.
//
// - Kafka: the jars infra-up.sh fetched (<repo>/.infra/kafka/libs, or $INFRA_DIR/kafka/libs), one
//   KRaft node (broker + controller) rendered from infra/kafka/server.properties, its storage
//   formatted with kafka.tools.StorageTool, the JVM flags and log4j config of infra-up.sh
//   (-Xmx512m -Xms256m; server.log in <dir>/logs, the JVM's output in <dir>/kafka.out). Two
//   changes for quick restarts: broker.session.timeout.ms 3 s (heartbeats every 1 s) and the C1
//   compiler only (-XX:TieredStopAtLevel=1); a restart then takes about the JVM's start, 3-7 s.
// - ClickHouse: Debian's clickhouse-server binary, config rendered from infra/clickhouse/config.xml
//   as infra-up.sh renders it (data and logs under the temporary directory), run in the foreground
//   as our child (its output in <dir>/stdout.log).
//
// Both are children of the test process: a test process that exits kills them (SIGKILL) on its way.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { kafkaAdmin } from '@svc/bus';

const ROOT = path.resolve(import.meta.dirname, '../..');
const INFRA_DIR = process.env.INFRA_DIR ?? path.join(ROOT, '.infra');
export const KAFKA_LIBS = path.join(INFRA_DIR, 'kafka', 'libs');
/** The cluster id infra-up.sh formats its data dir with (any fixed id does: the dir is ours). */
const KAFKA_CLUSTER_ID = 'YROASVUISKaMEUNuzUnusQ';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Whether nobody listens on 127.0.0.1:`port` now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/**
 * A port nobody listens on now, below Linux's ephemeral range (32768-60999): a server stopped and
 * started again on it must not find it taken by some client connection's local port meanwhile.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * 20_000);
    if (await portFree(port)) return port;
  }
}

/** `n` distinct free ports. */
async function freePorts(n: number): Promise<number[]> {
  const out = new Set<number>();
  while (out.size < n) out.add(await freePort());
  return [...out];
}

/** Copies `template` with each @KEY@ replaced by its value (infra-up.sh's render). */
function render(template: string, values: Record<string, string | number>): string {
  let text = readFileSync(template, 'utf8');
  for (const [k, v] of Object.entries(values)) text = text.split(`@${k}@`).join(String(v));
  return text;
}

// The children of this process that must not outlive it.
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** Waits for `child` to exit, sending SIGKILL after `killAfterMs` if `signal` did not end it. */
async function stopChild(child: ChildProcess, signal: 'SIGTERM' | 'SIGKILL', killAfterMs: number): Promise<{ ms: number; forced: boolean }> {
  const t0 = Date.now();
  if (child.exitCode !== null || child.signalCode !== null) return { ms: 0, forced: false };
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill(signal);
  let forced = false;
  const timer = setTimeout(() => {
    forced = true;
    child.kill('SIGKILL');
  }, killAfterMs);
  await exited;
  clearTimeout(timer);
  return { ms: Date.now() - t0, forced };
}

/** The last `n` characters of a file ('' if missing). */
function tailOf(file: string, n = 3000): string {
  try {
    const s = readFileSync(file, 'utf8');
    return s.slice(-n);
  } catch {
    return '';
  }
}

/** Polls `check` until it resolves true, the child dies, or `ms` pass. */
async function waitUp(what: string, child: ChildProcess, check: () => Promise<boolean>, ms: number, logFile: string): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited during start-up (${child.signalCode ?? child.exitCode}): ${tailOf(logFile)}`);
    if (Date.now() >= end) throw new Error(`${what} did not answer within ${ms} ms: ${tailOf(logFile)}`);
    await sleep(250);
  }
}

/** A private server: stopped and started again on the same ports and data. */
export interface PrivateServer {
  readonly dir: string;
  /** The server's process is running (it may not answer yet). */
  running(): boolean;
  /** Starts the server again on the same ports and data (it must be stopped) and waits until it answers; the time that took. */
  start(): Promise<number>;
  /** Stops the server: SIGTERM (SIGKILL after `killAfterMs`, default 30 s) or SIGKILL. The time it took to exit, and whether SIGKILL had to end it. */
  stop(signal: 'SIGTERM' | 'SIGKILL', killAfterMs?: number): Promise<{ ms: number; forced: boolean }>;
  /** The server's log, for a failure message. */
  logTail(n?: number): string;
  /** Stops it (SIGKILL) and removes its directory (kept if `keep`). */
  close(keep?: boolean): Promise<void>;
}

/**
 * The server process `name` (`the private Kafka broker`), started by `launch` with its output
 * appended to `outFile`, up once `answers` (waitUp, `logFile`'s tail on failure); started again
 * by start() after stop(); a child of this process (killed when it exits).
 */
function serverChild(opts: { name: string; where: string; outFile: string; logFile: string; startTimeoutMs: number; launch: (out: number) => ChildProcess; answers: () => Promise<boolean> }) {
  let child: ChildProcess | undefined;
  const alive = () => !!child && child.exitCode === null && child.signalCode === null;
  const start = async (): Promise<number> => {
    if (alive()) throw new Error(`${opts.name} is running`);
    const t0 = Date.now();
    const out = openSync(opts.outFile, 'a');
    const c = (child = opts.launch(out));
    closeSync(out);
    children.add(c);
    c.once('exit', () => children.delete(c));
    await waitUp(`${opts.name} on ${opts.where}`, c, opts.answers, opts.startTimeoutMs, opts.logFile);
    return Date.now() - t0;
  };
  return {
    running: alive,
    start,
    stop: (signal: 'SIGTERM' | 'SIGKILL', killAfterMs = 30_000) => (child ? stopChild(child, signal, killAfterMs) : Promise.resolve({ ms: 0, forced: false })),
    /** SIGKILL, for close(). */
    kill: async () => {
      if (child) await stopChild(child, 'SIGKILL', 10_000);
    },
  };
}

// ------------------------------------------------------------------------------------------------
// Kafka

/** Why a private Kafka broker cannot be started here (no java, no jars), or undefined. */
export function privateKafkaMissing(): string | undefined {
  if (!existsSync(path.join(KAFKA_LIBS, '.complete'))) return `no Kafka jars in ${KAFKA_LIBS} (scripts/infra-up.sh fetches them)`;
  if (spawnSync('java', ['-version'], { stdio: 'ignore' }).status !== 0) return 'no java on the PATH';
  return undefined;
}

/** A private broker (its process the JVM; stop('SIGTERM') a controlled shutdown; logTail() its server.log). */
export interface PrivateKafka extends PrivateServer {
  /** `127.0.0.1:<port>`, for KAFKA_BROKERS. */
  readonly brokers: string[];
  readonly port: number;
  readonly controllerPort: number;
}

/** What a CDS archive of the broker depends on: the jar set (infra-up.sh's hash of its pom) and the JVM. */
function kafkaCdsKey(): string {
  const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
  return createHash('sha256')
    .update(readFileSync(path.join(KAFKA_LIBS, '.complete'), 'utf8'))
    .update(java.stderr ?? '')
    .digest('hex')
    .slice(0, 16);
}

/** A metadata request answered by the broker at `broker`. */
async function kafkaAnswers(broker: string): Promise<boolean> {
  const admin = kafkaAdmin({ clientId: 'private-kafka-probe', brokers: [broker], connectionTimeout: 1000, requestTimeout: 3000, retry: { retries: 0 } });
  try {
    await admin.connect();
    const meta = await admin.describeCluster();
    return meta.brokers.length > 0 && meta.controller !== null;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/** Formats a fresh KRaft data dir and starts a one-node broker on free ports; resolves once it answers. */
export async function startPrivateKafka(opts: { name?: string; startTimeoutMs?: number; properties?: Record<string, string | number> } = {}): Promise<PrivateKafka> {
  const missing = privateKafkaMissing();
  if (missing) throw new Error(missing);
  const dir = mkdtempSync(path.join(os.tmpdir(), `svc-${opts.name ?? 'private'}-kafka-`));
  const [port, controllerPort] = (await freePorts(2)) as [number, number];
  const dataDir = path.join(dir, 'data');
  const logsDir = path.join(dir, 'logs');
  mkdirSync(logsDir, { recursive: true });
  const config = path.join(dir, 'server.properties');
  // infra-up.sh's properties, and: a broker killed with -9 and started again registers only once
  // its last incarnation's session has expired at the controller (broker.session.timeout.ms,
  // 9 s by default: 13-15 s per restart measured); 3 s keeps a restart at about the JVM's start.
  const properties = { 'broker.heartbeat.interval.ms': 1000, 'broker.session.timeout.ms': 3000, ...opts.properties };
  const rendered = render(path.join(ROOT, 'infra/kafka/server.properties'), { KAFKA_PORT: port, CONTROLLER_PORT: controllerPort, DATA_DIR: dataDir });
  writeFileSync(config, `${rendered}\n# private-infra.ts\n${Object.entries(properties).map(([k, v]) => `${k}=${v}`).join('\n')}\n`);
  const classpath = `${KAFKA_LIBS}/*`;
  const format = spawnSync('java', [`-Dlog4j.configuration=file:${path.join(ROOT, 'infra/kafka/tools-log4j.properties')}`, '-cp', classpath, 'kafka.tools.StorageTool', 'format', '--config', config, '--cluster-id', KAFKA_CLUSTER_ID, '--ignore-formatted'], { encoding: 'utf8' });
  if (format.status !== 0) throw new Error(`kafka.tools.StorageTool format failed: ${format.stderr}${format.stdout}`);
  const broker = `127.0.0.1:${port}`;
  const outFile = path.join(dir, 'kafka.out');
  const serverLog = path.join(logsDir, 'server.log');

  // A class-data sharing archive of the broker's classes (JDK 13+ dynamic CDS), kept in the temp
  // directory per jar set and JVM: with it a start loads its classes about 1-1.5 s sooner. Until
  // it exists, each start asks the JVM to write one at exit (a SIGTERM exit writes it; a kill does
  // not), into a file of this process, moved into place once written.
  const cds = path.join(os.tmpdir(), `svc-kafka-cds-${kafkaCdsKey()}.jsa`);
  const cdsTmp = `${cds}.${process.pid}.tmp`;
  const cdsFlags = (): string[] => {
    if (!existsSync(cds) && existsSync(cdsTmp)) renameSync(cdsTmp, cds);
    return existsSync(cds) ? [`-XX:SharedArchiveFile=${cds}`] : [`-XX:ArchiveClassesAtExit=${cdsTmp}`];
  };
  const server = serverChild({
    name: 'the private Kafka broker',
    where: broker,
    outFile,
    logFile: serverLog,
    startTimeoutMs: opts.startTimeoutMs ?? 90_000,
    answers: () => kafkaAnswers(broker),
    // JVM flags as infra-up.sh's (kafka-server-start.sh's, with a small heap).
    launch: (out) =>
      spawn(
        'java',
        [
          '-Xmx512m',
          '-Xms256m',
          '-XX:+UseG1GC',
          '-XX:MaxGCPauseMillis=20',
          '-XX:InitiatingHeapOccupancyPercent=35',
          '-XX:+ExplicitGCInvokesConcurrent',
          '-Djava.awt.headless=true',
          // Not in infra-up.sh: the C1 compiler only, a start about 1 s sooner (a test broker
          // restarted ten times; its throughput is not what is measured).
          '-XX:TieredStopAtLevel=1',
          ...cdsFlags(),
          `-Dkafka.logs.dir=${logsDir}`,
          `-Dlog4j.configuration=file:${path.join(ROOT, 'infra/kafka/log4j.properties')}`,
          '-cp',
          classpath,
          'kafka.Kafka',
          config,
        ],
        { stdio: ['ignore', out, out] },
    ),
  });
  await server.start();
  return {
    brokers: [broker],
    port,
    controllerPort,
    dir,
    running: server.running,
    start: server.start,
    stop: server.stop,
    logTail: (n = 3000) => tailOf(serverLog, n) || tailOf(outFile, n),
    async close(keep = false) {
      await server.kill();
      if (!existsSync(cds) && existsSync(cdsTmp)) renameSync(cdsTmp, cds);
      rmSync(cdsTmp, { force: true });
      if (!keep) rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ------------------------------------------------------------------------------------------------
// ClickHouse

/** Why a private ClickHouse server cannot be started here (no clickhouse-server binary), or undefined. */
export function privateClickhouseMissing(): string | undefined {
  const which = spawnSync('sh', ['-c', 'command -v clickhouse-server'], { encoding: 'utf8' });
  return which.status === 0 && which.stdout.trim() ? undefined : 'no clickhouse-server on the PATH (scripts/infra-up.sh installs it)';
}

/** A private ClickHouse server (it answers once SELECT 1 does; logTail() its error log). */
export interface PrivateClickhouse extends PrivateServer {
  /** `http://127.0.0.1:<httpPort>`, for CLICKHOUSE_URL. */
  readonly url: string;
  readonly httpPort: number;
  readonly tcpPort: number;
}

/** SELECT 1 over HTTP answers 1. */
async function clickhouseAnswers(url: string): Promise<boolean> {
  const res = await fetch(`${url}/?query=SELECT%201`, { signal: AbortSignal.timeout(3000) });
  return res.ok && (await res.text()).trim() === '1';
}

/** A clickhouse-server of the test's own on free ports, data and logs in a temporary directory; resolves once it answers. */
export async function startPrivateClickhouse(opts: { name?: string; startTimeoutMs?: number } = {}): Promise<PrivateClickhouse> {
  const missing = privateClickhouseMissing();
  if (missing) throw new Error(missing);
  const dir = mkdtempSync(path.join(os.tmpdir(), `svc-${opts.name ?? 'private'}-clickhouse-`));
  mkdirSync(path.join(dir, 'log'), { recursive: true });
  mkdirSync(path.join(dir, 'data'), { recursive: true });
  // infra/clickhouse/config.xml opens no interserver port (one server, no replication): HTTP and
  // native TCP are the only listeners, both on free ports.
  const [httpPort, tcpPort] = (await freePorts(2)) as [number, number];
  const config = path.join(dir, 'config.xml');
  writeFileSync(config, render(path.join(ROOT, 'infra/clickhouse/config.xml'), { CH_DIR: dir, HTTP_PORT: httpPort, TCP_PORT: tcpPort, USERS_XML: path.join(ROOT, 'infra/clickhouse/users.xml') }));
  const url = `http://127.0.0.1:${httpPort}`;
  const outFile = path.join(dir, 'stdout.log');
  const errLog = path.join(dir, 'log', 'clickhouse-server.err.log');
  const server = serverChild({
    name: 'the private ClickHouse server',
    where: url,
    outFile,
    logFile: errLog,
    startTimeoutMs: opts.startTimeoutMs ?? 60_000,
    answers: () => clickhouseAnswers(url),
    launch: (out) => spawn('clickhouse-server', [`--config-file=${config}`], { cwd: dir, stdio: ['ignore', out, out] }),
  });
  await server.start();
  return {
    url,
    httpPort,
    tcpPort,
    dir,
    running: server.running,
    start: server.start,
    stop: server.stop,
    logTail: (n = 3000) => tailOf(errLog, n) || tailOf(outFile, n),
    async close(keep = false) {
      await server.kill();
      if (!keep) rmSync(dir, { recursive: true, force: true });
    },
  };
}
