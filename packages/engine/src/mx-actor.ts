// An MX actor owns the SMTP sessions to one MX host name (docs/decisions/smtp-engine.md).
// Recipients of every domain routed to the host wait in one queue (queue.ts); sessions take them
// in pipelined rounds, each run by the session driver (session-driver.ts) within a budget learnt
// for this host so the server's error and junk-command limits never bite, kept warm for `idleMs`
// and retired with a QUIT. Each session holds a slot of the gate of the address it connects to
// (address-gate.ts), shared with every other name on that address: how many sessions at once and
// what a refused open means are the address's; the budget and whether the host is down are the
// name's (limit-policy.ts). This file opens sessions, moves recipients and reports to their
// domain actors.

import { classifyRcpt, type SessionFailure, type SmtpConnector, type SmtpReply } from '@svc/verifier';
import type { SessionBudget } from '@svc/verifier';
import type { AddressGate, Slot, SlotUser } from './address-gate.ts';
import type { Clock, ClockTimer } from './clock.ts';
import { HostPolicy, type RefusedOpen } from './limit-policy.ts';
import { openAnother, SessionLoad } from './open-policy.ts';
import { Queue, type Entry } from './queue.ts';
import { driveSession, type SessionHost } from './session-driver.ts';
import type { EngineConfig, EngineCounters, RcptRequest, RcptSink } from './types.ts';

export interface MxActorDeps {
  smtp: SmtpConnector;
  config: EngineConfig;
  addresses: (host: string) => Promise<string[]>;
  /** The gate of a server address (one per address, shared by every MX name that resolves to it). */
  gate: (ip: string) => AddressGate;
  /** The domain actor of a request's domain (one that is gone answers into the void). */
  sinkOf: (domain: string) => RcptSink;
  /** The engine is closing: warm sessions end as soon as the queue is empty. */
  closing: () => boolean;
  /** Called when the actor has no session, no queue and nothing opening. */
  idle: () => void;
  /** Aborted when the engine closes: from then on a slot or permit is taken if one is free, never waited for. */
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
  /** Open sessions, by id, with the slot each holds at its address. */
  #sessions = new Map<number, Slot>();
  #opening = 0;
  #idleWaiters: Array<() => void> = [];
  /** The host is down: a timer for the end of its window, when one connection is tried again. */
  #retryTimer: ClockTimer | undefined;
  /**
   * No slot or permit (the engine is closing and none was free, or the throttle is closed): no
   * more opens while a session of ours can take the queue; with none, one more try, and the
   * recipients are answered if that is refused too.
   */
  #noPermit = false;
  /** The gate of the address this host's sessions went to last (its limit bounds our opens). */
  #gate: AddressGate | undefined;
  readonly policy: HostPolicy;
  /** The open sessions' errors and this host's rejection rate: whether one more session is worth opening (open-policy.ts). */
  readonly #load = new SessionLoad();
  /** What the session driver sees of this actor. */
  readonly #host: SessionHost;
  /** What the address gates see of this actor. */
  readonly #user: SlotUser;

