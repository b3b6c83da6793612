// Embedded adapter: PGlite (Postgres compiled to WASM) in a data directory, run in a thread of its
// own (pglite-thread.cjs) so that its statements never hold the service's event loop. PGlite is a
// single connection, so the thread runs one top-level statement, script, COPY or whole transaction
// at a time, in the order sent: a plain query can never land inside another caller's open
// transaction. One process per data directory: a lock
// file guards it (a second process opening the same directory corrupts it). The directory holds
// the database (key hashes, balances, stored responses): it is owner-only, 0700 with files 0600,
// whatever the process umask, and an existing one that others can reach is refused.

import { OperatorError } from '@svc/contracts';
import { spawn } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { Db, Queryable, Row } from './db.ts';
import { copyText } from './text.ts';

export class DataDirLockedError extends OperatorError {
  constructor(readonly dir: string, readonly pid: number) {
    super(`data directory ${dir} is in use by process ${pid}; stop it first (or use its admin socket)`);
  }
}

/** An existing data directory that group or others can read, write or enter. */
export class DataDirPermissionError extends OperatorError {
  constructor(readonly dir: string, readonly mode: number) {
    super(`data directory ${dir} has mode ${(mode & 0o7777).toString(8).padStart(4, '0')}, open to group or others; it holds the database, so it must be owner-only: chmod 700 ${dir}`);
  }
}

const OWNER_ONLY = ~0o077;

/**
 * Creates `dir` mode 0700 (parents too, when missing), or checks that an existing one is
 * owner-only. An explicit chmod, not the umask, decides the mode of what we create.
 */
function ownerOnlyDataDir(dir: string): void {
  mkdirSync(path.dirname(dir), { recursive: true, mode: 0o700 });
  try {
    mkdirSync(dir, { mode: 0o700 });
    chmodSync(dir, 0o700);
    return;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const st = statSync(dir);
  if (!st.isDirectory()) throw new Error(`data directory ${dir} exists and is not a directory`);
  if ((st.mode & 0o077) !== 0) throw new DataDirPermissionError(dir, st.mode);
}

/**
 * Takes group and other bits off every file and directory under `dir` (a tree written by an
 * earlier build, whose PGlite files were 0666; once the operator has made the data directory
 * 0700 it is safe to tighten what is inside).
 */
function tightenTree(dir: string): void {
  chmodSync(dir, statSync(dir).mode & 0o7777 & OWNER_ONLY);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) tightenTree(p);
    else if (e.isFile()) chmodSync(p, statSync(p).mode & 0o7777 & OWNER_ONLY);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the data directory's lock file (the directory exists: ownerOnlyDataDir made it), or throws DataDirLockedError naming the holder. */
function lockDataDir(dir: string): () => void {
  const file = path.join(dir, 'svc.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          unlinkSync(file);
        } catch {
          /* already gone */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(readFileSync(file, 'utf8'));
      if (pid && pid !== process.pid && alive(pid)) throw new DataDirLockedError(dir, pid);
      unlinkSync(file); // stale lock of a dead process
    }
  }
  throw new Error(`could not lock ${dir}`);
}

/**
 * Opens PGlite in `dataDir` (created 0700; an existing one must be owner-only, else
 * DataDirPermissionError), or in memory when it is undefined.
 */
export interface PgliteOptions {
  /**
   * A dump of a freshly initialised data directory (PGlite's dumpDataDir) to start from instead
   * of running initdb: tests open many fresh databases, and initdb is most of the cost.
   */
  template?: Blob;
  /**
   * How long a background operation (`copyIn` with `background`) lets the foreground operations
   * sent after it go first: 100 ms by default.
   */
  backgroundMaxWaitMs?: number;
}

/**
 * Postgres settings on top of PGlite's own start parameters. shared_buffers: Postgres-in-WASM
 * touches its whole buffer pool over a long job, and WebAssembly memory never shrinks, so the
 * default 128 MB pool stays in the process's RSS for good; pages beyond 32 MB come from the OS
 * page cache through the file system instead (bench/jobs/ingest.ts).
 */
const EXTRA_START_PARAMS = ['-c', 'shared_buffers=32MB', '-c', 'wal_buffers=1MB'];

/**
 * initdb of a new data directory, in a process of its own (pglite-initdb.cjs). initdb in WASM
 * grows its WebAssembly memory to ~750 MiB; run in this process's PGlite thread that memory stayed
 * in the RSS for the life of the process, and run in a thread of its own that then ended, the C
 * heap that thread grew (~30-60 MiB) still did (idle after a first start: 333-365 MiB, against
 * 302-303 for a directory initialised elsewhere). A process gives everything back when it exits.
 * The process writes through the owner-only file system; the tree is tightened once more
 * afterwards (the data directory around it is 0700 already).
 */
