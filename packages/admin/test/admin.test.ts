// The operator commands, in process against an in-memory PGlite store (the same runAdmin serves
// the CLI and the admin socket): exact output of the listings, help on every command, the
// refusals fixed here (activating an expired key, an expiry in the past, a data directory that
// does not exist, a DATABASE_URL without the schema), the admin socket answering like runAdmin
// (mode 0600, no umask change) and timing out on a wedged service, and the exit codes of
// cluster/admin.ts for the data directory errors.

import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { jobCredits } from '@svc/billing';
import { SCOPES } from '@svc/contracts';
import { callAdminSocket, runAdmin, runAdminCli, serveAdminSocket } from '@svc/admin';
import { DataDirLockedError, openStore, Store } from '@svc/store';
import { freshPglite, migratedPglite } from '../../../test/helpers/pglite.ts';
import { freshSchema, pgAdmin, PG_SHOWN, pgUnreachable } from '../../../test/helpers/postgres.ts';

const ROOT = path.resolve(import.meta.dirname, '../../..');
type Test = Parameters<Parameters<typeof t.test>[0]>[0];

// Before any test is declared: a top-level await after the last one could outlive the root test.
const pgUp = (await pgUnreachable()) === undefined;
if (!pgUp && process.env.CI_REQUIRE_SERVICES === '1') t.fail(`CI_REQUIRE_SERVICES=1 but Postgres at ${PG_SHOWN} is unreachable`);

const db = await migratedPglite();
t.teardown(() => db.close());
const store = new Store(db);
const admin = (...argv: string[]) => runAdmin(store, argv);
const iso = (d: Date | null | undefined): string => (d ? d.toISOString() : '-');
/** A date column is 24 characters wide (ISO 8601 in UTC); an empty one is `-`. */
const col24 = (d: Date | null | undefined): string => iso(d).padEnd(24);

// Two accounts with keys in every state and ledger rows of every kind.
const A = await store.accounts.create({ name: 'bootstrap', credits: 100 });
const B = await store.accounts.create({ name: 'Acme Corp', credits: 5000 });
const held = await store.ledger.reserve(B, 3, 'sync');
if (!held.ok) throw new Error('reserve');
await store.ledger.settle(held.reservationId, 1);
const open = await store.ledger.reserve(B, 4, 'sync');
if (!open.ok) throw new Error('reserve');
await store.ledger.debit(B, 2, 'cached');

const k1 = await store.keys.create({ accountId: A, kind: 'test', scopes: null, name: 'bootstrap', key: 'svc_test_Boot0000000000000001' });
const k2 = await store.keys.create({ accountId: A, kind: 'live', scopes: ['credits:read'], name: 'ci', key: 'svc_live_Ci00000000000000002', expiresAt: new Date('2099-01-01T00:00:00Z') });
const k3 = await store.keys.create({ accountId: A, kind: 'live', scopes: null, key: 'svc_live_Idle000000000000003' });
const k4 = await store.keys.create({ accountId: A, kind: 'test', scopes: null, name: 'leaked', key: 'svc_test_Gone000000000000004' });
const k5 = await store.keys.create({ accountId: A, kind: 'live', scopes: ['credits:read'], name: 'trial', key: 'svc_live_Old0000000000000005', expiresAt: new Date(Date.now() - 3_600_000) });
await store.keys.touch(k1.id);
await store.keys.setState(k3.id, 'inactive');
await store.keys.setState(k4.id, 'revoked');

t.test('account list: aligned columns, oldest first, numbers right-aligned, empty name as -', async (t) => {
  const C = await store.accounts.create();
  // The order is the repository's (oldest first, pinned by the store conformance suite).
  const rows = await store.accounts.list();
  t.strictSame(rows.map((r) => r.id).sort(), [A, B, C].sort(), 'the three accounts');
  const line = { [A]: `${A}      100         0        100     5  ${iso(rows.find((r) => r.id === A)!.created_at)}  bootstrap`, [B]: `${B}     4997         4       4993     0  ${iso(rows.find((r) => r.id === B)!.created_at)}  Acme Corp`, [C]: `${C}        0         0          0     0  ${iso(rows.find((r) => r.id === C)!.created_at)}  -` };
  t.strictSame(await admin('account', 'list'), {
    code: 0,
    out: ['ID                            BALANCE  RESERVED  AVAILABLE  KEYS  CREATED                   NAME', ...rows.map((r) => line[r.id]!)].join('\n'),
  });
});

