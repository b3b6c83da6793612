// Embedded adapter: PGlite (Postgres compiled to WASM) in a data directory. PGlite is a single
// connection, so every top-level query and transaction runs under one mutex: a plain query can
// never land inside another caller's open transaction. One process per data directory: a lock
// file guards it (a second process opening the same directory corrupts it). The directory holds
// the database (key hashes, balances, stored responses): it is owner-only, 0700 with files 0600,
// whatever the process umask, and an existing one that others can reach is refused.

import { OperatorError } from '@svc/contracts';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import v8 from 'node:v8';
import { Worker } from 'node:worker_threads';
import { PGlite, types } from '@electric-sql/pglite';
import { NodeFS } from '@electric-sql/pglite/nodefs';
import type { Db, Queryable, Row } from './db.ts';

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

/**
 * PGlite's Node filesystem with owner-only modes. Postgres-in-WASM creates its files through
 * Emscripten's NODEFS, which chmods each new file to the mode Postgres asked for (0666 in this
 * build) and makes directories with the host umask: neither honours a 0077 umask. Masking the
 * mode in NODEFS's two mode-setting operations (mknod, and the setattr behind chmod/fchmod)
 * covers initdb's files and every relation and WAL file created later. If an upgrade of PGlite
 * moves them, opening fails here rather than writing world-readable files.
 */
class OwnerOnlyNodeFS extends NodeFS {
  override async init(pg: PGlite, opts: Parameters<NodeFS['init']>[1]): ReturnType<NodeFS['init']> {
    const out = await super.init(pg, opts);
    const restrict = (mod: { NODEFS: unknown }): void => {
      const nodefs = mod.NODEFS as {
        node_ops?: { mknod?: (parent: unknown, name: string, mode: number, dev: number) => unknown };
        doSetAttr?: (arg: unknown, node: unknown, attr: { mode?: number }, ...rest: unknown[]) => unknown;
      };
      const mknod = nodefs.node_ops?.mknod;
      const doSetAttr = nodefs.doSetAttr;
      if (typeof mknod !== 'function' || typeof doSetAttr !== 'function') throw new Error('PGlite NODEFS has no mknod/doSetAttr: cannot keep the data directory owner-only');
      nodefs.node_ops!.mknod = (parent, name, mode, dev) => mknod(parent, name, mode & OWNER_ONLY, dev);
      nodefs.doSetAttr = (arg, node, attr, ...rest) => doSetAttr(arg, node, attr.mode === undefined ? attr : { ...attr, mode: attr.mode & OWNER_ONLY }, ...rest);
    };
    // Before NodeFS's own preRun mounts the directory.
    out.emscriptenOpts.preRun = [restrict, ...(out.emscriptenOpts.preRun ?? [])];
    return out;
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
}

/**
 * Postgres settings on top of PGlite's own start parameters. shared_buffers: Postgres-in-WASM
 * touches its whole buffer pool over a long job, and WebAssembly memory never shrinks, so the
 * default 128 MB pool stays in the process's RSS for good; pages beyond 32 MB come from the OS
 * page cache through the file system instead (bench/jobs/ingest.ts).
 */
const START_PARAMS = [...PGlite.defaultStartParams, '-c', 'shared_buffers=32MB', '-c', 'wal_buffers=1MB'];

/**
 * initdb of a new data directory, in a worker thread that then exits. initdb in WASM grows its
 * WebAssembly memory to ~750 MiB and that memory is never given back while its isolate lives: run
 * in the service's own thread it would stay in the RSS for the life of the process (measured: 750
 * MiB after initdb in-process; 230 MiB after the worker has gone, ~330 once the database is open
 * here). The worker is plain CommonJS (PGlite's CJS build), so it needs no TypeScript loader; it
 * writes through PGlite's own NodeFS, and the caller makes the new files owner-only afterwards
 * (the data directory around them is 0700 already, so nobody else can reach them meanwhile).
 */
const INITDB_WORKER = `
const { workerData } = require('node:worker_threads');
const { PGlite } = require(workerData.pglite);
const { NodeFS } = require(workerData.nodefs);
(async () => {
  const pg = new PGlite({ fs: new NodeFS(workerData.pgdata), startParams: workerData.startParams });
  await pg.waitReady;
  await pg.close();
})().catch((err) => { process.exitCode = 1; throw err; });
`;

async function initdbInWorker(pgdata: string): Promise<void> {
  const require = createRequire(import.meta.url);
  const data = { pgdata, startParams: START_PARAMS, pglite: require.resolve('@electric-sql/pglite'), nodefs: require.resolve('@electric-sql/pglite/nodefs') };
  await new Promise<void>((resolve, reject) => {
    const worker = new Worker(INITDB_WORKER, { eval: true, workerData: data });
    let failed: unknown;
    worker.once('error', (err) => (failed = err));
    worker.once('exit', (code) => {
      if (failed !== undefined) reject(failed instanceof Error ? failed : new Error(String(failed)));
      else if (code !== 0) reject(new Error(`PGlite initdb worker exited with code ${code}`));
      else resolve();
    });
  });
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

export async function openPglite(dataDir: string | undefined, opts: PgliteOptions = {}): Promise<Db> {
  compileWithLiftoffOnly();
  if (dataDir) ownerOnlyDataDir(dataDir);
  const unlock = dataDir ? lockDataDir(dataDir) : () => {};
  // numeric (1700) comes back as a string by default: parse it to a number like the pg adapter does.
  const parsers = { [types.NUMERIC]: (v: string) => Number(v) };
  let pg: PGlite;
  try {
    if (dataDir) {
      const pgdata = path.join(dataDir, 'pgdata');
      try {
        mkdirSync(pgdata, { mode: 0o700 });
        chmodSync(pgdata, 0o700);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        if ((statSync(pgdata).mode & 0o077) !== 0) tightenTree(pgdata);
      }
      if (!opts.template && !existsSync(path.join(pgdata, 'PG_VERSION'))) await initdbInWorker(pgdata);
      pg = new PGlite({ fs: new OwnerOnlyNodeFS(pgdata), parsers, startParams: START_PARAMS, ...(opts.template ? { loadDataDir: opts.template } : {}) });
    } else {
      pg = new PGlite({ parsers, startParams: START_PARAMS, ...(opts.template ? { loadDataDir: opts.template } : {}) });
    }
    await pg.waitReady;
  } catch (err) {
    unlock();
    throw err;
  }
  let chain: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = chain.then(fn, fn);
    chain = run.catch(() => undefined);
    return run;
  };
  const q = (target: Pick<PGlite, 'query'>): Queryable['query'] =>
    async <T extends Row>(sql: string, params?: unknown[]) => (await target.query<T>(sql, params)).rows;
  return {
    kind: 'pglite',
    query: (sql, params) => exclusive(() => q(pg)(sql, params)),
    transaction: (fn) => exclusive(() => pg.transaction((tx) => fn({ query: q(tx) }))),
    // A script that fails after its own BEGIN leaves the one connection in an aborted transaction;
    // roll it back before anyone else's query runs (the pg adapter drops a failed connection).
    exec: (sql) =>
      exclusive(async () => {
        try {
          await pg.exec(sql);
        } catch (err) {
          if (pg.isInTransaction()) await pg.exec('ROLLBACK').catch(() => {});
          throw err;
        }
      }),
    close: () =>
      exclusive(async () => {
        await pg.close();
        unlock();
      }),
  };
}
