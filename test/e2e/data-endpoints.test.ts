// The data endpoints through HTTP on the whole service: the gates in their order (key, scope, the
// data product, the endpoint's rate, the family's configuration, the body), company data from the
// simulated internet's websites and DNS (found, not found, slow, huge, redirecting, refused), the
// cache (hits, force_refresh), and the money (charged only when found, once per Idempotency-Key,
// exact under concurrent requests).

import t from 'tap';
import { DATA_ENDPOINTS } from '@svc/contracts';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';

const stack: Stack = await startStack({
  env: {
    // The sim's websites live on loopback; the SSRF guard lets exactly that network through.
    SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8',
    SVC_WEB_FETCH_TIMEOUT_MS: '1500',
  },
});
t.teardown(() => stack.close());

/** A key of a new account with the data product (unless `product: false`). */
async function dataKey(opts: { credits?: number; scopes?: string[] | null; product?: boolean } = {}) {
  const k = await makeKey(stack, { credits: opts.credits ?? 100, scopes: opts.scopes === undefined ? null : opts.scopes });
  if (opts.product !== false) await stack.store.accounts.setDataProduct(k.accountId, true);
  return k;
}
const balance = async (accountId: string) => (await stack.store.ledger.balance(accountId))!.balance;
const post = (route: string, key: string | null, body: unknown, headers?: Record<string, string>) => stack.call('POST', route, { key, body, ...(headers && { headers }) });

const ROUTES = Object.keys(DATA_ENDPOINTS).map((e) => `/v1/${e}`);

t.test('gates: no key 401; another scope 403 naming the scope; no data product 403; each before the body is read', async (t) => {
  const plain = await dataKey({ product: false });
  const companyOnly = await dataKey({ scopes: ['data:company:read'] });
  for (const route of ROUTES) {
    const anon = await post(route, null, {});
    t.equal(anon.status, 401, `${route}: no key`);
    t.equal(anon.body.code, 'api_key_required');
    const noProduct = await post(route, plain.key, {});
    t.strictSame([noProduct.status, noProduct.body.code, noProduct.body.message], [403, 'product_not_enabled', 'The data product is not enabled for this account'], `${route}: no data product`);
    const endpoint = route.slice(4) as keyof typeof DATA_ENDPOINTS;
    const scope = DATA_ENDPOINTS[endpoint].scope;
    if (scope !== 'data:company:read') {
      const wrong = await post(route, companyOnly.key, {});
      t.strictSame([wrong.status, wrong.body.code, wrong.body.required_scope], [403, 'insufficient_scope', scope], `${route}: needs ${scope}`);
    }
  }
  // Turning the product on takes effect (the key cache lives 2 s at most; the admin socket clears it).
  await stack.store.accounts.setDataProduct(plain.accountId, true);
  stack.svc.app.clearKeyCache();
  const now = await post('/v1/company/enrich', plain.key, {});
  t.strictSame([now.status, now.body.code], [400, 'domain_required']);
});

t.test('families with no provider answer 503 with their own message, before the body is read', async (t) => {
  const { key } = await dataKey();
  // find/bulk has its native provider by default; the others have no provider in this build.
  const expected: Record<string, string> = {
    '/v1/linkedin/company': 'LinkedIn company data not configured',
    '/v1/linkedin/hires': 'LinkedIn company data not configured',
    '/v1/people/search': 'employee search not configured',
    '/v1/people/lookup': 'person lookup not configured',
    '/v1/people/role': 'role lookup not configured',
    '/v1/profile/enrich': 'profile enrichment not configured',
    '/v1/prospect/email-to-person': 'profile enrichment not configured',
    '/v1/mobile/find': 'mobile finder not configured',
  };
  for (const [route, message] of Object.entries(expected)) {
    const r = await post(route, key, { nonsense: true });
    t.strictSame([r.status, r.body.code, r.body.message], [503, 'feature_not_configured', message], route);
    t.match(r.headers.get('x-request-id'), /^req_[0-9a-f]{32}$/);
  }
});

