// The vendor-backed data endpoints through HTTP, with People Data Labs' documented API played by
// a local stand-in (test/helpers/pdl-standin.ts): people search, person and role lookup, profile,
// mobile, email to person, LinkedIn company data and hires; their prices, caches (hits charged
// the same or free, as each endpoint says), the vendor's errors (404 → not found, 429 and 500 →
// retried, then 503 provider_unavailable, never charged) and the key kept out of URLs.

import t from 'tap';
import { makeKey, startStack } from '../helpers/stack.ts';
import { PDL_STANDIN_KEY, startPdlStandin } from '../helpers/pdl-standin.ts';

const pdl = await startPdlStandin();
t.teardown(() => pdl.close());
const stack = await startStack({ env: { SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8', SVC_PDL_API_KEY: PDL_STANDIN_KEY, SVC_PDL_BASE_URL: pdl.url } });
t.teardown(() => stack.close());

async function dataKey(credits = 100) {
  const k = await makeKey(stack, { credits });
  await stack.store.accounts.setDataProduct(k.accountId, true);
  return k;
}
const balance = async (accountId: string) => (await stack.store.ledger.balance(accountId))!.balance;
const post = (route: string, key: string, body: unknown) => stack.call('POST', route, { key, body });
/** A body without its timing. */
const untimed = ({ latency_ms, ...rest }: Record<string, unknown>) => (typeof latency_ms === 'number' ? rest : { latency_ms, ...rest });

t.test('people/search: 2 credits per profile returned', async (t) => {
  const { key, accountId } = await dataKey();
  const r = await post('/v1/people/search', key, { domain: 'acme-robotics.test', limit: 2 });
  t.equal(r.status, 200);
  t.strictSame([r.body.people.length, r.body.limit, r.body.offset, r.body.source_provider, r.body.credits_charged], [2, 2, 0, 'pdl', 4]);
  t.ok(r.body.total >= 2);
  t.strictSame(
    r.body.people.map((p: { full_name: string; seniority: string; department: string; linkedin_url: string }) => [p.full_name, p.seniority, p.department, p.linkedin_url]).slice(0, 1),
    [['Jane Doe', 'VP', 'Sales', 'https://www.linkedin.com/in/jane-doe-acme']],
  );
  t.equal(await balance(accountId), 96);
  const nobody = await post('/v1/people/search', key, { domain: 'nobody-works-here.test' });
  t.strictSame([nobody.status, nobody.body.people, nobody.body.total, nobody.body.credits_charged, nobody.body.source_provider], [200, [], 0, 0, null]);
  t.equal(await balance(accountId), 96, 'nothing found, nothing charged');
});

t.test('people/lookup (2, 3 with the profile; hits charged the same) and people/role (3)', async (t) => {
  const { key, accountId } = await dataKey();
  const q = { first_name: 'Jane', last_name: 'Doe', company_domain: 'acme-robotics.test' };
  const r = await post('/v1/people/lookup', key, q);
  t.strictSame(untimed(r.body), { linkedin_url: 'https://www.linkedin.com/in/jane-doe-acme', similarity_scores: { name: 1, company: 1, title: 0, location: 0 }, confidence: 80, found: true, credits_charged: 2, cache_hit: false, source_provider: 'pdl' });
  const hit = await post('/v1/people/lookup', key, q);
  t.strictSame([hit.body.cache_hit, hit.body.credits_charged], [true, 2], 'a hit is charged the same');
  const withProfile = await post('/v1/people/lookup', key, { ...q, enrich_profile: true });
  t.strictSame([withProfile.body.credits_charged, withProfile.body.profile.title, withProfile.body.profile.country_code], [3, 'VP Sales', 'US']);
  t.equal(await balance(accountId), 93);
  const role = await post('/v1/people/role', key, { role: 'CFO', company_name: 'Acme Robotics' });
  t.strictSame(untimed(role.body), { linkedin_url: 'https://www.linkedin.com/in/morgan-reyes-cfo', confidence: 90, found: true, credits_charged: 3, cache_hit: false, source_provider: 'pdl' });
  t.equal(await balance(accountId), 90);
});

t.test('profile/enrich (3), email-to-person (1), mobile/find (2); not found 0', async (t) => {
  const { key, accountId } = await dataKey();
  const profile = await post('/v1/profile/enrich', key, { email: 'jane.doe@acme-robotics.test' });
  t.strictSame([profile.body.found, profile.body.credits_charged, profile.body.confidence, profile.body.profile.full_name, profile.body.profile.seniority, profile.body.profile.mobile], [true, 3, profile.body.confidence, 'Jane Doe', 'VP', '+15125550199']);
  const none = await post('/v1/profile/enrich', key, { email: 'nobody@acme-robotics.test' });
  t.strictSame(untimed(none.body), { profile: null, confidence: 0, found: false, credits_charged: 0, cache_hit: false, source_provider: null, error: 'not found' });
  const person = await post('/v1/prospect/email-to-person', key, { email: 'jane.doe@acme-robotics.test' });
  t.strictSame(person.body, {
    person: { linkedin_url: 'https://www.linkedin.com/in/jane-doe-acme', first_name: 'Jane', last_name: 'Doe', full_name: 'Jane Doe', title: 'VP Sales', headline: 'Builds sales teams that sell robots', location: 'Austin, Texas, United States', company_name: 'Acme Robotics', email: 'jane.doe@acme-robotics.test', phone: '+15125550199' },
    found: true,
    credits_charged: 1,
  });
  const mobile = await post('/v1/mobile/find', key, { email: 'jane.doe@acme-robotics.test' });
  t.strictSame(untimed(mobile.body), { mobile: '+15125550199', mobile_raw: '+1 512-555-0199', country_code: 'US', carrier: null, line_type: null, valid: true, confidence: 90, email: 'jane.doe@acme-robotics.test', found: true, credits_charged: 2, cache_hit: false, source_provider: 'pdl' });
  const hidden = await post('/v1/mobile/find', key, { email: 'morgan.reyes@acme-robotics.test' });
  t.strictSame([hidden.body.found, hidden.body.credits_charged, hidden.body.mobile, hidden.body.valid], [false, 0, null, false], 'a number the plan hides is not found');
  const noIdentity = await post('/v1/mobile/find', key, { first_name: 'Jane' });
  t.strictSame([noIdentity.status, noIdentity.body.code, noIdentity.body.message], [400, 'contact_identity_required', 'email, linkedin_url, or first_name+last_name required']);
  t.equal(await balance(accountId), 94, '3 + 1 + 2');
});

t.test('linkedin/company (1 fresh, 0 cached) and linkedin/hires (2 fresh, 0 cached)', async (t) => {
  const { key, accountId } = await dataKey();
  const company = await post('/v1/linkedin/company', key, { domain: 'acme-robotics.test' });
  t.strictSame(
    [company.body.name, company.body.linkedin_url, company.body.employee_count_range, company.body.employee_growth_1y, company.body.headquarters, company.body.found, company.body.credits_charged, company.body.cache_hit],
    ['Acme Robotics', 'https://www.linkedin.com/company/acme-robotics', '201-500', 12.5, 'Austin, Texas, United States', true, 1, false],
  );
  const cached = await post('/v1/linkedin/company', key, { linkedin_url: 'https://www.linkedin.com/company/acme-robotics' });
  t.strictSame([cached.body.found, cached.body.credits_charged, cached.body.cache_hit], [true, 1, false], 'a cache per input: the URL is another key');
  const again = await post('/v1/linkedin/company', key, { domain: 'acme-robotics.test' });
  t.strictSame([again.body.found, again.body.credits_charged, again.body.cache_hit], [true, 0, true]);
  const hires = await post('/v1/linkedin/hires', key, { domain: 'acme-robotics.test', days_back: 90 });
  t.strictSame(
    [hires.body.total, hires.body.recent_hires.map((h: { full_name: string }) => h.full_name), hires.body.hiring_velocity, hires.body.top_departments, hires.body.department_breakdown, hires.body.credits_charged],
    [1, ['Jane Doe'], 0.33, ['Sales'], { Sales: 1 }, 2],
  );
  const hiresAgain = await post('/v1/linkedin/hires', key, { domain: 'acme-robotics.test', days_back: 90 });
  t.strictSame([hiresAgain.body.cache_hit, hiresAgain.body.credits_charged], [true, 0]);
  t.equal(await balance(accountId), 96, '1 + 1 + 2');
  const bad = await post('/v1/linkedin/hires', key, { domain: 'acme-robotics.test', days_back: 365 });
  t.strictSame([bad.status, bad.body.code], [400, 'invalid_days_back']);
});

t.test("the vendor's failures: retried, then 503 provider_unavailable, never charged; the key only in its header", async (t) => {
  const { key, accountId } = await dataKey();
  const t0 = performance.now();
  const limited = await post('/v1/people/search', key, { domain: 'ratelimited.test' });
  t.strictSame([limited.status, limited.body.code], [503, 'provider_unavailable']);
  t.ok(performance.now() - t0 >= 1900, 'two retries after the vendor\'s Retry-After of 1 s');
  const boom = await post('/v1/people/search', key, { domain: 'boom.test' });
  t.strictSame([boom.status, boom.body.code], [503, 'provider_unavailable']);
  t.equal(await balance(accountId), 100, 'failures cost nothing');
  t.strictSame(await stack.store.ledger.totals(accountId), { balance: 100, reserved: 0 }, 'no hold left');
  t.ok(pdl.requests.length > 10);
  t.ok(pdl.requests.every((r) => r.apiKey === PDL_STANDIN_KEY), 'every call carries the key in X-Api-Key');
  t.notOk(pdl.requests.some((r) => r.url.includes(PDL_STANDIN_KEY)), 'and never in a URL');
});

t.test("every vendor route's 400s through HTTP: the code and message of the data contract, nothing charged", async (t) => {
  const { key, accountId } = await dataKey(100);
  const vendorCalls = pdl.requests.length;
  const cases: Array<[string, unknown, string, string]> = [
    ['/v1/linkedin/company', {}, 'domain_or_linkedin_url_required', 'domain or linkedin_url required'],
    ['/v1/linkedin/hires', { domain: 'acme-robotics.test', days_back: 181 }, 'invalid_days_back', 'days_back must be an integer from 1 to 180'],
    ['/v1/linkedin/hires', { domain: 'acme-robotics.test', days_back: 0 }, 'invalid_days_back', 'days_back must be an integer from 1 to 180'],
    ['/v1/linkedin/hires', { domain: 'acme-robotics.test', limit: 101 }, 'invalid_limit', 'limit must be an integer from 1 to 100'],
    ['/v1/people/search', {}, 'domain_required', 'domain is required'],
    ['/v1/people/search', { domain: 'acme-robotics.test', limit: 51 }, 'invalid_limit', 'limit must be an integer from 1 to 50'],
    ['/v1/people/search', { domain: 'acme-robotics.test', offset: -1 }, 'invalid_limit', 'offset must be an integer from 0 to 10000'],
    ['/v1/people/search', { domain: 'acme-robotics.test', department: 'Sorcery' }, 'invalid_request', 'department must be one of: Sales, Engineering, Marketing, Finance, HR, Operations, Product, Legal, Executive'],
    ['/v1/people/search', { domain: 'acme-robotics.test', seniority: 'VP' }, 'invalid_request', 'seniority must be an array of at most 6 strings'],
    ['/v1/people/lookup', { company_domain: 'acme-robotics.test' }, 'first_name_required', 'first_name is required'],
    ['/v1/people/lookup', { first_name: 'Jane' }, 'company_domain_required', 'company_domain is required'],
    ['/v1/people/role', { company_name: 'Acme' }, 'role_required', 'role is required'],
    ['/v1/people/role', { role: 'CFO' }, 'company_name_required', 'company_name is required'],
    ['/v1/profile/enrich', {}, 'email_or_linkedin_url_required', 'email or linkedin_url required'],
    ['/v1/profile/enrich', { linkedin_url: 'https://www.linkedin.com/company/acme' }, 'invalid_linkedin_url', 'linkedin_url is not a LinkedIn profile URL (https://www.linkedin.com/in/…)'],
    ['/v1/profile/enrich', { email: 'not-an-email' }, 'invalid_request', 'email is not an email address'],
    ['/v1/mobile/find', {}, 'contact_identity_required', 'email, linkedin_url, or first_name+last_name required'],
    ['/v1/mobile/find', { first_name: 'Jane' }, 'contact_identity_required', 'email, linkedin_url, or first_name+last_name required'],
    ['/v1/prospect/email-to-person', {}, 'email_required', 'email is required'],
  ];
  for (const [route, body, code, message] of cases) {
    const r = await post(route, key, body);
    t.strictSame([r.status, r.body.code, r.body.message], [400, code, message], `${route} ${JSON.stringify(body)}`);
  }
  t.equal(await balance(accountId), 100, 'no 400 is charged');
  t.equal(pdl.requests.length, vendorCalls, 'and none reaches the vendor');
});
