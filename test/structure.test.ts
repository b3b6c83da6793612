// The layering of the packages (docs/architecture.md), as a test:
// - packages import each other one way (the ALLOWED table): contracts at the bottom, bus and egress
//   on it alone, verifier ← store ← outcomes ← billing ← jobs (and enrich beside it) ← mcp ← api above, engine on
//   verifier, admin on jobs, and runtime composes them; runtime is imported only by entry points (cluster/, test/, bench/),
//   so api receives its services and settings and never reads the environment;
// - across packages only through the entries a package exports (no `./*` wildcards, no deep
//   `src/` paths, no relative paths into another package), and every @svc package a package
//   imports is declared in its package.json;
// - no import circles between source files;
// - only entry points read process.env;
// - only @svc/bus speaks kafkajs (the rest asks the bus: its ping, its topics, kafkaAdmin).

import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { packageOf, specifiers } from './helpers/imports.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const PKGS = path.join(ROOT, 'packages');

/** What each package may import (besides itself), lowest layer first (docs/architecture.md). */
const ALLOWED: Record<string, string[]> = {
  contracts: [],
  // The job transport (Bus, Scheduler) and its adapters: infrastructure, below the domain.
  bus: ['contracts'],
  // Outbound HTTP safety (the SSRF guard), for whatever connects where a customer says (today: job webhooks).
  egress: ['contracts'],
  verifier: ['contracts'],
  engine: ['contracts', 'verifier'],
  store: ['contracts', 'verifier'],
  // Account administration (keys, users, passwords, sessions): the admin CLI's and the dashboard's use cases.
  accounts: ['contracts', 'store'],
  outcomes: ['contracts', 'verifier', 'store'],
  billing: ['contracts', 'verifier', 'store', 'outcomes'],
  jobs: ['contracts', 'bus', 'egress', 'verifier', 'store', 'outcomes', 'billing'],
  // Data endpoints (providers, the finder, company enrichment, their caches and charges): beside jobs.
  enrich: ['contracts', 'egress', 'verifier', 'store', 'outcomes', 'billing'],
  // The web dashboard's API over the accounts use cases and billing's (the REST use cases come in through options); runtime mounts it.
  dashboard: ['contracts', 'store', 'accounts', 'billing'],
  mcp: ['contracts', 'bus', 'egress', 'verifier', 'store', 'outcomes', 'billing', 'jobs', 'enrich'],
  api: ['contracts', 'bus', 'egress', 'verifier', 'store', 'outcomes', 'billing', 'jobs', 'enrich', 'mcp'],
  runtime: ['contracts', 'bus', 'egress', 'verifier', 'engine', 'store', 'accounts', 'outcomes', 'billing', 'jobs', 'enrich', 'mcp', 'api', 'admin', 'dashboard'],
  // The operator CLI runs use cases over the store; runtime serves it on the admin socket.
  admin: ['contracts', 'bus', 'egress', 'verifier', 'store', 'accounts', 'outcomes', 'billing', 'jobs'],
  // The official client stands alone (fetch only); the CLI is built on it.
  client: [],
  cli: ['client'],
};

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.name === 'node_modules') return [];
    if (e.isDirectory()) return tsFiles(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

const rel = (p: string): string => path.relative(ROOT, p).split(path.sep).join('/');
const packages = readdirSync(PKGS).filter((d) => statSync(path.join(PKGS, d)).isDirectory());
const manifest = (pkg: string): { name: string; exports: Record<string, string>; dependencies?: Record<string, string> } =>
  JSON.parse(readFileSync(path.join(PKGS, pkg, 'package.json'), 'utf8'));

/** `@svc/<pkg>[/<entry>]` → [pkg, './entry' or '.']. */
function svcTarget(spec: string): [string, string] | undefined {
  const m = /^@svc\/([a-z-]+)(\/.*)?$/.exec(spec);
  return m ? [m[1]!, m[2] ? `.${m[2]}` : '.'] : undefined;
}

/** Which package a file belongs to ('' for entry points and tests outside packages/). */
function packageOfFile(file: string): string {
  const r = rel(file);
  return r.startsWith('packages/') ? r.split('/')[1]! : '';
}

t.test('every package is in the layering table and exports named entries only', async (t) => {
  t.strictSame([...packages].sort(), Object.keys(ALLOWED).sort(), 'packages/ holds exactly the layered packages');
  for (const pkg of packages) {
    const m = manifest(pkg);
    t.equal(m.name, `@svc/${pkg}`, `${pkg}: name`);
    for (const [entry, target] of Object.entries(m.exports)) {
      t.notOk(entry.includes('*') || target.includes('*'), `${pkg}: export ${entry} is not a wildcard`);
      t.ok(statSync(path.join(PKGS, pkg, target)).isFile(), `${pkg}: export ${entry} → ${target} exists`);
    }
  }
});

// Every import of every source file, test and entry point in the repository.
const files = [...tsFiles(PKGS), ...tsFiles(path.join(ROOT, 'test')), ...tsFiles(path.join(ROOT, 'bench')), ...tsFiles(path.join(ROOT, 'cluster'))];
const imports = files.map((file) => ({ file, from: packageOfFile(file), isSrc: /^packages\/[^/]+\/src\//.test(rel(file)), specs: specifiers(readFileSync(file, 'utf8')) }));

t.test('packages import each other one way, through their exported entries', async (t) => {
  let svcImports = 0;
  for (const { file, from, isSrc, specs } of imports) {
    for (const spec of specs) {
      const target = svcTarget(spec);
      if (target) {
        svcImports++;
        const [pkg, entry] = target;
        t.ok(packages.includes(pkg), `${rel(file)}: ${spec} names a package`);
        t.ok(Object.hasOwn(manifest(pkg).exports, entry), `${rel(file)}: ${spec} is an exported entry of @svc/${pkg}`);
        if (from && isSrc && pkg !== from) {
          t.ok(ALLOWED[from]!.includes(pkg), `${rel(file)}: @svc/${from} may import @svc/${pkg}`);
          t.ok(manifest(from).dependencies?.[`@svc/${pkg}`], `${rel(file)}: @svc/${pkg} is declared in ${from}/package.json`);
        }
        if (pkg === 'runtime') t.ok(from === '' || from === 'runtime', `${rel(file)}: only entry points import @svc/runtime`);
      } else if (spec.startsWith('.')) {
        // A relative import never leaves its package, and outside packages never reaches into one.
        const resolved = rel(path.resolve(path.dirname(file), spec));
        const into = resolved.startsWith('packages/') ? resolved.split('/')[1]! : '';
        if (from && resolved.startsWith('test/helpers/') && !isSrc) continue; // shared test helpers
        if (from) t.equal(into, from, `${rel(file)}: ${spec} stays inside @svc/${from}`);
        else t.equal(into, '', `${rel(file)}: ${spec} does not reach into packages/ (use the package entry)`);
      }
    }
  }
  t.ok(svcImports > 30, `the scan saw the cross-package imports (${svcImports})`);
});

t.test('no import circles between source files', async (t) => {
  const graph = new Map<string, string[]>();
  const srcFiles = new Set(tsFiles(PKGS).filter((f) => /\/src\//.test(rel(f))));
  const entryFile = (spec: string): string | undefined => {
    const target = svcTarget(spec);
    if (!target) return undefined;
    const to = manifest(target[0]).exports[target[1]];
    return to ? path.join(PKGS, target[0], to) : undefined;
  };
  for (const { file, specs } of imports) {
    if (!srcFiles.has(file)) continue;
    const out: string[] = [];
    for (const spec of specs) {
      const to = spec.startsWith('.') ? path.resolve(path.dirname(file), spec) : entryFile(spec);
      if (to && srcFiles.has(to)) out.push(to);
    }
    graph.set(file, out);
  }
  const state = new Map<string, 'open' | 'done'>();
  const cycles: string[] = [];
  const visit = (f: string, trail: string[]): void => {
    if (state.get(f) === 'done') return;
    if (state.get(f) === 'open') {
      cycles.push([...trail.slice(trail.indexOf(f)), f].map(rel).join(' → '));
      return;
    }
    state.set(f, 'open');
    for (const g of graph.get(f) ?? []) visit(g, [...trail, f]);
    state.set(f, 'done');
  };
  for (const f of graph.keys()) visit(f, []);
  t.ok(graph.size > 40, `the graph has every source file (${graph.size})`);
  t.strictSame(cycles, [], 'no cycles');
});

t.test('only entry points read process.env', async (t) => {
  for (const file of tsFiles(PKGS).filter((f) => /\/src\//.test(rel(f)))) {
    const code = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
    t.notOk(/\bprocess\.env\b/.test(code), `${rel(file)} does not read process.env`);
  }
});

t.test('only packages/bus imports kafkajs', async (t) => {
  // The verifier's purity test names kafkajs in a source text it scans (a fixture, not an import).
  const fixtures = new Set(['packages/verifier/test/purity.test.ts']);
  let seen = 0;
  for (const { file, specs } of imports) {
    if (fixtures.has(rel(file))) continue;
    for (const spec of specs) {
      if (packageOf(spec) !== 'kafkajs') continue;
      seen++;
      t.ok(rel(file).startsWith('packages/bus/'), `${rel(file)} imports kafkajs: only packages/bus may (ask @svc/bus instead)`);
    }
  }
  t.ok(seen > 0, `the scan saw the kafkajs imports of packages/bus (${seen})`);
});

// Citations a reader of a clone can follow (test/helpers/citations.ts): no comment, test or
// document cites a file that is not in the repository (a design or style document, the
// specification, its sections, an issue number), and every relative Markdown link and repository
// path names a file that exists. Each problem is reported as file:line.
t.test('every citation names a file of this repository', async (t) => {
  const { citationProblems } = await import('./helpers/citations.ts');
  const problems = citationProblems(ROOT, { skip: ['test/helpers/citations.ts'] });
  // One failure per problem, so that each names its file and line.
  for (const p of problems) t.fail(p);
  if (problems.length === 0) t.pass('no citation of a file outside the repository, no broken link');
});