t.test('key list: state (expired once its expiry passed), scopes or unrestricted, last use; never the key or its hash', async (t) => {
  const keys = await store.keys.list(A);
  t.strictSame(keys.map((k) => k.id).sort(), [k1.id, k2.id, k3.id, k4.id, k5.id].sort(), 'the five keys (oldest first, as the repository lists them)');
  const byId = Object.fromEntries(keys.map((k) => [k.id, k]));
  const created = (id: string) => col24(byId[id]!.created_at);
  const line: Record<string, string> = {
    [k1.id]: `${k1.id}  svc_test_Boot  test  active    ${created(k1.id)}  ${col24(byId[k1.id]!.last_used_at)}  ${col24(null)}  unrestricted  bootstrap`,
    [k2.id]: `${k2.id}  svc_live_Ci00  live  active    ${created(k2.id)}  ${col24(null)}  2099-01-01T00:00:00.000Z  credits:read  ci`,
    [k3.id]: `${k3.id}  svc_live_Idle  live  inactive  ${created(k3.id)}  ${col24(null)}  ${col24(null)}  unrestricted  -`,
    [k4.id]: `${k4.id}  svc_test_Gone  test  revoked   ${created(k4.id)}  ${col24(null)}  ${col24(null)}  unrestricted  leaked`,
    [k5.id]: `${k5.id}  svc_live_Old0  live  expired   ${created(k5.id)}  ${col24(null)}  ${col24(byId[k5.id]!.expires_at)}  credits:read  trial`,
  };
  t.ok(byId[k1.id]!.last_used_at instanceof Date, 'k1 was used');
  const res = await admin('key', 'list', '--account', A);
  t.strictSame(res, {
    code: 0,
    out: ['ID                            PREFIX         KIND  STATE     CREATED                   LAST_USED                 EXPIRES                   SCOPES        NAME', ...keys.map((k) => line[k.id]!)].join('\n'),
  });
  for (const k of [k1, k2, k3, k4, k5]) t.notOk(res.out.includes(k.key), 'no key in the listing');
  t.notOk(/[0-9a-f]{64}/.test(res.out), 'no hash in the listing');
  t.strictSame(await admin('key', 'list', '--account', B), { code: 0, out: 'ID  PREFIX  KIND  STATE  CREATED  LAST_USED  EXPIRES  SCOPES  NAME' }, 'an account without keys: the header');
  t.strictSame(await admin('key', 'list', '--account', 'acc_nope'), { code: 1, out: 'no account acc_nope' });
  t.strictSame(await admin('key', 'list'), { code: 2, out: '--account is required\nusage: admin key list --account ACCOUNT_ID' });
});

t.test('credits ledger: newest first, default 20, at most 1000', async (t) => {
  const entries = await store.ledger.entries(B, 1000);
  t.equal(entries.length, 6);
  const [debit, reserve4, release, charge, reserve3, grant] = entries as [(typeof entries)[0], ...typeof entries];
  const at = (e: { created_at: Date }) => iso(e.created_at);
  const id = (e: { id: number }) => String(e.id).padStart(2);
  const R1 = held.reservationId;
  const R2 = open.reservationId;
  const expected = [
    'ID  TIME                      KIND     AMOUNT  RESERVATION                   NOTE',
    `${id(debit)}  ${at(debit)}  debit         2  -                             cached`,
    `${id(reserve4!)}  ${at(reserve4!)}  reserve       4  ${R2}  -`,
    `${id(release!)}  ${at(release!)}  release       2  ${R1}  -`,
    `${id(charge!)}  ${at(charge!)}  charge        1  ${R1}  -`,
    `${id(reserve3!)}  ${at(reserve3!)}  reserve       3  ${R1}  -`,
    `${id(grant!)}  ${at(grant!)}  grant      5000  -                             initial credits`,
  ];
  t.ok(entries.every((e) => e.id < 100), 'ids of two digits at most (the width above)');
  t.strictSame(await admin('credits', 'ledger', '--account', B), { code: 0, out: expected.join('\n') });
  t.strictSame(await admin('credits', 'ledger', '--account', B, '--limit', '2'), { code: 0, out: expected.slice(0, 3).join('\n') }, '--limit keeps the newest');

  // 25 more rows: the default shows 20 of them, --limit 1000 all 31.
  for (let i = 0; i < 25; i++) await store.ledger.grant(B, 1, `grant ${i}`);
  const out20 = (await admin('credits', 'ledger', '--account', B)).out.split('\n');
  t.equal(out20.length, 21, 'header and 20 rows by default');
  // Without reservations among them, the RESERVATION column is as wide as its header.
  t.match(out20[1], /^\d{2}  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  grant       1  -            grant 24$/, 'the newest first');
  t.equal((await admin('credits', 'ledger', '--account', B, '--limit', '1000')).out.split('\n').length, 32, 'header and all 31 rows');
  for (const bad of ['0', '1001', 'ten', '-1']) {
    t.strictSame(await admin('credits', 'ledger', '--account', B, `--limit=${bad}`), {
      code: 2,
      out: `--limit must be an integer from 1 to 1000, got ${JSON.stringify(bad)}\nusage: admin credits ledger --account ACCOUNT_ID [--limit N]`,
    });
  }
  t.strictSame(await admin('credits', 'ledger', '--account', 'acc_nope'), { code: 1, out: 'no account acc_nope' });
});

t.test('key activate: an expired key is refused (it used to report success); a revoked one too', async (t) => {
  const expiredAt = (await store.keys.get(k5.id))!.expires_at!.toISOString();
  t.strictSame(await admin('key', 'activate', k5.id), { code: 1, out: `key ${k5.id} expired at ${expiredAt}; an expired key cannot be activated: create a new key` });
  await store.keys.setState(k5.id, 'inactive');
  t.strictSame(await admin('key', 'activate', k5.key), { code: 1, out: `key ${k5.id} expired at ${expiredAt}; an expired key cannot be activated: create a new key` }, 'named by the key itself, inactive and expired');
  t.equal((await store.keys.get(k5.id))!.state, 'inactive', 'state unchanged');
  t.strictSame(await admin('key', 'activate', k4.id), { code: 1, out: `key ${k4.id} is revoked; revocation cannot be undone` });
  t.strictSame(await admin('key', 'expire', k5.id), { code: 0, out: `key ${k5.id} already expired at ${expiredAt}` }, 'expiring again keeps the first expiry');
  t.equal((await store.keys.get(k5.id))!.expires_at!.toISOString(), expiredAt);
  t.strictSame(await admin('key', 'activate', k3.id), { code: 0, out: `key ${k3.id} activated` }, 'an inactive key that has not expired can be');
  t.strictSame(await admin('key', 'activate', 'key_nope'), { code: 1, out: 'no such key' });
});

