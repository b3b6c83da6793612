// Citations a reader of the repository cannot follow: a comment or a document that cites a file
// which is not in the repository (the design and style documents, the specification and its
// section numbers, issue numbers), or a relative Markdown link or repository path that names a
// file which does not exist. Used by test/structure.test.ts; each problem is `file:line: what`.

import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Citations of documents outside the repository, each with what to say instead. */
const OUTSIDE: Array<[RegExp, string]> = [
  [/\bDESIGN\b/, 'DESIGN (a design document outside the repository)'],
  [/\bSTYLE(?:\.md\b|\s+\d)/, 'STYLE (a style guide outside the repository)'],
  [/(?:^|[\s(`'"])(?:shared\/)?spec\/|\bcore\.md\b|\boutcomes-and-data\.md\b/, 'the specification (outside the repository)'],
  [/\b[Ss]pec(?:ification)?(?: core| outcomes)? \d/, 'a section of the specification (outside the repository)'],
  [/§/, 'a section number (§) of a document outside the repository'],
  [/\b[Ii]ssues? \d+/, 'an issue number'],
  [/(?:\(|\b(?:see|PR|issue|fixes|closes) )#\d+\b(?!\.\d)/, 'an issue reference (#n)'],
];

/** Sections of public standards, which any reader can look up: "RFC 6749 §4.1.2, §4.3.1", "OAuth 2.1 §4.1.3". */
const STANDARD_SECTIONS = /\b(?:RFC \d{3,5}|OAuth 2\.1)(?: section)? §\s?[\d.]+(?:(?:,| and| or|\/) §\s?[\d.]+)*/g;

/** The first folder of a repository path as the repository spells it. */
const REPO_PATH = /(?<![\w./-])((?:docs|packages|test|bench|cluster|scripts|infra|\.ci)\/[\w.@-]+(?:\/[\w.@-]+)*\.(?:md|ts|mts|js|mjs|sh|sql|csv|json))\b/g;

/** Every file under `dir` (relative to `root`), without dependencies, builds and data. */
function walk(root: string, dir = ''): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const p = dir ? `${dir}/${e.name}` : e.name;
    if (e.isDirectory()) return ['node_modules', 'dist', '.git', 'data', 'data-sim'].includes(e.name) ? [] : walk(root, p);
    return [p];
  });
}

/** The repository's files: git's list (tracked and new, not ignored), else a walk of the tree. */
function trackedFiles(root: string): string[] {
  let files: string[];
  try {
    files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\0');
  } catch {
    files = walk(root);
  }
  return files
    .filter((f) => f !== '')
    .filter((f) => /\.(?:ts|md|sh)$/.test(f) || f === '.ci/run')
    .filter((f) => !/(?:^|\/)(?:node_modules|dist)\//.test(f))
    .filter((f) => existsSync(path.join(root, f)));
}

/** Whether `p`, named in `file`, is a file of the repository: from the root, the file's package or the file's folder. */
function exists(root: string, file: string, p: string): boolean {
  const pkg = /^packages\/[^/]+\//.exec(file)?.[0] ?? '';
  return [path.join(root, p), path.join(root, pkg, p), path.join(root, path.dirname(file), p)].some((c) => existsSync(c));
}

export interface CitationOptions {
  /** Files (relative to the root) not checked: this check's own sources, which name the patterns. */
  skip?: readonly string[];
}

export function citationProblems(root: string, opts: CitationOptions = {}): string[] {
  const problems = new Set<string>();
  const skip = new Set(opts.skip ?? []);
  for (const file of trackedFiles(root)) {
    if (skip.has(file)) continue;
    const text = readFileSync(path.join(root, file), 'utf8');
    const md = file.endsWith('.md');
    let fenced = false;
    text.split('\n').forEach((line, i) => {
      const at = `${file}:${i + 1}`;
      if (md && /^\s*```/.test(line)) fenced = !fenced;
      const plain = line.replace(STANDARD_SECTIONS, '');
      for (const [re, what] of OUTSIDE) if (re.test(plain)) problems.add(`${at}: cites ${what}: ${line.trim().slice(0, 160)}`);
      if (md && !fenced) {
        // Relative Markdown links: [text](path#anchor), checked without the anchor.
        for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
          const target = m[1]!;
          if (/^(?:[a-z][a-z0-9+.-]*:|#|\/)/i.test(target)) continue;
          const p = decodeURI(target.split('#')[0]!);
          if (p && !existsSync(path.join(root, path.dirname(file), p))) problems.add(`${at}: links to ${target}, which is not in the repository`);
        }
      }
      // Repository paths, backticked or not (docs/foo.md, packages/x/src/y.ts).
      // (A Markdown link's target is checked above, from the file's folder.)
      for (const m of (md ? line.replace(/\]\([^)\s]+\)/g, ']') : line).matchAll(REPO_PATH)) {
        const p = m[1]!;
        if (!exists(root, file, p)) problems.add(`${at}: names ${p}, which is not in the repository`);
      }
    });
  }
  return [...problems];
}
