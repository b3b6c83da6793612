// The socket side of an SMTP probe, on node:net / node:tls. A thin driver: it writes commands,
// matches each reply to the oldest one in flight within the phase's timeout, and reports anything
// else (an unsolicited reply, a closed line, a timeout) as a SessionFailure. It decides nothing:
// which command comes next is smtp/opening.ts (then the engine's session driver over
// smtp/conversation.ts), what a reply says about a mailbox is smtp/classify.ts.

import net from 'node:net';
import tls from 'node:tls';
import type { SendResult, SessionFailure, SmtpConnectOptions, SmtpConnector, SmtpPhase, SmtpSession } from '../ports.ts';
import { openingStart, openingStep, type OpeningInput } from '../smtp/opening.ts';
import { command, ReplyReader, SmtpProtocolError } from '../smtp/reply.ts';
import type { SmtpReply } from '../types.ts';

/**
 * One TLS context for every probe of a connector, and the last TLS session per MX host for
 * resumption: a full handshake is most of a probe's CPU (bench/RESULTS.md). One per engine (its
 * connector's), never shared through the module: two engines in a process keep their own.
 */
export class TlsCache {
  readonly context = tls.createSecureContext({});
  readonly #sessions = new Map<string, Buffer>();

  constructor(readonly maxSessions = 10_000) {}

  /** The last session of `host`, to resume. */
  session(host: string): Buffer | undefined {
    return this.#sessions.get(host);
  }

  remember(host: string, session: Buffer): void {
    if (this.#sessions.size >= this.maxSessions) this.#sessions.clear();
    this.#sessions.set(host, session);
  }

  get size(): number {
    return this.#sessions.size;
  }
}

type Waiter = { phase: SmtpPhase; resolve: (r: SendResult) => void; timer?: NodeJS.Timeout };

class NetSession implements SmtpSession {
  extensions: ReadonlySet<string> = new Set();
  tls = false;
  #socket: net.Socket;
  #reader = new ReplyReader();
  /** Commands written and not yet answered, oldest first; only the oldest has its timer running. */
  #waiters: Waiter[] = [];
  #closed: SessionFailure | undefined;
  #pending: SmtpReply[] = [];

  constructor(
    socket: net.Socket,
    readonly opts: SmtpConnectOptions,
    readonly tlsCache: TlsCache,
  ) {
    this.#socket = socket;
    this.#attach(socket);
  }

  #attach(socket: net.Socket): void {
    // No setEncoding: the same socket may later carry TLS, and a reply may be UTF-8 or Latin-1. The
    // reader takes the bytes and decodes each complete line (smtp/reply.ts, decodeReplyLine).
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', (err: NodeJS.ErrnoException) => this.#fail({ phase: this.#waiters[0]?.phase ?? 'rcpt', kind: 'connection', detail: err.code ?? err.message }));
    socket.on('close', () => this.#fail({ phase: this.#waiters[0]?.phase ?? 'rcpt', kind: 'connection', detail: 'connection closed by server' }));
  }

  #onData(chunk: Buffer): void {
    let replies: SmtpReply[];
    try {
      replies = this.#reader.push(chunk);
    } catch (err) {
      const detail = err instanceof SmtpProtocolError ? `${err.message}: ${err.detail}` : String(err);
      this.#fail({ phase: this.#waiters[0]?.phase ?? 'rcpt', kind: 'protocol', detail });
      this.#socket.destroy();
      return;
    }
    for (const reply of replies) {
      const w = this.#waiters.shift();
      if (!w) {
        // A reply nobody asked for: the dialogue is out of step. Keep it so the next send sees it.
        this.#pending.push(reply);
        continue;
      }
      clearTimeout(w.timer);
      w.resolve({ ok: true, reply });
      this.#arm();
    }
  }

