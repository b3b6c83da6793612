// The data endpoints' request checks: every missing or bad field gets its own code and the
// contract's exact message; good bodies come back normalised (domains in canonical ASCII form).

import t from 'tap';
import { ServiceError } from '@svc/contracts';
import * as rq from '../src/requests.ts';

/** The code and message a parser throws for a body. */
function refusal(parse: (b: unknown) => unknown, body: unknown): { code: string; message: string; status: number } | 'accepted' {
  try {
    parse(body);
    return 'accepted';
  } catch (err) {
    if (!(err instanceof ServiceError)) throw err;
    return { code: err.code, message: err.message, status: err.status };
  }
}

const bad = (code: string, message: string) => ({ code, message, status: 400 });

t.test('normaliseDomain', async (t) => {
  const table: Array<[string, string | undefined]> = [
    ['acme.test', 'acme.test'],
    ['  ACME.Test.  ', 'acme.test'],
    ['https://www.acme.test/about?x=1', 'acme.test'],
    ['http://shop.acme.test:8080/', 'shop.acme.test'],
    ['bücher.test', 'xn--bcher-kva.test'],
    ['jane@acme.test', 'acme.test'],
    ['localhost', undefined],
    ['10.0.0.1', undefined],
    ['acme..test', undefined],
    ['-acme.test', undefined],
    ['acme_corp.test', undefined],
    ['', undefined],
    [`${'a'.repeat(64)}.test`, undefined],
  ];
  for (const [input, want] of table) t.equal(rq.normaliseDomain(input), want, JSON.stringify(input));
});

t.test('company/enrich', async (t) => {
  t.strictSame(rq.parseCompanyEnrich({ domain: 'https://www.Acme-Robotics.test/' }), { domain: 'acme-robotics.test', force_refresh: false });
  t.strictSame(rq.parseCompanyEnrich({ domain: 'acme.test', company_name: ' Acme ', force_refresh: true }), { domain: 'acme.test', company_name: 'Acme', force_refresh: true });
  t.strictSame(refusal(rq.parseCompanyEnrich, {}), bad('domain_required', 'domain is required'));
  t.strictSame(refusal(rq.parseCompanyEnrich, { domain: '   ' }), bad('domain_required', 'domain is required'));
  t.strictSame(refusal(rq.parseCompanyEnrich, { domain: 'not a domain' }), bad('invalid_domain', 'domain is not a valid domain name'));
  t.strictSame(refusal(rq.parseCompanyEnrich, { domain: 42 }), bad('invalid_request', 'domain must be a string'));
  t.strictSame(refusal(rq.parseCompanyEnrich, { domain: 'acme.test', force_refresh: 'yes' }), bad('invalid_request', 'force_refresh must be true or false'));
  t.strictSame(refusal(rq.parseCompanyEnrich, ['acme.test']), bad('invalid_request', 'The request body must be a JSON object'));
  t.strictSame(refusal(rq.parseCompanyEnrich, null), bad('invalid_request', 'The request body must be a JSON object'));
});

t.test('company/enrich/bulk: list limits, max_concurrent, bad items become item errors', async (t) => {
  t.strictSame(refusal(rq.parseCompanyBulk, {}), bad('companies_required', 'companies array is required'));
  t.strictSame(refusal(rq.parseCompanyBulk, { companies: [] }), bad('companies_required', 'companies array is required'));
  t.strictSame(refusal(rq.parseCompanyBulk, { companies: 'acme.test' }), bad('companies_required', 'companies array is required'));
  t.strictSame(refusal(rq.parseCompanyBulk, { companies: Array.from({ length: 26 }, () => ({ domain: 'acme.test' })) }), bad('too_many_companies', 'maximum 25 companies per request'));
  t.equal(refusal(rq.parseCompanyBulk, { companies: Array.from({ length: 25 }, () => ({ domain: 'acme.test' })) }), 'accepted');
  for (const m of [0, 11, 2.5, '5']) t.strictSame(refusal(rq.parseCompanyBulk, { companies: [{ domain: 'a.test' }], max_concurrent: m }), bad('invalid_max_concurrent', 'max_concurrent must be an integer from 1 to 10'), `max_concurrent ${m}`);
  const q = rq.parseCompanyBulk({ companies: [{ domain: 'acme.test' }, { company_name: 'x' }, 'globex.test', { domain: 'bad domain' }], max_concurrent: 3 });
  t.equal(q.max_concurrent, 3);
  t.strictSame(q.items, [
    { ok: true, query: { domain: 'acme.test', force_refresh: false }, input: 'acme.test' },
    { ok: false, error: 'domain is required', input: '' },
    { ok: false, error: 'The request body must be a JSON object', input: '' },
    { ok: false, error: 'domain is not a valid domain name', input: 'bad domain' },
  ]);
  t.equal(rq.parseCompanyBulk({ companies: [{ domain: 'a.test' }] }).max_concurrent, 5, 'default 5');
});

