// The dashboard's API (/dashboard/api) through HTTP, as a browser would use it, in both profiles
// (the cluster pass runs it on PostgreSQL and Redis): the first-run owner link, sign-in and its
// throttle, sessions (fixation, sign-out, idle and absolute expiry, a removed user), CSRF and
// foreign origins, roles (a member is refused by the server, not only hidden by the page), and
// keys created, rotated and revoked here working, or not, on /v1/validate.

import t from 'tap';
import { createUser } from '@svc/accounts';
import { hashKey } from '@svc/store';
import { startStack, BOOTSTRAP_KEY } from '../helpers/stack.ts';
import { browser, PASSWORD, tokenOf } from '../helpers/dashboard.ts';

const stack = await startStack();
t.teardown(() => stack.close());

t.test('first run: the owner link creates the owner once; sign-in, sign-out', async (t) => {
  const url = stack.svc.setupUrl!;
  t.match(url, /^http:\/\/localhost:\d+\/dashboard\/setup#token=[A-Za-z0-9_-]{43}$/, 'a single-use link, its token in the fragment');
  const b = browser(stack);
  t.equal((await b.call('GET', '/session')).body.code, 'not_signed_in', 'no session yet');
  let r = await b.call('POST', '/setup', { token: tokenOf(url), email: 'owner@example.test', password: 'short' });
  t.same([r.status, r.body.code, r.body.message], [400, 'invalid_password', 'password must be at least 12 characters']);
  r = await b.call('POST', '/setup', { token: 'x'.repeat(43), email: 'owner@example.test', password: PASSWORD });
  t.same([r.status, r.body.code], [404, 'sign_in_link_not_found']);
  r = await b.call('POST', '/setup', { token: tokenOf(url), email: 'not an address', password: PASSWORD });
  t.same([r.status, r.body.code, r.body.message], [400, 'invalid_request', 'email must be an email address']);
  r = await b.call('POST', '/setup', { token: tokenOf(url), email: 'Owner@Example.test', password: PASSWORD });
  t.equal(r.status, 201);
  t.same([r.body.user.email, r.body.user.role, r.body.user.operator], ['owner@example.test', 'owner', false]);
  t.match(r.setCookie, /^svc_session=[A-Za-z0-9_-]{43}; Max-Age=604800; Path=\/dashboard; HttpOnly; SameSite=Lax$/, 'an httpOnly, SameSite=Lax cookie for /dashboard only');
  t.equal(r.headers.get('cache-control'), 'no-store');
  t.equal((await b.call('GET', '/session')).status, 200, 'signed in');
  const again = browser(stack);
  r = await again.call('POST', '/setup', { token: tokenOf(url), email: 'second@example.test', password: PASSWORD });
  t.same([r.status, r.body.code], [409, 'sign_in_link_used'], 'the link works once');
  r = await b.call('POST', '/sign-out');
  t.equal(r.status, 204);
  t.match(r.setCookie, /^svc_session=; Max-Age=0;|^svc_session=;.*Expires=Thu, 01 Jan 1970/, 'the cookie is cleared');
  t.equal((await b.call('GET', '/session')).body.code, 'not_signed_in');
});

t.test('sign-in: wrong password, unknown address, then throttled per address', async (t) => {
  const b = browser(stack);
  let r = await b.call('POST', '/sign-in', { email: 'owner@example.test', password: 'wrong password 123' });
  t.same([r.status, r.body.code, r.body.message], [401, 'invalid_credentials', 'Wrong email address or password']);
  r = await b.call('POST', '/sign-in', { email: 'nobody@example.test', password: PASSWORD });
  t.same([r.status, r.body.code], [401, 'invalid_credentials'], 'an unknown address gets the same answer');
  for (let i = 0; i < 9; i++) await b.call('POST', '/sign-in', { email: 'victim@example.test', password: `guess number ${i}` });
  r = await b.call('POST', '/sign-in', { email: 'victim@example.test', password: 'the tenth guess' });
  t.equal(r.body.code, 'invalid_credentials', 'ten attempts are answered');
  r = await b.call('POST', '/sign-in', { email: 'victim@example.test', password: 'the eleventh guess' });
  t.same([r.status, r.body.code], [429, 'sign_in_throttled']);
  t.match(r.body.message, /^Too many sign-in attempts; try again in 15 minute\(s\)$/);
  t.equal(r.headers.get('retry-after'), String(r.body.retry_after));
  t.ok(r.body.retry_after > 800 && r.body.retry_after <= 900, `retry_after ${r.body.retry_after} s`);
  r = await b.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  t.equal(r.status, 200, 'another address still signs in');
});

t.test('session fixation: a cookie set before sign-in is never adopted, and ends', async (t) => {
  const b = browser(stack);
  await b.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  const planted = b.cookie!; // an attacker's own valid session id, planted in the victim's browser
  const victim = browser(stack);
  victim.cookie = planted;
  const r = await victim.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  t.equal(r.status, 200);
  t.not(victim.cookie, planted, 'a new session id at sign-in');
  t.equal((await b.call('GET', '/session')).body.code, 'not_signed_in', 'the planted session ended');
  const forged = browser(stack);
  forged.cookie = 'attacker-chosen-value';
  t.equal((await forged.call('GET', '/session')).body.code, 'not_signed_in', 'an invented id is no session');
});

t.test('CSRF: a change needs the session token and this origin', async (t) => {
  const b = browser(stack);
  await b.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  const token = b.csrf!;
  b.csrf = undefined;
  let r = await b.call('POST', '/keys', { kind: 'test', name: 'no token' });
  t.same([r.status, r.body.code], [403, 'csrf_token_invalid'], 'no X-CSRF-Token');
  b.csrf = token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA');
  r = await b.call('POST', '/keys', { kind: 'test', name: 'wrong token' });
  t.same([r.status, r.body.code], [403, 'csrf_token_invalid'], 'a wrong token');
  b.csrf = token;
  r = await b.call('POST', '/keys', { kind: 'test', name: 'foreign origin' }, { origin: 'https://evil.example' });
  t.same([r.status, r.body.code, r.body.message], [403, 'csrf_token_invalid', 'This request comes from another origin']);
  r = await b.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD }, { origin: 'https://evil.example' });
  t.same([r.status, r.body.code], [403, 'csrf_token_invalid'], 'a sign-in from another site (login CSRF)');
  const form = await fetch(`${stack.url}/dashboard/api/keys`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `svc_session=${b.cookie}` }, body: 'kind=test' });
  t.equal(form.status, 415, 'a form post is not taken');
  const keys = (await b.call('GET', '/keys')).body.keys as Array<{ name: string }>;
  t.same(keys.filter((k) => /token|origin/.test(k.name)), [], 'no refused request made a key');
});

