// Job webhooks end to end (docs/decisions/webhooks.md): a job with a webhook_url delivers one signed
// `job.completed` event whose body is the job's status resource, and the event was written to
// the outbox with the job's completion.

import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { startStack } from '../helpers/stack.ts';

const SECRET = 'e2e-webhook-secret-0123456789';
const received: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
let notify: (() => void) | undefined;
const receiver = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', () => {
    received.push({ headers: req.headers, body });
    res.writeHead(204).end();
    notify?.();
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/jobs?token=abc`;

// The receiver is on loopback: the developer's setting for that, which opens loopback only.
const stack = await startStack({ env: { SVC_SECRET: SECRET, SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8,::1/128' } });
t.teardown(async () => {
  await stack.close();
  receiver.close();
});

const waitForEvent = (ms: number) =>
  new Promise<void>((resolve, reject) => {
    if (received.length > 0) return resolve();
    const timer = setTimeout(() => reject(new Error(`no webhook within ${ms} ms`)), ms);
    notify = () => {
      clearTimeout(timer);
      resolve();
    };
  });

t.test('a completed job POSTs one signed job.completed event with its status resource', async (t) => {
  // The account's own signing secret (SVC_SECRET signs only the signed URLs).
  const rotated = await stack.call('POST', '/v1/webhooks/secret/rotate');
  t.equal(rotated.status, 201);
  const secret = rotated.body.secret as string;
  t.not(secret, SECRET);
  const created = await stack.call('POST', '/v1/validate/batch', { body: { emails: ['jane.doe@accept.test', 'nobody.here@accept.test'], webhook_url: hookUrl } });
  t.equal(created.status, 202);
  const id = created.body.id as string;
  await waitForEvent(30_000);
  t.equal(received.length, 1);
  const { headers, body } = received[0]!;
  const event = JSON.parse(body);
  t.equal(event.event, 'job.completed');
  t.equal(event.job.id, id);
  t.equal(event.job.status, 'completed');
  t.strictSame([event.job.results.valid, event.job.results.invalid, event.job.results.credits_charged], [1, 1, 1]);
  t.equal(headers['x-webhook-id'], event.id, 'the header carries the event id of the body');
  t.match(headers['content-type'], /^application\/json/);
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(headers['x-signature']));
  t.ok(m, `X-Signature shape: ${headers['x-signature']}`);
  const expected = createHmac('sha256', secret).update(`${m![1]}.${body}`).digest('hex');
  t.equal(m![2], expected, 'HMAC-SHA256(the account\'s secret, t + "." + body)');
  const status = await stack.call('GET', `/v1/csv/jobs/${id}`);
  t.strictSame(event.job, status.body, 'the body is the status resource as GET shows it');
  // The dispatcher marks the event delivered once our 204 reached it: after the receiver saw the
  // request, so wait for the outbox to leave `pending` (on PostgreSQL this can take a moment).
  let stored = await stack.store.webhooks.listForJob(id);
  for (const end = Date.now() + 10_000; stored.some((e) => e.status === 'pending') && Date.now() < end; ) {
    await new Promise((r) => setTimeout(r, 50));
    stored = await stack.store.webhooks.listForJob(id);
  }
  t.strictSame(stored.map((e) => [e.id, e.event, e.status]), [[event.id, 'job.completed', 'delivered']]);
});

t.test('SVC_OUTBOUND_ALLOW_NETWORKS opens the networks named and nothing else', async (t) => {
  for (const url of ['http://10.0.0.5/hook', 'http://192.168.1.1/hook', 'http://169.254.169.254/latest/meta-data', 'http://[fd00::1]/hook']) {
    const r = await stack.call('POST', '/v1/validate/batch', { body: { emails: ['jane.doe@accept.test'], webhook_url: url } });
    t.strictSame([r.status, r.body.code], [400, 'invalid_webhook_url'], url);
  }
  const ok = await stack.call('POST', '/v1/validate/batch', { body: { emails: ['jane.doe@accept.test'], webhook_url: 'http://localhost:1/hook' } });
  t.equal(ok.status, 202, 'a localhost receiver is accepted');
});
