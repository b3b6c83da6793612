// Tests of the simulated internet itself, with plain node:dns and raw sockets: every DNS
// behaviour gives the resolver error the service relies on, every mail server answers with the
// exact reply lines the table promises, and the counters count.

import { once } from 'node:events';
import { Resolver } from 'node:dns/promises';
import net from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import tls from 'node:tls';
import t from 'tap';
import { until } from '../helpers/until.ts';
import { SIM_DOMAINS, startSim, type MxStats, type Sim } from './index.ts';
import { PostfixInstance, Timers, startMx, type MxServerSpec, type RunningMx, type SimSessionRecord, type SmtpContext } from './smtp.ts';

// ---------------------------------------------------------------------------------------------
// A minimal SMTP client: one reply (all its lines) per read, nothing else.

class SmtpClient {
  private sock: net.Socket | tls.TLSSocket;
  private buf = '';
  private partial: string[] = [];
  private readonly replies: string[][] = [];
  private waiter: { resolve: (r: string[]) => void; reject: (e: Error) => void } | undefined;
  closed = false;
  readonly closedEvent: Promise<void>;
  private markClosed!: () => void;

  private constructor(sock: net.Socket) {
    this.sock = sock;
    this.closedEvent = new Promise(resolve => (this.markClosed = resolve));
    this.attach(sock);
  }

  static async open(ip: string, port: number): Promise<SmtpClient> {
    const sock = net.connect({ host: ip, port });
    await once(sock, 'connect');
    return new SmtpClient(sock);
  }

  private attach(sock: net.Socket | tls.TLSSocket): void {
    const decoder = new StringDecoder('utf8');
    sock.on('data', (chunk: Buffer) => this.onData(decoder.write(chunk)));
    sock.on('error', () => {});
    sock.on('close', () => {
      if (sock !== this.sock) return;
      this.closed = true;
      this.markClosed();
      this.waiter?.reject(new Error('connection closed'));
      this.waiter = undefined;
    });
  }

  private onData(text: string): void {
    this.buf += text;
    let nl: number;
    while ((nl = this.buf.indexOf('\r\n')) >= 0) {
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 2);
      this.partial.push(line);
      if (/^\d{3}-/.test(line)) continue;
      const reply = this.partial;
      this.partial = [];
      if (this.waiter) {
        const w = this.waiter;
        this.waiter = undefined;
        w.resolve(reply);
      } else this.replies.push(reply);
    }
  }

  reply(timeoutMs = 3000): Promise<string[]> {
    const queued = this.replies.shift();
    if (queued) return Promise.resolve(queued);
    if (this.closed) return Promise.reject(new Error('connection closed'));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(new Error('reply timeout'));
      }, timeoutMs);
      this.waiter = {
        resolve: r => (clearTimeout(timer), resolve(r)),
        reject: e => (clearTimeout(timer), reject(e)),
      };
    });
  }

  write(data: string): void {
    this.sock.write(data);
  }

  cmd(line: string, timeoutMs?: number): Promise<string[]> {
    this.write(`${line}\r\n`);
    return this.reply(timeoutMs);
  }

  /** Sends STARTTLS (expects 220) and wraps the socket in TLS. */
  async starttls(): Promise<string[]> {
    const reply = await this.cmd('STARTTLS');
    const raw = this.sock as net.Socket;
    raw.removeAllListeners('data');
    raw.removeAllListeners('close');
    const secure = tls.connect({ socket: raw, rejectUnauthorized: false });
    this.sock = secure;
    this.attach(secure);
    await once(secure, 'secureConnect');
    return reply;
  }

  close(): void {
    this.sock.destroy();
  }
}

const EMPTY: MxStats = { connections: 0, ehlo: 0, helo: 0, starttls: 0, mail: 0, rcpt: 0, rset: 0, quit: 0, data: 0 };

function ipOf(domain: string, index = 0): string {
  const ip = SIM_DOMAINS.find(d => d.domain === domain)?.mx[index]?.ip;
  if (!ip) throw new Error(`no MX ip for ${domain}`);
  return ip;
}

const NORMAL_EHLO = (host: string): string[] => [
  `250-${host} Nice to meet you, [127.0.0.1]`,
  '250-PIPELINING',
  '250-8BITMIME',
  '250-ENHANCEDSTATUSCODES',
  '250 STARTTLS',
];
const UNKNOWN = (addr: string): string[] => [`550 5.1.1 <${addr}>: Recipient address rejected: User unknown`];
const OK_RCPT = ['250 2.1.5 Accepted'];
const OK_MAIL = ['250 2.1.0 Accepted'];
const GREYLISTED = (addr: string): string[] => [
  `450 4.7.1 <${addr}>: Recipient address rejected: Greylisted, try again later`,
];

const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------

const sim: Sim = await startSim({ greylistMs: 300, tarpitMs: 400, slowBannerMs: 400, errorSleepMs: 200, inFlowDelayMs: 150 });
t.teardown(() => sim.close());

/** The part of a tap Test the helpers use (the top-level `t` and subtests both fit). */
interface Tap {
  teardown(fn: () => unknown): void;
  equal(found: unknown, wanted: unknown, ...message: [string]): boolean;
  strictSame(found: unknown, wanted: unknown, ...message: [string]): boolean;
}

/** Opens a session on the domain's MX (index-th) and reads the banner. */
async function session(t: Tap, domain: string, index = 0): Promise<{ c: SmtpClient; banner: string[] }> {
  const c = await SmtpClient.open(ipOf(domain, index), sim.smtpPort);
  t.teardown(() => c.close());
  return { c, banner: await c.reply() };
}

/** EHLO + MAIL FROM on a normal smtp-server based MX, asserting both. */
async function ready(t: Tap, domain: string, from = 'probe@sender.test'): Promise<SmtpClient> {
  const { c } = await session(t, domain);
  t.equal((await c.cmd('EHLO client.test'))[0]?.slice(0, 4), '250-', `${domain} EHLO`);
  t.strictSame(await c.cmd(`MAIL FROM:<${from}>`), OK_MAIL, `${domain} MAIL FROM`);
  return c;
}

