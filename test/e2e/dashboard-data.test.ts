// The dashboard's Find & enrich routes (/dashboard/api/data/...) through HTTP, in the profile of
// TEST_PROFILE, on the simulated internet (its mail servers and websites on loopback): the email
// finder for one contact and for several, company enrichment, each answering and charging as
// POST /v1/find/bulk and POST /v1/company/enrich do (the balance moves by the same credits), the
// REST gates' refusals with their messages (no data product, too few credits, no provider
// configured, the bodies' 400s), sign-in and CSRF.

import t from 'tap';
import { createUser } from '@svc/accounts';
import { hashKey } from '@svc/store';
import { BOOTSTRAP_KEY, makeKey, startStack, type Stack } from '../helpers/stack.ts';
import { browser, firstOwner, PASSWORD } from '../helpers/dashboard.ts';

t.setTimeout(240_000);

type Json = Record<string, any>;

/** A new account with `credits`, the data product (unless `product: false`), a key, and a signed-in owner. */
async function account(stack: Stack, email: string, opts: { credits?: number; product?: boolean } = {}) {
  const k = await makeKey(stack, { credits: opts.credits ?? 100 });
  if (opts.product !== false) await stack.store.accounts.setDataProduct(k.accountId, true);
  const made = await createUser(stack.store, { accountId: k.accountId, email, password: PASSWORD, role: 'owner' });
  if (!made.ok) throw new Error(`user: ${JSON.stringify(made)}`);
  const b = browser(stack);
  if ((await b.call('POST', '/sign-in', { email, password: PASSWORD })).status !== 200) throw new Error(`${email} could not sign in`);
  return { ...k, b };
}

const stack = await startStack({
  env: {
    // The sim's websites live on loopback; the SSRF guard lets exactly that network through.
    SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8',
    SVC_WEB_FETCH_TIMEOUT_MS: '1500',
  },
});
t.teardown(() => stack.close());
const owner = await firstOwner(stack);
const bootstrapAccount = (await stack.store.keys.findByHash(hashKey(BOOTSTRAP_KEY)))!.account_id;
const balance = async (accountId: string) => (await stack.store.ledger.balance(accountId))!.balance;
/** A find result without its timing. */
const row = (r: Json) => [r.id, r.email, r.pattern, r.confidence, r.source_provider, r.not_found, r.credits_charged, r.error ?? null];

