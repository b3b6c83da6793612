// The company-data provider chain (SVC_COMPANY_PROVIDERS) with two real providers through HTTP:
// `native` (the domain's own website and DNS on the simulated internet) and `pdl` (the People Data
// Labs adapter talking to the local stand-in, test/helpers/pdl-standin.ts). Three stacks share one
// stand-in: `native,pdl`; `native,pdl` whose websites are down (the web ports point at a closed
// port); and `pdl,native`. Checked: the first found answer wins and `source_provider` names who
// answered (`website` for native, `pdl` for the vendor), the later provider is then never asked; a
// not-found hands over to the next provider; a failing vendor (500, 429) is skipped and native
// answers after the vendor's three attempts; nobody finding is found=false for 0 credits; after 5
// failures in a row the vendor's circuit is open and it is not asked even once it is healthy
// again; a miss while the vendor failed is not cached, one every provider answered is; only found
// answers are charged, once, and no hold is left.

import net from 'node:net';
import t from 'tap';
import { makeKey, startStack, type Stack } from '../helpers/stack.ts';
import { PDL_ACME_COMPANY, PDL_STANDIN_KEY, startPdlStandin } from '../helpers/pdl-standin.ts';

const pdl = await startPdlStandin();
t.teardown(() => pdl.close());

/** A port nothing listens on: a website fetched there is refused at once (the site is down). */
const closedPort = await new Promise<number>((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => {
    const { port } = s.address() as net.AddressInfo;
    s.close(() => resolve(port));
  });
});
const env = (providers: string, extra: Record<string, string> = {}) => ({
  // The sim's websites and the stand-in live on loopback; the SSRF guard lets exactly that through.
  SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8',
  SVC_WEB_FETCH_TIMEOUT_MS: '1500',
  SVC_PDL_API_KEY: PDL_STANDIN_KEY,
  SVC_PDL_BASE_URL: pdl.url,
  SVC_COMPANY_PROVIDERS: providers,
  ...extra,
});
const [nativeFirst, sitesDown, vendorFirst] = await Promise.all([
  startStack({ env: env('native,pdl') }),
  startStack({ env: env('native,pdl', { SVC_WEB_HTTP_PORT: String(closedPort), SVC_WEB_HTTPS_PORT: String(closedPort) }) }),
  startStack({ env: env('pdl,native') }),
]);
t.teardown(() => Promise.all([nativeFirst.close(), sitesDown.close(), vendorFirst.close()]));

async function dataKey(stack: Stack, credits = 10) {
  const k = await makeKey(stack, { credits });
  await stack.store.accounts.setDataProduct(k.accountId, true);
  return k;
}
const totals = (stack: Stack, accountId: string) => stack.store.ledger.totals(accountId);
const enrich = (stack: Stack, key: string, domain: string, extra: Record<string, unknown> = {}) => stack.call('POST', '/v1/company/enrich', { key, body: { domain, ...extra } });
/** Company look-ups of this domain the stand-in received. */
const asked = (domain: string) => pdl.requests.filter((r) => r.path === '/v5/company/enrich' && r.query.website === domain).length;
const untimed = ({ latency_ms, ...rest }: Record<string, unknown>) => (typeof latency_ms === 'number' ? rest : { latency_ms, ...rest });

