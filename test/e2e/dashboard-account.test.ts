// The dashboard's account page and operator console through HTTP, as a browser would use them, in
// both profiles (TEST_PROFILE=cluster runs it on PostgreSQL and Redis): the subscription and its
// cancel/reactivate under the REST API's rules, connected MCP apps listed and revoked (the tokens
// stop at once), the webhook signing secrets and the page's verification snippet checked against
// the service's signature, role changes that keep an owner, and the operator's accounts, credit
// grants, data product and subscription changes; with every refusal (role, operator flag, CSRF,
// another account's grant or user).

import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { createUser } from '@svc/accounts';
import { DATA_ENDPOINTS } from '@svc/contracts';
import { webhookSignature } from '@svc/jobs';
import { hashKey } from '@svc/store';
import { BOOTSTRAP_KEY, startStack } from '../helpers/stack.ts';
import { browser, PASSWORD, tokenOf, type Browser } from '../helpers/dashboard.ts';
import { freePort } from '../helpers/private-infra.ts';




/** A set-up step's check (the subtests assert; a failed set-up stops the file). */
function expect(got: unknown, want: unknown, what: string): void {
  if (got !== want) throw new Error(`set-up: ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

const port = await freePort();
const stack = await startStack({ env: { PORT: String(port), SVC_PUBLIC_URL: `http://127.0.0.1:${port}` } });
t.teardown(() => stack.close());
const base = stack.url;
const { store } = stack;
const accountId = (await store.keys.findByHash(hashKey(BOOTSTRAP_KEY)))!.account_id;

// The people: the first-run owner, a member invited by them, an operator (of another account: the
// flag is the service's, not an account's), and a user of yet another account.
const owner = browser(stack);
expect((await owner.call('POST', '/setup', { token: tokenOf(stack.svc.setupUrl!), email: 'owner@example.test', password: PASSWORD })).status, 201, 'the owner, from the first-run link');
const invite = await owner.call('POST', '/invitations', { role: 'member' });
const member = browser(stack);
expect((await member.call('POST', '/setup', { token: tokenOf(invite.body.url), email: 'member@example.test', password: PASSWORD })).status, 201, 'a member, invited');
const opsAccount = await store.accounts.create({ name: 'operations' });
expect((await createUser(store, { accountId: opsAccount, email: 'operator@example.test', password: PASSWORD, role: 'owner', operator: true })).ok, true, 'the operator, made by the admin CLI\'s use case');
const operator = browser(stack);
expect((await operator.call('POST', '/sign-in', { email: 'operator@example.test', password: PASSWORD })).status, 200, 'the operator signs in');
const otherAccount = await store.accounts.create({ name: 'other', credits: 40 });
const stranger = await createUser(store, { accountId: otherAccount, email: 'stranger@example.test', password: PASSWORD, role: 'owner' });
if (!stranger.ok) throw new Error('no stranger');
const users = (await owner.call('GET', '/users')).body.users as Array<{ id: string; email: string }>;
const ownerId = users.find((u) => u.email === 'owner@example.test')!.id;
const memberId = users.find((u) => u.email === 'member@example.test')!.id;

const credits = async () => (await stack.call('GET', '/v1/credits')).body;

// ---- OAuth (MCP) by hand: register, consent with an API key, exchange the code.
const REDIRECT = 'http://127.0.0.1:33418/callback';
async function connectApp(apiKey: string, clientName: string): Promise<{ access: string; refresh: string; clientId: string }> {
  const reg = await fetch(`${base}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: clientName, redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }) });
  if (reg.status !== 201) throw new Error(`register: ${reg.status}`);
  const clientId = ((await reg.json()) as { client_id: string }).client_id;
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const q = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 's1', scope: 'credits:read email:validate:single' });
  const page = await (await fetch(`${base}/oauth/authorize?${q}`)).text();
  const hidden = Object.fromEntries(
    [...page.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')]),
  );
  const form = new URLSearchParams({ ...hidden, api_key: apiKey, decision: 'allow' });
  form.append('scopes', 'credits:read');
  form.append('scopes', 'email:validate:single');
  const consent = await fetch(`${base}/oauth/authorize`, { method: 'POST', body: form, redirect: 'manual' });
  const code = new URL(consent.headers.get('location')!).searchParams.get('code');
  if (!code) throw new Error(`consent: ${consent.status}`);
  const tok = await fetch(`${base}/oauth/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: REDIRECT }) });
  const body = (await tok.json()) as { access_token: string; refresh_token: string };
  if (tok.status !== 200) throw new Error(`token: ${tok.status} ${JSON.stringify(body)}`);
  return { access: body.access_token, refresh: body.refresh_token, clientId };
}
const mcpList = async (token: string) =>
  (
    await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
    })
  ).status;