t.test('key create --expires: only an ISO 8601 time in the future', async (t) => {
  const usage = 'usage: admin key create --account ACCOUNT_ID [--scopes a,b | --unrestricted] [--kind test|live] [--name NAME] [--expires ISO_DATE]';
  const before = await store.keys.count();
  t.strictSame(await admin('key', 'create', '--account', A, '--expires', '2020-01-01'), { code: 2, out: `--expires must be in the future, got 2020-01-01T00:00:00.000Z\n${usage}` });
  const now = new Date(Date.now()).toISOString();
  const res = await admin('key', 'create', '--account', A, '--expires', now);
  t.strictSame(res, { code: 2, out: `--expires must be in the future, got ${now}\n${usage}` }, 'now is not the future');
  t.strictSame(await admin('key', 'create', '--account', A, '--expires', 'tomorrow'), { code: 2, out: `--expires must be an ISO 8601 date or time, got "tomorrow"\n${usage}` });
  t.strictSame(await admin('key', 'create', '--account', A, '--expires', '1'), { code: 2, out: `--expires must be an ISO 8601 date or time, got "1"\n${usage}` }, 'not what Date() makes of it (2001)');
  t.equal(await store.keys.count(), before, 'nothing created');
  const ok = await admin('key', 'create', '--account', A, '--scopes', 'credits:read', '--expires', '2099-12-31T23:00:00Z');
  t.equal(ok.code, 0);
  t.match(ok.out, /^key key_[0-9a-f]{24} created \(credits:read, expires 2099-12-31T23:00:00\.000Z\)\nsvc_live_[A-Za-z0-9]{40}\nThis key is shown once; only its SHA-256 hash is stored\.$/);
});

t.test('job list and job show', async (t) => {
  const J = await store.accounts.create({ name: 'jobs', credits: 50 });
  const made: string[] = [];
  for (const [i, n] of [3, 5].entries()) {
    const r = await store.jobs.create({ id: `job_admintest00000000000${i}`, accountId: J, source: 'json', totalRows: n + 1, uniqueEmails: n, inputKey: `jobs/x${i}/rows.ndjson` }, jobCredits);
    if (!r.ok) throw new Error('refused');
    made.push(r.job.id);
  }
  await store.jobs.cancel(J, made[0]!, jobCredits);
  const jobs = await store.jobs.list(J, { limit: 10 });
  const created = (id: string) => iso(jobs.jobs.find((j) => j.id === id)!.created_at);
  t.strictSame(await admin('job', 'list', '--account', J), {
    code: 0,
    out: [
      `ID                         ACCOUNT                       STATE     SOURCE  ROWS  UNIQUE  PROCESSED  RESERVED  CHARGED  CREATED                   FILENAME`,
      `${made[1]}  ${J}  queued    json       6       5          0         5        -  ${created(made[1]!)}  -`,
      `${made[0]}  ${J}  canceled  json       4       3          0         3        0  ${created(made[0]!)}  -`,
    ].join('\n'),
  }, 'newest first, charged once finalized');
  t.equal((await admin('job', 'list', '--account', J, '--status', 'canceled')).out.split('\n').length, 2, 'status filter');
  t.equal((await admin('job', 'list', '--account', J, '--limit', '1')).out.split('\n').length, 2, 'limit');
  t.strictSame(await admin('job', 'list', '--status', 'done'), { code: 2, out: '--status must be one of awaiting_upload, queued, processing, completed, failed, canceled, got "done"\nusage: admin job list [--account ACCOUNT_ID] [--status STATE] [--limit N]' });
  t.strictSame(await admin('job', 'list', '--account', 'acc_nope'), { code: 1, out: 'no account acc_nope' });
  const show = await admin('job', 'show', made[0]!);
  t.equal(show.code, 0);
  t.match(show.out, new RegExp(`^id +${made[0]}\n`));
  t.match(show.out, /\nstate +canceled\n/);
  t.match(show.out, /\nresults +valid 0, valid_role_based 0, invalid 0, risky 0, unknown 0 \(role_based 0, high_value 0, catch_all 0\)\n/);
  t.match(show.out, /\ncredits +reserved 3, charged 0, refunded 3 \(finalized\)\n/);
  t.match(show.out, /\nerror +-$/);
  t.strictSame(await admin('job', 'show', 'job_nope'), { code: 1, out: 'no job job_nope' });
  t.strictSame(await admin('job', 'show'), { code: 2, out: 'which job? give its id\nusage: admin job show JOB_ID' });
});

t.test('account data: show, enable, disable (the data product)', async (t) => {
  t.strictSame(await admin('account', 'data', '--account', A), { code: 0, out: `account ${A}: data product disabled` });
  t.strictSame(await admin('account', 'data', '--account', A, '--enable'), { code: 0, out: `account ${A}: data product enabled` });
  t.equal(await store.accounts.dataProduct(A), true);
  t.strictSame(await admin('account', 'data', '--account', A, '--disable'), { code: 0, out: `account ${A}: data product disabled` });
  t.equal(await store.accounts.dataProduct(A), false);
  t.equal((await admin('account', 'data', '--account', A, '--enable', '--disable')).code, 2);
  t.strictSame(await admin('account', 'data', '--account', 'acc_nope'), { code: 1, out: 'no account acc_nope' });
});

t.test('account connectors: show, disable, enable', async (t) => {
  t.strictSame(await admin('account', 'connectors', '--account', A), { code: 0, out: `account ${A}: connectors enabled` });
  t.strictSame(await admin('account', 'connectors', '--account', A, '--disable'), { code: 0, out: `account ${A}: connectors disabled` });
  t.equal(await store.outcomes.connectorsEnabled(A), false);
  t.strictSame(await admin('account', 'connectors', '--account', A, '--enable'), { code: 0, out: `account ${A}: connectors enabled` });
  t.equal(await store.outcomes.connectorsEnabled(A), true);
  t.equal((await admin('account', 'connectors', '--account', A, '--enable', '--disable')).code, 2);
  t.strictSame(await admin('account', 'connectors', '--account', 'acc_nope'), { code: 1, out: 'no account acc_nope' });
});

