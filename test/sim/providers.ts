// The big mail systems of the simulated internet: small scripted `node:net` servers that answer
// with each provider's own wording (docs/smtp-replies.md has the source of every reply). Their
// domains are the `provider` rows of SIM_DOMAINS (domains.ts); index.ts starts one server per
// MX address, on the shared SMTP port, as for the other kinds.
//
// A script is data: the banner, the EHLO reply, the replies to MAIL and RCPT (known mailboxes
// are SIM_KNOWN_MAILBOXES), and the charset the server writes in (`latin1`: one byte a character,
// as old European servers do).

import net from 'node:net';
import { SIM_KNOWN_MAILBOXES } from './domains.ts';
import { emptyStats, mailboxKey, SOCKET_TIMEOUT_MS, type MxServerSpec, type MxStats, type RunningMx, type SmtpContext } from './smtp.ts';

export type ProviderId =
  | 'microsoft-365'
  | 'exchange-resolver'
  | 'microsoft-banned-ip'
  | 'cisco-ironport'
  | 'yahoo'
  | 'yahoo-deferred'
  | 'yahoo-blocked'
  | 'google'
  | 'proofpoint'
  | 'proofpoint-blocked'
  | 'mimecast'
  | 'mimecast-blocked'
  | 'barracuda'
  | 'barracuda-blocked'
  | 'zoho'
  | 'qmail-chkuser'
  | 'german-latin1'
  | 'russian-utf8';

/** A reply: its lines, and whether the server hangs up after it. */
interface Reply {
  lines: string[];
  close?: boolean;
}

interface Script {
  banner: (host: string) => string[];
  ehlo: (host: string, client: string) => string[];
  /** Reply to MAIL FROM (the address as written). */
  mail: (from: string, client: string) => Reply;
  /** Reply to RCPT TO for a known mailbox. */
  known: (rcpt: string) => string[];
  /** Reply to RCPT TO for any other address. */
  unknown: (rcpt: string, client: string) => string[];
  /** Every RCPT gets this (a block of the sending IP), known mailbox or not. */
  every?: (rcpt: string, client: string) => string[];
  charset?: 'utf8' | 'latin1';
}

const MS_HOST = 'BN1NAM02FT022.mail.protection.outlook.com';
const microsoft = (over: Partial<Script>): Script => ({
  banner: () => [`220 ${MS_HOST} Microsoft ESMTP MAIL Service ready at Fri, 27 Nov 2026 07:00:00 +0000 08DE41AB68FE2DF5`],
  ehlo: (_h, client) => [`250-${MS_HOST} Hello [${client}]`, '250-SIZE 157286400', '250-PIPELINING', '250-DSN', '250-ENHANCEDSTATUSCODES', '250-8BITMIME', '250-BINARYMIME', '250 CHUNKING'],
  mail: () => ({ lines: ['250 2.1.0 Sender OK'] }),
  known: () => ['250 2.1.5 Recipient OK'],
  unknown: () => ['550 5.4.1 Recipient address rejected: Access denied. AS(201806281) [BN1NAM02FT022.eop-nam02.prod.protection.outlook.com]'],
  ...over,
});

const YAHOO_HOST = 'mta7001.mail.gq1.yahoo.com';
const yahoo = (over: Partial<Script>): Script => ({
  banner: () => [`220 ${YAHOO_HOST} ESMTP ready`],
  ehlo: () => [`250-${YAHOO_HOST}`, '250-PIPELINING', '250-SIZE 41943040', '250 8BITMIME'],
  mail: (from) => ({ lines: [`250 sender <${from}> ok`] }),
  known: (rcpt) => [`250 recipient <${rcpt}> ok`],
  unknown: () => ['552 1 Requested mail action aborted, mailbox not found'],
  ...over,
});

/** A Postfix-like front (ENHANCEDSTATUSCODES) with the provider's own RCPT wording. */
const postfixLike = (over: Partial<Script>): Script => ({
  banner: (host) => [`220 ${host} ESMTP`],
  ehlo: (host) => [`250-${host}`, '250-PIPELINING', '250-SIZE 52428800', '250-8BITMIME', '250 ENHANCEDSTATUSCODES'],
  mail: () => ({ lines: ['250 2.1.0 Ok'] }),
  known: () => ['250 2.1.5 Ok'],
  unknown: (rcpt) => [`550 5.1.1 <${rcpt}>: Recipient address rejected: User unknown`],
  ...over,
});

/** An old MTA without enhanced status codes. */
const plain = (over: Partial<Script>): Script => ({
  banner: (host) => [`220 ${host} ESMTP`],
  ehlo: (host) => [`250-${host}`, '250-PIPELINING', '250 8BITMIME'],
  mail: () => ({ lines: ['250 OK'] }),
  known: () => ['250 OK'],
  unknown: () => ['550 User unknown'],
  ...over,
});

