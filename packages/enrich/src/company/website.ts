// What a company's home page says about the company, read from the HTML alone: its schema.org
// Organization (JSON-LD), its OpenGraph and meta tags, its <title>, its canonical link, the
// LinkedIn, X/Twitter and Facebook pages it links to and its telephone. Nothing here fetches or
// guesses: a field is set only when the page states it, and `evidence` names the kinds of source
// that stated something, so that the caller can weigh agreeing signals into a confidence.
//
// The page comes from anyone, so reading it is bounded and never throws. The HTML goes through
// parse5's tokenizer (the standard's tokenization: entities, attribute names in any case,
// duplicate attributes, raw-text elements, comments), told which elements hold text the way the
// tree builder would tell it, but no tree is built: everything read here is a start tag's
// attributes or a <title>'s or <script>'s text, and building the tree costs time in proportion
// to the nesting depth for every tag (500 unclosed <div>s followed by 5 MB of </li> took
// parse5's tree builder ten seconds, all of it blocking the event loop), where one tokenizer
// pass is linear. JSON-LD blocks over 256 KiB and every <a> after the 5,000th are not read, a block that
// is not JSON is skipped, and walking the JSON is bounded in nodes and depth.

import { Tokenizer, TokenizerMode, type Token, type TokenHandler } from 'parse5';
import type { CompanyType, EmployeeRange } from '@svc/contracts';
import { canonicalLinkedInCompanyUrl } from '../linkedin-url.ts';
import { MAX_RESOURCES, webTechnologies } from './web-tech.ts';

/** The kinds of source a page's signals come from, in the order `evidence` lists them. */
export const WEBSITE_EVIDENCE = ['jsonld', 'opengraph', 'meta', 'title', 'links'] as const;
export type WebsiteEvidence = (typeof WEBSITE_EVIDENCE)[number];

export interface WebsiteLocation {
  city?: string;
  region?: string;
  /** As the page names it; the English name when the page gives only a code. */
  country?: string;
  /** ISO 3166-1 alpha-2. */
  country_code?: string;
}

export interface WebsiteSignals {
  /** The company's name: JSON-LD name, else og:site_name, else the cleaned <title>. */
  name?: string;
  legal_name?: string;
  /** og:site_name, else name. */
  display_name?: string;
  description?: string;
  /** Scheme and host (and port) of the company's site, no path. */
  website?: string;
  founded_year?: number;
  /** Only when the page gives one figure. */
  employee_count?: number;
  employee_range?: EmployeeRange;
  /** Only what the structured data says; private or public is never guessed. */
  company_type?: Extract<CompanyType, 'government' | 'nonprofit'>;
  location?: WebsiteLocation;
  /** The telephone as written (JSON-LD telephone, else the first tel: link). */
  phone_raw?: string;
  /** Canonical https://www.linkedin.com/company/<slug>. */
  linkedin_url?: string;
  /** Canonical https://twitter.com/<handle>, handle lower-cased. */
  twitter_url?: string;
  /** Canonical https://www.facebook.com/<page>, page lower-cased. */
  facebook_url?: string;
  logo?: string;
  /** The Organization's sameAs URLs (http and https only). */
  same_as: string[];
  /** Software the page and its response headers show (web-tech.ts); absent when none. */
  technologies?: string[];
  /** Each kind of source (a WebsiteEvidence) that yielded at least one usable value, in a fixed order. */
  evidence: string[];
}

const MAX_JSONLD_BYTES = 256 * 1024;
const MAX_ANCHORS = 5000;
/** Objects and arrays looked at inside all JSON-LD blocks of one page, and how deep. */
const MAX_JSON_NODES = 10_000;
const MAX_JSON_DEPTH = 24;
const MAX_URL = 2048;
const MAX_NAME = 256;
const MAX_TEXT = 4096;
const MAX_SHORT = 128;
const MAX_SAME_AS = 50;

/** The meta names and properties read (lower-cased); any other is ignored. */
const META_KEYS = new Set(['og:site_name', 'og:title', 'og:description', 'og:url', 'description', 'twitter:site', 'generator']);
/** The <link rel> values whose href is a resource the page loads (what web-tech.ts reads). */
const RESOURCE_RELS = ['stylesheet', 'preload', 'modulepreload', 'preconnect', 'dns-prefetch'];