t.test('refusals: not signed in 401, no CSRF token 403, no data product 403 with the REST message', async (t) => {
  const anon = browser(stack);
  for (const path of ['/data/find', '/data/company']) {
    const r = await anon.call('POST', path, {});
    t.strictSame([r.status, r.body.code], [401, 'not_signed_in'], path);
  }
  const token = owner.csrf;
  owner.csrf = undefined;
  for (const path of ['/data/find', '/data/company']) {
    const r = await owner.call('POST', path, { domain: 'acme-robotics.test' });
    t.strictSame([r.status, r.body.code], [403, 'csrf_token_invalid'], `${path}: it spends credits`);
  }
  owner.csrf = token;
  const r = await owner.call('POST', '/data/company', { domain: 'acme-robotics.test' }, { origin: 'https://evil.example' });
  t.strictSame([r.status, r.body.code], [403, 'csrf_token_invalid'], 'a foreign origin');
  // The bootstrap account has no data product: the REST route's refusal, word for word.
  const before = await balance(bootstrapAccount);
  const rest = await stack.call('POST', '/v1/company/enrich', { body: { domain: 'acme-robotics.test' } });
  t.strictSame([rest.status, rest.body.code], [403, 'product_not_enabled']);
  for (const [path, body] of [
    ['/data/company', { domain: 'acme-robotics.test' }],
    ['/data/find', { contacts: [{ first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' }] }],
  ] as const) {
    const d = await owner.call('POST', path, body);
    t.strictSame([d.status, d.body.code, d.body.message], [rest.status, rest.body.code, rest.body.message], `${path}: ${rest.body.message}`);
  }
  t.equal(await balance(bootstrapAccount), before, 'nothing charged');
});

t.test('find one contact: the REST answer and the REST charge', async (t) => {
  const a = await account(stack, 'finder.one@example.test', { credits: 20 });
  const b0 = await balance(a.accountId);
  const d = await a.b.call('POST', '/data/find', { contacts: [{ first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' }] });
  t.equal(d.status, 200, JSON.stringify(d.body));
  t.match(d.body.id, /^find_[0-9a-f]{24}$/);
  t.strictSame(d.body.results.map(row), [['0', 'jane.doe@accept.test', '{first}.{last}', 95, 'smtp', false, 1, null]]);
  t.match(d.body.summary, { total: 1, found: 1, not_found: 0, errors: 0, credits_charged: 1 });
  t.equal(await balance(a.accountId), b0 - 1, 'one credit, as the summary says');
  const b1 = await balance(a.accountId);
  const rest = await stack.call('POST', '/v1/find/bulk', { key: a.key, body: { contacts: [{ first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' }] } });
  t.equal(rest.status, 200);
  t.strictSame(rest.body.results.map(row), d.body.results.map(row), 'the REST route finds the same');
  t.strictSame(Object.keys(rest.body.results[0]).sort(), Object.keys(d.body.results[0]).sort(), 'with the same fields');
  t.equal(b1 - (await balance(a.accountId)), 1, 'and charges the same');
  // With validate: the validation and its credit, as on REST.
  const v = await a.b.call('POST', '/data/find', { contacts: [{ first_name: 'John', last_name: 'Smith', domain: 'accept.test' }], validate: true });
  const x = v.body.results[0];
  t.strictSame([x.email, x.credits_charged, x.validation.result, x.validation.credits_charged], ['john.smith@accept.test', 2, 'valid', 1]);
  t.equal(await balance(a.accountId), b1 - 1 - 2);
});

t.test('find several contacts (a CSV on the page): input order, not found and errors charge nothing', async (t) => {
  const a = await account(stack, 'finder.many@example.test', { credits: 20 });
  const contacts = [
    { first_name: 'Maria', last_name: 'Garcia', domain: 'people.test' },
    { first_name: 'Nobody', last_name: 'Here', domain: 'people.test' },
    { first_name: 'Jane', domain: 'people.test' },
    { first_name: 'Jane', last_name: 'Doe', company: 'No Such Company Ltd' },
  ];
  const d = await a.b.call('POST', '/data/find', { contacts, max_concurrent: 4 });
  t.equal(d.status, 200);
  t.strictSame(d.body.results.map(row), [
    ['0', 'mgarcia@people.test', '{f}{last}', 95, 'smtp', false, 1, null],
    ['1', null, null, 0, null, true, 0, 'every candidate address was rejected by the mail server'],
    ['2', null, null, 0, null, false, 0, 'last_name is required'],
    ['3', null, null, 0, null, false, 0, "the domain of this company is not known; give the contact's domain"],
  ]);
  t.match(d.body.summary, { total: 4, found: 1, not_found: 1, errors: 2, credits_charged: 1 });
  t.equal(await balance(a.accountId), 19, 'exactly the summary');
  // The body's 400s are the REST route's, code and message.
  for (const body of [{}, { contacts: [] }, { contacts: Array.from({ length: 101 }, () => ({ first_name: 'A', last_name: 'B', domain: 'accept.test' })) }, { contacts: [{ first_name: 'A' }], max_concurrent: 11 }, [1]]) {
    const dash = await a.b.call('POST', '/data/find', body);
    const rest = await stack.call('POST', '/v1/find/bulk', { key: a.key, body });
    t.equal(dash.status, 400);
    t.strictSame([dash.status, dash.body.code, dash.body.message], [rest.status, rest.body.code, rest.body.message], `${rest.body.code}: ${rest.body.message}`);
  }
  t.equal(await balance(a.accountId), 19, 'no 400 costs anything');
  const poor = await account(stack, 'finder.poor@example.test', { credits: 0 });
  const dash = await poor.b.call('POST', '/data/find', { contacts: [{ first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' }] });
  const rest = await stack.call('POST', '/v1/find/bulk', { key: poor.key, body: { contacts: [{ first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' }] } });
  t.strictSame([dash.status, dash.body.code, dash.body.message], [rest.status, rest.body.code, rest.body.message], 'too few credits: 402 as on REST');
  t.equal(dash.body.code, 'insufficient_credits');
});

t.test('company enrichment: the REST answer, 1 credit found (cache hits too), 0 not found; a member may', async (t) => {
  const a = await account(stack, 'company.owner@example.test', { credits: 10 });
  const made = await createUser(stack.store, { accountId: a.accountId, email: 'company.member@example.test', password: PASSWORD, role: 'member' });
  t.match(made, { ok: true });
  const m = browser(stack);
  t.equal((await m.call('POST', '/sign-in', { email: 'company.member@example.test', password: PASSWORD })).status, 200);
  const d = await m.call('POST', '/data/company', { domain: 'https://www.Acme-Robotics.test/about', company_name: 'Acme Robotics Inc.' });
  t.equal(d.status, 200, JSON.stringify(d.body));
  t.match(d.body, { domain: 'acme-robotics.test', found: true, company_name: 'Acme Robotics', employee_count: 120, cache_hit: false, credits_charged: 1 });
  t.equal(await balance(a.accountId), 9);
  const rest = await stack.call('POST', '/v1/company/enrich', { key: a.key, body: { domain: 'acme-robotics.test' } });
  const strip = ({ latency_ms, cache_hit, ...x }: Json) => x;
  t.strictSame(strip(d.body), strip(rest.body), 'the REST answer (the REST call is a cache hit)');
  t.equal(rest.body.cache_hit, true);
  t.equal(await balance(a.accountId), 8, 'a cache hit is charged the same, on both');
  const again = await a.b.call('POST', '/data/company', { domain: 'acme-robotics.test' });
  t.match(again.body, { cache_hit: true, credits_charged: 1 });
  t.equal(await balance(a.accountId), 7);
  for (const body of [{}, { domain: 'not a domain' }, { domain: 7 }]) {
    const dash = await a.b.call('POST', '/data/company', body);
    const r = await stack.call('POST', '/v1/company/enrich', { key: a.key, body });
    t.strictSame([dash.status, dash.body.code, dash.body.message], [r.status, r.body.code, r.body.message], `${r.body.code}: ${r.body.message}`);
  }
  t.equal(await balance(a.accountId), 7, 'no 400 costs anything');
});

t.test('families with no provider: 503 with the REST message, before the body is read', async (t) => {
  const off = await startStack({ env: { SVC_COMPANY_PROVIDERS: 'none', SVC_FINDER_PROVIDERS: 'none' } });
  t.teardown(() => off.close());
  const b = await firstOwner(off);
  const acct = (await off.store.keys.findByHash(hashKey(BOOTSTRAP_KEY)))!.account_id;
  await off.store.accounts.setDataProduct(acct, true);
  for (const [path, route, message] of [
    ['/data/company', '/v1/company/enrich', 'company enrichment not configured'],
    ['/data/find', '/v1/find/bulk', 'email finder not configured'],
  ] as const) {
    const dash = await b.call('POST', path, { nonsense: true });
    const rest = await off.call('POST', route, { body: { nonsense: true } });
    t.strictSame([dash.status, dash.body.code, dash.body.message], [rest.status, rest.body.code, rest.body.message], path);
    t.strictSame([dash.status, dash.body.code, dash.body.message], [503, 'feature_not_configured', message]);
  }
});