t.test('refusals: anonymous 401, a member 403 owner_role_required, a non-operator 403 operator_required, no CSRF token 403', async (t) => {
  const anon = browser(stack);
  for (const [method, route] of [
    ['GET', '/account'],
    ['GET', '/account/apps'],
    ['GET', '/operator/accounts'],
  ] as const) {
    const r = await anon.call(method, route);
    t.same([r.status, r.body.code], [401, 'not_signed_in'], `anonymous ${method} ${route}`);
  }
  const ownerRoutes = [
    ['GET', '/account'],
    ['POST', '/account/subscription/cancel'],
    ['POST', '/account/subscription/reactivate'],
    ['GET', '/account/apps'],
    ['POST', '/account/apps/grant_nope/revoke'],
    ['GET', '/account/webhook-secrets'],
    ['POST', `/users/${ownerId}/role`],
  ] as const;
  for (const [method, route] of ownerRoutes) {
    const r = await member.call(method, route, route.endsWith('/role') ? { role: 'member' } : undefined);
    t.same([r.status, r.body.code], [403, 'owner_role_required'], `a member: ${method} ${route}`);
  }
  const operatorRoutes = [
    ['GET', '/operator/accounts'],
    ['GET', `/operator/accounts/${accountId}`],
    ['POST', `/operator/accounts/${accountId}/credits`],
    ['POST', `/operator/accounts/${accountId}/data-product`],
    ['POST', `/operator/accounts/${accountId}/subscription`],
    ['POST', `/operator/accounts/${accountId}/subscription/advance-period`],
    ['POST', `/operator/accounts/${accountId}/subscription/cancel`],
    ['POST', `/operator/accounts/${accountId}/subscription/reactivate`],
  ] as const;
  const bodyFor = (route: string) => (route.endsWith('/credits') ? { credits: 1000 } : route.endsWith('/data-product') ? { enabled: true } : route.endsWith('/subscription') ? { plan: 'starter' } : undefined);
  for (const [method, route] of operatorRoutes) {
    let r = await owner.call(method, route, bodyFor(route));
    t.same([r.status, r.body.code], [403, 'operator_required'], `an owner who is no operator: ${method} ${route}`);
    r = await member.call(method, route, bodyFor(route));
    t.same([r.status, r.body.code], [403, 'operator_required'], `a member: ${method} ${route}`);
  }
  t.equal((await credits()).balance, 1000, 'no refused grant moved a credit');
  t.equal(await store.accounts.dataProduct(accountId), false, 'nor the data product');

  // A change without the CSRF token, whatever the role.
  for (const [who, b, route, body] of [
    ['owner', owner, '/account/subscription/cancel', undefined],
    ['owner', owner, '/account/apps/grant_nope/revoke', undefined],
    ['owner', owner, `/users/${memberId}/role`, { role: 'owner' }],
    ['operator', operator, `/operator/accounts/${accountId}/credits`, { credits: 5 }],
    ['operator', operator, `/operator/accounts/${accountId}/data-product`, { enabled: true }],
    ['operator', operator, `/operator/accounts/${accountId}/subscription`, { plan: 'starter' }],
  ] as Array<[string, Browser, string, unknown]>) {
    const token = b.csrf;
    b.csrf = undefined;
    const r = await b.call('POST', route, body);
    b.csrf = token;
    t.same([r.status, r.body.code], [403, 'csrf_token_invalid'], `${who} without the token: POST ${route}`);
  }
  const r = await operator.call('POST', `/operator/accounts/${accountId}/credits`, { credits: 5 }, { origin: 'https://evil.example' });
  t.same([r.status, r.body.code], [403, 'csrf_token_invalid'], 'a grant from another origin');
  t.equal((await credits()).balance, 1000, 'nothing granted');
  t.equal((await member.call('GET', '/users')).body.code, 'owner_role_required');
  t.equal((await store.users.get(memberId))!.role, 'member', 'no role changed');
});

