// A crash between a data provider's answer and the charge leaves no charge without a result: the
// service (its own process, `cluster/embedded.ts`) takes a request's hold, waits on the vendor
// (People Data Labs' stand-in, which does not answer for `slow.test`), and is killed with SIGKILL.
// The restarted service releases the hold; the balance is what it was, and the same request with
// its Idempotency-Key then runs once and is charged once.

import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, startService } from '@svc/runtime';
import { openStore } from '@svc/store';
import { stackEnv } from '../helpers/stack.ts';
import { PDL_STANDIN_KEY, startPdlStandin } from '../helpers/pdl-standin.ts';
import { until } from '../helpers/until.ts';
import { startSim } from '../sim/index.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
t.setTimeout(300_000); // a first start (up to 120 s on a loaded machine), the vendor's 6 s, a second start
const sim = await startSim({ tarpitMs: 5000 });
t.teardown(() => sim.close());
const pdl = await startPdlStandin();
t.teardown(() => pdl.close());

t.test('kill -9 while the vendor is answering: no charge, the hold released at the next start, the retry charged once', async (t) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-data-crash-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const env = stackEnv(sim, dataDir, { PORT: String(port), SVC_PDL_API_KEY: PDL_STANDIN_KEY, SVC_PDL_BASE_URL: pdl.url, SVC_BOOTSTRAP_CREDITS: '50' });

  // Set up the account first (the embedded store is one process's at a time).
  const setup = await openStore({ dataDir });
  const accountId = await setup.accounts.create({ credits: 30 });
  await setup.accounts.setDataProduct(accountId, true);
  const { key } = await setup.keys.create({ accountId, kind: 'test', scopes: null });
  await setup.close();

  const child = spawn(process.execPath, ['--import', 'tsx', 'cluster/embedded.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.teardown(() => void child.kill('SIGKILL'));
  const url = `http://127.0.0.1:${port}`;
  // A first start initialises the data directory: seconds on a quiet machine, a minute and more on a loaded one.
  await until(
    async () => {
      if (child.exitCode !== null) throw new Error(`the service exited (${child.exitCode})`);
      return (await fetch(`${url}/live`).catch(() => undefined))?.status === 200;
    },
    120_000,
    'the service to listen',
  ).catch((e: Error) => {
    throw new Error(`${e.message}; its output: ${out.slice(-3000)}`);
  });

  const seen = pdl.requests.length;
  const body = JSON.stringify({ domain: 'slow.test' });
  const headers = { 'x-api-key': key, 'content-type': 'application/json', 'idempotency-key': 'search-slow-1' };
  const pending = fetch(`${url}/v1/people/search`, { method: 'POST', headers, body }).then(
    (r) => r.status,
    () => 'connection lost',
  );
  // The vendor has the request: the hold is taken, the answer not yet come.
  await Promise.race([until(() => pdl.requests.length > seen, 10_000, 'the vendor to be asked'), pending.then((s) => { throw new Error(`answered ${s} before the vendor was asked`); })]);
  child.kill('SIGKILL');
  await exited;
  t.equal(await pending, 'connection lost', 'the client got no answer');

  const after = await openStore({ dataDir });
  const held = await after.ledger.balance(accountId);
  t.strictSame([held!.balance, held!.reserved], [30, 20], 'the crash left the hold of the request (2 credits per profile, 10 profiles) and no charge');
  await after.close();

  const svc = await startService(loadConfig(env));
  t.teardown(() => svc.close());
  const b = await svc.services.store.ledger.balance(accountId);
  t.strictSame([b!.balance, b!.reserved], [30, 0], 'the start released it: nothing was charged');
  t.strictSame(await svc.services.store.ledger.totals(accountId), { balance: 30, reserved: 0 }, 'the ledger agrees');

  // The same request again: the claim of the dead request does not block it (the stand-in answers
  // slow.test after 6 s, with nothing found).
  const retry = await fetch(`${svc.url}/v1/people/search`, { method: 'POST', headers, body });
  const again = (await retry.json()) as { people: unknown[]; credits_charged: number };
  t.strictSame([retry.status, again.people, again.credits_charged], [200, [], 0], 'runs (not a 409 from the dead claim), finds nothing, charges nothing');
  const ok = await fetch(`${svc.url}/v1/people/search`, { method: 'POST', headers: { ...headers, 'idempotency-key': 'search-acme-1' }, body: JSON.stringify({ domain: 'acme-robotics.test', limit: 2 }) });
  const found = (await ok.json()) as { credits_charged: number; people: unknown[] };
  t.strictSame([ok.status, found.people.length, found.credits_charged], [200, 2, 4]);
  t.equal((await svc.services.store.ledger.balance(accountId))!.balance, 26, 'charged once, for what was found');
});