/** Reads the signals of a company's home page; `pageUrl` is where it was fetched from. */
export function parseHomePage(html: string, pageUrl: string, headers: Readonly<Record<string, string>> = {}): WebsiteSignals {
  const page = httpUrl(pageUrl, undefined);
  const scan = new PageScanner().read(typeof html === 'string' ? html : '');
  const base = httpUrl(scan.base, page) ?? page;
  const resources = scan.resources.flatMap((r) => httpUrl(r, base)?.href ?? []);
  const technologies = webTechnologies({ headers, generator: scan.meta.get('generator'), resources, ...(page && { pageUrl: page.href }) });
  const org = chooseOrganization(scan.jsonLd, base);
  const facts = org ? organizationFacts(org, base) : undefined;
  const tags = readTags(scan, base);
  const links = linkSignals(scan.hrefs, base);
  const name = facts?.name ?? tags.siteName ?? tags.titleName;
  const sameAs = facts?.sameAs ?? [];
  const evidence = new Set<WebsiteEvidence>(tags.sources);
  if (facts) evidence.add('jsonld');
  if (links.found) evidence.add('links');
  return prune({
    name,
    legal_name: facts?.legalName,
    display_name: tags.siteName ?? name,
    description: facts?.description ?? tags.description,
    website: (facts?.url ?? tags.canonical ?? tags.ogUrl ?? page)?.origin,
    founded_year: facts?.foundedYear,
    employee_count: facts?.employees.count,
    employee_range: facts?.employees.range,
    company_type: facts?.companyType,
    location: facts?.location,
    phone_raw: facts?.telephone ?? links.phone,
    linkedin_url: pickSocial('linkedin', sameAs, undefined, links.tally),
    twitter_url: pickSocial('twitter', sameAs, tags.twitterSite, links.tally),
    facebook_url: pickSocial('facebook', sameAs, undefined, links.tally),
    logo: facts?.logo,
    same_as: sameAs,
    technologies: technologies.length > 0 ? technologies : undefined,
    evidence: WEBSITE_EVIDENCE.filter((e) => evidence.has(e)),
  });
}

/** What the head's tags say: OpenGraph, meta, the title and the canonical link. */
interface TagFacts {
  siteName?: string;
  /** The cleaned <title>, else the cleaned og:title. */
  titleName?: string;
  /** og:description, else the meta description. */
  description?: string;
  ogUrl?: URL;
  canonical?: URL;
  twitterSite?: string;
  sources: WebsiteEvidence[];
}

function readTags(scan: PageScan, base: URL | undefined): TagFacts {
  const meta = (key: string): string | undefined => scan.meta.get(key);
  const siteName = clean(meta('og:site_name'), MAX_NAME);
  const ogTitle = clean(meta('og:title'), MAX_TEXT);
  const ogDescription = clean(meta('og:description'), MAX_TEXT);
  const ogUrl = httpUrl(meta('og:url'), base);
  const metaDescription = clean(meta('description'), MAX_TEXT);
  const twitterSite = twitterFromMeta(meta('twitter:site'));
  const title = cleanTitle(scan.title);
  const sources: WebsiteEvidence[] = [];
  if (siteName || ogTitle || ogDescription || ogUrl) sources.push('opengraph');
  if (metaDescription || twitterSite) sources.push('meta');
  if (title) sources.push('title');
  return {
    siteName,
    titleName: title ?? cleanTitle(ogTitle),
    description: ogDescription ?? metaDescription,
    ogUrl,
    canonical: httpUrl(scan.canonical, base),
    twitterSite,
    sources,
  };
}

/** The signals without the fields that are undefined (so that they compare and serialise cleanly). */
function prune(s: WebsiteSignals): WebsiteSignals {
  const out = {} as Record<string, unknown>;
  for (const [k, v] of Object.entries(s)) if (v !== undefined) out[k] = v;
  return out as unknown as WebsiteSignals;
}

// ---------------------------------------------------------------------------------------------
// Reading the HTML

/** What one pass over the page's tokens collects. */
interface PageScan {
  title?: string;
  /** The first non-empty content of each META_KEYS name or property. */
  meta: Map<string, string>;
  canonical?: string;
  /** The first <base href>. */
  base?: string;
  /** The texts of the JSON-LD scripts within the size limit, in page order. */
  jsonLd: string[];
  /** The hrefs of the first MAX_ANCHORS <a> elements. */
  hrefs: string[];
  /** The first MAX_RESOURCES script and frame srcs and resource-link hrefs, as written. */
  resources: string[];
}

/** The text of an element being read: the first <title>, or a JSON-LD <script>. */
interface Capture {
  tag: 'title' | 'script';
  text: string;
  limit: number;
  over: boolean;
}

/** Elements whose content the tokenizer reads as text with character references (RCDATA). */
const RCDATA_TAGS = new Set(['title', 'textarea']);
/** Elements whose content is raw text (scripting on, as in a browser, so <noscript> too). */
const RAWTEXT_TAGS = new Set(['style', 'xmp', 'iframe', 'noembed', 'noframes', 'noscript']);
/** SVG and MathML: inside them <title>, <script> and <a> are not the page's. */
const FOREIGN_ROOTS = new Set(['svg', 'math']);
/** HTML tags that end SVG or MathML content that was left open (the start tags the HTML standard names, and structural end tags). */
const LEAVE_FOREIGN = new Set([
  'b', 'big', 'blockquote', 'body', 'br', 'center', 'code', 'dd', 'div', 'dl', 'dt', 'em', 'embed', 'h1', 'h2', 'h3',
  'h4', 'h5', 'h6', 'head', 'hr', 'i', 'img', 'li', 'listing', 'menu', 'meta', 'nobr', 'ol', 'p', 'pre', 'ruby', 's',
  'small', 'span', 'strong', 'strike', 'sub', 'sup', 'table', 'tt', 'u', 'ul', 'var', 'html', 'section', 'header',
  'footer', 'nav', 'main', 'article', 'aside', 'form', 'button', 'td', 'th', 'tr',
]);
const MAX_TITLE_CHARS = 64 * 1024;

