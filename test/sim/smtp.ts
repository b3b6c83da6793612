// The sim's mail servers. Most are `smtp-server` instances with a few per-connection hooks; the
// behaviours smtp-server cannot produce (a 421 banner, replies without enhanced status codes, no
// EHLO, multi-line banners and rejections) are small scripted servers on `node:net`.
//
// Every server binds its own loopback address on the one shared SMTP port, because the service
// under test uses a single SMTP port for every MX (SVC_SMTP_PORT).

import net from 'node:net';
import type tls from 'node:tls';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { SMTPConnection, type SMTPConnectionOptions } from 'smtp-server/lib/smtp-connection.js';
import {
  SIM_KNOWN_MAILBOXES,
  SIM_UTF8_MAILBOXES,
  SLOW_MX_LATENCY_MS,
  type MxLimits,
  type SmtpKind,
} from './domains.ts';

export interface MxStats {
  connections: number;
  ehlo: number;
  helo: number;
  starttls: number;
  mail: number;
  rcpt: number;
  rset: number;
  quit: number;
  data: number;
}

export function emptyStats(): MxStats {
  return { connections: 0, ehlo: 0, helo: 0, starttls: 0, mail: 0, rcpt: 0, rset: 0, quit: 0, data: 0 };
}

const COUNTED_VERBS: Readonly<Record<string, Exclude<keyof MxStats, 'connections'>>> = {
  EHLO: 'ehlo',
  HELO: 'helo',
  STARTTLS: 'starttls',
  MAIL: 'mail',
  RCPT: 'rcpt',
  RSET: 'rset',
  QUIT: 'quit',
  DATA: 'data',
};

function countVerb(stats: MxStats, verb: string): void {
  const key = COUNTED_VERBS[verb];
  if (key) stats[key]++;
}

/** Idle time after which a server says 421 and closes, like a real MTA (Postfix waits 300 s; tests need less). */
export const SOCKET_TIMEOUT_MS = 30_000;
/** Longest command line the raw servers buffer (RFC 5321 4.5.3.1.4 allows 512; be generous). */
const MAX_LINE = 16 * 1024;

/** Timers that `close()` must be able to cancel (tarpits, slow banners, injected latency). */
export class Timers {
  private readonly pending = new Set<NodeJS.Timeout>();
  private closed = false;

  /** Runs `fn` after `ms`, or at once when `ms` is 0. */
  after(ms: number, fn: () => void): void {
    if (this.closed) return;
    if (ms <= 0) {
      fn();
      return;
    }
    const t = setTimeout(() => {
      this.pending.delete(t);
      fn();
    }, ms);
    this.pending.add(t);
  }

  clear(): void {
    this.closed = true;
    for (const t of this.pending) clearTimeout(t);
    this.pending.clear();
  }
}

export interface SmtpContext {
  greylistMs: number;
  tarpitMs: number;
  slowBannerMs: number;
  replyLatencyMs: number;
  /**
   * How the raw (`postfix-limits`) servers spend `replyLatencyMs` (default 'serial'):
   * - 'serial': one command at a time, each answered `replyLatencyMs` after the previous reply, so a
   *   pipelined batch costs a round trip per command (a slow server, or the "one RCPT per
   *   round trip");
   * - 'network': a link with `replyLatencyMs / 2` each way, as a real MTA behind real latency is:
   *   the server reads a command half a round trip after it was written and answers at once (its
   *   own waits aside), the reply lands half a round trip later, so a pipelined batch costs one
   *   round trip; smtpd takes a connection once the TCP handshake is done (one and a half round
   *   trips after connect()) and its banner lands two round trips after connect().
   */
  latencyModel?: 'serial' | 'network';
  errorSleepMs: number;
  inFlowDelayMs: number;
  timers: Timers;
  /**
   * How often a `postfix-limits` server's limits bit, keyed `<host> <event>`: error_sleep,
   * hard_limit, banner_421, rcpt_cap, in_flow_delay, and anvil_lag (a banner_421 that only a
   * connection in its count-down lag caused: without `anvilLagMs` it would have been served).
   */
  limitEvents: Map<string, number>;
  /** Called when a `postfix-limits` connection ends, with what it did (optional: a per-session log for tests). */
  sessionLog?: (s: SimSessionRecord) => void;
}