t.test('DNS', async t => {
  const resolver = new Resolver({ timeout: 500, tries: 1 });
  resolver.setServers([sim.dnsServers]);
  t.match(sim.dnsServers, /^127\.0\.0\.1:\d+$/);

  t.test('every MX domain serves its table MX list, each exchange its A and no AAAA', async t => {
    for (const d of SIM_DOMAINS.filter(x => x.dns === 'mx')) {
      t.strictSame(
        await resolver.resolveMx(d.domain),
        d.mx.map(m => ({ exchange: m.exchange, priority: m.priority })),
        `${d.domain} MX`,
      );
      for (const m of d.mx) {
        t.strictSame(await resolver.resolve4(m.exchange), [m.ip], `${m.exchange} A`);
        await t.rejects(resolver.resolve6(m.exchange), { code: 'ENODATA' }, `${m.exchange} AAAA`);
      }
    }
  });

  t.test('TTL 300, names case-insensitive', async t => {
    t.strictSame(await resolver.resolve4('mx1.accept.test', { ttl: true }), [{ address: '127.0.10.1', ttl: 300 }]);
    t.strictSame(await resolver.resolveMx('ACCEPT.Test'), [{ exchange: 'mx1.accept.test', priority: 10 }]);
    t.strictSame(await resolver.resolveMx('gmail.com'), [{ exchange: 'gmail-smtp-in.l.google.com.sim', priority: 5 }]);
    t.strictSame(await resolver.resolveMx('xn--bcher-kva.test'), [{ exchange: 'mx1.xn--bcher-kva.test', priority: 10 }]);
    // Node's resolver converts a Unicode name to its A-labels (punycode) before it asks.
    t.strictSame(await resolver.resolveMx('bücher.test'), [{ exchange: 'mx1.xn--bcher-kva.test', priority: 10 }]);
  });

  t.test('null MX (RFC 7505) comes back as exchange "" priority 0', async t => {
    t.strictSame(await resolver.resolveMx('nullmx.test'), [{ exchange: '', priority: 0 }]);
    await t.rejects(resolver.resolve4('nullmx.test'), { code: 'ENODATA' });
  });

  t.test('A-only domain: no MX, A of the domain itself', async t => {
    await t.rejects(resolver.resolveMx('aonly.test'), { code: 'ENODATA' });
    t.strictSame(await resolver.resolve4('aonly.test'), ['127.0.10.15']);
    await t.rejects(resolver.resolve6('aonly.test'), { code: 'ENODATA' });
  });

  t.test('NODATA, NXDOMAIN, SERVFAIL', async t => {
    for (const rr of ['resolveMx', 'resolve4', 'resolve6'] as const) {
      await t.rejects((resolver[rr] as (name: string) => Promise<unknown>)('nodata.test'), { code: 'ENODATA' }, `nodata.test ${rr}`);
    }
    for (const name of ['nxdomain.test', 'gmial.com', 'nope.accept.test']) {
      await t.rejects(resolver.resolveMx(name), { code: 'ENOTFOUND' }, name);
    }
    await t.rejects(resolver.resolveMx('servfail.test'), { code: 'ESERVFAIL' });
    await t.rejects(resolver.resolve4('servfail.test'), { code: 'ESERVFAIL' });
  });

  t.test('timeout.test is never answered', async t => {
    const start = Date.now();
    await t.rejects(resolver.resolveMx('timeout.test'), { code: 'ETIMEOUT' });
    t.ok(Date.now() - start >= 450, 'waited for the resolver timeout');
  });

  t.test('queries are counted', async t => {
    sim.resetStats();
    await resolver.resolveMx('accept.test');
    await resolver.resolveMx('accept.test');
    await t.rejects(resolver.resolveMx('gmial.com'));
    t.strictSame(sim.dnsQueries(), { 'accept.test/MX': 2, 'gmial.com/MX': 1 });
  });
});