async function initdbInProcess(pgdata: string): Promise<void> {
  // Liftoff only, as in this process (compileWithLiftoffOnly): initdb is short, TurboFan's
  // compilations of it would be wasted work. No loader flags: the script is plain CommonJS.
  const child = spawn(process.execPath, ['--liftoff-only', fileURLToPath(new URL('./pglite-initdb.cjs', import.meta.url)), pgdata, JSON.stringify(EXTRA_START_PARAMS)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const code = await new Promise<number | null>((resolve, reject) => child.once('error', reject).once('close', (c) => resolve(c)));
  if (code !== 0) throw new Error(`initdb of ${pgdata} failed (exit ${code}): ${stderr.trim().slice(-2000)}`);
  tightenTree(pgdata);
}

/**
 * PGlite's 9 MB WebAssembly module compiled by Liftoff only, never tiered up by TurboFan: the
 * optimised copies of Postgres's hot functions cost ~100-120 MiB of RSS for the life of the
 * process (embedded service at idle: 426-450 MiB with tier-up, 325-338 without), and Postgres's
 * time here goes to the file system and the one-connection queue rather than to the code: a
 * quick measure put 200,000 inserts at +12% and 2,000 point selects at -15%. A V8 flag is
 * process-wide: it applies to WebAssembly compiled after it (PGlite's; undici's HTTP parser is
 * compiled earlier, at its first use).
 */
let liftoffOnly = false;
function compileWithLiftoffOnly(): void {
  if (liftoffOnly) return;
  liftoffOnly = true;
  v8.setFlagsFromString('--liftoff-only');
}

/** An error the PGlite thread sent back: its text and Postgres fields on an Error of this thread. */
interface WireError {
  message: string;
  name: string;
  [field: string]: unknown;
}

function fromWire(e: WireError): Error {
  const err = new Error(e.message);
  if (e.name && e.name !== 'Error') Object.defineProperty(err, 'name', { value: e.name, configurable: true, writable: true });
  for (const [k, v] of Object.entries(e)) if (k !== 'message' && k !== 'name') (err as unknown as Record<string, unknown>)[k] = v;
  return err;
}

type Reply = { id: number; error?: WireError; rows?: Row[]; tx?: number };

/**
 * The PGlite thread (pglite-thread.cjs) seen from here: each call posts one message and resolves
 * with its reply. The thread keeps the process alive only while a call is outstanding, so a
 * store nobody closed does not hold the process open (an idle PGlite in this thread did not
 * either). If the thread ends, every call outstanding and every later one fails with "PGlite is
 * closed" (a connection-class failure: the API answers 503, not 500).
 */
class PgliteThread {
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  #seq = 0;
  #gone: Error | undefined;
  #closing = false;
  readonly exited: Promise<void>;

  constructor(worker: Worker) {
    this.#worker = worker;
    worker.on('message', (m: Reply) => {
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      if (this.#pending.size === 0 && !this.#closing) worker.unref();
      if (m.error) p.reject(fromWire(m.error));
      else p.resolve(m);
    });
    this.exited = new Promise((resolve) => {
      let failure: unknown;
      worker.on('error', (err) => (failure = err));
      worker.once('exit', (code) => {
        const why = failure instanceof Error ? `: ${failure.message}` : code !== 0 ? ` (its thread exited with code ${code})` : '';
        this.#gone = new Error(`PGlite is closed${why}`);
        // Not asked to close: every store call fails from now on (503s); say why where operators look.
        if (!this.#closing) process.emitWarning(`the PGlite thread ended unexpectedly${why || ` (exit code ${code})`}`, { code: 'SVC_PGLITE_THREAD_EXIT' });
        for (const p of this.#pending.values()) p.reject(this.#gone);
        this.#pending.clear();
        resolve();
      });
    });
    worker.unref();
  }

  /** Closes the database and waits for the thread to end (holding the process open until it has). */
  async close(): Promise<void> {
    this.#closing = true;
    this.#worker.ref();
    try {
      await this.call({ op: 'close' });
    } finally {
      await this.exited;
    }
  }

  call(msg: Record<string, unknown>): Promise<Reply> {
    if (this.#gone) return Promise.reject(this.#gone);
    const id = ++this.#seq;
    return new Promise<Reply>((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...msg, id });
    });
  }
}

/** Starts the PGlite thread and waits until its database is open (or fails to open). */
async function startThread(pgdata: string | undefined, template: Blob | undefined, backgroundMaxWaitMs?: number): Promise<PgliteThread> {
  const buf = template ? await template.arrayBuffer() : undefined;
  const worker = new Worker(new URL('./pglite-thread.cjs', import.meta.url), {
    workerData: { pgdata, extraStartParams: EXTRA_START_PARAMS, template: buf, backgroundMaxWaitMs },
    ...(buf ? { transferList: [buf] } : {}),
    // The thread runs plain CommonJS: none of this process's loader flags (tsx's --import), only
    // --cpu-prof* when this process is being profiled (the thread then writes a profile too).
    execArgv: process.execArgv.filter((a) => a.startsWith('--cpu-prof')),
    // The thread's JavaScript holds rows only between a statement and the message that carries
    // them: a small young generation (4 MB) is enough, and V8's default (up to 16 MB per
    // semi-space) put the 500,000-address job's peak RSS at 506 MiB against 490 (bench/jobs/big-job.ts).
    resourceLimits: { maxYoungGenerationSizeMb: 4 },
  });
  let onMessage!: (m: { ready: boolean; error?: WireError }) => void;
  let onError!: (err: Error) => void;
  let onExit!: (code: number) => void;
  const ready = await new Promise<{ ready: boolean; error?: WireError }>((resolve, reject) => {
    onMessage = resolve;
    onError = reject;
    onExit = (code) => reject(new Error(`PGlite thread exited with code ${code} while opening`));
    worker.once('message', onMessage).once('error', onError).once('exit', onExit);
  }).finally(() => worker.off('message', onMessage).off('error', onError).off('exit', onExit));
  if (!ready.ready) {
    await worker.terminate();
    throw fromWire(ready.error ?? { message: 'PGlite failed to open', name: 'Error' });
  }
  return new PgliteThread(worker);
}

export async function openPglite(dataDir: string | undefined, opts: PgliteOptions = {}): Promise<Db> {
  compileWithLiftoffOnly();
  if (dataDir) ownerOnlyDataDir(dataDir);
  const unlock = dataDir ? lockDataDir(dataDir) : () => {};
  let thread: PgliteThread;
  try {
    let pgdata: string | undefined;
    if (dataDir) {
      pgdata = path.join(dataDir, 'pgdata');
      try {
        mkdirSync(pgdata, { mode: 0o700 });
        chmodSync(pgdata, 0o700);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        if ((statSync(pgdata).mode & 0o077) !== 0) tightenTree(pgdata);
      }
      if (!opts.template && !existsSync(path.join(pgdata, 'PG_VERSION'))) await initdbInProcess(pgdata);
    }
    thread = await startThread(pgdata, opts.template, opts.backgroundMaxWaitMs);
  } catch (err) {
    unlock();
    throw err;
  }
  // One connection: every top-level statement, script and transaction runs after the one before
  // has ended, so a plain query never lands inside another caller's open transaction. The thread
  // keeps that order (pglite-thread.cjs): each operation is posted at once and waits there.
  const query = async <T extends Row>(sql: string, params: unknown[] | undefined, tx?: number): Promise<T[]> =>
    (await thread.call({ op: 'query', sql, params, ...(tx === undefined ? {} : { tx }) })).rows as T[];
  let closed = false;
  return {
    kind: 'pglite',
    query: (sql, params) => query(sql, params),
    transaction: async (fn) => {
      const { tx } = await thread.call({ op: 'begin' });
      let out;
      try {
        out = await fn({ query: (sql, params) => query(sql, params, tx) });
      } catch (err) {
        await thread.call({ op: 'end', tx, commit: false }).catch(() => {});
        throw err;
      }
      await thread.call({ op: 'end', tx, commit: true });
      return out;
    },
    copyIn: async (table, columns, rows, opts) => {
      // A text a row, not one text: a COPY of 10 packs of decisions as one string (~250 KB) is a
      // large object for V8's heap at every write; a pack's text (~25 KB) is not.
      const sql = `COPY ${table} (${columns.join(', ')}) FROM '/dev/blob'`;
      await thread.call({ op: 'copy', sql, text: rows.map((r) => copyText([r])), ...(opts?.background && { background: true, sentAt: Date.now() }) });
    },
    exec: async (sql) => void (await thread.call({ op: 'exec', sql })),
    close: async () => {
      if (closed) return;
      closed = true;
      try {
        await thread.close();
      } finally {
        unlock();
      }
    },
  };
}
