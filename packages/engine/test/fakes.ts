// Scripted fakes for the verifier's ports: an SMTP connector whose servers answer from a script
// and record every command, a DNS port from a table, and an in-memory cache that records writes.
// The servers' delays run on the engine's clock (a ManualClock in the tests), never on the real one.

import { parseReply, type CachePort, type DnsPort, type MxAnswer, type SendResult, type SessionFailure, type SmtpConnectOptions, type SmtpConnector, type SmtpPhase, type SmtpReply, type SmtpSession } from '@svc/verifier';

/** A reply from its wire lines (without CRLF), parsed the real way. */
export const reply = (...lines: string[]): SmtpReply => parseReply(lines);
import type { ManualClock } from '../src/clock.ts';
import { ENGINE_DEFAULTS, type EngineConfig } from '../src/types.ts';

/** The engine tests' configuration: the production defaults with a test's names and short timers, and its own changes. */
export function testConfig(changes: Partial<EngineConfig> = {}): EngineConfig {
  return {
    ...ENGINE_DEFAULTS,
    smtpPort: 25,
    heloName: 'verifier.test',
    mailFrom: 'probe@verifier.test',
    smtpTimeoutMs: 1000,
    smtpRetryDelayMs: 20,
    throttleCooldownMs: 60_000,
    ...changes,
  };
}

export class MemoryCache implements CachePort {
  readonly map = new Map<string, unknown>();
  readonly allSets: Array<{ key: string; value: unknown; ttlMs: number }> = [];
  /** Catch-all verdict writes (the ones the prober tests are about; MX host addresses are cached too). */
  get sets(): Array<{ key: string; value: unknown; ttlMs: number }> {
    return this.allSets.filter((s) => s.key.startsWith('ca:'));
  }
  readonly gets: string[] = [];

  async get<T>(key: string): Promise<T | undefined> {
    this.gets.push(key);
    const v = this.map.get(key);
    return v === undefined ? undefined : (structuredClone(v) as T);
  }

  async set<T>(key: string, value: T, ttlMs: number): Promise<void> {
    this.allSets.push({ key, value: structuredClone(value), ttlMs });
    this.map.set(key, structuredClone(value));
  }
}

export class FakeDns implements DnsPort {
  readonly addressLookups: string[] = [];
  readonly mailLookups: string[] = [];

  constructor(
    readonly addresses: Record<string, string[]> = {},
    readonly mail: Record<string, MxAnswer> = {},
  ) {}

  async resolveMail(domain: string): Promise<MxAnswer> {
    this.mailLookups.push(domain);
    return this.mail[domain] ?? { kind: 'nxdomain' };
  }

  async resolveAddresses(host: string): Promise<string[]> {
    this.addressLookups.push(host);
    return [...(this.addresses[host] ?? [])];
  }
}

/** One command as the fake server saw it. */
export interface Command {
  server: string;
  session: number;
  phase: SmtpPhase;
  line: string;
  verb: string;
  /** RCPT: the address inside <>, its local part and domain. */
  local?: string;
  domain?: string;
  at: number;
}

/** A scripted answer: a reply, or the line drops, or the server goes silent. */
export type Answer = SmtpReply | 'drop' | 'timeout';

export interface FakeServer {
  /** open() fails with this. */
  connectFailure?: SessionFailure;
  /** Addresses of this host where nothing listens: open() to them is refused. */
  refuseIps?: string[];
  /** EHLO keywords (upper case). */
  extensions?: string[];
  /** Delay before each answer (and before open() returns), to make sessions overlap in time. */
  latencyMs?: number;
  /** Accept the catch-all probe too. */
  catchAll?: boolean;
  /** Hang up on QUIT without answering it (its 221): the connection is counted down late (AddressCap.countDownLagMs). */
  quitUnanswered?: boolean;
  /** Per-client connection cap: past it, a 421 at the banner (Postfix's smtpd_client_connection_count_limit). */
  maxSessions?: number;
  /** Extra delay before answering this command (a server sleeping on purpose). */
  delay?: (cmd: Command, session: FakeSession) => number;
  /** Scripted answer; undefined falls back to the default (MAIL/RSET 250, RCPT 250, probe 550 5.1.1). */
  handle?: (cmd: Command, session: FakeSession) => Answer | undefined;
}

export const PROBE_PREFIX = 'zz-probe-';

const OK_MAIL = reply('250 2.1.0 Ok');
const OK_RCPT = reply('250 2.1.5 Ok');
const OK_RSET = reply('250 2.0.0 Ok');
const NO_USER = reply('550 5.1.1 <x>: Recipient address rejected: User unknown in virtual mailbox table');

/**
 * A per-client connection cap on a server ADDRESS, whatever name the client connected for (one
 * address serving many MX names): past `maxSessions`, a 421 at the banner. A session counts from
 * its open until it answered the QUIT (Postfix's smtpd tells anvil before it sends the 221), or
 * until `countDownLagMs` after a close without that answer (anvil hears of it when smtpd reads the EOF).
 */
