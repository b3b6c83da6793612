// A local stand-in for the part of People Data Labs' v5 API the PDL adapter uses, so that tests
// never reach the real service: `GET /v5/person/enrich`, `POST /v5/person/search` (a small
// Elasticsearch subset: bool with must/filter/should/must_not, term, terms, match, match_phrase,
// range, exists) and `GET /v5/company/enrich`, answering in PDL's documented shapes from a
// fictional dataset (two made-up companies on the reserved .test domain and the people who work
// there). Records are kept lower-case as PDL keeps them; `titlecase` capitalises names, titles and
// places the way the adapter asks for.
//
// Every request is recorded (method, path, raw URL, query, body, the X-Api-Key header). The key is
// read from the header only: a key in the URL counts as no key.
//
// Inputs that make it fail, wherever they appear in a request (query string or body):
//   ratelimited.test → 429 with Retry-After: 1      boom.test    → 500
//   slow.test        → no answer for 6 s             garbled.test → 200 with a body that is not JSON
// or, whatever the input, while `failAll` is set: 429 (as ratelimited.test) or 500 (as boom.test);
// and: an unknown person or company → 404; a missing or wrong key → 401; the key
// `svc-pdl-out-of-credits` → 402.

import http from 'node:http';
import type { AddressInfo } from 'node:net';

export const PDL_STANDIN_KEY = 'svc-pdl-standin-key';
export const PDL_OUT_OF_CREDITS_KEY = 'svc-pdl-out-of-credits';

export interface PdlStandinRequest {
  method: string;
  path: string;
  /** The request target as sent (path and query string). */
  url: string;
  query: Record<string, string>;
  body: unknown;
  apiKey: string | undefined;
}

export interface PdlStandin {
  url: string;
  requests: PdlStandinRequest[];
  /** 429 or 500: every request with the right key fails as ratelimited.test or boom.test makes it; null (the default): answer normally. */
  failAll: 429 | 500 | null;
  close(): Promise<void>;
}

type Rec = Record<string, unknown>;

const DAY_MS = 86_400_000;

/** YYYY-MM-DD, `days` before `now` (UTC). */
export function daysAgo(days: number, now: Date): string {
  return new Date(now.getTime() - days * DAY_MS).toISOString().slice(0, 10);
}

