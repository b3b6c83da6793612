// The sim's websites as data: which web host each fictional company has, what its home page says
// (schema.org JSON-LD, OpenGraph, plain meta tags, social links) or how it misbehaves (redirects,
// a 10 s wait, a 20 MiB page, a 500, a certificate for the wrong name), plus the MX and TXT
// records a company-enrichment feature reads next to the page. dns.ts builds A/MX/TXT records from
// this list and web.ts serves the pages, so the zone, the servers and the README share one source.
//
// Addresses: every website has its own 127.0.80.N (HTTP and HTTPS servers listen there, on the
// sim's two web ports). The MX hosts of these domains are 127.0.81.N, where nothing listens: the
// enrichment feature only reads MX names, so no SMTP server is started for them (a connection is
// refused at once). Their exchange names follow the patterns of the big providers
// (aspmx.l.google.com, <tenant>.mail.protection.outlook.com) so provider detection can be tested;
// they exist only in the sim's zone, and the sim never connects anywhere outside 127.0.0.0/8.
//
// Every company, person, address, phone number and social handle below is made up. Phone numbers
// come from ranges kept free for fiction: +1 NXX-555-0100..0199, and Berlin's +49 30 23125 xxx.

/** What one route answers. Bodies are UTF-8 HTML unless said otherwise. */
export type SimPage =
  /** A fixed page; with `delayMs`, the response (headers included) only starts after that long. */
  | { kind: 'html'; status: number; html: string; delayMs?: number; headers?: Record<string, string> }
  /** A redirect: the status and the Location header, nothing else that matters. */
  | { kind: 'redirect'; status: 301 | 302 | 303 | 307 | 308; location: string }
  /** A 200 page of exactly `bytes` bytes, streamed chunk by chunk (chunked encoding, no Content-Length). */
  | { kind: 'stream'; bytes: number };

export interface SimRoute {
  /** `apex`: only `<domain>`; `www`: only `www.<domain>`; `any`: both. */
  host: 'apex' | 'www' | 'any';
  /** Exact path (query string ignored), or `*` for every path. */
  path: string;
  page: SimPage;
}

export interface SimWebsiteMx {
  exchange: string;
  priority: number;
  /** A record of the exchange (nothing listens there); without it the exchange name does not exist. */
  ip?: string;
}

export interface SimWebsite {
  /** The registrable name (ASCII); `www.<domain>` is served too. */
  domain: string;
  /** Stable name of the behaviour this site demonstrates. */
  behaviour: string;
  /** One line for people (README, `npm run sim`). */
  description: string;
  /** A record of `<domain>` and `www.<domain>`, where the web servers listen; null: neither name has an A record. */
  ip: string | null;
  /** TXT records of `<domain>`, one string each (longer than 255 bytes: served as several character-strings). */
  txt?: string[];
  /** MX records of `<domain>`. */
  mx?: SimWebsiteMx[];
  /** DNS names of the certificate the HTTPS server presents for this site; default `<domain>` and `www.<domain>`. */
  certNames?: string[];
  /** Routes, first match wins; an unmatched request gets a 404 page. */
  pages: SimRoute[];
}

const web = (n: number): string => `127.0.80.${n}`;
const mxIp = (n: number): string => `127.0.81.${n}`;

const MiB = 1024 * 1024;

/** The name on the certificate broken-tls.test presents (a name that is none of the site's). */
export const SIM_WRONG_CERT_NAME = 'unrelated-host.test';
/** Size of huge-site.test's home page. */
export const SIM_HUGE_PAGE_BYTES = 20 * MiB;
/** How long slow-site.test's home page takes to start answering. */
export const SIM_SLOW_PAGE_MS = 10_000;

const ok = (html: string, headers?: Record<string, string>): SimPage => ({ kind: 'html', status: 200, html, ...(headers && { headers }) });
const home = (page: SimPage): SimRoute => ({ host: 'any', path: '/', page });
const everywhere = (page: SimPage): SimRoute => ({ host: 'any', path: '*', page });