/** One connection to a `postfix-limits` server, as the server saw it. */
export interface SimSessionRecord {
  host: string;
  /** Date.now() when the server took the connection, when it answered its last RCPT (0: none), and when the connection ended. */
  startMs: number;
  lastRcptMs: number;
  endMs: number;
  /** MAIL FROM commands accepted (transactions opened). */
  transactions: number;
  /** RCPT commands answered 250, and answered 4xx/5xx (the recipient cap's 452 included). */
  accepted: number;
  rejected: number;
  /** Transactions whose first accepted RCPT waited in_flow_delay. */
  flowWaits: number;
  /** Refused at the banner (anvil). */
  refused: boolean;
}

export type LimitEvent = 'error_sleep' | 'hard_limit' | 'banner_421' | 'rcpt_cap' | 'in_flow_delay' | 'anvil_lag';

function countLimit(ctx: SmtpContext, host: string, event: LimitEvent): void {
  const key = `${host} ${event}`;
  ctx.limitEvents.set(key, (ctx.limitEvents.get(key) ?? 0) + 1);
}

export interface MxServerSpec {
  ip: string;
  /** Host name the server announces (the MX exchange). */
  host: string;
  kind: Exclude<SmtpKind, 'dead'>;
  /** Extra known local parts besides SIM_KNOWN_MAILBOXES. */
  extraMailboxes?: readonly string[];
  /** `postfix-limits`: the limits that differ from Postfix's defaults. */
  limits?: MxLimits;
  /** `postfix-limits`: served by this Postfix instance with other MX hosts (one flow-token pool); default an instance of its own. */
  instance?: PostfixInstance;
}

/**
 * One Postfix instance behind several MX listeners (one master, one qmgr): one pool of flow tokens
 * for every transaction on any of them. A fresh instance has about `default_process_limit` (100)
 * tokens; a probe never delivers, so none come back, and once they are spent the first accepted
 * RCPT of every transaction waits `in_flow_delay` (bench/engine/real-postfix.ts: measured on
 * Postfix 3.7, one instance serving 10 hosts). Anvil stays per listener here: the by-hand setup
 * gave each MX host its own client address.
 */
export class PostfixInstance {
  /** Tokens left. */
  tokens: number;
  /** Transactions that took a token, and that found none and waited. */
  tokensTaken = 0;
  flowWaits = 0;

  constructor(opts: { flowTokens?: number } = {}) {
    this.tokens = opts.flowTokens ?? 100;
  }

  /** A transaction's first accepted RCPT: true when it must wait (no token left). */
  takeToken(): boolean {
    if (this.tokens > 0) {
      this.tokens--;
      this.tokensTaken++;
      return false;
    }
    this.flowWaits++;
    return true;
  }
}

export interface RunningMx {
  ip: string;
  stats: MxStats;
  /** `postfix-limits`: the connections anvil counts now per client address (lagging count-downs included). */
  anvil?(): Record<string, number>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Mailbox logic, shared by both kinds of server

interface Reply {
  code: number;
  /** Text lines after the code; a line carries its RFC 3463 enhanced code when the server uses them. */
  lines: string[];
}

const DOT_ATOM_TEXT = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~\u0080-\uFFFF-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~\u0080-\uFFFF-]+)*$/;

/**
 * The mailbox an address names: its local part, compared case-insensitively (Unicode NFC). A
 * quoted local part whose content is a plain dot-atom is the same mailbox as the unquoted form
 * (RFC 5321 4.1.2: `"jane.doe"` = `jane.doe`); `"john..doe"` keeps its quotes.
 */
export function mailboxKey(address: string): string {
  const at = address.lastIndexOf('@');
  let local = (at >= 0 ? address.slice(0, at) : address).normalize('NFC');
  const quoted = /^"((?:[^"\\]|\\.)*)"$/.exec(local);
  if (quoted) {
    const inner = (quoted[1] ?? '').replace(/\\(.)/g, '$1');
    if (DOT_ATOM_TEXT.test(inner)) local = inner;
  }
  return local.toLowerCase();
}

const NON_ASCII = /[^\x00-\x7f]/;

/** The address between the angle brackets of a MAIL/RCPT command, as the client wrote it. */
function bracketed(line: string): string | undefined {
  return /<([^<>]*)>/.exec(line)?.[1];
}

interface RcptInput {
  /** Address as written in the command (echoed in replies, like Postfix does). */
  raw: string;
  /** Address as the server parsed it (used for the mailbox lookup). */
  address: string;
  mailFrom: string;
  remoteAddress: string;
}

class MailboxPolicy {
  private readonly known: Set<string>;
  private readonly greylist = new Map<string, number>();

