// The socket side of an SMTP probe, on node:net / node:tls. A thin driver: it writes one command,
// waits for exactly one reply within the phase's timeout (STYLE 9), and reports anything else
// (an unsolicited reply, a closed line, a timeout) as a SessionFailure. It decides nothing about
// mailboxes: that is smtp/classify.ts.

import net from 'node:net';
import tls from 'node:tls';
import { StringDecoder } from 'node:string_decoder';
import type { SendResult, SessionFailure, SmtpConnectOptions, SmtpConnector, SmtpPhase, SmtpSession } from '../ports.ts';
import { command, ehloKeywords, ReplyReader, SmtpProtocolError } from '../smtp/reply.ts';
import type { SmtpReply } from '../types.ts';

type Waiter = { phase: SmtpPhase; resolve: (r: SendResult) => void; timer: NodeJS.Timeout };

class NetSession implements SmtpSession {
  extensions: ReadonlySet<string> = new Set();
  tls = false;
  #socket: net.Socket;
  #reader = new ReplyReader();
  #waiter: Waiter | undefined;
  #closed: SessionFailure | undefined;
  #pending: SmtpReply[] = [];

  constructor(
    socket: net.Socket,
    readonly opts: SmtpConnectOptions,
  ) {
    this.#socket = socket;
    this.#attach(socket);
  }

  #attach(socket: net.Socket): void {
    // No setEncoding: the same socket may later carry TLS. Decode here, keeping split UTF-8 sequences.
    const decoder = new StringDecoder('utf8');
    socket.on('data', (chunk: Buffer) => this.#onData(decoder.write(chunk)));
    socket.on('error', (err: NodeJS.ErrnoException) => this.#fail({ phase: this.#waiter?.phase ?? 'rcpt', kind: 'connection', detail: err.code ?? err.message }));
    socket.on('close', () => this.#fail({ phase: this.#waiter?.phase ?? 'rcpt', kind: 'connection', detail: 'connection closed by server' }));
  }

  #onData(chunk: string): void {
    let replies: SmtpReply[];
    try {
      replies = this.#reader.push(chunk);
    } catch (err) {
      const detail = err instanceof SmtpProtocolError ? `${err.message}: ${err.detail}` : String(err);
      this.#fail({ phase: this.#waiter?.phase ?? 'rcpt', kind: 'protocol', detail });
      this.#socket.destroy();
      return;
    }
    for (const reply of replies) {
      const w = this.#waiter;
      if (!w) {
        // A reply nobody asked for: the dialogue is out of step. Keep the first so the next send sees it.
        this.#pending.push(reply);
        continue;
      }
      this.#waiter = undefined;
      clearTimeout(w.timer);
      w.resolve({ ok: true, reply });
    }
  }

  #fail(failure: SessionFailure): void {
    if (this.#closed) return;
    this.#closed = failure;
    const w = this.#waiter;
    if (w) {
      this.#waiter = undefined;
      clearTimeout(w.timer);
      w.resolve({ ok: false, failure: { ...failure, phase: w.phase } });
    }
  }

  /** Waits for the next reply (the greeting, or the answer to a command just written). */
  next(phase: SmtpPhase): Promise<SendResult> {
    if (this.#pending.length > 0) {
      const stray = this.#pending.shift()!;
      if (phase !== 'greeting') {
        return Promise.resolve({ ok: false, failure: { phase, kind: 'protocol', detail: `unexpected reply before command: ${stray.code}`, reply: stray } });
      }
      return Promise.resolve({ ok: true, reply: stray });
    }
    if (this.#closed) return Promise.resolve({ ok: false, failure: { ...this.#closed, phase } });
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#waiter = undefined;
        this.#fail({ phase, kind: 'timeout', detail: `no reply within ${this.opts.timeoutMs} ms` });
        resolve({ ok: false, failure: { phase, kind: 'timeout', detail: `no reply within ${this.opts.timeoutMs} ms` } });
        this.#socket.destroy();
      }, this.opts.timeoutMs);
      this.#waiter = { phase, resolve, timer };
    });
  }

  send(phase: SmtpPhase, line: string): Promise<SendResult> {
    if (this.#closed) return Promise.resolve({ ok: false, failure: { ...this.#closed, phase } });
    if (this.#waiter) return Promise.resolve({ ok: false, failure: { phase, kind: 'protocol', detail: 'command sent while another is in flight' } });
    const stray = this.#pending.shift();
    if (stray) {
      // A reply nobody asked for: the dialogue is out of step, so every later reply would be
      // matched to the wrong command. Write nothing more; end the session (STYLE 2).
      const failure: SessionFailure = { phase, kind: 'protocol', detail: `unexpected reply before command: ${stray.code}`, reply: stray };
      this.#fail(failure);
      this.#socket.destroy();
      return Promise.resolve({ ok: false, failure });
    }
    let text: string;
    try {
      text = command(line);
    } catch (err) {
      return Promise.resolve({ ok: false, failure: { phase, kind: 'protocol', detail: String((err as Error).message) } });
    }
    const result = this.next(phase);
    this.#socket.write(text);
    return result;
  }

  async upgrade(): Promise<SendResult | undefined> {
    // RFC 3207: after "220 Ready to start TLS" the client starts the handshake on the same socket.
    const plain = this.#socket;
    plain.removeAllListeners('data');
    plain.removeAllListeners('close');
    plain.removeAllListeners('error');
    return new Promise((resolve) => {
      const secure = tls.connect({ socket: plain, servername: net.isIP(this.opts.servername) ? undefined : this.opts.servername, rejectUnauthorized: false });
      const timer = setTimeout(() => {
        secure.destroy();
        resolve({ ok: false, failure: { phase: 'starttls', kind: 'timeout', detail: 'TLS handshake timed out' } });
      }, this.opts.timeoutMs);
      secure.once('secureConnect', () => {
        clearTimeout(timer);
        secure.removeAllListeners('error');
        this.#socket = secure;
        this.#reader = new ReplyReader();
        this.#attach(secure);
        this.tls = true;
        resolve(undefined);
      });
      secure.once('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        resolve({ ok: false, failure: { phase: 'starttls', kind: 'connection', detail: err.code ?? err.message } });
      });
    });
  }

  async quit(): Promise<void> {
    if (!this.#closed && !this.#waiter) {
      const r = await this.send('quit', 'QUIT');
      void r;
    }
    this.destroy();
  }

  destroy(): void {
    this.#closed ??= { phase: 'quit', kind: 'connection', detail: 'closed' };
    this.#socket.destroy();
  }
}

