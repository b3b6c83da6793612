// Tests of the sim's websites and the DNS records that go with them, with plain node:dns, node:tls
// and undici: names resolve through the sim's DNS server (a custom lookup on the undici agent), so
// each request goes the way the enrichment feature's will, and every answer is compared exactly.

import { Resolver } from 'node:dns/promises';
import type { LookupAddress } from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import t from 'tap';
import { Agent, request } from 'undici';
import { txtChunks } from './dns.ts';
import { SIM_HUGE_PAGE_BYTES, SIM_WEBSITES, SIM_WRONG_CERT_NAME, startSim } from './index.ts';
import { startWeb } from './web.ts';

const MiB = 1024 * 1024;

const sim = await startSim();
t.teardown(() => sim.close());

const resolver = new Resolver({ timeout: 500, tries: 1 });
resolver.setServers([sim.dnsServers]);

/** net.connect's lookup, answered by the sim's DNS server (A records only). */
const simLookup: net.LookupFunction = (hostname, options, callback) => {
  resolver.resolve4(hostname).then(
    addresses => {
      if (options.all) callback(null, addresses.map((address): LookupAddress => ({ address, family: 4 })));
      else callback(null, addresses[0] ?? '', 4);
    },
    (err: NodeJS.ErrnoException) => callback(err, '', 4),
  );
};

const trusting = new Agent({ connect: { lookup: simLookup, ca: sim.webCaPem } });
t.teardown(() => trusting.close());

const httpUrl = (host: string, path = '/'): string => `http://${host}:${sim.webHttpPort}${path}`;
const httpsUrl = (host: string, path = '/'): string => `https://${host}:${sim.webHttpsPort}${path}`;

async function get(url: string, opts: { headersTimeout?: number } = {}): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const res = await request(url, { dispatcher: trusting, ...opts });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

function jsonLdBlocks(html: string): unknown[] {
  return [...html.matchAll(/<script type="application\/ld\+json">([\s\S]*?)<\/script>/g)].map(m => JSON.parse(m[1] ?? ''));
}

function meta(html: string, property: string): string | undefined {
  return new RegExp(`<meta (?:property|name)="${property}" content="([^"]*)">`).exec(html)?.[1];
}

/** A TLS handshake with the site's name as SNI; the outcome without rejecting. */
function handshake(host: string, ca?: string): Promise<{ authorized: boolean; error: string | null; altNames: string | undefined }> {
  const ip = SIM_WEBSITES.find(s => s.domain === host.replace(/^www\./, ''))?.ip ?? '';
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host: ip, port: sim.webHttpsPort, servername: host, rejectUnauthorized: false, ...(ca ? { ca } : {}) }, () => {
      const r = { authorized: s.authorized, error: s.authorizationError ? String(s.authorizationError) : null, altNames: s.getPeerCertificate().subjectaltname };
      s.end();
      resolve(r);
    });
    s.once('error', reject);
  });
}

const ACME_TXT = ['v=spf1 include:_spf.google.com include:sendgrid.net ~all', 'google-site-verification=abc123', 'atlassian-domain-verification=xyz'];
const ACME_MX = [
  { exchange: 'aspmx.l.google.com', priority: 1 },
  { exchange: 'alt1.aspmx.l.google.com', priority: 5 },
  { exchange: 'alt2.aspmx.l.google.com', priority: 5 },
];

t.test('ports and addresses', async t => {
  t.ok(sim.webHttpPort > 0, 'HTTP port');
  t.ok(sim.webHttpsPort > 0, 'HTTPS port');
  t.not(sim.webHttpPort, sim.webHttpsPort);
  t.strictSame(
    SIM_WEBSITES.map(w => [w.domain, w.ip]),
    [
      ['acme-robotics.test', '127.0.80.1'],
      ['globex-meta.test', '127.0.80.2'],
      ['initech-redirect.test', '127.0.80.3'],
      ['slow-site.test', '127.0.80.4'],
      ['huge-site.test', '127.0.80.5'],
      ['broken-tls.test', '127.0.80.6'],
      ['error-site.test', '127.0.80.7'],
      ['loop-redirect.test', '127.0.80.8'],
      ['private-redirect.test', '127.0.80.9'],
      ['no-site.test', null],
      ['umbrella-nonprofit.test', '127.0.80.10'],
    ],
  );
});

