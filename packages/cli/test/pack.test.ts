// The client and the CLI as a user gets them: `npm pack` of both packages, the two tarballs
// installed into a scratch project outside the repository (offline: they need nothing else), and
// then plain `node` (no tsx, no NODE_OPTIONS): an ESM script importing { SvcClient } from
// '@svc/client' calls GET /v1/credits on a local server; the installed `svc` binary does the same
// with --json; the client's types resolve for a TypeScript consumer (moduleResolution NodeNext, no
// Node types). First, the packed dist/ must be the build of today's src/ (`npm run build`).

import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { startFaultServer } from '../../../test/helpers/fault-server.ts';

const exec = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../../..');
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');
t.setTimeout(240_000);

const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-pack-test-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
const server = await startFaultServer();
t.teardown(() => server.close());

/** The environment of a user's shell: no loader (NODE_OPTIONS), nothing of the npm run that started the tests. */
const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_OPTIONS' && !/^npm_(lifecycle|package)_/.test(k)));
env.PATH = `${path.dirname(process.execPath)}${path.delimiter}${env.PATH ?? ''}`;

async function sh(file: string, args: string[], cwd: string, extraEnv: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(file, args, { cwd, env: { ...env, ...extraEnv }, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number | string; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? String(err) };
  }
}

const manifest = (pkg: string) => JSON.parse(readFileSync(path.join(ROOT, 'packages', pkg, 'package.json'), 'utf8')) as { name: string; version: string; dependencies?: Record<string, string> };

/** Every file under `dir`, relative, sorted. */
function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`]))
    .sort();
}

t.test('dist/ is the build of the current src/ (else: npm run build)', async (t) => {
  for (const pkg of ['client', 'cli']) {
    const out = path.join(tmp, `build-${pkg}`);
    const r = await sh(process.execPath, [TSC, '-p', path.join(ROOT, 'packages', pkg, 'tsconfig.build.json'), '--outDir', out], ROOT);
    t.equal(r.code, 0, `${pkg}: tsc builds it (${r.stdout}${r.stderr})`);
    const dist = path.join(ROOT, 'packages', pkg, 'dist');
    const fresh = filesUnder(out);
    t.strictSame(filesUnder(dist), fresh, `${pkg}: dist/ has exactly the files of a build`);
    const differ = fresh.filter((f) => readFileSync(path.join(out, f), 'utf8') !== readFileSync(path.join(dist, f), 'utf8'));
    t.strictSame(differ, [], `${pkg}: every file of dist/ is the build's, byte for byte (run: npm run build)`);
  }
});

// npm pack of both, as is (--ignore-scripts: no rebuild of the repository's dist/ under a running suite).
const packed = await sh('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', tmp, './packages/client', './packages/cli'], ROOT);
if (packed.code !== 0) throw new Error(`npm pack failed: ${packed.stderr}`);
const [clientTgz, cliTgz] = (JSON.parse(packed.stdout) as Array<{ filename: string }>).map((p) => path.join(tmp, p.filename));
const tarList = async (tgz: string) => (await sh('tar', ['-tzf', tgz], tmp)).stdout.trim().split('\n').sort();
const tarFile = async (tgz: string, file: string) => (await sh('tar', ['-xzOf', tgz, `package/${file}`], tmp)).stdout;

