// The People Data Labs adapter against the local stand-in (never the real API): each method's
// request and its whole mapped answer, each HTTP failure mapped onto found false or a
// ProviderError (retryable or not, with the 429's hint), a signal that aborts a call that hangs,
// the key sent in X-Api-Key and nowhere else, and the normalisation tables.

import t from 'tap';
import { ProviderError } from '../src/chain.ts';
import type { PersonProfile } from '../src/ports.ts';
import {
  PdlProvider,
  pdlCompany,
  pdlCompanyType,
  pdlCountryCode,
  pdlDepartment,
  pdlEmployeeRange,
  pdlLevelsFor,
  pdlRolesFor,
  pdlSeniority,
  retryAfterMs,
  rolePhrases,
  similarity,
} from '../src/vendors/pdl.ts';
import { PDL_ACME_COMPANY as ACME_COMPANY, PDL_OUT_OF_CREDITS_KEY, startPdlStandin, type PdlStandin } from '../../../test/helpers/pdl-standin.ts';

const NOW = new Date('2026-03-15T12:00:00Z');
const KEY = 'svc-pdl-test-key-7f3a9c21';
const never = () => new AbortController().signal;

let standin: PdlStandin;
let pdl: PdlProvider;

t.before(async () => {
  standin = await startPdlStandin({ key: KEY, now: NOW });
  pdl = new PdlProvider({ apiKey: KEY, baseUrl: standin.url, now: () => NOW });
});
t.teardown(() => standin.close());

/** The requests the stand-in saw while `fn` ran. */
async function seen<T>(fn: () => Promise<T>): Promise<{ result: T; requests: PdlStandin['requests'] }> {
  const from = standin.requests.length;
  const result = await fn();
  return { result, requests: standin.requests.slice(from) };
}

async function failure(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ProviderError) return err;
    throw err;
  }
  throw new Error('expected a ProviderError');
}

const base: Omit<PersonProfile, 'first_name'> & { first_name: string | null } = {
  first_name: null,
  last_name: null,
  full_name: null,
  email: null,
  personal_email: null,
  mobile: null,
  linkedin_url: null,
  twitter_url: null,
  profile_picture: null,
  title: null,
  headline: null,
  department: null,
  seniority: null,
  company: null,
  company_domain: null,
  company_size: null,
  industry: null,
  location: null,
  city: null,
  region: null,
  country: null,
  country_code: null,
  skills: [],
  experience: [],
  education: [],
  connections: null,
  followers: null,
  recent_job_change: false,
  job_change_date: null,
  previous_company: null,
  previous_title: null,
};

const JANE: PersonProfile = {
  ...base,
  first_name: 'Jane',
  last_name: 'Doe',
  full_name: 'Jane Doe',
  email: 'jane.doe@acme-robotics.test',
  personal_email: 'jane.doe.home@mail.test',
  mobile: '+15125550199',
  linkedin_url: 'https://www.linkedin.com/in/jane-doe-acme',
  twitter_url: 'https://twitter.com/janedoe_acme',
  title: 'VP Sales',
  headline: 'Builds sales teams that sell robots',
  department: 'Sales',
  seniority: 'VP',
  company: 'Acme Robotics',
  company_domain: 'acme-robotics.test',
  company_size: '201-500',
  industry: 'industrial automation',
  location: 'Austin, Texas, United States',
  city: 'Austin',
  region: 'Texas',
  country: 'United States',
  country_code: 'US',
  skills: ['enterprise sales', 'negotiation'],
  experience: [
    { company: 'Acme Robotics', title: 'VP Sales', department: 'Sales', location: 'Austin, Texas, United States', start_date: '2026-02-13', end_date: null, is_current: true, description: null },
    {
      company: 'Globex Meta',
      title: 'Sales Director',
      department: 'Sales',
      location: 'Toronto, Ontario, Canada',
      start_date: '2019-03',
      end_date: '2026-02',
      is_current: false,
      description: 'Led enterprise sales for the Americas.',
    },
  ],
  education: [{ school: 'Fictional State University', degree: 'bachelors', field: 'business administration', start_year: 2008, end_year: 2012 }],
  connections: 500,
  recent_job_change: true,
  job_change_date: '2026-02-13',
  previous_company: 'Globex Meta',
  previous_title: 'Sales Director',
};