/** The fictional people, as PDL person records, their job start dates counted back from `now`. */
export function standinPeople(now: Date): Rec[] {
  const place = (locality: string, region: string, country: string) => ({
    location_name: `${locality}, ${region}, ${country}`,
    location_locality: locality,
    location_region: region,
    location_country: country,
  });
  const acme = { job_company_name: 'acme robotics', job_company_website: 'acme-robotics.test', job_company_size: '201-500', job_company_industry: 'industrial automation', job_company_linkedin_url: 'linkedin.com/company/acme-robotics' };
  const globex = { job_company_name: 'globex meta', job_company_website: 'globex-meta.test', job_company_size: '10001+', job_company_industry: 'computer software', job_company_linkedin_url: 'linkedin.com/company/globex-meta' };
  const job = (company: Rec, title: Rec, start: string | null, end: string | null, primary: boolean, where: string, summary: string | null = null) => ({
    company: { name: company.job_company_name, website: company.job_company_website, size: company.job_company_size, industry: company.job_company_industry, linkedin_url: company.job_company_linkedin_url },
    title,
    start_date: start,
    end_date: end,
    is_primary: primary,
    location_names: [where],
    summary,
  });
  const janeStart = daysAgo(30, now);
  const sam = daysAgo(200, now);
  const cfo = daysAgo(1100, now);
  const chris = daysAgo(10, now);
  return [
    {
      id: 'standin-person-jane',
      full_name: 'jane doe',
      first_name: 'jane',
      last_name: 'doe',
      linkedin_url: 'linkedin.com/in/jane-doe-acme',
      twitter_url: 'twitter.com/janedoe_acme',
      facebook_url: null,
      work_email: 'jane.doe@acme-robotics.test',
      personal_emails: ['jane.doe.home@mail.test'],
      recommended_personal_email: 'jane.doe.home@mail.test',
      mobile_phone: '+1 512-555-0199',
      phone_numbers: ['+1 512-555-0199'],
      job_title: 'vp sales',
      job_title_role: 'sales',
      job_title_sub_role: null,
      job_title_levels: ['vp'],
      ...acme,
      job_start_date: janeStart,
      ...place('austin', 'texas', 'united states'),
      industry: 'industrial automation',
      skills: ['enterprise sales', 'negotiation'],
      experience: [
        job(acme, { name: 'vp sales', role: 'sales', sub_role: null, levels: ['vp'] }, janeStart, null, true, 'austin, texas, united states'),
        job(globex, { name: 'sales director', role: 'sales', sub_role: null, levels: ['director'] }, '2019-03', daysAgo(35, now).slice(0, 7), false, 'toronto, ontario, canada', 'Led enterprise sales for the Americas.'),
      ],
      education: [{ school: { name: 'fictional state university', type: 'post-secondary institution' }, degrees: ['bachelors'], majors: ['business administration'], minors: [], start_date: '2008', end_date: '2012', gpa: null }],
      linkedin_connections: 500,
      headline: 'Builds sales teams that sell robots',
      inferred_years_experience: 13,
    },
    {
      id: 'standin-person-sam',
      full_name: 'sam lee',
      first_name: 'sam',
      last_name: 'lee',
      linkedin_url: 'linkedin.com/in/sam-lee-acme',
      twitter_url: null,
      facebook_url: null,
      work_email: 'sam.lee@acme-robotics.test',
      personal_emails: [],
      recommended_personal_email: null,
      mobile_phone: null,
      phone_numbers: [],
      job_title: 'senior software engineer',
      job_title_role: 'engineering',
      job_title_sub_role: 'software',
      job_title_levels: ['senior'],
      ...acme,
      job_start_date: sam,
      ...place('london', 'england', 'united kingdom'),
      industry: 'industrial automation',
      skills: ['typescript', 'robot control'],
      experience: [job(acme, { name: 'senior software engineer', role: 'engineering', sub_role: 'software', levels: ['senior'] }, sam, null, true, 'london, england, united kingdom')],
      education: [],
      linkedin_connections: 180,
      headline: null,
      inferred_years_experience: 7,
    },
    {
      id: 'standin-person-morgan',
      full_name: 'morgan reyes',
      first_name: 'morgan',
      last_name: 'reyes',
      linkedin_url: 'linkedin.com/in/morgan-reyes-cfo',
      twitter_url: null,
      facebook_url: null,
      work_email: 'morgan.reyes@acme-robotics.test',
      personal_emails: [],
      recommended_personal_email: null,
      // PDL's way of saying "there is one, but not on your plan".
      mobile_phone: true,
      phone_numbers: [],
      job_title: 'chief financial officer',
      job_title_role: 'finance',
      job_title_sub_role: 'financial',
      job_title_levels: ['cxo'],
      ...acme,
      job_start_date: cfo,
      ...place('austin', 'texas', 'united states'),
      industry: 'industrial automation',
      skills: [],
      experience: [job(acme, { name: 'chief financial officer', role: 'finance', sub_role: 'financial', levels: ['cxo'] }, cfo, null, true, 'austin, texas, united states')],
      education: [],
      linkedin_connections: 900,
      headline: null,
      inferred_years_experience: 20,
    },
    {
      id: 'standin-person-chris',
      full_name: 'chris park',
      first_name: 'chris',
      last_name: 'park',
      linkedin_url: 'linkedin.com/in/chris-park-globex',
      twitter_url: null,
      facebook_url: null,
      work_email: 'chris.park@globex-meta.test',
      personal_emails: [],
      recommended_personal_email: null,
      mobile_phone: null,
      phone_numbers: [],
      job_title: 'director of marketing',
      job_title_role: 'marketing',
      job_title_sub_role: 'brand',
      job_title_levels: ['director'],
      ...globex,
      job_start_date: chris,
      ...place('toronto', 'ontario', 'canada'),
      industry: 'computer software',
      skills: ['brand strategy'],
      experience: [job(globex, { name: 'director of marketing', role: 'marketing', sub_role: 'brand', levels: ['director'] }, chris, null, true, 'toronto, ontario, canada')],
      education: [],
      linkedin_connections: 320,
      headline: null,
      inferred_years_experience: 11,
    },
  ];
}