/**
 * One pass of parse5's tokenizer over the page, told what the tree builder would tell it (which
 * elements hold raw text or RCDATA, when SVG or MathML content starts and ends), collecting the
 * elements read here. No tree is built.
 */
class PageScanner implements TokenHandler {
  readonly scan: PageScan = { meta: new Map(), jsonLd: [], hrefs: [], resources: [] };
  readonly onParseError = null;
  readonly #tokenizer = new Tokenizer({ sourceCodeLocationInfo: false }, this);
  #capture: Capture | undefined;
  #titleSeen = false;
  #foreign = 0;
  #anchors = 0;

  read(html: string): PageScan {
    try {
      this.#tokenizer.write(html, true);
    } catch {
      // Nothing here is expected to throw; if the tokenizer ever does, keep what was read.
    }
    this.#finishCapture();
    return this.scan;
  }

  onStartTag(tag: Token.TagToken): void {
    if (this.#foreign > 0 && !LEAVE_FOREIGN.has(tag.tagName)) {
      if (FOREIGN_ROOTS.has(tag.tagName) && !tag.selfClosing) this.#setForeign(this.#foreign + 1);
      return;
    }
    this.#setForeign(0);
    if (FOREIGN_ROOTS.has(tag.tagName)) {
      if (!tag.selfClosing) this.#setForeign(1);
      return;
    }
    this.#htmlStartTag(tag);
  }

  onEndTag(tag: Token.TagToken): void {
    if (this.#foreign > 0) {
      if (FOREIGN_ROOTS.has(tag.tagName)) this.#setForeign(this.#foreign - 1);
      else if (LEAVE_FOREIGN.has(tag.tagName)) this.#setForeign(0);
      return;
    }
    // In RCDATA and script data the only end tag the tokenizer emits is the element's own.
    if (this.#capture?.tag === tag.tagName) this.#finishCapture();
  }

  onCharacter(token: Token.CharacterToken): void {
    this.#append(token.chars);
  }

  onWhitespaceCharacter(token: Token.CharacterToken): void {
    this.#append(token.chars);
  }

  onNullCharacter(token: Token.CharacterToken): void {
    this.#append(token.chars);
  }

  onEof(): void {
    this.#finishCapture();
  }

  onComment(): void {}

  onDoctype(): void {}

  #htmlStartTag(tag: Token.TagToken): void {
    const name = tag.tagName;
    if (RCDATA_TAGS.has(name)) this.#tokenizer.state = TokenizerMode.RCDATA;
    else if (RAWTEXT_TAGS.has(name)) this.#tokenizer.state = TokenizerMode.RAWTEXT;
    else if (name === 'plaintext') this.#tokenizer.state = TokenizerMode.PLAINTEXT;
    switch (name) {
      case 'title':
        if (!this.#titleSeen) this.#capture = { tag: 'title', text: '', limit: MAX_TITLE_CHARS, over: false };
        this.#titleSeen = true;
        break;
      case 'script':
        this.#resource(attr(tag, 'src'));
        this.#tokenizer.state = TokenizerMode.SCRIPT_DATA;
        if (isJsonLdType(attr(tag, 'type'))) this.#capture = { tag: 'script', text: '', limit: MAX_JSONLD_BYTES, over: false };
        break;
      case 'meta':
        visitMeta(tag, this.scan.meta);
        break;
      case 'link': {
        const rel = tokens(attr(tag, 'rel'));
        if (this.scan.canonical === undefined && rel.includes('canonical')) this.scan.canonical = attr(tag, 'href');
        if (rel.some((r) => RESOURCE_RELS.includes(r))) this.#resource(attr(tag, 'href'));
        break;
      }
      case 'iframe':
        this.#resource(attr(tag, 'src'));
        break;
      case 'base':
        this.scan.base ??= attr(tag, 'href');
        break;
      case 'a': {
        this.#anchors++;
        const href = attr(tag, 'href');
        if (this.#anchors <= MAX_ANCHORS && href !== undefined) this.scan.hrefs.push(href);
        break;
      }
    }
  }

  #resource(url: string | undefined): void {
    if (url !== undefined && url.trim() !== '' && this.scan.resources.length < MAX_RESOURCES) this.scan.resources.push(url.trim());
  }

  #setForeign(depth: number): void {
    this.#foreign = depth;
    this.#tokenizer.inForeignNode = depth > 0; // CDATA sections exist only in foreign content
  }

  #append(chars: string): void {
    const c = this.#capture;
    if (!c || c.over) return;
    if (c.text.length + chars.length > c.limit) {
      c.over = true;
      c.text = '';
    } else c.text += chars;
  }

  #finishCapture(): void {
    const c = this.#capture;
    this.#capture = undefined;
    if (!c || c.over) return;
    if (c.tag === 'title') this.scan.title = c.text;
    else if (Buffer.byteLength(c.text, 'utf8') <= MAX_JSONLD_BYTES) this.scan.jsonLd.push(c.text);
  }
}

