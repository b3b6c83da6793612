// The node:net SMTP driver against tiny scripted servers on 127.0.0.1 (port 0): greeting,
// EHLO/HELO, STARTTLS refusal, out-of-step replies, dropped lines, timeouts, QUIT.

import t from 'tap';
import net from 'node:net';
import { netSmtpConnector } from '../src/adapters/smtp-net.ts';
import type { SmtpConnectOptions, SmtpSession } from '../src/ports.ts';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Resolves with `p`, or rejects after `ms` so a regression fails fast instead of hanging. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}

/** The part of a tap test the helpers need. */
interface Teardown {
  teardown(fn: () => unknown): void;
}

interface Conn {
  socket: net.Socket;
  write(s: string): void;
  /** Resolves when the client's side of the connection is gone. */
  closed: Promise<void>;
}

/** Answers one line from the client; return a string to write it, undefined to stay silent. */
type Handler = (line: string, conn: Conn) => string | undefined | void;

interface Server {
  port: number;
  /** Every line received, across connections, without CRLF. */
  lines: string[];
  conns: Conn[];
  close(): Promise<void>;
}

const EHLO_OK = '250-mx.test.example Hello\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-ENHANCEDSTATUSCODES\r\n250 SMTPUTF8\r\n';

/** The usual answers; a test's handler runs first and falls back here by returning undefined. */
function defaults(line: string, conn: Conn): string | undefined {
  const verb = line.split(/[ :]/)[0]!.toUpperCase();
  switch (verb) {
    case 'EHLO':
      return EHLO_OK;
    case 'HELO':
      return '250 mx.test.example\r\n';
    case 'MAIL':
      return '250 2.1.0 Ok\r\n';
    case 'RCPT':
      return '250 2.1.5 Ok\r\n';
    case 'RSET':
      return '250 2.0.0 Ok\r\n';
    case 'QUIT':
      setImmediate(() => conn.socket.end());
      return '221 2.0.0 Bye\r\n';
    default:
      return '502 5.5.2 Error: command not recognized\r\n';
  }
}

async function serve(t: Teardown, opts: { greeting?: string | null; handle?: Handler; onConnect?: (conn: Conn) => void } = {}): Promise<Server> {
  const lines: string[] = [];
  const conns: Conn[] = [];
  const server = net.createServer((socket) => {
    let closedResolve!: () => void;
    const conn: Conn = {
      socket,
      write: (s) => {
        if (!socket.destroyed) socket.write(s);
      },
      closed: new Promise<void>((r) => (closedResolve = r)),
    };
    conns.push(conn);
    socket.on('close', () => closedResolve());
    socket.on('error', () => {});
    socket.setNoDelay(true);
    let buf = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\r\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 2);
        lines.push(line);
        const custom = opts.handle?.(line, conn);
        const out = custom === undefined ? defaults(line, conn) : custom;
        if (out) conn.write(out);
      }
    });
    const greeting = opts.greeting === undefined ? '220 mx.test.example ESMTP ready\r\n' : opts.greeting;
    if (greeting !== null) socket.write(greeting);
    opts.onConnect?.(conn);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  const close = async () => {
    for (const c of conns) c.socket.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  };
  t.teardown(close);
  return { port, lines, conns, close };
}

const options = (port: number, timeoutMs = 400): SmtpConnectOptions => ({ host: '127.0.0.1', servername: 'mx.test.example', port, heloName: 'verifier.test', timeoutMs });

async function openOk(t: Teardown, port: number, timeoutMs?: number): Promise<SmtpSession> {
  const r = await netSmtpConnector.open(options(port, timeoutMs));
  if (!r.ok) throw new Error(`open failed: ${JSON.stringify(r.failure)}`);
  t.teardown(() => r.session.destroy());
  return r.session;
}

