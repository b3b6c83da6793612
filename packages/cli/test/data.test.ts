// `svc find` and `svc enrich` in process against a local server that answers each bulk request
// from its own body (a found address or company per usable row): a file cut into requests of the
// route's limit (100 contacts, 25 companies) with the rows back in input order whatever order the
// requests finish in, one Idempotency-Key per request (KEY:N with --idempotency-key), the columns
// found by their usual names or named, a request that fails half-way (the answered rows are still
// written, the others say why not; the failure's exit code), the two forms of each command, and
// the CSV written as the service writes a job's results. The real service: data-e2e.test.ts.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { csvCell, EXIT, formatCsv, guessColumn, readTable, run, type CliIO } from '../src/index.ts';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'svc-cli-data-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));

interface Request {
  url: string;
  key: string | undefined;
  body: Record<string, unknown>;
}

type Contact = { first_name?: string; last_name?: string; domain?: string; company?: string };
type Company = { domain?: string; force_refresh?: boolean };

/** What the local service answers a find request: an address for every contact with both names and a domain. */
function findAnswer(contacts: Contact[]): unknown {
  const results = contacts.map((c, i) => {
    const email = c.first_name && c.last_name && c.domain ? `${c.first_name}.${c.last_name}@${c.domain}`.toLowerCase() : null;
    const error = email ? undefined : !c.last_name ? 'last_name is required' : 'domain or company is required';
    return { id: String(i), email, confidence: email ? 95 : 0, source_provider: email ? 'smtp' : null, providers_tried: ['native'], pattern: email ? '{first}.{last}' : null, not_found: false, credits_charged: email ? 1 : 0, latency_ms: 3, ...(error ? { error } : {}) };
  });
  const found = results.filter((r) => r.email).length;
  return { id: 'find_0', results, summary: { total: results.length, found, not_found: 0, errors: results.length - found, credits_charged: found, total_latency_ms: 9 } };
}

/** What it answers an enrich request: a company named after every domain. */
function enrichAnswer(companies: Company[]): unknown {
  const results = companies.map((c) => {
    const found = Boolean(c.domain);
    const name = found ? c.domain!.split('.')[0]! : null;
    return {
      domain: c.domain ?? '',
      company_name: name,
      description: found ? `${name}, "the" company, makes things` : null,
      website: found ? `https://${c.domain}` : null,
      employee_count: found ? 12 : null,
      employee_range: found ? '11-50' : null,
      founded_year: null,
      company_type: null,
      location: { city: found ? 'Springfield' : null, region: null, country: null, country_code: null },
      linkedin_url: null,
      twitter_url: null,
      facebook_url: null,
      phone: found ? '+15555550100' : null,
      technologies: found ? ['Google Workspace', 'SendGrid'] : [],
      confidence: found ? 0.5 : 0,
      found,
      credits_charged: found ? 1 : 0,
      cache_hit: Boolean(c.force_refresh) === false && c.domain === 'cached.test',
      source_provider: found ? 'website' : null,
      latency_ms: 2,
      ...(found ? {} : { error: 'domain is required' }),
    };
  });
  const found = results.filter((r) => r.found).length;
  return { id: 'enr_0', results, summary: { total: results.length, found, not_found: 0, errors: results.length - found, cache_hits: 0, credits_charged: found, total_latency_ms: 4 } };
}

