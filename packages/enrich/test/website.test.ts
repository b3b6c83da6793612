// A home page's signals with exact answers: schema.org Organization JSON-LD (every field, @graph,
// root arrays, array and prefixed @type, nested publishers, malformed and oversized blocks,
// comment and CDATA wrappers), employee counts and ranges, founding years, countries by code and
// by name, the organisation type; OpenGraph and meta tags; the title and its cleaning; the
// website's origin; social profiles (share and intent links ignored, sameAs first, then
// twitter:site, then the most frequent link); the telephone; and hostile pages (5 MB of garbage,
// 10,000 nested <div>s, 100,000 nested JSON arrays, odd markup, random fragments), which must
// give the same answers without throwing. Every company is made up, on .test and example domains.

import t from 'tap';
import { seededRandom } from '../../../test/helpers/random.ts';
import { parseHomePage, type WebsiteSignals } from '../src/company/website.ts';

const PAGE = 'https://acme.test/';
const ld = (value: unknown): string => `<script type="application/ld+json">${JSON.stringify(value)}</script>`;
const page = (head: string, body = ''): string => `<!doctype html><html><head>${head}</head><body>${body}</body></html>`;
/** The signals of a page whose only content is one Organization with these fields. */
const org = (fields: Record<string, unknown>, type: unknown = 'Organization'): WebsiteSignals =>
  parseHomePage(page(ld({ '@context': 'https://schema.org', '@type': type, name: 'Acme Robotics', ...fields })), PAGE);
/** What a page with no usable signal gives: the origin of the page's URL and nothing else. */
const NOTHING: WebsiteSignals = { website: 'https://acme.test', same_as: [], evidence: [] };

t.test('a JSON-LD Organization with every field', async (t) => {
  const html = page(
    `<meta charset="utf-8">
    <title>Acme Robotics | Industrial robots for small factories</title>
    <meta name="description" content="Robots for small factories.">
    <meta property="og:site_name" content="Acme">
    <meta property="og:title" content="Acme Robotics: robots for small factories">
    <link rel="canonical" href="https://acme.test/en/">
    ${ld({
      '@context': 'https://schema.org',
      '@type': 'Corporation',
      name: 'Acme Robotics',
      legalName: 'Acme Robotics Ltd',
      description: 'Acme Robotics builds   industrial robots\nfor small factories.',
      url: 'https://www.acme.test/',
      foundingDate: '1999-04-01',
      numberOfEmployees: { '@type': 'QuantitativeValue', value: 120 },
      address: {
        '@type': 'PostalAddress',
        streetAddress: '1 Example Street',
        addressLocality: 'Leeds',
        addressRegion: 'West Yorkshire',
        postalCode: 'LS1 1AA',
        addressCountry: 'GB',
      },
      telephone: '+44 113 496 0000',
      sameAs: ['https://www.linkedin.com/company/acme-robotics/', 'https://twitter.com/AcmeRobotics', 'https://www.facebook.com/AcmeRobotics', 'https://github.com/acme-robotics'],
      logo: { '@type': 'ImageObject', url: '/img/logo.png' },
    })}`,
    // Links elsewhere on the page, some more frequent, lose to sameAs.
    `<a href="https://twitter.com/examplemedia">a</a><a href="https://twitter.com/examplemedia">b</a>
     <a href="https://www.linkedin.com/company/example-partner">partner</a>
     <a href="tel:+441134960999">call</a>`,
  );
  t.strictSame(parseHomePage(html, 'https://acme.test/en/index.html'), {
    name: 'Acme Robotics',
    legal_name: 'Acme Robotics Ltd',
    display_name: 'Acme',
    description: 'Acme Robotics builds industrial robots for small factories.',
    website: 'https://www.acme.test',
    founded_year: 1999,
    employee_count: 120,
    employee_range: '51-200',
    location: { city: 'Leeds', region: 'West Yorkshire', country: 'United Kingdom', country_code: 'GB' },
    phone_raw: '+44 113 496 0000',
    linkedin_url: 'https://www.linkedin.com/company/acme-robotics',
    twitter_url: 'https://twitter.com/acmerobotics',
    facebook_url: 'https://www.facebook.com/acmerobotics',
    logo: 'https://acme.test/img/logo.png',
    same_as: ['https://www.linkedin.com/company/acme-robotics/', 'https://twitter.com/AcmeRobotics', 'https://www.facebook.com/AcmeRobotics', 'https://github.com/acme-robotics'],
    evidence: ['jsonld', 'opengraph', 'meta', 'title', 'links'],
  });
});

