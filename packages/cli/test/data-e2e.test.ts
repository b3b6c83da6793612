// `svc find` and `svc enrich` in process against the whole service on the simulated internet
// (startStack): small CSV files of fictional contacts and companies through the real finder (the
// sim's mail servers) and company data (its websites and DNS), compared byte for byte with the
// CSV they must give, with the summary and the credits the account paid; then the one-contact and
// one-company forms, and the gates (no data product: exit 3; too few credits: exit 4).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { EXIT, run, type CliIO } from '../src/index.ts';
import { makeKey, startStack } from '../../../test/helpers/stack.ts';

// The sim's websites live on loopback: the outbound guard lets exactly that network through.
const stack = await startStack({ env: { SVC_OUTBOUND_ALLOW_NETWORKS: '127.0.0.0/8', SVC_SMTP_TIMEOUT_MS: '4000', SVC_DNS_TIMEOUT_MS: '2000' } });
t.teardown(() => stack.close());
const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-cli-data-e2e-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

/** A key of a new account, with the data product unless `product` is false. */
async function dataKey(credits: number, product = true): Promise<{ key: string; accountId: string }> {
  const k = await makeKey(stack, { credits });
  if (product) await stack.store.accounts.setDataProduct(k.accountId, true);
  return k;
}
const balance = async (accountId: string) => (await stack.store.ledger.balance(accountId))!.balance;

async function svc(key: string, argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIO = {
    env: { SVC_API_KEY: key, SVC_BASE_URL: stack.url, HOME: tmp },
    cwd: tmp,
    stdout: { write: (s: string) => (stdout += s), isTTY: false },
    stderr: { write: (s: string) => (stderr += s), isTTY: false },
    clientOptions: { backoff: { baseMs: 50, capMs: 200 } },
  };
  return { code: await run(argv, io), stdout, stderr };
}

const CONTACTS = [
  'First Name,Last Name,Company Website,Notes',
  'Jane,Doe,accept.test,met at the expo',
  'Maria,Garcia,https://www.people.test/team,"warm lead, call back"',
  'Nobody,Here,people.test,',
  'Pat,,people.test,no last name',
].join('\n');

t.test('find --file: the exact CSV, input order, the summary, 1 credit per address found', async (t) => {
  const { key, accountId } = await dataKey(20);
  writeFileSync(path.join(tmp, 'contacts.csv'), `${CONTACTS}\n`);
  const r = await svc(key, ['find', '--file', 'contacts.csv', '--out', 'found.csv']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, '');
  t.equal(
    readFileSync(path.join(tmp, 'found.csv'), 'utf8'),
    [
      'First Name,Last Name,Company Website,Notes,email,confidence,pattern,source,not_found,credits_charged,error',
      'Jane,Doe,accept.test,met at the expo,jane.doe@accept.test,95,{first}.{last},smtp,false,1,',
      'Maria,Garcia,https://www.people.test/team,"warm lead, call back",mgarcia@people.test,95,{f}{last},smtp,false,1,',
      'Nobody,Here,people.test,,,0,,,true,0,every candidate address was rejected by the mail server',
      'Pat,,people.test,no last name,,0,,,false,0,last_name is required',
      '',
    ].join('\r\n'),
  );
  t.equal(r.stderr, 'contacts.csv processing 0/4 (0.0%)\ncontacts.csv completed 4/4 (100.0%) ETA 0:00\n4 contacts: found 2, not found 1, errors 1; credits charged 2\nfound.csv: 4 rows\n');
  t.equal(await balance(accountId), 18);

  const validated = await svc(key, ['find', '--file', 'contacts.csv', '--validate']);
  t.equal(validated.code, 0, validated.stderr);
  t.equal(
    validated.stdout,
    [
      'First Name,Last Name,Company Website,Notes,email,confidence,pattern,source,not_found,credits_charged,error,validation_result,validation_reason_code',
      'Jane,Doe,accept.test,met at the expo,jane.doe@accept.test,95,{first}.{last},smtp,false,2,,valid,accepted',
      'Maria,Garcia,https://www.people.test/team,"warm lead, call back",mgarcia@people.test,95,{f}{last},smtp,false,2,,valid,accepted',
      'Nobody,Here,people.test,,,0,,,true,0,every candidate address was rejected by the mail server,,',
      'Pat,,people.test,no last name,,0,,,false,0,last_name is required,,',
      '',
    ].join('\r\n'),
    '--validate: the validation of each address found, and its credit',
  );
  t.match(validated.stderr, /\n4 contacts: found 2, not found 1, errors 1; credits charged 4\n$/);
  t.equal(await balance(accountId), 14);
});