/** A `<script type="application/ld+json">` block; `</` is escaped so the JSON cannot end the script early. */
function jsonLd(data: unknown): string {
  return `<script type="application/ld+json">${JSON.stringify(data, null, 2).replace(/<\//g, '<\\/')}</script>`;
}

const ACME_JSON_LD = {
  '@context': 'https://schema.org',
  '@type': 'Organization',
  name: 'Acme Robotics',
  description: 'Acme Robotics designs autonomous picking robots for mid-sized warehouses.',
  url: 'https://acme-robotics.test/',
  logo: 'https://acme-robotics.test/static/logo.png',
  foundingDate: '2011-04-01',
  numberOfEmployees: { '@type': 'QuantitativeValue', value: 120 },
  address: {
    '@type': 'PostalAddress',
    streetAddress: '1400 Sample Parkway',
    addressLocality: 'Austin',
    addressRegion: 'TX',
    postalCode: '78701',
    addressCountry: 'US',
  },
  telephone: '+1 512-555-0142',
  sameAs: ['https://www.linkedin.com/company/acme-robotics', 'https://twitter.com/acmerobotics'],
};

const ACME_HOME = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Acme Robotics | Warehouse robots that pick</title>
<meta name="description" content="Acme Robotics designs autonomous picking robots for mid-sized warehouses.">
<meta property="og:type" content="website">
<meta property="og:site_name" content="Acme Robotics">
<meta property="og:title" content="Acme Robotics | Warehouse robots that pick">
<meta property="og:description" content="Autonomous picking robots for mid-sized warehouses.">
<meta property="og:url" content="https://acme-robotics.test/">
<meta property="og:image" content="https://acme-robotics.test/static/og-card.png">
<link rel="canonical" href="https://acme-robotics.test/">
<meta name="generator" content="WordPress 6.6.2">
<link rel="stylesheet" href="/wp-content/themes/acme/style.css">
<script async src="https://www.googletagmanager.com/gtag/js?id=G-SIMTEST01"></script>
<script src="//js.hs-scripts.com/0000000.js" async defer></script>
${jsonLd(ACME_JSON_LD)}
</head>
<body>
<header><a href="/"><img src="/static/logo.png" alt="Acme Robotics"></a></header>
<main>
<h1>Robots that pick, so your people do not have to</h1>
<p>Founded in Austin in 2011, Acme Robotics builds picking robots for warehouses of every size.</p>
<aside class="share">
Share this page:
<a href="https://www.linkedin.com/sharing/share-offsite/?url=https%3A%2F%2Facme-robotics.test%2F">LinkedIn</a>
<a href="https://twitter.com/intent/tweet?url=https%3A%2F%2Facme-robotics.test%2F&amp;text=Acme%20Robotics">Post on X</a>
<a href="https://www.facebook.com/sharer/sharer.php?u=https%3A%2F%2Facme-robotics.test%2F">Facebook</a>
</aside>
</main>
<footer>
<p>Acme Robotics, 1400 Sample Parkway, Austin, TX 78701 &middot; <a href="tel:+15125550142">+1 512-555-0142</a></p>
<ul class="social">
<li><a href="https://www.linkedin.com/company/acme-robotics" rel="noopener">LinkedIn</a></li>
<li><a href="https://twitter.com/acmerobotics" rel="noopener">X</a></li>
<li><a href="https://www.youtube.com/@acmerobotics" rel="noopener">YouTube</a></li>
</ul>
</footer>
</body>
</html>
`;

const GLOBEX_HOME = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Globex Meta - Industrial sensors</title>
<meta name="description" content="Globex Meta makes vibration and temperature sensors for factory machines.">
<meta property="og:type" content="website">
<meta property="og:site_name" content="Globex Meta">
<meta property="og:title" content="Globex Meta - Industrial sensors">
<meta property="og:description" content="Vibration and temperature sensors for factory machines.">
<meta property="og:url" content="https://globex-meta.test/">
</head>
<body>
<h1>Globex Meta</h1>
<p>Sensors that tell you a machine is wearing out before it stops.</p>
</body>
</html>
`;

