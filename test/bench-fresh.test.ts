// bench/RESULTS.md must describe the code it names: the revision of its last full `npm run bench`
// has the same source (packages without their tests, bench without its results and notes, the
// sim the benches run against, the dependencies) as the checkout under test. A change to measured
// code after the last full run fails here until the bench is run again (bench/README.md).

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** What the figures depend on. Tests, docs and the results themselves may change after a run. */
export const MEASURED = [
  'packages',
  ':(exclude,glob)packages/*/test/**',
  ':(exclude,glob)packages/**/*.md',
  'bench',
  ':(exclude)bench/RESULTS.md',
  ':(exclude)bench/README.md',
  'test/sim',
  ':(exclude,glob)test/sim/*.test.ts',
  ':(exclude)test/sim/README.md',
  'package.json',
  'package-lock.json',
];

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

function gitState(): 'ok' | string {
  try {
    if (git('rev-parse', '--is-inside-work-tree') !== 'true') return 'not a git checkout';
    if (git('rev-parse', '--is-shallow-repository') === 'true') return 'a shallow clone (the named revision may be missing)';
    return 'ok';
  } catch {
    return 'git is not available here';
  }
}

const state = gitState();
t.test('bench/RESULTS.md was written by a full run at a revision with the same measured code as this checkout', { skip: state === 'ok' ? false : state }, async (t) => {
  const results = readFileSync(path.join(ROOT, 'bench/RESULTS.md'), 'utf8');
  const m = /^- Revision: (\S+)(.*)$/m.exec(results);
  t.ok(m, 'RESULTS.md names its revision');
  if (!m) return;
  const [, rev, rest] = m;
  t.equal(rest!.trim(), '', `the run was made on committed code (RESULTS.md says: ${rev}${rest})`);
  let known = true;
  try {
    git('cat-file', '-e', `${rev}^{commit}`);
  } catch {
    known = false;
  }
  t.ok(known, `revision ${rev} is in this repository's history`);
  if (!known) return;
  const changed = git('diff', '--name-only', rev!, 'HEAD', '--', ...MEASURED).split('\n').filter(Boolean);
  t.strictSame(changed, [], `measured code changed since the last full bench at ${rev}: run \`npm run bench\` again (changed: ${changed.slice(0, 20).join(', ')})`);
});