t.test('company endpoints: every 400 with its code and exact message', async (t) => {
  const { key, accountId } = await dataKey();
  const cases: Array<[string, unknown, string, string]> = [
    ['/v1/company/enrich', {}, 'domain_required', 'domain is required'],
    ['/v1/company/enrich', { domain: 'not a domain' }, 'invalid_domain', 'domain is not a valid domain name'],
    ['/v1/company/enrich', { domain: 7 }, 'invalid_request', 'domain must be a string'],
    ['/v1/company/enrich', [1, 2], 'invalid_request', 'The request body must be a JSON object'],
    ['/v1/company/enrich/bulk', {}, 'companies_required', 'companies array is required'],
    ['/v1/company/enrich/bulk', { companies: Array.from({ length: 26 }, () => ({ domain: 'acme-robotics.test' })) }, 'too_many_companies', 'maximum 25 companies per request'],
    ['/v1/company/enrich/bulk', { companies: [{ domain: 'acme-robotics.test' }], max_concurrent: 11 }, 'invalid_max_concurrent', 'max_concurrent must be an integer from 1 to 10'],
    ['/v1/company/enrich-linkedin', {}, 'company_linkedin_url_required', 'company_linkedin_url is required'],
    ['/v1/company/enrich-linkedin', { company_linkedin_url: 'https://example.test/company/x' }, 'invalid_linkedin_url', 'company_linkedin_url is not a LinkedIn company URL (https://www.linkedin.com/company/…)'],
    ['/v1/company/domain-to-linkedin', {}, 'domain_required', 'domain is required'],
  ];
  for (const [route, body, code, message] of cases) {
    const r = await post(route, key, body);
    t.strictSame([r.status, r.body.code, r.body.message], [400, code, message], `${route} ${JSON.stringify(body).slice(0, 60)}`);
  }
  const bad = await stack.call('POST', '/v1/company/enrich', { key, raw: '{"domain":', headers: { 'content-type': 'application/json' } });
  t.strictSame([bad.status, bad.body.code], [400, 'invalid_json']);
  t.equal(await balance(accountId), 100, 'no 400 costs anything');
});

t.test('company/enrich: the website and DNS of a company, charged 1; the cache; force_refresh', async (t) => {
  const { key, accountId } = await dataKey({ credits: 10 });
  const before = stack.sim.webRequests()['acme-robotics.test/'] ?? 0;
  const r = await post('/v1/company/enrich', key, { domain: 'https://www.Acme-Robotics.test/about', company_name: 'Acme Robotics Inc.' });
  t.equal(r.status, 200);
  const { latency_ms, ...body } = r.body;
  t.type(latency_ms, 'number');
  t.strictSame(body, {
    domain: 'acme-robotics.test',
    company_name: 'Acme Robotics',
    display_name: 'Acme Robotics',
    description: 'Acme Robotics designs autonomous picking robots for mid-sized warehouses.',
    website: 'https://acme-robotics.test',
    employee_count: 120,
    employee_range: '51-200',
    revenue_range: null,
    industry: null,
    sub_industry: null,
    founded_year: 2011,
    company_type: null,
    location: { city: 'Austin', region: 'TX', country: 'United States', country_code: 'US' },
    linkedin_url: 'https://www.linkedin.com/company/acme-robotics',
    twitter_url: 'https://twitter.com/acmerobotics',
    facebook_url: null,
    phone: '+15125550142',
    technologies: r.body.technologies,
    technology_count: r.body.technologies.length,
    funding: { total_raised: null, last_round: null, last_round_date: null },
    confidence: r.body.confidence,
    found: true,
    cache_hit: false,
    credits_charged: 1,
    source_provider: 'website',
  });
  t.strictSame(
    r.body.technologies,
    ['Google Workspace', 'SendGrid', 'Google Search Console', 'Atlassian', 'Cloudflare', 'WordPress', 'Google Tag Manager', 'HubSpot'],
    'what the DNS says, then what the response headers and the page show',
  );
  t.ok(r.body.confidence >= 0.9 && r.body.confidence <= 0.99, `structured data, OpenGraph, links, MX, SPF, TXT and the name hint agree: ${r.body.confidence}`);
  t.equal(await balance(accountId), 9);
  t.ok((stack.sim.webRequests()['acme-robotics.test/'] ?? 0) > before, 'the home page was fetched');

  // A hit: from the cache (no fetch), charged the same (1).
  const fetched = stack.sim.webRequests()['acme-robotics.test/'];
  const hit = await post('/v1/company/enrich', key, { domain: 'acme-robotics.test' });
  t.strictSame([hit.status, hit.body.cache_hit, hit.body.credits_charged, hit.body.company_name], [200, true, 1, 'Acme Robotics']);
  t.equal(stack.sim.webRequests()['acme-robotics.test/'], fetched, 'no fetch for a hit');
  t.equal(await balance(accountId), 8);
  // force_refresh fetches again and rewrites the cache.
  const fresh = await post('/v1/company/enrich', key, { domain: 'acme-robotics.test', force_refresh: true });
  t.strictSame([fresh.body.cache_hit, fresh.body.credits_charged], [false, 1]);
  t.ok(stack.sim.webRequests()['acme-robotics.test/']! > fetched!, 'fetched again');
  t.equal(await balance(accountId), 7);
});

