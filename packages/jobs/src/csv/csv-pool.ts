// A Piscina pool for the CPU-bound CSV steps (CSV parsing, results CSV rendering), so the front's
// event loop stays responsive. The worker file is csv-task.ts. The pool is an instance with
// options, not a module-level singleton: whoever composes the service creates one, shares it, and
// closes it on shutdown.
//
// The worker is TypeScript run by tsx, like the rest of the service. A worker thread does not
// inherit the main thread's module hooks, only its execArgv, so each worker loads tsx itself:
// when the process was started with a tsx import (`node --import tsx`, tap, `npm start`, the tsx
// CLI), the workers inherit it with the rest of execArgv; otherwise (tsx registered from code)
// they get `--import <tsx's loader>` alone, named by an absolute URL so the current directory
// does not matter. Never the process's whole execArgv plus tsx: a worker refuses process-wide
// flags such as --expose-gc (ERR_WORKER_INVALID_EXEC_ARGV), which inheritance skips quietly.

import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import type { ChunkParser, ParseResult, ParseTask } from './csv.ts';
import type { RenderResult, RenderTask } from './csv-task.ts';

export interface CsvPoolOptions {
  /** Worker threads (default: available cores - 1, at least 1, at most 4). */
  threads?: number;
  /** An idle worker exits after this long (default 30 s); the pool starts it again on demand. */
  idleTimeoutMs?: number;
}

export interface CsvPool extends ChunkParser {
  readonly threads: number;
  /** Parses one chunk of whole records (csv.ts parseCsvChunk) on a worker; the chunk's bytes are moved, not copied. */
  parse(task: ParseTask): Promise<ParseResult>;
  /** Renders result rows (render.ts renderRows) on a worker. */
  render(task: RenderTask): Promise<RenderResult>;
  /** Waits for queued tasks, then stops the workers. */
  close(): Promise<void>;
}

const TASK_FILE = fileURLToPath(new URL('./csv-task.ts', import.meta.url));

/** The workers' execArgv: undefined (inherit the process's, which loads tsx), or tsx's loader alone. */
export function workerExecArgv(execArgv: readonly string[] = process.execArgv): string[] | undefined {
  const hasTsx = execArgv.some((a) => /(^|[=/\\@])tsx([/\\@]|$)|tsx[/\\]dist[/\\]loader/.test(a));
  return hasTsx ? undefined : ['--import', import.meta.resolve('tsx')];
}

export function createCsvPool(opts: CsvPoolOptions = {}): CsvPool {
  const threads = Math.max(1, Math.floor(opts.threads ?? Math.min(4, Math.max(1, os.availableParallelism() - 1))));
  const argv = workerExecArgv();
  const pool = new Piscina({
    filename: TASK_FILE,
    minThreads: threads,
    maxThreads: threads,
    idleTimeout: opts.idleTimeoutMs ?? 30_000,
    ...(argv ? { execArgv: argv } : {}),
    name: 'parse',
  });
  let closed: Promise<void> | undefined;
  return {
    threads,
    inFlight: threads * 2,
    parse(task: ParseTask): Promise<ParseResult> {
      // Move the bytes when they own their whole ArrayBuffer (csv.ts allocates chunks that way);
      // a view into a shared or pooled buffer is copied instead, never detached.
      const b = task.bytes;
      const own = b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && !(b.buffer instanceof SharedArrayBuffer);
      return pool.run(task, own ? { name: 'parse', transferList: [b.buffer as ArrayBuffer] } : { name: 'parse' }) as Promise<ParseResult>;
    },
    render(task: RenderTask): Promise<RenderResult> {
      return pool.run(task, { name: 'render' }) as Promise<RenderResult>;
    },
    close(): Promise<void> {
      closed ??= pool.close();
      return closed;
    },
  };
}