t.test('keys: created once in full, listed by prefix, working until revoked; rotation', async (t) => {
  const b = browser(stack);
  await b.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  let r = await b.call('POST', '/keys', { kind: 'live', name: '<script>alert(1)</script>', scopes: ['email:validate:single'] });
  t.equal(r.status, 201);
  const { id, key } = r.body;
  t.match(key, /^svc_live_[A-Za-z0-9]{40}$/);
  const listed = (await b.call('GET', '/keys')).body.keys.find((k: { id: string }) => k.id === id);
  t.same([listed.prefix, listed.name, listed.scopes, listed.state], [key.slice(0, listed.prefix.length), '<script>alert(1)</script>', ['email:validate:single'], 'active']);
  t.notOk(JSON.stringify((await b.call('GET', '/keys')).body).includes(key), 'the list never holds a key');
  const validate = (k: string) => stack.call('POST', '/v1/validate', { key: k, body: { email: 'info@accept.test' } });
  t.equal((await validate(key)).status, 200, 'the new key works on /v1/validate');
  r = await b.call('POST', '/keys', { kind: 'live', scopes: ['no:such:scope'] });
  t.same([r.status, r.body.code, r.body.message], [400, 'invalid_request', 'unknown scope(s): no:such:scope']);
  r = await b.call('POST', '/keys', { kind: 'live', expires_at: '2001-01-01T00:00:00Z' });
  t.same([r.status, r.body.code, r.body.message], [400, 'invalid_request', 'expiry must be in the future, got 2001-01-01T00:00:00.000Z']);

  r = await b.call('POST', `/keys/${id}/rotate`, { grace_seconds: 0 });
  t.equal(r.status, 201);
  t.same([r.body.scopes, r.body.old_key.id], [['email:validate:single'], id]);
  t.equal((await validate(r.body.key)).status, 200, 'the rotated key works');
  const old = await validate(key);
  t.same([old.status, old.body.code], [401, 'api_key_expired'], 'the old one stopped (no grace)');

  r = await b.call('POST', `/keys/${r.body.id}/revoke`);
  t.same([r.status, r.body.changed], [200, true]);
  const revokedKey = (await b.call('GET', '/keys')).body.keys.find((k: { id: string; name: string }) => k.id !== id && k.name === '<script>alert(1)</script>');
  t.equal(revokedKey.state, 'revoked');
  r = await b.call('POST', `/keys/${revokedKey.id}/activate`);
  t.same([r.status, r.body.code], [409, 'key_revoked'], 'revocation is final');
  r = await b.call('POST', '/keys/key_000000000000000000000000/revoke');
  t.same([r.status, r.body.code], [404, 'key_not_found']);
  const bootstrapId = (await stack.store.keys.resolveId(BOOTSTRAP_KEY))!;
  t.equal((await b.call('GET', '/keys')).body.keys.some((k: { id: string }) => k.id === bootstrapId), true, "the account's keys include the bootstrap key");
});

