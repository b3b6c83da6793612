// Readiness (docs/api.md): the kafka and clickhouse checks are there only when configured,
// are run by refresh() (never by reading the state), a failure or a probe that does not answer
// within the timeout makes the service not ready with the check named; clickhouseSelect1 is a
// real HTTP SELECT 1 (credentials from the URL as Basic auth).

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { clickhouseSelect1, Readiness, type ReadinessDeps } from '@svc/runtime';
import type { DnsPort } from '@svc/verifier';

const dns: DnsPort = {
  resolveMail: async () => ({ kind: 'mx', hosts: [{ exchange: 'mx.ready.test', priority: 10 }] }),
  resolveAddresses: async () => ['127.0.0.1'],
};

function readiness(extra: Partial<ReadinessDeps>): Readiness {
  return new Readiness({ dns, tcpReachable: async () => true, cachePing: async () => true, readyDomain: 'ready.test', smtpPort: 25, timeoutMs: 200, ...extra });
}

t.test('without KAFKA_BROKERS and CLICKHOUSE_URL: no kafka or clickhouse check', async (t) => {
  const r = readiness({});
  await r.refresh();
  t.strictSame(r.state, { ready: true, checks: { redis: 'ok', dns: 'ok', smtp: 'ok' }, errors: [] });
});

t.test('both up: ok, probed once per refresh, not per read', async (t) => {
  let kafka = 0;
  let clickhouse = 0;
  const r = readiness({ kafkaPing: async () => (++kafka, true), clickhousePing: async () => (++clickhouse, true) });
  await r.refresh();
  for (let i = 0; i < 100; i++) void r.state; // reads probe nothing
  t.equal(r.state.ready, true);
  t.strictSame(r.state.checks, { redis: 'ok', kafka: 'ok', clickhouse: 'ok', dns: 'ok', smtp: 'ok' });
  t.strictSame([kafka, clickhouse], [1, 1]);
});

t.test('kafka down: not ready, the check named', async (t) => {
  const r = readiness({ kafkaPing: async () => Promise.reject(new Error('Connection error: connect ECONNREFUSED 127.0.0.1:1')), clickhousePing: async () => true });
  await r.refresh();
  t.equal(r.state.ready, false);
  t.match(r.state.checks, { kafka: 'failed', clickhouse: 'ok', dns: 'ok', smtp: 'ok' });
  t.strictSame(r.state.errors, ['kafka: Connection error: connect ECONNREFUSED 127.0.0.1:1']);
});

t.test('a probe that does not answer fails within the timeout', async (t) => {
  const r = readiness({ kafkaPing: () => new Promise(() => {}), clickhousePing: async () => false });
  const started = Date.now();
  await r.refresh();
  t.ok(Date.now() - started < 2000, 'bounded by timeoutMs');
  t.match(r.state, { ready: false, checks: { kafka: 'failed', clickhouse: 'failed' } });
  t.strictSame(r.state.errors, ['kafka: no answer within 200 ms'], 'clickhouse is reported in checks, not among the reasons');
});

t.test('clickhouse down alone: reported failed, still ready (analytics waits in the buffer)', async (t) => {
  const r = readiness({ kafkaPing: async () => true, clickhousePing: async () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:8123')) });
  await r.refresh();
  t.strictSame([r.state.ready, r.state.checks.clickhouse, r.state.checks.kafka, r.state.errors], [true, 'failed', 'ok', []]);
});

t.test('clickhouseSelect1: SELECT 1 over HTTP', async (t) => {
  const seen: Array<{ url: string; auth: string | undefined }> = [];
  let status = 200;
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url ?? '', auth: req.headers.authorization });
    res.writeHead(status).end(status === 200 ? '1\n' : 'Code: 516. DB::Exception: default: Authentication failed');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as AddressInfo;
  t.equal(await clickhouseSelect1(`http://127.0.0.1:${port}`, 1000), true);
  t.equal(await clickhouseSelect1(`http://reader:p%40ss@127.0.0.1:${port}/`, 1000), true);
  t.strictSame(seen, [
    { url: '/?query=SELECT%201', auth: undefined },
    { url: '/?query=SELECT%201', auth: `Basic ${Buffer.from('reader:p@ss').toString('base64')}` },
  ]);
  status = 500;
  await t.rejects(clickhouseSelect1(`http://127.0.0.1:${port}`, 1000), /HTTP 500: Code: 516/);
  await t.rejects(clickhouseSelect1('http://127.0.0.1:1', 1000), 'nothing listening');
});
