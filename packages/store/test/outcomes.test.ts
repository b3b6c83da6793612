// The outcome store (OutcomesRepo, migration 013) on both adapters: PGlite always, Postgres when
// it answers (CI_REQUIRE_SERVICES=1 makes an unreachable server a failure). Events are built by
// hand here (the parser has its own suites): identity and duplicates, conflicts, suppression with
// its stale-evidence rule and ranking, the all-or-nothing transaction (a failing step, made to
// fail inside the real database by a trigger), event pages, and the connector credential. The
// suppression rules are @svc/outcomes' (suppressionRules), handed in as the importer does.

import t from 'tap';
import { suppressionRules } from '@svc/outcomes';
import { createHash } from 'node:crypto';
import type { Db } from '../src/db/db.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { migrate, OutcomesRepo, OutcomeWriteError, Store, SUPPRESSION_FLAG_TTL_MS, type NewOutcomeEvent } from '../src/index.ts';
import { migratedPglite } from '../../../test/helpers/pglite.ts';
import { freshSchema, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';
import type { Tap } from './conformance.ts';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');
const T = Date.parse('2026-03-01T12:00:00Z') * 1000; // microseconds

function ev(mailbox: string, externalId: string, over: Partial<NewOutcomeEvent> = {}): NewOutcomeEvent {
  const base: NewOutcomeEvent = {
    email: mailbox,
    mailbox,
    email_hash: sha(mailbox),
    domain: mailbox.split('@')[1]!,
    outcome: 'bounced',
    source: 'api',
    external_id: externalId,
    occurred_at: '2026-03-01T12:00:00Z',
    occurred_at_us: T,
    local_zone_unknown: false,
    action: 'failed',
    smtp_enhanced_code: '5.1.1',
    label: 'bounced_hard',
    suppresses: 'hard_bounce',
    signal: null,
    issuer: null,
    evidence: 'dsn_status',
    fingerprint: '',
  };
  const e = { ...base, ...over };
  e.fingerprint = over.fingerprint ?? sha(JSON.stringify({ ...e, external_id: '', fingerprint: '' }));
  return e;
}

const delivered = (mailbox: string, id: string, us: number): NewOutcomeEvent =>
  ev(mailbox, id, { outcome: 'delivered', label: 'delivered', suppresses: null, action: null, smtp_enhanced_code: null, occurred_at_us: us, occurred_at: new Date(us / 1000).toISOString() });

function suite(t: Tap, open: (t: Tap) => Promise<Db>): void {
  const setup = async (t: Tap) => {
    const db = await open(t);
    const store = new Store(db);
    const a = await store.accounts.create({ name: 'a' });
    const b = await store.accounts.create({ name: 'b' });
    return { db, store, a, b, repo: store.outcomes };
  };

  t.test('identity: duplicates and conflicts against stored events and within a batch', async (t) => {
    const { repo, a, b } = await setup(t);
    const first = await repo.importEvents(a, [ev('x@d.example', 'e1'), ev('y@d.example', 'e2', { suppresses: null, label: 'bounced_soft', smtp_enhanced_code: '4.2.2' })], suppressionRules);
    t.strictSame(first.fates.map((f) => f.kind), ['accepted', 'accepted']);
    const again = await repo.importEvents(a, [
      ev('x@d.example', 'e1'), // same content: duplicate
      ev('x@d.example', 'e2'), // e2 stored with other content: conflict
      ev('z@d.example', 'e3'), // new
      ev('z@d.example', 'e3'), // same as the row before in this batch: duplicate
      ev('w@d.example', 'e3'), // other content than the batch's first e3: conflict
      ev('x@d.example', 'e1', { source: 'smtp_log' }), // another source is another identity
    ], suppressionRules);
    t.strictSame(again.fates.map((f) => f.kind), ['duplicate', 'conflict', 'accepted', 'duplicate', 'conflict', 'accepted']);
    // Identities are per account.
    const other = await repo.importEvents(b, [ev('x@d.example', 'e1')], suppressionRules);
    t.strictSame(other.fates.map((f) => f.kind), ['accepted']);
    const page = await repo.listEvents(a, { limit: 100 });
    t.equal(page.length, 4, 'four events stored for the account');
    t.strictSame(page.map((e) => e.external_id), ['e1', 'e3', 'e2', 'e1'], 'newest first');
    t.strictSame(page.map((e) => e.source), ['smtp_log', 'api', 'api', 'api']);
  });

  t.test('suppression: applied, ranked, stale evidence skipped, per account', async (t) => {
    const { repo, a, b } = await setup(t);
    const invalidated: string[][] = [];
    const r = await repo.importEvents(
      a,
      [
        ev('h@d.example', 'h1'),
        ev('c@d.example', 'c1', { outcome: 'complaint', label: 'unknown', suppresses: 'complaint', smtp_enhanced_code: null, action: null }),
        ev('u@d.example', 'u1', { outcome: 'unsubscribed', label: 'unknown', suppresses: 'unsubscribed', smtp_enhanced_code: null, action: null }),
        // delivered later than the bounce that follows: that bounce is stale
        delivered('s@d.example', 's0', T + 5_000_000),
        ev('s@d.example', 's1'),
        ev('soft@d.example', 'f1', { label: 'bounced_soft', suppresses: null, smtp_enhanced_code: '4.4.1' }),
      ],
      suppressionRules,
      { invalidate: async (m) => (invalidated.push(m), m.length) },
    );
    t.strictSame(r.fates.map((f) => (f.kind === 'accepted' ? [f.event.suppressed, f.staleSuppression] : f.kind)), [
      ['hard_bounce', false],
      ['complaint', false],
      ['unsubscribed', false],
      [null, false],
      [null, true],
      [null, false],
    ]);
    t.equal(r.invalidated, 3);
    t.strictSame(invalidated.map((m) => [...m].sort()), [['c@d.example', 'h@d.example', 'u@d.example']]);
    const sup = await repo.suppressedAmong(a, ['h@d.example', 'c@d.example', 'u@d.example', 's@d.example', 'soft@d.example', 'none@d.example']);
    t.strictSame(Object.fromEntries([...sup].sort()), { 'c@d.example': 'complaint', 'h@d.example': 'hard_bounce', 'u@d.example': 'unsubscribed' });
    t.equal((await repo.suppressedAmong(b, ['h@d.example'])).size, 0, 'another account is not suppressed');
    // An unsubscribe after a hard bounce keeps the hard bounce; a hard bounce after an unsubscribe replaces it.
    await repo.importEvents(a, [
      ev('h@d.example', 'h2', { outcome: 'unsubscribed', label: 'unknown', suppresses: 'unsubscribed', smtp_enhanced_code: null, action: null }),
      ev('u@d.example', 'u2', { occurred_at_us: T + 1 }),
    ], suppressionRules);
    const after = await repo.suppressedAmong(a, ['h@d.example', 'u@d.example']);
    t.equal(after.get('h@d.example'), 'hard_bounce');
    t.equal(after.get('u@d.example'), 'hard_bounce');
    // A bounce newer than the delivery suppresses.
    const newer = await repo.importEvents(a, [ev('s@d.example', 's2', { occurred_at_us: T + 6_000_000 })], suppressionRules);
    t.equal(newer.fates[0]!.kind === 'accepted' && newer.fates[0]!.event.suppressed, 'hard_bounce');
  });

  t.test('mayHaveSuppressions: set at once by this process\'s import, read again by others within a second', async (t) => {
    const { db, repo, a } = await setup(t);
    let now = Date.now();
    const other = new OutcomesRepo(db, () => now); // another process on the same database, on a clock the test moves
    t.equal(await repo.mayHaveSuppressions(a), false);
    t.equal(await other.mayHaveSuppressions(a), false);
    await repo.importEvents(a, [ev('s@d.example', 's1')], suppressionRules);
    t.equal(await repo.mayHaveSuppressions(a), true, 'the importing process knows at once');
    t.equal(await other.mayHaveSuppressions(a), false, 'another process trusts its reading for up to a second');
    now += SUPPRESSION_FLAG_TTL_MS - 1;
    t.equal(await other.mayHaveSuppressions(a), false, 'still trusted just before the second is up');
    now += 1;
    t.equal(await other.mayHaveSuppressions(a), true, 'then reads it again');
  });

  t.test('mayHaveSuppressions: requests that find the flag stale share one query', async (t) => {
    const { db, a } = await setup(t);
    let asked = 0;
    const counting = Object.assign(Object.create(db) as typeof db, {
      query: (sql: string, params?: unknown[]) => {
        if (/FROM suppressions/.test(sql)) asked++;
        return db.query(sql, params);
      },
    });
    let now = Date.now();
    const repo = new OutcomesRepo(counting, () => now);
    t.strictSame(await Promise.all(Array.from({ length: 20 }, () => repo.mayHaveSuppressions(a))), Array(20).fill(false));
    t.equal(asked, 1, '20 concurrent readers, one query');
    t.equal(await repo.mayHaveSuppressions(a), false);
    t.equal(asked, 1, 'then answered from the flag');
    t.equal(repo.mayHaveSuppressions(a), false, 'a fresh reading is answered at once, not as a promise');
    now += SUPPRESSION_FLAG_TTL_MS;
    const stale = repo.mayHaveSuppressions(a);
    t.ok(stale instanceof Promise, 'a stale one is read again');
    await Promise.all(Array.from({ length: 20 }, () => repo.mayHaveSuppressions(a)));
    t.equal(await stale, false);
    t.equal(asked, 2, 'stale again: one more query for all of them');
  });

  t.test('a failing step keeps nothing, and the same import then succeeds', async (t) => {
    const { db, repo, a } = await setup(t);
    const batch = [ev('p@d.example', 'p1'), ev('q@d.example', 'q1', { suppresses: null, label: 'bounced_soft' })];
    // The suppression step fails inside the database.
    await db.exec(`CREATE FUNCTION svc_t_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'suppression write refused (test)'; END $$;
      CREATE TRIGGER svc_t_fail BEFORE INSERT ON suppressions FOR EACH ROW EXECUTE FUNCTION svc_t_fail();`);
    const e1 = await repo.importEvents(a, batch, suppressionRules).then(
      () => undefined,
      (err: unknown) => err,
    );
    t.ok(e1 instanceof OutcomeWriteError && e1.step === 'suppression', 'the suppression step failed');
    t.equal((await repo.listEvents(a, { limit: 10 })).length, 0, 'no event kept');
    // The cache invalidation fails: also a suppression failure, nothing kept.
    await db.exec('DROP TRIGGER svc_t_fail ON suppressions');
    const e2 = await repo.importEvents(a, batch, suppressionRules, { invalidate: async () => Promise.reject(new Error('cache down')) }).then(
      () => undefined,
      (err: unknown) => err,
    );
    t.ok(e2 instanceof OutcomeWriteError && e2.step === 'suppression');
    t.equal((await repo.listEvents(a, { limit: 10 })).length, 0);
    t.equal((await repo.suppressedAmong(a, ['p@d.example'])).size, 0);
    // The event step fails.
    await db.exec('CREATE TRIGGER svc_t_fail BEFORE INSERT ON outcome_events FOR EACH ROW EXECUTE FUNCTION svc_t_fail()');
    const e3 = await repo.importEvents(a, batch, suppressionRules).then(
      () => undefined,
      (err: unknown) => err,
    );
    t.ok(e3 instanceof OutcomeWriteError && e3.step === 'events', 'the event step failed');
    await db.exec('DROP TRIGGER svc_t_fail ON outcome_events');
    const ok = await repo.importEvents(a, batch, suppressionRules);
    t.strictSame(ok.fates.map((f) => f.kind), ['accepted', 'accepted'], 'the same import succeeds');
    t.equal((await repo.suppressedAmong(a, ['p@d.example'])).get('p@d.example'), 'hard_bounce');
  });

  t.test('event pages by mailbox with a cursor', async (t) => {
    const { repo, a } = await setup(t);
    await repo.importEvents(a, Array.from({ length: 5 }, (_, i) => ev('m@d.example', `m${i}`, { suppresses: null, label: 'bounced_soft', occurred_at_us: T + i })), suppressionRules);
    await repo.importEvents(a, [ev('n@d.example', 'n0', { suppresses: null, label: 'unknown' })], suppressionRules);
    const p1 = await repo.listEvents(a, { mailbox: 'm@d.example', limit: 3 });
    t.strictSame(p1.map((e) => e.external_id), ['m4', 'm3', 'm2']);
    const p2 = await repo.listEvents(a, { mailbox: 'm@d.example', limit: 3, before: p1[2]!.seq });
    t.strictSame(p2.map((e) => e.external_id), ['m1', 'm0']);
    t.equal((await repo.listEvents(a, { limit: 100 })).length, 6);
  });

  t.test('connector credential: create, re-create, revoke, counters', async (t) => {
    const { repo, a, b } = await setup(t);
    t.equal(await repo.connectorsEnabled(a), true, 'accounts may use connectors by default');
    const c1 = await repo.createConnector(a, 'emailbison', sha('s1'));
    t.equal(c1.status, 'active');
    t.strictSame(await repo.connectorBySecret('emailbison', sha('s1')), { account_id: a });
    await repo.countInbound(a, 'emailbison', { received: 3, ignored: 1, sent: 0 });
    let st = await repo.getConnector(a, 'emailbison');
    t.strictSame([st!.events_received, st!.events_ignored, st!.sent_events], [3, 1, 0]);
    t.ok(st!.last_event_at instanceof Date);
    await repo.createConnector(a, 'emailbison', sha('s2'));
    t.equal(await repo.connectorBySecret('emailbison', sha('s1')), undefined, 'the previous secret stops working at once');
    t.strictSame(await repo.connectorBySecret('emailbison', sha('s2')), { account_id: a });
    st = await repo.getConnector(a, 'emailbison');
    t.strictSame([st!.events_received, st!.sent_events, st!.last_event_at], [0, 0, null], 'counters start again');
    t.equal(await repo.connectorBySecret('other', sha('s2')), undefined, 'the platform is part of the match');
    t.equal(await repo.revokeConnector(a, 'emailbison'), true);
    t.equal(await repo.connectorBySecret('emailbison', sha('s2')), undefined, 'revoked: no longer accepted');
    t.equal((await repo.getConnector(a, 'emailbison'))!.status, 'revoked');
    t.equal(await repo.revokeConnector(a, 'emailbison'), false, 'nothing active to revoke');
    t.equal(await repo.getConnector(b, 'emailbison'), undefined);
    await repo.setConnectorsEnabled(b, false);
    t.equal(await repo.connectorsEnabled(b), false);
  });

  t.test('evidence for recovery: the newest decision-grade event per mailbox, and delivered mailboxes of a domain', async (t) => {
    const { repo, a } = await setup(t);
    await repo.importEvents(a, [
      delivered('jane.doe@corp.example', 'd1', T),
      ev('jane.doe@corp.example', 'b1', { occurred_at_us: T - 10 }), // older hard bounce
      ev('gone@corp.example', 'b2'),
      delivered('max.mustermann@corp.example', 'd2', T),
      ev('soft@corp.example', 's1', { label: 'bounced_soft', suppresses: null }),
    ], suppressionRules);
    const ev1 = await repo.evidenceFor(a, ['jane.doe@corp.example', 'gone@corp.example', 'soft@corp.example', 'none@corp.example']);
    t.strictSame([...ev1.keys()].sort(), ['gone@corp.example', 'jane.doe@corp.example']);
    t.equal(ev1.get('jane.doe@corp.example')!.label, 'delivered');
    t.equal(ev1.get('gone@corp.example')!.label, 'bounced_hard');
    t.strictSame(await repo.deliveredMailboxes(a, 'corp.example'), ['jane.doe@corp.example', 'max.mustermann@corp.example']);
  });
}

t.test('pglite', async (t) => {
  suite(t, async (t) => {
    const db = await migratedPglite();
    t.teardown(() => db.close());
    return db;
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
    const db = await openPostgres(url);
    await migrate(db);
    t.teardown(async () => {
      await db.close();
      await drop();
    });
    return db;
  });
});
