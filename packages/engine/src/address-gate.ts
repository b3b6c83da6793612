// The gate of one server address (docs/decisions/smtp-engine.md): every SMTP session to the
// address, whichever MX name led to it, holds one of its slots. A server's per-client connection
// limit counts connections to its address, and many MX names can share one (a large provider's
// tenant names resolve to a few addresses), so the count, the adaptive limit (limit-policy.ts),
// the back-off after a refusal and the shared MxThrottle permit are the address's, here.
//
// A slot is held from the grant until the server can have counted the session down: through the
// open, the session, the QUIT until its reply came and the socket closed; after a session that
// ended without the server's 221 (dropped, refused, closed by us), slotCooldownMs more. MX actors that want a slot wait in one FIFO; a slot that frees goes to the first. When
// names wait and the address is full, a warm session of another name that has nothing to do is
// asked to end (QUIT), so its slot passes on.

import { permitWaitCancelled } from '@svc/contracts';
import type { SessionFailure } from '@svc/verifier';
import type { Clock, ClockTimer } from './clock.ts';
import { LimitPolicy, SERVER_WIDE_CAP_TEXT, type RefusedOpen } from './limit-policy.ts';
import type { MxThrottle } from './throttle.ts';
import type { EngineConfig, EngineCounters } from './types.ts';

/** What the gate sees of an MX actor. */
export interface SlotUser {
  /** It has recipients waiting for a session (a slot granted to it now would be used). */
  wants(): boolean;
  /** The address refuses sessions: none to it before `until`. Recipients that cannot wait that long are answered with `failure`. */
  blocked(until: number, failure: SessionFailure): void;
}

/** One slot of the gate, held by one open or session. Every method but learn is called once at most, and one of opened/refused/unused first. */
export interface Slot {
  readonly ip: string;
  /** The session is established. */
  opened(): void;
  /** The open failed: the slot is freed (after the cool-down when the server saw the connection) and the decision returned. */
  refused(failure: SessionFailure): RefusedOpen;
  /** Granted, never connected (no work left): free at once. */
  unused(): void;
  /** The session ended; `closed` settles once the QUIT's reply came (or the line was dropped) and the socket is closed: true when the server answered the QUIT. */
  ended(closed: Promise<boolean>): void;
  /** The session waits for work: `end` asks it to quit. Returns the withdrawal of that offer. */
  idle(end: () => void): () => void;
  /** A rate sign from the conversation. */
  learn(kind: 'connections' | 'rate'): void;
}

export interface GateDeps {
  config: EngineConfig;
  counters: EngineCounters;
  clock: Clock;
  throttle: MxThrottle;
  /**
   * A server refused a session at the banner for its own total of sessions (Exim's daemon-wide
   * `smtp_accept_max`), not for ours on this address: the engine ends its idle sessions
   * (releaseIdle), which may be what fills that server.
   */
  serverFull?: (ip: string) => void;
  /** A session the server had counted is over and counted down: a server-wide slot may be free. */
  sessionClosed?: () => void;
}

interface Waiter {
  user: SlotUser;
  resolve: (granted: boolean) => void;
  reject: (err: Error) => void;
  detach: () => void;
}

interface Held {
  user: SlotUser;
  state: 'opening' | 'open' | 'closing' | 'free';
  permit?: () => void;
  /** Asked to end for a waiting name; counted in #yielded until its slot is free. */
  yielded: boolean;
  /** The session was established (closing: counted in #closingSessions). */
  established?: boolean;
}

interface IdleSession {
  held: Held;
  end: () => void;
}

export class AddressGate {
  readonly policy: LimitPolicy;
  #opening = 0;
  #open = 0;
  #closing = 0;
  /** Of #closing, the sessions that were established (the others: refused opens the server saw, cooling down). */
  #closingSessions = 0;
  readonly #waiters: Waiter[] = [];
  readonly #idle: IdleSession[] = [];
  /** Idle sessions asked to end whose slots are not free yet. */
  #yielded = 0;
  /** No new session before this (a back-off after a refusal). */
  #blockedUntil = 0;
  /** The first refusal at the banner of the streak going on (no session opened since), and its failure. */
  #refusingSince: number | undefined;
  #refusal: SessionFailure | undefined;
  /** After a back-off: one session at a time until one opens. */
  #trial = false;
  /** The back-off going on is for a server-wide refusal: any of our sessions ending may free its slot. */
  #serverWide = false;
  /** The address's limit before a server-wide refusal lowered it (while we held sessions there): given back when a session of ours ends. */
  #limitBeforeServerWide: number | undefined;
  #timer: ClockTimer | undefined;

  constructor(
    readonly ip: string,
    readonly deps: GateDeps,
  ) {
    this.policy = new LimitPolicy(deps.config, deps.counters);
  }

  get limit(): number {
    return this.policy.limit;
  }

  /** Slots the server may count now: opening, open, and closing until counted down. */
  get held(): number {
    return this.#opening + this.#open + this.#closing;
  }