t.test('--help on every command, exit 0; usage errors exit 2', async (t) => {
  const all = [
    'usage: admin COMMAND [OPTIONS]    (admin COMMAND --help explains one)',
    '  admin account create [--credits N] [--name NAME]',
    '  admin account list',
    '  admin account connectors --account ACCOUNT_ID [--enable | --disable]',
    '  admin account data --account ACCOUNT_ID [--enable | --disable]',
    '  admin key create --account ACCOUNT_ID [--scopes a,b | --unrestricted] [--kind test|live] [--name NAME] [--expires ISO_DATE]',
    '  admin key list --account ACCOUNT_ID',
    '  admin key activate KEY_ID_OR_KEY',
    '  admin key deactivate KEY_ID_OR_KEY',
    '  admin key revoke KEY_ID_OR_KEY',
    '  admin key expire KEY_ID_OR_KEY',
    '  admin credits grant --account ACCOUNT_ID --credits N',
    '  admin credits show --account ACCOUNT_ID',
    '  admin credits ledger --account ACCOUNT_ID [--limit N]',
    '  admin job list [--account ACCOUNT_ID] [--status STATE] [--limit N]',
    '  admin job show JOB_ID',
    '  admin subscription plans',
    '  admin subscription create --account ACCOUNT_ID --plan PLAN_ID',
    '  admin subscription show --account ACCOUNT_ID',
    '  admin subscription advance-period --account ACCOUNT_ID',
    '  admin webhook-secret rotate --account ACCOUNT_ID [--grace-seconds N]',
    '  admin webhook-secret list --account ACCOUNT_ID',
    '  admin user create --account ACCOUNT_ID --email EMAIL [--role owner|member] [--operator] --password-stdin',
    '  admin user list --account ACCOUNT_ID',
    '  admin user remove USER_ID [--force]',
    '  admin user link --account ACCOUNT_ID [--role owner|member]',
    `scopes: ${SCOPES.join(', ')}`,
  ].join('\n');
  for (const argv of [['--help'], ['-h'], ['help']]) t.strictSame(await admin(...argv), { code: 0, out: all }, argv.join(' '));
  t.strictSame(await admin(), { code: 2, out: `no command\n${all}` });
  t.strictSame(await admin('nonsense'), { code: 2, out: `unknown command: nonsense\n${all}` });
  t.strictSame(await admin('account', 'list', '--bogus'), { code: 2, out: `Unknown option '--bogus'. To specify a positional argument starting with a '-', place it at the end of the command after '--', as in '-- "--bogus"\n${all}` });

  t.strictSame(await admin('credits', '--help'), {
    code: 0,
    out: [
      'usage: admin credits COMMAND [OPTIONS]    (admin credits COMMAND --help explains one)',
      '  admin credits grant --account ACCOUNT_ID --credits N',
      "      Adds N credits to an account's balance (a ledger row `admin grant`) and shows the balance.",
      '  admin credits show --account ACCOUNT_ID',
      "      Shows an account's balance, reserved and available credits.",
      '  admin credits ledger --account ACCOUNT_ID [--limit N]',
      "      Shows an account's newest credit ledger rows, newest first: id, time, kind (grant, reserve, charge, release, debit, expire), amount, reservation, note.",
    ].join('\n'),
  });
  const keyHelp = await admin('key', '--help');
  t.equal(keyHelp.code, 0);
  t.equal(keyHelp.out.split('\n')[0], 'usage: admin key COMMAND [OPTIONS]    (admin key COMMAND --help explains one)');
  t.equal(keyHelp.out.split('\n').filter((l) => l.startsWith('  admin key ')).length, 6, 'the six key commands');
  t.strictSame(await admin('key'), { code: 2, out: `which key command?\n${keyHelp.out}` });
  t.strictSame(await admin('key', 'rotate'), { code: 2, out: `unknown command: key rotate\n${keyHelp.out}` });

  t.strictSame(await admin('credits', 'ledger', '--help'), {
    code: 0,
    out: [
      'usage: admin credits ledger --account ACCOUNT_ID [--limit N]',
      '',
      "Shows an account's newest credit ledger rows, newest first: id, time, kind (grant, reserve, charge, release, debit, expire), amount, reservation, note.",
      '',
      'options:',
      '  --account ACCOUNT_ID  the account (required)',
      '  --limit N             how many rows, 1-1000 (default 20)',
    ].join('\n'),
  });
  t.strictSame(await admin('account', 'list', '--help'), { code: 0, out: 'usage: admin account list\n\nLists every account, oldest first: id, credits (balance, reserved, available), number of keys, creation time, name.' });
  const commands = all.split('\n').filter((l) => l.startsWith('  admin ')).map((l) => l.trim().split(' ').slice(1, 3));
  t.equal(commands.length, 25);
  for (const [noun, verb] of commands) {
    const res = await admin(noun!, verb!, '--help');
    t.equal(res.code, 0, `${noun} ${verb} --help exits 0`);
    t.equal(res.out.split('\n')[0], all.split('\n').find((l) => l.startsWith(`  admin ${noun} ${verb}`))!.replace(/^ {2}/, 'usage: '), `${noun} ${verb} --help starts with its usage`);
  }
  t.strictSame(await admin('account', 'list', '--scopes', 'x'), { code: 2, out: 'admin account list takes no --scopes\nusage: admin account list' });
  t.strictSame(await admin('account', 'list', 'extra'), { code: 2, out: 'unexpected argument: extra\nusage: admin account list' });
});