const SCRIPTS: Record<ProviderId, Script> = {
  'microsoft-365': microsoft({}),
  'exchange-resolver': microsoft({ unknown: () => ['550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup'] }),
  'microsoft-banned-ip': microsoft({
    every: (_r, client) => [
      `550 5.7.606 Access denied, banned sending IP [${client}]. To request removal from this list please visit https://sender.office.com/ and follow the directions. For more information please go to http://go.microsoft.com/fwlink/?LinkID=526655 AS(1430)`,
    ],
  }),
  'cisco-ironport': {
    banner: (host) => [`220 ${host} ESMTP`],
    ehlo: (host) => [`250-${host}`, '250-8BITMIME', '250-SIZE 10485760', '250 PIPELINING'],
    mail: (from) => ({ lines: [`250 sender <${from}> ok`] }),
    known: (rcpt) => [`250 recipient <${rcpt}> ok`],
    unknown: () => ['550 #5.1.0 Address rejected.'],
  },
  yahoo: yahoo({}),
  'yahoo-deferred': yahoo({
    mail: (_f, client) => ({
      lines: [`421 4.7.0 [TSS04] Messages from ${client} temporarily deferred due to unexpected volume or user complaints - 4.16.55.1; see https://postmaster.yahooinc.com/error-codes`],
      close: true,
    }),
  }),
  'yahoo-blocked': yahoo({
    every: (_r, client) => [`553 5.7.1 [BL21] Connections will not be accepted from ${client}, because the ip is in Spamhaus's list; see https://postmaster.yahooinc.com/error-codes`],
  }),
  google: {
    banner: () => ['220 mx.google.com ESMTP a1si.123 - gsmtp'],
    ehlo: (_h, client) => [`250-mx.google.com at your service, [${client}]`, '250-SIZE 157286400', '250-8BITMIME', '250-ENHANCEDSTATUSCODES', '250-PIPELINING', '250 CHUNKING'],
    mail: () => ({ lines: ['250 2.1.0 OK a1si.123 - gsmtp'] }),
    known: () => ['250 2.1.5 OK a1si.123 - gsmtp'],
    unknown: () => [
      '550-5.1.1 The email account that you tried to reach does not exist. Please try',
      "550-5.1.1 double-checking the recipient's email address for typos or",
      '550-5.1.1 unnecessary spaces. For more information, go to',
      '550 5.1.1  https://support.google.com/mail/?p=NoSuchUser a1si.123 - gsmtp',
    ],
  },
  proofpoint: postfixLike({ unknown: () => ['550 5.1.1 User Unknown'] }),
  'proofpoint-blocked': postfixLike({ every: () => ['554 5.7.1 Blocked by policy: mx0a-00000001.pphosted.com'] }),
  mimecast: plain({
    banner: (host) => [`220 ${host} ESMTP ${host.split('.')[0]}`],
    known: () => ['250 Accepted'],
    unknown: () => ['550 Invalid Recipient - https://community.mimecast.com/docs/DOC-1369#550'],
  }),
  'mimecast-blocked': plain({ every: () => ['550 Administrative prohibition - envelope blocked - https://community.mimecast.com/docs/DOC-1369#550'] }),
  barracuda: plain({
    banner: (host) => [`220 ${host} ESMTP (a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6)`],
    mail: (from) => ({ lines: [`250 Sender <${from}> OK`] }),
    known: (rcpt) => [`250 Recipient <${rcpt}> OK`],
    unknown: (rcpt) => [`550 No such user (${rcpt})`],
  }),
  'barracuda-blocked': plain({
    every: (_r, client) => [`554 Service unavailable; Client host [${client}] blocked using Barracuda Reputation; https://www.barracudanetworks.com/reputation/?pr=1&ip=${client}`],
  }),
  zoho: postfixLike({
    banner: (host) => [`220 ${host} SMTP Server ready November 27, 2026 7:00:00 AM UTC`],
    mail: () => ({ lines: ['250 Sender <probe> OK'] }),
    known: () => ['250 Recipient OK'],
    unknown: (rcpt) => [`550 5.1.1 User does not exist - <${rcpt}>`],
  }),
  // qmail with chkuser: the enhanced code last, in brackets, and the non-standard 511.
  'qmail-chkuser': plain({ unknown: () => ['511 sorry, no mailbox here by that name (#5.1.1 - chkuser)'] }),
  // A German server that writes its replies in Latin-1: "ä" is the single byte 0xE4 on the wire.
  'german-latin1': plain({ unknown: () => ['550 Empfänger unbekannt'], charset: 'latin1' }),
  'russian-utf8': plain({ unknown: () => ['550 Пользователь не найден'] }),
};