  /** For tests and operators. */
  state(): { open: number; opening: number; closing: number; limit: number; waiting: number; blockedUntil: number } {
    return { open: this.#open, opening: this.#opening, closing: this.#closing, limit: this.policy.limit, waiting: this.#waiters.length, blockedUntil: this.#blockedUntil };
  }

  /**
   * A slot and the shared throttle's permit for it, in arrival order; undefined when the user no
   * longer wants one by the time it is its turn. Once `signal` is aborted the call never waits:
   * a slot free at once is taken, otherwise it rejects (a wait in progress is withdrawn).
   */
  async take(user: SlotUser, signal?: AbortSignal): Promise<Slot | undefined> {
    if (!(await this.#acquire(user, signal))) return undefined;
    const held: Held = { user, state: 'opening', yielded: false };
    try {
      held.permit = await this.deps.throttle.acquire(this.ip, signal);
    } catch (err) {
      this.#free(held);
      throw err;
    }
    if (!user.wants()) {
      // The work went to another session while the permit came.
      this.#free(held);
      return undefined;
    }
    return this.#slot(held);
  }

  #acquire(user: SlotUser, signal?: AbortSignal): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const onAbort = () => {
        const i = this.#waiters.indexOf(w);
        if (i < 0) return;
        this.#waiters.splice(i, 1);
        reject(permitWaitCancelled(this.ip, signal));
      };
      const w: Waiter = { user, resolve, reject, detach: () => signal?.removeEventListener('abort', onAbort) };
      this.#waiters.push(w);
      this.#grant();
      if (!this.#waiters.includes(w)) return;
      if (signal?.aborted) return onAbort();
      this.deps.counters.slotWaits++;
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#yield();
    });
  }