t.test('LinkedIn URLs and the LinkedIn endpoints', async (t) => {
  t.strictSame(rq.parseCompanyByLinkedIn({ company_linkedin_url: 'linkedin.com/company/Acme-Robotics/about/' }), { linkedin_url: 'https://www.linkedin.com/company/acme-robotics' });
  t.strictSame(refusal(rq.parseCompanyByLinkedIn, {}), bad('company_linkedin_url_required', 'company_linkedin_url is required'));
  t.strictSame(refusal(rq.parseCompanyByLinkedIn, { company_linkedin_url: 'https://www.linkedin.com/in/jane-doe' }), bad('invalid_linkedin_url', 'company_linkedin_url is not a LinkedIn company URL (https://www.linkedin.com/company/…)'));
  t.strictSame(rq.parseLinkedInCompany({ linkedin_url: 'https://www.linkedin.com/company/acme' }), { linkedin_url: 'https://www.linkedin.com/company/acme' });
  t.strictSame(rq.parseLinkedInCompany({ domain: 'acme.test' }), { domain: 'acme.test' });
  t.strictSame(refusal(rq.parseLinkedInCompany, {}), bad('domain_or_linkedin_url_required', 'domain or linkedin_url required'));
  t.strictSame(rq.parseHires({ domain: 'acme.test' }), { domain: 'acme.test', days_back: 90, limit: 20 });
  t.strictSame(refusal(rq.parseHires, { domain: 'acme.test', days_back: 181 }), bad('invalid_days_back', 'days_back must be an integer from 1 to 180'));
  t.strictSame(refusal(rq.parseHires, { domain: 'acme.test', days_back: 0 }), bad('invalid_days_back', 'days_back must be an integer from 1 to 180'));
  t.strictSame(refusal(rq.parseHires, { domain: 'acme.test', limit: 101 }), bad('invalid_limit', 'limit must be an integer from 1 to 100'));
  t.strictSame(rq.parseHires({ domain: 'acme.test', days_back: 180, limit: 100 }), { domain: 'acme.test', days_back: 180, limit: 100 });
  t.strictSame(rq.parseDomainToLinkedIn({ domain: 'Acme.test' }), { domain: 'acme.test' });
  t.strictSame(refusal(rq.parseDomainToLinkedIn, {}), bad('domain_required', 'domain is required'));
});

