// The charge use case against a real (in-memory PGlite) store: exact credits on each path, the
// status an idempotent response is recorded with, and which store failures are outages.

import t from 'tap';
import pg from 'pg';
import { ServiceError } from '@svc/contracts';
import { MemoryCache, Store } from '@svc/store';
import { Verifier, verifierConfig, type DnsPort, type ProbePort, type Verdict } from '@svc/verifier';
import { isConnectionFailure, validateAndCharge } from '../src/index.ts';
import { migratedPglite } from '../../../test/helpers/pglite.ts';

/** No domain exists and no SMTP server answers: every address that passes syntax is invalid at DNS. */
const noDns: DnsPort = { resolveMail: async () => ({ kind: 'nxdomain' }), resolveAddresses: async () => [] };
const noProbe: ProbePort = { check: async () => ({ kind: 'failure', failure: { phase: 'connect', kind: 'connection', detail: 'no network in this test' } }), close: async () => {} };

const VALID: Omit<Verdict, 'email'> = {
  result: 'valid',
  reason: '',
  reason_code: 'accepted',
  syntax_valid: true,
  dns_valid: true,
  smtp_valid: true,
  is_role_based: false,
  is_free_provider: false,
  is_disposable: false,
  is_catchall: false,
  b2b_outbound_quality: 'high',
  b2b_quality: 'high',
  validation_layer: 'smtp',
  smtp_response: '250 2.1.5 Ok',
  flags: [],
  chargeable: true,
};

// One database for the file (PGlite takes a second or two to start); each test has its own account.
const db = await migratedPglite();
t.teardown(() => db.close());
const store = new Store(db);
const cache = new MemoryCache();
cache.set('v:known@acme.test', VALID, 3_600_000); // a cached High-Value Validation: the debit path
const verifier = new Verifier({ dns: noDns, probe: noProbe, cache, config: verifierConfig() });
t.teardown(() => verifier.close());

async function setup(credits: number) {
  return { store, verifier, accountId: await store.accounts.create({ credits }) };
}

t.test('each path charges exactly the High-Value Validations', async (t) => {
  const { store, verifier, accountId } = await setup(5);
  // Settled by syntax alone: free, no ledger row.
  const free = await validateAndCharge(store, verifier, accountId, ['not an address']);
  t.strictSame(free.map((r) => [r.result, r.credits_charged, r.charge_reason]), [['invalid', 0, 'invalid_not_charged']]);
  // Settled from the cache: one debit, the duplicate is free.
  const cached = await validateAndCharge(store, verifier, accountId, ['known@acme.test', 'known@ACME.test']);
  t.strictSame(cached.map((r) => [r.email, r.credits_charged, r.charge_reason]), [['known@acme.test', 1, 'high_value_validation'], ['known@ACME.test', 0, 'duplicate_in_request']]);
  // Needs DNS: held, then released (NXDOMAIN is not charged).
  const fresh = await validateAndCharge(store, verifier, accountId, ['jane@nowhere.test']);
  t.strictSame(fresh.map((r) => [r.result, r.reason_code, r.credits_charged]), [['invalid', 'nxdomain', 0]]);
  t.strictSame(await store.ledger.balance(accountId), { account_id: accountId, balance: 4, reserved: 0, available: 4, subscription_status: 'active', current_period_end: null, cancel_at_period_end: false });
  t.strictSame(await store.ledger.totals(accountId), { balance: 4, reserved: 0 });
});

t.test('insufficient credits: 402 with required and available, nothing charged', async (t) => {
  const { store, verifier, accountId } = await setup(0);
  const err = await validateAndCharge(store, verifier, accountId, ['known@acme.test']).catch((e: unknown) => e);
  t.ok(err instanceof ServiceError);
  t.strictSame([(err as ServiceError).status, (err as ServiceError).body()], [402, { error: 'Payment Required', message: 'This request needs up to 1 credits; 0 available', code: 'insufficient_credits', required: 1, available: 0 }]);
});

