// A 10,000-address JSON job on the simulated internet (the acceptance test "a 10,000-address job with every
// sim behaviour gives the same per-row verdicts as the sync endpoint, the exact 2.2 counters and
// exact credits"). The input mixes every sim domain: known mailboxes, role accounts, generated
// unknown users on servers that refuse them (every dialect: enhanced codes, text only, 553,
// multi-line, HELO only, STARTTLS, MX failover, implicit MX, the Postfix limits), catch-all and
// disposable domains, greylisting (passed on the re-probe) and greylisting for ever, DNS failures,
// dead and refusing servers, a few tarpitted addresses, an IDN in both forms, SMTPUTF8, bad syntax,
// and repeats with the domain in another case.
//
// The job runs on one stack; the sync bulk endpoint (requests of 100) gets every distinct input
// string on a second, identical stack with its own simulated internet, so neither side answers
// from a cache or a greylist the other one filled, and both meet greylisting fresh: the sim lets a
// greylisted pair through 300 ms after its first attempt, which the job's re-probe (500 ms later)
// and the sync retry (SVC_SMTP_RETRY_DELAY_MS, 400 ms, on a new session) both wait out.
//
// Checked: per row, the job's verdict (result and reason_code) is the sync verdict for that string
// and, where the sim's table says, the expected one; the 2.2 counters are the CSV counted; credits
// reserved = charged + refunded; the ledger has one reserve, one charge and one release; the
// balance paid exactly the High-Value Validations.
//
// The input order is shuffled with a seed printed by the test: JOBS_SEED=<seed> replays it.

import t from 'tap';
import { makeKey, startStack } from '../helpers/stack.ts';
import { countersFrom, dedupeKeyOf, everyBehaviourJob, parseResults, seededRandom, seedFrom, shownCell, verdictKey } from '../helpers/jobs.ts';

t.setTimeout(240_000);
const SEED = seedFrom(process.env.JOBS_SEED);
const rand = seededRandom(SEED);
t.comment(`JOBS_SEED=${SEED}`);

const ENV = {
  SVC_JOB_GREYLIST_DELAY_MS: '500',
  SVC_JOB_GREYLIST_ATTEMPTS: '3',
  SVC_SECRET: 'jobs-10k-secret-0123456789abcdef',
  // Both stacks and both simulated internets share this process: room for a busy event loop, so a
  // slow turn is never taken for a timeout (the tarpit still answers only after 5 s).
  SVC_SMTP_TIMEOUT_MS: '3000',
  SVC_DNS_TIMEOUT_MS: '1500',
};
const [jobStack, syncStack] = await Promise.all([startStack({ sim: { greylistMs: 300 }, env: ENV }), startStack({ sim: { greylistMs: 300 }, env: ENV })]);
t.teardown(() => Promise.all([jobStack.close(), syncStack.close()]));

// The input (test/helpers/jobs.ts, shared with cluster-10k.test.ts): every sim behaviour, 10,000 rows.
const { rows, emails, unique: UNIQUE } = everyBehaviourJob(rand);
const TOTAL_ROWS = emails.length;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

