// An MX actor owns the SMTP sessions to one MX host (docs/decisions/smtp-engine.md).
// Recipients of every domain routed to the host wait in one queue (queue.ts); up to `limit`
// sessions take them in pipelined rounds, each run by the session driver (session-driver.ts)
// within a budget learnt for this host so the server's error and junk-command limits never bite,
// kept warm for `idleMs` and retired with a QUIT that nobody waits for. What the host allows (how
// many sessions, what a refusal means) is the limit policy's (limit-policy.ts); this file opens
// sessions, moves recipients and reports to their domain actors.

import { classifyRcpt, type SessionFailure, type SmtpConnector, type SmtpReply } from '@svc/verifier';
import type { SessionBudget } from '@svc/verifier';
import type { Clock, ClockTimer } from './clock.ts';
import { LimitPolicy } from './limit-policy.ts';
import { openAnother, SessionLoad } from './open-policy.ts';
import { Queue, type Entry } from './queue.ts';
import { driveSession, type SessionHost } from './session-driver.ts';
import type { MxThrottle } from './throttle.ts';
import type { EngineConfig, EngineCounters, RcptRequest, RcptSink } from './types.ts';

export interface MxActorDeps {
  smtp: SmtpConnector;
  throttle: MxThrottle;
  config: EngineConfig;
  addresses: (host: string) => Promise<string[]>;
  /** The domain actor of a request's domain (one that is gone answers into the void). */
  sinkOf: (domain: string) => RcptSink;
  /** The engine is closing: warm sessions end as soon as the queue is empty. */
  closing: () => boolean;
  /** Called when the actor has no session, no queue and nothing opening. */
  idle: () => void;
  /** Aborted when the engine closes: from then on a session permit is taken if one is free, never waited for. */
  signal?: AbortSignal;
  nextSessionId: () => number;
  counters: EngineCounters;
  clock: Clock;
}

/** A recipient whose sessions keep breaking under it is failed over after this many. */
const MAX_INTERRUPTIONS = 3;

export class MxActor {
  readonly queue = new Queue();
  /** Every request this actor holds (queued or in a session), by id: what a withdrawal marks. */
  #entries = new Map<number, Entry>();
  #sessions = new Set<number>();
  #opening = 0;
  #idleWaiters: Array<() => void> = [];
  #retryTimer: ClockTimer | undefined;
  /** Sessions whose QUIT is written and whose socket is not closed yet. */
  #closing = 0;
  /**
   * The throttle refused a permit (the engine is closing and none was free, or the throttle is
   * closed): no more opens while a session of ours can take the queue; with none, one more try,
   * and the recipients are answered if that is refused too.
   */
  #noPermit = false;
  readonly policy: LimitPolicy;
  /** The open sessions' errors and this host's rejection rate: whether one more session is worth opening (open-policy.ts). */
  readonly #load = new SessionLoad();
  /** What the session driver sees of this actor. */
  readonly #host: SessionHost;

  constructor(
    readonly host: string,
    readonly deps: MxActorDeps,
  ) {
    this.policy = new LimitPolicy(deps.config, deps.counters);
    this.#host = {
      budget: this.policy.budget,
      mailFrom: deps.config.mailFrom,
      counters: deps.counters,
      now: () => deps.clock.monotonic(),
      take: (n, session) => this.queue.take(n, (e) => e.req.notSession !== session),
      waiting: () => this.queue.live(),
      waitForWork: () => this.#waitForWork(),
      pump: () => this.#pump(),
      load: this.#load,
      answered: (entry, reply, session, viaMail) => this.#report(entry, (sink, id) => sink.answered(id, { reply, session, viaMail, interruptions: entry.interruptions })),
      smtputf8Unsupported: (entry) => this.#report(entry, (sink, id) => sink.smtputf8Unsupported(id)),
      requeue: (entry) => {
        deps.counters.requeuedForCap++;
        this.queue.unshift([entry]);
      },
      interrupted: (entry, failure, progress) => this.#requeueBroken(entry, failure, progress),
      learn: (e) => this.policy.learn(e, this.#sessions.size, deps.clock.now()),
    };
  }

  /** Sessions allowed now (adaptive, at most config.maxConnectionsPerMx). */
  get limit(): number {
    return this.policy.limit;
  }

