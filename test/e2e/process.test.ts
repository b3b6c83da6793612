// The service as a user runs it: `npm start` in a child process, pointed at the simulated
// internet. Bootstrap key, generated key, admin CLI (socket while running, direct when stopped),
// logs, and SIGTERM draining in-flight work with polite QUITs.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startSim } from '../sim/index.ts';
import { BOOTSTRAP_KEY, stackEnv } from '../helpers/stack.ts';
import { adminSocketPath, callAdminSocket } from '@svc/admin';

const ROOT = path.resolve(import.meta.dirname, '../..');
const sim = await startSim({ slowBannerMs: 1200 });
t.teardown(() => sim.close());

interface Proc {
  child: ChildProcess;
  url: string;
  /** stdout and stderr as they arrived, together and apart. */
  out: () => string;
  stdout: () => string;
  stderr: () => string;
  /** Resolves when the process has exited and both streams are read to their end. */
  closed: Promise<number | null>;
}

async function startProc(env: Record<string, string>): Promise<Proc> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  let out = '';
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => ((out += d), (stdout += d)));
  child.stderr!.on('data', (d) => ((out += d), (stderr += d)));
  const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  // A first start runs initdb (about 5 s on a quiet machine; 30 s and more under a load of 15-20).
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const m = /"url":"(http:\/\/[^"]+)"/.exec(out);
    if (m) return { child, url: m[1]!, out: () => out, stdout: () => stdout, stderr: () => stderr, closed };
    if (child.exitCode !== null) throw new Error(`service exited: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`service did not start: ${out}`);
}

const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code))));

/** An admin command through the running service's socket from this process (the CLI's own path, without a process per command). */
async function viaSocket(dataDir: string, ...args: string[]) {
  const r = await callAdminSocket(adminSocketPath(dataDir), args);
  return { code: r.code, out: `${r.out}\n` };
}

function admin(env: Record<string, string>, ...args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'cluster/admin.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8' });
  return { code: r.status, out: r.stdout + r.stderr };
}

// Five subtests start real service processes (each a fresh data directory: PGlite's initdb, 5-15 s
// on a loaded 2-core machine): about 70 s when the machine is quiet, past tap's 120 s when it is not.
t.setTimeout(300_000);

t.test('bootstrap key, admin CLI through the socket, logs, SIGTERM drain', async (t) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-proc-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = stackEnv(sim, dataDir, { SVC_LOG_LEVEL: 'info', SVC_BOOTSTRAP_CREDITS: '3', SVC_SMTP_TIMEOUT_MS: '5000' });
  const p = await startProc(env);
  const call = (route: string, key: string | null, body?: unknown) =>
    fetch(p.url + route, { method: body ? 'POST' : 'GET', headers: { ...(key ? { 'x-api-key': key } : {}), ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : null });

  const v = await call('/v1/validate', BOOTSTRAP_KEY, { email: 'jane.doe@accept.test' });
  t.equal(v.status, 200);
  const vb = (await v.json()) as Record<string, unknown>;
  t.same([vb.result, vb.credits_charged], ['valid', 1], 'the bootstrap key works at once');
  const c = (await (await call('/v1/credits', BOOTSTRAP_KEY)).json()) as Record<string, unknown>;
  t.equal(c.balance, 2, 'SVC_BOOTSTRAP_CREDITS (3) minus one charge');

  // The admin CLI talks to the running service through its socket (PGlite has one owner); the
  // rest of the commands go through the same socket from here (a process each would cost a second).
  const acct = admin(env, 'account', 'create', '--credits', '5');
  t.equal(acct.code, 0, acct.out);
  const accountId = /account (acc_[0-9a-f]+)/.exec(acct.out)?.[1];
  t.ok(accountId, 'account id printed');
  const key = await viaSocket(dataDir, 'key', 'create', '--account', accountId!, '--scopes', 'email:validate:single,credits:read', '--kind', 'live');
  t.equal(key.code, 0, key.out);
  const liveKey = /(svc_live_[A-Za-z0-9]{40})/.exec(key.out)?.[1];
  const keyId = /key (key_[0-9a-f]+)/.exec(key.out)?.[1];
  t.ok(liveKey && keyId, 'key printed once with its id');
  // Listings through the socket: both accounts, then the bootstrap key, used (its last use recorded).
  const accounts = admin(env, 'account', 'list');
  t.equal(accounts.code, 0, accounts.out);
  const [header, ...rows] = accounts.out.trimEnd().split('\n');
  t.equal(header, 'ID                            BALANCE  RESERVED  AVAILABLE  KEYS  CREATED                   NAME');
  const ISO = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z';
  t.equal(rows.length, 2, accounts.out);
  t.match(rows.find((r) => r.endsWith('bootstrap')), new RegExp(`^acc_[0-9a-f]{24} {8}2 {9}0 {10}2 {5}1  ${ISO}  bootstrap$`), 'the bootstrap account: 3 credits less one charge, one key');
  t.match(rows.find((r) => r.startsWith(accountId!)), new RegExp(`^${accountId} {8}5 {9}0 {10}5 {5}1  ${ISO}  -$`), 'the new account');
  const bootstrapAccount = rows.find((r) => r.endsWith('bootstrap'))!.slice(0, 28);
  const keys = admin(env, 'key', 'list', '--account', bootstrapAccount);
  t.equal(keys.code, 0, keys.out);
  t.match(
    keys.out,
    new RegExp(`^ID                            PREFIX         KIND  STATE   CREATED                   LAST_USED                 EXPIRES  SCOPES        NAME\nkey_[0-9a-f]{24}  svc_test_e2eB  test  active  ${ISO}  ${ISO}  -        unrestricted  bootstrap\n$`),
    'the bootstrap key: its prefix only, unrestricted, active, and when it was last used',
  );
  t.equal((await call('/v1/validate', liveKey!, { email: 'john.smith@accept.test' })).status, 200);
  t.equal((await call('/v1/validate/bulk', liveKey!, { emails: ['a@accept.test'] })).status, 403, 'scopes enforced');
  t.equal((await viaSocket(dataDir, 'credits', 'grant', '--account', accountId!, '--credits', '10')).code, 0);
  t.equal(((await (await call('/v1/credits', liveKey!)).json()) as { balance: number }).balance, 14);
  t.equal((await viaSocket(dataDir, 'key', 'deactivate', keyId!)).code, 0);
  t.equal(((await (await call('/v1/credits', liveKey!)).json()) as { code: string }).code, 'api_key_inactive', 'deactivation is immediate');
  t.equal((await viaSocket(dataDir, 'key', 'activate', keyId!)).code, 0);
  t.equal((await call('/v1/credits', liveKey!)).status, 200);
  t.equal((await viaSocket(dataDir, 'key', 'expire', keyId!)).code, 0);
  t.equal(((await (await call('/v1/credits', liveKey!)).json()) as { code: string }).code, 'api_key_expired');
  t.equal((await viaSocket(dataDir, 'key', 'revoke', liveKey!)).code, 0, 'a key can be named by the key itself');
  t.equal(((await (await call('/v1/credits', liveKey!)).json()) as { code: string }).code, 'api_key_revoked');
  const undo = await viaSocket(dataDir, 'key', 'activate', keyId!);
  t.equal(undo.code, 1, 'revocation cannot be undone');
  t.equal((await viaSocket(dataDir, 'key', 'create', '--account', accountId!, '--scopes', 'email:everything')).code, 2, 'unknown scopes refused');
  t.equal((await viaSocket(dataDir, 'nonsense')).code, 2);

  // SIGTERM while a validation is in flight (the slow banner takes 1.2 s): it completes, the
  // SMTP session ends with QUIT, then the process exits 0.
  sim.resetStats();
  const inflight = call('/v1/validate', BOOTSTRAP_KEY, { email: 'jane.doe@slowbanner.test' });
  // Signal only once the validation is surely in flight: its SMTP session is open.
  for (let i = 0; i < 500 && sim.statsFor('slowbanner.test').connections === 0; i++) await new Promise((r) => setTimeout(r, 10));
  p.child.kill('SIGTERM');
  const res = await inflight;
  t.equal(res.status, 200);
  t.equal(((await res.json()) as { result: string }).result, 'valid');
  t.equal(await exited(p.child), 0, 'clean exit');
  const s = sim.statsFor('slowbanner.test');
  t.equal(s.connections, 1);
  t.equal(s.quit, 1, 'the SMTP session was closed with QUIT');

  const log = p.out();
  t.notOk(log.includes(BOOTSTRAP_KEY), 'the bootstrap key never appears in the logs');
  t.notOk(log.includes(liveKey!), 'a created key never appears in the logs');
  t.match(log, /"reqId":"req_[0-9a-f]{32}"/, 'log lines carry the request id');
  t.match(log, /"key":"svc_test_e2eB"/, 'logs name a key by its short prefix only');

  // Stopped: the admin CLI opens the store itself.
  const direct = admin(env, 'credits', 'show', '--account', accountId!);
  t.equal(direct.code, 0, direct.out);
  t.match(direct.out, /balance 14, reserved 0, available 14/);
});

t.test('without a bootstrap key, one key is generated and printed once, on stderr in a marked block, never among the JSON logs', async (t) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-proc-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = stackEnv(sim, dataDir, { SVC_LOG_LEVEL: 'info', SVC_BOOTSTRAP_API_KEY: '' });

  // First, a first start whose port is taken: it fails before anything is created, so the key is
  // neither generated nor lost; the start after it (port free) generates and shows it.
  {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port) }, encoding: 'utf8' });
    await new Promise<void>((resolve) => blocker.close(() => resolve()));
    t.equal(r.status, 2, 'a port in use on a first start: exit 2');
    t.equal(r.stderr, `configuration error: PORT ${port} is already in use on 127.0.0.1\n`, 'one line naming PORT: no key generated, none shown');
    t.notOk(existsSync(path.join(dataDir, 'pgdata')), 'nothing created in the data directory');
  }

  const p = await startProc(env);
  const r = await fetch(`${p.url}/live`);
  t.equal(r.status, 200);
  p.child.kill('SIGTERM');
  t.equal(await p.closed, 0, 'clean exit, every byte of both streams read');
  // The key's block, then the dashboard's owner set-up link (single use, 24 h) in one of its own.
  const block = /^(={78})\nAPI key generated at first start \(shown once, only its SHA-256 is stored\):\n(svc_live_[A-Za-z0-9]{40})\n(={78})\n={78}\nDashboard: create the owner's sign-in with this single-use link \(valid until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\):\n(http:\/\/localhost:\d+\/dashboard\/setup#token=[A-Za-z0-9_-]{43})\n={78}\n$/.exec(p.stderr());
  t.ok(block, `stderr is exactly the two blocks, written once: ${JSON.stringify(p.stderr())}`);
  t.equal(block?.[4] ? new URL(block[4]).port : undefined, new URL(p.url).port, 'the link names the port the service listens on');
  const key = block?.[2] ?? 'no key printed';
  const stdout = p.stdout();
  t.notOk(stdout.includes(key), 'stdout (the JSON logs) never contains the key');
  const lines = stdout.trimEnd().split('\n');
  t.ok(lines.length >= 3 && lines.every((l) => typeof JSON.parse(l) === 'object'), 'every stdout line is a JSON log line');
  // The first line comes before the code is even loaded (measured: about 0.25 s after spawn, the
  // PGlite initialisation then takes seconds), and says what the wait is for.
  t.match(JSON.parse(lines[0]!), { level: 30, msg: 'starting: initialising the data directory (first start: this takes a few seconds)', dataDir }, 'first line: initialising');

  const again = await startProc(env);
  const v = await fetch(`${again.url}/v1/validate`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ email: 'jane.doe@accept.test' }) });
  t.equal(v.status, 200, 'the printed key works');
  // Its parent gone (here: the IPC channel closed, as a SIGKILLed parent's closes): it drains and
  // stops by itself, as on SIGTERM, instead of running on as an orphan.
  again.child.disconnect();
  t.equal(await exited(again.child), 0, 'the IPC channel closed: a clean exit');
  // ('close' does not come after a disconnect from this side: Node counts the channel among the
  // streams to close. Both output streams read to their end instead.)
  await Promise.all([again.child.stdout!, again.child.stderr!].map((s) => (s.readableEnded ? undefined : new Promise((r) => s.once('end', r)))));
  t.match(again.stdout(), /"reason":"the parent process is gone \(its IPC channel closed\)","msg":"draining in-flight requests and SMTP sessions"/);
  t.match(again.stdout(), /"msg":"stopped"/);
  t.equal(again.stderr(), '', 'nothing on stderr on the next start: no key generated or printed again');
  t.match(JSON.parse(again.stdout().split('\n')[0]!), { msg: 'starting: opening the data directory', dataDir }, 'the next start opens it');
  t.notOk(/svc_live_[A-Za-z0-9]{40}/.test(again.out()), 'no key anywhere');

  // A port in use (on this existing data directory, which opens fast): one line naming PORT, exit 2.
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
  const port = (blocker.address() as net.AddressInfo).port;
  const busy = spawn(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  let busyOut = '';
  let busyErr = '';
  busy.stdout!.on('data', (d) => (busyOut += d));
  busy.stderr!.on('data', (d) => (busyErr += d));
  t.equal(await new Promise<number | null>((resolve) => busy.once('close', resolve)), 2, 'a port in use: exit 2');
  t.equal(busyErr, `configuration error: PORT ${port} is already in use on 127.0.0.1\n`, 'one line naming PORT, no stack');
  t.match(busyOut, /^\{[^\n]*"msg":"starting: opening the data directory"[^\n]*\}\n$/, 'only the first line (what it is opening): it never listened');
  t.notOk(existsSync(path.join(dataDir, 'admin.sock')), 'its admin socket is closed (the file removed)');
  t.notOk(existsSync(path.join(dataDir, 'svc.lock')), 'the data directory is unlocked');
});

const ONE_LINE_NO_STACK = /^[^\n]+\n$/;

t.test('a bad configuration value fails start-up: one line on stderr naming the variable, no stack, exit 2', async (t) => {
  const dataDir = path.join(os.tmpdir(), `svc-never-${process.pid}`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, SVC_DATA_DIR: dataDir, SVC_DNS_SERVERS: '1.2.3.4:99999' }, encoding: 'utf8' });
  t.equal(r.status, 2);
  t.equal(r.stderr, 'configuration error: SVC_DNS_SERVERS must be a comma-separated list of ip or ip:port (IPv6: [addr]:port), got "1.2.3.4:99999" in "1.2.3.4:99999"\n');
  t.match(r.stderr, ONE_LINE_NO_STACK);
  t.notOk(/\n\s+at /.test(r.stderr), 'no stack frames');
  t.equal(r.stdout, '', 'nothing logged');
  t.notOk(existsSync(dataDir), 'nothing created');
});

t.test('the admin CLI does not create a store: without a service or a data directory it says where it looked, exit 1', async (t) => {
  const parent = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  const dataDir = path.join(parent, 'not-there');
  const r = admin({ SVC_DATA_DIR: dataDir }, 'account', 'list');
  t.strictSame(r, { code: 1, out: `no store at ${dataDir} (SVC_DATA_DIR); start the service once with \`npm start\`, or point SVC_DATA_DIR at its data directory\n` });
  t.notOk(existsSync(dataDir), 'the directory was not created');
});