t.test('people/search, people/lookup, people/role', async (t) => {
  t.strictSame(rq.parsePeopleSearch({ domain: 'acme.test', title_keywords: [' sales '], department: 'sales', seniority: ['vp', 'VP', 'Director'] }), {
    domain: 'acme.test',
    title_keywords: ['sales'],
    department: 'Sales',
    seniority: ['VP', 'Director'],
    limit: 10,
    offset: 0,
  });
  t.strictSame(refusal(rq.parsePeopleSearch, {}), bad('domain_required', 'domain is required'));
  t.strictSame(refusal(rq.parsePeopleSearch, { domain: 'acme.test', limit: 51 }), bad('invalid_limit', 'limit must be an integer from 1 to 50'));
  t.strictSame(refusal(rq.parsePeopleSearch, { domain: 'acme.test', offset: -1 }), bad('invalid_limit', 'offset must be an integer from 0 to 10000'));
  t.strictSame(refusal(rq.parsePeopleSearch, { domain: 'acme.test', department: 'Sorcery' }), bad('invalid_request', 'department must be one of: Sales, Engineering, Marketing, Finance, HR, Operations, Product, Legal, Executive'));
  t.strictSame(refusal(rq.parsePeopleSearch, { domain: 'acme.test', seniority: 'VP' }), bad('invalid_request', 'seniority must be an array of at most 6 strings'));
  t.strictSame(rq.parsePersonLookup({ first_name: 'Jane', company_domain: 'acme.test', enrich_profile: true }), { first_name: 'Jane', company_domain: 'acme.test', enrich_profile: true });
  t.strictSame(refusal(rq.parsePersonLookup, { company_domain: 'acme.test' }), bad('first_name_required', 'first_name is required'));
  t.strictSame(refusal(rq.parsePersonLookup, { first_name: 'Jane' }), bad('company_domain_required', 'company_domain is required'));
  t.strictSame(rq.parseRoleLookup({ role: 'CFO', company_name: 'Acme' }), { role: 'CFO', company_name: 'Acme', enrich_profile: false });
  t.strictSame(refusal(rq.parseRoleLookup, { company_name: 'Acme' }), bad('role_required', 'role is required'));
  t.strictSame(refusal(rq.parseRoleLookup, { role: 'CFO' }), bad('company_name_required', 'company_name is required'));
});

t.test('profile/enrich, mobile/find, prospect/email-to-person', async (t) => {
  t.strictSame(rq.parseProfileEnrich({ email: 'Jane.Doe@ACME.test' }), { email: 'Jane.Doe@acme.test' });
  t.strictSame(rq.parseProfileEnrich({ linkedin_url: 'https://uk.linkedin.com/in/Jane-Doe-123/' }), { linkedin_url: 'https://www.linkedin.com/in/jane-doe-123' });
  t.strictSame(refusal(rq.parseProfileEnrich, {}), bad('email_or_linkedin_url_required', 'email or linkedin_url required'));
  t.strictSame(refusal(rq.parseProfileEnrich, { linkedin_url: 'https://www.linkedin.com/company/acme' }), bad('invalid_linkedin_url', 'linkedin_url is not a LinkedIn profile URL (https://www.linkedin.com/in/…)'));
  t.strictSame(refusal(rq.parseProfileEnrich, { email: 'not-an-email' }), bad('invalid_request', 'email is not an email address'));
  t.strictSame(rq.parseMobileFind({ first_name: 'Jane', last_name: 'Doe', domain: 'acme.test' }), { first_name: 'Jane', last_name: 'Doe', domain: 'acme.test' });
  t.strictSame(refusal(rq.parseMobileFind, { first_name: 'Jane' }), bad('contact_identity_required', 'email, linkedin_url, or first_name+last_name required'));
  t.strictSame(refusal(rq.parseMobileFind, {}), bad('contact_identity_required', 'email, linkedin_url, or first_name+last_name required'));
  t.strictSame(rq.parseEmailToPerson({ email: 'jane@acme.test' }), { email: 'jane@acme.test' });
  t.strictSame(refusal(rq.parseEmailToPerson, {}), bad('email_required', 'email is required'));
});

t.test('find/bulk: limits; a contact without a name or a domain is an item error', async (t) => {
  t.strictSame(refusal(rq.parseFindBulk, {}), bad('contacts_required', 'contacts array is required'));
  t.strictSame(refusal(rq.parseFindBulk, { contacts: Array.from({ length: 101 }, () => ({})) }), bad('too_many_contacts', 'maximum 100 contacts per request'));
  const q = rq.parseFindBulk({ contacts: [{ first_name: 'Jane', last_name: 'Doe', domain: 'acme.test' }, { first_name: 'Jane', domain: 'acme.test' }, { last_name: 'Doe', company: 'Acme' }, { id: 'crm-42', first_name: 'Jane', last_name: 'Doe' }], validate: true });
  t.equal(q.validate, true);
  t.equal(q.max_concurrent, 5);
  t.strictSame(q.items, [
    { ok: true, query: { first_name: 'Jane', last_name: 'Doe', domain: 'acme.test' }, input: '0' },
    { ok: false, error: 'last_name is required', input: '1' },
    { ok: false, error: 'first_name is required', input: '2' },
    { ok: false, error: 'domain or company is required', input: 'crm-42' },
  ]);
});
