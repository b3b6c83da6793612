// What a mail server allows us, learnt from how it answers. Two owners, two classes:
// - per server ADDRESS (LimitPolicy, held by the address's gate, address-gate.ts): how many
//   sessions at once (fewer after a 421 at the banner or a refused connection while our own
//   sessions hold the address, or a rate reply; one more after each cool-down), and what a refused
//   open means (wait for a slot, back off, try the next address, or fail the host). A server's
//   per-client connection limit counts connections to its address, whatever MX name led there.
// - per MX host NAME (HostPolicy, held by its MX actor): what a session may spend (errors, junk
//   commands, recipients per transaction) and whether the host is down.
// Plain decisions over numbers: the gate and the MX actor perform them.

import type { ConversationEffect, SessionBudget, SessionFailure } from '@svc/verifier';
import type { EngineConfig, EngineCounters } from './types.ts';

/** First wait after a 421 at the banner with none of our sessions on the address; doubled per refusal in a row. */
export const BACKOFF_FIRST_MS = 250;
/** The longest wait between two tries of a refusing address. */
export const BACKOFF_MAX_MS = 8_000;
/**
 * Exim's daemon-wide cap (smtp_accept_max, 20 by default): "421 <host> Too many concurrent SMTP
 * connections; please try again later." counts every client's sessions, not ours (its per-client
 * cap says "... from this IP address; ..."). A slot frees as soon as anyone's session ends, so
 * such a refusal lowers the address's limit for SERVER_WIDE_COOLDOWN_MS only, and backs off at
 * most SERVER_WIDE_BACKOFF_MAX_MS.
 */
export const SERVER_WIDE_CAP_TEXT = /too many concurrent smtp connections;/i;
export const SERVER_WIDE_COOLDOWN_MS = 1_000;
export const SERVER_WIDE_BACKOFF_MAX_MS = 1_000;
/** Refusals further apart than this are not in a row (a back-off at its longest tries more often). */
export const STREAK_GAP_MS = 2 * BACKOFF_MAX_MS + 1_000;

/** What to do about an open that failed. */
export type RefusedOpen =
  /** Our other sessions hold the address: the server's per-client cap, not an outage. The recipients wait for a slot. */
  | { action: 'wait' }
  /** Nothing of ours holds the address and it said 421: no new session to it for `delayMs`, then one. Nobody is failed over for it. */
  | { action: 'backoff'; delayMs: number }
  /** The connection itself failed: the host's next address (RFC 5321 5.1), or the host fails when there is none. */
  | { action: 'next' }
  /** Fail the host: its recipients go to the next MX. */
  | { action: 'fail' };

/** The connection part: one per server address. */
export class LimitPolicy {
  /** Sessions allowed now (adaptive, at most config.maxConnectionsPerMx). */
  limit: number;
  #cooldownUntil = 0;
  /** 421s at the banner in a row with nothing of ours on the address (the back-off's exponent). */
  #refusals = 0;
  #lastRefusalAt = -Infinity;

  constructor(
    readonly config: EngineConfig,
    readonly counters: EngineCounters,
  ) {
    this.limit = config.maxConnectionsPerMx;
  }

  /** One more session once the cool-down is over. */
  grow(now: number): void {
    if (this.limit < this.config.maxConnectionsPerMx && now >= this.#cooldownUntil) {
      this.limit++;
      this.#cooldownUntil = now + this.config.throttleCooldownMs;
    }
  }

  /**
   * Fewer sessions for a cool-down. A connection refused while we hold the address says we hold
   * as many as the server allows: the sessions open and those still closing (the server counts a
   * session until it has hung up). A rate reply (4.7.x) says slow down: one fewer.
   */
  throttle(kind: 'connections' | 'rate', held: number, now: number, cooldownMs = this.config.throttleCooldownMs): void {
    this.counters.throttled++;
    const cap = kind === 'connections' ? held : this.limit - 1;
    this.limit = Math.max(1, Math.min(this.limit, cap));
    this.#cooldownUntil = now + cooldownMs;
  }

