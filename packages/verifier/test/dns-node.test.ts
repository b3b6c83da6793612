// The node:dns adapter against a tiny dns2 server on 127.0.0.1 (port 0): how c-ares errors map to
// MX answers (NXDOMAIN, SERVFAIL, NODATA → implicit MX, RFC 7505 null MX, timeouts).

import t from 'tap';
import { Packet, UDPServer, type Resource } from 'dns2';
import { nodeDns } from '../src/adapters/dns-node.ts';

// dns2 exposes these as Packet.RCODE at run time, but its .d.ts does not declare it.
const RCODE = (Packet as unknown as { RCODE: { NOERROR: number; SERVFAIL: number; NXDOMAIN: number } }).RCODE;
const { TYPE, CLASS } = Packet;

interface Entry {
  mx?: Array<{ exchange: string; priority: number }>;
  a?: string[];
  aaaa?: string[];
  /** Query types answered with SERVFAIL. */
  servfail?: number[];
  /** Query types never answered. */
  silent?: number[];
}

/** Names absent from the zone are NXDOMAIN. */
const ZONE = new Map<string, Entry>([
  [
    'multi.test',
    {
      mx: [
        { exchange: 'mx2.multi.test', priority: 20 },
        { exchange: 'MX1.Multi.Test', priority: 10 },
        { exchange: 'alt.multi.test', priority: 10 },
      ],
    },
  ],
  ['mx1.multi.test', { a: ['192.0.2.10'] }],
  ['both.test', { a: ['192.0.2.20', '192.0.2.21'], aaaa: ['2001:db8::20'] }],
  ['v6only.test', { aaaa: ['2001:db8::30'] }],
  ['nullmx.test', { mx: [{ exchange: '.', priority: 0 }] }],
  ['implicit.test', { a: ['192.0.2.40'] }],
  ['nodata.test', {}],
  ['servfail.test', { servfail: [TYPE.MX, TYPE.A, TYPE.AAAA] }],
  ['a-servfail.test', { servfail: [TYPE.A, TYPE.AAAA] }],
  ['timeout.test', { silent: [TYPE.MX, TYPE.A, TYPE.AAAA] }],
]);

