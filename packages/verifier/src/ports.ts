// The verifier core talks to the outside world only through these ports. Adapters live in
// ./adapters (node:dns, node:net), in @svc/store (caches) and in @svc/engine (the ProbePort);
// the core never imports them.

import type { RcptClass } from './smtp/classify.ts';
import type { MxAnswer, MxHost, SmtpReply } from './types.ts';

export interface DnsPort {
  /** MX answer for an ASCII domain, with RFC 5321 5.1 implicit MX and RFC 7505 null MX applied. */
  resolveMail(asciiDomain: string): Promise<MxAnswer>;
  /** IPv4 then IPv6 addresses of a host name; [] when it has none or the lookup failed. */
  resolveAddresses(host: string): Promise<string[]>;
}

export type SmtpPhase = 'connect' | 'greeting' | 'ehlo' | 'helo' | 'starttls' | 'mail' | 'rcpt' | 'rset' | 'quit';

/** Why a session stopped early. Plain data: it crosses threads and processes unchanged. */
export interface SessionFailure {
  phase: SmtpPhase;
  kind: 'timeout' | 'connection' | 'protocol' | 'reply';
  detail: string;
  /** The reply that ended the session (kind 'reply'), e.g. a 421 banner. */
  reply?: SmtpReply;
  /** Set when the whole validation ran out of time (not one phase). */
  deadlineMs?: number;
}

export type SendResult = { ok: true; reply: SmtpReply } | { ok: false; failure: SessionFailure };

/** One open, greeted SMTP session (after EHLO/HELO and STARTTLS when offered). */
export interface SmtpSession {
  readonly extensions: ReadonlySet<string>;
  readonly tls: boolean;
  /** Sends exactly one command and waits for exactly one reply, within the phase timeout. */
  send(phase: SmtpPhase, line: string): Promise<SendResult>;
  /** Writes several commands at once and returns one reply each, in order (RFC 2920 PIPELINING). */
  sendMany(phase: SmtpPhase, lines: readonly string[]): Promise<SendResult[]>;
  /**
   * Writes several commands at once and returns one promise per reply, so each reply can be acted
   * on as it arrives (and a pipelined QUIT's reply need not be waited for).
   */
  write(phase: SmtpPhase, lines: readonly string[]): Promise<SendResult>[];
  /**
   * Sends QUIT (politely, bounded by the timeout) and closes the socket. Never throws. True when
   * the server answered the QUIT (a 2xx, its 221): it has then counted the connection down.
   */
  quit(): Promise<boolean>;
  /** Closes at once (no QUIT). */
  destroy(): void;
}

export interface SmtpConnectOptions {
  host: string; // IP address to connect to
  servername: string; // MX host name (TLS SNI, logs)
  port: number;
  heloName: string;
  timeoutMs: number;
}

export interface SmtpConnector {
  open(opts: SmtpConnectOptions): Promise<{ ok: true; session: SmtpSession } | { ok: false; failure: SessionFailure }>;
}

/**
 * Shared cache (in-process in the embedded profile, Redis in the cluster profile). The in-process
 * adapter answers synchronously, so a cached validation does not pay a promise per lookup.
 */
export interface CachePort {
  get<T>(key: string): T | undefined | Promise<T | undefined>;
  set<T>(key: string, value: T, ttlMs: number): void | Promise<void>;
}

/** What the catch-all probe of a domain found, and on which MX (index in its MX list). */
export interface CatchallEvidence {
  catchall: boolean;
  mxIndex: number;
}

/** What the SMTP layer found for one recipient. Plain data. */
export type ProbeOutcome =
  | {
      kind: 'answer';
      cls: RcptClass;
      reply: SmtpReply;
      mxIndex: number;
      attempts: number;
      catchall?: CatchallEvidence;
      /** No catch-all evidence because the probe was deferred (4xx, greylisting) or its session failed: asking later can settle it. */
      catchallDeferred?: true;
    }
  | { kind: 'smtputf8_unsupported'; mxIndex: number }
  | { kind: 'failure'; failure: SessionFailure };

export interface ProbeRequest {
  /** ASCII domain. */
  domain: string;
  /** Its MX hosts in priority order (implicit MX included). */
  hosts: MxHost[];
  local: string;
  /** The local part needs SMTPUTF8 (RFC 6531). */
  utf8: boolean;
  /** How often a 4xx answer is asked again (greylisting) before it is the answer. */
  retries: number;
  /** The most this recipient may take; past it the outcome is a `deadline` timeout. */
  deadlineMs?: number;
}

/** The probe engine (packages/engine): SMTP checks of recipients, scheduled by MX host. */
export interface ProbePort {
  check(req: ProbeRequest): Promise<ProbeOutcome>;
  /** Stops retrying, finishes what is queued, ends every session. */
  close(): Promise<void>;
}