  constructor(
    private readonly kind: MxServerSpec['kind'],
    extra: readonly string[],
    private readonly smtputf8: boolean,
    private readonly enhanced: boolean,
    private readonly greylistMs: number,
  ) {
    this.known = new Set([...SIM_KNOWN_MAILBOXES, ...extra].map(mailboxKey));
  }

  private enh(code: string, text: string): string {
    return this.enhanced ? `${code} ${text}` : text;
  }

  /** The reply to RCPT TO, or null for "accepted" (each server words its 250 itself). */
  rcpt(r: RcptInput): Reply | null {
    const { kind } = this;
    if (kind === 'blocklist-text') return { code: 554, lines: ['Your IP address is listed on a blocklist'] };
    if (kind === 'policy-block') {
      return {
        code: 550,
        lines: [`5.7.1 Service unavailable; client host [${r.remoteAddress}] blocked using zen.spamhaus.org`],
      };
    }
    if (kind === 'greylist-forever') return this.greylisted(r.raw);
    if (kind === 'greylist') {
      // Postgrey style: the first attempt of a (sender, recipient) pair starts its clock, and the
      // pair is let through once greylistMs have passed since then.
      const key = `${r.mailFrom.toLowerCase()}\n${r.address.toLowerCase()}`;
      const now = Date.now();
      const first = this.greylist.get(key);
      if (first === undefined) this.greylist.set(key, now);
      if (first === undefined || now - first < this.greylistMs) return this.greylisted(r.raw);
    }
    if (kind === 'catchall') return null;
    // RFC 6531: without SMTPUTF8 a server cannot take a non-ASCII address. Checked on the address
    // as sent: smtp-server hands over A-label domains converted to Unicode.
    if (!this.smtputf8 && NON_ASCII.test(r.raw)) {
      return { code: 553, lines: [this.enh('5.6.7', `<${r.raw}>: Recipient address rejected: SMTPUTF8 is required for this address`)] };
    }
    const known = this.known.has(mailboxKey(r.address));
    if (kind === 'mailbox-full' && known) return { code: 552, lines: [`5.2.2 <${r.raw}>: Mailbox full`] };
    if (known) return null;
    switch (kind) {
      case 'bad-address-553':
        return { code: 553, lines: ['5.1.3 Bad recipient address syntax'] };
      case 'multiline':
        return {
          code: 550,
          lines: [
            '5.1.1 The email account that you tried to reach does not exist.',
            "5.1.1 Please try double-checking the recipient's email address.",
          ],
        };
      case 'user-text':
        return { code: 550, lines: ['Requested action not taken: mailbox unavailable (user unknown)'] };
      default:
        return { code: 550, lines: [this.enh('5.1.1', `<${r.raw}>: Recipient address rejected: User unknown`)] };
    }
  }

  private greylisted(raw: string): Reply {
    return { code: 450, lines: [`4.7.1 <${raw}>: Recipient address rejected: Greylisted, try again later`] };
  }
}

function mailboxesFor(spec: MxServerSpec): readonly string[] {
  return [...(spec.extraMailboxes ?? []), ...(spec.kind === 'smtputf8' ? SIM_UTF8_MAILBOXES : [])];
}

function latencyFor(spec: MxServerSpec, ctx: SmtpContext): number {
  return ctx.replyLatencyMs + (spec.kind === 'slow-replies' ? SLOW_MX_LATENCY_MS : 0);
}

// ---------------------------------------------------------------------------------------------
// smtp-server based servers

const RAW_KINDS: ReadonlySet<MxServerSpec['kind']> = new Set(['banner421', 'blocklist-text', 'helo-only', 'multiline', 'user-text', 'postfix-limits']);

/** A reply text that starts with an RFC 3463 code. */
const HAS_ENHANCED = /^[245]\.\d{1,3}\.\d{1,3} /;

export const DATA_REPLY = '5.5.1 Error: DATA is not accepted here (a validator never sends DATA)';

function smtpError(code: number, message: string): Error & { responseCode: number } {
  return Object.assign(new Error(message), { responseCode: code });
}

/**
 * SMTPServer whose connections get the sim's hooks before they start. It re-implements
 * SMTPServer#connect (4 lines in smtp-server 3.21) to reach each SMTPConnection.
 */
class SimSMTPServer extends SMTPServer {
  onConnection: (conn: SMTPConnection) => void = () => {};