const SAM: PersonProfile = {
  ...base,
  first_name: 'Sam',
  last_name: 'Lee',
  full_name: 'Sam Lee',
  email: 'sam.lee@acme-robotics.test',
  linkedin_url: 'https://www.linkedin.com/in/sam-lee-acme',
  title: 'Senior Software Engineer',
  department: 'Engineering',
  seniority: 'Senior',
  company: 'Acme Robotics',
  company_domain: 'acme-robotics.test',
  company_size: '201-500',
  industry: 'industrial automation',
  location: 'London, England, United Kingdom',
  city: 'London',
  region: 'England',
  country: 'United Kingdom',
  country_code: 'GB',
  skills: ['typescript', 'robot control'],
  experience: [
    { company: 'Acme Robotics', title: 'Senior Software Engineer', department: 'Engineering', location: 'London, England, United Kingdom', start_date: '2025-08-27', end_date: null, is_current: true, description: null },
  ],
  connections: 180,
  job_change_date: '2025-08-27',
};

const MORGAN: PersonProfile = {
  ...base,
  first_name: 'Morgan',
  last_name: 'Reyes',
  full_name: 'Morgan Reyes',
  email: 'morgan.reyes@acme-robotics.test',
  linkedin_url: 'https://www.linkedin.com/in/morgan-reyes-cfo',
  title: 'Chief Financial Officer',
  department: 'Finance',
  seniority: 'C-Level',
  company: 'Acme Robotics',
  company_domain: 'acme-robotics.test',
  company_size: '201-500',
  industry: 'industrial automation',
  location: 'Austin, Texas, United States',
  city: 'Austin',
  region: 'Texas',
  country: 'United States',
  country_code: 'US',
  experience: [
    { company: 'Acme Robotics', title: 'Chief Financial Officer', department: 'Finance', location: 'Austin, Texas, United States', start_date: '2023-03-11', end_date: null, is_current: true, description: null },
  ],
  connections: 900,
  job_change_date: '2023-03-11',
};

// ---------------------------------------------------------------------------------------------

t.test('profile: by email and by LinkedIn URL, likelihood ×10 as confidence', async (t) => {
  const byEmail = await seen(() => pdl.profile({ email: 'jane.doe@acme-robotics.test' }, never()));
  t.strictSame(byEmail.result, { found: true, value: { profile: JANE, confidence: 90 } });
  t.strictSame(
    byEmail.requests.map((r) => [r.method, r.path, r.query]),
    [['GET', '/v5/person/enrich', { email: 'jane.doe@acme-robotics.test', titlecase: 'true' }]],
  );

  const byUrl = await seen(() => pdl.profile({ linkedin_url: 'https://www.linkedin.com/in/jane-doe-acme' }, never()));
  t.strictSame(byUrl.result, { found: true, value: { profile: JANE, confidence: 90 } });
  t.strictSame(byUrl.requests[0]!.query, { profile: 'https://www.linkedin.com/in/jane-doe-acme', titlecase: 'true' });

  t.strictSame(await pdl.profile({ email: 'nobody@unknown.test' }, never()), { found: false, error: 'not found' }, '404 → not found');
});