t.test('a whole session: greeting, EHLO, MAIL, RCPT, RSET, QUIT', async (t) => {
  const srv = await serve(t, { greeting: '220-mx.test.example ESMTP\r\n220 no UCE\r\n' });
  const s = await openOk(t, srv.port);
  t.strictSame([...s.extensions], ['PIPELINING', '8BITMIME', 'ENHANCEDSTATUSCODES', 'SMTPUTF8']);
  t.equal(s.tls, false);
  t.strictSame(await s.send('mail', 'MAIL FROM:<probe@verifier.test>'), { ok: true, reply: { code: 250, enhanced: '2.1.0', text: 'Ok', lines: ['250 2.1.0 Ok'] } });
  t.strictSame(await s.send('rcpt', 'RCPT TO:<josé@b.test>'), { ok: true, reply: { code: 250, enhanced: '2.1.5', text: 'Ok', lines: ['250 2.1.5 Ok'] } });
  t.strictSame(await s.send('rset', 'RSET'), { ok: true, reply: { code: 250, enhanced: '2.0.0', text: 'Ok', lines: ['250 2.0.0 Ok'] } });
  await s.quit();
  t.strictSame(srv.lines, ['EHLO verifier.test', 'MAIL FROM:<probe@verifier.test>', 'RCPT TO:<josé@b.test>', 'RSET', 'QUIT']);
  await within(srv.conns[0]!.closed, 2000, 'the connection closes');
  // After QUIT the session is closed: a send is a failure, not an exception.
  const after = await s.send('rcpt', 'RCPT TO:<x@b.test>');
  t.strictSame(after, { ok: false, failure: { phase: 'rcpt', kind: 'connection', detail: 'closed' } });
});

t.test('replies split into single bytes are reassembled', async (t) => {
  const bytewise = async (conn: Conn, text: string) => {
    for (const ch of text) {
      conn.write(ch);
      await sleep(0);
    }
  };
  const srv = await serve(t, {
    greeting: null,
    onConnect: (conn) => void bytewise(conn, '220-mx.test.example\r\n220 ready\r\n'),
    handle: (line, conn) => {
      if (!line.startsWith('EHLO')) return undefined;
      void bytewise(conn, EHLO_OK);
      return '';
    },
  });
  const s = await openOk(t, srv.port);
  t.strictSame([...s.extensions], ['PIPELINING', '8BITMIME', 'ENHANCEDSTATUSCODES', 'SMTPUTF8']);
  t.strictSame(srv.lines, ['EHLO verifier.test'], 'EHLO went out only after the whole greeting');
});

t.test('replies in Latin-1 and UTF-8 arrive decoded, whatever the TCP segments', async (t) => {
  const latin1 = Buffer.concat([Buffer.from('550 Empf'), Buffer.from([0xe4]), Buffer.from('nger unbekannt\r\n')]);
  const utf8 = Buffer.from('550-5.1.1 Пользователь не найден\r\n550 5.1.1 用户不存在\r\n', 'utf8');
  const srv = await serve(t, {
    handle: (line, conn) => {
      if (line === 'RCPT TO:<a@b.test>') {
        conn.socket.write(latin1);
        return '';
      }
      if (line === 'RCPT TO:<c@b.test>') {
        // Cut inside two Cyrillic characters (and between others), one segment at a time.
        const cuts = [12, 13, 50, 51];
        let from = 0;
        void (async () => {
          for (const cut of [...cuts, utf8.length]) {
            conn.socket.write(utf8.subarray(from, cut));
            from = cut;
            await sleep(5);
          }
        })();
        return '';
      }
      return undefined;
    },
  });
  const s = await openOk(t, srv.port);
  await s.send('mail', 'MAIL FROM:<probe@verifier.test>');
  t.strictSame(await s.send('rcpt', 'RCPT TO:<a@b.test>'), { ok: true, reply: { code: 550, text: 'Empfänger unbekannt', lines: ['550 Empfänger unbekannt'] } });
  t.strictSame(await s.send('rcpt', 'RCPT TO:<c@b.test>'), {
    ok: true,
    reply: { code: 550, enhanced: '5.1.1', text: 'Пользователь не найден\n用户不存在', lines: ['550-5.1.1 Пользователь не найден', '550 5.1.1 用户不存在'] },
  });
});