export interface AddressCap {
  maxSessions: number;
  countDownLagMs?: number;
  /** The banner refusal's text (default Microsoft 365's "4.3.2 ... concurrent server connections"). */
  banner?: string;
}

export class FakeSession implements SmtpSession {
  readonly extensions: ReadonlySet<string>;
  readonly tls = false;
  closed = false;
  quits = 0;
  destroys = 0;
  readonly commands: Command[] = [];

  constructor(
    readonly smtp: FakeSmtp,
    readonly server: string,
    readonly spec: FakeServer,
    readonly id: number,
    readonly ip: string = '',
  ) {
    this.extensions = new Set(spec.extensions ?? ['PIPELINING', 'ENHANCEDSTATUSCODES']);
  }

  #record(phase: SmtpPhase, line: string): Command {
    const verb = line.split(/[\s:]/)[0]!.toUpperCase();
    const cmd: Command = { server: this.server, session: this.id, phase, line, verb, at: this.smtp.clock.now() };
    const m = /^RCPT TO:<(.*)@([^@>]*)>/.exec(line);
    if (m) {
      cmd.local = m[1]!;
      cmd.domain = m[2]!;
    }
    this.commands.push(cmd);
    this.smtp.log.push(cmd);
    return cmd;
  }

  /** `answeredQuit`: the session ended with the server's 221 (counted down at once, as Postfix's anvil is). */
  #close(answeredQuit = false): void {
    if (this.closed) return;
    this.closed = true;
    this.smtp.closed(this.server, this.ip, answeredQuit);
  }

  /** Pipelined commands: the fake answers them in order, as a pipelining server would. */
  async sendMany(phase: SmtpPhase, lines: readonly string[]): Promise<SendResult[]> {
    this.pipelined.push(lines.length);
    const out: SendResult[] = [];
    for (const line of lines) out.push(await this.send(phase, line));
    return out;
  }

  /** The fake answers pipelined commands in order, one after another. */
  write(phase: SmtpPhase, lines: readonly string[]): Promise<SendResult>[] {
    this.pipelined.push(lines.length);
    const out: Promise<SendResult>[] = [];
    let prev: Promise<unknown> = Promise.resolve();
    for (const line of lines) {
      const p = prev.then(() => this.send(phase, line));
      out.push(p);
      prev = p;
    }
    return out;
  }

  /** Sizes of the sendMany batches, in order. */
  readonly pipelined: number[] = [];

  async send(phase: SmtpPhase, line: string): Promise<SendResult> {
    if (this.closed) return { ok: false, failure: { phase, kind: 'connection', detail: 'send on a closed session' } };
    if (/[\r\n]/.test(line)) throw new Error(`line break in command: ${JSON.stringify(line)}`);
    const cmd = this.#record(phase, line);
    if (this.spec.latencyMs) await this.smtp.clock.sleep(this.spec.latencyMs);
    else await Promise.resolve();
    const extra = this.spec.delay?.(cmd, this) ?? 0;
    if (extra > 0) await this.smtp.clock.sleep(extra);
    if (this.closed) return { ok: false, failure: { phase, kind: 'connection', detail: 'closed while waiting' } };
    const answer = this.spec.handle?.(cmd, this) ?? this.#default(cmd);
    if (answer === 'drop') {
      this.#close();
      return { ok: false, failure: { phase, kind: 'connection', detail: 'connection closed by server' } };
    }
    if (answer === 'timeout') {
      this.#close();
      return { ok: false, failure: { phase, kind: 'timeout', detail: 'no reply within 1000 ms' } };
    }
    return { ok: true, reply: answer };
  }

  #default(cmd: Command): SmtpReply {
    switch (cmd.verb) {
      case 'MAIL':
        return OK_MAIL;
      case 'RSET':
        return OK_RSET;
      case 'RCPT':
        return cmd.local?.startsWith(PROBE_PREFIX) && !this.spec.catchAll ? NO_USER : OK_RCPT;
      default:
        return reply('502 5.5.2 Error: command not recognized');
    }
  }

  async quit(): Promise<boolean> {
    if (this.closed) return false;
    this.#record('quit', 'QUIT');
    if (this.spec.latencyMs) await this.smtp.clock.sleep(this.spec.latencyMs);
    this.quits++;
    // A server that hangs up on QUIT without its 221 counts the connection down late (quitUnanswered).
    this.#close(!this.spec.quitUnanswered);
    return !this.spec.quitUnanswered;
  }

  destroy(): void {
    this.destroys++;
    this.#close();
  }
}