t.test('people search: the Elasticsearch query, size/from as limit/offset, PDL total', async (t) => {
  const filtered = await seen(() => pdl.search({ domain: 'acme-robotics.test', title_keywords: ['engineer'], department: 'Engineering', seniority: ['Senior'], limit: 10, offset: 0 }, never()));
  t.strictSame(filtered.result, { found: true, value: { people: [SAM], total: 1 } });
  t.strictSame(filtered.requests[0]!.body, {
    query: {
      bool: {
        must: [
          { term: { job_company_website: 'acme-robotics.test' } },
          { bool: { should: [{ match: { job_title: 'engineer' } }], minimum_should_match: 1 } },
          {
            bool: {
              should: [{ terms: { job_title_role: ['engineering'] } }, { terms: { job_title_sub_role: ['software', 'devops', 'data_engineering', 'qa_engineering', 'web'] } }],
              minimum_should_match: 1,
            },
          },
          { terms: { job_title_levels: ['senior'] } },
        ],
      },
    },
    size: 10,
    from: 0,
    titlecase: true,
  });
  t.equal(filtered.requests[0]!.method, 'POST');
  t.equal(filtered.requests[0]!.path, '/v5/person/search');

  const page = await pdl.search({ domain: 'acme-robotics.test', title_keywords: [], seniority: [], limit: 2, offset: 1 }, never());
  t.strictSame(page, { found: true, value: { people: [SAM, MORGAN], total: 3 } }, 'the second page, PDL counting all three');

  const cLevel = await seen(() => pdl.search({ domain: 'acme-robotics.test', title_keywords: [], seniority: ['C-Level', 'VP'], limit: 10, offset: 0 }, never()));
  t.strictSame(cLevel.result, { found: true, value: { people: [JANE, MORGAN], total: 2 } });
  t.strictSame((cLevel.requests[0]!.body as { query: { bool: { must: unknown[] } } }).query.bool.must[1], { terms: { job_title_levels: ['cxo', 'owner', 'partner', 'vp'] } });

  t.strictSame(await pdl.search({ domain: 'unknown.test', title_keywords: [], seniority: [], limit: 10, offset: 0 }, never()), { found: false, error: 'not found' });
});

t.test('people lookup: enrichment with a last name, our similarity scores', async (t) => {
  const r = await seen(() => pdl.lookup({ first_name: 'Jane', last_name: 'Doe', company_domain: 'acme-robotics.test', title: 'VP of Sales', location: 'Austin', enrich_profile: false }, never()));
  t.strictSame(r.result, {
    found: true,
    value: {
      linkedin_url: 'https://www.linkedin.com/in/jane-doe-acme',
      profile: JANE,
      confidence: 80,
      similarity_scores: { name: 1, company: 1, title: 0.8, location: 0.4 },
    },
  });
  t.strictSame(r.requests[0]!.query, { first_name: 'Jane', last_name: 'Doe', company: 'acme-robotics.test', location: 'Austin', titlecase: 'true' });
});

t.test('min_likelihood: sent on enrichments when configured, PDL answering 404 below it', async (t) => {
  const strict = new PdlProvider({ apiKey: KEY, baseUrl: standin.url, minLikelihood: 9, now: () => NOW });
  const byName = await seen(() => strict.lookup({ first_name: 'Jane', last_name: 'Doe', company_domain: 'acme-robotics.test', enrich_profile: false }, never()));
  t.strictSame(byName.result, { found: false, error: 'not found' }, 'a name match is likelihood 8 at the stand-in');
  t.equal(byName.requests[0]!.query.min_likelihood, '9');
  const byEmail = await strict.profile({ email: 'jane.doe@acme-robotics.test' }, never());
  t.strictSame(byEmail, { found: true, value: { profile: JANE, confidence: 90 } });
});

t.test('people lookup: a first name alone is a search, with a capped confidence', async (t) => {
  const r = await seen(() => pdl.lookup({ first_name: 'Sam', company_domain: 'acme-robotics.test', enrich_profile: false }, never()));
  t.strictSame(r.result, {
    found: true,
    value: { linkedin_url: 'https://www.linkedin.com/in/sam-lee-acme', profile: SAM, confidence: 60, similarity_scores: { name: 1, company: 1, title: 0, location: 0 } },
  });
  t.strictSame(r.requests[0]!.body, { query: { bool: { must: [{ term: { job_company_website: 'acme-robotics.test' } }, { term: { first_name: 'sam' } }] } }, size: 1, titlecase: true });
  t.strictSame(await pdl.lookup({ first_name: 'Nobody', last_name: 'Here', company_domain: 'acme-robotics.test', enrich_profile: false }, never()), { found: false, error: 'not found' });
});

