// The webhook receivers of docs/api.md (Node and Python), as a customer would run them: each snippet is
// taken from docs/api.md as written, started with the secret POST /v1/webhooks/secret/rotate showed,
// and must verify real deliveries of real jobs; forged, tampered and stale requests must be
// refused. Then a rotation: during its grace period every delivery carries two signatures (a
// receiver holding either secret verifies it), after a rotation with no grace only the new one.
// Runs in both profiles (TEST_PROFILE).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { verifyWebhookSignature, webhookSignature } from '@svc/jobs';
import { makeKey, startStack } from '../helpers/stack.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const readme = readFileSync(path.join(ROOT, 'docs/api.md'), 'utf8');

/** The fenced block of `lang` whose first line is `first`. */
function snippet(lang: string, first: string): string {
  const m = [...readme.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].find((b) => b[1] === lang && b[2]!.startsWith(`${first}\n`));
  if (!m) throw new Error(`docs/api.md has no ${lang} block starting with ${first}`);
  return m[2]!;
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-receivers-'));
writeFileSync(path.join(dir, 'receiver.mjs'), snippet('js', '// receiver.mjs'));
writeFileSync(path.join(dir, 'receiver.py'), snippet('python', '# receiver.py'));

const stack = await startStack({ env: { SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8,::1/128' } });
t.teardown(async () => {
  await stack.close();
  rmSync(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

interface Receiver {
  port: number;
  lines: string[];
  stderr: () => string;
  until(line: string, ms?: number): Promise<void>;
}

/** Runs a receiver of docs/api.md with `secret` and waits until it accepts connections. */
async function runReceiver(t: Tap, cmd: string, file: string, secret: string): Promise<Receiver> {
  const port = await freePort();
  const child: ChildProcess = spawn(cmd, [path.join(dir, file)], { env: { ...process.env, WEBHOOK_SECRET: secret, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => void child.kill('SIGKILL'));
  const lines: string[] = [];
  let err = '';
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString('utf8');
    const parts = buf.split('\n');
    buf = parts.pop()!;
    lines.push(...parts);
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const until = async (line: string, ms = 30_000): Promise<void> => {
    const end = Date.now() + ms;
    while (!lines.includes(line)) {
      if (Date.now() > end) throw new Error(`${file}: no line ${JSON.stringify(line)} within ${ms} ms; stdout ${JSON.stringify(lines)}, stderr ${JSON.stringify(err)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const end = Date.now() + 15_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.end(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > end) throw new Error(`${file} did not listen on ${port}: ${err}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { port, lines, stderr: () => err, until };
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

/** POSTs `body` to the receiver with `signature` (raw: a forged request); its status. */
async function post(port: number, body: string, signature: string | undefined): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-webhook-id': 'whk_test', ...(signature === undefined ? {} : { 'x-signature': signature }) }, body });
  await res.arrayBuffer();
  return res.status;
}

async function jobWithHook(key: string, url: string): Promise<string> {
  const r = await stack.call('POST', '/v1/validate/batch', { key, body: { emails: ['jane.doe@accept.test', 'not-an-email'], webhook_url: url } });
  if (r.status !== 202) throw new Error(`batch: ${r.status} ${r.text}`);
  return r.body.id as string;
}

const now = () => Math.floor(Date.now() / 1000);

for (const [name, cmd, file] of [
  ['Node', process.execPath, 'receiver.mjs'],
  ['Python', 'python3', 'receiver.py'],
] as const) {
  t.test(`the ${name} receiver of docs/api.md verifies real deliveries and refuses forgeries`, async (t) => {
    const { key } = await makeKey(stack, { credits: 10 });
    const rotated = await stack.call('POST', '/v1/webhooks/secret/rotate', { key });
    t.equal(rotated.status, 201);
    t.match(rotated.body.secret, /^whsec_[A-Za-z0-9_-]{43}$/);
    t.strictSame(rotated.body.previous, [], 'the account had no secret');
    const secret = rotated.body.secret as string;
    const rx = await runReceiver(t, cmd, file, secret);

    const id = await jobWithHook(key, `http://127.0.0.1:${rx.port}/hook`);
    await rx.until(`verified job.completed ${id} (${await eventId(id)})`);

    const body = JSON.stringify({ id: 'evt_forged', event: 'job.completed', job: { id: 'job_forged' }, created_at: new Date().toISOString() });
    t.equal(await post(rx.port, body, webhookSignature(secret, now(), body)), 204, 'a request signed with the secret, now: accepted');
    t.equal(await post(rx.port, body, undefined), 400, 'no signature: refused');
    t.equal(await post(rx.port, body, webhookSignature('whsec_someone_elses_secret_00000000000000000000', now(), body)), 400, 'another secret: refused');
    t.equal(await post(rx.port, `${body} `, webhookSignature(secret, now(), body)), 400, 'a tampered body: refused');
    t.equal(await post(rx.port, body, webhookSignature(secret, now() - 600, body)), 400, 'ten minutes old: refused (no replays)');
    t.equal(await post(rx.port, body, `t=${now()},v1=zz`), 400, 'a malformed v1: refused');
    t.strictSame(
      rx.lines.filter((l) => l.startsWith('verified')),
      [`verified job.completed ${id} (${await eventId(id)})`, 'verified job.completed job_forged (whk_test)'],
      'it printed exactly the two it accepted',
    );
  });
}

/** The job's webhook event id, from the outbox. */
async function eventId(jobId: string): Promise<string> {
  const end = Date.now() + 30_000;
  for (;;) {
    const rows = await stack.db.query<{ id: string }>('SELECT id FROM webhook_events WHERE job_id = $1', [jobId]);
    if (rows[0]) return rows[0].id;
    if (Date.now() > end) throw new Error(`no webhook event for ${jobId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('a rotation: both secrets sign during the grace period; with no grace the old one stops at once', async (t) => {
  const { key, accountId } = await makeKey(stack, { credits: 10 });
  // Deliveries captured raw, to read X-Signature.
  const captured: Array<{ signature: string; body: string }> = [];
  const capture = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      captured.push({ signature: String(req.headers['x-signature']), body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => capture.listen(0, '127.0.0.1', r));
  t.teardown(() => void capture.close());
  const captureUrl = `http://127.0.0.1:${(capture.address() as net.AddressInfo).port}/hook`;
  const delivered = async (n: number) => {
    const end = Date.now() + 30_000;
    while (captured.length < n) {
      if (Date.now() > end) throw new Error(`${captured.length} deliveries, wanted ${n}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return captured[n - 1]!;
  };
  const v1s = (sig: string) => sig.split(',').filter((p) => p.startsWith('v1=')).length;

  // A job before any rotation: a secret is made for the account (never shown) and signs it.
  await jobWithHook(key, captureUrl);
  const first = await delivered(1);
  t.equal(v1s(first.signature), 1, 'one signature');
  const before = await stack.call('GET', '/v1/webhooks/secret', { key });
  t.equal(before.body.secrets.length, 1, 'the account now has one secret');
  t.equal(before.body.secrets[0].expires_at, null);

  const a = await stack.call('POST', '/v1/webhooks/secret/rotate', { key, body: { grace_period_seconds: 3600 } });
  t.equal(a.status, 201);
  t.equal(a.headers.get('cache-control'), 'no-store');
  t.strictSame(a.body.previous.map((p: { id: string }) => p.id), [before.body.secrets[0].id], 'the unseen secret signs for the grace period');
  const graceEnds = Date.parse(a.body.previous[0].expires_at) - Date.parse(a.body.created_at);
  t.ok(Math.abs(graceEnds - 3_600_000) < 5_000, `its grace period is an hour (${graceEnds} ms)`);
  const nodeRx = await runReceiver(t, process.execPath, 'receiver.mjs', a.body.secret);

  const b = await stack.call('POST', '/v1/webhooks/secret/rotate', { key, body: { grace_period_seconds: 600 } });
  t.strictSame(b.body.previous.map((p: { id: string }) => p.id).sort(), [before.body.secrets[0].id, a.body.id].sort(), 'both current secrets get the shorter grace');
  const listed = await stack.call('GET', '/v1/webhooks/secret', { key });
  t.strictSame(
    listed.body.secrets.map((s: { id: string; expires_at: string | null; secret_prefix: string }) => [s.id, s.expires_at === null, s.secret_prefix]),
    [
      [b.body.id, true, `${(b.body.secret as string).slice(0, 10)}…`],
      [a.body.id, false, `${(a.body.secret as string).slice(0, 10)}…`],
      [before.body.secrets[0].id, false, before.body.secrets[0].secret_prefix],
    ],
    'newest first, by their first characters only',
  );
  t.notOk(listed.text.includes(a.body.secret), 'never the secret itself');

  // During the grace period: three signatures; the receiver holding A (not the newest) verifies.
  const id2 = await jobWithHook(key, `http://127.0.0.1:${nodeRx.port}/hook`);
  await nodeRx.until(`verified job.completed ${id2} (${await eventId(id2)})`);
  await jobWithHook(key, captureUrl);
  const second = await delivered(2);
  t.equal(v1s(second.signature), 3, 'one signature per current secret');
  t.equal(verifyWebhookSignature(b.body.secret, second.signature, second.body), 'ok', 'the newest verifies');
  t.equal(verifyWebhookSignature(a.body.secret, second.signature, second.body), 'ok', 'the one in its grace period too');
  t.match(second.signature, new RegExp(`^t=\\d+,v1=${webhookSignature(b.body.secret, Number(/^t=(\d+)/.exec(second.signature)![1]), second.body).split('v1=')[1]},`), 'the newest first');

  // No grace: the old secrets stop at once.
  const c = await stack.call('POST', '/v1/webhooks/secret/rotate', { key, body: { grace_period_seconds: 0 } });
  t.equal(c.status, 201);
  await jobWithHook(key, captureUrl);
  const third = await delivered(3);
  t.equal(v1s(third.signature), 1, 'only the newest signs');
  t.equal(verifyWebhookSignature(c.body.secret, third.signature, third.body), 'ok');
  t.equal(verifyWebhookSignature(b.body.secret, third.signature, third.body), 'invalid', 'the replaced one no longer verifies');

  // Bad grace periods; other accounts are untouched.
  for (const bad of [-1, 604_801, 1.5, '60', null]) {
    const r = await stack.call('POST', '/v1/webhooks/secret/rotate', { key, body: { grace_period_seconds: bad } });
    t.strictSame([r.status, r.body.code], bad === null ? [201, undefined] : [400, 'invalid_request'], `grace_period_seconds ${JSON.stringify(bad)}`);
  }
  const arr = await stack.call('POST', '/v1/webhooks/secret/rotate', { key, body: [] });
  t.strictSame([arr.status, arr.body.code], [400, 'invalid_request'], 'a JSON array body');
  const other = await makeKey(stack, { credits: 1 });
  t.strictSame((await stack.call('GET', '/v1/webhooks/secret', { key: other.key })).body, { secrets: [] }, "another account's list is its own");
  const single = await makeKey(stack, { scopes: ['email:validate:single'] });
  t.strictSame([(await stack.call('POST', '/v1/webhooks/secret/rotate', { key: single.key })).body.code], ['insufficient_scope'], 'the bulk scope is needed');
  t.equal(typeof accountId, 'string');
});
