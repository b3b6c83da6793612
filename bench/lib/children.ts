// Child processes for the parts of a benchmark whose CPU must not be counted (the simulated
// internet, the service under HTTP load, the bare Fastify baseline). A child prints one JSON line
// on stdout when ready, answers {id, op, arg} requests over the IPC channel, and exits when
// told (SIGTERM) or when the channel to its parent closes.

import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { withTimeout } from './stats.ts';

const BENCH_DIR = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

export interface Child<Info> {
  info: Info;
  process: ChildProcess;
  /** Sends an IPC request to the child and waits (bounded: `timeoutMs`, default 10 s) for its answer. */
  request<T>(op: string, arg?: unknown, timeoutMs?: number): Promise<T>;
  /** SIGTERM, then SIGKILL if it has not exited within 5 s. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts `bench/<rel>` under tsx; resolves with the JSON it prints on its first stdout line.
 * `nodeArgs` go to node itself (e.g. ['--cpu-prof', '--cpu-prof-dir=/tmp/prof'] to profile a child).
 * `root`: another checkout of this repository (with its own node_modules) whose `bench/<rel>` runs,
 * from that directory (bench/api/ab.ts compares revisions so).
 */
export async function startChild<Info>(rel: string, opts: { env?: Record<string, string>; args?: string[]; nodeArgs?: string[]; readyTimeoutMs?: number; root?: string } = {}): Promise<Child<Info>> {
  const file = opts.root ? path.join(path.resolve(opts.root), 'bench', rel) : path.join(BENCH_DIR, rel);
  const cp = spawn(process.execPath, [...(opts.nodeArgs ?? []), '--import', 'tsx', file, ...(opts.args ?? [])], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    env: { ...process.env, ...opts.env },
    ...(opts.root && { cwd: path.resolve(opts.root) }),
  });
  const exited = new Promise<void>((resolve) => cp.once('exit', () => resolve()));
  const info = await withTimeout(
    new Promise<Info>((resolve, reject) => {
      let buf = '';
      const onData = (chunk: Buffer) => {
        buf += chunk.toString('utf8');
        const nl = buf.indexOf('\n');
        if (nl < 0) return;
        cp.stdout!.off('data', onData);
        cp.stdout!.resume(); // later output is not read: drain it
        try {
          resolve(JSON.parse(buf.slice(0, nl)) as Info);
        } catch (err) {
          reject(new Error(`${rel}: bad ready line ${JSON.stringify(buf.slice(0, nl))}: ${String(err)}`));
        }
      };
      cp.stdout!.on('data', onData);
      cp.once('exit', (code, signal) => reject(new Error(`${rel} exited before it was ready (code ${code}, signal ${signal})`)));
      cp.once('error', reject);
    }),
    opts.readyTimeoutMs ?? 60_000,
    `starting ${rel}`,
  ).catch((err) => {
    cp.kill('SIGKILL');
    throw err;
  });

  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  cp.on('message', (m: { id: number; ok: boolean; value?: unknown; error?: string }) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.ok) p.resolve(m.value);
    else p.reject(new Error(`${rel}: ${m.error}`));
  });

  let stopping: Promise<void> | undefined;
  return {
    info,
    process: cp,
    request<T>(op: string, arg?: unknown, timeoutMs = 10_000): Promise<T> {
      const id = nextId++;
      const answer = new Promise<T>((resolve, reject) => {
        pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
        cp.send({ id, op, arg });
      });
      return withTimeout(answer, timeoutMs, `${rel} ${op}`).finally(() => pending.delete(id));
    },
    stop() {
      return (stopping ??= (async () => {
        if (cp.exitCode !== null || cp.signalCode !== null) return;
        cp.kill('SIGTERM');
        const killer = setTimeout(() => cp.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(killer);
      })());
    },
  };
}

/**
 * Child side: serves IPC requests with `handlers`, and runs `close` then exits on SIGTERM,
 * SIGINT or when the parent goes away.
 */
export function serveParent(handlers: Record<string, (arg: unknown) => unknown>, close: () => Promise<void>): void {
  let closing = false;
  const stop = () => {
    if (closing) return;
    closing = true;
    const hard = setTimeout(() => process.exit(1), 5_000);
    hard.unref();
    close().then(
      () => process.exit(0),
      (err) => {
        process.stderr.write(`bench child: close failed: ${String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('disconnect', stop);
  process.on('message', async (m: { id: number; op: string; arg?: unknown }) => {
    const h = handlers[m.op];
    try {
      if (!h) throw new Error(`unknown op ${m.op}`);
      process.send?.({ id: m.id, ok: true, value: await h(m.arg) });
    } catch (err) {
      process.send?.({ id: m.id, ok: false, error: err instanceof Error ? err.message : String(err) });
    }
  });
}