t.test('enrich --file: the exact CSV of the sim’s companies, 1 credit per company found', async (t) => {
  const { key, accountId } = await dataKey(20);
  writeFileSync(path.join(tmp, 'companies.csv'), 'Company;Website\nAcme Robotics;https://www.acme-robotics.test/\nGlobex;globex-meta.test\nBroken Site;error-site.test\nNo Website;\n');
  const r = await svc(key, ['enrich', '--file', 'companies.csv', '--force-refresh']);
  t.equal(r.code, 0, r.stderr);
  t.equal(
    r.stdout,
    [
      'Company,Website,company_name,description,website,employee_count,employee_range,founded_year,company_type,city,region,country,country_code,linkedin_url,twitter_url,facebook_url,phone,technologies,confidence,found,credits_charged,error',
      "Acme Robotics,https://www.acme-robotics.test/,Acme Robotics,Acme Robotics designs autonomous picking robots for mid-sized warehouses.,https://acme-robotics.test,120,51-200,2011,,Austin,TX,United States,US,https://www.linkedin.com/company/acme-robotics,https://twitter.com/acmerobotics,,'+15125550142,Google Workspace; SendGrid; Google Search Console; Atlassian; Cloudflare; WordPress; Google Tag Manager; HubSpot,0.95,true,1,",
      'Globex,globex-meta.test,Globex Meta,Vibration and temperature sensors for factory machines.,https://globex-meta.test,,,,,,,,,,,,,Microsoft 365,0.5,true,1,',
      'Broken Site,error-site.test,,,,,,,,,,,,,,,,,0,false,0,no website: HTTP 500',
      'No Website,,,,,,,,,,,,,,,,,,0,false,0,domain is required',
      '',
    ].join('\r\n'),
  );
  t.equal(r.stderr, 'companies.csv processing 0/4 (0.0%)\ncompanies.csv completed 4/4 (100.0%) ETA 0:00\n4 companies: found 2, not found 1, errors 1, cache hits 0; credits charged 2\n');
  t.equal(await balance(accountId), 18);
});

t.test('one contact, one company: lines for people, or the JSON of the answer', async (t) => {
  const { key, accountId } = await dataKey(20);
  t.strictSame(await svc(key, ['find', 'Jane', 'Doe', 'accept.test', '--validate']), { code: 0, stdout: 'jane.doe@accept.test: confidence 95, pattern {first}.{last}, source smtp, credits charged 2\n  validation: valid (accepted)\n', stderr: '' });
  t.strictSame(await svc(key, ['find', 'Nobody', 'Here', 'people.test']), { code: 0, stdout: 'Nobody Here at people.test: not found (every candidate address was rejected by the mail server), credits charged 0\n', stderr: '' });
  const json = await svc(key, ['--json', 'find', 'Maria', 'Garcia', 'people.test']);
  t.match(JSON.parse(json.stdout), { id: '0', email: 'mgarcia@people.test', confidence: 95, pattern: '{f}{last}', source_provider: 'smtp', not_found: false, credits_charged: 1 });

  const acme = await svc(key, ['enrich', 'acme-robotics.test', '--force-refresh']);
  t.strictSame(acme, {
    code: 0,
    stdout: [
      'acme-robotics.test: found, confidence 0.95, credits charged 1',
      '  company_name    Acme Robotics',
      '  description     Acme Robotics designs autonomous picking robots for mid-sized warehouses.',
      '  website         https://acme-robotics.test',
      '  employee_count  120',
      '  employee_range  51-200',
      '  founded_year    2011',
      '  city            Austin',
      '  region          TX',
      '  country         United States',
      '  country_code    US',
      '  linkedin_url    https://www.linkedin.com/company/acme-robotics',
      '  twitter_url     https://twitter.com/acmerobotics',
      '  phone           +15125550142',
      '  technologies    Google Workspace; SendGrid; Google Search Console; Atlassian; Cloudflare; WordPress; Google Tag Manager; HubSpot',
      '',
    ].join('\n'),
    stderr: '',
  });
  const cached = await svc(key, ['--json', 'enrich', 'https://www.Acme-Robotics.test/about']);
  t.match(JSON.parse(cached.stdout), { domain: 'acme-robotics.test', company_name: 'Acme Robotics', found: true, cache_hit: true, credits_charged: 1 });
  t.strictSame(await svc(key, ['enrich', 'error-site.test']), { code: 0, stdout: 'error-site.test: not found (no website: HTTP 500), credits charged 0 (from the cache)\n', stderr: '' }, 'the miss the file test cached');
  t.equal(await balance(accountId), 20 - 2 - 1 - 1 - 1);
});

t.test('the gates: no data product exits 3; too few credits exits 4, with nothing written', async (t) => {
  const { key: plain } = await dataKey(10, false);
  const denied = await svc(plain, ['find', 'Jane', 'Doe', 'accept.test']);
  t.equal(denied.code, EXIT.auth);
  t.match(denied.stderr, /^svc: 403 product_not_enabled: The data product is not enabled for this account \(request req_[0-9a-f]{32}\)\n$/);
  const { key: poor, accountId } = await dataKey(1);
  writeFileSync(path.join(tmp, 'three.csv'), 'domain\nacme-robotics.test\nglobex-meta.test\numbrella-nonprofit.test\n');
  const r = await svc(poor, ['enrich', '--file', 'three.csv', '--out', 'three-out.csv']);
  t.equal(r.code, EXIT.credits, '402: exit 4');
  t.match(r.stderr, /svc: 402 insufficient_credits: .*\(required 3, available 1, request req_[0-9a-f]{32}\)\n$/);
  t.throws(() => readFileSync(path.join(tmp, 'three-out.csv')), { code: 'ENOENT' }, 'no answer: no file');
  t.equal(await balance(accountId), 1);
});