t.test("a member: invited once, refused keys and team by the server; removed, their session ends", async (t) => {
  const owner = browser(stack);
  await owner.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  let r = await owner.call('POST', '/invitations', { role: 'member' });
  t.equal(r.status, 201);
  t.match(r.body.url, /\/dashboard\/setup#token=/);
  const member = browser(stack);
  r = await member.call('POST', '/setup', { token: tokenOf(r.body.url), email: 'member@example.test', password: PASSWORD });
  t.same([r.status, r.body.user.role], [201, 'member']);
  for (const [method, route] of [
    ['GET', '/keys'],
    ['POST', '/keys'],
    ['GET', '/users'],
    ['POST', '/invitations'],
  ] as const) {
    r = await member.call(method, route, method === 'POST' ? {} : undefined);
    t.same([r.status, r.body.code], [403, 'owner_role_required'], `${method} ${route}`);
  }
  r = await owner.call('POST', '/setup', { token: 'y'.repeat(43), email: 'member@example.test', password: PASSWORD });
  t.equal(r.body.code, 'sign_in_link_not_found');
  const users = (await owner.call('GET', '/users')).body.users as Array<{ id: string; email: string }>;
  t.same(users.map((u) => u.email), ['owner@example.test', 'member@example.test']);
  const memberId = users.find((u) => u.email === 'member@example.test')!.id;
  const ownerId = users.find((u) => u.email === 'owner@example.test')!.id;
  r = await owner.call('DELETE', `/users/${ownerId}`);
  t.same([r.status, r.body.message], [400, 'you cannot remove yourself; another owner can']);
  t.equal((await owner.call('DELETE', `/users/${memberId}`)).status, 204);
  t.equal((await member.call('GET', '/session')).body.code, 'not_signed_in', "the removed member's session ended");
  r = await member.call('POST', '/sign-in', { email: 'member@example.test', password: PASSWORD });
  t.equal(r.body.code, 'invalid_credentials', 'and they cannot sign in again');
});

t.test('sessions end when idle or too old', async (t) => {
  const b = browser(stack);
  await b.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  t.equal((await b.call('GET', '/session')).status, 200);
  await stack.db.query("UPDATE user_sessions SET last_seen_at = now() - interval '12 hours 1 minute' WHERE revoked_at IS NULL");
  t.equal((await b.call('GET', '/session')).body.code, 'not_signed_in', 'idle for longer than SVC_SESSION_IDLE_S (12 h)');
  await b.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  t.equal((await b.call('GET', '/session')).status, 200);
  await stack.db.query("UPDATE user_sessions SET expires_at = now() - interval '1 second' WHERE revoked_at IS NULL");
  t.equal((await b.call('GET', '/session')).body.code, 'not_signed_in', 'past SVC_SESSION_MAX_S');
});

t.test('validate one address: the API use case and answer, charged the same, for owners and members', async (t) => {
  const b = browser(stack);
  await b.call('POST', '/sign-in', { email: 'owner@example.test', password: PASSWORD });
  const before = (await stack.call('GET', '/v1/credits')).body.balance as number;
  let r = await b.call('POST', '/validate', { email: ' jane.doe@accept.test ' });
  t.equal(r.status, 200);
  t.match(r.body, { email: 'jane.doe@accept.test', result: 'valid', reason_code: 'accepted', credits_charged: 1, charge_reason: 'high_value_validation' });
  const api = await stack.call('POST', '/v1/validate', { body: { email: 'jane.doe@accept.test' } });
  t.strictSame(Object.keys(r.body).sort(), Object.keys(api.body).sort(), 'the same fields as POST /v1/validate');
  r = await b.call('POST', '/validate', { email: 'info@accept.test' });
  t.match(r.body, { result: 'valid_role_based', credits_charged: 0, charge_reason: 'role_based_not_charged' });
  t.equal((await stack.call('GET', '/v1/credits')).body.balance, before - 2, 'one credit each for the two personal validations (dashboard and API), none for the role address');
  r = await b.call('POST', '/validate', {});
  t.same([r.status, r.body.code], [400, 'email_required']);
  r = await b.call('POST', '/validate', { email: 42 });
  t.same([r.status, r.body.code], [400, 'invalid_email_type']);
  b.csrf = undefined;
  r = await b.call('POST', '/validate', { email: 'jane.doe@accept.test' });
  t.same([r.status, r.body.code], [403, 'csrf_token_invalid'], 'a change (it spends credits) needs the CSRF token');
  const anon = browser(stack);
  r = await anon.call('POST', '/validate', { email: 'jane.doe@accept.test' });
  t.same([r.status, r.body.code], [401, 'not_signed_in']);
});

t.test("jobs: the account's jobs as GET /v1/csv/jobs gives them, cancel's rules, signed downloads (all rows or the valid ones)", async (t) => {
  const emails = ['jane.doe@accept.test', 'info@accept.test', 'nobody@reject.test', 'john.smith@accept.test'];
  const created = await stack.call('POST', '/v1/validate/batch', { body: { emails } });
  t.equal(created.status, 202, created.text);
  const id = created.body.id as string;
  let job: any;
  for (let i = 0; i < 200; i++) {
    job = (await stack.call('GET', `/v1/csv/jobs/${id}`)).body;
    if (job.status === 'completed') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(job.status, 'completed');
  // A second owner (made as the admin CLI makes one): owner@example.test has spent its ten
  // sign-ins of this quarter hour in the tests above.
  const accountId = (await stack.store.keys.findByHash(hashKey(BOOTSTRAP_KEY)))!.account_id;
  t.match(await createUser(stack.store, { accountId, email: 'second.owner@example.test', password: PASSWORD, role: 'owner' }), { ok: true });
  const b = browser(stack);
  t.equal((await b.call('POST', '/sign-in', { email: 'second.owner@example.test', password: PASSWORD })).status, 200);
  let r = await b.call('GET', '/jobs?status=completed&limit=5');
  t.equal(r.status, 200);
  t.strictSame(r.body.jobs.find((j: { id: string }) => j.id === id), job, 'the same status object as GET /v1/csv/jobs/{id}');
  t.equal((await b.call('GET', '/jobs?status=queued')).body.jobs.some((j: { id: string }) => j.id === id), false, 'filtered by state');
  r = await b.call('GET', '/jobs?limit=0');
  t.same([r.status, r.body.code, r.body.message], [400, 'invalid_request', 'limit must be an integer from 1 to 100']);
  r = await b.call('GET', '/jobs?status=done');
  t.same([r.status, r.body.code], [400, 'invalid_request']);
  r = await b.call('POST', `/jobs/${id}/cancel`);
  t.same([r.status, r.body.code], [409, 'invalid_job_state'], 'a finished job cannot be canceled');
  r = await b.call('POST', '/jobs/job_000000000000000000000000/cancel');
  t.same([r.status, r.body.code], [404, 'job_not_found']);
  r = await b.call('GET', `/jobs/${id}/download`);
  t.equal(r.status, 200);
  const here = (url: string) => `${stack.url}${new URL(url).pathname}${new URL(url).search}`; // as the page does: on the origin it was served from
  const all = await (await fetch(here(r.body.url))).text();
  t.equal(all.trim().split('\n').length, 1 + emails.length, 'every row, behind a signed URL that needs no key');
  r = await b.call('GET', `/jobs/${id}/download?segment=valid`);
  const valid = (await (await fetch(here(r.body.url))).text()).trim().split('\n').slice(1);
  t.same(valid.map((l) => l.split(',')[0]).sort(), ['jane.doe@accept.test', 'john.smith@accept.test'], 'only the valid rows');
  r = await b.call('GET', `/jobs/${id}/download?segment=great`);
  t.same([r.status, r.body.code], [400, 'invalid_request']);
});

t.test('a list through the dashboard: prepare, the PUT to the signed path, start; the REST rules and codes', async (t) => {
  const b = browser(stack);
  t.equal((await b.call('POST', '/sign-in', { email: 'second.owner@example.test', password: PASSWORD })).status, 200);
  let r = await b.call('POST', '/csv/prepare', {});
  t.same([r.status, r.body.code], [400, 'invalid_request'], 'a filename is required');
  r = await b.call('POST', '/csv/prepare', { filename: 'leads.csv', webhook_url: 'ftp://example.test/hook' });
  t.same([r.status, r.body.code], [400, 'invalid_webhook_url']);
  r = await b.call('POST', '/csv/prepare', { filename: 'leads.csv' });
  t.equal(r.status, 201);
  t.match(r.body.upload_path, /^\/v1\/csv\/uploads\/job_[0-9a-f]{24}\?/, 'a path on this origin, signed');
  const batch = r.body.batch_id as string;
  const put = await fetch(`${stack.url}${r.body.upload_path}`, { method: 'PUT', headers: { 'content-type': 'text/csv' }, body: 'name,mail\nJane,jane.doe@accept.test\n' });
  t.equal(put.status, 200);
  r = await b.call('POST', '/csv/start', { batch_id: batch, email_column: 'email' });
  t.same([r.status, r.body.code], [400, 'email_column_not_found']);
  r = await b.call('POST', '/csv/start', { batch_id: batch, email_column: 'mail' });
  t.equal(r.status, 202);
  t.match(r.body, { id: batch, source: 'csv', filename: 'leads.csv', results: { total_rows: 1, unique_emails: 1, credits_reserved: 1 } });
  r = await b.call('POST', '/csv/start', { batch_id: batch, email_column: 'mail' });
  t.same([r.status, r.body.code], [409, 'invalid_job_state'], 'started once');
  r = await b.call('GET', `/jobs/${batch}`);
  t.equal(r.body.id, batch, 'the job, watched by its id');
  r = await b.call('GET', '/jobs/job_000000000000000000000000');
  t.same([r.status, r.body.code], [404, 'job_not_found']);
});

t.test('owners: the account always keeps one; a demoted or removed owner loses what they could do', async (t) => {
  const anyone = browser(stack);
  await anyone.call('POST', '/sign-in', { email: 'second.owner@example.test', password: PASSWORD });
  const accountId = (await anyone.call('GET', '/session')).body.account_id as string;
  const owners = async () => (await stack.store.users.list(accountId)).filter((u) => u.role === 'owner').length;
  const signedIn = async (email: string) => {
    t.match(await createUser(stack.store, { accountId, email, password: PASSWORD, role: 'owner' }), { ok: true });
    const b = browser(stack);
    t.equal((await b.call('POST', '/sign-in', { email, password: PASSWORD })).status, 200);
    const me = (await b.call('GET', '/session')).body.user.id as string;
    return { b, id: me };
  };
  const a = await signedIn('owner.a@example.test');
  const b = await signedIn('owner.b@example.test');
  // B invites an owner, then A makes B a member: B's unused owner invitation dies with B's role.
  const link = await b.b.call('POST', '/invitations', { role: 'owner' });
  t.equal(link.status, 201);
  t.strictSame((await a.b.call('POST', `/users/${b.id}/role`, { role: 'member' })).body.changed, true);
  const redeem = await browser(stack).call('POST', '/setup', { token: tokenOf(link.body.url), email: 'back.door@example.test', password: PASSWORD });
  t.strictSame([redeem.status, redeem.body.code], [409, 'sign_in_link_expired'], "a demoted owner's owner invitation no longer works");
  t.strictSame((await b.b.call('POST', `/users/${a.id}/role`, { role: 'member' })).body.code, 'owner_role_required', 'the demoted owner changes nobody');
  // Two owners removing each other at the same moment: one of them stays.
  const c = await signedIn('owner.c@example.test');
  const before = await owners();
  const [x, y] = await Promise.all([a.b.call('DELETE', `/users/${c.id}`), c.b.call('DELETE', `/users/${a.id}`)]);
  // The loser finds its sender removed in one of two places, by timing alone: its session was already
  // ended by the other removal (401 not_signed_in), or its session held and the removal's own
  // transaction found it no owner any more (403 owner_role_required). Both refuse; neither removes.
  const landed = [x, y].filter((r) => r.status === 204);
  const refused = [x, y].filter((r) => r.status !== 204);
  t.equal(landed.length, 1, 'one removal lands');
  t.equal(refused.length, 1, 'the other is refused');
  const loser = refused[0]!;
  t.ok(
    (loser.status === 403 && loser.body.code === 'owner_role_required') || (loser.status === 401 && loser.body.code === 'not_signed_in'),
    `the other finds its sender removed (got ${loser.status} ${loser.body.code})`,
  );
  t.equal(await owners(), before - 1, 'exactly one owner fewer');
});
