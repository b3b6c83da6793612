// Regression: an idempotency claim left `in_progress` by a process that died kept its key busy
// for 10 minutes (409 idempotency_request_in_progress to every retry) after a restart. Start-up
// now deletes such claims like it releases sync reservations: embedded, all of them (this process
// is the only one); with DATABASE_URL only those not renewed for SVC_CLAIM_LEASE_MS (others share
// the database and renew theirs). And without any restart, a retry takes over a claim whose lease
// ran out (its front died; another front serves the retry).

import t from 'tap';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, startService, type RunningService } from '@svc/runtime';
import { openStore, type Store } from '@svc/store';
import { freshSchema, pgAdmin, PG_SHOWN, pgUnreachable } from '../helpers/postgres.ts';
import { stackEnv } from '../helpers/stack.ts';
import { startSim } from '../sim/index.ts';

const ROUTE = 'POST /v1/validate';
const BODY = { email: 'jane.doe@accept.test' };
/** What the API stores for this request (packages/api/src/idempotency.ts): SHA-256 of route, newline, JSON body. */
const HASH = createHash('sha256').update(ROUTE).update('\n').update(JSON.stringify(BODY)).digest('hex');

const sim = await startSim({ tarpitMs: 5000 });
t.teardown(() => sim.close());

/** An account with 10 credits and a key, and a claim on `idemKey` made as the crashed request made it. */
async function crashedRequest(store: Store, idemKey: string): Promise<{ accountId: string; apiKey: string }> {
  const accountId = await store.accounts.create({ name: 'crash', credits: 10 });
  const { key: apiKey } = await store.keys.create({ accountId, kind: 'test', scopes: null });
  const claim = await store.idempotency.begin(accountId, idemKey, ROUTE, HASH, 24 * 3600_000, 10 * 60_000);
  if (claim.state !== 'new') throw new Error(`claim: ${claim.state}`);
  return { accountId, apiKey };
}

async function validate(svc: RunningService, apiKey: string, idemKey: string): Promise<{ status: number; replayed: string | null; body: Record<string, unknown>; text: string }> {
  const res = await fetch(`${svc.url}/v1/validate`, {
    method: 'POST',
    headers: { 'x-api-key': apiKey, 'idempotency-key': idemKey, 'content-type': 'application/json' },
    body: JSON.stringify(BODY),
  });
  const text = await res.text();
  return { status: res.status, replayed: res.headers.get('idempotent-replayed'), body: JSON.parse(text) as Record<string, unknown>, text };
}

t.test('embedded: a claim left in progress by a dead process does not block the retry after a restart', async (t) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-crash-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const config = loadConfig(stackEnv(sim, dataDir));

  // The first process: it claimed the key, then died before completing or abandoning it.
  const before = await openStore({ dataDir: config.dataDir });
  const { accountId, apiKey } = await crashedRequest(before, 'order-7');
  t.strictSame(await before.idempotency.begin(accountId, 'order-7', ROUTE, HASH, 24 * 3600_000, 10 * 60_000), { state: 'in_progress' }, 'the retry would find the claim in progress');
  await before.close();

  // The restarted service opens the same data directory itself.
  const svc = await startService(config);
  t.teardown(() => svc.close());
  const retry = await validate(svc, apiKey, 'order-7');
  t.equal(retry.status, 200, 'the retry runs');
  t.equal(retry.replayed, null, 'for real, not a replay');
  t.strictSame([retry.body.email, retry.body.result, retry.body.reason_code, retry.body.credits_charged], ['jane.doe@accept.test', 'valid', 'accepted', 1]);
  const again = await validate(svc, apiKey, 'order-7');
  t.strictSame([again.status, again.replayed, again.text], [200, 'true', retry.text], 'the key now replays the stored response (same route and body hash)');
  const store = svc.services.store;
  t.strictSame(await store.ledger.balance(accountId).then((b) => b && [b.balance, b.reserved]), [9, 0], 'charged once');
  t.strictSame(await store.ledger.totals(accountId), { balance: 9, reserved: 0 }, 'ledger == columns');
});

const pgUp = (await pgUnreachable()) === undefined;

if (!pgUp && process.env.CI_REQUIRE_SERVICES === '1') t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${PG_SHOWN} is unreachable`);
t.test('DATABASE_URL: only claims not renewed for a lease are released at start, or taken over by a retry', { skip: pgUp ? false : `Postgres at ${PG_SHOWN} is unreachable` }, async (t) => {
  const { schema, url: databaseUrl, drop } = await freshSchema();
  t.teardown(drop);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-crash-pg-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const config = loadConfig(stackEnv(sim, dataDir, { DATABASE_URL: databaseUrl }));
  const store = await openStore({ databaseUrl });
  t.teardown(() => store.close());
  const { apiKey } = await crashedRequest(store, 'order-8');

  // A fresh claim may belong to another process that shares the database: it stays.
  const first = await startService(config, { store });
  const busy = await validate(first, apiKey, 'order-8');
  await first.close();
  t.strictSame([busy.status, busy.body.code], [409, 'idempotency_request_in_progress'], 'a claim renewed within its lease (15 s) is left to its owner');

  // Its owner stopped renewing it 20 s ago (the clock moved through the database): a restart releases it.
  const claims = () => pgAdmin(async (c) => (await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.idempotency_keys WHERE key = 'order-8'`)).rows[0]!.n);
  t.equal(await claims(), 1, 'the claim survived that start');
  await pgAdmin((c) => c.query(`UPDATE ${schema}.idempotency_keys SET heartbeat_at = now() - interval '20 seconds' WHERE key = 'order-8'`));
  const second = await startService(config, { store });
  t.teardown(() => second.close());
  t.equal(await claims(), 0, 'this start deleted it (before any request could take it over)');
  const retry = await validate(second, apiKey, 'order-8');
  t.strictSame([retry.status, retry.replayed, retry.body.result, retry.body.credits_charged], [200, null, 'valid', 1], 'the retry runs');

  // No restart: a claim whose owner stopped renewing it is taken over by the retry itself.
  const { accountId: acc9, apiKey: key9 } = await crashedRequest(store, 'order-9');
  const held = await validate(second, key9, 'order-9');
  t.strictSame([held.status, held.body.code], [409, 'idempotency_request_in_progress'], 'within its lease: 409');
  await pgAdmin((c) => c.query(`UPDATE ${schema}.idempotency_keys SET heartbeat_at = now() - interval '20 seconds' WHERE key = 'order-9'`));
  const taken = await validate(second, key9, 'order-9');
  t.strictSame([taken.status, taken.replayed, taken.body.result, taken.body.credits_charged], [200, null, 'valid', 1], 'past its lease, the retry takes it over and runs');
  const replay = await validate(second, key9, 'order-9');
  t.strictSame([replay.status, replay.replayed, replay.text], [200, 'true', taken.text], 'and the key replays it');
  t.strictSame(await store.ledger.totals(acc9), { balance: 9, reserved: 0 }, 'charged once');
});
