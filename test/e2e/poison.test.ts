// Poison input and poison messages in jobs, beside other accounts' healthy jobs, over HTTP in
// either profile (TEST_PROFILE; scripts/test-cluster.sh runs it again on the cluster servers):
// - every string a job can receive (NUL, lone surrogates, C0/C1 controls, bidi overrides, a very
//   long one) is answered in the job exactly as POST /v1/validate answers it, and the job finishes;
// - a job whose results the database refuses on purpose (a trigger on job_results) has its
//   message dead-lettered after SVC_BUS_MAX_ATTEMPTS deliveries: the refused row is answered
//   `unknown`, `processing_failed`, free; every other row keeps its verdict; the credits are exact;
//   the dead letter is parked once (embedded: the dead_letters table; cluster: the Kafka topic);
//   and the other accounts' jobs, submitted after it, finish with their exact verdicts.

import t from 'tap';
import { kafkaAdmin } from '@svc/bus';
import { parseResults, type ResultRow } from '../helpers/jobs.ts';
import { BROKERS } from '../helpers/cluster.ts';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';
import { SIM_UNKNOWN_LOCAL } from '../sim/index.ts';

const stack: Stack = await startStack({ env: { SVC_BUS_MAX_ATTEMPTS: '3', SVC_JOB_GREYLIST_DELAY_MS: '500', SVC_JOB_GREYLIST_ATTEMPTS: '2' } });
t.teardown(() => stack.close());

type Json = Record<string, any>;