t.test('the CLI refuses to create a store: no data directory (or no pgdata in it) is an error naming where it looked', async (t) => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const missing = path.join(tmp, 'typo', 'data');
  const message = (dir: string) => `no store at ${dir} (SVC_DATA_DIR); start the service once with \`npm start\`, or point SVC_DATA_DIR at its data directory`;
  t.strictSame(await runAdminCli({ dataDir: missing, databaseUrl: undefined }, ['account', 'list']), { code: 1, out: message(missing) });
  t.notOk(existsSync(path.join(tmp, 'typo')), 'nothing created');
  const empty = path.join(tmp, 'empty');
  mkdirSync(empty);
  t.strictSame(await runAdminCli({ dataDir: empty, databaseUrl: undefined }, ['account', 'create']), { code: 1, out: message(empty) });
  t.strictSame(readdirSync(empty), [], 'an existing directory without a store stays empty');
  t.strictSame(await runAdminCli({ dataDir: missing, databaseUrl: undefined }, ['key', 'list', '--help']), await admin('key', 'list', '--help'), 'help needs no store');
  t.equal((await runAdminCli({ dataDir: missing, databaseUrl: undefined }, ['nonsense'])).code, 2, 'nor does a usage error');
  t.notOk(existsSync(path.join(tmp, 'typo')));
});

t.test('the admin socket answers like runAdmin', async (t) => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-sock-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const sock = path.join(tmp, 'admin.sock');
  let changes = 0;
  const server = serveAdminSocket(store, sock, () => changes++);
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  for (const argv of [['account', 'list'], ['key', 'list', '--account', A], ['credits', 'ledger', '--account', B, '--limit', '3'], ['--help']]) {
    t.strictSame(await callAdminSocket(sock, argv), await admin(...argv), argv.join(' '));
  }
  t.strictSame(await runAdminCli({ dataDir: tmp, databaseUrl: undefined }, ['account', 'list']), await admin('account', 'list'), 'the CLI uses the socket when it answers (no pgdata needed)');
  t.strictSame(await callAdminSocket(sock, ['key', 'deactivate', k2.id]), { code: 0, out: `key ${k2.id} deactivated` });
  t.equal(changes, 1, 'a key change clears the service key cache');
});

t.test('the admin socket is mode 0600, without touching the process-wide umask', async (t) => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-sock-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const sock = path.join(tmp, 'admin.sock');
  const umask = process.umask.bind(process);
  const calls: unknown[][] = [];
  (process as { umask: (...a: unknown[]) => number }).umask = (...a: unknown[]) => (calls.push(a), umask(...(a as [number])));
  let server: net.Server;
  try {
    server = serveAdminSocket(store, sock, () => {});
  } finally {
    process.umask = umask;
  }
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await once(server, 'listening'); // emitted after the chmod callback registered first
  t.strictSame(calls, [], 'process.umask is not called (it is process-wide: unsafe with worker threads)');
  t.equal(statSync(sock).mode & 0o7777, 0o600, 'chmod 0600 once listening');
  t.ok(statSync(sock).isSocket());
  t.strictSame(await callAdminSocket(sock, ['credits', 'show', '--account', A]), await admin('credits', 'show', '--account', A), 'and it answers');
});

/** A Unix socket that accepts connections and never answers (a wedged service). */
async function wedgedSocket(t: Test, dir: string): Promise<{ sock: string; closed: () => number }> {
  const sock = path.join(dir, 'admin.sock');
  let closed = 0;
  const conns = new Set<net.Socket>();
  const server = net.createServer((c) => {
    conns.add(c);
    c.resume(); // reads the request (and sees the client hang up), answers nothing
    c.on('close', () => (closed++, conns.delete(c)));
    c.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(sock, () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => (conns.forEach((c) => c.destroy()), server.close(() => resolve()))));
  return { sock, closed: () => closed };
}

/** The count of closed connections once it reaches n (or after 2 s, whatever it is then). */
async function closedBy(closed: () => number, n: number): Promise<number> {
  for (const deadline = Date.now() + 2000; closed() < n && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
  return closed();
}

t.test('callAdminSocket gives up on a service that accepts but never answers, and destroys the socket', async (t) => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-wedged-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const { sock, closed } = await wedgedSocket(t, tmp);
  const started = Date.now();
  await t.rejects(callAdminSocket(sock, ['account', 'list'], 1000), new Error(`the service at ${sock} did not answer within 1 s`));
  const took = Date.now() - started;
  t.ok(took >= 990 && took < 5000, `after the timeout (${took} ms)`);
  t.equal(await closedBy(closed, 1), 1, 'the connection is closed, not left open');

  // The CLI reports it and does not fall back to the store (the service may have run the command,
  // and it holds the data directory).
  t.strictSame(await runAdminCli({ dataDir: tmp, databaseUrl: undefined }, ['credits', 'grant', '--account', A, '--credits', '5'], { socketTimeoutMs: 300 }), {
    code: 1,
    out: `the service at ${sock} did not answer within 300 ms`,
  });
  t.strictSame(readdirSync(tmp), ['admin.sock'], 'no store opened or created beside it');
  t.equal(await closedBy(closed, 2), 2, 'that connection closed too');
});

t.test('a socket file nobody listens on (left by a killed service) still falls back to the store', async (t) => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-dead-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const sock = path.join(tmp, 'admin.sock');
  // A process that exits while listening leaves the socket file behind (close() would unlink it).
  const r = spawnSync(process.execPath, ['-e', `require('node:net').createServer().listen(${JSON.stringify(sock)}, () => process.exit(0))`]);
  t.equal(r.status, 0);
  t.ok(statSync(sock).isSocket(), 'a stale socket file');
  t.strictSame(await runAdminCli({ dataDir: tmp, databaseUrl: undefined }, ['account', 'list']), {
    code: 1,
    out: `no store at ${tmp} (SVC_DATA_DIR); start the service once with \`npm start\`, or point SVC_DATA_DIR at its data directory`,
  }, 'connection refused: it looked for the store itself');
});


