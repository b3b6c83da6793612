// The webhook outbox (WebhooksRepo, migration 006) on both adapters: PGlite always, Postgres when
// it answers (TEST_DATABASE_URL; CI_REQUIRE_SERVICES=1 makes an unreachable server a failure).
// Times are fixed dates passed in, never the clock, so every timestamp is asserted exactly.

import t from 'tap';
import { createHash } from 'node:crypto';
import type { Db } from '../src/db/db.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { migrate, Store, webhookEventId, DEFAULT_WEBHOOK_LEASE_MS, type NewWebhookEvent, type WebhookEvent } from '../src/index.ts';
import { migratedPglite } from '../../../test/helpers/pglite.ts';
import { freshSchema, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';
import type { Tap } from './conformance.ts';

const T0 = new Date('2026-03-01T12:00:00.000Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);

interface Target {
  db: Db;
  /** A second, independent handle on the same database (another process), where the adapter has one. */
  another?: () => Promise<Db>;
}

function suite(t: Tap, open: (t: Tap) => Promise<Target>): void {
  t.test('webhookEventId is deterministic per job and event', async (t) => {
    const expected = `whk_${createHash('sha256').update('job_abc\njob.completed').digest('hex').slice(0, 24)}`;
    t.equal(webhookEventId('job_abc', 'job.completed'), expected, 'whk_ + 24 hex digits of SHA-256(job id, event)');
    t.match(expected, /^whk_[0-9a-f]{24}$/);
    t.equal(webhookEventId('job_abc', 'job.completed'), webhookEventId('job_abc', 'job.completed'), 'same input, same id');
    t.not(webhookEventId('job_abc', 'job.failed'), expected, 'the event is part of the id');
    t.not(webhookEventId('job_abd', 'job.completed'), expected, 'the job is part of the id');
  });

  t.test('outbox', async (t) => {
    const { db } = await open(t);
    const store = new Store(db);
    const acc = await store.accounts.create({ name: 'hooks' });
    const ev = (job: string, over: Partial<NewWebhookEvent> = {}): NewWebhookEvent => ({
      id: webhookEventId(job, 'job.completed'),
      accountId: acc,
      jobId: job,
      url: 'https://hooks.example/receive',
      event: 'job.completed',
      payload: JSON.stringify({ id: webhookEventId(job, 'job.completed'), event: 'job.completed', job: { id: job } }),
      createdAt: T0,
      ...over,
    });
    const row = (e: NewWebhookEvent, over: Partial<WebhookEvent> = {}): WebhookEvent => ({
      id: e.id,
      account_id: e.accountId,
      job_id: e.jobId,
      url: e.url,
      event: e.event,
      payload: e.payload,
      status: 'pending',
      attempts: 0,
      next_attempt_at: e.createdAt!,
      last_error: null,
      created_at: e.createdAt!,
      delivered_at: null,
      ...over,
    });

    await t.test('enqueue is idempotent per id, and enqueueIn commits with its transaction', async (t) => {
      const a = ev('job_a');
      t.equal(await store.webhooks.enqueue(a), true, 'first enqueue inserts');
      t.strictSame(await store.webhooks.get(a.id), row(a), 'the row as enqueued: pending, no attempt, due at created_at');
      t.equal(await store.webhooks.enqueue({ ...a, payload: '{"other":1}', url: 'https://elsewhere.example/' }), false, 'the same id again inserts nothing');
      t.strictSame(await store.webhooks.get(a.id), row(a), 'and the first payload and URL stay (every retry sends the same bytes)');

      const b = ev('job_b');
      await t.rejects(
        db.transaction(async (tx) => {
          t.equal(await store.webhooks.enqueueIn(tx, b), true, 'inserted inside the transaction');
          throw new Error('finalizer crashed');
        }),
        /finalizer crashed/,
      );
      t.equal(await store.webhooks.get(b.id), undefined, 'a rolled-back transaction leaves no event');
      t.equal(await db.transaction((tx) => store.webhooks.enqueueIn(tx, b)), true, 'the retried finalizer inserts it');
      t.equal(await db.transaction((tx) => store.webhooks.enqueueIn(tx, b)), false, 'a finalizer run twice inserts nothing the second time');
      t.strictSame(await store.webhooks.listForJob('job_b'), [row(b)], 'one event for the job');

      const f = ev('job_b', { id: webhookEventId('job_b', 'job.failed'), event: 'job.failed', createdAt: at(1000) });
      t.equal(await store.webhooks.enqueue(f), true, 'another event of the same job');
      t.strictSame(await store.webhooks.listForJob('job_b'), [row(b), row(f)], 'listForJob: oldest first');
      t.strictSame(await store.webhooks.listForJob('job_none'), [], 'no events for an unknown job');
      t.equal(await store.webhooks.get('whk_nope'), undefined, 'get: unknown id');

      const noTime = ev('job_now', { createdAt: undefined });
      const before = Date.now();
      t.equal(await store.webhooks.enqueue(noTime), true);
      const r = (await store.webhooks.get(noTime.id))!;
      t.ok(r.created_at.getTime() >= before - 5_000 && r.created_at.getTime() <= Date.now() + 5_000, 'without createdAt: the database clock');
      t.equal(r.next_attempt_at.getTime(), r.created_at.getTime(), 'and due at once');

      await t.rejects(store.webhooks.enqueue({ ...ev('job_bad'), event: 'job.started' as never }), 'an unknown event is refused (CHECK)');
      await t.rejects(store.webhooks.enqueue({ ...ev('job_bad2'), accountId: 'acc_nope' }), 'an unknown account is refused (foreign key)');
      await db.query('DELETE FROM webhook_events');
    });

    await t.test('due claims with a lease; outcomes are fenced by the attempt', async (t) => {
      const e1 = ev('job_1', { createdAt: at(0) });
      const e2 = ev('job_2', { createdAt: at(10) });
      const e3 = ev('job_3', { createdAt: at(20) });
      const later = ev('job_later', { createdAt: at(60_000) });
      for (const e of [e3, later, e1, e2]) await store.webhooks.enqueue(e);

      t.strictSame(await store.webhooks.due(at(-1), 10), [], 'nothing is due before its time');
      const lease = 30_000;
      const first = await store.webhooks.due(at(20), 2, lease);
      t.strictSame(first, [row(e1, { attempts: 1, next_attempt_at: at(20 + lease) }), row(e2, { attempts: 1, next_attempt_at: at(20 + lease) })], 'the two oldest due, leased, attempt counted');
      const second = await store.webhooks.due(at(20), 10, lease);
      t.strictSame(second, [row(e3, { attempts: 1, next_attempt_at: at(20 + lease) })], 'the rest; the leased ones are not claimed again');
      t.strictSame(await store.webhooks.due(at(20 + lease - 1), 10, lease), [], 'nothing while the leases run (later is not due yet either)');

      // The claimer of e1 died: once its lease has passed, another dispatcher claims it again.
      const again = await store.webhooks.due(at(20 + lease), 1, lease);
      t.strictSame(again, [row(e1, { attempts: 2, next_attempt_at: at(20 + 2 * lease) })], 'an expired lease is claimed again, attempt 2');
      t.equal(await store.webhooks.retryLater(e1.id, at(99_000), 'HTTP 500', 1), false, 'the stale claim (attempt 1) cannot reschedule it');
      t.equal(await store.webhooks.giveUp(e1.id, 'HTTP 500', 1), false, 'nor give it up');
      t.equal(await store.webhooks.retryLater(e1.id, at(90_000), 'HTTP 503', 2), true, 'the current claim reschedules');
      t.strictSame(await store.webhooks.get(e1.id), row(e1, { attempts: 2, next_attempt_at: at(90_000), last_error: 'HTTP 503' }));

      t.equal(await store.webhooks.delivered(e2.id, at(25)), true, 'delivered');
      t.strictSame(await store.webhooks.get(e2.id), row(e2, { status: 'delivered', attempts: 1, next_attempt_at: at(20 + lease), delivered_at: at(25) }));
      t.equal(await store.webhooks.delivered(e2.id, at(26)), false, 'delivered twice: nothing changes');
      t.equal(await store.webhooks.retryLater(e2.id, at(99_000), 'late'), false, 'a delivered event is not rescheduled');
      t.equal(await store.webhooks.giveUp(e2.id, 'late'), false, 'nor given up');
      t.equal((await store.webhooks.get(e2.id))?.delivered_at?.getTime(), at(25).getTime(), 'delivered_at kept');

      const long = 'x'.repeat(2000);
      t.equal(await store.webhooks.giveUp(e3.id, long), true, 'given up (no fence: any claim)');
      const gave = (await store.webhooks.get(e3.id))!;
      t.equal(gave.status, 'failed');
      t.equal(gave.last_error?.length, 500, 'last_error is clipped to 500 characters');
      t.equal(await store.webhooks.retryLater(e3.id, at(0), 'again'), false, 'a failed event stays failed');

      t.strictSame(
        (await store.webhooks.due(at(10 ** 9), 10, lease)).map((e) => [e.id, e.attempts]),
        [
          [e1.id, 3],
          [later.id, 1],
        ],
        'much later: only the pending ones (delivered and failed never again)',
      );
      t.equal(DEFAULT_WEBHOOK_LEASE_MS, 60_000, 'default lease');
      await t.rejects(store.webhooks.due(T0, 0), RangeError, 'limit must be positive');
      await t.rejects(store.webhooks.due(T0, 1, 0), RangeError, 'lease must be positive');
      const before = (await store.webhooks.get(later.id))!;
      const claimed = await store.webhooks.due(new Date(before.next_attempt_at.getTime()), 1);
      t.equal(claimed[0]?.next_attempt_at.getTime(), before.next_attempt_at.getTime() + DEFAULT_WEBHOOK_LEASE_MS, 'due() without a lease uses the default');
      t.equal(await store.webhooks.delivered(later.id), true, 'delivered without a time: the database clock');
      t.ok((await store.webhooks.get(later.id))?.delivered_at instanceof Date);
      await db.query('DELETE FROM webhook_events');
    });

    await t.test("releaseAll makes every pending event due (a killed run's claims), never a delivered or failed one", async (t) => {
      const a = ev('job_rel_a', { createdAt: at(0) });
      const b = ev('job_rel_b', { createdAt: at(0) });
      const c = ev('job_rel_c', { createdAt: at(0) });
      for (const e of [a, b, c]) await store.webhooks.enqueue(e);
      const claimed = await store.webhooks.due(at(1), 10, 60_000);
      t.ok(claimed.some((e) => e.id === a.id));
      t.equal(await store.webhooks.delivered(b.id, at(2)), true);
      t.equal(await store.webhooks.giveUp(c.id, 'gone'), true);
      // Killed here: a is claimed until at(60_001).
      t.strictSame(await store.webhooks.due(at(3), 10), [], 'held by the dead claim');
      const moved = await store.webhooks.releaseAll(at(3));
      t.ok(moved >= 1);
      const again = await store.webhooks.due(at(3), 10);
      t.ok(again.some((e) => e.id === a.id && e.attempts === 2), 'due again at once, as attempt 2');
      t.notOk(again.some((e) => e.id === b.id || e.id === c.id), 'delivered and failed events stay as they are');
      t.equal((await store.webhooks.get(b.id))?.status, 'delivered');
      t.equal((await store.webhooks.get(c.id))?.status, 'failed');
    });

    await t.test('concurrent claimers never share an event', async (t) => {
      const target = await open(t);
      const s = new Store(target.db);
      const acc2 = await s.accounts.create({ name: 'race' });
      const n = 200;
      for (let i = 0; i < n; i++) await s.webhooks.enqueue({ ...ev(`job_race_${i}`), accountId: acc2, createdAt: at(i) });
      const handles = [target.db, target.db, target.db];
      if (target.another) handles.push(await target.another(), await target.another());
      const stores = handles.map((h) => new Store(h));
      const claims = await Promise.all(
        stores.map(async (st) => {
          const mine: string[] = [];
          for (;;) {
            const got = await st.webhooks.due(at(n), 3);
            if (got.length === 0) return mine;
            mine.push(...got.map((e) => e.id));
          }
        }),
      );
      const all = claims.flat();
      t.equal(all.length, n, `${n} claims in all across ${stores.length} claimers`);
      t.equal(new Set(all).size, n, 'no event claimed twice');
      t.ok(claims.filter((c) => c.length > 0).length >= (target.another ? 2 : 1), 'the work was shared');
      const counts = await target.db.query<{ attempts: number; n: number }>('SELECT attempts, count(*)::int AS n FROM webhook_events GROUP BY attempts');
      t.strictSame(counts, [{ attempts: 1, n }], 'every event claimed exactly once (one attempt each)');
    });
  });
}

t.test('pglite', async (t) => {
  suite(t, async (t) => {
    const db = await migratedPglite();
    t.teardown(() => db.close());
    return { db };
  });
});

const why = await pgUnreachable();
t.test('postgres', async (t) => {
  if (why) {
    if (process.env.CI_REQUIRE_SERVICES === '1') t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${PG_SHOWN} is unreachable: ${why}`);
    else t.plan(0, `Postgres at ${PG_SHOWN} is unreachable (${why}): skipping`);
    return;
  }
  suite(t, async (t) => {
    const { url, drop } = await freshSchema();
    const open: Db[] = [];
    const connect = async (): Promise<Db> => {
      const db = await openPostgres(url);
      open.push(db);
      return db;
    };
    t.teardown(async () => {
      for (const db of open) await db.close().catch(() => {});
      await drop();
    });
    const db = await connect();
    await migrate(db);
    return { db, another: connect };
  });
});