t.test('DNS', async t => {
  t.test('every site and its www name have the site address, no AAAA', async t => {
    for (const w of SIM_WEBSITES) {
      if (!w.ip) continue;
      t.strictSame(await resolver.resolve4(w.domain), [w.ip], `${w.domain} A`);
      t.strictSame(await resolver.resolve4(`www.${w.domain}`), [w.ip], `www.${w.domain} A`);
      await t.rejects(resolver.resolve6(w.domain), { code: 'ENODATA' }, `${w.domain} AAAA`);
    }
    t.strictSame(await resolver.resolve4('www.acme-robotics.test', { ttl: true }), [{ address: '127.0.80.1', ttl: 300 }]);
  });

  t.test('acme-robotics.test: Google Workspace MX, SPF and verification TXT records', async t => {
    t.strictSame(await resolver.resolveMx('acme-robotics.test'), ACME_MX);
    t.strictSame(await resolver.resolve4('aspmx.l.google.com'), ['127.0.81.1']);
    t.strictSame(await resolver.resolve4('alt1.aspmx.l.google.com'), ['127.0.81.2']);
    t.strictSame(await resolver.resolve4('alt2.aspmx.l.google.com'), ['127.0.81.3']);
    const txt = await resolver.resolveTxt('acme-robotics.test');
    t.strictSame(txt, ACME_TXT.map(s => [s]));
    t.strictSame(
      txt.map(chunks => chunks.join('')),
      ['v=spf1 include:_spf.google.com include:sendgrid.net ~all', 'google-site-verification=abc123', 'atlassian-domain-verification=xyz'],
    );
  });

  t.test('ANY answers MX, A and TXT', async t => {
    // Node lists the records grouped by type, A before MX before TXT, whatever the packet's order.
    t.strictSame(await resolver.resolveAny('acme-robotics.test'), [
      { address: '127.0.80.1', ttl: 300, type: 'A' },
      ...ACME_MX.map(m => ({ ...m, type: 'MX' })),
      ...ACME_TXT.map(s => ({ entries: [s], type: 'TXT' })),
    ]);
  });

  t.test('globex-meta.test: Microsoft 365 MX and TXT', async t => {
    t.strictSame(await resolver.resolveMx('globex-meta.test'), [{ exchange: 'globex-meta-test.mail.protection.outlook.com', priority: 0 }]);
    t.strictSame(await resolver.resolve4('globex-meta-test.mail.protection.outlook.com'), ['127.0.81.4']);
    t.strictSame(await resolver.resolveTxt('globex-meta.test'), [['v=spf1 include:spf.protection.outlook.com -all'], ['MS=ms12345678']]);
  });

  t.test('a TXT record over 255 bytes comes back in 255-byte pieces that join to the record', async t => {
    const spf = SIM_WEBSITES.find(w => w.domain === 'umbrella-nonprofit.test')?.txt?.[0] ?? '';
    t.equal(spf.length, 357);
    const txt = await resolver.resolveTxt('umbrella-nonprofit.test');
    t.strictSame(txt, [[spf.slice(0, 255), spf.slice(255)]]);
    t.strictSame(
      txt[0]?.map(s => s.length),
      [255, 102],
    );
    t.equal(txt[0]?.join(''), spf);
    t.strictSame(await resolver.resolveMx('umbrella-nonprofit.test'), [{ exchange: 'mail.umbrella-nonprofit.test', priority: 10 }]);
  });

  t.test('txtChunks cuts at 255 bytes, between characters', async t => {
    t.strictSame(txtChunks('').map(s => s.length), [0]);
    t.strictSame(txtChunks('a'.repeat(255)).map(s => s.length), [255]);
    t.strictSame(txtChunks('a'.repeat(600)).map(s => s.length), [255, 255, 90]);
    // 'ß' is two bytes in UTF-8: 127 of them fill 254 bytes, the 128th starts the next piece.
    t.strictSame(txtChunks('ß'.repeat(200)).map(s => s.length), [127, 73]);
  });

  t.test('no-site.test: MX and TXT, no A for the domain (ENODATA) nor www (ENOTFOUND)', async t => {
    t.strictSame(await resolver.resolveMx('no-site.test'), [{ exchange: 'mx1.no-site.test', priority: 10 }]);
    t.strictSame(await resolver.resolveTxt('no-site.test'), [['v=spf1 mx -all']]);
    await t.rejects(resolver.resolve4('no-site.test'), { code: 'ENODATA' });
    await t.rejects(resolver.resolve4('www.no-site.test'), { code: 'ENOTFOUND' });
  });

  t.test('names without TXT records are NODATA for TXT, as before', async t => {
    await t.rejects(resolver.resolveTxt('accept.test'), { code: 'ENODATA' });
    await t.rejects(resolver.resolveTxt('initech-redirect.test'), { code: 'ENODATA' });
    await t.rejects(resolver.resolveTxt('nxdomain.test'), { code: 'ENOTFOUND' });
  });

  t.test('the website MX hosts have no mail server: connections are refused', async t => {
    const sock = net.connect({ host: '127.0.81.1', port: sim.smtpPort });
    await t.rejects(new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject)), { code: 'ECONNREFUSED' });
  });
});