t.test("account: the balance as GET /v1/credits has it; cancel and reactivate with the REST API's 404 and 409s", async (t) => {
  let r = await owner.call('GET', '/account');
  t.equal(r.status, 200);
  t.strictSame(r.body.credits, await credits(), 'the credits object of GET /v1/credits');
  t.same([r.body.subscription, r.body.can_change_subscription], [null, true]);
  r = await owner.call('POST', '/account/subscription/cancel');
  t.same([r.status, r.body.code], [404, 'subscription_not_found'], 'nothing to cancel');
  const rest = await stack.call('POST', '/v1/subscriptions/cancel');
  t.same([rest.status, rest.body.code], [404, 'subscription_not_found'], 'as the REST API answers');

  r = await operator.call('POST', `/operator/accounts/${accountId}/subscription`, { plan: 'starter' });
  t.equal(r.status, 201, 'the operator subscribes the account');
  r = await owner.call('GET', '/account');
  const sub = r.body.subscription;
  t.match(sub, { processor: 'local', plan: { id: 'starter', name: 'Starter', credits_per_period: 2000, period_days: 30 }, status: 'active', cancel_at_period_end: false, ended_at: null });
  t.strictSame(r.body.credits, await credits());
  t.match(r.body.credits, { balance: 3000, subscription_status: 'active', current_period_end: sub.current_period_end, cancel_at_period_end: false }, "the plan's first 2000 credits");

  r = await owner.call('POST', '/account/subscription/cancel');
  t.equal(r.status, 200);
  t.strictSame(Object.keys(r.body).sort(), ['cancel_at_period_end', 'current_period_end', 'message', 'status', 'subscription_id']);
  t.same([r.body.subscription_id, r.body.status, r.body.cancel_at_period_end, r.body.current_period_end], [sub.id, 'active', true, sub.current_period_end]);
  t.match(r.body.message, /^Subscription will be canceled at the end of the current period/);
  r = await owner.call('POST', '/account/subscription/cancel');
  t.same([r.status, r.body.code], [409, 'subscription_already_canceling']);
  t.same((await stack.call('POST', '/v1/subscriptions/cancel')).body.code, 'subscription_already_canceling', 'the REST API agrees');
  t.equal((await owner.call('GET', '/account')).body.credits.cancel_at_period_end, true);
  r = await owner.call('POST', '/account/subscription/reactivate');
  t.same([r.status, r.body.cancel_at_period_end], [200, false]);
  t.match(r.body.message, /^Cancellation undone/);
  r = await owner.call('POST', '/account/subscription/reactivate');
  t.same([r.status, r.body.code], [409, 'subscription_not_canceling']);
  t.equal((await credits()).balance, 3000, 'credits kept');
});