t.test('native,pdl: the website answers, the vendor is never asked; a not-found hands over to it', async (t) => {
  const { key, accountId } = await dataKey(nativeFirst);
  const before = pdl.requests.length;
  const r = await enrich(nativeFirst, key, 'acme-robotics.test');
  t.strictSame(
    [r.status, r.body.found, r.body.source_provider, r.body.credits_charged, r.body.cache_hit, r.body.company_name, r.body.employee_count, r.body.employee_range, r.body.founded_year],
    [200, true, 'website', 1, false, 'Acme Robotics', 120, '51-200', 2011],
    'the sim\'s page, not the vendor\'s record (320 employees, 201-500, 2012)',
  );
  t.ok((nativeFirst.sim.webRequests()['acme-robotics.test/'] ?? 0) >= 1, 'the home page was read');
  t.equal(pdl.requests.length, before, 'the stand-in, which knows acme-robotics.test too, was not asked');
  t.strictSame(await totals(nativeFirst, accountId), { balance: 9, reserved: 0 });

  // The site answers 500 (native: not found) and the vendor does not know it (404): not found, 0 credits.
  const none = await enrich(nativeFirst, key, 'error-site.test');
  t.strictSame(
    [none.status, none.body.found, none.body.source_provider, none.body.credits_charged, none.body.company_name, none.body.error],
    [200, false, null, 0, null, 'no website: HTTP 500'],
    "not found, with the first provider's reason",
  );
  t.equal(asked('error-site.test'), 1, 'the not-found handed over to the vendor, asked once');
  t.strictSame(await totals(nativeFirst, accountId), { balance: 9, reserved: 0 }, 'nothing found, nothing charged');
});

t.test('native,pdl with the website down: the vendor answers, charged 1; the hit keeps its source', async (t) => {
  const { key, accountId } = await dataKey(sitesDown);
  const r = await enrich(sitesDown, key, 'acme-robotics.test');
  t.equal(r.status, 200);
  t.strictSame(untimed(r.body), { domain: 'acme-robotics.test', ...PDL_ACME_COMPANY, found: true, credits_charged: 1, cache_hit: false }, "the vendor's record, whole");
  t.ok((sitesDown.sim.dnsQueries()['acme-robotics.test/MX'] ?? 0) >= 1, 'native was asked first (it read the DNS)');
  t.strictSame(sitesDown.sim.webRequests(), {}, 'and reached no website');
  t.equal(asked('acme-robotics.test'), 1, 'the vendor was asked once');
  t.strictSame(await totals(sitesDown, accountId), { balance: 9, reserved: 0 });
  const hit = await enrich(sitesDown, key, 'acme-robotics.test');
  t.strictSame([hit.body.found, hit.body.cache_hit, hit.body.source_provider, hit.body.credits_charged, hit.body.employee_count], [true, true, 'pdl', 1, 320], 'a hit names the provider that found it');
  t.equal(asked('acme-robotics.test'), 1, 'no vendor call for a hit');
  t.strictSame(await totals(sitesDown, accountId), { balance: 8, reserved: 0 });
});

t.test('pdl,native: the vendor answers what it knows; its 404 hands over to the website', async (t) => {
  const { key, accountId } = await dataKey(vendorFirst);
  const known = await enrich(vendorFirst, key, 'acme-robotics.test');
  t.strictSame([known.status, known.body.found, known.body.source_provider, known.body.credits_charged, known.body.employee_count], [200, true, 'pdl', 1, 320]);
  t.equal(vendorFirst.sim.webRequests()['acme-robotics.test/'], undefined, 'native was not asked');
  t.equal(vendorFirst.sim.dnsQueries()['acme-robotics.test/MX'], undefined, 'not even its DNS');

  const askedBefore = asked('umbrella-nonprofit.test');
  const r = await enrich(vendorFirst, key, 'umbrella-nonprofit.test');
  t.strictSame(
    [r.status, r.body.found, r.body.source_provider, r.body.credits_charged, r.body.company_type, r.body.employee_range, r.body.location.country_code],
    [200, true, 'website', 1, 'nonprofit', '11-50', 'DE'],
  );
  t.equal(asked('umbrella-nonprofit.test') - askedBefore, 1, 'the vendor was asked first and said not found');
  t.ok((vendorFirst.sim.webRequests()['umbrella-nonprofit.test/'] ?? 0) >= 1, 'then the website was read');
  t.strictSame(await totals(vendorFirst, accountId), { balance: 8, reserved: 0 }, 'two found, two credits');
});