/** `npm run admin -- …` as a child process: its exit code, stdout and stderr. */
function adminProcess(env: Record<string, string>, ...args: string[]) {
  const { DATABASE_URL: _, SVC_DATA_DIR: __, ...rest } = process.env;
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'cluster/admin.ts', ...args], { cwd: ROOT, env: { ...rest, ...env }, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

t.test('cluster/admin.ts: a data directory open to others, or in use, is a configuration error: one line, exit 2 (as npm start)', async (t) => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-exit-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const loose = path.join(tmp, 'loose');
  mkdirSync(path.join(loose, 'pgdata'), { recursive: true });
  chmodSync(loose, 0o755);
  t.strictSame(adminProcess({ SVC_DATA_DIR: loose }, 'account', 'list'), {
    code: 2,
    stdout: '',
    stderr: `configuration error: data directory ${loose} has mode 0755, open to group or others; it holds the database, so it must be owner-only: chmod 700 ${loose}\n`,
  });
  t.equal(statSync(loose).mode & 0o7777, 0o755, 'left as it was');

  const locked = path.join(tmp, 'locked');
  mkdirSync(path.join(locked, 'pgdata'), { recursive: true, mode: 0o700 });
  chmodSync(locked, 0o700);
  writeFileSync(path.join(locked, 'svc.lock'), String(process.ppid)); // a live process (the test runner) holds it
  // The same instanceof list in cluster/admin.ts that turned the loose directory into exit 2 takes
  // this one (checked here in process: a second child process costs a second or two of the suite).
  await t.rejects(runAdminCli({ dataDir: locked, databaseUrl: undefined }, ['account', 'list']), new DataDirLockedError(locked, process.ppid), 'in use: DataDirLockedError');
});

t.test('hasSchema: false on a database without the migrations, true with them', async (t) => {
  t.equal(await store.hasSchema(), true);
  const bare = new Store(await freshPglite());
  t.teardown(() => bare.close());
  t.equal(await bare.hasSchema(), false);
});

t.test('DATABASE_URL without the schema: the CLI refuses and creates nothing (it used to migrate any database it was given)', { skip: pgUp ? false : `Postgres at ${PG_SHOWN} is unreachable` }, async (t) => {
  const { schema, url, drop } = await freshSchema();
  t.teardown(drop);
  const relations = () => pgAdmin(async (c) => (await c.query<{ relname: string }>('SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace ORDER BY relname', [schema])).rows.map((r) => r.relname));
  // With a password in the URL (ignored by a trust server), the message must not show it.
  const secret = 'not-the-password';
  const databaseUrl = url.replace(/^(\w+:\/\/)([^:@/]+)@/, `$1$2:${secret}@`);
  const hidden = databaseUrl.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');
  t.ok(hidden.includes(':***@'), 'a URL with a password');
  const dataDir = path.join(os.tmpdir(), `svc-admin-pg-${process.pid}-unused`);
  const refusal = { code: 1, out: `no store in DATABASE_URL (${hidden}): start the service once with it, or fix the URL` };
  t.strictSame(await runAdminCli({ dataDir, databaseUrl }, ['account', 'create', '--credits', '5']), refusal);
  t.strictSame(await runAdminCli({ dataDir, databaseUrl }, ['account', 'list']), refusal);
  t.strictSame(await relations(), [], 'no table (nor schema_migrations) created in that schema');
  t.notOk(existsSync(dataDir), 'nor a data directory');
  t.strictSame(await runAdminCli({ dataDir, databaseUrl }, ['account', 'list', '--help']), await admin('account', 'list', '--help'), 'help needs no store');

  // Once the service has started with it (it migrates), the CLI works there, without migrating again.
  const migrated = await openStore({ databaseUrl: url });
  const acct = await migrated.accounts.create({ name: 'pg', credits: 7 });
  const created = (await migrated.accounts.list())[0]!.created_at.toISOString();
  await migrated.close();
  t.strictSame(await runAdminCli({ dataDir, databaseUrl }, ['account', 'list']), {
    code: 0,
    out: `ID                            BALANCE  RESERVED  AVAILABLE  KEYS  CREATED                   NAME\n${acct}        7         0          7     0  ${created}  pg`,
  });
  t.ok((await relations()).includes('accounts'));
});

t.test('openStore({ migrate: false }) opens a database as it is', { skip: pgUp ? false : `Postgres at ${PG_SHOWN} is unreachable` }, async (t) => {
  const { schema, url, drop } = await freshSchema();
  t.teardown(drop);
  const s = await openStore({ databaseUrl: url, migrate: false });
  t.equal(await s.hasSchema(), false);
  await s.close();
  t.strictSame(await pgAdmin(async (c) => (await c.query('SELECT relname FROM pg_class WHERE relnamespace = $1::regnamespace', [schema])).rows), []);
  const m = await openStore({ databaseUrl: url });
  t.equal(await m.hasSchema(), true, 'the default migrates');
  await m.close();
});