const INITECH_JSON_LD = {
  '@context': 'https://schema.org',
  '@type': 'Organization',
  name: 'Initech',
  url: 'http://www.initech-redirect.test/',
};

const INITECH_HOME = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Initech</title>
${jsonLd(INITECH_JSON_LD)}
</head>
<body>
<h1>Initech</h1>
<p>Software for reports about other reports.</p>
</body>
</html>
`;

const UMBRELLA_JSON_LD = {
  '@context': 'https://schema.org',
  '@type': 'NGO',
  name: 'Umbrella Nonprofit e.V.',
  description: 'Umbrella Nonprofit lends rain gear to people who sleep rough in Berlin.',
  url: 'https://umbrella-nonprofit.test/',
  nonprofitStatus: 'gemeinnütziger eingetragener Verein',
  foundingDate: '1998-09-15',
  numberOfEmployees: { '@type': 'QuantitativeValue', minValue: 11, maxValue: 50 },
  address: {
    '@type': 'PostalAddress',
    streetAddress: 'Beispielstraße 7',
    postalCode: '10115',
    addressLocality: 'Berlin',
    addressCountry: 'DE',
  },
  telephone: '+49 30 23125 142',
  sameAs: ['https://www.facebook.com/umbrellanonprofit'],
};

const UMBRELLA_HOME = `<!doctype html>
<html lang="de">
<head>
<meta charset="utf-8">
<title>Umbrella Nonprofit e.V. – Regenschutz für alle</title>
<meta name="description" content="Umbrella Nonprofit verleiht Regenkleidung an Menschen ohne Obdach in Berlin.">
${jsonLd(UMBRELLA_JSON_LD)}
</head>
<body>
<h1>Umbrella Nonprofit e.V.</h1>
<p>Seit 1998 verleihen wir Regenkleidung in Berlin.</p>
<footer>
<p>Beispielstraße 7, 10115 Berlin &middot; Telefon +49 30 23125 142</p>
<a href="https://www.facebook.com/umbrellanonprofit">Facebook</a>
</footer>
</body>
</html>
`;

const BROKEN_TLS_HOME = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Broken TLS Ltd</title>
<meta property="og:site_name" content="Broken TLS Ltd">
</head>
<body><h1>Broken TLS Ltd</h1><p>Our certificate is someone else's.</p></body>
</html>
`;

const SLOW_HOME = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Slow Site</title></head><body><h1>Slow Site</h1></body></html>
`;

const ERROR_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>500 Internal Server Error</title></head><body><h1>Internal Server Error</h1></body></html>
`;

/**
 * An SPF record longer than 255 bytes (DNS serves it as two character-strings; an SPF reader joins
 * them). The addresses are the documentation ranges of RFC 5737.
 */
const UMBRELLA_SPF = `v=spf1 ${[
  ...Array.from({ length: 6 }, (_, i) => `ip4:192.0.2.${i * 16}/28`),
  ...Array.from({ length: 6 }, (_, i) => `ip4:198.51.100.${i * 16}/28`),
  ...Array.from({ length: 4 }, (_, i) => `ip4:203.0.113.${i * 16}/28`),
].join(' ')} include:spf.protection.outlook.com -all`;