export class FakeSmtp implements SmtpConnector {
  readonly log: Command[] = [];
  readonly opens: SmtpConnectOptions[] = [];
  readonly sessions: FakeSession[] = [];
  /** Open sessions per server name now, and the most ever open at once. */
  readonly active = new Map<string, number>();
  readonly peak = new Map<string, number>();
  activeTotal = 0;
  refusedAtBanner = 0;
  peakTotal = 0;
  /** Per address with a cap: connections the server counts now (closed ones until their lag is over), the most at once, refusals. */
  readonly countedByIp = new Map<string, number>();
  readonly peakByIp = new Map<string, number>();
  readonly refusedByIp = new Map<string, number>();
  /**
   * A cap on every client's sessions at once, whatever address or name (Exim's daemon-wide
   * smtp_accept_max): past `maxSessions` open, a 421 at the banner with `banner`.
   */
  serverWide: { maxSessions: number; banner: string } | undefined;
  refusedServerWide = 0;

  constructor(
    readonly servers: Record<string, FakeServer>,
    readonly clock: ManualClock,
    readonly addressCaps: Record<string, AddressCap> = {},
  ) {}

  async open(opts: SmtpConnectOptions): Promise<{ ok: true; session: SmtpSession } | { ok: false; failure: SessionFailure }> {
    this.opens.push({ ...opts });
    const spec = this.servers[opts.servername];
    if (spec?.latencyMs) await this.clock.sleep(spec.latencyMs);
    if (!spec) return { ok: false, failure: { phase: 'connect', kind: 'connection', detail: 'ECONNREFUSED' } };
    if (spec.connectFailure) return { ok: false, failure: spec.connectFailure };
    if (spec.refuseIps?.includes(opts.host)) return { ok: false, failure: { phase: 'connect', kind: 'connection', detail: 'ECONNREFUSED' } };
    if (spec.maxSessions !== undefined && (this.active.get(opts.servername) ?? 0) >= spec.maxSessions) {
      this.refusedAtBanner++;
      return { ok: false, failure: { phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: reply('421 4.7.0 mx Error: too many connections from 192.0.2.99') } };
    }
    if (this.serverWide && this.activeTotal >= this.serverWide.maxSessions) {
      this.refusedAtBanner++;
      this.refusedServerWide++;
      return { ok: false, failure: { phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: reply(this.serverWide.banner) } };
    }
    const cap = this.addressCaps[opts.host];
    if (cap) {
      const counted = this.countedByIp.get(opts.host) ?? 0;
      if (counted >= cap.maxSessions) {
        this.refusedAtBanner++;
        this.refusedByIp.set(opts.host, (this.refusedByIp.get(opts.host) ?? 0) + 1);
        return { ok: false, failure: { phase: 'greeting', kind: 'reply', detail: 'server refused the session', reply: reply(cap.banner ?? '421 4.3.2 The maximum number of concurrent server connections has exceeded a limit, closing transmission channel') } };
      }
      this.countedByIp.set(opts.host, counted + 1);
      this.peakByIp.set(opts.host, Math.max(this.peakByIp.get(opts.host) ?? 0, counted + 1));
    }
    const session = new FakeSession(this, opts.servername, spec, this.sessions.length, opts.host);
    this.sessions.push(session);
    const n = (this.active.get(opts.servername) ?? 0) + 1;
    this.active.set(opts.servername, n);
    this.peak.set(opts.servername, Math.max(this.peak.get(opts.servername) ?? 0, n));
    this.activeTotal++;
    this.peakTotal = Math.max(this.peakTotal, this.activeTotal);
    return { ok: true, session };
  }

  closed(server: string, ip: string, answeredQuit: boolean): void {
    this.active.set(server, (this.active.get(server) ?? 1) - 1);
    this.activeTotal--;
    const cap = this.addressCaps[ip];
    if (!cap) return;
    const down = () => this.countedByIp.set(ip, (this.countedByIp.get(ip) ?? 1) - 1);
    // Postfix's smtpd tells anvil before its 221 goes out; a session that ended any other way is
    // counted down only once smtpd has read the EOF (countDownLagMs).
    if (cap.countDownLagMs && !answeredQuit) this.clock.setTimeout(down, cap.countDownLagMs);
    else down();
  }

  /** Command lines, optionally of one server or one session. */
  lines(filter: { server?: string; session?: number } = {}): string[] {
    return this.log.filter((c) => (filter.server === undefined || c.server === filter.server) && (filter.session === undefined || c.session === filter.session)).map((c) => c.line);
  }

  /** RCPT commands, optionally of one server. */
  rcpts(server?: string): Command[] {
    return this.log.filter((c) => c.verb === 'RCPT' && (server === undefined || c.server === server));
  }

  count(verb: string, server?: string): number {
    return this.log.filter((c) => c.verb === verb && (server === undefined || c.server === server)).length;
  }
}

/** Deterministic catch-all probe local parts: zz-probe-1, zz-probe-2, … */
export function probeLocals(): () => string {
  let n = 0;
  return () => `${PROBE_PREFIX}${++n}`;
}