t.test('@graph with a WebSite and an Organization (the WebSite does not name the company)', async (t) => {
  const html = page(
    ld({
      '@context': 'https://schema.org',
      '@graph': [
        { '@type': 'WebSite', '@id': 'https://acme.test/#website', url: 'https://acme.test/', name: 'Acme Site', publisher: { '@id': 'https://acme.test/#organization' } },
        {
          '@type': 'Organization',
          '@id': 'https://acme.test/#organization',
          name: 'Acme Robotics',
          url: 'https://acme.test/',
          logo: { '@type': 'ImageObject', contentUrl: 'https://cdn.acme.test/logo.svg' },
          sameAs: 'https://x.com/AcmeRobotics',
        },
      ],
    }),
  );
  t.strictSame(parseHomePage(html, PAGE), {
    name: 'Acme Robotics',
    display_name: 'Acme Robotics',
    website: 'https://acme.test',
    twitter_url: 'https://twitter.com/acmerobotics',
    logo: 'https://cdn.acme.test/logo.svg',
    same_as: ['https://x.com/AcmeRobotics'],
    evidence: ['jsonld'],
  });
});

t.test('@type as an array, prefixed or as a full IRI', async (t) => {
  t.strictSame(org({}, ['Organization', 'NGO']), { name: 'Acme Robotics', display_name: 'Acme Robotics', company_type: 'nonprofit', website: 'https://acme.test', same_as: [], evidence: ['jsonld'] });
  t.strictSame(org({}, ['LocalBusiness', 'Store']), { name: 'Acme Robotics', display_name: 'Acme Robotics', website: 'https://acme.test', same_as: [], evidence: ['jsonld'] });
  t.strictSame(org({}, 'http://schema.org/GovernmentOrganization'), { name: 'Acme Robotics', display_name: 'Acme Robotics', company_type: 'government', website: 'https://acme.test', same_as: [], evidence: ['jsonld'] });
  t.strictSame(org({}, 'schema:OnlineBusiness'), { name: 'Acme Robotics', display_name: 'Acme Robotics', website: 'https://acme.test', same_as: [], evidence: ['jsonld'] });
  // Not an organisation: a Person, a WebSite, a Brand, no @type at all.
  for (const type of ['Person', 'WebSite', 'Brand', null, 42, ['Thing']]) t.strictSame(org({}, type), NOTHING, String(type));
});

t.test('a root array and a nested publisher; a top-level Organization wins over a nested one', async (t) => {
  const rootArray = page(ld([{ '@type': 'WebSite', name: 'Acme Site' }, { '@type': ['Organization', 'OnlineBusiness'], name: 'Acme Robotics' }]));
  t.equal(parseHomePage(rootArray, PAGE).name, 'Acme Robotics');
  const nestedOnly = page(ld({ '@type': 'WebSite', name: 'Acme Site', publisher: { '@type': 'Organization', name: 'Acme Robotics', url: 'https://acme.test/' } }));
  t.equal(parseHomePage(nestedOnly, PAGE).name, 'Acme Robotics');
  const both = page(
    ld({ '@type': 'Article', headline: 'Robots', publisher: { '@type': 'NewsMediaOrganization', name: 'Example Media', url: 'https://media.example.com/' } }) +
      ld({ '@type': 'Organization', name: 'Acme Robotics' }),
  );
  t.equal(parseHomePage(both, PAGE).name, 'Acme Robotics');
  // Even when the nested one comes first (an @graph's members are reached after another block's children).
  const nestedFirst = page(
    ld({ '@type': 'WebPage', publisher: { '@type': 'Organization', name: 'Example Media' } }) + ld({ '@context': 'https://schema.org', '@graph': [{ '@type': 'Organization', name: 'Acme Robotics' }] }),
  );
  t.equal(parseHomePage(nestedFirst, PAGE).name, 'Acme Robotics');
  // Two top-level Organizations: the one on the page's own host.
  const two = page(ld([{ '@type': 'Organization', name: 'Example Partner', url: 'https://partner.example.com/' }, { '@type': 'Organization', name: 'Acme Robotics', url: 'https://www.acme.test/' }]));
  t.equal(parseHomePage(two, PAGE).name, 'Acme Robotics');
});

t.test('a malformed block next to a valid one; oversized blocks; wrappers; type spellings', async (t) => {
  const malformed = page(`<script type="application/ld+json">{"@type": "Organization", "name": "Broken",}</script>` + ld({ '@type': 'Organization', name: 'Acme Robotics' }));
  t.strictSame(parseHomePage(malformed, PAGE), { name: 'Acme Robotics', display_name: 'Acme Robotics', website: 'https://acme.test', same_as: [], evidence: ['jsonld'] });

  const tooBig = ld({ '@type': 'Organization', name: 'Too Big', padding: 'x'.repeat(256 * 1024) });
  t.equal(parseHomePage(page(tooBig + ld({ '@type': 'Organization', name: 'Acme Robotics' })), PAGE).name, 'Acme Robotics');
  // Under 256 Ki characters but over 256 KiB in UTF-8.
  const tooManyBytes = ld({ '@type': 'Organization', name: 'Too Big', padding: '€'.repeat(100_000) });
  t.equal(parseHomePage(page(tooManyBytes), PAGE).name, undefined);
  const justFits = ld({ '@type': 'Organization', name: 'Acme Robotics', padding: 'x'.repeat(256 * 1024 - 80) });
  t.equal(parseHomePage(page(justFits), PAGE).name, 'Acme Robotics');

  const cdata = `<script type="application/ld+json">//<![CDATA[\n{"@type":"Organization","name":"Acme Robotics"}\n//]]></script>`;
  t.equal(parseHomePage(page(cdata), PAGE).name, 'Acme Robotics');
  const comment = `<script type="application/ld+json"><!-- {"@type":"Organization","name":"Acme Robotics"} --></script>`;
  t.equal(parseHomePage(page(comment), PAGE).name, 'Acme Robotics');
  const oddType = `<SCRIPT TYPE=" Application/LD+JSON; charset=utf-8 ">{"@type":"Organization","name":"Acme Robotics"}</SCRIPT>`;
  t.equal(parseHomePage(page(oddType), PAGE).name, 'Acme Robotics');
  const otherType = `<script type="application/json">{"@type":"Organization","name":"Acme Robotics"}</script><script>{"@type":"Organization","name":"Acme Robotics"}</script>`;
  t.strictSame(parseHomePage(page(otherType), PAGE), NOTHING);
  for (const bad of ['', '   ', 'null', '42', '"Organization"', '[]', '{', '{"@graph": 7}', '[[[[', '{"@type": null}']) {
    t.strictSame(parseHomePage(page(`<script type="application/ld+json">${bad}</script>`), PAGE), NOTHING, bad);
  }
});