t.test('connected apps: listed with their key; revoked, their tokens stop at once; another account\'s grant is 404', async (t) => {
  const app = await connectApp(BOOTSTRAP_KEY, '<b>Agent</b> "one"');
  t.equal(await mcpList(app.access), 200, 'the app works');
  let r = await owner.call('GET', '/account/apps');
  t.equal(r.status, 200);
  t.equal(r.body.apps.length, 1);
  const listed = r.body.apps[0];
  const bootstrapId = (await store.keys.resolveId(BOOTSTRAP_KEY))!;
  t.match(listed, { client_id: app.clientId, client_name: '<b>Agent</b> "one"', scopes: ['credits:read', 'email:validate:single'], revoked_at: null, key: { id: bootstrapId, prefix: BOOTSTRAP_KEY.slice(0, listed.key.prefix.length), state: 'active' } });
  t.ok(listed.last_token_at && listed.created_at, 'when it connected and last got a token');
  t.notOk(JSON.stringify(r.body).includes(app.access) || JSON.stringify(r.body).includes(app.refresh), 'never a token');

  // Another account's grant: not found, as if absent, and left alone.
  const otherKey = await store.keys.create({ accountId: otherAccount, kind: 'test', scopes: null });
  await store.oauth.createClient({ id: 'mcp_client_other', clientName: 'theirs', redirectUris: [REDIRECT], metadata: {} });
  await store.oauth.createGrant(
    { id: 'grant_other', clientId: 'mcp_client_other', accountId: otherAccount, keyId: otherKey.id, scopes: ['credits:read'], resource: null },
    { hash: hashKey('code-other'), redirectUri: REDIRECT, codeChallenge: 'x', expiresAt: new Date(Date.now() + 60_000) },
  );
  r = await owner.call('POST', '/account/apps/grant_other/revoke');
  t.same([r.status, r.body.code], [404, 'oauth_grant_not_found']);
  r = await owner.call('POST', '/account/apps/grant_nope/revoke');
  t.same([r.status, r.body.code], [404, 'oauth_grant_not_found']);
  t.equal((await store.oauth.grants(otherAccount)).length, 1, "the other account's grant is live");

  r = await owner.call('POST', `/account/apps/${listed.id}/revoke`);
  t.same([r.status, r.body.changed, r.body.message], [200, true, '<b>Agent</b> "one" is disconnected: its tokens stop working now']);
  t.equal(await mcpList(app.access), 401, 'the access token is refused at once');
  const refresh = await fetch(`${base}/oauth/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: app.refresh, client_id: app.clientId }) });
  t.equal(refresh.status, 400, 'and its refresh token');
  t.equal(((await refresh.json()) as { error: string }).error, 'invalid_grant');
  t.strictSame((await owner.call('GET', '/account/apps')).body.apps, [], 'no longer listed');
  r = await owner.call('POST', `/account/apps/${listed.id}/revoke`);
  t.same([r.status, r.body.changed, r.body.message], [200, false, 'This app was disconnected already']);
});

t.test('webhook secrets: what GET /v1/webhooks/secret shows; the page\'s snippet verifies the service\'s signature', async (t) => {
  let r = await owner.call('GET', '/account/webhook-secrets');
  t.strictSame([r.status, r.body], [200, { secrets: [] }], 'none before a delivery or a rotation');
  const rotated = await stack.call('POST', '/v1/webhooks/secret/rotate', { body: { grace_period_seconds: 0 } });
  t.equal(rotated.status, 201);
  r = await owner.call('GET', '/account/webhook-secrets');
  t.strictSame(r.body, (await stack.call('GET', '/v1/webhooks/secret')).body, 'the REST answer');
  t.strictSame(r.body.secrets.map((s: { secret_prefix: string }) => s.secret_prefix), [`${rotated.body.secret.slice(0, 10)}…`], 'by its first characters only');
  t.notOk(JSON.stringify(r.body).includes(rotated.body.secret));

  // The snippet the page shows, run as a receiver would.
  const source = readFileSync(new URL('../../packages/dashboard/web/src/account.tsx', import.meta.url), 'utf8');
  const literal = /export const VERIFY_SNIPPET = (`[\s\S]*?`);\n/.exec(source)![1]!;
  const snippet = new Function(`return ${literal};`)() as string;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-snippet-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'verify.mjs');
  writeFileSync(file, snippet);
  const { verifyWebhook } = (await import(pathToFileURL(file).href)) as { verifyWebhook: (s: string, h: string, b: string | Buffer) => boolean };
  const secret = rotated.body.secret as string;
  const body = JSON.stringify({ id: 'whk_1', event: 'job.completed', job: { id: 'job_1' }, created_at: new Date().toISOString() });
  const now = Math.floor(Date.now() / 1000);
  t.equal(verifyWebhook(secret, webhookSignature(secret, now, body), body), true, 'a signature of the service verifies');
  t.equal(verifyWebhook(secret, webhookSignature(secret, now, body), Buffer.from(body)), true, 'over the raw bytes too');
  t.equal(verifyWebhook(secret, webhookSignature(['whsec_other', secret], now, body), body), true, 'one v1 of two (a rotation)');
  t.equal(verifyWebhook(secret, webhookSignature(secret, now, body), body.replace('job_1', 'job_2')), false, 'a changed body');
  t.equal(verifyWebhook(secret, webhookSignature('whsec_other', now, body), body), false, 'another secret');
  t.equal(verifyWebhook(secret, webhookSignature(secret, now - 3600, body), body), false, 'an hour old');
  t.equal(verifyWebhook(secret, 'garbage', body), false, 'no signature');
});

t.test('team roles: promote and demote; never the last owner; another account\'s user 404', async (t) => {
  let r = await owner.call('POST', `/users/${memberId}/role`, { role: 'admin' });
  t.same([r.status, r.body.code, r.body.message], [400, 'invalid_request', 'role must be owner or member']);
  r = await owner.call('POST', `/users/${stranger.user.id}/role`, { role: 'member' });
  t.same([r.status, r.body.code], [404, 'user_not_found'], "another account's user");
  t.equal((await store.users.get(stranger.user.id))!.role, 'owner', 'untouched');
  r = await owner.call('POST', '/users/usr_000000000000000000000000/role', { role: 'owner' });
  t.same([r.status, r.body.code], [404, 'user_not_found']);

  r = await owner.call('POST', `/users/${ownerId}/role`, { role: 'member' });
  t.same([r.status, r.body.code, r.body.message], [409, 'last_owner', 'You are the only owner of this account: make someone else an owner first']);
  r = await owner.call('POST', `/users/${ownerId}/role`, { role: 'owner' });
  t.same([r.status, r.body.changed, r.body.user.role], [200, false, 'owner'], 'already an owner: nothing changes');

  r = await owner.call('POST', `/users/${memberId}/role`, { role: 'owner' });
  t.same([r.status, r.body.changed, r.body.user.email, r.body.user.role], [200, true, 'member@example.test', 'owner']);
  t.equal((await member.call('GET', '/account')).status, 200, 'the promoted member sees the account page at once');
  // Two owners now: one may step down, even themself.
  r = await owner.call('POST', `/users/${ownerId}/role`, { role: 'member' });
  t.same([r.status, r.body.user.role], [200, 'member']);
  t.same((await owner.call('GET', '/account')).body.code, 'owner_role_required', 'the demoted owner lost the owner routes at once');
  r = await member.call('POST', `/users/${memberId}/role`, { role: 'member' });
  t.same([r.status, r.body.code], [409, 'last_owner'], 'the one owner left cannot step down');
  r = await member.call('POST', `/users/${ownerId}/role`, { role: 'owner' });
  t.equal(r.status, 200, 'and gives the role back');
  r = await owner.call('POST', `/users/${memberId}/role`, { role: 'member' });
  t.same([r.status, r.body.user.role], [200, 'member']);
  t.same(
    (await owner.call('GET', '/users')).body.users.map((u: { email: string; role: string }) => [u.email, u.role]),
    [
      ['owner@example.test', 'owner'],
      ['member@example.test', 'member'],
    ],
  );
});

t.test('operator: every account with its balance, subscription and data product; grants in the ledger and balance exactly', async (t) => {
  let r = await operator.call('GET', '/operator/accounts');
  t.equal(r.status, 200);
  t.same(r.body.accounts.map((a: { id: string }) => a.id).sort(), [accountId, opsAccount, otherAccount].sort(), 'every account');
  const mine = r.body.accounts.find((a: { id: string }) => a.id === accountId);
  const c = await credits();
  t.match(mine, { balance: c.balance, reserved: c.reserved, available: c.available, subscription_status: 'active', current_period_end: c.current_period_end, cancel_at_period_end: false, data_product: false });
  t.match(r.body.accounts.find((a: { id: string }) => a.id === otherAccount), { name: 'other', balance: 40, subscription_id: null, data_product: false });
  t.same(r.body.plans.map((p: { id: string }) => p.id), ['starter', 'growth', 'scale']);
  t.equal(r.body.local_processor, true);

  for (const [body, message] of [
    [{ credits: 0 }, 'a grant is a positive whole number of credits, got 0'],
    [{ credits: 1.5 }, 'a grant is a positive whole number of credits, got 1.5'],
    [{ credits: -3 }, 'a grant is a positive whole number of credits, got -3'],
    [{ credits: '5' }, 'credits must be a positive whole number'],
    [{}, 'credits must be a positive whole number'],
  ] as const) {
    r = await operator.call('POST', `/operator/accounts/${otherAccount}/credits`, body);
    t.same([r.status, r.body.code, r.body.message], [400, 'invalid_request', message], JSON.stringify(body));
  }
  r = await operator.call('POST', '/operator/accounts/acc_nope/credits', { credits: 5 });
  t.same([r.status, r.body.code], [404, 'account_not_found']);
  r = await operator.call('GET', '/operator/accounts/acc_nope');
  t.same([r.status, r.body.code], [404, 'account_not_found']);

  const operatorId = (await operator.call('GET', '/session')).body.user.id;
  r = await operator.call('POST', `/operator/accounts/${accountId}/credits`, { credits: 250, note: 'goodwill <3' });
  t.equal(r.status, 200);
  t.same([r.body.account.balance, r.body.account.available], [c.balance + 250, c.available + 250]);
  t.match(r.body.ledger[0], { kind: 'grant', amount: 250, note: `operator grant by ${operatorId}: goodwill <3` }, 'the newest ledger row');
  t.equal((await credits()).balance, c.balance + 250, 'GET /v1/credits agrees');
  const entry = (await store.ledger.entries(accountId, 1))[0]!;
  t.same([entry.kind, entry.amount, entry.note], ['grant', 250, `operator grant by ${operatorId}: goodwill <3`], 'one ledger row, as admin credits ledger shows it');
  r = await operator.call('POST', `/operator/accounts/${otherAccount}/credits`, { credits: 2 });
  t.same([r.body.account.balance, r.body.ledger[0].note], [42, `operator grant by ${operatorId}`]);
});

t.test('operator: the data product on and off, as admin account data does', async (t) => {
  const route = `/v1/${Object.keys(DATA_ENDPOINTS)[0]}`;
  t.equal((await stack.call('POST', route, { body: {} })).body.code, 'product_not_enabled', 'off at first');
  let r = await operator.call('POST', `/operator/accounts/${accountId}/data-product`, { enabled: 'yes' });
  t.same([r.status, r.body.code, r.body.message], [400, 'invalid_request', 'enabled must be true or false']);
  r = await operator.call('POST', `/operator/accounts/${accountId}/data-product`, { enabled: true });
  t.same([r.status, r.body.account.data_product], [200, true]);
  t.equal(await store.accounts.dataProduct(accountId), true);
  t.not((await stack.call('POST', route, { body: {} })).body.code, 'product_not_enabled', 'the data endpoints take the account now');
  r = await operator.call('POST', `/operator/accounts/${accountId}/data-product`, { enabled: false });
  t.same([r.status, r.body.account.data_product], [200, false]);
  t.equal((await stack.call('POST', route, { body: {} })).body.code, 'product_not_enabled', 'off again');
  r = await operator.call('POST', '/operator/accounts/acc_nope/data-product', { enabled: true });
  t.same([r.status, r.body.code], [404, 'account_not_found']);
});

t.test("operator: subscriptions (create, move the period, cancel, reactivate) under the admin CLI's and the API's rules", async (t) => {
  const acct = otherAccount;
  let r = await operator.call('POST', `/operator/accounts/${acct}/subscription/advance-period`);
  t.same([r.status, r.body.code, r.body.message], [404, 'subscription_not_found', `account ${acct} has no live subscription`]);
  r = await operator.call('POST', `/operator/accounts/${acct}/subscription`, { plan: 'gold' });
  t.same([r.status, r.body.code, r.body.message], [404, 'plan_not_found', 'no plan gold']);
  r = await operator.call('POST', `/operator/accounts/${acct}/subscription`, {});
  t.same([r.status, r.body.code, r.body.message], [400, 'invalid_request', 'plan is required']);
  r = await operator.call('POST', `/operator/accounts/${acct}/subscription/cancel`);
  t.same([r.status, r.body.code], [404, 'subscription_not_found']);

  r = await operator.call('POST', `/operator/accounts/${acct}/subscription`, { plan: 'growth' });
  t.equal(r.status, 201);
  const sub = r.body.subscription;
  t.match(sub, { processor: 'local', plan_id: 'growth', status: 'active', cancel_at_period_end: false });
  t.same([r.body.account.balance, r.body.account.subscription_id, r.body.ledger[0].kind, r.body.ledger[0].amount], [42 + 10_000, sub.id, 'grant', 10_000], "the plan's credits, in the ledger");
  r = await operator.call('POST', `/operator/accounts/${acct}/subscription`, { plan: 'starter' });
  t.same([r.status, r.body.code, r.body.message], [409, 'subscription_exists', `account ${acct} already has a live subscription ${sub.id} (active)`]);

  r = await operator.call('POST', `/operator/accounts/${acct}/subscription/advance-period`);
  t.equal(r.status, 200);
  t.same([r.body.subscription.status, r.body.subscription.current_period_start > sub.current_period_start, r.body.account.balance], ['active', true, 42 + 20_000], 'renewed: the next period and its credits');

  r = await operator.call('POST', `/operator/accounts/${acct}/subscription/cancel`);
  t.same([r.status, r.body.subscription.cancel_at_period_end, r.body.account.cancel_at_period_end], [200, true, true]);
  t.match(r.body.message, /^Subscription will be canceled at the end of the current period/);
  r = await operator.call('POST', `/operator/accounts/${acct}/subscription/cancel`);
  t.same([r.status, r.body.code], [409, 'subscription_already_canceling']);
  r = await operator.call('POST', `/operator/accounts/${acct}/subscription/reactivate`);
  t.same([r.status, r.body.subscription.cancel_at_period_end], [200, false]);
  r = await operator.call('POST', `/operator/accounts/${acct}/subscription/reactivate`);
  t.same([r.status, r.body.code], [409, 'subscription_not_canceling']);
  await operator.call('POST', `/operator/accounts/${acct}/subscription/cancel`);

  r = await operator.call('POST', `/operator/accounts/${acct}/subscription/advance-period`);
  t.same([r.status, r.body.subscription.status, r.body.account.subscription_status, r.body.account.balance, r.body.ledger[0].kind], [200, 'canceled', 'canceled', 0, 'expire'], 'set to cancel: it ends, the credits expire');
  r = await operator.call('POST', `/operator/accounts/${acct}/subscription/advance-period`);
  t.same([r.status, r.body.code], [404, 'subscription_not_found'], 'ended: nothing to move');

  // A Stripe subscription's periods are Stripe's.
  const now = Date.now();
  await stack.db.query("INSERT INTO subscriptions (id, account_id, processor, plan_id, status, current_period_start, current_period_end) VALUES ('sub_stripe_1', $1, 'stripe', 'starter', 'active', $2, $3)", [
    opsAccount,
    new Date(now),
    new Date(now + 30 * 86_400_000),
  ]);
  r = await operator.call('POST', `/operator/accounts/${opsAccount}/subscription/advance-period`);
  t.same([r.status, r.body.code, r.body.message], [409, 'subscription_not_local', "subscription sub_stripe_1 is Stripe's: its periods move with Stripe's events"]);
  r = await operator.call('POST', `/operator/accounts/${opsAccount}/subscription`, { plan: 'starter' });
  t.same([r.status, r.body.code], [409, 'subscription_exists']);
});