t.test('SMTP', async t => {
  t.test('accept.test: a whole normal session, exact replies and counters', async t => {
    sim.resetStats();
    const { c, banner } = await session(t, 'accept.test');
    t.strictSame(banner, ['220 mx1.accept.test ESMTP']);
    t.strictSame(await c.cmd('EHLO client.test'), NORMAL_EHLO('mx1.accept.test'), 'no SMTPUTF8');
    t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test>'), OK_MAIL);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@accept.test>'), OK_RCPT);
    t.strictSame(await c.cmd('RCPT TO:<Jane.Doe@ACCEPT.test>'), OK_RCPT, 'case-insensitive');
    t.strictSame(await c.cmd('RCPT TO:<"john..doe"@accept.test>'), OK_RCPT, 'quoted local part');
    t.strictSame(await c.cmd('RCPT TO:<"john.smith"@accept.test>'), OK_RCPT, 'quoted dot-atom = unquoted');
    t.strictSame(await c.cmd('RCPT TO:<john..doe@accept.test>'), UNKNOWN('john..doe@accept.test'));
    t.strictSame(await c.cmd('RCPT TO:<no.such.user@accept.test>'), UNKNOWN('no.such.user@accept.test'));
    t.strictSame(await c.cmd('RCPT TO:<postmaster>'), OK_RCPT);
    t.strictSame(await c.cmd('RCPT TO:<josé@accept.test>'), [
      '553 5.6.7 <josé@accept.test>: Recipient address rejected: SMTPUTF8 is required for this address',
    ]);
    t.strictSame(await c.cmd('DATA'), ['554 5.5.1 Error: DATA is not accepted here (a validator never sends DATA)']);
    t.strictSame(await c.cmd('RSET'), ['250 2.0.0 Flushed']);
    for (let i = 0; i < 3; i++) {
      t.strictSame(await c.cmd(`MAIL FROM:<probe${i}@sender.test>`), OK_MAIL);
      for (const local of ['info', 'support', 'sales', 'admin', 'postmaster']) {
        t.strictSame(await c.cmd(`RCPT TO:<${local}@accept.test>`), OK_RCPT, local);
      }
      t.strictSame(await c.cmd('RSET'), ['250 2.0.0 Flushed']);
    }
    t.strictSame(await c.cmd('QUIT'), ['221 2.0.0 Bye']);
    await c.closedEvent;
    t.strictSame(sim.statsFor('accept.test'), {
      connections: 1,
      ehlo: 1,
      helo: 0,
      starttls: 0,
      mail: 4,
      rcpt: 8 + 15,
      rset: 4,
      quit: 1,
      data: 1,
    });
    t.strictSame(sim.stats()['127.0.10.1'], sim.statsFor('accept.test'));
  });

  t.test('pipelining and commands split across TCP chunks (smtp-server and raw)', async t => {
    for (const domain of ['accept.test', 'multiline.test']) {
      const { c } = await session(t, domain);
      await c.cmd('EHLO client.test');
      c.write(`MAIL FROM:<p@sender.test>\r\nRCPT TO:<jane.doe@${domain}>\r\nRCPT TO:<x@${domain}>\r\nRSET\r\nMAIL FROM:<p@sender.test>\r\nRCPT TO:<jo`);
      await sleep(30);
      c.write(`hn.smith@${domain}>\r`);
      await sleep(30);
      c.write('\nQUIT\r\n');
      const replies: string[][] = [];
      for (let i = 0; i < 7; i++) replies.push(await c.reply());
      t.strictSame(
        replies.map(r => r.map(l => l.slice(0, 4))),
        [['250 '], ['250 '], ['550-', '550 '].slice(domain === 'multiline.test' ? 0 : 1), ['250 '], ['250 '], ['250 '], ['221 ']],
        domain,
      );
      await c.closedEvent;
    }
  });

  t.test('catchall.test and mailinator.com accept every RCPT', async t => {
    for (const domain of ['catchall.test', 'mailinator.com']) {
      const c = await ready(t, domain);
      t.strictSame(await c.cmd(`RCPT TO:<x8f3kq0zz@${domain}>`), OK_RCPT);
      t.strictSame(await c.cmd(`RCPT TO:<jane.doe@${domain}>`), OK_RCPT);
    }
  });

  t.test('greylist.test: 450 until greylistMs after the first attempt, then normal', async t => {
    const c = await ready(t, 'greylist.test', 'grey@sender.test');
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@greylist.test>'), GREYLISTED('jane.doe@greylist.test'));
    t.strictSame(await c.cmd('RCPT TO:<nobody@greylist.test>'), GREYLISTED('nobody@greylist.test'));
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@greylist.test>'), GREYLISTED('jane.doe@greylist.test'), 'too soon');
    await sleep(350);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@greylist.test>'), OK_RCPT);
    t.strictSame(await c.cmd('RCPT TO:<nobody@greylist.test>'), UNKNOWN('nobody@greylist.test'));
    t.strictSame(await c.cmd('RSET'), ['250 2.0.0 Flushed']);
    t.strictSame(await c.cmd('MAIL FROM:<other@sender.test>'), OK_MAIL);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@greylist.test>'), GREYLISTED('jane.doe@greylist.test'), 'new pair');
  });

  t.test('greylist-forever.test: always 450 4.7.1', async t => {
    const c = await ready(t, 'greylist-forever.test');
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@greylist-forever.test>'), GREYLISTED('jane.doe@greylist-forever.test'));
  });

  t.test('banner421.test: 421 banner, then the server closes', async t => {
    sim.resetStats();
    const { c, banner } = await session(t, 'banner421.test');
    t.strictSame(banner, ['421 4.3.2 Service not available, closing transmission channel']);
    await c.closedEvent;
    t.strictSame(sim.statsFor('banner421.test'), { ...EMPTY, connections: 1 });
  });

  t.test('tarpit.test: the RCPT reply comes after tarpitMs', async t => {
    const c = await ready(t, 'tarpit.test');
    const start = Date.now();
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@tarpit.test>'), OK_RCPT);
    t.ok(Date.now() - start >= 380, `waited ${Date.now() - start} ms`);
  });

  t.test('slowbanner.test: the banner comes after slowBannerMs', async t => {
    const start = Date.now();
    const { c, banner } = await session(t, 'slowbanner.test');
    t.strictSame(banner, ['220 mx1.slowbanner.test ESMTP']);
    t.ok(Date.now() - start >= 380, `waited ${Date.now() - start} ms`);
    t.strictSame(await c.cmd('EHLO client.test'), NORMAL_EHLO('mx1.slowbanner.test'));
  });

  t.test('dropped.test: RCPT kills the connection without a reply', async t => {
    sim.resetStats();
    const c = await ready(t, 'dropped.test');
    await t.rejects(c.cmd('RCPT TO:<jane.doe@dropped.test>'), { message: 'connection closed' });
    t.strictSame(sim.statsFor('dropped.test'), { ...EMPTY, connections: 1, ehlo: 1, mail: 1, rcpt: 1 });
  });

  t.test('starttls.test: MAIL needs STARTTLS first; normal after TLS', async t => {
    sim.resetStats();
    const { c } = await session(t, 'starttls.test');
    t.strictSame(await c.cmd('EHLO client.test'), NORMAL_EHLO('mx1.starttls.test'));
    t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test>'), ['530 5.7.0 Must issue a STARTTLS command first']);
    t.strictSame(await c.starttls(), ['220 2.0.0 Ready to start TLS']);
    t.strictSame(await c.cmd('EHLO client.test'), [
      '250-mx1.starttls.test Nice to meet you, [127.0.0.1]',
      '250-PIPELINING',
      '250-8BITMIME',
      '250 ENHANCEDSTATUSCODES',
    ], 'no STARTTLS once secure');
    t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test>'), OK_MAIL);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@starttls.test>'), OK_RCPT);
    t.strictSame(await c.cmd('RCPT TO:<x@starttls.test>'), UNKNOWN('x@starttls.test'));
    t.strictSame(await c.cmd('QUIT'), ['221 2.0.0 Bye']);
    t.strictSame(sim.statsFor('starttls.test'), { ...EMPTY, connections: 1, ehlo: 2, starttls: 1, mail: 2, rcpt: 2, quit: 1 });
  });

  t.test('policy.test: every RCPT 550 5.7.1', async t => {
    const c = await ready(t, 'policy.test');
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@policy.test>'), [
      '550 5.7.1 Service unavailable; client host [127.0.0.1] blocked using zen.spamhaus.org',
    ]);
  });

  t.test('blocklist-text.test: no enhanced codes, every RCPT 554', async t => {
    const { c, banner } = await session(t, 'blocklist-text.test');
    t.strictSame(banner, ['220 mx1.blocklist-text.test ESMTP']);
    t.strictSame(await c.cmd('EHLO client.test'), ['250-mx1.blocklist-text.test', '250-PIPELINING', '250 8BITMIME']);
    t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test>'), ['250 OK']);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@blocklist-text.test>'), ['554 Your IP address is listed on a blocklist']);
    t.strictSame(await c.cmd('RSET'), ['250 OK']);
    t.strictSame(await c.cmd('QUIT'), ['221 Bye']);
  });

  t.test('mailboxfull.test: known 552 5.2.2, unknown 550 5.1.1', async t => {
    const c = await ready(t, 'mailboxfull.test');
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@mailboxfull.test>'), ['552 5.2.2 <jane.doe@mailboxfull.test>: Mailbox full']);
    t.strictSame(await c.cmd('RCPT TO:<x@mailboxfull.test>'), UNKNOWN('x@mailboxfull.test'));
  });

  t.test('dead MX addresses refuse connections; the backups answer', async t => {
    for (const [domain, index] of [['multimx.test', 0], ['alldead.test', 0], ['alldead.test', 1], ['catchall-backup.test', 0]] as const) {
      await t.rejects(SmtpClient.open(ipOf(domain, index), sim.smtpPort), { code: 'ECONNREFUSED' }, `${domain} mx${index + 1}`);
    }
    const { c: multi, banner } = await session(t, 'multimx.test', 1);
    t.strictSame(banner, ['220 mx2.multimx.test ESMTP']);
    await multi.cmd('EHLO client.test');
    await multi.cmd('MAIL FROM:<p@sender.test>');
    t.strictSame(await multi.cmd('RCPT TO:<jane.doe@multimx.test>'), OK_RCPT);
    t.strictSame(await multi.cmd('RCPT TO:<x@multimx.test>'), UNKNOWN('x@multimx.test'));
    const { c: backup } = await session(t, 'catchall-backup.test', 1);
    await backup.cmd('EHLO client.test');
    await backup.cmd('MAIL FROM:<p@sender.test>');
    t.strictSame(await backup.cmd('RCPT TO:<zz9q@catchall-backup.test>'), OK_RCPT);
  });

  t.test('aonly.test, bücher.test, badaddr553.test, gmail.com', async t => {
    const { c: a, banner } = await session(t, 'aonly.test');
    t.strictSame(banner, ['220 aonly.test ESMTP']);
    await a.cmd('EHLO client.test');
    await a.cmd('MAIL FROM:<p@sender.test>');
    t.strictSame(await a.cmd('RCPT TO:<jane.doe@aonly.test>'), OK_RCPT);

    const idn = await ready(t, 'xn--bcher-kva.test');
    t.strictSame(await idn.cmd('RCPT TO:<jane.doe@xn--bcher-kva.test>'), OK_RCPT);
    t.strictSame(await idn.cmd('RCPT TO:<x@xn--bcher-kva.test>'), UNKNOWN('x@xn--bcher-kva.test'));

    const bad = await ready(t, 'badaddr553.test');
    t.strictSame(await bad.cmd('RCPT TO:<x@badaddr553.test>'), ['553 5.1.3 Bad recipient address syntax']);
    t.strictSame(await bad.cmd('RCPT TO:<john.smith@badaddr553.test>'), OK_RCPT);

    const gmail = await ready(t, 'gmail.com');
    for (const local of ['sim.person.one', 'sim.person.two', 'jane.doe']) {
      t.strictSame(await gmail.cmd(`RCPT TO:<${local}@gmail.com>`), OK_RCPT, local);
    }
    t.strictSame(await gmail.cmd('RCPT TO:<sim.person.three@gmail.com>'), UNKNOWN('sim.person.three@gmail.com'));
  });

  t.test('utf8.test advertises SMTPUTF8 and knows josé', async t => {
    const { c } = await session(t, 'utf8.test');
    t.strictSame(await c.cmd('EHLO client.test'), [
      '250-mx1.utf8.test Nice to meet you, [127.0.0.1]',
      '250-PIPELINING',
      '250-8BITMIME',
      '250-SMTPUTF8',
      '250-ENHANCEDSTATUSCODES',
      '250 STARTTLS',
    ]);
    t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test> SMTPUTF8'), OK_MAIL);
    t.strictSame(await c.cmd('RCPT TO:<josé@utf8.test>'), OK_RCPT);
    t.strictSame(await c.cmd('RCPT TO:<JOSÉ@utf8.test>'), OK_RCPT);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@utf8.test>'), OK_RCPT);
    t.strictSame(await c.cmd('RCPT TO:<maría@utf8.test>'), UNKNOWN('maría@utf8.test'));
  });

  t.test('heloonly.test: EHLO 502, HELO works, then normal', async t => {
    sim.resetStats();
    const { c, banner } = await session(t, 'heloonly.test');
    t.strictSame(banner, ['220 mx1.heloonly.test SMTP ready']);
    t.strictSame(await c.cmd('EHLO client.test'), ['502 5.5.2 Error: command not recognized']);
    t.strictSame(await c.cmd('MAIL FROM:<p@sender.test>'), ['503 5.5.1 Error: send HELO/EHLO first']);
    t.strictSame(await c.cmd('HELO client.test'), ['250 mx1.heloonly.test']);
    t.strictSame(await c.cmd('STARTTLS'), ['502 5.5.2 Error: command not recognized']);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@heloonly.test>'), ['503 5.5.1 Error: need MAIL command']);
    t.strictSame(await c.cmd('MAIL FROM:<p@sender.test>'), ['250 2.1.0 Ok']);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@heloonly.test>'), ['250 2.1.5 Ok']);
    t.strictSame(await c.cmd('RCPT TO:<x@heloonly.test>'), UNKNOWN('x@heloonly.test'));
    t.strictSame(await c.cmd('DATA'), ['554 5.5.1 Error: DATA is not accepted here (a validator never sends DATA)']);
    t.strictSame(await c.cmd('RSET'), ['250 2.0.0 Ok']);
    t.strictSame(await c.cmd('QUIT'), ['221 2.0.0 Bye']);
    await c.closedEvent;
    t.strictSame(sim.statsFor('heloonly.test'), {
      connections: 1,
      ehlo: 1,
      helo: 1,
      starttls: 1,
      mail: 2,
      rcpt: 3,
      rset: 1,
      quit: 1,
      data: 1,
    });
  });

  t.test('multiline.test: multi-line banner, EHLO and rejection', async t => {
    const { c, banner } = await session(t, 'multiline.test');
    t.strictSame(banner, ['220-mx1.multiline.test ESMTP', '220-Welcome', '220 ready']);
    t.strictSame(await c.cmd('EHLO client.test'), [
      '250-mx1.multiline.test at your service',
      '250-SIZE 35882577',
      '250-8BITMIME',
      '250-ENHANCEDSTATUSCODES',
      '250 PIPELINING',
    ]);
    t.strictSame(await c.cmd('MAIL FROM:<p@sender.test>'), ['250 2.1.0 OK']);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@multiline.test>'), ['250 2.1.5 OK']);
    t.strictSame(await c.cmd('RCPT TO:<x@multiline.test>'), [
      '550-5.1.1 The email account that you tried to reach does not exist.',
      "550 5.1.1 Please try double-checking the recipient's email address.",
    ]);
  });

  t.test('usertext.test: no enhanced codes, user unknown in words', async t => {
    const { c } = await session(t, 'usertext.test');
    t.strictSame(await c.cmd('EHLO client.test'), ['250-mx1.usertext.test', '250-PIPELINING', '250 8BITMIME']);
    t.strictSame(await c.cmd('MAIL FROM:<p@sender.test>'), ['250 OK']);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@usertext.test>'), ['250 OK']);
    t.strictSame(await c.cmd('RCPT TO:<x@usertext.test>'), ['550 Requested action not taken: mailbox unavailable (user unknown)']);
  });

  t.test('slowmx.test: every reply 150 ms late', async t => {
    let start = Date.now();
    const { c, banner } = await session(t, 'slowmx.test');
    t.strictSame(banner, ['220 mx1.slowmx.test ESMTP']);
    t.ok(Date.now() - start >= 140, 'banner late');
    start = Date.now();
    await c.cmd('EHLO client.test');
    t.ok(Date.now() - start >= 140, 'EHLO late');
    start = Date.now();
    t.strictSame(await c.cmd('MAIL FROM:<p@sender.test>'), OK_MAIL);
    t.strictSame(await c.cmd('RCPT TO:<jane.doe@slowmx.test>'), OK_RCPT);
    t.ok(Date.now() - start >= 280, 'MAIL and RCPT late');
  });
});