t.test('subscription plans, create, show and advance-period (the local processor), with their refusals', async (t) => {
  t.strictSame(await admin('subscription', 'plans'), {
    code: 0,
    out: ['ID            PRICE  CREDITS  PERIOD  NAME', 'starter   19.00 usd     2000    30 d  Starter', 'growth    79.00 usd    10000    30 d  Growth', 'scale    299.00 usd    50000    30 d  Scale'].join('\n'),
  });
  const acct = await store.accounts.create({ name: 'subscriber', credits: 0 });
  t.strictSame(await admin('subscription', 'create', '--account', acct), { code: 2, out: '--plan is required\nusage: admin subscription create --account ACCOUNT_ID --plan PLAN_ID' });
  t.strictSame(await admin('subscription', 'create', '--account', acct, '--plan', 'gold'), { code: 1, out: 'no plan gold' });
  t.strictSame(await admin('subscription', 'create', '--account', 'acct_nope', '--plan', 'starter'), { code: 1, out: 'no account acct_nope' });
  t.strictSame(await admin('subscription', 'show', '--account', acct), { code: 1, out: `account ${acct} has no subscription` });
  t.strictSame(await admin('subscription', 'advance-period', '--account', acct), { code: 1, out: `account ${acct} has no live subscription` });

  const created = await admin('subscription', 'create', '--account', acct, '--plan', 'starter');
  t.equal(created.code, 0);
  const sub = (await store.subscriptions.live(acct))!;
  const lines = created.out.split('\n');
  t.strictSame(lines.slice(0, 11), [
    `subscription ${sub.id} created`,
    `id                    ${sub.id}`,
    `account               ${acct}`,
    'processor             local',
    'plan                  starter',
    'status                active',
    'cancel_at_period_end  false',
    `current_period        ${iso(sub.current_period_start)} to ${iso(sub.current_period_end)}`,
    'ended                 -',
    'credits               balance 2000, reserved 0, available 2000',
    'events                2',
  ]);
  t.match(lines[11], /^ {2}\S+ {2}customer\.subscription\.created {2}applied$/);
  t.match(lines[12], /^ {2}\S+ {2}invoice\.paid {2}applied$/);
  t.strictSame(await admin('subscription', 'create', '--account', acct, '--plan', 'growth'), { code: 1, out: `account ${acct} already has a live subscription ${sub.id} (active)` });

  const renewed = await admin('subscription', 'advance-period', '--account', acct);
  t.equal(renewed.code, 0);
  t.match(renewed.out, `subscription ${sub.id} renewed`);
  t.match(renewed.out, 'credits               balance 4000, reserved 0, available 4000');
  await store.subscriptions.flipCancel(acct, true);
  const ended = await admin('subscription', 'advance-period', '--account', acct);
  t.match(ended.out, `subscription ${sub.id} ended`);
  t.match(ended.out, 'status                canceled');
  t.match(ended.out, 'credits               balance 0, reserved 0, available 0');
  t.strictSame((await store.ledger.entries(acct, 10)).map((e) => [e.kind, e.amount]).reverse(), [['grant', 2000], ['grant', 2000], ['expire', 4000]]);
});

t.test('webhook-secret rotate and list: shown once, the old one signing for the grace period; refusals', async (t) => {
  const acct = await store.accounts.create({ name: 'hooks', credits: 0 });
  t.strictSame(await admin('webhook-secret', 'list', '--account', acct), { code: 0, out: `account ${acct} has no webhook secret yet (one is made at its first delivery; rotate to get one shown)` });
  const first = await admin('webhook-secret', 'rotate', '--account', acct);
  t.equal(first.code, 0);
  const [head, secret, ...rest] = first.out.split('\n');
  t.match(head, new RegExp(`^webhook secret whs_[0-9a-f]{24} created for account ${acct} \\(shown once\\):$`));
  t.match(secret, /^whsec_[A-Za-z0-9_-]{43}$/);
  t.strictSame(rest, [], 'nothing replaced');
  const second = await admin('webhook-secret', 'rotate', '--account', acct, '--grace-seconds', '3600');
  const firstId = /whs_[0-9a-f]{24}/.exec(head!)![0];
  const lines = second.out.split('\n');
  t.equal(lines.length, 3);
  t.match(lines[2], new RegExp(`^secret ${firstId} signs until \\d{4}-\\d{2}-\\d{2}T`));
  const until = Date.parse(lines[2]!.split(' signs until ')[1]!);
  t.ok(Math.abs(until - Date.now() - 3_600_000) < 10_000, 'an hour from now');
  t.strictSame(await store.webhookSecrets.signing(acct), [lines[1], secret], 'both sign, the newest first');
  const listed = await admin('webhook-secret', 'list', '--account', acct);
  t.equal(listed.code, 0);
  t.notOk(listed.out.includes(secret!), 'never the secret itself');
  t.match(listed.out, `${secret!.slice(0, 10)}…`);
  t.match(listed.out, 'next rotation');
  t.strictSame(await admin('webhook-secret', 'rotate', '--account', acct, '--grace-seconds', '604801'), { code: 2, out: '--grace-seconds must be a whole number from 0 to 604800\nusage: admin webhook-secret rotate --account ACCOUNT_ID [--grace-seconds N]' });
  t.strictSame(await admin('webhook-secret', 'rotate', '--account', acct, '--grace-seconds', 'soon'), { code: 2, out: '--grace-seconds must be a whole number from 0 to 604800\nusage: admin webhook-secret rotate --account ACCOUNT_ID [--grace-seconds N]' });
  t.strictSame(await admin('webhook-secret', 'rotate', '--account', 'acct_nope'), { code: 1, out: 'no account acct_nope' });
  t.strictSame(await admin('webhook-secret', 'rotate'), { code: 2, out: '--account is required\nusage: admin webhook-secret rotate --account ACCOUNT_ID [--grace-seconds N]' });
  const none = await admin('webhook-secret', 'rotate', '--account', acct, '--grace-seconds', '0');
  t.strictSame(await store.webhookSecrets.signing(acct), [none.out.split('\n')[1]], 'with no grace only the newest signs');
});