t.test('an idempotent response is recorded with the status it is sent with (a 202 replays as a 202)', async (t) => {
  const { store, verifier, accountId } = await setup(5);
  for (const [key, emails] of [['debit-path', ['known@acme.test']], ['reserve-path', ['jane@nowhere.test']], ['free-path', ['x']]] as const) {
    const claim = await store.idempotency.begin(accountId, key, 'POST /v1/test', 'h', 60_000, 60_000);
    if (claim.state !== 'new') throw new Error(`claim: ${claim.state}`);
    await validateAndCharge(store, verifier, accountId, emails, { completion: { key, owner: claim.owner, status: 202, render: (rs) => JSON.stringify(rs.map((r) => r.result)) } });
    const replay = await store.idempotency.begin(accountId, key, 'POST /v1/test', 'h', 60_000, 60_000);
    t.strictSame(replay, { state: 'replay', status: 202, body: JSON.stringify([key === 'debit-path' ? 'valid' : 'invalid']) }, key);
  }
});

t.test('only connection-class store failures are validation_upstream_failed; a broken invariant stays a bug', async (t) => {
  const { store, verifier, accountId } = await setup(5);
  const { debit } = store.ledger;
  t.teardown(() => {
    store.ledger.debit = debit;
  });
  // A connection that drops (what pg throws): 503, retryable.
  store.ledger.debit = () => Promise.reject(Object.assign(new Error('Connection terminated unexpectedly'), {}));
  const down = await validateAndCharge(store, verifier, accountId, ['known@acme.test']).catch((e: unknown) => e);
  t.ok(down instanceof ServiceError && down.code === 'validation_upstream_failed', 'connection lost → validation_upstream_failed');
  // A CHECK constraint violated (SQLSTATE 23514): a bug, passed through as it is (the front answers 500).
  const broken = Object.assign(new Error('new row for relation "accounts" violates check constraint'), { code: '23514' });
  store.ledger.debit = () => Promise.reject(broken);
  const bug = await validateAndCharge(store, verifier, accountId, ['known@acme.test']).catch((e: unknown) => e);
  t.equal(bug, broken, 'the invariant break is not turned into an outage');
  store.ledger.debit = debit;
  t.equal((await store.ledger.balance(accountId))!.balance, 5, 'nothing was charged by the failed requests');
});

t.test('isConnectionFailure: real client errors and SQLSTATE classes', async (t) => {
  // A real refused connection from pg.
  const refused = await new pg.Client({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 2000 }).connect().catch((e: unknown) => e);
  t.ok(isConnectionFailure(refused), `pg to a closed port (${(refused as Error).message})`);
  // A real constraint violation from the database.
  const violation = await db.query("INSERT INTO accounts (id, balance) VALUES ('acc_x', -1)").catch((e: unknown) => e);
  t.notOk(isConnectionFailure(violation), 'a CHECK violation is not a connection failure');
  const cases: Array<[unknown, boolean]> = [
    [{ code: '08006', message: 'connection failure' }, true],
    [{ code: '08001' }, true],
    [{ code: '53300', message: 'too many connections' }, true],
    [{ code: '57P01', message: 'terminating connection due to administrator command' }, true],
    [{ code: '57P03', message: 'the database system is starting up' }, true],
    [{ code: '57014', message: 'canceling statement due to statement timeout' }, true],
    [{ code: 'ECONNRESET' }, true],
    [new Error('timeout exceeded when trying to connect'), true],
    [new Error('Query read timeout'), true],
    [Object.assign(new AggregateError([Object.assign(new Error('x'), { code: 'ECONNREFUSED' })], 'all failed'), {}), true],
    [{ code: '23505', message: 'duplicate key value violates unique constraint' }, false],
    [{ code: 'P0001', message: 'credit_ledger is append-only' }, false],
    [{ code: '42P01', message: 'relation does not exist' }, false],
    [new RangeError('cannot charge 3 of a reservation of 2'), false],
    [new TypeError("Cannot read properties of undefined (reading 'amount')"), false],
    [undefined, false],
    ['connection terminated', false],
  ];
  for (const [err, want] of cases) t.equal(isConnectionFailure(err), want, JSON.stringify(err) ?? String(err));
});