async function startDns(): Promise<{ port: number; queries: string[]; close: () => Promise<void> }> {
  const queries: string[] = [];
  const server = new UDPServer({ type: 'udp4' });
  server.on('request', (request, send) => {
    const [q] = request.questions;
    if (!q) return;
    const name = q.name.toLowerCase().replace(/\.$/, '');
    queries.push(`${name}/${q.type}`);
    const entry = ZONE.get(name);
    if (entry?.silent?.includes(q.type)) return;
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    const rr = (type: number, data: Record<string, unknown>): Resource => Object.assign(new Packet.Resource(q.name, type, CLASS.IN, 300), data);
    if (!entry) response.header.rcode = RCODE.NXDOMAIN;
    else if (entry.servfail?.includes(q.type)) response.header.rcode = RCODE.SERVFAIL;
    else if (q.type === TYPE.MX) for (const m of entry.mx ?? []) response.answers.push(rr(TYPE.MX, { exchange: m.exchange, priority: m.priority }));
    else if (q.type === TYPE.A) for (const address of entry.a ?? []) response.answers.push(rr(TYPE.A, { address }));
    else if (q.type === TYPE.AAAA) for (const address of entry.aaaa ?? []) response.answers.push(rr(TYPE.AAAA, { address }));
    send(response).catch(() => {});
  });
  server.on('requestError', () => {});
  server.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.bind(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: server.address().port,
    queries,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

t.test('nodeDns maps DNS answers to MX answers', async (t) => {
  const srv = await startDns();
  t.teardown(srv.close);
  const dns = nodeDns({ servers: [`127.0.0.1:${srv.port}`], timeoutMs: 150, tries: 1 });

  t.strictSame(await dns.resolveMail('multi.test'), {
    kind: 'mx',
    hosts: [
      { exchange: 'alt.multi.test', priority: 10 },
      { exchange: 'mx1.multi.test', priority: 10 },
      { exchange: 'mx2.multi.test', priority: 20 },
    ],
  }, 'sorted by priority then name, lower-cased');
  t.strictSame(await dns.resolveMail('nullmx.test'), { kind: 'null_mx' }, 'RFC 7505 null MX');
  t.strictSame(await dns.resolveMail('implicit.test'), { kind: 'implicit', hosts: [{ exchange: 'implicit.test', priority: 0 }] }, 'NODATA for MX, an A record: implicit MX');
  t.strictSame(await dns.resolveMail('v6only.test'), { kind: 'implicit', hosts: [{ exchange: 'v6only.test', priority: 0 }] }, 'an AAAA record alone is enough');
  t.strictSame(await dns.resolveMail('nodata.test'), { kind: 'no_records' }, 'NODATA for MX, A and AAAA');
  t.strictSame(await dns.resolveMail('nxdomain.test'), { kind: 'nxdomain' }, 'NXDOMAIN');
  t.strictSame(await dns.resolveMail('servfail.test'), { kind: 'servfail' }, 'SERVFAIL');
  t.strictSame(await dns.resolveMail('a-servfail.test'), { kind: 'servfail' }, 'NODATA for MX, then SERVFAIL for the address: servfail, not no_records');
  t.strictSame(await dns.resolveMail('timeout.test'), { kind: 'timeout' }, 'no answer at all');

  t.strictSame(await dns.resolveAddresses('both.test'), ['192.0.2.20', '192.0.2.21', '2001:db8::20'], 'IPv4 then IPv6');
  t.strictSame(await dns.resolveAddresses('mx1.multi.test'), ['192.0.2.10']);
  t.strictSame(await dns.resolveAddresses('v6only.test'), ['2001:db8::30']);
  t.strictSame(await dns.resolveAddresses('nxdomain.test'), []);
  t.strictSame(await dns.resolveAddresses('servfail.test'), []);

  // A and AAAA are asked at once (one round trip before a host's first session), so a name that
  // does not exist costs both queries: MX hosts almost always exist, and the round trip matters more.
  const before = srv.queries.length;
  await dns.resolveAddresses('gone.test');
  t.strictSame(srv.queries.slice(before).sort(), [`gone.test/${TYPE.A}`, `gone.test/${TYPE.AAAA}`].sort());
});

t.test('a resolver port with nobody listening is an error, never nxdomain', async (t) => {
  // A server bound and then closed: the port is free, loopback answers with ICMP port unreachable.
  const srv = await startDns();
  const port = srv.port;
  await srv.close();
  const dns = nodeDns({ servers: [`127.0.0.1:${port}`], timeoutMs: 100, tries: 1 });
  t.strictSame(await dns.resolveMail('multi.test'), { kind: 'error', detail: 'ECONNREFUSED' });
  t.strictSame(await dns.resolveAddresses('mx1.multi.test'), []);
});

t.test('nodeDns keeps at most maxInFlight queries on the wire; the rest wait their turn', async (t) => {
  // A resolver that answers every query NXDOMAIN 30 ms later, counting those it holds at once.
  let holding = 0;
  let most = 0;
  let asked = 0;
  const server = new UDPServer({ type: 'udp4' });
  server.on('request', (request, send) => {
    asked++;
    holding++;
    most = Math.max(most, holding);
    setTimeout(() => {
      holding--;
      const response = Packet.createResponseFromRequest(request);
      response.header.rcode = RCODE.NXDOMAIN;
      send(response).catch(() => {});
    }, 30);
  });
  server.on('requestError', () => {});
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.bind(0, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const dns = nodeDns({ servers: [`127.0.0.1:${server.address().port}`], timeoutMs: 2000, tries: 1, maxInFlight: 5 });
  const names = Array.from({ length: 60 }, (_, i) => `gone${i}.test`);
  const answers = await Promise.all(names.map((n) => dns.resolveMail(n)));
  t.strictSame(new Set(answers.map((a) => a.kind)), new Set(['nxdomain']), 'every name answered NXDOMAIN (none timed out)');
  t.equal(asked, 60, 'one query each');
  t.equal(most, 5, 'never more than 5 held by the resolver at once (and 5 reached)');
  t.throws(() => nodeDns({ servers: [], timeoutMs: 100, tries: 1, maxInFlight: 0 }), RangeError, 'maxInFlight must be positive');
});
