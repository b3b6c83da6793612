// LinkedIn company and profile URLs (one parser) with exact answers: every accepted spelling of one company page gives the
// same canonical URL (scheme, host, country subdomain, trailing path, query, case, percent
// escapes), and everything else gives undefined (people pages, look-alike hosts, other schemes,
// credentials, empty or malformed slugs, over-long input). All companies are made up.

import t from 'tap';
import { canonicalLinkedInCompanyUrl, canonicalLinkedInProfileUrl, linkedInSlug } from '../src/linkedin-url.ts';

const ACME = 'https://www.linkedin.com/company/acme-corp';

t.test('spellings of one company page give one canonical URL', async (t) => {
  const same = [
    'https://www.linkedin.com/company/acme-corp/',
    'https://www.linkedin.com/company/acme-corp',
    'http://www.linkedin.com/company/acme-corp/',
    'https://linkedin.com/company/acme-corp',
    'linkedin.com/company/acme-corp/about?trk=public_profile',
    'www.linkedin.com/company/acme-corp/jobs/',
    '//www.linkedin.com/company/acme-corp',
    'https://uk.linkedin.com/company/acme-corp',
    'https://de.linkedin.com/company/acme-corp/?originalSubdomain=de',
    'https://m.linkedin.com/company/acme-corp',
    'HTTPS://WWW.LINKEDIN.COM/company/Acme-Corp/',
    'https://www.linkedin.com/Company/ACME-CORP',
    'https://www.linkedin.com/company/acme%2Dcorp',
    'https://www.linkedin.com/company/acme-corp#people',
    'https://www.linkedin.com:443/company/acme-corp',
    '  https://www.linkedin.com/company/acme-corp  ',
  ];
  for (const input of same) t.equal(canonicalLinkedInCompanyUrl(input), ACME, input);
});

t.test('slugs are decoded, lower-cased and encoded again', async (t) => {
  t.equal(canonicalLinkedInCompanyUrl('https://www.linkedin.com/company/1234567/'), 'https://www.linkedin.com/company/1234567');
  t.equal(canonicalLinkedInCompanyUrl('https://www.linkedin.com/company/soci%C3%A9t%C3%A9-exemple'), 'https://www.linkedin.com/company/soci%C3%A9t%C3%A9-exemple');
  t.equal(canonicalLinkedInCompanyUrl('https://www.linkedin.com/company/SOCIÉTÉ-Exemple'), 'https://www.linkedin.com/company/soci%C3%A9t%C3%A9-exemple');
  t.equal(canonicalLinkedInCompanyUrl('https://www.linkedin.com/company/soci%c3%a9t%c3%a9-exemple'), 'https://www.linkedin.com/company/soci%C3%A9t%C3%A9-exemple');
  t.equal(canonicalLinkedInCompanyUrl('https://www.linkedin.com/company/acme_robotics.test'), 'https://www.linkedin.com/company/acme_robotics.test');
  t.equal(canonicalLinkedInCompanyUrl('https://www.linkedin.com/company/acme%26sons'), 'https://www.linkedin.com/company/acme%26sons');
});

t.test('anything that is not a company page gives undefined', async (t) => {
  const refused = [
    '',
    '   ',
    'acme-corp',
    'https://www.linkedin.com/in/jane-example/',
    'https://www.linkedin.com/school/acme-university/',
    'https://www.linkedin.com/showcase/acme-labs/',
    'https://www.linkedin.com/shareArticle?mini=true&url=https://acme.test',
    'https://www.linkedin.com/company/',
    'https://www.linkedin.com/company',
    'https://www.linkedin.com/company//acme-corp',
    'https://www.linkedin.com/',
    'https://linkedin.com.evil.test/company/acme-corp',
    'https://evil.test/linkedin.com/company/acme-corp',
    'https://evillinkedin.com/company/acme-corp',
    'https://www.linkedin.com.evil.test/company/acme-corp',
    'https://www.linkedin.com@evil.test/company/acme-corp',
    'https://user:pass@www.linkedin.com/company/acme-corp',
    'https://www.linkedin.com:8443/company/acme-corp',
    'https://api.www.linkedin.com/company/acme-corp',
    'ftp://www.linkedin.com/company/acme-corp',
    'javascript:alert(1)//www.linkedin.com/company/acme-corp',
    'mailto:jobs@acme.test',
    'data:text/html,linkedin.com/company/acme-corp',
    'https://www.linkedin.com/company/acme%2Fcorp',
    'https://www.linkedin.com/company/acme%20corp',
    'https://www.linkedin.com/company/%E0%A4%A',
    'https://www.linkedin.com/company/..',
    'https://www.linkedin.com/company/%2E%2E',
    'https://www.linkedin.com/company/<script>',
    `https://www.linkedin.com/company/${'a'.repeat(201)}`,
    `https://www.linkedin.com/company/acme-corp?x=${'a'.repeat(2048)}`,
    'http://[::1/company/acme-corp',
  ];
  for (const input of refused) t.equal(canonicalLinkedInCompanyUrl(input), undefined, JSON.stringify(input.slice(0, 80)));
});