function visitMeta(tag: Token.TagToken, meta: Map<string, string>): void {
  const content = attr(tag, 'content')?.trim();
  if (!content) return;
  for (const keyAttr of ['property', 'name']) {
    const key = attr(tag, keyAttr)?.trim().toLowerCase();
    if (key && META_KEYS.has(key) && !meta.has(key)) meta.set(key, content);
  }
}

/** An attribute's value (the tokenizer has lower-cased the names and dropped repeats). */
function attr(tag: Token.TagToken, name: string): string | undefined {
  return tag.attrs.find((a) => a.name === name)?.value;
}

function tokens(value: string | undefined): string[] {
  return (value ?? '').toLowerCase().split(/\s+/).filter(Boolean);
}

/** `application/ld+json`, in any case, with parameters or not. */
function isJsonLdType(type: string | undefined): boolean {
  return (type ?? '').split(';')[0]!.trim().toLowerCase() === 'application/ld+json';
}

// ---------------------------------------------------------------------------------------------
// Values: text and URLs

/** Whitespace collapsed, control characters removed; undefined when empty or longer than `max`. */
function clean(value: string | undefined, max: number): string | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value.replace(/[\u0000-\u001f\u007f\s]+/g, ' ').trim();
  return text === '' || text.length > max ? undefined : text;
}