t.test('stats: keyed by MX address, summed per domain, reset', async t => {
  sim.resetStats();
  const { c } = await session(t, 'multimx.test', 1);
  await c.cmd('EHLO client.test');
  const all = sim.stats();
  const ips = new Set(SIM_DOMAINS.flatMap(d => d.mx.flatMap(m => (m.ip ? [m.ip] : []))));
  t.strictSame(new Set(Object.keys(all)), ips, 'one entry per MX address, dead ones included');
  t.strictSame(all['127.0.254.1'], EMPTY, 'dead mx1.multimx.test');
  t.strictSame(all['127.0.10.13'], { ...EMPTY, connections: 1, ehlo: 1 });
  t.strictSame(sim.statsFor('multimx.test'), { ...EMPTY, connections: 1, ehlo: 1 });
  t.strictSame(sim.statsFor('MultiMX.test.'), { ...EMPTY, connections: 1, ehlo: 1 });
  t.strictSame(sim.statsFor('nxdomain.test'), EMPTY);
  t.strictSame(sim.statsFor('bücher.test'), EMPTY);
  sim.resetStats();
  t.strictSame(sim.statsFor('multimx.test'), EMPTY);
});

t.test('other sims in parallel: own ports; close() is prompt with a tarpit pending; replyLatencyMs', async t => {
  const [slow, tarpit] = await Promise.all([startSim({ replyLatencyMs: 100 }), startSim()]);
  t.teardown(() => Promise.all([slow.close(), tarpit.close()]));
  t.not(slow.smtpPort, sim.smtpPort);
  t.not(tarpit.smtpPort, slow.smtpPort);
  t.not(slow.dnsServers, sim.dnsServers);

  let start = Date.now();
  const c = await SmtpClient.open(ipOf('accept.test'), slow.smtpPort);
  t.strictSame(await c.reply(), ['220 mx1.accept.test ESMTP']);
  t.ok(Date.now() - start >= 90, 'banner late');
  start = Date.now();
  await c.cmd('EHLO client.test');
  t.ok(Date.now() - start >= 90, 'EHLO late');
  c.close();

  const p = await SmtpClient.open(ipOf('tarpit.test'), tarpit.smtpPort);
  await p.reply();
  await p.cmd('EHLO client.test');
  await p.cmd('MAIL FROM:<p@sender.test>');
  p.write('RCPT TO:<jane.doe@tarpit.test>\r\n');
  await sleep(50);
  start = Date.now();
  await tarpit.close();
  await p.closedEvent;
  t.ok(Date.now() - start < 1000, `closed in ${Date.now() - start} ms`);
  t.strictSame(tarpit.statsFor('tarpit.test'), { ...EMPTY, connections: 1, ehlo: 1, mail: 1, rcpt: 1 });
  await tarpit.close(); // twice is fine
});