/** The fictional companies, as PDL company records. */
export function standinCompanies(): Rec[] {
  const austin = { name: 'austin, texas, united states', locality: 'austin', region: 'texas', country: 'united states', continent: 'north america', street_address: '100 example way', postal_code: '78701' };
  return [
    {
      id: 'standin-company-acme',
      name: 'acme robotics',
      display_name: 'Acme Robotics',
      website: 'acme-robotics.test',
      linkedin_url: 'linkedin.com/company/acme-robotics',
      twitter_url: 'twitter.com/acmerobotics',
      facebook_url: 'facebook.com/acmerobotics',
      size: '201-500',
      employee_count: 320,
      industry: 'industrial automation',
      founded: 2012,
      type: 'private',
      location: austin,
      locations: [
        { ...austin, is_primary: true },
        { name: 'london, england, united kingdom', locality: 'london', region: 'england', country: 'united kingdom', continent: 'europe', street_address: null, postal_code: null, is_primary: false },
      ],
      summary: 'Acme Robotics builds robots for warehouses.',
      headline: 'Robots for every warehouse',
      tags: ['robotics', 'warehouse automation'],
      total_funding_raised: 38000000,
      latest_funding_stage: 'series_b',
      last_funding_date: '2024-05-01',
      funding_details: [
        { funding_round_date: '2021-02-10', funding_raised: 8000000, funding_type: 'series_a', funding_currency: 'usd', investing_companies: ['example ventures'], investing_individuals: [] },
        { funding_round_date: '2024-05-01', funding_raised: 30000000, funding_type: 'series_b', funding_currency: 'usd', investing_companies: ['example ventures', 'sample capital'], investing_individuals: ['pat example'] },
      ],
      employee_growth_rate: { '3_month': 0.021, '6_month': 0.05, '12_month': 0.125, '24_month': 0.3 },
      linkedin_follower_count: 12400,
      inferred_revenue: '$25M-$50M',
      technologies_used: [{ name: 'salesforce' }, { name: 'slack' }],
    },
    {
      id: 'standin-company-globex',
      name: 'globex meta',
      display_name: 'Globex Meta',
      website: 'globex-meta.test',
      linkedin_url: 'linkedin.com/company/globex-meta',
      twitter_url: null,
      facebook_url: null,
      size: '10001+',
      employee_count: 15000,
      industry: 'computer software',
      founded: 1998,
      type: 'public_subsidiary',
      location: { name: 'toronto, ontario, canada', locality: 'toronto', region: 'ontario', country: 'canada', continent: 'north america', street_address: null, postal_code: null },
      summary: null,
      headline: null,
      tags: [],
      total_funding_raised: null,
      latest_funding_stage: null,
      last_funding_date: null,
      funding_details: [],
      employee_growth_rate: null,
      employee_count_by_month: { '2023-03': 10000, '2024-03': 12500, '2024-09': 14000, '2025-03': 15000 },
      linkedin_follower_count: 98000,
      inferred_revenue: null,
    },
  ];
}

// ---------------------------------------------------------------------------------------------

const ACRONYMS = new Set(['vp', 'ceo', 'cfo', 'coo', 'cto', 'hr', 'it', 'qa']);
const SMALL_WORDS = new Set(['of', 'and', 'the', 'at', 'for', 'in']);

function titleCase(s: unknown): unknown {
  if (typeof s !== 'string') return s;
  return s
    .split(' ')
    .map((w, i) => (ACRONYMS.has(w) ? w.toUpperCase() : i > 0 && SMALL_WORDS.has(w) ? w : w.charAt(0).toUpperCase() + w.slice(1)))
    .join(' ');
}

const PERSON_TITLECASED = ['full_name', 'first_name', 'last_name', 'job_title', 'job_company_name', 'location_name', 'location_locality', 'location_region', 'location_country'];

function titleCasePerson(p: Rec): Rec {
  const out: Rec = { ...p };
  for (const f of PERSON_TITLECASED) out[f] = titleCase(p[f]);
  out.experience = (p.experience as Rec[]).map((e) => ({
    ...e,
    company: { ...(e.company as Rec), name: titleCase((e.company as Rec).name) },
    title: { ...(e.title as Rec), name: titleCase((e.title as Rec).name) },
    location_names: (e.location_names as string[]).map(titleCase),
  }));
  out.education = (p.education as Rec[]).map((e) => ({ ...e, school: { ...(e.school as Rec), name: titleCase((e.school as Rec).name) } }));
  return out;
}