// The local service: a request holding the name `Broke` (or the domain broke.test) is refused
// with 402; the first request answers last, so answers arrive out of order.
const received: Request[] = [];
const server = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c));
  req.on('end', () => {
    const body = JSON.parse(raw) as Record<string, unknown>;
    const index = received.push({ url: req.url ?? '', key: req.headers['idempotency-key'] as string | undefined, body }) - 1;
    const send = (status: number, doc: unknown) => res.writeHead(status, { 'Content-Type': 'application/json', 'X-Request-ID': `req_${String(index + 1).padStart(32, '0')}` }).end(JSON.stringify(doc));
    if (req.url === '/v1/company/enrich') return send(200, (enrichAnswer([body as Company]) as { results: unknown[] }).results[0]);
    const items = (body.contacts ?? body.companies) as Array<Contact & Company>;
    if (items.some((c) => c.first_name === 'Broke' || c.domain === 'broke.test')) return send(402, { error: 'Payment Required', message: 'Not enough credits', code: 'insufficient_credits', required: items.length, available: 0 });
    const answer = req.url === '/v1/find/bulk' ? findAnswer(items) : enrichAnswer(items);
    setTimeout(() => send(200, answer), index === 0 ? 60 : 5);
  });
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
t.teardown(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
const URL = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

async function svc(argv: string[], opts: { tty?: boolean } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  received.length = 0;
  let stdout = '';
  let stderr = '';
  const io: CliIO = {
    env: { SVC_API_KEY: 'svc_test_cliDataTestKey0000000001', SVC_BASE_URL: URL, HOME: tmp },
    cwd: tmp,
    stdout: { write: (s: string) => (stdout += s), isTTY: opts.tty ?? false, columns: 100 },
    stderr: { write: (s: string) => (stderr += s), isTTY: opts.tty ?? false, columns: 100 },
    clientOptions: { backoff: { baseMs: 1, capMs: 2 }, maxAttempts: 2 },
    now: () => 0,
  };
  const code = await run(argv, io);
  return { code, stdout, stderr };
}

const file = (name: string, text: string): string => (writeFileSync(path.join(tmp, name), text), name);
const lines = (csv: string): string[] => csv.split('\r\n').slice(0, -1);

t.test('find --file: 250 contacts in requests of 100, each row back in input order, a key per request', async (t) => {
  const people = Array.from({ length: 250 }, (_, i) => [`Ann${i}`, `Lee${i}`, `co${i}.test`]);
  file('contacts.csv', `first_name,last_name,domain\n${people.map((r) => r.join(',')).join('\n')}\n`);
  const r = await svc(['find', '--file', 'contacts.csv']);
  t.equal(r.code, 0, r.stderr);
  const out = lines(r.stdout);
  t.equal(out[0], 'first_name,last_name,domain,email,confidence,pattern,source,not_found,credits_charged,error');
  t.equal(out.length, 251, 'the header and a line per row');
  t.strictSame(out.slice(1).map((l) => l.split(',')[3]), people.map(([f, l, d]) => `${f}.${l}@${d}`.toLowerCase()), 'each address on its own row, in input order');
  t.equal(out[1], 'Ann0,Lee0,co0.test,ann0.lee0@co0.test,95,{first}.{last},smtp,false,1,');
  t.strictSame(received.map((x) => (x.body.contacts as unknown[]).length).sort((a, b) => a - b), [50, 100, 100], 'requests of 100');
  t.strictSame(received.map((x) => x.url), Array(3).fill('/v1/find/bulk'));
  t.equal(new Set(received.map((x) => x.key)).size, 3, 'an Idempotency-Key per request');
  t.equal(r.stderr.split('\n').at(-2), '250 contacts: found 250, not found 0, errors 0; credits charged 250', 'the summary, last on stderr');

  const keyed = await svc(['find', '--file', 'contacts.csv', '--idempotency-key', 'leads-2026-11', '--validate', '-o', 'found.csv']);
  t.equal(keyed.code, 0);
  t.strictSame(received.map((x) => x.key).sort(), ['leads-2026-11:0', 'leads-2026-11:1', 'leads-2026-11:2'], 'a durable key: KEY:N for the N-th request');
  t.ok(received.every((x) => x.body.validate === true), '--validate asks for the validation');
  t.equal(keyed.stdout, '', 'the CSV went to the file');
  t.equal(lines(readFileSync(path.join(tmp, 'found.csv'), 'utf8'))[0], 'first_name,last_name,domain,email,confidence,pattern,source,not_found,credits_charged,error,validation_result,validation_reason_code');
  t.match(keyed.stderr, /\nfound\.csv: 250 rows\n$/);
});

t.test('enrich --file: requests of 25, the company columns, rows without a domain answered by the service', async (t) => {
  const domains = Array.from({ length: 60 }, (_, i) => (i === 7 ? '' : `firm${i}.test`));
  file('companies.csv', `Name;Website\n${domains.map((d, i) => `Firm ${i};${d}`).join('\n')}\n`);
  const r = await svc(['enrich', '--file', 'companies.csv', '--force-refresh']);
  t.equal(r.code, 0, r.stderr);
  t.strictSame(received.map((x) => (x.body.companies as unknown[]).length).sort((a, b) => a - b), [10, 25, 25], 'requests of 25');
  t.strictSame((received.find((x) => (x.body.companies as unknown[]).length === 25 && (x.body.companies as Company[])[0]!.domain === 'firm0.test')!.body.companies as Company[]).slice(6, 9), [
    { domain: 'firm6.test', force_refresh: true },
    { force_refresh: true },
    { domain: 'firm8.test', force_refresh: true },
  ], 'an empty cell is not sent; --force-refresh on every company');
  const out = lines(r.stdout);
  t.equal(out[0], 'Name,Website,company_name,description,website,employee_count,employee_range,founded_year,company_type,city,region,country,country_code,linkedin_url,twitter_url,facebook_url,phone,technologies,confidence,found,credits_charged,error');
  t.equal(out[1], `Firm 0,firm0.test,firm0,"firm0, ""the"" company, makes things",https://firm0.test,12,11-50,,,Springfield,,,,,,,'+15555550100,Google Workspace; SendGrid,0.5,true,1,`, 'quoted, the phone behind a quote (a spreadsheet would read + as a formula)');
  t.equal(out[8], 'Firm 7,,,,,,,,,,,,,,,,,,0,false,0,domain is required');
  t.equal(out[60], `Firm 59,firm59.test,firm59,"firm59, ""the"" company, makes things",https://firm59.test,12,11-50,,,Springfield,,,,,,,'+15555550100,Google Workspace; SendGrid,0.5,true,1,`);
  t.equal(r.stderr.split('\n').at(-2), '60 companies: found 59, not found 0, errors 1, cache hits 0; credits charged 59');
});

t.test('columns: the usual names in any spelling, named ones, and an error naming what is missing', async (t) => {
  file('crm.csv', '\uFEFFFIRST NAME;Surname;Company Website;Email\r\nJane;Doe;=cmd|calc;\r\n');
  const r = await svc(['find', '--file', 'crm.csv']);
  t.equal(r.code, 0, r.stderr);
  t.strictSame(received[0]!.body.contacts, [{ first_name: 'Jane', last_name: 'Doe', domain: '=cmd|calc' }], 'First Name, Surname and Company Website found');
  t.equal(r.stdout, "\uFEFFFIRST NAME,Surname,Company Website,Email,email,confidence,pattern,source,not_found,credits_charged,error\r\nJane,Doe,'=cmd|calc,,jane.doe@=cmd|calc,95,{first}.{last},smtp,false,1,\r\n", 'the BOM kept, comma-delimited, a formula cell behind a quote');

  file('named.csv', 'who,family,org,web address\nJane,Doe,Acme,acme.test\nJohn,Roe,Initech,\n');
  const named = await svc(['find', '--file', 'named.csv', '--first-name-column', 'WHO', '--last-name-column', 'family', '--company-column', 'org', '--domain-column', 'web address']);
  t.equal(named.code, 0, named.stderr);
  t.strictSame(received[0]!.body.contacts, [
    { first_name: 'Jane', last_name: 'Doe', domain: 'acme.test', company: 'Acme' },
    { first_name: 'John', last_name: 'Roe', company: 'Initech' },
  ], 'named columns (any case); an empty domain is left out, the company sent');

  const errors: Array<[string[], string]> = [
    [['find', '--file', 'named.csv'], 'svc: named.csv: no first-name column (looked for first_name, firstname, first, given_name, fname, forename; any case, spaces for _); name it with --first-name-column (the header: "who", "family", "org", "web address")\n'],
    [['find', '--file', 'named.csv', '--first-name-column', 'who'], 'svc: named.csv: no last-name column (looked for last_name, lastname, last, surname, family_name, lname; any case, spaces for _); name it with --last-name-column (the header: "who", "family", "org", "web address")\n'],
    [['find', '--file', 'named.csv', '--first-name-column', 'who', '--last-name-column', 'family'], 'svc: named.csv: no domain or company column (looked for domain, company_domain, website, company_website, website_url, email_domain, url, web, site, homepage; company, company_name, organization, organisation, organization_name, account, account_name, employer; any case, spaces for _); name one with --domain-column or --company-column (the header: "who", "family", "org", "web address")\n'],
    [['find', '--file', 'named.csv', '--first-name-column', 'given'], 'svc: named.csv: no column "given" (--first-name-column) in the header ("who", "family", "org", "web address")\n'],
    [['enrich', '--file', 'named.csv', '--domain-column', 'web'], 'svc: named.csv: no column "web" (--domain-column) in the header ("who", "family", "org", "web address")\n'],
    [['enrich', '--file', file('nodomain.csv', 'name\nAcme\n')], 'svc: nodomain.csv: no domain column (looked for domain, company_domain, website, company_website, website_url, email_domain, url, web, site, homepage; any case, spaces for _); name it with --domain-column (the header: "name")\n'],
    [['enrich', '--file', file('ragged.csv', 'domain,name\nacme.test,Acme,extra\n')], 'svc: ragged.csv: row 1 has 3 cells, the header 2\n'],
    [['enrich', '--file', file('header-only.csv', 'domain\n')], 'svc: header-only.csv: no rows under the header\n'],
    [['enrich', '--file', file('empty.csv', '')], 'svc: empty.csv: the file is empty (a header row is needed)\n'],
    [['enrich', '--file', 'absent.csv'], 'svc: cannot read absent.csv: no such file\n'],
  ];
  for (const [argv, stderr] of errors) {
    const e = await svc(argv);
    t.strictSame(e, { code: EXIT.badInput, stdout: '', stderr }, `svc ${argv.join(' ')}`);
    t.equal(received.length, 0, 'nothing sent');
  }
  file('trailing.csv', 'domain,name\nacme.test,Acme,,\nglobex.test\n');
  const trailing = await svc(['enrich', '--file', 'trailing.csv']);
  t.equal(trailing.code, 0, 'empty cells past the header (a spreadsheet’s trailing commas) are dropped; a short row is padded');
  const back = readTable(trailing.stdout);
  t.strictSame([back.header.length, ...back.rows.map((r) => r.length), back.rows[1]![0]], [22, 22, 22, 'globex.test']);

  t.equal(guessColumn(['Name', 'E-mail', 'Web Site'], ['domain', 'website']), 2, 'spaces, case, - and _ do not matter');
  t.equal(guessColumn(['website', 'domain'], ['domain', 'website']), 1, 'the first alias the header has wins, wherever it is');
  t.strictSame(readTable('a,b\n1\n\n2,3,,\n'), { header: ['a', 'b'], rows: [['1', ''], ['2', '3']], bom: false });
  t.strictSame(['-1', '@x', '\tx', 'a"b', 'x\ny', 3, true, null].map((c) => csvCell(c)), ["'-1", "'@x", "'\tx", '"a""b"', '"x\ny"', '3', 'true', '']);
  t.equal(formatCsv([['a', 1], [null, 'b,c']], true), '\uFEFFa,1\r\n,"b,c"\r\n');
});

t.test('a request that fails: the answered rows are written, the others say why not; the exit code is the failure’s', async (t) => {
  const people = Array.from({ length: 250 }, (_, i) => [i === 150 ? 'Broke' : `Ann${i}`, `Lee${i}`, `co${i}.test`]);
  file('some-broke.csv', `First Name,Last Name,Domain\n${people.map((r) => r.join(',')).join('\n')}\n`);
  const r = await svc(['find', '--file', 'some-broke.csv', '--out', 'partial.csv']);
  t.equal(r.code, EXIT.credits, '402: exit 4');
  t.equal(received.length, 3, 'the requests in flight were all answered');
  const out = lines(readFileSync(path.join(tmp, 'partial.csv'), 'utf8'));
  t.equal(out.length, 251, 'every row is written');
  t.equal(out[100], 'Ann99,Lee99,co99.test,ann99.lee99@co99.test,95,{first}.{last},smtp,false,1,', 'the first request’s rows have their answers');
  t.equal(out[101], 'Ann100,Lee100,co100.test,,,,,,,not processed: 402 insufficient_credits: Not enough credits', 'the refused request’s rows say why');
  t.equal(out[250], 'Ann249,Lee249,co249.test,ann249.lee249@co249.test,95,{first}.{last},smtp,false,1,', 'the third request’s rows have their answers');
  t.match(r.stderr, /svc: 150 of 250 contacts were processed \(and charged for what was found\) before this error; partial\.csv has them; the others say "not processed"\nsvc: 402 insufficient_credits: Not enough credits \(required 100, available 0, request req_\d{32}\)\n$/);

  const json = await svc(['--json', 'find', '--file', 'some-broke.csv', '--out', 'partial-json.csv']);
  t.equal(json.code, EXIT.credits);
  t.equal(json.stderr, '', '--json: nothing on stderr');
  t.match(JSON.parse(json.stdout), { error: { status: 402, code: 'insufficient_credits' }, exit_code: 4 }, 'one document: the error');
  t.equal(lines(readFileSync(path.join(tmp, 'partial-json.csv'), 'utf8')).length, 251, 'the file is still written');

  file('all-broke.csv', 'domain\nbroke.test\n');
  const none = await svc(['enrich', '--file', 'all-broke.csv']);
  t.strictSame([none.code, none.stdout], [EXIT.credits, ''], 'nothing answered: nothing written');
  t.match(none.stderr, /^svc: 402 insufficient_credits: Not enough credits/m);
});

t.test('the two forms: the arguments, or --file; anything else is a usage error and sends nothing', async (t) => {
  const cases: Array<[string[], string]> = [
    [['find', 'Jane'], 'svc: find takes FIRST LAST DOMAIN (got 1 argument), or --file FILE; see: svc find --help\n'],
    [['find'], 'svc: find takes FIRST LAST DOMAIN (got 0 arguments), or --file FILE; see: svc find --help\n'],
    [['find', 'Jane', 'Doe', 'accept.test', '--file', 'contacts.csv'], 'svc: find takes FIRST LAST DOMAIN or --file FILE, not both; see: svc find --help\n'],
    [['find', 'Jane', 'Doe', 'accept.test', '--domain-column', 'site'], 'svc: --domain-column goes with --file FILE; see: svc find --help\n'],
    [['enrich'], 'svc: enrich takes DOMAIN (got 0 arguments), or --file FILE; see: svc enrich --help\n'],
    [['enrich', 'acme-robotics.test', '--out', 'x.csv'], 'svc: --out goes with --file FILE; see: svc enrich --help\n'],
    [['enrich', 'a.test', 'b.test'], 'svc: enrich takes 0 to 1 argument (DOMAIN?), got 2; see: svc enrich --help\n'],
    [['enrich', '--file'], "svc: Option '--file <value>' argument missing; see: svc enrich --help\n"],
  ];
  for (const [argv, stderr] of cases) {
    t.strictSame(await svc(argv), { code: EXIT.usage, stdout: '', stderr }, `svc ${argv.join(' ')}`);
    t.equal(received.length, 0, 'nothing sent');
  }
  const help = await svc(['find', '--help']);
  t.match(help, { code: 0, stdout: /^Usage: svc find FIRST LAST DOMAIN \[--validate\]\n {7}svc find --file FILE \[--first-name-column NAME\]/ });
  t.match(help.stdout, /\n {2}--first-name-column NAME {2}the column of first names\n/);
  t.match((await svc(['--help'])).stdout, /\n {2}find FIRST LAST DOMAIN {6}find the email address .*\n {2}enrich DOMAIN {15}company data from a domain/);

  const one = await svc(['find', 'Jane', 'Doe', 'acme.test', '--idempotency-key', 'lead-7']);
  t.strictSame(one, { code: 0, stdout: 'jane.doe@acme.test: confidence 95, pattern {first}.{last}, source smtp, credits charged 1\n', stderr: '' });
  t.strictSame([received[0]!.url, received[0]!.key, received[0]!.body], ['/v1/find/bulk', 'lead-7', { contacts: [{ first_name: 'Jane', last_name: 'Doe', domain: 'acme.test' }], validate: false }], 'one contact; the key as given');
  const company = await svc(['enrich', 'acme.test']);
  t.equal(company.stdout, 'acme.test: found, confidence 0.5, credits charged 1\n  company_name    acme\n  description     acme, "the" company, makes things\n  website         https://acme.test\n  employee_count  12\n  employee_range  11-50\n  city            Springfield\n  phone           +15555550100\n  technologies    Google Workspace; SendGrid\n');
  t.strictSame([received[0]!.url, received[0]!.body], ['/v1/company/enrich', { domain: 'acme.test' }]);
});

t.test('output: a terminal gets a progress bar and escaped text; --json one document and nothing on stderr', async (t) => {
  file('one.csv', 'first_name,last_name,domain\nJane,Doe,acme.test\n');
  const tty = await svc(['find', '--file', 'one.csv'], { tty: true });
  t.equal(tty.code, 0);
  t.equal(tty.stderr, '\r[..............................]    0.0%  0/1  -  ETA -:--  processing\x1b[K\r[##############################]  100.0%  1/1  -  ETA 0:00  completed\x1b[K\n1 contact: found 1, not found 0, errors 0; credits charged 1\n', 'the bar, then the summary on its own line');
  const piped = await svc(['find', '--file', 'one.csv']);
  t.equal(piped.stderr, 'one.csv processing 0/1 (0.0%)\none.csv completed 1/1 (100.0%) ETA 0:00\n1 contact: found 1, not found 0, errors 0; credits charged 1\n', 'elsewhere: plain lines');

  file('hostile.csv', 'first_name,last_name,domain\n"Jane\u001b[2J",Doe\u202e,acme.test\n');
  const hostile = await svc(['find', '--file', 'hostile.csv'], { tty: true });
  t.equal(lines(hostile.stdout)[1], 'Jane\\u001b[2J,Doe\\u202e,acme.test,jane\\u001b[2j.doe\\u202e@acme.test,95,{first}.{last},smtp,false,1,', 'on a terminal: escaped');
  const raw = await svc(['find', '--file', 'hostile.csv']);
  t.equal(lines(raw.stdout)[1], 'Jane\u001b[2J,Doe\u202e,acme.test,jane\u001b[2j.doe\u202e@acme.test,95,{first}.{last},smtp,false,1,', 'into a pipe: the exact text');

  const json = await svc(['--json', 'find', '--file', 'one.csv']);
  t.equal(json.stderr, '');
  t.equal(json.stdout.indexOf('\n'), json.stdout.length - 1, 'one line');
  t.strictSame(JSON.parse(json.stdout), { results: [{ id: '0', email: 'jane.doe@acme.test', confidence: 95, source_provider: 'smtp', providers_tried: ['native'], pattern: '{first}.{last}', not_found: false, credits_charged: 1, latency_ms: 3 }], summary: { total: 1, found: 1, not_found: 0, errors: 0, credits_charged: 1 } });
  const jsonOut = await svc(['--json', 'enrich', '--file', file('two.csv', 'domain\nacme.test\n\nglobex.test\n'), '--output', 'two-out.csv']);
  t.match(JSON.parse(jsonOut.stdout), { results: [{ domain: 'acme.test' }, { domain: 'globex.test' }], summary: { total: 2, found: 2, credits_charged: 2 }, out: 'two-out.csv' });
  t.equal(lines(readFileSync(path.join(tmp, 'two-out.csv'), 'utf8')).length, 3, '--output (as job download) writes the file too');
});