// ---------------------------------------------------------------------------------------------
// Postfix's limits for a client that never sends DATA (postconf(5)), on the postfix-limits MXs.
// Timing: errorSleepMs 200 and inFlowDelayMs 150 here; a reply without either comes in well under.

const POSTFIX_UNKNOWN = (addr: string): string[] => [`550 5.1.1 <${addr}>: Recipient address rejected: User unknown`];

/** EHLO and MAIL FROM on a postfix-limits MX, asserted. */
async function postfixReady(t: Tap, domain: string): Promise<SmtpClient> {
  const { c, banner } = await session(t, domain);
  t.strictSame(banner, [`220 mx1.${domain} ESMTP`], `${domain} banner`);
  t.equal((await c.cmd('EHLO client.test'))[0], `250-mx1.${domain}`, 'EHLO');
  t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test>'), ['250 2.1.0 Ok'], 'MAIL FROM');
  return c;
}

/** A command's reply and how long it took. */
async function timed(c: SmtpClient, line: string): Promise<{ reply: string[]; ms: number }> {
  const start = performance.now();
  const reply = await c.cmd(line);
  return { reply, ms: performance.now() - start };
}

t.test('postfix.test: soft error limit (every reply 1 s late after 10 errors), then 421 to the command after the 20th', async t => {
  const c = await postfixReady(t, 'postfix.test');
  for (let i = 1; i <= 20; i++) {
    const addr = `nobody${i}@postfix.test`;
    const r = await timed(c, `RCPT TO:<${addr}>`);
    t.strictSame(r.reply, POSTFIX_UNKNOWN(addr), `error ${i}`);
    if (i <= 10) t.ok(r.ms < 190, `error ${i}: answered at once (${r.ms.toFixed(0)} ms)`);
    else t.ok(r.ms >= 195, `error ${i}: answered after the error sleep (${r.ms.toFixed(0)} ms)`);
  }
  const last = await timed(c, 'RCPT TO:<jane.doe@postfix.test>');
  t.strictSame(last.reply, ['421 4.7.0 mx1.postfix.test Error: too many errors'], 'the next command, whatever it is, gets 421');
  t.ok(last.ms >= 195, `after the error sleep too (${last.ms.toFixed(0)} ms)`);
  await c.closedEvent;
  t.ok(c.closed, 'and the server closed the connection');
});

t.test('postfix.test: in_flow_delay before the first accepted RCPT of a transaction once the flow tokens are spent', async t => {
  // The server's 2 flow tokens: the first two transactions (on any session) accept at once.
  for (let i = 0; i < 2; i++) {
    const c = await postfixReady(t, 'postfix.test');
    const r = await timed(c, 'RCPT TO:<jane.doe@postfix.test>');
    t.strictSame(r.reply, ['250 2.1.5 Ok']);
    t.ok(r.ms < 140, `token ${i + 1}: at once (${r.ms.toFixed(0)} ms)`);
    c.close();
  }
  const c = await postfixReady(t, 'postfix.test');
  const first = await timed(c, 'RCPT TO:<jane.doe@postfix.test>');
  t.strictSame(first.reply, ['250 2.1.5 Ok']);
  t.ok(first.ms >= 145, `first accepted RCPT waited (${first.ms.toFixed(0)} ms)`);
  const second = await timed(c, 'RCPT TO:<john.smith@postfix.test>');
  t.strictSame(second.reply, ['250 2.1.5 Ok']);
  t.ok(second.ms < 140, `a later one did not (${second.ms.toFixed(0)} ms)`);
  const rejected = await timed(c, 'RCPT TO:<nobody@postfix.test>');
  t.ok(rejected.ms < 140, 'nor does a rejected one');
  t.strictSame(await c.cmd('RSET'), ['250 2.0.0 Ok']);
  t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test>'), ['250 2.1.0 Ok']);
  const again = await timed(c, 'RCPT TO:<info@postfix.test>');
  t.strictSame(again.reply, ['250 2.1.5 Ok']);
  t.ok(again.ms >= 145, `the next transaction pays it again (${again.ms.toFixed(0)} ms)`);
});

t.test('postfix.test: RSET and NOOP beyond 100 count as errors (junk command limit)', async t => {
  const c = await postfixReady(t, 'postfix.test');
  for (let i = 1; i <= 100; i++) t.strictSame(await c.cmd(i % 2 ? 'NOOP' : 'RSET'), ['250 2.0.0 Ok'], `junk ${i}`);
  // Junk 101-110 are errors 1-10: no sleep yet. The 111th is error 11: past the soft limit.
  for (let i = 101; i <= 110; i++) {
    const r = await timed(c, 'NOOP');
    t.ok(r.ms < 190, `junk ${i} (error ${i - 100}) at once (${r.ms.toFixed(0)} ms)`);
  }
  const late = await timed(c, 'RSET');
  t.strictSame(late.reply, ['250 2.0.0 Ok']);
  t.ok(late.ms >= 195, `junk 111 (error 11) after the error sleep (${late.ms.toFixed(0)} ms)`);
});