  /** What a session may spend on this host, learnt from its replies. */
  get budget(): SessionBudget {
    return this.policy.budget;
  }

  get sessions(): number {
    return this.#sessions.size;
  }

  get busy(): boolean {
    return this.#sessions.size > 0 || this.#opening > 0 || this.queue.live() > 0 || this.#retryTimer !== undefined;
  }

  enqueue(req: RcptRequest): void {
    const down = this.policy.down(this.deps.clock.now());
    if (down) {
      this.deps.sinkOf(req.domain).hostFailed(req.id, down);
      return;
    }
    const entry: Entry = { req, interruptions: req.interruptions, withdrawn: false };
    this.#entries.set(req.id, entry);
    this.queue.push(entry);
    this.#pump();
  }

  /** Its domain actor no longer wants an answer (the recipient is answered, or past its deadline): skipped wherever it waits. */
  withdraw(id: number): void {
    const entry = this.#entries.get(id);
    if (!entry) return;
    entry.withdrawn = true;
    this.#entries.delete(id);
  }

  /** The one report about an entry to its domain actor: after it, the entry is no longer this actor's. */
  #report(entry: Entry, send: (sink: RcptSink, id: number) => void): void {
    if (entry.withdrawn) return;
    entry.withdrawn = true;
    this.#entries.delete(entry.req.id);
    send(this.deps.sinkOf(entry.req.domain), entry.req.id);
  }

  #hostFailed(entry: Entry, failure: SessionFailure): void {
    this.#report(entry, (sink, id) => sink.hostFailed(id, failure));
  }

  /** Wakes idle sessions and opens new ones while the open ones cannot take the queue (open-policy.ts). */
  #pump(): void {
    for (const w of this.#idleWaiters.splice(0)) w();
    this.policy.grow(this.deps.clock.now());
    if (this.#retryTimer) return;
    if (this.#noPermit && this.#sessions.size + this.#opening > 0) return;
    const { budget } = this.policy;
    while (
      openAnother({
        queued: this.queue.live(),
        held: this.policy.held(this.#sessions.size, this.#opening, this.#closing),
        limit: this.policy.limit,
        opening: this.#opening,
        errorsLeft: this.#load.errorsLeft(this.#sessions, budget.errors),
        budget: budget.errors,
        perRound: Math.min(budget.pipelineDepth, budget.rcptsPerTransaction),
        rejectRate: this.#load.rejectRate,
        roundsPerOpen: this.#load.roundsPerOpen(this.deps.clock.monotonic()),
      })
    ) {
      void this.#open();
      if (this.#noPermit) break;
    }
  }

  #failHost(failure: SessionFailure): void {
    this.policy.markDown(failure, this.deps.clock.now());
    for (const entry of this.queue.drain()) this.#hostFailed(entry, failure);
  }

  // Every way out of #open ends in #afterSession (or leaves a retry timer that calls it): the
  // actor's last step to idle must reach the engine, or close() waits for ever. (An early return
  // once missed it: a permit that came from Redis after the work had gone to another session.)
  async #open(): Promise<void> {
    this.#opening++;
    const { smtp, throttle, config } = this.deps;
    let release: (() => void) | undefined;
    let opened: Awaited<ReturnType<SmtpConnector['open']>> | undefined;
    let refused: unknown;
    try {
      try {
        release = await throttle.acquire(this.host, this.deps.signal);
        this.#noPermit = false;
      } catch (err) {
        refused = err ?? new Error('refused');
      }
      if (release && this.queue.live() > 0) {
        // (No work left: it went elsewhere while we waited for the permit.)
        const ips = await this.deps.addresses(this.host);
        if (ips.length === 0) this.#failHost({ phase: 'connect', kind: 'connection', detail: `MX host ${this.host} has no address` });
        // Every address of the host in turn while the connection itself fails (RFC 5321 5.1); a
        // server that answered and refused is not asked again on another address.
        else
          for (const ip of ips) {
            opened = await smtp.open({ host: ip, servername: this.host, port: config.smtpPort, heloName: config.heloName, timeoutMs: config.smtpTimeoutMs });
            if (opened.ok || opened.failure.phase !== 'connect') break;
          }
      }
    } catch (err) {
      // A port that threw (a bug): nobody may be left waiting on this host for it.
      this.#failHost({ phase: 'connect', kind: 'protocol', detail: `internal error: ${(err as Error)?.message ?? String(err)}` });
    } finally {
      this.#opening--;
      if (!opened?.ok) release?.();
    }
    if (refused !== undefined) return this.#withoutPermit(refused);
    if (!opened) return this.#afterSession();
    if (!opened.ok) {
      const decision = this.policy.refused(opened.failure, this.#sessions.size, this.#retryTimer !== undefined, this.deps.clock.now());
      switch (decision.action) {
        case 'wait':
          return this.#afterSession();
        case 'ignore':
          return;
        case 'retry':
          this.#retryTimer = this.deps.clock.setTimeout(() => {
            this.#retryTimer = undefined;
            this.#pump();
            this.#afterSession();
          }, decision.delayMs);
          return;
        case 'fail':
          this.#failHost(opened.failure);
          return this.#afterSession();
      }
    }
    this.deps.counters.sessionsOpened++;
    const id = this.deps.nextSessionId();
    this.#sessions.add(id);
    this.policy.opened(this.#sessions.size);
    const session = opened.session;
    let how: 'quit' | 'close' = 'close';
    try {
      how = await driveSession(session, id, this.#host);
    } finally {
      // The permit goes back now; the QUIT's reply is not waited for (a server past its soft
      // error limit would hold it a second).
      release!();
      this.policy.sessionEnded(this.deps.clock.now());
      if (how === 'close') session.destroy();
      else {
        this.#closing++;
        void session.quit().finally(() => {
          this.#closing--;
          if (this.policy.capSeen && this.queue.live() > 0) this.#pump();
        });
      }
      this.#sessions.delete(id);
      this.#afterSession();
    }
  }

  #afterSession(): void {
    if (this.queue.live() > 0) this.#pump();
    if (!this.busy) this.deps.idle();
  }

  /**
   * No permit: the throttle would not give one without a wait (the engine is closing) or is
   * closed. A session of ours still open takes the queue; with none (and none opening or about
   * to be retried), the recipients are answered now, so close() never waits for a permit.
   */
  #withoutPermit(err: unknown): void {
    this.#noPermit = true;
    if (this.#sessions.size === 0 && this.#opening === 0 && !this.#retryTimer) {
      const failure: SessionFailure = { phase: 'connect', kind: 'connection', detail: `no SMTP session permit for ${this.host}: ${(err as Error)?.message ?? String(err)}` };
      for (const entry of this.queue.drain()) this.#hostFailed(entry, failure);
    }
    this.#afterSession();
  }

  /** Waits up to idleMs for more recipients; false when none came. */
  #waitForWork(): Promise<boolean> {
    if (this.deps.closing() || this.deps.config.idleMs <= 0) return Promise.resolve(false);
    const { clock } = this.deps;
    return new Promise((resolve) => {
      const waiter = () => {
        clock.clearTimeout(timer);
        resolve(true);
      };
      const timer = clock.setTimeout(() => {
        const i = this.#idleWaiters.indexOf(waiter);
        if (i >= 0) this.#idleWaiters.splice(i, 1);
        resolve(false);
      }, this.deps.config.idleMs);
      this.#idleWaiters.push(waiter);
    });
  }

  /** Wakes warm sessions so they notice the engine is closing. */
  wake(): void {
    for (const w of this.#idleWaiters.splice(0)) w();
  }

  /** A recipient whose session ended under it: again here, unless that keeps happening or the host stalls. */
  #requeueBroken(entry: Entry, f: SessionFailure, progress: boolean): void {
    // A session that answered others before it ended (Postfix's 421 after its error limit, a
    // per-session recipient cap) is no sign against this recipient: it goes back without a count.
    if (!progress) entry.interruptions++;
    this.deps.counters.requeuedForClosing++;
    // A host that stops answering (a timeout) is not asked again for this recipient: the next
    // MX is, at once. A dropped line or a 421 is asked again on a new session, a few times.
    if (f.kind === 'timeout' || entry.interruptions >= MAX_INTERRUPTIONS) this.#hostFailed(entry, f);
    else this.queue.unshift([entry]);
  }
}

/** What a refused MAIL FROM says about the recipients behind it: never that they do not exist. */
export function mailRefusalClass(reply: SmtpReply) {
  const cls = classifyRcpt(reply);
  return cls === 'rejected' || cls === 'malformed' ? 'unclassified' : cls;
}
