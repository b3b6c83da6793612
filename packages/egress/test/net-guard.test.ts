// The webhook target guard: address classes (a table of exact answers), the intake check of a
// webhook_url, the delivery-time check with an injected resolver (no real DNS), and the pinned
// lookup that makes a connection go where the guard looked.

import t from 'tap';
import { createServer, connect, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { classifyAddress, guardTarget, pinnedLookup, validateWebhookUrl, MAX_WEBHOOK_URL_LENGTH, type AddressClass, type Resolver } from '../src/net-guard.ts';
import { inNetworks, parseNetwork } from '@svc/contracts';

/** A resolver answering from a table (and counting calls); an unknown name is ENOTFOUND. */
function fakeResolver(table: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const r = async (host: string) => {
    calls.push(host);
    const a = table[host];
    if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(r, { calls });
}

t.test('classifyAddress', async (t) => {
  const table: Array<[string, AddressClass | undefined]> = [
    // public
    ['93.184.216.34', undefined],
    ['8.8.8.8', undefined],
    ['1.1.1.1', undefined],
    ['100.63.255.255', undefined],
    ['100.128.0.0', undefined],
    ['172.15.255.255', undefined],
    ['172.32.0.0', undefined],
    ['192.169.0.1', undefined],
    ['223.255.255.255', undefined],
    ['2606:4700:4700::1111', undefined],
    ['2001:4860:4860::8888', undefined],
    ['::ffff:8.8.8.8', undefined],
    ['64:ff9b::808:808', undefined], // NAT64 of 8.8.8.8
    ['2002:808:808::1', undefined], // 6to4 of 8.8.8.8
    // IPv4
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link_local'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['192.0.0.8', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['198.19.255.255', 'reserved'],
    ['192.88.99.1', 'reserved'],
    ['192.0.2.10', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.99', 'documentation'],
    // IPv6
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['fc00::1', 'private'],
    ['fd12:3456:789a::1', 'private'],
    ['fec0::1', 'private'],
    ['fe80::1', 'link_local'],
    ['fe80::1%eth0', 'link_local'],
    ['febf::1', 'link_local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2001::1', 'reserved'], // Teredo
    ['100::1', 'reserved'],
    ['::127.0.0.1', 'reserved'], // IPv4-compatible
    ['::ffff:0:7f00:1', 'reserved'], // IPv4-translated
    ['64:ff9b:1::1', 'private'],
    // IPv4 inside IPv6
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['0:0:0:0:0:ffff:7f00:0001', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'link_local'],
    ['::ffff:0.0.0.0', 'unspecified'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'link_local'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:c0a8:101::1', 'private'],
    // not an address
    ['example.com', 'reserved'],
    ['', 'reserved'],
  ];
  for (const [ip, want] of table) t.equal(classifyAddress(ip), want, `${ip || '(empty)'} → ${want ?? 'public'}`);
});

t.test('validateWebhookUrl (intake)', async (t) => {
  const ok = (s: string) => ({ ok: true, url: s });
  t.strictSame(validateWebhookUrl('https://hooks.example.com/jobs?token=abc'), ok('https://hooks.example.com/jobs?token=abc'), 'https with a query');
  t.strictSame(validateWebhookUrl('http://hooks.example.com:8080/x'), ok('http://hooks.example.com:8080/x'), 'http with a port');
  t.strictSame(validateWebhookUrl('https://93.184.216.34/x'), ok('https://93.184.216.34/x'), 'a public IP literal');
  t.strictSame(validateWebhookUrl('https://[2606:4700:4700::1111]/x'), ok('https://[2606:4700:4700::1111]/x'), 'a public IPv6 literal');
  t.strictSame(validateWebhookUrl('https://internal.corp/x'), ok('https://internal.corp/x'), 'a name is judged at delivery, not here');
  const long = `https://h.example/${'a'.repeat(MAX_WEBHOOK_URL_LENGTH - 'https://h.example/'.length)}`;
  t.equal(long.length, 2048);
  t.strictSame(validateWebhookUrl(long), ok(long), '2,048 characters');

  const refused: Array<[unknown, string, string]> = [
    [42, 'not_a_string', 'webhook_url must be a string'],
    [null, 'not_a_string', 'webhook_url must be a string'],
    [`${long}b`, 'too_long', 'webhook_url must be at most 2048 characters'],
    ['', 'malformed', 'webhook_url is not a valid absolute URL'],
    ['hooks.example.com/x', 'malformed', 'webhook_url is not a valid absolute URL'],
    ['/relative', 'malformed', 'webhook_url is not a valid absolute URL'],
    ['https://', 'malformed', 'webhook_url is not a valid absolute URL'],
    [' https://hooks.example.com/', 'malformed', 'webhook_url must not contain spaces or control characters'],
    ['https://hooks.example.com/\n', 'malformed', 'webhook_url must not contain spaces or control characters'],
    ['https://hooks.exa\tmple.com/', 'malformed', 'webhook_url must not contain spaces or control characters'],
    ['ftp://hooks.example.com/', 'scheme', 'webhook_url must be an http or https URL'],
    ['javascript:alert(1)', 'scheme', 'webhook_url must be an http or https URL'],
    ['file:///etc/passwd', 'scheme', 'webhook_url must be an http or https URL'],
    ['ws://hooks.example.com/', 'scheme', 'webhook_url must be an http or https URL'],
    ['https://user:pass@hooks.example.com/', 'credentials', 'webhook_url must not contain credentials'],
    ['https://user@hooks.example.com/', 'credentials', 'webhook_url must not contain credentials'],
    ['https://:pass@hooks.example.com/', 'credentials', 'webhook_url must not contain credentials'],
    ['http://127.0.0.1:8080/', 'refused_address', 'webhook_url points to a loopback address'],
    ['http://2130706433/', 'refused_address', 'webhook_url points to a loopback address'],
    ['http://0x7f.1/', 'refused_address', 'webhook_url points to a loopback address'],
    ['http://localhost:3000/', 'refused_address', 'webhook_url points to a loopback address'],
    ['http://LOCALHOST./', 'refused_address', 'webhook_url points to a loopback address'],
    ['http://api.localhost/', 'refused_address', 'webhook_url points to a loopback address'],
    ['http://[::1]/', 'refused_address', 'webhook_url points to a loopback address'],
    ['http://[::ffff:127.0.0.1]/', 'refused_address', 'webhook_url points to a loopback address'],
    ['http://10.1.2.3/', 'refused_address', 'webhook_url points to a private address'],
    ['http://169.254.169.254/latest/meta-data', 'refused_address', 'webhook_url points to a link-local address'],
    ['http://0.0.0.0/', 'refused_address', 'webhook_url points to an unspecified address'],
    ['http://100.64.1.1/', 'refused_address', 'webhook_url points to a shared (carrier-grade NAT) address'],
    ['http://[fd00::1]/', 'refused_address', 'webhook_url points to a private address'],
  ];
  for (const [input, reason, message] of refused) t.strictSame(validateWebhookUrl(input), { ok: false, reason, message }, `${JSON.stringify(input).slice(0, 60)} → ${reason}`);

  t.strictSame(validateWebhookUrl('http://127.0.0.1:8080/', { allowPrivate: true }), ok('http://127.0.0.1:8080/'), 'allowPrivate: loopback accepted');
  t.strictSame(validateWebhookUrl('http://localhost/', { allowPrivate: true }), ok('http://localhost/'), 'allowPrivate: localhost accepted');
  t.strictSame(validateWebhookUrl('ftp://127.0.0.1/', { allowPrivate: true }).ok, false, 'allowPrivate does not allow other schemes');
});

t.test('guardTarget (delivery)', async (t) => {
  const resolve = fakeResolver({
    'public.test': ['93.184.216.34', '2606:2800:220:1::1'],
    'private.test': ['10.0.0.1'],
    'mixed.test': ['93.184.216.34', '127.0.0.1'],
    'mapped.test': ['::ffff:127.0.0.1'],
    'meta.test': ['169.254.169.254'],
    'v6local.test': ['fe80::1'],
    'loop.test': ['127.0.0.1'],
    'empty.test': [],
  });
  t.strictSame(
    await guardTarget('https://public.test/hook', { resolve }),
    {
      ok: true,
      address: '93.184.216.34',
      family: 4,
      addresses: [
        { address: '93.184.216.34', family: 4 },
        { address: '2606:2800:220:1::1', family: 6 },
      ],
    },
    'a public name: every address, checked, in the resolver order',
  );
  t.strictSame(resolve.calls, ['public.test'], 'resolved once');
  t.strictSame(
    await guardTarget('http://private.test:8080/x', { resolve }),
    { ok: false, reason: 'refused_address', message: 'private.test resolves to 10.0.0.1, a private address', permanent: false },
    'a DNS name resolving to 10.0.0.1 is refused (not permanent: DNS may change)',
  );
  t.strictSame(
    await guardTarget('http://mixed.test/', { resolve }),
    { ok: false, reason: 'refused_address', message: 'mixed.test resolves to 127.0.0.1, a loopback address', permanent: false },
    'ANY refused address refuses the host',
  );
  t.strictSame(
    await guardTarget('http://mapped.test/', { resolve }),
    { ok: false, reason: 'refused_address', message: 'mapped.test resolves to ::ffff:127.0.0.1, a loopback address', permanent: false },
    'a name resolving to IPv4-mapped loopback',
  );
  t.strictSame((await guardTarget('http://meta.test/', { resolve })).ok, false, 'cloud metadata address');
  t.strictSame((await guardTarget('http://v6local.test/', { resolve })).ok, false, 'IPv6 link-local');
  t.strictSame(
    await guardTarget('http://[::ffff:127.0.0.1]:9/', { resolve }),
    { ok: false, reason: 'refused_address', message: '::ffff:7f00:1 is a loopback address', permanent: true },
    'IPv4-mapped ::ffff:127.0.0.1 literal: refused, permanently',
  );
  t.strictSame(
    await guardTarget('http://127.0.0.1:9/', { resolve }),
    { ok: false, reason: 'refused_address', message: '127.0.0.1 is a loopback address', permanent: true },
    'loopback literal',
  );
  t.strictSame(
    await guardTarget('http://localhost:9/', { resolve }),
    { ok: false, reason: 'refused_address', message: 'localhost is a loopback name', permanent: true },
    'localhost, without asking DNS',
  );
  t.strictSame(
    await guardTarget('http://nope.test/', { resolve }),
    { ok: false, reason: 'dns', message: 'nope.test did not resolve (ENOTFOUND)', permanent: false },
    'no such name: retried',
  );
  t.strictSame(await guardTarget('http://empty.test/', { resolve }), { ok: false, reason: 'dns', message: 'empty.test has no address', permanent: false }, 'no address');
  const slow: Resolver = () => new Promise(() => {});
  t.strictSame(
    await guardTarget('http://slow.test/', { resolve: slow, resolveTimeoutMs: 20 }),
    { ok: false, reason: 'dns', message: 'slow.test did not resolve (ETIMEOUT)', permanent: false },
    'a resolver that never answers times out',
  );
  t.strictSame(await guardTarget('ftp://public.test/', { resolve }), { ok: false, reason: 'invalid_url', message: 'scheme ftp: is not http or https', permanent: true });
  t.strictSame(await guardTarget('not a url', { resolve }), { ok: false, reason: 'invalid_url', message: 'the URL does not parse', permanent: true });
  t.strictSame(
    await guardTarget('https://93.184.216.34/x', { resolve }),
    { ok: true, address: '93.184.216.34', family: 4, addresses: [{ address: '93.184.216.34', family: 4 }] },
    'a public literal: no DNS',
  );
  t.strictSame(
    await guardTarget('https://[2606:4700::1]/x', { resolve }),
    { ok: true, address: '2606:4700::1', family: 6, addresses: [{ address: '2606:4700::1', family: 6 }] },
    'a public IPv6 literal: brackets off',
  );

  t.test('allowPrivate: resolved and pinned, nothing refused', async (t) => {
    t.strictSame(await guardTarget('http://loop.test/', { resolve, allowPrivate: true }), { ok: true, address: '127.0.0.1', family: 4, addresses: [{ address: '127.0.0.1', family: 4 }] });
    t.strictSame(await guardTarget('http://127.0.0.1:9/', { resolve, allowPrivate: true }), { ok: true, address: '127.0.0.1', family: 4, addresses: [{ address: '127.0.0.1', family: 4 }] });
    t.strictSame((await guardTarget('http://localhost/', { resolve: fakeResolver({ localhost: ['127.0.0.1'] }), allowPrivate: true })).ok, true);
    t.strictSame((await guardTarget('http://nope.test/', { resolve, allowPrivate: true })).ok, false, 'an unknown name still fails');
  });

  t.test('the system resolver by default', async (t) => {
    t.strictSame((await guardTarget('http://localhost./', {})).ok, false, 'localhost. refused by name');
    const r = await guardTarget('http://localhost/', { allowPrivate: true });
    t.ok(r.ok && r.addresses.every((a) => classifyAddress(a.address) === 'loopback'), 'localhost resolves through dns.lookup to loopback addresses');
  });
});

t.test('pinnedLookup: the connection goes to the checked address whatever the name', async (t) => {
  const server = createServer((s) => s.end('pinned'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const { port } = server.address() as AddressInfo;
  const lookup = pinnedLookup([{ address: '127.0.0.1', family: 4 }]);

  // Both forms Node asks for.
  const one = await new Promise<unknown[]>((r) => lookup('rebind.test', { family: 0 }, (...a) => r(a)));
  t.strictSame(one, [null, '127.0.0.1', 4], 'one address');
  const all = await new Promise<unknown[]>((r) => lookup('rebind.test', { all: true }, (...a) => r(a)));
  t.strictSame(all, [null, [{ address: '127.0.0.1', family: 4 }]], 'all: true');
  const v6 = await new Promise<unknown[]>((r) => lookup('rebind.test', { family: 6 }, (...a) => r(a)));
  t.equal((v6[0] as NodeJS.ErrnoException).code, 'ENOTFOUND', 'no pinned IPv6 address: no connection');
  t.throws(() => pinnedLookup([]), RangeError);

  // A name no DNS knows connects, through the pin, to the checked address.
  for (const autoSelectFamily of [true, false]) {
    const sock = connect({ host: 'rebind.test', port, lookup: lookup as never, autoSelectFamily });
    const chunks: Buffer[] = [];
    sock.on('data', (c: Buffer) => chunks.push(c));
    await once(sock, 'close');
    t.equal(Buffer.concat(chunks).toString(), 'pinned', `net.connect used the pinned address (autoSelectFamily ${autoSelectFamily})`);
  }
});

t.test('parseNetwork and inNetworks: CIDR lists as SVC_OUTBOUND_ALLOW_NETWORKS takes them', async (t) => {
  const nets = ['127.0.0.0/8', '::1/128', '10.1.2.3/16', 'fd00::/8', '192.0.2.7'].map((s) => parseNetwork(s)!);
  t.strictSame(
    nets.map((n) => [n.family, n.bits, n.bytes.join('.')]),
    [
      [4, 8, '127.0.0.0'],
      [6, 128, '0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1'],
      [4, 16, '10.1.0.0'],
      [6, 8, '253.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0'],
      [4, 32, '192.0.2.7'],
    ],
    'host bits cleared; a bare address is one host',
  );
  for (const bad of ['', '127.0.0.0/33', '::1/129', '10.0.0.0/08', 'localhost/8', '1.2.3/8', '10.0.0.0/-1', 'fe80::1%eth0/64', '127.0.0.1 /8']) t.equal(parseNetwork(bad), undefined, `refused: ${JSON.stringify(bad)}`);
  const cases: Array<[string, boolean]> = [
    ['127.0.0.1', true],
    ['127.255.255.254', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['10.1.200.9', true],
    ['10.2.0.1', false],
    ['fd12::3', true],
    ['fe80::1', false],
    ['192.0.2.7', true],
    ['192.0.2.8', false],
    ['169.254.169.254', false],
    ['not an ip', false],
  ];
  for (const [ip, want] of cases) t.equal(inNetworks(ip, nets), want, `${ip} ${want ? 'in' : 'not in'} the list`);
});

t.test('SVC_OUTBOUND_ALLOW_NETWORKS: the networks named are reachable, every other refused range still refused', async (t) => {
  const allowNetworks = ['127.0.0.0/8', '::1/128'].map((s) => parseNetwork(s)!);
  const resolve = (answers: string[]): Resolver => async () => answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  t.match(validateWebhookUrl('http://127.0.0.1:9000/hook', { allowNetworks }), { ok: true }, 'a loopback literal: accepted at intake');
  t.match(validateWebhookUrl('http://[::1]:9000/hook', { allowNetworks }), { ok: true });
  t.match(validateWebhookUrl('http://localhost:9000/hook', { allowNetworks }), { ok: true }, 'localhost: accepted (its addresses are checked at delivery)');
  t.match(validateWebhookUrl('http://10.0.0.5/hook', { allowNetworks }), { ok: false, reason: 'refused_address', message: 'webhook_url points to a private address' }, 'a private address is still refused');
  t.match(validateWebhookUrl('http://169.254.169.254/latest', { allowNetworks }), { ok: false, reason: 'refused_address' }, 'cloud metadata still refused');
  t.match(validateWebhookUrl('http://localhost/hook', { allowNetworks: [parseNetwork('10.0.0.0/8')!] }), { ok: false, reason: 'refused_address' }, 'localhost needs a loopback network');

  t.match(await guardTarget('http://127.0.0.1:9000/hook', { allowNetworks }), { ok: true, address: '127.0.0.1' });
  t.match(await guardTarget('http://receiver.test/hook', { allowNetworks, resolve: resolve(['127.0.0.1', '::1']) }), { ok: true, addresses: [{ address: '127.0.0.1' }, { address: '::1' }] }, 'a name resolving to allowed loopback addresses');
  t.match(await guardTarget('http://receiver.test/hook', { allowNetworks, resolve: resolve(['127.0.0.1', '192.168.1.9']) }), { ok: false, reason: 'refused_address', message: 'receiver.test resolves to 192.168.1.9, a private address' }, 'any address outside the list refuses the name (checked on the resolved address)');
  t.match(await guardTarget('http://rebind.test/hook', { allowNetworks, resolve: resolve(['::ffff:169.254.169.254']) }), { ok: false, reason: 'refused_address' }, 'a mapped metadata address is still refused');
  t.match(await guardTarget('http://public.test/hook', { allowNetworks, resolve: resolve(['93.184.216.34']) }), { ok: true }, 'public addresses as before');
  t.match(await guardTarget('http://127.0.0.1/hook'), { ok: false, reason: 'refused_address' }, 'without the list, loopback is refused');
});