function titleCasePlace(l: unknown): unknown {
  if (typeof l !== 'object' || l === null) return l;
  const r = l as Rec;
  return { ...r, name: titleCase(r.name), locality: titleCase(r.locality), region: titleCase(r.region), country: titleCase(r.country) };
}

function titleCaseCompany(c: Rec): Rec {
  return { ...c, name: titleCase(c.name), location: titleCasePlace(c.location), ...(Array.isArray(c.locations) && { locations: c.locations.map(titleCasePlace) }) };
}

/** `https://www.LinkedIn.com/in/x/` → `linkedin.com/in/x`; websites → their bare host. */
function bare(v: string): string {
  return v
    .trim()
    .toLowerCase()
    .replace(/^[a-z]+:\/\//, '')
    .replace(/^www\./, '')
    .replace(/\/+$/, '');
}

const hostOf = (v: string) => bare(v).split('/')[0]!;

class BadRequest extends Error {}

/** The values at a dotted path (arrays flattened). */
function valuesAt(r: unknown, path: string): unknown[] {
  let cur: unknown[] = [r];
  for (const part of path.split('.')) {
    cur = cur.flatMap((v) => (typeof v === 'object' && v !== null && !Array.isArray(v) ? [(v as Rec)[part]] : [])).flatMap((v) => (Array.isArray(v) ? v : [v]));
  }
  return cur.filter((v) => v !== null && v !== undefined);
}

const words = (v: unknown) =>
  String(v)
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter(Boolean);

function field(clause: unknown, kind: string): [string, unknown] {
  const entries = typeof clause === 'object' && clause !== null ? Object.entries(clause) : [];
  if (entries.length !== 1) throw new BadRequest(`${kind} takes exactly one field`);
  return entries[0]!;
}

const list = (v: unknown): unknown[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);

/** Whether a record matches an Elasticsearch query (the subset the stand-in knows). */
function matches(r: Rec, q: unknown): boolean {
  const entries = typeof q === 'object' && q !== null ? Object.entries(q) : [];
  if (entries.length !== 1) throw new BadRequest('a query clause has exactly one key');
  const [kind, body] = entries[0]!;
  switch (kind) {
    case 'bool': {
      const b = body as Rec;
      for (const k of Object.keys(b)) if (!['must', 'filter', 'should', 'must_not', 'minimum_should_match'].includes(k)) throw new BadRequest(`bool does not take ${k}`);
      const must = [...list(b.must), ...list(b.filter)];
      const should = list(b.should);
      const min = typeof b.minimum_should_match === 'number' ? b.minimum_should_match : must.length === 0 && should.length > 0 ? 1 : 0;
      return must.every((c) => matches(r, c)) && should.filter((c) => matches(r, c)).length >= min && !list(b.must_not).some((c) => matches(r, c));
    }
    case 'term': {
      const [f, v] = field(body, 'term');
      const want = typeof v === 'object' && v !== null ? (v as Rec).value : v;
      return valuesAt(r, f).some((x) => String(x).toLowerCase() === String(want).toLowerCase());
    }
    case 'terms': {
      const [f, v] = field(body, 'terms');
      if (!Array.isArray(v)) throw new BadRequest('terms takes a list');
      const want = new Set(v.map((x) => String(x).toLowerCase()));
      return valuesAt(r, f).some((x) => want.has(String(x).toLowerCase()));
    }
    case 'match': {
      const [f, v] = field(body, 'match');
      const want = words(typeof v === 'object' && v !== null ? (v as Rec).query : v);
      const have = new Set(valuesAt(r, f).flatMap(words));
      return want.some((w) => have.has(w));
    }
    case 'match_phrase': {
      const [f, v] = field(body, 'match_phrase');
      const want = words(typeof v === 'object' && v !== null ? (v as Rec).query : v).join(' ');
      return valuesAt(r, f).some((x) => ` ${words(x).join(' ')} `.includes(` ${want} `));
    }
    case 'range': {
      const [f, v] = field(body, 'range');
      const b = v as Rec;
      const cmp = (x: unknown, y: unknown) => (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y)));
      return valuesAt(r, f).some(
        (x) => (b.gte === undefined || cmp(x, b.gte) >= 0) && (b.gt === undefined || cmp(x, b.gt) > 0) && (b.lte === undefined || cmp(x, b.lte) <= 0) && (b.lt === undefined || cmp(x, b.lt) < 0),
      );
    }
    case 'exists':
      return valuesAt(r, String((body as Rec).field)).length > 0;
    default:
      throw new BadRequest(`the stand-in does not know the ${kind} query`);
  }
}