t.test('connection refused', async (t) => {
  const probe = net.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  const r = await netSmtpConnector.open(options(port));
  t.strictSame(r, { ok: false, failure: { phase: 'connect', kind: 'connection', detail: 'ECONNREFUSED' } });
});

t.test('greeting timeout: the server says nothing', async (t) => {
  const srv = await serve(t, { greeting: null });
  const started = performance.now();
  const r = await netSmtpConnector.open(options(srv.port, 150));
  const elapsed = performance.now() - started;
  t.strictSame(r, { ok: false, failure: { phase: 'greeting', kind: 'timeout', detail: 'no reply within 150 ms' } });
  t.ok(elapsed >= 140 && elapsed < 1000, `timed out after ${elapsed.toFixed(0)} ms`);
  await within(srv.conns[0]!.closed, 2000, 'the connection closes');
  t.pass('the client closed the connection');
  t.strictSame(srv.lines, [], 'nothing was sent before the greeting');
});

t.test('a 421 banner refuses the session', async (t) => {
  const srv = await serve(t, { greeting: '421 4.3.2 mx.test.example Service not available, closing transmission channel\r\n' });
  const r = await netSmtpConnector.open(options(srv.port));
  t.strictSame(r, {
    ok: false,
    failure: {
      phase: 'greeting',
      kind: 'reply',
      detail: 'server refused the session',
      reply: {
        code: 421,
        enhanced: '4.3.2',
        text: 'mx.test.example Service not available, closing transmission channel',
        lines: ['421 4.3.2 mx.test.example Service not available, closing transmission channel'],
      },
    },
  });
  await within(srv.conns[0]!.closed, 2000, 'the connection closes');
  t.strictSame(srv.lines, [], 'no EHLO after a refused greeting');
});

t.test('a 554 banner (RFC 5321 3.1 "no SMTP service here") refuses the session too', async (t) => {
  const srv = await serve(t, { greeting: '554 No SMTP service here\r\n' });
  const r = await netSmtpConnector.open(options(srv.port));
  t.equal(r.ok, false);
  if (!r.ok) t.strictSame([r.failure.phase, r.failure.kind, r.failure.reply?.code], ['greeting', 'reply', 554]);
});

t.test('EHLO 502: falls back to HELO, with no extensions', async (t) => {
  const srv = await serve(t, { handle: (line) => (line.startsWith('EHLO') ? '502 5.5.1 Command not implemented\r\n' : undefined) });
  const s = await openOk(t, srv.port);
  t.equal(s.extensions.size, 0);
  t.equal(s.tls, false);
  const mail = await s.send('mail', 'MAIL FROM:<probe@verifier.test>');
  t.equal(mail.ok && mail.reply.code, 250);
  t.strictSame(srv.lines, ['EHLO verifier.test', 'HELO verifier.test', 'MAIL FROM:<probe@verifier.test>']);
});

t.test('EHLO 500 then HELO refused: failure in phase helo', async (t) => {
  const srv = await serve(t, {
    handle: (line) => (line.startsWith('EHLO') ? '500 5.5.2 Syntax error, command unrecognized\r\n' : line.startsWith('HELO') ? '550 5.7.1 Go away\r\n' : undefined),
  });
  const r = await netSmtpConnector.open(options(srv.port));
  t.strictSame(r, { ok: false, failure: { phase: 'helo', kind: 'reply', detail: 'HELO refused', reply: { code: 550, enhanced: '5.7.1', text: 'Go away', lines: ['550 5.7.1 Go away'] } } });
});