  override connect(socket: net.Socket | tls.TLSSocket, socketOptions?: SMTPConnectionOptions | null): void {
    const connection = new SMTPConnection(this, socket, socketOptions);
    this.onConnection(connection);
    this.connections.add(connection);
    connection.on('error', (err: Error) => this._onError(err));
    connection.on('connect', data => this._onClientConnect(data));
    connection.init();
  }
}

async function startSmtpServer(spec: MxServerSpec, port: number, ctx: SmtpContext): Promise<RunningMx> {
  const stats = emptyStats();
  const latency = latencyFor(spec, ctx);
  const bannerDelay = latency + (spec.kind === 'slow-banner' ? ctx.slowBannerMs : 0);
  const smtputf8 = spec.kind === 'smtputf8';
  const policy = new MailboxPolicy(spec.kind, mailboxesFor(spec), smtputf8, true, ctx.greylistMs);
  // The RCPT address as the client wrote it, for the reply text (smtp-server hands the handler a
  // parsed address with the domain converted to Unicode).
  const rawRcpt = new WeakMap<SMTPServerSession, string>();

  const options: SMTPServerOptions = {
    name: spec.host,
    logger: false,
    // Never look the client up: that would ask the system resolver, which is not the sim.
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ['AUTH'],
    maxAllowedUnauthenticatedCommands: false,
    hideENHANCEDSTATUSCODES: false,
    hideSMTPUTF8: !smtputf8,
    hideDSN: true,
    hideREQUIRETLS: true,
    // Strict parsing rejects `"john..doe"@…` (it sees ".." in the local part) before any handler runs.
    lenientAddressParsing: true,
    maxClients: 100_000,
    socketTimeout: SOCKET_TIMEOUT_MS,
    closeTimeout: 1_000,
    onConnect(_session, callback) {
      ctx.timers.after(bannerDelay, () => callback());
    },
    onMailFrom(address, session, callback) {
      if (spec.kind === 'starttls-required' && !session.secure) {
        return callback(smtpError(530, '5.7.0 Must issue a STARTTLS command first'));
      }
      callback();
    },
    onRcptTo(address, session, callback) {
      const mailFrom = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
      const reply = policy.rcpt({
        raw: rawRcpt.get(session) ?? address.address,
        address: address.address,
        mailFrom,
        remoteAddress: session.remoteAddress,
      });
      const answer = (): void => callback(reply ? smtpError(reply.code, reply.lines[0] ?? '') : null);
      if (spec.kind === 'tarpit') ctx.timers.after(ctx.tarpitMs, answer);
      else answer();
    },
    onData(stream, _session, callback) {
      // Not reached: DATA is answered by the command hook below before smtp-server sees it.
      stream.resume();
      callback(smtpError(554, DATA_REPLY));
    },
  };

  const server = new SimSMTPServer(options);
  server.on('error', () => {
    // Socket errors of single connections (resets, TLS failures): the client's problem, not ours.
  });
  const sockets = new Set<net.Socket>();
  server.server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  server.onConnection = conn => {
    stats.connections++;

    // Start at once: smtp-server otherwise waits 100 ms before the banner to catch early
    // talkers, which would distort every latency measured against the sim.
    conn.init = function (this: SMTPConnection): void {
      this._setListeners(() => this.connectionReady());
    };

    // smtp-server adds its own default enhanced code to every reply (4.2.1 for any 450, 5.1.1 for
    // any 550...). The sim's texts carry their exact code already, so send those as they are.
    const protoSend = conn.send;
    conn.send = function (this: SMTPConnection, code, data, context): void {
      if (context === undefined && typeof data === 'string' && HAS_ENHANCED.test(data)) context = false;
      // Injected latency models the network: every reply reaches the client `latency` ms after
      // the server wrote it, without holding back the next command (so pipelined commands cost
      // one round trip, as on a real link). 220 (banner has its own delay; STARTTLS upgrades the
      // socket right after), 221 and 421 (the server closes right after) go out at once.
      if (latency > 0 && code !== 220 && code !== 221 && code !== 421) {
        ctx.timers.after(latency, () => {
          if (!this._closed && !this._socket.destroyed) protoSend.call(this, code, data, context);
        });
        return;
      }
      protoSend.call(this, code, data, context);
    };

    const protoOnCommand = conn._onCommand;
    conn._onCommand = function (this: SMTPConnection, command: Buffer, callback?: () => void): void {
      // AUTH continuations, commands buffered during a TLS handshake and early talkers: smtp-server's business.
      if (this._upgrading || this._nextHandler || !this._ready) return protoOnCommand.call(this, command, callback);
      const line = command.toString();
      const verb = (line.trim().split(/\s+/, 1)[0] ?? '').toUpperCase();
      countVerb(stats, verb);
      if (verb === 'RCPT') {
        const raw = bracketed(line);
        if (raw !== undefined) rawRcpt.set(this.session, raw);
      }
      const run = (): void => {
        if (this._closed || this._socket.destroyed) return;
        if (verb === 'DATA') {
          // A validator must never send DATA; refuse it outright (tests assert stats.data === 0).
          this.send(554, DATA_REPLY);
          callback?.();
          return;
        }
        if (verb === 'RCPT' && spec.kind === 'drop-on-rcpt' && this.session.envelope.mailFrom) {
          this._socket.destroy(); // no reply at all
          return;
        }
        protoOnCommand.call(this, command, callback);
      };
      run();
    };
  };

  await listen(server.server, port, spec.ip, () => new Promise<void>(resolve => server.close(() => resolve())));

  return {
    ip: spec.ip,
    stats,
    close: async () => {
      for (const conn of server.connections) conn._socket.destroy();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>(resolve => server.close(() => resolve()));
    },
  };
}

