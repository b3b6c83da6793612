// The PGlite data directory is owner-only whatever the umask: created 0700 with every file PGlite
// writes 0600 (initdb's, and the relation files created after open), and an existing directory
// that group or others can reach is refused with DataDirPermissionError.

import t from 'tap';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DataDirPermissionError, migrate, openPglite } from '../src/index.ts';

const mode = (p: string): number => statSync(p).mode & 0o7777;

/** Every entry under `dir` (itself included) grouped by kind and octal mode: { 'd700': 12, 'f600': 900 }. */
function modes(dir: string): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (p: string, kind: 'd' | 'f') => {
    const k = `${kind}${mode(p).toString(8)}`;
    out[k] = (out[k] ?? 0) + 1;
  };
  const walk = (d: string) => {
    add(d, 'd');
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else add(p, 'f');
    }
  };
  walk(dir);
  return out;
}

const ownerOnly = (m: Record<string, number>): string[] => Object.keys(m).filter((k) => k !== 'd700' && k !== 'f600');

/** Runs fn under `mask`, restoring the process umask afterwards. */
async function withUmask<T>(mask: number, fn: () => Promise<T>): Promise<T> {
  const old = process.umask(mask);
  try {
    return await fn();
  } finally {
    process.umask(old);
  }
}

const root = mkdtempSync(path.join(tmpdir(), 'svc-pglite-perm-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));

const fresh = (umask: number) => path.join(root, `umask-${umask.toString(8)}`, 'nested', 'data');

// The most permissive umask there is: what holds under it holds under any (one initdb: a few seconds).
for (const umask of [0o000]) {
  t.test(`a fresh data directory under umask ${umask.toString(8).padStart(4, '0')} is 0700 with files 0600`, async (t) => {
    const dir = fresh(umask);
    const db = await withUmask(umask, async () => {
      const db = await openPglite(dir);
      await migrate(db); // relation files created after open, still under the loose umask
      return db;
    });
    try {
      t.equal(mode(dir), 0o700, 'data directory');
      t.equal(mode(path.dirname(dir)), 0o700, 'a missing parent it created');
      t.equal(mode(path.join(dir, 'pgdata')), 0o700, 'pgdata');
      t.equal(mode(path.join(dir, 'svc.lock')), 0o600, 'lock file');
    } finally {
      await db.close();
    }
    t.equal(existsSync(path.join(dir, 'svc.lock')), false, 'lock file removed at close');
    const m = modes(dir);
    t.strictSame(ownerOnly(m), [], 'every directory 0700 and every file 0600');
    t.ok(m.d700! > 10 && m.f600! > 500, `the walk saw PGlite's tree (${m.d700} directories, ${m.f600} files)`);
  });
}

t.test('an existing 0700 data directory opens; a tree left loose by an earlier build is tightened', async (t) => {
  const dir = fresh(0o000); // written by the test above
  t.equal(mode(dir), 0o700);
  const pgdata = path.join(dir, 'pgdata');
  // What an earlier build left: pgdata 0755 and PGlite's files 0666 (the operator has since run chmod 700 on the data directory).
  chmodSync(pgdata, 0o755);
  chmodSync(path.join(pgdata, 'PG_VERSION'), 0o666);
  chmodSync(path.join(pgdata, 'base'), 0o755);
  const db = await withUmask(0o022, () => openPglite(dir));
  try {
    t.strictSame(await migrate(db), [], 'the same database: nothing left to migrate');
    t.strictSame(await db.query('SELECT count(*)::int AS n FROM accounts'), [{ n: 0 }], 'and it answers');
  } finally {
    await db.close();
  }
  t.strictSame(ownerOnly(modes(dir)), [], 'pgdata and everything in it owner-only again');
});

t.test('an existing data directory open to group or others is refused', async (t) => {
  for (const loose of [0o755, 0o750, 0o701, 0o707, 0o770]) {
    const dir = path.join(root, `loose-${loose.toString(8)}`);
    mkdirSync(dir);
    chmodSync(dir, loose);
    const err = await openPglite(dir).then(
      () => undefined,
      (e: unknown) => e,
    );
    t.ok(err instanceof DataDirPermissionError, `0${loose.toString(8)}: DataDirPermissionError`);
    t.equal(
      (err as Error).message,
      `data directory ${dir} has mode 0${loose.toString(8)}, open to group or others; it holds the database, so it must be owner-only: chmod 700 ${dir}`,
      'the message names the directory, its mode and the fix',
    );
    t.strictSame([(err as DataDirPermissionError).dir, (err as DataDirPermissionError).mode & 0o7777], [dir, loose]);
    t.strictSame(readdirSync(dir), [], 'nothing written into it (no lock file, no pgdata)');
    t.equal(mode(dir), loose, 'its mode is left as the operator set it');
  }
  const file = path.join(root, 'a-file');
  writeFileSync(file, '');
  await t.rejects(openPglite(file), { message: `data directory ${file} exists and is not a directory` }, 'a file in its place');
});
