// Every validation decision goes to analytics (docs/decisions/storage-and-cluster.md "Analytics"), end
// to end on the embedded stack: a single validation, a bulk and a small JSON job each leave
// exactly the expected decision rows (read back through the port after flush()), with source,
// job id, account, credits, the MX host that answered (null without an SMTP answer), and never
// the address itself; an idempotent replay adds nothing, nor does a job decision delivered again.
// Then the same with CLICKHOUSE_URL (a database of its own) when ClickHouse answers at
// 127.0.0.1:8123 (scripts/infra-up.sh), or CLICKHOUSE_URL.

import { createHash, randomBytes } from 'node:crypto';
import t, { type Test } from 'tap';
import type { Analytics, Decision } from '@svc/store';
import { CLUSTER_PROFILE, makeKey, startStack, TEST_PROFILE, type Stack } from '../helpers/stack.ts';
import { until } from '../helpers/until.ts';

t.setTimeout(180_000);

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const CH_URL = process.env.CLICKHOUSE_URL ?? 'http://127.0.0.1:8123';

type Json = Record<string, any>;

async function poll(stack: Stack, key: string, id: string, ms = 60_000): Promise<Json> {
  const end = Date.now() + ms;
  for (;;) {
    const r = await stack.call('GET', `/v1/csv/jobs/${id}`, { key });
    if (r.status !== 200) throw new Error(`GET job: ${r.status} ${r.text}`);
    if (['completed', 'failed', 'canceled'].includes(r.body.status)) return r.body;
    if (Date.now() > end) throw new Error(`job ${id} still ${r.body.status}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** The one decision of an address (by its normalised form) for the account; fails on any other count. */
async function only(t: Test, analytics: Analytics, accountId: string, normalised: string): Promise<Decision> {
  const rows = await analytics.decisionsFor({ account_id: accountId, email_hash: sha(normalised) });
  t.equal(rows.length, 1, `one decision for ${normalised}`);
  return rows[0]!;
}

/**
 * The scenario, on one stack. `rawRows` reads the whole table as the backend holds it (for the
 * check that no address is stored).
 */
async function scenario(t: Test, stack: Stack, rawRows: () => Promise<Array<Record<string, unknown>>>): Promise<void> {
  const analytics = stack.svc.services.analytics;
  const { key, accountId } = await makeKey(stack, { credits: 100 });
  const from = new Date(Date.now() - 1000);
  const submitted: string[] = [];

  await t.test('a single validation: one decision, source single, the MX host that answered', async (t) => {
    submitted.push('jane.doe@accept.test');
    const r = await stack.call('POST', '/v1/validate', { key, body: { email: 'jane.doe@accept.test' } });
    t.equal(r.status, 200);
    t.notOk('mx_host' in r.body || 'latency_ms' in r.body || 'chargeable' in r.body, 'the response shape is unchanged');
    await analytics.flush();
    const d = await only(t, analytics, accountId, 'jane.doe@accept.test');
    t.match(d, {
      id: `${r.headers.get('x-request-id')}:0`,
      account_id: accountId,
      domain: 'accept.test',
      result: 'valid',
      reason_code: 'accepted',
      layer: 'smtp',
      mx_host: 'mx1.accept.test',
      job_id: null,
      source: 'single',
      credits_charged: 1,
    });
    t.ok(d.latency_ms >= 0 && d.latency_ms < 30_000, `latency ${d.latency_ms} ms`);
    t.ok(d.decided_at.getTime() >= from.getTime() && d.decided_at.getTime() <= Date.now());
  });

  await t.test('a bulk: one decision per submitted string, in order, with its own credits', async (t) => {
    const emails = ['john.smith@accept.test', 'not-an-email', 'x@nxdomain.test', 'jane.doe@multimx.test', 'john.smith@ACCEPT.test', 'no.such.user@accept.test'];
    submitted.push(...emails);
    const r = await stack.call('POST', '/v1/validate/bulk', { key, body: { emails } });
    t.equal(r.status, 200);
    t.strictSame(Object.keys(r.body).sort(), ['results', 'summary']);
    t.equal(r.body.summary.credits_charged, 2);
    await analytics.flush();
    const reqId = r.headers.get('x-request-id');
    const john = await analytics.decisionsFor({ account_id: accountId, email_hash: sha('john.smith@accept.test') });
    t.strictSame(
      john.map((d) => [d.id, d.source, d.credits_charged, d.mx_host]).sort(),
      [
        [`${reqId}:0`, 'bulk', 1, 'mx1.accept.test'],
        [`${reqId}:4`, 'bulk', 0, 'mx1.accept.test'], // the same mailbox again in the request: answered by the same probe, not charged
      ].sort(),
      'both spellings of one mailbox share its hash; the repeat is not charged',
    );
    t.match(await only(t, analytics, accountId, 'not-an-email'), { id: `${reqId}:1`, result: 'invalid', reason_code: 'invalid_syntax', layer: 'syntax', mx_host: null, domain: '(none)', credits_charged: 0, source: 'bulk' });
    t.match(await only(t, analytics, accountId, 'x@nxdomain.test'), { id: `${reqId}:2`, result: 'invalid', reason_code: 'nxdomain', layer: 'dns', mx_host: null, domain: 'nxdomain.test', credits_charged: 0 });
    t.match(await only(t, analytics, accountId, 'jane.doe@multimx.test'), { id: `${reqId}:3`, result: 'valid', mx_host: 'mx2.multimx.test', credits_charged: 1 }, 'the failover MX that answered');
    t.match(await only(t, analytics, accountId, 'no.such.user@accept.test'), { id: `${reqId}:5`, result: 'invalid', reason_code: 'mailbox_not_found', mx_host: 'mx1.accept.test', credits_charged: 0 });
  });

  await t.test('a cached verdict is still a decision (no MX host); an idempotent replay adds none', async (t) => {
    const headers = { 'idempotency-key': `analytics-${randomBytes(4).toString('hex')}` };
    const first = await stack.call('POST', '/v1/validate', { key, headers, body: { email: 'jane.doe@accept.test' } });
    const replay = await stack.call('POST', '/v1/validate', { key, headers, body: { email: 'jane.doe@accept.test' } });
    t.equal(first.status, 200);
    t.equal(replay.headers.get('idempotent-replayed'), 'true');
    await analytics.flush();
    const rows = await analytics.decisionsFor({ account_id: accountId, email_hash: sha('jane.doe@accept.test') });
    t.equal(rows.length, 2, 'the first single validation and this one; the replay is not a decision');
    t.match(rows.find((d) => d.id === `${first.headers.get('x-request-id')}:0`), { source: 'single', result: 'valid', layer: 'smtp', mx_host: null, credits_charged: 1 });
  });

  await t.test('a JSON job: one decision per unique address, job id and row index; a redelivery counts once', async (t) => {
    const emails = ['"john..doe"@accept.test', 'info@accept.test', '"john..doe"@ACCEPT.test', 'bad address', 'no.such.user@multimx.test'];
    submitted.push(...emails);
    const created = await stack.call('POST', '/v1/validate/batch', { key, body: { emails } });
    t.equal(created.status, 202);
    const job = await poll(stack, key, created.body.id);
    t.equal(job.status, 'completed');
    await analytics.flush();
    // A job's decisions reach analytics through the decision outbox: its relay ships them after
    // the results are recorded, not before the job reads completed. Wait for them to land.
    const unique = ['"john..doe"@accept.test', 'info@accept.test', 'bad address', 'no.such.user@multimx.test'];
    await until(async () => (await Promise.all(unique.map((u) => analytics.decisionsFor({ account_id: accountId, email_hash: sha(u) })))).every((rows) => rows.length > 0), 15_000, 'the job decisions in analytics');
    const jobId = job.id as string;
    const d1 = await only(t, analytics, accountId, '"john..doe"@accept.test');
    t.match(d1, { job_id: jobId, source: 'job', result: 'valid', mx_host: 'mx1.accept.test', credits_charged: 1, account_id: accountId });
    t.match(d1.id, new RegExp(`^${jobId}:\\d+$`));
    t.match(await only(t, analytics, accountId, 'info@accept.test'), { job_id: jobId, source: 'job', result: 'valid_role_based', mx_host: 'mx1.accept.test', credits_charged: 0 });
    t.match(await only(t, analytics, accountId, 'bad address'), { job_id: jobId, layer: 'syntax', mx_host: null, credits_charged: 0 });
    t.match(await only(t, analytics, accountId, 'no.such.user@multimx.test'), { job_id: jobId, result: 'invalid', mx_host: 'mx2.multimx.test' });
    const counts = await analytics.countByResult({ account_id: accountId, from, to: new Date(Date.now() + 1000) });
    // single 1 + bulk 6 + cached 1 + job 4 unique
    t.strictSame(counts, { valid: 6, valid_role_based: 1, risky: 0, invalid: 5, unknown: 0 }, 'exactly these decisions');

    // The job's decisions, delivered again (as the decision outbox's relay may after a crash: the
    // rows it stored, their times included): the same ids, nothing added. A results message
    // delivered again makes no decisions at all (its rows are done already: the decision outbox
    // test of packages/store/test/jobs.test.ts).
    const stored = await stack.store.jobs.results(jobId, -1, 100);
    t.equal(stored.length, 4);
    const delivered = await Promise.all(unique.map((u) => only(t, analytics, accountId, u)));
    t.strictSame(delivered.map((d) => d.id).sort(), stored.map((r) => `${jobId}:${r.idx}`).sort(), 'one decision per stored result');
    await analytics.record(delivered);
    await analytics.flush();
    t.strictSame(await analytics.countByResult({ account_id: accountId, from, to: new Date(Date.now() + 1000) }), counts, 'a redelivered decision counts once');
  });

  await t.test('no address is stored anywhere in the table', async (t) => {
    const rows = await rawRows();
    // ClickHouse may still hold a redelivered row twice until a merge folds it: distinct ids.
    t.equal(new Set(rows.filter((r) => r.account_id === accountId).map((r) => r.id)).size, 12);
    // (email_key, the SQL table's bigint of the hash, comes back as a BigInt.)
    const text = JSON.stringify(rows, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)).toLowerCase();
    t.notOk(text.includes('@'), 'no column holds an address');
    for (const e of submitted) {
      t.notOk(text.includes(e.toLowerCase()), `no trace of ${e}`);
      const local = e.toLowerCase().split('@')[0]!;
      if (local.length >= 8) t.notOk(text.includes(local), `no trace of ${e}'s local part`);
    }
  });
}