  /** Starts the reply timeout of the oldest unanswered command (each reply gets the full phase timeout). */
  #arm(): void {
    const w = this.#waiters[0];
    if (!w || w.timer) return;
    w.timer = setTimeout(() => {
      this.#fail({ phase: w.phase, kind: 'timeout', detail: `no reply within ${this.opts.timeoutMs} ms` });
      this.#socket.destroy();
    }, this.opts.timeoutMs);
  }

  #fail(failure: SessionFailure): void {
    if (this.#closed) return;
    this.#closed = failure;
    for (const w of this.#waiters.splice(0)) {
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
      this.#waiters.push({ phase, resolve });
      this.#arm();
    });
  }

  async send(phase: SmtpPhase, line: string): Promise<SendResult> {
    return (await this.sendMany(phase, [line]))[0]!;
  }

  /**
   * Writes the commands at once and returns their replies in order (RFC 2920 PIPELINING; with
   * one command, a plain exchange). Anything that breaks the dialogue fails every later reply.
   */
  sendMany(phase: SmtpPhase, lines: readonly string[]): Promise<SendResult[]> {
    return Promise.all(this.write(phase, lines));
  }

  write(phase: SmtpPhase, lines: readonly string[]): Promise<SendResult>[] {
    const all = (failure: SessionFailure) => lines.map(() => Promise.resolve<SendResult>({ ok: false, failure }));
    if (this.#closed) return all({ ...this.#closed, phase });
    if (this.#waiters.length > 0) return all({ phase, kind: 'protocol', detail: 'command sent while another is in flight' });
    const stray = this.#pending.shift();
    if (stray) {
      // A reply nobody asked for: the dialogue is out of step, so every later reply would be
      // matched to the wrong command. Write nothing more; end the session.
      const failure: SessionFailure = { phase, kind: 'protocol', detail: `unexpected reply before command: ${stray.code}`, reply: stray };
      this.#fail(failure);
      this.#socket.destroy();
      return all(failure);
    }
    let text: string;
    try {
      text = lines.map((l) => command(l)).join('');
    } catch (err) {
      return all({ phase, kind: 'protocol', detail: String((err as Error).message) });
    }
    const results = lines.map(() => this.next(phase));
    this.#socket.write(text);
    return results;
  }

  async upgrade(): Promise<SendResult | undefined> {
    // RFC 3207: after "220 Ready to start TLS" the client starts the handshake on the same socket.
    const plain = this.#socket;
    plain.removeAllListeners('data');
    plain.removeAllListeners('close');
    plain.removeAllListeners('error');
    return new Promise((resolve) => {
      const name = this.opts.servername;
      const resume = this.tlsCache.session(name);
      const secure = tls.connect({ socket: plain, servername: net.isIP(name) ? undefined : name, rejectUnauthorized: false, secureContext: this.tlsCache.context, ...(resume ? { session: resume } : {}) });
      secure.on('session', (session: Buffer) => this.tlsCache.remember(name, session));
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

  async quit(): Promise<boolean> {
    let answered = false;
    if (!this.#closed && this.#waiters.length === 0) {
      const r = await this.send('quit', 'QUIT');
      answered = r.ok && r.reply.code >= 200 && r.reply.code < 300;
    }
    this.destroy();
    return answered;
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

/**
 * A connector on node:net with its own TLS cache (give each engine its own). Opens a session:
 * connect, then the opening reducer (smtp/opening.ts) decides every command (greeting, EHLO or
 * HELO, STARTTLS when offered, EHLO again); this only performs its effects.
 */
export function createNetSmtpConnector(tlsCache: TlsCache = new TlsCache()): SmtpConnector {
  return { open: (opts) => openSession(opts, tlsCache) };
}

/** A connector with a TLS cache of its own, for callers that build one engine (tests, benchmarks). */
export const netSmtpConnector: SmtpConnector = createNetSmtpConnector();

async function openSession(opts: SmtpConnectOptions, tlsCache: TlsCache): ReturnType<SmtpConnector['open']> {
  const c = await connectSocket(opts);
  if (!c.ok) return c;
  const s = new NetSession(c.socket, opts, tlsCache);
  let { state, effects } = openingStart(opts.heloName);
  for (;;) {
    let input: OpeningInput | undefined;
    for (const e of effects) {
      switch (e.type) {
        case 'read':
        case 'send': {
          const r = e.type === 'read' ? await s.next(e.phase) : await s.send(e.phase, e.line);
          input = r.ok ? { type: 'reply', reply: r.reply } : { type: 'failure', failure: r.failure };
          break;
        }
        case 'upgrade': {
          const up = await s.upgrade();
          input = up && !up.ok ? { type: 'tls', failure: up.failure } : { type: 'tls' };
          break;
        }
        case 'quit':
          await s.quit();
          break;
        case 'ready':
          s.extensions = new Set(e.extensions);
          return { ok: true, session: s };
        case 'failed':
          s.destroy();
          return { ok: false, failure: e.failure };
      }
    }
    if (!input) throw new Error('smtp-net: the opening asked for nothing');
    ({ state, effects } = openingStep(state, input));
  }
}