t.test('numberOfEmployees: counts and the seven buckets', async (t) => {
  const cases: Array<[unknown, Pick<WebsiteSignals, 'employee_count' | 'employee_range'>]> = [
    [1, { employee_count: 1, employee_range: '1-10' }],
    [10, { employee_count: 10, employee_range: '1-10' }],
    [11, { employee_count: 11, employee_range: '11-50' }],
    [50, { employee_count: 50, employee_range: '11-50' }],
    [51, { employee_count: 51, employee_range: '51-200' }],
    [200, { employee_count: 200, employee_range: '51-200' }],
    [201, { employee_count: 201, employee_range: '201-500' }],
    [500, { employee_count: 500, employee_range: '201-500' }],
    [501, { employee_count: 501, employee_range: '501-1000' }],
    [1000, { employee_count: 1000, employee_range: '501-1000' }],
    [1001, { employee_count: 1001, employee_range: '1001-5000' }],
    [5000, { employee_count: 5000, employee_range: '1001-5000' }],
    [5001, { employee_count: 5001, employee_range: '5001+' }],
    ['1,200', { employee_count: 1200, employee_range: '1001-5000' }],
    ['  42 ', { employee_count: 42, employee_range: '11-50' }],
    ['51-200', { employee_range: '51-200' }],
    ['11 to 50', { employee_range: '11-50' }],
    ['5001+', { employee_range: '5001+' }],
    ['10,001+', { employee_range: '5001+' }],
    ['1001+', {}],
    ['10-50', {}],
    [{ '@type': 'QuantitativeValue', value: 250 }, { employee_count: 250, employee_range: '201-500' }],
    [{ '@type': 'QuantitativeValue', value: '250' }, { employee_count: 250, employee_range: '201-500' }],
    [{ '@type': 'QuantitativeValue', minValue: 11, maxValue: 50 }, { employee_range: '11-50' }],
    [{ '@type': 'QuantitativeValue', minValue: '201', maxValue: '500' }, { employee_range: '201-500' }],
    [{ '@type': 'QuantitativeValue', minValue: 100, maxValue: 100 }, { employee_count: 100, employee_range: '51-200' }],
    [{ '@type': 'QuantitativeValue', minValue: 10, maxValue: 50 }, {}],
    [{ '@type': 'QuantitativeValue', minValue: 200, maxValue: 51 }, {}],
    [{ '@type': 'QuantitativeValue', minValue: 6000 }, { employee_range: '5001+' }],
    [{ '@type': 'QuantitativeValue', minValue: 1001 }, {}],
    [{ '@type': 'QuantitativeValue', maxValue: 50 }, {}],
    [[{ '@type': 'QuantitativeValue', value: 30 }], { employee_count: 30, employee_range: '11-50' }],
    [0, {}],
    [-5, {}],
    [12.5, {}],
    ['about 50', {}],
    ['lots', {}],
    [null, {}],
    [true, {}],
    [20_000_000, {}],
  ];
  for (const [value, expected] of cases) {
    const s = org({ numberOfEmployees: value });
    t.strictSame({ employee_count: s.employee_count, employee_range: s.employee_range }, { employee_count: undefined, employee_range: undefined, ...expected }, JSON.stringify(value));
  }
});

t.test('foundingDate: a year from 1600 to this year', async (t) => {
  const thisYear = new Date().getUTCFullYear();
  const cases: Array<[unknown, number | undefined]> = [
    ['1999', 1999],
    ['1999-04', 1999],
    ['1999-04-01', 1999],
    ['1999-04-01T09:00:00Z', 1999],
    [2004, 2004],
    [{ '@value': '1872-01-01', '@type': 'Date' }, 1872],
    ['1600', 1600],
    [String(thisYear), thisYear],
    ['1599', undefined],
    [String(thisYear + 1), undefined],
    ['2999-01-01', undefined],
    ['April 1999', undefined],
    ['19990401', undefined],
    ['99', undefined],
    ['', undefined],
    [1999.5, undefined],
  ];
  for (const [value, year] of cases) t.equal(org({ foundingDate: value }).founded_year, year, JSON.stringify(value));
});