/** `raw` resolved against `base` as an http(s) URL, or undefined. */
function httpUrl(raw: string | undefined, base: URL | undefined): URL | undefined {
  if (typeof raw !== 'string') return undefined;
  const text = raw.trim();
  if (text === '' || text.length > MAX_URL) return undefined;
  try {
    const url = new URL(text, base);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}

const TITLE_SEPARATORS = /\s+(?:[|\-–—·•]|::)\s+/;
/** Title parts that name the page, not the company. */
const GENERIC_TITLES = new Set(['home', 'homepage', 'home page', 'welcome', 'index', 'main', 'main page', 'start', 'startseite', 'accueil', 'inicio', 'official site', 'official website', 'untitled', 'default']);

/**
 * A company name from a page title: the title cut at its separators (" | ", " - ", " – ", " — ",
 * " · ", " • ", " :: "), "Welcome to" dropped, generic parts ("Home") left out; the shortest part
 * that is left (the first of equals).
 */
function cleanTitle(title: string | undefined): string | undefined {
  const whole = clean(title, MAX_TEXT);
  if (!whole) return undefined;
  let best: string | undefined;
  for (const part of whole.split(TITLE_SEPARATORS)) {
    const name = part.replace(/^welcome to\s+/i, '').trim();
    if (!meaningful(name)) continue;
    if (best === undefined || name.length < best.length) best = name;
  }
  return best !== undefined && best.length <= MAX_NAME ? best : undefined;
}

function meaningful(part: string): boolean {
  return part.length >= 2 && /[\p{L}\p{N}]/u.test(part) && !GENERIC_TITLES.has(part.toLowerCase());
}

// ---------------------------------------------------------------------------------------------
// JSON-LD: finding the Organization

type JsonObject = Record<string, unknown>;

/** schema.org's Organization and its subtypes (the common LocalBusiness ones among them). */
const ORGANIZATION_TYPES = new Set([
  'Organization', 'Airline', 'Consortium', 'Corporation', 'EducationalOrganization', 'CollegeOrUniversity',
  'ElementarySchool', 'HighSchool', 'MiddleSchool', 'Preschool', 'School', 'FundingScheme',
  'GovernmentOrganization', 'LibrarySystem', 'LocalBusiness', 'MedicalOrganization', 'NewsMediaOrganization',
  'NGO', 'OnlineBusiness', 'OnlineStore', 'PerformingGroup', 'DanceGroup', 'MusicGroup', 'TheaterGroup',
  'PoliticalParty', 'Project', 'FundingAgency', 'ResearchProject', 'ResearchOrganization',
  'SearchRescueOrganization', 'SportsOrganization', 'SportsTeam', 'WorkersUnion',
  'AnimalShelter', 'ArchiveOrganization', 'AutomotiveBusiness', 'ChildCare', 'Dentist', 'DryCleaningOrLaundry',
  'EmergencyService', 'EmploymentAgency', 'EntertainmentBusiness', 'FinancialService', 'BankOrCreditUnion',
  'InsuranceAgency', 'AccountingService', 'FoodEstablishment', 'Restaurant', 'Bakery', 'BarOrPub',
  'CafeOrCoffeeShop', 'Brewery', 'Winery', 'HealthAndBeautyBusiness', 'HomeAndConstructionBusiness',
  'GeneralContractor', 'InternetCafe', 'LegalService', 'Attorney', 'Notary', 'Library', 'LodgingBusiness',
  'Hotel', 'MedicalBusiness', 'MedicalClinic', 'Hospital', 'Pharmacy', 'Physician', 'VeterinaryCare',
  'DiagnosticLab', 'ProfessionalService', 'RadioStation', 'RealEstateAgent', 'RecyclingCenter', 'SelfStorage',
  'ShoppingCenter', 'SportsActivityLocation', 'Store', 'TelevisionStation', 'TouristInformationCenter',
  'TravelAgency',
]);

interface Candidate {
  node: JsonObject;
  /** A root, an element of a root array or of a root @graph: the page's own subject. */
  topLevel: boolean;
}

/** The Organization the page is about: top-level before nested, the page's own host first, then page order. */
function chooseOrganization(blocks: string[], base: URL | undefined): JsonObject | undefined {
  const candidates = organizationCandidates(blocks.map(parseJson).filter((v) => v !== undefined));
  let best: Candidate | undefined;
  let bestScore = -1;
  for (const c of candidates) {
    const score = (c.topLevel ? 4 : 0) + (sameSite(c.node, base) ? 2 : 0) + (text(c.node['name']) ? 1 : 0);
    if (score > bestScore) [best, bestScore] = [c, score];
  }
  return best?.node;
}

/** A JSON-LD block's value, or undefined when it is not JSON (an HTML comment or CDATA wrapper aside). */
function parseJson(block: string): unknown {
  const body = block
    .trim()
    .replace(/^(?:\/\/\s*)?(?:<!--|<!\[CDATA\[)/, '')
    .replace(/(?:\/\/\s*)?(?:-->|\]\]>)$/, '')
    .trim();
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

interface Visit {
  value: object;
  depth: number;
  topLevel: boolean;
}

/**
 * Every object typed as an Organization, breadth-first over all blocks; at most MAX_JSON_NODES
 * objects and arrays are queued, none deeper than MAX_JSON_DEPTH.
 */
function organizationCandidates(roots: unknown[]): Candidate[] {
  const queue: Visit[] = [];
  const enqueue = (value: unknown, depth: number, topLevel: boolean): void => {
    if (value !== null && typeof value === 'object' && depth <= MAX_JSON_DEPTH && queue.length < MAX_JSON_NODES) queue.push({ value, depth, topLevel });
  };
  for (const root of roots) {
    if (Array.isArray(root)) for (const v of root) enqueue(v, 1, true);
    else enqueue(root, 0, true);
  }
  const found: Candidate[] = [];
  for (let i = 0; i < queue.length; i++) {
    const { value, depth, topLevel } = queue[i]!;
    if (Array.isArray(value)) {
      for (const v of value) enqueue(v, depth + 1, false);
      continue;
    }
    const node = value as JsonObject;
    if (typesOf(node).some((t) => ORGANIZATION_TYPES.has(t))) found.push({ node, topLevel });
    for (const [key, v] of Object.entries(node)) {
      // The members of a top-level @graph are top-level themselves.
      if (key === '@graph' && topLevel && Array.isArray(v)) for (const g of v) enqueue(g, depth + 1, true);
      else enqueue(v, depth + 1, false);
    }
  }
  return found;
}

/** The local names of a node's @type ("schema:Corporation", "https://schema.org/NGO" → "Corporation", "NGO"). */
function typesOf(node: JsonObject): string[] {
  const raw = node['@type'];
  const list = Array.isArray(raw) ? raw : [raw];
  return list.filter((t): t is string => typeof t === 'string').map((t) => t.trim().replace(/^.*[/#:]/, ''));
}

/** Whether the node's url is on the page's host (www. aside). */
function sameSite(node: JsonObject, base: URL | undefined): boolean {
  const url = httpUrl(text(node['url']), base);
  const bare = (h: string): string => h.replace(/^www\./, '');
  return url !== undefined && base !== undefined && bare(url.hostname) === bare(base.hostname);
}

/**
 * A JSON-LD value as text: a string, a number, {"@value": ...}, or the first of an array of
 * those; undefined otherwise.
 */
function text(value: unknown, max = MAX_TEXT): string | undefined {
  const first = Array.isArray(value) ? value.find((v) => scalar(v) !== undefined) : value;
  const s = scalar(first);
  return s === undefined ? undefined : clean(s, max);
}

function scalar(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const inner = (value as JsonObject)['@value'];
    if (typeof inner === 'string' || (typeof inner === 'number' && Number.isFinite(inner))) return String(inner);
  }
  return undefined;
}

/** An object value, or the first object of an array value. */
function object(value: unknown): JsonObject | undefined {
  const first = Array.isArray(value) ? value.find((v) => v !== null && typeof v === 'object' && !Array.isArray(v)) : value;
  return first !== null && typeof first === 'object' && !Array.isArray(first) ? (first as JsonObject) : undefined;
}

// ---------------------------------------------------------------------------------------------
// JSON-LD: reading the Organization

interface OrganizationFacts {
  name?: string;
  legalName?: string;
  description?: string;
  url?: URL;
  foundedYear?: number;
  employees: { count?: number; range?: EmployeeRange };
  companyType?: Extract<CompanyType, 'government' | 'nonprofit'>;
  location?: WebsiteLocation;
  telephone?: string;
  sameAs: string[];
  logo?: string;
}

function organizationFacts(node: JsonObject, base: URL | undefined): OrganizationFacts {
  return {
    name: text(node['name'], MAX_NAME),
    legalName: text(node['legalName'], MAX_NAME),
    description: text(node['description']),
    url: httpUrl(text(node['url'], MAX_URL), base),
    foundedYear: foundingYear(node['foundingDate']),
    employees: employees(node['numberOfEmployees']),
    companyType: companyType(node),
    location: location(node),
    telephone: text(node['telephone'], MAX_SHORT),
    sameAs: sameAs(node['sameAs']),
    logo: logo(node['logo'], base),
  };
}

/** The year of an ISO 8601 date ("1999", "1999-05", "1999-05-01T..."), from 1600 to this year. */
function foundingYear(value: unknown): number | undefined {
  const s = text(value, MAX_SHORT);
  const m = s === undefined ? null : /^(\d{4})(?:$|[-/T ])/.exec(s);
  if (!m) return undefined;
  const year = Number(m[1]);
  return year >= 1600 && year <= new Date().getUTCFullYear() ? year : undefined;
}

const EMPLOYEE_BUCKETS: Array<[number, EmployeeRange]> = [
  [10, '1-10'],
  [50, '11-50'],
  [200, '51-200'],
  [500, '201-500'],
  [1000, '501-1000'],
  [5000, '1001-5000'],
  [Infinity, '5001+'],
];
const MAX_EMPLOYEES = 10_000_000;

function bucket(n: number): EmployeeRange {
  return EMPLOYEE_BUCKETS.find(([upTo]) => n <= upTo)![1];
}

/**
 * numberOfEmployees: a number, a string ("250", "1,200", "51-200", "5001+") or a
 * QuantitativeValue (value, or minValue/maxValue). A count only from one figure; a range from a
 * figure, or from bounds that fall in one bucket (an open upper bound only for 5001+).
 */
function employees(value: unknown): { count?: number; range?: EmployeeRange } {
  const { min, max } = headcount(value);
  if (min === undefined) return {};
  if (max === undefined) return min > 5000 ? { range: '5001+' } : {};
  if (min === max) return { count: min, range: bucket(min) };
  return min < max && bucket(min) === bucket(max) ? { range: bucket(min) } : {};
}

function headcount(value: unknown): { min?: number; max?: number } {
  const q = object(value);
  if (!q || scalar(q) !== undefined) return headcountText(text(value, MAX_SHORT));
  if (q['value'] !== undefined) return headcountText(text(q['value'], MAX_SHORT));
  const min = figure(text(q['minValue'], MAX_SHORT));
  const max = figure(text(q['maxValue'], MAX_SHORT));
  return min === undefined ? {} : { min, max };
}

/** "250", "1,200", "51-200", "51 to 200", "5001+". */
function headcountText(s: string | undefined): { min?: number; max?: number } {
  if (s === undefined) return {};
  const range = /^(.+?)\s*(?:[-–—]|to)\s*(.+)$/i.exec(s);
  if (range) {
    const [min, max] = [figure(range[1]), figure(range[2])];
    return min !== undefined && max !== undefined ? { min, max } : {};
  }
  const open = /^(.+?)\s*\+$/.exec(s);
  if (open) return { min: figure(open[1]) };
  const n = figure(s);
  return n === undefined ? {} : { min: n, max: n };
}

/** A whole number of people: digits, with thousands separators or not; 1 to MAX_EMPLOYEES. */
function figure(s: string | undefined): number | undefined {
  if (s === undefined) return undefined;
  const t = s.trim();
  if (!/^\d{1,3}(?:[,.\s'’\u00a0]\d{3})+$|^\d+$/.test(t)) return undefined;
  const n = Number(t.replace(/\D/g, ''));
  return n >= 1 && n <= MAX_EMPLOYEES ? n : undefined;
}

function companyType(node: JsonObject): OrganizationFacts['companyType'] {
  const types = typesOf(node);
  if (types.includes('GovernmentOrganization')) return 'government';
  // nonprofitStatus names a NonprofitType member, as text or as {"@id": ...}.
  const status = node['nonprofitStatus'];
  const named = text(status) ?? text(object(status)?.['@id']) ?? text(object(status)?.['name']);
  return types.includes('NGO') || named !== undefined ? 'nonprofit' : undefined;
}

/** The PostalAddress of `address`, else of `location` (a Place with an address, or an address). */
function location(node: JsonObject): WebsiteLocation | undefined {
  const place = object(node['location']);
  const address = object(node['address']) ?? object(place?.['address']) ?? place;
  if (!address) return undefined;
  const out: WebsiteLocation = {
    city: text(address['addressLocality'], MAX_SHORT),
    region: text(address['addressRegion'], MAX_SHORT),
    ...country(address['addressCountry']),
  };
  const present = Object.entries(out).filter(([, v]) => v !== undefined);
  return present.length > 0 ? (Object.fromEntries(present) as WebsiteLocation) : undefined;
}

/** addressCountry: a code or a name, as a string or a Country's name. */
function country(value: unknown): { country?: string; country_code?: string } {
  const raw = text(value, MAX_SHORT) ?? text(object(value)?.['name'], MAX_SHORT);
  if (raw === undefined) return {};
  if (/^[A-Za-z]{2}$/.test(raw)) {
    const code = isoCountryCode(raw);
    return code ? { country: englishName(code), country_code: code } : { country: raw };
  }
  const code = countryByName(raw);
  return code ? { country: raw, country_code: code } : { country: raw };
}

/** sameAs: absolute http(s) URLs only (a profile elsewhere is never relative to the page). */
function sameAs(value: unknown): string[] {
  const list = Array.isArray(value) ? value : [value];
  const out: string[] = [];
  for (const v of list) {
    const url = typeof v === 'string' ? httpUrl(v, undefined) : undefined;
    if (url && !out.includes(url.href)) out.push(url.href);
    if (out.length >= MAX_SAME_AS) break;
  }
  return out;
}

/** logo: a URL, or an ImageObject's url or contentUrl. */
function logo(value: unknown, base: URL | undefined): string | undefined {
  const image = object(value);
  const raw = image && scalar(image) === undefined ? (text(image['url'], MAX_URL) ?? text(image['contentUrl'], MAX_URL)) : text(value, MAX_URL);
  return httpUrl(raw, base)?.href;
}

// ---------------------------------------------------------------------------------------------
// Countries, from the runtime's own region names (no table kept here)

/** Codes outside ISO 3166-1's assigned ones that the runtime still names. */
const NOT_COUNTRIES = new Set(['AC', 'CP', 'CQ', 'DG', 'EA', 'EU', 'EZ', 'IC', 'TA', 'UN']);
/** The languages whose country names are understood. */
const NAME_LOCALES = ['en', 'de', 'fr', 'es', 'it', 'nl', 'pt'];

/** The ISO 3166-1 alpha-2 code of a two-letter code in any case ("uk" → "GB"), or undefined. */
function isoCountryCode(raw: string): string | undefined {
  let canonical: string | undefined;
  try {
    canonical = new Intl.Locale(`und-${raw.toUpperCase()}`).region;
  } catch {
    return undefined;
  }
  return canonical !== undefined && isAssigned(canonical) ? canonical : undefined;
}

/** An assigned ISO 3166-1 alpha-2 code in its current form (not UK or DD, say). */
function isAssigned(code: string): boolean {
  if (!/^[A-Z]{2}$/.test(code) || NOT_COUNTRIES.has(code)) return false;
  if (code === 'AA' || code === 'ZZ' || /^Q[M-Z]$|^X[A-Z]$/.test(code)) return false; // user-assigned
  if (new Intl.Locale(`und-${code}`).region !== code) return false; // a deprecated alias
  return englishName(code) !== undefined;
}

let englishNames: Intl.DisplayNames | undefined;
function englishName(code: string): string | undefined {
  englishNames ??= new Intl.DisplayNames(['en'], { type: 'region', fallback: 'none' });
  return englishNames.of(code);
}

let countriesByName: Map<string, string> | undefined;

/** The code of a country name in one of NAME_LOCALES, long or short form ("United Kingdom", "UK", "Deutschland"). */
function countryByName(name: string): string | undefined {
  countriesByName ??= buildCountryNames();
  return countriesByName.get(foldName(name));
}

/** Every assigned code's names, folded; the first language to claim a name keeps it. */
function buildCountryNames(): Map<string, string> {
  const map = new Map<string, string>();
  const codes: string[] = [];
  for (let a = 65; a <= 90; a++) for (let b = 65; b <= 90; b++) codes.push(String.fromCharCode(a, b));
  const assigned = codes.filter(isAssigned);
  for (const locale of NAME_LOCALES) {
    for (const style of ['long', 'short'] as const) {
      const names = new Intl.DisplayNames([locale], { type: 'region', style, fallback: 'none' });
      for (const code of assigned) {
        const n = names.of(code);
        if (n !== undefined && !map.has(foldName(n))) map.set(foldName(n), code);
      }
    }
  }
  return map;
}

/** A country name compared loosely: case, accents, punctuation, "&"/"and", "St."/"Saint", a leading "The". */
function foldName(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/&/g, ' and ')
    .replace(/[.,'’()\-–]/g, ' ')
    .replace(/\bst\b/g, 'saint')
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/^the /, '');
}

// ---------------------------------------------------------------------------------------------
// Links: social profiles and the telephone

type SocialKind = 'linkedin' | 'twitter' | 'facebook';

interface Profile {
  kind: SocialKind;
  /** Canonical. */
  url: string;
}

interface LinkSignals {
  /** Each profile seen in <a> links, by canonical URL, with its count, in order of first sight. */
  tally: Map<string, { profile: Profile; count: number }>;
  phone?: string;
  found: boolean;
}

function linkSignals(hrefs: string[], base: URL | undefined): LinkSignals {
  const tally: LinkSignals['tally'] = new Map();
  let phone: string | undefined;
  for (const href of hrefs) {
    if (/^\s*tel:/i.test(href)) {
      phone ??= telText(href);
      continue;
    }
    const profile = socialProfile(href, base);
    if (profile) tally.set(profile.url, { profile, count: (tally.get(profile.url)?.count ?? 0) + 1 });
  }
  return { tally, phone, found: tally.size > 0 || phone !== undefined };
}

/** The number of a tel: link, unescaped, or undefined when it has no digit. */
function telText(href: string): string | undefined {
  const rest = href.trim().slice(4);
  let decoded = rest;
  try {
    decoded = decodeURIComponent(rest);
  } catch {
    // keep it escaped
  }
  const number = clean(decoded, MAX_SHORT);
  return number && /\d/.test(number) ? number : undefined;
}

/**
 * The profile a page prefers for one network: the first in its JSON-LD sameAs, else the one its
 * meta tags name (twitter:site), else the one its links name most often (the first of equals).
 */
function pickSocial(kind: SocialKind, sameAsUrls: string[], fromMeta: string | undefined, tally: LinkSignals['tally']): string | undefined {
  for (const u of sameAsUrls) {
    const p = socialProfile(u, undefined);
    if (p?.kind === kind) return p.url;
  }
  if (fromMeta) return fromMeta;
  let best: string | undefined;
  let bestCount = 0;
  for (const { profile, count } of tally.values()) {
    if (profile.kind === kind && count > bestCount) [best, bestCount] = [profile.url, count];
  }
  return best;
}

/**
 * The canonical URL of an X/Twitter account or a Facebook page as a vendor gives it (with or
 * without a scheme: `facebook.com/Acme` → `https://www.facebook.com/acme`), the same form the
 * home page's links get; null when it is not one.
 */
export function canonicalSocialUrl(kind: 'twitter' | 'facebook', href: string | null): string | null {
  if (!href) return null;
  const p = socialProfile(/^https?:\/\//i.test(href) ? href : `https://${href.replace(/^\/\//, '')}`, undefined);
  return p?.kind === kind ? p.url : null;
}

/** The canonical profile URL of a LinkedIn company, X/Twitter account or Facebook page link. */
function socialProfile(href: string, base: URL | undefined): Profile | undefined {
  const url = httpUrl(href, base);
  if (!url) return undefined;
  const linkedin = canonicalLinkedInCompanyUrl(url.href);
  if (linkedin) return { kind: 'linkedin', url: linkedin };
  const host = url.hostname;
  if (/^(?:(?:www|mobile)\.)?(?:twitter|x)\.com$/.test(host)) {
    const handle = twitterHandle(url.pathname);
    return handle ? { kind: 'twitter', url: `https://twitter.com/${handle}` } : undefined;
  }
  if (/^(?:(?:www|m|mobile|web)\.)?facebook\.com$|^(?:www\.)?fb\.com$/.test(host)) {
    const page = facebookPage(url);
    return page ? { kind: 'facebook', url: `https://www.facebook.com/${page}` } : undefined;
  }
  return undefined;
}

/** X/Twitter paths that are features, not accounts. */
const TWITTER_RESERVED = new Set([
  'intent', 'share', 'home', 'hashtag', 'search', 'i', 'explore', 'notifications', 'messages', 'settings',
  'login', 'logout', 'signup', 'tos', 'privacy', 'about', 'compose', 'widgets', 'account', 'download',
  'who_to_follow', 'lists', 'topics', 'rules', 'help', 'jobs', 'status', 'statuses',
]);

/** The lower-cased handle of an account path (`/AcmeRobotics`, `/acmerobotics/status/1`). */
function twitterHandle(pathname: string): string | undefined {
  const first = pathname.split('/')[1] ?? '';
  const handle = first.replace(/^@/, '').toLowerCase();
  return /^[a-z0-9_]{1,15}$/.test(handle) && !TWITTER_RESERVED.has(handle) ? handle : undefined;
}

/** twitter:site as "@handle", "handle" or an account URL. */
function twitterFromMeta(value: string | undefined): string | undefined {
  const v = value?.trim();
  if (!v) return undefined;
  const handle = /^@?([A-Za-z0-9_]{1,15})$/.exec(v)?.[1]?.toLowerCase();
  if (handle) return TWITTER_RESERVED.has(handle) ? undefined : `https://twitter.com/${handle}`;
  const profile = socialProfile(v, undefined);
  return profile?.kind === 'twitter' ? profile.url : undefined;
}

/** Facebook paths that are features, not pages. */
const FACEBOOK_RESERVED = new Set([
  'sharer', 'sharer.php', 'share', 'share.php', 'dialog', 'plugins', 'tr', 'login', 'login.php', 'l.php',
  'home.php', 'groups', 'events', 'watch', 'photo', 'photo.php', 'photos', 'pages', 'people', 'hashtag',
  'help', 'policies', 'policy.php', 'privacy', 'legal', 'terms', 'ads', 'business', 'gaming',
  'marketplace', 'story.php', 'permalink.php', 'recover', 'settings', 'messages', 'notifications',
  'search', 'video.php', 'media', 'stories', 'reel', 'live', 'fundraisers', 'profile.php', 'pg',
]);

/**
 * The lower-cased name of a page path (`/AcmeRobotics`, `/pg/acmerobotics/about`), or
 * `profile.php?id=<digits>` for pages that only have a number.
 */
function facebookPage(url: URL): string | undefined {
  const segments = url.pathname.split('/');
  const first = (segments[1] ?? '').toLowerCase();
  if (first === 'profile.php') {
    const id = url.searchParams.get('id');
    return id && /^\d{1,20}$/.test(id) ? `profile.php?id=${id}` : undefined;
  }
  const name = (first === 'pg' ? (segments[2] ?? '') : first).toLowerCase();
  return /^[a-z0-9][a-z0-9.-]{0,99}$/.test(name) && !name.endsWith('.php') && !FACEBOOK_RESERVED.has(name) ? name : undefined;
}