t.test('the tarballs: built JavaScript and type declarations, no sources, the CLI depends on this client', async (t) => {
  t.equal(path.basename(clientTgz!), `svc-client-${manifest('client').version}.tgz`);
  const client = await tarList(clientTgz!);
  for (const f of ['package/package.json', 'package/dist/index.js', 'package/dist/index.d.ts', 'package/dist/client.js', 'package/dist/openapi.d.ts']) t.ok(client.includes(f), `client: ${f}`);
  t.strictSame(client.filter((f) => /\.ts$/.test(f) && !/\.d\.ts$/.test(f)), [], 'client: no TypeScript sources');
  t.strictSame(client.filter((f) => !f.startsWith('package/dist/') && f !== 'package/package.json'), [], 'client: dist/ and package.json only');
  const clientPkg = JSON.parse(await tarFile(clientTgz!, 'package.json')) as Record<string, unknown>;
  t.match(clientPkg, { exports: { '.': './dist/index.js' }, types: './dist/index.d.ts', type: 'module' }, 'client: exports and types point at dist');
  t.notOk('dependencies' in clientPkg, 'client: no dependencies');

  const cli = await tarList(cliTgz!);
  for (const f of ['package/package.json', 'package/bin/svc.js', 'package/dist/index.js', 'package/dist/index.d.ts', 'package/dist/cli.js']) t.ok(cli.includes(f), `cli: ${f}`);
  t.strictSame(cli.filter((f) => /\.ts$/.test(f) && !/\.d\.ts$/.test(f)), [], 'cli: no TypeScript sources');
  const cliPkg = JSON.parse(await tarFile(cliTgz!, 'package.json')) as Record<string, unknown>;
  t.strictSame(cliPkg.dependencies, { '@svc/client': manifest('client').version }, 'cli: depends on the client of the same version, and on nothing else (no tsx)');
  t.strictSame(cliPkg.bin, { svc: './bin/svc.js' });
  t.match(await tarFile(cliTgz!, 'bin/svc.js'), /^#!\/usr\/bin\/env node\n[\s\S]*from '\.\.\/dist\/index\.js'/, 'cli: the bin runs dist/ with node');
});

// A scratch project of a user, outside the repository.
const proj = path.join(tmp, 'proj');
mkdirSync(proj);
const init = await sh('npm', ['init', '-y'], proj);
if (init.code !== 0) throw new Error(`npm init failed: ${init.stderr}`);
await sh('npm', ['pkg', 'set', 'type=module'], proj);
const installed = await sh('npm', ['install', '--offline', '--no-audit', '--no-fund', clientTgz!, cliTgz!], proj);

t.test('npm install --offline of the two tarballs', async (t) => {
  t.equal(installed.code, 0, `npm install exits 0 (${installed.stderr.trim()})`);
  t.equal((JSON.parse(readFileSync(path.join(proj, 'package.json'), 'utf8')) as { type: string }).type, 'module');
  t.equal(realpathSync(path.join(proj, 'node_modules/.bin/svc')), path.join(realpathSync(proj), 'node_modules/@svc/cli/bin/svc.js'), 'node_modules/.bin/svc is the installed CLI');
  t.strictSame(readdirSync(path.join(proj, 'node_modules/@svc')).sort(), ['cli', 'client'], 'one client, at the top (the CLI uses it)');
});

const CREDITS = { balance: 1234, reserved: 34, available: 1200, subscription_status: 'active' };
const KEY = 'svc_test_packTestKey0000000000001';

t.test('plain node: import { SvcClient } from "@svc/client" calls the service', async (t) => {
  writeFileSync(
    path.join(proj, 'main.js'),
    `import { SvcClient } from '@svc/client';
console.log(import.meta.resolve('@svc/client'));
const svc = new SvcClient({ apiKey: process.env.SVC_API_KEY, baseUrl: process.env.SVC_BASE_URL });
const c = await svc.getCredits();
console.log(\`balance \${c.balance}, reserved \${c.reserved}, available \${c.available}\`);
`,
  );
  server.script([{ status: 200, body: CREDITS }]);
  const r = await sh(process.execPath, ['main.js'], proj, { SVC_API_KEY: KEY, SVC_BASE_URL: server.url });
  t.strictSame(r, { code: 0, stdout: `${new URL(`file://${realpathSync(proj)}/node_modules/@svc/client/dist/index.js`).href}\nbalance 1234, reserved 34, available 1200\n`, stderr: '' }, 'the installed package (its dist), and the balance');
  t.strictSame(server.received.map((x) => [x.method, x.url, x.headers['x-api-key'], x.headers['user-agent']]), [['GET', '/v1/credits', KEY, 'svc-client/0.1.0']], 'one GET /v1/credits with the key');
});

t.test('plain node: node_modules/.bin/svc credits --json', async (t) => {
  server.script([{ status: 200, body: CREDITS }]);
  const r = await sh(path.join(proj, 'node_modules/.bin/svc'), ['credits', '--json'], proj, { SVC_API_KEY: KEY, SVC_BASE_URL: server.url, SVC_CONFIG: '', HOME: tmp, XDG_CONFIG_HOME: '' });
  t.strictSame(r, { code: 0, stdout: `${JSON.stringify(CREDITS)}\n`, stderr: '' }, 'exit 0, the JSON document');
  t.strictSame(server.received.map((x) => [x.method, x.url, x.headers['x-api-key'], x.headers['user-agent']]), [['GET', '/v1/credits', KEY, 'svc-cli/0.1.0']]);
  const human = await sh(path.join(proj, 'node_modules/.bin/svc'), ['credits'], proj, { SVC_API_KEY: KEY, SVC_BASE_URL: server.url, SVC_CONFIG: '', HOME: tmp });
  t.strictSame(human, { code: 0, stdout: 'balance 1,234, reserved 34, available 1,200 (subscription active)\n', stderr: '' });
});

t.test('TypeScript: the installed client has types (NodeNext resolution, DOM lib, no Node types)', async (t) => {
  writeFileSync(
    path.join(proj, 'check.ts'),
    `import { SvcApiError, SvcClient, type CreditBalance } from '@svc/client';
const svc = new SvcClient({ apiKey: 'svc_test_x' });
const credits: CreditBalance = await svc.getCredits();
export const balance: number = credits.balance;
// @ts-expect-error getCredits takes call options, not a number: an untyped (any) client would not complain
await svc.getCredits(42);
export const isApiError = (e: unknown): e is SvcApiError => e instanceof SvcApiError;
`,
  );
  writeFileSync(path.join(proj, 'tsconfig.json'), JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, lib: ['ES2022', 'DOM'], types: [] }, files: ['check.ts'] }));
  const r = await sh(process.execPath, [TSC, '-p', proj], proj);
  t.strictSame(r, { code: 0, stdout: '', stderr: '' }, 'tsc finds dist/index.d.ts and checks the calls');
});
