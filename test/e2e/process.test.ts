// The service as a user runs it: `npm start` in a child process, pointed at the simulated
// internet. Bootstrap key, generated key, admin CLI (socket while running, direct when stopped),
// logs, and SIGTERM draining in-flight work with polite QUITs.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startSim } from '../sim/index.ts';
import { BOOTSTRAP_KEY, stackEnv } from '../helpers/stack.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const sim = await startSim({ slowBannerMs: 1200 });
t.teardown(() => sim.close());

interface Proc {
  child: ChildProcess;
  url: string;
  out: () => string;
}

async function startProc(env: Record<string, string>): Promise<Proc> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const m = /"url":"(http:\/\/[^"]+)"/.exec(out);
    if (m) return { child, url: m[1]!, out: () => out };
    if (child.exitCode !== null) throw new Error(`service exited: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`service did not start: ${out}`);
}

const exited = (child: ChildProcess) => new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code))));

function admin(env: Record<string, string>, ...args: string[]) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'cluster/admin.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8' });
  return { code: r.status, out: r.stdout + r.stderr };
}

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

  // The admin CLI talks to the running service through its socket (PGlite has one owner).
  const acct = admin(env, 'account', 'create', '--credits', '5');
  t.equal(acct.code, 0, acct.out);
  const accountId = /account (acc_[0-9a-f]+)/.exec(acct.out)?.[1];
  t.ok(accountId, 'account id printed');
  const key = admin(env, 'key', 'create', '--account', accountId!, '--scopes', 'email:validate:single,credits:read', '--kind', 'live');
  t.equal(key.code, 0, key.out);
  const liveKey = /(svc_live_[A-Za-z0-9]{40})/.exec(key.out)?.[1];
  const keyId = /key (key_[0-9a-f]+)/.exec(key.out)?.[1];
  t.ok(liveKey && keyId, 'key printed once with its id');
  t.equal((await call('/v1/validate', liveKey!, { email: 'john.smith@accept.test' })).status, 200);
  t.equal((await call('/v1/validate/bulk', liveKey!, { emails: ['a@accept.test'] })).status, 403, 'scopes enforced');
  t.equal(admin(env, 'credits', 'grant', '--account', accountId!, '--credits', '10').code, 0);
  t.equal(((await (await call('/v1/credits', liveKey!)).json()) as { balance: number }).balance, 14);
  t.equal(admin(env, 'key', 'deactivate', keyId!).code, 0);
  t.equal(((await (await call('/v1/credits', liveKey!)).json()) as { code: string }).code, 'api_key_inactive', 'deactivation is immediate');
  t.equal(admin(env, 'key', 'activate', keyId!).code, 0);
  t.equal((await call('/v1/credits', liveKey!)).status, 200);
  t.equal(admin(env, 'key', 'expire', keyId!).code, 0);
  t.equal(((await (await call('/v1/credits', liveKey!)).json()) as { code: string }).code, 'api_key_expired');
  t.equal(admin(env, 'key', 'revoke', liveKey!).code, 0, 'a key can be named by the key itself');
  t.equal(((await (await call('/v1/credits', liveKey!)).json()) as { code: string }).code, 'api_key_revoked');
  const undo = admin(env, 'key', 'activate', keyId!);
  t.equal(undo.code, 1, 'revocation cannot be undone');
  t.equal(admin(env, 'key', 'create', '--account', accountId!, '--scopes', 'email:everything').code, 2, 'unknown scopes refused');
  t.equal(admin(env, 'nonsense').code, 2);

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

t.test('without a bootstrap key, one key is generated and printed once', async (t) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-proc-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = stackEnv(sim, dataDir, { SVC_LOG_LEVEL: 'info', SVC_BOOTSTRAP_API_KEY: '' });
  const p = await startProc(env);
  await new Promise((r) => setTimeout(r, 200));
  const key = /(svc_live_[A-Za-z0-9]{40})/.exec(p.out())?.[1];
  t.ok(key, 'a generated key was printed');
  const r = await fetch(`${p.url}/v1/validate`, { method: 'POST', headers: { 'x-api-key': key!, 'content-type': 'application/json' }, body: JSON.stringify({ email: 'jane.doe@accept.test' }) });
  t.equal(r.status, 200);
  p.child.kill('SIGTERM');
  t.equal(await exited(p.child), 0);
  const again = await startProc(env);
  await new Promise((r) => setTimeout(r, 200));
  t.notOk(/svc_live_[A-Za-z0-9]{40}/.test(again.out()), 'not printed again on the next start');
  again.child.kill('SIGTERM');
  t.equal(await exited(again.child), 0);
});

t.test('a bad configuration value fails start-up naming the variable', async (t) => {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, SVC_SMTP_PORT: 'twenty-five' }, encoding: 'utf8' });
  t.equal(r.status, 2);
  t.match(r.stderr, /SVC_SMTP_PORT must be an integer/);
});

t.test('the README flow: `npm run sim`, then `npm start` with the variables it prints', async (t) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-readme-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const base = 20_000 + Math.floor(Math.random() * 20_000);
  const simProc = spawn('npm', ['run', '--silent', 'sim'], { cwd: ROOT, env: { ...process.env, SIM_DNS_PORT: String(base), SIM_SMTP_PORT: String(base + 1) }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
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
  t.same(Object.keys(vars).sort(), ['SVC_DNS_SERVERS', 'SVC_READY_DOMAIN', 'SVC_SMTP_PORT'], simOut);

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
  while (!svcOut.includes('email validation service listening') && Date.now() < deadline + 30_000) await new Promise((r) => setTimeout(r, 50));
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