t.test('addresses: city, region, country by code or by name', async (t) => {
  const at = (address: unknown): WebsiteSignals['location'] => org({ address }).location;
  t.strictSame(at({ '@type': 'PostalAddress', addressLocality: 'Leeds', addressRegion: 'West Yorkshire', addressCountry: 'GB' }), { city: 'Leeds', region: 'West Yorkshire', country: 'United Kingdom', country_code: 'GB' });
  const countries: Array<[unknown, { country?: string; country_code?: string } | undefined]> = [
    ['GB', { country: 'United Kingdom', country_code: 'GB' }],
    ['uk', { country: 'United Kingdom', country_code: 'GB' }],
    ['de', { country: 'Germany', country_code: 'DE' }],
    ['United Kingdom', { country: 'United Kingdom', country_code: 'GB' }],
    ['UNITED STATES', { country: 'UNITED STATES', country_code: 'US' }],
    ['The Netherlands', { country: 'The Netherlands', country_code: 'NL' }],
    ['Deutschland', { country: 'Deutschland', country_code: 'DE' }],
    ['España', { country: 'España', country_code: 'ES' }],
    ["Cote d'Ivoire", { country: "Cote d'Ivoire", country_code: 'CI' }],
    ['Saint Lucia', { country: 'Saint Lucia', country_code: 'LC' }],
    ['Antigua and Barbuda', { country: 'Antigua and Barbuda', country_code: 'AG' }],
    [{ '@type': 'Country', name: 'Germany' }, { country: 'Germany', country_code: 'DE' }],
    [{ '@type': 'Country', name: 'FR' }, { country: 'France', country_code: 'FR' }],
    [['CA'], { country: 'Canada', country_code: 'CA' }],
    // Names and codes the runtime does not map, and codes that are not countries.
    ['USA', { country: 'USA', country_code: 'US' }], // the German short name
    ['Atlantis', { country: 'Atlantis' }],
    ['EU', { country: 'EU' }],
    ['UN', { country: 'UN' }],
    ['ZZ', { country: 'ZZ' }],
    ['XK', { country: 'XK' }],
    ['NY', { country: 'NY' }],
    ['', undefined],
    [42, { country: '42' }],
  ];
  for (const [addressCountry, expected] of countries) t.strictSame(at({ '@type': 'PostalAddress', addressCountry }), expected, JSON.stringify(addressCountry));
  // A Place's address, an address given as the location, the first of several; free text is not read.
  t.strictSame(org({ location: { '@type': 'Place', name: 'HQ', address: { '@type': 'PostalAddress', addressLocality: 'Leeds' } } }).location, { city: 'Leeds' });
  t.strictSame(org({ location: { '@type': 'PostalAddress', addressRegion: 'Ontario', addressCountry: 'CA' } }).location, { region: 'Ontario', country: 'Canada', country_code: 'CA' });
  t.strictSame(at([{ addressLocality: 'Lyon', addressCountry: 'FR' }, { addressLocality: 'Leeds' }]), { city: 'Lyon', country: 'France', country_code: 'FR' });
  t.equal(at('1 Example Street, Leeds'), undefined);
});

t.test('the organisation type: government and nonprofit only, never private or public', async (t) => {
  t.equal(org({}, 'GovernmentOrganization').company_type, 'government');
  t.equal(org({}, 'NGO').company_type, 'nonprofit');
  t.equal(org({ nonprofitStatus: 'Nonprofit501c3' }).company_type, 'nonprofit');
  t.equal(org({ nonprofitStatus: { '@id': 'https://schema.org/Nonprofit501c3' } }).company_type, 'nonprofit');
  t.equal(org({ nonprofitStatus: '' }).company_type, undefined);
  t.equal(org({ nonprofitStatus: {} }).company_type, undefined);
  t.equal(org({}, 'Corporation').company_type, undefined);
  t.equal(org({}, 'EducationalOrganization').company_type, undefined);
  t.equal(org({ tickerSymbol: 'EXMPL' }, 'Corporation').company_type, undefined);
});

t.test('text fields: @value, arrays, whitespace, control characters, absurd lengths', async (t) => {
  t.equal(org({ name: { '@value': 'Acme Robotics', '@language': 'en' } }).name, 'Acme Robotics');
  t.equal(org({ name: ['Acme Robotics', 'Acme'] }).name, 'Acme Robotics');
  t.equal(org({ name: ' Acme\u0000\n  Robotics\t' }).name, 'Acme Robotics');
  t.equal(org({ name: 'x'.repeat(257) }).name, undefined);
  t.equal(org({ legalName: 'A'.repeat(256) }).legal_name, 'A'.repeat(256));
  t.equal(org({ description: 'd'.repeat(4097) }).description, undefined);
  t.equal(org({ telephone: ['+44 113 496 0000', '+44 113 496 0001'] }).phone_raw, '+44 113 496 0000');
  t.equal(org({ logo: 'javascript:alert(1)' }).logo, undefined);
  t.equal(org({ logo: 'data:image/png;base64,AAAA' }).logo, undefined);
  t.equal(org({ logo: ['https://acme.test/a.png', 'https://acme.test/b.png'] }).logo, 'https://acme.test/a.png');
  t.strictSame(org({ sameAs: ['https://github.com/acme-robotics', 'javascript:alert(1)', 42, 'https://github.com/acme-robotics', '/about', ' https://example.com/acme '] }).same_as, ['https://github.com/acme-robotics', 'https://example.com/acme']);
});