export const SIM_WEBSITES: readonly SimWebsite[] = [
  {
    domain: 'acme-robotics.test',
    behaviour: 'organization-json-ld',
    description: 'full schema.org Organization JSON-LD, OpenGraph, social links in the footer (and share links to ignore); Google Workspace MX, SPF with Google and SendGrid',
    ip: web(1),
    txt: ['v=spf1 include:_spf.google.com include:sendgrid.net ~all', 'google-site-verification=abc123', 'atlassian-domain-verification=xyz'],
    mx: [
      { exchange: 'aspmx.l.google.com', priority: 1, ip: mxIp(1) },
      { exchange: 'alt1.aspmx.l.google.com', priority: 5, ip: mxIp(2) },
      { exchange: 'alt2.aspmx.l.google.com', priority: 5, ip: mxIp(3) },
    ],
    // Served behind Cloudflare, as many company sites are (the enrichment reads the headers).
    pages: [home(ok(ACME_HOME, { server: 'cloudflare', 'cf-ray': '8d0000000000-AUS' }))],
  },
  {
    domain: 'globex-meta.test',
    behaviour: 'opengraph-only',
    description: 'no JSON-LD: title, meta description and OpenGraph only; Microsoft 365 MX',
    ip: web(2),
    txt: ['v=spf1 include:spf.protection.outlook.com -all', 'MS=ms12345678'],
    mx: [{ exchange: 'globex-meta-test.mail.protection.outlook.com', priority: 0, ip: mxIp(4) }],
    pages: [home(ok(GLOBEX_HOME))],
  },
  {
    domain: 'initech-redirect.test',
    behaviour: 'redirect-to-www',
    description: 'the bare domain answers 301 to http://www.initech-redirect.test/, which has JSON-LD (name Initech)',
    ip: web(3),
    pages: [
      { host: 'apex', path: '*', page: { kind: 'redirect', status: 301, location: 'http://www.initech-redirect.test/' } },
      { host: 'www', path: '/', page: ok(INITECH_HOME) },
    ],
  },
  {
    domain: 'slow-site.test',
    behaviour: 'slow-response',
    description: `the home page starts answering only after ${SIM_SLOW_PAGE_MS / 1000} s`,
    ip: web(4),
    pages: [home({ kind: 'html', status: 200, html: SLOW_HOME, delayMs: SIM_SLOW_PAGE_MS })],
  },
  {
    domain: 'huge-site.test',
    behaviour: 'huge-page',
    description: `the home page is ${SIM_HUGE_PAGE_BYTES / MiB} MiB of HTML, streamed without Content-Length`,
    ip: web(5),
    pages: [home({ kind: 'stream', bytes: SIM_HUGE_PAGE_BYTES })],
  },
  {
    domain: 'broken-tls.test',
    behaviour: 'tls-wrong-name',
    description: `HTTPS presents a certificate for ${SIM_WRONG_CERT_NAME}; HTTP answers 200 (og:site_name Broken TLS Ltd)`,
    ip: web(6),
    certNames: [SIM_WRONG_CERT_NAME],
    pages: [home(ok(BROKEN_TLS_HOME))],
  },
  {
    domain: 'error-site.test',
    behaviour: 'server-error',
    description: '500 on every path',
    ip: web(7),
    pages: [everywhere({ kind: 'html', status: 500, html: ERROR_PAGE })],
  },
  {
    domain: 'loop-redirect.test',
    behaviour: 'redirect-loop',
    description: 'every path answers 302 to http://loop-redirect.test/ (itself), forever',
    ip: web(8),
    pages: [everywhere({ kind: 'redirect', status: 302, location: 'http://loop-redirect.test/' })],
  },
  {
    domain: 'private-redirect.test',
    behaviour: 'redirect-to-private-address',
    description: 'every path answers 302 to http://169.254.169.254/latest/meta-data/ (an SSRF guard must refuse to follow)',
    ip: web(9),
    pages: [everywhere({ kind: 'redirect', status: 302, location: 'http://169.254.169.254/latest/meta-data/' })],
  },
  {
    domain: 'no-site.test',
    behaviour: 'no-website',
    description: 'MX and TXT, but no A record for the domain (NODATA) nor www (NXDOMAIN): no website to fetch',
    ip: null,
    txt: ['v=spf1 mx -all'],
    mx: [{ exchange: 'mx1.no-site.test', priority: 10, ip: mxIp(5) }],
    pages: [],
  },
  {
    domain: 'umbrella-nonprofit.test',
    behaviour: 'ngo-json-ld',
    description: 'schema.org NGO JSON-LD: nonprofitStatus, 11-50 employees (minValue/maxValue), Berlin address, Facebook link; an SPF record longer than 255 bytes',
    ip: web(10),
    txt: [UMBRELLA_SPF],
    mx: [{ exchange: 'mail.umbrella-nonprofit.test', priority: 10, ip: mxIp(6) }],
    pages: [home(ok(UMBRELLA_HOME))],
  },
];