t.test('the README flow: `npm run sim`, then `npm start` with the variables it prints', async (t) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-readme-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const base = 20_000 + Math.floor(Math.random() * 20_000);
  const simProc = spawn('npm', ['run', '--silent', 'sim'], { cwd: ROOT, env: { ...process.env, SIM_DNS_PORT: String(base), SIM_SMTP_PORT: String(base + 1), SIM_WEB_HTTP_PORT: String(base + 3), SIM_WEB_HTTPS_PORT: String(base + 4), SIM_PDL_PORT: String(base + 5) }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  t.teardown(() => {
    try {
      process.kill(-simProc.pid!, 'SIGTERM');
    } catch {
      /* gone */
    }
  });
  let simOut = '';
  simProc.stdout!.on('data', (d) => (simOut += d));
  simProc.stderr!.on('data', (d) => (simOut += d));
  const deadline = Date.now() + 30_000;
  while (!/SVC_READY_DOMAIN=/.test(simOut) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const vars = Object.fromEntries([...simOut.matchAll(/^(SVC_[A-Z_]+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  t.same(Object.keys(vars).sort(), ['SVC_DNS_SERVERS', 'SVC_OUTBOUND_ALLOW_NETWORKS', 'SVC_PDL_API_KEY', 'SVC_PDL_BASE_URL', 'SVC_READY_DOMAIN', 'SVC_SMTP_PORT', 'SVC_WEB_HTTPS_PORT', 'SVC_WEB_HTTP_PORT'], simOut);

  const svc = spawn('npm', ['start'], { cwd: ROOT, env: { ...process.env, ...vars, PORT: String(base + 2), HOST: '127.0.0.1', SVC_DATA_DIR: dataDir, SVC_BOOTSTRAP_API_KEY: 'svc_test_readmeFlowKey000000000001' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let svcOut = '';
  svc.stdout!.on('data', (d) => (svcOut += d));
  svc.stderr!.on('data', (d) => (svcOut += d));
  t.teardown(() => {
    try {
      process.kill(-svc.pid!, 'SIGTERM');
    } catch {
      /* gone */
    }
  });
  const url = `http://127.0.0.1:${base + 2}`;
  while (!svcOut.includes('email validation service listening') && Date.now() < deadline + 90_000) await new Promise((r) => setTimeout(r, 50));
  if (!svcOut.includes('email validation service listening')) throw new Error(`npm start did not listen within 120 s (exit ${svc.exitCode}): ${svcOut.slice(-3000)}`);
  const post = async (email: string) => {
    const r = await fetch(`${url}/v1/validate`, { method: 'POST', headers: { 'x-api-key': 'svc_test_readmeFlowKey000000000001', 'content-type': 'application/json' }, body: JSON.stringify({ email }) });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const good = await post('jane.doe@accept.test');
  t.same([good.status, good.body.result, good.body.credits_charged], [200, 'valid', 1], svcOut.slice(-2000));
  const bad = await post('no.such.user@accept.test');
  t.same([bad.status, bad.body.result, bad.body.validation_layer], [200, 'invalid', 'smtp']);
  let ready: Record<string, unknown> = {};
  for (let i = 0; i < 50 && ready.status !== 'ready'; i++) {
    ready = (await (await fetch(`${url}/ready`)).json()) as Record<string, unknown>;
    if (ready.status !== 'ready') await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(ready.status, 'ready', 'ready against the simulated internet');
  process.kill(-svc.pid!, 'SIGTERM');
  process.kill(-simProc.pid!, 'SIGTERM');
  await Promise.all([exited(svc), exited(simProc)]);
});