t.test('pdl,native with the vendor failing: native answers, charged once; none found is 0; then the circuit opens', async (t) => {
  const { key, accountId } = await dataKey(vendorFirst);
  t.teardown(() => void (pdl.failAll = null));
  // Every company call of this stack so far succeeded (found or 404): the vendor's breaker is closed.
  const cases: Array<[429 | 500, string, string]> = [
    [500, 'initech-redirect.test', 'Initech'],
    [429, 'globex-meta.test', 'Globex Meta'],
  ];
  for (const [status, domain, name] of cases) {
    pdl.failAll = status;
    const r = await enrich(vendorFirst, key, domain);
    t.strictSame([r.status, r.body.found, r.body.source_provider, r.body.credits_charged, r.body.company_name], [200, true, 'website', 1, name], `vendor ${status}: native answers`);
    // A retryable failure (5xx, 429) is retried with back-off; only the website is asked once.
    t.equal(asked(domain), 3, `vendor ${status}: asked first, three attempts, before native`);
  }
  t.strictSame(await totals(vendorFirst, accountId), { balance: 8, reserved: 0 }, 'each found company charged once');

  // Nobody finds it: the vendor fails, the domain has no website: found=false, 0 credits (failures 3-5 in a row).
  pdl.failAll = 500;
  for (let i = 0; i < 3; i++) {
    const before = asked('no-site.test');
    const none = await enrich(vendorFirst, key, 'no-site.test', { force_refresh: true });
    t.strictSame([none.status, none.body.found, none.body.source_provider, none.body.credits_charged, none.body.cache_hit], [200, false, null, 0, false], `no-site.test #${i + 1}`);
    t.match(none.body.error, /^no website: no-site\.test did not resolve/, "native's reason");
    t.equal(asked('no-site.test') - before, 3, `failure ${i + 3} in a row: the vendor was still asked (three attempts)`);
  }
  t.strictSame(await totals(vendorFirst, accountId), { balance: 8, reserved: 0 }, 'not found costs nothing');

  // Five failures in a row: the vendor's circuit is open (30 s), so even healthy it is not asked.
  pdl.failAll = null;
  const vendorCalls = pdl.requests.length;
  const r = await enrich(vendorFirst, key, 'acme-robotics.test', { force_refresh: true });
  t.strictSame([r.status, r.body.found, r.body.source_provider, r.body.credits_charged, r.body.employee_count], [200, true, 'website', 1, 120], 'native answers what the vendor knows');
  t.equal(pdl.requests.length, vendorCalls, 'the open circuit kept the call from the vendor');
  t.strictSame(await totals(vendorFirst, accountId), { balance: 7, reserved: 0 });
});

t.test('a miss while the vendor failed is not remembered; a miss every provider answered is', async (t) => {
  const { key, accountId } = await dataKey(sitesDown);
  t.teardown(() => void (pdl.failAll = null));
  pdl.failAll = 500;
  const globexBefore = asked('globex-meta.test');
  const miss = await enrich(sitesDown, key, 'globex-meta.test');
  t.strictSame([miss.status, miss.body.found, miss.body.credits_charged, miss.body.cache_hit, miss.body.source_provider], [200, false, 0, false, null], 'no website, vendor failing: not found');
  t.equal(asked('globex-meta.test') - globexBefore, 3, 'the vendor was tried three times');
  pdl.failAll = null;
  const found = await enrich(sitesDown, key, 'globex-meta.test');
  t.strictSame([found.body.found, found.body.cache_hit, found.body.source_provider, found.body.credits_charged], [true, false, 'pdl', 1], 'not a cached miss: the vendor, healthy again, answers');
  t.equal(asked('globex-meta.test') - globexBefore, 4, 'and once more');

  // The website down (native: not found) and the vendor's 404: a real miss, cached.
  const before = asked('error-site.test');
  const first = await enrich(sitesDown, key, 'error-site.test');
  const again = await enrich(sitesDown, key, 'error-site.test');
  t.strictSame([first.body.found, first.body.cache_hit, again.body.found, again.body.cache_hit, again.body.credits_charged], [false, false, false, true, 0]);
  t.equal(asked('error-site.test') - before, 1, 'the cached miss asked nobody');
  t.strictSame(await totals(sitesDown, accountId), { balance: 9, reserved: 0 });
});