function connectSocket(opts: SmtpConnectOptions): Promise<{ ok: true; socket: net.Socket } | { ok: false; failure: SessionFailure }> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: opts.host, port: opts.port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ ok: false, failure: { phase: 'connect', kind: 'timeout', detail: `no connection within ${opts.timeoutMs} ms` } });
    }, opts.timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve({ ok: true, socket });
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ ok: false, failure: { phase: 'connect', kind: 'connection', detail: err.code ?? err.message } });
    });
  });
}

const fail = (failure: SessionFailure) => ({ ok: false as const, failure });

/** Opens a session: connect, greeting, EHLO (HELO fallback), STARTTLS when offered, EHLO again. */
export const netSmtpConnector: SmtpConnector = {
  async open(opts) {
    const c = await connectSocket(opts);
    if (!c.ok) return c;
    const s = new NetSession(c.socket, opts);
    const bail = (failure: SessionFailure) => {
      s.destroy();
      return fail(failure);
    };
    const greeting = await s.next('greeting');
    if (!greeting.ok) return bail(greeting.failure);
    if (greeting.reply.code !== 220) return bail({ phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: greeting.reply });

    const hello = async (): Promise<SessionFailure | undefined> => {
      const ehlo = await s.send('ehlo', `EHLO ${opts.heloName}`);
      if (!ehlo.ok) return ehlo.failure;
      if (ehlo.reply.code === 250) {
        s.extensions = ehloKeywords(ehlo.reply);
        return undefined;
      }
      if (ehlo.reply.code === 421) return { phase: 'ehlo', kind: 'reply', detail: 'server closing', reply: ehlo.reply };
      // RFC 5321 4.1.4: a server that does not know EHLO answers 500/502; fall back to HELO.
      const helo = await s.send('helo', `HELO ${opts.heloName}`);
      if (!helo.ok) return helo.failure;
      if (helo.reply.code !== 250) return { phase: 'helo', kind: 'reply', detail: 'HELO refused', reply: helo.reply };
      s.extensions = new Set();
      return undefined;
    };
    const f1 = await hello();
    if (f1) return bail(f1);
    if (s.extensions.has('STARTTLS')) {
      const st = await s.send('starttls', 'STARTTLS');
      if (!st.ok) return bail(st.failure);
      if (st.reply.code === 220) {
        const up = await s.upgrade();
        if (up && !up.ok) return bail(up.failure);
        const f2 = await hello();
        if (f2) return bail(f2);
      }
      // A refused STARTTLS (454) leaves the plain session usable: go on without TLS.
    }
    return { ok: true, session: s };
  },
};