  constructor(
    readonly host: string,
    readonly deps: MxActorDeps,
  ) {
    this.policy = new HostPolicy(deps.config, deps.counters);
    this.#host = {
      budget: this.policy.budget,
      mailFrom: deps.config.mailFrom,
      counters: deps.counters,
      now: () => deps.clock.monotonic(),
      take: (n, session) => this.queue.take(n, (e) => e.req.notSession !== session),
      waiting: () => this.queue.live(),
      waitForWork: (session) => this.#waitForWork(session),
      pump: () => this.#pump(),
      load: this.#load,
      answered: (entry, reply, session, viaMail) => this.#report(entry, (sink, id) => sink.answered(id, { reply, session, viaMail, interruptions: entry.interruptions })),
      smtputf8Unsupported: (entry) => this.#report(entry, (sink, id) => sink.smtputf8Unsupported(id)),
      requeue: (entry) => {
        deps.counters.requeuedForCap++;
        this.queue.unshift([entry]);
      },
      interrupted: (entry, failure, progress) => this.#requeueBroken(entry, failure, progress),
      learn: (e, session) => {
        if (e.type === 'throttle') this.#sessions.get(session)?.learn(e.kind);
        else this.policy.learn(e);
      },
    };
    this.#user = {
      // A slot is worth taking while more recipients wait than the open sessions will soon take
      // (the same measure as #pump's: two rounds' worth per session).
      // Asked for an open under way (counted in #opening): would it still be wanted without it?
      wants: () => this.#wantsAnother(Math.max(0, this.#opening - 1)),
      blocked: (until, failure) => this.#blocked(until, failure),
    };
  }

  /** Sessions allowed now: the limit of the host's server address (adaptive, at most config.maxConnectionsPerMx). */
  get limit(): number {
    return this.#gate?.limit ?? this.deps.config.maxConnectionsPerMx;
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
    // A host that is down: the next MX at once (RFC 5321 5.1); with none, a job's recipient waits
    // for the window's end and one more try (#pump). A synchronous request's (it has a deadline)
    // is answered at once: a caller waiting on an API request is not held up to hostDownMs for a
    // host that just refused every connection.
    if (down && (req.nextHost || this.deps.closing() || req.deadlineAt !== undefined)) {
      this.deps.sinkOf(req.domain).hostFailed(req.id, down);
      return;
    }
    // An address that has refused every open for refusedWaitMs (address-gate.ts): answered now,
    // but for one recipient at a time, which waits for the gate's next try (so one is made).
    const refusing = this.#gate?.persistentRefusal(this.deps.clock.now());
    if (refusing && this.#sessions.size === 0 && this.queue.live() > 0) {
      this.deps.sinkOf(req.domain).hostFailed(req.id, refusing);
      return;
    }
    const entry: Entry = { req, interruptions: req.interruptions, withdrawn: false, arrivedAt: this.deps.clock.now() };
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

  /** Sessions allowed to this host now: one while it proves it is up again after being down. */
  #limit(): number {
    this.#gate?.policy.grow(this.deps.clock.now());
    return this.policy.trial ? 1 : this.limit;
  }

  /** Wakes idle sessions and opens new ones while the open ones cannot take the queue (open-policy.ts). */
  #pump(): void {
    for (const w of this.#idleWaiters.splice(0)) w();
    if (this.#retryTimer) return;
    if (this.#noPermit && this.#sessions.size + this.#opening > 0) return;
    if (this.#waitWhileDown()) return;
    while (this.#wantsAnother(this.#opening)) {
      void this.#open();
      if (this.#noPermit) break;
    }
  }

  /**
   * Whether one more session is worth opening (open-policy.ts), counting `opening` opens under
   * way. The pump asks it with all of them; a slot granted to one of them asks it without that
   * one (SlotUser.wants): the same rule, or an open the pump wanted is given a slot the actor
   * then refuses, and the pump asks again at once, for ever, in microtasks.
   */
  #wantsAnother(opening: number): boolean {
    const { budget } = this.policy;
    return openAnother({
      queued: this.queue.live(),
      held: this.#sessions.size + opening,
      limit: this.#limit(),
      opening,
      errorsLeft: this.#load.errorsLeft(this.#sessions.keys(), budget.errors),
      budget: budget.errors,
      perRound: Math.min(budget.pipelineDepth, budget.rcptsPerTransaction),
      rejectRate: this.#load.rejectRate,
      roundsPerOpen: this.#load.roundsPerOpen(this.deps.clock.monotonic()),
    });
  }

  /**
   * The host is down and recipients wait: nothing opens until its window ends (a timer then
   * pumps). A session of ours still open there takes them meanwhile (one open failed, not the host).
   */
  #waitWhileDown(): boolean {
    const now = this.deps.clock.now();
    if (!this.policy.down(now) || this.queue.live() === 0 || this.#sessions.size > 0) return false;
    this.#retryTimer = this.deps.clock.setTimeout(() => {
      this.#retryTimer = undefined;
      this.#afterSession();
    }, this.policy.downUntil - now);
    return true;
  }

  #failHost(failure: SessionFailure): void {
    this.policy.markDown(failure, this.deps.clock.now());
    for (const entry of this.queue.drain()) this.#hostFailed(entry, failure);
  }

  /**
   * The gate of an address backs off: recipients that cannot wait until `until` are answered with
   * its refusal. One waits for a refusing address as long as its deadline allows, and at most
   * refusedWaitMs from when it came here (a job's recipients have no deadline).
   */
  #blocked(until: number, failure: SessionFailure): void {
    const wait = this.deps.config.refusedWaitMs;
    for (const entry of this.queue.entries()) if (until > Math.min(entry.req.deadlineAt ?? Infinity, entry.arrivedAt + wait)) this.#hostFailed(entry, failure);
  }

  // Every way out of #open ends in #afterSession: the actor's last step to idle must reach the
  // engine, or close() waits for ever. (An early return once missed it: a permit that came from
  // Redis after the work had gone to another session.)
  async #open(): Promise<void> {
    this.#opening++;
    const { smtp, config } = this.deps;
    let slot: Slot | undefined;
    let opened: Awaited<ReturnType<SmtpConnector['open']>> | undefined;
    let decision: RefusedOpen | undefined;
    let refused: unknown;
    try {
      const ips = await this.deps.addresses(this.host);
      if (ips.length === 0) this.#failHost({ phase: 'connect', kind: 'connection', detail: `MX host ${this.host} has no address` });
      // Every address of the host in turn while the connection itself fails (RFC 5321 5.1); a
      // server that answered and refused is not asked again on another address.
      for (const ip of ips) {
        const gate = this.deps.gate(ip);
        this.#gate = gate;
        try {
          slot = await gate.take(this.#user, this.deps.signal);
          this.#noPermit = false;
        } catch (err) {
          refused = err ?? new Error('refused');
          break;
        }
        if (!slot) {
          // No work left: it went elsewhere while we waited (an earlier address's refusal included: nothing to fail).
          opened = undefined;
          break;
        }
        opened = await smtp.open({ host: ip, servername: this.host, port: config.smtpPort, heloName: config.heloName, timeoutMs: config.smtpTimeoutMs });
        if (opened.ok) break;
        decision = slot.refused(opened.failure);
        slot = undefined;
        if (decision.action !== 'next') break;
      }
    } catch (err) {
      // A port that threw (a bug): nobody may be left waiting on this host for it.
      slot?.unused();
      slot = undefined;
      opened = undefined;
      this.#failHost({ phase: 'connect', kind: 'protocol', detail: `internal error: ${(err as Error)?.message ?? String(err)}` });
    } finally {
      this.#opening--;
    }
    if (refused !== undefined) return this.#withoutPermit(refused);
    if (!opened) {
      // No slot: the work went to our other sessions, or the host has no address. Not pumped
      // again from here while a session or another open of ours will (what changed nothing would
      // only be asked again); idle if nothing is left. But when this was the last thing in motion
      // and recipients still wait, pump: a gate whose limit came down asks each waiting open of
      // ours whether it is still wanted while counting the others as held, so two waiting opens
      // can each be refused for the other, and then nothing would ever open a session for the
      // queue (a job's recipients have no deadline: its message never finished).
      if (this.queue.live() > 0 && this.#sessions.size === 0 && this.#opening === 0) return this.#pump();
      if (!this.busy) this.deps.idle();
      return;
    }
    if (!opened.ok) {
      // 'wait' and 'backoff': the recipients wait at the gate for a slot ('backoff' answered
      // those that cannot wait so long). 'next' with no address left, or 'fail': the host is down.
      if (decision?.action === 'next' || decision?.action === 'fail') this.#failHost(opened.failure);
      return this.#afterSession();
    }
    const live = slot!;
    live.opened();
    this.policy.opened();
    this.deps.counters.sessionsOpened++;
    const id = this.deps.nextSessionId();
    this.#sessions.set(id, live);
    const session = opened.session;
    let how: 'quit' | 'close' = 'close';
    try {
      how = await driveSession(session, id, this.#host);
    } finally {
      // The slot stays taken until the server has counted the session down: QUIT's reply and the
      // socket's close, then the cool-down (the gate's). Our recipients need not wait for that.
      if (how === 'close') {
        session.destroy();
        live.ended(Promise.resolve(false));
      } else live.ended(session.quit());
      this.#sessions.delete(id);
      this.#afterSession();
    }
  }

  #afterSession(): void {
    if (this.queue.live() > 0) this.#pump();
    if (!this.busy) this.deps.idle();
  }

  /**
   * No slot or permit: none would come without a wait (the engine is closing) or the throttle is
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

  /** Waits up to idleMs for more recipients; false when none came, or when its address's slot is wanted by another MX name. */
  #waitForWork(session: number): Promise<boolean> {
    if (this.deps.closing() || this.deps.config.idleMs <= 0) return Promise.resolve(false);
    const { clock } = this.deps;
    return new Promise((resolve) => {
      let finished = false;
      let withdraw = () => {};
      const done = (more: boolean) => {
        if (finished) return;
        finished = true;
        clock.clearTimeout(timer);
        const i = this.#idleWaiters.indexOf(waiter);
        if (i >= 0) this.#idleWaiters.splice(i, 1);
        withdraw();
        resolve(more);
      };
      const waiter = () => done(true);
      const timer = clock.setTimeout(() => done(false), this.deps.config.idleMs);
      this.#idleWaiters.push(waiter);
      // Offered to the address's gate: another name waiting for a slot ends the wait (at once, when one waits already).
      const offer = this.#sessions.get(session)?.idle(() => done(false));
      if (offer) {
        if (finished) offer();
        else withdraw = offer;
      }
    });
  }

  /** Wakes warm sessions so they notice the engine is closing; a host that is down answers its waiting recipients now. */
  wake(): void {
    for (const w of this.#idleWaiters.splice(0)) w();
    const down = this.policy.down(this.deps.clock.now());
    if (down && this.#retryTimer) {
      this.deps.clock.clearTimeout(this.#retryTimer);
      this.#retryTimer = undefined;
      for (const entry of this.queue.drain()) this.#hostFailed(entry, down);
      this.#afterSession();
    }
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
