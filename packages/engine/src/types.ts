// Shared shapes of the engine's two kinds of actor.

import type { CachePort, DnsPort, ProbeOutcome, SessionFailure, SmtpConnector, SmtpReply } from '@svc/verifier';
import type { Clock } from './clock.ts';
import type { MxThrottle } from './throttle.ts';

export interface EngineConfig {
  smtpPort: number;
  heloName: string;
  mailFrom: string;
  /** Per-phase SMTP timeout (connect, greeting, EHLO, STARTTLS, MAIL, RCPT, RSET, QUIT). */
  smtpTimeoutMs: number;
  smtpRetryDelayMs: number;
  /** Sessions per server address (per egress IP), whatever MX names lead to it. */
  maxConnectionsPerMx: number;
  /** How long a warm session waits for more recipients before QUIT (SVC_SMTP_IDLE_MS). */
  idleMs: number;
  /** Recipients per transaction until the server says less (RFC 5321 4.5.3.1.8: at least 100). */
  maxRcptsPerTransaction: number;
  /** Most RCPT commands written at once (RFC 2920). */
  pipelineDepth: number;
  /** Rejections allowed per session before it is retired (below Postfix's smtpd_soft_error_limit, 10). */
  errorBudget: number;
  /** RSETs allowed per session (below Postfix's smtpd_junk_command_limit, 100). */
  junkBudget: number;
  catchallTtlMs: number;
  /** How long the addresses of an MX host are reused. */
  addressCacheTtlMs: number;
  /** After a throttling sign (421 at the banner, refused connection, 4.7.x), how long before one more session is tried. */
  throttleCooldownMs: number;
  /** A host that could not be reached at all is skipped this long: recipients with another MX fail over, the others wait for one more try after it. */
  hostDownMs: number;
  /**
   * A session's slot at its address stays taken this long after a session that ended WITHOUT the
   * server's answer to QUIT (dropped, refused at the banner, closed by us): the server counts
   * such a connection down only once it reads the close (Postfix's smtpd tells anvil then), and a
   * new connection inside that moment is refused at the banner. After a 221 the slot is free at
   * once: smtpd has told anvil before it answers (measured on Postfix 3.7: never refused, even
   * reconnecting at 0 ms; after a close without QUIT, refusals up to 100 ms later on a loaded
   * machine).
   */
  slotCooldownMs: number;
  /** A recipient waits out an address that refuses at the banner (421, backing off) this long at most, and never past its deadline. */
  refusedWaitMs: number;
}

export const ENGINE_DEFAULTS = {
  smtpTimeoutMs: 10_000,
  smtpRetryDelayMs: 1_500,
  maxConnectionsPerMx: 5,
  idleMs: 2_000,
  maxRcptsPerTransaction: 100,
  pipelineDepth: 50,
  errorBudget: 9,
  junkBudget: 90,
  catchallTtlMs: 3_600_000,
  addressCacheTtlMs: 300_000,
  throttleCooldownMs: 10_000,
  hostDownMs: 10_000,
  slotCooldownMs: 200,
  refusedWaitMs: 10_000,
} satisfies Partial<EngineConfig>;

export interface EngineDeps {
  dns: DnsPort;
  smtp: SmtpConnector;
  cache: CachePort;
  config: EngineConfig;
  throttle?: MxThrottle;
  /** Local part of catch-all probes (tests make it deterministic); default probeLocalFor(probeSalt, domain, TTL window). */
  randomLocal?: () => string;
  /** Salt of the catch-all probe local parts (the service passes SVC_SECRET or its generated secret). */
  probeSalt?: string;
  /** How often close() checks by itself whether the engine went idle (default 1000 ms; see Engine.close). */
  closeCheckMs?: number;
  /** Time and timers (default the system clock; tests pass a ManualClock). */
  clock?: Clock;
}

/**
 * A recipient handed by its domain actor to an MX actor: a message, never changed once sent. The
 * domain actor keeps its own record (MX index, attempts); the MX actor keeps its own (interruptions).
 */
export interface RcptRequest {
  /** The domain actor's id of the recipient; every report about it names it. */
  readonly id: number;
  readonly domain: string;
  readonly local: string;
  readonly utf8: boolean;
  /** A session it must not use (the one that deferred it: retry on a new session). */
  readonly notSession?: number;
  /** Sessions that already ended under it on this host (kept across greylisting retries). */
  readonly interruptions: number;
  /** Its request has a deadline (a synchronous request): taken before recipients without one (a job's). */
  readonly urgent?: boolean;
  /** Another MX host of the domain comes after this one: a host that is down fails it over at once. */
  readonly nextHost: boolean;
  /** When its request's deadline passes (clock time); none for a job's recipients. */
  readonly deadlineAt?: number;
}

/** What an MX actor reports to the domain actor of a request. Each report ends the request at that MX actor. */
export interface RcptSink {
  answered(id: number, answer: { reply: SmtpReply; session: number; viaMail: boolean; interruptions: number }): void;
  smtputf8Unsupported(id: number): void;
  hostFailed(id: number, failure: SessionFailure): void;
}

export interface EngineCounters {
  sessionsOpened: number;
  transactions: number;
  rcpts: number;
  requeuedForCap: number;
  requeuedForClosing: number;
  throttled: number;
  slowReplies: number;
  /** 421 replies at the banner (the open is retried: never a verdict while the deadline allows). */
  bannerRefusals: number;
  /** Opens that waited for a slot of their server address. */
  slotWaits: number;
  /** Warm sessions asked to end because another MX name waited for a slot of their address. */
  idleYields: number;
  /** close() found the engine idle on its own periodic check, not by an actor's word: a missed notification (should stay 0). */
  closeIdleByCheck: number;
}

export type Resolve = (o: ProbeOutcome) => void;