t.test('only OpenGraph and meta tags', async (t) => {
  const html = page(`
    <meta property="og:site_name" content="Acme Robotics">
    <meta property="og:title" content="Robots for small factories">
    <meta property="og:description" content="We build robots.">
    <meta property="og:url" content="https://www.acme.test/en/">
    <meta name="description" content="Robots, built in Leeds.">
    <meta name="twitter:site" content="@AcmeRobotics">`);
  t.strictSame(parseHomePage(html, PAGE), {
    name: 'Acme Robotics',
    display_name: 'Acme Robotics',
    description: 'We build robots.',
    website: 'https://www.acme.test',
    twitter_url: 'https://twitter.com/acmerobotics',
    same_as: [],
    evidence: ['opengraph', 'meta'],
  });
  // The meta description alone, and twitter:site as a URL.
  t.strictSame(parseHomePage(page(`<meta name="description" content="Robots, built in Leeds."><meta name="twitter:site" content="https://x.com/AcmeRobotics">`), PAGE), {
    description: 'Robots, built in Leeds.',
    website: 'https://acme.test',
    twitter_url: 'https://twitter.com/acmerobotics',
    same_as: [],
    evidence: ['meta'],
  });
  // og:title stands in for a missing <title>.
  t.strictSame(parseHomePage(page(`<meta property="og:title" content="Acme Robotics | Home">`), PAGE), { name: 'Acme Robotics', display_name: 'Acme Robotics', website: 'https://acme.test', same_as: [], evidence: ['opengraph'] });
  // Empty contents and unknown names count for nothing.
  t.strictSame(parseHomePage(page(`<meta property="og:site_name" content="  "><meta name="keywords" content="robots"><meta name="twitter:site" content="@intent">`), PAGE), NOTHING);
});

t.test('only a title, and how titles are cleaned', async (t) => {
  t.strictSame(parseHomePage(page('<title>Welcome to Acme Robotics – Home</title>'), PAGE), {
    name: 'Acme Robotics',
    display_name: 'Acme Robotics',
    website: 'https://acme.test',
    same_as: [],
    evidence: ['title'],
  });
  const titles: Array<[string, string | undefined]> = [
    ['Home | Acme Robotics', 'Acme Robotics'],
    ['Acme Robotics - Industrial robots for small factories', 'Acme Robotics'],
    ['Industrial robots for small factories — Acme Robotics', 'Acme Robotics'],
    ['Acme Robotics :: Homepage', 'Acme Robotics'],
    ['Acme Robotics · Startseite', 'Acme Robotics'],
    ['Acme-Zenith Tools', 'Acme-Zenith Tools'],
    ['  Acme\n   Robotics  ', 'Acme Robotics'],
    ['Acme &amp; Sons | Home', 'Acme & Sons'],
    ['Home', undefined],
    ['Welcome', undefined],
    ['Home | Welcome', undefined],
    ['| - |', undefined],
    ['', undefined],
  ];
  for (const [title, name] of titles) t.equal(parseHomePage(page(`<title>${title}</title>`), PAGE).name, name, title);
  // A title that says nothing is no evidence.
  t.strictSame(parseHomePage(page('<title>Home</title>'), PAGE), NOTHING);
  // A title over 64 Ki characters is not read, whatever it holds.
  t.equal(parseHomePage(page(`<title>${' '.repeat(64 * 1024)}Acme Robotics</title>`), PAGE).name, undefined);
  t.equal(parseHomePage(page(`<title>${' '.repeat(64 * 1024 - 20)}Acme Robotics</title>`), PAGE).name, 'Acme Robotics');
  // Only the first <title>, never an SVG's.
  t.equal(parseHomePage(page('<title>Acme Robotics</title><title>Other</title>'), PAGE).name, 'Acme Robotics');
  t.equal(parseHomePage(`<body><svg><title>Logo</title></svg><title>Acme Robotics</title></body>`, PAGE).name, 'Acme Robotics');
});