t.test('HTTP and HTTPS', async t => {
  t.test('acme-robotics.test: Organization JSON-LD, OpenGraph, footer and share links', async t => {
    const page = await get(httpUrl('acme-robotics.test'));
    t.equal(page.status, 200);
    t.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    t.equal(page.headers['content-length'], String(Buffer.byteLength(page.text)));
    t.strictSame(jsonLdBlocks(page.text), [
      {
        '@context': 'https://schema.org',
        '@type': 'Organization',
        name: 'Acme Robotics',
        description: 'Acme Robotics designs autonomous picking robots for mid-sized warehouses.',
        url: 'https://acme-robotics.test/',
        logo: 'https://acme-robotics.test/static/logo.png',
        foundingDate: '2011-04-01',
        numberOfEmployees: { '@type': 'QuantitativeValue', value: 120 },
        address: { '@type': 'PostalAddress', streetAddress: '1400 Sample Parkway', addressLocality: 'Austin', addressRegion: 'TX', postalCode: '78701', addressCountry: 'US' },
        telephone: '+1 512-555-0142',
        sameAs: ['https://www.linkedin.com/company/acme-robotics', 'https://twitter.com/acmerobotics'],
      },
    ]);
    t.equal(meta(page.text, 'og:site_name'), 'Acme Robotics');
    t.equal(meta(page.text, 'og:title'), 'Acme Robotics | Warehouse robots that pick');
    t.equal(meta(page.text, 'description'), 'Acme Robotics designs autonomous picking robots for mid-sized warehouses.');
    const links = [...page.text.matchAll(/<a href="(https:\/\/[^"]+)"/g)].map(m => m[1]);
    t.strictSame(links, [
      'https://www.linkedin.com/sharing/share-offsite/?url=https%3A%2F%2Facme-robotics.test%2F',
      'https://twitter.com/intent/tweet?url=https%3A%2F%2Facme-robotics.test%2F&amp;text=Acme%20Robotics',
      'https://www.facebook.com/sharer/sharer.php?u=https%3A%2F%2Facme-robotics.test%2F',
      'https://www.linkedin.com/company/acme-robotics',
      'https://twitter.com/acmerobotics',
      'https://www.youtube.com/@acmerobotics',
    ]);
    // The same page on www and over HTTPS (verified against the sim's CA).
    t.equal((await get(httpUrl('www.acme-robotics.test'))).text, page.text);
    const secure = await get(httpsUrl('acme-robotics.test'));
    t.strictSame([secure.status, secure.text], [200, page.text]);
  });

  t.test('an unknown path is 404', async t => {
    const page = await get(httpUrl('acme-robotics.test', '/no/such/page'));
    t.equal(page.status, 404);
    t.equal(page.text, '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n');
  });

  t.test('globex-meta.test: no JSON-LD, title, meta description and OpenGraph', async t => {
    const page = await get(httpUrl('globex-meta.test'));
    t.equal(page.status, 200);
    t.strictSame(jsonLdBlocks(page.text), []);
    t.equal(/<title>([^<]*)<\/title>/.exec(page.text)?.[1], 'Globex Meta - Industrial sensors');
    t.equal(meta(page.text, 'description'), 'Globex Meta makes vibration and temperature sensors for factory machines.');
    t.equal(meta(page.text, 'og:site_name'), 'Globex Meta');
    t.equal(meta(page.text, 'og:description'), 'Vibration and temperature sensors for factory machines.');
  });

  t.test('umbrella-nonprofit.test: NGO JSON-LD with an employee range', async t => {
    const page = await get(httpsUrl('umbrella-nonprofit.test'));
    t.equal(page.status, 200);
    t.strictSame(jsonLdBlocks(page.text), [
      {
        '@context': 'https://schema.org',
        '@type': 'NGO',
        name: 'Umbrella Nonprofit e.V.',
        description: 'Umbrella Nonprofit lends rain gear to people who sleep rough in Berlin.',
        url: 'https://umbrella-nonprofit.test/',
        nonprofitStatus: 'gemeinnütziger eingetragener Verein',
        foundingDate: '1998-09-15',
        numberOfEmployees: { '@type': 'QuantitativeValue', minValue: 11, maxValue: 50 },
        address: { '@type': 'PostalAddress', streetAddress: 'Beispielstraße 7', postalCode: '10115', addressLocality: 'Berlin', addressCountry: 'DE' },
        telephone: '+49 30 23125 142',
        sameAs: ['https://www.facebook.com/umbrellanonprofit'],
      },
    ]);
    t.equal(page.text.includes('<a href="https://www.facebook.com/umbrellanonprofit">Facebook</a>'), true);
  });

  t.test('initech-redirect.test: 301 to www, where the JSON-LD is', async t => {
    for (const path of ['/', '/about']) {
      const r = await get(httpUrl('initech-redirect.test', path));
      t.strictSame([r.status, r.headers.location, r.text], [301, 'http://www.initech-redirect.test/', ''], path);
    }
    const page = await get(httpUrl('www.initech-redirect.test'));
    t.equal(page.status, 200);
    t.strictSame(jsonLdBlocks(page.text), [{ '@context': 'https://schema.org', '@type': 'Organization', name: 'Initech', url: 'http://www.initech-redirect.test/' }]);
  });

  t.test('loop-redirect.test redirects to itself; private-redirect.test to the metadata address', async t => {
    for (const path of ['/', '/x']) {
      const r = await get(httpUrl('loop-redirect.test', path));
      t.strictSame([r.status, r.headers.location], [302, 'http://loop-redirect.test/'], `loop ${path}`);
    }
    const target = new URL('http://loop-redirect.test/');
    target.port = String(sim.webHttpPort);
    const again = await get(target.href);
    t.strictSame([again.status, again.headers.location], [302, 'http://loop-redirect.test/'], 'following it gives the same answer');
    const r = await get(httpUrl('private-redirect.test'));
    t.strictSame([r.status, r.headers.location], [302, 'http://169.254.169.254/latest/meta-data/']);
  });

  t.test('error-site.test answers 500 on every path', async t => {
    for (const path of ['/', '/about', '/robots.txt']) t.equal((await get(httpUrl('error-site.test', path))).status, 500, path);
    t.equal((await get(httpsUrl('www.error-site.test'))).status, 500, 'www over HTTPS');
  });

  t.test('slow-site.test does not answer within 1 s', async t => {
    const start = Date.now();
    await t.rejects(get(httpUrl('slow-site.test'), { headersTimeout: 1000 }), { code: 'UND_ERR_HEADERS_TIMEOUT' });
    const waited = Date.now() - start;
    t.ok(waited >= 950 && waited < 5000, `gave up after the client's 1 s (${waited} ms)`);
  });

  t.test('huge-site.test streams 20 MiB: a reader that stops at 3 MiB gets 3 MiB', async t => {
    const res = await request(httpUrl('huge-site.test'), { dispatcher: trusting });
    t.equal(res.statusCode, 200);
    t.equal(res.headers['content-length'], undefined);
    t.equal(res.headers['transfer-encoding'], 'chunked');
    let read = 0;
    for await (const chunk of res.body) {
      read += (chunk as Buffer).length;
      if (read >= 3 * MiB) break; // leaving the loop destroys the body: the request is aborted
    }
    t.equal(Math.min(read, 3 * MiB), 3 * MiB);

    const full = await request(httpUrl('huge-site.test'), { dispatcher: trusting });
    let total = 0;
    let last = Buffer.alloc(0);
    for await (const chunk of full.body) {
      total += (chunk as Buffer).length;
      last = Buffer.concat([last, chunk as Buffer]).subarray(-15);
    }
    t.equal(total, SIM_HUGE_PAGE_BYTES);
    t.equal(SIM_HUGE_PAGE_BYTES, 20 * MiB);
    t.equal(last.toString(), '</body></html>\n');
  });

  t.test('broken-tls.test: HTTP works, the HTTPS certificate is for another name', async t => {
    const page = await get(httpUrl('broken-tls.test'));
    t.equal(page.status, 200);
    t.equal(meta(page.text, 'og:site_name'), 'Broken TLS Ltd');
    await t.rejects(get(httpsUrl('broken-tls.test')), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
    t.strictSame(await handshake('broken-tls.test', sim.webCaPem), { authorized: false, error: 'ERR_TLS_CERT_ALTNAME_INVALID', altNames: `DNS:${SIM_WRONG_CERT_NAME}` });
  });

  t.test('every other site has a certificate for its names, signed by the sim CA', async t => {
    for (const w of SIM_WEBSITES) {
      if (!w.ip || w.certNames) continue;
      for (const host of [w.domain, `www.${w.domain}`]) {
        const r = await handshake(host, sim.webCaPem);
        t.strictSame([r.authorized, r.error], [true, null], host);
      }
    }
    const names = SIM_WEBSITES.filter(w => w.ip && !w.certNames).flatMap(w => [`DNS:${w.domain}`, `DNS:www.${w.domain}`]);
    t.equal(names.length, 18);
    t.strictSame(await handshake('acme-robotics.test'), { authorized: false, error: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', altNames: names.join(', ') }, 'without the CA nothing verifies');
  });

  t.test('no-site.test: the lookup fails, nothing is fetched', async t => {
    await t.rejects(get(httpUrl('no-site.test')), { code: 'ENODATA' });
    await t.rejects(get(httpUrl('www.no-site.test')), { code: 'ENOTFOUND' });
  });

  t.test('requests are counted by host and path, and reset', async t => {
    sim.resetStats();
    await get(httpUrl('acme-robotics.test'));
    await get(httpsUrl('acme-robotics.test'));
    await get(httpUrl('error-site.test', '/about?x=1'));
    t.strictSame(sim.webRequests(), { 'acme-robotics.test/': 2, 'error-site.test/about?x=1': 1 });
    sim.resetStats();
    t.strictSame(sim.webRequests(), {});
  });
});

t.test('startWeb on its own', async t => {
  t.test('a port in use on a website address fails the start', async t => {
    await t.rejects(startWeb(SIM_WEBSITES, { http: sim.webHttpPort, https: 0 }), { code: 'EADDRINUSE' });
  });

  t.test('close() ends a pending slow answer at once', async t => {
    const web = await startWeb(SIM_WEBSITES, { http: 0, https: 0 });
    const agent = new Agent({ connect: { lookup: simLookup } });
    t.teardown(() => agent.destroy());
    const pending = request(`http://slow-site.test:${web.httpPort}/`, { dispatcher: agent });
    await new Promise(r => setTimeout(r, 100));
    t.strictSame([...web.requests], [['slow-site.test/', 1]]);
    const start = Date.now();
    await web.close();
    t.ok(Date.now() - start < 1000, 'closed without waiting for the 10 s page');
    await t.rejects(pending, { code: 'UND_ERR_SOCKET' });
    await web.close(); // twice is fine
  });
});
