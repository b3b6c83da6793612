// Technologies from a home page: exact lists for headers, generators and loaded resources, the
// page's own paths read only on its own site, look-alike hosts refused, and the whole path
// through parseHomePage. All sites are made up.

import t from 'tap';
import { MAX_RESOURCES, webTechnologies } from '../src/company/web-tech.ts';
import { parseHomePage } from '../src/company/website.ts';

t.test('headers name the hosting, the server and the framework', async (t) => {
  t.strictSame(webTechnologies({ headers: { server: 'cloudflare', 'cf-ray': 'x' } }), ['Cloudflare']);
  t.strictSame(webTechnologies({ headers: { server: 'nginx/1.25.3', 'x-powered-by': 'PHP/8.2.1' } }), ['Nginx', 'PHP']);
  t.strictSame(webTechnologies({ headers: { server: 'Microsoft-IIS/10.0', 'x-powered-by': 'ASP.NET', 'x-aspnet-version': '4.0.30319' } }), ['Microsoft IIS', 'ASP.NET']);
  t.strictSame(webTechnologies({ headers: { 'x-vercel-id': 'iad1::abc', 'x-powered-by': 'Next.js' } }), ['Vercel', 'Next.js']);
  t.strictSame(webTechnologies({ headers: { 'x-amz-cf-id': 'abc', via: '1.1 abc.cloudfront.net (CloudFront)', server: 'AmazonS3' } }), ['Amazon CloudFront']);
  t.strictSame(webTechnologies({ headers: { 'x-shopify-stage': 'production' } }), ['Shopify']);
  t.strictSame(webTechnologies({ headers: { 'x-powered-by': 'Express' } }), ['Express']);
  t.strictSame(webTechnologies({ headers: { 'x-powered-by': 'Express, PHP' } }), ['PHP'], 'Express only when it is the whole value');
  t.strictSame(webTechnologies({ headers: { server: 'my-cloudflare-clone' } }), [], 'a server name that merely contains one');
});

t.test('the generator names the site builder', async (t) => {
  const cases: Array<[string, string[]]> = [
    ['WordPress 6.6.2', ['WordPress']],
    ['Drupal 10 (https://www.drupal.org)', ['Drupal']],
    ['Joomla! - Open Source Content Management', ['Joomla']],
    ['Wix.com Website Builder', ['Wix']],
    ['Squarespace', ['Squarespace']],
    ['Webflow', ['Webflow']],
    ['Ghost 5.82', ['Ghost']],
    ['Hugo 0.125.0', ['Hugo']],
    ['HubSpot', ['HubSpot CMS']],
    ['TYPO3 CMS', ['TYPO3']],
    ['Made with love', []],
    ['My WordPress-like site', []],
  ];
  for (const [generator, want] of cases) t.strictSame(webTechnologies({ generator }), want, generator);
});

t.test('loaded resources: by host (and its subdomains), own-site paths only on the own site', async (t) => {
  const page = 'https://www.example-co.test/';
  t.strictSame(
    webTechnologies({
      pageUrl: page,
      resources: [
        'https://www.googletagmanager.com/gtm.js?id=GTM-X',
        'https://js.hs-scripts.com/123.js',
        'https://static.hotjar.com/c/hotjar-1.js',
        'https://widget.intercom.io/widget/abc',
        'https://connect.facebook.net/en_US/fbevents.js',
        'https://snap.licdn.com/li.lms-analytics/insight.min.js',
        'https://js.stripe.com/v3/',
        'https://www.google.com/recaptcha/api.js',
        'https://fonts.googleapis.com/css2?family=Inter',
        'https://www.example-co.test/wp-content/themes/x/style.css',
        'https://example-co.test/_next/static/chunks/main.js',
        'https://cdn.example-cdn.test/js/jquery-3.7.1.min.js',
        'https://cdn.cookielaw.org/scripttemplates/otSDKStub.js',
      ],
    }),
    // In the rules' order (hosting, site builders, analytics, marketing and support, the rest).
    ['Next.js', 'WordPress', 'Google Tag Manager', 'Hotjar', 'Meta Pixel', 'LinkedIn Insight Tag', 'HubSpot', 'Intercom', 'Stripe', 'OneTrust', 'reCAPTCHA', 'Google Fonts', 'jQuery'],
  );
  t.strictSame(
    webTechnologies({
      pageUrl: page,
      resources: [
        'https://other-site.test/wp-content/plugins/x.js', // another site's WordPress is not this one's
        'https://googletagmanager.com.evil.test/gtm.js',
        'https://evil.test/www.googletagmanager.com/gtm.js',
        'https://notjs.hs-scripts.com.test/x.js',
        'https://evil.test/recaptcha/api.js',
        'javascript:alert(1)',
        'not a url',
      ],
    }),
    [],
  );
  // Only the first MAX_RESOURCES are read.
  const many = Array.from({ length: MAX_RESOURCES }, (_, i) => `https://cdn.example-cdn.test/${i}.js`);
  t.strictSame(webTechnologies({ pageUrl: page, resources: [...many, 'https://js.stripe.com/v3/'] }), []);
  t.strictSame(webTechnologies({}), []);
});

t.test('through parseHomePage: scripts, stylesheet links, frames and the generator, relative URLs resolved against the page', async (t) => {
  const html = `<!doctype html><html><head><title>Example Co</title>
<meta name="generator" content="WordPress 6.5">
<link rel="preconnect" href="https://fonts.googleapis.com">
<link rel="stylesheet" href="/wp-content/themes/example/style.css">
<link rel="alternate" href="https://js.stripe.com/not-loaded">
<script src="//js.hs-scripts.com/42.js"></script>
<script type="application/ld+json">{"@type":"Organization","name":"Example Co"}</script>
</head><body>
<iframe src="https://www.google.com/recaptcha/api2/anchor"></iframe>
<svg><script src="https://static.hotjar.com/c/hotjar-1.js"></script></svg>
<a href="https://cdn.segment.com/analytics.js">a link is not a loaded resource</a>
</body></html>`;
  const s = parseHomePage(html, 'https://example-co.test/', { server: 'nginx', 'cf-ray': 'abc' });
  t.strictSame(s.technologies, ['Cloudflare', 'Nginx', 'WordPress', 'HubSpot', 'reCAPTCHA', 'Google Fonts']);
  t.equal(parseHomePage('<title>Plain</title>', 'https://plain.test/').technologies, undefined, 'none: the field is absent');
});
