// The documentation's examples are part of the product: every `curl` in README.md (its tour) and
// in docs/api.md (the API walk-through) runs, in the order a newcomer meets them, against a fresh
// service on the simulated internet (one per document) with the document's own bootstrap key and
// default credits, and its answer must be the one the document shows (figures included). In
// them, `"…"` stands for any string, `"acc_…"` for any string with that prefix, and
// `["…text…"]` for any array.

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { runAdmin } from '@svc/admin';
import { CLUSTER_PROFILE, startStack } from '../helpers/stack.ts';
import { PDL_STANDIN_KEY, startPdlStandin } from '../helpers/pdl-standin.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const apiDoc = readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8');

interface Example {
  command: string;
  expected: string;
  line: number;
  /** `NAME=$(curl …)`: the command's output becomes $NAME for the examples after it (nothing is shown). */
  assign?: string;
  /** `npm run admin -- …` in a block of curl examples: an operator command, run against the service's store; it must succeed (nothing is shown). */
  admin?: string[];
}

/** The curl examples of a document with the answer shown after each (a `# …` comment or the next ```json block). */
function examples(text: string, file: string): Example[] {
  const blocks = [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, body: m[2]!, line: text.slice(0, m.index).split('\n').length + 1 }));
  const out: Example[] = [];
  blocks.forEach((b, i) => {
    if (b.lang !== 'sh') return;
    const lines = b.body.replace(/\\\n\s*/g, ' ').split('\n');
    for (let j = 0; j < lines.length; j++) {
      const cmd = lines[j]!.trim();
      const assignment = /^([A-Z][A-Z0-9_]*)=\$\((curl .*)\)$/.exec(cmd);
      if (assignment) {
        out.push({ command: assignment[2]!, expected: '', line: b.line, assign: assignment[1]! });
        continue;
      }
      // Among curl examples (not the Admin CLI section's reference lines).
      // (`SVC_DATA_DIR=… npm run admin -- …`: the walk-through's data directory; here the stack's store.)
      const admin = /^(?:SVC_DATA_DIR=\S+ )?npm run admin -- (.+)$/.exec(cmd);
      if (admin && lines.some((l) => /^\s*(?:[A-Z][A-Z0-9_]*=\$\()?curl /.test(l))) {
        out.push({ command: cmd, expected: '', line: b.line, admin: admin[1]!.split(/\s+/) });
        continue;
      }
      if (!cmd.startsWith('curl ')) continue;
      const comments: string[] = [];
      while (lines[j + 1]?.startsWith('# ')) comments.push(lines[++j]!.slice(2));
      const next = blocks[i + 1];
      const expected = comments.length > 0 ? comments.join('\n') : next?.lang === 'json' && j === lines.length - 2 ? next.body : undefined;
      if (expected === undefined) throw new Error(`${file} line ${b.line}: no answer shown for ${cmd}`);
      out.push({ command: cmd, expected, line: b.line });
    }
  });
  return out;
}

/** Whether `actual` is what the README shows, with its placeholders. */
function matches(expected: unknown, actual: unknown, at = '$'): string | undefined {
  if (typeof expected === 'string' && expected.includes('…')) {
    // A bare "…" stands for any string or number (an id, a latency).
    if (expected === '…') return typeof actual === 'string' || typeof actual === 'number' ? undefined : `${at}: want a string or a number`;
    return typeof actual === 'string' && actual.startsWith(expected.slice(0, expected.indexOf('…'))) ? undefined : `${at}: ${JSON.stringify(actual)} does not start like ${expected}`;
  }
  if (Array.isArray(expected)) {
    if (expected.length === 1 && typeof expected[0] === 'string' && expected[0].startsWith('…')) return Array.isArray(actual) ? undefined : `${at}: want an array`;
    if (!Array.isArray(actual) || actual.length !== expected.length) return `${at}: ${JSON.stringify(actual)} is not ${JSON.stringify(expected)}`;
    for (let i = 0; i < expected.length; i++) {
      const bad = matches(expected[i], actual[i], `${at}[${i}]`);
      if (bad) return bad;
    }
    return undefined;
  }
  if (expected && typeof expected === 'object') {
    if (!actual || typeof actual !== 'object' || Array.isArray(actual)) return `${at}: want an object`;
    const want = Object.keys(expected).sort();
    const got = Object.keys(actual).sort();
    if (JSON.stringify(want) !== JSON.stringify(got)) return `${at}: fields ${got.join(',')} are not ${want.join(',')}`;
    for (const k of want) {
      const bad = matches((expected as Record<string, unknown>)[k], (actual as Record<string, unknown>)[k], `${at}.${k}`);
      if (bad) return bad;
    }
    return undefined;
  }
  return Object.is(expected, actual) ? undefined : `${at}: ${JSON.stringify(actual)} is not ${JSON.stringify(expected)}`;
}

const key = /^export KEY=(\S+)$/m.exec(readme)?.[1];
const docs = [
  { file: 'README.md', text: readme },
  { file: 'docs/api.md', text: apiDoc },
].map((d) => ({ ...d, key: /^export KEY=(\S+)$/m.exec(d.text)?.[1], list: examples(d.text, d.file) }));
const apiList = docs[1]!.list;