t.test('role lookup: the company name and the role as a phrase (the acronym also in full)', async (t) => {
  const r = await seen(() => pdl.role({ role: 'CFO', company_name: 'Acme Robotics', enrich_profile: false }, never()));
  t.strictSame(r.result, { found: true, value: { linkedin_url: 'https://www.linkedin.com/in/morgan-reyes-cfo', profile: MORGAN, confidence: 90 } });
  t.strictSame(r.requests[0]!.body, {
    query: {
      bool: {
        must: [
          { term: { job_company_name: 'acme robotics' } },
          { bool: { should: [{ match_phrase: { job_title: 'cfo' } }, { match_phrase: { job_title: 'chief financial officer' } }], minimum_should_match: 1 } },
        ],
      },
    },
    size: 1,
    titlecase: true,
  });
  t.strictSame(await pdl.role({ role: 'Chief Pilot', company_name: 'Acme Robotics', enrich_profile: false }, never()), { found: false, error: 'not found' });
});

t.test('mobile: enrichment with required=mobile_phone, the number as PDL writes it', async (t) => {
  const r = await seen(() => pdl.mobile({ email: 'jane.doe@acme-robotics.test' }, never()));
  t.strictSame(r.result, { found: true, value: { number: '+1 512-555-0199', carrier: null, confidence: 90 } });
  t.strictSame(r.requests[0]!.query, { email: 'jane.doe@acme-robotics.test', required: 'mobile_phone', titlecase: 'true' });

  const byName = await seen(() => pdl.mobile({ first_name: 'Jane', last_name: 'Doe', company: 'Acme Robotics' }, never()));
  t.strictSame(byName.result, { found: true, value: { number: '+1 512-555-0199', carrier: null, confidence: 80 } });
  t.strictSame(byName.requests[0]!.query, { first_name: 'Jane', last_name: 'Doe', company: 'Acme Robotics', required: 'mobile_phone', titlecase: 'true' });

  t.strictSame(await pdl.mobile({ first_name: 'Sam', last_name: 'Lee', domain: 'acme-robotics.test' }, never()), { found: false, error: 'not found' }, 'no mobile: PDL answers 404');
  t.strictSame(await pdl.mobile({ email: 'morgan.reyes@acme-robotics.test' }, never()), { found: false, error: 'PDL has a mobile number that the plan does not include' }, 'mobile_phone: true');

  const nameOnly = await seen(() => pdl.mobile({ first_name: 'Jane', last_name: 'Doe' }, never()));
  t.strictSame(nameOnly.result, { found: false, error: 'PDL needs an email, a LinkedIn URL, or a company beside the name' });
  t.equal(nameOnly.requests.length, 0, 'a name alone is not sent');
});


t.test('company (company port): website match, likelihood ÷10 as confidence', async (t) => {
  const r = await seen(() => pdl.company({ domain: 'acme-robotics.test', company_name: 'Acme' }, never()));
  t.strictSame(r.result, { found: true, value: ACME_COMPANY });
  t.strictSame(r.requests[0]!.query, { website: 'acme-robotics.test', titlecase: 'true' });

  t.strictSame(await pdl.company({ domain: 'globex-meta.test' }, never()), {
    found: true,
    value: {
      company_name: 'Globex Meta',
      display_name: 'Globex Meta',
      description: null,
      website: 'https://globex-meta.test',
      employee_count: 15000,
      employee_range: '5001+',
      revenue_range: null,
      industry: 'computer software',
      sub_industry: null,
      founded_year: 1998,
      company_type: 'public',
      location: { city: 'Toronto', region: 'Ontario', country: 'Canada', country_code: 'CA' },
      linkedin_url: 'https://www.linkedin.com/company/globex-meta',
      twitter_url: null,
      facebook_url: null,
      phone: null,
      technologies: [],
      technology_count: 0,
      funding: { total_raised: null, last_round: null, last_round_date: null },
      confidence: 0.8,
      source_provider: 'pdl',
    },
  });
  t.strictSame(await pdl.company({ domain: 'unknown.test' }, never()), { found: false, error: 'not found' });
});

