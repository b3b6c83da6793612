// `npm run cluster -- --fronts 2 --workers 3`: a local cluster on the servers of
// scripts/infra-up.sh. Starts N fronts (SVC_ROLE=front) and M workers (SVC_ROLE=worker) as child
// processes of `cluster/embedded.ts`, each with the cluster variables (DATABASE_URL, REDIS_URL,
// KAFKA_BROKERS: from the environment, or the infra-up.sh defaults), prints where the fronts
// listen, and passes SIGINT/SIGTERM on to every child (each drains: a front finishes its requests,
// a worker its messages, and commits) before it exits. A child that dies takes the cluster down
// with a non-zero exit, so a supervisor sees it; this process dying (even by SIGKILL) takes the
// children down too, through their IPC channel.
//
//   npm run cluster -- --fronts 2 --workers 3 [--port 8080]   fronts on 8080, 8081; workers on 8090…
//
// Workers answer HTTP too (health, readiness, and the API: SVC_ROLE only decides who consumes
// the job topics), on ports after the fronts'.

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface ClusterArgs {
  fronts: number;
  workers: number;
  port: number;
}

/** Parses `--fronts N --workers M [--port P]`; throws with a usage line on anything else. */
export function parseArgs(argv: readonly string[]): ClusterArgs {
  const out: ClusterArgs = { fronts: 1, workers: 1, port: 8080 };
  const usage = 'usage: npm run cluster -- --fronts N --workers M [--port P]  (N 1-16, M 0-64, P the first front port)';
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = argv[i + 1];
    const n = Number(value);
    const key = ({ '--fronts': 'fronts', '--workers': 'workers', '--port': 'port' } as const)[flag as '--fronts'];
    if (!key || value === undefined || !/^\d+$/.test(value)) throw new Error(usage);
    out[key] = n;
    i++;
  }
  if (out.fronts < 1 || out.fronts > 16 || out.workers < 0 || out.workers > 64 || out.port < 1 || out.port + out.fronts + 10 + out.workers > 65535) throw new Error(usage);
  return out;
}

/** The environment of every process: the caller's, with the infra-up.sh servers where unset. */
export function clusterEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return {
    ...env,
    DATABASE_URL: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    REDIS_URL: env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    KAFKA_BROKERS: env.KAFKA_BROKERS ?? '127.0.0.1:9092',
  };
}

async function main(): Promise<void> {
  let args: ClusterArgs;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const env = clusterEnv(process.env);
  const children: Array<{ name: string; child: ChildProcess }> = [];
  let stopping = false;
  const stopAll = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    for (const { child } of children) if (child.exitCode === null) child.kill(signal);
  };
  const start = (name: string, role: 'front' | 'worker', port: number): Promise<void> => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'cluster/embedded.ts')], {
      cwd: ROOT,
      env: { ...env, SVC_ROLE: role, PORT: String(port), SVC_PUBLIC_URL: env.SVC_PUBLIC_URL ?? `http://localhost:${args.port}` },
      // The IPC channel ties each child to this process: if it dies (even by SIGKILL), the
      // channel closes and every child drains and stops (cluster/embedded.ts).
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    children.push({ name, child });
    // Each JSON log line, tagged with the process it came from; resolves once it listens.
    let listening!: () => void;
    const listens = new Promise<void>((resolve) => (listening = resolve));
    let buf = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        process.stdout.write(line.startsWith('{') ? `{"proc":"${name}",${line.slice(1)}\n` : `[${name}] ${line}\n`);
        if (line.includes('"msg":"email validation service listening"')) listening();
      }
    });
    child.once('exit', (code, signal) => {
      if (!stopping) {
        process.stderr.write(`cluster: ${name} exited (${signal ?? code}); stopping the others\n`);
        process.exitCode = 1;
        stopAll('SIGTERM');
      }
      listening();
      if (children.every((c) => c.child.exitCode !== null || c.child.signalCode !== null)) process.exit(process.exitCode ?? 0);
    });
    return listens;
  };
  process.on('SIGINT', () => stopAll('SIGINT'));
  process.on('SIGTERM', () => stopAll('SIGTERM'));
  // Started with an IPC channel itself (by a test or a supervisor): its end stops the cluster.
  if (process.channel) {
    process.channel.unref();
    process.once('disconnect', () => stopAll('SIGTERM'));
  }
  // The first front alone first: it migrates the database and creates the bootstrap account, so
  // the others find both done instead of racing for them.
  await start('front-1', 'front', args.port);
  await Promise.all([
    ...Array.from({ length: args.fronts - 1 }, (_, i) => start(`front-${i + 2}`, 'front', args.port + i + 1)),
    ...Array.from({ length: args.workers }, (_, i) => start(`worker-${i + 1}`, 'worker', args.port + args.fronts + 10 + i)),
  ]);
  if (stopping) return;
  process.stderr.write(
    `cluster: ${args.fronts} front(s) at ${Array.from({ length: args.fronts }, (_, i) => `http://localhost:${args.port + i}`).join(', ')}; ${args.workers} worker(s); ` +
      `DATABASE_URL, REDIS_URL, KAFKA_BROKERS as set (infra-up.sh defaults otherwise). Ctrl-C stops them all.\n`,
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) void main();