const SEARCH_KEYS = new Set(['query', 'sql', 'size', 'from', 'scroll_token', 'dataset', 'titlecase', 'pretty', 'data_include', 'updated_title_roles']);

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

const error = (status: number, type: string, message: string): Reply => ({ status, body: { status, error: { type, message } } });

function present(v: unknown): boolean {
  return v !== null && v !== undefined && v !== false && v !== '' && !(Array.isArray(v) && v.length === 0);
}

function personEnrich(q: Record<string, string>, now: Date): Reply {
  const name = q.name ?? (q.first_name && q.last_name ? `${q.first_name} ${q.last_name}` : undefined);
  const context = q.company ?? q.location ?? q.locality ?? q.region ?? q.school;
  if (!q.email && !q.profile && !(name && context)) return error(400, 'invalid_request_error', 'Request object must contain an email, a profile, or a name with a company, school or location');
  let likelihood = 8;
  const hits = standinPeople(now).filter((p) => {
    if (q.email) {
      const e = q.email.toLowerCase();
      if (p.work_email !== e && !(p.personal_emails as string[]).includes(e)) return false;
      likelihood = 9;
    }
    if (q.profile) {
      if (bare(q.profile) !== p.linkedin_url) return false;
      likelihood = 9;
    }
    if (name && String(p.full_name) !== name.trim().toLowerCase()) return false;
    if (q.company && q.company.toLowerCase() !== p.job_company_name && hostOf(q.company) !== p.job_company_website) return false;
    return true;
  });
  const person = hits[0];
  if (!person) return error(404, 'not_found', 'No records were found matching your request');
  if (q.required) {
    const fields = q.required.split(/\s+(?:AND|OR)\s+/);
    const ok = / OR /.test(q.required) ? fields.some((f) => present(person[f])) : fields.every((f) => present(person[f]));
    if (!ok) return error(404, 'not_found', 'No records were found matching your request');
  }
  if (q.min_likelihood && Number(q.min_likelihood) > likelihood) return error(404, 'not_found', 'No records were found matching your request');
  return { status: 200, body: { status: 200, likelihood, data: q.titlecase === 'true' ? titleCasePerson(person) : person } };
}

function personSearch(body: unknown, now: Date): Reply {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return error(400, 'invalid_request_error', 'The body must be a JSON object');
  const b = body as Rec;
  for (const k of Object.keys(b)) if (!SEARCH_KEYS.has(k)) return error(400, 'invalid_request_error', `Unknown parameter: ${k}`);
  if (b.sql !== undefined) return error(400, 'invalid_request_error', 'The stand-in takes an Elasticsearch query, not sql');
  if (b.query === undefined) return error(400, 'invalid_request_error', 'query or sql is required');
  const size = b.size ?? 1;
  const from = b.from ?? 0;
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1 || size > 100) return error(400, 'invalid_request_error', 'size must be from 1 to 100');
  if (typeof from !== 'number' || !Number.isInteger(from) || from < 0 || from > 9999) return error(400, 'invalid_request_error', 'from must be from 0 to 9999');
  let hits: Rec[];
  try {
    hits = standinPeople(now).filter((p) => matches(p, b.query));
  } catch (err) {
    if (err instanceof BadRequest) return error(400, 'invalid_request_error', err.message);
    throw err;
  }
  if (hits.length === 0) return error(404, 'not_found', 'No records were found matching your search');
  const page = hits.slice(from, from + size).map((p) => (b.titlecase === true ? titleCasePerson(p) : p));
  return { status: 200, body: { status: 200, data: page, scroll_token: from + size < hits.length ? `standin-${from + size}` : null, total: hits.length } };
}

function companyEnrich(q: Record<string, string>): Reply {
  if (!q.website && !q.profile && !q.name) return error(400, 'invalid_request_error', 'Request object must contain a website, a profile or a name');
  let likelihood = 6;
  const hit = standinCompanies().find((c) => {
    if (q.website) {
      if (hostOf(q.website) !== c.website) return false;
      likelihood = 8;
    }
    if (q.profile) {
      if (bare(q.profile) !== c.linkedin_url) return false;
      likelihood = 9;
    }
    if (q.name && q.name.trim().toLowerCase() !== c.name) return false;
    return true;
  });
  if (!hit) return error(404, 'not_found', 'No records were found matching your request');
  if (q.min_likelihood && Number(q.min_likelihood) > likelihood) return error(404, 'not_found', 'No records were found matching your request');
  return { status: 200, body: { status: 200, ...(q.titlecase === 'true' ? titleCaseCompany(hit) : hit), likelihood } };
}