t.test('LinkedIn company (the linkedin view): by URL and by domain; growth in percent', async (t) => {
  t.equal(pdl.linkedin.name, 'pdl');
  const r = await seen(() => pdl.linkedin.company({ linkedin_url: 'https://www.linkedin.com/company/acme-robotics' }, never()));
  t.strictSame(r.result, {
    found: true,
    value: {
      name: 'Acme Robotics',
      linkedin_url: 'https://www.linkedin.com/company/acme-robotics',
      website: 'https://acme-robotics.test',
      industry: 'industrial automation',
      company_type: 'private',
      founded_year: 2012,
      description: 'Acme Robotics builds robots for warehouses.',
      tagline: 'Robots for every warehouse',
      specialties: ['robotics', 'warehouse automation'],
      employee_count: 320,
      employee_count_range: '201-500',
      follower_count: 12400,
      employee_growth_6m: 5,
      employee_growth_1y: 12.5,
      employee_growth_2y: 30,
      headquarters: 'Austin, Texas, United States',
      locations: [
        { city: 'Austin', region: 'Texas', country: 'United States', is_hq: true, address: '100 example way' },
        { city: 'London', region: 'England', country: 'United Kingdom', is_hq: false, address: null },
      ],
      funding: { total_funding: 38000000, last_round: 'series_b', last_round_date: '2024-05-01', last_round_amount: 30000000, investors: ['example ventures', 'sample capital', 'pat example'] },
    },
  });
  t.strictSame(r.requests[0]!.query, { profile: 'https://www.linkedin.com/company/acme-robotics', titlecase: 'true' });

  t.strictSame(await pdl.linkedin.company({ domain: 'globex-meta.test' }, never()), {
    found: true,
    value: {
      name: 'Globex Meta',
      linkedin_url: 'https://www.linkedin.com/company/globex-meta',
      website: 'https://globex-meta.test',
      industry: 'computer software',
      company_type: 'public',
      founded_year: 1998,
      description: null,
      tagline: null,
      specialties: [],
      employee_count: 15000,
      employee_count_range: '5001+',
      follower_count: 98000,
      employee_growth_6m: 7.1,
      employee_growth_1y: 20,
      employee_growth_2y: 50,
      headquarters: 'Toronto, Ontario, Canada',
      locations: [{ city: 'Toronto', region: 'Ontario', country: 'Canada', is_hq: true, address: null }],
      funding: { total_funding: null, last_round: null, last_round_date: null, last_round_amount: null, investors: [] },
    },
  }, 'growth worked out from employee_count_by_month; the single location is the headquarters');
});

