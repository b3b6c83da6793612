// What a company's home page says about the software behind it, for the company endpoint's
// `technologies` (beside what its DNS says, dns-signals.ts): the HTTP response's headers, the
// page's <meta name="generator">, and the hosts and paths of the scripts, stylesheets and frames
// it loads.
//
// The rules are written here, from the products' own public hostnames, headers and generator
// strings. The maintained open rule sets (the Wappalyzer lineage) are GPL-3.0, which this
// repository does not take in (docs/decisions/data-endpoints.md). A rule names a product only
// on a signal that product itself emits; nothing is inferred from another product.

/** A rule: the product's name and the signals that show it (any one is enough). */
interface TechRule {
  name: string;
  /** Header name (lower case) and what its value matches; `true`: the header's presence. */
  headers?: ReadonlyArray<readonly [string, RegExp | true]>;
  /** What <meta name="generator"> matches. */
  generator?: RegExp;
  /** Hosts (or their subdomains) a loaded resource comes from. */
  hosts?: readonly string[];
  /**
   * What the path of a resource matches: on the page's own site, or on `on` hosts (any host
   * with `'*'`: a file name that says what it is wherever it is served from).
   */
  path?: { re: RegExp; on?: readonly string[] | '*' };
}

const RULES: readonly TechRule[] = [
  // Hosting, CDNs and servers (headers)
  { name: 'Cloudflare', headers: [['cf-ray', true], ['server', /^cloudflare/i]] },
  { name: 'Amazon CloudFront', headers: [['x-amz-cf-id', true], ['via', /cloudfront/i]] },
  { name: 'Fastly', headers: [['x-fastly-request-id', true]] },
  { name: 'Vercel', headers: [['x-vercel-id', true], ['server', /^vercel/i]] },
  { name: 'Netlify', headers: [['x-nf-request-id', true], ['server', /^netlify/i]] },
  { name: 'GitHub Pages', headers: [['x-github-request-id', true]] },
  { name: 'WP Engine', headers: [['x-powered-by', /wp engine/i]] },
  { name: 'Nginx', headers: [['server', /^nginx/i]] },
  { name: 'OpenResty', headers: [['server', /^openresty/i]] },
  { name: 'Apache HTTP Server', headers: [['server', /^apache/i]] },
  { name: 'Microsoft IIS', headers: [['server', /^microsoft-iis/i]] },
  { name: 'LiteSpeed', headers: [['server', /^litespeed/i]] },
  { name: 'PHP', headers: [['x-powered-by', /\bphp\b/i]] },
  { name: 'ASP.NET', headers: [['x-powered-by', /asp\.net/i], ['x-aspnet-version', true]] },
  { name: 'Express', headers: [['x-powered-by', /^express$/i]] },
  { name: 'Next.js', headers: [['x-powered-by', /next\.js/i]], path: { re: /^\/_next\/static\// } },
  { name: 'Nuxt', path: { re: /^\/_nuxt\// } },
  // Site builders and content management
  { name: 'WordPress', generator: /^wordpress\b/i, path: { re: /^\/wp-(?:content|includes)\// } },
  { name: 'Drupal', generator: /^drupal\b/i, headers: [['x-drupal-cache', true], ['x-generator', /^drupal\b/i]] },
  { name: 'Joomla', generator: /^joomla\b/i },
  { name: 'TYPO3', generator: /^typo3\b/i },
  { name: 'Ghost', generator: /^ghost\b/i },
  { name: 'Hugo', generator: /^hugo\b/i },
  { name: 'Jekyll', generator: /^jekyll\b/i },
  { name: 'Gatsby', generator: /^gatsby\b/i },
  { name: 'Docusaurus', generator: /^docusaurus\b/i },
  { name: 'HubSpot CMS', generator: /^hubspot\b/i },
  { name: 'Wix', generator: /^wix\.com/i, headers: [['x-wix-request-id', true]], hosts: ['static.wixstatic.com', 'static.parastorage.com'] },
  { name: 'Squarespace', generator: /^squarespace\b/i, hosts: ['assets.squarespace.com', 'static1.squarespace.com'] },
  { name: 'Webflow', generator: /^webflow\b/i, hosts: ['assets-global.website-files.com', 'cdn.prod.website-files.com'] },
  { name: 'Shopify', headers: [['x-shopify-stage', true], ['x-shopid', true]], hosts: ['cdn.shopify.com'] },
  // Analytics, tags and advertising
  { name: 'Google Tag Manager', hosts: ['googletagmanager.com'] },
  { name: 'Google Analytics', hosts: ['google-analytics.com'] },
  { name: 'Microsoft Clarity', hosts: ['clarity.ms'] },
  { name: 'Hotjar', hosts: ['static.hotjar.com'] },
  { name: 'Segment', hosts: ['cdn.segment.com'] },
  { name: 'Mixpanel', hosts: ['cdn.mxpnl.com'] },
  { name: 'Amplitude', hosts: ['cdn.amplitude.com'] },
  { name: 'Plausible', hosts: ['plausible.io'] },
  { name: 'Matomo', hosts: ['cdn.matomo.cloud'] },
  { name: 'Meta Pixel', hosts: ['connect.facebook.net'] },
  { name: 'LinkedIn Insight Tag', hosts: ['snap.licdn.com'] },
  { name: 'Optimizely', hosts: ['cdn.optimizely.com'] },
  // Marketing, sales and support
  { name: 'HubSpot', hosts: ['js.hs-scripts.com', 'js.hsforms.net', 'js.hs-analytics.net', 'js.hubspot.com'] },
  { name: 'Marketo', hosts: ['munchkin.marketo.net'] },
  { name: 'Salesforce Pardot', hosts: ['pi.pardot.com', 'go.pardot.com'] },
  { name: 'ZoomInfo', hosts: ['js.zi-scripts.com', 'ws.zoominfo.com'] },
  { name: 'Intercom', hosts: ['widget.intercom.io', 'js.intercomcdn.com'] },
  { name: 'Drift', hosts: ['js.driftt.com'] },
  { name: 'Zendesk', hosts: ['static.zdassets.com'] },
  { name: 'Crisp', hosts: ['client.crisp.chat'] },
  { name: 'tawk.to', hosts: ['embed.tawk.to'] },
  { name: 'Calendly', hosts: ['assets.calendly.com'] },
  // Payments, consent, security, fonts, libraries
  { name: 'Stripe', hosts: ['js.stripe.com'] },
  { name: 'OneTrust', hosts: ['cdn.cookielaw.org'] },
  { name: 'Cookiebot', hosts: ['consent.cookiebot.com'] },
  { name: 'reCAPTCHA', path: { re: /^\/recaptcha\//, on: ['www.google.com', 'www.gstatic.com', 'www.recaptcha.net'] } },
  { name: 'Sentry', hosts: ['browser.sentry-cdn.com', 'js.sentry-cdn.com'] },
  { name: 'Google Fonts', hosts: ['fonts.googleapis.com'] },
  { name: 'Adobe Fonts', hosts: ['use.typekit.net'] },
  { name: 'jQuery', hosts: ['code.jquery.com'], path: { re: /\/jquery(?:[.-]\d[\w.-]*)?(?:\.min)?\.js$/i, on: '*' } },
  { name: 'jsDelivr', hosts: ['cdn.jsdelivr.net'] },
];

/** At most this many resources are looked at (a page with thousands is read no further). */
export const MAX_RESOURCES = 200;

export interface WebTechInput {
  /** The response's headers, names in lower case. */
  headers?: Readonly<Record<string, string>>;
  /** <meta name="generator"> content. */
  generator?: string;
  /** Absolute URLs of the scripts, stylesheets and frames the page loads, in page order. */
  resources?: readonly string[];
  /** The page's own URL: paths are read only on its site. */
  pageUrl?: string;
}

const onHost = (host: string, suffixes: readonly string[]): boolean => suffixes.some((s) => host === s || host.endsWith(`.${s}`));

/** The products the page shows, in the order of RULES. Pure; never throws. */
export function webTechnologies(input: WebTechInput): string[] {
  const headers = input.headers ?? {};
  const generator = typeof input.generator === 'string' ? input.generator.trim().slice(0, 200) : '';
  let site: string | undefined;
  try {
    site = input.pageUrl ? new URL(input.pageUrl).hostname.toLowerCase() : undefined;
  } catch {
    site = undefined;
  }
  const resources: Array<{ host: string; path: string }> = [];
  for (const raw of (input.resources ?? []).slice(0, MAX_RESOURCES)) {
    try {
      const u = new URL(raw);
      if (u.protocol === 'https:' || u.protocol === 'http:') resources.push({ host: u.hostname.toLowerCase(), path: u.pathname });
    } catch {
      // not a URL: nothing to read
    }
  }
  const sameSite = (host: string) => site !== undefined && (host === site || host === `www.${site}` || site === `www.${host}`);
  const out: string[] = [];
  for (const rule of RULES) {
    const byHeader = rule.headers?.some(([name, want]) => {
      const v = headers[name];
      return v !== undefined && (want === true || want.test(v));
    });
    const byGenerator = rule.generator !== undefined && generator !== '' && rule.generator.test(generator);
    const byHost = rule.hosts !== undefined && resources.some((r) => onHost(r.host, rule.hosts!));
    const path = rule.path;
    const byPath = path !== undefined && resources.some((r) => (path.on === '*' || (path.on ? path.on.includes(r.host) : sameSite(r.host))) && path.re.test(r.path));
    if (byHeader || byGenerator || byHost || byPath) out.push(rule.name);
  }
  return out;
}

/** The names of the products these rules know (for a vendor's lower-cased names: `technologyName`). */
export const WEB_TECH_NAMES: readonly string[] = RULES.map((r) => r.name);