t.test('name, display name, description and website: which source wins', async (t) => {
  const tags =
    `<title>Acme Title | Home</title><meta property="og:site_name" content="Acme OG"><meta property="og:description" content="og"><meta name="description" content="meta">` +
    `<meta property="og:url" content="https://og.acme.test/x"><link rel="canonical" href="https://canonical.acme.test/y">`;
  const jsonLd = ld({ '@type': 'Organization', name: 'Acme JSON-LD', description: 'jsonld', url: 'https://jsonld.acme.test/z' });
  const s = parseHomePage(page(tags + jsonLd), PAGE);
  t.strictSame([s.name, s.display_name, s.description, s.website], ['Acme JSON-LD', 'Acme OG', 'jsonld', 'https://jsonld.acme.test']);
  const noJsonLd = parseHomePage(page(tags), PAGE);
  t.strictSame([noJsonLd.name, noJsonLd.display_name, noJsonLd.description, noJsonLd.website], ['Acme OG', 'Acme OG', 'og', 'https://canonical.acme.test']);
  const onlyTitle = parseHomePage(page('<title>Acme Title | Home</title><meta name="description" content="meta">'), PAGE);
  t.strictSame([onlyTitle.name, onlyTitle.display_name, onlyTitle.description, onlyTitle.website], ['Acme Title', 'Acme Title', 'meta', 'https://acme.test']);
  const websites: Array<[string, string, string | undefined]> = [
    ['<link rel="canonical" href="/en/">', 'https://www.acme.test/fr/', 'https://www.acme.test'],
    ['<link rel="Alternate  CANONICAL" href="https://acme.test:8443/">', PAGE, 'https://acme.test:8443'],
    ['<meta property="og:url" content="http://acme.test/">', PAGE, 'http://acme.test'],
    ['<link rel="canonical" href="javascript:alert(1)">', 'https://acme.test/deep/page', 'https://acme.test'],
    ['', 'https://user:secret@acme.test:443/path?q=1', 'https://acme.test'],
    ['', 'not a url', undefined],
    ['', 'ftp://acme.test/', undefined],
    ['<link rel="canonical" href="https://acme.test/">', 'not a url', 'https://acme.test'],
  ];
  for (const [head, url, website] of websites) t.equal(parseHomePage(page(head), url).website, website, `${head} at ${url}`);
});

t.test('social links: share, intent and people links are ignored', async (t) => {
  const shares = `
    <a href="https://twitter.com/intent/tweet?url=https://acme.test">Tweet</a>
    <a href="https://twitter.com/share?url=https://acme.test">Share</a>
    <a href="https://x.com/home">Home</a>
    <a href="https://twitter.com/hashtag/robots">#robots</a>
    <a href="https://twitter.com/search?q=acme">Search</a>
    <a href="https://twitter.com/i/lists/1">List</a>
    <a href="https://www.facebook.com/sharer/sharer.php?u=https://acme.test">Share</a>
    <a href="https://www.facebook.com/share.php?u=https://acme.test">Share</a>
    <a href="https://www.facebook.com/dialog/share?app_id=1">Share</a>
    <a href="https://www.facebook.com/plugins/page.php?href=https://acme.test">Plugin</a>
    <a href="https://www.facebook.com/tr?id=1&amp;ev=PageView">Pixel</a>
    <a href="https://www.linkedin.com/shareArticle?mini=true&amp;url=https://acme.test">Share</a>
    <a href="https://www.linkedin.com/sharing/share-offsite/?url=https://acme.test">Share</a>
    <a href="https://www.linkedin.com/in/jane-example/">Jane</a>
    <a href="https://www.linkedin.com/school/example-university/">School</a>
    <a href="https://twitter.com.evil.test/acme">Fake</a>
    <a href="javascript:window.open('https://twitter.com/acme')">JS</a>`;
  const profiles = `
    <a href="https://x.com/AcmeRobotics">X</a>
    <a href="https://www.facebook.com/AcmeRobotics/">Facebook</a>
    <a href="https://uk.linkedin.com/company/acme-robotics/about/">LinkedIn</a>`;
  t.strictSame(parseHomePage(page('', shares + profiles), PAGE), {
    website: 'https://acme.test',
    linkedin_url: 'https://www.linkedin.com/company/acme-robotics',
    twitter_url: 'https://twitter.com/acmerobotics',
    facebook_url: 'https://www.facebook.com/acmerobotics',
    same_as: [],
    evidence: ['links'],
  });
  t.strictSame(parseHomePage(page('', shares), PAGE), NOTHING);
});

t.test('social links: profile forms', async (t) => {
  const one = (href: string): WebsiteSignals => parseHomePage(page('', `<a href="${href}">x</a>`), 'https://acme.test/en/');
  t.equal(one('https://mobile.twitter.com/AcmeRobotics/status/1234567890').twitter_url, 'https://twitter.com/acmerobotics');
  t.equal(one('https://twitter.com/@AcmeRobotics').twitter_url, 'https://twitter.com/acmerobotics');
  t.equal(one('https://twitter.com/this_handle_is_too_long').twitter_url, undefined);
  t.equal(one('https://twitter.com/').twitter_url, undefined);
  t.equal(one('https://m.facebook.com/pg/AcmeRobotics/about/').facebook_url, 'https://www.facebook.com/acmerobotics');
  t.equal(one('https://www.facebook.com/profile.php?id=100000000000001').facebook_url, 'https://www.facebook.com/profile.php?id=100000000000001');
  t.equal(one('https://www.facebook.com/profile.php').facebook_url, undefined);
  t.equal(one('https://www.facebook.com/groups/acme-users/').facebook_url, undefined);
  t.equal(one('https://fb.com/acme.robotics').facebook_url, 'https://www.facebook.com/acme.robotics');
  t.equal(one('//www.facebook.com/AcmeRobotics').facebook_url, 'https://www.facebook.com/acmerobotics');
  t.equal(one('https://www.linkedin.com/company/acme%2Drobotics?trk=footer').linkedin_url, 'https://www.linkedin.com/company/acme-robotics');
  t.equal(one('https://www.linkedin.com/company/').linkedin_url, undefined);
  t.equal(one('/company/acme-robotics').linkedin_url, undefined);
});