t.test('hires: started within days_back, newest first, PDL total', async (t) => {
  const r = await seen(() => pdl.linkedin.hires({ domain: 'acme-robotics.test', days_back: 90, limit: 20 }, never()));
  const janeHire = { first_name: 'Jane', last_name: 'Doe', full_name: 'Jane Doe', title: 'VP Sales', seniority: 'VP', department: 'Sales', linkedin_url: 'https://www.linkedin.com/in/jane-doe-acme', location: 'Austin, Texas, United States', start_date: '2026-02-13' };
  t.strictSame(r.result, { found: true, value: { domain: 'acme-robotics.test', company_name: 'Acme Robotics', hires: [janeHire], total: 1 } });
  t.strictSame(r.requests[0]!.body, { query: { bool: { must: [{ term: { job_company_website: 'acme-robotics.test' } }, { range: { job_start_date: { gte: '2025-12-15' } } }] } }, size: 20, titlecase: true });

  const year = await pdl.hires({ domain: 'acme-robotics.test', days_back: 180 * 2, limit: 20 }, never());
  t.strictSame(year, {
    found: true,
    value: {
      domain: 'acme-robotics.test',
      company_name: 'Acme Robotics',
      hires: [
        janeHire,
        { first_name: 'Sam', last_name: 'Lee', full_name: 'Sam Lee', title: 'Senior Software Engineer', seniority: 'Senior', department: 'Engineering', linkedin_url: 'https://www.linkedin.com/in/sam-lee-acme', location: 'London, England, United Kingdom', start_date: '2025-08-27' },
      ],
      total: 2,
    },
  });

  const byUrl = await seen(() => pdl.linkedin.hires({ linkedin_url: 'https://www.linkedin.com/company/globex-meta', days_back: 30, limit: 5 }, never()));
  t.strictSame(byUrl.result, {
    found: true,
    value: {
      domain: 'globex-meta.test',
      company_name: 'Globex Meta',
      hires: [{ first_name: 'Chris', last_name: 'Park', full_name: 'Chris Park', title: 'Director of Marketing', seniority: 'Director', department: 'Marketing', linkedin_url: 'https://www.linkedin.com/in/chris-park-globex', location: 'Toronto, Ontario, Canada', start_date: '2026-03-05' }],
      total: 1,
    },
  });
  t.strictSame((byUrl.requests[0]!.body as { query: { bool: { must: unknown[] } } }).query.bool.must[0], { term: { job_company_linkedin_url: 'linkedin.com/company/globex-meta' } });

  t.strictSame(await pdl.hires({ domain: 'globex-meta.test', days_back: 5, limit: 5 }, never()), { found: false, error: 'not found' }, 'none in the window: PDL answers 404');
});

// ---------------------------------------------------------------------------------------------