  #canGrant(now: number): boolean {
    if (now < this.#blockedUntil) return false;
    if (this.#trial) return this.held === 0;
    this.policy.grow(now);
    return this.held < this.policy.limit;
  }

  /** Grants free slots to the waiters, first come first served. */
  #grant(): void {
    const now = this.deps.clock.now();
    while (this.#waiters.length > 0 && this.#canGrant(now)) {
      const w = this.#waiters.shift()!;
      w.detach();
      if (!w.user.wants()) {
        w.resolve(false);
        continue;
      }
      this.#opening++;
      w.resolve(true);
    }
    if (this.#waiters.length > 0 && now < this.#blockedUntil && this.#timer === undefined) this.#wakeAt(this.#blockedUntil, now);
  }

  /**
   * A timer that grants again at `until`. Node fires a timer by the event loop's cached time, which
   * lags Date.now() by the turn's work: it can fire a few milliseconds before `until` by the clock
   * the gate reads, and #grant then arms it again for the rest (once missed, a waiter waited for ever).
   */
  #wakeAt(until: number, now: number): void {
    this.deps.clock.clearTimeout(this.#timer);
    this.#timer = this.deps.clock.setTimeout(() => {
      this.#timer = undefined;
      this.#grant();
    }, Math.max(1, until - now));
  }

  /** Names wait and the address is full: warm sessions of other names with nothing to do give their slots up. */
  #yield(): void {
    if (this.#trial || this.deps.clock.now() < this.#blockedUntil || this.#idle.length === 0) return;
    const wanting = this.#waiters.filter((w) => w.user.wants());
    let need = wanting.length - Math.max(0, this.policy.limit - this.held) - this.#yielded;
    for (const s of [...this.#idle]) {
      if (need <= 0) return;
      if (!wanting.some((w) => w.user !== s.held.user)) continue;
      this.#idle.splice(this.#idle.indexOf(s), 1);
      this.#askToEnd(s);
      need--;
    }
  }

  /** An idle session (already out of #idle) is asked to quit; its slot counts in #yielded until free. */
  #askToEnd(s: IdleSession): void {
    s.held.yielded = true;
    this.#yielded++;
    this.deps.counters.idleYields++;
    s.end();
  }

  /**
   * Ends every warm session of the address that is waiting for work (a server said it is full:
   * one of them may be what fills it).
   */
  releaseIdle(): void {
    for (const s of this.#idle.splice(0)) this.#askToEnd(s);
  }

  /**
   * A session of ours ended somewhere: if this address is backing off a server-wide refusal, that
   * may have been the slot it waits for, so the back-off ends now (the next open is still one at a
   * time, and a refusal backs off again); a limit such a refusal lowered grows by one. True while
   * that limit is still below what it was (the engine asks again at the next end).
   */
  retryNow(): boolean {
    const now = this.deps.clock.now();
    if (this.#limitBeforeServerWide !== undefined) {
      // The limit it lowered was the daemon's total, not ours on this address: one session more
      // for each one of ours that ends (one slot freed there), up to what it was.
      const before = this.#limitBeforeServerWide;
      this.policy.limit = Math.max(this.policy.limit, Math.min(before, this.held + 1));
      if (this.policy.limit >= before) this.#limitBeforeServerWide = undefined;
      this.#grant();
    }
    if (this.#serverWide && now < this.#blockedUntil) {
      this.#serverWide = false;
      this.#blockedUntil = now;
      this.deps.clock.clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#grant();
    }
    return this.#limitBeforeServerWide !== undefined;
  }

  /** The slot is free: its permit goes back, the next waiter gets it. */
  #free(held: Held): void {
    if (held.state === 'free') return;
    const counted = held.state === 'closing' && held.established === true;
    if (held.state === 'opening') this.#opening--;
    else if (held.state === 'open') this.#open--;
    else {
      this.#closing--;
      if (held.established) this.#closingSessions--;
    }
    held.state = 'free';
    if (held.yielded) this.#yielded--;
    held.permit?.();
    this.#grant();
    if (counted) this.deps.sessionClosed?.();
  }

  /**
   * Counted as closing until `closed` settles: at once after the server answered the QUIT (it has
   * counted the session down before its 221), slotCooldownMs later after any other end (the server
   * counts it down only once it reads the close).
   */
  #closeAfter(held: Held, closed: Promise<boolean>): void {
    if (held.state === 'opening') this.#opening--;
    else if (held.state === 'open') {
      this.#open--;
      held.established = true;
      this.#closingSessions++;
    } else return;
    held.state = 'closing';
    this.#closing++;
    // (Freed from a timer even at 0 ms: never inside the caller's turn, which may be granting.)
    const cooled = (answered: boolean) => void this.deps.clock.setTimeout(() => this.#free(held), answered ? 0 : this.deps.config.slotCooldownMs);
    closed.then(cooled, () => cooled(false));
  }

  /**
   * The address has refused every open at its banner for refusedWaitMs or longer (nothing of ours
   * got in since): the refusal, which recipients arriving now get at once instead of each waiting
   * its own refusedWaitMs behind the back-off (the gate keeps trying, and the first session that
   * opens ends the streak). A server that says 421 to everyone (down for maintenance, a block on
   * our address) costs the first recipients their wait, not every later request.
   */
  persistentRefusal(now: number): SessionFailure | undefined {
    if (this.#refusingSince === undefined || now - this.#refusingSince < this.deps.config.refusedWaitMs) return undefined;
    return this.#refusal;
  }

  #withdrawIdle(held: Held): void {
    const i = this.#idle.findIndex((s) => s.held === held);
    if (i >= 0) this.#idle.splice(i, 1);
  }

  #slot(held: Held): Slot {
    const { clock, counters } = this.deps;
    return {
      ip: this.ip,
      opened: () => {
        if (held.state !== 'opening') return;
        this.#opening--;
        this.#open++;
        held.state = 'open';
        this.#trial = false;
        this.#refusingSince = undefined;
        this.#refusal = undefined;
        this.#serverWide = false;
        this.policy.opened(this.#open);
        this.#grant();
      },
      refused: (failure) => {
        if (held.state !== 'opening') return { action: 'fail' };
        const now = clock.now();
        const atBanner = failure.phase === 'greeting' && failure.reply?.code === 421;
        if (atBanner) counters.bannerRefusals++;
        // Decided on our other sessions on the address (open, or ended and not yet counted down)
        // and opens under way; refused opens still cooling down say nothing about the cap.
        const serverWide = atBanner && SERVER_WIDE_CAP_TEXT.test(failure.reply?.text ?? '');
        const limitBefore = this.policy.limit;
        const decision = this.policy.refused(failure, { open: this.#open, closing: this.#closingSessions, opening: this.#opening - 1 }, now);
        if (serverWide && decision.action === 'wait' && this.policy.limit < limitBefore) this.#limitBeforeServerWide = Math.max(this.#limitBeforeServerWide ?? 0, limitBefore);
        if (decision.action === 'backoff') {
          this.#serverWide = serverWide;
          this.#refusingSince ??= now;
          this.#refusal = failure;
          this.#blockedUntil = Math.max(this.#blockedUntil, now + decision.delayMs);
          this.#trial = true;
          this.#wakeAt(this.#blockedUntil, now);
        }
        // A connection the server took (it answered) counts there until it has hung up: the
        // connector has closed the socket by now, so only the cool-down is left. Not one refused
        // for the server's own total: Exim's daemon answers it before it starts a process for it,
        // so there is nothing to count down.
        if (failure.phase === 'connect' || serverWide) this.#free(held);
        else this.#closeAfter(held, Promise.resolve(false));
        if (decision.action === 'backoff') {
          const users = new Set([held.user, ...this.#waiters.map((w) => w.user)]);
          for (const u of users) u.blocked(this.#blockedUntil, failure);
        }
        if (serverWide) this.deps.serverFull?.(this.ip);
        return decision;
      },
      unused: () => {
        if (held.state === 'opening') this.#free(held);
      },
      ended: (closed) => {
        this.#withdrawIdle(held);
        this.#closeAfter(held, closed);
      },
      idle: (end) => {
        if (held.state !== 'open') return () => {};
        const s: IdleSession = { held, end };
        this.#idle.push(s);
        this.#yield();
        return () => this.#withdrawIdle(held);
      },
      learn: (kind) => this.policy.learn(kind, this.#open + this.#closingSessions, clock.now()),
    };
  }
}