for (const [domain, limited] of [
  ['rcptlimit.test', '452 4.5.3 Error: too many recipients'],
  ['rcptlimit451.test', '451 4.5.3 Too many recipients'],
] as const) {
  t.test(`${domain}: a 4th recipient in one transaction is ${limited.slice(0, 9)}; a new transaction takes more`, async t => {
    const c = await postfixReady(t, domain);
    for (const local of ['jane.doe', 'john.smith', 'nobody']) {
      t.strictSame(await c.cmd(`RCPT TO:<${local}@${domain}>`), local === 'nobody' ? POSTFIX_UNKNOWN(`nobody@${domain}`) : ['250 2.1.5 Ok'], local);
    }
    t.strictSame(await c.cmd(`RCPT TO:<info@${domain}>`), [limited], 'the 4th, even a known mailbox');
    t.strictSame(await c.cmd(`RCPT TO:<sales@${domain}>`), [limited], 'and every one after it');
    t.strictSame(await c.cmd('RSET'), ['250 2.0.0 Ok']);
    t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test>'), ['250 2.1.0 Ok']);
    t.strictSame(await c.cmd(`RCPT TO:<info@${domain}>`), ['250 2.1.5 Ok'], 'a new transaction');
  });
}

t.test('connlimit.test: a 3rd connection from one client gets 421 at the banner', async t => {
  const a = await session(t, 'connlimit.test');
  const b = await session(t, 'connlimit.test');
  t.strictSame([a.banner, b.banner], [['220 mx1.connlimit.test ESMTP'], ['220 mx1.connlimit.test ESMTP']]);
  const third = await session(t, 'connlimit.test');
  t.strictSame(third.banner, ['421 4.7.0 mx1.connlimit.test Error: too many connections from 127.0.0.1']);
  await third.c.closedEvent;
  // Once one of the two goes, a new connection is served.
  a.c.close();
  await a.c.closedEvent;
  let banner: string[] = [];
  for (let i = 0; i < 50 && banner[0] !== '220 mx1.connlimit.test ESMTP'; i++) {
    const d = await session(t, 'connlimit.test');
    banner = d.banner;
    if (banner[0] !== '220 mx1.connlimit.test ESMTP') await d.c.closedEvent; // the server had not seen the close yet
  }
  t.strictSame(banner, ['220 mx1.connlimit.test ESMTP'], 'served again');
});


t.test('connlimit.test: the server counts a connection down when it hangs up (after its 221), as Postfix\'s anvil does', async t => {
  /** A served session (the previous test's connections may still be counted for a moment). */
  const served = async (): Promise<SmtpClient> => {
    for (let i = 0; i < 50; i++) {
      const d = await session(t, 'connlimit.test');
      if (d.banner[0] === '220 mx1.connlimit.test ESMTP') return d.c;
      await d.c.closedEvent;
    }
    throw new Error('never served');
  };
  const a = { c: await served() };
  await served();
  // QUIT on one of the two; the next connection, opened as soon as the 221 is read and before the
  // client has closed its side, is served at once.
  t.strictSame(await a.c.cmd('QUIT'), ['221 2.0.0 Bye']);
  const next = await session(t, 'connlimit.test');
  t.strictSame(next.banner, ['220 mx1.connlimit.test ESMTP'], 'served on the first attempt');
});

t.test("latencyModel 'network': pipelined commands share a round trip, the banner lands after two, 'serial' answers one per round trip", async t => {
  const rtt = 100;
  const [network, serial] = await Promise.all([startSim({ replyLatencyMs: rtt, latencyModel: 'network' }), startSim({ replyLatencyMs: rtt })]);
  t.teardown(() => Promise.all([network.close(), serial.close()]));
  const batch = ['MAIL FROM:<probe@sender.test>', ...[1, 2, 3, 4, 5].map(i => `RCPT TO:<nobody${i}@postfix.test>`), 'RCPT TO:<jane.doe@postfix.test>'];
  const measure = async (s: Sim): Promise<{ bannerMs: number; batchMs: number; replies: string[][] }> => {
    let start = performance.now();
    const c = await SmtpClient.open(ipOf('postfix.test'), s.smtpPort);
    t.teardown(() => c.close());
    t.strictSame(await c.reply(), ['220 mx1.postfix.test ESMTP']);
    const bannerMs = performance.now() - start;
    t.equal((await c.cmd('EHLO client.test'))[0], '250-mx1.postfix.test');
    start = performance.now();
    c.write(batch.map(l => `${l}\r\n`).join(''));
    const replies: string[][] = [];
    for (let i = 0; i < batch.length; i++) replies.push(await c.reply());
    return { bannerMs, batchMs: performance.now() - start, replies };
  };
  const n = await measure(network);
  const s = await measure(serial);
  const expected = [['250 2.1.0 Ok'], ...[1, 2, 3, 4, 5].map(i => POSTFIX_UNKNOWN(`nobody${i}@postfix.test`)), ['250 2.1.5 Ok']];
  t.strictSame(n.replies, expected, 'network: the same replies');
  t.strictSame(s.replies, expected, 'serial: the same replies');
  t.ok(n.bannerMs >= 2 * rtt - 5 && n.bannerMs < 3 * rtt, `network: banner after two round trips (${n.bannerMs.toFixed(0)} ms)`);
  t.ok(n.batchMs >= rtt - 5 && n.batchMs < 2 * rtt, `network: 7 pipelined commands in one round trip (${n.batchMs.toFixed(0)} ms)`);
  t.ok(s.bannerMs >= rtt - 5 && s.bannerMs < 2 * rtt, `serial: banner after one round trip (${s.bannerMs.toFixed(0)} ms)`);
  t.ok(s.batchMs >= batch.length * rtt - 5, `serial: one round trip per command (${s.batchMs.toFixed(0)} ms)`);
});