t.test('EHLO 421: the server is closing, no HELO fallback', async (t) => {
  const srv = await serve(t, { handle: (line) => (line.startsWith('EHLO') ? '421 4.7.0 Too busy\r\n' : undefined) });
  const r = await netSmtpConnector.open(options(srv.port));
  t.equal(r.ok, false);
  if (!r.ok) t.strictSame([r.failure.phase, r.failure.kind, r.failure.detail, r.failure.reply?.code], ['ehlo', 'reply', 'server closing', 421]);
  t.strictSame(srv.lines, ['EHLO verifier.test']);
});

t.test('STARTTLS advertised but refused with 454: the session goes on in plain text', async (t) => {
  const srv = await serve(t, {
    handle: (line) => {
      if (line.startsWith('EHLO')) return '250-mx.test.example\r\n250-STARTTLS\r\n250 SMTPUTF8\r\n';
      if (line === 'STARTTLS') return '454 4.7.0 TLS not available due to temporary reason\r\n';
      return undefined;
    },
  });
  const s = await openOk(t, srv.port);
  t.equal(s.tls, false);
  t.strictSame([...s.extensions], ['STARTTLS', 'SMTPUTF8']);
  const mail = await s.send('mail', 'MAIL FROM:<probe@verifier.test> SMTPUTF8');
  t.strictSame(mail, { ok: true, reply: { code: 250, enhanced: '2.1.0', text: 'Ok', lines: ['250 2.1.0 Ok'] } });
  t.strictSame(srv.lines, ['EHLO verifier.test', 'STARTTLS', 'MAIL FROM:<probe@verifier.test> SMTPUTF8']);
});

t.test('two replies to one command: the next send is a protocol failure and nothing more is written', async (t) => {
  const srv = await serve(t, { handle: (line) => (line.startsWith('MAIL') ? '250 2.1.0 Ok\r\n250 2.0.0 and another thing\r\n' : undefined) });
  const s = await openOk(t, srv.port);
  const mail = await s.send('mail', 'MAIL FROM:<probe@verifier.test>');
  t.equal(mail.ok && mail.reply.text, 'Ok', 'the first reply answers MAIL');
  await sleep(20);
  const stray = { code: 250, enhanced: '2.0.0', text: 'and another thing', lines: ['250 2.0.0 and another thing'] };
  const rcpt = await s.send('rcpt', 'RCPT TO:<a@b.test>');
  t.strictSame(rcpt, { ok: false, failure: { phase: 'rcpt', kind: 'protocol', detail: 'unexpected reply before command: 250', reply: stray } });
  // The session is over: later sends fail the same way, and the line is closed.
  const again = await s.send('rset', 'RSET');
  t.strictSame(again, { ok: false, failure: { phase: 'rset', kind: 'protocol', detail: 'unexpected reply before command: 250', reply: stray } });
  await within(srv.conns[0]!.closed, 2000, 'the connection closes');
  t.strictSame(srv.lines, ['EHLO verifier.test', 'MAIL FROM:<probe@verifier.test>'], 'the RCPT was never written');
  await s.quit();
  t.pass('quit() on the dead session does not throw');
});

t.test('an unsolicited reply arriving between commands is caught too', async (t) => {
  const srv = await serve(t, {
    handle: (line, conn) => {
      if (!line.startsWith('MAIL')) return undefined;
      setTimeout(() => conn.write('421 4.4.2 idle for too long\r\n'), 15);
      return '250 2.1.0 Ok\r\n';
    },
  });
  const s = await openOk(t, srv.port);
  t.equal((await s.send('mail', 'MAIL FROM:<probe@verifier.test>')).ok, true);
  await sleep(50);
  const rcpt = await s.send('rcpt', 'RCPT TO:<a@b.test>');
  t.equal(rcpt.ok, false);
  if (!rcpt.ok) t.strictSame([rcpt.failure.phase, rcpt.failure.kind, rcpt.failure.reply?.code], ['rcpt', 'protocol', 421]);
});

