// The cluster profile end to end, on the real servers of scripts/infra-up.sh: one front
// (SVC_ROLE=front) and two workers (SVC_ROLE=worker) sharing PostgreSQL (DATABASE_URL), Redis
// (REDIS_URL: caches, rate limits and the per-MX session limit) and Kafka (KAFKA_BROKERS: the job
// transport), in this process as three services with their own connections. A JSON job submitted
// to the front is probed by the workers and read back from the front: every row once, each sim
// domain's expected verdict, the 2.2 counters and exact credits. A missing server skips the file,
// or fails it under CI_REQUIRE_SERVICES=1.

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { loadConfig, startService, type RunningService } from '@svc/runtime';
import { startSim, SIM_DOMAINS, SIM_UNKNOWN_LOCAL } from '../sim/index.ts';
import { stackEnv } from '../helpers/stack.ts';
import { BROKERS, REDIS_URL, callApi, clusterServersUnreachable, runUnlessMissing, dropKafkaPrefix, dropRedisPrefix } from '../helpers/cluster.ts';
import { freshSchema } from '../helpers/postgres.ts';
import { countersFrom, parseResults, verdictKey } from '../helpers/jobs.ts';

t.setTimeout(240_000);


await runUnlessMissing(await clusterServersUnreachable(), run);

async function run(): Promise<void> {
  const sim = await startSim({ tarpitMs: 5000, greylistMs: 300 });
  t.teardown(() => sim.close());
  const schema = await freshSchema();
  const prefix = `t${randomBytes(4).toString('hex')}.`;
  const dirs: string[] = [];
  const started: RunningService[] = [];
  t.teardown(async () => {
    for (const s of started.reverse()) await s.close().catch(() => {});
    await schema.drop();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await dropKafkaPrefix(prefix);
    await dropRedisPrefix(`${prefix.replace(/\.$/, '')}:`).catch(() => {});
  });
  const start = async (role: 'front' | 'worker'): Promise<RunningService> => {
    const dir = mkdtempSync(path.join(os.tmpdir(), `svc-cluster-${role}-`));
    dirs.push(dir);
    const env = stackEnv(sim, dir, {
      DATABASE_URL: schema.url,
      // Keys of this test only (ioredis's keyPrefix): the rate-limit counters of 127.0.0.1 and the
      // bootstrap key are otherwise shared with every test on this Redis.
      REDIS_URL: `${REDIS_URL}${REDIS_URL.includes('?') ? '&' : '?'}keyPrefix=${prefix.replace(/\.$/, '')}:`,
      KAFKA_BROKERS: BROKERS.join(','),
      SVC_KAFKA_TOPIC_PREFIX: prefix,
      SVC_KAFKA_PARTITIONS: '6',
      SVC_ROLE: role,
      SVC_BOOTSTRAP_CREDITS: '5000',
      SVC_JOB_GREYLIST_DELAY_MS: '500',
      SVC_JOB_GREYLIST_ATTEMPTS: '3',
      SVC_SECRET: 'cluster-test-secret-0123456789',
    });
    const svc = await startService(loadConfig(env));
    started.push(svc);
    return svc;
  };
  const front = await start('front');
  await start('worker');
  await start('worker');

  const call = (method: string, route: string, body?: unknown) => callApi(front.url, method, route, body);

  t.test('a JSON job through the front, probed by two workers over Kafka: every row once, the expected verdicts, exact credits', async (t) => {
    const expected = new Map<string, string>();
    for (const d of SIM_DOMAINS) {
      const domain = d.unicode ?? d.domain;
      expected.set(`jane.doe@${domain}`, verdictKey(d.known));
      expected.set(`${SIM_UNKNOWN_LOCAL}@${domain}`, verdictKey(d.unknown));
    }
    for (let i = 0; i < 40; i++) expected.set(`user${i}@accept.test`, 'invalid/mailbox_not_found');
    const emails = [...expected.keys(), 'jane.doe@ACCEPT.test', 'not-an-email'];
    const unique = expected.size + 1; // the repeat is a spelling of jane.doe@accept.test; not-an-email is its own row

    const before = await call('GET', '/v1/credits');
    const created = await call('POST', '/v1/validate/batch', { emails });
    t.equal(created.status, 202, JSON.stringify(created.body));
    t.match(created.body, { status: 'queued', total_rows: emails.length, unique_emails: unique, credits_reserved: unique });

    let job: any;
    const deadline = Date.now() + 180_000;
    for (;;) {
      job = (await call('GET', `/v1/csv/jobs/${created.body.id}`)).body;
      if (['completed', 'failed', 'canceled'].includes(job.status)) break;
      if (Date.now() > deadline) throw new Error(`job still ${job.status}: ${JSON.stringify(job.progress)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    t.equal(job.status, 'completed');
    t.strictSame(job.progress, { processed: unique, total: unique, percent: 100 });

    const file = await call('GET', `/v1/csv/jobs/${created.body.id}/download`);
    t.equal(file.status, 200, 'the front serves the results CSV the workers rendered');
    const rows = parseResults(file.text);
    t.equal(rows.length, emails.length, 'one row per input row');
    t.strictSame(rows.map((r) => r.email), emails, 'input order');
    for (const r of rows.slice(0, expected.size)) t.equal(verdictKey(r), expected.get(r.email), r.email);
    t.equal(verdictKey(rows[expected.size]!), expected.get('jane.doe@accept.test'), 'the repeat has the first spelling\'s verdict');
    t.equal(rows[expected.size]!.charge_reason, 'duplicate_in_job');

    const counters = countersFrom(rows.filter((r) => r.charge_reason !== 'duplicate_in_job'), emails.length);
    const charged = rows.reduce((s, r) => s + Number(r.credits_charged), 0);
    t.strictSame(job.results, counters, 'the 2.2 counters, exactly as the rows count them');
    t.match(job.credit_reservation, { reserved_credits: unique, credits_charged: charged, refunded_credits: unique - charged, finalized: true }, 'reserved = charged + refunded, finalized');
    const after = await call('GET', '/v1/credits');
    t.equal(after.body.balance, before.body.balance - charged, 'the balance went down by exactly the charged credits');
    t.equal(after.body.reserved, 0, 'nothing left reserved');
  });
}