t.test(`${TEST_PROFILE}: decisions in the relational store (SqlAnalytics)`, async (t) => {
  // In the cluster profile without CLICKHOUSE_URL (empty is unset): SqlAnalytics on PostgreSQL.
  const stack = await startStack(CLUSTER_PROFILE ? { env: { CLICKHOUSE_URL: '' } } : {});
  t.teardown(() => stack.close());
  await scenario(t, stack, () => stack.db.query('SELECT * FROM validation_decisions'));
});

async function clickhouseUp(): Promise<string | undefined> {
  try {
    const res = await fetch(`${CH_URL}/?query=SELECT%201`, { signal: AbortSignal.timeout(2000) });
    return res.ok && (await res.text()).trim() === '1' ? undefined : `HTTP ${res.status}`;
  } catch (err) {
    return (err as Error).message;
  }
}

const chWhy = await clickhouseUp();
if (chWhy) {
  if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`ClickHouse at ${CH_URL} is required (CI_REQUIRE_SERVICES=1): ${chWhy}`);
  else t.comment(`ClickHouse at ${CH_URL} is unreachable (${chWhy}): the CLICKHOUSE_URL run is skipped; scripts/infra-up.sh starts it`);
} else {
  t.test('cluster: decisions in ClickHouse (CLICKHOUSE_URL), and /ready checks it', async (t) => {
    const database = `svc_test_${randomBytes(4).toString('hex')}`;
    const ch = async (query: string): Promise<string> => {
      const res = await fetch(`${CH_URL}/`, { method: 'POST', body: query });
      const text = await res.text();
      if (!res.ok) throw new Error(`ClickHouse: ${text}`);
      return text;
    };
    const stack = await startStack({ env: { CLICKHOUSE_URL: CH_URL, SVC_CLICKHOUSE_DATABASE: database } });
    t.teardown(async () => {
      await stack.close();
      await ch(`DROP DATABASE IF EXISTS ${database}`);
    });
    t.equal(stack.svc.services.analytics.constructor.name, 'ClickHouseAnalytics');
    const ready = await stack.call('GET', '/ready', { key: null });
    t.equal(ready.status, 200);
    t.equal(ready.body.checks.clickhouse, 'ok');
    await scenario(t, stack, async () =>
      (await ch(`SELECT * FROM ${database}.validation_decisions FORMAT JSONEachRow`))
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    );
  });
}