const KNOWN = new Set(SIM_KNOWN_MAILBOXES.map(mailboxKey));

const COUNTED: Readonly<Record<string, keyof MxStats>> = { EHLO: 'ehlo', HELO: 'helo', STARTTLS: 'starttls', MAIL: 'mail', RCPT: 'rcpt', RSET: 'rset', QUIT: 'quit', DATA: 'data' };

/** The reply a provider's server gives to one command line (exported for the sim's own tests). */
export function providerReply(id: ProviderId, host: string, client: string, line: string, state: { greeted: boolean; mail: string | null }): Reply {
  const script = SCRIPTS[id];
  const verb = (line.trim().split(/\s+/, 1)[0] ?? '').toUpperCase();
  const arg = /<([^<>]*)>/.exec(line)?.[1];
  switch (verb) {
    case 'EHLO':
      state.greeted = true;
      state.mail = null;
      return { lines: script.ehlo(host, client) };
    case 'HELO':
      state.greeted = true;
      state.mail = null;
      return { lines: [`250 ${host}`] };
    case 'MAIL': {
      if (!state.greeted) return { lines: ['503 5.5.1 Error: send HELO/EHLO first'] };
      if (arg === undefined) return { lines: ['501 5.5.4 Syntax error in parameters or arguments'] };
      const r = script.mail(arg, client);
      if (r.lines[0]?.startsWith('2')) state.mail = arg;
      return r;
    }
    case 'RCPT': {
      if (state.mail === null) return { lines: ['503 5.5.1 Error: need MAIL command'] };
      if (arg === undefined) return { lines: ['501 5.5.4 Syntax error in parameters or arguments'] };
      if (script.every) return { lines: script.every(arg, client) };
      return { lines: KNOWN.has(mailboxKey(arg)) ? script.known(arg) : script.unknown(arg, client) };
    }
    case 'RSET':
      state.mail = null;
      return { lines: ['250 2.0.0 OK'] };
    case 'NOOP':
      return { lines: ['250 2.0.0 OK'] };
    case 'DATA':
      return { lines: ['554 5.5.1 Error: DATA is not accepted here (a validator never sends DATA)'] };
    case 'QUIT':
      return { lines: ['221 2.0.0 Bye'], close: true };
    default:
      return { lines: ['502 5.5.2 Error: command not recognized'] };
  }
}

/** Starts the scripted server of one provider MX. */
export async function startProviderMx(spec: MxServerSpec & { provider: ProviderId }, port: number, ctx: SmtpContext): Promise<RunningMx> {
  const stats = emptyStats();
  const script = SCRIPTS[spec.provider];
  const encoding: BufferEncoding = script.charset ?? 'utf8';
  const sockets = new Set<net.Socket>();

  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {
      // resets from clients that hang up: nothing to do
    });
    socket.setNoDelay(true);
    stats.connections++;
    const client = socket.remoteAddress ?? '';
    const state = { greeted: false, mail: null as string | null };
    let closed = false;
    let buffer = Buffer.alloc(0);

    // Replies leave in order, each replyLatencyMs after its command (timers of equal delay fire in order).
    const send = (r: Reply): void => {
      if (r.close) closed = true;
      ctx.timers.after(ctx.replyLatencyMs, () => {
        if (socket.destroyed) return;
        socket.write(Buffer.from(r.lines.map((l) => `${l}\r\n`).join(''), encoding));
        if (r.close) socket.end();
      });
    };

    socket.setTimeout(SOCKET_TIMEOUT_MS, () => {
      if (!closed) send({ lines: ['421 4.4.2 Error: timeout exceeded'], close: true });
    });
    socket.on('data', (chunk: Buffer) => {
      if (closed) return;
      buffer = Buffer.concat([buffer, chunk]);
      let nl: number;
      while (!closed && (nl = buffer.indexOf(0x0a)) >= 0) {
        const line = buffer.subarray(0, nl).toString('utf8').replace(/\r$/, '');
        buffer = buffer.subarray(nl + 1);
        const key = COUNTED[(line.trim().split(/\s+/, 1)[0] ?? '').toUpperCase()];
        if (key) stats[key]++;
        send(providerReply(spec.provider, spec.host, client, line, state));
      }
      if (buffer.length > 16 * 1024) send({ lines: ['500 5.5.2 Error: line too long'], close: true });
    });
    send({ lines: script.banner(spec.host) });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host: spec.ip, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });

  return {
    ip: spec.ip,
    stats,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