t.test('social links: sameAs first, then twitter:site, then the most frequent link', async (t) => {
  const links = (...handles: string[]): string => handles.map((h) => `<a href="https://twitter.com/${h}">x</a>`).join('');
  const frequent = links('examplemedia', 'acmerobotics', 'acmerobotics', 'acmerobotics');
  t.equal(parseHomePage(page('', frequent), PAGE).twitter_url, 'https://twitter.com/acmerobotics');
  t.equal(parseHomePage(page('', links('acmerobotics', 'examplemedia')), PAGE).twitter_url, 'https://twitter.com/acmerobotics', 'the first of equals');
  t.equal(parseHomePage(page('<meta name="twitter:site" content="@AcmeHQ">', frequent), PAGE).twitter_url, 'https://twitter.com/acmehq');
  const withSameAs = page('<meta name="twitter:site" content="@AcmeHQ">' + ld({ '@type': 'Organization', name: 'Acme Robotics', sameAs: ['https://github.com/acme', 'https://x.com/AcmeOfficial'] }), frequent);
  t.equal(parseHomePage(withSameAs, PAGE).twitter_url, 'https://twitter.com/acmeofficial');
  // sameAs without a profile of that network leaves the choice to the links.
  const otherNetworks = page(ld({ '@type': 'Organization', name: 'Acme Robotics', sameAs: ['https://www.facebook.com/AcmeRobotics'] }), frequent);
  const s = parseHomePage(otherNetworks, PAGE);
  t.strictSame([s.twitter_url, s.facebook_url], ['https://twitter.com/acmerobotics', 'https://www.facebook.com/acmerobotics']);
});

t.test('the telephone: JSON-LD first, else the first tel: link', async (t) => {
  const tel = '<a href="tel:+44%20113%20496%200000">Call</a><a href="tel:+441134960999">Other</a>';
  t.equal(parseHomePage(page('', tel), PAGE).phone_raw, '+44 113 496 0000');
  t.equal(parseHomePage(page(ld({ '@type': 'Organization', name: 'Acme', telephone: '0113 496 0123' }), tel), PAGE).phone_raw, '0113 496 0123');
  t.equal(parseHomePage(page('', '<a href="TEL:">none</a><a href="tel:%ZZ12">raw</a>'), PAGE).phone_raw, '%ZZ12');
  t.strictSame(parseHomePage(page('', '<a href="tel:call-us">words</a><a href=" tel: ">empty</a>'), PAGE), NOTHING);
  t.strictSame(parseHomePage(page('', tel), PAGE).evidence, ['links']);
});

t.test('odd markup: no <head>, attribute case and spacing, entities, relative URLs, <base>', async (t) => {
  const html = `<META  PROPERTY = " OG:Site_Name "  CONTENT='Acme &amp; Sons &#8211; Robots'>
    <p>Text <title>Acme &amp; Sons</title>
    <link REL=" Canonical " HREF=" /en/ ">
    <a HREF="HTTPS://TWITTER.COM/AcmeSons">x</a>
    <a href="   https://www.facebook.com/acmesons  ">f</a>
    <a href="https://www.linkedin.com/company/acme-sons" href="https://www.linkedin.com/company/other">li</a>
    <textarea><a href="https://twitter.com/not-a-link"></textarea>
    <!-- <a href="https://twitter.com/commented"> -->
    <script>document.write('<a href="https://twitter.com/inscript">')</script>`;
  t.strictSame(parseHomePage(html, 'https://www.acme.test/index.html'), {
    name: 'Acme & Sons – Robots',
    display_name: 'Acme & Sons – Robots',
    website: 'https://www.acme.test',
    linkedin_url: 'https://www.linkedin.com/company/acme-sons',
    twitter_url: 'https://twitter.com/acmesons',
    facebook_url: 'https://www.facebook.com/acmesons',
    same_as: [],
    evidence: ['opengraph', 'title', 'links'],
  });
  const based = `<base href="https://cdn.acme.test/assets/">` + ld({ '@type': 'Organization', name: 'Acme', logo: 'img/logo.png' });
  t.equal(parseHomePage(page(based), PAGE).logo, 'https://cdn.acme.test/assets/img/logo.png');
  t.equal(parseHomePage(page(ld({ '@type': 'Organization', name: 'Acme', logo: 'img/logo.png' })), 'https://acme.test/en/index.html').logo, 'https://acme.test/en/img/logo.png');
});