t.test('an input of exactly 2048 characters is still read', async (t) => {
  const prefix = 'https://www.linkedin.com/company/acme-corp?x=';
  const input = prefix + 'a'.repeat(2048 - prefix.length);
  t.equal(input.length, 2048);
  t.equal(canonicalLinkedInCompanyUrl(input), ACME);
  t.equal(canonicalLinkedInCompanyUrl(`${input}a`), undefined);
});

t.test('linkedInSlug', async (t) => {
  t.equal(linkedInSlug(ACME), 'acme-corp');
  t.equal(linkedInSlug('uk.linkedin.com/company/Acme-Corp/about'), 'acme-corp');
  t.equal(linkedInSlug('https://www.linkedin.com/company/soci%C3%A9t%C3%A9-exemple'), 'société-exemple');
  t.equal(linkedInSlug('https://www.linkedin.com/in/jane-example'), undefined);
  t.equal(linkedInSlug(''), undefined);
});

t.test('inputs that are not strings give undefined instead of throwing', async (t) => {
  for (const input of [undefined, null, 42, {}, ['https://www.linkedin.com/company/acme-corp']]) {
    t.equal(canonicalLinkedInCompanyUrl(input as unknown as string), undefined, String(input));
  }
});

const JANE = 'https://www.linkedin.com/in/jane-example-123';

t.test('profiles: spellings of one profile give one canonical URL, by the company pages\' rules', async (t) => {
  const same = [
    'https://www.linkedin.com/in/jane-example-123/',
    'http://linkedin.com/in/jane-example-123',
    'linkedin.com/in/Jane-Example-123/details/experience/?trk=x',
    '//www.linkedin.com/in/jane-example-123',
    'https://uk.linkedin.com/in/Jane-Example-123/',
    'https://m.linkedin.com/in/jane-example-123',
    'HTTPS://WWW.LINKEDIN.COM/IN/JANE-EXAMPLE-123',
    'https://www.linkedin.com/in/jane%2Dexample-123#about',
    '  https://www.linkedin.com/in/jane-example-123  ',
  ];
  for (const input of same) t.equal(canonicalLinkedInProfileUrl(input), JANE, input);
  t.equal(canonicalLinkedInProfileUrl('https://www.linkedin.com/in/j%C3%BCrgen-beispiel'), 'https://www.linkedin.com/in/j%C3%BCrgen-beispiel');
  t.equal(canonicalLinkedInProfileUrl(`https://www.linkedin.com/in/${'a'.repeat(100)}`), `https://www.linkedin.com/in/${'a'.repeat(100)}`);
});

t.test('profiles: anything that is not a profile gives undefined (company pages, look-alikes, credentials, ports)', async (t) => {
  const refused = [
    '',
    'jane-example-123',
    ACME,
    'https://www.linkedin.com/in/',
    'https://www.linkedin.com/in//jane',
    'https://www.linkedin.com/pub/jane-example/1/2/3',
    'https://linkedin.com.evil.test/in/jane-example-123',
    'https://evil.test/linkedin.com/in/jane-example-123',
    'https://user:pass@www.linkedin.com/in/jane-example-123',
    'https://www.linkedin.com:8443/in/jane-example-123',
    'https://api.www.linkedin.com/in/jane-example-123',
    'https://abc.linkedin.com/in/jane-example-123',
    'javascript:alert(1)//www.linkedin.com/in/jane-example-123',
    'https://www.linkedin.com/in/jane%2Fexample',
    'https://www.linkedin.com/in/jane%20example',
    'https://www.linkedin.com/in/<script>',
    'https://www.linkedin.com/in/..',
    `https://www.linkedin.com/in/${'a'.repeat(101)}`,
  ];
  for (const input of refused) t.equal(canonicalLinkedInProfileUrl(input), undefined, JSON.stringify(input.slice(0, 80)));
  for (const input of [undefined, null, 42, {}]) t.equal(canonicalLinkedInProfileUrl(input as unknown as string), undefined, String(input));
});
