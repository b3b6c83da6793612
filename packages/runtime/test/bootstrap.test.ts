// The bootstrap key is a first-start setting (docs/decisions/security-and-auth.md,
// "Bootstrap key"): it creates an account only while the store has none; afterwards it is
// ignored (startService logs a warning) and nothing is created.

import net from 'node:net';
import t from 'tap';
import { bootstrap, ConfigError, loadConfig, startService } from '@svc/runtime';
import { hashKey, openStore, Store } from '@svc/store';
import { migratedPglite } from '../../../test/helpers/pglite.ts';
import { freshSchema, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';

async function memoryStore(t: Tap): Promise<Store> {
  const db = await migratedPglite();
  t.teardown(() => db.close());
  return new Store(db);
}
type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

/** Readiness probes go to 127.0.0.1 only (nothing answers on port 9: they fail fast). */
const QUIET = { HOST: '127.0.0.1', SVC_LOG_LEVEL: 'silent', SVC_DNS_SERVERS: '127.0.0.1:9', SVC_DNS_TIMEOUT_MS: '50', SVC_SMTP_PORT: '9' };

const FIRST = 'svc_test_FirstStartKey0000000001';
const OTHER = 'svc_live_SecondStartKey000000002';

t.test('first start creates the account with SVC_BOOTSTRAP_CREDITS and the key; a later key is ignored', async (t) => {
  const store = await memoryStore(t);
  const first = await bootstrap(store, { bootstrapApiKey: FIRST, bootstrapCredits: 250 });
  if (first.kind !== 'created') throw new Error(`expected created, got ${first.kind}`);
  t.match(first.accountId, /^acc_[0-9a-f]{24}$/);
  t.equal(first.generatedKey, undefined, 'nothing generated when a key is given');
  const rec = await store.keys.findByHash(hashKey(FIRST));
  t.strictSame(
    rec && [rec.account_id, rec.kind, rec.scopes, rec.state, rec.expires_at, rec.display_prefix],
    [first.accountId, 'test', null, 'active', null, 'svc_test_Firs'],
    'the key works: unrestricted, active, never expires, of the new account',
  );
  t.strictSame((await store.ledger.balance(first.accountId))?.balance, 250, 'SVC_BOOTSTRAP_CREDITS');
  t.equal(await store.accounts.count(), 1);

  t.strictSame(await bootstrap(store, { bootstrapApiKey: FIRST, bootstrapCredits: 250 }), { kind: 'exists' }, 'a restart with the same key: nothing to do');
  t.strictSame(await bootstrap(store, { bootstrapApiKey: OTHER, bootstrapCredits: 999 }), { kind: 'ignored' }, 'another key once an account exists: ignored');
  t.strictSame(await bootstrap(store, { bootstrapApiKey: undefined, bootstrapCredits: 100 }), { kind: 'exists' }, 'no key: nothing generated');
  t.equal(await store.accounts.count(), 1, 'no account created');
  t.equal(await store.keys.count(), 1, 'no key created');
  t.equal(await store.keys.findByHash(hashKey(OTHER)), undefined, 'the ignored key does not work');
  t.strictSame((await store.ledger.balance(first.accountId))?.balance, 250, 'no credits granted');

  // Through startService: the ignored key is a warning in the log, and still nothing is created.
  const lines: string[] = [];
  const config = loadConfig({ ...QUIET, PORT: '0', SVC_LOG_LEVEL: 'warn', SVC_BOOTSTRAP_API_KEY: OTHER });
  const svc = await startService(config, { store, logStream: { write: (line: string) => void lines.push(line) } });
  await svc.close();
  const warnings = lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level === 40);
  t.strictSame(
    warnings.map((w) => w.msg),
    ['SVC_BOOTSTRAP_API_KEY is ignored: it applies on first start only and this store already has accounts (use the admin CLI to add keys)'],
    'one warning says why',
  );
  t.notOk(lines.join('').includes(OTHER), 'the key is not in the log');
  t.strictSame([await store.accounts.count(), await store.keys.count()], [1, 1], 'nothing created');
});