t.test('at most 5,000 <a> elements are read', async (t) => {
  const filler = (n: number): string => '<a href="/page">x</a>'.repeat(n);
  t.equal(parseHomePage(page('', filler(4999) + '<a href="https://twitter.com/acmerobotics">x</a>'), PAGE).twitter_url, 'https://twitter.com/acmerobotics');
  t.equal(parseHomePage(page('', filler(5000) + '<a href="https://twitter.com/acmerobotics">x</a>'), PAGE).twitter_url, undefined);
  // <a> without href count too; meta and JSON-LD after them are still read.
  t.equal(parseHomePage(page('', '<a>x</a>'.repeat(5000) + '<a href="https://twitter.com/acmerobotics">x</a><meta property="og:site_name" content="Acme">'), PAGE).name, 'Acme');
});

t.test('5 MB of garbage', async (t) => {
  const next = seededRandom(7);
  const alphabet = '<>/="\'&;#!?-[]{}() \n\tabcdefgijkloquwyzABXYZ0123456789';
  let garbage = '';
  while (garbage.length < 5_000_000) garbage += alphabet[Math.floor(next() * alphabet.length)];
  // (The alphabet cannot spell href, title, meta, script or tel, so nothing is found.)
  t.strictSame(parseHomePage(garbage, PAGE), NOTHING);
  let units = '';
  while (units.length < 1_000_000) units += String.fromCharCode(Math.floor(next() * 0x10000));
  t.strictSame(parseHomePage(units, PAGE), NOTHING);
  t.strictSame(parseHomePage('\u0000'.repeat(100_000), PAGE), NOTHING);
});

t.test('10,000 nested <div>s and 100,000 nested JSON arrays', async (t) => {
  const deep = '<div>'.repeat(10_000) + '<title>Acme Robotics</title><a href="https://x.com/AcmeRobotics">x</a>' + '</div>'.repeat(10_000);
  t.strictSame(parseHomePage(deep, PAGE), {
    name: 'Acme Robotics',
    display_name: 'Acme Robotics',
    website: 'https://acme.test',
    twitter_url: 'https://twitter.com/acmerobotics',
    same_as: [],
    evidence: ['title', 'links'],
  });
  t.strictSame(parseHomePage('<ul><li>'.repeat(10_000) + '</li>'.repeat(50_000), PAGE), NOTHING);
  t.strictSame(parseHomePage(page(`<script type="application/ld+json">${'['.repeat(100_000)}${']'.repeat(100_000)}</script>`), PAGE), NOTHING);
  const deepOrg = { '@type': 'Organization', name: 'Acme Robotics' };
  let nested: unknown = deepOrg;
  for (let i = 0; i < 30; i++) nested = { '@type': 'WebPage', about: nested };
  t.equal(parseHomePage(page(ld(nested)), PAGE).name, undefined, 'an Organization deeper than the JSON walk goes is not found');
});

t.test('random fragments of markup never throw and give only well-formed values', async (t) => {
  const pieces = [
    '<div>', '</div>', '<a href="', 'https://twitter.com/', 'acme', '"', "'", '>', '</a>', '<script type="application/ld+json">',
    '</script>', '{"@type":"Organization","name":"Acme"', '}', '[', ']', ',', '<!--', '-->', '<svg>', '</svg>', '<math>',
    '<title>', '</title>', '<meta property="og:site_name" content="', '<![CDATA[', ']]>', '&amp;', '&#x0;', '\u0000',
    '<textarea>', '<plaintext>', '<template>', '</template>', 'tel:', '<a href="tel:+44 113 496 0', 'javascript:',
    '<base href="', '//', '<table>', '<td>', '</li>', '<p>', '\n', ' ', 'x',
  ];
  const next = seededRandom(42);
  let ok = 0;
  for (let run = 0; run < 200; run++) {
    let html = '';
    const n = 20 + Math.floor(next() * 400);
    for (let i = 0; i < n; i++) html += pieces[Math.floor(next() * pieces.length)];
    const s = parseHomePage(html, run % 2 ? PAGE : 'garbage');
    const problems = [
      ...s.evidence.filter((e) => !['jsonld', 'opengraph', 'meta', 'title', 'links'].includes(e)),
      ...(s.twitter_url && !/^https:\/\/twitter\.com\/[a-z0-9_]{1,15}$/.test(s.twitter_url) ? [s.twitter_url] : []),
      ...(s.facebook_url && !/^https:\/\/www\.facebook\.com\/[a-z0-9.-]+$/.test(s.facebook_url) ? [s.facebook_url] : []),
      ...(s.linkedin_url && !/^https:\/\/www\.linkedin\.com\/company\/[^/?#]+$/.test(s.linkedin_url) ? [s.linkedin_url] : []),
      ...(s.website && !/^https?:\/\/[^/]+$/.test(s.website) ? [s.website] : []),
    ];
    if (problems.length === 0) ok++;
    else t.fail(`run ${run}: ${problems.join(', ')}`);
  }
  t.equal(ok, 200);
});

t.test('inputs that are not strings are read as an empty page', async (t) => {
  for (const html of [undefined, null, 42, {}, ['<title>Acme</title>']]) t.strictSame(parseHomePage(html as unknown as string, PAGE), NOTHING, String(html));
  t.strictSame(parseHomePage('', undefined as unknown as string), { same_as: [], evidence: [] });
});