t.test('a malformed reply is a protocol failure in the phase that was waiting', async (t) => {
  const srv = await serve(t, { handle: (line) => (line.startsWith('MAIL') ? 'this is not smtp\r\n' : undefined) });
  const s = await openOk(t, srv.port);
  const r = await s.send('mail', 'MAIL FROM:<probe@verifier.test>');
  t.strictSame(r, { ok: false, failure: { phase: 'mail', kind: 'protocol', detail: 'malformed reply line: this is not smtp' } });
  await within(srv.conns[0]!.closed, 2000, 'the connection closes');
  t.pass('the driver closed the connection');
});

t.test('an endless reply is cut off at the byte cap', async (t) => {
  const srv = await serve(t, {
    handle: (line, conn) => {
      if (!line.startsWith('MAIL')) return undefined;
      conn.write('250-');
      conn.write('x'.repeat(20_000));
      return '';
    },
  });
  const s = await openOk(t, srv.port);
  const r = await s.send('mail', 'MAIL FROM:<probe@verifier.test>');
  t.equal(r.ok, false);
  if (!r.ok) {
    t.equal(r.failure.phase, 'mail');
    t.equal(r.failure.kind, 'protocol');
    t.match(r.failure.detail, /^reply too long: \d+ bytes$/);
  }
});

t.test('connection closed mid-command: a connection failure in that phase', async (t) => {
  const srv = await serve(t, {
    handle: (line, conn) => {
      if (line.startsWith('RCPT')) {
        conn.socket.destroy();
        return '';
      }
      return undefined;
    },
  });
  const s = await openOk(t, srv.port);
  t.equal((await s.send('mail', 'MAIL FROM:<probe@verifier.test>')).ok, true);
  const r = await s.send('rcpt', 'RCPT TO:<a@b.test>');
  t.equal(r.ok, false);
  if (!r.ok) {
    t.equal(r.failure.phase, 'rcpt');
    t.equal(r.failure.kind, 'connection');
    t.ok(['connection closed by server', 'ECONNRESET', 'EPIPE'].includes(r.failure.detail), r.failure.detail);
  }
  // Later sends report the closed line with their own phase.
  const again = await s.send('rset', 'RSET');
  t.equal(again.ok, false);
  if (!again.ok) t.strictSame([again.failure.phase, again.failure.kind], ['rset', 'connection']);
  await s.quit();
  t.pass('quit() after the server went away does not throw');
  t.equal(srv.lines.includes('QUIT'), false, 'no QUIT written to a dead socket');
});

t.test('connection closed during EHLO: open fails in phase ehlo', async (t) => {
  const srv = await serve(t, {
    handle: (line, conn) => {
      if (line.startsWith('EHLO')) {
        conn.socket.end();
        return '';
      }
      return undefined;
    },
  });
  const r = await netSmtpConnector.open(options(srv.port));
  t.equal(r.ok, false);
  if (!r.ok) {
    t.equal(r.failure.phase, 'ehlo');
    t.equal(r.failure.kind, 'connection');
  }
});

t.test('no reply to RCPT: a timeout in phase rcpt, then the session is closed', async (t) => {
  const srv = await serve(t, { handle: (line) => (line.startsWith('RCPT') ? '' : undefined) });
  const s = await openOk(t, srv.port, 150);
  const started = performance.now();
  const r = await s.send('rcpt', 'RCPT TO:<a@b.test>');
  t.strictSame(r, { ok: false, failure: { phase: 'rcpt', kind: 'timeout', detail: 'no reply within 150 ms' } });
  t.ok(performance.now() - started >= 140);
  await within(srv.conns[0]!.closed, 2000, 'the connection closes');
  const again = await s.send('rset', 'RSET');
  t.strictSame(again, { ok: false, failure: { phase: 'rset', kind: 'timeout', detail: 'no reply within 150 ms' } });
});