t.test('failures: 429 (with its hint), 5xx, 401, 402, 400, not JSON, a refused connection', async (t) => {
  const limited = await failure(pdl.company({ domain: 'ratelimited.test' }, never()));
  t.equal(limited.message, 'PDL: rate limited');
  t.equal(limited.retryable, true);
  t.equal(limited.retryAfterMs, 1000, 'Retry-After: 1');

  const boom = await failure(pdl.search({ domain: 'boom.test', title_keywords: [], seniority: [], limit: 5, offset: 0 }, never()));
  t.equal(boom.message, 'PDL: HTTP 500');
  t.equal(boom.retryable, true);

  const wrong = new PdlProvider({ apiKey: 'svc-pdl-wrong-key-55', baseUrl: standin.url });
  const refused = await failure(wrong.profile({ email: 'jane.doe@acme-robotics.test' }, never()));
  t.equal(refused.message, 'PDL: the API key was refused');
  t.equal(refused.retryable, false);

  const broke = new PdlProvider({ apiKey: PDL_OUT_OF_CREDITS_KEY, baseUrl: standin.url });
  const credits = await failure(broke.mobile({ email: 'jane.doe@acme-robotics.test' }, never()));
  t.equal(credits.message, 'PDL: out of credits');
  t.equal(credits.retryable, false);

  const bad = await failure(pdl.search({ domain: 'acme-robotics.test', title_keywords: [], seniority: [], limit: 10, offset: 10_000 }, never()));
  t.equal(bad.message, 'PDL: the request was refused (HTTP 400: from must be from 0 to 9999)');
  t.equal(bad.retryable, false);

  const garbled = await failure(pdl.profile({ email: 'someone@garbled.test' }, never()));
  t.equal(garbled.message, 'PDL: the answer is not JSON');
  t.equal(garbled.retryable, false);

  const closed = await startPdlStandin({ key: KEY });
  const gone = closed.url;
  await closed.close();
  const network = await failure(new PdlProvider({ apiKey: KEY, baseUrl: gone }).profile({ email: 'jane.doe@acme-robotics.test' }, never()));
  t.match(network.message, /^PDL: the connection failed \(/);
  t.equal(network.retryable, true);

  for (const e of [limited, boom, refused, credits, bad, garbled, network]) t.notOk(e.message.includes(KEY) || e.message.includes('svc-pdl-wrong-key-55'), `no key in "${e.message}"`);
});

t.test('a call that hangs is ended by the signal passed in', async (t) => {
  const started = Date.now();
  const err = await failure(pdl.profile({ email: 'someone@slow.test' }, AbortSignal.timeout(200)));
  t.equal(err.retryable, true);
  t.equal(err.message, 'PDL: the call was aborted before an answer');
  t.ok(Date.now() - started < 2_000, 'well before the stand-in would answer');
});

t.test('the key goes in X-Api-Key, never in a URL', async (t) => {
  t.ok(standin.requests.length > 20);
  for (const r of standin.requests) {
    t.notOk(r.url.includes(KEY), `${r.method} ${r.path}: not in the URL`);
    t.notOk('api_key' in r.query, `${r.method} ${r.path}: no api_key parameter`);
    t.notOk(JSON.stringify(r.body ?? '').includes(KEY), `${r.method} ${r.path}: not in the body`);
  }
  t.ok(
    standin.requests.every((r) => r.apiKey === KEY || r.apiKey === 'svc-pdl-wrong-key-55' || r.apiKey === PDL_OUT_OF_CREDITS_KEY),
    'every request carried a key in the header',
  );
  t.ok(standin.requests.filter((r) => r.apiKey === KEY).length > 20);
});

// ---------------------------------------------------------------------------------------------

t.test('seniority from job_title_levels (the most senior wins)', async (t) => {
  const table: Array<[unknown, string | null]> = [
    [['cxo'], 'C-Level'],
    [['owner'], 'C-Level'],
    [['partner'], 'C-Level'],
    [['vp'], 'VP'],
    [['director'], 'Director'],
    [['manager'], 'Manager'],
    [['senior'], 'Senior'],
    [['entry'], 'Individual'],
    [['training'], 'Intern'],
    [['unpaid'], 'Intern'],
    [['director', 'vp'], 'VP'],
    [['senior', 'manager'], 'Manager'],
    [[], null],
    [null, null],
    [['astronaut'], null],
  ];
  for (const [levels, want] of table) t.equal(pdlSeniority(levels), want, JSON.stringify(levels));
  t.strictSame(pdlLevelsFor('C-Level'), ['cxo', 'owner', 'partner']);
  t.strictSame(pdlLevelsFor('Intern'), ['training', 'unpaid']);
  t.strictSame(pdlLevelsFor('Individual'), ['entry']);
});

t.test('department from job_title_role and sub_role', async (t) => {
  const table: Array<[string | null, string | null, string | null]> = [
    ['sales', null, 'Sales'],
    ['sales_engineering', null, 'Sales'],
    ['partnerships', 'business_development', 'Sales'],
    ['engineering', 'software', 'Engineering'],
    ['marketing', 'brand', 'Marketing'],
    ['finance', 'accounting', 'Finance'],
    ['human_resources', 'recruiting', 'HR'],
    ['operations', 'logistics', 'Operations'],
    ['product', 'product_management', 'Product'],
    ['legal', 'compliance', 'Legal'],
    ['operations', 'executive', 'Executive'],
    [null, 'board_member', 'Executive'],
    ['research', 'data_engineering', 'Engineering'],
    ['creative', 'product_design', 'Product'],
    ['analyst', 'planning_and_analysis', 'Finance'],
    ['health', 'nursing', null],
    ['support', 'customer_support', null],
    [null, null, null],
  ];
  for (const [role, sub, want] of table) t.equal(pdlDepartment(role, sub), want, `${role}/${sub}`);
  t.strictSame(pdlRolesFor('Executive'), { roles: [], subRoles: ['executive', 'board_member'] });
  t.strictSame(pdlRolesFor('Product'), { roles: ['product'], subRoles: ['product_management', 'product_design'] });
});

t.test('employee ranges, company types, countries', async (t) => {
  const sizes: Array<[unknown, string | null]> = [
    ['1-10', '1-10'],
    ['11-50', '11-50'],
    ['51-200', '51-200'],
    ['201-500', '201-500'],
    ['501-1000', '501-1000'],
    ['1001-5000', '1001-5000'],
    ['5001-10000', '5001+'],
    ['10001+', '5001+'],
    ['lots', null],
    [null, null],
  ];
  for (const [size, want] of sizes) t.equal(pdlEmployeeRange(size), want, String(size));

  const types: Array<[unknown, string | null]> = [
    ['public', 'public'],
    ['public_subsidiary', 'public'],
    ['private', 'private'],
    ['nonprofit', 'nonprofit'],
    ['government', 'government'],
    ['educational', null],
    ['cooperative', null],
    [null, null],
  ];
  for (const [type, want] of types) t.equal(pdlCompanyType(type), want, String(type));

  const countries: Array<[unknown, string | null]> = [
    ['united states', 'US'],
    ['United Kingdom', 'GB'],
    ['canada', 'CA'],
    ['germany', 'DE'],
    ['south korea', 'KR'],
    ['czechia', 'CZ'],
    ['bosnia and herzegovina', 'BA'],
    ['hong kong', 'HK'],
    ['côte d’ivoire', 'CI'],
    ['european union', null],
    ['atlantis', null],
    ['', null],
    [null, null],
  ];
  for (const [name, want] of countries) t.equal(pdlCountryCode(name), want, String(name));
});

t.test('similarity, role phrases, the 429 hint', async (t) => {
  t.equal(similarity('Jane Doe', 'jane  doe'), 1);
  t.equal(similarity('José', 'jose'), 1);
  t.equal(similarity('Jane', 'Jane Doe'), 0.67);
  t.equal(similarity('VP of Sales', 'VP Sales'), 0.8);
  t.equal(similarity('Austin', 'Austin, Texas, United States'), 0.4);
  t.equal(similarity('Acme', 'Globex'), 0);
  t.equal(similarity(undefined, 'x'), 0);
  t.strictSame(rolePhrases('CFO'), ['cfo', 'chief financial officer']);
  t.strictSame(rolePhrases('Chief Executive Officer'), ['chief executive officer', 'ceo']);
  t.strictSame(rolePhrases('Head of Growth'), ['head of growth']);
  t.equal(retryAfterMs({ 'retry-after': '2' }, NOW), 2000);
  t.equal(retryAfterMs({ 'retry-after': new Date(NOW.getTime() + 5000).toUTCString() }, NOW), 5000);
  t.equal(retryAfterMs({ 'x-ratelimit-reset': String(NOW.getTime() / 1000 + 30) }, NOW), 30_000);
  t.equal(retryAfterMs({ 'x-ratelimit-reset': new Date(NOW.getTime() + 7000).toISOString() }, NOW), 7000);
  t.equal(retryAfterMs({}, NOW), undefined);
});

t.test("a company's social links in the home page's canonical form; product names as the native rules write them", async (t) => {
  const c = pdlCompany({ name: 'acme', twitter_url: 'x.com/AcmeRobotics', facebook_url: 'https://m.facebook.com/AcmeRobotics/', technologies_used: [{ name: 'hubspot' }, { name: 'google workspace' }, { name: 'some rare tool' }, { name: 'HubSpot' }] }, null);
  t.strictSame([c.twitter_url, c.facebook_url], ['https://twitter.com/acmerobotics', 'https://www.facebook.com/acmerobotics']);
  t.strictSame(c.technologies, ['HubSpot', 'Google Workspace', 'some rare tool'], 'known names canonical, once each; an unknown one as given');
  const odd = pdlCompany({ name: 'acme', twitter_url: 'twitter.com/intent/tweet', facebook_url: 'not a url at all' }, null);
  t.strictSame([odd.twitter_url, odd.facebook_url], [null, null], 'what is not a profile is no link');
});