t.test('without a key: a port in use fails the first start before anything is created (no key generated, none lost); the next start generates one and hands it over', async (t) => {
  const store = await memoryStore(t);
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
  const busy = (blocker.address() as net.AddressInfo).port;
  const env = QUIET;
  const seen: string[] = [];
  const onGeneratedKey = (key: string) => void seen.push(key);

  const err = await startService(loadConfig({ ...env, PORT: String(busy) }), { store, onGeneratedKey }).then(
    () => undefined,
    (e: unknown) => e,
  );
  t.ok(err instanceof ConfigError, 'a ConfigError (exit 2 in cluster/embedded.ts)');
  t.strictSame(err instanceof ConfigError && [err.variable, err.message], ['PORT', `PORT ${busy} is already in use on 127.0.0.1`]);
  t.equal(seen.length, 0, 'no key was generated');
  t.strictSame([await store.accounts.count(), await store.keys.count()], [0, 0], 'nothing created');

  const svc = await startService(loadConfig({ ...env, PORT: '0' }), { store, onGeneratedKey });
  t.equal(seen.length, 1, 'the start that can listen generates the key and hands it over');
  const key = seen[0]!;
  t.match(key, /^svc_live_[A-Za-z0-9]{40}$/);
  t.equal(svc.generatedKey, key);
  const rec = await store.keys.findByHash(hashKey(key));
  t.strictSame(rec && [rec.scopes, rec.state], [null, 'active'], 'stored by its hash: an unrestricted, active key');
  const res = await fetch(`${svc.url}/v1/credits`, { headers: { 'x-api-key': key } });
  t.equal(res.status, 200, 'the key works');
  t.equal(((await res.json()) as { balance: number }).balance, 100, 'SVC_BOOTSTRAP_CREDITS default');
  await svc.close();
  t.strictSame([await store.accounts.count(), await store.keys.count()], [1, 1], 'one account, one key');
});

t.test('SVC_WEBHOOK_ALLOW_PRIVATE=true is a warning at start-up naming what it opens', async (t) => {
  const store = await memoryStore(t);
  const lines: string[] = [];
  const svc = await startService(loadConfig({ ...QUIET, PORT: '0', SVC_LOG_LEVEL: 'warn', SVC_WEBHOOK_ALLOW_PRIVATE: 'true' }), { store, logStream: { write: (line: string) => void lines.push(line) } });
  await svc.close();
  const warnings = lines.map((l) => JSON.parse(l) as { level: number; msg: string; setting?: string }).filter((l) => l.level === 40 && l.setting === 'SVC_WEBHOOK_ALLOW_PRIVATE');
  t.equal(warnings.length, 1, 'one warning');
  for (const range of ['127.0.0.0/8', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', 'fc00::/7', 'SVC_OUTBOUND_ALLOW_NETWORKS=127.0.0.0/8,::1/128']) t.match(warnings[0]?.msg, range, `names ${range}`);
  const quiet: string[] = [];
  const other = await startService(loadConfig({ ...QUIET, PORT: '0', SVC_LOG_LEVEL: 'warn', SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8' }), { store, logStream: { write: (line: string) => void quiet.push(line) } });
  // The first readiness check ran before the port opened: /ready answers its result at once.
  const ready = (await (await fetch(`${other.url}/ready`)).json()) as { errors?: string[]; checks: Record<string, string> };
  t.notOk(JSON.stringify(ready).includes('not checked yet'), `/ready right after start: ${JSON.stringify(ready)}`);
  t.strictSame(Object.keys(ready.checks).sort(), ['dns', 'redis', 'smtp'], 'every check has a result');
  await other.close();
  t.notOk(quiet.some((l) => l.includes('SVC_WEBHOOK_ALLOW_PRIVATE')), 'the allow-list alone warns of nothing');
});

t.test('the first account and its key are one transaction: a key that cannot be stored leaves no account', async (t) => {
  const store = await memoryStore(t);
  // A test key offered as a live one is refused inside the transaction, after the account's insert.
  await t.rejects(store.accounts.createFirst({ name: 'bootstrap', credits: 10, key: { kind: 'live', scopes: null, key: FIRST } }), { message: /key must match svc_live_/ });
  t.equal(await store.accounts.count(), 0, 'the account was rolled back with it');
  const ok = await bootstrap(store, { bootstrapApiKey: FIRST, bootstrapCredits: 10 });
  t.equal(ok.kind, 'created', 'the next start creates both');
});

const pgWhy = await pgUnreachable();
t.test('fronts starting together on one empty Postgres create one account between them', { skip: pgWhy && process.env.CI_REQUIRE_SERVICES !== '1' ? `Postgres at ${PG_SHOWN} is unreachable (${pgWhy})` : false }, async (t) => {
  for (const given of [FIRST, undefined]) {
    const { url, drop } = await freshSchema();
    const stores = [await openStore({ databaseUrl: url }), await openStore({ databaseUrl: url })];
    t.teardown(async () => {
      for (const s of stores) await s.close();
      await drop();
    });
    const outcomes = await Promise.all([0, 1, 0, 1].map((i) => bootstrap(stores[i]!, { bootstrapApiKey: given, bootstrapCredits: 7 })));
    const kinds = outcomes.map((o) => o.kind).sort();
    t.strictSame(kinds, ['created', 'exists', 'exists', 'exists'], `${given ? 'a given key' : 'a generated key'}: one start created, the others found it`);
    t.equal(await stores[0]!.accounts.count(), 1, 'one account');
    const accountId = (outcomes.find((o) => o.kind === 'created') as { accountId: string }).accountId;
    t.equal((await stores[1]!.keys.list(accountId)).length, 1, 'one key');
    t.equal(outcomes.filter((o) => o.kind === 'created' && o.generatedKey).length, given ? 0 : 1, 'at most one key printed');
  }
});