  /** A session opened; `open` sessions on the address now, this one included. */
  opened(open: number): void {
    this.#refusals = 0;
    // Opened while another open was refused: the server allows at least this many.
    if (open > this.limit) this.limit = Math.min(this.config.maxConnectionsPerMx, open);
  }

  /**
   * What an open that failed with `f` means. `open` and `closing`: our sessions on the address
   * (established; ended, not yet counted down by the server); `opening`: our other opens to it
   * still under way.
   */
  refused(f: SessionFailure, held: { open: number; closing: number; opening: number }, now: number): RefusedOpen {
    const refusedAtBanner = f.phase === 'greeting' && f.reply?.code === 421;
    const refusedConnection = f.phase === 'connect' && f.kind === 'connection';
    if (refusedAtBanner || refusedConnection) {
      const serverWide = refusedAtBanner && SERVER_WIDE_CAP_TEXT.test(f.reply!.text);
      if (held.open + held.closing + held.opening > 0) {
        // Our own sessions fill the server's per-client cap: as many as it counts now. (Opens still
        // under way: at least one is allowed; each that succeeds raises the limit again.)
        this.throttle('connections', Math.max(1, held.open + held.closing), now, serverWide ? SERVER_WIDE_COOLDOWN_MS : this.config.throttleCooldownMs);
        return { action: 'wait' };
      }
      if (refusedAtBanner) {
        // Nothing of ours there: another client of ours on the egress address, a count-down the
        // server has not done yet, or a server that is busy. Waited out, never a verdict. (A
        // refusal long after the last one starts the back-off over.)
        if (now - this.#lastRefusalAt > STREAK_GAP_MS) this.#refusals = 0;
        this.#lastRefusalAt = now;
        this.counters.throttled++;
        const delayMs = Math.min(serverWide ? SERVER_WIDE_BACKOFF_MAX_MS : BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** this.#refusals);
        this.#refusals++;
        return { action: 'backoff', delayMs };
      }
    }
    if (f.phase === 'connect') return { action: 'next' };
    return { action: 'fail' };
  }

  /** A rate sign from a conversation (4.7.x "slow down", a 421 naming too many connections). */
  learn(kind: 'connections' | 'rate', held: number, now: number): void {
    this.throttle(kind, held, now);
  }
}

/** The MX host name's part: one per MX actor. */
export class HostPolicy {
  /** What a session may spend on this host, learnt from its replies. */
  readonly budget: SessionBudget;
  #downUntil = 0;
  #downFailure: SessionFailure | undefined;
  /** The host was down and no session has opened since: one connection at a time, until one does. */
  trial = false;

  constructor(
    readonly config: EngineConfig,
    readonly counters: EngineCounters,
  ) {
    this.budget = { errors: config.errorBudget, junk: config.junkBudget, rcptsPerTransaction: config.maxRcptsPerTransaction, pipelineDepth: config.pipelineDepth };
  }

  /** The failure the host is skipped with now, if it is down. */
  down(now: number): SessionFailure | undefined {
    return now < this.#downUntil ? this.#downFailure : undefined;
  }

  /** When the down window ends (0: never down). */
  get downUntil(): number {
    return this.#downUntil;
  }

  markDown(failure: SessionFailure, now: number): void {
    this.#downUntil = now + this.config.hostDownMs;
    this.#downFailure = failure;
    this.trial = true;
  }

  /** A session opened: the host is up. */
  opened(): void {
    this.trial = false;
  }

  /** The host-level effects of a conversation: a recipient cap, a lower error budget. */
  learn(e: Extract<ConversationEffect, { type: 'rcpt_cap' | 'error_budget' }>): void {
    switch (e.type) {
      case 'rcpt_cap':
        this.budget.rcptsPerTransaction = Math.max(1, Math.min(this.budget.rcptsPerTransaction, e.rcpts));
        return;
      case 'error_budget':
        this.counters.slowReplies++;
        this.budget.errors = Math.max(1, Math.min(this.budget.errors, e.errors));
        return;
    }
  }
}