t.test('provider servers (providers.ts): each big mail system answers with its own wording', async t => {
  const ms = 'BN1NAM02FT022.mail.protection.outlook.com';
  // [domain, banner, MAIL reply, RCPT jane.doe reply, RCPT no.such.user reply]
  const cases: Array<[string, string[], string[], string[], string[]]> = [
    ['m365.test', [`220 ${ms} Microsoft ESMTP MAIL Service ready at Fri, 27 Nov 2026 07:00:00 +0000 08DE41AB68FE2DF5`], ['250 2.1.0 Sender OK'], ['250 2.1.5 Recipient OK'], ['550 5.4.1 Recipient address rejected: Access denied. AS(201806281) [BN1NAM02FT022.eop-nam02.prod.protection.outlook.com]']],
    ['exchange.test', [`220 ${ms} Microsoft ESMTP MAIL Service ready at Fri, 27 Nov 2026 07:00:00 +0000 08DE41AB68FE2DF5`], ['250 2.1.0 Sender OK'], ['250 2.1.5 Recipient OK'], ['550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup']],
    ['m365-banned.test', [`220 ${ms} Microsoft ESMTP MAIL Service ready at Fri, 27 Nov 2026 07:00:00 +0000 08DE41AB68FE2DF5`], ['250 2.1.0 Sender OK'],
      ['550 5.7.606 Access denied, banned sending IP [127.0.0.1]. To request removal from this list please visit https://sender.office.com/ and follow the directions. For more information please go to http://go.microsoft.com/fwlink/?LinkID=526655 AS(1430)'],
      ['550 5.7.606 Access denied, banned sending IP [127.0.0.1]. To request removal from this list please visit https://sender.office.com/ and follow the directions. For more information please go to http://go.microsoft.com/fwlink/?LinkID=526655 AS(1430)']],
    ['ironport.test', ['220 mx1.ironport.test ESMTP'], ['250 sender <probe@sender.test> ok'], ['250 recipient <jane.doe@ironport.test> ok'], ['550 #5.1.0 Address rejected.']],
    ['yahoo.test', ['220 mta7001.mail.gq1.yahoo.com ESMTP ready'], ['250 sender <probe@sender.test> ok'], ['250 recipient <jane.doe@yahoo.test> ok'], ['552 1 Requested mail action aborted, mailbox not found']],
    ['yahoo-blocked.test', ['220 mta7001.mail.gq1.yahoo.com ESMTP ready'], ['250 sender <probe@sender.test> ok'],
      ["553 5.7.1 [BL21] Connections will not be accepted from 127.0.0.1, because the ip is in Spamhaus's list; see https://postmaster.yahooinc.com/error-codes"],
      ["553 5.7.1 [BL21] Connections will not be accepted from 127.0.0.1, because the ip is in Spamhaus's list; see https://postmaster.yahooinc.com/error-codes"]],
    ['workspace.test', ['220 mx.google.com ESMTP a1si.123 - gsmtp'], ['250 2.1.0 OK a1si.123 - gsmtp'], ['250 2.1.5 OK a1si.123 - gsmtp'], [
      '550-5.1.1 The email account that you tried to reach does not exist. Please try',
      "550-5.1.1 double-checking the recipient's email address for typos or",
      '550-5.1.1 unnecessary spaces. For more information, go to',
      '550 5.1.1  https://support.google.com/mail/?p=NoSuchUser a1si.123 - gsmtp',
    ]],
    ['proofpoint.test', ['220 mx1.proofpoint.test ESMTP'], ['250 2.1.0 Ok'], ['250 2.1.5 Ok'], ['550 5.1.1 User Unknown']],
    ['proofpoint-blocked.test', ['220 mx1.proofpoint-blocked.test ESMTP'], ['250 2.1.0 Ok'], ['554 5.7.1 Blocked by policy: mx0a-00000001.pphosted.com'], ['554 5.7.1 Blocked by policy: mx0a-00000001.pphosted.com']],
    ['mimecast.test', ['220 mx1.mimecast.test ESMTP mx1'], ['250 OK'], ['250 Accepted'], ['550 Invalid Recipient - https://community.mimecast.com/docs/DOC-1369#550']],
    ['mimecast-blocked.test', ['220 mx1.mimecast-blocked.test ESMTP'], ['250 OK'], ['550 Administrative prohibition - envelope blocked - https://community.mimecast.com/docs/DOC-1369#550'], ['550 Administrative prohibition - envelope blocked - https://community.mimecast.com/docs/DOC-1369#550']],
    ['barracuda.test', ['220 mx1.barracuda.test ESMTP (a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6)'], ['250 Sender <probe@sender.test> OK'], ['250 Recipient <jane.doe@barracuda.test> OK'], ['550 No such user (no.such.user@barracuda.test)']],
    ['barracuda-blocked.test', ['220 mx1.barracuda-blocked.test ESMTP'], ['250 OK'],
      ['554 Service unavailable; Client host [127.0.0.1] blocked using Barracuda Reputation; https://www.barracudanetworks.com/reputation/?pr=1&ip=127.0.0.1'],
      ['554 Service unavailable; Client host [127.0.0.1] blocked using Barracuda Reputation; https://www.barracudanetworks.com/reputation/?pr=1&ip=127.0.0.1']],
    ['zoho.test', ['220 mx1.zoho.test SMTP Server ready November 27, 2026 7:00:00 AM UTC'], ['250 Sender <probe> OK'], ['250 Recipient OK'], ['550 5.1.1 User does not exist - <no.such.user@zoho.test>']],
    ['cyrillic.test', ['220 mx1.cyrillic.test ESMTP'], ['250 OK'], ['250 OK'], ['550 Пользователь не найден']],
  ];
  for (const [domain, banner, mail, known, unknown] of cases) {
    sim.resetStats();
    const s = await session(t, domain);
    t.strictSame(s.banner, banner, `${domain} banner`);
    t.equal((await s.c.cmd('EHLO client.test'))[0]?.slice(0, 4), '250-', `${domain} EHLO`);
    t.strictSame(await s.c.cmd('MAIL FROM:<probe@sender.test>'), mail, `${domain} MAIL`);
    t.strictSame(await s.c.cmd(`RCPT TO:<jane.doe@${domain}>`), known, `${domain} known`);
    t.strictSame(await s.c.cmd(`RCPT TO:<no.such.user@${domain}>`), unknown, `${domain} unknown`);
    t.strictSame(await s.c.cmd('QUIT'), ['221 2.0.0 Bye'], `${domain} QUIT`);
    t.strictSame(sim.statsFor(domain), { ...EMPTY, connections: 1, ehlo: 1, mail: 1, rcpt: 2, quit: 1 }, `${domain} counters`);
  }

  // Yahoo's [TSS04] deferral comes at MAIL FROM, and the server hangs up.
  const y = await session(t, 'yahoo-deferred.test');
  await y.c.cmd('EHLO client.test');
  t.strictSame(await y.c.cmd('MAIL FROM:<probe@sender.test>'), [
    '421 4.7.0 [TSS04] Messages from 127.0.0.1 temporarily deferred due to unexpected volume or user complaints - 4.16.55.1; see https://postmaster.yahooinc.com/error-codes',
  ]);
  await y.c.closedEvent;
  t.equal(y.c.closed, true, 'closed after the 421');

  // latin1.test writes Latin-1: "ä" is the one byte 0xE4 on the wire, not UTF-8's 0xC3 0xA4.
  const sock = net.connect({ host: ipOf('latin1.test'), port: sim.smtpPort });
  t.teardown(() => sock.destroy());
  const chunks: Buffer[] = [];
  sock.on('data', (c: Buffer) => chunks.push(c));
  await once(sock, 'connect');
  sock.write('EHLO client.test\r\nMAIL FROM:<probe@sender.test>\r\nRCPT TO:<jane.doe@latin1.test>\r\nRCPT TO:<no.such.user@latin1.test>\r\nQUIT\r\n');
  await once(sock, 'close');
  const wire = Buffer.concat(chunks);
  t.equal(wire.toString('latin1'), '220 mx1.latin1.test ESMTP\r\n250-mx1.latin1.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n250 OK\r\n250 OK\r\n550 Empf\u00e4nger unbekannt\r\n221 2.0.0 Bye\r\n');
  t.ok(wire.includes(Buffer.from([0x35, 0x35, 0x30, 0x20, 0x45, 0x6d, 0x70, 0x66, 0xe4, 0x6e])), 'the byte 0xE4');
  t.notOk(wire.includes(Buffer.from([0xc3, 0xa4])), 'no UTF-8 ä');
});