t.test(`a 10,000-address job of every sim behaviour: the sync verdicts, the exact 2.2 counters and credits (JOBS_SEED=${SEED})`, async (t) => {
  const t0 = Date.now();
  const at = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const CREDITS = 20_000;
  const { key, accountId } = await makeKey(jobStack, { credits: CREDITS });
  const created = await jobStack.call('POST', '/v1/validate/batch', { key, body: { emails } });
  t.equal(created.status, 202, 'POST /v1/validate/batch answers 202');
  t.match(created.body, { status: 'queued', total_rows: TOTAL_ROWS, unique_emails: UNIQUE, credits_reserved: UNIQUE });
  const id: string = created.body.id;

  // Meanwhile, every distinct string through the sync bulk endpoint of the other stack.
  const sync = new Map<string, string>();
  let syncFinished = false;
  // Progress every 20 s (a slow run says which half is slow).
  const progress = setInterval(() => t.comment(`${at()}: job ${job?.progress?.processed ?? 0}/${UNIQUE}, sync ${sync.size} strings${syncFinished ? ' (done)' : ''}`), 20_000);
  t.teardown(() => clearInterval(progress));
  const syncDone = (async () => {
    const { key: syncKey } = await makeKey(syncStack, { credits: 50_000 });
    const distinct = [...new Set(emails)];
    const batches: string[][] = [];
    for (let i = 0; i < distinct.length; i += 100) batches.push(distinct.slice(i, i + 100));
    let next = 0;
    const worker = async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        const r = await syncStack.call('POST', '/v1/validate/bulk', { key: syncKey, body: { emails: batch } });
        if (r.status !== 200) throw new Error(`POST /v1/validate/bulk: ${r.status} ${r.text.slice(0, 300)}`);
        for (const [j, res] of (r.body.results as Array<{ result: string; reason_code: string }>).entries()) sync.set(batch[j]!, verdictKey(res));
      }
    };
    await Promise.all(Array.from({ length: 4 }, worker));
    syncFinished = true;
    return at();
  })();

  let job: any;
  for (;;) {
    const r = await jobStack.call('GET', `/v1/csv/jobs/${id}`, { key });
    job = r.body;
    if (!['queued', 'processing'].includes(job.status)) break;
    if (Date.now() - t0 > 180_000) throw new Error(`job still ${job.status} (${job.progress.processed}/${UNIQUE})`);
    await sleep(250);
  }
  const jobTime = at();
  t.equal(job.status, 'completed', `the job completed (${jobTime})`);
  t.strictSame(job.progress, { processed: UNIQUE, total: UNIQUE, percent: 100 });
  const syncTime = await syncDone;
  t.comment(`job completed at ${jobTime}, sync bulk done at ${syncTime} (${TOTAL_ROWS} rows, ${UNIQUE} unique)`);

  // The results CSV: one row per input row, in order.
  const link = await jobStack.call('GET', `/v1/csv/jobs/${id}/download?mode=url`, { key });
  const res = await fetch(link.body.url.replace(jobStack.svc.services.config.publicUrl, jobStack.url));
  const results = parseResults(await res.text());
  t.equal(results.length, TOTAL_ROWS, 'one row per input row');
  t.strictSame(results.map((r) => r.email), emails.map(shownCell), 'in input order');

  // Per row: the sync verdict of the same string, and the sim's expectation. Differences are
  // summed up by domain and verdicts, with a few addresses each.
  const differ = new Map<string, string[]>();
  const unexpected = new Map<string, string[]>();
  const note = (m: Map<string, string[]>, k: string, email: string) => {
    const l = m.get(k) ?? [];
    l.push(email);
    m.set(k, l);
  };
  const domainOf = (e: string) => (e.includes('@') ? e.slice(e.lastIndexOf('@') + 1).toLowerCase() : '(no domain)');
  for (const [i, r] of results.entries()) {
    const e = emails[i]!;
    const got = verdictKey(r);
    if (sync.get(e) !== got) note(differ, `${domainOf(e)}: job ${got}, sync ${sync.get(e)}`, e);
    if (rows[i]!.expect && rows[i]!.expect !== got) note(unexpected, `${domainOf(e)}: job ${got}, the sim says ${rows[i]!.expect}`, e);
  }
  const summary = (m: Map<string, string[]>) => [...m].map(([k, l]) => `${k} (${l.length} rows: ${l.slice(0, 3).join(' ')}${l.length > 3 ? ' …' : ''})`);
  t.strictSame(summary(differ), [], 'every row has the sync endpoint\'s verdict');
  t.strictSame(summary(unexpected), [], 'every row has the sim\'s verdict');
  const kinds = new Set(results.map(verdictKey));
  t.comment(`${kinds.size} distinct verdicts: ${[...kinds].sort().join(', ')}`);

  // First occurrences carry the charge; repeats say duplicate_in_job and cost nothing.
  const firsts: typeof results = [];
  const seenIdx = new Set<string>();
  let badDup = 0;
  for (const [i, r] of results.entries()) {
    const k = dedupeKeyOf(rows[i]!);
    if (seenIdx.has(k)) {
      if (r.charge_reason !== 'duplicate_in_job' || r.credits_charged !== '0') badDup++;
    } else {
      seenIdx.add(k);
      firsts.push(r);
      if (r.charge_reason === 'duplicate_in_job') badDup++;
    }
  }
  t.equal(badDup, 0, 'repeats are duplicate_in_job at 0 credits, first occurrences are not');
  t.equal(firsts.length, UNIQUE, 'one first occurrence per unique address');

  // The 2.2 counters and the credits, exact.
  const expected = countersFrom(firsts, TOTAL_ROWS);
  t.strictSame(job.results, expected, 'the 2.2 counters are the CSV counted');
  const charged = expected.credits_charged!;
  t.equal(charged, firsts.filter((r) => r.result === 'valid').length, 'one credit per valid (High-Value) result');
  t.equal(job.results.credits_reserved, job.results.credits_charged + job.results.credits_refunded, 'reserved = charged + refunded');
  t.strictSame(job.credit_reservation, { reserved: true, reserved_credits: UNIQUE, credits_charged: charged, credits_consumed: charged, refunded_credits: UNIQUE - charged, credits_per_high_value_validation: 1, finalized: true });
  const balance = await jobStack.call('GET', '/v1/credits', { key });
  t.strictSame([balance.body.balance, balance.body.reserved], [CREDITS - charged, 0], 'the balance paid exactly the charge');
  t.strictSame(await jobStack.store.ledger.totals(accountId), { balance: CREDITS - charged, reserved: 0 }, 'the ledger agrees');
  const ledger = (await jobStack.store.ledger.entries(accountId, 100)).filter((e) => e.reservation_id !== null).map((e) => [e.kind, e.amount]);
  t.strictSame(ledger, [['release', UNIQUE - charged], ['charge', charged], ['reserve', UNIQUE]], 'one reserve, one charge, one release');
  t.comment(`wall time ${at()}`);
});