/** Listens or rejects (EADDRINUSE...), closing the half-made server on failure. */
async function listen(server: net.Server, port: number, host: string, cleanup: () => Promise<void>): Promise<void> {
  try {
    await new Promise<void>((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      server.once('error', onError);
      server.listen({ port, host, exclusive: true }, () => {
        server.off('error', onError);
        resolve();
      });
    });
  } catch (err) {
    await cleanup().catch(() => undefined);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Raw scripted servers (node:net)

interface RawStyle {
  enhanced: boolean;
  banner: string[];
  /** Full EHLO reply lines; null: EHLO is not a command this server knows. */
  ehlo: string[] | null;
  helo: string;
  mailOk: string;
  rcptOk: string;
  rset: string;
  noop: string;
  quit: string;
  data: string;
  unknown: string;
  needHelo: string;
  needMail: string;
  nestedMail: string;
  syntax: string;
}

function rawStyle(kind: MxServerSpec['kind'], host: string): RawStyle {
  // Postfix-like wording with enhanced codes...
  const postfix: RawStyle = {
    enhanced: true,
    banner: [`220 ${host} ESMTP`],
    ehlo: [`250-${host}`, '250-PIPELINING', '250-8BITMIME', '250 ENHANCEDSTATUSCODES'],
    helo: `250 ${host}`,
    mailOk: '250 2.1.0 Ok',
    rcptOk: '250 2.1.5 Ok',
    rset: '250 2.0.0 Ok',
    noop: '250 2.0.0 Ok',
    quit: '221 2.0.0 Bye',
    data: `554 ${DATA_REPLY}`,
    unknown: '502 5.5.2 Error: command not recognized',
    needHelo: '503 5.5.1 Error: send HELO/EHLO first',
    needMail: '503 5.5.1 Error: need MAIL command',
    nestedMail: '503 5.5.1 Error: nested MAIL command',
    syntax: '501 5.5.4 Syntax error in parameters or arguments',
  };
  // ...and an old MTA without them (RFC 5321 reply texts).
  const plain: RawStyle = {
    enhanced: false,
    banner: [`220 ${host} ESMTP`],
    ehlo: [`250-${host}`, '250-PIPELINING', '250 8BITMIME'],
    helo: `250 ${host}`,
    mailOk: '250 OK',
    rcptOk: '250 OK',
    rset: '250 OK',
    noop: '250 OK',
    quit: '221 Bye',
    data: '554 Transaction failed: DATA is not accepted here',
    unknown: '500 Syntax error, command unrecognized',
    needHelo: '503 Bad sequence of commands',
    needMail: '503 Bad sequence of commands',
    nestedMail: '503 Bad sequence of commands',
    syntax: '501 Syntax error in parameters or arguments',
  };
  switch (kind) {
    case 'helo-only':
      return { ...postfix, banner: [`220 ${host} SMTP ready`], ehlo: null };
    case 'multiline':
      return {
        ...postfix,
        banner: [`220-${host} ESMTP`, '220-Welcome', '220 ready'],
        ehlo: [
          `250-${host} at your service`,
          '250-SIZE 35882577',
          '250-8BITMIME',
          '250-ENHANCEDSTATUSCODES',
          '250 PIPELINING',
        ],
        mailOk: '250 2.1.0 OK',
        rcptOk: '250 2.1.5 OK',
        rset: '250 2.1.5 Flushed',
        quit: '221 2.0.0 closing connection',
      };
    case 'user-text':
    case 'blocklist-text':
      return plain;
    default:
      return postfix;
  }
}

export const BANNER_421 = '421 4.3.2 Service not available, closing transmission channel';

function renderReply(r: Reply): string[] {
  return r.lines.map((text, i) => `${r.code}${i < r.lines.length - 1 ? '-' : ' '}${text}`);
}

async function startRawServer(spec: MxServerSpec, port: number, ctx: SmtpContext): Promise<RunningMx> {
  const stats = emptyStats();
  const network = ctx.latencyModel === 'network';
  /** 'serial': the wait before each reply; 'network': none beyond the link's. */
  const latency = network ? 0 : latencyFor(spec, ctx);
  const oneWay = network ? latencyFor(spec, ctx) / 2 : 0;
  const style = rawStyle(spec.kind, spec.host);
  const policy = new MailboxPolicy(spec.kind, mailboxesFor(spec), false, style.enhanced, ctx.greylistMs);
  const sockets = new Set<net.Socket>();
  // Postfix's limits (postconf(5) defaults), on the `postfix-limits` kind only.
  const limits: Required<MxLimits> | undefined =
    spec.kind === 'postfix-limits'
      ? { softErrors: 10, hardErrors: 20, junkCommands: 100, recipientsPerTransaction: 1000, recipientLimitCode: 452, connectionsPerClient: 50, inFlowDelay: false, flowTokens: 100, anvilLagMs: 0, ...spec.limits }
      : undefined;
  /** Open connections per client address (Postfix's anvil), and those of them already ended but still counted (anvilLagMs). */
  const perClient = new Map<string, number>();
  const lagging = new Map<string, number>();
  /** The flow tokens (Postfix's master): this server's own pool, or its instance's shared by several servers. */
  const flow = spec.instance ?? new PostfixInstance({ flowTokens: limits?.flowTokens ?? 0 });

  const server = net.createServer(socket => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {
      // resets from clients that hang up: nothing to do
    });
    socket.setNoDelay(true);
    stats.connections++;

    let closed = false; // no more replies: after QUIT, the 421 banner, an overlong line or a timeout
    let busy = true; // a reply is pending (the banner first); commands wait in the queue meanwhile
    let greeted = false; // HELO/EHLO done
    let mailFrom: string | null = null;
    let buffer = '';
    const queue: string[] = [];
    // Postfix's per-session counters: errors (rejected recipients, bad commands), junk commands,
    // recipients of this transaction, and whether one was accepted yet (in_flow_delay).
    let errors = 0;
    let junk = 0;
    let recipients = 0;
    let acceptedInTransaction = false;
    const client = socket.remoteAddress ?? '';
    /** What this connection did (ctx.sessionLog). */
    const record: SimSessionRecord = { host: spec.host, startMs: Date.now(), lastRcptMs: 0, endMs: 0, transactions: 0, accepted: 0, rejected: 0, flowWaits: 0, refused: false };
    // Postfix's anvil counts a client's connection from when smtpd takes it until smtpd ends the
    // session: when it hangs up (after its 221 or 421), or when the client goes first; with
    // anvilLagMs, that count-down lands so much later.
    let counted = false;
    /** Counts the connection in; says whether it is over the limit, and whether only lagging count-downs put it there. */
    const countIn = (): { over: boolean; byLag: boolean } => {
      counted = true;
      const n = (perClient.get(client) ?? 0) + 1;
      perClient.set(client, n);
      if (!limits) return { over: false, byLag: false };
      const over = n > limits.connectionsPerClient;
      return { over, byLag: over && n - (lagging.get(client) ?? 0) <= limits.connectionsPerClient };
    };
    const countOut = (): void => {
      if (!counted) return;
      counted = false;
      const lag = limits?.anvilLagMs ?? 0;
      const down = (): void => {
        perClient.set(client, (perClient.get(client) ?? 1) - 1);
      };
      if (lag <= 0) return down();
      lagging.set(client, (lagging.get(client) ?? 0) + 1);
      // Not ctx.timers: a count-down still due when the sim closes does not matter, and it must not be dropped before then.
      setTimeout(() => {
        lagging.set(client, (lagging.get(client) ?? 1) - 1);
        down();
      }, lag).unref();
    };
    socket.once('close', countOut);
    if (limits && ctx.sessionLog) {
      const log = ctx.sessionLog;
      socket.once('close', () => log({ ...record, endMs: Date.now() }));
    }
    // 'network': smtpd takes the connection once the handshake is done (see the banner below).
    const tooManyAtAccept = network ? { over: false, byLag: false } : countIn();

    /** Bytes to the client: at once, or half a round trip later on a 'network' link. */
    const transmit = (fn: () => void): void => {
      if (network) ctx.timers.after(oneWay, fn);
      else fn();
    };
    const write = (lines: string[]): void => {
      const text = lines.map(l => `${l}\r\n`).join('');
      transmit(() => {
        if (!socket.destroyed && socket.writable) socket.write(text);
      });
    };
    const hangUp = (lines: string[]): void => {
      write(lines);
      closed = true;
      queue.length = 0;
      countOut();
      transmit(() => {
        socket.end();
        // A client that never closes its side must not hold the socket (and close()) forever.
        socket.setTimeout(1_000, () => socket.destroy());
      });
    };

    socket.setTimeout(SOCKET_TIMEOUT_MS, () => {
      if (!closed) hangUp([style.enhanced ? '421 4.4.2 Error: timeout exceeded' : '421 Timeout exceeded']);
    });

    /** A reply, what it costs in Postfix's counters, and any wait before it (in_flow_delay). */
    interface Served {
      lines: string[];
      close?: boolean;
      error?: boolean;
      delayMs?: number;
    }
    const respond = (line: string): Served => {
      const verb = (line.trim().split(/\s+/, 1)[0] ?? '').toUpperCase();
      switch (verb) {
        case 'EHLO':
        case 'HELO': {
          if (verb === 'EHLO' && !style.ehlo) return { lines: [style.unknown], error: true };
          if (!/^\S+\s+\S/.test(line.trim())) return { lines: [style.syntax], error: true };
          greeted = true;
          mailFrom = null;
          return { lines: verb === 'EHLO' && style.ehlo ? style.ehlo : [style.helo] };
        }
        case 'MAIL': {
          const m = /^MAIL\s+FROM:\s*<([^<>]*)>(?:\s.*)?$/i.exec(line.trim());
          if (!m) return { lines: [style.syntax], error: true };
          if (!greeted) return { lines: [style.needHelo], error: true };
          if (mailFrom !== null) return { lines: [style.nestedMail], error: true };
          mailFrom = m[1] ?? '';
          recipients = 0;
          acceptedInTransaction = false;
          record.transactions++;
          return { lines: [style.mailOk] };
        }
        case 'RCPT': {
          const m = /^RCPT\s+TO:\s*<([^<>]*)>(?:\s.*)?$/i.exec(line.trim());
          if (!m) return { lines: [style.syntax], error: true };
          record.lastRcptMs = Date.now();
          if (!greeted) return { lines: [style.needHelo], error: true };
          if (mailFrom === null) return { lines: [style.needMail], error: true };
          // smtpd_recipient_limit: refused without counting an error (within the overshoot limit).
          if (limits && ++recipients > limits.recipientsPerTransaction) {
            countLimit(ctx, spec.host, 'rcpt_cap');
            record.rejected++;
            return { lines: [limits.recipientLimitCode === 452 ? '452 4.5.3 Error: too many recipients' : '451 4.5.3 Too many recipients'] };
          }
          const address = m[1] ?? '';
          const reply = policy.rcpt({ raw: address, address, mailFrom, remoteAddress: socket.remoteAddress ?? '' });
          if (reply) {
            record.rejected++;
            return { lines: renderReply(reply), error: true };
          }
          record.accepted++;
          // in_flow_delay: the first accepted recipient opens a queue file, which takes a flow token
          // from the pool (the server's, or its instance's); with none left it waits (probes never
          // deliver, so none come back).
          const first = !acceptedInTransaction;
          acceptedInTransaction = true;
          const waits = limits?.inFlowDelay === true && first && flow.takeToken();
          if (waits) {
            record.flowWaits++;
            countLimit(ctx, spec.host, 'in_flow_delay');
          }
          return { lines: [style.rcptOk], ...(waits ? { delayMs: ctx.inFlowDelayMs } : {}) };
        }
        case 'RSET':
          mailFrom = null;
          recipients = 0;
          acceptedInTransaction = false;
          return { lines: [style.rset], error: limits !== undefined && ++junk > limits.junkCommands };
        case 'NOOP':
          return { lines: [style.noop], error: limits !== undefined && ++junk > limits.junkCommands };
        case 'DATA':
          return { lines: [style.data] };
        case 'QUIT':
          return { lines: [style.quit], close: true };
        default:
          return { lines: [style.unknown], error: true };
      }
    };

    /** Answers one command: Postfix's error limits apply on the `postfix-limits` kind. */
    const serve = (line: string, done: () => void): void => {
      // smtpd_hard_error_limit: checked when the next command arrives, which gets the 421 (checked
      // by hand on Postfix 3.7: the 21st unknown recipient is answered 421, a second late).
      const r: Served = limits && errors >= limits.hardErrors ? { lines: [`421 4.7.0 ${spec.host} Error: too many errors`], close: true } : respond(line);
      if (r.error && limits) errors++;
      // smtpd_error_sleep_time: every reply once the session has made more than the soft limit of errors.
      const sleep = limits && errors > limits.softErrors ? ctx.errorSleepMs : 0;
      if (sleep > 0) countLimit(ctx, spec.host, 'error_sleep');
      if (limits && r.close && errors >= limits.hardErrors) countLimit(ctx, spec.host, 'hard_limit');
      const send = (): void => {
        if (closed || socket.destroyed) return;
        if (r.close) hangUp(r.lines);
        else write(r.lines);
        done();
      };
      const wait = (r.delayMs ?? 0) + sleep;
      if (wait > 0) ctx.timers.after(wait, send);
      else send();
    };

    // One command at a time, in order, each reply after `latency`: pipelined commands queue up.
    const pump = (): void => {
      while (!busy && !closed && queue.length > 0) {
        const line = queue.shift() ?? '';
        countVerb(stats, (line.trim().split(/\s+/, 1)[0] ?? '').toUpperCase());
        busy = true;
        let sync = true;
        const next = (): void => {
          busy = false;
          if (!sync) pump();
        };
        if (latency <= 0) serve(line, next);
        else
          ctx.timers.after(latency, () => {
            if (closed || socket.destroyed) return;
            serve(line, next);
          });
        sync = false;
      }
    };

    socket.setEncoding('utf8');
    /** What the client wrote reaches the server half a round trip later on a 'network' link. */
    const receive = (chunk: string): void => {
      if (closed) return;
      buffer += chunk;
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        queue.push(buffer.slice(0, nl).replace(/\r$/, ''));
        buffer = buffer.slice(nl + 1);
      }
      if (buffer.length > MAX_LINE) {
        hangUp([style.enhanced ? '500 5.5.2 Error: line too long' : '500 Line too long']);
        return;
      }
      pump();
    };
    socket.on('data', (chunk: string) => {
      if (network) ctx.timers.after(oneWay, () => receive(chunk));
      else receive(chunk);
    });

    // 'serial': the banner `latency` after the connection; 'network': smtpd takes the connection
    // when the handshake's last ACK lands (1.5 round trips) and its banner lands half one later.
    ctx.timers.after(network ? 3 * oneWay : latency, () => {
      if (socket.destroyed) return;
      const anvil = network ? countIn() : tooManyAtAccept;
      if (spec.kind === 'banner421') return hangUp([BANNER_421]);
      // smtpd_client_connection_count_limit (Postfix's anvil): refused at the banner.
      if (anvil.over) {
        countLimit(ctx, spec.host, 'banner_421');
        if (anvil.byLag) countLimit(ctx, spec.host, 'anvil_lag');
        record.refused = true;
        return hangUp([`421 4.7.0 ${spec.host} Error: too many connections from ${client}`]);
      }
      write(style.banner);
      busy = false;
      pump();
    });
  });

  await listen(server, port, spec.ip, () => new Promise<void>(resolve => server.close(() => resolve())));

  return {
    ip: spec.ip,
    stats,
    ...(limits ? { anvil: () => Object.fromEntries([...perClient].filter(([, n]) => n > 0)) } : {}),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>(resolve => server.close(() => resolve()));
    },
  };
}

export function startMx(spec: MxServerSpec, port: number, ctx: SmtpContext): Promise<RunningMx> {
  return RAW_KINDS.has(spec.kind) ? startRawServer(spec, port, ctx) : startSmtpServer(spec, port, ctx);
}

/** Checks that nothing listens on (or can take) ip:port, by binding it for a moment. */
export async function probeFree(ip: string, port: number): Promise<void> {
  const server = net.createServer();
  await listen(server, port, ip, async () => undefined);
  await new Promise<void>(resolve => server.close(() => resolve()));
}