t.test('company/enrich: other sites (meta only, redirects, a nonprofit) and the ones that cannot be read (0 credits)', async (t) => {
  const { key, accountId } = await dataKey({ credits: 20 });
  const globex = await post('/v1/company/enrich', key, { domain: 'globex-meta.test' });
  t.strictSame([globex.body.found, globex.body.company_name, globex.body.description, globex.body.credits_charged], [true, 'Globex Meta', 'Vibration and temperature sensors for factory machines.', 1]);
  t.ok(globex.body.technologies.includes('Microsoft 365'));
  t.ok(globex.body.confidence < 0.6, `meta tags only: lower confidence (${globex.body.confidence})`);
  const initech = await post('/v1/company/enrich', key, { domain: 'initech-redirect.test' });
  t.strictSame([initech.body.found, initech.body.company_name], [true, 'Initech'], 'the redirect to www is followed');
  const umbrella = await post('/v1/company/enrich', key, { domain: 'umbrella-nonprofit.test' });
  t.strictSame([umbrella.body.found, umbrella.body.company_type, umbrella.body.employee_range, umbrella.body.location.country_code], [true, 'nonprofit', '11-50', 'DE']);
  t.match(umbrella.body.facebook_url, /^https:\/\/www\.facebook\.com\//);
  t.equal(await balance(accountId), 17, 'three found, three credits');

  const unreadable: Array<[string, RegExp]> = [
    ['error-site.test', /HTTP 500/],
    ['slow-site.test', /within 1500 ms|no website/],
    ['loop-redirect.test', /redirects/],
    ['private-redirect.test', /169\.254\.169\.254/],
    ['no-site.test', /no website/],
  ];
  for (const [domain, why] of unreadable) {
    const t0 = performance.now();
    const r = await post('/v1/company/enrich', key, { domain });
    t.strictSame([r.status, r.body.found, r.body.credits_charged, r.body.cache_hit, r.body.company_name], [200, false, 0, false, null], domain);
    t.match(r.body.error, why, `${domain}: ${r.body.error}`);
    t.ok(performance.now() - t0 < 4000, `${domain} answered in ${Math.round(performance.now() - t0)} ms`);
  }
  const huge = await post('/v1/company/enrich', key, { domain: 'huge-site.test' });
  t.equal(huge.status, 200, 'a 20 MiB page is cut at the byte cap, not a failure');
  t.equal(await balance(accountId), 17 - (huge.body.found ? 1 : 0), 'not found charges nothing');
  const again = await post('/v1/company/enrich', key, { domain: 'error-site.test' });
  t.strictSame([again.body.found, again.body.cache_hit, again.body.credits_charged], [false, true, 0], 'a miss is cached too');
});

t.test('company/enrich/bulk: input order, item errors, summary, 1 credit per company found', async (t) => {
  const { key, accountId } = await dataKey({ credits: 10 });
  const r = await post('/v1/company/enrich/bulk', key, { companies: [{ domain: 'acme-robotics.test' }, { domain: 'error-site.test' }, { company_name: 'no domain' }, { domain: 'globex-meta.test' }], max_concurrent: 2 });
  t.equal(r.status, 200);
  t.match(r.body.id, /^enr_[0-9a-f]{24}$/);
  t.strictSame(r.body.results.map((x: { domain: string; found: boolean; credits_charged: number; error?: string }) => [x.domain, x.found, x.credits_charged, x.error ?? null]), [
    ['acme-robotics.test', true, 1, null],
    ['error-site.test', false, 0, r.body.results[1].error],
    ['', false, 0, 'domain is required'],
    ['globex-meta.test', true, 1, null],
  ]);
  const { total_latency_ms, ...summary } = r.body.summary;
  t.type(total_latency_ms, 'number');
  t.strictSame(summary, { total: 4, found: 2, not_found: 1, errors: 1, cache_hits: 3, credits_charged: 2 });
  t.equal(await balance(accountId), 8);
});

t.test('domain-to-linkedin and enrich-linkedin', async (t) => {
  const { key, accountId } = await dataKey({ credits: 10 });
  const d2l = await post('/v1/company/domain-to-linkedin', key, { domain: 'acme-robotics.test' });
  t.strictSame(d2l.body, { linkedin_url: 'https://www.linkedin.com/company/acme-robotics', found: true, credits_charged: 1 });
  const none = await post('/v1/company/domain-to-linkedin', key, { domain: 'globex-meta.test' });
  t.strictSame(none.body, { linkedin_url: '', found: false, credits_charged: 0 });
  const byUrl = await post('/v1/company/enrich-linkedin', key, { company_linkedin_url: 'linkedin.com/company/Acme-Robotics/' });
  t.strictSame([byUrl.body.found, byUrl.body.credits_charged, byUrl.body.company.name, byUrl.body.company.domain, byUrl.body.company.hq_city], [true, 1, 'Acme Robotics', 'acme-robotics.test', 'Austin']);
  const unknown = await post('/v1/company/enrich-linkedin', key, { company_linkedin_url: 'https://www.linkedin.com/company/nobody-we-know' });
  t.strictSame([unknown.body.found, unknown.body.credits_charged, unknown.body.company], [false, 0, {}]);
  t.equal(await balance(accountId), 8);
});

t.test('money: too few credits 402 before any fetch; one Idempotency-Key charges once, even concurrently', async (t) => {
  const poor = await dataKey({ credits: 0 });
  const denied = await post('/v1/company/enrich', poor.key, { domain: 'umbrella-nonprofit.test' });
  t.strictSame([denied.status, denied.body.code, denied.body.required, denied.body.available], [402, 'insufficient_credits', 1, 0]);

  const { key, accountId } = await dataKey({ credits: 5 });
  const headers = { 'idempotency-key': 'enrich-umbrella-1' };
  const results = await Promise.all(Array.from({ length: 8 }, () => post('/v1/company/enrich', key, { domain: 'umbrella-nonprofit.test', force_refresh: true }, headers)));
  const ok = results.filter((r) => r.status === 200);
  const busy = results.filter((r) => r.status === 409);
  t.equal(ok.length + busy.length, 8, 'each is the answer or "in progress"');
  t.ok(busy.every((r) => r.body.code === 'idempotency_request_in_progress'));
  t.equal(await balance(accountId), 4, 'charged once');
  const replay = await post('/v1/company/enrich', key, { domain: 'umbrella-nonprofit.test', force_refresh: true }, headers);
  t.strictSame([replay.status, replay.headers.get('idempotent-replayed'), replay.text], [200, 'true', ok[0]!.text]);
  t.equal(await balance(accountId), 4, 'a replay charges nothing');

  // Without a key, concurrent requests each pay for what they got, and the ledger agrees with the balance.
  const many = await Promise.all(Array.from({ length: 10 }, () => post('/v1/company/enrich', key, { domain: 'acme-robotics.test' })));
  const paid = many.filter((r) => r.status === 200).reduce((n, r) => n + r.body.credits_charged, 0);
  const refused = many.filter((r) => r.status === 402).length;
  t.equal(paid, 4, 'the last four credits bought four answers');
  t.equal(refused, 6);
  t.equal(await balance(accountId), 0);
  t.strictSame(await stack.store.ledger.totals(accountId), { balance: 0, reserved: 0 }, 'the ledger says the same, nothing left held');
});

t.test('bulk company: 100 requests a minute per key, then 429 (before the body is read)', async (t) => {
  const { key } = await dataKey();
  for (let i = 0; i < 100; i++) {
    const r = await post('/v1/company/enrich/bulk', key, {});
    if (r.status !== 400) t.fail(`request ${i + 1}: ${r.status}`);
  }
  const over = await post('/v1/company/enrich/bulk', key, {});
  t.strictSame([over.status, over.body.code, over.body.retry_after, over.headers.get('retry-after')], [429, 'rate_limited', 60, '60']);
  t.equal(over.headers.get('ratelimit-remaining'), '0');
  const single = await post('/v1/company/enrich', key, {});
  t.equal(single.status, 400, 'the single endpoint has no such limit');
});

t.test('find/bulk: 100 contacts on one MX host share its sessions (counted at the server)', async (t) => {
  const { key, accountId } = await dataKey({ credits: 150 }); // the hold covers every contact
  const FIRST = ['Alba', 'Bruno', 'Clara', 'Dario', 'Elena', 'Felix', 'Greta', 'Hugo', 'Ines', 'Jonas'];
  const LAST = ['Abril', 'Berger', 'Costa', 'Dumont', 'Eklund', 'Ferreira', 'Gallo', 'Horvat', 'Ibarra', 'Janssen'];
  // 98 people accept.test does not know, and the two it does: one MX host (mx1.accept.test) for all.
  const contacts = FIRST.flatMap((first) => LAST.map((last) => ({ first_name: first, last_name: last, domain: 'accept.test' }))).slice(0, 98);
  contacts.splice(40, 0, { first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' });
  contacts.push({ first_name: 'John', last_name: 'Smith', domain: 'accept.test' });
  t.equal(contacts.length, 100);
  const before = stack.sim.statsFor('accept.test');
  const r = await post('/v1/find/bulk', key, { contacts, max_concurrent: 10 });
  t.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300));
  const found = r.body.results.filter((x: { email: string | null }) => x.email !== null).map((x: { id: string; email: string }) => [x.id, x.email]);
  t.strictSame(found, [
    ['40', 'jane.doe@accept.test'],
    ['99', 'john.smith@accept.test'],
  ], 'the two known people found, in input order');
  const { total_latency_ms: _latency, ...summary } = r.body.summary;
  t.strictSame(summary, { total: 100, found: 2, not_found: 98, errors: 0, credits_charged: 2 });
  t.equal(await balance(accountId), 148, 'two credits, for the two found');
  const after = stack.sim.statsFor('accept.test');
  const sessions = after.connections - before.connections;
  const rcpts = after.rcpt - before.rcpt;
  const mails = after.mail - before.mail;
  // Every unknown person's 8 candidates were asked, a candidate several contacts share (`{first}`:
  // ten first names among 98 people) once: 98 × 8 − 88 = 696 addresses at least. Sessions carry
  // many contacts' candidates until the server's error budget ends them.
  t.ok(rcpts >= 696, `every candidate asked: ${rcpts} RCPTs`);
  t.ok(sessions * 5 <= rcpts, `${sessions} sessions for ${rcpts} RCPTs (one per candidate would be ${rcpts})`);
  t.ok(mails <= rcpts / 3, `${mails} transactions for ${rcpts} RCPTs`);
  t.comment(`100 contacts on one MX host: ${sessions} sessions, ${mails} transactions, ${rcpts} RCPTs`);
});

t.test('find/bulk: each B2B pattern proven on the mail server, 1 credit each; not found 0', async (t) => {
  const { key, accountId } = await dataKey({ credits: 50 });
  const contacts = [
    { first_name: 'Jane', last_name: 'Doe', domain: 'accept.test' },
    { first_name: 'Maria', last_name: 'Garcia', domain: 'people.test' },
    { first_name: 'Omar', last_name: 'Haddad', domain: 'people.test' },
    { first_name: 'Lena', last_name: 'Fischer', domain: 'people.test' },
    { first_name: 'Wei', last_name: 'Chen', domain: 'people.test' },
    { first_name: 'Zoë', last_name: "O'Neil", domain: 'people.test' },
    { first_name: 'José', last_name: 'Müller', domain: 'people.test' },
    { first_name: 'Ana', last_name: 'Lima', domain: 'people.test' },
    { id: 'crm-7', first_name: 'Nobody', last_name: 'Here', domain: 'people.test' },
    { first_name: 'Jane', domain: 'people.test' },
  ];
  const before = stack.sim.statsFor('people.test');
  const r = await post('/v1/find/bulk', key, { contacts, max_concurrent: 10 });
  t.equal(r.status, 200);
  t.match(r.body.id, /^find_[0-9a-f]{24}$/);
  const rows = r.body.results.map((x: { id: string; email: string | null; pattern: string | null; confidence: number; source_provider: string | null; not_found: boolean; credits_charged: number; providers_tried: string[] }) => [x.id, x.email, x.pattern, x.confidence, x.source_provider, x.not_found, x.credits_charged]);
  t.strictSame(rows, [
    ['0', 'jane.doe@accept.test', '{first}.{last}', 95, 'smtp', false, 1],
    ['1', 'mgarcia@people.test', '{f}{last}', 95, 'smtp', false, 1],
    ['2', 'omar@people.test', '{first}', 95, 'smtp', false, 1],
    ['3', 'lena_fischer@people.test', '{first}_{last}', 95, 'smtp', false, 1],
    ['4', 'chen.wei@people.test', '{last}.{first}', 95, 'smtp', false, 1],
    ['5', 'zoe.oneil@people.test', '{first}.{last}', 95, 'smtp', false, 1],
    ['6', 'jose.muller@people.test', '{first}.{last}', 95, 'smtp', false, 1],
    ['7', 'a.lima@people.test', '{f}.{last}', 95, 'smtp', false, 1],
    ['crm-7', null, null, 0, null, true, 0],
    ['9', null, null, 0, null, false, 0],
  ]);
  t.strictSame(r.body.results[0].providers_tried, ['native']);
  t.equal(r.body.results[8].error, 'every candidate address was rejected by the mail server');
  t.equal(r.body.results[9].error, 'last_name is required');
  const { total_latency_ms, ...summary } = r.body.summary;
  t.type(total_latency_ms, 'number');
  t.strictSame(summary, { total: 10, found: 8, not_found: 1, errors: 1, credits_charged: 8 });
  t.equal(await balance(accountId), 42);
  // people.test's candidates (8 contacts, up to 8 each) shared a few sessions, not one per candidate.
  const after = stack.sim.statsFor('people.test');
  const sessions = after.connections - before.connections;
  const rcpts = after.rcpt - before.rcpt;
  // Sessions end after the server's error budget (about 9 rejections), so a few follow one another;
  // one session per candidate would be one per RCPT.
  t.ok(sessions >= 1 && sessions * 5 <= rcpts, `${sessions} sessions for ${rcpts} RCPTs`);
  t.ok(rcpts >= 8, `every contact's candidates were asked (${rcpts} RCPTs)`);
  // The proven patterns are the domain's evidence now.
  t.strictSame(await stack.store.finderPatterns.counts('people.test'), { '{f}{last}': 1, '{first}': 1, '{first}_{last}': 1, '{last}.{first}': 1, '{first}.{last}': 2, '{f}.{last}': 1 });
});

t.test("find/bulk on a catch-all domain: the shapes of the account's delivered addresses are evidence (3 make a charged answer, 1 does not)", async (t) => {
  // Runs before the tests that add proven patterns for catchall.test (evidence every account shares);
  // delivered addresses are the account's own.
  const outcomes = async (accountId: string, locals: string[]) => {
    const writer = (await stack.store.keys.create({ accountId, kind: 'test', scopes: ['email:outcomes:write'] })).key;
    const at = new Date(Date.now() - 60_000).toISOString();
    const imp = await stack.call('POST', '/v1/outcomes/email/import', {
      key: writer,
      body: { outcomes: locals.map((l, i) => ({ email: `${l}@catchall.test`, outcome: 'replied', source: 'api', external_id: `shape-${accountId}-${i}`, occurred_at: at })) },
    });
    t.equal(imp.body.accepted, locals.length);
  };
  const row = (r: { body: { results: Array<Record<string, unknown>> } }) => {
    const x = r.body.results[0]!;
    return [x.email, x.pattern, x.source_provider, x.confidence, x.credits_charged];
  };
  const three = await dataKey({ credits: 10 });
  await outcomes(three.accountId, ['k.ito', 'r.okafor', 'j.novak']);
  const found = await post('/v1/find/bulk', three.key, { contacts: [{ first_name: 'Ana', last_name: 'Lima', domain: 'catchall.test' }] });
  t.strictSame(row(found), ['a.lima@catchall.test', '{f}.{last}', 'pattern', 79, 1], 'three initial.word addresses: {f}.{last}, confidence 79, charged');
  t.equal(await balance(three.accountId), 9);
  const one = await dataKey({ credits: 10 });
  await outcomes(one.accountId, ['k.ito']);
  const weak = await post('/v1/find/bulk', one.key, { contacts: [{ first_name: 'Ana', last_name: 'Lima', domain: 'catchall.test' }] });
  t.strictSame(row(weak), ['a.lima@catchall.test', '{f}.{last}', 'pattern', 59, 0], 'one: the same pattern first, below 70, not charged');
  const ambiguous = await dataKey({ credits: 10 });
  await outcomes(ambiguous.accountId, ['jo.novak']);
  const prior = await post('/v1/find/bulk', ambiguous.key, { contacts: [{ first_name: 'Ana', last_name: 'Lima', domain: 'catchall.test' }] });
  t.strictSame(row(prior), ['ana.lima@catchall.test', '{first}.{last}', 'pattern', 50, 0], 'one word.word address: {first}.{last} first, never below its prior (shapes only add)');
  const none = await dataKey({ credits: 10 });
  const guess = await post('/v1/find/bulk', none.key, { contacts: [{ first_name: 'Ana', last_name: 'Lima', domain: 'catchall.test' }] });
  t.strictSame(row(guess), ['ana.lima@catchall.test', '{first}.{last}', 'pattern', 50, 0], 'another account without them: the default guess');
});

t.test('every fresh valid verdict adds its address shape to the domain (only the shape is kept); cached, invalid and shapeless ones add nothing', async (t) => {
  const { key } = await dataKey({ credits: 10 });
  // A domain no other test here validates: its verdict cache is cold.
  const shapes = async () => {
    await stack.svc.services.finderShapes.flush();
    return stack.store.finderPatterns.shapeCounts('multimx.test');
  };
  t.strictSame(await shapes(), {});
  const validate = (email: string) => stack.call('POST', '/v1/validate', { key, body: { email } });
  t.equal((await validate('john.smith@multimx.test')).body.result, 'valid');
  t.strictSame(await shapes(), { 'word.word': 1 });
  t.equal((await validate('john.smith@multimx.test')).body.result, 'valid', 'again: from the cache');
  t.equal((await validate('no.such.user@multimx.test')).body.result, 'invalid');
  t.equal((await validate('info@multimx.test')).body.result, 'valid_role_based');
  t.strictSame(await shapes(), { 'word.word': 1 }, 'nothing more');
  const stored = await stack.db.query<Record<string, unknown>>("SELECT * FROM finder_shapes WHERE domain = 'multimx.test'");
  t.strictSame(stored.map((r) => [r.domain, r.shape, r.seen]), [['multimx.test', 'word.word', 1]], 'the row holds the domain, the shape and a count: no address');
});

t.test('find/bulk on a catch-all domain: the pattern, not charged without evidence, charged once evidence exists', async (t) => {
  const { key, accountId } = await dataKey({ credits: 10 });
  const guess = await post('/v1/find/bulk', key, { contacts: [{ first_name: 'Pat', last_name: 'Quinn', domain: 'catchall.test' }] });
  t.strictSame(
    [guess.body.results[0].email, guess.body.results[0].pattern, guess.body.results[0].source_provider, guess.body.results[0].confidence, guess.body.results[0].credits_charged],
    ['pat.quinn@catchall.test', '{first}.{last}', 'pattern', 50, 0],
  );
  t.equal(await balance(accountId), 10, 'confidence below 70: not charged');
  // Evidence: three proven {f}{last} addresses on the domain (as finds on a mail server that answers would record).
  for (let i = 0; i < 3; i++) await stack.store.finderPatterns.confirm('catchall.test', '{f}{last}');
  const learnt = await post('/v1/find/bulk', key, { contacts: [{ first_name: 'Pat', last_name: 'Quinn', domain: 'catchall.test' }] });
  t.strictSame([learnt.body.results[0].email, learnt.body.results[0].pattern, learnt.body.results[0].confidence, learnt.body.results[0].credits_charged], ['pquinn@catchall.test', '{f}{last}', 86, 1]);
  t.equal(await balance(accountId), 9);
});

t.test('find/bulk: validate adds the validation and its credit; company resolves through known companies', async (t) => {
  const { key, accountId } = await dataKey({ credits: 10 });
  const r = await post('/v1/find/bulk', key, { contacts: [{ first_name: 'John', last_name: 'Smith', domain: 'accept.test' }], validate: true });
  const row = r.body.results[0];
  t.strictSame([row.email, row.credits_charged, row.validation.result, row.validation.reason_code, row.validation.credits_charged, row.validation.charge_reason], ['john.smith@accept.test', 2, 'valid', 'accepted', 1, 'high_value_validation']);
  t.equal(await balance(accountId), 8);
  const unknownCompany = await post('/v1/find/bulk', key, { contacts: [{ first_name: 'Jane', last_name: 'Doe', company: 'No Such Company Ltd' }] });
  t.strictSame([unknownCompany.body.results[0].email, unknownCompany.body.results[0].not_found, unknownCompany.body.results[0].error], [null, false, "the domain of this company is not known; give the contact's domain"]);
  t.equal(await balance(accountId), 8, 'an unresolved company charges nothing');
});

t.test("find/bulk honours the account's suppression list: a mailbox that hard-bounced for it is never its find", async (t) => {
  const { key, accountId } = await dataKey({ credits: 10 });
  const writer = (await stack.store.keys.create({ accountId, kind: 'test', scopes: ['email:outcomes:write'] })).key;
  const imp = await stack.call('POST', '/v1/outcomes/email/import', {
    key: writer,
    body: { outcomes: [{ email: 'mgarcia@people.test', outcome: 'bounced', source: 'smtp_log', external_id: 'find-bounce-1', action: 'failed', smtp_enhanced_code: '5.1.1', occurred_at: new Date(Date.now() - 60_000).toISOString() }] },
  });
  t.equal(imp.body.suppressed, 1);
  const r = await post('/v1/find/bulk', key, { contacts: [{ first_name: 'Maria', last_name: 'Garcia', domain: 'people.test' }] });
  t.strictSame([r.body.results[0].email, r.body.results[0].not_found, r.body.results[0].credits_charged], [null, true, 0], 'its only accepted candidate is suppressed for this account');
  t.equal(r.body.results[0].error, "every candidate address was rejected by the mail server or is on the account's suppression list");
  t.equal(await balance(accountId), 10);
  // Another account has no such evidence: found as before.
  const other = await dataKey({ credits: 10 });
  const theirs = await post('/v1/find/bulk', other.key, { contacts: [{ first_name: 'Maria', last_name: 'Garcia', domain: 'people.test' }] });
  t.equal(theirs.body.results[0].email, 'mgarcia@people.test');
});

t.test("find/bulk on a catch-all domain: a candidate the account confirmed delivery to is found (source outcome, charged)", async (t) => {
  const { key, accountId } = await dataKey({ credits: 10 });
  const writer = (await stack.store.keys.create({ accountId, kind: 'test', scopes: ['email:outcomes:write'] })).key;
  const imp = await stack.call('POST', '/v1/outcomes/email/import', {
    key: writer,
    body: { outcomes: [{ email: 'rjones@catchall.test', outcome: 'replied', source: 'api', external_id: 'find-reply-1', occurred_at: new Date(Date.now() - 60_000).toISOString() }] },
  });
  t.equal(imp.body.accepted, 1);
  const r = await post('/v1/find/bulk', key, { contacts: [{ first_name: 'Rita', last_name: 'Jones', domain: 'catchall.test' }] });
  t.strictSame(
    [r.body.results[0].email, r.body.results[0].pattern, r.body.results[0].source_provider, r.body.results[0].confidence, r.body.results[0].credits_charged],
    ['rjones@catchall.test', '{f}{last}', 'outcome', 90, 1],
  );
  t.equal(await balance(accountId), 9);
  // Another account, without that evidence, gets the pattern's guess (not charged).
  const other = await dataKey({ credits: 10 });
  const guess = await post('/v1/find/bulk', other.key, { contacts: [{ first_name: 'Rita', last_name: 'Jones', domain: 'catchall.test' }] });
  t.equal(guess.body.results[0].source_provider, 'pattern');
});

t.test('find/bulk: limits and the per-key rate', async (t) => {
  const { key } = await dataKey();
  const cases: Array<[unknown, string, string]> = [
    [{}, 'contacts_required', 'contacts array is required'],
    [{ contacts: [] }, 'contacts_required', 'contacts array is required'],
    [{ contacts: Array.from({ length: 101 }, () => ({ first_name: 'a', last_name: 'b', domain: 'accept.test' })) }, 'too_many_contacts', 'maximum 100 contacts per request'],
    [{ contacts: [{ first_name: 'a', last_name: 'b', domain: 'accept.test' }], max_concurrent: 0 }, 'invalid_max_concurrent', 'max_concurrent must be an integer from 1 to 10'],
  ];
  for (const [body, code, message] of cases) {
    const r = await post('/v1/find/bulk', key, body);
    t.strictSame([r.status, r.body.code, r.body.message], [400, code, message]);
  }
});

t.test('the OpenAPI document: valid 3.1, every data route with its statuses and the enumerations of the contract', async (t) => {
  const { Validator } = await import('@seriousme/openapi-schema-validator');
  const doc = (await (await fetch(`${stack.url}/openapi.json`)).json()) as { paths: Record<string, { post: { responses: Record<string, unknown> } }>; components: { schemas: Record<string, { properties: Record<string, { enum?: unknown[] }> }> } };
  const result = await new Validator().validate(doc as unknown as Record<string, unknown>);
  t.equal(result.valid, true, JSON.stringify(result.errors ?? ''));
  for (const route of ROUTES) t.strictSame(Object.keys(doc.paths[route]!.post.responses).sort(), ['200', '400', '401', '402', '403', '409', '413', '415', '429', '500', '503'], route);
  const schemas = doc.components.schemas;
  t.strictSame(schemas.CompanyEnrichment!.properties.employee_range!.enum, ['1-10', '11-50', '51-200', '201-500', '501-1000', '1001-5000', '5001+', null]);
  t.strictSame(schemas.CompanyEnrichment!.properties.company_type!.enum, ['private', 'public', 'nonprofit', 'government', null]);
  t.strictSame(schemas.PersonProfile!.properties.seniority!.enum, ['C-Level', 'VP', 'Director', 'Manager', 'Senior', 'Individual', 'Intern', null]);
  t.strictSame(schemas.PersonProfile!.properties.department!.enum, ['Sales', 'Engineering', 'Marketing', 'Finance', 'HR', 'Operations', 'Product', 'Legal', 'Executive', null]);
});
