// Baseline: the smallest hand-rolled SMTP client that holds the same dialogue as the verifier's
// (connect, 220, EHLO, STARTTLS + TLS handshake + EHLO when asked, MAIL, RCPT, QUIT). No reply
// parsing beyond the code, no classification, no timers per phase: one timer for the dialogue.

import net from 'node:net';
import tls from 'node:tls';

export interface BareDialogue {
  host: string;
  port: number;
  servername: string;
  helo: string;
  mailFrom: string;
  rcpt: string;
  starttls: boolean;
  timeoutMs: number;
}

class Replies {
  #buf = '';
  #codes: number[] = [];
  #waiter: ((code: number) => void) | undefined;
  #fail: ((err: Error) => void) | undefined;
  #error: Error | undefined;

  readonly onData = (chunk: Buffer): void => {
    this.#buf += chunk.toString('latin1');
    let nl: number;
    while ((nl = this.#buf.indexOf('\n')) >= 0) {
      const line = this.#buf.slice(0, nl);
      this.#buf = this.#buf.slice(nl + 1);
      if (line.length >= 3 && line[3] !== '-') this.#deliver(Number(line.slice(0, 3)));
    }
  };

  readonly onError = (err: Error): void => {
    this.#error = err;
    const f = this.#fail;
    this.#waiter = this.#fail = undefined;
    f?.(err);
  };

  #deliver(code: number): void {
    const w = this.#waiter;
    if (w) {
      this.#waiter = this.#fail = undefined;
      w(code);
    } else this.#codes.push(code);
  }

  next(): Promise<number> {
    const c = this.#codes.shift();
    if (c !== undefined) return Promise.resolve(c);
    if (this.#error) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => {
      this.#waiter = resolve;
      this.#fail = reject;
    });
  }

  reset(): void {
    this.#buf = '';
    this.#codes = [];
  }
}

function expect(code: number, want: number, what: string): void {
  if (code !== want) throw new Error(`bare SMTP: ${what} answered ${code}, expected ${want}`);
}

/** One whole dialogue; resolves with the RCPT reply code. */
export async function bareSmtpDialogue(o: BareDialogue): Promise<number> {
  let socket: net.Socket = net.connect({ host: o.host, port: o.port });
  const r = new Replies();
  socket.on('data', r.onData);
  socket.on('error', r.onError);
  const timer = setTimeout(() => r.onError(new Error('bare SMTP: dialogue timed out')), o.timeoutMs);
  try {
    expect(await r.next(), 220, 'greeting');
    socket.write(`EHLO ${o.helo}\r\n`);
    expect(await r.next(), 250, 'EHLO');
    if (o.starttls) {
      socket.write('STARTTLS\r\n');
      expect(await r.next(), 220, 'STARTTLS');
      socket.off('data', r.onData);
      socket.off('error', r.onError);
      r.reset();
      const secure = tls.connect({ socket, servername: o.servername, rejectUnauthorized: false });
      secure.on('error', r.onError);
      await new Promise<void>((resolve, reject) => {
        secure.once('secureConnect', resolve);
        secure.once('error', reject);
      });
      secure.on('data', r.onData);
      socket = secure;
      socket.write(`EHLO ${o.helo}\r\n`);
      expect(await r.next(), 250, 'EHLO after STARTTLS');
    }
    socket.write(`MAIL FROM:<${o.mailFrom}>\r\n`);
    expect(await r.next(), 250, 'MAIL');
    socket.write(`RCPT TO:<${o.rcpt}>\r\n`);
    const code = await r.next();
    socket.write('QUIT\r\n');
    expect(await r.next(), 221, 'QUIT');
    return code;
  } finally {
    clearTimeout(timer);
    socket.destroy();
  }
}