t.test('the README and docs/api.md name their key, and docs/api.md has examples of every endpoint family', async (t) => {
  t.equal(key, 'svc_test_0123456789abcdef');
  for (const d of docs) t.equal(d.key, key, `${d.file} uses the README's key`);
  const routes = new Set(apiList.map((e) => /localhost:8080(\/[a-z0-9/-]*)/.exec(e.command)?.[1]));
  for (const r of ['/v1/validate', '/v1/validate/bulk', '/v1/validate/batch', '/v1/csv/jobs', '/v1/csv/prepare-upload', '/v1/csv/start-processing', '/v1/credits', '/health', '/live', '/ready']) t.ok(routes.has(r), `an example of ${r}`);
  t.ok(docs[0]!.list.length >= 3, `the README's tour has examples (${docs[0]!.list.length})`);
});

t.test('the README\'s test commands are the ones CI runs, in its order', async (t) => {
  const block = /^## Run it, test it\n+```sh\n([\s\S]*?)^```$/m.exec(readme)?.[1] ?? '';
  const commands = block
    .split('\n')
    .map((l) => l.replace(/#.*$/, '').trim())
    .filter((l) => /^npm (test|run test:)/.test(l));
  t.strictSame(commands, ['npm test', 'npm run test:cluster'], 'the embedded pass, then the cluster pass');
  const ci = readFileSync(path.join(ROOT, '.ci/run'), 'utf8');
  const ran = [...ci.matchAll(/^(npm (?:test|run test:\S+))\b.*$/gm)].map((m) => m[1]);
  t.strictSame(ran, commands, '.ci/run runs exactly these');
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  t.equal(pkg.scripts['test:cluster'], 'bash scripts/test-cluster.sh');
});

for (const doc of docs) t.test(`every curl example of ${doc.file} answers what it shows`, async (t) => {
  // The service as the document starts it: its bootstrap key and the default 100 credits.
  // Signed URLs name the public URL a reader has (the service listens elsewhere here).
  // As the documents' set-up has it: the sim's websites on loopback (outbound HTTP may reach it),
  // and its People Data Labs stand-in.
  const pdl = await startPdlStandin();
  t.teardown(() => pdl.close());
  const stack = await startStack({ env: { SVC_BOOTSTRAP_API_KEY: doc.key!, SVC_BOOTSTRAP_CREDITS: '100', SVC_PUBLIC_URL: 'http://localhost:8080', SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8', SVC_PDL_API_KEY: PDL_STANDIN_KEY, SVC_PDL_BASE_URL: pdl.url } });
  t.teardown(() => stack.close());
  const origin = stack.url.replace(/^http:\/\//, '');
  const vars: Record<string, string> = { KEY: doc.key! };
  for (const ex of doc.list) {
    if (ex.admin) {
      const argv = ex.admin.map((a) => a.replace(/^\$([A-Z][A-Z0-9_]*)$/, (_, v: string) => vars[v] ?? a));
      const r = await runAdmin(stack.store, argv);
      t.equal(r.code, 0, `${doc.file} line ${ex.line}: ${ex.command}: ${r.out}`);
      // As the service's admin socket does after every command: keys are read afresh.
      stack.svc.app.clearKeyCache();
      continue;
    }
    const { stdout } = await run('bash', ['-c', ex.command.replaceAll('localhost:8080', origin)], { env: { ...process.env, ...vars } });
    if (ex.assign) {
      // A URL the service answered (SVC_PUBLIC_URL, the documents' origin) leads to where it listens here.
      vars[ex.assign] = stdout.trim().replaceAll('localhost:8080', origin);
      t.ok(vars[ex.assign], `${doc.file} line ${ex.line}: ${ex.assign} is set`);
      continue;
    }
    let expected: unknown;
    try {
      expected = JSON.parse(ex.expected);
    } catch {
      // CSV answers end their lines with CRLF; the documents show lines.
      t.equal(stdout.replaceAll('\r\n', '\n').trim(), ex.expected.trim(), `${doc.file} line ${ex.line}: ${ex.command}`);
      continue;
    }
    // The documents show the embedded service's /ready; the cluster profile adds the checks of its servers.
    if (CLUSTER_PROFILE && /\/ready$/.test(ex.command)) Object.assign((expected as { checks: object }).checks, { database: 'ok', kafka: 'ok', clickhouse: 'ok' });
    const problem = matches(expected, JSON.parse(stdout));
    t.equal(problem, undefined, `${doc.file} line ${ex.line}: ${ex.command}`);
  }
  t.ok(doc.list.length >= 3, `ran the examples of ${doc.file} (${doc.list.length})`);
  if (doc.file === 'docs/api.md') {
    // The reference has an entry for every operation of the service's own OpenAPI document.
    const spec = (await (await fetch(`${stack.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    for (const [route, ops] of Object.entries(spec.paths)) {
      for (const method of Object.keys(ops)) t.ok(doc.text.includes(`\n### \`${method.toUpperCase()} ${route}\`\n`), `docs/api.md has an entry for ${method.toUpperCase()} ${route}`);
    }
  }
});
