// /ready in the cluster profile (docs/api.md): with KAFKA_BROKERS a `kafka`
// check (a metadata request through the bus's admin client), with CLICKHOUSE_URL a `clickhouse`
// check (SELECT 1), over HTTP on the embedded stack. Up when the servers of scripts/infra-up.sh
// answer (each part is skipped otherwise, or fails under CI_REQUIRE_SERVICES=1); down is a
// ClickHouse URL with nothing behind it, and a Kafka bus pointed at a closed port: 503 not_ready
// with the check named.

import { randomBytes } from 'node:crypto';
import t from 'tap';
import { kafkaAdmin, kafkaLogLevel, KafkaBus } from '@svc/bus';
import { startStack } from '../helpers/stack.ts';
import { dropKafkaPrefix } from '../helpers/cluster.ts';

t.setTimeout(120_000);

const CH_URL = process.env.CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';
const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';

async function clickhouseDown(): Promise<string | undefined> {
  try {
    const res = await fetch(`${CH_URL}/?query=SELECT%201`, { signal: AbortSignal.timeout(2000) });
    return res.ok ? undefined : `HTTP ${res.status}`;
  } catch (err) {
    return (err as Error).message;
  }
}

async function kafkaDown(): Promise<string | undefined> {
  const admin = kafkaAdmin({ clientId: 'ready-test-probe', brokers: BROKERS.split(','), retry: { retries: 1 } });
  try {
    await admin.connect();
    await admin.listTopics();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

function skip(t: Tap, what: string, why: string): void {
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`${what} is required (CI_REQUIRE_SERVICES=1): ${why}`);
  else t.comment(`${what} unreachable (${why}): skipped; scripts/infra-up.sh starts it`);
}

interface Tap {
  fail(m: string): void;
  comment(m: string): void;
}

t.test('CLICKHOUSE_URL with nothing behind it: clickhouse reported failed, the service still ready', async (t) => {
  const stack = await startStack({ env: { CLICKHOUSE_URL: 'http://127.0.0.1:1' } });
  t.teardown(() => stack.close());
  const r = await stack.call('GET', '/ready', { key: null });
  t.equal(r.status, 200);
  t.equal(r.body.status, 'ready');
  t.match(r.body.checks, { clickhouse: 'failed', redis: 'ok', dns: 'ok', smtp: 'ok' });
  t.equal(r.body.errors, undefined, 'no errors: analytics alone does not make it not ready');
  // Validation still answers while analytics is down (the decisions wait in the buffer).
  const v = await stack.call('POST', '/v1/validate', { body: { email: 'jane.doe@accept.test' } });
  t.equal(v.status, 200);
  t.ok(stack.svc.services.analytics.pending >= 1, 'the decision waits in the buffer');
});

const chWhy = await clickhouseDown();
const kafkaWhy = await kafkaDown();

t.test('KAFKA_BROKERS and CLICKHOUSE_URL up: kafka and clickhouse ok; a broker that does not answer fails kafka', async (t) => {
  if (chWhy) skip(t, `ClickHouse at ${CH_URL}`, chWhy);
  if (kafkaWhy) skip(t, `Kafka at ${BROKERS}`, kafkaWhy);
  if (chWhy && kafkaWhy) return;
  const database = `svc_ready_${randomBytes(4).toString('hex')}`;
  const env: Record<string, string> = {};
  if (!chWhy) Object.assign(env, { CLICKHOUSE_URL: CH_URL, SVC_CLICKHOUSE_DATABASE: database });
  const prefix = `tready${randomBytes(4).toString('hex')}.`;
  if (!kafkaWhy) Object.assign(env, { KAFKA_BROKERS: BROKERS, SVC_KAFKA_TOPIC_PREFIX: prefix, SVC_KAFKA_PARTITIONS: '2' });
  const stack = await startStack({ env });
  t.teardown(async () => {
    await stack.close();
    if (!chWhy) await fetch(`${CH_URL}/`, { method: 'POST', body: `DROP DATABASE IF EXISTS ${database}` }).catch(() => {});
    if (!kafkaWhy) await dropKafkaPrefix(prefix);
  });
  const r = await stack.call('GET', '/ready', { key: null });
  t.equal(r.status, 200, JSON.stringify(r.body));
  t.equal(r.body.status, 'ready');
  if (!kafkaWhy) t.equal(r.body.checks.kafka, 'ok');
  if (!chWhy) t.equal(r.body.checks.clickhouse, 'ok');

  if (!kafkaWhy) {
    // The same check on a bus whose broker is a closed port.
    const readiness = stack.svc.services.readiness;
    const saved = readiness.deps.kafkaPing;
    const dead = new KafkaBus({ brokers: ['127.0.0.1:1'], clientId: 'ready-test-dead', groupPrefix: 'ready-test', logLevel: kafkaLogLevel.NOTHING, retry: { retries: 0 } });
    readiness.deps.kafkaPing = () => dead.ping();
    t.teardown(() => dead.close());
    await readiness.refresh();
    const down = await stack.call('GET', '/ready', { key: null });
    t.equal(down.status, 503);
    t.equal(down.body.code, 'not_ready');
    t.equal(down.body.checks.kafka, 'failed');
    t.ok(down.body.errors.some((e: string) => e.startsWith('kafka: ')), down.body.errors.join('; '));
    readiness.deps.kafkaPing = saved;
    await readiness.refresh();
    t.equal((await stack.call('GET', '/ready', { key: null })).status, 200, 'ready again');
  }
});