/** Starts the stand-in on 127.0.0.1 (a free port). `now` dates the people's job starts (default: the real now). */
export async function startPdlStandin(opts: { key?: string; now?: Date; /** 0 (default): any free port. */ port?: number } = {}): Promise<PdlStandin> {
  const key = opts.key ?? PDL_STANDIN_KEY;
  const now = opts.now ?? new Date();
  const requests: PdlStandinRequest[] = [];
  let failAll: 429 | 500 | null = null;
  const timers = new Set<NodeJS.Timeout>();

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://standin');
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      if (raw !== '') {
        try {
          body = JSON.parse(raw);
        } catch {
          body = raw;
        }
      }
      const header = req.headers['x-api-key'];
      const apiKey = Array.isArray(header) ? header[0] : header;
      const query = Object.fromEntries(url.searchParams);
      requests.push({ method: req.method ?? '', path: url.pathname, url: req.url ?? '', query, body, apiKey });

      const send = (r: Reply) => {
        const text = typeof r.body === 'string' ? r.body : JSON.stringify(r.body);
        res.writeHead(r.status, { 'content-type': 'application/json', ...r.headers });
        res.end(text);
      };
      if (apiKey === PDL_OUT_OF_CREDITS_KEY) return send(error(402, 'payment_required', 'You have used all of the credits of your plan'));
      if (apiKey !== key) return send(error(401, 'authentication_error', 'Invalid or missing API key'));

      const everything = `${decodeURIComponent(url.search)} ${raw}`.toLowerCase();
      if (failAll === 429 || everything.includes('ratelimited.test')) {
        const r = error(429, 'rate_limit_error', 'Rate limit exceeded');
        return send({ ...r, headers: { 'retry-after': '1', 'x-ratelimit-remaining': '{"minute": 0}' } });
      }
      if (failAll === 500 || everything.includes('boom.test')) return send(error(500, 'error', 'Internal error'));
      if (everything.includes('garbled.test')) return send({ status: 200, body: '{"status": 200, "data": {"full_na' });
      if (everything.includes('slow.test')) {
        const t = setTimeout(() => {
          timers.delete(t);
          send(error(404, 'not_found', 'No records were found matching your request'));
        }, 6_000);
        timers.add(t);
        return;
      }

      if (req.method === 'GET' && url.pathname === '/v5/person/enrich') return send(personEnrich(query, now));
      if (req.method === 'POST' && url.pathname === '/v5/person/search') return send(personSearch(body, now));
      if (req.method === 'GET' && url.pathname === '/v5/company/enrich') return send(companyEnrich(query));
      return send(error(404, 'not_found', `No endpoint ${req.method} ${url.pathname}`));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get failAll() {
      return failAll;
    },
    set failAll(v: 429 | 500 | null) {
      failAll = v;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The stand-in's Acme Robotics record as the PDL adapter answers it (its company port's value). */
export const PDL_ACME_COMPANY = {
  company_name: 'Acme Robotics',
  display_name: 'Acme Robotics',
  description: 'Acme Robotics builds robots for warehouses.',
  website: 'https://acme-robotics.test',
  employee_count: 320,
  employee_range: '201-500',
  revenue_range: '$25M-$50M',
  industry: 'industrial automation',
  sub_industry: null,
  founded_year: 2012,
  company_type: 'private',
  location: { city: 'Austin', region: 'Texas', country: 'United States', country_code: 'US' },
  linkedin_url: 'https://www.linkedin.com/company/acme-robotics',
  twitter_url: 'https://twitter.com/acmerobotics',
  facebook_url: 'https://www.facebook.com/acmerobotics',
  phone: null,
  technologies: ['Salesforce', 'Slack'],
  technology_count: 2,
  funding: { total_raised: 38000000, last_round: 'series_b', last_round_date: '2024-05-01' },
  confidence: 0.8,
  source_provider: 'pdl',
};