t.test('user commands: create with the password from standard input, list, link, remove', async (t) => {
  const C = await store.accounts.create({ name: 'users' });
  const withPw = (password: string | undefined, ...argv: string[]) => runAdmin(store, argv, () => {}, { publicUrl: 'https://svc.example.test', ...(password !== undefined && { password }) });
  let r = await withPw(undefined, 'user', 'create', '--account', C, '--email', 'ops@example.test', '--password-stdin');
  t.equal(r.code, 2);
  t.match(r.out, /^--password-stdin is required: the password is read from standard input\nusage: admin user create /);
  r = await withPw('too short', 'user', 'create', '--account', C, '--email', 'ops@example.test', '--password-stdin');
  t.match(r.out, /^password must be at least 12 characters\n/);
  r = await withPw('a long enough password', 'user', 'create', '--account', C, '--email', 'not-an-address', '--password-stdin');
  t.match(r.out, /^email must be an email address\n/);
  r = await withPw('a long enough password', 'user', 'create', '--account', C, '--email', 'Ops@Example.test', '--role', 'member', '--operator', '--password-stdin');
  t.equal(r.code, 0, r.out);
  t.match(r.out, /^user usr_[0-9a-f]{24} created: ops@example\.test, member, operator$/);
  r = await withPw('another long password', 'user', 'create', '--account', C, '--email', 'ops@example.test', '--password-stdin');
  t.strictSame(r, { code: 1, out: 'ops@example.test already has a sign-in' });
  t.equal((await admin('user', 'create', '--account', C, '--email', 'x@example.test', '--password', 'x')).code, 2, 'no --password option: a password never goes in argv');
  const [u] = await store.users.list(C);
  r = await admin('user', 'list', '--account', C);
  t.equal(r.out, `ID                            EMAIL             ROLE    OPERATOR  CREATED\n${u!.id}  ops@example.test  member  yes       ${u!.created_at.toISOString()}`);
  r = await withPw(undefined, 'user', 'link', '--account', C);
  t.match(r.out, /^https:\/\/svc\.example\.test\/dashboard\/setup#token=[A-Za-z0-9_-]{43}\nSingle use, valid until \d{4}-\d\d-\d\dT[\d:.]+Z; shown once \(only its SHA-256 is stored\)\.$/);
  t.equal((await admin('user', 'link', '--account', C, '--role', 'boss')).out.split('\n')[0], '--role must be owner or member');
  t.strictSame(await admin('user', 'remove', u!.id), { code: 0, out: `user ${u!.id} removed; their sessions ended` });
  t.strictSame(await admin('user', 'remove', u!.id), { code: 1, out: 'no such user' });
  t.strictSame(await store.users.list(C), []);
});

t.test("user remove keeps an account's last owner unless --force, and expires the invitations the removed user sent", async (t) => {
  const C = await store.accounts.create({ name: 'owners' });
  const withPw = (password: string, ...argv: string[]) => runAdmin(store, argv, () => {}, { publicUrl: 'https://svc.example.test', password });
  t.equal((await withPw('a long enough password', 'user', 'create', '--account', C, '--email', 'first@example.test', '--password-stdin')).code, 0);
  t.equal((await withPw('a long enough password', 'user', 'create', '--account', C, '--email', 'second@example.test', '--password-stdin')).code, 0);
  const [first, second] = await store.users.list(C);
  // An invitation the first owner sent and nobody used.
  await store.users.createLink({ tokenHash: 'h'.repeat(64), kind: 'invite', accountId: C, role: 'owner', createdBy: first!.id, expiresAt: new Date(Date.now() + 3_600_000) });
  t.strictSame(await runAdmin(store, ['user', 'remove', first!.id]), { code: 0, out: `user ${first!.id} removed; their sessions ended` }, 'one of two owners');
  t.ok((await store.users.link('h'.repeat(64)))!.expires_at.getTime() <= Date.now(), "the removed owner's invitation expired");
  const refused = `user ${second!.id} is the last owner of their account: give it another owner first (user link --account ACCOUNT_ID), or pass --force`;
  t.strictSame(await runAdmin(store, ['user', 'remove', second!.id]), { code: 1, out: refused });
  t.strictSame((await store.users.list(C)).map((u) => u.email), ['second@example.test'], 'the last owner stays');
  t.strictSame(await runAdmin(store, ['user', 'remove', second!.id, '--force']), { code: 0, out: `user ${second!.id} removed; their sessions ended` });
  t.strictSame(await store.users.list(C), []);
  t.strictSame(await runAdmin(store, ['user', 'remove', second!.id, '--force']), { code: 1, out: 'no such user' });
});

t.test('user create through runAdminCli reads standard input (one line, its newline dropped)', async (t) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-admin-users-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const s = await openStore({ dataDir });
  const acc = await s.accounts.create({ name: 'stdin' });
  await s.close();
  const r = await runAdminCli({ dataDir, databaseUrl: undefined }, ['user', 'create', '--account', acc, '--email', 'stdin@example.test', '--password-stdin'], { readStdin: async () => 'from standard input\n' });
  t.equal(r.code, 0, r.out);
  const again = await openStore({ dataDir });
  t.teardown(() => again.close());
  const creds = await again.users.credentials('stdin@example.test');
  const { verifyPassword } = await import('@svc/accounts');
  t.equal(await verifyPassword('from standard input', creds!.password_hash), true, 'the password is the line, without its newline');
});