async function finished(key: string, id: string, ms = 90_000): Promise<Json> {
  const end = Date.now() + ms;
  for (;;) {
    const r = await stack.call('GET', `/v1/csv/jobs/${id}`, { key });
    if (r.status !== 200) throw new Error(`GET job: ${r.status} ${r.text}`);
    if (['completed', 'failed', 'canceled'].includes(r.body.status)) return r.body;
    if (Date.now() > end) throw new Error(`job ${id} still ${r.body.status} (${r.body.progress.processed}/${r.body.progress.total})`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function results(key: string, id: string): Promise<ResultRow[]> {
  const link = await stack.call('GET', `/v1/csv/jobs/${id}/download?mode=url`, { key });
  if (link.status !== 200) throw new Error(`download link: ${link.status} ${link.text}`);
  const res = await fetch(link.body.url.replace(stack.svc.services.config.publicUrl, stack.url));
  return parseResults(await res.text());
}

const submit = async (key: string, emails: string[]): Promise<string> => {
  const r = await stack.call('POST', '/v1/validate/batch', { key, body: { emails } });
  if (r.status !== 202) throw new Error(`batch: ${r.status} ${r.text}`);
  return r.body.id as string;
};

/** Healthy jobs of another account: their verdicts are known in advance. */
const HEALTHY: Array<[string, string, string]> = [
  ['jane.doe@accept.test', 'valid', 'accepted'],
  [`${SIM_UNKNOWN_LOCAL}@accept.test`, 'invalid', 'mailbox_not_found'],
  ['info@accept.test', 'valid_role_based', 'role_account'],
  ['someone@nxdomain.test', 'invalid', 'nxdomain'],
  ['not-an-email', 'invalid', 'invalid_syntax'],
];

async function healthyJobs(t: Tap, n: number): Promise<{ key: string; ids: string[] }> {
  const { key } = await makeKey(stack, { credits: 100 });
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push(await submit(key, HEALTHY.map(([e]) => e)));
  t.equal(ids.length, n);
  return { key, ids };
}

async function checkHealthy(t: Tap, key: string, ids: string[]): Promise<void> {
  for (const id of ids) {
    const job = await finished(key, id);
    t.equal(job.status, 'completed', `the other account's job ${id} completed`);
    const rows = await results(key, id);
    t.strictSame(
      rows.map((r) => [r.email, r.result, r.reason_code]),
      HEALTHY,
      `${id}: exact verdicts`,
    );
    t.equal(job.results.credits_charged, 1, 'one High-Value Validation charged');
  }
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

t.test('every string a job can receive is answered as POST /v1/validate answers it; other accounts’ jobs go on', async (t) => {
  const strings = [
    'a\u0000@nxdomain.test',
    'jane\u0000doe@accept.test',
    'jane.doe@accept.test\u0000',
    '\ud800@accept.test',
    'x@\udfffaccept.test',
    '\u0001ctl@accept.test',
    'c1\u0085@accept.test',
    'bidi\u202e@accept.test',
    'jane.doe@accept\u2066.test',
    `${'x'.repeat(200_000)}@accept.test`,
    'jane.doe@accept.test',
  ];
  const { key, accountId } = await makeKey(stack, { credits: 100 });
  const sync: Json[] = [];
  for (const email of strings) {
    const r = await stack.call('POST', '/v1/validate', { key, body: { email } });
    t.equal(r.status, 200, `/v1/validate answers ${JSON.stringify(email.slice(0, 30))} 200`);
    sync.push(r.body);
  }
  const id = await submit(key, strings);
  const others = await healthyJobs(t, 3);
  const job = await finished(key, id);
  t.equal(job.status, 'completed', 'the job of odd strings completed');
  const rows = await results(key, id);
  t.equal(rows.length, strings.length, 'one row per string');
  for (let i = 0; i < strings.length; i++) {
    const want = sync[i]!;
    const got = rows[i]!;
    t.strictSame(
      [got.result, got.reason_code, got.validation_layer, got.credits_charged],
      [want.result, want.reason_code, want.validation_layer, String(want.credits_charged)],
      `${JSON.stringify(strings[i]!.slice(0, 30))}: ${want.result}/${want.reason_code} as in the sync answer`,
    );
  }
  t.equal(sync.filter((v) => v.result === 'invalid' && v.reason_code === 'invalid_syntax').length, strings.length - 1, 'all but the plain address are invalid syntax');
  const balance = await stack.call('GET', '/v1/credits', { key });
  t.strictSame([balance.body.balance, balance.body.reserved], [100 - 2, 0], 'two credits in all: the plain address, once in sync and once in the job');
  t.equal(typeof accountId, 'string');
  await checkHealthy(t, others.key, others.ids);
});

t.test('a job whose results the database refuses: dead-lettered, the row unknown (processing_failed), credits exact; other accounts’ jobs finish', async (t) => {
  // The database refuses a result row for any address starting "poison", unless it is the
  // dead-letter answer: a content failure no retry cures, as a NUL was before the store cleaned it.
  await stack.db.query(`CREATE OR REPLACE FUNCTION poison_guard() RETURNS trigger AS $$
    BEGIN
      IF NEW.email LIKE 'poison%' AND NEW.verdict->>'reason_code' <> 'processing_failed' THEN
        RAISE EXCEPTION 'poisoned row %', NEW.idx;
      END IF;
      RETURN NEW;
    END $$ LANGUAGE plpgsql`);
  await stack.db.query('CREATE TRIGGER poison_guard BEFORE INSERT OR UPDATE ON job_results FOR EACH ROW EXECUTE FUNCTION poison_guard()');
  t.teardown(() => stack.db.query('DROP TRIGGER IF EXISTS poison_guard ON job_results'));

  const { key, accountId } = await makeKey(stack, { credits: 50 });
  const poisoned = ['poison.pill@accept.test', 'jane.doe@accept.test', 'john.smith@accept.test', `${SIM_UNKNOWN_LOCAL}@accept.test`, 'someone@nxdomain.test'];
  const id = await submit(key, poisoned);
  const others = await healthyJobs(t, 4);
  const own = await submit(key, HEALTHY.map(([e]) => e));

  const job = await finished(key, id);
  t.equal(job.status, 'completed', 'the poisoned job completed');
  const rows = await results(key, id);
  t.strictSame(
    rows.map((r) => [r.email, r.result, r.reason_code, r.validation_layer, r.credits_charged, r.charge_reason]),
    [
      ['poison.pill@accept.test', 'unknown', 'processing_failed', 'processing', '0', 'unknown_not_charged'],
      ['jane.doe@accept.test', 'valid', 'accepted', 'smtp', '1', 'high_value_validation'],
      ['john.smith@accept.test', 'valid', 'accepted', 'smtp', '1', 'high_value_validation'],
      [`${SIM_UNKNOWN_LOCAL}@accept.test`, 'invalid', 'mailbox_not_found', 'smtp', '0', 'invalid_not_charged'],
      ['someone@nxdomain.test', 'invalid', 'nxdomain', 'dns', '0', 'invalid_not_charged'],
    ],
    'only the refused row lost its verdict',
  );
  t.match(rows[0]!.reason, /processing this address failed repeatedly/);
  t.match(job.results, { unique_emails: 5, valid: 2, invalid: 2, unknown: 1, credits_reserved: 5, credits_charged: 2, credits_refunded: 3 }, 'counters and credits');
  await checkHealthy(t, others.key, others.ids);
  await checkHealthy(t, key, [own]);
  const balance = await stack.call('GET', '/v1/credits', { key });
  t.strictSame([balance.body.balance, balance.body.reserved, balance.body.available], [50 - 3, 0, 47], 'the account paid 2 + 1 credits, nothing held');

  // Parked once, with its attempts.
  if (stack.profile === 'embedded') {
    const letters = await stack.db.query<{ topic: string; key: string; attempts: number; error: string; message: string }>('SELECT topic, key, attempts, error, message FROM dead_letters');
    t.strictSame(
      letters.map((l) => [l.topic, l.key, l.attempts]),
      [['jobs.results', id, 3]],
      'one dead letter: the results message, keyed by its job, after 3 deliveries',
    );
    t.match(letters[0]!.error, /poisoned row/);
    t.equal(JSON.parse(letters[0]!.message).job_id, id);
  } else {
    const admin = kafkaAdmin({ clientId: 'poison-test', brokers: BROKERS });
    await admin.connect();
    try {
      const offsets = await admin.fetchTopicOffsets(`${stack.env.SVC_KAFKA_TOPIC_PREFIX}dead-letters`);
      t.equal(
        offsets.reduce((n, o) => n + Number(o.high), 0),
        1,
        'one dead letter on the Kafka topic',
      );
    } finally {
      await admin.disconnect();
    }
  }
  t.equal(typeof accountId, 'string');
});

// Embedded only: the in-process bus takes accounts and their jobs in turn (fairness lanes). Kafka
// keeps each partition's order: there a big job's messages ahead in a partition go first.
t.test('a big job does not hold up another account’s small job submitted after it (embedded: fairness lanes)', { skip: stack.profile === 'cluster' ? 'Kafka partitions keep their order (docs/decisions/storage-and-cluster.md "Kafka bus")' : false }, async (t) => {
  const big = await makeKey(stack, { credits: 20_000 });
  const small = await makeKey(stack, { credits: 10 });
  // A quarter of the big job on slowmx.test (every reply 150 ms late) gives it a tail of seconds:
  // its work cannot end before the small job's on a fast machine.
  const many = Array.from({ length: 6000 }, (_, i) => `lead${i}@${['accept.test', 'catchall.test', 'postfix.test', 'slowmx.test'][i % 4]}`);
  const bigId = await submit(big.key, many);
  const smallId = await submit(small.key, HEALTHY.map(([e]) => e));
  const done = await finished(small.key, smallId);
  t.equal(done.status, 'completed', 'the small job completed');
  const bigNow = (await stack.call('GET', `/v1/csv/jobs/${bigId}`, { key: big.key })).body;
  t.equal(bigNow.status, 'processing', `the big job was still running when the small one finished (${bigNow.progress.processed}/${bigNow.progress.total})`);
  t.ok(bigNow.progress.processed < bigNow.progress.total, 'with work left');
  await checkHealthy(t, small.key, [smallId]);
  const end = await finished(big.key, bigId, 180_000);
  t.equal(end.status, 'completed', 'and the big one completed too');
});