// ---------------------------------------------------------------------------------------------
// One Postfix instance behind several MX hosts (one flow-token pool), and anvil's count-down lag:
// servers of their own (startMx), on 127.0.49.x.

/** A context like startSim's, with a session log; in_flow_delay 150 ms. */
function standaloneContext(log: SimSessionRecord[]): SmtpContext {
  return { greylistMs: 300, tarpitMs: 400, slowBannerMs: 400, replyLatencyMs: 0, errorSleepMs: 200, inFlowDelayMs: 150, timers: new Timers(), limitEvents: new Map(), sessionLog: r => log.push(r) };
}

/** startMx on a random free port, retried on EADDRINUSE. */
async function startStandalone(specs: MxServerSpec[], ctx: SmtpContext): Promise<{ port: number; servers: RunningMx[] }> {
  for (let attempt = 0; ; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 40_000);
    const servers: RunningMx[] = [];
    try {
      for (const spec of specs) servers.push(await startMx(spec, port, ctx));
      return { port, servers };
    } catch (err) {
      await Promise.all(servers.map(s => s.close()));
      if ((err as { code?: string }).code !== 'EADDRINUSE' || attempt >= 20) throw err;
    }
  }
}

t.test('PostfixInstance: two MX hosts of one instance share its flow tokens; the session log counts the waits', async t => {
  const log: SimSessionRecord[] = [];
  const ctx = standaloneContext(log);
  const instance = new PostfixInstance({ flowTokens: 2 });
  const hosts = ['mx1.shared.test', 'mx2.shared.test'];
  const { port, servers } = await startStandalone(
    hosts.map((host, i) => ({ ip: `127.0.49.${i + 1}`, host, kind: 'postfix-limits' as const, limits: { inFlowDelay: true, flowTokens: 50 }, instance })),
    ctx,
  );
  t.teardown(async () => {
    ctx.timers.clear();
    await Promise.all(servers.map(s => s.close()));
  });
  /** One transaction on host i: MAIL, an unknown recipient, then a known one; the known one's reply time. */
  const transaction = async (i: number): Promise<number> => {
    const c = await SmtpClient.open(`127.0.49.${i + 1}`, port);
    t.strictSame(await c.reply(), [`220 ${hosts[i]} ESMTP`]);
    t.equal((await c.cmd('EHLO client.test'))[0], `250-${hosts[i]}`);
    t.strictSame(await c.cmd('MAIL FROM:<probe@sender.test>'), ['250 2.1.0 Ok']);
    t.strictSame(await c.cmd('RCPT TO:<nobody@shared.test>'), POSTFIX_UNKNOWN('nobody@shared.test'), 'a rejection takes no token');
    const r = await timed(c, 'RCPT TO:<jane.doe@shared.test>');
    t.strictSame(r.reply, ['250 2.1.5 Ok']);
    t.strictSame(await c.cmd('QUIT'), ['221 2.0.0 Bye']);
    await c.closedEvent;
    return r.ms;
  };
  const first = await transaction(0);
  const second = await transaction(1);
  t.ok(first < 140 && second < 140, `the instance's 2 tokens, one per host: at once (${first.toFixed(0)}, ${second.toFixed(0)} ms)`);
  const third = await transaction(0);
  t.ok(third >= 145, `the third transaction waits: the instance's pool, not the server's own flowTokens 50 (${third.toFixed(0)} ms)`);
  t.strictSame([instance.tokens, instance.tokensTaken, instance.flowWaits], [0, 2, 1]);
  t.strictSame(Object.fromEntries(ctx.limitEvents), { 'mx1.shared.test in_flow_delay': 1 });
  await until(() => log.length === 3, 2000, 'three sessions logged');
  t.strictSame(
    log.map(r => [r.host, r.transactions, r.accepted, r.rejected, r.flowWaits, r.refused]),
    [
      ['mx1.shared.test', 1, 1, 1, 0, false],
      ['mx2.shared.test', 1, 1, 1, 0, false],
      ['mx1.shared.test', 1, 1, 1, 1, false],
    ],
  );
  t.ok(log.every(r => r.endMs >= r.startMs), 'start before end');
});

t.test('anvilLagMs: a connection still counts for a while after the server hung up; the refusal is counted as anvil_lag', async t => {
  const log: SimSessionRecord[] = [];
  const ctx = standaloneContext(log);
  const host = 'mx1.anvil-lag.test';
  const { port, servers } = await startStandalone([{ ip: '127.0.49.3', host, kind: 'postfix-limits', limits: { connectionsPerClient: 1, anvilLagMs: 400 } }], ctx);
  t.teardown(async () => {
    ctx.timers.clear();
    await Promise.all(servers.map(s => s.close()));
  });
  const open = async (): Promise<{ c: SmtpClient; banner: string[] }> => {
    const c = await SmtpClient.open('127.0.49.3', port);
    t.teardown(() => c.close());
    return { c, banner: await c.reply() };
  };
  const a = await open();
  t.strictSame(a.banner, [`220 ${host} ESMTP`]);
  t.strictSame(await a.c.cmd('QUIT'), ['221 2.0.0 Bye']);
  await a.c.closedEvent;
  const refusedAt = performance.now();
  const b = await open();
  t.strictSame(b.banner, [`421 4.7.0 ${host} Error: too many connections from 127.0.0.1`], 'the ended session still counts');
  await b.c.closedEvent;
  t.strictSame(Object.fromEntries(ctx.limitEvents), { [`${host} banner_421`]: 1, [`${host} anvil_lag`]: 1 });
  // Once the lag is over, served again (the refused connection's own count-down lags too).
  t.strictSame(servers[0]!.anvil!(), { '127.0.0.1': 2 }, 'both ended connections still count');
  await until(() => Object.keys(servers[0]!.anvil!()).length === 0, 3000, 'anvil counted both down');
  t.ok(performance.now() - refusedAt >= 350, `not before the lag (${(performance.now() - refusedAt).toFixed(0)} ms)`);
  const c = await open();
  t.strictSame(c.banner, [`220 ${host} ESMTP`], 'served again');
  t.strictSame(servers[0]!.anvil!(), { '127.0.0.1': 1 });
});