t.test('a command with a line break is refused before anything is written', async (t) => {
  const srv = await serve(t);
  const s = await openOk(t, srv.port);
  const r = await s.send('rcpt', 'RCPT TO:<a@b.test>\r\nDATA');
  t.strictSame(r, { ok: false, failure: { phase: 'rcpt', kind: 'protocol', detail: 'refusing to send a command with a line break' } });
  // The session is still usable: nothing went out.
  const ok = await s.send('rcpt', 'RCPT TO:<a@b.test>');
  t.equal(ok.ok, true);
  t.strictSame(srv.lines, ['EHLO verifier.test', 'RCPT TO:<a@b.test>']);
});

t.test('quit(): sends QUIT, bounded by the timeout, never throws', async (t) => {
  // A server that never answers QUIT: quit() still returns, after the phase timeout.
  const srv = await serve(t, { handle: (line) => (line === 'QUIT' ? '' : undefined) });
  const s = await openOk(t, srv.port, 150);
  const started = performance.now();
  await s.quit();
  const elapsed = performance.now() - started;
  t.ok(elapsed >= 140 && elapsed < 1000, `quit() gave up after ${elapsed.toFixed(0)} ms`);
  t.strictSame(srv.lines, ['EHLO verifier.test', 'QUIT']);
  await within(srv.conns[0]!.closed, 2000, 'the connection closes');
  // Twice is harmless and sends nothing more.
  await s.quit();
  t.strictSame(srv.lines, ['EHLO verifier.test', 'QUIT']);

  // The server went away first: quit() writes nothing and resolves.
  const srv2 = await serve(t);
  const s2 = await openOk(t, srv2.port);
  srv2.conns[0]!.socket.destroy();
  await sleep(20);
  await s2.quit();
  t.strictSame(srv2.lines, ['EHLO verifier.test']);

  // destroy() then quit(): nothing written either.
  const srv3 = await serve(t);
  const s3 = await openOk(t, srv3.port);
  s3.destroy();
  await s3.quit();
  await within(srv3.conns[0]!.closed, 2000, 'the connection closes');
  t.strictSame(srv3.lines, ['EHLO verifier.test']);
});

t.test('a 554 greeting is answered with QUIT before closing', async (t) => {
  const got: string[] = [];
  const server = net.createServer((sock) => {
    sock.write('554 5.7.1 No SMTP service here\r\n');
    sock.on('data', (d) => {
      got.push(...d.toString().split('\r\n').filter(Boolean));
      if (d.toString().startsWith('QUIT')) sock.end('221 2.0.0 Bye\r\n');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const r = await netSmtpConnector.open({ host: '127.0.0.1', servername: 'mx.test', port, heloName: 'probe.test', timeoutMs: 1000 });
  t.equal(r.ok, false);
  if (!r.ok) t.same([r.failure.phase, r.failure.kind, r.failure.reply?.code], ['greeting', 'reply', 554]);
  t.strictSame(got, ['QUIT']);
});

t.test('TLS caches belong to their connector: sessions kept per host, bounded, never shared', async (t) => {
  const { TlsCache, createNetSmtpConnector } = await import('../src/adapters/smtp-net.ts');
  const a = new TlsCache(2);
  const b = new TlsCache(2);
  a.remember('mx1.test', Buffer.from('one'));
  t.equal(a.session('mx1.test')?.toString(), 'one');
  t.equal(b.session('mx1.test'), undefined, 'another cache knows nothing of it');
  t.not(a.context, b.context, 'each has its own TLS context');
  a.remember('mx2.test', Buffer.from('two'));
  a.remember('mx3.test', Buffer.from('three'));
  t.equal(a.size, 1, 'past the bound the cache starts again');
  t.equal(a.session('mx3.test')?.toString(), 'three');
  const srv = await serve(t);
  const r = await createNetSmtpConnector(b).open(options(srv.port));
  t.equal(r.ok, true, 'a connector built on a cache opens sessions');
  if (r.ok) r.session.destroy();
});
