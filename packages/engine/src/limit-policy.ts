// What one MX host allows us, learnt from how it answers: how many sessions at once (fewer after a
// 421 at the banner, a refused connection or a rate reply, one more after each cool-down), what a
// session may spend (errors, junk commands, recipients per transaction), whether the host is down,
// and what a refused open means (wait for our own sessions, ask again later, or fail over). Plain
// decisions over numbers: the MX actor performs them.

import type { ConversationEffect, SessionBudget, SessionFailure } from '@svc/verifier';
import type { EngineConfig, EngineCounters } from './types.ts';

/** A 421 at the banner with none of our sessions open: asked again this many times before failing over. */
const BANNER_RETRIES = 2;
/** A banner 421 saying "too many connections" (or any, this soon after our own sessions ended) is waited out this many times in a row. */
const CAP_RETRIES = 8;
/** Our sessions ended this recently: the server may still count them. */
const RECENT_SESSION_MS = 5_000;
/** A 421 at the banner that names the per-client connection cap. */
const CONNECTION_CAP_BANNER = /too many connections|connection (limit|count)/i;

/** What to do about an open that failed. */
export type RefusedOpen =
  /** Our other sessions are alive: the server's per-client cap, not an outage. The recipients wait. */
  | { action: 'wait' }
  /** A retry is already planned for refusals of connections opened together: nothing more. */
  | { action: 'ignore' }
  /** Ask again after `delayMs` (nobody is failed over for it). */
  | { action: 'retry'; delayMs: number }
  /** Fail the host: its recipients go to the next MX. */
  | { action: 'fail' };

export class LimitPolicy {
  /** Sessions allowed now (adaptive, at most config.maxConnectionsPerMx). */
  limit: number;
  /** What a session may spend on this host, learnt from its replies. */
  readonly budget: SessionBudget;
  /** The host refused a connection for being over its per-client cap (421 at the banner): closing sessions count until their sockets close. */
  capSeen = false;
  #cooldownUntil = 0;
  #downUntil = 0;
  #downFailure: SessionFailure | undefined;
  #bannerRetries = 0;
  #lastSessionEndAt = 0;
  /** The most sessions this host has held open at once for us. */
  #peak = 0;

  constructor(
    readonly config: EngineConfig,
    readonly counters: EngineCounters,
  ) {
    this.limit = config.maxConnectionsPerMx;
    this.budget = { errors: config.errorBudget, junk: config.junkBudget, rcptsPerTransaction: config.maxRcptsPerTransaction, pipelineDepth: config.pipelineDepth };
  }

  /** The failure the host is skipped with now, if it is down. */
  down(now: number): SessionFailure | undefined {
    return now < this.#downUntil ? this.#downFailure : undefined;
  }

  markDown(failure: SessionFailure, now: number): void {
    this.#downUntil = now + this.config.hostDownMs;
    this.#downFailure = failure;
  }

  /** One more session once the cool-down is over. */
  grow(now: number): void {
    if (this.limit < this.config.maxConnectionsPerMx && now >= this.#cooldownUntil) {
      this.limit++;
      this.#cooldownUntil = now + this.config.throttleCooldownMs;
    }
  }

  /** Sessions the server counts against us: a server that caps connections per client still counts a session whose QUIT is on its way. */
  held(open: number, opening: number, closing: number): number {
    return open + opening + (this.capSeen ? closing : 0);
  }

  /**
   * Fewer sessions for a cool-down. A connection refused at the banner says we hold as many as
   * the server allows: as many as are open, or as many as it once allowed (a session we just
   * ended may still count on the server's side until its QUIT lands). A rate reply (4.7.x) says
   * slow down: one fewer.
   */
  throttle(kind: 'connections' | 'rate', open: number, now: number): void {
    this.counters.throttled++;
    const cap = kind === 'connections' ? Math.max(open, this.#peak) : this.limit - 1;
    this.limit = Math.max(1, Math.min(this.limit, cap));
    this.#cooldownUntil = now + this.config.throttleCooldownMs;
  }

  /** A session opened; `open` sessions now, this one included. */
  opened(open: number): void {
    this.#bannerRetries = 0;
    this.#peak = Math.max(this.#peak, open);
    // Opened while another open was refused: the server allows at least this many.
    if (open > this.limit) this.limit = Math.min(this.config.maxConnectionsPerMx, open);
  }

  sessionEnded(now: number): void {
    this.#lastSessionEndAt = now;
  }

  /** What an open that failed with `f` means, with `open` sessions of ours alive and a retry already planned or not. */
  refused(f: SessionFailure, open: number, retryPlanned: boolean, now: number): RefusedOpen {
    const refusedAtBanner = f.phase === 'greeting' && f.reply?.code === 421;
    if ((f.phase === 'connect' && f.kind === 'connection') || refusedAtBanner) {
      const capped = refusedAtBanner && CONNECTION_CAP_BANNER.test(f.reply?.text ?? '');
      if (capped) this.capSeen = true;
      if (open > 0) {
        this.throttle('connections', open, now);
        return { action: 'wait' };
      }
      // No session of ours is open. A 421 that names the connection cap, or any refusal right
      // after our own sessions ended (the server may still count them), is waited out: the
      // recipients are not failed over for it. Another 421 (someone else holds the server's
      // connections, a server starting up) is asked again twice, then the next MX is.
      const recent = now - this.#lastSessionEndAt < RECENT_SESSION_MS;
      // Refusals of connections opened together count once: a retry is already planned.
      if (retryPlanned && (capped || recent || refusedAtBanner)) return { action: 'ignore' };
      const retries = capped || recent ? CAP_RETRIES : refusedAtBanner ? BANNER_RETRIES : 0;
      if (this.#bannerRetries < retries) {
        this.#bannerRetries++;
        this.throttle('connections', open, now);
        return { action: 'retry', delayMs: Math.min(4_000, 100 * 2 ** this.#bannerRetries) };
      }
    }
    this.#bannerRetries = 0;
    return { action: 'fail' };
  }

  /** The host-level effects of a conversation: a recipient cap, a lower error budget, slow down. */
  learn(e: Extract<ConversationEffect, { type: 'rcpt_cap' | 'error_budget' | 'throttle' }>, open: number, now: number): void {
    switch (e.type) {
      case 'rcpt_cap':
        this.budget.rcptsPerTransaction = Math.max(1, Math.min(this.budget.rcptsPerTransaction, e.rcpts));
        return;
      case 'error_budget':
        this.counters.slowReplies++;
        this.budget.errors = Math.max(1, Math.min(this.budget.errors, e.errors));
        return;
      case 'throttle':
        this.throttle(e.kind, open, now);
        return;
    }
  }
}
